//! Stream commands against a real server: blocking reads woken by another client's XADD,
//! consumer-group redelivery after a consumer dies, large streams trimmed and read in
//! ranges, and streams with their groups surviving a restart. (Replies and errors are
//! compared with Redis's in scripts/compare/streams.txt.)

mod common;

use std::time::Duration;

use common::{run, wait_for_blocked, TestServer};
use redis::Value;

fn ids(reply: &Value) -> Vec<String> {
    let Value::Array(entries) = reply else {
        panic!("not entries: {reply:?}");
    };
    entries
        .iter()
        .map(|e| match e {
            Value::Array(parts) => match &parts[0] {
                Value::BulkString(id) => String::from_utf8_lossy(id).into_owned(),
                other => panic!("no ID: {other:?}"),
            },
            other => panic!("not an entry: {other:?}"),
        })
        .collect()
}

/// Runs `args` on a connection of its own, in a thread, as a client that blocks would.
fn in_background(
    server: &TestServer,
    args: &'static [&'static str],
) -> std::thread::JoinHandle<redis::RedisResult<Value>> {
    let url = server.url();
    std::thread::spawn(move || {
        let mut con = redis::Client::open(url).and_then(|c| c.get_connection())?;
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut con)
    })
}

#[test]
fn a_blocked_xread_is_woken_by_another_clients_xadd() {
    let server = TestServer::start();
    let mut writer = server.client();
    run::<String>(&mut writer, &["XADD", "s", "1-1", "f", "v"]);
    let reader = in_background(&server, &["XREAD", "BLOCK", "10000", "STREAMS", "s", "$"]);
    wait_for_blocked(&mut writer, 1);
    run::<String>(&mut writer, &["XADD", "s", "2-1", "g", "w"]);
    let reply = reader.join().expect("reader").expect("a reply");
    let expected = Value::Array(vec![Value::Array(vec![
        Value::BulkString(b"s".to_vec()),
        Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"2-1".to_vec()),
            Value::Array(vec![
                Value::BulkString(b"g".to_vec()),
                Value::BulkString(b"w".to_vec()),
            ]),
        ])]),
    ])]);
    assert_eq!(reply, expected);
    // A read that times out answers a null.
    let timed_out: Value = run(&mut writer, &["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]);
    assert_eq!(timed_out, Value::Nil);
}

#[test]
fn a_blocked_xread_of_several_streams_reads_each_after_its_own_id() {
    let server = TestServer::start();
    let mut writer = server.client();
    run::<String>(&mut writer, &["XADD", "k1", "100-0", "f", "v"]);
    let reader = in_background(
        &server,
        &["XREAD", "BLOCK", "10000", "STREAMS", "k1", "k2", "$", "$"],
    );
    wait_for_blocked(&mut writer, 1);
    // k2's entry is older than k1's last ID, but k2 was read from its own `$` (0-0).
    run::<String>(&mut writer, &["XADD", "k2", "5-0", "g", "w"]);
    let Value::Array(streams) = reader.join().expect("reader").expect("a reply") else {
        panic!("no streams");
    };
    assert_eq!(streams.len(), 1);
    let Value::Array(stream) = &streams[0] else {
        panic!("no stream");
    };
    assert_eq!(stream[0], Value::BulkString(b"k2".to_vec()));
    assert_eq!(ids(&stream[1]), ["5-0"]);
}

#[test]
fn a_waiter_for_a_later_id_does_not_hold_up_the_waiters_behind_it() {
    let server = TestServer::start();
    let mut writer = server.client();
    run::<String>(&mut writer, &["XADD", "s", "1-0", "f", "v"]);
    let later = in_background(
        &server,
        &["XREAD", "BLOCK", "1500", "STREAMS", "s", "99999-0"],
    );
    wait_for_blocked(&mut writer, 1);
    let now = in_background(&server, &["XREAD", "BLOCK", "10000", "STREAMS", "s", "$"]);
    wait_for_blocked(&mut writer, 2);
    run::<String>(&mut writer, &["XADD", "s", "2-0", "f", "w"]);
    let Value::Array(streams) = now.join().expect("reader").expect("a reply") else {
        panic!("no streams");
    };
    let Value::Array(stream) = &streams[0] else {
        panic!("no stream");
    };
    assert_eq!(ids(&stream[1]), ["2-0"]);
    // The first waiter found nothing after its ID and timed out.
    assert_eq!(later.join().expect("reader").expect("a reply"), Value::Nil);
}

#[test]
fn a_blocked_xreadgroup_gets_the_new_entry_and_owns_it() {
    let server = TestServer::start();
    let mut writer = server.client();
    run::<String>(
        &mut writer,
        &["XGROUP", "CREATE", "q", "workers", "$", "MKSTREAM"],
    );
    let reader = in_background(
        &server,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "w1",
            "BLOCK",
            "10000",
            "STREAMS",
            "q",
            ">",
        ],
    );
    wait_for_blocked(&mut writer, 1);
    run::<String>(&mut writer, &["XADD", "q", "5-1", "job", "1"]);
    let reply = reader.join().expect("reader").expect("a reply");
    let Value::Array(streams) = reply else {
        panic!("no streams");
    };
    let Value::Array(stream) = &streams[0] else {
        panic!("no stream");
    };
    assert_eq!(ids(&stream[1]), ["5-1"]);
    let pending: Value = run(&mut writer, &["XPENDING", "q", "workers"]);
    let Value::Array(summary) = pending else {
        panic!("no summary");
    };
    assert_eq!(summary[0], Value::Int(1));
}

#[test]
fn a_blocked_xreadgroup_ends_when_its_group_is_destroyed() {
    let server = TestServer::start();
    let mut admin = server.client();
    run::<String>(&mut admin, &["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]);
    let reader = in_background(
        &server,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "10000",
            "STREAMS",
            "q",
            ">",
        ],
    );
    wait_for_blocked(&mut admin, 1);
    assert_eq!(run::<i64>(&mut admin, &["XGROUP", "DESTROY", "q", "g"]), 1);
    let error = reader.join().expect("reader").expect_err("an error");
    assert_eq!(
        common::error_line(error),
        "NOGROUP the consumer group this client was blocked on no longer exists"
    );
}

#[test]
fn a_dead_consumers_entries_are_claimed_by_another_after_their_idle_time() {
    let server = TestServer::start();
    let mut con = server.client();
    for i in 1..=5 {
        run::<String>(
            &mut con,
            &["XADD", "jobs", &format!("{i}-0"), "n", &i.to_string()],
        );
    }
    run::<String>(&mut con, &["XGROUP", "CREATE", "jobs", "g", "0"]);
    let read: Value = run(
        &mut con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "dead",
            "COUNT",
            "3",
            "STREAMS",
            "jobs",
            ">",
        ],
    );
    assert!(matches!(read, Value::Array(_)));
    run::<i64>(&mut con, &["XACK", "jobs", "g", "2-0"]);
    // Too fresh: nothing is claimed yet.
    let early: Value = run(&mut con, &["XAUTOCLAIM", "jobs", "g", "alive", "200", "0"]);
    let Value::Array(early) = early else {
        panic!("no reply");
    };
    assert_eq!(ids(&early[1]), Vec::<String>::new());
    std::thread::sleep(Duration::from_millis(250));
    let claimed: Value = run(&mut con, &["XAUTOCLAIM", "jobs", "g", "alive", "200", "0"]);
    let Value::Array(claimed) = claimed else {
        panic!("no reply");
    };
    assert_eq!(claimed[0], Value::BulkString(b"0-0".to_vec()));
    assert_eq!(ids(&claimed[1]), ["1-0", "3-0"]);
    // Each was delivered twice now, and belongs to the live consumer.
    let pending: Value = run(&mut con, &["XPENDING", "jobs", "g", "-", "+", "10"]);
    let Value::Array(pending) = pending else {
        panic!("no pending");
    };
    for line in &pending {
        let Value::Array(fields) = line else {
            panic!("no line");
        };
        assert_eq!(fields[1], Value::BulkString(b"alive".to_vec()));
        assert_eq!(fields[3], Value::Int(2));
    }
    assert_eq!(pending.len(), 2);
    let consumers: Vec<Vec<Value>> = run(&mut con, &["XINFO", "CONSUMERS", "jobs", "g"]);
    assert_eq!(consumers.len(), 2);
}

#[test]
fn a_large_stream_is_trimmed_and_read_in_ranges_and_survives_a_restart() {
    let mut server = TestServer::start();
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 1..=20_000u64 {
        pipe.cmd("XADD")
            .arg("big")
            .arg(format!("{i}-1"))
            .arg("n")
            .arg(i);
    }
    pipe.query::<()>(&mut con).expect("pipeline");
    assert_eq!(run::<i64>(&mut con, &["XLEN", "big"]), 20_000);
    assert_eq!(
        run::<i64>(&mut con, &["XTRIM", "big", "MAXLEN", "15000"]),
        5_000
    );
    assert_eq!(
        run::<i64>(&mut con, &["XTRIM", "big", "MINID", "10000"]),
        4_999
    );
    // An approximate trim removes at most LIMIT entries.
    assert_eq!(
        run::<i64>(
            &mut con,
            &["XTRIM", "big", "MAXLEN", "~", "0", "LIMIT", "100"]
        ),
        100
    );
    let first: Value = run(&mut con, &["XRANGE", "big", "-", "+", "COUNT", "2"]);
    assert_eq!(ids(&first), ["10100-1", "10101-1"]);
    let last: Value = run(&mut con, &["XREVRANGE", "big", "+", "-", "COUNT", "1"]);
    assert_eq!(ids(&last), ["20000-1"]);
    run::<String>(&mut con, &["XGROUP", "CREATE", "big", "g", "0"]);
    run::<Value>(
        &mut con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "10",
            "STREAMS",
            "big",
            ">",
        ],
    );

    server.restart();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["XLEN", "big"]), 9_901);
    let info: Value = run(&mut con, &["XINFO", "STREAM", "big"]);
    let text = format!("{info:?}");
    assert!(text.contains("20000-1"), "{text}");
    let pending: Value = run(&mut con, &["XPENDING", "big", "g"]);
    let Value::Array(summary) = pending else {
        panic!("no summary");
    };
    assert_eq!(summary[0], Value::Int(10));
    assert_eq!(summary[1], Value::BulkString(b"10100-1".to_vec()));
    // Auto IDs continue after the last one, in milliseconds since the epoch.
    let id: String = run(&mut con, &["XADD", "big", "*", "n", "x"]);
    let ms: u64 = id
        .split('-')
        .next()
        .and_then(|m| m.parse().ok())
        .expect("an ID");
    assert!(ms > 1_700_000_000_000, "{id}");
}
