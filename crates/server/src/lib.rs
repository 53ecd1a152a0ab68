//! Shale: a Redis-compatible database that keeps its data on disk in RocksDB.
//!
//! # Layout
//!
//! A request flows bytes → arguments → command → type → storage → reply. Each layer imports
//! only the layers below it:
//!
//! - [`network`] is the edge: listeners, connections (reading requests, running them in order,
//!   combining the writes of pipelines and of busy keys, writing each batch of replies at once
//!   after a shared WAL sync when `appendfsync always` asks for it) and the cron thread.
//! - [`commands`] is the command table and one file per command family: parse arguments, call
//!   the type layer, shape the reply.
//! - [`services`] are what commands reach besides keys: the client registry, pub/sub, blocked
//!   clients, monitors, statistics, durability, keyspace notifications, scripts, shutdown.
//! - [`scripting`] runs Lua scripts (EVAL) with Redis's Lua API; their `redis.call` goes back
//!   through the command dispatcher as a closure the command hands it.
//! - [`types`] holds Redis semantics, one file per type, over the storage engine: it locks the
//!   keys it touches, reads metadata, and writes one atomic batch per command.
//! - [`interchange`] moves Redis's RDB format in and out of the keyspace: a `dump.rdb` loaded
//!   into a data directory or written from one (the command line's `import-rdb` and
//!   `export-rdb`), and the snapshot a Redis master sends its replicas.
//! - [`config`], [`datadir`] (which database directory is current) and [`error`] are shared
//!   by all; `shale_protocol` (RESP without I/O) and
//!   `shale_storage` (every key byte, and the engines: RocksDB and an in-memory twin) are
//!   crates of their own at the bottom.
//!
//! Errors travel as [`error::Error`] and become wire replies in exactly one place.

/// The Redis version Shale reports to clients (HELLO, INFO, Lua's `REDIS_VERSION`); its
/// command set follows it.
pub const REDIS_VERSION: &str = "7.0.15";

/// The allocator `shale-server` installs (see `main.rs`), as INFO's `mem_allocator` names it:
/// the jemalloc that `tikv-jemalloc-sys` bundles.
pub const MEM_ALLOCATOR: &str = "jemalloc-5.3.0";

pub mod commands;
pub mod config;
pub mod datadir;
pub mod error;
pub mod interchange;
pub mod keyspace;
pub mod network;
pub mod scripting;
pub mod services;
pub mod types;
