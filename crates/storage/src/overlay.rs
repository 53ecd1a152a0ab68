//! Pending writes layered over an engine, like RocksDB's `WriteBatchWithIndex`: reads through
//! the overlay see the pending writes, and nothing reaches the engine until the owner takes
//! the batch and writes it. Transactions and scripts stage every command here, so that a
//! command reads what the previous ones wrote and all of them commit as one atomic batch.
//!
//! A key written twice is written once: the later write replaces the earlier one in the batch.
//! Commands on one collection rewrite its metadata each time, and every record a batch carries
//! costs a memtable insert.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::{Cf, Engine, EngineStats, Op, ScanDirection, StorageError, WriteBatch};
use crate::memory::remove_range;
use crate::patch;

pub struct Overlay {
    base: Arc<dyn Engine>,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    /// Per key, where its latest point write is in `batch`.
    points: [BTreeMap<Vec<u8>, Staged>; 4],
    /// Range deletes. A later put of a key inside one is in `points`, which reads check first.
    ranges: [Vec<(Vec<u8>, Vec<u8>)>; 4],
    /// Everything, in order, for the final write. Counter additions are only here: nothing
    /// reads counters through an overlay.
    batch: WriteBatch,
}

impl Pending {
    fn lookup(&self, cf: Cf, key: &[u8]) -> Lookup {
        match self.points[cf.index()].get(key) {
            Some(staged) => match self.staged(staged) {
                Value::Put(value) => Lookup::Found(value.to_vec()),
                Value::Deleted => Lookup::Deleted,
                Value::Patch(patch) => Lookup::Patched(patch.to_vec()),
            },
            None if in_deleted_range(&self.ranges[cf.index()], key) => Lookup::Deleted,
            None => Lookup::Base,
        }
    }

    /// What a staged point write leaves at its key.
    fn staged(&self, staged: &Staged) -> Value<&[u8]> {
        match self.batch.ops.get(staged.op) {
            Some(Op::Put { value, .. }) => Value::Put(value),
            Some(Op::Patch { patch, .. }) => Value::Patch(patch),
            _ => Value::Deleted,
        }
    }

    /// Stages a patch of a data-family record. A patch of a record the batch already puts
    /// or deletes becomes part of that put, so a staged patch always applies to the base
    /// engine's record; one after a range delete over its key patches an empty record.
    fn stage_patch(&mut self, key: Vec<u8>, patch: Vec<u8>) -> Result<(), StorageError> {
        let data = Cf::Data.index();
        let ops = &mut self.batch.ops;
        if let Some(staged) = self.points[data].get(key.as_slice()) {
            match &mut ops[staged.op] {
                Op::Put { value, .. } => patch::apply(value, &patch)?,
                Op::Patch { patch: earlier, .. } => earlier.extend_from_slice(&patch),
                deleted => {
                    let value = patch::patched(None, [patch.as_slice()])?;
                    *deleted = Op::Put {
                        cf: Cf::Data,
                        key,
                        value,
                    };
                }
            }
            return Ok(());
        }
        let op = if in_deleted_range(&self.ranges[data], &key) {
            let value = patch::patched(None, [patch.as_slice()])?;
            Op::Put {
                cf: Cf::Data,
                key: key.clone(),
                value,
            }
        } else {
            Op::Patch {
                key: key.clone(),
                patch,
            }
        };
        self.points[data].insert(key, Staged { op: ops.len() });
        ops.push(op);
        Ok(())
    }
}

fn in_deleted_range(ranges: &[(Vec<u8>, Vec<u8>)], key: &[u8]) -> bool {
    ranges
        .iter()
        .any(|(start, end)| start.as_slice() <= key && key < end.as_slice())
}

/// A staged point write, as reads see it.
enum Value<V> {
    Put(V),
    Deleted,
    /// A patch of the base engine's record.
    Patch(V),
}

/// Where a key's pending put or delete is in the batch; the value stays in the op, so staging
/// a write copies no value. A range delete over the key removes it from `points`, so while it
/// is there, no later op in the batch touches the key, and a newer write may take the op's
/// place.
struct Staged {
    op: usize,
}

enum Lookup {
    Found(Vec<u8>),
    Deleted,
    Base,
    /// The base engine's record with this patch applied.
    Patched(Vec<u8>),
}

impl Overlay {
    pub fn new(base: Arc<dyn Engine>) -> Overlay {
        Overlay {
            base,
            pending: Mutex::new(Pending::default()),
        }
    }

    /// Takes the pending writes, leaving the overlay empty.
    pub fn take_batch(&self) -> WriteBatch {
        std::mem::take(&mut *self.pending.lock()).batch
    }
}

impl Engine for Overlay {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        match self.pending.lock().lookup(cf, key) {
            Lookup::Found(value) => Ok(Some(value)),
            Lookup::Deleted => Ok(None),
            Lookup::Base => self.base.get(cf, key),
            Lookup::Patched(patch) => {
                let base = self.base.get(cf, key)?;
                patch::patched(base.as_deref(), [patch.as_slice()]).map(Some)
            }
        }
    }

    fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        keys.iter().map(|key| self.get(cf, key)).collect()
    }

    /// Stages the batch; the base engine is not touched.
    fn write(&self, batch: WriteBatch) -> Result<(), StorageError> {
        let mut pending = self.pending.lock();
        for op in batch.ops {
            match op {
                Op::Put { cf, ref key, .. } | Op::Delete { cf, ref key } => {
                    let Pending { points, batch, .. } = &mut *pending;
                    let points = &mut points[cf.index()];
                    match points.get(key.as_slice()).map(|staged| staged.op) {
                        Some(at) => batch.ops[at] = op,
                        None => {
                            points.insert(
                                key.clone(),
                                Staged {
                                    op: batch.ops.len(),
                                },
                            );
                            batch.ops.push(op);
                        }
                    }
                }
                Op::DeleteRange {
                    cf,
                    ref start,
                    ref end,
                    ..
                } => {
                    remove_range(&mut pending.points[cf.index()], start, end);
                    pending.ranges[cf.index()].push((start.clone(), end.clone()));
                    pending.batch.ops.push(op);
                }
                Op::AddCounter { .. } => pending.batch.ops.push(op),
                Op::Patch { key, patch } => pending.stage_patch(key, patch)?,
            }
        }
        Ok(())
    }

    /// Merges the pending writes of the range with the base engine's keys.
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
        let (mut points, ranges) = {
            let pending = self.pending.lock();
            let points: Vec<(Vec<u8>, Value<Vec<u8>>)> = pending.points[cf.index()]
                .range::<[u8], _>((Bound::Included(lower), Bound::Excluded(upper)))
                .map(|(k, staged)| {
                    let value = match pending.staged(staged) {
                        Value::Put(v) => Value::Put(v.to_vec()),
                        Value::Deleted => Value::Deleted,
                        Value::Patch(p) => Value::Patch(p.to_vec()),
                    };
                    (k.clone(), value)
                })
                .collect();
            (points, pending.ranges[cf.index()].clone())
        };
        let forward = direction == ScanDirection::Forward;
        if !forward {
            points.reverse();
        }
        let mut failure = None;
        // Shows a key: its staged write (over the base engine's record, if any) or the base
        // engine's record; false to stop.
        let mut show = |key: &[u8], staged: Option<&Value<Vec<u8>>>, base: Option<&[u8]>| {
            let patch = match (staged, base) {
                (Some(Value::Put(v)), _) => return visit(key, v),
                (None, Some(v)) => return visit(key, v),
                (Some(Value::Deleted), _) | (None, None) => return true,
                (Some(Value::Patch(patch)), _) => patch,
            };
            match patch::patched(base, [patch.as_slice()]) {
                Ok(v) => visit(key, &v),
                Err(err) => {
                    failure = Some(err);
                    false
                }
            }
        };
        let mut next = 0;
        let mut stopped = false;
        self.base
            .scan(cf, lower, upper, direction, &mut |key, value| {
                while let Some((pending_key, pending_value)) = points.get(next) {
                    let before = if forward {
                        pending_key.as_slice() < key
                    } else {
                        pending_key.as_slice() > key
                    };
                    if !before {
                        break;
                    }
                    next += 1;
                    if !show(pending_key, Some(pending_value), None) {
                        stopped = true;
                        return false;
                    }
                }
                if let Some((pending_key, pending_value)) = points.get(next) {
                    if pending_key.as_slice() == key {
                        next += 1;
                        stopped = !show(key, Some(pending_value), Some(value));
                        return !stopped;
                    }
                }
                if in_deleted_range(&ranges, key) {
                    return true;
                }
                stopped = !show(key, None, Some(value));
                !stopped
            })?;
        if !stopped {
            for (key, value) in &points[next..] {
                if !show(key, Some(value), None) {
                    break;
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    fn sequence(&self) -> u64 {
        self.base.sequence()
    }

    fn flush_wal(&self) -> Result<(), StorageError> {
        self.base.flush_wal()
    }

    fn sync_wal(&self) -> Result<(), StorageError> {
        self.base.sync_wal()
    }

    fn flush_memtables(&self) -> Result<(), StorageError> {
        self.base.flush_memtables()
    }

    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<(), StorageError> {
        self.base.compact_range(cf, start, end)
    }

    fn stats(&self) -> EngineStats {
        self.base.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryEngine;

    fn base_with(keys: &[&[u8]]) -> Arc<dyn Engine> {
        let engine = MemoryEngine::new();
        let mut batch = WriteBatch::new();
        for k in keys {
            batch.put(Cf::Data, k.to_vec(), b"base".to_vec());
        }
        engine.write(batch).unwrap();
        Arc::new(engine)
    }

    fn scan_all(engine: &dyn Engine, direction: ScanDirection) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        engine
            .scan(Cf::Data, b"", b"\xff", direction, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                true
            })
            .unwrap();
        out
    }

    #[test]
    fn reads_see_pending_writes_and_base_sees_nothing() {
        let base = base_with(&[b"a", b"c", b"e"]);
        let overlay = Overlay::new(base.clone());
        let mut batch = WriteBatch::new();
        batch.put(Cf::Data, b"b".to_vec(), b"new".to_vec());
        batch.delete(Cf::Data, b"c".to_vec());
        batch.put(Cf::Data, b"e".to_vec(), b"over".to_vec());
        overlay.write(batch).unwrap();
        assert_eq!(overlay.get(Cf::Data, b"b").unwrap(), Some(b"new".to_vec()));
        assert_eq!(overlay.get(Cf::Data, b"c").unwrap(), None);
        assert_eq!(overlay.get(Cf::Data, b"a").unwrap(), Some(b"base".to_vec()));
        assert_eq!(base.get(Cf::Data, b"b").unwrap(), None);

        let forward: Vec<Vec<u8>> = scan_all(&overlay, ScanDirection::Forward)
            .into_iter()
            .map(|(k, v)| [k, v].concat())
            .collect();
        assert_eq!(
            forward,
            vec![b"abase".to_vec(), b"bnew".to_vec(), b"eover".to_vec()]
        );
        let reverse: Vec<Vec<u8>> = scan_all(&overlay, ScanDirection::Reverse)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(reverse, vec![b"e".to_vec(), b"b".to_vec(), b"a".to_vec()]);

        base.write(overlay.take_batch()).unwrap();
        let committed: Vec<Vec<u8>> = scan_all(base.as_ref(), ScanDirection::Forward)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(committed, vec![b"a".to_vec(), b"b".to_vec(), b"e".to_vec()]);
    }

    #[test]
    fn patches_stay_patches_and_reads_see_them_applied() {
        let base = base_with(&[b"a", b"p"]);
        let overlay = Overlay::new(base.clone());
        let mut batch = WriteBatch::new();
        batch.patch(b"p".to_vec(), 0, b"B");
        batch.patch(b"q".to_vec(), 1, b"x");
        batch.patch(b"p".to_vec(), 5, b"!");
        overlay.write(batch).unwrap();
        assert_eq!(
            overlay.get(Cf::Data, b"p").unwrap(),
            Some(b"Base\0!".to_vec())
        );
        assert_eq!(overlay.get(Cf::Data, b"q").unwrap(), Some(b"\0x".to_vec()));
        let seen: Vec<Vec<u8>> = scan_all(&overlay, ScanDirection::Reverse)
            .into_iter()
            .map(|(k, v)| [k, v].concat())
            .collect();
        assert_eq!(
            seen,
            vec![b"q\0x".to_vec(), b"pBase\0!".to_vec(), b"abase".to_vec()]
        );
        // The two patches of `p` are one op, and neither reads the base record.
        let ops = overlay.take_batch().ops;
        assert_eq!(ops.len(), 2);
        assert!(ops.iter().all(|op| matches!(op, Op::Patch { .. })));
    }

    #[test]
    fn a_patch_over_a_staged_put_or_delete_becomes_part_of_it() {
        let base = base_with(&[b"d", b"k1"]);
        let overlay = Overlay::new(base);
        let mut batch = WriteBatch::new();
        batch.put(Cf::Data, b"p".to_vec(), b"put".to_vec());
        batch.delete(Cf::Data, b"d".to_vec());
        batch.delete_range(Cf::Data, b"k".to_vec(), b"l".to_vec());
        batch.patch(b"p".to_vec(), 0, b"P");
        batch.patch(b"d".to_vec(), 1, b"D");
        batch.patch(b"k1".to_vec(), 0, b"K");
        overlay.write(batch).unwrap();
        assert_eq!(overlay.get(Cf::Data, b"p").unwrap(), Some(b"Put".to_vec()));
        assert_eq!(overlay.get(Cf::Data, b"d").unwrap(), Some(b"\0D".to_vec()));
        assert_eq!(overlay.get(Cf::Data, b"k1").unwrap(), Some(b"K".to_vec()));
        let ops = overlay.take_batch().ops;
        assert!(!ops.iter().any(|op| matches!(op, Op::Patch { .. })));
    }

    #[test]
    fn range_deletes_hide_base_keys_but_not_later_puts() {
        let base = base_with(&[b"k1", b"k2", b"k3", b"z"]);
        let overlay = Overlay::new(base);
        let mut batch = WriteBatch::new();
        batch.put(Cf::Data, b"k0".to_vec(), b"gone".to_vec());
        batch.delete_range(Cf::Data, b"k".to_vec(), b"l".to_vec());
        batch.put(Cf::Data, b"k2".to_vec(), b"again".to_vec());
        overlay.write(batch).unwrap();
        assert_eq!(overlay.get(Cf::Data, b"k1").unwrap(), None);
        assert_eq!(overlay.get(Cf::Data, b"k0").unwrap(), None);
        assert_eq!(
            overlay.get(Cf::Data, b"k2").unwrap(),
            Some(b"again".to_vec())
        );
        let keys: Vec<Vec<u8>> = scan_all(&overlay, ScanDirection::Forward)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec![b"k2".to_vec(), b"z".to_vec()]);
    }

    #[test]
    fn scans_stop_when_the_visitor_says_so() {
        let base = base_with(&[b"b", b"d"]);
        let overlay = Overlay::new(base);
        let mut batch = WriteBatch::new();
        for k in [b"a", b"c", b"e"] {
            batch.put(Cf::Data, k.to_vec(), vec![]);
        }
        overlay.write(batch).unwrap();
        for limit in 1..=5 {
            let mut seen = Vec::new();
            overlay
                .scan(
                    Cf::Data,
                    b"",
                    b"\xff",
                    ScanDirection::Forward,
                    &mut |k, _| {
                        seen.push(k[0]);
                        seen.len() < limit
                    },
                )
                .unwrap();
            assert_eq!(seen, b"abcde"[..limit].to_vec());
        }
    }

    #[test]
    fn a_key_written_again_keeps_one_op_unless_a_range_delete_came_between() {
        let base = base_with(&[b"m"]);
        let overlay = Overlay::new(base.clone());
        let mut first = WriteBatch::new();
        first.put(Cf::Data, b"k".to_vec(), b"1".to_vec());
        first.put(Cf::Meta, b"k".to_vec(), b"meta".to_vec());
        first.delete(Cf::Data, b"m".to_vec());
        overlay.write(first).unwrap();
        let mut second = WriteBatch::new();
        second.put(Cf::Data, b"k".to_vec(), b"2".to_vec());
        second.put(Cf::Data, b"m".to_vec(), b"back".to_vec());
        second.delete_range(Cf::Data, b"k".to_vec(), b"l".to_vec());
        second.put(Cf::Data, b"k".to_vec(), b"3".to_vec());
        overlay.write(second).unwrap();
        assert_eq!(overlay.get(Cf::Data, b"k").unwrap(), Some(b"3".to_vec()));
        assert_eq!(overlay.get(Cf::Data, b"m").unwrap(), Some(b"back".to_vec()));
        let ops = overlay.take_batch().ops;
        let shape: Vec<String> = ops
            .iter()
            .map(|op| match op {
                Op::Put { cf, key, value } => format!(
                    "put {cf:?} {}={}",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(value)
                ),
                Op::Delete { key, .. } => format!("delete {}", String::from_utf8_lossy(key)),
                Op::DeleteRange { .. } => "range".to_string(),
                Op::AddCounter { .. } => "counter".to_string(),
                Op::Patch { .. } => "patch".to_string(),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "put Data k=2",
                "put Meta k=meta",
                "put Data m=back",
                "range",
                "put Data k=3"
            ]
        );
        let engine = base.as_ref();
        engine.write(WriteBatch { ops }).unwrap();
        assert_eq!(engine.get(Cf::Data, b"k").unwrap(), Some(b"3".to_vec()));
        assert_eq!(engine.get(Cf::Data, b"m").unwrap(), Some(b"back".to_vec()));
    }
}
