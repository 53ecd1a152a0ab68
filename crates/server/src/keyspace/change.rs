//! One command's writes, and the key counters they move.

use shale_storage::keys as k;
use shale_storage::{Cf, WriteBatch};

/// One command's writes: the engine batch, plus counter changes that go into the batch (one
/// merge operand per counter, the durable copy) and into memory when it is written. Summed
/// first, so an MSET of 32 new keys adds one operand, not 32.
#[derive(Default)]
pub(crate) struct Change {
    pub batch: WriteBatch,
    pub(super) counts: Vec<(u8, i64, i64)>,
    /// Databases whose counters drop to zero before `counts` apply (FLUSHDB, FLUSHALL).
    pub(super) resets: Vec<u8>,
    /// Whether the batch deletes an expiry-index entry that is already due.
    pub removes_due_expiry: bool,
    /// The batch only deletes keys that may lie in slots moving to another node (cluster
    /// mode), and passes while clients' writes to them are refused (see `slot_moves`): the
    /// keys of slots that moved away, and expired keys, which expire on the destination alike.
    pub ignores_slot_moves: bool,
}

impl Change {
    /// Adds another command part's changes to this one.
    pub(crate) fn append(&mut self, other: Change) {
        self.batch.append(other.batch);
        for db in other.resets {
            self.reset(db);
        }
        for (db, keys, expires) in other.counts {
            self.count(db, keys, expires);
        }
        self.removes_due_expiry |= other.removes_due_expiry;
    }

    /// Adds `keys` and `expires` to the counters of `db`.
    pub(crate) fn count(&mut self, db: u8, keys: i64, expires: i64) {
        match self.counts.iter_mut().find(|(d, _, _)| *d == db) {
            Some(entry) => {
                entry.1 += keys;
                entry.2 += expires;
            }
            None if keys != 0 || expires != 0 => self.counts.push((db, keys, expires)),
            None => {}
        }
    }

    /// Puts the summed counter changes into the batch, after any reset of the same counters.
    pub(super) fn add_counter_operands(&mut self) {
        for &(db, keys, expires) in &self.counts {
            self.batch.add_counter(Cf::Meta, k::key_count_key(db), keys);
            self.batch
                .add_counter(Cf::Meta, k::expire_count_key(db), expires);
        }
    }

    /// Sets the counters of `db` to zero, on disk and, after the write, in memory.
    pub(crate) fn reset_counters(&mut self, db: u8) {
        for key in [k::key_count_key(db), k::expire_count_key(db)] {
            self.batch.put(Cf::Meta, key, 0i64.to_be_bytes().to_vec());
        }
        self.reset(db);
    }

    pub(super) fn reset(&mut self, db: u8) {
        self.counts.retain(|(d, _, _)| *d != db);
        if !self.resets.contains(&db) {
            self.resets.push(db);
        }
    }

    /// A committed counter of `db` as it will be once this change is written.
    pub(super) fn adjusted(&self, db: u8, committed: i64, expiring: bool) -> i64 {
        let base = if self.resets.contains(&db) {
            0
        } else {
            committed
        };
        self.counts
            .iter()
            .filter(|(d, _, _)| *d == db)
            .map(|&(_, keys, expires)| if expiring { expires } else { keys })
            .sum::<i64>()
            + base
    }
}
