//! The engine interface: what the type layer may ask of a key-value store.

use thiserror::Error;

use crate::record_cache::RecordCacheStats;

/// The column families. Each holds one kind of record so that each can be tuned, scanned and
/// range-deleted on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cf {
    /// One record per user key: type, expiry, version, size, inline string value; plus the
    /// per-database key counters under a reserved prefix.
    Meta,
    /// Collection elements and string fragments, under `key|version` prefixes.
    Data,
    /// Secondary index of sorted-set scores.
    Score,
    /// Expiry index: `db|expire-at|slot|key`, so the expiry cycle reads only what is due.
    Expire,
}

impl Cf {
    pub const ALL: [Cf; 4] = [Cf::Meta, Cf::Data, Cf::Score, Cf::Expire];

    pub fn name(self) -> &'static str {
        match self {
            Cf::Meta => "meta",
            Cf::Data => "data",
            Cf::Score => "score",
            Cf::Expire => "expire",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One change inside a [`WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        cf: Cf,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        cf: Cf,
        key: Vec<u8>,
    },
    /// Removes every key in `[start, end)`.
    DeleteRange {
        cf: Cf,
        start: Vec<u8>,
        end: Vec<u8>,
        /// No read asks for these keys again: see [`WriteBatch::delete_unreachable_range`].
        unreachable: bool,
    },
    /// Adds `delta` to the signed 64-bit counter stored at `key` (missing counts as 0).
    AddCounter {
        cf: Cf,
        key: Vec<u8>,
        delta: i64,
    },
    /// Overwrites some bytes of the record at `key` in the data family (missing: empty),
    /// growing it with zeros as needed; `patch` is in [`crate::patch`]'s encoding.
    Patch {
        key: Vec<u8>,
        patch: Vec<u8>,
    },
}

/// Changes applied atomically by [`Engine::write`].
#[derive(Debug, Default, Clone)]
pub struct WriteBatch {
    pub ops: Vec<Op>,
}

impl WriteBatch {
    pub fn new() -> Self {
        WriteBatch::default()
    }

    pub fn put(&mut self, cf: Cf, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(Op::Put { cf, key, value });
    }

    pub fn delete(&mut self, cf: Cf, key: Vec<u8>) {
        self.ops.push(Op::Delete { cf, key });
    }

    pub fn delete_range(&mut self, cf: Cf, start: Vec<u8>, end: Vec<u8>) {
        self.ops.push(Op::DeleteRange {
            cf,
            start,
            end,
            unreachable: false,
        });
    }

    /// Deletes `[start, end)`, keys that no read will ask for again: the records of a
    /// collection version that is gone, which reads find only through metadata naming that
    /// version. The record caches keep what they hold of them, never looked up again, where a
    /// range delete empties them (they cannot find a range's keys among theirs).
    pub fn delete_unreachable_range(&mut self, cf: Cf, start: Vec<u8>, end: Vec<u8>) {
        self.ops.push(Op::DeleteRange {
            cf,
            start,
            end,
            unreachable: true,
        });
    }

    /// Overwrites `bytes` at offset `at` of the data-family record at `key`, without writing
    /// the rest of the record.
    pub fn patch(&mut self, key: Vec<u8>, at: u32, bytes: &[u8]) {
        self.ops.push(Op::Patch {
            key,
            patch: crate::patch::encode(at, bytes),
        });
    }

    pub fn add_counter(&mut self, cf: Cf, key: Vec<u8>, delta: i64) {
        if delta != 0 {
            self.ops.push(Op::AddCounter { cf, key, delta });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Appends the ops of `other`, after this batch's own.
    pub fn append(&mut self, other: WriteBatch) {
        self.ops.extend(other.ops);
    }

    /// Folds the additions to each counter into one: a write that carries the batches of many
    /// connections then merges each counter once instead of once per batch. Additions commute,
    /// so they may move; a batch that also puts or deletes one of the counters is left as is.
    pub fn fold_counters(&mut self) {
        let mut sums: Vec<(Cf, Vec<u8>, i64)> = Vec::new();
        let mut additions = 0;
        for op in &self.ops {
            if let Op::AddCounter { cf, key, delta } = op {
                additions += 1;
                match sums.iter_mut().find(|(c, k, _)| c == cf && k == key) {
                    Some((_, _, sum)) => *sum = sum.wrapping_add(*delta),
                    None => sums.push((*cf, key.clone(), *delta)),
                }
            }
        }
        if additions == sums.len() || self.ops.iter().any(|op| touches(op, &sums)) {
            return;
        }
        self.ops.retain(|op| !matches!(op, Op::AddCounter { .. }));
        for (cf, key, delta) in sums {
            self.add_counter(cf, key, delta);
        }
    }
}

/// Whether `op` puts or deletes one of the counters in `counters`.
fn touches(op: &Op, counters: &[(Cf, Vec<u8>, i64)]) -> bool {
    counters.iter().any(|(c, k, _)| match op {
        Op::Put { cf, key, .. } | Op::Delete { cf, key } => cf == c && key == k,
        Op::DeleteRange { cf, start, end, .. } => cf == c && start <= k && k < end,
        Op::AddCounter { .. } | Op::Patch { .. } => false,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanDirection {
    Forward,
    Reverse,
}

/// Figures for INFO: memory held by the engine and its size on disk.
#[derive(Debug, Default, Clone)]
pub struct EngineStats {
    pub meta_cache: RecordCacheStats,
    pub data_cache: RecordCacheStats,
    pub block_cache_usage: u64,
    pub block_cache_capacity: u64,
    pub memtable_usage: u64,
    pub memtable_limit: u64,
    pub table_readers_usage: u64,
    pub live_sst_bytes: u64,
    pub estimated_keys: u64,
    pub pending_compaction_bytes: u64,
    pub running_compactions: u64,
    pub running_flushes: u64,
    pub bytes_written: u64,
    pub wal_syncs: u64,
    /// Iterator seeks and steps, and internal entries (old versions, tombstones) that
    /// iterators stepped over: the cost reads pay for garbage.
    pub iter_seeks: u64,
    pub iter_nexts: u64,
    pub iter_skipped: u64,
    /// Time writes spent stalled or stopped by RocksDB (too many level-0 files or pending
    /// compaction bytes, memtables full), in µs.
    pub stall_micros: u64,
    /// Whether writes are stopped now, and the rate they are slowed to (0 if not).
    pub write_stopped: bool,
    pub delayed_write_rate: u64,
    pub immutable_memtables: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// CPU time of the compactions run here.
    pub compaction_cpu_micros: u64,
    pub compactions: crate::compaction::CompactionStats,
}

#[derive(Debug, Clone, Error)]
pub enum StorageError {
    #[error("{0}")]
    Engine(String),
    #[error("corrupt record: {0}")]
    Corrupt(&'static str),
    /// The WAL cannot be written (the reason as `strerror` words it): the write was refused.
    #[error("{0}")]
    Unwritable(std::sync::Arc<str>),
    /// A WAL record the open would replay is damaged and intact ones follow it.
    #[error(
        "WAL file {} is damaged at byte {}, and intact writes follow it; `shale-server repair` recovers what is readable",
        .0.file.display(),
        .0.offset
    )]
    DamagedWal(crate::WalDamage),
}

impl From<rocksdb::Error> for StorageError {
    fn from(err: rocksdb::Error) -> Self {
        StorageError::Engine(err.into_string())
    }
}

/// A key-value store with column families, atomic batches and bounded scans.
///
/// Scans take a visitor instead of returning an iterator so that engines can keep their
/// iterator types (and lifetimes) to themselves; the visitor returns `false` to stop.
pub trait Engine: Send + Sync + 'static {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError>;

    /// Applies the batch atomically. On return it is visible to reads and its WAL record is
    /// buffered in the process: [`Engine::flush_wal`] hands it to the OS, [`Engine::sync_wal`]
    /// to the disk.
    fn write(&self, batch: WriteBatch) -> Result<(), StorageError>;

    /// The sequence number of the last op written. Every op takes one, so a replica that
    /// applies its master's batches in order has the master's numbers.
    fn sequence(&self) -> u64;

    /// Visits the keys in `[lower, upper)` in the given direction.
    fn scan(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
        direction: ScanDirection,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError>;

    /// Hands every buffered WAL record to the OS, so that a crash of the process alone can no
    /// longer lose those writes.
    fn flush_wal(&self) -> Result<(), StorageError>;

    /// Makes every write so far durable on disk.
    fn sync_wal(&self) -> Result<(), StorageError>;

    /// Writes the memtables to disk, so the next start has no WAL to replay.
    fn flush_memtables(&self) -> Result<(), StorageError>;

    /// Asks the engine to reclaim the space of `[start, end)` soon (after range deletes).
    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<(), StorageError>;

    fn stats(&self) -> EngineStats;

    /// Why writes fail, from the first failed WAL write, sync or flush until the engine has
    /// recovered; `None` while they work.
    fn write_failure(&self) -> Option<std::sync::Arc<str>> {
        None
    }

    /// Changes at every recovery from a write failure: a write made in an earlier generation
    /// and not synced before it may be lost.
    fn generation(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adds(batch: &WriteBatch) -> Vec<(Vec<u8>, i64)> {
        batch
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::AddCounter { key, delta, .. } => Some((key.clone(), *delta)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn fold_counters_sums_each_counter_once_and_keeps_other_ops() {
        let mut batch = WriteBatch::new();
        for (key, delta) in [(b"a", 1), (b"b", 2), (b"a", 3), (b"b", -2)] {
            batch.put(Cf::Meta, key.to_vec(), b"v".to_vec());
            batch.add_counter(Cf::Meta, b"count".to_vec(), delta);
            batch.add_counter(Cf::Meta, b"other".to_vec(), 1);
        }
        batch.fold_counters();
        assert_eq!(
            adds(&batch),
            [(b"count".to_vec(), 4), (b"other".to_vec(), 4)]
        );
        assert_eq!(batch.ops.len(), 6, "four puts and two additions");
    }

    #[test]
    fn fold_counters_drops_a_zero_sum() {
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"a".to_vec(), b"v".to_vec());
        batch.add_counter(Cf::Meta, b"count".to_vec(), 1);
        batch.delete(Cf::Meta, b"b".to_vec());
        batch.add_counter(Cf::Meta, b"count".to_vec(), -1);
        batch.fold_counters();
        assert_eq!(adds(&batch), []);
        assert_eq!(batch.ops.len(), 2);
    }

    #[test]
    fn fold_counters_leaves_a_batch_that_resets_a_counter() {
        let mut batch = WriteBatch::new();
        batch.add_counter(Cf::Meta, b"count".to_vec(), 5);
        batch.put(Cf::Meta, b"count".to_vec(), 0i64.to_be_bytes().to_vec());
        batch.add_counter(Cf::Meta, b"count".to_vec(), 1);
        let before = batch.ops.clone();
        batch.fold_counters();
        assert_eq!(batch.ops, before);

        let mut ranged = WriteBatch::new();
        ranged.add_counter(Cf::Meta, b"count".to_vec(), 5);
        ranged.delete_range(Cf::Meta, b"a".to_vec(), b"d".to_vec());
        ranged.add_counter(Cf::Meta, b"count".to_vec(), 1);
        let before = ranged.ops.clone();
        ranged.fold_counters();
        assert_eq!(ranged.ops, before);
    }
}
