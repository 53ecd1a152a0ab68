//! A replica's link to its master: a Redis-shaped handshake (PING, AUTH, REPLCONF, PSYNC),
//! then a full sync or a continuation, then every batch the master writes, applied in order.
//! The link reconnects until REPLICAOF points elsewhere or NO ONE.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use shale_storage::{wal, Engine, WriteBatch};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::bulk;
use super::from_redis::{self, Dispatch};
use super::stream::Frame;
use super::unix_secs;
use crate::keyspace::ReplicaMode;
use crate::services::Services;

/// How often a replica acknowledges its offset unasked.
const ACK_INTERVAL: Duration = Duration::from_secs(1);
/// The wait before reconnecting after the link failed.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// Bytes of the master's batches a replica applies in one write, at most: batches that arrive
/// together are applied together. A replica catching up after a stop under SET load then
/// applied about 210k sequence numbers a second instead of 188k; the memtable's skiplist
/// inserts were a third of its CPU (perf), which no batching removes.
const APPLY_LIMIT: usize = 4 << 20;
/// Room below which the input buffer grows before a read.
const READ_SPARE: usize = 8 << 10;
/// The longest handshake reply line accepted.
const MAX_LINE: usize = 4096;

/// The link's state, named as ROLE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LinkState {
    Connect,
    Connecting,
    Handshake,
    Sync,
    Connected,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }

    fn from_u8(v: u8) -> LinkState {
        match v {
            0 => LinkState::Connect,
            1 => LinkState::Connecting,
            2 => LinkState::Handshake,
            3 => LinkState::Sync,
            _ => LinkState::Connected,
        }
    }
}

/// The master a replica follows and how its link is doing, for INFO and ROLE.
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    state: AtomicU8,
    /// When the master last sent anything (unix seconds).
    pub(super) last_io: AtomicU64,
    /// When the link went down (unix seconds); 0 if it never was up.
    pub(super) down_since: AtomicU64,
    /// Bytes of a full sync received so far.
    pub sync_read: AtomicU64,
    stopped: AtomicBool,
    stop: Notify,
    /// Drops the link now (CLIENT KILL TYPE master); it reconnects.
    reset: Notify,
    /// Resets so far: a session drops once it sees one after its start, so a reset during
    /// its handshake or sync is not lost.
    resets: AtomicU64,
    /// Whether the master is a Redis (known after the handshake).
    redis: AtomicBool,
    /// Where this replica is in a Redis master's history.
    pub redis_history: RedisHistory,
}

/// A Redis master's replication ID, the offset (in bytes of its stream) applied here, and the
/// database its stream had selected there: kept in memory, so a dropped link continues with
/// PSYNC where it was (the stream selects a database only when it changes), and a restart
/// syncs in full.
#[derive(Default)]
pub struct RedisHistory {
    pub id: parking_lot::Mutex<Option<String>>,
    pub offset: AtomicU64,
    pub db: std::sync::atomic::AtomicUsize,
}

impl MasterLink {
    pub fn new(host: String, port: u16) -> MasterLink {
        MasterLink {
            host,
            port,
            state: AtomicU8::new(LinkState::Connect as u8),
            last_io: AtomicU64::new(0),
            down_since: AtomicU64::new(0),
            sync_read: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            stop: Notify::new(),
            reset: Notify::new(),
            resets: AtomicU64::new(0),
            redis: AtomicBool::new(false),
            redis_history: RedisHistory::default(),
        }
    }

    /// Whether the master is a Redis, whose stream offsets this replica reports.
    pub fn is_redis(&self) -> bool {
        self.redis.load(Ordering::Acquire)
    }

    pub fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Relaxed))
    }

    pub(super) fn set_state(&self, state: LinkState) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    pub fn is_up(&self) -> bool {
        self.state() == LinkState::Connected
    }

    /// Seconds since the master last sent anything, while connected; -1 otherwise.
    pub fn last_io_seconds_ago(&self) -> i64 {
        match self.is_up() {
            true => unix_secs().saturating_sub(self.last_io.load(Ordering::Relaxed)) as i64,
            false => -1,
        }
    }

    /// Seconds the link has been down; -1 if it never was up.
    pub fn down_for(&self) -> i64 {
        match self.down_since.load(Ordering::Relaxed) {
            0 => -1,
            since => unix_secs().saturating_sub(since) as i64,
        }
    }

    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.stop.notify_waiters();
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Drops the link; it reconnects and continues where it was.
    pub fn reset(&self) {
        self.resets.fetch_add(1, Ordering::AcqRel);
        self.reset.notify_waiters();
    }

    pub(super) fn resets(&self) -> u64 {
        self.resets.load(Ordering::Acquire)
    }

    /// Resolves once the link has been reset after `since` ([`Self::resets`] then).
    pub(super) async fn reset_after(&self, since: u64) {
        loop {
            let notified = self.reset.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.resets() != since {
                return;
            }
            notified.await;
        }
    }

    /// As in Redis, the link counts as down since it dropped; one never established is down
    /// "since ever" (-1).
    fn went_down(&self) {
        if self.is_up() {
            self.down_since.store(unix_secs(), Ordering::Relaxed);
        }
        self.set_state(LinkState::Connect);
    }
}

/// Runs the link to each master the server is told to follow, until shutdown; `dispatch`
/// runs a Redis master's commands.
pub async fn supervise(services: Arc<Services>, dispatch: Dispatch) {
    let mut links = services.replication.master.subscribe();
    loop {
        let current = links.borrow_and_update().clone();
        if let Some(link) = current {
            tokio::spawn(run(services.clone(), link, dispatch));
        }
        if links.changed().await.is_err() {
            return;
        }
    }
}

/// Follows `link`'s master until the link is stopped.
async fn run(services: Arc<Services>, link: Arc<MasterLink>, dispatch: Dispatch) {
    let mut shutdown = services.shutdown.subscribe();
    while !link.is_stopped() {
        let session = Session {
            services: services.clone(),
            link: link.clone(),
            input: BytesMut::new(),
            master_id: String::new(),
            master_offset: 0,
            dispatch,
            resets: link.resets(),
        };
        let ended = tokio::select! {
            ended = session.run() => ended,
            _ = link.stop.notified() => return,
            _ = shutdown.wait_for(|&stop| stop) => return,
        };
        if link.is_stopped() {
            return;
        }
        match ended {
            Ok(()) => tracing::info!("link to master {}:{} dropped", link.host, link.port),
            Err(err) => tracing::warn!("link to master {}:{}: {err}", link.host, link.port),
        }
        link.went_down();
        tokio::select! {
            _ = tokio::time::sleep(RECONNECT_DELAY) => {}
            _ = link.stop.notified() => return,
        }
    }
}

struct Session {
    services: Arc<Services>,
    link: Arc<MasterLink>,
    input: BytesMut,
    /// The ID `+FULLRESYNC` named, which the replica takes once the snapshot is in, and (from
    /// a Redis master) the offset the snapshot is at.
    master_id: String,
    master_offset: u64,
    dispatch: Dispatch,
    /// The link's resets when the session started.
    resets: u64,
}

pub(super) type LinkResult<T> = Result<T, String>;

impl Session {
    async fn run(mut self) -> LinkResult<()> {
        let link = self.link.clone();
        let timeout = Duration::from_secs(self.services.config.read().replication.timeout);
        link.set_state(LinkState::Connecting);
        let mut stream =
            tokio::time::timeout(timeout, TcpStream::connect((link.host.as_str(), link.port)))
                .await
                .map_err(|_| "connect timed out".to_string())?
                .map_err(|e| format!("can't connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        link.set_state(LinkState::Handshake);
        let continued = tokio::time::timeout(timeout, self.handshake(&mut stream))
            .await
            .map_err(|_| "handshake timed out".to_string())??;
        if link.is_redis() {
            let follower = from_redis::Follower {
                services: self.services,
                link,
                input: self.input,
                dispatch: self.dispatch,
                resets: self.resets,
                snapshot_at: (self.master_id, self.master_offset),
            };
            return follower.run(stream, continued, timeout).await;
        }
        if !continued {
            link.set_state(LinkState::Sync);
            self.receive_snapshot(&mut stream).await?;
        }
        link.set_state(LinkState::Connected);
        link.last_io.store(unix_secs(), Ordering::Relaxed);
        link.down_since.store(0, Ordering::Relaxed);
        tracing::info!("replicating {}:{}", link.host, link.port);
        self.follow(&mut stream, timeout).await
    }

    /// Sends the handshake; returns whether the master continues this replica's history
    /// (`+CONTINUE`) rather than sending a snapshot (`+FULLRESYNC`, already read).
    async fn handshake(&mut self, stream: &mut TcpStream) -> LinkResult<bool> {
        let services = self.services.clone();
        let config = services.config.read().replication.clone();
        send(stream, &["PING"]).await?;
        let pong = self.line(stream).await?;
        // A master with a password answers PING with -NOAUTH before AUTH, as Redis's does.
        if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
            return Err(format!("master answered PING with {pong}"));
        }
        if let Some(password) = &config.masterauth {
            match &config.masteruser {
                Some(user) => send(stream, &["AUTH", user, password]).await?,
                None => send(stream, &["AUTH", password]).await?,
            }
            let reply = self.line(stream).await?;
            if reply.starts_with('-') {
                return Err(format!("master refused AUTH: {reply}"));
            }
        }
        let port = match config.announce_port {
            0 => services.tcp_port,
            port => port,
        };
        send(stream, &["REPLCONF", "listening-port", &port.to_string()]).await?;
        self.line(stream).await?;
        if let Some(ip) = &config.announce_ip {
            send(stream, &["REPLCONF", "ip-address", ip]).await?;
            self.line(stream).await?;
        }
        send(stream, &["REPLCONF", "capa", "eof", "capa", "psync2"]).await?;
        self.line(stream).await?;
        // A Shale master knows this option; a Redis master refuses it, and then sends an RDB
        // and its command stream instead of Shale's frames.
        send(stream, &["REPLCONF", "shale", "1"]).await?;
        let redis = self.line(stream).await?.starts_with('-');
        self.link.redis.store(redis, Ordering::Release);
        services.keyspace.set_replica(match redis {
            true => ReplicaMode::OfRedis,
            false => ReplicaMode::OfShale,
        });
        let replication = &services.replication;
        let link = self.link.clone();
        let history = &link.redis_history;
        // Empty data has no history to continue: the master sends all of it, as it does
        // for a new Redis replica.
        let (id, wanted) = match (redis, history.id.lock().clone(), replication.offset()) {
            (true, Some(id), _) => {
                let next = history.offset.load(Ordering::Acquire) + 1;
                (id, next.to_string())
            }
            (true, None, _) | (false, _, 0) => ("?".to_string(), "-1".to_string()),
            (false, _, has) => (replication.ids().id, (has + 1).to_string()),
        };
        send(stream, &["PSYNC", &id, &wanted]).await?;
        let reply = self.line(stream).await?;
        let words: Vec<&str> = reply.split_whitespace().collect();
        match words.as_slice() {
            ["+CONTINUE"] => Ok(true),
            ["+CONTINUE", master_id] if redis => {
                *history.id.lock() = Some(master_id.to_string());
                Ok(true)
            }
            ["+CONTINUE", master_id] => {
                replication.adopt_id(master_id, true);
                Ok(true)
            }
            ["+FULLRESYNC", master_id, offset] if redis => {
                // Taken once the snapshot is in: a sync that fails must not leave a history
                // the master would continue from.
                self.master_offset = offset
                    .parse()
                    .map_err(|_| format!("master answered PSYNC with {reply}"))?;
                self.master_id = master_id.to_string();
                Ok(false)
            }
            ["+FULLRESYNC", master_id, _offset] => {
                self.master_id = master_id.to_string();
                Ok(false)
            }
            _ => Err(format!("master answered PSYNC with {reply}")),
        }
    }

    /// Reads one reply line of the handshake.
    async fn line(&mut self, stream: &mut TcpStream) -> LinkResult<String> {
        loop {
            if let Some(end) = self.input.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.input[..end]).into_owned();
                self.input.advance(end + 2);
                return Ok(line);
            }
            if self.input.len() > MAX_LINE {
                return Err("master sent an overlong reply line".into());
            }
            self.read(stream).await?;
        }
    }

    async fn read(&mut self, stream: &mut TcpStream) -> LinkResult<()> {
        // Only when the buffer is nearly full: a frame being read has its room reserved whole
        // (see `Frame::decode`), and growing it further would copy the frame.
        if self.input.capacity() - self.input.len() < READ_SPARE {
            self.input.reserve(64 << 10);
        }
        match stream.read_buf(&mut self.input).await {
            Ok(0) => Err("master closed the connection".into()),
            Ok(_) => {
                self.link.last_io.store(unix_secs(), Ordering::Relaxed);
                Ok(())
            }
            Err(err) => Err(format!("read failed: {err}")),
        }
    }

    /// Receives the master's checkpoint beside the current data, then switches to it: a
    /// sync that fails before its end leaves this replica on its old data.
    async fn receive_snapshot(&mut self, stream: &mut TcpStream) -> LinkResult<()> {
        let services = self.services.clone();
        let timeout = Duration::from_secs(services.config.read().replication.timeout);
        let SnapshotTarget {
            writing,
            incoming,
            socket,
        } = SnapshotTarget::take(&services, &self.link, stream, timeout).await?;
        let receiver = tokio::task::spawn_blocking({
            let (socket, input, link) = (socket.get(), self.input.split(), self.link.clone());
            move || {
                let _writing = writing;
                bulk::receive_files(&socket, input, &incoming, &link.sync_read)
            }
        });
        let rest = receiver
            .await
            .map_err(|e| format!("the snapshot's reader failed: {e}"))?
            .map_err(|e| format!("can't receive the snapshot: {e}"))?;
        socket.finished();
        self.input = rest;
        let received = self.link.sync_read.load(Ordering::Relaxed);
        let installing = std::time::Instant::now();
        install(&services).await?;
        services.replication.adopt_id(&self.master_id, false);
        tracing::info!(
            "full sync from {}:{}: {received} bytes received, switched to them in {} ms, at offset {}",
            self.link.host,
            self.link.port,
            installing.elapsed().as_millis(),
            services.replication.engine().sequence()
        );
        Ok(())
    }

    /// Applies the master's batches as they come, acknowledging the offset every second and
    /// when asked; ends when the link fails, times out or is reset.
    async fn follow(&mut self, stream: &mut TcpStream, timeout: Duration) -> LinkResult<()> {
        let mut ack = tokio::time::interval(ACK_INTERVAL);
        let link = self.link.clone();
        let resets = self.resets;
        let mut pending = Pending::default();
        loop {
            while let Some(frame) = Frame::decode(&mut self.input).map_err(|e| e.to_string())? {
                match frame {
                    Frame::Batch(bytes) => {
                        self.stage(&mut pending, &bytes)?;
                        if pending.bytes >= APPLY_LIMIT {
                            self.apply(&mut pending)?;
                        }
                    }
                    Frame::GetAck => {
                        self.apply(&mut pending)?;
                        self.acknowledge(stream).await?;
                    }
                    Frame::Ping => {}
                    other => return Err(format!("master sent {other:?} after its snapshot")),
                }
            }
            self.apply(&mut pending)?;
            let silent = unix_secs().saturating_sub(link.last_io.load(Ordering::Relaxed));
            if silent > timeout.as_secs() {
                return Err(format!("no data from the master for {silent} seconds"));
            }
            let acknowledge = tokio::select! {
                read = self.read(stream) => {
                    read?;
                    false
                }
                _ = ack.tick() => true,
                _ = link.reset_after(resets) => return Ok(()),
            };
            if acknowledge {
                self.acknowledge(stream).await?;
            }
        }
    }

    /// Adds one of the master's batches to those to apply together, unless this replica
    /// already has it (the snapshot may hold a few batches past the offset it was announced
    /// at). Batches must follow each other without a gap.
    fn stage(&self, pending: &mut Pending, bytes: &[u8]) -> LinkResult<()> {
        let engine = self.services.replication.engine();
        let (seq, count) = wal::batch_span(bytes).map_err(|e| e.to_string())?;
        let last = seq + count.max(1) - 1;
        let has = pending.last.unwrap_or_else(|| engine.sequence());
        if last <= has {
            return Ok(());
        }
        if seq != has + 1 {
            return Err(format!("master sent offset {seq}, this replica has {has}"));
        }
        let families = engine.family_ids().map_err(|e| e.to_string())?;
        let batch = wal::decode_batch(bytes, &families).map_err(|e| e.to_string())?;
        pending.batch.append(batch);
        pending.last = Some(last);
        pending.bytes += bytes.len();
        Ok(())
    }

    /// Applies the staged batches in one write: each of them whole, and each op at the sequence
    /// number it had on the master, since they follow each other.
    fn apply(&self, pending: &mut Pending) -> LinkResult<()> {
        let Some(last) = pending.last.take() else {
            return Ok(());
        };
        pending.bytes = 0;
        let batch = std::mem::take(&mut pending.batch);
        self.services
            .keyspace
            .apply_replicated(batch)
            .map_err(|e| format!("can't apply the master's batches up to {last}: {e}"))?;
        let now = self.services.replication.engine().sequence();
        if now != last {
            return Err(format!(
                "applied the master's batches up to {last} but the offset is {now}"
            ));
        }
        Ok(())
    }

    async fn acknowledge(&self, stream: &mut TcpStream) -> LinkResult<()> {
        let offset = self.services.replication.offset().to_string();
        send(stream, &["REPLCONF", "ACK", &offset]).await
    }
}

/// Makes the database received in `incoming/` current: the engine switches to it (the old one
/// is removed once its last reader is done), the keyspace reloads what it keeps of the data,
/// and replicas of this server, which followed the data replaced, start over.
pub(super) async fn install(services: &Services) -> LinkResult<()> {
    let replication = &services.replication;
    let path = replication
        .data_dir
        .install_incoming()
        .map_err(|e| format!("can't install the snapshot: {e}"))?;
    let retired = replication
        .engine()
        .switch_to(&path)
        .map_err(|e| format!("can't open the snapshot: {e}"))?;
    services
        .keyspace
        .reload()
        .map_err(|e| format!("can't load the snapshot: {e}"))?;
    replication.drop_replicas();
    tokio::spawn(async move {
        while retired.in_use() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let old = retired.path().to_path_buf();
        drop(retired);
        if let Err(err) = tokio::fs::remove_dir_all(&old).await {
            tracing::warn!("can't remove the replaced data {}: {err}", old.display());
        }
    });
    Ok(())
}

/// The master's batches received and not yet applied.
#[derive(Default)]
struct Pending {
    batch: WriteBatch,
    /// The sequence number of their last op.
    last: Option<u64>,
    bytes: usize,
}

/// Writes one command in RESP.
pub(super) async fn send(stream: &mut TcpStream, args: &[&str]) -> LinkResult<()> {
    let mut out = Vec::new();
    shale_protocol::encode_request(&mut out, args);
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("write failed: {e}"))
}

/// What a blocking thread that receives a snapshot works with, taken in this order: the lock
/// on `incoming/` (held until the thread ends), a fresh `incoming/`, and the connection.
pub(super) struct SnapshotTarget {
    pub(super) writing: tokio::sync::OwnedMutexGuard<()>,
    pub(super) incoming: std::path::PathBuf,
    pub(super) socket: Unfinished,
}

impl SnapshotTarget {
    pub(super) async fn take(
        services: &Services,
        link: &MasterLink,
        stream: &TcpStream,
        timeout: Duration,
    ) -> LinkResult<SnapshotTarget> {
        let replication = &services.replication;
        let writing = replication.incoming.clone().lock_owned().await;
        let incoming = replication
            .data_dir
            .fresh_incoming()
            .map_err(|e| format!("can't make a directory for the snapshot: {e}"))?;
        link.sync_read.store(0, Ordering::Relaxed);
        let socket = bulk::Socket::of(stream, timeout)
            .map_err(|e| format!("can't hand the connection to the snapshot's reader: {e}"))?;
        Ok(SnapshotTarget {
            writing,
            incoming,
            socket: Unfinished(Some(Arc::new(socket))),
        })
    }
}

/// The connection while a blocking thread receives a snapshot on it: if this session ends
/// first (REPLICAOF elsewhere, shutdown), the connection is shut down under the thread.
pub(super) struct Unfinished(pub(super) Option<Arc<bulk::Socket>>);

impl Unfinished {
    pub(super) fn get(&self) -> Arc<bulk::Socket> {
        self.0.clone().expect("set until finished")
    }

    pub(super) fn finished(mut self) {
        self.0 = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(socket) = self.0.take() {
            socket.shut_down();
        }
    }
}
