//! Striped per-key locks: commands on one key serialize, commands on different keys run in
//! parallel. Multi-key commands take their stripes in index order, so they cannot deadlock.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{ArcMutexGuard, Mutex, MutexGuard, RawMutex};
use tokio::runtime::{Handle, RuntimeFlavor};

pub const STRIPES: usize = 4096;

/// How long a runtime worker thread waits for a stripe before it hands its other connections
/// to another thread. Waits behind an ordinary command (a hot key) end well within this; a
/// script or EXEC can hold a key for seconds, and every connection sharing the waiting thread
/// would stall with it.
const WAIT_IN_PLACE: Duration = Duration::from_micros(500);

pub struct LockTable {
    /// In `Arc`s so that a transaction can hold stripes without borrowing the table.
    stripes: Box<[Arc<Mutex<()>>]>,
    hasher: std::collections::hash_map::RandomState,
}

/// Held stripes; released on drop.
pub struct KeyGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl KeyGuard<'_> {
    /// A guard holding nothing, for callers whose transaction already holds the stripes.
    pub fn held_elsewhere() -> Self {
        KeyGuard {
            _guards: Vec::new(),
        }
    }
}

/// One stripe held by a transaction.
pub type StripeGuard = ArcMutexGuard<RawMutex, ()>;

impl Default for LockTable {
    fn default() -> Self {
        LockTable {
            stripes: (0..STRIPES).map(|_| Arc::new(Mutex::new(()))).collect(),
            hasher: Default::default(),
        }
    }
}

impl LockTable {
    pub fn stripe(&self, db: u8, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write_u8(db);
        h.write(key);
        (h.finish() as usize) % STRIPES
    }

    /// Locks the stripes of `keys` in `db`, in ascending stripe order.
    ///
    /// These are `parking_lot` mutexes, not tokio's: they are held only across synchronous
    /// storage calls, never across an `.await`.
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, db: u8, keys: &[K]) -> KeyGuard<'a> {
        let indexes: Vec<usize> = keys.iter().map(|k| self.stripe(db, k.as_ref())).collect();
        self.lock_stripes(indexes)
    }

    /// Locks keys that live in different databases (MOVE, COPY ... DB).
    pub fn lock_across<'a>(&'a self, keys: &[(u8, &[u8])]) -> KeyGuard<'a> {
        let indexes: Vec<usize> = keys.iter().map(|(db, k)| self.stripe(*db, k)).collect();
        self.lock_stripes(indexes)
    }

    /// Locks every stripe: for FLUSHDB/FLUSHALL, which must not interleave with any write.
    pub fn lock_all(&self) -> KeyGuard<'_> {
        self.lock_stripes((0..STRIPES).collect())
    }

    fn lock_stripes(&self, mut indexes: Vec<usize>) -> KeyGuard<'_> {
        indexes.sort_unstable();
        indexes.dedup();
        KeyGuard {
            _guards: indexes
                .into_iter()
                .map(|i| {
                    let stripe = &self.stripes[i];
                    stripe
                        .try_lock_for(WAIT_IN_PLACE)
                        .unwrap_or_else(|| off_worker(|| stripe.lock()))
                })
                .collect(),
        }
    }

    /// Locks one stripe for a transaction, waiting without limit (callers go in index order).
    pub fn hold(&self, index: usize) -> StripeGuard {
        let stripe = &self.stripes[index];
        stripe
            .try_lock_arc_for(WAIT_IN_PLACE)
            .unwrap_or_else(|| off_worker(|| stripe.lock_arc()))
    }

    /// Locks one stripe for a transaction that may already hold higher ones: waits at most
    /// `timeout`, so that two transactions locking in opposite orders cannot deadlock.
    pub fn try_hold(&self, index: usize, timeout: Duration) -> Option<StripeGuard> {
        let stripe = &self.stripes[index];
        let in_place = WAIT_IN_PLACE.min(timeout);
        stripe
            .try_lock_arc_for(in_place)
            .or_else(|| off_worker(|| stripe.try_lock_arc_for(timeout - in_place)))
    }
}

/// Runs a wait that may be long without stalling the other tasks of the calling runtime
/// worker: they move to another thread first (about 100 µs), one taken from the runtime's
/// blocking pool, which `main` sizes for every client to wait at once. Outside a
/// multi-threaded runtime (tests, the cron thread) it simply waits.
pub fn off_worker<T>(wait: impl FnOnce() -> T) -> T {
    let on_worker =
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    if on_worker {
        tokio::task::block_in_place(wait)
    } else {
        wait()
    }
}
