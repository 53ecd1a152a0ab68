//! The registry of connected clients, for CLIENT LIST/INFO/KILL and INFO clients.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// The state of a connection that other connections may look at.
pub struct ClientHandle {
    pub id: u64,
    pub addr: SocketAddr,
    pub local_addr: SocketAddr,
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
    pub lib_name: Option<Bytes>,
    pub lib_ver: Option<Bytes>,
    pub db: usize,
    pub resp: u8,
    pub last_command: &'static str,
    /// Channels, patterns and shard channels subscribed to.
    pub subscribed: [usize; 3],
    /// Commands queued since MULTI; `None` outside a transaction.
    pub queued: Option<usize>,
    /// Whether it receives MONITOR's lines.
    pub monitor: bool,
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

    pub fn idle_secs(&self) -> u64 {
        let now = self.created.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_active.load(Ordering::Relaxed)) / 1000
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        self.kill_signal.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Resolves once the client has been killed.
    pub async fn killed(&self) {
        while !self.is_killed() {
            self.kill_signal.notified().await;
        }
    }

    /// One line of CLIENT LIST, in Redis's field order. `running` is the command the client
    /// runs now, if it is the one asking (Redis shows it, not the one before).
    pub fn describe(&self, running: Option<&'static str>, blocked: bool) -> String {
        let info = self.info.lock().clone();
        let mut flags = String::new();
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
        let command = running.unwrap_or(info.last_command);
        let text = |b: &Option<Bytes>| {
            b.as_ref()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        format!(
            "id={} addr={} laddr={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} cmd={} user=default resp={} lib-name={} lib-ver={}",
            self.id,
            self.addr,
            self.local_addr,
            text(&info.name),
            self.created.elapsed().as_secs(),
            self.idle_secs(),
            flags,
            info.db,
            info.subscribed[0],
            info.subscribed[1],
            info.subscribed[2],
            info.queued.map_or(-1, |n| n as i64),
            if command.is_empty() { "NULL" } else { command },
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
    pub fn register(&self, addr: SocketAddr, local_addr: SocketAddr) -> Arc<ClientHandle> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = Arc::new(ClientHandle {
            id,
            addr,
            local_addr,
            created: Instant::now(),
            last_active: AtomicU64::new(0),
            info: Mutex::new(ClientInfo {
                resp: 2,
                ..ClientInfo::default()
            }),
            killed: AtomicBool::new(false),
            kill_signal: Notify::new(),
        });
        self.clients.lock().insert(id, handle.clone());
        handle
    }

    pub fn unregister(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    pub fn count(&self) -> usize {
        self.clients.lock().len()
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
