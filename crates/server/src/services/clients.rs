//! The registry of connected clients, for CLIENT LIST/INFO/KILL and INFO clients.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::OutputLimit;

/// The state of a connection that other connections may look at.
pub struct ClientHandle {
    pub id: u64,
    pub addr: SocketAddr,
    pub local_addr: SocketAddr,
    /// The socket's file descriptor.
    pub fd: i32,
    pub buffers: BufferGauges,
    created: Instant,
    /// Milliseconds since `created` at the last command.
    last_active: AtomicU64,
    pub info: Mutex<ClientInfo>,
    killed: AtomicBool,
    kill_signal: Notify,
}

/// Fields a connection updates as it runs.
#[derive(Default, Clone)]
pub struct ClientInfo {
    pub name: Option<Bytes>,
    /// The ACL user it is logged in as.
    pub user: Bytes,
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub db: usize,
    pub resp: u8,
    pub last_command: &'static str,
    /// Channels, patterns and shard channels subscribed to.
    pub subscribed: [usize; 3],
    /// Commands queued since MULTI; `None` outside a transaction.
    pub queued: Option<usize>,
    /// Bytes of the arguments of those commands.
    pub queued_bytes: u64,
    /// Whether it receives MONITOR's lines.
    pub monitor: bool,
    /// Whether it is a replica's link (after PSYNC).
    pub replica: bool,
}

/// What a connection holds in its buffers, in bytes unless said otherwise; stored by the
/// connection as it runs, read by CLIENT LIST.
#[derive(Default)]
pub struct BufferGauges {
    /// Requests read and not yet run, and the read buffer's size.
    pub query: AtomicU64,
    pub query_capacity: AtomicU64,
    /// The most the read buffer has held at once.
    pub query_peak: AtomicU64,
    /// Replies not yet written to the socket, and the reply buffer's size.
    pub output: AtomicU64,
    pub output_capacity: AtomicU64,
    /// Pub/sub messages and MONITOR lines queued for the connection: how many, and their
    /// payload bytes.
    pub messages: AtomicU64,
    pub message_bytes: AtomicU64,
    /// Milliseconds after the client connected (plus one) when its waiting output went over
    /// the soft limit; 0 while it is under.
    soft_limit_since: AtomicU64,
}

impl BufferGauges {
    /// Only the connection itself sets its query and output figures, so plain stores do.
    pub fn set_query(&self, len: usize, capacity: usize) {
        self.query.store(len as u64, Ordering::Relaxed);
        self.query_capacity
            .store(capacity as u64, Ordering::Relaxed);
        if len as u64 > self.query_peak.load(Ordering::Relaxed) {
            self.query_peak.store(len as u64, Ordering::Relaxed);
        }
    }

    pub fn set_output(&self, len: usize, capacity: usize) {
        self.output.store(len as u64, Ordering::Relaxed);
        self.output_capacity
            .store(capacity as u64, Ordering::Relaxed);
    }

    /// Bytes allocated to the read and reply buffers.
    pub fn allocated(&self) -> u64 {
        self.query_capacity.load(Ordering::Relaxed) + self.output_capacity.load(Ordering::Relaxed)
    }

    /// Replies and messages waiting to be written.
    pub fn pending_output(&self) -> u64 {
        self.output.load(Ordering::Relaxed) + self.message_bytes.load(Ordering::Relaxed)
    }

    pub fn message_queued(&self, bytes: usize) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        self.message_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn message_taken(&self, bytes: usize) {
        self.messages.fetch_sub(1, Ordering::Relaxed);
        self.message_bytes
            .fetch_sub(bytes as u64, Ordering::Relaxed);
    }
}

/// The command the asking client runs while CLIENT LIST or CLIENT INFO describes it: Redis
/// shows it, and the memory of its arguments, rather than the command before.
pub struct Running<'a> {
    pub name: &'static str,
    pub args: &'a [Bytes],
}

impl ClientInfo {
    /// Subscribed to anything: Redis's pub/sub client type and CLIENT LIST flag P.
    pub fn is_subscribed(&self) -> bool {
        self.subscribed.iter().any(|&n| n > 0)
    }
}

impl ClientHandle {
    pub fn touch(&self, command: &'static str, db: usize, now: Instant) {
        let active = now.saturating_duration_since(self.created).as_millis() as u64;
        self.last_active.store(active, Ordering::Relaxed);
        let mut info = self.info.lock();
        info.last_command = command;
        info.db = db;
    }

    /// Whether `pending` bytes of waiting output break `limit`: past its hard limit, or past
    /// its soft limit for longer than its soft seconds. Checked, as Redis does, whenever
    /// output is added.
    pub fn output_over(&self, limit: OutputLimit, pending: u64) -> bool {
        if limit.hard > 0 && pending > limit.hard {
            return true;
        }
        let since = &self.buffers.soft_limit_since;
        if limit.soft == 0 || pending <= limit.soft {
            since.store(0, Ordering::Relaxed);
            return false;
        }
        let now = self.created.elapsed().as_millis() as u64 + 1;
        match since.load(Ordering::Relaxed) {
            0 => {
                since.store(now, Ordering::Relaxed);
                false
            }
            start => now.saturating_sub(start) > limit.soft_seconds.saturating_mul(1000),
        }
    }

    pub fn idle_secs(&self) -> u64 {
        let now = self.created.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_active.load(Ordering::Relaxed)) / 1000
    }

    /// Wakes every task that waits on [`ClientHandle::killed`]: its connection's main loop and,
    /// while it is blocked, its wait.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill_signal.notify_waiters();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Resolves once the client has been killed. Registered before the flag is checked, so a
    /// kill in between is not missed.
    pub async fn killed(&self) {
        loop {
            let notified = self.kill_signal.notified();
            if self.is_killed() {
                return;
            }
            notified.await;
        }
    }

    /// One line of CLIENT LIST, in Redis's field order (with Redis 7.2's lib-name and
    /// lib-ver, which CLIENT SETINFO sets). Memory figures are the bytes Shale's buffers hold:
    /// `argv-mem` counts the arguments of the command the asking client runs, `multi-mem`
    /// those of the commands queued after MULTI, `oll` and `omem` the pub/sub messages
    /// waiting to be written. Clients are never redirected (no CLIENT TRACKING): `redir=-1`.
    pub fn describe(&self, running: Option<Running<'_>>, blocked: bool) -> String {
        let info = self.info.lock().clone();
        let mut flags = String::new();
        if info.replica {
            flags.push('S');
        }
        if info.monitor {
            flags.push('O');
        }
        if info.is_subscribed() {
            flags.push('P');
        }
        if info.queued.is_some() {
            flags.push('x');
        }
        if blocked {
            flags.push('b');
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let command = running.as_ref().map_or(info.last_command, |r| r.name);
        let argv_mem: u64 = running.map_or(0, |r| r.args.iter().map(|a| a.len() as u64).sum());
        let text = |b: &Option<Bytes>| {
            b.as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        let gauge = |g: &AtomicU64| g.load(Ordering::Relaxed);
        let buffers = &self.buffers;
        let (query, query_capacity) = (gauge(&buffers.query), gauge(&buffers.query_capacity));
        let output = gauge(&buffers.output);
        let (messages, message_bytes) = (gauge(&buffers.messages), gauge(&buffers.message_bytes));
        let total = buffers.allocated() + message_bytes + argv_mem + info.queued_bytes;
        let events = if output > 0 || messages > 0 {
            "rw"
        } else {
            "r"
        };
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events={} cmd={} user={} redir=-1 resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.local_addr,
            self.fd,
            text(&info.name),
            self.created.elapsed().as_secs(),
            self.idle_secs(),
            flags,
            info.db,
            info.subscribed[0],
            info.subscribed[1],
            info.subscribed[2],
            info.queued.map_or(-1, |n| n as i64),
            query,
            query_capacity.saturating_sub(query),
            argv_mem,
            info.queued_bytes,
            query_capacity,
            gauge(&buffers.query_peak),
            output,
            messages,
            message_bytes,
            total,
            events,
            if command.is_empty() { "NULL" } else { command },
            String::from_utf8_lossy(&info.user),
            info.resp,
            text(&info.lib_name),
            text(&info.lib_ver),
        )
    }
}

#[derive(Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<HashMap<u64, Arc<ClientHandle>>>,
}

impl ClientRegistry {
    pub fn register(&self, addr: SocketAddr, local_addr: SocketAddr, fd: i32) -> Arc<ClientHandle> {
        let handle = self.handle(addr, local_addr, fd);
        self.clients.lock().insert(handle.id, handle.clone());
        handle
    }

    /// A handle for a client that no connection of this server serves (a Redis master's
    /// stream, whose commands run here): it has an id, and is not listed.
    pub fn detached(&self, addr: SocketAddr, local_addr: SocketAddr) -> Arc<ClientHandle> {
        self.handle(addr, local_addr, -1)
    }

    fn handle(&self, addr: SocketAddr, local_addr: SocketAddr, fd: i32) -> Arc<ClientHandle> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        Arc::new(ClientHandle {
            id,
            addr,
            local_addr,
            fd,
            buffers: BufferGauges::default(),
            created: Instant::now(),
            last_active: AtomicU64::new(0),
            info: Mutex::new(ClientInfo {
                resp: 2,
                ..ClientInfo::default()
            }),
            killed: AtomicBool::new(false),
            kill_signal: Notify::new(),
        })
    }

    pub fn unregister(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    pub fn count(&self) -> usize {
        self.clients.lock().len()
    }

    /// Bytes allocated to all connections' read and reply buffers (INFO's client_buffers).
    pub fn buffer_bytes(&self) -> u64 {
        let clients = self.clients.lock();
        clients.values().map(|c| c.buffers.allocated()).sum()
    }

    /// Every client, ordered by id.
    pub fn all(&self) -> Vec<Arc<ClientHandle>> {
        let mut all: Vec<_> = self.clients.lock().values().cloned().collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// Closes every client connection (on shutdown).
    pub fn kill_all(&self) {
        for client in self.clients.lock().values() {
            client.kill();
        }
    }
}
