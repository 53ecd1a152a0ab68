//! A cache of one column family's records in front of RocksDB.
//!
//! Every command reads its key's metadata first, and commands on large collections and
//! fragmented strings read their records in the data family. For a record written often,
//! RocksDB finds it in the memtable, after a skiplist search that misses the CPU caches at
//! almost every level: with 1,000 bitmaps under TR.SETBIT, that search was 14% of the server's
//! CPU. This cache answers those reads from a hash table instead. It holds records that were
//! read and found, and those the engine chooses to cache as they are written; writes update,
//! patch or drop what it holds, so it never shows a value older than RocksDB's.
//!
//! A write takes the records it changes out of the cache before it writes RocksDB and puts the
//! new values back after, so a record is cached only while no write to it is under way: a
//! reader never finds an older value here than RocksDB shows. A read of several keys looks them
//! up shard by shard, reads what it did not find from RocksDB, and then asks
//! [`RecordCache::still_current`] whether what it found here is still one state of the
//! database, with what it read there.
//!
//! A read that misses fills the cache after it has read RocksDB, and a write may land in
//! between. Each shard therefore counts the writes it has seen, and a fill goes in only if
//! none came since the read began.
//!
//! Records of a few hundred bytes and more are kept compressed ([`stored`]) once a shard is a
//! quarter full: a small hot set costs no decompression, and a larger one fits compressed.

mod stored;

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use quick_cache::unsync::Cache;
use quick_cache::Weighter;

use stored::{Compressor, Stored};

/// Records longer than this are not cached: they are rare, and would crowd out many small ones.
const VALUE_LIMIT: usize = 8 << 10;
/// Bytes of bookkeeping counted per entry besides its key and value.
const ENTRY_OVERHEAD: u64 = 64;
const SHARDS: usize = 32;
const _: () = assert!(
    SHARDS <= u32::BITS as usize,
    "CachedMany keeps a bit per shard"
);
/// One batched read in this many may evict records to fill the cache.
const EVICTING_BATCH_EVERY: u64 = 16;

pub struct RecordCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: quick_cache::DefaultHashBuilder,
    capacity: u64,
    /// Batched reads that filled the cache so far.
    batches: AtomicU64,
    compressor: Compressor,
}

struct Shard {
    entries: Cache<Vec<u8>, Stored, EntryWeight>,
    /// Writes that touched this shard so far.
    writes: u64,
    /// Writes between [`RecordCache::withdraw`] and [`RecordCache::written`]: no read fills the
    /// shard meanwhile, as it may have read RocksDB before or after the write landed.
    in_flight: u32,
    hits: u64,
    misses: u64,
}

impl Shard {
    /// Whether records coming in are kept compressed: once the shard is a quarter full.
    fn is_filling(&self) -> bool {
        self.entries.weight() * 4 >= self.entries.capacity()
    }
}

#[derive(Clone)]
struct EntryWeight;

impl Weighter<Vec<u8>, Stored> for EntryWeight {
    fn weight(&self, key: &Vec<u8>, value: &Stored) -> u64 {
        entry_weight(key, value)
    }
}

fn entry_weight(key: &[u8], value: &Stored) -> u64 {
    (key.len() + value.size()) as u64 + ENTRY_OVERHEAD
}

/// What a read of several keys found in the cache.
pub struct CachedMany {
    /// Per key, its cached record.
    pub values: Vec<Option<Vec<u8>>>,
    /// Per key not cached, in order, its miss.
    pub misses: Vec<Miss>,
    /// The shards that answered, one bit each.
    hit_shards: u32,
    /// Per shard, the writes it had seen at the lookup.
    writes_seen: [u64; SHARDS],
}

/// A read that missed, to be filled in with what RocksDB holds.
pub struct Miss {
    shard: usize,
    writes_seen: u64,
}

/// The cache's figures for INFO.
#[derive(Debug, Default, Clone, Copy)]
pub struct RecordCacheStats {
    pub usage: u64,
    pub capacity: u64,
    pub hits: u64,
    pub misses: u64,
}

impl RecordCache {
    /// A cache of at most `capacity` bytes, which keeps records `compressed` if asked;
    /// `None` when that is 0.
    pub fn new(capacity: usize, compressed: bool) -> Option<RecordCache> {
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
                    in_flight: 0,
                    hits: 0,
                    misses: 0,
                })
            })
            .collect();
        Some(RecordCache {
            shards,
            hasher: Default::default(),
            capacity: capacity as u64,
            batches: AtomicU64::new(0),
            compressor: Compressor::new(compressed),
        })
    }

    fn shard_of(&self, key: &[u8]) -> usize {
        self.hasher.hash_one(key) as usize % SHARDS
    }

    /// The cached record of `key`, or a [`Miss`] to hand to [`RecordCache::fill`] after reading
    /// RocksDB.
    pub fn get(&self, key: &[u8]) -> Result<Vec<u8>, Miss> {
        let index = self.shard_of(key);
        let stored = {
            let mut shard = self.shards[index].lock();
            match shard.entries.get(key).cloned() {
                Some(stored) => {
                    shard.hits += 1;
                    stored
                }
                None => {
                    shard.misses += 1;
                    return Err(Miss {
                        shard: index,
                        writes_seen: shard.writes,
                    });
                }
            }
        };
        // Decompressed out of the lock. A record that would not decompress is read from
        // RocksDB and not filled in again (no shard ever counts that many writes).
        stored.record().ok_or(Miss {
            shard: index,
            writes_seen: u64::MAX,
        })
    }

    /// What the cache holds of `keys`: a value per key it holds, and a [`Miss`] per key it
    /// does not. Each shard is locked once, for all of its keys, and never two at once (two
    /// readers of a hundred keys each used to queue for all of them); the values found are one
    /// state of the database if [`RecordCache::still_current`] says so afterwards.
    pub fn get_many(&self, keys: &[Vec<u8>]) -> CachedMany {
        let shard_of: Vec<u8> = keys.iter().map(|key| self.shard_of(key) as u8).collect();
        // The keys' positions grouped by shard (a counting sort).
        let mut starts = [0usize; SHARDS + 1];
        for &index in &shard_of {
            starts[index as usize + 1] += 1;
        }
        for index in 0..SHARDS {
            starts[index + 1] += starts[index];
        }
        let mut next = starts;
        let mut by_shard = vec![0usize; keys.len()];
        for (at, &index) in shard_of.iter().enumerate() {
            by_shard[next[index as usize]] = at;
            next[index as usize] += 1;
        }
        let mut stored: Vec<Option<Stored>> = vec![None; keys.len()];
        let mut writes_seen = [0u64; SHARDS];
        let mut hit_shards = 0u32;
        for index in 0..SHARDS {
            let positions = &by_shard[starts[index]..starts[index + 1]];
            if positions.is_empty() {
                continue;
            }
            let mut shard = self.shards[index].lock();
            writes_seen[index] = shard.writes;
            for &at in positions {
                stored[at] = shard.entries.get(&keys[at]).cloned();
                if stored[at].is_some() {
                    shard.hits += 1;
                    hit_shards |= 1 << index;
                } else {
                    shard.misses += 1;
                }
            }
        }
        // Decompressed out of the locks; one that would not decompress is a miss.
        let values: Vec<Option<Vec<u8>>> = stored
            .iter()
            .map(|stored| stored.as_ref().and_then(Stored::record))
            .collect();
        let misses = values
            .iter()
            .zip(&shard_of)
            .filter(|(value, _)| value.is_none())
            .map(|(_, &index)| Miss {
                shard: index as usize,
                writes_seen: writes_seen[index as usize],
            })
            .collect();
        CachedMany {
            values,
            misses,
            hit_shards,
            writes_seen,
        }
    }

    /// Whether no write has come to a shard that answered part of `found` since its lookup.
    /// Then each value found was what RocksDB held from its lookup until this check, and as
    /// every lookup came before every check, all of them at once at the first check. A write
    /// withdraws its records before it writes RocksDB and puts them back after, so one that
    /// changed a cached key shows here, and one under way during a lookup had its keys among
    /// the misses.
    pub fn still_current(&self, found: &CachedMany) -> bool {
        (0..SHARDS)
            .filter(|index| found.hit_shards & (1 << index) != 0)
            .all(|index| self.shards[index].lock().writes == found.writes_seen[index])
    }

    /// Caches what a read that missed found, unless a write came to the shard meanwhile.
    pub fn fill(&self, miss: Miss, key: &[u8], value: &[u8]) {
        self.fill_one(miss, key, value, true);
    }

    /// Caches what a batched read found of the keys it missed. For keys drawn from more than
    /// the cache holds, evicting for every batch only churned the cache: under MGETs of 32
    /// keys from 200,000 that churn was a fifth of the server's CPU. Batches fill spare room;
    /// one in [`EVICTING_BATCH_EVERY`] may evict, so that a new set of keys read only in
    /// batches still comes in over time.
    pub fn fill_batch<'k>(
        &self,
        misses: Vec<Miss>,
        keys: impl Iterator<Item = &'k Vec<u8>>,
        values: &[Option<Vec<u8>>],
    ) {
        let evict = self.batches.fetch_add(1, Ordering::Relaxed) % EVICTING_BATCH_EVERY
            == EVICTING_BATCH_EVERY - 1;
        for ((miss, key), value) in misses.into_iter().zip(keys).zip(values) {
            if let Some(value) = value {
                self.fill_one(miss, key, value, evict);
            }
        }
    }

    fn fill_one(&self, miss: Miss, key: &[u8], value: &[u8], evict: bool) {
        if value.len() > VALUE_LIMIT {
            return;
        }
        // Compressing a record the shard would refuse anyway is work thrown away.
        let (refused, filling) = {
            let shard = self.shards[miss.shard].lock();
            let refused = shard.writes != miss.writes_seen
                || shard.in_flight != 0
                || !(evict || shard.entries.weight() < shard.entries.capacity());
            (refused, shard.is_filling())
        };
        if refused {
            return;
        }
        let stored = self.store(value.to_vec(), filling);
        let mut shard = self.shards[miss.shard].lock();
        let fits =
            || shard.entries.weight() + entry_weight(key, &stored) <= shard.entries.capacity();
        if shard.writes == miss.writes_seen && shard.in_flight == 0 && (evict || fits()) {
            shard.entries.insert(key.to_vec(), stored);
        }
    }

    /// What a shard would keep of `record`: compressed if the shard is `filling`. It is
    /// compressed out of the shard's lock, even if it then does not go in.
    fn store(&self, record: Vec<u8>, filling: bool) -> Stored {
        if filling {
            self.compressor.store(record)
        } else {
            Stored::Plain(record)
        }
    }

    /// Takes out the record of `key` before a write changes it; returns it if it was cached
    /// (a patch applies to it), for [`RecordCache::written`]. No read fills the shard until
    /// then. Two writes of one record never overlap: writers hold the key's lock, and counters
    /// are only ever dropped.
    pub fn withdraw(&self, key: &[u8]) -> Option<Vec<u8>> {
        let removed = {
            let mut shard = self.shards[self.shard_of(key)].lock();
            shard.writes += 1;
            shard.in_flight += 1;
            shard.entries.remove(key)
        };
        removed.and_then(|(_, stored)| stored.record())
    }

    /// Notes a written record, [withdrawn](RecordCache::withdraw) before the write: `Some(value)`
    /// for a put, `None` for a delete or any other change, or a failed write. The new value goes
    /// in if `cache_it` (say, the record was cached); otherwise the record stays out, even if an
    /// earlier op of the same batch put it back.
    pub fn written(&self, key: &[u8], value: Option<Vec<u8>>, cache_it: bool) {
        let index = self.shard_of(key);
        let stored = match value {
            Some(value) if cache_it && value.len() <= VALUE_LIMIT => {
                let filling = self.compressor.compresses(value.len())
                    && self.shards[index].lock().is_filling();
                Some(self.store(value, filling))
            }
            _ => None,
        };
        let mut shard = self.shards[index].lock();
        shard.writes += 1;
        shard.in_flight -= 1;
        match stored {
            Some(stored) => {
                shard.entries.insert(key.to_vec(), stored);
            }
            None => {
                shard.entries.remove(key);
            }
        }
    }

    /// [`RecordCache::withdraw`] for a write that changes records by range: drops everything.
    pub fn withdraw_all(&self) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.writes += 1;
            shard.in_flight += 1;
            shard.entries.clear();
        }
    }

    /// [`RecordCache::written`] for a write that [withdrew all](RecordCache::withdraw_all); drops
    /// what earlier ops of the same batch put back, as the range may have deleted it.
    pub fn written_all(&self) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.writes += 1;
            shard.in_flight -= 1;
            shard.entries.clear();
        }
    }

    pub fn stats(&self) -> RecordCacheStats {
        let mut stats = RecordCacheStats {
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

    fn cache() -> RecordCache {
        RecordCache::new(1 << 20, true).expect("a cache")
    }

    fn read(cache: &RecordCache, key: &[u8], stored: &[u8]) -> Vec<u8> {
        match cache.get(key) {
            Ok(value) => value,
            Err(miss) => {
                cache.fill(miss, key, stored);
                stored.to_vec()
            }
        }
    }

    /// A write of `key` as the engine does it: withdrawn before, noted after.
    fn write(cache: &RecordCache, key: &[u8], value: Option<&[u8]>) {
        let was_cached = cache.withdraw(key).is_some();
        cache.written(key, value.map(<[u8]>::to_vec), was_cached);
    }

    #[test]
    fn reads_fill_and_writes_update_what_is_cached() {
        let cache = cache();
        assert_eq!(read(&cache, b"k", b"v1"), b"v1");
        assert_eq!(cache.get(b"k").ok(), Some(b"v1".to_vec()));
        let usage = cache.stats().usage;
        write(&cache, b"k", Some(b"v2, longer"));
        assert_eq!(cache.get(b"k").ok(), Some(b"v2, longer".to_vec()));
        assert_eq!(cache.stats().usage, usage + 8, "the entry is re-weighed");
        write(&cache, b"k", None);
        assert!(cache.get(b"k").is_err());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (2, 2));
    }

    #[test]
    fn writes_do_not_bring_records_in() {
        let cache = cache();
        write(&cache, b"k", Some(b"v"));
        assert!(cache.get(b"k").is_err());
    }

    #[test]
    fn a_failed_write_leaves_its_record_out() {
        let cache = cache();
        read(&cache, b"k", b"v1");
        let was_cached = cache.withdraw(b"k").is_some();
        assert!(was_cached);
        cache.written(b"k", None, was_cached);
        assert!(cache.get(b"k").is_err());
    }

    #[test]
    fn a_record_is_not_cached_while_its_write_is_under_way() {
        let cache = cache();
        read(&cache, b"k", b"old");
        let was_cached = cache.withdraw(b"k").is_some();
        // RocksDB may show either value now; the cache shows neither.
        let Err(miss) = cache.get(b"k") else {
            panic!("a record being written is not cached");
        };
        cache.fill(miss, b"k", b"old");
        assert!(
            cache.get(b"k").is_err(),
            "no fill while the write is under way"
        );
        cache.written(b"k", Some(b"new".to_vec()), was_cached);
        assert_eq!(cache.get(b"k").ok(), Some(b"new".to_vec()));
    }

    #[test]
    fn a_fill_after_a_concurrent_write_is_dropped() {
        let cache = cache();
        let Err(miss) = cache.get(b"k") else {
            panic!("an empty cache misses");
        };
        // The read saw the old record; a write replaced it before the read could fill it in.
        write(&cache, b"k", Some(b"new"));
        cache.fill(miss, b"k", b"old");
        assert!(
            cache.get(b"k").is_err(),
            "the stale record must not be cached"
        );
    }

    /// The keys `found` has no value for, in order.
    fn missed<'k>(keys: &'k [Vec<u8>], found: &CachedMany) -> Vec<&'k Vec<u8>> {
        keys.iter()
            .zip(&found.values)
            .filter(|(_, cached)| cached.is_none())
            .map(|(key, _)| key)
            .collect()
    }

    fn all_cached(cache: &RecordCache, keys: &[Vec<u8>]) -> bool {
        cache.get_many(keys).misses.is_empty()
    }

    #[test]
    fn get_many_answers_what_is_cached_and_misses_the_rest() {
        let cache = cache();
        let keys: Vec<Vec<u8>> = (0..40u32).map(|i| i.to_be_bytes().to_vec()).collect();
        for key in &keys[..39] {
            read(&cache, key, key);
        }
        let found = cache.get_many(&keys);
        assert_eq!(found.misses.len(), 1);
        assert_eq!(
            found.values[..39],
            keys[..39].iter().cloned().map(Some).collect::<Vec<_>>()
        );
        assert_eq!(found.values[39], None);
        for miss in found.misses {
            cache.fill(miss, &keys[39], &keys[39]);
        }
        assert!(all_cached(&cache, &keys));
        let was_cached = cache.withdraw(&keys[7]).is_some();
        assert!(!all_cached(&cache, &keys), "a key is being written");
        cache.written(&keys[7], Some(b"seven".to_vec()), was_cached);
        assert_eq!(
            cache.get_many(&keys[7..8]).values,
            vec![Some(b"seven".to_vec())]
        );
    }

    #[test]
    fn get_many_pairs_each_key_with_its_own_value_or_miss() {
        let cache = cache();
        let keys: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
        // Every third key cached, so hits and misses interleave across every shard.
        for key in keys.iter().step_by(3) {
            read(&cache, key, key);
        }
        let found = cache.get_many(&keys);
        for (i, (key, value)) in keys.iter().zip(&found.values).enumerate() {
            assert_eq!(value.as_ref(), (i % 3 == 0).then_some(key), "key {i}");
        }
        let missing = missed(&keys, &found);
        assert_eq!(found.misses.len(), missing.len());
        let values: Vec<Option<Vec<u8>>> = missing.iter().map(|key| Some(key.to_vec())).collect();
        cache.fill_batch(found.misses, missing.into_iter(), &values);
        for key in &keys {
            assert_eq!(
                cache.get(key).ok().as_ref(),
                Some(key),
                "each filled with its own"
            );
        }
    }

    #[test]
    fn what_get_many_found_is_current_until_a_write_reaches_its_shards() {
        let cache = cache();
        let keys: Vec<Vec<u8>> = (0..8u32).map(|i| i.to_be_bytes().to_vec()).collect();
        for key in &keys[..4] {
            read(&cache, key, b"v");
        }
        let found = cache.get_many(&keys);
        assert!(cache.still_current(&found));
        // A write of a key that missed goes unnoticed unless it shares a shard with a hit; a
        // write of a key that was found is always noticed.
        write(&cache, &keys[2], Some(b"new"));
        assert!(!cache.still_current(&found));
        let found = cache.get_many(&keys);
        write(&cache, b"elsewhere", None);
        let shared = cache.shard_of(b"elsewhere");
        let answered = keys[..4].iter().any(|key| cache.shard_of(key) == shared);
        assert_eq!(cache.still_current(&found), !answered);
    }

    #[test]
    fn withdraw_all_empties_every_shard_and_fences_reads_in_flight() {
        let cache = cache();
        let keys: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
        for key in &keys {
            read(&cache, key, b"v");
        }
        let Err(miss) = cache.get(b"late") else {
            panic!("not cached yet");
        };
        cache.withdraw_all();
        cache.written_all();
        cache.fill(miss, b"late", b"v");
        assert!(keys.iter().all(|key| cache.get(key).is_err()));
        assert!(cache.get(b"late").is_err());
        assert_eq!(cache.stats().usage, 0);
    }

    #[test]
    fn a_batch_that_writes_a_record_twice_leaves_the_last_value_or_nothing() {
        let cache = cache();
        read(&cache, b"k", b"v0");
        // Put k, delete everything by range, put k again: all in one batch.
        let first = cache.withdraw(b"k").is_some();
        cache.withdraw_all();
        let second = cache.withdraw(b"k").is_some();
        cache.written(b"k", Some(b"v1".to_vec()), first);
        cache.written_all();
        cache.written(b"k", Some(b"v2".to_vec()), second);
        assert!(cache.get(b"k").is_err(), "v1 must not outlive the batch");

        read(&cache, b"j", b"v0");
        let first = cache.withdraw(b"j").is_some();
        let second = cache.withdraw(b"j").is_some();
        cache.written(b"j", Some(b"v1".to_vec()), first);
        cache.written(b"j", None, second);
        assert!(cache.get(b"j").is_err(), "j was deleted after v1");
    }

    #[test]
    fn batched_reads_fill_spare_room_and_rarely_evict() {
        let cache = RecordCache::new(64 << 10, true).expect("a cache");
        let batch_read = |keys: &[Vec<u8>]| {
            let found = cache.get_many(keys);
            let missing = missed(keys, &found);
            let values = vec![Some(vec![0; 100]); missing.len()];
            cache.fill_batch(found.misses, missing.into_iter(), &values);
        };
        let first = [b"a".to_vec(), b"b".to_vec()];
        batch_read(&first);
        assert!(all_cached(&cache, &first), "an empty cache has room");

        let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        for key in &keys {
            read(&cache, key, &[0; 100]);
        }
        let cached: Vec<Vec<u8>> = keys
            .iter()
            .filter(|key| cache.get(key).is_ok())
            .cloned()
            .collect();
        let late: Vec<Vec<Vec<u8>>> = (0..EVICTING_BATCH_EVERY as u32 * 4)
            .map(|batch| {
                (0..8u32)
                    .map(|i| format!("late{batch}.{i}").into_bytes())
                    .collect()
            })
            .collect();
        // With the first, one batch short of an evicting one.
        for batch in &late[..EVICTING_BATCH_EVERY as usize - 2] {
            batch_read(batch);
        }
        assert!(
            cached.iter().all(|key| cache.get(key).is_ok()),
            "batches keep a full cache as it is"
        );
        for batch in &late {
            batch_read(batch);
        }
        let late_cached = late.iter().flatten().filter(|key| cache.get(key).is_ok());
        assert!(late_cached.count() > 0, "some batches evict");
    }

    #[test]
    fn large_records_and_a_zero_capacity_are_not_cached() {
        let cache = cache();
        let large = vec![0; VALUE_LIMIT + 1];
        assert_eq!(read(&cache, b"big", &large), large);
        assert!(cache.get(b"big").is_err());
        assert!(RecordCache::new(0, true).is_none());
    }

    /// Text-like records: words of a small vocabulary.
    fn prose(seed: u32, len: usize) -> Vec<u8> {
        let words = [
            "keys", "stay", "on", "disk", "while", "hot", "records", "fit", "here",
        ];
        let mut out = Vec::new();
        let mut n = seed;
        while out.len() < len {
            n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            out.extend_from_slice(words[(n >> 16) as usize % words.len()].as_bytes());
            out.push(b' ');
        }
        out.truncate(len);
        out
    }

    #[test]
    fn records_past_a_quarter_of_the_cache_are_kept_compressed_and_read_back_whole() {
        let cache = RecordCache::new(1 << 20, true).expect("a cache");
        let keys: Vec<Vec<u8>> = (0..600u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let records: Vec<Vec<u8>> = (0..600u32).map(|i| prose(i, 2000)).collect();
        for (key, record) in keys.iter().zip(&records) {
            read(&cache, key, record);
        }
        let raw: u64 = keys
            .iter()
            .zip(&records)
            .filter(|(key, _)| cache.get(key).is_ok())
            .map(|(key, record)| entry_weight(key, &Stored::Plain(record.clone())))
            .sum();
        let stats = cache.stats();
        assert!(
            raw > stats.capacity,
            "more than the cache's capacity of records is cached: {raw} in {stats:?}"
        );
        for (key, record) in keys.iter().zip(&records) {
            if let Ok(cached) = cache.get(key) {
                assert_eq!(&cached, record);
            }
        }
        let found = cache.get_many(&keys);
        for (value, record) in found.values.iter().zip(&records) {
            assert!(value.as_ref().is_none_or(|value| value == record));
        }
        // A patch reads a compressed record back whole, and the patched one goes in again.
        let cached = keys.iter().position(|key| cache.get(key).is_ok()).unwrap();
        let mut patched = cache.withdraw(&keys[cached]).expect("cached");
        assert_eq!(patched, records[cached]);
        patched[0] = b'K';
        cache.written(&keys[cached], Some(patched.clone()), true);
        assert_eq!(cache.get(&keys[cached]).ok(), Some(patched));
    }

    #[test]
    fn without_compression_a_cache_holds_its_capacity_of_records() {
        let cache = RecordCache::new(1 << 20, false).expect("a cache");
        for i in 0..600u32 {
            read(&cache, &i.to_be_bytes(), &prose(i, 2000));
        }
        let held = (0..600u32)
            .filter(|i| cache.get(&i.to_be_bytes()).is_ok())
            .count();
        assert!(held * 2000 < 1 << 20, "{held} records");
    }

    #[test]
    fn usage_stays_within_capacity() {
        let cache = RecordCache::new(64 << 10, true).expect("a cache");
        for i in 0..10_000u32 {
            read(&cache, &i.to_be_bytes(), &[1; 100]);
        }
        let stats = cache.stats();
        assert!(stats.usage <= stats.capacity, "{stats:?}");
        assert!(stats.usage > 0);
    }
}
