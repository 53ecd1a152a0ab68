//! The Prometheus endpoint (`metrics-port`; 0, the default, turns it off): `GET /metrics`
//! answers INFO's figures in Prometheus's text format, named as the community's
//! redis_exporter names them (`redis_connected_clients`, `redis_commands_total{cmd="get"}`,
//! `redis_latency_percentiles_usec{cmd="get",quantile="0.99"}`, ...), so its dashboards work
//! unchanged; INFO rocksdb's figures, which it has no names for, as `shale_rocksdb_*`. One
//! request per connection, answered and closed.

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::services::Services;

/// The longest request head read; a scraper's is a few hundred bytes.
const MAX_REQUEST: usize = 8 << 10;
/// How long a scraper may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn serve(listener: TcpListener, services: Arc<Services>) {
    let mut shutdown = services.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|&stop| stop) => return,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(answer(stream, services.clone()));
            }
            Err(err) => {
                tracing::warn!("metrics endpoint: accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer(mut stream: TcpStream, services: Arc<Services>) {
    let mut request = Vec::new();
    let read = tokio::time::timeout(REQUEST_TIMEOUT, async {
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        true
    })
    .await;
    if read != Ok(true) {
        return;
    }
    let path = request
        .split(|&b| b == b' ')
        .nth(1)
        .map(|p| p.split(|&b| b == b'?').next().unwrap_or(p));
    let response = match (request.starts_with(b"GET "), path) {
        (true, Some(b"/metrics")) => match crate::commands::info_report(&services) {
            Ok(info) => http(200, "text/plain; version=0.0.4", &render(&info)),
            Err(err) => http(500, "text/plain", &err.to_string()),
        },
        _ => http(404, "text/plain", "Shale serves /metrics here\n"),
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn http(status: u16, content_type: &str, body: &str) -> String {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Internal Server Error",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// redis_exporter's names for INFO fields.
const NAMES: &[(&str, &str)] = &[
    ("uptime_in_seconds", "uptime_in_seconds"),
    ("process_id", "process_id"),
    ("connected_clients", "connected_clients"),
    ("blocked_clients", "blocked_clients"),
    ("tracking_clients", "tracking_clients"),
    ("maxclients", "max_clients"),
    ("used_memory", "memory_used_bytes"),
    ("used_memory_rss", "memory_used_rss_bytes"),
    ("used_memory_peak", "memory_used_peak_bytes"),
    ("used_memory_lua", "memory_used_lua_bytes"),
    ("maxmemory", "memory_max_bytes"),
    ("memory_budget", "memory_budget_bytes"),
    ("mem_clients_normal", "mem_clients_normal"),
    ("loading", "loading_dump_file"),
    ("rdb_changes_since_last_save", "rdb_changes_since_last_save"),
    ("rdb_bgsave_in_progress", "rdb_bgsave_in_progress"),
    ("rdb_last_save_time", "rdb_last_save_timestamp_seconds"),
    ("rdb_last_bgsave_status", "rdb_last_bgsave_status"),
    ("rdb_last_bgsave_time_sec", "rdb_last_bgsave_duration_sec"),
    (
        "rdb_current_bgsave_time_sec",
        "rdb_current_bgsave_duration_sec",
    ),
    ("aof_enabled", "aof_enabled"),
    ("aof_rewrite_in_progress", "aof_rewrite_in_progress"),
    ("aof_last_write_status", "aof_last_write_status"),
    ("pubsub_channels", "pubsub_channels"),
    ("pubsub_patterns", "pubsub_patterns"),
    ("instantaneous_ops_per_sec", "instantaneous_ops_per_sec"),
    ("connected_slaves", "connected_slaves"),
    ("repl_backlog_size", "replication_backlog_bytes"),
    ("repl_backlog_active", "repl_backlog_is_active"),
    (
        "repl_backlog_first_byte_offset",
        "repl_backlog_first_byte_offset",
    ),
    ("repl_backlog_histlen", "repl_backlog_history_bytes"),
    ("master_repl_offset", "master_repl_offset"),
    ("second_repl_offset", "second_repl_offset"),
    ("slave_priority", "slave_priority"),
    ("sync_full", "replica_resyncs_full"),
    ("sync_partial_ok", "replica_partial_resync_accepted"),
    ("sync_partial_err", "replica_partial_resync_denied"),
    ("total_connections_received", "connections_received_total"),
    ("total_commands_processed", "commands_processed_total"),
    ("rejected_connections", "rejected_connections_total"),
    ("total_net_input_bytes", "net_input_bytes_total"),
    ("total_net_output_bytes", "net_output_bytes_total"),
    ("expired_keys", "expired_keys_total"),
    ("evicted_keys", "evicted_keys_total"),
    ("keyspace_hits", "keyspace_hits_total"),
    ("keyspace_misses", "keyspace_misses_total"),
    ("used_cpu_sys", "cpu_sys_seconds_total"),
    ("used_cpu_user", "cpu_user_seconds_total"),
];

/// Samples by metric, each metric's together as the text format wants them, in the order
/// metrics first appear.
#[derive(Default)]
struct Families {
    order: Vec<String>,
    samples: std::collections::HashMap<String, String>,
}

impl Families {
    fn add(&mut self, name: &str, labels: &str, value: f64) {
        let lines = self.samples.entry(name.to_string()).or_insert_with(|| {
            self.order.push(name.to_string());
            String::new()
        });
        let _ = writeln!(lines, "{name}{labels} {value}");
    }

    /// With a TYPE line for each: counters end in `_total`, as redis_exporter names them.
    fn text(&self) -> String {
        let mut out = String::new();
        for name in &self.order {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            out.push_str(&self.samples[name]);
        }
        out
    }
}

/// The metrics of an INFO report (every section).
pub fn render(info: &str) -> String {
    let mut out = Families::default();
    let mut section = "";
    let mut instance: Vec<(&str, &str)> = Vec::new();
    for line in info.lines() {
        if let Some(name) = line.strip_prefix("# ") {
            section = name;
            continue;
        }
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        if section == "RocksDB" {
            if let Ok(number) = value.parse::<f64>() {
                out.add(&format!("shale_rocksdb_{field}"), "", number);
            }
        } else if let Some(&(_, name)) = NAMES.iter().find(|(f, _)| *f == field) {
            let number = match value {
                "ok" => Some(1.0),
                "err" => Some(0.0),
                other => other.parse().ok(),
            };
            if let Some(number) = number {
                out.add(&format!("redis_{name}"), "", number);
            }
        } else if matches!(field, "role" | "redis_version" | "run_id" | "tcp_port") {
            instance.push((field, value));
        } else if let Some(command) = field.strip_prefix("cmdstat_") {
            command_stats(&mut out, command, value);
        } else if let Some(code) = field.strip_prefix("errorstat_") {
            if let Some(count) = pair(value, "count") {
                let labels = format!("{{err=\"{}\"}}", escape(code));
                out.add("redis_errors_total", &labels, count);
            }
        } else if let Some(command) = field.strip_prefix("latency_percentiles_usec_") {
            for (name, usec) in pairs(value) {
                let Some(percentile) = name.strip_prefix('p').and_then(|p| p.parse::<f64>().ok())
                else {
                    continue;
                };
                let labels = format!(
                    "{{cmd=\"{}\",quantile=\"{}\"}}",
                    escape(command),
                    // As a fraction, without the binary noise of a division (0.999, not
                    // 0.9990000000000001).
                    (percentile * 1e4).round() / 1e6
                );
                out.add("redis_latency_percentiles_usec", &labels, usec);
            }
        } else if field.starts_with("db") && field[2..].parse::<u32>().is_ok() {
            let labels = format!("{{db=\"{field}\"}}");
            for (name, metric) in [
                ("keys", "redis_db_keys"),
                ("expires", "redis_db_keys_expiring"),
            ] {
                if let Some(number) = pair(value, name) {
                    out.add(metric, &labels, number);
                }
            }
            if let Some(ttl_ms) = pair(value, "avg_ttl") {
                out.add("redis_db_avg_ttl_seconds", &labels, ttl_ms / 1000.0);
            }
        }
    }
    let labels: Vec<String> = instance
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape(value)))
        .collect();
    out.add(
        "redis_instance_info",
        &format!("{{{}}}", labels.join(",")),
        1.0,
    );
    out.add("redis_up", "", 1.0);
    out.text()
}

fn command_stats(out: &mut Families, command: &str, value: &str) {
    let labels = format!("{{cmd=\"{}\"}}", escape(command));
    for (field, metric) in [
        ("calls", "redis_commands_total"),
        ("rejected_calls", "redis_commands_rejected_calls_total"),
        ("failed_calls", "redis_commands_failed_calls_total"),
    ] {
        if let Some(number) = pair(value, field) {
            out.add(metric, &labels, number);
        }
    }
    if let Some(usec) = pair(value, "usec") {
        out.add("redis_commands_duration_seconds_total", &labels, usec / 1e6);
    }
}

/// The `name=number` pairs of an INFO value (`calls=3,usec=12`).
fn pairs(value: &str) -> impl Iterator<Item = (&str, f64)> {
    value.split(',').filter_map(|pair| {
        let (name, number) = pair.split_once('=')?;
        Some((name, number.parse().ok()?))
    })
}

fn pair(value: &str, wanted: &str) -> Option<f64> {
    pairs(value)
        .find(|(name, _)| *name == wanted)
        .map(|(_, n)| n)
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_take_redis_exporter_names() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\ntcp_port:6379\r\n\
            uptime_in_seconds:12\r\n\r\n# Persistence\r\naof_last_write_status:err\r\n\r\n\
            # Stats\r\ntotal_commands_processed:40\r\n\r\n# Replication\r\nrole:master\r\n\r\n\
            # Commandstats\r\ncmdstat_get:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=1\r\n\
            cmdstat_set:calls=1,usec=2,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\r\n\
            # Errorstats\r\nerrorstat_WRONGTYPE:count=2\r\n\r\n\
            # Latencystats\r\nlatency_percentiles_usec_get:p50=1.003,p99.9=8.191\r\n\r\n\
            # Keyspace\r\ndb0:keys=5,expires=1,avg_ttl=2000\r\n\r\n\
            # RocksDB\r\nestimate_num_keys:5\r\nblock_cache_hit_rate:0.5000\r\n";
        let metrics = render(info);
        for expected in [
            "redis_uptime_in_seconds 12",
            "redis_aof_last_write_status 0",
            "# TYPE redis_commands_processed_total counter\nredis_commands_processed_total 40",
            "# TYPE redis_commands_total counter\nredis_commands_total{cmd=\"get\"} 3\nredis_commands_total{cmd=\"set\"} 1\n",
            "redis_commands_total{cmd=\"get\"} 3",
            "redis_commands_duration_seconds_total{cmd=\"get\"} 0.000012",
            "redis_commands_failed_calls_total{cmd=\"get\"} 1",
            "redis_errors_total{err=\"WRONGTYPE\"} 2",
            "redis_latency_percentiles_usec{cmd=\"get\",quantile=\"0.999\"} 8.191",
            "redis_db_keys{db=\"db0\"} 5",
            "redis_db_keys_expiring{db=\"db0\"} 1",
            "redis_db_avg_ttl_seconds{db=\"db0\"} 2",
            "shale_rocksdb_estimate_num_keys 5",
            "shale_rocksdb_block_cache_hit_rate 0.5",
            "redis_instance_info{redis_version=\"7.0.15\",run_id=\"abc\",tcp_port=\"6379\",role=\"master\"} 1",
            "redis_up 1",
        ] {
            assert!(metrics.contains(expected), "{expected} missing from:\n{metrics}");
        }
    }
}
