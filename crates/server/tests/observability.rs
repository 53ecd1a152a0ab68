//! What operators watch: INFO latencystats, LATENCY HISTOGRAM, the latency monitor's events
//! (LATENCY LATEST, HISTORY, RESET, DOCTOR), and RocksDB's state in INFO.

mod common;

use common::{fails, info_field, info_text, run, TestServer};

/// The `name=value` pairs of an INFO line.
fn info_pairs(con: &mut redis::Connection, section: &str, field: &str) -> Vec<(String, f64)> {
    let line = info_text(con, section, field);
    assert!(!line.is_empty(), "{field} missing from INFO {section}");
    line.split(',')
        .map(|pair| {
            let (name, value) = pair.split_once('=').expect("name=value");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

#[test]
fn latencystats_and_latency_histogram_count_every_call() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        run::<Vec<String>>(&mut con, &["CONFIG", "GET", "latency-tracking*"]),
        vec![
            "latency-tracking",
            "yes",
            "latency-tracking-info-percentiles",
            "50 99 99.9"
        ]
    );
    for i in 0..200 {
        let _: () = run(&mut con, &["SET", &format!("k{i}"), "v"]);
    }
    let percentiles = info_pairs(&mut con, "latencystats", "latency_percentiles_usec_set");
    let names: Vec<&str> = percentiles.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["p50", "p99", "p99.9"]);
    assert!(percentiles[0].1 > 0.0 && percentiles[0].1 <= percentiles[2].1);
    // Not a default section, as in Redis.
    let default: String = run(&mut con, &["INFO"]);
    assert!(!default.contains("latency_percentiles_usec_"));

    let reply: redis::Value = redis::cmd("LATENCY")
        .arg("HISTOGRAM")
        .arg("set")
        .arg("nosuchcommand")
        .query(&mut con)
        .expect("histogram");
    let redis::Value::Array(items) = reply else {
        panic!("a map in RESP2 is a flat array: {reply:?}");
    };
    assert_eq!(items[0], redis::Value::BulkString(b"set".to_vec()));
    let redis::Value::Array(detail) = &items[1] else {
        panic!("{items:?}");
    };
    assert_eq!(detail[0], redis::Value::BulkString(b"calls".to_vec()));
    assert_eq!(detail[1], redis::Value::Int(200));
    let redis::Value::Array(buckets) = &detail[3] else {
        panic!("{detail:?}");
    };
    assert_eq!(buckets.last(), Some(&redis::Value::Int(200)), "cumulative");

    let _: () = run(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "50 99.99",
        ],
    );
    let percentiles = info_pairs(&mut con, "latencystats", "latency_percentiles_usec_set");
    assert_eq!(percentiles[1].0, "p99.99");
    assert_eq!(
        fails(
            &mut con,
            &["CONFIG", "SET", "latency-tracking-info-percentiles", "101"]
        ),
        "ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
    );
    let _: () = run(&mut con, &["CONFIG", "RESETSTAT"]);
    let empty: Vec<redis::Value> = run(&mut con, &["LATENCY", "HISTOGRAM", "set"]);
    assert!(empty.is_empty());
}

#[test]
fn the_latency_monitor_records_slow_commands() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = run(&mut con, &["DEBUG", "SLEEP", "0.05"]);
    let latest: Vec<redis::Value> = run(&mut con, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty(), "off while the threshold is 0");

    let _: () = run(
        &mut con,
        &["CONFIG", "SET", "latency-monitor-threshold", "20"],
    );
    let _: () = run(&mut con, &["DEBUG", "SLEEP", "0.05"]);
    let latest: Vec<(String, i64, i64, i64)> = run(&mut con, &["LATENCY", "LATEST"]);
    assert_eq!(latest.len(), 1, "{latest:?}");
    let (event, _, last, max) = &latest[0];
    assert_eq!(event, "command");
    assert!(*last >= 50 && *max >= 50, "{latest:?}");
    let history: Vec<(i64, i64)> = run(&mut con, &["LATENCY", "HISTORY", "command"]);
    assert_eq!(history.len(), 1);
    assert_eq!(run::<i64>(&mut con, &["LATENCY", "RESET", "command"]), 1);
    let latest: Vec<redis::Value> = run(&mut con, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty());
}

/// The calls of each command in a LATENCY HISTOGRAM reply (RESP2: a flat array of pairs).
fn histogram_calls(con: &mut redis::Connection, args: &[&str]) -> Vec<(String, i64)> {
    let reply: Vec<redis::Value> = run(con, args);
    reply
        .chunks(2)
        .map(|pair| {
            let name: String = redis::from_redis_value(pair[0].clone()).expect("a name");
            let detail: Vec<redis::Value> =
                redis::from_redis_value(pair[1].clone()).expect("a map");
            (
                name,
                redis::from_redis_value(detail[1].clone()).expect("calls"),
            )
        })
        .collect()
}

#[test]
fn latency_histogram_and_commandstats_name_subcommands() {
    let server = TestServer::start();
    let mut con = server.client();
    for _ in 0..2 {
        let _: i64 = run(&mut con, &["CLIENT", "ID"]);
    }
    let _: String = run(&mut con, &["CLIENT", "LIST"]);
    let mut container = histogram_calls(&mut con, &["LATENCY", "HISTOGRAM", "client"]);
    // The client library's own CLIENT SETINFO on connecting.
    container.retain(|(name, _)| name != "client|setinfo");
    container.sort();
    assert_eq!(
        container,
        [("client|id".to_string(), 2), ("client|list".to_string(), 1)]
    );
    assert_eq!(
        histogram_calls(
            &mut con,
            &["LATENCY", "HISTOGRAM", "CLIENT|ID", "get|x", "client|"]
        ),
        [("client|id".to_string(), 2)],
        "a subcommand by its full name; a command without subcommands has none"
    );
    let all = histogram_calls(&mut con, &["LATENCY", "HISTOGRAM"]);
    assert!(all.contains(&("client|list".to_string(), 1)), "{all:?}");
    let info: String = run(&mut con, &["INFO", "commandstats"]);
    assert!(
        common::command_stats(&info, "client|id").starts_with("cmdstat_client|id:calls=2,"),
        "{info}"
    );
}

#[test]
fn a_slow_expiry_cycle_is_a_latency_event() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = run(
        &mut con,
        &["CONFIG", "SET", "latency-monitor-threshold", "1"],
    );
    // Reaping 20,000 keys takes cycles of more than a millisecond.
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("SET")
            .arg(format!("k{i}"))
            .arg("v")
            .arg("PX")
            .arg(1)
            .ignore();
    }
    let _: () = pipe.query(&mut con).expect("pipeline");
    common::wait_until("every key reaped", || {
        run::<i64>(&mut con, &["DBSIZE"]) == 0
    });
    let latest: Vec<(String, i64, i64, i64)> = run(&mut con, &["LATENCY", "LATEST"]);
    assert!(
        latest.iter().any(|(event, ..)| event == "expire-cycle"),
        "{latest:?}"
    );
    let history: Vec<(i64, i64)> = run(&mut con, &["LATENCY", "HISTORY", "expire-cycle"]);
    assert!(!history.is_empty() && history.iter().all(|&(_, ms)| ms >= 1));
}

/// Redis's advice on the process's transparent huge pages, which LATENCY DOCTOR adds when it
/// has some.
fn huge_pages_advice(pid: u32) -> &'static str {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let huge = smaps
        .lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .any(|rest| rest.trim().trim_end_matches("kB").trim() != "0");
    if huge {
        "- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n"
    } else {
        ""
    }
}

#[test]
fn latency_doctor_reports_as_redis_does() {
    let server = TestServer::start();
    let mut con = server.client();
    let doctor = |con: &mut redis::Connection| run::<String>(con, &["LATENCY", "DOCTOR"]);
    assert_eq!(
        doctor(&mut con),
        "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
    );
    let _: () = run(
        &mut con,
        &["CONFIG", "SET", "latency-monitor-threshold", "20"],
    );
    let report = doctor(&mut con);
    if huge_pages_advice(server.pid()).is_empty() {
        assert_eq!(report, "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
    }

    let _: () = run(&mut con, &["DEBUG", "SLEEP", "0.05"]);
    let latest: Vec<(String, i64, i64, i64)> = run(&mut con, &["LATENCY", "LATEST"]);
    let ms = latest[0].2;
    let spikes = format!(
        "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n\
         1. command: 1 latency spikes (average {ms}ms, mean deviation 0ms, period 1.00 sec). Worst all time event {ms}ms.\n\n\
         I have a few advices for you:\n\n"
    );
    let inspect = "- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n\
        - Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n";
    let thp = huge_pages_advice(server.pid());
    assert_eq!(doctor(&mut con), format!("{spikes}{inspect}{thp}"));

    // A slow log that would miss what the monitor saw, or that is off.
    let _: () = run(
        &mut con,
        &["CONFIG", "SET", "slowlog-log-slower-than", "30000"],
    );
    let tuning = "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than 20000'.\n";
    assert_eq!(doctor(&mut con), format!("{spikes}{tuning}{inspect}{thp}"));
    let _: () = run(
        &mut con,
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    );
    let enable = "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than 20000'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n";
    assert_eq!(doctor(&mut con), format!("{spikes}{enable}{inspect}{thp}"));

    // Events stay reported once the monitor is off, until they are reset.
    let _: () = run(
        &mut con,
        &["CONFIG", "SET", "latency-monitor-threshold", "0"],
    );
    assert!(doctor(&mut con).starts_with(&spikes));
    let _: i64 = run(&mut con, &["LATENCY", "RESET"]);
    assert!(doctor(&mut con).starts_with("I'm sorry, Dave"));
}

#[test]
fn info_shows_rocksdb_state() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = run(&mut con, &["SET", "k", "v"]);
    for field in [
        "num_immutable_memtables",
        "is_write_stopped",
        "write_stall_micros",
        "block_cache_hits",
        "write_buffer_size",
    ] {
        info_field(&mut con, "rocksdb", field);
    }
    assert_eq!(info_field(&mut con, "rocksdb", "is_write_stopped"), 0);
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

#[test]
fn prometheus_scrapes_info_under_redis_exporter_names() {
    let port = common::free_port();
    let server = TestServer::start_with(&["--metrics-port", &port.to_string()]);
    let mut con = server.client();
    let _: () = run(&mut con, &["SET", "k", "v"]);
    let response = http_get(port, "/metrics");
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    for expected in [
        "redis_up 1",
        "redis_connected_clients 1",
        "redis_commands_total{cmd=\"set\"} 1",
        "redis_db_keys{db=\"db0\"} 1",
        "redis_aof_last_write_status 1",
        "redis_latency_percentiles_usec{cmd=\"set\",quantile=\"0.5\"}",
        "shale_rocksdb_estimate_num_keys",
    ] {
        assert!(
            response.contains(expected),
            "{expected} missing:\n{response}"
        );
    }
    assert!(http_get(port, "/").starts_with("HTTP/1.1 404"));
}
