//! A cache of metadata records in front of RocksDB.
//!
//! Every command reads its key's metadata first. For a key written often, RocksDB finds it in
//! the memtable, after a skiplist search that misses the CPU caches at almost every level:
//! with 1,000 bitmaps under TR.SETBIT, that search was 14% of the server's CPU. This cache
//! answers those reads from a hash table instead. It holds only records that were read and
//! found; writes update or drop what it holds, so it never shows a value older than RocksDB's.
//!
//! A read that misses fills the cache after it has read RocksDB, and a write may land in
//! between. Each shard therefore counts the writes it has seen, and a fill goes in only if
//! none came since the read began.

use parking_lot::Mutex;
use quick_cache::unsync::Cache;
use quick_cache::Weighter;

/// Records longer than this are not cached: they are rare, and would crowd out many small ones.
const VALUE_LIMIT: usize = 8 << 10;
/// Bytes of bookkeeping counted per entry besides its key and value.
const ENTRY_OVERHEAD: u64 = 64;
const SHARDS: usize = 32;

pub struct MetaCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: quick_cache::DefaultHashBuilder,
    capacity: u64,
}

struct Shard {
    entries: Cache<Vec<u8>, Vec<u8>, EntryWeight>,
    /// Writes that touched this shard so far.
    writes: u64,
    hits: u64,
    misses: u64,
}

#[derive(Clone)]
struct EntryWeight;

impl Weighter<Vec<u8>, Vec<u8>> for EntryWeight {
    fn weight(&self, key: &Vec<u8>, value: &Vec<u8>) -> u64 {
        (key.len() + value.len()) as u64 + ENTRY_OVERHEAD
    }
}

/// A read that missed, to be filled in with what RocksDB holds.
pub struct Miss {
    shard: usize,
    writes_seen: u64,
}

/// The cache's figures for INFO.
#[derive(Debug, Default, Clone, Copy)]
pub struct MetaCacheStats {
    pub usage: u64,
    pub capacity: u64,
    pub hits: u64,
    pub misses: u64,
}

impl MetaCache {
    /// A cache of at most `capacity` bytes; `None` when that is 0.
    pub fn new(capacity: usize) -> Option<MetaCache> {
        if capacity == 0 {
            return None;
        }
        let per_shard = (capacity / SHARDS).max(1) as u64;
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    entries: Cache::with_weighter(
                        (per_shard / 256).max(16) as usize,
                        per_shard,
                        EntryWeight,
                    ),
                    writes: 0,
                    hits: 0,
                    misses: 0,
                })
            })
            .collect();
        Some(MetaCache {
            shards,
            hasher: Default::default(),
            capacity: capacity as u64,
        })
    }

    fn shard_of(&self, key: &[u8]) -> usize {
        self.hasher.hash_one(key) as usize % SHARDS
    }

    /// The cached record of `key`, or a [`Miss`] to hand to [`MetaCache::fill`] after reading
    /// RocksDB.
    pub fn get(&self, key: &[u8]) -> Result<Vec<u8>, Miss> {
        let index = self.shard_of(key);
        let mut shard = self.shards[index].lock();
        if let Some(value) = shard.entries.get(key).cloned() {
            shard.hits += 1;
            return Ok(value);
        }
        shard.misses += 1;
        Err(Miss {
            shard: index,
            writes_seen: shard.writes,
        })
    }

    /// Caches what a read that missed found, unless a write came to the shard meanwhile.
    pub fn fill(&self, miss: Miss, key: &[u8], value: &[u8]) {
        if value.len() > VALUE_LIMIT {
            return;
        }
        let mut shard = self.shards[miss.shard].lock();
        if shard.writes == miss.writes_seen {
            shard.entries.insert(key.to_vec(), value.to_vec());
        }
    }

    /// Notes a written record: `Some(value)` for a put, `None` for a delete or any other
    /// change. A cached record takes the new value; one not cached stays out.
    pub fn written(&self, key: &[u8], value: Option<Vec<u8>>) {
        let mut shard = self.shards[self.shard_of(key)].lock();
        shard.writes += 1;
        let Some(mut cached) = shard.entries.peek_mut(key) else {
            return;
        };
        match value {
            // In place: the cache re-weighs the entry when `cached` drops.
            Some(value) if value.len() <= VALUE_LIMIT => *cached = value,
            _ => {
                drop(cached);
                shard.entries.remove(key);
            }
        }
    }

    /// Drops everything, for writes that change records by range.
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.writes += 1;
            shard.entries.clear();
        }
    }

    pub fn stats(&self) -> MetaCacheStats {
        let mut stats = MetaCacheStats {
            capacity: self.capacity,
            ..Default::default()
        };
        for shard in self.shards.iter() {
            let shard = shard.lock();
            stats.usage += shard.entries.weight();
            stats.hits += shard.hits;
            stats.misses += shard.misses;
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> MetaCache {
        MetaCache::new(1 << 20).expect("a cache")
    }

    fn read(cache: &MetaCache, key: &[u8], stored: &[u8]) -> Vec<u8> {
        match cache.get(key) {
            Ok(value) => value,
            Err(miss) => {
                cache.fill(miss, key, stored);
                stored.to_vec()
            }
        }
    }

    #[test]
    fn reads_fill_and_writes_update_what_is_cached() {
        let cache = cache();
        assert_eq!(read(&cache, b"k", b"v1"), b"v1");
        assert_eq!(cache.get(b"k").ok(), Some(b"v1".to_vec()));
        let usage = cache.stats().usage;
        cache.written(b"k", Some(b"v2, longer".to_vec()));
        assert_eq!(cache.get(b"k").ok(), Some(b"v2, longer".to_vec()));
        assert_eq!(cache.stats().usage, usage + 8, "the entry is re-weighed");
        cache.written(b"k", None);
        assert!(cache.get(b"k").is_err());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (2, 2));
    }

    #[test]
    fn writes_do_not_bring_records_in() {
        let cache = cache();
        cache.written(b"k", Some(b"v".to_vec()));
        assert!(cache.get(b"k").is_err());
    }

    #[test]
    fn a_fill_after_a_concurrent_write_is_dropped() {
        let cache = cache();
        let Err(miss) = cache.get(b"k") else {
            panic!("an empty cache misses");
        };
        // The read saw the old record; a write replaced it before the read could fill it in.
        cache.written(b"k", Some(b"new".to_vec()));
        cache.fill(miss, b"k", b"old");
        assert!(
            cache.get(b"k").is_err(),
            "the stale record must not be cached"
        );
    }

    #[test]
    fn clear_empties_every_shard_and_fences_reads_in_flight() {
        let cache = cache();
        let keys: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
        for key in &keys {
            read(&cache, key, b"v");
        }
        let Err(miss) = cache.get(b"late") else {
            panic!("not cached yet");
        };
        cache.clear();
        cache.fill(miss, b"late", b"v");
        assert!(keys.iter().all(|key| cache.get(key).is_err()));
        assert!(cache.get(b"late").is_err());
        assert_eq!(cache.stats().usage, 0);
    }

    #[test]
    fn large_records_and_a_zero_capacity_are_not_cached() {
        let cache = cache();
        let large = vec![0; VALUE_LIMIT + 1];
        assert_eq!(read(&cache, b"big", &large), large);
        assert!(cache.get(b"big").is_err());
        assert!(MetaCache::new(0).is_none());
    }

    #[test]
    fn usage_stays_within_capacity() {
        let cache = MetaCache::new(64 << 10).expect("a cache");
        for i in 0..10_000u32 {
            read(&cache, &i.to_be_bytes(), &[1; 100]);
        }
        let stats = cache.stats();
        assert!(stats.usage <= stats.capacity, "{stats:?}");
        assert!(stats.usage > 0);
    }
}
