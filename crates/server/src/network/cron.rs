//! Background work on a timer: reaping expired keys and sampling throughput.
//!
//! It runs on its own thread because reaping makes synchronous storage calls that must not
//! hold up the connection tasks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

/// How often archived WAL beyond `repl-backlog-size` is deleted.
const HISTORY_TRIM_INTERVAL: Duration = Duration::from_secs(1);

pub fn start(services: Arc<Services>) -> Cron {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("shale-cron".into())
        .spawn(move || {
            let mut history_trimmed = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                let tick = Duration::from_millis(1000 / services.config.read().hz.max(1) as u64);
                let started = Instant::now();
                services.stats.sample(now_ms());
                stop_orphan_scripts(&services);
                // A replica expires nothing: its master's deletions arrive as writes.
                if !services.keyspace.is_replica() {
                    reap(&services, tick * REAP_BUDGET_PERCENT / 100);
                }
                if history_trimmed.elapsed() >= HISTORY_TRIM_INTERVAL {
                    history_trimmed = Instant::now();
                    let config = services.config.read().replication.clone();
                    services.replication.trim_history(&config);
                }
                std::thread::sleep(tick.saturating_sub(started.elapsed()));
            }
        })
        .ok();
    Cron { stop, thread }
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
