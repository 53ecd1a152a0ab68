//! SORT and SORT_RO against a real server, checked against redis-server 7.0's replies.

mod common;

use common::{fails, run, TestServer};
use redis::Value;

fn sorted(con: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    run(con, args)
}

#[test]
fn sorts_numbers_and_strings_with_limits() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["RPUSH", "l", "3", " 2", "", "1", "0x10", "2.5"]);
    // Values read as strtod reads them: leading spaces, hex, and "" as 0.
    assert_eq!(
        sorted(&mut con, &["SORT", "l"]),
        ["", "1", " 2", "2.5", "3", "0x10"]
    );
    assert_eq!(
        sorted(&mut con, &["SORT", "l", "DESC", "LIMIT", "1", "2"]),
        ["3", "2.5"]
    );
    assert_eq!(
        sorted(&mut con, &["SORT_RO", "l", "ALPHA", "LIMIT", "-5", "3"]),
        ["", " 2", "0x10"]
    );
    assert!(sorted(&mut con, &["SORT", "l", "LIMIT", "9", "1"]).is_empty());
    assert!(sorted(&mut con, &["SORT", "nokey"]).is_empty());

    run::<()>(&mut con, &["SADD", "s", "b", "a", "C"]);
    assert_eq!(sorted(&mut con, &["SORT", "s", "ALPHA"]), ["C", "a", "b"]);
    assert_eq!(
        fails(&mut con, &["SORT", "s"]),
        "ERR One or more scores can't be converted into double"
    );
    run::<()>(&mut con, &["RPUSH", "big", "1e400"]);
    assert_eq!(
        fails(&mut con, &["SORT", "big"]),
        "ERR One or more scores can't be converted into double"
    );
}

#[test]
fn by_and_get_read_other_keys() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["RPUSH", "ids", "1", "2", "3"]);
    run::<()>(
        &mut con,
        &[
            "MSET", "w_1", "30", "w_2", "10", "w_3", "20", "name_1", "one",
        ],
    );
    run::<()>(&mut con, &["HSET", "user_2", "age", "7"]);
    run::<()>(&mut con, &["HSET", "user_3", "age", "5"]);
    assert_eq!(
        sorted(&mut con, &["SORT", "ids", "BY", "w_*"]),
        ["2", "3", "1"]
    );
    // Missing BY values sort as 0; hash fields through `->`.
    assert_eq!(
        sorted(&mut con, &["SORT", "ids", "BY", "user_*->age", "DESC"]),
        ["2", "3", "1"]
    );
    let values: Vec<Value> = run(
        &mut con,
        &[
            "SORT",
            "ids",
            "BY",
            "w_*",
            "GET",
            "#",
            "GET",
            "name_*",
            "GET",
            "user_*->age",
        ],
    );
    let text = |v: &str| Value::BulkString(v.as_bytes().to_vec());
    assert_eq!(
        values,
        [
            text("2"),
            Value::Nil,
            text("7"),
            text("3"),
            Value::Nil,
            text("5"),
            text("1"),
            text("one"),
            Value::Nil
        ]
    );
    // A BY pattern without `*` leaves the stored order, which DESC reverses for lists and
    // sorted sets.
    assert_eq!(
        sorted(
            &mut con,
            &["SORT", "ids", "BY", "nosort", "DESC", "LIMIT", "0", "2"]
        ),
        ["3", "2"]
    );
    run::<()>(&mut con, &["ZADD", "z", "1", "c", "2", "a", "3", "b"]);
    assert_eq!(
        sorted(&mut con, &["SORT", "z", "BY", "nosort"]),
        ["c", "a", "b"]
    );
    assert_eq!(
        sorted(&mut con, &["SORT", "z", "BY", "nosort", "DESC"]),
        ["b", "a", "c"]
    );
}

#[test]
fn store_replaces_the_destination_with_a_list() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SADD", "s", "3", "1", "2"]);
    run::<()>(&mut con, &["SET", "dst", "old string"]);
    assert_eq!(
        run::<i64>(&mut con, &["SORT", "s", "DESC", "STORE", "dst"]),
        3
    );
    assert_eq!(run::<String>(&mut con, &["TYPE", "dst"]), "list");
    assert_eq!(
        sorted(&mut con, &["LRANGE", "dst", "0", "-1"]),
        ["3", "2", "1"]
    );
    assert_eq!(run::<i64>(&mut con, &["RPUSH", "dst", "0"]), 4);
    // Missing GET values are stored as empty strings; an empty result deletes the key.
    assert_eq!(
        run::<i64>(&mut con, &["SORT", "s", "GET", "nope_*", "STORE", "dst"]),
        3
    );
    assert_eq!(
        sorted(&mut con, &["LRANGE", "dst", "0", "-1"]),
        ["", "", ""]
    );
    assert_eq!(run::<i64>(&mut con, &["SORT", "nokey", "STORE", "dst"]), 0);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "dst"]), 0);
}

#[test]
fn errors_follow_redis() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["HSET", "h", "f", "v"]);
    // Options are read before the key is looked up.
    assert_eq!(fails(&mut con, &["SORT", "h", "foo"]), "ERR syntax error");
    assert_eq!(
        fails(&mut con, &["SORT", "h"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        fails(&mut con, &["SORT", "l", "LIMIT", "1", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["SORT", "l", "LIMIT", "1"]),
        "ERR syntax error"
    );
    assert_eq!(fails(&mut con, &["SORT", "l", "GET"]), "ERR syntax error");
    assert_eq!(
        fails(&mut con, &["SORT_RO", "l", "STORE", "x"]),
        "ERR syntax error"
    );
}

#[test]
fn transactions_and_scripts_sort_as_redis_does() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SADD", "s", "b", "c", "a"]);
    run::<()>(&mut con, &["RPUSH", "l", "3", "1", "2"]);
    run::<()>(&mut con, &["MSET", "w_1", "9", "w_2", "8", "w_3", "7"]);
    // STORE's destination is a key the transaction declares.
    let stored: Vec<i64> = redis::pipe()
        .atomic()
        .cmd("SORT")
        .arg("l")
        .arg("STORE")
        .arg("dst")
        .query(&mut con)
        .unwrap();
    assert_eq!(stored, [3]);
    assert_eq!(
        sorted(&mut con, &["LRANGE", "dst", "0", "-1"]),
        ["1", "2", "3"]
    );
    // In a script a set is sorted even by BY nosort, so the result does not depend on it.
    let script = "return redis.call('SORT', KEYS[1], 'BY', 'nosort', 'DESC')";
    assert_eq!(
        sorted(&mut con, &["EVAL", script, "1", "s"]),
        ["c", "b", "a"]
    );
    // A BY without `*` turns sorting off even if another BY follows.
    assert_eq!(
        sorted(&mut con, &["SORT", "l", "BY", "nosort", "BY", "w_*"]),
        ["3", "1", "2"]
    );
}
