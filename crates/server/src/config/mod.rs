//! Server configuration: a redis.conf-style file, command-line overrides, and the table of
//! parameters behind CONFIG GET/SET/REWRITE.

pub mod event_classes;
mod memory;

use std::path::{Path, PathBuf};

use shale_storage::{BudgetSource, MemoryBudget, RocksConfig};

use crate::types::MAX_STRING_LEN;
use event_classes::{format_classes, parse_classes, INVALID_CLASSES};
use memory::SetSizes;

/// When acknowledged writes reach the disk (Redis's `appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FsyncPolicy {
    /// A write is replied to only after the WAL holding it is synced.
    Always,
    /// The WAL is synced once a second.
    EverySec,
    /// The operating system decides.
    No,
}

impl FsyncPolicy {
    pub fn from_u8(v: u8) -> FsyncPolicy {
        match v {
            0 => FsyncPolicy::Always,
            1 => FsyncPolicy::EverySec,
            _ => FsyncPolicy::No,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub port: u16,
    /// `metrics-port`: where Prometheus scrapes `/metrics`, on the first `bind` address; 0 is
    /// off.
    pub metrics_port: u16,
    pub bind: Vec<String>,
    pub dir: PathBuf,
    pub databases: usize,
    pub requirepass: Option<String>,
    /// `user <name> <rules>...` lines: each user's name and rules.
    pub users: Vec<Vec<String>>,
    /// The ACL file (ACL LOAD, ACL SAVE), if users live in one.
    pub aclfile: Option<PathBuf>,
    /// Entries ACL LOG keeps.
    pub acllog_max_len: usize,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pub acl_pubsub_all: bool,
    pub appendfsync: FsyncPolicy,
    pub maxclients: usize,
    /// Idle seconds before a client is closed; 0 disables.
    pub timeout: u64,
    pub loglevel: String,
    pub proto_max_bulk_len: usize,
    /// A sparse HyperLogLog longer than this turns dense.
    pub hll_sparse_max_bytes: usize,
    /// A client whose unparsed input exceeds this is closed.
    pub client_query_buffer_limit: usize,
    /// A stream node takes entries until its listpack's bytes reach this (0: 1 GB, the most).
    pub stream_node_max_bytes: u64,
    /// ... or until it holds this many entries (0: no limit).
    pub stream_node_max_entries: u64,
    /// `client-output-buffer-limit`, per client class.
    pub output_limits: OutputLimits,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: usize,
    /// Keyspace-notification classes (`notify-keyspace-events`, parsed).
    pub notify_keyspace_events: u32,
    /// Milliseconds after which SCRIPT KILL may stop a running script.
    pub lua_time_limit: u64,
    /// Kept for the LATENCY commands, which do not exist yet: setting it has no effect.
    pub latency_monitor_threshold: u64,
    /// `latency-tracking`: per-command histograms of run time.
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: what INFO latencystats shows of them.
    pub latency_tracking_info_percentiles: Vec<f64>,
    pub hz: u32,
    /// `cluster-enabled`: cluster mode (see `services::cluster`); set at start only.
    pub cluster_enabled: bool,
    /// Threads that run connections and commands; 0 means one per core.
    pub threads: usize,
    /// `memory-budget`: what the caches and memtables may take together; 0 follows the
    /// memory the process may use.
    pub memory_budget: usize,
    /// The budget in force, resolved at load.
    pub budget: MemoryBudget,
    /// The `rocksdb.*` sizes given explicitly, which the budget leaves as they are.
    set_sizes: SetSizes,
    pub rocks: RocksConfig,
    pub replication: ReplicationConfig,
    /// Redis parameters that only tune Redis's in-memory encodings. Shale's own layouts have
    /// fixed limits, so they are accepted and shown but have no effect.
    pub encoding_params: Vec<(&'static str, String)>,
}

/// The replication parameters, Redis's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// The master this server replicates (`replicaof host port`), if any.
    pub replicaof: Option<(String, u16)>,
    pub masterauth: Option<String>,
    pub masteruser: Option<String>,
    /// Sentinel promotes the replica with the lowest; 0 never.
    pub replica_priority: u32,
    /// What this replica tells its master its address is (`replica-announce-*`).
    pub announce_ip: Option<String>,
    pub announce_port: u16,
    pub announced: bool,
    /// WAL history kept for replicas that reconnect: at least this many bytes...
    pub backlog_size: usize,
    /// ...and none once no replica has been connected for this many seconds (0: kept).
    pub backlog_ttl: u64,
    /// Seconds of silence after which a replica drops its link, or a master its replica.
    pub timeout: u64,
    /// Writes are refused unless this many replicas acknowledged within `min_replicas_max_lag`
    /// seconds (0: no condition).
    pub min_replicas_to_write: u32,
    pub min_replicas_max_lag: u64,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            replicaof: None,
            masterauth: None,
            masteruser: None,
            replica_priority: 100,
            announce_ip: None,
            announce_port: 0,
            announced: true,
            backlog_size: 1 << 20,
            backlog_ttl: 3600,
            timeout: 60,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
        }
    }
}

/// How much output one client may have waiting: past `hard` bytes, or past `soft` bytes for
/// `soft_seconds` in a row, it is disconnected. 0 turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// `client-output-buffer-limit` for Redis's three client classes. A replica's stream is read
/// from the WAL as fast as its socket takes it, with no buffer that grows, so the replica
/// limits are kept and shown but have nothing to bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: OutputLimit,
    pub replica: OutputLimit,
    pub pubsub: OutputLimit,
}

impl Default for OutputLimits {
    /// Redis's defaults.
    fn default() -> Self {
        OutputLimits {
            normal: OutputLimit {
                hard: 0,
                soft: 0,
                soft_seconds: 0,
            },
            replica: OutputLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
            pubsub: OutputLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
        }
    }
}

impl OutputLimits {
    /// As CONFIG GET shows them: `normal 0 0 0 slave 268435456 67108864 60 pubsub ...`.
    fn format(&self) -> String {
        [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ]
        .iter()
        .map(|(class, l)| format!("{class} {} {} {}", l.hard, l.soft, l.soft_seconds))
        .collect::<Vec<_>>()
        .join(" ")
    }

    /// Sets the classes `value` names (`<class> <hard> <soft> <soft seconds>`, repeated; none
    /// is fine), all or none, with Redis's error messages.
    fn apply(&mut self, value: &str) -> Result<(), String> {
        let words: Vec<&str> = value.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut updated = *self;
        for group in words.chunks_exact(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut updated.normal,
                "slave" | "replica" => &mut updated.replica,
                "pubsub" => &mut updated.pubsub,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    )
                }
            };
            let number = |word: &str| {
                parse_memory(word).map(|n| n as u64).map_err(|_| {
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .to_string()
                })
            };
            *class = OutputLimit {
                hard: number(group[1])?,
                soft: number(group[2])?,
                soft_seconds: number(group[3])?,
            };
        }
        *self = updated;
        Ok(())
    }
}

const ENCODING_PARAMS: &[(&str, &str)] = &[
    ("hash-max-listpack-entries", "128"),
    ("hash-max-listpack-value", "64"),
    ("hash-max-ziplist-entries", "128"),
    ("hash-max-ziplist-value", "64"),
    ("list-max-listpack-size", "-2"),
    ("list-max-ziplist-size", "-2"),
    ("list-compress-depth", "0"),
    ("set-max-intset-entries", "512"),
    ("set-max-listpack-entries", "128"),
    ("set-max-listpack-value", "64"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("zset-max-ziplist-entries", "128"),
    ("zset-max-ziplist-value", "64"),
    ("activerehashing", "yes"),
];

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            bind: vec!["127.0.0.1".into()],
            metrics_port: 0,
            dir: PathBuf::from("./shale-data"),
            databases: 16,
            requirepass: None,
            users: Vec::new(),
            aclfile: None,
            acllog_max_len: 128,
            acl_pubsub_all: false,
            appendfsync: FsyncPolicy::EverySec,
            maxclients: 10000,
            timeout: 0,
            loglevel: "notice".into(),
            proto_max_bulk_len: 512 << 20,
            hll_sparse_max_bytes: 3000,
            client_query_buffer_limit: 1 << 30,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            output_limits: OutputLimits::default(),
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            lua_time_limit: 5000,
            latency_monitor_threshold: 0,
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            notify_keyspace_events: 0,
            hz: 10,
            cluster_enabled: false,
            threads: 0,
            memory_budget: 0,
            budget: MemoryBudget {
                bytes: 1 << 30,
                source: BudgetSource::Configured,
            },
            set_sizes: SetSizes::default(),
            rocks: RocksConfig::default(),
            replication: ReplicationConfig::default(),
            encoding_params: ENCODING_PARAMS
                .iter()
                .map(|(k, v)| (*k, v.to_string()))
                .collect(),
        }
    }
}

/// The least `memory-budget` taken (64 MiB).
const MIN_MEMORY_BUDGET: usize = 64 << 20;

/// A configuration parameter as CONFIG GET and CONFIG SET see it.
pub struct Param {
    pub name: &'static str,
    /// Whether CONFIG SET may change it while the server runs.
    pub mutable: bool,
    pub get: fn(&Config) -> String,
    pub set: fn(&mut Config, &str) -> Result<(), String>,
}

macro_rules! param {
    ($name:literal, $mutable:literal, |$c:ident| $get:expr, |$m:ident, $v:ident| $set:expr) => {
        Param {
            name: $name,
            mutable: $mutable,
            get: |$c| $get,
            set: |$m, $v| $set,
        }
    };
}

/// Every parameter except the encoding ones, which [`Config::param_names`] adds.
pub const PARAMS: &[Param] = &[
    param!("port", false, |c| c.port.to_string(), |c, v| {
        c.port = parse_num(v)?;
        Ok(())
    }),
    param!(
        "metrics-port",
        false,
        |c| c.metrics_port.to_string(),
        |c, v| {
            c.metrics_port = parse_num(v)?;
            Ok(())
        }
    ),
    param!("bind", false, |c| c.bind.join(" "), |c, v| {
        c.bind = v.split_whitespace().map(str::to_string).collect();
        Ok(())
    }),
    param!("dir", false, |c| c.dir.display().to_string(), |c, v| {
        c.dir = PathBuf::from(v);
        Ok(())
    }),
    param!(
        "cluster-enabled",
        false,
        |c| yes_no(c.cluster_enabled),
        |c, v| {
            c.cluster_enabled = parse_bool(v)?;
            Ok(())
        }
    ),
    param!("databases", false, |c| c.databases.to_string(), |c, v| {
        let n: usize = parse_num(v)?;
        if n == 0 || n > shale_storage::keys::MAX_DATABASES {
            return Err("argument must be between 1 and 255".into());
        }
        c.databases = n;
        Ok(())
    }),
    param!(
        "requirepass",
        true,
        |c| c.requirepass.clone().unwrap_or_default(),
        |c, v| {
            c.requirepass = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        }
    ),
    param!(
        "aclfile",
        false,
        |c| c
            .aclfile
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        |c, v| {
            c.aclfile = (!v.is_empty()).then(|| PathBuf::from(v));
            Ok(())
        }
    ),
    param!(
        "acllog-max-len",
        true,
        |c| c.acllog_max_len.to_string(),
        |c, v| {
            c.acllog_max_len = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "acl-pubsub-default",
        true,
        |c| if c.acl_pubsub_all {
            "allchannels".into()
        } else {
            "resetchannels".into()
        },
        |c, v| {
            c.acl_pubsub_all = match v.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: allchannels, resetchannels"
                            .into(),
                    )
                }
            };
            Ok(())
        }
    ),
    param!("appendonly", false, |_c| "yes".into(), |_c, v| match v {
        "yes" => Ok(()),
        _ => Err("Shale always writes its WAL".into()),
    }),
    param!(
        "appendfsync",
        true,
        |c| match c.appendfsync {
            FsyncPolicy::Always => "always".into(),
            FsyncPolicy::EverySec => "everysec".into(),
            FsyncPolicy::No => "no".into(),
        },
        |c, v| {
            c.appendfsync = match v.to_ascii_lowercase().as_str() {
                "always" => FsyncPolicy::Always,
                "everysec" => FsyncPolicy::EverySec,
                "no" => FsyncPolicy::No,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: always, everysec, no".into(),
                    )
                }
            };
            Ok(())
        }
    ),
    param!("maxclients", true, |c| c.maxclients.to_string(), |c, v| {
        c.maxclients = parse_num(v)?;
        Ok(())
    }),
    param!("timeout", true, |c| c.timeout.to_string(), |c, v| {
        c.timeout = parse_num(v)?;
        Ok(())
    }),
    param!("loglevel", true, |c| c.loglevel.clone(), |c, v| {
        let v = v.to_ascii_lowercase();
        if !["debug", "verbose", "notice", "warning", "nothing"].contains(&v.as_str()) {
            return Err("argument(s) must be one of the following: debug, verbose, notice, warning, nothing".into());
        }
        c.loglevel = v;
        Ok(())
    }),
    param!(
        "proto-max-bulk-len",
        true,
        |c| c.proto_max_bulk_len.to_string(),
        |c, v| {
            let n = parse_memory(v)?;
            if n < 1024 * 1024 || n as u64 > MAX_STRING_LEN {
                return Err(format!(
                    "argument must be a memory value between 1mb and {MAX_STRING_LEN} bytes"
                ));
            }
            c.proto_max_bulk_len = n;
            Ok(())
        }
    ),
    param!(
        "hll-sparse-max-bytes",
        true,
        |c| c.hll_sparse_max_bytes.to_string(),
        |c, v| {
            c.hll_sparse_max_bytes = parse_memory(v)?;
            Ok(())
        }
    ),
    param!(
        "stream-node-max-bytes",
        true,
        |c| c.stream_node_max_bytes.to_string(),
        |c, v| {
            let n = parse_memory(v)? as u64;
            if n > i64::MAX as u64 {
                return Err(format!(
                    "argument must be between 0 and {} inclusive",
                    i64::MAX
                ));
            }
            c.stream_node_max_bytes = n;
            Ok(())
        }
    ),
    param!(
        "stream-node-max-entries",
        true,
        |c| c.stream_node_max_entries.to_string(),
        |c, v| {
            let n = crate::types::string::parse_strict_i64(v.as_bytes())
                .ok_or("argument couldn't be parsed into an integer")?;
            if n < 0 {
                return Err(format!(
                    "argument must be between 0 and {} inclusive",
                    i64::MAX
                ));
            }
            c.stream_node_max_entries = n as u64;
            Ok(())
        }
    ),
    param!(
        "client-query-buffer-limit",
        true,
        |c| c.client_query_buffer_limit.to_string(),
        |c, v| {
            let n = parse_memory(v)?;
            if n < 1024 * 1024 {
                return Err("argument must be a memory value of at least 1mb".into());
            }
            c.client_query_buffer_limit = n;
            Ok(())
        }
    ),
    param!(
        "client-output-buffer-limit",
        true,
        |c| c.output_limits.format(),
        |c, v| c.output_limits.apply(v)
    ),
    param!(
        "slowlog-log-slower-than",
        true,
        |c| c.slowlog_log_slower_than.to_string(),
        |c, v| {
            c.slowlog_log_slower_than = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "slowlog-max-len",
        true,
        |c| c.slowlog_max_len.to_string(),
        |c, v| {
            c.slowlog_max_len = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "notify-keyspace-events",
        true,
        |c| format_classes(c.notify_keyspace_events),
        |c, v| {
            c.notify_keyspace_events =
                parse_classes(v).ok_or_else(|| INVALID_CLASSES.to_string())?;
            Ok(())
        }
    ),
    param!(
        "lua-time-limit",
        true,
        |c| c.lua_time_limit.to_string(),
        |c, v| {
            c.lua_time_limit = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "latency-monitor-threshold",
        true,
        |c| c.latency_monitor_threshold.to_string(),
        |c, v| {
            c.latency_monitor_threshold = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "latency-tracking",
        true,
        |c| yes_no(c.latency_tracking),
        |c, v| {
            c.latency_tracking = parse_bool(v)?;
            Ok(())
        }
    ),
    param!(
        "latency-tracking-info-percentiles",
        true,
        |c| c
            .latency_tracking_info_percentiles
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        |c, v| {
            c.latency_tracking_info_percentiles = parse_percentiles(v)?;
            Ok(())
        }
    ),
    param!("hz", true, |c| c.hz.to_string(), |c, v| {
        c.hz = parse_num::<u32>(v)?.clamp(1, 500);
        Ok(())
    }),
    param!("threads", false, |c| c.threads.to_string(), |c, v| {
        c.threads = parse_num(v)?;
        Ok(())
    }),
    param!("save", true, |_c| String::new(), |_c, v| {
        match v {
        "" => Ok(()),
        _ => Err("Shale takes no scheduled snapshots (every write is in the WAL); SAVE and BGSAVE take backups".into()),
    }
    }),
    // Data lives on disk and is never evicted: Redis's "no limit" and "noeviction" describe
    // Shale, and clients (Sidekiq, job queues) check them before they trust the server.
    param!(
        "maxmemory",
        true,
        |_c| "0".into(),
        |_c, v| match parse_memory(v)? {
            0 => Ok(()),
            _ => Err("Shale evicts nothing; memory-budget bounds its caches and memtables".into()),
        }
    ),
    param!(
        "maxmemory-policy",
        true,
        |_c| "noeviction".into(),
        |_c, v| match v {
            "noeviction" => Ok(()),
            _ => Err("Shale evicts nothing; memory-budget bounds its caches and memtables".into()),
        }
    ),
    // `replicaof` changes with REPLICAOF, not CONFIG SET, and CONFIG REWRITE records it.
    param!(
        "replicaof",
        false,
        |c| c
            .replication
            .replicaof
            .as_ref()
            .map_or_else(String::new, |(host, port)| format!("{host} {port}")),
        |c, v| {
            c.replication.replicaof = parse_replicaof(v)?;
            Ok(())
        }
    ),
    param!(
        "masterauth",
        true,
        |c| c.replication.masterauth.clone().unwrap_or_default(),
        |c, v| {
            c.replication.masterauth = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        }
    ),
    param!(
        "masteruser",
        true,
        |c| c.replication.masteruser.clone().unwrap_or_default(),
        |c, v| {
            c.replication.masteruser = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        }
    ),
    // A replica applies its master's write batches by sequence number; a write of its own
    // would shift every number after it, so replicas are always read-only.
    param!(
        "replica-read-only",
        true,
        |_c| "yes".into(),
        |_c, v| match parse_bool(v)? {
            true => Ok(()),
            false => Err("Shale replicas are always read-only".into()),
        }
    ),
    param!(
        "replica-priority",
        true,
        |c| c.replication.replica_priority.to_string(),
        |c, v| {
            c.replication.replica_priority = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "replica-announce-ip",
        true,
        |c| c.replication.announce_ip.clone().unwrap_or_default(),
        |c, v| {
            c.replication.announce_ip = (!v.is_empty()).then(|| v.to_string());
            Ok(())
        }
    ),
    param!(
        "replica-announce-port",
        true,
        |c| c.replication.announce_port.to_string(),
        |c, v| {
            c.replication.announce_port = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "replica-announced",
        true,
        |c| yes_no(c.replication.announced),
        |c, v| {
            c.replication.announced = parse_bool(v)?;
            Ok(())
        }
    ),
    param!(
        "repl-backlog-size",
        true,
        |c| c.replication.backlog_size.to_string(),
        |c, v| {
            c.replication.backlog_size = parse_memory(v)?.max(16 << 10);
            Ok(())
        }
    ),
    param!(
        "repl-backlog-ttl",
        true,
        |c| c.replication.backlog_ttl.to_string(),
        |c, v| {
            c.replication.backlog_ttl = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "repl-timeout",
        true,
        |c| c.replication.timeout.to_string(),
        |c, v| {
            c.replication.timeout = parse_num::<u64>(v)?.max(1);
            Ok(())
        }
    ),
    param!(
        "min-replicas-to-write",
        true,
        |c| c.replication.min_replicas_to_write.to_string(),
        |c, v| {
            c.replication.min_replicas_to_write = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "min-replicas-max-lag",
        true,
        |c| c.replication.min_replicas_max_lag.to_string(),
        |c, v| {
            c.replication.min_replicas_max_lag = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "memory-budget",
        false,
        |c| c.memory_budget.to_string(),
        |c, v| match parse_memory(v)? {
            // Less would leave memtables and cache shards smaller than one record.
            budget @ 1..MIN_MEMORY_BUDGET => {
                Err(format!(
                    "memory-budget must be 0 or at least {MIN_MEMORY_BUDGET} bytes, not {budget}"
                ))
            }
            budget => {
                c.memory_budget = budget;
                Ok(())
            }
        }
    ),
    param!(
        "rocksdb.block-cache-size",
        false,
        |c| c.rocks.block_cache_size.to_string(),
        |c, v| {
            c.rocks.block_cache_size = parse_memory(v)?;
            c.set_sizes.block_cache = Some(c.rocks.block_cache_size);
            Ok(())
        }
    ),
    param!(
        "rocksdb.meta-cache-size",
        false,
        |c| c.rocks.meta_cache_size.to_string(),
        |c, v| {
            c.rocks.meta_cache_size = parse_memory(v)?;
            c.set_sizes.meta_cache = Some(c.rocks.meta_cache_size);
            Ok(())
        }
    ),
    param!(
        "rocksdb.data-cache-size",
        false,
        |c| c.rocks.data_cache_size.to_string(),
        |c, v| {
            c.rocks.data_cache_size = parse_memory(v)?;
            c.set_sizes.data_cache = Some(c.rocks.data_cache_size);
            Ok(())
        }
    ),
    param!(
        "rocksdb.compress-cached-records",
        false,
        |c| yes_no(c.rocks.compress_cached_records),
        |c, v| {
            c.rocks.compress_cached_records = parse_bool(v)?;
            Ok(())
        }
    ),
    param!(
        "rocksdb.write-buffer-size",
        false,
        |c| c.rocks.write_buffer_size.to_string(),
        |c, v| {
            c.rocks.write_buffer_size = parse_memory(v)?;
            c.set_sizes.write_buffer = Some(c.rocks.write_buffer_size);
            Ok(())
        }
    ),
    param!(
        "rocksdb.max-write-buffer-number",
        false,
        |c| c.rocks.max_write_buffer_number.to_string(),
        |c, v| {
            c.rocks.max_write_buffer_number = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "rocksdb.memtable-budget",
        false,
        |c| c.rocks.memtable_budget.to_string(),
        |c, v| {
            c.rocks.memtable_budget = parse_memory(v)?;
            c.set_sizes.memtables = Some(c.rocks.memtable_budget);
            Ok(())
        }
    ),
    param!(
        "rocksdb.max-background-jobs",
        false,
        |c| c.rocks.max_background_jobs.to_string(),
        |c, v| {
            c.rocks.max_background_jobs = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "compaction-workers",
        true,
        |c| c.rocks.compaction_workers.join(" "),
        |c, v| {
            let workers: Vec<String> = v.split_whitespace().map(str::to_string).collect();
            if let Some(bad) = workers.iter().find(|w| !w.starts_with("http://")) {
                return Err(format!("'{bad}' is not a worker's URL (http://host:port)"));
            }
            c.rocks.compaction_workers = workers;
            Ok(())
        }
    ),
    param!(
        "compaction-remote-timeout",
        true,
        |c| c.rocks.compaction_remote_timeout.as_secs().to_string(),
        |c, v| {
            let seconds: u64 = parse_num(v)?;
            if seconds == 0 {
                return Err("argument must be at least 1 second".into());
            }
            c.rocks.compaction_remote_timeout = std::time::Duration::from_secs(seconds);
            Ok(())
        }
    ),
    param!(
        "rocksdb.rate-limit",
        false,
        |c| c.rocks.rate_limit.to_string(),
        |c, v| {
            c.rocks.rate_limit = parse_memory(v)? as u64;
            Ok(())
        }
    ),
    param!(
        "rocksdb.rate-limit-auto-tune",
        false,
        |c| yes_no(c.rocks.rate_limit_auto_tune),
        |c, v| {
            c.rocks.rate_limit_auto_tune = parse_bool(v)?;
            Ok(())
        }
    ),
    param!(
        "rocksdb.min-blob-size",
        false,
        |c| c.rocks.min_blob_size.to_string(),
        |c, v| {
            c.rocks.min_blob_size = parse_memory(v)? as u64;
            Ok(())
        }
    ),
    param!(
        "rocksdb.blob-gc-age-cutoff",
        false,
        |c| c.rocks.blob_gc_age_cutoff.to_string(),
        |c, v| {
            let cutoff: f64 = v
                .parse()
                .ok()
                .filter(|f: &f64| (0.0..=1.0).contains(f))
                .ok_or_else(|| "argument must be between 0 and 1".to_string())?;
            c.rocks.blob_gc_age_cutoff = cutoff;
            Ok(())
        }
    ),
    param!(
        "rocksdb.zstd-dictionary-bytes",
        false,
        |c| c.rocks.zstd_dictionary_bytes.to_string(),
        |c, v| {
            c.rocks.zstd_dictionary_bytes = parse_memory(v)?;
            Ok(())
        }
    ),
    param!(
        "rocksdb.block-size",
        false,
        |c| c.rocks.block_size.to_string(),
        |c, v| {
            c.rocks.block_size = parse_memory(v)?;
            Ok(())
        }
    ),
    param!(
        "rocksdb.bloom-bits-per-key",
        false,
        |c| c.rocks.bloom_bits_per_key.to_string(),
        |c, v| {
            c.rocks.bloom_bits_per_key = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "rocksdb.max-open-files",
        false,
        |c| c.rocks.max_open_files.to_string(),
        |c, v| {
            c.rocks.max_open_files = parse_num(v)?;
            Ok(())
        }
    ),
    param!(
        "rocksdb.statistics",
        false,
        |c| yes_no(c.rocks.statistics),
        |c, v| {
            c.rocks.statistics = parse_bool(v)?;
            Ok(())
        }
    ),
];

impl Config {
    /// Reads a config file, then applies command-line `--name value...` overrides on top.
    pub fn load(
        file: Option<&Path>,
        overrides: &[(String, Vec<String>)],
    ) -> Result<Config, String> {
        let mut config = Config::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "Fatal error, can't open config file '{}': {e}",
                    path.display()
                )
            })?;
            for (number, line) in text.lines().enumerate() {
                // A comment is skipped before it is split, as Redis does: its quotes need not
                // balance.
                let line = line.trim();
                if line.starts_with('#') {
                    continue;
                }
                let args = shale_protocol::split_args(line.as_bytes())
                    .ok_or_else(|| format!("line {}: unbalanced quotes", number + 1))?;
                let Some((name, values)) = args.split_first() else {
                    continue;
                };
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                let values: Vec<String> = values
                    .iter()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect();
                if name == "user" {
                    config
                        .add_user(values)
                        .map_err(|e| format!("line {}: '{line}': {e}", number + 1))?;
                    continue;
                }
                config
                    .apply(&name, &values.join(" "))
                    .map_err(|e| format!("line {}: '{line}': {e}", number + 1))?;
            }
        }
        for (name, values) in overrides {
            if name.eq_ignore_ascii_case("user") {
                config.add_user(values.clone())?;
                continue;
            }
            config.apply(&name.to_ascii_lowercase(), &values.join(" "))?;
        }
        config.budget = MemoryBudget::resolve(config.memory_budget);
        config.set_sizes.apply(config.budget, &mut config.rocks);
        // As Redis: in cluster mode the topology says whom a node replicates.
        if config.cluster_enabled && config.replication.replicaof.is_some() {
            return Err("replicaof directive not allowed in cluster mode".into());
        }
        Ok(config)
    }

    /// A `user <name> <rules>...` directive; ACL rules themselves are checked once the users
    /// load, at start.
    fn add_user(&mut self, values: Vec<String>) -> Result<(), String> {
        let Some(name) = values.first() else {
            return Err("wrong number of arguments".into());
        };
        if self.users.iter().any(|u| u.first() == Some(name)) {
            return Err(
                "Duplicate user found. A user can only be defined once in config files".into(),
            );
        }
        self.users.push(values);
        Ok(())
    }

    /// Sets one parameter by name, at start-up (immutable ones included).
    pub fn apply(&mut self, name: &str, value: &str) -> Result<(), String> {
        let name = canonical_name(name);
        if let Some(param) = PARAMS.iter().find(|p| p.name == name) {
            return (param.set)(self, value);
        }
        if let Some(slot) = self.encoding_params.iter_mut().find(|(k, _)| *k == name) {
            slot.1 = value.to_string();
            return Ok(());
        }
        Err(format!(
            "Bad directive or wrong number of arguments: '{name}'"
        ))
    }

    /// Every parameter name with its current value, in table order.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> =
            PARAMS.iter().map(|p| (p.name, (p.get)(self))).collect();
        out.extend(self.encoding_params.iter().cloned());
        out
    }

    /// Whether CONFIG SET may change `name` while the server runs.
    pub fn is_mutable(name: &str) -> Option<bool> {
        let name = canonical_name(name);
        if let Some(param) = PARAMS.iter().find(|p| p.name == name) {
            return Some(param.mutable);
        }
        ENCODING_PARAMS
            .iter()
            .any(|(k, _)| *k == name)
            .then_some(true)
    }

    /// The text of `path` with every parameter set to its current value: lines naming a
    /// parameter are replaced in place, the rest kept, and changed parameters not yet in the
    /// file appended. `users` (ACL LIST's lines) replace the `user` lines, unless the users
    /// live in an ACL file, as Redis rewrites them.
    pub fn rewrite(&self, path: &Path, users: &[String]) -> std::io::Result<()> {
        let old = std::fs::read_to_string(path).unwrap_or_default();
        // A size the budget gives is a default, not a setting to write.
        let mut defaults = Config::default();
        SetSizes::default().apply(self.budget, &mut defaults.rocks);
        let defaults = defaults.entries();
        let current = self.entries();
        let mut written = Vec::new();
        let mut lines = Vec::new();
        let mut users = match self.aclfile {
            Some(_) => None,
            None => Some(users),
        };
        for line in old.lines() {
            let name = line
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if name == "user" {
                lines.extend(users.take().into_iter().flatten().cloned());
                continue;
            }
            let name = canonical_name(&name);
            match current.iter().find(|(k, _)| *k == name) {
                Some((k, v)) if !written.contains(k) => {
                    lines.extend(directive(k, v));
                    written.push(*k);
                }
                Some(_) => {}
                None => lines.push(line.to_string()),
            }
        }
        for ((k, v), (_, default)) in current.iter().zip(defaults.iter()) {
            if !written.contains(k) && v != default {
                lines.extend(directive(k, v));
            }
        }
        lines.extend(users.into_iter().flatten().cloned());
        let tmp = path.with_extension("rewrite.tmp");
        std::fs::write(&tmp, lines.join("\n") + "\n")?;
        std::fs::rename(tmp, path)
    }
}

/// Parameters whose value is several arguments, written as Redis writes them (`bind a b`,
/// `replicaof host port`) rather than quoted as one.
const SEVERAL_WORDS: &[&str] = &["bind", "replicaof", "client-output-buffer-limit"];

/// The config-file line of a parameter; none for a `replicaof` of no master, which Redis
/// leaves out.
fn directive(name: &str, value: &str) -> Option<String> {
    if SEVERAL_WORDS.contains(&name) {
        return (!value.is_empty()).then(|| format!("{name} {value}"));
    }
    Some(format!("{name} {}", quote(value)))
}

/// Redis's older names of parameters, which its config files and tools still use.
const ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("slave-read-only", "replica-read-only"),
    ("slave-priority", "replica-priority"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
];

/// The name a parameter has in the table, for it or its alias.
pub fn canonical_name(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| canonical)
}

/// `host port`, or nothing (no master).
fn parse_replicaof(v: &str) -> Result<Option<(String, u16)>, String> {
    let parts: Vec<&str> = v.split_whitespace().collect();
    match parts.as_slice() {
        [] => Ok(None),
        [no, one] if no.eq_ignore_ascii_case("no") && one.eq_ignore_ascii_case("one") => Ok(None),
        [host, port] => Ok(Some((host.to_string(), parse_num(port)?))),
        _ => Err("wrong number of arguments".into()),
    }
}

fn quote(value: &str) -> String {
    if value.is_empty() || value.contains(char::is_whitespace) || value.contains('"') {
        format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        value.to_string()
    }
}

/// Percentiles between 0 and 100, separated by spaces, as Redis takes them.
fn parse_percentiles(v: &str) -> Result<Vec<f64>, String> {
    v.split_whitespace()
        .map(|p| match p.parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
            Ok(_) => Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            ),
            Err(_) => Err("Invalid latency-tracking-info-percentiles parameters".into()),
        })
        .collect()
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

fn parse_num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("argument couldn't be parsed into an integer: '{v}'"))
}

/// Parses a memory size like Redis's `memtoll`: `1gb`, `64mb`, `512k`, or plain bytes.
pub fn parse_memory(v: &str) -> Result<usize, String> {
    let lower = v.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let multiplier: usize = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return Err("argument must be a memory value".to_string()),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| "argument must be a memory value".to_string())?;
    n.checked_mul(multiplier)
        .ok_or_else(|| "argument must be a memory value".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shale.conf");
        std::fs::write(
            &path,
            "# comment, \"quoted\", it's\nport 7000\nbind 127.0.0.1 ::1\nrequirepass \"a b\"\nrocksdb.block-cache-size 64mb\nhash-max-listpack-entries 512\n",
        )
        .unwrap();
        let overrides = vec![("port".to_string(), vec!["7001".to_string()])];
        let config = Config::load(Some(&path), &overrides).unwrap();
        assert_eq!(config.port, 7001);
        assert_eq!(config.bind, vec!["127.0.0.1", "::1"]);
        assert_eq!(config.requirepass.as_deref(), Some("a b"));
        assert_eq!(config.rocks.block_cache_size, 64 << 20);
        assert!(config
            .entries()
            .contains(&("hash-max-listpack-entries", "512".into())));
    }

    #[test]
    fn bad_directives_are_errors() {
        assert!(Config::default().apply("no-such-thing", "1").is_err());
        assert!(Config::default().apply("appendfsync", "sometimes").is_err());
        assert!(Config::default().apply("port", "x").is_err());
    }

    #[test]
    fn rate_limit_takes_memory_units_and_a_tuning_switch() {
        let mut config = Config::default();
        assert_eq!(config.rocks.rate_limit, 0);
        config.apply("rocksdb.rate-limit", "64mb").unwrap();
        config.apply("rocksdb.rate-limit-auto-tune", "no").unwrap();
        assert_eq!(config.rocks.rate_limit, 64 << 20);
        assert!(!config.rocks.rate_limit_auto_tune);
        assert!(config.apply("rocksdb.rate-limit", "fast").is_err());
        assert!(config
            .apply("rocksdb.rate-limit-auto-tune", "maybe")
            .is_err());
    }

    #[test]
    fn blob_files_and_dictionaries_are_off_until_sized() {
        let mut config = Config::default();
        assert_eq!(config.rocks.min_blob_size, 0);
        assert_eq!(config.rocks.zstd_dictionary_bytes, 0);
        config.apply("rocksdb.min-blob-size", "2kb").unwrap();
        config.apply("rocksdb.blob-gc-age-cutoff", "0.5").unwrap();
        config
            .apply("rocksdb.zstd-dictionary-bytes", "16kb")
            .unwrap();
        assert_eq!(config.rocks.min_blob_size, 2048);
        assert_eq!(config.rocks.blob_gc_age_cutoff, 0.5);
        assert_eq!(config.rocks.zstd_dictionary_bytes, 16384);
        assert!(config.apply("rocksdb.blob-gc-age-cutoff", "1.5").is_err());
        assert!(config.apply("rocksdb.min-blob-size", "big").is_err());
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1gb"), Ok(1 << 30));
        assert_eq!(parse_memory("10k"), Ok(10_000));
        assert_eq!(parse_memory("123"), Ok(123));
        assert!(parse_memory("12xb").is_err());
    }

    #[test]
    fn rewrite_keeps_comments_and_updates_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shale.conf");
        std::fs::write(&path, "# keep me\nport 7000\n").unwrap();
        let mut config = Config::load(Some(&path), &[]).unwrap();
        config.apply("timeout", "30").unwrap();
        config.rewrite(&path, &[]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "# keep me\nport 7000\ntimeout 30\n");
    }

    #[test]
    fn rewrite_writes_replicaof_as_redis_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shale.conf");
        std::fs::write(&path, "slaveof 10.0.0.1 6379\nbind 127.0.0.1 ::1\n").unwrap();
        let mut config = Config::load(Some(&path), &[]).unwrap();
        assert_eq!(
            config.replication.replicaof,
            Some(("10.0.0.1".to_string(), 6379))
        );
        config.apply("replicaof", "10.0.0.2 6380").unwrap();
        config.rewrite(&path, &[]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "replicaof 10.0.0.2 6380\nbind 127.0.0.1 ::1\n");
        config.apply("replicaof", "no one").unwrap();
        config.rewrite(&path, &[]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "bind 127.0.0.1 ::1\n");
    }
}
