//! SAVE and BGSAVE: a backup of the database in `<dir>/backup`, a RocksDB checkpoint (the
//! table files hard-linked, the rest copied), consistent and taken in about the time of a
//! memtable flush. The backup is a database directory of its own: copied elsewhere as `db`,
//! `shale-server --dir` there opens it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use shale_storage::RocksEngine;

use crate::datadir::DataDir;
use crate::error::Error;
use crate::services::replication::unix_secs;

pub struct Backups {
    /// Set while a backup runs (see [`RunningBackup`]).
    running: Arc<AtomicBool>,
    /// When the running backup started.
    started: Mutex<Option<Instant>>,
    /// Unix seconds of the last backup completed (the server's start before any): LASTSAVE.
    last_save: AtomicU64,
    last_ok: AtomicBool,
    /// Seconds the last BGSAVE took; -1 before any.
    last_seconds: AtomicI64,
    /// The sequence number the last backup holds everything up to.
    saved_sequence: AtomicU64,
    /// BGSAVEs started, as Redis counts `rdb_saves`.
    saves: AtomicU64,
}

impl Backups {
    pub fn new(sequence: u64) -> Backups {
        Backups {
            running: Arc::new(AtomicBool::new(false)),
            started: Mutex::new(None),
            last_save: AtomicU64::new(unix_secs()),
            last_ok: AtomicBool::new(true),
            last_seconds: AtomicI64::new(-1),
            saved_sequence: AtomicU64::new(sequence),
            saves: AtomicU64::new(0),
        }
    }

    /// SAVE: takes a backup now.
    pub fn save(&self, engine: &RocksEngine, dir: &DataDir) -> Result<(), Error> {
        let _running = self.claim()?;
        self.take(engine, dir, false)
    }

    /// BGSAVE: takes a backup on a thread of its own.
    pub fn start(self: &Arc<Self>, engine: Arc<RocksEngine>, dir: DataDir) -> Result<(), Error> {
        let running = self.claim()?;
        self.saves.fetch_add(1, Ordering::Relaxed);
        let backups = self.clone();
        std::thread::Builder::new()
            .name("bgsave".into())
            .spawn(move || {
                let _running = running;
                // Its failure is reported in INFO persistence and the log.
                let _ = backups.take(&engine, &dir, true);
            })
            .map_err(|e| Error::msg(format!("can't start a backup thread: {e}")))?;
        Ok(())
    }

    /// Marks a backup as running until the guard drops, however it ends; refuses a second.
    fn claim(&self) -> Result<RunningBackup, Error> {
        if self.running.swap(true, Ordering::AcqRel) {
            return Err(Error::msg("Background save already in progress"));
        }
        Ok(RunningBackup(self.running.clone()))
    }

    fn take(&self, engine: &RocksEngine, dir: &DataDir, background: bool) -> Result<(), Error> {
        let started = Instant::now();
        *self.started.lock() = Some(started);
        let taken = dir
            .backup_staging()
            .map_err(|e| e.to_string())
            .and_then(|staged| {
                let sequence = engine.checkpoint(&staged).map_err(|e| e.to_string())?;
                dir.install_backup(&staged).map_err(|e| e.to_string())?;
                Ok(sequence)
            });
        *self.started.lock() = None;
        if background {
            self.last_seconds
                .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
        }
        match taken {
            Ok(sequence) => {
                self.saved_sequence.store(sequence, Ordering::Relaxed);
                self.last_save.store(unix_secs(), Ordering::Relaxed);
                self.last_ok.store(true, Ordering::Relaxed);
                tracing::info!(
                    "backup written to {} in {} ms",
                    dir.backup().display(),
                    started.elapsed().as_millis()
                );
                Ok(())
            }
            Err(err) => {
                self.last_ok.store(false, Ordering::Relaxed);
                tracing::warn!("the backup failed: {err}");
                Err(Error::msg(format!("the backup failed: {err}")))
            }
        }
    }

    /// Whether a backup runs now.
    pub fn in_progress(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    pub fn last_save(&self) -> u64 {
        self.last_save.load(Ordering::Relaxed)
    }

    pub fn last_ok(&self) -> bool {
        self.last_ok.load(Ordering::Relaxed)
    }

    pub fn last_seconds(&self) -> i64 {
        self.last_seconds.load(Ordering::Relaxed)
    }

    /// Seconds the running backup has taken so far; -1 with none running.
    pub fn current_seconds(&self) -> i64 {
        self.started
            .lock()
            .map_or(-1, |started| started.elapsed().as_secs() as i64)
    }

    pub fn saved_sequence(&self) -> u64 {
        self.saved_sequence.load(Ordering::Relaxed)
    }

    pub fn saves(&self) -> u64 {
        self.saves.load(Ordering::Relaxed)
    }
}

/// A running backup: clears the flag when dropped, however the backup ends.
struct RunningBackup(Arc<AtomicBool>);

impl Drop for RunningBackup {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
