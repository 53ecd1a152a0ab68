//! The INFO report.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::ALL_COMMANDS;
use crate::config::FsyncPolicy;
use crate::error::Error;
use crate::keyspace::Keyspace;
use crate::services::pubsub::Kind;
use crate::services::replication::link::LinkState;
use crate::services::replication::unix_secs;
use crate::services::Services;
use crate::REDIS_VERSION;

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "errorstats",
    "cluster",
    "keyspace",
    "rocksdb",
];
const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "rocksdb",
];

/// Renders the requested sections (`default` when none, `all`/`everything` for all).
pub fn render(
    services: &Services,
    keyspace: &Keyspace,
    requested: &[String],
) -> Result<String, Error> {
    let wanted: Vec<&str> = if requested.is_empty() {
        DEFAULT_SECTIONS.to_vec()
    } else {
        let mut list = Vec::new();
        for name in requested {
            match name.as_str() {
                "all" | "everything" => list.extend_from_slice(ALL_SECTIONS),
                "default" => list.extend_from_slice(DEFAULT_SECTIONS),
                other => list.extend(ALL_SECTIONS.iter().copied().filter(|s| *s == other)),
            }
        }
        list
    };
    let mut out = String::new();
    for section in ALL_SECTIONS.iter().filter(|s| wanted.contains(s)) {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let title = match *section {
            "cpu" => "CPU".to_string(),
            "rocksdb" => "RocksDB".to_string(),
            s => format!("{}{}", s[..1].to_uppercase(), &s[1..]),
        };
        let _ = write!(out, "# {title}\r\n");
        match *section {
            "server" => server(services, &mut out),
            "clients" => clients(services, &mut out),
            "memory" => memory(services, keyspace, &mut out),
            "persistence" => persistence(services, &mut out),
            "stats" => stats(services, keyspace, &mut out),
            "replication" => replication(services, &mut out),
            "cpu" => cpu(&mut out),
            "commandstats" => commandstats(services, &mut out),
            "errorstats" => {
                for (code, count) in services.stats.error_codes() {
                    let _ = write!(out, "errorstat_{code}:count={count}\r\n");
                }
            }
            "latencystats" => latencystats(services, &mut out),
            "cluster" => line(
                &mut out,
                "cluster_enabled",
                services.cluster.is_some() as u8,
            ),
            "keyspace" => keyspace_section(services, keyspace, &mut out)?,
            "rocksdb" => rocksdb(services, keyspace, &mut out),
            _ => {}
        }
    }
    Ok(out)
}

fn line(out: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes}B")
    } else {
        format!("{value:.2}{}", UNITS[unit])
    }
}

/// Redis 7.0's fields, names and order (Sentinel reads them): the link to the master on a
/// replica, then the attached replicas, then the IDs and offsets. Offsets are sequence
/// numbers (see `services::replication`); the backlog is the WAL, live and archived.
fn replication(services: &Services, out: &mut String) {
    let replication = &services.replication;
    let config = services.config.read().replication.clone();
    let offset = replication.offset();
    match replication.master() {
        None => line(out, "role", "master"),
        Some(master) => {
            line(out, "role", "slave");
            line(out, "master_host", &master.host);
            line(out, "master_port", master.port);
            line(
                out,
                "master_link_status",
                if master.is_up() { "up" } else { "down" },
            );
            line(
                out,
                "master_last_io_seconds_ago",
                master.last_io_seconds_ago(),
            );
            let syncing = master.state() == LinkState::Sync;
            line(out, "master_sync_in_progress", u8::from(syncing));
            line(out, "slave_read_repl_offset", offset);
            line(out, "slave_repl_offset", offset);
            if syncing {
                let read = master.sync_read.load(Ordering::Relaxed);
                // The size of a checkpoint is not known before it is sent, as with Redis's
                // diskless transfers, which report 0.
                line(out, "master_sync_total_bytes", 0);
                line(out, "master_sync_read_bytes", read);
                line(out, "master_sync_left_bytes", 0);
                line(out, "master_sync_perc", "0.00");
                line(out, "master_sync_last_io_seconds_ago", 0);
            }
            if !master.is_up() {
                line(out, "master_link_down_since_seconds", master.down_for());
            }
            line(out, "slave_priority", config.replica_priority);
            line(out, "slave_read_only", 1);
            line(out, "replica_announced", u8::from(config.announced));
        }
    }
    let replicas = replication.replicas();
    line(out, "connected_slaves", replicas.len());
    if let Some((_, lag)) = replication.min_replicas() {
        line(
            out,
            "min_slaves_good_slaves",
            replication.good_replicas(lag),
        );
    }
    let now = unix_secs();
    for (n, replica) in replicas.iter().enumerate() {
        let lag = match replica.is_online() {
            true => now.saturating_sub(replica.ack_time()),
            false => 0,
        };
        let _ = write!(
            out,
            "slave{n}:ip={},port={},state={},offset={},lag={lag}\r\n",
            replica.ip,
            replica.port,
            replica.state.get().name(),
            replica.acked()
        );
    }
    let ids = replication.ids();
    line(out, "master_failover_state", "no-failover");
    line(out, "master_replid", &ids.id);
    line(out, "master_replid2", &ids.id2);
    line(out, "master_repl_offset", offset);
    line(out, "second_repl_offset", ids.second_offset);
    let start = replication.history_start();
    line(out, "repl_backlog_active", 1);
    line(out, "repl_backlog_size", config.backlog_size);
    line(out, "repl_backlog_first_byte_offset", start);
    line(
        out,
        "repl_backlog_histlen",
        (offset + 1).saturating_sub(start),
    );
}

fn server(services: &Services, out: &mut String) {
    let uptime = services.started.elapsed().as_secs();
    line(out, "redis_version", REDIS_VERSION);
    line(out, "shale_version", env!("CARGO_PKG_VERSION"));
    line(out, "redis_mode", "standalone");
    line(out, "os", std::env::consts::OS);
    line(out, "arch_bits", usize::BITS);
    line(out, "multiplexing_api", "epoll");
    line(out, "process_id", std::process::id());
    line(out, "run_id", &services.run_id);
    line(out, "tcp_port", services.tcp_port);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    line(out, "server_time_usec", now.as_micros());
    line(out, "uptime_in_seconds", uptime);
    line(out, "uptime_in_days", uptime / 86400);
    let hz = services.config.read().hz;
    line(out, "hz", hz);
    line(out, "configured_hz", hz);
    line(
        out,
        "executable",
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    line(
        out,
        "config_file",
        services
            .config_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
}

fn clients(services: &Services, out: &mut String) {
    line(out, "connected_clients", services.clients.count());
    line(out, "maxclients", services.config.read().maxclients);
    line(out, "blocked_clients", services.blocking.blocked_clients());
    line(out, "client_buffers_bytes", services.clients.buffer_bytes());
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// A `Name: <n> kB` line of a /proc file, in bytes (0 if it cannot be read).
fn proc_kb(path: &str, name: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

fn memory(services: &Services, keyspace: &Keyspace, out: &mut String) {
    let engine = keyspace.engine().stats();
    let rss = rss_bytes();
    let clients = services.clients.buffer_bytes();
    line(out, "used_memory", rss);
    line(out, "used_memory_human", human(rss));
    line(out, "used_memory_rss", rss);
    line(out, "used_memory_rss_human", human(rss));
    // used_memory is the resident size here, so its peak is the kernel's high-water mark.
    let peak = proc_kb("/proc/self/status", "VmHWM").max(rss);
    line(out, "used_memory_peak", peak);
    line(out, "used_memory_peak_human", human(peak));
    let system = proc_kb("/proc/meminfo", "MemTotal");
    line(out, "total_system_memory", system);
    line(out, "total_system_memory_human", human(system));
    line(out, "maxmemory", 0);
    line(out, "maxmemory_human", "0B");
    line(out, "maxmemory_policy", "noeviction");
    line(out, "mem_allocator", crate::MEM_ALLOCATOR);
    let budget = services.config.read().budget;
    line(out, "memory_budget", budget.bytes);
    line(out, "memory_budget_human", human(budget.bytes as u64));
    line(out, "memory_budget_source", budget.source.name());
    line(out, "block_cache_used", engine.block_cache_usage);
    line(out, "block_cache_capacity", engine.block_cache_capacity);
    line(out, "meta_cache_used", engine.meta_cache.usage);
    line(out, "meta_cache_capacity", engine.meta_cache.capacity);
    line(out, "data_cache_used", engine.data_cache.usage);
    line(out, "data_cache_capacity", engine.data_cache.capacity);
    line(out, "memtables_used", engine.memtable_usage);
    line(out, "memtables_limit", engine.memtable_limit);
    line(out, "table_readers_used", engine.table_readers_usage);
    line(out, "mem_clients_normal", clients);
    line(out, "number_of_cached_scripts", services.scripts.count());
}

fn persistence(services: &Services, out: &mut String) {
    let policy = match services.durability.policy() {
        FsyncPolicy::Always => "always",
        FsyncPolicy::EverySec => "everysec",
        FsyncPolicy::No => "no",
    };
    let backups = &services.backups;
    let changes = services
        .keyspace
        .engine()
        .sequence()
        .saturating_sub(backups.saved_sequence());
    line(out, "loading", 0);
    line(out, "async_loading", 0);
    line(out, "rdb_changes_since_last_save", changes);
    line(out, "rdb_bgsave_in_progress", backups.in_progress() as u8);
    line(out, "rdb_last_save_time", backups.last_save());
    let status = if backups.last_ok() { "ok" } else { "err" };
    line(out, "rdb_last_bgsave_status", status);
    line(out, "rdb_last_bgsave_time_sec", backups.last_seconds());
    line(
        out,
        "rdb_current_bgsave_time_sec",
        backups.current_seconds(),
    );
    line(out, "rdb_saves", backups.saves());
    line(out, "aof_enabled", 1);
    line(out, "aof_rewrite_in_progress", 0);
    // Redis's field for an AOF it cannot write; Shale's WAL in its place, with the reason.
    let failure = services.keyspace.engine().write_failure();
    let status = if failure.is_some() { "err" } else { "ok" };
    line(out, "aof_last_write_status", status);
    line(out, "wal_write_failure", failure.as_deref().unwrap_or(""));
    line(out, "appendfsync", policy);
    line(out, "wal_syncs", services.durability.syncs());
}

fn stats(services: &Services, keyspace: &Keyspace, out: &mut String) {
    let s = &services.stats;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    line(
        out,
        "total_connections_received",
        get(&s.connections_received),
    );
    line(out, "total_commands_processed", get(&s.commands_processed));
    line(
        out,
        "instantaneous_ops_per_sec",
        s.instantaneous_ops_per_sec(),
    );
    line(out, "total_net_input_bytes", get(&s.net_input_bytes));
    line(out, "total_net_output_bytes", get(&s.net_output_bytes));
    line(out, "rejected_connections", get(&s.connections_rejected));
    let syncs = &services.replication.stats;
    line(out, "sync_full", get(&syncs.full));
    line(out, "sync_partial_ok", get(&syncs.partial_ok));
    line(out, "sync_partial_err", get(&syncs.partial_err));
    line(out, "expired_keys", get(&keyspace.stats.expired));
    line(out, "evicted_keys", 0);
    line(out, "keyspace_hits", get(&keyspace.stats.hits));
    line(out, "keyspace_misses", get(&keyspace.stats.misses));
    line(out, "total_error_replies", get(&s.error_replies));
    line(
        out,
        "pubsub_channels",
        services.pubsub.active_count(Kind::Channel),
    );
    line(
        out,
        "pubsub_patterns",
        services.pubsub.active_count(Kind::Pattern),
    );
    line(
        out,
        "pubsubshard_channels",
        services.pubsub.active_count(Kind::Shard),
    );
    line(
        out,
        "migrate_cached_sockets",
        services.migrate_sockets.count(),
    );
    line(out, "combined_writes", get(&s.combined_writes));
    line(out, "command_panics", get(&s.command_panics));
}

fn cpu(out: &mut String) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    line(out, "used_cpu_sys", format!("{:.6}", secs(usage.ru_stime)));
    line(out, "used_cpu_user", format!("{:.6}", secs(usage.ru_utime)));
}

fn commandstats(services: &Services, out: &mut String) {
    let mut commands: Vec<_> = ALL_COMMANDS.iter().zip(&services.stats.commands).collect();
    commands.sort_by_key(|(spec, _)| spec.name);
    for (spec, stats) in commands {
        let name = spec.name;
        let calls = stats.calls.load(Ordering::Relaxed);
        let rejected = stats.rejected.load(Ordering::Relaxed);
        let failed = stats.failed.load(Ordering::Relaxed);
        if calls == 0 && rejected == 0 && failed == 0 {
            continue;
        }
        let usec = stats.usec.load(Ordering::Relaxed);
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        let _ = write!(
            out,
            "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n",
        );
    }
}

/// Each command's run-time percentiles, as Redis 7.0 words them: `p99.9=12.345` in µs.
fn latencystats(services: &Services, out: &mut String) {
    if !services.latencies.enabled() {
        return;
    }
    let percentiles = services
        .config
        .read()
        .latency_tracking_info_percentiles
        .clone();
    let mut commands: Vec<_> = ALL_COMMANDS.iter().collect();
    commands.sort_by_key(|spec| spec.name);
    for spec in commands {
        let Some(histogram) = services.latencies.of(spec.index()) else {
            continue;
        };
        let counts = histogram.snapshot();
        if counts.total() == 0 {
            continue;
        }
        let values: Vec<String> = percentiles
            .iter()
            .map(|&p| format!("p{p}={:.3}", counts.value_at(p) as f64 / 1000.0))
            .collect();
        let _ = write!(
            out,
            "latency_percentiles_usec_{}:{}\r\n",
            spec.name,
            values.join(",")
        );
    }
}

/// Each database with keys; in cluster mode also Kvrocks's `sequence`, the replication
/// offset, by which Apache Kvrocks Controller picks the replica to promote.
fn keyspace_section(
    services: &Services,
    keyspace: &Keyspace,
    out: &mut String,
) -> Result<(), Error> {
    for index in 0..keyspace.databases() {
        let db = keyspace.db(index);
        let keys = db.size()?;
        if keys > 0 {
            let _ = write!(
                out,
                "db{index}:keys={keys},expires={},avg_ttl=0\r\n",
                db.expiring_size()?
            );
        }
    }
    if services.cluster.is_some() {
        line(out, "sequence", services.replication.offset());
    }
    Ok(())
}

fn rocksdb(services: &Services, keyspace: &Keyspace, out: &mut String) {
    let engine = keyspace.engine().stats();
    line(out, "estimate_num_keys", engine.estimated_keys);
    line(out, "live_sst_files_size", engine.live_sst_bytes);
    line(
        out,
        "estimate_pending_compaction_bytes",
        engine.pending_compaction_bytes,
    );
    line(out, "num_running_compactions", engine.running_compactions);
    let remote = &engine.compactions;
    line(out, "compaction_workers", remote.workers);
    line(out, "local_compactions", remote.local);
    line(out, "local_compaction_read_bytes", remote.local_bytes_read);
    line(
        out,
        "local_compaction_cpu_seconds",
        format!("{:.3}", engine.compaction_cpu_micros as f64 / 1e6),
    );
    line(out, "remote_compactions_running", remote.running);
    line(out, "remote_compactions_done", remote.done);
    line(out, "remote_compactions_failed", remote.failed);
    line(out, "remote_compaction_fallbacks", remote.fallbacks);
    line(out, "remote_compaction_read_bytes", remote.bytes_read);
    line(out, "remote_compaction_write_bytes", remote.bytes_written);
    line(
        out,
        "remote_compaction_seconds",
        format!("{:.3}", remote.micros as f64 / 1e6),
    );
    line(out, "num_running_flushes", engine.running_flushes);
    line(out, "num_immutable_memtables", engine.immutable_memtables);
    line(out, "is_write_stopped", engine.write_stopped as u8);
    line(out, "actual_delayed_write_rate", engine.delayed_write_rate);
    line(out, "write_stall_micros", engine.stall_micros);
    line(out, "block_cache_hits", engine.block_cache_hits);
    line(out, "block_cache_misses", engine.block_cache_misses);
    let lookups = engine.block_cache_hits + engine.block_cache_misses;
    let rate = if lookups == 0 {
        0.0
    } else {
        engine.block_cache_hits as f64 / lookups as f64
    };
    line(out, "block_cache_hit_rate", format!("{rate:.4}"));
    line(out, "block_cache_usage", engine.block_cache_usage);
    line(out, "block_cache_capacity", engine.block_cache_capacity);
    line(out, "meta_cache_usage", engine.meta_cache.usage);
    line(out, "meta_cache_capacity", engine.meta_cache.capacity);
    line(out, "meta_cache_hits", engine.meta_cache.hits);
    line(out, "meta_cache_misses", engine.meta_cache.misses);
    line(out, "data_cache_usage", engine.data_cache.usage);
    line(out, "data_cache_capacity", engine.data_cache.capacity);
    line(out, "data_cache_hits", engine.data_cache.hits);
    line(out, "data_cache_misses", engine.data_cache.misses);
    line(out, "memtable_usage", engine.memtable_usage);
    line(out, "memtable_limit", engine.memtable_limit);
    line(
        out,
        "write_buffer_size",
        services.replication.engine().memtable_size(),
    );
    line(
        out,
        "estimate_table_readers_mem",
        engine.table_readers_usage,
    );
    line(out, "bytes_written", engine.bytes_written);
    line(out, "wal_file_synced", engine.wal_syncs);
    line(out, "iter_seeks", engine.iter_seeks);
    line(out, "iter_nexts", engine.iter_nexts);
    line(out, "iter_skipped_entries", engine.iter_skipped);
    line(out, "appendfsync_syncs", services.durability.syncs());
}
