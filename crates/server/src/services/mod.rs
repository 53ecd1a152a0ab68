//! The services commands reach through their context: configuration, the client registry,
//! pub/sub, blocked clients, monitors, statistics and the slow log, durability, keyspace
//! notifications, scripts and shutdown. They sit below the commands and above the keyspace.

pub mod acl;
pub mod backup;
pub mod blocking;
mod clients;
pub mod cluster;
mod durability;
pub mod latency;
pub mod migrate_sockets;
pub mod monitor;
pub mod notifications;
pub mod pubsub;
pub mod replication;
mod stats;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use parking_lot::RwLock;
use tokio::sync::watch;

pub use clients::{ClientHandle, ClientRegistry, Running};
pub use durability::Durability;
pub use stats::{ServerStats, SlowLog};

use crate::config::Config;
use crate::keyspace::{KeyRange, Keyspace, WatchSet};
use crate::scripting::Scripts;

/// How a connection ends after the current command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// Send the reply, then close (QUIT, CLIENT KILL of oneself).
    AfterReply,
    /// Close without replying (SHUTDOWN).
    Immediately,
    /// Becomes a replica's feed (PSYNC): the connection carries the replication stream.
    ToReplica,
}

/// Per-connection state that commands read and change.
pub struct ClientState {
    pub db: usize,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user the connection is logged in as.
    pub user: Arc<acl::UserCell>,
    pub handle: Arc<ClientHandle>,
    pub closing: Option<Closing>,
    pub subscriptions: pubsub::Subscriptions,
    /// Where PUBLISH sends this connection's messages.
    pub subscriber: pubsub::Subscriber,
    /// Commands queued since MULTI.
    pub multi: Option<QueuedTransaction>,
    pub watching: WatchSet,
    pub replies: ReplyMode,
    /// What a replica said of itself (REPLCONF) and asked for (PSYNC) before its stream.
    pub replica: ReplicaHandshake,
    /// READONLY: in cluster mode, a replica serves its master's reads to this connection.
    pub cluster_readonly: bool,
    /// The connection carries the import of slots running here (CLUSTER IMPORT ... 0).
    pub cluster_import_link: bool,
}

/// REPLCONF's and PSYNC's arguments, kept until the connection becomes a replica's feed.
#[derive(Default, Clone)]
pub struct ReplicaHandshake {
    pub hello: replication::ReplicaHello,
    pub psync: Option<replication::PsyncRequest>,
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
    /// A new client's state: database 0, RESP2, nothing subscribed or queued; its messages go
    /// to `subscriber`.
    pub fn new(
        subscriber: pubsub::Subscriber,
        user: Arc<acl::UserCell>,
        authenticated: bool,
    ) -> ClientState {
        subscriber.client.info.lock().user = user.name.clone();
        ClientState {
            db: 0,
            resp3: false,
            authenticated,
            user,
            handle: subscriber.client.clone(),
            closing: None,
            subscriptions: Default::default(),
            subscriber,
            multi: None,
            watching: Default::default(),
            replies: ReplyMode::default(),
            replica: ReplicaHandshake::default(),
            cluster_readonly: false,
            cluster_import_link: false,
        }
    }

    /// Copies what CLIENT LIST shows of this connection's own state (subscriptions, MULTI) to
    /// its handle, where other connections read it.
    pub fn share_state(&self) {
        let mut info = self.handle.info.lock();
        let subscriptions = &self.subscriptions;
        info.subscribed = [
            subscriptions.len(pubsub::Kind::Channel),
            subscriptions.len(pubsub::Kind::Pattern),
            subscriptions.len(pubsub::Kind::Shard),
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
            user: self.user.clone(),
            handle: self.handle.clone(),
            closing: None,
            subscriptions: Default::default(),
            subscriber: self.subscriber.clone(),
            multi: None,
            watching: Default::default(),
            replies: ReplyMode::default(),
            replica: ReplicaHandshake::default(),
            cluster_readonly: self.cluster_readonly,
            cluster_import_link: self.cluster_import_link,
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

/// DEBUG SLEEP: until when no connection runs commands, as Redis runs none while it sleeps.
#[derive(Default)]
pub struct Pause {
    until_ms: AtomicU64,
}

impl Pause {
    pub fn until(&self, at_ms: u64) {
        self.until_ms.fetch_max(at_ms, Ordering::Relaxed);
    }

    /// Waits while a pause lasts; one atomic load when there is none.
    pub async fn wait(&self) {
        loop {
            let until = self.until_ms.load(Ordering::Relaxed);
            if until == 0 {
                return;
            }
            let now = crate::keyspace::now_ms();
            if until <= now {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(until - now)).await;
        }
    }
}

/// Handles shared by all connections.
pub struct Services {
    pub pause: Pause,
    pub keyspace: Arc<Keyspace>,
    pub replication: Arc<replication::Replication>,
    /// The cluster state, in cluster mode (`cluster-enabled yes`).
    pub cluster: Option<Arc<cluster::Cluster>>,
    pub config: RwLock<Config>,
    pub config_file: Option<PathBuf>,
    pub clients: ClientRegistry,
    pub stats: ServerStats,
    pub slowlog: SlowLog,
    /// Run-time histograms per command (INFO latencystats, LATENCY HISTOGRAM).
    pub latencies: latency::CommandLatencies,
    pub latency_monitor: latency::LatencyMonitor,
    /// MIGRATE's connections to its targets.
    pub migrate_sockets: migrate_sockets::MigrateSockets,
    pub pubsub: pubsub::PubSub,
    /// `client-output-buffer-limit` as message queues apply it.
    pub output_limits: Arc<pubsub::SharedOutputLimits>,
    pub blocking: blocking::Blocking,
    pub monitors: monitor::Monitors,
    pub scripts: Scripts,
    pub acl: acl::Acl,
    /// SAVE and BGSAVE.
    pub backups: Arc<backup::Backups>,
    /// `notify-keyspace-events`, parsed (see `config::event_classes`).
    notify_classes: AtomicU32,
    pub durability: Durability,
    pub shutdown: Shutdown,
    pub started: Instant,
    pub run_id: String,
    pub tcp_port: u16,
}

impl Services {
    /// The services of a server listening on `config.port` whose commands (for their
    /// statistics and ACL rules) are those of `commands`.
    pub fn new(
        keyspace: Arc<Keyspace>,
        replication: Arc<replication::Replication>,
        cluster: Option<Arc<cluster::Cluster>>,
        config: Config,
        config_file: Option<PathBuf>,
        durability: Durability,
        commands: acl::catalog::Catalog,
    ) -> Services {
        let (sender, _) = watch::channel(false);
        let sequence = keyspace.engine().sequence();
        let tcp_port = config.port;
        let services = Services {
            pause: Pause::default(),
            keyspace,
            replication,
            cluster,
            config: RwLock::new(config),
            config_file,
            clients: ClientRegistry::default(),
            stats: ServerStats::new(commands.len()),
            slowlog: SlowLog::default(),
            latencies: latency::CommandLatencies::new(commands.len()),
            latency_monitor: latency::LatencyMonitor::default(),
            migrate_sockets: migrate_sockets::MigrateSockets::default(),
            pubsub: pubsub::PubSub::default(),
            output_limits: Default::default(),
            blocking: blocking::Blocking::default(),
            monitors: monitor::Monitors::default(),
            scripts: Scripts::default(),
            acl: acl::Acl::new(commands),
            backups: Arc::new(backup::Backups::new(sequence)),
            notify_classes: AtomicU32::new(0),
            durability,
            shutdown: Shutdown { sender },
            started: Instant::now(),
            run_id: replication::random_id(),
            tcp_port,
        };
        services.apply_config();
        services
    }

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
        self.latencies.set_enabled(config.latency_tracking);
        self.latency_monitor
            .set_threshold(config.latency_monitor_threshold);
        self.notify_classes
            .store(config.notify_keyspace_events, Ordering::Relaxed);
        self.output_limits.set(&config.output_limits);
        self.replication.configure(&config.replication);
        self.replication.engine().remote_compaction().configure(
            &config.rocks.compaction_workers,
            config.rocks.compaction_remote_timeout,
        );
        self.acl.log.set_max_len(config.acllog_max_len);
        self.acl.set_all_channels_default(config.acl_pubsub_all);
        self.acl.apply_requirepass(config.requirepass.as_deref());
    }

    /// Loads the users of the configuration's `user` lines, or of its ACL file, at start; an
    /// error stops the server, as in Redis.
    pub fn load_users(&self) -> Result<(), String> {
        let config = self.config.read();
        if config.aclfile.is_some() && !config.users.is_empty() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        for definition in &config.users {
            let (name, rules) = definition
                .split_first()
                .ok_or("a user line without a name")?;
            let mut rules: Vec<Bytes> = rules.iter().map(|r| Bytes::from(r.clone())).collect();
            // A `user default` line describes the default user from scratch.
            if name == acl::DEFAULT_USER {
                rules.insert(0, Bytes::from_static(b"reset"));
            }
            self.acl
                .set_user(name.as_bytes(), &rules)
                .map_err(|e| format!("Error loading ACL rules for the user named '{name}': {e}"))?;
        }
        if let Some(path) = &config.aclfile {
            let lines = acl::file::read(path)?;
            self.acl
                .replace_users(&lines, &path.display().to_string())
                .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        }
        Ok(())
    }

    /// Closes the connections logged in as one of `users` (deleted by ACL DELUSER or ACL
    /// LOAD), except the caller's own, which closes after its reply.
    pub fn disconnect_users(&self, users: &[Arc<acl::UserCell>], caller: u64) -> bool {
        let mut own = false;
        for client in self.clients.all() {
            let name = client.info.lock().user.clone();
            if users.iter().any(|u| u.name == name) {
                if client.id == caller {
                    own = true;
                } else {
                    client.kill();
                }
            }
        }
        own
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
