//! An in-memory engine with the same semantics as [`crate::RocksEngine`], for fast tests of
//! type logic. It keeps no WAL; `flush_wal`, `sync_wal` and `compact_range` do nothing.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::engine::{Cf, Engine, EngineStats, Op, ScanDirection, StorageError, WriteBatch};
use crate::patch;

type Family = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Default)]
pub struct MemoryEngine {
    families: RwLock<[Family; 4]>,
    /// Ops written so far, as RocksDB numbers them.
    sequence: AtomicU64,
}

impl MemoryEngine {
    pub fn new() -> Self {
        MemoryEngine::default()
    }
}

/// Removes the keys in `[start, end)` of an ordered map, for the engines kept in `BTreeMap`s.
pub(crate) fn remove_range<V>(map: &mut BTreeMap<Vec<u8>, V>, start: &[u8], end: &[u8]) {
    let mut from_start = map.split_off(start);
    let mut from_end = from_start.split_off(end);
    map.append(&mut from_end);
}

impl Engine for MemoryEngine {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.families.read()[cf.index()].get(key).cloned())
    }

    fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let families = self.families.read();
        Ok(keys
            .iter()
            .map(|k| families[cf.index()].get(k).cloned())
            .collect())
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StorageError> {
        // All or nothing: a malformed patch fails the batch before any of it applies.
        for op in &batch.ops {
            if let Op::Patch { patch, .. } = op {
                patch::apply(&mut Vec::new(), patch)?;
            }
        }
        let mut families = self.families.write();
        self.sequence
            .fetch_add(batch.ops.len() as u64, Ordering::Relaxed);
        for op in batch.ops {
            match op {
                Op::Put { cf, key, value } => {
                    families[cf.index()].insert(key, value);
                }
                Op::Delete { cf, key } => {
                    families[cf.index()].remove(&key);
                }
                Op::DeleteRange { cf, start, end, .. } => {
                    remove_range(&mut families[cf.index()], &start, &end);
                }
                Op::AddCounter { cf, key, delta } => {
                    let slot = families[cf.index()]
                        .entry(key)
                        .or_insert_with(|| vec![0; 8]);
                    let current =
                        <[u8; 8]>::try_from(slot.as_slice()).map_or(0, i64::from_be_bytes);
                    *slot = current.wrapping_add(delta).to_be_bytes().to_vec();
                }
                Op::Patch { key, patch } => {
                    let record = families[Cf::Data.index()].entry(key).or_default();
                    patch::apply(record, &patch)?;
                }
            }
        }
        Ok(())
    }

    /// The visitor runs under the engine's read lock and must not call the engine.
    fn scan(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
        direction: ScanDirection,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        if lower >= upper {
            return Ok(());
        }
        let families = self.families.read();
        let range =
            families[cf.index()].range::<[u8], _>((Bound::Included(lower), Bound::Excluded(upper)));
        match direction {
            ScanDirection::Forward => {
                for (k, v) in range {
                    if !visit(k, v) {
                        break;
                    }
                }
            }
            ScanDirection::Reverse => {
                for (k, v) in range.rev() {
                    if !visit(k, v) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn sequence(&self) -> u64 {
        self.sequence.load(Ordering::Relaxed)
    }

    fn flush_wal(&self) -> Result<(), StorageError> {
        Ok(())
    }

    fn sync_wal(&self) -> Result<(), StorageError> {
        Ok(())
    }

    fn flush_memtables(&self) -> Result<(), StorageError> {
        Ok(())
    }

    fn compact_range(&self, _cf: Cf, _start: &[u8], _end: &[u8]) -> Result<(), StorageError> {
        Ok(())
    }

    fn stats(&self) -> EngineStats {
        let families = self.families.read();
        EngineStats {
            estimated_keys: families.iter().map(|f| f.len() as u64).sum(),
            ..EngineStats::default()
        }
    }
}

#[cfg(test)]
mod conformance {
    //! The same checks against both engines, so the in-memory twin cannot drift.

    use super::*;
    use crate::{RocksConfig, RocksEngine};

    fn engines() -> Vec<(Box<dyn Engine>, Option<tempfile::TempDir>)> {
        let dir = tempfile::tempdir().unwrap();
        let rocks = RocksEngine::open(dir.path(), &RocksConfig::default()).unwrap();
        vec![
            (Box::new(MemoryEngine::new()), None),
            (Box::new(rocks), Some(dir)),
        ]
    }

    fn keys_in(engine: &dyn Engine, cf: Cf, direction: ScanDirection) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        engine
            .scan(cf, b"", b"\xff\xff", direction, &mut |k, _| {
                out.push(k.to_vec());
                true
            })
            .unwrap();
        out
    }

    #[test]
    fn put_get_delete_and_ranges() {
        for (engine, _dir) in engines() {
            let engine = engine.as_ref();
            let mut batch = WriteBatch::new();
            for k in [b"a", b"b", b"c", b"d"] {
                batch.put(Cf::Data, k.to_vec(), k.to_vec());
            }
            batch.put(Cf::Meta, b"a".to_vec(), b"meta".to_vec());
            engine.write(batch).unwrap();
            assert_eq!(engine.get(Cf::Data, b"b").unwrap(), Some(b"b".to_vec()));
            assert_eq!(engine.get(Cf::Meta, b"b").unwrap(), None);

            let mut batch = WriteBatch::new();
            batch.delete_range(Cf::Data, b"b".to_vec(), b"d".to_vec());
            batch.delete(Cf::Data, b"a".to_vec());
            engine.write(batch).unwrap();
            assert_eq!(
                keys_in(engine, Cf::Data, ScanDirection::Forward),
                vec![b"d".to_vec()]
            );
            let got = engine
                .multi_get(Cf::Meta, &[b"a".to_vec(), b"z".to_vec()])
                .unwrap();
            assert_eq!(got, vec![Some(b"meta".to_vec()), None]);
        }
    }

    #[test]
    fn patches_change_bytes_of_records_wherever_they_lie() {
        let values = |engine: &dyn Engine| {
            let mut out = Vec::new();
            engine
                .scan(
                    Cf::Data,
                    b"",
                    b"\xff",
                    ScanDirection::Forward,
                    &mut |k, v| {
                        out.push([k, b"=", v].concat());
                        true
                    },
                )
                .unwrap();
            out
        };
        for (engine, _dir) in engines() {
            let engine = engine.as_ref();
            let mut batch = WriteBatch::new();
            batch.put(Cf::Data, b"flushed".to_vec(), b"abcd".to_vec());
            batch.put(Cf::Data, b"gone".to_vec(), b"old".to_vec());
            engine.write(batch).unwrap();
            engine.flush_memtables().unwrap();

            // Patches of a record in an SST, of one that never existed, and one batch that
            // patches a record twice.
            let mut batch = WriteBatch::new();
            batch.patch(b"flushed".to_vec(), 1, b"X");
            batch.patch(b"new".to_vec(), 2, b"yz");
            batch.patch(b"flushed".to_vec(), 5, b"Z");
            engine.write(batch).unwrap();
            assert_eq!(
                engine.get(Cf::Data, b"flushed").unwrap(),
                Some(b"aXcd\0Z".to_vec())
            );
            assert_eq!(
                engine.get(Cf::Data, b"new").unwrap(),
                Some(b"\0\0yz".to_vec())
            );

            // A range delete drops the patched record; a patch after it starts from nothing.
            let mut batch = WriteBatch::new();
            batch.delete_range(Cf::Data, b"flushed".to_vec(), b"gonf".to_vec());
            batch.patch(b"gone".to_vec(), 0, b"N");
            engine.write(batch).unwrap();
            assert_eq!(
                values(engine),
                vec![b"gone=N".to_vec(), b"new=\0\0yz".to_vec()]
            );

            // Enough patches of one record to be folded into it on the way, then a flush.
            for i in 0..100u32 {
                let mut batch = WriteBatch::new();
                batch.patch(b"new".to_vec(), i % 4, &[b'0' + (i % 10) as u8]);
                engine.write(batch).unwrap();
            }
            engine.flush_memtables().unwrap();
            assert_eq!(
                engine.get(Cf::Data, b"new").unwrap(),
                Some(b"6789".to_vec())
            );
        }
    }

    #[test]
    fn reads_after_every_kind_of_write_see_it() {
        // RocksEngine caches what these reads find: each write must update or drop it.
        for (engine, dir) in engines() {
            let engine = engine.as_ref();
            let read = |cf, key: &[u8]| engine.get(cf, key).unwrap();
            let mut batch = WriteBatch::new();
            batch.put(Cf::Data, b"k".to_vec(), b"abcd".to_vec());
            batch.put(Cf::Meta, b"m".to_vec(), b"v1".to_vec());
            engine.write(batch).unwrap();
            for _ in 0..2 {
                assert_eq!(read(Cf::Data, b"k"), Some(b"abcd".to_vec()));
                assert_eq!(read(Cf::Meta, b"m"), Some(b"v1".to_vec()));
            }

            let mut batch = WriteBatch::new();
            batch.patch(b"k".to_vec(), 1, b"XY");
            batch.patch(b"k".to_vec(), 5, b"Z");
            engine.write(batch).unwrap();
            assert_eq!(read(Cf::Data, b"k"), Some(b"aXYd\0Z".to_vec()));
            assert_eq!(read(Cf::Data, b"k"), Some(b"aXYd\0Z".to_vec()));

            let mut batch = WriteBatch::new();
            batch.put(Cf::Data, b"k".to_vec(), b"new".to_vec());
            batch.put(Cf::Meta, b"m".to_vec(), b"v2".to_vec());
            engine.write(batch).unwrap();
            assert_eq!(read(Cf::Data, b"k"), Some(b"new".to_vec()));
            assert_eq!(read(Cf::Meta, b"m"), Some(b"v2".to_vec()));

            let mut batch = WriteBatch::new();
            batch.delete_range(Cf::Data, b"a".to_vec(), b"z".to_vec());
            batch.delete(Cf::Meta, b"m".to_vec());
            engine.write(batch).unwrap();
            assert_eq!(read(Cf::Data, b"k"), None);
            assert_eq!(read(Cf::Meta, b"m"), None);

            let mut batch = WriteBatch::new();
            batch.patch(b"k".to_vec(), 0, b"P");
            engine.write(batch).unwrap();
            assert_eq!(read(Cf::Data, b"k"), Some(b"P".to_vec()));
            if dir.is_some() {
                let stats = engine.stats();
                assert!(stats.data_cache.hits >= 2 && stats.meta_cache.hits >= 1);
            }
        }
    }

    #[test]
    fn scans_respect_bounds_and_direction() {
        for (engine, _dir) in engines() {
            let engine = engine.as_ref();
            let mut batch = WriteBatch::new();
            for k in [&b"k1"[..], b"k2", b"k3", b"l"] {
                batch.put(Cf::Data, k.to_vec(), vec![]);
            }
            engine.write(batch).unwrap();
            let mut seen = Vec::new();
            engine
                .scan(
                    Cf::Data,
                    b"k2",
                    b"l",
                    ScanDirection::Reverse,
                    &mut |k, _| {
                        seen.push(k.to_vec());
                        true
                    },
                )
                .unwrap();
            assert_eq!(seen, vec![b"k3".to_vec(), b"k2".to_vec()]);
            let forward = keys_in(engine, Cf::Data, ScanDirection::Forward);
            assert_eq!(forward.len(), 4);
        }
    }

    #[test]
    fn scans_of_one_collection_see_all_of_it_wherever_it_lies() {
        use crate::keys::{element_key, element_prefix, prefix_end};
        let scan = |engine: &dyn Engine, lower: &[u8], upper: &[u8], direction| {
            let mut seen = Vec::new();
            engine
                .scan(Cf::Data, lower, upper, direction, &mut |k, _| {
                    seen.push(k.to_vec());
                    true
                })
                .unwrap();
            seen
        };
        for (engine, _dir) in engines() {
            let engine = engine.as_ref();
            // Elements of one collection in an SST and in the memtable, between neighbours
            // that share its user key's first bytes or its version's.
            let mut first = WriteBatch::new();
            let mut second = WriteBatch::new();
            for (i, element) in [&b"a"[..], b"b", b"c", b"d"].into_iter().enumerate() {
                let batch = if i % 2 == 0 { &mut first } else { &mut second };
                batch.put(Cf::Data, element_key(0, b"h", 7, element), vec![]);
                batch.put(Cf::Data, element_key(0, b"h", 8, element), vec![]);
                batch.put(Cf::Data, element_key(0, b"hh", 7, element), vec![]);
            }
            engine.write(first).unwrap();
            engine.flush_memtables().unwrap();
            engine.write(second).unwrap();

            // `h` version 8 starts where version 7's range ends; nothing follows `hh` 7 or `h` 8.
            for (key, version) in [(&b"h"[..], 7), (b"hh", 7), (b"h", 8)] {
                let prefix = element_prefix(0, key, version);
                let all: Vec<Vec<u8>> = [&b"a"[..], b"b", b"c", b"d"]
                    .into_iter()
                    .map(|element| element_key(0, key, version, element))
                    .collect();
                let end = prefix_end(&prefix);
                assert_eq!(scan(engine, &prefix, &end, ScanDirection::Forward), all);
                let mut reversed = all.clone();
                reversed.reverse();
                assert_eq!(
                    scan(engine, &prefix, &end, ScanDirection::Reverse),
                    reversed
                );
                assert_eq!(
                    scan(engine, &all[1], &all[3], ScanDirection::Forward),
                    all[1..3].to_vec()
                );
                assert_eq!(
                    scan(engine, &all[1], &all[3], ScanDirection::Reverse),
                    vec![all[2].clone(), all[1].clone()]
                );
            }
            let other = element_prefix(0, b"q", 7);
            assert!(scan(engine, &other, &prefix_end(&other), ScanDirection::Forward).is_empty());
        }
    }

    #[test]
    fn counters_add_up() {
        for (engine, _dir) in engines() {
            let engine = engine.as_ref();
            for delta in [5, -2, 10] {
                let mut batch = WriteBatch::new();
                batch.add_counter(Cf::Meta, b"\xffc".to_vec(), delta);
                engine.write(batch).unwrap();
            }
            let raw = engine.get(Cf::Meta, b"\xffc").unwrap().unwrap();
            assert_eq!(i64::from_be_bytes(raw.try_into().unwrap()), 13);
        }
    }
}
