//! Keys whose state changed while clients block on keys (BLPOP, BZPOPMIN, XREADGROUP...).
//! As with WATCH, the keys come from the committed batch itself: any metadata record it
//! writes or deletes, whichever command, transaction or script wrote it, and every key of the
//! databases a flush emptied. A blocked command's attempt decides what the key's new state
//! means for it: a list filled serves BLPOP, a stream deleted ends XREADGROUP's wait.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use shale_storage::keys as k;
use shale_storage::{Cf, Op, WriteBatch};

#[derive(Default)]
pub struct ReadyKeys {
    /// Blocked clients; batches are not looked at while there are none.
    blocked: AtomicUsize,
    /// Whether `keys` may be non-empty, so that [`ReadyKeys::take`] costs no lock after every
    /// command.
    noted: AtomicBool,
    keys: Mutex<Vec<(u8, Vec<u8>)>>,
    /// Stored databases that a flush emptied or SWAPDB gave another number: every key blocked
    /// clients wait on there is tried again.
    databases: Mutex<Vec<u8>>,
}

/// What changed for blocked clients since the last look, by stored database.
#[derive(Default)]
pub struct Changed {
    pub keys: Vec<(u8, Vec<u8>)>,
    pub databases: Vec<u8>,
}

impl Changed {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.databases.is_empty()
    }
}

impl ReadyKeys {
    pub fn client_blocked(&self) {
        self.blocked.fetch_add(1, Ordering::Relaxed);
    }

    pub fn client_unblocked(&self) {
        self.blocked.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn any_blocked(&self) -> bool {
        self.blocked.load(Ordering::Relaxed) > 0
    }

    /// What was noted since the last call.
    pub fn take(&self) -> Changed {
        if !self.noted.swap(false, Ordering::AcqRel) {
            return Changed::default();
        }
        Changed {
            keys: std::mem::take(&mut *self.keys.lock()),
            databases: std::mem::take(&mut *self.databases.lock()),
        }
    }

    /// Stored databases that SWAPDB gave other numbers.
    pub(super) fn note_swapped(&self, stored: Vec<u8>) {
        self.add(Changed {
            keys: Vec::new(),
            databases: stored,
        });
    }

    pub(super) fn note(&self, batch: &WriteBatch) {
        self.add(self.changed_by(batch));
    }

    /// The keys whose metadata `batch` writes or deletes and the databases it empties, if any
    /// client is blocked.
    pub(super) fn changed_by(&self, batch: &WriteBatch) -> Changed {
        let mut changed = Changed::default();
        if !self.any_blocked() {
            return changed;
        }
        for op in &batch.ops {
            match op {
                Op::Put {
                    cf: Cf::Meta, key, ..
                }
                | Op::Delete { cf: Cf::Meta, key } => {
                    if let Some((db, user_key)) = k::owner_of(Cf::Meta, key) {
                        if !changed.keys.iter().any(|(d, k)| *d == db && k == user_key) {
                            changed.keys.push((db, user_key.to_vec()));
                        }
                    }
                }
                // FLUSHDB and FLUSHALL; a range within one database (a cluster's slots moved
                // away) is noted as that database whole.
                Op::DeleteRange {
                    cf: Cf::Meta,
                    start,
                    end,
                    ..
                } => {
                    // The databases of `[start, end)`: an end of one byte is the next database.
                    let first = start.first().copied().unwrap_or(0);
                    let last = match end.as_slice() {
                        [next] => next.saturating_sub(1),
                        [db, ..] => *db,
                        [] => first,
                    };
                    changed.databases.extend(first..=last.max(first));
                }
                _ => {}
            }
        }
        changed
    }

    pub(super) fn add(&self, changed: Changed) {
        if changed.is_empty() {
            return;
        }
        let mut keys = self.keys.lock();
        for key in changed.keys {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        drop(keys);
        if !changed.databases.is_empty() {
            let mut databases = self.databases.lock();
            for db in changed.databases {
                if !databases.contains(&db) {
                    databases.push(db);
                }
            }
        }
        self.noted.store(true, Ordering::Release);
    }
}
