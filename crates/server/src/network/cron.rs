//! Background work on a timer: reaping expired keys, sampling throughput, trimming the WAL
//! history, fitting memtables to the free disk space, closing MIGRATE's idle connections, and
//! recovering from write failures.
//!
//! It runs on its own thread because reaping makes synchronous storage calls that must not
//! hold up the connection tasks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use shale_storage::Engine;

use super::Services;
use crate::keyspace::now_ms;

/// Keys one reaping step removes per database before it checks its time budget.
const REAP_BATCH: usize = 256;
/// Share of each tick the reaper may use, as in Redis's active expiry (25%).
const REAP_BUDGET_PERCENT: u32 = 25;

pub struct Cron {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Cron {
    /// Stops the thread, waiting for it at most `patience`: a reap stuck behind a key lock
    /// must not keep the server from exiting.
    pub fn stop(mut self, patience: Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = Instant::now() + patience;
        while !thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}

/// How often archived WAL beyond `repl-backlog-size` is deleted, and memtables are fitted to
/// the free space.
const HISTORY_TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// Below this much free space the WAL history replicas may ask for is deleted: the disk is
/// for writes first, and a replica that needs it resynchronizes in full.
const LOW_SPACE: u64 = 256 << 20;

pub fn start(services: Arc<Services>) -> Cron {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("shale-cron".into())
        .spawn(move || {
            let mut history_trimmed = Instant::now();
            let mut failure = None;
            let mut engine_events = EngineEvents::default();
            while !flag.load(Ordering::Relaxed) {
                let tick = Duration::from_millis(1000 / services.config.read().hz.max(1) as u64);
                let started = Instant::now();
                services.stats.sample(now_ms());
                stop_orphan_scripts(&services);
                // A replica expires nothing: its master's deletions arrive as writes.
                if !services.keyspace.is_replica() {
                    let reaping = Instant::now();
                    reap(&services, tick * REAP_BUDGET_PERCENT / 100);
                    // A cycle slower than the threshold is an event, as in Redis's expiry.
                    services
                        .latency_monitor
                        .note("expire-cycle", reaping.elapsed());
                }
                services
                    .migrate_sockets
                    .close_idle(crate::services::replication::unix_secs());
                recover_writes(&services, &mut failure);
                engine_events.note(&services);
                if history_trimmed.elapsed() >= HISTORY_TRIM_INTERVAL {
                    history_trimmed = Instant::now();
                    let mut config = services.config.read().replication.clone();
                    match services.replication.engine().fit_to_free_space() {
                        Ok(free) if free < LOW_SPACE => config.backlog_size = 0,
                        Ok(_) => {}
                        Err(err) => tracing::warn!("can't read the free disk space: {err}"),
                    }
                    services.replication.trim_history(&config);
                }
                std::thread::sleep(tick.saturating_sub(started.elapsed()));
            }
        })
        .ok();
    Cron { stop, thread }
}

/// Writes refused since a WAL write, sync or flush failed work again once the engine has
/// reopened its database, tried every tick as Redis retries its AOF ten times a second. Before
/// the reopen, replicas are dropped (their feeds read the WAL); after it the keyspace reloads
/// what it keeps of the data and a master starts a new replication history. The failure is
/// logged when it begins and when it ends, as Redis logs both.
fn recover_writes(services: &Services, reported: &mut Option<Arc<str>>) {
    let engine = services.replication.engine();
    let Some(reason) = engine.write_failure() else {
        return;
    };
    if reported.is_none() {
        tracing::error!("writes are refused: the WAL can't be written: {reason}");
        *reported = Some(reason);
    }
    let replication = &services.replication;
    match engine.recover(|| {
        replication.drop_replicas();
    }) {
        Ok(()) => {}
        Err(_) => return,
    }
    if let Err(err) = services.keyspace.reload() {
        tracing::error!("reloading the keyspace after reopening the database: {err}");
    }
    if let Err(err) = replication.restart_history() {
        tracing::error!("{err}");
    }
    engine.resume_writes();
    *reported = None;
    tracing::warn!("the WAL write error looks solved: writes work again");
}

/// The latency monitor's events of the engine, sampled each tick: the longest WAL sync, the
/// time writes stalled, and how long flushes and compactions ran (from the tick one was seen
/// running to the tick none was: a tick's precision).
#[derive(Default)]
struct EngineEvents {
    stall_micros: Option<u64>,
    flushing_since: Option<Instant>,
    compacting_since: Option<Instant>,
}

impl EngineEvents {
    fn note(&mut self, services: &Services) {
        let monitor = &services.latency_monitor;
        monitor.note("wal-fsync", services.durability.take_slowest_sync());
        let stats = services.keyspace.engine().stats();
        if let Some(before) = self.stall_micros {
            let stalled = stats.stall_micros.saturating_sub(before);
            monitor.note("write-stall", Duration::from_micros(stalled));
        }
        self.stall_micros = Some(stats.stall_micros);
        let running = |since: &mut Option<Instant>, now_running: bool, event| match (
            since.as_ref(),
            now_running,
        ) {
            (None, true) => *since = Some(Instant::now()),
            (Some(started), false) => {
                monitor.note(event, started.elapsed());
                *since = None;
            }
            _ => {}
        };
        running(&mut self.flushing_since, stats.running_flushes > 0, "flush");
        running(
            &mut self.compacting_since,
            stats.running_compactions > 0,
            "compaction",
        );
    }
}

/// Stops scripts past `lua-time-limit` whose client has disconnected (see
/// [`crate::scripting::Scripts::stop_orphans`]).
fn stop_orphan_scripts(services: &Services) {
    let limit = Duration::from_millis(services.config.read().lua_time_limit);
    let stopped = services.scripts.stop_orphans(limit);
    if stopped > 0 {
        tracing::warn!("stopped {stopped} script(s) past lua-time-limit whose client has gone");
    }
}

fn reap(services: &Services, budget: Duration) {
    let started = Instant::now();
    let keyspace = &services.keyspace;
    for index in 0..keyspace.databases() {
        let db = keyspace.db(index);
        loop {
            // Named at the moment of the event: a SWAPDB meanwhile gives the data another number.
            let mut notify = |key: &[u8]| {
                let number = keyspace.db_number(db.index() as u8);
                services.notifications().expired(number, key)
            };
            match db.reap_expired(now_ms(), REAP_BATCH, &mut notify) {
                Ok(n) if n == REAP_BATCH && started.elapsed() < budget => continue,
                Ok(_) => break,
                Err(err) => {
                    tracing::warn!("expiry cycle on db {index}: {err}");
                    break;
                }
            }
        }
        if started.elapsed() >= budget {
            return;
        }
    }
}
