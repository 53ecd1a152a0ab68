//! Offloaded compaction: RocksDB's own remote compaction, with Shale's workers.
//!
//! - [`RemoteCompaction`] (`service`) is the node's side, RocksDB's `CompactionService`: it
//!   sends each compaction to a worker over HTTP, checks what comes back, and otherwise lets
//!   RocksDB compact locally. Flushes stay local.
//! - `job` is what travels between them: JSON around RocksDB's serialized input and result.
//! - `serialized` reads RocksDB's serialized input and result, for the node's checks.
//! - [`run_job`] (`worker`) is the worker's side, RocksDB's `DB::OpenAndCompact`; the
//!   `shale-compactor` binary serves it.
//!
//! A job's files are the node's own: the worker reads the database's table files and writes
//! its output beside them, through shared storage (the same directory on one machine).

mod job;
mod serialized;
mod service;
mod worker;

pub use job::{FamilySettings, JobReply, JobRequest};
pub use service::{CompactionStats, RemoteCompaction};
pub use worker::{map_path, run_job, Cancel, JobDone, JobError, PathMap};
