//! The keyspace core beneath the Redis types: databases over the storage engine and what
//! coordinates access to them. [`Keyspace`] holds the engine and the in-process state (key
//! locks, counters, watches, blocked-key readiness, versions, cursors, the database map, the
//! access clock); a [`Db`] is one database as a command sees it, with the core operations every
//! type builds on: lock keys, read metadata, stage a [`Change`] and write it. The types
//! (`crate::types`) add their operations to [`Db`], one file each.
//!
//! Every write follows the same shape: lock the keys, read their metadata, stage the changes
//! in one batch (through [`Db::stage_replace`], which keeps the key counters, the expiry index
//! and old elements in step), and write the batch.

mod access;
mod change;
pub mod combine;
mod cursor;
mod databases;
pub mod expiry;
mod libraries;
mod locks;
mod ready;
mod replica;
pub(crate) mod sampling;
mod slot_moves;
mod transaction;
mod version;
mod watch;
mod writes;
mod written;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use shale_storage::keys as k;
use shale_storage::metadata::{Body, KeyKind, Metadata};
use shale_storage::{Cf, Engine, ReadAhead, ScanDirection, WriteBatch};

pub use access::AccessClock;
pub(crate) use change::Change;
pub use cursor::CursorTable;
pub use libraries::LibraryEdit;
pub use locks::{lock_off_worker, off_worker, HeldStripes, KeyGuard, LockTable, STRIPES};
pub use ready::ReadyKeys;
pub use replica::ReplicaMode;
pub use slot_moves::{SlotMoves, FORBIDDEN};
pub use transaction::Transaction;
pub use version::VersionGenerator;
pub use watch::WatchSet;
use writes::StorageWrites;
pub use written::{WrittenKey, WrittenKeys};

use crate::error::Error;
use sampling::Sampling;
use transaction::{KEY_LOCKED_ELSEWHERE, UNDECLARED_KEY_WAIT};

/// A range of raw keys, `[start, end)`, that a flush deleted and compaction should reclaim.
pub type KeyRange = (Vec<u8>, Vec<u8>);

/// Collections up to this size are deleted element by element, larger ones by range deletes.
const POINT_DELETE_LIMIT: u64 = 128;

/// Counters that INFO reports.
#[derive(Default)]
pub struct KeyspaceStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub expired: AtomicU64,
}

/// All databases: the engine plus the in-process state that coordinates access to it.
pub struct Keyspace {
    engine: Arc<dyn Engine>,
    locks: LockTable,
    databases: usize,
    pub(crate) cursors: CursorTable,
    /// Per database, a time below which the expiry index holds nothing due (see `expiry`).
    expiry_watermarks: Vec<AtomicU64>,
    pub(crate) versions: VersionGenerator,
    /// Per database: keys, and keys with an expiry. The merge-operator counters on disk are
    /// the durable copy, read once at start; these answer DBSIZE without resolving merges.
    key_counts: Vec<AtomicI64>,
    expire_counts: Vec<AtomicI64>,
    /// Serializes DBSIZE's "counter minus due expiries" with the writes that remove a due
    /// expiry entry and decrement the counter, so DBSIZE never sees one without the other.
    /// Only such writes (the reaper, overwrites of expired keys) take it.
    pub(crate) due_expiry_lock: Mutex<()>,
    storage_writes: StorageWrites,
    /// What random sampling knows about large collections (see `sampling`).
    pub(crate) sampling: Sampling,
    watches: watch::Watches,
    /// Lists and sorted sets that writes filled while clients block on them.
    pub ready: ReadyKeys,
    pub stats: KeyspaceStats,
    /// Bytes of LCS tables that running commands hold (see `lcs`).
    pub(crate) lcs_tables: AtomicUsize,
    /// When each key was last read or written (OBJECT IDLETIME).
    pub access: AccessClock,
    /// Set at shutdown: transactions no longer commit.
    closed: AtomicBool,
    /// Set while this server replicates a master (see `replica`).
    replica: AtomicU8,
    /// Which stored database each database number names (SWAPDB).
    db_map: databases::DbMap,
    /// Changes to the stored function libraries (see `libraries`).
    library_changes: AtomicU64,
    /// Writes to slots moving to another node (cluster mode).
    pub slot_moves: SlotMoves,
}

impl Keyspace {
    pub fn open(engine: Arc<dyn Engine>, databases: usize) -> Result<Keyspace, Error> {
        let load = |key: fn(u8) -> Vec<u8>| -> Result<Vec<AtomicI64>, Error> {
            (0..databases)
                .map(|db| {
                    Ok(AtomicI64::new(read_counter(
                        engine.as_ref(),
                        &key(db as u8),
                    )?))
                })
                .collect()
        };
        let db_map = databases::DbMap::load(engine.as_ref(), databases)?;
        Ok(Keyspace {
            key_counts: load(k::key_count_key)?,
            expire_counts: load(k::expire_count_key)?,
            due_expiry_lock: Mutex::new(()),
            storage_writes: StorageWrites::new(),
            sampling: Default::default(),
            versions: VersionGenerator::open(engine.clone())?,
            engine,
            locks: LockTable::default(),
            databases,
            cursors: CursorTable::default(),
            expiry_watermarks: (0..databases).map(|_| AtomicU64::new(0)).collect(),
            watches: Default::default(),
            ready: Default::default(),
            stats: KeyspaceStats::default(),
            lcs_tables: AtomicUsize::new(0),
            access: AccessClock::default(),
            closed: AtomicBool::new(false),
            replica: AtomicU8::new(ReplicaMode::None as u8),
            db_map,
            library_changes: AtomicU64::new(0),
            slot_moves: SlotMoves::default(),
        })
    }

    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_ref()
    }

    /// An empty [`ReadAhead`] over the engine, for a run of pipelined reads.
    pub fn read_ahead(&self) -> ReadAhead {
        ReadAhead::new(self.engine.clone())
    }

    /// Refuses the commit of every transaction (EXEC, scripts) from now on: at shutdown, the
    /// ones still running commit nothing after the last WAL sync, and none half.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }

    fn check_open(&self) -> Result<(), Error> {
        match self.closed.load(Ordering::Relaxed) {
            true => Err(Error::msg("the server is shutting down")),
            false => Ok(()),
        }
    }

    pub fn databases(&self) -> usize {
        self.databases
    }

    /// A handle on database `index`, which the caller has checked against [`Self::databases`].
    pub fn db(&self, index: usize) -> Db<'_> {
        self.db_in(index, None, None, None)
    }

    /// A handle on database `index` whose commands run inside `txn`, if there is one, report
    /// the keys they write to `written`, if given, and find the stripes in `held` locked.
    /// Database numbers are the ones clients select; the handle works on the stored database
    /// that the number names now (see `databases`).
    pub fn db_in<'a>(
        &'a self,
        index: usize,
        txn: Option<&'a Transaction>,
        written: Option<&'a WrittenKeys>,
        held: Option<&'a HeldStripes>,
    ) -> Db<'a> {
        let stored = txn
            .and_then(|txn| txn.db_map.lock().as_ref().map(|map| map[index]))
            .unwrap_or_else(|| self.db_map.stored(index));
        Db {
            ks: self,
            index: stored,
            number: index as u8,
            txn,
            written,
            held,
            read_ahead: None,
            counts_lookups: false,
        }
    }

    /// The number clients select for stored database `stored` (the first byte of its keys).
    /// The stored database that database `number` names (see `databases`).
    pub fn stored_db(&self, number: usize) -> u8 {
        self.db_map.stored(number)
    }

    pub fn db_number(&self, stored: u8) -> u8 {
        self.db_map.number(stored)
    }

    /// The lock stripe that all of `keys` in database `db` fall in, if they share one.
    pub fn shared_stripe(&self, db: usize, keys: &[&[u8]]) -> Option<usize> {
        let db = self.db_map.stored(db);
        let (first, rest) = keys.split_first()?;
        let stripe = self.locks.stripe(db, first);
        rest.iter()
            .all(|key| self.locks.stripe(db, key) == stripe)
            .then_some(stripe)
    }

    /// Takes the stripes of `keys` in database `db` for one command, suspending the task (not
    /// the thread) while another client holds one; pass them to [`Keyspace::db_in`].
    pub async fn hold_for_command(&self, db: usize, keys: &[&[u8]]) -> HeldStripes {
        loop {
            let generation = self.db_map.generation();
            let stored = self.db_map.stored(db);
            let stripes = keys.iter().map(|k| self.locks.stripe(stored, k)).collect();
            let held = self.locks.hold_async(stripes).await;
            // A SWAPDB while this waited: the stripes are those of the other stored database.
            if self.db_map.generation() == generation {
                return held;
            }
        }
    }

    /// [`Keyspace::db_number`] for a key written in `txn`, which may have swapped databases.
    pub fn db_number_in(&self, stored: u8, txn: Option<&Transaction>) -> u8 {
        let pending = txn.and_then(|txn| txn.db_map.lock().clone());
        match pending {
            Some(map) => map
                .iter()
                .position(|&s| s == stored)
                .map_or(stored, |n| n as u8),
            None => self.db_map.number(stored),
        }
    }

    /// [`Keyspace::hold_for_command`] for a command whose keys all lie in `stripe` (see
    /// [`Keyspace::shared_stripe`]).
    pub async fn hold_stripe(&self, stripe: usize) -> HeldStripes {
        self.locks.hold_async(vec![stripe]).await
    }
}

/// One database: where every command's semantics run.
#[derive(Clone, Copy)]
pub struct Db<'a> {
    pub(crate) ks: &'a Keyspace,
    /// The stored database: the first byte of its keys.
    pub(crate) index: u8,
    /// The database number the client selected.
    pub(crate) number: u8,
    /// Inside a transaction, reads and writes go through its overlay and locks.
    pub(crate) txn: Option<&'a Transaction>,
    /// Where the keys of each write are reported, for keyspace notifications.
    pub(crate) written: Option<&'a WrittenKeys>,
    /// Stripes the command's connection locked before it ran.
    pub(crate) held: Option<&'a HeldStripes>,
    /// Records a pipeline's reads were batched into, outside transactions.
    pub(crate) read_ahead: Option<&'a ReadAhead>,
    /// Whether lookups count as keyspace hits and misses: a command that reads keys, as
    /// Redis's `lookupKeyRead` counts and `lookupKeyWrite` does not.
    pub(crate) counts_lookups: bool,
}

thread_local! {
    /// Set while a Redis master's writes run on this replica ([`as_redis_replica`]).
    static EXPIRY_STOPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The time keys expire by, in Unix milliseconds: zero while a Redis master's writes run here
/// (see [`as_redis_replica`]).
pub fn now_ms() -> u64 {
    if EXPIRY_STOPPED.get() {
        return 0;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs `f` as a Redis replica runs its master's commands and snapshot: no key counts as
/// expired, so a key whose time ran out here but not yet on the master (which removes it
/// with a DEL of its own) is still there for a PERSIST or an EXPIRE that extends it. Clients
/// of the replica still see such keys as gone. The master's stream carries absolute times
/// only (Redis 7.0 rewrites EX, EXPIRE and their kin to PXAT and PEXPIREAT), so nothing
/// computes an expiry from the stopped clock.
pub fn as_redis_replica<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            EXPIRY_STOPPED.set(self.0);
        }
    }
    let _restore = Restore(EXPIRY_STOPPED.replace(true));
    f()
}

impl<'a> Db<'a> {
    pub fn index(&self) -> usize {
        self.index as usize
    }

    pub(crate) fn engine(&self) -> &'a dyn Engine {
        match (self.txn, self.read_ahead) {
            (Some(txn), _) => &txn.overlay,
            (None, Some(ahead)) => ahead,
            (None, None) => self.ks.engine.as_ref(),
        }
    }

    /// This database, reading first what `ahead` read in advance.
    pub fn reading_ahead(self, ahead: &'a ReadAhead) -> Db<'a> {
        Db {
            read_ahead: Some(ahead),
            ..self
        }
    }

    /// The same handle, its lookups counted as keyspace hits and misses or not (see
    /// `counts_lookups`).
    pub fn counting_lookups(self, counts_lookups: bool) -> Db<'a> {
        Db {
            counts_lookups,
            ..self
        }
    }

    /// The same handle, its lookups not counted: for reading a key's parts again after the
    /// command's own lookup counted (DUMP), and for what Redis finds without a lookup.
    pub(crate) fn uncounted(self) -> Db<'a> {
        self.counting_lookups(false)
    }

    pub(crate) fn lock<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<KeyGuard<'a>, Error> {
        let keys: Vec<(u8, &[u8])> = keys.iter().map(|k| (self.index, k.as_ref())).collect();
        self.lock_across(&keys)
    }

    /// Locks keys of several databases (MOVE, COPY ... DB).
    pub(crate) fn lock_across(&self, keys: &[(u8, &[u8])]) -> Result<KeyGuard<'a>, Error> {
        let locks = &self.ks.locks;
        match (self.txn, self.held) {
            (Some(txn), _) => {
                self.ks.hold_in(txn, keys)?;
                Ok(KeyGuard::held_elsewhere())
            }
            (None, Some(held)) => {
                let stripes = keys.iter().map(|(db, k)| locks.stripe(*db, k)).collect();
                self.lock_beyond(held, stripes)
            }
            (None, None) => Ok(locks.lock_across(keys)),
        }
    }

    /// Locks every key of every database (FLUSHDB, FLUSHALL).
    pub(crate) fn lock_all(&self) -> Result<KeyGuard<'a>, Error> {
        match (self.txn, self.held) {
            (Some(txn), _) => {
                self.ks.hold_all_in(txn)?;
                Ok(KeyGuard::held_elsewhere())
            }
            (None, Some(held)) => self.lock_beyond(held, (0..locks::STRIPES).collect()),
            (None, None) => Ok(self.ks.locks.lock_all()),
        }
    }

    /// Locks what a command needs beyond the stripes its connection took for it.
    fn lock_beyond(&self, held: &HeldStripes, stripes: Vec<usize>) -> Result<KeyGuard<'a>, Error> {
        self.ks
            .locks
            .lock_beyond(held, stripes, UNDECLARED_KEY_WAIT)
            .ok_or_else(|| Error::msg(KEY_LOCKED_ELSEWHERE))
    }

    /// The stored metadata of `key`, even if it has expired but is not yet reaped.
    pub(crate) fn raw_meta(&self, key: &[u8]) -> Result<Option<Metadata>, Error> {
        match self.engine().get(Cf::Meta, &k::meta_key(self.index, key))? {
            Some(raw) => Ok(Some(Metadata::decode(raw)?)),
            None => Ok(None),
        }
    }

    /// [`Db::raw_meta`] of many keys, in one batched read.
    pub(crate) fn raw_metas<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> Result<Vec<Option<Metadata>>, Error> {
        let raw_keys: Vec<Vec<u8>> = keys
            .iter()
            .map(|key| k::meta_key(self.index, key.as_ref()))
            .collect();
        self.engine()
            .multi_get(Cf::Meta, &raw_keys)?
            .into_iter()
            .map(|raw| raw.map(Metadata::decode).transpose().map_err(Error::from))
            .collect()
    }

    /// The metadata of `key` if it exists and has not expired: the lookup every command that
    /// reads a key makes, counted as a hit or a miss when the handle counts lookups.
    pub(crate) fn live_meta(&self, key: &[u8]) -> Result<Option<Metadata>, Error> {
        let meta = self.raw_meta(key)?.filter(|m| !m.is_expired(now_ms()));
        self.record_lookup(meta.is_some());
        Ok(meta)
    }

    /// Live metadata that must be of `kind`, else `WRONGTYPE`.
    pub(crate) fn typed_meta(&self, key: &[u8], kind: KeyKind) -> Result<Option<Metadata>, Error> {
        match self.live_meta(key)? {
            Some(m) if m.kind != kind => Err(Error::WrongType),
            other => Ok(other),
        }
    }

    /// Stages the replacement of `key`'s stored metadata `old` (live or expired) by `new`
    /// (`None` deletes the key): the metadata itself, the expiry index, the key counters, and
    /// deletes for the elements of an old collection version that `new` does not carry on.
    pub(crate) fn stage_replace(
        &self,
        change: &mut Change,
        key: &[u8],
        old: Option<&Metadata>,
        new: Option<&Metadata>,
    ) -> Result<(), Error> {
        if let Some(Body::Collection { version, size, .. }) = old.map(|m| &m.body) {
            let has_records = !old.is_some_and(Metadata::holds_no_records);
            if has_records && new.and_then(Metadata::version) != Some(*version) {
                self.stage_element_deletes(&mut change.batch, key, *version, *size)?;
            }
        }
        self.stage_metadata(change, key, old, new);
        Ok(())
    }

    /// The metadata part of [`Db::stage_replace`], for callers whose own batch already removes
    /// every element of `old`.
    pub(crate) fn stage_metadata(
        &self,
        change: &mut Change,
        key: &[u8],
        old: Option<&Metadata>,
        new: Option<&Metadata>,
    ) {
        let db = self.index;
        let batch = &mut change.batch;
        let mut removes_due_expiry = false;
        let old_expiry = old.map_or(0, |m| m.expire_at);
        let new_expiry = new.map_or(0, |m| m.expire_at);
        if old_expiry != new_expiry {
            removes_due_expiry = old_expiry != 0 && old_expiry <= now_ms();
            if old_expiry != 0 {
                batch.delete(Cf::Expire, k::expire_key(db, old_expiry, key));
            }
            if new_expiry != 0 {
                batch.put(Cf::Expire, k::expire_key(db, new_expiry, key), Vec::new());
            }
        }
        if let (Some(written), Some(_)) = (self.written, new) {
            if old.is_none_or(|m| m.is_expired(now_ms())) {
                written.note_created(db, key);
            }
        }
        match new {
            Some(meta) => batch.put(Cf::Meta, k::meta_key(db, key), meta.encode()),
            None => batch.delete(Cf::Meta, k::meta_key(db, key)),
        }
        let delta = |f: fn(&Metadata) -> bool| {
            new.map_or(0, |m| f(m) as i64) - old.map_or(0, |m| f(m) as i64)
        };
        change.removes_due_expiry |= removes_due_expiry;
        change.count(db, delta(|_| true), delta(|m| m.expire_at != 0));
    }

    /// Writes a command's changes atomically, then updates the in-memory counters; inside a
    /// transaction, stages them for its commit.
    pub(crate) fn write(&self, change: Change) -> Result<(), Error> {
        if let Some(written) = self.written {
            written.note(&change.batch);
        }
        match self.txn {
            Some(txn) => txn.stage(change),
            None => self.ks.write(change),
        }
    }

    /// The number of keys (or of keys with an expiry) in this database, counting the staged
    /// writes of the transaction.
    pub(crate) fn counted(&self, expiring: bool) -> i64 {
        let counters = if expiring {
            &self.ks.expire_counts
        } else {
            &self.ks.key_counts
        };
        let committed = counters[self.index()].load(Ordering::Relaxed);
        match self.txn {
            Some(txn) => txn.adjusted_count(self.index, committed, expiring),
            None => committed,
        }
    }

    /// Deletes every element of one collection version, which is gone, in every element
    /// family. Reads never walk over them afterwards: they are bounded by the `key|version`
    /// prefix of a live version. Small collections get point deletes; large ones one range
    /// delete per family, which is O(1) however large the collection (too many range tombstones
    /// in a memtable would slow every read, so they are kept for collections where they pay
    /// off), and which leaves the record caches as they are, as no read asks for the version.
    fn stage_element_deletes(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        version: u64,
        size: u64,
    ) -> Result<(), Error> {
        let prefix = k::element_prefix(self.index, key, version);
        let end = k::prefix_end(&prefix);
        if size <= POINT_DELETE_LIMIT {
            for cf in [Cf::Data, Cf::Score] {
                self.engine()
                    .scan(cf, &prefix, &end, ScanDirection::Forward, &mut |raw, _| {
                        batch.delete(cf, raw.to_vec());
                        true
                    })?;
            }
        } else {
            batch.delete_unreachable_range(Cf::Data, prefix.clone(), end.clone());
            batch.delete_unreachable_range(Cf::Score, prefix, end);
        }
        Ok(())
    }

    /// Counts a lookup as a keyspace hit or miss, if the handle counts lookups.
    pub(crate) fn record_lookup(&self, hit: bool) {
        if !self.counts_lookups {
            return;
        }
        let counter = if hit {
            &self.ks.stats.hits
        } else {
            &self.ks.stats.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl Keyspace {
    pub(crate) fn write(&self, mut change: Change) -> Result<(), Error> {
        let batch = self.prepare_write(&mut change)?;
        if batch.is_empty() {
            return Ok(());
        }
        let _due = change
            .removes_due_expiry
            .then(|| self.due_expiry_lock.lock());
        self.ready.note(&batch);
        self.engine.write(batch)?;
        self.apply_counts(change);
        Ok(())
    }

    /// Writes `change` as [`Keyspace::write`] does, but shares the storage write with the
    /// connections writing at the same moment (see [`StorageWrites`]): waiting for a turn then
    /// suspends this task instead of blocking its worker thread inside RocksDB.
    pub(crate) async fn write_combined(&self, mut change: Change) -> Result<(), Error> {
        if change.removes_due_expiry {
            return self.write(change);
        }
        let batch = self.prepare_write(&mut change)?;
        if batch.is_empty() {
            return Ok(());
        }
        // Noted by this writer once its write is done, not by the one that wrote it: the
        // connection serves the clients blocked on its keys itself, before it runs its next
        // command, as Redis does after each push.
        let changed = self.ready.changed_by(&batch);
        self.storage_writes
            .write(self.engine.as_ref(), batch)
            .await?;
        self.ready.add(changed);
        self.apply_counts(change);
        Ok(())
    }

    /// Takes the batch out of `change`, with the counter operands added, and notes its keys
    /// for watchers. Refused on a replica, whatever the command or script that wrote it.
    fn prepare_write(&self, change: &mut Change) -> Result<WriteBatch, Error> {
        change.add_counter_operands();
        let batch = std::mem::take(&mut change.batch);
        // An empty batch writes nothing: the commit of an EXEC whose SLAVEOF made this server
        // a replica goes through.
        if !batch.is_empty() {
            self.check_writable()?;
            if !change.ignores_slot_moves {
                self.slot_moves.note(&batch)?;
            }
        }
        // Noted before the write so the batch need not be copied: a write that fails only
        // costs a watcher a retry.
        if !batch.is_empty() {
            self.watches.note(&batch);
        }
        Ok(batch)
    }

    /// Brings the in-memory counters up to date with a written change.
    fn apply_counts(&self, change: Change) {
        for db in change.resets {
            self.key_counts[db as usize].store(0, Ordering::Relaxed);
            self.expire_counts[db as usize].store(0, Ordering::Relaxed);
        }
        for (db, keys, expires) in change.counts {
            self.key_counts[db as usize].fetch_add(keys, Ordering::Relaxed);
            self.expire_counts[db as usize].fetch_add(expires, Ordering::Relaxed);
        }
    }
}

fn read_counter(engine: &dyn Engine, key: &[u8]) -> Result<i64, Error> {
    Ok(engine
        .get(Cf::Meta, key)?
        .and_then(|raw| <[u8; 8]>::try_from(raw.as_slice()).ok())
        .map_or(0, i64::from_be_bytes))
}
