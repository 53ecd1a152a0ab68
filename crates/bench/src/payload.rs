//! Values for `__VALUE__`: slices of one pool generated at start, so that every request carries
//! different bytes of a chosen length without generating them per request. Random letters
//! compress a little; `--text` pools are words drawn from a Zipf-distributed vocabulary, which
//! compress about as well as prose, for data sets whose size on disk should be realistic.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::template::Zipf;

/// Redis's largest bulk string.
const MAX_VALUE_SIZE: usize = 512 << 20;

/// Distinct words in a text pool; the most frequent ones are short, as in real text.
const VOCABULARY: u64 = 8192;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PayloadKind {
    Letters,
    Text,
}

/// Value lengths, uniform in `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueSize {
    pub min: usize,
    pub max: usize,
}

impl ValueSize {
    /// `128` or `1024-4096`.
    pub fn parse(text: &str) -> Result<ValueSize, String> {
        let bad = || format!("bad value size {text}: expected N or MIN-MAX");
        let (min, max) = match text.split_once('-') {
            Some((min, max)) => (
                min.parse().map_err(|_| bad())?,
                max.parse().map_err(|_| bad())?,
            ),
            None => {
                let n = text.parse().map_err(|_| bad())?;
                (n, n)
            }
        };
        if min > max {
            return Err(bad());
        }
        if max > MAX_VALUE_SIZE {
            return Err(format!("value size {max} is over {MAX_VALUE_SIZE} bytes"));
        }
        Ok(ValueSize { min, max })
    }
}

pub struct Payloads {
    pool: Vec<u8>,
    size: ValueSize,
}

impl Payloads {
    pub fn new(kind: PayloadKind, size: ValueSize, seed: u64) -> Payloads {
        let mut rng = SmallRng::seed_from_u64(seed);
        // Room for values of every length to start at many places.
        let len = size.max + (1 << 20);
        let pool = match kind {
            PayloadKind::Letters => (0..len).map(|_| rng.random_range(b'a'..=b'z')).collect(),
            PayloadKind::Text => text(&mut rng, len),
        };
        Payloads { pool, size }
    }

    /// A value at a random place in the pool with a random length in the configured range.
    pub fn pick(&self, rng: &mut impl Rng) -> &[u8] {
        let len = rng.random_range(self.size.min..=self.size.max);
        let start = rng.random_range(0..=self.pool.len() - len);
        &self.pool[start..start + len]
    }
}

fn text(rng: &mut SmallRng, len: usize) -> Vec<u8> {
    let words: Vec<Vec<u8>> = (0..VOCABULARY)
        .map(|rank| {
            let letters = 2 + (rank as f64).log2() as usize + rng.random_range(0..3);
            (0..letters)
                .map(|_| rng.random_range(b'a'..=b'z'))
                .collect()
        })
        .collect();
    let zipf = Zipf::new(VOCABULARY, 1.0);
    let mut out = Vec::with_capacity(len + 32);
    let mut sentence = 0;
    while out.len() < len {
        let word = &words[zipf.sample(rng) as usize - 1];
        if sentence == 0 {
            out.push(word[0].to_ascii_uppercase());
            out.extend_from_slice(&word[1..]);
        } else {
            out.extend_from_slice(word);
        }
        sentence += 1;
        if sentence > 6 && rng.random_range(0..8) == 0 {
            out.extend_from_slice(b". ");
            sentence = 0;
        } else {
            out.push(b' ');
        }
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(
            ValueSize::parse("128"),
            Ok(ValueSize { min: 128, max: 128 })
        );
        assert_eq!(
            ValueSize::parse("1024-4096"),
            Ok(ValueSize {
                min: 1024,
                max: 4096
            })
        );
        assert!(ValueSize::parse("4096-1024").is_err());
        assert!(ValueSize::parse("x").is_err());
        assert!(ValueSize::parse("1-1000000000").is_err());
    }

    #[test]
    fn picks_have_the_requested_lengths_and_vary() {
        let size = ValueSize {
            min: 1000,
            max: 2000,
        };
        let payloads = Payloads::new(PayloadKind::Text, size, 7);
        let mut rng = SmallRng::seed_from_u64(1);
        let picks: Vec<Vec<u8>> = (0..100).map(|_| payloads.pick(&mut rng).to_vec()).collect();
        assert!(picks.iter().all(|p| (1000..=2000).contains(&p.len())));
        assert!(picks.windows(2).any(|w| w[0] != w[1]));
        let text = &payloads.pool;
        let spaces = text.iter().filter(|&&b| b == b' ').count();
        assert!(
            spaces * 12 > text.len() && spaces * 3 < text.len(),
            "words of a few letters: {spaces} spaces in {}",
            text.len()
        );
    }
}
