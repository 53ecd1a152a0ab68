//! The RocksDB engine.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use rocksdb::checkpoint::Checkpoint;
use rocksdb::compaction_filter::Decision;
use rocksdb::statistics::{StatsLevel, Ticker};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType,
    DBRecoveryMode, DataBlockIndexType, MergeOperands, Options, ReadOptions, SliceTransform,
    WriteBufferManager, WriteOptions, DB,
};

use crate::budget::MemorySplit;
use crate::compaction::{FamilySettings, RemoteCompaction};
use crate::engine::{Cf, Engine, EngineStats, Op, ScanDirection, StorageError, WriteBatch};
use crate::health::{self, WriteHealth};
use crate::keys::{element_prefix_len, prefix_end, INTERNAL_PREFIX};
use crate::metadata::is_expired_inline_string;
use crate::patch;
use crate::recent::{Recent, RecentBatches};
use crate::record_cache::{RecordCache, RecordCacheStats};
use crate::wal::{self, FamilyIds};
use crate::wal_damage::{self, WalDamage};

/// Engine settings, from the `rocksdb.*` options of the config file.
#[derive(Debug, Clone)]
pub struct RocksConfig {
    pub block_cache_size: usize,
    /// Bound on the cache of metadata records ([`RecordCache`]); 0 turns it off.
    pub meta_cache_size: usize,
    /// Bound on the cache of the data family's records; 0 turns it off.
    pub data_cache_size: usize,
    /// The record caches keep records of a few hundred bytes and more LZ4-compressed.
    pub compress_cached_records: bool,
    pub write_buffer_size: usize,
    pub max_write_buffer_number: i32,
    /// Bound on the memtables of all column families together.
    pub memtable_budget: usize,
    pub max_background_jobs: i32,
    /// Bytes per second flushes and compactions may write together; 0 leaves them unlimited.
    pub rate_limit: u64,
    /// The limit is a ceiling RocksDB moves the rate under, by how much of it is asked for.
    pub rate_limit_auto_tune: bool,
    pub block_size: usize,
    /// Values of at least this many bytes in the meta and data families (strings inline in
    /// their metadata, 4 KB fragments, collection elements) go to blob files beside the SST
    /// files, which compactions then move as references instead of rewriting; 0 keeps every
    /// value in the SST files.
    pub min_blob_size: u64,
    /// Compactions rewrite the live values of the oldest blob files, this fraction of them,
    /// so the space of overwritten values comes back.
    pub blob_gc_age_cutoff: f64,
    /// Bytes of the ZSTD dictionary that each bottom-level file is compressed with, trained
    /// on 100 times as many bytes of its blocks; 0 for none.
    pub zstd_dictionary_bytes: usize,
    pub bloom_bits_per_key: f64,
    pub max_open_files: i32,
    pub statistics: bool,
    /// A bulk load into a database that is not current until it is complete and its
    /// memtables flushed (an RDB import, a Redis master's snapshot): writes skip the WAL, since
    /// a crash in between discards the database anyway. (Leaving compactions to the engine
    /// that opens it next took 2.1M keys of 1000 bytes from 36 s to 34 s, but left 2.1 GB of
    /// uncompressed level-0 files and made every read before a write probe each one's filter.)
    pub bulk_load: bool,
    /// Replays every intact WAL record and skips damaged ones, wherever they lie: the first
    /// step of a repair, never a server's open.
    pub salvage_wal: bool,
    /// Base URLs of `shale-compactor` workers that run the compactions; none compacts locally.
    pub compaction_workers: Vec<String>,
    /// How long a job may take on a worker before it is compacted locally instead.
    pub compaction_remote_timeout: Duration,
}

impl RocksConfig {
    /// The defaults with the cache and memtable sizes `split` gives.
    pub fn sized(split: MemorySplit) -> RocksConfig {
        RocksConfig {
            block_cache_size: split.block_cache,
            meta_cache_size: split.meta_cache,
            data_cache_size: split.data_cache,
            write_buffer_size: split.write_buffer,
            memtable_budget: split.memtables,
            ..RocksConfig::default()
        }
    }
}

/// The sizes of a 1 GiB budget ([`MemorySplit::default`]).
impl Default for RocksConfig {
    fn default() -> Self {
        let split = MemorySplit::default();
        RocksConfig {
            block_cache_size: split.block_cache,
            meta_cache_size: split.meta_cache,
            data_cache_size: split.data_cache,
            compress_cached_records: true,
            write_buffer_size: split.write_buffer,
            max_write_buffer_number: 4,
            memtable_budget: split.memtables,
            max_background_jobs: 4,
            rate_limit: 0,
            rate_limit_auto_tune: true,
            // A point read of a key not in the block cache decompresses one whole block: with
            // a data set 16x the cache, 4 KB blocks (RocksDB's default) served MGET 1.2x faster
            // than 16 KB ones, for 14% more disk (bench/compare's larger-than-memory experiment).
            block_size: 4 << 10,
            min_blob_size: 0,
            blob_gc_age_cutoff: 0.25,
            zstd_dictionary_bytes: 0,
            bloom_bits_per_key: 10.0,
            max_open_files: 4096,
            statistics: true,
            bulk_load: false,
            salvage_wal: false,
            compaction_workers: Vec::new(),
            compaction_remote_timeout: Duration::from_secs(300),
        }
    }
}

/// RocksDB with caches in front. The database it serves can be replaced while it runs (a
/// replica's full sync switches to the copy it received); every call works on the one that is
/// current when it starts. After a write failure it is reopened ([`RocksEngine::recover`]),
/// served read-only meanwhile.
pub struct RocksEngine {
    current: ArcSwap<Opened>,
    /// The directory of the database served.
    path: Mutex<PathBuf>,
    health: WriteHealth,
    /// Held by a switch and a reopen, which must not interleave.
    switching: Mutex<()>,
    /// WAL iterators alive (replicas' feeds catching up): each keeps the database open.
    wal_readers: Arc<AtomicUsize>,
    /// The memtable size in force, fitted to the free space ([`RocksEngine::fit_to_free_space`]).
    memtable_size: AtomicUsize,
    config: RocksConfig,
    /// The block cache and the memtable budget outlive a switch: the two databases alive
    /// during one share them, so a switch does not double the memory.
    cache: Cache,
    write_buffers: WriteBufferManager,
    recent: RecentBatches,
    /// The workers compactions go to; outlives a switch and a reopen, as the cache does.
    remote: Arc<RemoteCompaction>,
}

/// One open database and what belongs to it alone.
struct Opened {
    db: DB,
    options: Options,
    caches: Caches,
    /// Options of every point read, made once: the crate's `get_cf` creates and destroys a
    /// C++ `ReadOptions` per call.
    point_reads: ReadOptions,
    families: FamilyIds,
    /// A damaged last record of the WAL this open dropped (a write torn by a power loss).
    torn_wal_tail: Option<WalDamage>,
    /// Opened read-only, to serve reads until a database that failed a write reopens.
    read_only: bool,
}

impl RocksEngine {
    pub fn open(path: &Path, config: &RocksConfig) -> Result<RocksEngine, StorageError> {
        // HyperClockCache looks blocks up without a mutex: under pipelined GETs the block
        // cache took 2.4% of server CPU instead of the LRU cache's 6.6% (perf profiles).
        let cache = Cache::new_hyper_clock_cache(config.block_cache_size, 0);
        let write_buffers =
            WriteBufferManager::new_write_buffer_manager(config.memtable_budget, true);
        let remote = RemoteCompaction::new(FamilySettings::of(config));
        remote.configure(&config.compaction_workers, config.compaction_remote_timeout);
        let opened = Opened::open(path, config, &cache, &write_buffers, &remote)?;
        let engine = RocksEngine {
            current: ArcSwap::from_pointee(opened),
            path: Mutex::new(path.to_path_buf()),
            health: WriteHealth::default(),
            switching: Mutex::new(()),
            wal_readers: Arc::new(AtomicUsize::new(0)),
            memtable_size: AtomicUsize::new(config.write_buffer_size),
            config: config.clone(),
            cache,
            write_buffers,
            recent: RecentBatches::default(),
            remote,
        };
        // Fitted after the open: the WAL replays into memtables of the configured size, which
        // a replay on a nearly full disk must not fill, as a full one is flushed at once.
        let _ = engine.fit_to_free_space();
        Ok(engine)
    }

    /// Serves the database at `path` from now on. The one served until now closes once the
    /// calls still running on it return, when the returned handle is dropped last.
    pub fn switch_to(&self, path: &Path) -> Result<Retired, StorageError> {
        let _switching = self.switching.lock();
        let opened = Opened::open(
            path,
            &self.config,
            &self.cache,
            &self.write_buffers,
            &self.remote,
        )?;
        let old_path = std::mem::replace(&mut *self.path.lock(), path.to_path_buf());
        let retired = Retired {
            opened: self.current.swap(Arc::new(opened)),
            path: old_path,
        };
        // What was kept belongs to the old database's numbers.
        self.recent.set_on(self.recent.is_on());
        if self.health.failure().is_some() {
            self.health.recovered();
        }
        self.memtable_size
            .store(self.config.write_buffer_size, Ordering::Relaxed);
        let _ = self.fit_to_free_space();
        Ok(retired)
    }

    /// After a write failure, reopens the database once its directory takes writes again (a
    /// probe of [`health::RECOVERY_ROOM`] bytes is written and synced first) and has the
    /// room an open needs. RocksDB cannot resume after a failed WAL write when the WAL is
    /// flushed by hand (it marks the error fatal); reopening replays what reached the WAL,
    /// and the writes that did not are gone: under `appendfsync always` none of them was
    /// acknowledged. A directory opens for writing once in a process, so the database that
    /// failed closes first; from then until a reopen succeeds, however many tries that takes
    /// (the room the probe found may be gone again), reads are served by the same database
    /// opened read-only. The caller keeps writes out meanwhile; they stay refused until
    /// [`RocksEngine::resume_writes`], once the caller has caught up with the reopened
    /// database. `before_reopen` runs once the probe passed, to end what holds the database
    /// open (replicas' feeds); while a WAL reader is still open, no reopen is tried, so a
    /// reader that does not let go costs reads nothing.
    pub fn recover(&self, before_reopen: impl FnOnce()) -> Result<(), StorageError> {
        let _switching = self.switching.lock();
        if self.health.failure().is_none() {
            return Ok(());
        }
        let path = self.path.lock().clone();
        health::could_open(&path)
            .and_then(|()| health::probe_writable(&path))
            .and_then(|()| health::room_to_open(&path))
            .map_err(|err| StorageError::Unwritable(health::io_reason(&err).into()))?;
        before_reopen();
        if self.wal_readers.load(Ordering::Acquire) > 0 {
            return Err(StorageError::Engine("a WAL reader is still open".into()));
        }
        if !self.current.load().read_only {
            self.retire_failed(&path)?;
        }
        let opened = Opened::open(
            &path,
            &self.config,
            &self.cache,
            &self.write_buffers,
            &self.remote,
        )?;
        self.current.store(Arc::new(opened));
        self.memtable_size
            .store(self.config.write_buffer_size, Ordering::Relaxed);
        let _ = self.fit_to_free_space();
        Ok(())
    }

    /// Replaces the database that failed a write by the same database opened read-only, and
    /// waits until the failed one has closed.
    fn retire_failed(&self, path: &Path) -> Result<(), StorageError> {
        let stand_in = Opened::open_read_only(path, &self.config, &self.cache)?;
        let failed = self.current.swap(Arc::new(stand_in));
        // What was kept belongs to the failed database's numbers.
        self.recent.set_on(self.recent.is_on());
        // Calls that started before the swap finish on it; only then can it close.
        let deadline = Instant::now() + REOPEN_PATIENCE;
        while Arc::strong_count(&failed) > 1 {
            if Instant::now() >= deadline {
                self.current.store(failed);
                return Err(StorageError::Engine("the database is still in use".into()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// The workers compactions go to, and what came of them.
    pub fn remote_compaction(&self) -> &RemoteCompaction {
        &self.remote
    }

    /// The damaged last record of the WAL the database's open dropped, if it met one.
    pub fn torn_wal_tail(&self) -> Option<WalDamage> {
        self.current.load().torn_wal_tail.clone()
    }

    /// Ends a write failure after [`RocksEngine::recover`]: writes work again, in a new
    /// generation.
    pub fn resume_writes(&self) {
        self.health.recovered();
    }

    /// Rebuilds the database at `path` from what of it is readable. First the WAL: an open
    /// that replays every intact record, skipping damaged ones, flushes what it replayed into
    /// table files (RocksDB's `RepairDB` knows only the families it finds in table files, so
    /// it would drop the WAL's writes to any other). Then RocksDB's `RepairDB`: a table file
    /// that cannot be read whole is moved to `lost/` with its keys. For a database found
    /// damaged (a read or the start names the file), with the server stopped. Returns why the
    /// first step failed, if it did (a table file damaged beyond opening): `RepairDB` alone
    /// replayed the WAL then.
    pub fn repair(path: &Path, config: &RocksConfig) -> Result<Option<StorageError>, StorageError> {
        if !path.join("CURRENT").exists() {
            return Err(StorageError::Engine(format!(
                "no database in {}",
                path.display()
            )));
        }
        let salvage = RocksConfig {
            salvage_wal: true,
            ..config.clone()
        };
        let salvaged =
            RocksEngine::open(path, &salvage).and_then(|engine| engine.flush_memtables());
        DB::repair(&Options::default(), path)?;
        Ok(salvaged.err())
    }

    /// Sizes the memtables to the free space of the data directory's filesystem (see
    /// [`health::memtable_size_for`]), so that a filling disk leaves little to flush; returns
    /// the free bytes. Sizes are powers of two, so the options change (and RocksDB writes a
    /// new OPTIONS file) only when the free space halves or doubles.
    pub fn fit_to_free_space(&self) -> std::io::Result<u64> {
        let path = self.path.lock().clone();
        let free = health::free_space(&path)?;
        // Tried again at the next call if the disk took the free space meanwhile.
        let _ = health::keep_reserve(&path, free);
        let size = health::memtable_size_for(free, self.config.write_buffer_size);
        if self.memtable_size.swap(size, Ordering::Relaxed) != size {
            let value = size.to_string();
            let resized = self.with(|opened| {
                let db = opened.writable()?;
                for cf in Cf::ALL {
                    db.set_options_cf(opened.handle(cf)?, &[("write_buffer_size", &value)])?;
                }
                Ok(())
            });
            if resized.is_err() {
                // Tried again at the next call.
                self.memtable_size.store(0, Ordering::Relaxed);
            }
        }
        Ok(free)
    }

    /// The memtable size in force, in bytes.
    pub fn memtable_size(&self) -> usize {
        self.memtable_size.load(Ordering::Relaxed)
    }

    /// The directory of the database served now.
    pub fn path(&self) -> PathBuf {
        self.path.lock().clone()
    }

    /// The column family ids of the database served now, to decode its WAL's batches.
    pub fn family_ids(&self) -> Result<FamilyIds, StorageError> {
        self.with(|opened| Ok(opened.families))
    }

    /// The batches written after sequence number `after`, oldest first, as RocksDB's bytes.
    /// Ends at the last batch written so far; a later call continues.
    pub fn updates_since(&self, after: u64) -> Result<WalUpdates, StorageError> {
        let opened = self.current.load_full();
        let inner = opened.db.get_updates_since(after)?;
        self.wal_readers.fetch_add(1, Ordering::AcqRel);
        Ok(WalUpdates {
            inner,
            _opened: opened,
            readers: self.wal_readers.clone(),
        })
    }

    /// Runs `read` on the database served now.
    fn with<T>(
        &self,
        read: impl FnOnce(&Opened) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        read(&self.current.load())
    }

    /// Notes an error of a write as a write failure if it is one of I/O; `always` notes any
    /// error (of a WAL flush or sync, or a memtable flush, none of which fails otherwise).
    fn noted(&self, err: rocksdb::Error, always: bool) -> StorageError {
        if !always && err.kind() != rocksdb::ErrorKind::IOError {
            return err.into();
        }
        let message = err.into_string();
        StorageError::Unwritable(self.health.fail(health::reason_of(&message)))
    }

    /// Keeps a copy of every batch written from now on, in a ring of the latest (see
    /// `recent`), or stops; `listener` is called after each kept write.
    pub fn keep_recent(&self, on: bool) {
        self.recent.set_on(on);
    }

    pub fn on_recent(&self, listener: Arc<dyn Fn() + Send + Sync>) {
        self.recent.set_listener(listener);
    }

    /// The kept batches after sequence number `after`, up to about `max_bytes`.
    pub fn recent_since(&self, after: u64, max_bytes: usize) -> Recent {
        self.recent.since(after, max_bytes, self.sequence())
    }

    /// Writes a copy of the database to `dir` (which must not exist) that opens on its own,
    /// sharing the files it can by hard links; returns a sequence number the copy holds every
    /// write up to (it may hold a few more).
    pub fn checkpoint(&self, dir: &Path) -> Result<u64, StorageError> {
        self.with(|opened| {
            let covered = opened.db.latest_sequence_number();
            Checkpoint::new(&opened.db)?.create_checkpoint(dir)?;
            Ok(covered)
        })
    }

    /// The WAL files RocksDB has archived, oldest first, with their sizes: the history that
    /// replicas may still ask for. Deleting one shortens it.
    pub fn archived_wal(&self) -> Vec<(PathBuf, u64)> {
        let archive = self.path.lock().join("archive");
        let mut logs: Vec<(PathBuf, u64)> = std::fs::read_dir(archive)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".log"))
            .map(|entry| (entry.path(), entry.metadata().map_or(0, |m| m.len())))
            .collect();
        // Log numbers are zero-padded, so names sort in the order RocksDB wrote them.
        logs.sort();
        logs
    }
}

/// A database no longer served; it closes when the last handle on it is dropped.
pub struct Retired {
    opened: Arc<Opened>,
    path: PathBuf,
}

impl Retired {
    /// Whether calls that started before the switch still use it.
    pub fn in_use(&self) -> bool {
        Arc::strong_count(&self.opened) > 1
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How long a reopen waits for the calls still running on the database it closes.
const REOPEN_PATIENCE: Duration = Duration::from_secs(5);

/// Batches from the WAL, each with the sequence number it starts at.
pub struct WalUpdates {
    inner: rocksdb::DBWALIterator,
    /// The iterator reads the database's files: it stays open (a reopen waits) until done.
    _opened: Arc<Opened>,
    readers: Arc<AtomicUsize>,
}

impl Drop for WalUpdates {
    fn drop(&mut self) {
        self.readers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Iterator for WalUpdates {
    type Item = Result<(u64, Vec<u8>), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.inner.next() {
            Some(Ok((seq, batch))) => Some(Ok((seq, batch.data().to_vec()))),
            Some(Err(err)) => Some(Err(err.into())),
            // The crate's iterator ends without a word when the log cannot be read. At the
            // end of what has reached the file, RocksDB says "try again": not an error here.
            None => match self.inner.status() {
                Err(err) if err.kind() != rocksdb::ErrorKind::TryAgain => Some(Err(err.into())),
                _ => None,
            },
        }
    }
}

impl Opened {
    fn open(
        path: &Path,
        config: &RocksConfig,
        cache: &Cache,
        write_buffers: &WriteBufferManager,
        remote: &Arc<RemoteCompaction>,
    ) -> Result<Opened, StorageError> {
        health::room_to_open(path)
            .map_err(|err| StorageError::Unwritable(health::io_reason(&err).into()))?;
        remote.clean(path);
        let mut db_options = db_options(config)?;
        remote.install(&mut db_options);
        db_options.create_if_missing(true);
        db_options.create_missing_column_families(true);
        db_options.set_max_background_jobs(config.max_background_jobs);
        // Each open starts a new info LOG (200 KB with its dump of the options); RocksDB keeps
        // 1,000 old ones by default, which a server restarted on a nearly full disk can't spare.
        db_options.set_keep_log_file_num(10);
        db_options.set_bytes_per_sync(1 << 20);
        db_options.set_wal_bytes_per_sync(512 << 10);
        if config.rate_limit > 0 {
            let rate = i64::try_from(config.rate_limit).unwrap_or(i64::MAX);
            if config.rate_limit_auto_tune {
                db_options.set_auto_tuned_ratelimiter(rate, RATE_REFILL_MICROS, RATE_FAIRNESS);
            } else {
                db_options.set_ratelimiter(rate, RATE_REFILL_MICROS, RATE_FAIRNESS);
            }
        }
        // WAL records collect in RocksDB's buffer and reach the OS when the server's syncer
        // flushes them (every few milliseconds, and before any fsync), not with a write(2) per
        // write group: that syscall was 8-12% of the server's CPU under single-key writes.
        db_options.set_manual_wal_flush(true);
        db_options.set_max_total_wal_size(4 * config.memtable_budget as u64);
        db_options.set_write_buffer_manager(write_buffers);
        // WAL files whose writes are all flushed move to `archive/` instead of being deleted,
        // where replicas read the writes they missed; the server deletes them (`history`).
        db_options.set_wal_ttl_seconds(WAL_KEPT_SECONDS);

        let open = |db_options: &Options| {
            DB::open_cf_descriptors(db_options, path, descriptors(db_options, cache, config))
        };
        let (db, torn_wal_tail) = open_replaying_wal(path, &mut db_options, open)?;
        if torn_wal_tail.is_some() {
            // The damaged WAL stays live until what it replayed is flushed, and the next
            // open would meet its damage with a newer WAL's writes after.
            for cf in Cf::ALL {
                db.flush_cf(handle_in(&db, cf)?)?;
            }
        }
        // Blocks a flush writes go into the block cache as well, so the reads that follow
        // (every write reads its key's metadata first) do not load them back from the new
        // file. The crate has no setter for this table option; RocksDB takes it this way.
        // Compactions start only now: one that started during the open could take the last
        // of the space before the open wrote its OPTIONS file (seen under strace), and the
        // open would fail.
        for cf in Cf::ALL {
            db.set_options_cf(
                handle_in(&db, cf)?,
                &[
                    (
                        "block_based_table_factory",
                        "{prepopulate_block_cache=kFlushOnly;}",
                    ),
                    // A repair's open compacts nothing: a compaction reading a damaged
                    // table file would fail the flush the repair needs.
                    (
                        "disable_auto_compactions",
                        if config.salvage_wal { "true" } else { "false" },
                    ),
                ],
            )?;
        }
        Opened::new(db, db_options, config, torn_wal_tail, false)
    }

    /// The database at `path` opened read-only, which takes no lock and writes nothing: it
    /// opens while the database open for writes is still open, and on a full disk. It holds
    /// what the WAL holds, which is what the next open for writes replays.
    fn open_read_only(
        path: &Path,
        config: &RocksConfig,
        cache: &Cache,
    ) -> Result<Opened, StorageError> {
        let mut db_options = db_options(config)?;
        let open = |db_options: &Options| {
            let descriptors = descriptors(db_options, cache, config);
            DB::open_cf_descriptors_read_only(db_options, path, descriptors, false)
        };
        let (db, torn_wal_tail) = open_replaying_wal(path, &mut db_options, open)?;
        Opened::new(db, db_options, config, torn_wal_tail, true)
    }

    fn new(
        db: DB,
        options: Options,
        config: &RocksConfig,
        torn_wal_tail: Option<WalDamage>,
        read_only: bool,
    ) -> Result<Opened, StorageError> {
        let families = family_ids(&db)?;
        Ok(Opened {
            db,
            options,
            caches: Caches {
                meta: RecordCache::new(config.meta_cache_size, config.compress_cached_records),
                data: RecordCache::new(config.data_cache_size, config.compress_cached_records),
            },
            point_reads: ReadOptions::default(),
            families,
            torn_wal_tail,
            read_only,
        })
    }

    /// The database, to write to or change; not one open read-only, which stands in for a
    /// database that failed a write.
    fn writable(&self) -> Result<&DB, StorageError> {
        if self.read_only {
            return Err(StorageError::Engine(
                "the database is open read-only until it can be reopened".into(),
            ));
        }
        Ok(&self.db)
    }

    fn handle(&self, cf: Cf) -> Result<&ColumnFamily, StorageError> {
        handle_in(&self.db, cf)
    }

    fn int_property(&self, name: &str) -> u64 {
        Cf::ALL
            .iter()
            .filter_map(|&cf| self.handle(cf).ok())
            .filter_map(|h| self.db.property_int_value_cf(h, name).ok().flatten())
            .sum()
    }

    /// An integer property of the whole database; 0 if it has none.
    fn db_property(&self, name: &str) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }

    /// A point read past the record caches.
    fn read_one(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self
            .db
            .get_cf_opt(self.handle(cf)?, key, &self.point_reads)?)
    }

    /// A batched read of `keys` in one column family, past the record caches.
    fn read_many<'k>(
        &self,
        cf: Cf,
        keys: impl Iterator<Item = &'k Vec<u8>>,
    ) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        self.db
            .batched_multi_get_cf_opt(self.handle(cf)?, keys, false, &self.point_reads)
            .into_iter()
            .map(|r| {
                r.map(|v| v.map(|slice| slice.to_vec()))
                    .map_err(StorageError::from)
            })
            .collect()
    }
}

/// RocksDB's defaults for its rate limiter: tokens refill every 100 ms, and a low-priority
/// (compaction) request is served first once in 10.
const RATE_REFILL_MICROS: i64 = 100_000;
const RATE_FAIRNESS: i32 = 10;

/// Archived WAL files are kept this long by RocksDB itself: in effect until the server
/// deletes them, as `repl-backlog-size` and `repl-backlog-ttl` say.
const WAL_KEPT_SECONDS: u64 = 10 * 365 * 24 * 3600;

fn handle_in(db: &DB, cf: Cf) -> Result<&ColumnFamily, StorageError> {
    db.cf_handle(cf.name())
        .ok_or_else(|| StorageError::Engine(format!("missing column family {}", cf.name())))
}

/// Reads each family's id off a batch that is encoded, never written.
fn family_ids(db: &DB) -> Result<FamilyIds, StorageError> {
    let mut ids = [0; 4];
    for cf in Cf::ALL {
        let mut probe = rocksdb::WriteBatch::default();
        probe.put_cf(handle_in(db, cf)?, b"", b"");
        ids[cf.index()] = wal::first_family_id(probe.data())?;
    }
    Ok(FamilyIds(ids))
}

/// The caches of records in front of RocksDB: of metadata, and of the data family's records
/// (elements of collections, fragments of strings, Roaring containers).
struct Caches {
    meta: Option<RecordCache>,
    data: Option<RecordCache>,
}

impl Caches {
    /// The cache of `cf`'s records, if it has one and it is on.
    fn of(&self, cf: Cf) -> Option<&RecordCache> {
        match cf {
            Cf::Meta => self.meta.as_ref(),
            Cf::Data => self.data.as_ref(),
            _ => None,
        }
    }
}

/// Takes the records a write changes out of the caches before it is written; returns, per op,
/// the record it took out if it was cached and may come back with its new value.
///
/// In a family the batch also deletes by range, none may: ops are noted one by one after the
/// write, and a record put before the range delete (SET k, FLUSHALL, SET k in one EXEC) would
/// be back in the cache with a value the batch replaced until the range delete is noted.
fn withdraw_written(caches: &Caches, batch: &WriteBatch) -> Vec<Option<Vec<u8>>> {
    let ranged = families_deleted_by_range(batch);
    batch
        .ops
        .iter()
        .map(|op| {
            let (cf, withdrawn) = match op {
                Op::Put { cf, key, .. }
                | Op::Delete { cf, key }
                | Op::AddCounter { cf, key, .. } => (*cf, caches.of(*cf)?.withdraw(key)),
                Op::Patch { key, .. } => (Cf::Data, caches.of(Cf::Data)?.withdraw(key)),
                Op::DeleteRange {
                    unreachable: true, ..
                } => return None,
                Op::DeleteRange { cf, .. } => {
                    caches.of(*cf)?.withdraw_all();
                    return None;
                }
            };
            withdrawn.filter(|_| !ranged.contains(&cf))
        })
        .collect()
}

/// The families in which `batch` deletes a range that reads may still ask for.
fn families_deleted_by_range(batch: &WriteBatch) -> Vec<Cf> {
    batch
        .ops
        .iter()
        .filter_map(|op| match op {
            Op::DeleteRange {
                cf,
                unreachable: false,
                ..
            } => Some(*cf),
            _ => None,
        })
        .collect()
}

/// Brings the caches in line with a write [withdrawn](withdraw_written) from them, if it
/// succeeded: the new values of the records it put or patched that were cached, and of every
/// metadata record it put. A key just written is likely read next (GET after SET, the next
/// command on a collection), and RocksDB would find it in the memtable only after a skiplist
/// search; the caches' S3-FIFO policy keeps a stream of new keys from evicting the records read
/// often. Not after a range delete of the family in the same batch (see [`withdraw_written`]).
fn note_written(
    caches: &Caches,
    batch: WriteBatch,
    withdrawn: Vec<Option<Vec<u8>>>,
    succeeded: bool,
) {
    let ranged = families_deleted_by_range(&batch);
    for (op, withdrawn) in batch.ops.into_iter().zip(withdrawn) {
        let was_cached = withdrawn.is_some();
        match op {
            Op::Put { cf, key, value } => {
                if let Some(cache) = caches.of(cf) {
                    let cache_it = was_cached || (cf == Cf::Meta && !ranged.contains(&cf));
                    cache.written(&key, succeeded.then_some(value), cache_it);
                }
            }
            Op::Delete { cf, key } | Op::AddCounter { cf, key, .. } => {
                if let Some(cache) = caches.of(cf) {
                    cache.written(&key, None, was_cached);
                }
            }
            Op::Patch { key, patch } => {
                if let Some(cache) = caches.of(Cf::Data) {
                    let patched = withdrawn.filter(|_| succeeded).and_then(|mut value| {
                        patch::apply(&mut value, &patch).ok().map(|()| value)
                    });
                    cache.written(&key, patched, was_cached);
                }
            }
            Op::DeleteRange {
                unreachable: true, ..
            } => {}
            Op::DeleteRange { cf, .. } => {
                if let Some(cache) = caches.of(cf) {
                    cache.written_all();
                }
            }
        }
    }
}

/// The options every open of the database shares, read-only ones included.
fn db_options(config: &RocksConfig) -> Result<Options, StorageError> {
    // What the WAL holds at start stays in memtables instead of being flushed at once: a
    // start on a nearly full disk (after a write failure, or a crash) then needs only room
    // for a new WAL, MANIFEST and OPTIONS file, not for a flush. No file is preallocated:
    // on a nearly full disk a compaction's preallocation (24 MB for a 22 MB file, under
    // strace) takes the free space while fallocate runs (and until the file is closed if
    // it succeeds), and the open's own OPTIONS file or a WAL write that lands meanwhile
    // fails. The crate has no setters.
    let mut db_options = Options::default()
        .get_options_from_string("avoid_flush_during_recovery=true;allow_fallocate=false")?;
    db_options.set_max_open_files(config.max_open_files);
    if config.statistics {
        db_options.enable_statistics();
        // INFO reads tickers only; timers and histograms read the clock on every call.
        db_options.set_statistics_level(StatsLevel::ExceptHistogramOrTimers);
    }
    // Only an incomplete last record (a process killed mid-write) is taken for the WAL's
    // end; other damage fails the open, and `wal_damage` says where (see there).
    db_options.set_wal_recovery_mode(if config.salvage_wal {
        DBRecoveryMode::SkipAnyCorruptedRecord
    } else {
        DBRecoveryMode::TolerateCorruptedTailRecords
    });
    Ok(db_options)
}

/// The column families an open names, each with its options.
fn descriptors(
    db_options: &Options,
    cache: &Cache,
    config: &RocksConfig,
) -> [ColumnFamilyDescriptor; Cf::ALL.len()] {
    Cf::ALL.map(|cf| {
        let options = family_options(cf, db_options, cache, config);
        ColumnFamilyDescriptor::new(cf.name(), options)
    })
}

/// Opens the database at `path` with `open`, again with point-in-time recovery if the WAL's
/// only damage is a torn last write (see `wal_damage`); returns that damage, whose writes
/// the open dropped.
fn open_replaying_wal(
    path: &Path,
    db_options: &mut Options,
    open: impl Fn(&Options) -> Result<DB, rocksdb::Error>,
) -> Result<(DB, Option<WalDamage>), StorageError> {
    match open(db_options) {
        Ok(db) => Ok((db, None)),
        Err(err) if err.kind() == rocksdb::ErrorKind::Corruption => match wal_damage::find(path) {
            Ok(Some(damage)) if !damage.intact_after => {
                db_options.set_wal_recovery_mode(DBRecoveryMode::PointInTime);
                Ok((open(db_options)?, Some(damage)))
            }
            Ok(Some(damage)) => Err(StorageError::DamagedWal(damage)),
            _ => Err(err.into()),
        },
        Err(err) => Err(err.into()),
    }
}

/// A family's options, on the node and on a worker that compacts for it
/// ([`crate::compaction::run_job`]).
pub(crate) fn family_options(
    cf: Cf,
    base: &Options,
    cache: &Cache,
    config: &RocksConfig,
) -> Options {
    let mut table = BlockBasedOptions::default();
    table.set_block_cache(cache);
    table.set_block_size(config.block_size);
    table.set_bloom_filter(config.bloom_bits_per_key, false);
    // Point reads (every write's metadata read, GET, MGET) find their key in a data block by
    // a hash lookup instead of a binary search over its restart points.
    table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
    table.set_data_block_hash_ratio(0.75);
    if cf == Cf::Meta {
        // The hash lookup lands on a restart point and decodes entries from there: one every 4
        // entries instead of 16 took 6% off the CPU of MGETs of 32 keys of 64 B-1 KB values
        // read from SST files. Element families keep 16, as their keys share long prefixes.
        table.set_block_restart_interval(4);
    }
    table.set_cache_index_and_filter_blocks(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_format_version(6);

    let mut opts = base.clone();
    opts.set_block_based_table_factory(&table);
    opts.set_write_buffer_size(config.write_buffer_size);
    opts.set_disable_auto_compactions(true);
    opts.set_max_write_buffer_number(config.max_write_buffer_number);
    opts.set_level_compaction_dynamic_level_bytes(true);
    // Every write reads the key's metadata first, and most writes of new keys miss: a bloom
    // filter over whole keys in the memtable answers those misses without a skiplist search.
    opts.set_memtable_prefix_bloom_ratio(0.1);
    opts.set_memtable_whole_key_filtering(true);
    // Flushes write level 0 uncompressed: its files live only until the next compaction, and
    // under MSETs of 32 keys LZ4 in the flush thread was 6% of the server's CPU.
    let mut per_level = [DBCompressionType::Lz4; 7];
    per_level[0] = DBCompressionType::None;
    opts.set_compression_per_level(&per_level);
    opts.set_bottommost_compression_type(DBCompressionType::Zstd);
    if config.zstd_dictionary_bytes > 0 {
        let bytes = i32::try_from(config.zstd_dictionary_bytes).unwrap_or(i32::MAX);
        // ZSTD's default window and level (-14 and 32767 say so).
        opts.set_bottommost_compression_options(-14, 32767, 0, bytes, true);
        opts.set_bottommost_zstd_max_train_bytes(bytes.saturating_mul(100), true);
    }
    if config.min_blob_size > 0 && matches!(cf, Cf::Meta | Cf::Data) {
        opts.set_enable_blob_files(true);
        opts.set_min_blob_size(config.min_blob_size);
        opts.set_blob_compression_type(DBCompressionType::Zstd);
        opts.set_enable_blob_gc(true);
        opts.set_blob_gc_age_cutoff(config.blob_gc_age_cutoff);
    }
    if cf == Cf::Meta {
        opts.set_merge_operator_associative("shale-counter-add", add_counters);
        // With blob files the filter would have every value in them read back by each
        // compaction; the reaper drops expired strings alone then.
        if config.min_blob_size == 0 {
            opts.set_compaction_filter("shale-expired-strings", drop_expired_strings);
        }
    }
    if cf == Cf::Data {
        opts.set_merge_operator("shale-byte-patch", apply_patches, join_patches);
        // A record patched this often in the memtable is written whole again when its base is
        // in memory or the block cache (as it usually is: every patch follows a read of the
        // record), which keeps the patches a read applies few.
        opts.set_max_successive_merges(PATCHES_PER_RECORD);
    }
    if has_element_prefixes(cf) {
        // Bloom filters (memtable and SST) over each collection version's prefix let a scan of
        // one collection skip every memtable and file that holds none of it.
        opts.set_prefix_extractor(SliceTransform::create(
            "shale-element-prefix",
            element_prefix,
            Some(|key: &[u8]| element_prefix_len(key).is_some()),
        ));
    }
    opts
}

fn has_element_prefixes(cf: Cf) -> bool {
    matches!(cf, Cf::Data | Cf::Score)
}

fn element_prefix(key: &[u8]) -> &[u8] {
    &key[..element_prefix_len(key).unwrap_or(key.len())]
}

/// Whether `[lower, upper)` lies within the element prefix `lower` starts with.
fn within_one_prefix(lower: &[u8], upper: &[u8]) -> bool {
    element_prefix_len(lower).is_some_and(|len| {
        let prefix = &lower[..len];
        upper.starts_with(prefix) || upper == prefix_end(prefix)
    })
}

/// Merge operator of [`Op::AddCounter`]: big-endian i64 addition.
fn add_counters(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let decode = |v: &[u8]| v.try_into().map(i64::from_be_bytes).unwrap_or(0);
    let mut total = existing.map_or(0, decode);
    for operand in operands {
        total = total.wrapping_add(decode(operand));
    }
    Some(total.to_be_bytes().to_vec())
}

/// Patches a record may collect in the memtable before a write folds them into it.
const PATCHES_PER_RECORD: usize = 32;

/// Merge operator of [`Op::Patch`]: the record with its patches applied, in order.
fn apply_patches(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &MergeOperands,
) -> Option<Vec<u8>> {
    patch::patched(existing, operands).ok()
}

/// Two patches in a row are one: their segments, in order.
fn join_patches(
    _key: &[u8],
    _existing: Option<&[u8]>,
    operands: &MergeOperands,
) -> Option<Vec<u8>> {
    Some(operands.into_iter().flatten().copied().collect())
}

/// Drops inline strings whose own expiry has passed; it never reads another record.
fn drop_expired_strings(_level: u32, key: &[u8], value: &[u8]) -> Decision {
    if key.first() == Some(&INTERNAL_PREFIX) {
        return Decision::Keep;
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    if is_expired_inline_string(value, now_ms) {
        Decision::Remove
    } else {
        Decision::Keep
    }
}

impl Engine for RocksEngine {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.with(|opened| {
            let Some(cache) = opened.caches.of(cf) else {
                return opened.read_one(cf, key);
            };
            let miss = match cache.get(key) {
                Ok(value) => return Ok(Some(value)),
                Err(miss) => miss,
            };
            let value = opened.read_one(cf, key)?;
            if let Some(value) = &value {
                cache.fill(miss, key, value);
            }
            Ok(value)
        })
    }

    fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        if let [only] = keys {
            // A batched read of one key costs more than a plain one.
            return Ok(vec![self.get(cf, only)?]);
        }
        // The keys the cache holds come from it, the others from one batched read, which sees
        // one snapshot. Together they are one state of the database if no write came to the
        // shards that answered meanwhile; otherwise every key is read again in one batch.
        // Either way a reader (MGET) sees all of a transaction's writes or none.
        self.with(|opened| {
            let Some(cache) = opened.caches.of(cf) else {
                return opened.read_many(cf, keys.iter());
            };
            let found = cache.get_many(keys);
            if found.misses.is_empty() {
                if cache.still_current(&found) {
                    return Ok(found.values);
                }
                return opened.read_many(cf, keys.iter());
            }
            let missing = || {
                keys.iter()
                    .zip(&found.values)
                    .filter(|(_, cached)| cached.is_none())
                    .map(|(key, _)| key)
            };
            let read = opened.read_many(cf, missing())?;
            if !cache.still_current(&found) {
                return opened.read_many(cf, keys.iter());
            }
            cache.fill_batch(found.misses, missing(), &read);
            let mut read = read.into_iter();
            Ok(found
                .values
                .into_iter()
                .map(|cached| cached.or_else(|| read.next().flatten()))
                .collect())
        })
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StorageError> {
        // Nothing is written between a failure and the reopen that recovers from it: what
        // RocksDB would still take may not be in the WAL the reopen replays.
        if let Some(reason) = self.health.failure() {
            return Err(StorageError::Unwritable(reason));
        }
        let opened = self.current.load();
        let db = opened.writable()?;
        let mut raw = rocksdb::WriteBatch::default();
        for op in &batch.ops {
            match op {
                Op::Put { cf, key, value } => raw.put_cf(opened.handle(*cf)?, key, value),
                Op::Delete { cf, key } => raw.delete_cf(opened.handle(*cf)?, key),
                Op::DeleteRange { cf, start, end, .. } => {
                    raw.delete_range_cf(opened.handle(*cf)?, start, end)
                }
                Op::AddCounter { cf, key, delta } => {
                    raw.merge_cf(opened.handle(*cf)?, key, delta.to_be_bytes())
                }
                Op::Patch { key, patch } => raw.merge_cf(opened.handle(Cf::Data)?, key, patch),
            }
        }
        let mut options = WriteOptions::default();
        options.set_sync(false);
        options.disable_wal(self.config.bulk_load);
        let withdrawn = withdraw_written(&opened.caches, &batch);
        let keeping = self.recent.is_on();
        let order = keeping.then(|| self.recent.write_order.lock());
        let kept = keeping.then(|| raw.data().to_vec());
        let result = db.write_opt(raw, &options);
        if let (Ok(()), Some(bytes)) = (&result, kept) {
            let last = db.latest_sequence_number();
            self.recent.keep(bytes, batch.ops.len() as u64, last);
        }
        drop(order);
        if keeping && result.is_ok() {
            self.recent.notify();
        }
        note_written(&opened.caches, batch, withdrawn, result.is_ok());
        result.map_err(|err| self.noted(err, false))
    }

    fn scan(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
        direction: ScanDirection,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        let mut options = ReadOptions::default();
        // Prefix mode (the bloom filters) only going forward: a reverse seek starts from the
        // upper bound, which for a whole collection is past its prefix. Any other scan of a
        // family with a prefix extractor must ask for total order, or its seek would consult
        // the filters for the prefix of its target and could skip what it is looking for.
        // The upper bound keeps a prefix-mode scan within its prefix, so it needs no check of
        // each key's prefix (`prefix_same_as_start`), which cost LRANGE_100 3% of its CPU.
        let prefix_mode = direction == ScanDirection::Forward
            && has_element_prefixes(cf)
            && within_one_prefix(lower, upper);
        options.set_total_order_seek(!prefix_mode);
        options.set_iterate_lower_bound(lower);
        options.set_iterate_upper_bound(upper);
        self.with(|opened| {
            let mut iter = opened.db.raw_iterator_cf_opt(opened.handle(cf)?, options);
            match direction {
                ScanDirection::Forward => iter.seek(lower),
                ScanDirection::Reverse => iter.seek_to_last(),
            }
            while let Some((key, value)) = iter.item() {
                if !visit(key, value) {
                    return Ok(());
                }
                match direction {
                    ScanDirection::Forward => iter.next(),
                    ScanDirection::Reverse => iter.prev(),
                }
            }
            Ok(iter.status()?)
        })
    }

    fn sequence(&self) -> u64 {
        self.current.load().db.latest_sequence_number()
    }

    fn flush_wal(&self) -> Result<(), StorageError> {
        self.with(|opened| {
            opened
                .writable()?
                .flush_wal(false)
                .map_err(|err| self.noted(err, true))
        })
    }

    fn sync_wal(&self) -> Result<(), StorageError> {
        self.with(|opened| {
            opened
                .writable()?
                .flush_wal(true)
                .map_err(|err| self.noted(err, true))
        })
    }

    fn flush_memtables(&self) -> Result<(), StorageError> {
        self.with(|opened| {
            let handles: Vec<&ColumnFamily> = Cf::ALL
                .iter()
                .filter_map(|&cf| opened.handle(cf).ok())
                .collect();
            opened
                .writable()?
                .flush_cfs_opt(&handles, &rocksdb::FlushOptions::default())
                .map_err(|err| self.noted(err, true))
        })
    }

    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<(), StorageError> {
        self.with(|opened| {
            opened
                .writable()?
                .compact_range_cf(opened.handle(cf)?, Some(start), Some(end));
            Ok(())
        })
    }

    fn stats(&self) -> EngineStats {
        let opened = self.current.load();
        let cache_stats = |cache: &Option<RecordCache>| {
            cache
                .as_ref()
                .map_or_else(RecordCacheStats::default, RecordCache::stats)
        };
        EngineStats {
            meta_cache: cache_stats(&opened.caches.meta),
            data_cache: cache_stats(&opened.caches.data),
            block_cache_usage: self.cache.get_usage() as u64,
            block_cache_capacity: self.config.block_cache_size as u64,
            memtable_usage: self.write_buffers.get_usage() as u64,
            memtable_limit: self.config.memtable_budget as u64,
            table_readers_usage: opened.int_property("rocksdb.estimate-table-readers-mem"),
            live_sst_bytes: opened.int_property("rocksdb.live-sst-files-size"),
            estimated_keys: opened.int_property("rocksdb.estimate-num-keys"),
            pending_compaction_bytes: opened
                .int_property("rocksdb.estimate-pending-compaction-bytes"),
            running_compactions: opened.db_property("rocksdb.num-running-compactions"),
            running_flushes: opened.db_property("rocksdb.num-running-flushes"),
            bytes_written: opened.options.get_ticker_count(Ticker::BytesWritten),
            wal_syncs: opened.options.get_ticker_count(Ticker::WalFileSynced),
            iter_seeks: opened.options.get_ticker_count(Ticker::NumberDbSeek),
            iter_nexts: opened.options.get_ticker_count(Ticker::NumberDbNext)
                + opened.options.get_ticker_count(Ticker::NumberDbPrev),
            iter_skipped: opened.options.get_ticker_count(Ticker::NumberIterSkip),
            stall_micros: opened.options.get_ticker_count(Ticker::StallMicros),
            write_stopped: opened.db_property("rocksdb.is-write-stopped") > 0,
            delayed_write_rate: opened.db_property("rocksdb.actual-delayed-write-rate"),
            immutable_memtables: opened.int_property("rocksdb.num-immutable-mem-table"),
            block_cache_hits: opened.options.get_ticker_count(Ticker::BlockCacheHit),
            block_cache_misses: opened.options.get_ticker_count(Ticker::BlockCacheMiss),
            compaction_cpu_micros: opened
                .options
                .get_ticker_count(Ticker::CompactionCpuTotalTime),
            compactions: self.remote.stats(),
        }
    }

    fn write_failure(&self) -> Option<Arc<str>> {
        self.health.failure()
    }

    fn generation(&self) -> u64 {
        self.health.generation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(caches: &Caches, key: &[u8], value: &[u8]) {
        let cache = caches.of(Cf::Meta).expect("a metadata cache");
        if let Err(miss) = cache.get(key) {
            cache.fill(miss, key, value);
        }
    }

    #[test]
    fn metadata_records_come_in_when_written() {
        let caches = Caches {
            meta: RecordCache::new(1 << 20, true),
            data: RecordCache::new(1 << 20, true),
        };
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"k".to_vec(), b"v".to_vec());
        batch.put(Cf::Data, b"e".to_vec(), b"v".to_vec());
        let withdrawn = withdraw_written(&caches, &batch);
        note_written(&caches, batch, withdrawn, true);
        let meta = caches.of(Cf::Meta).expect("a metadata cache");
        assert_eq!(meta.get(b"k").ok().as_deref(), Some(&b"v"[..]));
        let data = caches.of(Cf::Data).expect("a data cache");
        assert!(data.get(b"e").is_err(), "elements come in only when read");

        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"j".to_vec(), b"v".to_vec());
        let withdrawn = withdraw_written(&caches, &batch);
        note_written(&caches, batch, withdrawn, false);
        assert!(meta.get(b"j").is_err(), "a failed write brings nothing in");
    }

    fn metadata_cache_only() -> Caches {
        Caches {
            meta: RecordCache::new(1 << 20, true),
            data: None,
        }
    }

    #[test]
    fn records_of_a_family_the_batch_deletes_by_range_do_not_come_back() {
        let caches = metadata_cache_only();
        cached(&caches, b"k", b"v1");
        cached(&caches, b"j", b"v1");
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"k".to_vec(), b"v2".to_vec());
        batch.delete_range(Cf::Meta, b"a".to_vec(), b"z".to_vec());
        batch.put(Cf::Meta, b"k".to_vec(), b"v3".to_vec());
        let withdrawn = withdraw_written(&caches, &batch);
        assert!(withdrawn.iter().all(Option::is_none));
        note_written(&caches, batch, withdrawn, true);
        let cache = caches.of(Cf::Meta).expect("a metadata cache");
        assert!(cache.get(b"k").is_err() && cache.get(b"j").is_err());

        cached(&caches, b"j", b"v1");
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"j".to_vec(), b"v2".to_vec());
        batch.delete_range(Cf::Data, b"a".to_vec(), b"z".to_vec());
        let withdrawn = withdraw_written(&caches, &batch);
        assert_eq!(withdrawn[0].as_deref(), Some(&b"v1"[..]), "another family");
    }

    #[test]
    fn a_range_no_read_asks_for_again_leaves_the_cache_as_it_was() {
        let caches = metadata_cache_only();
        cached(&caches, b"k", b"v1");
        cached(&caches, b"old version", b"v1");
        let mut batch = WriteBatch::new();
        batch.delete_unreachable_range(Cf::Meta, b"o".to_vec(), b"p".to_vec());
        let withdrawn = withdraw_written(&caches, &batch);
        assert!(withdrawn.iter().all(Option::is_none));
        note_written(&caches, batch, withdrawn, true);
        let cache = caches.of(Cf::Meta).expect("a metadata cache");
        assert_eq!(cache.get(b"k").ok().as_deref(), Some(&b"v1"[..]));
    }

    #[test]
    fn batches_read_back_from_the_wal_are_the_ops_written() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = RocksEngine::open(dir.path(), &RocksConfig::default()).expect("open");
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"k".to_vec(), b"v".to_vec());
        batch.delete(Cf::Expire, b"e".to_vec());
        batch.delete_range(Cf::Score, b"a".to_vec(), b"b".to_vec());
        batch.add_counter(Cf::Meta, b"count".to_vec(), -3);
        batch.patch(b"frag".to_vec(), 2, b"xy");
        let written = batch.ops.clone();
        engine.write(batch).expect("write");
        engine.flush_wal().expect("flush");
        let updates: Vec<(u64, Vec<u8>)> = engine
            .updates_since(0)
            .expect("updates")
            .collect::<Result<_, _>>()
            .expect("read");
        assert_eq!(updates.len(), 1);
        let (seq, data) = &updates[0];
        assert_eq!(
            wal::batch_span(data).expect("span"),
            (*seq, written.len() as u64)
        );
        let read =
            wal::decode_batch(data, &engine.family_ids().expect("families")).expect("decode");
        assert_eq!(read.ops, written);
        assert_eq!(engine.sequence(), seq + written.len() as u64 - 1);
        assert!(wal::decode_batch(
            &data[..data.len() - 1],
            &engine.family_ids().expect("families")
        )
        .is_err());
    }

    /// After a write failure the database is read, read-only, from the moment the one that
    /// failed closes until a reopen succeeds, also when a reopen fails (here because another
    /// open holds the directory's lock, as a disk taken again would make it fail).
    #[test]
    fn a_database_that_failed_a_write_is_read_until_it_reopens() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db");
        let config = RocksConfig::default();
        let engine = RocksEngine::open(&path, &config).expect("open");
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"k".to_vec(), b"v".to_vec());
        engine.write(batch).expect("write");
        engine.sync_wal().expect("sync");
        engine.health.fail("No space left on device");

        engine.retire_failed(&path).expect("stand-in");
        let holder = Opened::open(
            &path,
            &config,
            &engine.cache,
            &engine.write_buffers,
            &engine.remote,
        )
        .expect("lock holder");
        assert!(engine.recover(|| {}).is_err(), "the directory is locked");
        assert_eq!(
            engine.get(Cf::Meta, b"k").expect("read"),
            Some(b"v".to_vec())
        );
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"j".to_vec(), b"w".to_vec());
        assert!(matches!(
            engine.write(batch),
            Err(StorageError::Unwritable(_))
        ));
        // The stand-in is not written to, and its refusals are no new failure.
        assert!(engine.flush_wal().is_err());
        assert!(engine.flush_memtables().is_err());
        assert!(engine.fit_to_free_space().is_ok());
        assert_eq!(
            engine.write_failure().as_deref(),
            Some("No space left on device")
        );

        drop(holder);
        engine.recover(|| {}).expect("reopen");
        engine.resume_writes();
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"j".to_vec(), b"w".to_vec());
        engine.write(batch).expect("write after the reopen");
        assert_eq!(
            engine.get(Cf::Meta, b"k").expect("read"),
            Some(b"v".to_vec())
        );
    }

    /// RocksDB is built without its perf context (`.cargo/config.toml`): with counting on, a
    /// thread that writes 1,000 keys and reads one counts no key comparisons, where a build with
    /// the context counts about 31,000.
    #[test]
    fn rocksdb_counts_no_perf_metrics() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = RocksEngine::open(dir.path(), &RocksConfig::default()).expect("open");
        let counted = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::EnableCount);
                    let mut batch = WriteBatch::new();
                    for i in 0..1000u32 {
                        batch.put(Cf::Data, i.to_be_bytes().to_vec(), b"v".to_vec());
                    }
                    engine.write(batch).expect("write");
                    engine.get(Cf::Data, &500u32.to_be_bytes()).expect("get");
                    let context = rocksdb::perf::PerfContext::default();
                    context.metric(rocksdb::perf::PerfMetric::UserKeyComparisonCount)
                })
                .join()
                .expect("the counting thread")
        });
        assert_eq!(counted, 0, "RocksDB was built with its perf context");
    }
}
