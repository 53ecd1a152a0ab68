//! Stream commands against a real server: blocking reads woken by another client's XADD,
//! consumer-group redelivery after a consumer dies, large streams trimmed and read in
//! ranges, streams with their groups surviving a restart, and trims by Redis's nodes, whose
//! expected numbers are Redis 7.0.15's. (Replies and errors are compared with Redis's in
//! scripts/compare/streams.txt.)

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
    // An approximate trim removes whole nodes, at most LIMIT entries of them: the node the
    // exact trim left one entry of, not the next 100 (Redis 7.0.15 answers the same).
    assert_eq!(
        run::<i64>(
            &mut con,
            &["XTRIM", "big", "MAXLEN", "~", "0", "LIMIT", "100"]
        ),
        1
    );
    let first: Value = run(&mut con, &["XRANGE", "big", "-", "+", "COUNT", "2"]);
    assert_eq!(ids(&first), ["10001-1", "10002-1"]);
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
    assert_eq!(run::<i64>(&mut con, &["XLEN", "big"]), 10_000);
    let info: Value = run(&mut con, &["XINFO", "STREAM", "big"]);
    let text = format!("{info:?}");
    assert!(text.contains("20000-1"), "{text}");
    let pending: Value = run(&mut con, &["XPENDING", "big", "g"]);
    let Value::Array(summary) = pending else {
        panic!("no summary");
    };
    assert_eq!(summary[0], Value::Int(10));
    assert_eq!(summary[1], Value::BulkString(b"10001-1".to_vec()));
    // Auto IDs continue after the last one, in milliseconds since the epoch.
    let id: String = run(&mut con, &["XADD", "big", "*", "n", "x"]);
    let ms: u64 = id
        .split('-')
        .next()
        .and_then(|m| m.parse().ok())
        .expect("an ID");
    assert!(ms > 1_700_000_000_000, "{id}");
}

/// XINFO STREAM's `length`, `radix-tree-keys` and `radix-tree-nodes`.
fn nodes(con: &mut redis::Connection, key: &str) -> [i64; 3] {
    let info: Vec<Value> = run(con, &["XINFO", "STREAM", key]);
    let field = |name: &str| {
        let at = info
            .iter()
            .position(|v| *v == Value::BulkString(name.as_bytes().to_vec()))
            .unwrap_or_else(|| panic!("no {name} in {info:?}"));
        match info[at + 1] {
            Value::Int(n) => n,
            ref other => panic!("{name} is {other:?}"),
        }
    };
    [
        field("length"),
        field("radix-tree-keys"),
        field("radix-tree-nodes"),
    ]
}

/// XADDs `key` the entries `ms-seq f v<ms>` for `ms` in `range`.
fn fill(con: &mut redis::Connection, key: &str, range: std::ops::RangeInclusive<u64>, seq: u64) {
    let mut pipe = redis::pipe();
    for i in range {
        pipe.cmd("XADD")
            .arg(key)
            .arg(format!("{i}-{seq}"))
            .arg("f")
            .arg(format!("v{i}"));
    }
    pipe.query::<()>(con).expect("pipeline");
}

fn trim(con: &mut redis::Connection, args: &str) -> i64 {
    let args: Vec<&str> = args.split(' ').collect();
    run(con, &[&["XTRIM"][..], &args].concat())
}

#[test]
fn approximate_trims_remove_whole_nodes_and_limit_counts_them() {
    let server = TestServer::start();
    let mut con = server.client();
    fill(&mut con, "s", 1..=1000, 0);
    assert_eq!(nodes(&mut con, "s"), [1000, 10, 26]);
    // Four whole nodes of 100 go, so more than 600 are left.
    run::<String>(
        &mut con,
        &["XADD", "s", "MAXLEN", "~", "600", "1001-0", "f", "x"],
    );
    assert_eq!(run::<i64>(&mut con, &["XLEN", "s"]), 601);
    // LIMIT 1 is less than a node: nothing goes; LIMIT 250 takes two whole nodes.
    assert_eq!(trim(&mut con, "s MAXLEN ~ 0 LIMIT 1"), 0);
    assert_eq!(trim(&mut con, "s MAXLEN ~ 0 LIMIT 250"), 200);
    assert_eq!(trim(&mut con, "s MAXLEN ~ 350 LIMIT 0"), 0);
    // MINID ~ removes the nodes whose last entry is older, not the older entries of the next.
    assert_eq!(trim(&mut con, "s MINID ~ 750"), 100);
    assert_eq!(nodes(&mut con, "s"), [301, 4, 11]);
    assert_eq!(trim(&mut con, "s MINID ~ 1001-0"), 300);
    assert_eq!(nodes(&mut con, "s"), [1, 1, 2]);
    // The node of the entry XADD adds goes too when the trim takes every node.
    run::<String>(
        &mut con,
        &["XADD", "s", "MAXLEN", "~", "0", "1002-0", "f", "y"],
    );
    assert_eq!(nodes(&mut con, "s"), [0, 0, 1]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "s"]), 1);
}

#[test]
fn deleted_entries_keep_their_place_in_their_node() {
    let server = TestServer::start();
    let mut con = server.client();
    fill(&mut con, "d", 1..=250, 1);
    run::<i64>(&mut con, &["XDEL", "d", "90-1", "95-1", "99-1", "100-1"]);
    assert_eq!(nodes(&mut con, "d"), [246, 3, 8]);
    // The first node's last entry, 100-1, is deleted but still its last.
    assert_eq!(trim(&mut con, "d MINID ~ 100-1"), 0);
    assert_eq!(trim(&mut con, "d MINID ~ 101"), 96);
    // An exact trim within a node flags entries; the node stays until it has none.
    run::<i64>(&mut con, &["XDEL", "d", "101-1", "102-1"]);
    assert_eq!(trim(&mut con, "d MAXLEN ~ 100"), 0);
    assert_eq!(nodes(&mut con, "d"), [148, 2, 6]);
    let ids: Vec<String> = (103..=200).map(|i| format!("{i}-1")).collect();
    let args: Vec<&str> = ["XDEL", "d"]
        .into_iter()
        .chain(ids.iter().map(String::as_str))
        .collect();
    assert_eq!(run::<i64>(&mut con, &args), 98);
    assert_eq!(nodes(&mut con, "d"), [50, 1, 2]);
    // Deleted entries count toward a node's entries.
    run::<String>(
        &mut con,
        &["CONFIG", "SET", "stream-node-max-entries", "10"],
    );
    fill(&mut con, "e", 1..=95, 0);
    run::<i64>(&mut con, &["XDEL", "e", "91-0", "92-0", "93-0"]);
    fill(&mut con, "e", 96..=100, 0);
    assert_eq!(nodes(&mut con, "e"), [97, 10, 22]);
    fill(&mut con, "e", 101..=101, 0);
    assert_eq!(nodes(&mut con, "e"), [98, 11, 24]);
}

#[test]
fn config_set_node_limits_are_honoured() {
    let server = TestServer::start();
    let mut con = server.client();
    let set = |con: &mut redis::Connection, name: &str, value: &str| {
        run::<String>(con, &["CONFIG", "SET", name, value]);
    };
    set(&mut con, "stream-node-max-entries", "10");
    fill(&mut con, "n", 1..=95, 0);
    assert_eq!(nodes(&mut con, "n"), [95, 10, 22]);
    // Without LIMIT, ~ removes at most 100 nodes' worth: 1,000 entries here.
    assert_eq!(trim(&mut con, "n MAXLEN ~ 50"), 40);
    assert_eq!(trim(&mut con, "n MAXLEN ~ 0 LIMIT 25"), 20);
    // By bytes: 200 bytes of listpack, as Redis counts them, per node.
    set(&mut con, "stream-node-max-entries", "0");
    set(&mut con, "stream-node-max-bytes", "200");
    let mut pipe = redis::pipe();
    for i in 1..=60 {
        pipe.cmd("XADD")
            .arg("b")
            .arg(format!("{i}-{i}"))
            .arg("field")
            .arg(format!("value-{i}"))
            .arg("n")
            .arg(i * 1000);
    }
    pipe.query::<()>(&mut con).expect("pipeline");
    assert_eq!(nodes(&mut con, "b"), [60, 8, 18]);
    assert_eq!(trim(&mut con, "b MAXLEN ~ 20"), 39);
    let got: Vec<String> = run(&mut con, &["CONFIG", "GET", "stream-node-max-bytes"]);
    assert_eq!(got, ["stream-node-max-bytes", "200"]);
    let refused = common::fails(
        &mut con,
        &["CONFIG", "SET", "stream-node-max-entries", "-1"],
    );
    assert!(
        refused.contains("argument must be between 0 and 9223372036854775807"),
        "{refused}"
    );
}

#[test]
fn node_boundaries_survive_a_restart_and_dump_and_restore() {
    let mut server = TestServer::start();
    let mut con = server.client();
    fill(&mut con, "r", 1..=150, 0);
    // The last node holds 50 entries, 10 of them deleted.
    let ids: Vec<String> = (141..=150).map(|i| format!("{i}-0")).collect();
    let args: Vec<&str> = ["XDEL", "r"]
        .into_iter()
        .chain(ids.iter().map(String::as_str))
        .collect();
    run::<i64>(&mut con, &args);
    let dump: Vec<u8> = run(&mut con, &["DUMP", "r"]);
    server.restart();
    let mut con = server.client();
    // So 50 more fill it, and 10 go to a new node.
    fill(&mut con, "r", 151..=210, 0);
    assert_eq!(nodes(&mut con, "r"), [200, 3, 8]);
    assert_eq!(trim(&mut con, "r MAXLEN ~ 0 LIMIT 99"), 0);
    assert_eq!(trim(&mut con, "r MAXLEN ~ 0 LIMIT 100"), 100);
    // A restored stream has the dumped one's nodes and dumps the same. Deleted entries are
    // not kept, so its last node holds the 40 live ones only, and takes 60 more: as in
    // Redis restoring this payload.
    let mut restore = redis::cmd("RESTORE");
    restore.arg("copy").arg(0).arg(&dump);
    restore.query::<()>(&mut con).expect("RESTORE");
    assert_eq!(nodes(&mut con, "copy"), [140, 2, 6]);
    assert_eq!(run::<Vec<u8>>(&mut con, &["DUMP", "copy"]), dump);
    fill(&mut con, "copy", 151..=210, 0);
    assert_eq!(nodes(&mut con, "copy"), [200, 2, 6]);
}
