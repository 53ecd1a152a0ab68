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

/// Value lengths in `min..=max`: uniform, or, with a `mean`, more of the short ones, as
/// articles' lengths are (a truncated exponential over the range with that mean).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueSize {
    pub min: usize,
    pub max: usize,
    pub mean: Option<usize>,
}

impl ValueSize {
    /// `128`, `1024-4096`, or `1024-8192:2867` (a mean).
    pub fn parse(text: &str) -> Result<ValueSize, String> {
        let bad = || format!("bad value size {text}: expected N, MIN-MAX or MIN-MAX:MEAN");
        let (range, mean) = match text.split_once(':') {
            Some((range, mean)) => (range, Some(mean.parse().map_err(|_| bad())?)),
            None => (text, None),
        };
        let (min, max) = match range.split_once('-') {
            Some((min, max)) => (
                min.parse().map_err(|_| bad())?,
                max.parse().map_err(|_| bad())?,
            ),
            None => {
                let n = range.parse().map_err(|_| bad())?;
                (n, n)
            }
        };
        if min > max || mean.is_some_and(|m| m <= min || m >= (min + max) / 2) {
            return Err(bad());
        }
        if max > MAX_VALUE_SIZE {
            return Err(format!("value size {max} is over {MAX_VALUE_SIZE} bytes"));
        }
        Ok(ValueSize { min, max, mean })
    }

    /// The rate of the exponential whose truncation to the range has the asked mean.
    fn rate(&self) -> Option<f64> {
        let width = (self.max - self.min) as f64;
        let target = self.mean? as f64 - self.min as f64;
        // The truncated mean falls from width/2 towards 0 as the rate grows.
        let truncated_mean = |rate: f64| 1.0 / rate - width / ((rate * width).exp() - 1.0);
        let (mut low, mut high): (f64, f64) = (1e-12, 1e3);
        for _ in 0..200 {
            let mid = (low * high).sqrt();
            if truncated_mean(mid) > target {
                low = mid;
            } else {
                high = mid;
            }
        }
        Some(low)
    }
}

pub struct Payloads {
    pool: Vec<u8>,
    size: ValueSize,
    rate: Option<f64>,
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
        Payloads {
            pool,
            size,
            rate: size.rate(),
        }
    }

    /// A value at a random place in the pool with a random length in the configured range.
    pub fn pick(&self, rng: &mut impl Rng) -> &[u8] {
        let (min, max) = (self.size.min, self.size.max);
        let len = match self.rate {
            // The inverse of the truncated exponential's distribution function.
            Some(rate) => {
                let width = (max - min) as f64;
                let u: f64 = rng.random();
                let x = -(1.0 - u * (1.0 - (-rate * width).exp())).ln() / rate;
                (min + x as usize).min(max)
            }
            None => rng.random_range(min..=max),
        };
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
            Ok(ValueSize {
                min: 128,
                max: 128,
                mean: None
            })
        );
        assert_eq!(
            ValueSize::parse("1024-4096"),
            Ok(ValueSize {
                min: 1024,
                max: 4096,
                mean: None
            })
        );
        assert_eq!(
            ValueSize::parse("1024-8192:2867").map(|s| s.mean),
            Ok(Some(2867))
        );
        assert!(ValueSize::parse("1024-8192:5000").is_err());
        assert!(ValueSize::parse("4096-1024").is_err());
        assert!(ValueSize::parse("x").is_err());
        assert!(ValueSize::parse("1-1000000000").is_err());
    }

    #[test]
    fn picks_have_the_requested_lengths_and_vary() {
        let size = ValueSize {
            min: 1000,
            max: 2000,
            mean: None,
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

    #[test]
    fn a_mean_skews_the_lengths_to_the_short_end() {
        let size = ValueSize::parse("1024-8192:2867").expect("parses");
        let payloads = Payloads::new(PayloadKind::Letters, size, 7);
        let mut rng = SmallRng::seed_from_u64(1);
        let lengths: Vec<usize> = (0..20000).map(|_| payloads.pick(&mut rng).len()).collect();
        let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
        assert!((2800.0..2950.0).contains(&mean), "mean {mean}");
        assert!(lengths.iter().all(|l| (1024..=8192).contains(l)));
        assert!(lengths.iter().any(|&l| l > 7000));
    }
}
