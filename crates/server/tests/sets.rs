//! Set commands against a real server.

mod common;

use common::{fails, run, TestServer};
use redis::Value;

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn add_remove_members() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["SADD", "s", "a", "b", "a", "c"]), 3);
    assert_eq!(run::<i64>(&mut con, &["SADD", "s", "c", "d"]), 1);
    assert_eq!(run::<i64>(&mut con, &["SCARD", "s"]), 4);
    assert_eq!(run::<i64>(&mut con, &["SCARD", "nokey"]), 0);
    assert_eq!(
        sorted(run(&mut con, &["SMEMBERS", "s"])),
        ["a", "b", "c", "d"]
    );
    assert!(run::<Vec<String>>(&mut con, &["SMEMBERS", "nokey"]).is_empty());
    assert_eq!(run::<i64>(&mut con, &["SISMEMBER", "s", "a"]), 1);
    assert_eq!(run::<i64>(&mut con, &["SISMEMBER", "s", "z"]), 0);
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["SMISMEMBER", "s", "a", "z", "d"]),
        [1, 0, 1]
    );
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["SMISMEMBER", "nokey", "a"]),
        [0]
    );
    assert_eq!(run::<i64>(&mut con, &["SREM", "s", "a", "z", "a"]), 1);
    assert_eq!(run::<i64>(&mut con, &["SREM", "s", "b", "c", "d"]), 3);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "s"]), 0);
    assert_eq!(
        fails(&mut con, &["SADD", "s"]),
        "ERR wrong number of arguments for 'sadd' command"
    );
}

#[test]
fn spop_and_srandmember() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<Value>(&mut con, &["SPOP", "nokey"]), Value::Nil);
    assert_eq!(
        run::<Value>(&mut con, &["SRANDMEMBER", "nokey"]),
        Value::Nil
    );
    assert!(run::<Vec<String>>(&mut con, &["SRANDMEMBER", "nokey", "5"]).is_empty());
    run::<()>(&mut con, &["SADD", "s", "a", "b", "c", "d", "e"]);
    assert_eq!(
        sorted(run(&mut con, &["SRANDMEMBER", "s", "10"])),
        ["a", "b", "c", "d", "e"]
    );
    let three: Vec<String> = run(&mut con, &["SRANDMEMBER", "s", "3"]);
    assert_eq!(sorted(three.clone()).len(), 3);
    let mut dedup = sorted(three);
    dedup.dedup();
    assert_eq!(dedup.len(), 3, "positive counts are distinct");
    assert_eq!(
        run::<Vec<String>>(&mut con, &["SRANDMEMBER", "s", "-12"]).len(),
        12
    );
    assert_eq!(
        run::<i64>(&mut con, &["SCARD", "s"]),
        5,
        "SRANDMEMBER does not remove"
    );
    let popped: String = run(&mut con, &["SPOP", "s"]);
    assert_eq!(run::<i64>(&mut con, &["SISMEMBER", "s", &popped]), 0);
    let popped: Vec<String> = run(&mut con, &["SPOP", "s", "2"]);
    assert_eq!(popped.len(), 2);
    assert_eq!(run::<i64>(&mut con, &["SCARD", "s"]), 2);
    assert!(run::<Vec<String>>(&mut con, &["SPOP", "s", "0"]).is_empty());
    assert_eq!(run::<Vec<String>>(&mut con, &["SPOP", "s", "10"]).len(), 2);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "s"]), 0);
    assert_eq!(
        fails(&mut con, &["SPOP", "s", "-1"]),
        "ERR value is out of range, must be positive"
    );
}

#[test]
fn large_sets_sample_by_seeking() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big");
    for i in 0..3000 {
        cmd.arg(format!("m{i}"));
    }
    cmd.query::<()>(&mut con).unwrap();
    let picked: Vec<String> = run(&mut con, &["SRANDMEMBER", "big", "20"]);
    let mut distinct = sorted(picked);
    distinct.dedup();
    assert_eq!(distinct.len(), 20);
    let popped: Vec<String> = run(&mut con, &["SPOP", "big", "50"]);
    assert_eq!(popped.len(), 50);
    assert_eq!(run::<i64>(&mut con, &["SCARD", "big"]), 2950);
    for member in &popped {
        assert_eq!(run::<i64>(&mut con, &["SISMEMBER", "big", member]), 0);
    }
}

#[test]
fn popping_a_large_set_returns_every_member_once() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("big");
    for i in 0..2000 {
        cmd.arg(format!("m{i:05}"));
    }
    cmd.query::<()>(&mut con).unwrap();
    let mut popped = Vec::new();
    for round in 0..1000 {
        popped.push(run::<String>(&mut con, &["SPOP", "big"]));
        if round % 100 == 0 {
            // Members added among the popped ones must still come out.
            let late = format!("m{:05}late", round * 2);
            assert_eq!(run::<i64>(&mut con, &["SADD", "big", &late]), 1);
        }
    }
    popped.extend(run::<Vec<String>>(&mut con, &["SPOP", "big", "500"]));
    while let Some(member) = run::<Option<String>>(&mut con, &["SPOP", "big"]) {
        popped.push(member);
    }
    assert_eq!(popped.len(), 2010);
    let mut distinct = sorted(popped);
    distinct.dedup();
    assert_eq!(distinct.len(), 2010, "no member is popped twice");
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "big"]), 0);
}

#[test]
fn smove() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SADD", "a", "x", "y"]);
    assert_eq!(run::<i64>(&mut con, &["SMOVE", "a", "b", "x"]), 1);
    assert_eq!(run::<i64>(&mut con, &["SMOVE", "a", "b", "nope"]), 0);
    assert_eq!(run::<i64>(&mut con, &["SMOVE", "a", "a", "y"]), 1);
    assert_eq!(run::<Vec<String>>(&mut con, &["SMEMBERS", "b"]), ["x"]);
    run::<()>(&mut con, &["SADD", "b", "y"]);
    assert_eq!(
        run::<i64>(&mut con, &["SMOVE", "a", "b", "y"]),
        1,
        "already in the target"
    );
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "a"]), 0);
    assert_eq!(run::<i64>(&mut con, &["SCARD", "b"]), 2);
    run::<()>(&mut con, &["SET", "str", "v"]);
    assert_eq!(
        fails(&mut con, &["SMOVE", "b", "str", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(run::<i64>(&mut con, &["SCARD", "b"]), 2);
}

#[test]
fn algebra_and_store() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SADD", "k1", "a", "b", "c", "d"]);
    run::<()>(&mut con, &["SADD", "k2", "c"]);
    run::<()>(&mut con, &["SADD", "k3", "a", "c", "e"]);
    assert_eq!(sorted(run(&mut con, &["SINTER", "k1", "k2", "k3"])), ["c"]);
    assert!(run::<Vec<String>>(&mut con, &["SINTER", "k1", "nokey"]).is_empty());
    assert_eq!(
        sorted(run(&mut con, &["SUNION", "k1", "k2", "k3", "nokey"])),
        ["a", "b", "c", "d", "e"]
    );
    assert_eq!(
        sorted(run(&mut con, &["SDIFF", "k1", "k2", "k3"])),
        ["b", "d"]
    );
    assert!(run::<Vec<String>>(&mut con, &["SDIFF", "nokey", "k1"]).is_empty());
    assert_eq!(run::<i64>(&mut con, &["SINTERCARD", "2", "k1", "k3"]), 2);
    // Options are read in order, as Redis does: the last LIMIT counts, a bad one fails first.
    assert_eq!(
        run::<i64>(
            &mut con,
            &["SINTERCARD", "2", "k1", "k3", "LIMIT", "1", "LIMIT", "0"]
        ),
        2
    );
    assert_eq!(
        fails(
            &mut con,
            &["SINTERCARD", "2", "k1", "k3", "LIMIT", "-1", "0"]
        ),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(
        run::<i64>(&mut con, &["SINTERCARD", "2", "k1", "k3", "LIMIT", "1"]),
        1
    );
    assert_eq!(
        run::<i64>(&mut con, &["SINTERCARD", "2", "k1", "k3", "LIMIT", "0"]),
        2
    );
    assert_eq!(
        fails(&mut con, &["SINTERCARD", "0", "k1"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        fails(&mut con, &["SINTERCARD", "3", "k1"]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        fails(&mut con, &["SINTERCARD", "1", "k1", "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );

    assert_eq!(run::<i64>(&mut con, &["SINTERSTORE", "dst", "k1", "k3"]), 2);
    assert_eq!(sorted(run(&mut con, &["SMEMBERS", "dst"])), ["a", "c"]);
    assert_eq!(run::<i64>(&mut con, &["SUNIONSTORE", "dst", "k2", "k3"]), 3);
    assert_eq!(sorted(run(&mut con, &["SMEMBERS", "dst"])), ["a", "c", "e"]);
    assert_eq!(
        run::<i64>(&mut con, &["SDIFFSTORE", "k1", "k1", "k2"]),
        3,
        "destination may be a source"
    );
    assert_eq!(sorted(run(&mut con, &["SMEMBERS", "k1"])), ["a", "b", "d"]);
    run::<()>(&mut con, &["SET", "str", "v"]);
    assert_eq!(
        run::<i64>(&mut con, &["SUNIONSTORE", "str", "k2"]),
        1,
        "overwrites other types"
    );
    assert_eq!(run::<String>(&mut con, &["TYPE", "str"]), "set");
    assert_eq!(
        run::<i64>(&mut con, &["SINTERSTORE", "dst", "k2", "nokey"]),
        0
    );
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "dst"]),
        0,
        "an empty result deletes the destination"
    );
    run::<()>(&mut con, &["HSET", "h", "f", "v"]);
    assert_eq!(
        fails(&mut con, &["SUNION", "k2", "h"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn sscan_pages() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut cmd = redis::cmd("SADD");
    cmd.arg("s");
    for i in 0..120 {
        cmd.arg(format!("m{i}"));
    }
    cmd.query::<()>(&mut con).unwrap();
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, items): (String, Vec<String>) =
            run(&mut con, &["SSCAN", "s", &cursor, "COUNT", "7"]);
        seen.extend(items);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(sorted(seen).len(), 120);
    let (_, matched): (String, Vec<String>) = run(
        &mut con,
        &["SSCAN", "s", "0", "MATCH", "m1?", "COUNT", "200"],
    );
    assert_eq!(matched.len(), 10);
    // Redis reads the cursor, then looks the key up, then reads the options.
    assert_eq!(
        fails(&mut con, &["SSCAN", "s", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    for scan in ["SSCAN", "HSCAN", "ZSCAN"] {
        let (next, items): (String, Vec<String>) =
            run(&mut con, &[scan, "missing", "0", "COUNT", "x"]);
        assert_eq!((next.as_str(), items.len()), ("0", 0), "{scan}");
        assert_eq!(
            fails(&mut con, &[scan, "missing", "x", "COUNT", "x"]),
            "ERR invalid cursor"
        );
    }
}
