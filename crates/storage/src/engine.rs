//! The engine interface: what the type layer may ask of a key-value store.

use thiserror::Error;

use crate::meta_cache::MetaCacheStats;

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
    },
    /// Adds `delta` to the signed 64-bit counter stored at `key` (missing counts as 0).
    AddCounter {
        cf: Cf,
        key: Vec<u8>,
        delta: i64,
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
        self.ops.push(Op::DeleteRange { cf, start, end });
    }

    pub fn add_counter(&mut self, cf: Cf, key: Vec<u8>, delta: i64) {
        if delta != 0 {
            self.ops.push(Op::AddCounter { cf, key, delta });
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanDirection {
    Forward,
    Reverse,
}

/// Figures for INFO: memory held by the engine and its size on disk.
#[derive(Debug, Default, Clone)]
pub struct EngineStats {
    pub meta_cache: MetaCacheStats,
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
}

#[derive(Debug, Clone, Error)]
pub enum StorageError {
    #[error("{0}")]
    Engine(String),
    #[error("corrupt record: {0}")]
    Corrupt(&'static str),
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
}
