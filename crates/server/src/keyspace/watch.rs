//! WATCH: optimistic locking. Each client has one flag; every committed batch raises the flags
//! of the watched keys it touches. The keys are read from the batch's own records, so no
//! write path (commands, transactions, the reaper, FLUSHDB) can forget to report a write.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use shale_storage::keys as k;
use shale_storage::{Cf, Op, WriteBatch};

use super::{now_ms, Db, Keyspace};
use crate::error::Error;

type Flags = Vec<Arc<AtomicBool>>;

#[derive(Default)]
pub(super) struct Watches {
    /// Registrations; batches are not decoded while there are none.
    active: AtomicUsize,
    by_db: Mutex<HashMap<u8, HashMap<Vec<u8>, Flags>>>,
}

/// One client's watched keys.
#[derive(Default)]
pub struct WatchSet {
    dirty: Arc<AtomicBool>,
    keys: Vec<WatchedKey>,
    /// The keys above, to skip repeats in linear time.
    watched: HashSet<(u8, Vec<u8>)>,
}

struct WatchedKey {
    /// The database number the client selected; registrations are kept by stored database.
    db: u8,
    key: Vec<u8>,
    /// The key's expiry when it was watched, if it existed then (0: none). A key that expires
    /// before EXEC counts as modified, as in Redis.
    expire_at: Option<u64>,
}

impl Watches {
    /// Raises the flags of watched keys that `batch` writes.
    pub(super) fn note(&self, batch: &WriteBatch) {
        if self.active.load(Ordering::Relaxed) == 0 {
            return;
        }
        let by_db = self.by_db.lock();
        let raise = |db: u8, key: &[u8]| {
            if let Some(flags) = by_db.get(&db).and_then(|keys| keys.get(key)) {
                flags.iter().for_each(|f| f.store(true, Ordering::Relaxed));
            }
        };
        for op in &batch.ops {
            match op {
                Op::Put { cf, key, .. } | Op::Delete { cf, key } => {
                    if let Some((db, user_key)) = k::owner_of(*cf, key) {
                        raise(db, user_key);
                    }
                }
                // A range of whole databases (FLUSHDB, FLUSHALL) raises nothing here: those
                // commands raise the watched keys that existed, see `raise_existing`.
                Op::DeleteRange { cf, start, .. } => {
                    if let Some((db, user_key)) = k::owner_of(*cf, start) {
                        raise(db, user_key);
                    }
                }
                Op::Patch { key, .. } => {
                    if let Some((db, user_key)) = k::owner_of(Cf::Data, key) {
                        raise(db, user_key);
                    }
                }
                Op::AddCounter { .. } => {}
            }
        }
    }
}

impl Watches {
    /// Raises the flag of every watched key (a replica's data replaced by its master's).
    pub(super) fn raise_all(&self) {
        if self.active.load(Ordering::Relaxed) == 0 {
            return;
        }
        for keys in self.by_db.lock().values() {
            for flags in keys.values() {
                flags.iter().for_each(|f| f.store(true, Ordering::Relaxed));
            }
        }
    }

    /// Raises the flags of the keys watched in `dbs` for which `existed` holds: as in Redis,
    /// emptying a database (FLUSHDB, FLUSHALL, SWAPDB) touches only the watched keys it held.
    pub(super) fn raise_existing(&self, dbs: &[u8], existed: impl Fn(u8, &[u8]) -> bool) {
        if self.active.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Copied out, so that reading the keys does not hold up every other write.
        let watched: Vec<(u8, Vec<u8>, Flags)> = self
            .by_db
            .lock()
            .iter()
            .filter(|(db, _)| dbs.contains(db))
            .flat_map(|(db, keys)| keys.iter().map(|(k, f)| (*db, k.clone(), f.clone())))
            .collect();
        for (db, key, flags) in watched {
            if existed(db, &key) {
                flags.iter().for_each(|f| f.store(true, Ordering::Relaxed));
            }
        }
    }
}

impl Db<'_> {
    /// WATCH: from now on, any write of `keys` (or their expiry) makes the client's EXEC fail.
    pub fn watch(&self, set: &mut WatchSet, keys: &[Bytes]) -> Result<(), Error> {
        let watches = &self.ks.watches;
        // Under the keys' locks, so no write is between noting its watchers and landing. They
        // also keep SWAPDB out, so the stored database is looked up again under them.
        let _guard = self.lock(keys)?;
        let db = self.ks.db(self.number as usize);
        for key in keys {
            if !set.watched.insert((self.number, key.to_vec())) {
                continue;
            }
            // Registered before reading, so that a write in between raises the flag.
            watches
                .by_db
                .lock()
                .entry(db.index)
                .or_default()
                .entry(key.to_vec())
                .or_default()
                .push(set.dirty.clone());
            watches.active.fetch_add(1, Ordering::Relaxed);
            let expire_at = db.live_meta(key);
            // Recorded even if the read failed, so that UNWATCH finds the registration.
            set.keys.push(WatchedKey {
                db: self.number,
                key: key.to_vec(),
                expire_at: expire_at
                    .as_ref()
                    .ok()
                    .and_then(|m| m.as_ref().map(|m| m.expire_at)),
            });
            expire_at?;
        }
        Ok(())
    }
}

impl Keyspace {
    /// UNWATCH (also after EXEC and DISCARD, and when the client leaves).
    pub fn unwatch(&self, set: &mut WatchSet) {
        if !set.keys.is_empty() {
            let mut by_db = self.watches.by_db.lock();
            for watched in set.keys.drain(..) {
                // Under `by_db`, which SWAPDB holds while it moves registrations and the map.
                let stored = self.db_map.stored(watched.db as usize);
                let Some(keys) = by_db.get_mut(&stored) else {
                    continue;
                };
                if let Some(flags) = keys.get_mut(&watched.key) {
                    flags.retain(|f| !Arc::ptr_eq(f, &set.dirty));
                    if flags.is_empty() {
                        keys.remove(&watched.key);
                    }
                }
                self.watches.active.fetch_sub(1, Ordering::Relaxed);
            }
        }
        set.watched.clear();
        set.dirty.store(false, Ordering::Relaxed);
    }

    /// Whether a watched key was written, or expired, since WATCH. EXEC asks with the keys
    /// locked, so the answer holds until it commits.
    pub fn watch_broken(&self, set: &WatchSet) -> bool {
        let now = now_ms();
        set.dirty.load(Ordering::Relaxed)
            || set
                .keys
                .iter()
                .any(|w| w.expire_at.is_some_and(|at| at != 0 && at <= now))
    }

    /// Installs a database map (SWAPDB) and moves the watch registrations with it: a client
    /// watches a key of the database it selected, whichever stored database that names.
    pub(super) fn apply_db_map(&self, map: &[u8]) {
        let mut by_db = self.watches.by_db.lock();
        let moved: HashMap<u8, _> = by_db
            .drain()
            .map(|(stored, keys)| {
                let number = self.db_map.number(stored) as usize;
                (map.get(number).copied().unwrap_or(stored), keys)
            })
            .collect();
        *by_db = moved;
        let changed = self.db_map.apply(map);
        self.ready
            .note_swapped(changed.iter().map(|&number| map[number as usize]).collect());
    }

    /// The keys of a watch set (database number, key), to lock them for EXEC.
    pub fn watched_keys<'a>(&self, set: &'a WatchSet) -> Vec<(u8, &'a [u8])> {
        set.keys.iter().map(|w| (w.db, w.key.as_slice())).collect()
    }
}
