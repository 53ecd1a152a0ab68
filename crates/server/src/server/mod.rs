//! The network server: listeners, connections, and the services commands reach through their
//! context (configuration, clients, statistics, slow log, durability, shutdown).

pub mod blocking;
mod clients;
mod connection;
mod cron;
mod durability;
pub mod info;
pub mod monitor;
pub mod pubsub;
mod stats;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use parking_lot::RwLock;
use shale_storage::{Engine, RocksEngine};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

pub use clients::{ClientHandle, ClientRegistry, Running};
pub use durability::Durability;
pub use stats::{ServerStats, SlowLog};

use crate::config::Config;
use crate::scripting::Scripts;
use crate::types::{KeyRange, Keyspace, WatchSet, STRIPES};

/// The Redis version Shale reports to clients (HELLO, INFO); its command set follows it.
pub const REDIS_VERSION: &str = "7.0.15";

/// How a connection ends after the current command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// Send the reply, then close (QUIT, CLIENT KILL of oneself).
    AfterReply,
    /// Close without replying (SHUTDOWN).
    Immediately,
}

/// Per-connection state that commands read and change.
pub struct ClientState {
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    pub handle: Arc<ClientHandle>,
    pub closing: Option<Closing>,
    pub subscriptions: pubsub::Subscriptions,
    /// Where PUBLISH sends this connection's messages.
    pub subscriber: pubsub::Subscriber,
    /// Commands queued since MULTI.
    pub multi: Option<QueuedTransaction>,
    pub watching: WatchSet,
    pub replies: ReplyMode,
}

/// CLIENT REPLY: which replies the connection sends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplyMode {
    /// CLIENT REPLY OFF: none, until CLIENT REPLY ON.
    off: bool,
    /// The command running now goes unanswered: the one after CLIENT REPLY SKIP, and the SKIP.
    skip_current: bool,
    /// CLIENT REPLY SKIP: the next command goes unanswered.
    skip_next: bool,
}

impl ReplyMode {
    pub fn on(&mut self) {
        *self = ReplyMode::default();
    }

    pub fn off(&mut self) {
        self.off = true;
    }

    /// As in Redis, SKIP does nothing while replies are off.
    pub fn skip(&mut self) {
        if !self.off {
            self.skip_current = true;
            self.skip_next = true;
        }
    }

    pub fn is_off(&self) -> bool {
        self.off
    }

    /// Whether the reply of the command that just ran is sent; a SKIP moves on to the next.
    pub fn finish_command(&mut self) -> bool {
        let answered = !self.off && !self.skip_current;
        self.skip_current = std::mem::take(&mut self.skip_next);
        answered
    }
}

impl ClientState {
    /// Copies what CLIENT LIST shows of this connection's own state (subscriptions, MULTI) to
    /// its handle, where other connections read it.
    pub fn share_state(&self) {
        let mut info = self.handle.info.lock();
        let subscriptions = &self.subscriptions;
        info.subscribed = [
            subscriptions.channels.len(),
            subscriptions.patterns.len(),
            subscriptions.shard.len(),
        ];
        info.queued = self.multi.as_ref().map(|multi| multi.commands.len());
        info.queued_bytes = self.multi.as_ref().map_or(0, |multi| multi.bytes);
    }

    /// A copy for a write that another connection runs on this client's behalf (see
    /// `combine`): the same database, protocol and identity, without the subscriptions,
    /// transaction and watches that such writes never use.
    pub fn stand_in(&self) -> ClientState {
        ClientState {
            db: self.db,
            resp3: self.resp3,
            authenticated: self.authenticated,
            handle: self.handle.clone(),
            closing: None,
            subscriptions: Default::default(),
            subscriber: self.subscriber.clone(),
            multi: None,
            watching: Default::default(),
            replies: ReplyMode::default(),
        }
    }
}

/// A transaction being queued: its commands, and whether one of them was refused (then EXEC
/// discards it with `EXECABORT`).
#[derive(Default)]
pub struct QueuedTransaction {
    commands: Vec<Vec<Bytes>>,
    /// Bytes of the queued commands' arguments (CLIENT LIST's `multi-mem`).
    bytes: u64,
    pub refused: bool,
}

impl QueuedTransaction {
    pub fn queue(&mut self, args: &[Bytes]) {
        self.bytes += args.iter().map(|arg| arg.len() as u64).sum::<u64>();
        self.commands.push(args.to_vec());
    }

    pub fn commands(&self) -> &[Vec<Bytes>] {
        &self.commands
    }
}

/// Tells every part of the server to stop.
pub struct Shutdown {
    sender: watch::Sender<bool>,
}

impl Shutdown {
    pub fn trigger(&self) {
        self.sender.send_replace(true);
    }

    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.sender.subscribe()
    }
}

/// Handles shared by all connections.
pub struct Services {
    pub keyspace: Arc<Keyspace>,
    pub config: RwLock<Config>,
    pub config_file: Option<PathBuf>,
    pub clients: ClientRegistry,
    pub stats: ServerStats,
    pub slowlog: SlowLog,
    pub pubsub: pubsub::PubSub,
    /// `client-output-buffer-limit` as message queues apply it.
    pub output_limits: Arc<pubsub::SharedOutputLimits>,
    pub blocking: blocking::Blocking,
    pub monitors: monitor::Monitors,
    pub scripts: Scripts,
    /// `notify-keyspace-events`, parsed (see `commands::notify`).
    notify_classes: AtomicU32,
    pub durability: Durability,
    /// Where writes to a busy key wait for its current writer to run them.
    pub(crate) combiner: connection::WriteCombiner,
    pub shutdown: Shutdown,
    pub started: Instant,
    pub run_id: String,
    pub tcp_port: u16,
}

impl Services {
    /// The largest string a command may build (`proto-max-bulk-len`).
    pub fn max_string_len(&self) -> usize {
        self.config.read().proto_max_bulk_len
    }

    /// The length past which a sparse HyperLogLog turns dense (`hll-sparse-max-bytes`).
    pub fn hll_sparse_max_bytes(&self) -> usize {
        self.config.read().hll_sparse_max_bytes
    }

    /// Pushes configuration that other services cache (after CONFIG SET).
    pub fn apply_config(&self) {
        let config = self.config.read();
        self.durability.set_policy(config.appendfsync);
        self.slowlog
            .configure(config.slowlog_log_slower_than, config.slowlog_max_len);
        self.notify_classes
            .store(config.notify_keyspace_events, Ordering::Relaxed);
        self.output_limits.set(&config.output_limits);
    }

    /// The keyspace-notification classes enabled; 0 when notifications are off.
    pub fn notify_classes(&self) -> u32 {
        self.notify_classes.load(Ordering::Relaxed)
    }

    /// Compacts flushed ranges on a background thread so their disk space comes back.
    pub fn reclaim_in_background(&self, ranges: Vec<KeyRange>) {
        let keyspace = self.keyspace.clone();
        std::thread::spawn(move || {
            if let Err(err) = keyspace.reclaim(&ranges) {
                tracing::warn!("reclaiming flushed space failed: {err}");
            }
        });
    }
}

/// Opens the data directory, binds the listeners and serves until shutdown.
pub async fn run(config: Config, config_file: Option<PathBuf>) -> Result<(), String> {
    let opened = Instant::now();
    std::fs::create_dir_all(&config.dir)
        .map_err(|e| format!("can't create data directory {}: {e}", config.dir.display()))?;
    let engine: Arc<dyn Engine> = Arc::new(
        RocksEngine::open(&config.dir.join("db"), &config.rocks)
            .map_err(|e| format!("can't open database in {}: {e}", config.dir.display()))?,
    );
    let keyspace = Arc::new(
        Keyspace::open(engine.clone(), config.databases)
            .map_err(|e| format!("can't open keyspace: {e}"))?,
    );
    tracing::info!("database opened in {} ms", opened.elapsed().as_millis());
    // Before the first client can connect: until a handler is installed, SIGTERM ends the
    // process at once, and the writes still in the WAL buffer are lost.
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| format!("can't handle SIGTERM: {e}"))?;
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| format!("can't handle SIGINT: {e}"))?;

    let mut listeners = Vec::new();
    for host in &config.bind {
        let listener = TcpListener::bind((host.as_str(), config.port))
            .await
            .map_err(|e| format!("can't bind {host}:{}: {e}", config.port))?;
        listeners.push(listener);
    }
    let tcp_port = listeners
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(config.port, |a| a.port());

    let mut config = config;
    config.port = tcp_port;
    let (shutdown_tx, _) = watch::channel(false);
    let durability = Durability::start(engine.clone(), config.appendfsync)?;
    let services = Arc::new(Services {
        keyspace,
        config: RwLock::new(config),
        config_file,
        clients: ClientRegistry::default(),
        stats: ServerStats::default(),
        slowlog: SlowLog::default(),
        pubsub: pubsub::PubSub::default(),
        output_limits: Default::default(),
        blocking: blocking::Blocking::default(),
        monitors: monitor::Monitors::default(),
        scripts: Scripts::default(),
        notify_classes: AtomicU32::new(0),
        durability,
        combiner: connection::WriteCombiner::new(STRIPES),
        shutdown: Shutdown {
            sender: shutdown_tx,
        },
        started: Instant::now(),
        run_id: format!("{:040x}", rand::random::<u128>()),
        tcp_port,
    });
    services.apply_config();
    let cron = cron::start(services.clone());

    for listener in listeners {
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!("Ready to accept connections tcp {addr}");
        println!("Ready to accept connections tcp {addr}");
        tokio::spawn(accept_loop(listener, services.clone()));
    }

    let mut shutdown = services.shutdown.subscribe();
    tokio::select! {
        _ = shutdown.wait_for(|&stop| stop) => {}
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    tracing::info!("shutting down");
    services.shutdown.trigger();
    // Transactions and scripts still running are not acknowledged and never will be: they stop
    // here, and whatever they staged is dropped rather than committed after the last sync.
    services.keyspace.close();
    services.scripts.stop_all();
    services.clients.kill_all();
    for _ in 0..200 {
        if services.clients.count() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    cron.stop(std::time::Duration::from_secs(1));
    services.durability.stop();
    if let Err(err) = services.keyspace.engine().flush_memtables() {
        tracing::warn!("flushing memtables at shutdown failed: {err}");
    }
    tracing::info!("bye");
    Ok(())
}

async fn accept_loop(listener: TcpListener, services: Arc<Services>) {
    let mut shutdown = services.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|&stop| stop) => return,
        };
        let (stream, addr) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                tracing::warn!("accept failed: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        tokio::spawn(connection::serve(services.clone(), stream, addr));
    }
}
