//! When acknowledged writes reach the OS, and the disk.
//!
//! RocksDB buffers WAL records in the process; a flusher thread hands them to the OS every
//! [`WAL_FLUSH_INTERVAL`], so a crash of the process alone loses at most that much, and a
//! write costs no syscall of its own. It is not the syncer thread, whose fsyncs may take long
//! on a busy disk. Syncs are shared: under `appendfsync always` a connection that wrote asks
//! for a sync *ticket* after its writes, and the syncer runs one WAL flush and sync for every
//! ticket issued before it started (group commit). A pipeline of writes or many connections
//! writing at once therefore share one fsync. Under `everysec` the syncer syncs once a second
//! if anything was written.
//!
//! A failed flush or sync is the engine's write failure (see `shale_storage::Engine::
//! write_failure`): writes are refused until the cron's recovery, and a write waiting for a
//! sync that failed, or made before a recovery, is answered with the failure, never
//! acknowledged.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use shale_storage::{Engine, StorageError};
use tokio::sync::watch;

use crate::config::FsyncPolicy;

/// How long a write may wait in the WAL buffer before it reaches the OS: the most a `kill -9`
/// loses under `everysec` and `no`, well within the second that Redis documents for a crash
/// under `everysec`.
pub const WAL_FLUSH_INTERVAL: Duration = Duration::from_millis(10);

const EVERYSEC: Duration = Duration::from_secs(1);

pub struct Durability {
    shared: Arc<Shared>,
    policy: Arc<AtomicU8>,
    completed: watch::Receiver<u64>,
    /// The sequence number of the last write handed to the OS, where replicas' feeds read
    /// the WAL (see `replication`).
    flushed: watch::Receiver<u64>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Shared {
    engine: Arc<dyn Engine>,
    /// The highest ticket issued.
    requested: Mutex<u64>,
    wake: Condvar,
    /// Whether anything was written since the last sync (for `everysec`).
    dirty: AtomicBool,
    stop: AtomicBool,
    syncs: AtomicU64,
    /// The longest sync since the latency monitor last asked, in µs.
    slowest_sync: AtomicU64,
    /// The tickets of the latest syncs that failed, as (first, last) ranges: their waiters
    /// get the failure, and the waiters of a sync that worked do not, whatever failed after.
    failed: Mutex<VecDeque<(u64, u64)>>,
}

/// Failed syncs remembered; a waiter wakes long before this many more have run.
const FAILED_SYNCS_KEPT: usize = 64;

impl Durability {
    pub fn start(engine: Arc<dyn Engine>, policy: FsyncPolicy) -> Result<Self, String> {
        let policy = Arc::new(AtomicU8::new(policy as u8));
        let (done_tx, done_rx) = watch::channel(0u64);
        let (flushed_tx, flushed_rx) = watch::channel(engine.sequence());
        let shared = Arc::new(Shared {
            engine,
            requested: Mutex::new(0),
            wake: Condvar::new(),
            dirty: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
            slowest_sync: AtomicU64::new(0),
            failed: Mutex::new(VecDeque::new()),
        });
        let syncer = shared.clone();
        let syncer_policy = policy.clone();
        let flusher = shared.clone();
        let threads = vec![
            spawn("shale-wal-sync", move || {
                syncer.sync(done_tx, &syncer_policy)
            })?,
            spawn("shale-wal-flush", move || flusher.flush(flushed_tx))?,
        ];
        Ok(Durability {
            shared,
            policy,
            completed: done_rx,
            flushed: flushed_rx,
            threads: Mutex::new(threads),
        })
    }

    pub fn policy(&self) -> FsyncPolicy {
        FsyncPolicy::from_u8(self.policy.load(Ordering::Relaxed))
    }

    pub fn set_policy(&self, policy: FsyncPolicy) {
        self.policy.store(policy as u8, Ordering::Relaxed);
    }

    /// Notes that a write happened (for `everysec`).
    pub fn mark_dirty(&self) {
        // Read first: a store on every write would pull the flag's cache line away from the
        // other worker threads each time.
        if !self.shared.dirty.load(Ordering::Relaxed) {
            self.shared.dirty.store(true, Ordering::Relaxed);
        }
    }

    /// Waits until every write made before this call is synced to disk. `generation` is the
    /// engine's when the first of those writes began: if a recovery came since, they may be
    /// lost.
    pub async fn wait_synced(&self, generation: u64) -> Result<(), StorageError> {
        let ticket = {
            let mut requested = self.shared.requested.lock();
            *requested += 1;
            *requested
        };
        self.shared.wake.notify_one();
        let mut completed = self.completed.clone();
        completed
            .wait_for(|&done| done >= ticket)
            .await
            .map_err(|_| StorageError::Engine("the WAL syncer stopped".into()))?;
        let engine = &self.shared.engine;
        let failed = self.shared.failed.lock();
        if failed
            .iter()
            .any(|&(first, last)| (first..=last).contains(&ticket))
        {
            drop(failed);
            let reason = engine
                .write_failure()
                .unwrap_or_else(|| "the WAL sync failed".into());
            return Err(StorageError::Unwritable(reason));
        }
        drop(failed);
        if engine.generation() != generation {
            return Err(StorageError::Unwritable(
                "the WAL was reopened before the write was synced".into(),
            ));
        }
        Ok(())
    }

    /// Changes each time writes reach the OS, to the sequence number of the last of them.
    pub fn flushed(&self) -> watch::Receiver<u64> {
        self.flushed.clone()
    }

    pub fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// The longest sync since the last call (for the latency monitor's `wal-fsync` event).
    pub fn take_slowest_sync(&self) -> Duration {
        Duration::from_micros(self.shared.slowest_sync.swap(0, Ordering::Relaxed))
    }

    /// Syncs once more and stops the threads.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake.notify_one();
        for thread in self.threads.lock().drain(..) {
            let _ = thread.join();
        }
    }
}

fn spawn(name: &str, run: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(run)
        .map_err(|err| format!("can't start the {name} thread: {err}"))
}

impl Shared {
    fn sync(&self, done: watch::Sender<u64>, policy: &AtomicU8) {
        let mut synced_ticket = 0;
        loop {
            let target = {
                let mut requested = self.requested.lock();
                if *requested == synced_ticket && !self.stop.load(Ordering::Relaxed) {
                    self.wake.wait_for(&mut requested, EVERYSEC);
                }
                *requested
            };
            let stopping = self.stop.load(Ordering::Relaxed);
            let periodic = FsyncPolicy::from_u8(policy.load(Ordering::Relaxed))
                == FsyncPolicy::EverySec
                && self.dirty.load(Ordering::Relaxed);
            if target > synced_ticket || periodic || stopping {
                self.dirty.store(false, Ordering::Relaxed);
                let started = std::time::Instant::now();
                // A sync on an engine that has failed may find nothing left to write: what a
                // failed flush held is gone, so it fails too.
                let synced =
                    self.engine.sync_wal().is_ok() && self.engine.write_failure().is_none();
                let took = started.elapsed().as_micros() as u64;
                self.slowest_sync.fetch_max(took, Ordering::Relaxed);
                if !synced && target > synced_ticket {
                    let mut failed = self.failed.lock();
                    if failed.len() == FAILED_SYNCS_KEPT {
                        failed.pop_front();
                    }
                    failed.push_back((synced_ticket + 1, target));
                }
                self.syncs.fetch_add(1, Ordering::Relaxed);
                synced_ticket = target;
                done.send_replace(target);
            }
            if stopping {
                return;
            }
        }
    }

    fn flush(&self, flushed: watch::Sender<u64>) {
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(WAL_FLUSH_INTERVAL);
            let sequence = self.engine.sequence();
            if self.engine.flush_wal().is_ok() && sequence != *flushed.borrow() {
                flushed.send_replace(sequence);
            }
        }
    }
}
