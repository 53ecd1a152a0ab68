//! Storage for Shale: the bytes of every key, and the engines that hold them.
//!
//! Layout:
//! - [`keys`] builds every key Shale writes (metadata, elements, expiry index, counters);
//!   no other crate assembles key bytes.
//! - [`metadata`] encodes the value of a metadata record: type, expiry, version, size and the
//!   inline payload of small strings.
//! - [`Engine`] is the narrow interface the rest of the server uses: point reads, atomic write
//!   batches, bounded scans and WAL syncs over a fixed set of column families.
//! - [`RocksEngine`] implements it on RocksDB, with caches of metadata and data records kept
//!   in step by its own writes (`record_cache`); [`MemoryEngine`] is its in-memory twin for fast tests of
//!   type logic. The same conformance tests run against both.
//! - [`Overlay`] stages writes over an engine and lets reads see them, for transactions.
//! - [`ReadAhead`] holds records read in one batch for the pipelined reads that follow.
//! - `recent` keeps the latest write batches in memory for replicas that have caught up.
//! - [`wal`] reads RocksDB's write batches back into [`WriteBatch`]es, for replicas.
//! - `wal_damage` finds a damaged record in the WAL files an open replays.
//! - `health` tracks whether writes work (a full disk, a read-only directory) and what room
//!   the data directory has.
//! - [`compaction`] sends compactions to `shale-compactor` workers (RocksDB's remote
//!   compaction) and runs them there.
//! - [`MemoryBudget`] sizes the caches and memtables from one figure, by default the memory
//!   the process may use.
//! - `patch` encodes the byte patches that change part of a record without rewriting it.

mod budget;
pub mod compaction;
mod engine;
mod health;
pub mod keys;
mod memory;
pub mod metadata;
mod overlay;
mod patch;
mod read_ahead;
mod recent;
mod record_cache;
mod rocks;
pub mod wal;
mod wal_damage;

pub use budget::{BudgetSource, MemoryBudget, MemorySplit};
pub use engine::{Cf, Engine, EngineStats, Op, ScanDirection, StorageError, WriteBatch};
pub use memory::MemoryEngine;
pub use overlay::Overlay;
pub use read_ahead::ReadAhead;
pub use recent::Recent;
pub use record_cache::RecordCacheStats;
pub use rocks::{Retired, RocksConfig, RocksEngine, WalUpdates};
pub use wal_damage::WalDamage;
