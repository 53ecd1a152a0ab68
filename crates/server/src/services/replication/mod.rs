//! Replication between Shale servers, in Redis's model: a master has a replication ID and an
//! offset, replicas follow it with PSYNC, and offsets are what WAIT and Sentinel compare.
//!
//! An offset here is a RocksDB sequence number. A replica starts from a checkpoint of its
//! master's database (same numbers) and applies the master's WAL batches in order through
//! its own engine, each taking the numbers it took on the master; so a replica's own sequence
//! number is its offset, survives a crash with its data, and continues unchanged when it is
//! promoted. The history a reconnecting replica needs is the master's archived WAL (see
//! [`Replication::trim_history`]).
//!
//! - [`feed`]: the master's side of one replica's link, after PSYNC.
//! - [`link`]: a replica's link to its master; `from_redis` its stream from a Redis master.
//! - [`stream`]: the frames on the link after the handshake.
//! - `bulk`: a full sync's files, sent and received on blocking threads.
//! - `direct`: the files of a received copy, written past the page cache.

mod bulk;
mod direct;
pub mod feed;
mod from_redis;
pub mod link;
pub mod stream;

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use shale_storage::{Engine, RocksEngine};
use tokio::sync::{watch, Notify};

use crate::config::ReplicationConfig;
use crate::datadir::DataDir;
use crate::error::Error;
use crate::keyspace::{Keyspace, ReplicaMode};
use crate::services::ClientHandle;
pub use from_redis::Dispatch;

/// A replication ID: 40 random hex digits, like a run ID.
pub fn random_id() -> String {
    format!(
        "{:032x}{:08x}",
        rand::random::<u128>(),
        rand::random::<u32>()
    )
}

/// Forty zeros: no secondary ID.
const NO_ID: &str = "0000000000000000000000000000000000000000";

pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The history this server can continue: its ID up to the current offset, and the ID it
/// had before a promotion up to the offset it was promoted at.
#[derive(Debug, Clone)]
pub struct ReplicationIds {
    pub id: String,
    pub id2: String,
    /// The first offset not in `id2`'s history; -1 without one.
    pub second_offset: i64,
}

/// Counters INFO stats reports.
#[derive(Default)]
pub struct SyncStats {
    pub full: AtomicU64,
    pub partial_ok: AtomicU64,
    pub partial_err: AtomicU64,
}

pub struct Replication {
    engine: Arc<RocksEngine>,
    keyspace: Arc<Keyspace>,
    pub data_dir: DataDir,
    ids: Mutex<ReplicationIds>,
    /// The link to the master, while this server is a replica; [`link::supervise`] runs it.
    master: watch::Sender<Option<Arc<link::MasterLink>>>,
    /// Replicas attached to this server.
    replicas: Mutex<Vec<Arc<feed::ReplicaState>>>,
    /// Woken by every acknowledgement a replica sends (WAIT).
    pub acked: Notify,
    /// Held by whatever writes into the data directory's `incoming/` (a full sync's files, a
    /// Redis master's snapshot), until its thread ends: a session that is dropped leaves its
    /// thread running a moment, and the next must not clear the directory under it.
    pub incoming: Arc<tokio::sync::Mutex<()>>,
    /// Woken by every write while replicas are attached (their feeds wait on it).
    written: Arc<Notify>,
    pub stats: SyncStats,
    /// Full syncs whose replicas have not caught up with the WAL since their snapshot: while
    /// any runs, no WAL history is deleted.
    full_syncs: AtomicUsize,
    /// When a replica was last attached (or the server started), for `repl-backlog-ttl`.
    last_attached: Mutex<Instant>,
    next_feed: AtomicU64,
    /// `min-replicas-to-write` and `min-replicas-max-lag`, read by every write command.
    min_replicas: AtomicU64,
    min_replicas_lag: AtomicU64,
}

impl Replication {
    /// The replication state at start: a replica continues the ID it recorded (its master's),
    /// a master takes a new one and keeps the recorded one as its second, as Redis 7.0 does
    /// after a restart, so replicas of its previous life continue where they stopped.
    pub fn open(
        engine: Arc<RocksEngine>,
        keyspace: Arc<Keyspace>,
        data_dir: DataDir,
        replica: bool,
    ) -> Result<Replication, String> {
        let recorded = data_dir.replication_id();
        let ids = match (replica, recorded) {
            (true, Some(id)) => ReplicationIds {
                id,
                id2: NO_ID.into(),
                second_offset: -1,
            },
            (_, recorded) => ReplicationIds {
                id: random_id(),
                second_offset: recorded
                    .as_ref()
                    .map_or(-1, |_| engine.sequence() as i64 + 1),
                id2: recorded.unwrap_or_else(|| NO_ID.into()),
            },
        };
        if let Err(err) = data_dir.record_replication_id(&ids.id) {
            // A start on a full disk goes on: the next start then takes a new ID again, and
            // replicas of this life resynchronize in full.
            tracing::warn!("can't record the replication ID: {err}");
        }
        keyspace.set_replica(match replica {
            true => ReplicaMode::OfShale,
            false => ReplicaMode::None,
        });
        let written = Arc::new(Notify::new());
        let wake = written.clone();
        engine.on_recent(Arc::new(move || wake.notify_waiters()));
        Ok(Replication {
            engine,
            keyspace,
            data_dir,
            ids: Mutex::new(ids),
            master: watch::Sender::new(None),
            replicas: Mutex::new(Vec::new()),
            acked: Notify::new(),
            incoming: Arc::default(),
            written,
            stats: SyncStats::default(),
            full_syncs: AtomicUsize::new(0),
            last_attached: Mutex::new(Instant::now()),
            next_feed: AtomicU64::new(1),
            min_replicas: AtomicU64::new(0),
            min_replicas_lag: AtomicU64::new(0),
        })
    }

    pub fn engine(&self) -> &Arc<RocksEngine> {
        &self.engine
    }

    pub fn ids(&self) -> ReplicationIds {
        self.ids.lock().clone()
    }

    /// The offset: the sequence number of the last write here, or, following a Redis
    /// master, the bytes of its stream applied here (Redis's offsets, which its WAIT and INFO
    /// compare).
    pub fn offset(&self) -> u64 {
        match self.master() {
            Some(link) if link.is_redis() => link.redis_history.offset.load(Ordering::Acquire),
            _ => self.engine.sequence(),
        }
    }

    pub fn master(&self) -> Option<Arc<link::MasterLink>> {
        self.master.borrow().clone()
    }

    /// Changes whenever this server follows a master or stops following one.
    pub fn master_changes(&self) -> watch::Receiver<Option<Arc<link::MasterLink>>> {
        self.master.subscribe()
    }

    pub fn replicas(&self) -> Vec<Arc<feed::ReplicaState>> {
        self.replicas.lock().clone()
    }

    /// Follows a new master (REPLICAOF host port), through a link [`link::supervise`] runs.
    pub fn follow(&self, host: String, port: u16) {
        let new = Arc::new(link::MasterLink::new(host, port));
        self.keyspace.set_replica(ReplicaMode::OfShale);
        if let Some(old) = self.master.send_replace(Some(new)) {
            old.stop();
        }
    }

    /// Stops following (REPLICAOF NO ONE): the history so far continues under a new ID, the
    /// old one second, so other replicas of the old master can continue from here.
    pub fn promote(&self) -> Result<(), Error> {
        let Some(old) = self.master.send_replace(None) else {
            return Ok(());
        };
        old.stop();
        self.keyspace.promote()?;
        self.shift_id();
        Ok(())
    }

    fn shift_id(&self) {
        let mut ids = self.ids.lock();
        ids.id2 = std::mem::replace(&mut ids.id, random_id());
        ids.second_offset = self.engine.sequence() as i64 + 1;
        if let Err(err) = self.data_dir.record_replication_id(&ids.id) {
            tracing::warn!("can't record the replication ID: {err}");
        }
    }

    /// Takes the master's ID as this replica's own (after a full sync, or a `+CONTINUE` with
    /// a new ID after the master was promoted: the old one becomes the second).
    fn adopt_id(&self, id: &str, continued: bool) {
        let mut ids = self.ids.lock();
        if ids.id == id {
            return;
        }
        if continued {
            ids.id2 = std::mem::replace(&mut ids.id, id.to_string());
            ids.second_offset = self.engine.sequence() as i64 + 1;
        } else {
            *ids = ReplicationIds {
                id: id.to_string(),
                id2: NO_ID.into(),
                second_offset: -1,
            };
        }
        if let Err(err) = self.data_dir.record_replication_id(&ids.id) {
            tracing::warn!("can't record the replication ID: {err}");
        }
    }

    /// Where a replica asking to continue `id` from `offset` (the first one it lacks) can
    /// continue, if this server holds that history: the last offset it has.
    fn continuable(&self, id: &str, offset: i64) -> Option<u64> {
        let latest = self.engine.sequence();
        let has = offset.checked_sub(1).and_then(|o| u64::try_from(o).ok())?;
        let ids = self.ids.lock().clone();
        let known = (id == ids.id && has <= latest)
            || (id == ids.id2 && offset <= ids.second_offset && has <= latest);
        if !known {
            return None;
        }
        if has == latest {
            return Some(has);
        }
        // The WAL must still hold the batch right after `has`.
        let mut updates = self.engine.updates_since(has).ok()?;
        match updates.next() {
            Some(Ok((seq, _))) if seq == has + 1 => Some(has),
            _ => None,
        }
    }

    /// While replicas are attached, the engine keeps the latest batches for their feeds.
    fn attach(&self, replica: Arc<feed::ReplicaState>) {
        let mut replicas = self.replicas.lock();
        if replicas.is_empty() {
            self.engine.keep_recent(true);
        }
        replicas.push(replica);
        *self.last_attached.lock() = Instant::now();
    }

    fn detach(&self, id: u64) {
        let mut replicas = self.replicas.lock();
        replicas.retain(|r| r.id != id);
        if replicas.is_empty() {
            self.engine.keep_recent(false);
        }
        *self.last_attached.lock() = Instant::now();
    }

    /// After the engine reopened on a write failure: writes replicas may have received are
    /// gone from this server, so a master starts a new history (a new ID and no second one)
    /// and its replicas, dropped, resynchronize in full. A replica keeps its master's ID and
    /// continues from what it holds.
    pub fn restart_history(&self) -> Result<(), String> {
        if !self.keyspace.is_replica() {
            let mut ids = self.ids.lock();
            *ids = ReplicationIds {
                id: random_id(),
                id2: NO_ID.into(),
                second_offset: -1,
            };
            self.data_dir
                .record_replication_id(&ids.id)
                .map_err(|e| format!("can't record the replication ID: {e}"))?;
        }
        self.drop_replicas();
        Ok(())
    }

    /// Drops every attached replica (they reconnect): after this server's data was replaced.
    pub fn drop_replicas(&self) -> usize {
        let replicas = self.replicas();
        replicas.iter().for_each(|r| r.client.kill());
        replicas.len()
    }

    /// How many replicas have acknowledged `offset`.
    pub fn acknowledged(&self, offset: u64) -> usize {
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.acked() >= offset)
            .count()
    }

    /// Asks every replica for an acknowledgement now.
    pub fn request_acks(&self) {
        self.replicas
            .lock()
            .iter()
            .for_each(|r| r.get_ack.notify_one());
    }

    /// Replicas that acknowledged within `max_lag` seconds (`min-replicas-*`).
    pub fn good_replicas(&self, max_lag: u64) -> usize {
        let now = unix_secs();
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.is_online() && now.saturating_sub(r.ack_time()) <= max_lag)
            .count()
    }

    /// Takes the settings that every write reads (after CONFIG SET).
    pub fn configure(&self, config: &ReplicationConfig) {
        self.min_replicas
            .store(u64::from(config.min_replicas_to_write), Ordering::Relaxed);
        self.min_replicas_lag
            .store(config.min_replicas_max_lag, Ordering::Relaxed);
    }

    /// `min-replicas-to-write` and `min-replicas-max-lag` when both are set.
    pub fn min_replicas(&self) -> Option<(usize, u64)> {
        let needed = self.min_replicas.load(Ordering::Relaxed) as usize;
        let lag = self.min_replicas_lag.load(Ordering::Relaxed);
        (needed > 0 && lag > 0).then_some((needed, lag))
    }

    /// Whether writes are refused for want of good replicas (`-NOREPLICAS`).
    pub fn check_min_replicas(&self) -> Result<(), Error> {
        let Some((needed, lag)) = self.min_replicas() else {
            return Ok(());
        };
        if self.keyspace.is_replica() {
            return Ok(());
        }
        match self.good_replicas(lag) >= needed {
            true => Ok(()),
            false => Err(Error::NoReplicas),
        }
    }

    /// Deletes archived WAL files beyond what replicas may still ask for: the oldest first,
    /// down to `repl-backlog-size` bytes, and all once no replica has been attached for
    /// `repl-backlog-ttl` seconds. Nothing while a full sync still needs the WAL since its
    /// snapshot. Runs from the cron.
    pub fn trim_history(&self, config: &ReplicationConfig) {
        if self.full_syncs.load(Ordering::Acquire) > 0 {
            return;
        }
        let unattached = self.replicas.lock().is_empty()
            && self.master().is_none()
            && config.backlog_ttl > 0
            && self.last_attached.lock().elapsed().as_secs() >= config.backlog_ttl;
        let keep = if unattached {
            0
        } else {
            config.backlog_size as u64
        };
        let logs = self.engine.archived_wal();
        let mut total: u64 = logs.iter().map(|(_, size)| size).sum();
        for (path, size) in logs {
            if total <= keep {
                break;
            }
            if let Err(err) = std::fs::remove_file(&path) {
                tracing::warn!("can't remove archived WAL {}: {err}", path.display());
                break;
            }
            total -= size;
        }
    }

    /// The first offset the WAL still holds: where the oldest history a replica may continue
    /// from starts (INFO's `repl_backlog_first_byte_offset`).
    pub fn history_start(&self) -> u64 {
        match self.engine.updates_since(0).ok().and_then(|mut u| u.next()) {
            Some(Ok((seq, _))) => seq,
            _ => self.engine.sequence() + 1,
        }
    }
}

/// A replica's state as INFO and ROLE name it on its master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FeedState {
    WaitBgsave,
    SendBulk,
    Online,
}

impl FeedState {
    pub fn name(self) -> &'static str {
        match self {
            FeedState::WaitBgsave => "wait_bgsave",
            FeedState::SendBulk => "send_bulk",
            FeedState::Online => "online",
        }
    }

    fn from_u8(v: u8) -> FeedState {
        match v {
            0 => FeedState::WaitBgsave,
            1 => FeedState::SendBulk,
            _ => FeedState::Online,
        }
    }
}

/// What the handshake told a master about the replica connecting (REPLCONF).
#[derive(Debug, Clone, Default)]
pub struct ReplicaHello {
    pub listening_port: u16,
    pub ip_address: Option<String>,
}

/// PSYNC's arguments: the history the replica has, and the first offset it lacks.
#[derive(Debug, Clone)]
pub struct PsyncRequest {
    pub id: String,
    pub offset: i64,
}

/// A shared cell for a [`FeedState`].
#[derive(Default)]
pub struct StateCell(AtomicU8);

impl StateCell {
    pub fn get(&self) -> FeedState {
        FeedState::from_u8(self.0.load(Ordering::Relaxed))
    }

    pub fn set(&self, state: FeedState) {
        self.0.store(state as u8, Ordering::Relaxed);
    }
}

/// The client a replica connected as, for CLIENT KILL TYPE replica.
pub type ReplicaClient = Arc<ClientHandle>;
