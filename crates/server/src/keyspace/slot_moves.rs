//! Writes to slots of database 0 that are moving to another node (cluster mode, see
//! `services::cluster::migration`): each key written is recorded, so the migration sends it
//! again, and in the migration's last phase such writes are refused.
//!
//! The keys are read from every batch as it is prepared, as watches read them, so no write
//! path can forget to report one. A writer holds its keys' locks from before this note until
//! its write is done, so a migration that takes a key from the record and then reads it under
//! its lock reads it with that write.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

use parking_lot::Mutex;
use shale_storage::keys as k;
use shale_storage::{Cf, Op, WriteBatch};

use super::Keyspace;
use crate::error::Error;

#[derive(Default)]
pub struct SlotMoves {
    /// The slots tracked, `first << 16 | last`, and whether any are (`active`): one atomic
    /// load per batch when none are.
    range: AtomicU32,
    active: AtomicBool,
    /// The stored database that database 0 names.
    db: AtomicU8,
    forbidden: AtomicBool,
    /// The migration succeeded: writes to the slots stay refused, but a flush is the node's
    /// own business again.
    finished: AtomicBool,
    written: Mutex<HashSet<Vec<u8>>>,
    /// A range delete (FLUSHDB, FLUSHALL) met the tracked database: the record is incomplete.
    flushed: AtomicBool,
}

impl SlotMoves {
    /// Starts recording writes to `first..=last` of stored database `db`.
    pub fn track(&self, db: u8, first: u16, last: u16) {
        self.written.lock().clear();
        self.flushed.store(false, Ordering::Relaxed);
        self.forbidden.store(false, Ordering::Relaxed);
        self.finished.store(false, Ordering::Relaxed);
        self.db.store(db, Ordering::Relaxed);
        self.range
            .store(u32::from(first) << 16 | u32::from(last), Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    /// After a migration succeeded: stops recording, and goes on refusing clients' writes to
    /// the slots, which belong to the destination now, until the next migration or import.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
        self.written.lock().clear();
    }

    /// Stops recording, and refusing.
    pub fn stop(&self) {
        self.active.store(false, Ordering::Release);
        self.forbidden.store(false, Ordering::Relaxed);
        self.written.lock().clear();
    }

    /// From now on, batches that write a tracked slot are refused.
    pub fn forbid(&self) {
        self.forbidden.store(true, Ordering::Release);
    }

    /// Whether a write to `slot` is refused now.
    pub fn forbids(&self, slot: u16) -> bool {
        self.active.load(Ordering::Acquire)
            && self.forbidden.load(Ordering::Acquire)
            && self.covers(slot)
    }

    /// The keys written since the last call.
    pub fn take_written(&self) -> Vec<Vec<u8>> {
        self.written.lock().drain().collect()
    }

    pub fn written_count(&self) -> usize {
        self.written.lock().len()
    }

    pub fn was_flushed(&self) -> bool {
        self.flushed.load(Ordering::Relaxed)
    }

    fn covers(&self, slot: u16) -> bool {
        let range = self.range.load(Ordering::Relaxed);
        let (first, last) = ((range >> 16) as u16, range as u16);
        (first..=last).contains(&slot)
    }

    /// Records the tracked keys `batch` writes; refuses it if it writes one while writes
    /// are forbidden.
    pub(super) fn note(&self, batch: &WriteBatch) -> Result<(), Error> {
        if !self.active.load(Ordering::Acquire) {
            return Ok(());
        }
        let db = self.db.load(Ordering::Relaxed);
        let closing =
            self.forbidden.load(Ordering::Acquire) && !self.finished.load(Ordering::Relaxed);
        let mut keys = Vec::new();
        for op in &batch.ops {
            let owner = match op {
                Op::Put { cf, key, .. } | Op::Delete { cf, key } => k::owner_of(*cf, key),
                Op::Patch { key, .. } => k::owner_of(Cf::Data, key),
                Op::DeleteRange { cf, start, end, .. } => match k::owner_of(*cf, start) {
                    Some(owner) => Some(owner),
                    // A range of whole databases.
                    None => {
                        let from = start.first().copied().unwrap_or(0);
                        let to = end.first().copied().unwrap_or(u8::MAX);
                        if from <= db && db < to {
                            // It could not be detected once the last keys went.
                            if closing {
                                return Err(Error::TryAgain(FORBIDDEN));
                            }
                            self.flushed.store(true, Ordering::Relaxed);
                        }
                        None
                    }
                },
                Op::AddCounter { .. } => None,
            };
            if let Some((owner_db, key)) = owner {
                if owner_db == db && self.covers(k::slot(key)) {
                    keys.push(key);
                }
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        if self.forbidden.load(Ordering::Acquire) {
            return Err(Error::TryAgain(FORBIDDEN));
        }
        let mut written = self.written.lock();
        for key in keys {
            if !written.contains(key) {
                written.insert(key.to_vec());
            }
        }
        Ok(())
    }
}

/// Kvrocks's words for a write refused while a migration finishes.
pub const FORBIDDEN: &str = "Can't write to slot being migrated which is in write forbidden phase";

impl Keyspace {
    /// Stores the line describing this node's last migration (cluster mode), with the data,
    /// so that its replicas get it with the writes around it.
    pub fn record_migration(&self, line: &str) -> Result<(), Error> {
        self.check_writable()?;
        let mut batch = WriteBatch::default();
        batch.put(Cf::Meta, k::migration_key(), line.as_bytes().to_vec());
        self.engine.write(batch)?;
        Ok(())
    }

    /// The line [`Keyspace::record_migration`] stored last, here or on this node's master.
    pub fn recorded_migration(&self) -> Result<Option<String>, Error> {
        let line = self.engine.get(Cf::Meta, &k::migration_key())?;
        Ok(line.map(|l| String::from_utf8_lossy(&l).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_the_tracked_slots_keys_and_refuses_them_when_forbidden() {
        let moves = SlotMoves::default();
        let foo = k::slot(b"foo");
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, k::meta_key(0, b"foo"), vec![1]);
        batch.put(Cf::Meta, k::meta_key(0, b"bar"), vec![1]);
        batch.put(Cf::Meta, k::meta_key(1, b"foo"), vec![1]);
        moves.note(&batch).expect("not tracking");
        assert_eq!(moves.written_count(), 0);
        moves.track(0, foo, foo);
        moves.note(&batch).expect("tracked");
        assert_eq!(moves.take_written(), vec![b"foo".to_vec()]);
        moves.forbid();
        assert!(moves.forbids(foo));
        assert!(matches!(moves.note(&batch), Err(Error::TryAgain(_))));
        let mut other = WriteBatch::new();
        other.put(Cf::Meta, k::meta_key(0, b"bar"), vec![1]);
        moves.note(&other).expect("another slot");
        let (start, end) = k::all_dbs_range();
        let mut flush = WriteBatch::new();
        flush.delete_range(Cf::Meta, start, end);
        assert!(matches!(moves.note(&flush), Err(Error::TryAgain(_))));
        moves.finish();
        moves.note(&flush).expect("a flush after the migration");
        assert!(moves.was_flushed());
        moves.stop();
        assert!(!moves.forbids(foo));
    }
}
