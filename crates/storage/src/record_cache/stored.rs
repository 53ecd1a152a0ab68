//! How the record cache keeps a record: as it is, or LZ4-compressed against a dictionary of
//! records it saw first, so that its memory holds more records than their size. A dictionary
//! matters because records are short: LZ4 finds little to refer back to within one record of a
//! few KB, and much in 64 KB of others like it.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

/// Shorter records are kept as they are: a few bytes saved would not pay for decompression.
const COMPRESS_FROM: usize = 256;
/// Bytes of records that make up the dictionary; LZ4 refers back at most 64 KB.
const DICTIONARY_BYTES: usize = 64 << 10;

/// A cached record.
#[derive(Clone)]
pub(super) enum Stored {
    Plain(Vec<u8>),
    /// `len` bytes once decompressed against `dictionary`. Shared, so that a hit copies it
    /// out of its shard's lock without copying its bytes.
    Compressed {
        bytes: Arc<[u8]>,
        len: u32,
        dictionary: Arc<[u8]>,
    },
}

impl Stored {
    /// Bytes it takes in memory.
    pub fn size(&self) -> usize {
        match self {
            Stored::Plain(value) => value.len(),
            Stored::Compressed { bytes, .. } => bytes.len(),
        }
    }

    /// The record; `None` if its compressed bytes do not decompress (they always do: they are
    /// this process's own).
    pub fn record(&self) -> Option<Vec<u8>> {
        match self {
            Stored::Plain(value) => Some(value.clone()),
            Stored::Compressed {
                bytes,
                len,
                dictionary,
            } => lz4_flex::block::decompress_with_dict(bytes, *len as usize, dictionary)
                .ok()
                .filter(|record| record.len() == *len as usize),
        }
    }
}

/// Turns records into what the cache keeps.
pub(super) struct Compressor {
    enabled: bool,
    /// Set once enough records were gathered; the cache compresses with none until then.
    dictionary: OnceLock<Arc<[u8]>>,
    gathered: Mutex<Vec<u8>>,
    none: Arc<[u8]>,
}

impl Compressor {
    pub fn new(enabled: bool) -> Compressor {
        Compressor {
            enabled,
            dictionary: OnceLock::new(),
            gathered: Mutex::new(Vec::new()),
            none: Arc::from(Vec::new()),
        }
    }

    /// Whether a record this long would be compressed.
    pub fn compresses(&self, len: usize) -> bool {
        self.enabled && (COMPRESS_FROM..=u32::MAX as usize).contains(&len)
    }

    /// What to keep of `record`: compressed if that saves at least an eighth of it.
    pub fn store(&self, record: Vec<u8>) -> Stored {
        if !self.compresses(record.len()) {
            return Stored::Plain(record);
        }
        let dictionary = self.dictionary(&record);
        let bytes = lz4_flex::block::compress_with_dict(&record, &dictionary);
        if bytes.len() > record.len() - record.len() / 8 {
            return Stored::Plain(record);
        }
        Stored::Compressed {
            bytes: Arc::from(bytes),
            len: record.len() as u32,
            dictionary,
        }
    }

    /// The dictionary, gathering `record` into it while there is none.
    fn dictionary(&self, record: &[u8]) -> Arc<[u8]> {
        if let Some(dictionary) = self.dictionary.get() {
            return dictionary.clone();
        }
        let mut gathered = self.gathered.lock();
        if let Some(dictionary) = self.dictionary.get() {
            return dictionary.clone();
        }
        let room = DICTIONARY_BYTES.saturating_sub(gathered.len());
        gathered.extend_from_slice(&record[..record.len().min(room)]);
        if gathered.len() < DICTIONARY_BYTES {
            return self.none.clone();
        }
        let full = Arc::from(std::mem::take(&mut *gathered));
        self.dictionary.get_or_init(|| full).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Words of a vocabulary of 256, each of 3-8 letters: little to refer back to within one
    /// record of 1 KB, much across records.
    fn text(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut out = Vec::new();
        while out.len() < len {
            let mut word = next(&mut state) % 256 + 1;
            let letters = 3 + word % 6;
            for _ in 0..letters {
                word = word
                    .wrapping_mul(0x5851_F42D_4C95_7F2D)
                    .wrapping_add(0x14057B7E);
                out.push(b'a' + (word >> 59) as u8 % 26);
            }
            out.push(b' ');
        }
        out.truncate(len);
        out
    }

    #[test]
    fn records_come_back_as_they_were() {
        let compressor = Compressor::new(true);
        for seed in 0..100 {
            let record = text(seed, 100 + seed as usize * 40);
            let stored = compressor.store(record.clone());
            assert_eq!(stored.record(), Some(record));
        }
        assert!(
            compressor.dictionary.get().is_some(),
            "the dictionary is built"
        );
    }

    #[test]
    fn compressible_records_shrink_and_the_rest_stay_plain() {
        let compressor = Compressor::new(true);
        let stored = compressor.store(text(1, 4000));
        assert!(matches!(stored, Stored::Compressed { .. }));
        assert!(stored.size() < 3200, "{}", stored.size());
        let short = compressor.store(text(2, COMPRESS_FROM - 1));
        assert!(matches!(short, Stored::Plain(_)));
        let mut state = 7;
        let random: Vec<u8> = (0..4000).map(|_| next(&mut state) as u8).collect();
        let stored = compressor.store(random.clone());
        assert!(matches!(stored, Stored::Plain(_)), "nothing to gain");
        assert_eq!(stored.record(), Some(random));
        let off = Compressor::new(false);
        assert!(matches!(off.store(text(1, 4000)), Stored::Plain(_)));
    }

    #[test]
    fn the_dictionary_helps_short_records() {
        let compressor = Compressor::new(true);
        let alone: usize = (0..50)
            .map(|s| compressor.store(text(s, 1000)).size())
            .sum();
        for seed in 50..200 {
            compressor.store(text(seed, 1000));
        }
        assert!(compressor.dictionary.get().is_some());
        let with: usize = (200..250)
            .map(|s| compressor.store(text(s, 1000)).size())
            .sum();
        assert!(with < alone * 3 / 4, "{with} against {alone}");
    }
}
