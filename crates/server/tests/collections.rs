//! What all collection types share: generic key commands, deletion and expiry of large
//! collections, and what stays on disk afterwards.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{fails, info_field, run, wait_until, TestServer};
use redis::Value;
use shale_storage::Cf;

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

fn fill_hash(con: &mut redis::Connection, key: &str, fields: usize) {
    for chunk in (0..fields).collect::<Vec<_>>().chunks(2000) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for i in chunk {
            cmd.arg(format!("field:{i:07}")).arg(*i);
        }
        cmd.query::<()>(con).unwrap();
    }
}

#[test]
fn generic_commands_on_every_type() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["HSET", "h", "f", "v"]);
    run::<()>(&mut con, &["RPUSH", "l", "a", "b"]);
    run::<()>(&mut con, &["SADD", "s", "m"]);
    run::<()>(&mut con, &["ZADD", "z", "1", "m"]);
    for (key, kind, encoding) in [
        ("h", "hash", "listpack"),
        ("l", "list", "listpack"),
        ("s", "set", "listpack"),
        ("z", "zset", "listpack"),
    ] {
        assert_eq!(run::<String>(&mut con, &["TYPE", key]), kind);
        assert_eq!(
            run::<String>(&mut con, &["OBJECT", "ENCODING", key]),
            encoding
        );
        let (_, found): (String, Vec<String>) =
            run(&mut con, &["SCAN", "0", "TYPE", kind, "COUNT", "100"]);
        assert_eq!(found, vec![key.to_string()]);
        assert_eq!(run::<i64>(&mut con, &["EXPIRE", key, "100"]), 1);
        assert!(run::<i64>(&mut con, &["TTL", key]) > 90);
        assert_eq!(run::<i64>(&mut con, &["PERSIST", key]), 1);
    }
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 4);

    run::<()>(&mut con, &["RENAME", "h", "h2"]);
    assert_eq!(run::<String>(&mut con, &["HGET", "h2", "f"]), "v");
    assert_eq!(run::<i64>(&mut con, &["HLEN", "h"]), 0);
    assert_eq!(run::<i64>(&mut con, &["COPY", "l", "l2"]), 1);
    run::<()>(&mut con, &["RPUSH", "l2", "c"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "l", "0", "-1"]),
        ["a", "b"],
        "copies are independent"
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "l2", "0", "-1"]),
        ["a", "b", "c"]
    );
    run::<()>(&mut con, &["RENAME", "l2", "z"]);
    assert_eq!(
        run::<String>(&mut con, &["TYPE", "z"]),
        "list",
        "RENAME overwrites another type"
    );
    assert_eq!(run::<i64>(&mut con, &["MOVE", "s", "3"]), 1);
    run::<()>(&mut con, &["SELECT", "3"]);
    assert_eq!(run::<Vec<String>>(&mut con, &["SMEMBERS", "s"]), ["m"]);
    assert_eq!(run::<i64>(&mut con, &["COPY", "s", "s", "DB", "0"]), 1);
    run::<()>(&mut con, &["SELECT", "0"]);
    assert_eq!(run::<i64>(&mut con, &["SISMEMBER", "s", "m"]), 1);
    assert_eq!(run::<i64>(&mut con, &["DEL", "h2", "l", "z", "s"]), 4);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 0);
    assert_eq!(fails(&mut con, &["RENAME", "h", "x"]), "ERR no such key");
}

#[test]
fn expired_collections_are_recreated_empty() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["HSET", "h", "old", "1"]);
    run::<()>(&mut con, &["SADD", "s", "old"]);
    run::<()>(&mut con, &["PEXPIRE", "h", "30"]);
    run::<()>(&mut con, &["PEXPIRE", "s", "30"]);
    std::thread::sleep(Duration::from_millis(50));
    // Re-created before the reaper may have run: old elements must not come back.
    run::<()>(&mut con, &["HSET", "h", "new", "2"]);
    run::<()>(&mut con, &["SADD", "s", "new"]);
    let all: HashMap<String, String> = run(&mut con, &["HGETALL", "h"]);
    assert_eq!(all.keys().collect::<Vec<_>>(), ["new"]);
    assert_eq!(run::<Vec<String>>(&mut con, &["SMEMBERS", "s"]), ["new"]);
    assert_eq!(run::<i64>(&mut con, &["TTL", "h"]), -1);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 2);
}

#[test]
fn million_element_hash_deletes_without_slowing_neighbours() {
    let server = TestServer::start();
    let mut con = server.client();
    // Over 4 KiB, so its fields are records that a read scans, right after the big hash's.
    let long = "v".repeat(5000);
    run::<()>(&mut con, &["HSET", "{t}b", "x", "1", "y", &long]);
    fill_hash(&mut con, "{t}a", 1_000_000);
    assert_eq!(run::<i64>(&mut con, &["HLEN", "{t}a"]), 1_000_000);

    let mut seen = 0;
    let mut cursor = "0".to_string();
    loop {
        let (next, items): (String, Vec<Value>) =
            run(&mut con, &["HSCAN", "{t}a", &cursor, "COUNT", "20000"]);
        seen += items.len() / 2;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen, 1_000_000);

    let neighbour_read_cost = |con: &mut redis::Connection| {
        let before = info_field(con, "rocksdb", "iter_skipped_entries");
        let all: HashMap<String, String> = run(con, &["HGETALL", "{t}b"]);
        assert_eq!(all.len(), 2);
        info_field(con, "rocksdb", "iter_skipped_entries") - before
    };
    let before_delete = neighbour_read_cost(&mut con);
    assert_eq!(run::<i64>(&mut con, &["DEL", "{t}a"]), 1);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "{t}a"]), 0);
    let after_delete = neighbour_read_cost(&mut con);
    assert_eq!(
        after_delete, before_delete,
        "the read skipped no dead elements"
    );
    let (_, items): (String, Vec<Value>) = run(&mut con, &["HSCAN", "{t}a", "0", "COUNT", "10"]);
    assert!(items.is_empty());
    fill_hash(&mut con, "{t}a", 10);
    assert_eq!(
        run::<i64>(&mut con, &["HLEN", "{t}a"]),
        10,
        "a re-created key starts empty"
    );
}

#[test]
fn expired_hash_vanishes_and_its_elements_leave_the_disk() {
    let mut server = TestServer::start();
    let mut con = server.client();
    fill_hash(&mut con, "big", 100_000);
    run::<()>(&mut con, &["HSET", "small", "f", "v"]);
    assert_eq!(run::<i64>(&mut con, &["PEXPIRE", "big", "200"]), 1);
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "big"]), 0);
    assert_eq!(run::<i64>(&mut con, &["HLEN", "big"]), 0);
    assert_eq!(
        run::<Value>(&mut con, &["HGET", "big", "field:0000001"]),
        Value::Nil
    );
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    // Give the expiry cycle time to reap it, then look at the data family directly.
    wait_until("expiry cycle did not run", || {
        info_field(&mut con, "stats", "expired_keys") >= 1
    });
    drop(con);
    server.stop();
    assert_eq!(
        server.count_records(Cf::Data),
        0,
        "the big hash's elements are gone (the small one's field lives in its metadata)"
    );
    assert_eq!(server.count_records(Cf::Expire), 0);
}

#[test]
fn small_collections_live_in_their_metadata_until_they_grow() {
    let mut server = TestServer::start();
    let mut con = server.client();
    fill_hash(&mut con, "small", 10);
    run::<()>(&mut con, &["SADD", "ints", "1", "-2", "30"]);
    run::<()>(&mut con, &["SADD", "words", "a", "1"]);
    run::<()>(
        &mut con,
        &["ZADD", "scores", "2", "b", "-1.5", "a", "2", "c"],
    );
    run::<()>(&mut con, &["RPUSH", "queue", "a", "b", "c"]);
    // Past 128 elements, past 4 KiB, and past 128 in one command: records.
    fill_hash(&mut con, "many", 129);
    let long = "x".repeat(5000);
    run::<()>(&mut con, &["HSET", "long", "f", &long]);
    let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(members.iter().map(String::as_str));
    assert_eq!(run::<i64>(&mut con, &sadd), 200);
    // A sorted set that crosses over halfway through a command: its members and the score
    // index must both become records.
    let mut zadd = vec!["ZADD".to_string(), "ranked".to_string()];
    for i in 0..100 {
        zadd.extend([(i % 7).to_string(), format!("m{i:03}")]);
    }
    assert_eq!(run::<i64>(&mut con, &strs(&zadd)), 100);
    assert_eq!(
        run::<String>(&mut con, &["OBJECT", "ENCODING", "ranked"]),
        "listpack"
    );
    let mut zadd = vec!["ZADD".to_string(), "ranked".to_string()];
    for i in 100..130 {
        zadd.extend(["0".to_string(), format!("m{i:03}")]);
    }
    zadd.extend(["-1".to_string(), "m050".to_string()]);
    assert_eq!(run::<i64>(&mut con, &strs(&zadd)), 30);
    // A list packs chunks of elements, so it leaves the packed form by its bytes (4 KiB).
    let mut rpush = vec!["RPUSH".to_string(), "long_list".to_string()];
    rpush.extend((0..130).map(|i| format!("{i:040}")));
    assert_eq!(run::<i64>(&mut con, &strs(&rpush)), 130);
    for (key, encoding) in [
        ("small", "listpack"),
        ("ints", "intset"),
        ("words", "listpack"),
        ("scores", "listpack"),
        ("ranked", "skiplist"),
        ("queue", "listpack"),
        ("long_list", "quicklist"),
        ("many", "hashtable"),
        ("long", "hashtable"),
        ("big", "hashtable"),
    ] {
        assert_eq!(
            run::<String>(&mut con, &["OBJECT", "ENCODING", key]),
            encoding,
            "{key}"
        );
    }
    // Every field made it across the move to records, and reads see them in order.
    let all: Vec<String> = run(&mut con, &["HKEYS", "many"]);
    let expected: Vec<String> = (0..129).map(|i| format!("field:{i:07}")).collect();
    assert_eq!(all, expected);
    assert_eq!(run::<String>(&mut con, &["HGET", "long", "f"]), long);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "ranked", "0", "0"]),
        ["m050"]
    );
    // After m050 at -1: the 15 members of m000..m099 with score 0, then m100.
    assert_eq!(run::<i64>(&mut con, &["ZRANK", "ranked", "m100"]), 16);
    assert_eq!(run::<i64>(&mut con, &["ZCOUNT", "ranked", "0", "0"]), 45);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGE", "scores", "0", "-1", "WITHSCORES"]),
        ["a", "-1.5", "b", "2", "c", "2"]
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ZRANGEBYSCORE", "scores", "(-1.5", "+inf"]),
        ["b", "c"]
    );
    assert_eq!(run::<i64>(&mut con, &["ZREVRANK", "scores", "a"]), 2);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "long_list", "-3", "-1"]),
        [127, 128, 129].map(|i| format!("{i:040}"))
    );
    // A queue that packed pushes and pops go through, with the list commands that rewrite it.
    for round in 0..50 {
        run::<()>(&mut con, &["LPUSH", "queue", &round.to_string()]);
        run::<()>(&mut con, &["RPOP", "queue"]);
    }
    run::<()>(&mut con, &["LINSERT", "queue", "BEFORE", "49", "x"]);
    run::<()>(&mut con, &["LSET", "queue", "-1", "y"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "queue", "0", "-1"]),
        ["x", "49", "48", "y"]
    );
    assert_eq!(
        run::<String>(&mut con, &["LMOVE", "queue", "queue", "LEFT", "RIGHT"]),
        "x"
    );
    assert_eq!(run::<i64>(&mut con, &["LPOS", "queue", "x"]), 3);
    // A collection that moved to records stays there when it shrinks.
    let mut hdel = vec!["HDEL".to_string(), "many".to_string()];
    hdel.extend((1..129).map(|i| format!("field:{i:07}")));
    assert_eq!(
        run::<i64>(
            &mut con,
            &hdel.iter().map(String::as_str).collect::<Vec<_>>()
        ),
        128
    );
    assert_eq!(
        run::<String>(&mut con, &["OBJECT", "ENCODING", "many"]),
        "hashtable"
    );
    // Packed collections answer cursors, sampling and set algebra like the others.
    let mut cursor = 0u64;
    let mut seen = Vec::new();
    loop {
        let (next, page): (u64, Vec<String>) = run(
            &mut con,
            &["HSCAN", "small", &cursor.to_string(), "COUNT", "3"],
        );
        seen.extend(page.chunks(2).map(|pair| pair[0].clone()));
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    let fields: Vec<String> = (0..10).map(|i| format!("field:{i:07}")).collect();
    assert_eq!(seen, fields);
    let picked: Vec<String> = run(&mut con, &["SRANDMEMBER", "ints", "-7"]);
    assert_eq!(picked.len(), 7);
    assert!(picked
        .iter()
        .all(|m| ["1", "-2", "30"].contains(&m.as_str())));
    assert_eq!(
        run::<Vec<String>>(&mut con, &["SINTER", "words", "ints"]),
        ["1"]
    );
    assert_eq!(
        run::<i64>(&mut con, &["SUNIONSTORE", "union", "ints", "words"]),
        4
    );
    assert_eq!(
        run::<String>(&mut con, &["OBJECT", "ENCODING", "union"]),
        "listpack"
    );
    assert_eq!(run::<i64>(&mut con, &["COPY", "small", "copy"]), 1);
    assert_eq!(run::<i64>(&mut con, &["HLEN", "copy"]), 10);
    let popped: Vec<String> = run(&mut con, &["SPOP", "words", "5"]);
    assert_eq!(popped.len(), 2);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "words"]), 0);
    drop(con);

    server.stop();
    assert_eq!(
        server.count_records(Cf::Data),
        1 + 1 + 200 + 130 + 5,
        "records only for many, long, big, ranked and long_list (chunks of 32 elements)"
    );
    assert_eq!(server.count_records(Cf::Score), 130);
    server.start_again();
    let mut con = server.client();
    let small: HashMap<String, String> = run(&mut con, &["HGETALL", "small"]);
    assert_eq!(small.len(), 10);
    assert_eq!(small["field:0000007"], "7");
    assert_eq!(
        run::<String>(&mut con, &["OBJECT", "ENCODING", "ints"]),
        "intset"
    );
    assert_eq!(run::<i64>(&mut con, &["SISMEMBER", "ints", "-2"]), 1);
    assert_eq!(run::<f64>(&mut con, &["ZSCORE", "scores", "a"]), -1.5);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "queue", "0", "-1"]),
        ["49", "48", "y", "x"]
    );
    let keys = [
        "small",
        "ints",
        "many",
        "long",
        "big",
        "scores",
        "ranked",
        "queue",
        "long_list",
    ];
    let mut del = vec!["DEL"];
    del.extend(keys);
    assert_eq!(run::<i64>(&mut con, &del), 9);
    assert_eq!(
        run::<i64>(&mut con, &["DBSIZE"]),
        2,
        "union and copy are left"
    );
}
