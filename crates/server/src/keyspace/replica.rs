//! The keyspace of a replica: read-only to clients, written only by the batches its master
//! sends, which must leave the in-process state (counters, the database map, watches) as the
//! master's commands left the master's.

use std::sync::atomic::Ordering;

use shale_storage::keys as k;
use shale_storage::{Cf, Op, WriteBatch};

use super::{databases::DbMap, read_counter, Keyspace};
use crate::error::Error;

/// Whose replica this keyspace is, which decides who may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ReplicaMode {
    None = 0,
    /// Of a Shale master: every write but [`Keyspace::apply_replicated`] fails with
    /// `-READONLY`, since each batch must take the sequence numbers it took on the master.
    OfShale = 1,
    /// Of a Redis master, whose commands the link runs like a client's: clients' writes are
    /// refused at the command table (`-READONLY`), the link's go through.
    OfRedis = 2,
}

impl Keyspace {
    /// Keys are not expired on a replica of either kind: its data changes only as its
    /// master's does.
    pub fn set_replica(&self, mode: ReplicaMode) {
        self.replica.store(mode as u8, Ordering::Release);
    }

    pub fn replica_mode(&self) -> ReplicaMode {
        match self.replica.load(Ordering::Acquire) {
            1 => ReplicaMode::OfShale,
            2 => ReplicaMode::OfRedis,
            _ => ReplicaMode::None,
        }
    }

    pub fn is_replica(&self) -> bool {
        self.replica_mode() != ReplicaMode::None
    }

    pub(super) fn check_writable(&self) -> Result<(), Error> {
        match self.replica_mode() {
            ReplicaMode::OfShale => Err(Error::ReadOnly),
            _ => Ok(()),
        }
    }

    /// Applies a batch of the master's, atomically, with what its commands did to the state
    /// kept in this process: key counters, the database map (SWAPDB), watched keys.
    pub fn apply_replicated(&self, batch: WriteBatch) -> Result<(), Error> {
        let mut counted = Vec::new();
        let mut recount = false;
        let mut remaps = false;
        let mut libraries = false;
        for op in &batch.ops {
            match op {
                Op::AddCounter {
                    cf: Cf::Meta,
                    key,
                    delta,
                } => {
                    if let Some(counter) = k::counter_of(key) {
                        counted.push((counter, *delta));
                    }
                }
                Op::Put {
                    cf: Cf::Meta, key, ..
                }
                | Op::Delete { cf: Cf::Meta, key } => {
                    recount |= k::counter_of(key).is_some();
                    remaps |= *key == k::db_map_key();
                    libraries |= k::is_library_key(key);
                }
                Op::DeleteRange {
                    cf: Cf::Meta,
                    start,
                    ..
                } => {
                    // FUNCTION FLUSH deletes the library records alone.
                    let library = k::is_library_key(start);
                    recount |= !library;
                    libraries |= library;
                }
                _ => {}
            }
        }
        if recount {
            self.watches.raise_all();
        }
        self.watches.note(&batch);
        // A new database map is installed under every key lock, as SWAPDB installs it.
        let _all = remaps.then(|| self.locks.lock_all());
        self.engine.write(batch)?;
        self.sampling.forget_all();
        for ((db, expiring), delta) in counted {
            if let Some(counter) = self.counters(expiring).get(db as usize) {
                counter.fetch_add(delta, Ordering::Relaxed);
            }
        }
        if recount {
            self.recount()?;
        }
        if remaps {
            let map = DbMap::load(self.engine.as_ref(), self.databases)?;
            self.db_map.apply(&map.current());
        }
        if libraries {
            self.libraries_changed();
        }
        Ok(())
    }

    /// Reads everything this process keeps about the data again, after the engine switched to
    /// a copy of the master's: counters, the database map, the expiry index's watermarks,
    /// collection versions. Watched keys all count as touched, as after a FLUSHALL.
    pub fn reload(&self) -> Result<(), Error> {
        self.watches.raise_all();
        self.sampling.forget_all();
        self.recount()?;
        let map = DbMap::load(self.engine.as_ref(), self.databases)?;
        {
            let _all = self.locks.lock_all();
            self.db_map.apply(&map.current());
        }
        for watermark in &self.expiry_watermarks {
            watermark.store(0, Ordering::Relaxed);
        }
        self.libraries_changed();
        self.versions.resume()
    }

    /// Becomes writable (`REPLICAOF NO ONE`): new collection versions start above every
    /// version the master handed out.
    pub fn promote(&self) -> Result<(), Error> {
        self.versions.resume()?;
        self.set_replica(ReplicaMode::None);
        Ok(())
    }

    fn counters(&self, expiring: bool) -> &[std::sync::atomic::AtomicI64] {
        match expiring {
            true => &self.expire_counts,
            false => &self.key_counts,
        }
    }

    /// Reads the per-database counters from the engine.
    fn recount(&self) -> Result<(), Error> {
        for db in 0..self.databases as u8 {
            let keys = read_counter(self.engine.as_ref(), &k::key_count_key(db))?;
            let expires = read_counter(self.engine.as_ref(), &k::expire_count_key(db))?;
            self.key_counts[db as usize].store(keys, Ordering::Relaxed);
            self.expire_counts[db as usize].store(expires, Ordering::Relaxed);
        }
        Ok(())
    }
}
