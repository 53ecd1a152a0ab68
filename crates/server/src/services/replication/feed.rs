//! The master's side of a replica's link: after PSYNC, the connection carries a snapshot (on a
//! full sync) and then every write batch from the WAL, in order; the replica answers with
//! `REPLCONF ACK <offset>`.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use shale_protocol::{RequestLimits, RequestParser};
use shale_storage::{wal, Engine, Recent, RocksEngine};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

use super::bulk;
use super::stream::Frame;
use super::{unix_secs, FeedState, PsyncRequest, ReplicaClient, ReplicaHello, StateCell};
use crate::services::Services;

/// Bytes of batches read before they are written to the replica's socket.
const WAL_CHUNK: usize = 1 << 20;
/// Chunks the WAL reader may have read ahead of the socket.
const WAL_CHUNKS_AHEAD: usize = 4;

/// Frames read from the WAL, and the position after them.
type WalChunk = std::io::Result<(Bytes, u64)>;
/// An idle link carries a ping this often, so the replica knows its master is alive.
const PING_INTERVAL: Duration = Duration::from_secs(1);

/// One attached replica, as INFO, ROLE, WAIT and CLIENT KILL see it.
pub struct ReplicaState {
    pub id: u64,
    pub client: ReplicaClient,
    pub ip: String,
    pub port: u16,
    pub state: StateCell,
    acked: AtomicU64,
    ack_time: AtomicU64,
    /// Asks the feed to send a GETACK now.
    pub get_ack: Notify,
}

impl ReplicaState {
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    pub fn ack_time(&self) -> u64 {
        self.ack_time.load(Ordering::Relaxed)
    }

    pub fn is_online(&self) -> bool {
        self.state.get() == FeedState::Online
    }
}

/// Serves a replica on the connection that sent PSYNC, until it closes or is killed.
pub async fn serve(
    services: Arc<Services>,
    stream: TcpStream,
    input: BytesMut,
    client: ReplicaClient,
    hello: ReplicaHello,
    request: PsyncRequest,
) {
    let replication = &services.replication;
    let replica = Arc::new(ReplicaState {
        id: replication.next_feed.fetch_add(1, Ordering::Relaxed),
        ip: hello
            .ip_address
            .clone()
            .unwrap_or_else(|| client.addr.ip().to_string()),
        port: hello.listening_port,
        client,
        state: StateCell::default(),
        acked: AtomicU64::new(0),
        ack_time: AtomicU64::new(unix_secs()),
        get_ack: Notify::new(),
    });
    replication.attach(replica.clone());
    let mut feed = Feed {
        services: services.clone(),
        replica: replica.clone(),
        stream,
        input,
        pinned: false,
    };
    if let Err(err) = feed.run(request).await {
        tracing::info!(
            "replica {}:{} disconnected: {err}",
            replica.ip,
            replica.port
        );
    }
    if feed.pinned {
        replication.full_syncs.fetch_sub(1, Ordering::AcqRel);
    }
    replication.detach(replica.id);
}

struct Feed {
    services: Arc<Services>,
    replica: Arc<ReplicaState>,
    stream: TcpStream,
    /// What the replica sent that is not yet parsed (acknowledgements).
    input: BytesMut,
    /// Whether this feed holds the WAL history since its snapshot (a full sync).
    pinned: bool,
}

impl Feed {
    async fn run(&mut self, request: PsyncRequest) -> std::io::Result<()> {
        let services = self.services.clone();
        let replication = &services.replication;
        let ids = replication.ids();
        let mut position = match replication.continuable(&request.id, request.offset) {
            Some(has) => {
                replication.stats.partial_ok.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    "partial resync of replica {}:{} from offset {}",
                    self.replica.ip,
                    self.replica.port,
                    request.offset
                );
                self.stream
                    .write_all(format!("+CONTINUE {}\r\n", ids.id).as_bytes())
                    .await?;
                has
            }
            None => {
                if request.id != "?" {
                    replication
                        .stats
                        .partial_err
                        .fetch_add(1, Ordering::Relaxed);
                }
                replication.stats.full.fetch_add(1, Ordering::Relaxed);
                self.full_sync(&ids.id).await?
            }
        };
        self.replica.state.set(FeedState::Online);
        self.replica.ack_time.store(unix_secs(), Ordering::Relaxed);
        let mut flushed = services.durability.flushed();
        let mut ping = tokio::time::interval(PING_INTERVAL);
        let replica = self.replica.clone();
        let killed = replica.client.killed();
        tokio::pin!(killed);
        let mut shutdown = services.shutdown.subscribe();
        let mut out = BytesMut::new();
        let mut ack_wanted = false;
        let written = replication.written.clone();
        loop {
            // Registered before reading, so a write meanwhile wakes the wait below.
            let woken = written.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if ack_wanted {
                // The acknowledgement must cover every write so far: they go out first.
                replication
                    .engine()
                    .flush_wal()
                    .map_err(std::io::Error::other)?;
            }
            match replication.engine().recent_since(position, WAL_CHUNK) {
                Recent::Batches(batches, next) => {
                    for batch in batches {
                        Frame::Batch(Bytes::from_owner(batch)).encode(&mut out);
                    }
                    position = next;
                    if out.len() >= WAL_CHUNK {
                        self.stream.write_all(&out).await?;
                        out.clear();
                        continue;
                    }
                }
                Recent::UpToDate => {}
                // Further behind than the ring reaches: from the WAL.
                Recent::NotHeld => {
                    if !out.is_empty() {
                        self.stream.write_all(&out).await?;
                        out.clear();
                    }
                    let reached = self.catch_up(position).await?;
                    if reached != position {
                        position = reached;
                        continue;
                    }
                }
            }
            if std::mem::take(&mut ack_wanted) {
                Frame::GetAck.encode(&mut out);
            }
            if !out.is_empty() {
                self.stream.write_all(&out).await?;
                out.clear();
            }
            if self.pinned {
                self.pinned = false;
                replication.full_syncs.fetch_sub(1, Ordering::AcqRel);
            }
            tokio::select! {
                _ = &mut woken => {}
                changed = flushed.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                }
                read = self.stream.read_buf(&mut self.input) => {
                    if read? == 0 {
                        return Ok(());
                    }
                    self.take_acks()?;
                }
                _ = replica.get_ack.notified() => ack_wanted = true,
                _ = ping.tick() => Frame::Ping.encode(&mut out),
                _ = &mut killed => return Ok(()),
                _ = shutdown.wait_for(|&stop| stop) => return Ok(()),
            }
        }
    }

    /// Sends the batches after `position` from the WAL, read on a blocking thread that keeps
    /// one iterator to the end (a new iterator rereads its WAL file from the start); returns
    /// the position it reached.
    async fn catch_up(&mut self, position: u64) -> std::io::Result<u64> {
        let engine = self.services.replication.engine().clone();
        let (chunks, mut received) = mpsc::channel(WAL_CHUNKS_AHEAD);
        let reader = tokio::task::spawn_blocking(move || read_wal(&engine, position, &chunks));
        let replica = self.replica.clone();
        let mut reached = position;
        loop {
            let chunk = tokio::select! {
                chunk = received.recv() => chunk,
                _ = replica.client.killed() => return Err(std::io::Error::other("killed")),
            };
            let Some(chunk) = chunk else { break };
            let (bytes, next) = chunk?;
            self.stream.write_all(&bytes).await?;
            reached = next;
        }
        reader.await.map_err(std::io::Error::other)?;
        Ok(reached)
    }

    /// Parses the replica's `REPLCONF ACK <offset>` commands.
    fn take_acks(&mut self) -> std::io::Result<()> {
        let mut parser = RequestParser::default();
        let limits = RequestLimits {
            max_bulk_len: 1024,
            max_multibulk_len: 16,
        };
        loop {
            let args = match parser.parse(&mut self.input, &limits) {
                Ok(Some(args)) => args,
                Ok(None) => return Ok(()),
                Err(err) => return Err(std::io::Error::other(err.to_string())),
            };
            let is_ack = args.len() >= 3
                && args[0].eq_ignore_ascii_case(b"replconf")
                && args[1].eq_ignore_ascii_case(b"ack");
            let offset = is_ack
                .then(|| std::str::from_utf8(&args[2]).ok()?.parse::<u64>().ok())
                .flatten();
            if let Some(offset) = offset {
                self.replica.acked.fetch_max(offset, Ordering::AcqRel);
                self.replica.ack_time.store(unix_secs(), Ordering::Relaxed);
                self.services.replication.acked.notify_waiters();
            }
        }
    }

    /// Sends a checkpoint of the database: `+FULLRESYNC <id> <offset>`, its files, the end of
    /// the snapshot. Returns the offset it covers at least; the WAL is kept from there until
    /// this replica has caught up.
    async fn full_sync(&mut self, id: &str) -> std::io::Result<u64> {
        let replication = &self.services.replication;
        self.replica.state.set(FeedState::WaitBgsave);
        replication.full_syncs.fetch_add(1, Ordering::AcqRel);
        self.pinned = true;
        let dir = replication.data_dir.checkpoint(self.replica.id)?;
        let engine = replication.engine().clone();
        let target = dir.clone();
        let started = std::time::Instant::now();
        let covered = tokio::task::spawn_blocking(move || engine.checkpoint(&target))
            .await
            .map_err(std::io::Error::other)?
            .map_err(std::io::Error::other);
        tracing::info!(
            "checkpoint for replica {}:{} made in {} ms",
            self.replica.ip,
            self.replica.port,
            started.elapsed().as_millis()
        );
        let sent = match covered {
            Ok(covered) => self
                .send_snapshot(id, covered, &dir)
                .await
                .map(|()| covered),
            Err(err) => Err(err),
        };
        if let Err(err) = tokio::fs::remove_dir_all(&dir).await {
            tracing::warn!("can't remove checkpoint {}: {err}", dir.display());
        }
        sent
    }

    /// Sends the checkpoint's files from a blocking thread (see [`bulk`]).
    async fn send_snapshot(&mut self, id: &str, covered: u64, dir: &Path) -> std::io::Result<()> {
        self.replica.state.set(FeedState::SendBulk);
        self.stream
            .write_all(format!("+FULLRESYNC {id} {covered}\r\n").as_bytes())
            .await?;
        let timeout = Duration::from_secs(self.services.config.read().replication.timeout);
        let socket = Arc::new(bulk::Socket::of(&self.stream, timeout)?);
        let started = std::time::Instant::now();
        let mut sender = tokio::task::spawn_blocking({
            let (socket, dir) = (socket.clone(), dir.to_path_buf());
            move || bulk::send_files(&socket, &dir)
        });
        let mut shutdown = self.services.shutdown.subscribe();
        let sent = tokio::select! {
            sent = &mut sender => Some(sent),
            _ = self.replica.client.killed() => None,
            _ = shutdown.wait_for(|&stop| stop) => None,
        };
        let sent = match sent {
            Some(sent) => sent,
            None => {
                socket.shut_down();
                sender.await
            }
        };
        let sent = sent.map_err(std::io::Error::other)??;
        let mut out = BytesMut::new();
        Frame::SnapshotEnd.encode(&mut out);
        self.stream.write_all(&out).await?;
        tracing::info!(
            "full sync of replica {}:{}: {sent} bytes sent in {} ms, offset {covered}",
            self.replica.ip,
            self.replica.port,
            started.elapsed().as_millis()
        );
        Ok(())
    }
}

/// Reads the batches after `position` from the WAL into chunks of frames, each with the
/// position after it, until the WAL's end or until the feed stops taking them.
fn read_wal(engine: &RocksEngine, position: u64, chunks: &mpsc::Sender<WalChunk>) {
    let sent =
        |out: &mut BytesMut, next: u64| chunks.blocking_send(Ok((out.split().freeze(), next)));
    let read = || -> std::io::Result<()> {
        if engine.sequence() <= position {
            return Ok(());
        }
        let mut next = position;
        let mut out = BytesMut::new();
        for update in engine
            .updates_since(position)
            .map_err(std::io::Error::other)?
        {
            let (seq, data) = update.map_err(std::io::Error::other)?;
            let (_, count) = wal::batch_span(&data).map_err(std::io::Error::other)?;
            if seq != next + 1 {
                return Err(std::io::Error::other(format!(
                    "the WAL no longer holds offset {}",
                    next + 1
                )));
            }
            Frame::Batch(Bytes::from(data)).encode(&mut out);
            next = seq + count - 1;
            if out.len() >= WAL_CHUNK && sent(&mut out, next).is_err() {
                return Ok(());
            }
        }
        if !out.is_empty() {
            let _ = sent(&mut out, next);
        }
        Ok(())
    };
    if let Err(err) = read() {
        let _ = chunks.blocking_send(Err(err));
    }
}
