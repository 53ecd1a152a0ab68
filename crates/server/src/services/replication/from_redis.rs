//! Following a Redis master (live migration from Redis). After Redis's handshake
//! (`link.rs`), the master sends a snapshot as an RDB (framed `$<length>`, or `$EOF:<mark>` as
//! a diskless sync sends it, with newlines to keep the link alive while it prepares), which is
//! loaded into a fresh database beside the current one and switched to as a Shale full sync
//! is; then its command stream runs here as the master's client's commands run on a Redis
//! replica: in order, in the database it selects, MULTI/EXEC whole. The offset is the bytes of
//! the stream applied, acknowledged with `REPLCONF ACK` every second and on `REPLCONF GETACK`.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use shale_protocol::{Reply, RequestLimits, RequestParser};
use shale_storage::{Engine, RocksConfig, RocksEngine};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::bulk;
use super::link::{install, send, LinkResult, LinkState, MasterLink, SnapshotTarget};
use super::unix_secs;
use crate::keyspace::{as_redis_replica, Keyspace};
use crate::services::{pubsub, ClientState, Services};

/// Runs one command of a Redis master's stream as the master's client (the command table's
/// dispatcher, which the network layer hands down) and returns its reply, which goes nowhere.
pub type Dispatch = fn(&Services, &mut ClientState, &[Bytes]) -> Reply;

const ACK_INTERVAL: Duration = Duration::from_secs(1);
/// Bytes read off the socket at a time while loading the snapshot.
const READ_CHUNK: usize = 64 << 10;
/// The length of the mark around a diskless snapshot (`$EOF:<mark>` ... `<mark>`).
const MARK_LEN: usize = 40;
/// The longest line before the snapshot.
const MAX_LINE: usize = 4096;

/// How the snapshot's end is known.
enum Framing {
    Length(u64),
    Mark(Vec<u8>),
}

pub struct Follower {
    pub services: Arc<Services>,
    pub link: Arc<MasterLink>,
    /// What was read off the socket and not yet used.
    pub input: BytesMut,
    pub dispatch: Dispatch,
    /// The link's resets when the session started.
    pub resets: u64,
    /// The master's ID and offset that `+FULLRESYNC` named, which become this replica's
    /// history once the snapshot is in.
    pub snapshot_at: (String, u64),
}

impl Follower {
    /// Loads the snapshot unless the master continued this replica's history, then applies
    /// the stream until the link fails, times out or is reset.
    pub async fn run(
        mut self,
        mut stream: TcpStream,
        continued: bool,
        timeout: Duration,
    ) -> LinkResult<()> {
        let link = self.link.clone();
        if !continued {
            link.set_state(LinkState::Sync);
            self.receive_snapshot(&mut stream, timeout).await?;
        }
        link.set_state(LinkState::Connected);
        link.last_io.store(unix_secs(), Ordering::Relaxed);
        link.down_since.store(0, Ordering::Relaxed);
        tracing::info!(
            "replicating Redis {}:{} from offset {}",
            link.host,
            link.port,
            link.redis_history.offset.load(Ordering::Acquire)
        );
        self.follow(&mut stream, timeout).await
    }

    async fn read(&mut self, stream: &mut TcpStream, timeout: Duration) -> LinkResult<()> {
        let read = tokio::time::timeout(timeout, stream.read_buf(&mut self.input))
            .await
            .map_err(|_| format!("no data from the master for {} seconds", timeout.as_secs()))?;
        match read {
            Ok(0) => Err("master closed the connection".into()),
            Ok(_) => {
                self.link.last_io.store(unix_secs(), Ordering::Relaxed);
                Ok(())
            }
            Err(err) => Err(format!("read failed: {err}")),
        }
    }

    /// The line announcing the snapshot, after the newlines a master sends while it prepares it.
    async fn framing(&mut self, stream: &mut TcpStream, timeout: Duration) -> LinkResult<Framing> {
        loop {
            while self.input.first() == Some(&b'\n') {
                self.input.advance(1);
            }
            if let Some(end) = self.input.windows(2).position(|w| w == b"\r\n") {
                let line = self.input.split_to(end + 2);
                let line = &line[..end];
                if let Some(mark) = line.strip_prefix(b"$EOF:") {
                    if mark.len() != MARK_LEN {
                        return Err("master sent a snapshot mark of the wrong length".into());
                    }
                    return Ok(Framing::Mark(mark.to_vec()));
                }
                let length = line
                    .strip_prefix(b"$")
                    .and_then(|n| std::str::from_utf8(n).ok())
                    .and_then(|n| n.parse().ok());
                return match length {
                    Some(length) => Ok(Framing::Length(length)),
                    None => Err(format!(
                        "master sent {:?} instead of a snapshot",
                        String::from_utf8_lossy(line)
                    )),
                };
            }
            if self.input.len() > MAX_LINE {
                return Err("master sent an overlong line before its snapshot".into());
            }
            self.read(stream, timeout).await?;
        }
    }

    /// Loads the RDB the master sends into `incoming/` on a blocking thread that reads the
    /// socket itself, then switches to it. A snapshot that fails leaves the data as it was.
    async fn receive_snapshot(
        &mut self,
        stream: &mut TcpStream,
        timeout: Duration,
    ) -> LinkResult<()> {
        let framing = self.framing(stream, timeout).await?;
        let services = self.services.clone();
        let SnapshotTarget {
            writing,
            incoming,
            socket,
        } = SnapshotTarget::take(&services, &self.link, stream, timeout).await?;
        let (rocks, databases) = {
            let config = services.config.read();
            let bulk = RocksConfig {
                bulk_load: true,
                ..config.rocks.clone()
            };
            (bulk, config.databases)
        };
        let started = std::time::Instant::now();
        let loader = tokio::task::spawn_blocking({
            let (socket, link) = (socket.get(), self.link.clone());
            let input = self.input.split();
            move || -> LinkResult<(crate::interchange::Imported, BytesMut)> {
                let _writing = writing;
                let engine = Arc::new(
                    RocksEngine::open(&incoming, &rocks)
                        .map_err(|e| format!("can't create a database for the snapshot: {e}"))?,
                );
                let keyspace = Keyspace::open(engine.clone(), databases)
                    .map_err(|e| format!("can't open the snapshot's keyspace: {e}"))?;
                let mut reader = SocketReader {
                    socket: &socket,
                    buffer: input,
                    chunk: Vec::new(),
                    read: &link.sync_read,
                };
                let total = match &framing {
                    Framing::Length(length) => *length,
                    Framing::Mark(_) => 0,
                };
                // Keys past their expiry stay, as on a Redis replica: the master's DELs remove them.
                let imported = as_redis_replica(|| {
                    crate::interchange::load(&mut reader, &keyspace, total, &link.sync_read)
                })?;
                match framing {
                    Framing::Mark(mark) => {
                        let mut end = [0u8; MARK_LEN];
                        reader
                            .read_exact(&mut end)
                            .map_err(|e| format!("the snapshot's end mark did not come: {e}"))?;
                        if end[..] != mark[..] {
                            return Err("the snapshot did not end with its mark".into());
                        }
                    }
                    Framing::Length(length) => {
                        let consumed = link.sync_read.load(Ordering::Relaxed);
                        if consumed != length {
                            return Err(format!(
                                "the snapshot was {consumed} bytes, the master announced {length}"
                            ));
                        }
                    }
                }
                engine
                    .flush_memtables()
                    .map_err(|e| format!("can't flush the snapshot: {e}"))?;
                Ok((imported, reader.buffer))
            }
        });
        let (imported, rest) = loader
            .await
            .map_err(|e| format!("the snapshot's loader failed: {e}"))??;
        socket.finished();
        self.input = rest;
        install(&services).await?;
        let history = &self.link.redis_history;
        *history.id.lock() = Some(self.snapshot_at.0.clone());
        history.offset.store(self.snapshot_at.1, Ordering::Release);
        history.db.store(0, Ordering::Release);
        tracing::info!(
            "full sync from Redis {}:{}: {} keys ({} expired, {} skipped) and {} function libraries from {} bytes in {} ms",
            self.link.host,
            self.link.port,
            imported.keys,
            imported.expired,
            imported.skipped,
            imported.libraries,
            imported.bytes,
            started.elapsed().as_millis()
        );
        Ok(())
    }

    /// Runs the master's commands as they come, counting the offset in bytes of the stream.
    async fn follow(&mut self, stream: &mut TcpStream, timeout: Duration) -> LinkResult<()> {
        let services = self.services.clone();
        let link = self.link.clone();
        let mut client = master_client(&services, stream);
        client.db = link.redis_history.db.load(Ordering::Acquire);
        let limits = {
            let config = services.config.read();
            RequestLimits {
                max_bulk_len: config.proto_max_bulk_len,
                max_multibulk_len: i32::MAX as usize,
            }
        };
        let mut parser = RequestParser::default();
        let mut ack = tokio::time::interval(ACK_INTERVAL);
        let resets = self.resets;
        // Bytes of the command being parsed that the parser has already taken off the input.
        let mut partial = 0;
        // Bytes of a transaction the master has not yet ended (EXEC): as on a Redis replica,
        // the offset moves past them only with the EXEC, so a link dropped inside one asks
        // for the whole transaction again and the part queued here is discarded with it.
        let mut in_transaction = 0;
        loop {
            loop {
                let before = self.input.len();
                let parsed = parser
                    .parse(&mut self.input, &limits)
                    .map_err(|e| format!("master sent a bad command: {e}"))?;
                partial += before - self.input.len();
                let Some(args) = parsed else { break };
                let length = std::mem::take(&mut partial) as u64;
                let getack = args.len() >= 2
                    && args[0].eq_ignore_ascii_case(b"replconf")
                    && args[1].eq_ignore_ascii_case(b"getack");
                // As on a Redis replica, an acknowledgement covers the commands before GETACK.
                if getack {
                    acknowledge(stream, &link).await?;
                } else {
                    let reply = (self.dispatch)(&services, &mut client, &args);
                    if let Reply::Error(line) = reply {
                        tracing::warn!(
                            "the master's {} failed here: {line}",
                            String::from_utf8_lossy(&args[0])
                        );
                    }
                }
                match client.multi {
                    Some(_) => in_transaction += length,
                    None => {
                        let applied = std::mem::take(&mut in_transaction) + length;
                        let history = &link.redis_history;
                        history.db.store(client.db, Ordering::Release);
                        history.offset.fetch_add(applied, Ordering::AcqRel);
                    }
                }
            }
            // The read below restarts at every acknowledgement, so its own timeout never
            // fires on a master that went silent: this does.
            let silent = unix_secs().saturating_sub(link.last_io.load(Ordering::Relaxed));
            if silent > timeout.as_secs() {
                return Err(format!("no data from the master for {silent} seconds"));
            }
            let acknowledge_now = tokio::select! {
                read = self.read(stream, timeout) => {
                    read?;
                    false
                }
                _ = ack.tick() => true,
                _ = link.reset_after(resets) => return Ok(()),
            };
            if acknowledge_now {
                acknowledge(stream, &link).await?;
            }
        }
    }
}

async fn acknowledge(stream: &mut TcpStream, link: &MasterLink) -> LinkResult<()> {
    let offset = link
        .redis_history
        .offset
        .load(Ordering::Acquire)
        .to_string();
    send(stream, &["REPLCONF", "ACK", &offset]).await
}

/// The client the master's commands run as: authenticated, unlisted (the link is no client of
/// this server's, as CLIENT LIST and CLIENT KILL see it), subscribed to nothing.
fn master_client(services: &Services, stream: &TcpStream) -> ClientState {
    let addr = stream
        .peer_addr()
        .unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
    let local = stream.local_addr().unwrap_or(addr);
    let handle = services.clients.detached(addr, local);
    let (queue, _) = mpsc::channel(1);
    let subscriber = pubsub::Subscriber {
        client: handle,
        queue,
        limits: services.output_limits.clone(),
    };
    ClientState::new(subscriber, services.acl.default_user(), true)
}

/// The snapshot's bytes: first what the link had read already, then the socket, a chunk at a
/// time; what is left in `buffer` after the snapshot is the start of the command stream.
struct SocketReader<'a> {
    socket: &'a bulk::Socket,
    buffer: BytesMut,
    chunk: Vec<u8>,
    read: &'a AtomicU64,
}

impl Read for SocketReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.buffer.is_empty() {
            self.chunk.resize(READ_CHUNK, 0);
            let n = self.socket.read_some(&mut self.chunk)?;
            if n == 0 {
                return Ok(0);
            }
            self.buffer.extend_from_slice(&self.chunk[..n]);
        }
        let n = buf.len().min(self.buffer.len());
        buf[..n].copy_from_slice(&self.buffer[..n]);
        self.buffer.advance(n);
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}
