//! Striped per-key locks: commands on one key serialize, commands on different keys run in
//! parallel. Multi-key commands take their stripes in index order, so they cannot deadlock.
//!
//! A stripe can be waited for in two ways: by a thread (the type layer's own locking, the
//! cron, transactions) or by a task ([`LockTable::hold_async`], which connections use before a
//! write command). A task waiting for a hot key leaves its worker free for other connections.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{ArcMutexGuard, Mutex, MutexGuard, RawMutex};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Notify;

/// Key locks: fifty clients' MSETs of 32 keys hold 1,600 stripes at once, and among 4,096
/// nearly every one of them waited behind another (docs/design.md, "Writes").
pub const STRIPES: usize = 16384;

/// How long a runtime worker thread waits for a stripe before it hands its other connections
/// to another thread. Waits behind an ordinary command (a hot key) end well within this; a
/// script or EXEC can hold a key for seconds, and every connection sharing the waiting thread
/// would stall with it.
const WAIT_IN_PLACE: Duration = Duration::from_micros(500);

pub struct LockTable {
    /// In `Arc`s so that a transaction or a connection can hold stripes without borrowing the
    /// table.
    stripes: Box<[Arc<Mutex<()>>]>,
    /// Per stripe, wakes the tasks waiting for it in [`LockTable::hold_async`]; every release
    /// notifies.
    released: Arc<[Notify]>,
    hasher: std::collections::hash_map::RandomState,
}

/// Held stripes; released on drop.
pub struct KeyGuard<'a> {
    released: &'a [Notify],
    guards: Vec<(usize, MutexGuard<'a, ()>)>,
}

impl KeyGuard<'_> {
    /// A guard holding nothing, for callers whose transaction or command already holds the
    /// stripes.
    pub fn held_elsewhere() -> Self {
        KeyGuard {
            released: &[],
            guards: Vec::new(),
        }
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        for (index, guard) in self.guards.drain(..) {
            drop(guard);
            self.released[index].notify_one();
        }
    }
}

/// One stripe held by a transaction or by a connection for its next command.
pub struct StripeGuard {
    index: usize,
    guard: Option<ArcMutexGuard<RawMutex, ()>>,
    released: Arc<[Notify]>,
}

impl Drop for StripeGuard {
    fn drop(&mut self) {
        self.guard.take();
        self.released[self.index].notify_one();
    }
}

/// The stripes of a command's keys, taken by its connection before the command runs, so that
/// waiting for a busy key suspends the connection's task instead of blocking its thread. The
/// command's own locking then finds them held.
pub struct HeldStripes {
    /// In ascending stripe order.
    stripes: Vec<StripeGuard>,
}

impl HeldStripes {
    /// The guards, with their stripe indexes, for a transaction that takes them over.
    pub(super) fn into_guards(self) -> impl Iterator<Item = (usize, StripeGuard)> {
        self.stripes.into_iter().map(|held| (held.index, held))
    }

    fn covers(&self, index: usize) -> bool {
        self.stripes
            .binary_search_by_key(&index, |held| held.index)
            .is_ok()
    }
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable {
            stripes: (0..STRIPES).map(|_| Arc::new(Mutex::new(()))).collect(),
            released: (0..STRIPES).map(|_| Notify::new()).collect(),
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

    /// Locks the stripes of `keys` (database, key), in ascending stripe order.
    ///
    /// These are `parking_lot` mutexes, not tokio's: a [`KeyGuard`] is held only across
    /// synchronous storage calls, never across an `.await` (only [`HeldStripes`] are, while
    /// their connection waits for its next stripe).
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
            released: &self.released,
            guards: indexes
                .into_iter()
                .map(|i| (i, lock_off_worker(&self.stripes[i])))
                .collect(),
        }
    }

    /// Locks the stripes `indexes` that `held` lacks, for a command that locks more keys than
    /// its connection took for it. Those may lie below held ones, so each wait is bounded by
    /// `timeout` to rule out deadlock; `None` if one did not come free in time.
    pub fn lock_beyond(
        &self,
        held: &HeldStripes,
        mut indexes: Vec<usize>,
        timeout: Duration,
    ) -> Option<KeyGuard<'_>> {
        indexes.retain(|&i| !held.covers(i));
        indexes.sort_unstable();
        indexes.dedup();
        let mut guard = KeyGuard {
            released: &self.released,
            guards: Vec::with_capacity(indexes.len()),
        };
        for i in indexes {
            let stripe = &self.stripes[i];
            let locked = wait_bounded(timeout, |limit| stripe.try_lock_for(limit))?;
            guard.guards.push((i, locked));
        }
        Some(guard)
    }

    /// Locks one stripe for a transaction, waiting without limit (callers go in index order).
    pub fn hold(&self, index: usize) -> StripeGuard {
        let stripe = &self.stripes[index];
        let guard = stripe
            .try_lock_arc_for(WAIT_IN_PLACE)
            .unwrap_or_else(|| off_worker(|| stripe.lock_arc()));
        self.stripe_guard(index, guard)
    }

    /// Locks one stripe for a transaction that may already hold higher ones: waits at most
    /// `timeout`, so that two transactions locking in opposite orders cannot deadlock.
    pub fn try_hold(&self, index: usize, timeout: Duration) -> Option<StripeGuard> {
        let stripe = &self.stripes[index];
        let guard = wait_bounded(timeout, |limit| stripe.try_lock_arc_for(limit))?;
        Some(self.stripe_guard(index, guard))
    }

    /// Locks one stripe if it is free.
    pub fn try_hold_now(&self, index: usize) -> Option<StripeGuard> {
        let guard = self.stripes[index].try_lock_arc()?;
        Some(self.stripe_guard(index, guard))
    }

    /// Takes `indexes` in ascending order, suspending the calling task (not its thread) while
    /// a stripe is busy.
    pub async fn hold_async(&self, mut indexes: Vec<usize>) -> HeldStripes {
        indexes.sort_unstable();
        indexes.dedup();
        let mut stripes = Vec::with_capacity(indexes.len());
        for index in indexes {
            stripes.push(self.hold_one_async(index).await);
        }
        HeldStripes { stripes }
    }

    async fn hold_one_async(&self, index: usize) -> StripeGuard {
        let stripe = &self.stripes[index];
        loop {
            if let Some(guard) = stripe.try_lock_arc() {
                return self.stripe_guard(index, guard);
            }
            // Registered before the second try, so a release in between is not missed.
            let released = self.released[index].notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(guard) = stripe.try_lock_arc() {
                return self.stripe_guard(index, guard);
            }
            released.await;
        }
    }

    fn stripe_guard(&self, index: usize, guard: ArcMutexGuard<RawMutex, ()>) -> StripeGuard {
        StripeGuard {
            index,
            guard: Some(guard),
            released: self.released.clone(),
        }
    }
}

/// Locks `mutex` the way stripes are locked: in place for a moment, then off the worker. For
/// mutexes that a thread may hold while it waits for a stripe.
pub fn lock_off_worker<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .try_lock_for(WAIT_IN_PLACE)
        .unwrap_or_else(|| off_worker(|| mutex.lock()))
}

/// A wait of at most `timeout`, made as stripe waits are: `try_for` in place for a moment, then
/// for the rest of the time off the worker.
fn wait_bounded<G>(timeout: Duration, try_for: impl Fn(Duration) -> Option<G>) -> Option<G> {
    let in_place = WAIT_IN_PLACE.min(timeout);
    try_for(in_place).or_else(|| off_worker(|| try_for(timeout - in_place)))
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
