//! Transactions: EXEC and scripts run many commands as one.
//!
//! A transaction locks the keys it declares before its first command and every other key the
//! moment a command touches it, and holds them all to the end. Its commands write into an
//! [`Overlay`], so each reads what the earlier ones wrote, and [`Keyspace::commit`] writes
//! everything as one atomic batch. Other clients see the state before or after it, never in
//! between, and only clients of the same keys wait: there is no server-wide lock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use shale_storage::{Engine, Overlay};

use super::locks::{HeldStripes, StripeGuard, STRIPES};
use super::{Change, KeyRange, Keyspace};
use crate::error::Error;

/// How long a transaction (or command) waits for a key it did not declare before giving up.
/// Waiting longer could deadlock: another client may hold that key while waiting for one of
/// ours.
pub(super) const UNDECLARED_KEY_WAIT: Duration = Duration::from_secs(2);

pub(super) const KEY_LOCKED_ELSEWHERE: &str =
    "a key is locked by another client (possible deadlock): a transaction or script should declare every key up front";

pub struct Transaction {
    pub(super) overlay: Overlay,
    /// Counter changes of the staged writes (their batch lives in the overlay).
    pub(super) pending: Mutex<Change>,
    held: Mutex<BTreeMap<usize, StripeGuard>>,
    /// Ranges that FLUSHDB/FLUSHALL deleted, to compact after the commit (and whether a
    /// SYNC flush waits for it).
    reclaims: Mutex<(Vec<KeyRange>, bool)>,
    /// The database map after a SWAPDB of this transaction: its later commands use it, and
    /// the commit installs it.
    pub(super) db_map: Mutex<Option<Vec<u8>>>,
    /// Set when one of its commands failed with a panic: what it staged may be half done, so
    /// nothing of the transaction commits.
    poisoned: AtomicBool,
}

impl Transaction {
    /// Marks the transaction as one that must not commit (a command of it panicked).
    pub fn poison(&self) {
        self.poisoned.store(true, Ordering::Relaxed);
    }

    fn check_not_poisoned(&self) -> Result<(), Error> {
        match self.poisoned.load(Ordering::Relaxed) {
            true => Err(Error::msg(
                "internal error: a command of the transaction failed; nothing was written",
            )),
            false => Ok(()),
        }
    }
}

impl Keyspace {
    /// Starts a transaction holding the locks of `keys` (database number, key).
    pub fn begin(&self, keys: &[(u8, &[u8])]) -> Result<Transaction, Error> {
        loop {
            let generation = self.db_map.generation();
            let txn = self.transaction_holding(BTreeMap::new());
            let stored: Vec<(u8, &[u8])> = keys
                .iter()
                .map(|&(db, key)| (self.db_map.stored(db as usize), key))
                .collect();
            // Nothing is held yet, so this locks in ascending order and waits as long as needed.
            self.hold_in(&txn, &stored)?;
            // A SWAPDB while this waited: the locks are those of the other stored database.
            if self.db_map.generation() == generation {
                return Ok(txn);
            }
        }
    }

    /// Starts a transaction that takes over `held`, the stripes a connection locked for it.
    pub fn begin_holding(&self, held: HeldStripes) -> Transaction {
        self.transaction_holding(held.into_guards().collect())
    }

    fn transaction_holding(&self, held: BTreeMap<usize, StripeGuard>) -> Transaction {
        Transaction {
            overlay: Overlay::new(self.engine.clone()),
            pending: Mutex::new(Change::default()),
            held: Mutex::new(held),
            reclaims: Mutex::default(),
            db_map: Mutex::default(),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Writes everything the transaction staged as one batch. Its locks are released when it
    /// is dropped.
    pub fn commit(&self, txn: &Transaction) -> Result<(), Error> {
        self.check_open()?;
        txn.check_not_poisoned()?;
        let previous = self.install_db_map(txn);
        let written = self.write(txn.take_change());
        self.restore_db_map_unless(written.is_ok(), previous);
        written
    }

    /// [`Keyspace::commit`] for connections, which share storage writes (see
    /// [`Keyspace::write_combined`]).
    pub async fn commit_combined(&self, txn: &Transaction) -> Result<(), Error> {
        self.check_open()?;
        txn.check_not_poisoned()?;
        let previous = self.install_db_map(txn);
        let written = self.write_combined(txn.take_change()).await;
        self.restore_db_map_unless(written.is_ok(), previous);
        written
    }

    /// Installs the database map of a SWAPDB that `txn` ran, under its locks (it holds them
    /// all), before its batch is written: watchers then find the batch's keys under the
    /// numbers they name after the swap. Returns the map it replaced.
    fn install_db_map(&self, txn: &Transaction) -> Option<Vec<u8>> {
        let map = txn.db_map.lock().take()?;
        let previous = self.db_map.current();
        self.apply_db_map(&map);
        Some(previous)
    }

    fn restore_db_map_unless(&self, written: bool, previous: Option<Vec<u8>>) {
        if let (false, Some(previous)) = (written, previous) {
            self.apply_db_map(&previous);
        }
    }

    /// Makes sure `txn` holds the stripes of `keys`, locking the missing ones.
    pub(super) fn hold_in(&self, txn: &Transaction, keys: &[(u8, &[u8])]) -> Result<(), Error> {
        let stripes: Vec<usize> = keys
            .iter()
            .map(|(db, key)| self.locks.stripe(*db, key))
            .collect();
        self.hold_stripes(txn, stripes)
    }

    /// Takes the stripes of `keys` in `db` that `txn` lacks if they are free right now, in any
    /// order; returns whether it holds them all. It never waits, so a transaction that grows
    /// command by command (a pipeline's writes) cannot deadlock; stripes taken before a busy
    /// one stay held until the transaction ends.
    pub fn try_hold_in(&self, txn: &Transaction, db: usize, keys: &[&[u8]]) -> bool {
        let db = self.db_map.stored(db);
        let mut held = txn.held.lock();
        for key in keys {
            let index = self.locks.stripe(db, key);
            if held.contains_key(&index) {
                continue;
            }
            match self.locks.try_hold_now(index) {
                Some(guard) => held.insert(index, guard),
                None => return false,
            };
        }
        true
    }

    /// Makes sure `txn` holds every stripe (FLUSHDB and FLUSHALL inside a transaction).
    pub(super) fn hold_all_in(&self, txn: &Transaction) -> Result<(), Error> {
        self.hold_stripes(txn, (0..STRIPES).collect())
    }

    fn hold_stripes(&self, txn: &Transaction, mut stripes: Vec<usize>) -> Result<(), Error> {
        stripes.sort_unstable();
        stripes.dedup();
        let mut held = txn.held.lock();
        for index in stripes {
            if held.contains_key(&index) {
                continue;
            }
            let guard = match held.last_key_value() {
                // Above everything held: the usual ascending order, which cannot deadlock.
                Some((&highest, _)) if highest > index => self
                    .locks
                    .try_hold(index, UNDECLARED_KEY_WAIT)
                    .ok_or_else(|| Error::msg(KEY_LOCKED_ELSEWHERE))?,
                _ => self.locks.hold(index),
            };
            held.insert(index, guard);
        }
        Ok(())
    }
}

impl Transaction {
    /// Everything staged so far, as one change.
    fn take_change(&self) -> Change {
        let mut change = std::mem::take(&mut *self.pending.lock());
        change.batch = self.overlay.take_batch();
        change
    }

    /// Stages one command's writes.
    pub(super) fn stage(&self, mut change: Change) -> Result<(), Error> {
        self.overlay.write(std::mem::take(&mut change.batch))?;
        self.pending.lock().append(change);
        Ok(())
    }

    pub fn reclaim_after_commit(&self, ranges: Vec<KeyRange>, wait: bool) {
        let mut reclaims = self.reclaims.lock();
        reclaims.0.extend(ranges);
        reclaims.1 |= wait;
    }

    /// The ranges to compact now that the transaction committed, and whether to wait.
    pub fn take_reclaims(&self) -> (Vec<KeyRange>, bool) {
        std::mem::take(&mut *self.reclaims.lock())
    }

    /// The key count of `db` as this transaction will leave it, given the committed count.
    pub(super) fn adjusted_count(&self, db: u8, committed: i64, expiring: bool) -> i64 {
        self.pending.lock().adjusted(db, committed, expiring)
    }
}
