//! Hash commands against a real server.

mod common;

use std::collections::HashMap;

use common::{fails, run, TestServer};
use redis::Value;

#[test]
fn hset_hget_hdel_and_friends() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        run::<i64>(&mut con, &["HSET", "h", "a", "1", "b", "2", "a", "3"]),
        2
    );
    assert_eq!(run::<String>(&mut con, &["HGET", "h", "a"]), "3");
    assert_eq!(run::<Value>(&mut con, &["HGET", "h", "zz"]), Value::Nil);
    assert_eq!(run::<Value>(&mut con, &["HGET", "nokey", "a"]), Value::Nil);
    assert_eq!(
        run::<i64>(&mut con, &["HSET", "h", "b", "20", "c", "30"]),
        1
    );
    assert_eq!(run::<String>(&mut con, &["HMSET", "h", "d", "4"]), "OK");
    assert_eq!(run::<i64>(&mut con, &["HLEN", "h"]), 4);
    assert_eq!(run::<i64>(&mut con, &["HLEN", "nokey"]), 0);
    let all: HashMap<String, String> = run(&mut con, &["HGETALL", "h"]);
    assert_eq!(all.len(), 4);
    assert_eq!(all["b"], "20");
    assert_eq!(
        run::<Vec<String>>(&mut con, &["HKEYS", "h"]),
        ["a", "b", "c", "d"]
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["HVALS", "h"]),
        ["3", "20", "30", "4"]
    );
    let got: Vec<Option<String>> = run(&mut con, &["HMGET", "h", "a", "zz", "d"]);
    assert_eq!(got, vec![Some("3".into()), None, Some("4".into())]);
    assert_eq!(
        run::<Vec<Option<String>>>(&mut con, &["HMGET", "nokey", "a"]),
        vec![None]
    );
    assert_eq!(run::<i64>(&mut con, &["HEXISTS", "h", "a"]), 1);
    assert_eq!(run::<i64>(&mut con, &["HEXISTS", "h", "zz"]), 0);
    assert_eq!(run::<i64>(&mut con, &["HSTRLEN", "h", "c"]), 2);
    assert_eq!(run::<i64>(&mut con, &["HSTRLEN", "h", "zz"]), 0);
    assert_eq!(run::<i64>(&mut con, &["HSETNX", "h", "a", "x"]), 0);
    assert_eq!(run::<i64>(&mut con, &["HSETNX", "h", "e", "5"]), 1);
    assert_eq!(run::<i64>(&mut con, &["HDEL", "h", "a", "a", "zz", "b"]), 2);
    assert_eq!(run::<i64>(&mut con, &["HDEL", "h", "c", "d", "e"]), 3);
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "h"]),
        0,
        "an emptied hash disappears"
    );
    assert_eq!(run::<i64>(&mut con, &["HDEL", "h", "a"]), 0);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 0);

    assert_eq!(
        fails(&mut con, &["HSET", "h", "a"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        fails(&mut con, &["HSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        fails(&mut con, &["HMSET", "h", "a", "1", "b"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
}

#[test]
fn counters_in_hashes() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["HINCRBY", "h", "n", "5"]), 5);
    assert_eq!(run::<i64>(&mut con, &["HINCRBY", "h", "n", "-7"]), -2);
    assert_eq!(
        fails(&mut con, &["HINCRBY", "h", "n", "x"]),
        "ERR value is not an integer or out of range"
    );
    run::<()>(
        &mut con,
        &["HSET", "h", "s", "abc", "big", "9223372036854775807"],
    );
    assert_eq!(
        fails(&mut con, &["HINCRBY", "h", "s", "1"]),
        "ERR hash value is not an integer"
    );
    assert_eq!(
        fails(&mut con, &["HINCRBY", "h", "big", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        run::<String>(&mut con, &["HINCRBYFLOAT", "h", "f", "10.5"]),
        "10.5"
    );
    assert_eq!(
        run::<String>(&mut con, &["HINCRBYFLOAT", "h", "f", "0.1"]),
        "10.6"
    );
    assert_eq!(
        fails(&mut con, &["HINCRBYFLOAT", "h", "s", "1"]),
        "ERR hash value is not a float"
    );
    assert_eq!(
        fails(&mut con, &["HINCRBYFLOAT", "h", "f", "x"]),
        "ERR value is not a valid float"
    );
    for infinite in ["inf", "-Infinity"] {
        assert_eq!(
            fails(&mut con, &["HINCRBYFLOAT", "h", "f", infinite]),
            "ERR value is NaN or Infinity"
        );
    }
    assert_eq!(run::<i64>(&mut con, &["HLEN", "h"]), 4);
}

#[test]
fn hrandfield_counts() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<Value>(&mut con, &["HRANDFIELD", "nokey"]), Value::Nil);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["HRANDFIELD", "nokey", "3"]),
        Vec::<String>::new()
    );
    assert_eq!(
        fails(
            &mut con,
            &["HRANDFIELD", "nokey", "9223372036854775807", "WITHVALUES"]
        ),
        "ERR value is out of range",
        "twice the count would overflow, as Redis checks"
    );
    assert_eq!(
        fails(&mut con, &["HRANDFIELD", "nokey", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    run::<()>(&mut con, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let one: String = run(&mut con, &["HRANDFIELD", "h"]);
    assert!(["a", "b", "c"].contains(&one.as_str()));
    let mut distinct: Vec<String> = run(&mut con, &["HRANDFIELD", "h", "10"]);
    distinct.sort();
    assert_eq!(distinct, ["a", "b", "c"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["HRANDFIELD", "h", "2"]).len(),
        2
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["HRANDFIELD", "h", "0"]).len(),
        0
    );
    let repeated: Vec<String> = run(&mut con, &["HRANDFIELD", "h", "-7"]);
    assert_eq!(repeated.len(), 7);
    let with_values: Vec<String> = run(&mut con, &["HRANDFIELD", "h", "2", "WITHVALUES"]);
    assert_eq!(with_values.len(), 4);
    for pair in with_values.chunks(2) {
        assert_eq!(pair[1], (pair[0].as_bytes()[0] - b'a' + 1).to_string());
    }
    assert_eq!(
        fails(&mut con, &["HRANDFIELD", "h", "1", "BOGUS"]),
        "ERR syntax error"
    );
}

#[test]
fn hscan_pages_through_everything() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut cmd = redis::cmd("HSET");
    cmd.arg("h");
    for i in 0..250 {
        cmd.arg(format!("f{i:03}")).arg(i);
    }
    cmd.query::<()>(&mut con).unwrap();
    let mut seen = HashMap::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, items): (String, Vec<String>) =
            run(&mut con, &["HSCAN", "h", &cursor, "COUNT", "20"]);
        for pair in items.chunks(2) {
            seen.insert(pair[0].clone(), pair[1].clone());
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 250);
    assert_eq!(seen["f042"], "42");
    let (_, matched): (String, Vec<String>) = run(
        &mut con,
        &["HSCAN", "h", "0", "MATCH", "f00*", "COUNT", "1000"],
    );
    assert_eq!(matched.len(), 20);
    let (cursor, empty): (String, Vec<String>) = run(&mut con, &["HSCAN", "nokey", "0"]);
    assert_eq!((cursor.as_str(), empty.len()), ("0", 0));
}

#[test]
fn wrongtype_everywhere() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "str", "v"]);
    run::<()>(&mut con, &["HSET", "hash", "f", "v"]);
    const WRONG: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["HGET", "str", "f"][..],
        &["HSET", "str", "f", "v"],
        &["HGETALL", "str"],
        &["HDEL", "str", "f"],
        &["HLEN", "str"],
        &["HINCRBY", "str", "f", "1"],
        &["HSCAN", "str", "0"],
        &["GET", "hash"],
        &["INCR", "hash"],
        &["APPEND", "hash", "x"],
        &["LPUSH", "hash", "x"],
        &["SADD", "hash", "x"],
        &["ZADD", "hash", "1", "x"],
        &["LRANGE", "hash", "0", "-1"],
        &["SMEMBERS", "hash"],
        &["ZRANGE", "hash", "0", "-1"],
    ] {
        assert_eq!(fails(&mut con, args), WRONG, "{args:?}");
    }
    let values: Vec<Option<String>> = run(&mut con, &["MGET", "str", "hash"]);
    assert_eq!(
        values,
        vec![Some("v".into()), None],
        "MGET reads other types as nil"
    );
    // SET overwrites any type, and the old elements go with it.
    run::<()>(&mut con, &["SET", "hash", "now a string"]);
    assert_eq!(run::<String>(&mut con, &["TYPE", "hash"]), "string");
    run::<()>(&mut con, &["DEL", "hash"]);
    run::<()>(&mut con, &["HSET", "hash", "other", "1"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["HKEYS", "hash"]),
        ["other"],
        "no old fields come back"
    );
}
