//! Shale: a Redis-compatible database that keeps its data on disk in RocksDB.
//!
//! # Layout
//!
//! A request flows bytes → arguments → command → type → storage → reply:
//!
//! - `shale_protocol` (its own crate) turns bytes into argument vectors and replies into bytes,
//!   without I/O.
//! - [`server`] owns sockets: it reads requests, runs them in order, and writes each pipelined
//!   batch of replies at once, after a shared WAL sync when `appendfsync always` asks for it.
//!   It also holds the services commands may use (configuration, clients, statistics).
//! - [`commands`] is the command table and one file per command family: parse arguments, call
//!   the type layer, shape the reply.
//! - [`types`] holds Redis semantics, one file per type, over the storage engine: it locks the
//!   keys it touches, reads metadata, and writes one atomic batch per command.
//! - [`scripting`] runs Lua scripts (EVAL) with Redis's Lua API; their `redis.call` goes
//!   back through [`commands`].
//! - `shale_storage` (its own crate) owns every key byte and the engines (RocksDB and an
//!   in-memory twin).
//!
//! Errors travel as [`error::Error`] and become wire replies in exactly one place.

/// The allocator `shale-server` installs (see `main.rs`), as INFO's `mem_allocator` names it:
/// the jemalloc that `tikv-jemalloc-sys` bundles.
pub const MEM_ALLOCATOR: &str = "jemalloc-5.3.0";

pub mod commands;
pub mod config;
pub mod error;
pub mod scripting;
pub mod server;
pub mod types;
