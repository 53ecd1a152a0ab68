//! Overwrites of stored keys of every kind: against a real server whose keys were flushed to
//! table files by a restart, so that what a write learns of the key it replaces comes from
//! disk, not from a memtable or a cache.

mod common;

use std::time::Duration;

use common::{collect_messages, info_text, run, wait_until, TestServer};

/// A key of every kind, some with a TTL, one about to expire; then a restart.
fn stored_keys_of_every_kind(server: &mut TestServer) {
    let mut con = server.client();
    let pairs: Vec<String> = (0..100)
        .flat_map(|i| [format!("s{i}"), "v".into()])
        .collect();
    let mut mset = vec!["MSET"];
    mset.extend(pairs.iter().map(String::as_str));
    run::<()>(&mut con, &mset);
    for i in 0..50 {
        run::<()>(&mut con, &["SET", &format!("t{i}"), "v", "EX", "1000"]);
    }
    for i in 0..200 {
        run::<i64>(&mut con, &["HSET", "h", &format!("f{i}"), &"x".repeat(100)]);
    }
    for i in 0..300 {
        run::<i64>(&mut con, &["RPUSH", "l", &format!("e{i}")]);
    }
    run::<String>(&mut con, &["XADD", "x", "*", "f", "v"]);
    run::<i64>(&mut con, &["SETBIT", "b", "100000", "1"]);
    run::<()>(&mut con, &["SET", "e", "v", "PX", "300"]);
    server.restart();
}

/// INFO keyspace's counts of database 0: `keys=N,expires=M`.
fn keyspace(con: &mut redis::Connection) -> String {
    let line = info_text(con, "keyspace", "db0");
    line.split(",avg_ttl")
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn overwrites_of_stored_keys_keep_counts_types_ttls_and_events() {
    let mut server = TestServer::start();
    stored_keys_of_every_kind(&mut server);
    let mut con = server.client();
    std::thread::sleep(Duration::from_millis(400));
    // e has expired: 100 strings, 50 with a TTL, a hash, a list, a stream, a bitmap.
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 154);
    assert_eq!(keyspace(&mut con), "keys=154,expires=50");

    run::<()>(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "En$"],
    );
    let mut listener = server.client();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    run::<()>(&mut con, &["SET", "s1", "w"]);
    run::<()>(&mut con, &["SET", "e", "w"]);
    run::<()>(&mut con, &["SET", "h", "w"]);
    run::<()>(&mut con, &["SET", "brandnew", "w"]);
    let events = collect_messages(&mut pubsub, 6);
    let expected = [
        ("set", "s1"),
        ("new", "e"),
        ("set", "e"),
        ("set", "h"),
        ("new", "brandnew"),
        ("set", "brandnew"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(event, key)| (format!("__keyevent@0__:{event}"), key.to_string()))
        .collect();
    assert_eq!(events, expected);
    drop(pubsub);

    // SET over every other kind, with and without a TTL; MSET over strings with TTLs.
    run::<()>(&mut con, &["SET", "l", "w", "EX", "500"]);
    run::<()>(&mut con, &["SET", "x", "w"]);
    run::<()>(&mut con, &["SET", "b", "w"]);
    run::<()>(&mut con, &["MSET", "t0", "w", "t1", "w", "s2", "w"]);
    run::<()>(&mut con, &["SET", "t2", "w", "KEEPTTL"]);
    assert_eq!(
        run::<Option<String>>(&mut con, &["SET", "t3", "w", "NX"]),
        None
    );
    assert_eq!(run::<String>(&mut con, &["SET", "t4", "w", "XX"]), "OK");
    for key in ["h", "l", "x", "b"] {
        assert_eq!(run::<String>(&mut con, &["TYPE", key]), "string", "{key}");
    }
    assert!((499..=500).contains(&run::<i64>(&mut con, &["TTL", "l"])));
    assert!((990..=1000).contains(&run::<i64>(&mut con, &["TTL", "t2"])));
    for key in ["t0", "t1", "t4", "e", "h"] {
        assert_eq!(run::<i64>(&mut con, &["TTL", key]), -1, "{key}");
    }
    // 154 + e + brandnew; t0, t1, t4 lost their TTLs and l gained one.
    let counted = "keys=156,expires=48";
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 156);
    assert_eq!(keyspace(&mut con), counted);

    // WATCH sees an overwrite.
    let mut other = server.client();
    run::<()>(&mut con, &["WATCH", "s3"]);
    run::<()>(&mut other, &["SET", "s3", "w"]);
    run::<()>(&mut con, &["MULTI"]);
    run::<String>(&mut con, &["GET", "s3"]);
    assert_eq!(run::<Option<Vec<String>>>(&mut con, &["EXEC"]), None);

    server.restart();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 156);
    assert_eq!(keyspace(&mut con), counted);
    assert_eq!(run::<String>(&mut con, &["GET", "h"]), "w");
}

#[test]
fn a_replica_counts_what_its_master_overwrote() {
    let mut master = TestServer::start();
    stored_keys_of_every_kind(&mut master);
    let replica = TestServer::start_with(&["--replicaof", &format!("127.0.0.1 {}", master.port)]);
    let mut con = master.client();
    run::<()>(&mut con, &["SET", "h", "w", "EX", "100"]);
    run::<()>(&mut con, &["MSET", "s0", "w", "t0", "w", "new", "w"]);
    let mut replica_con = replica.client();
    wait_until("the replica has every write", || {
        info_text(&mut replica_con, "replication", "master_link_status") == "up"
            && run::<Option<String>>(&mut replica_con, &["GET", "new"]).is_some()
    });
    let dbsize: i64 = run(&mut con, &["DBSIZE"]);
    assert_eq!(run::<i64>(&mut replica_con, &["DBSIZE"]), dbsize);
    assert_eq!(keyspace(&mut replica_con), keyspace(&mut con));
    assert_eq!(run::<String>(&mut replica_con, &["TYPE", "h"]), "string");
}
