//! What operators watch: INFO latencystats, LATENCY HISTOGRAM, the latency monitor's events
//! (LATENCY LATEST, HISTORY, RESET), and RocksDB's state in INFO.

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
