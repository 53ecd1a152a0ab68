//! Generic key commands against a real server.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{
    data_cache_misses_during, exec_ping, fails, info_field, run, wait_for_blocked, wait_until,
    TestServer,
};
use redis::Value;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn del_exists_type_touch() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "a", "a", "b", "zz"]), 3);
    assert_eq!(run::<String>(&mut con, &["TYPE", "a"]), "string");
    assert_eq!(run::<String>(&mut con, &["TYPE", "zz"]), "none");
    assert_eq!(run::<i64>(&mut con, &["TOUCH", "a", "zz"]), 1);
    assert_eq!(run::<i64>(&mut con, &["DEL", "a", "a", "zz"]), 1);
    assert_eq!(run::<i64>(&mut con, &["UNLINK", "b", "c"]), 2);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 0);
    assert_eq!(
        fails(&mut con, &["DEL"]),
        "ERR wrong number of arguments for 'del' command"
    );
}

#[test]
fn expire_family_and_conditions() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "missing", "10"]), 0);
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(
        run::<i64>(&mut con, &["EXPIRE", "k", "100", "GT"]),
        0,
        "no TTL counts as infinite"
    );
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "k", "50", "NX"]), 0);
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "k", "150", "XX", "LT"]), 1);
    assert_eq!(run::<i64>(&mut con, &["TTL", "k"]), 150);
    // Redis reads the options before the time.
    assert_eq!(
        fails(&mut con, &["EXPIRE", "k", "1.5", "NX", "LT"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        fails(&mut con, &["EXPIRE", "k", "x", "foo"]),
        "ERR Unsupported option foo"
    );
    assert_eq!(
        fails(&mut con, &["EXPIRE", "k", "10", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    assert_eq!(
        fails(&mut con, &["EXPIRE", "k", "10", "GT", "LT"]),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(
        fails(&mut con, &["EXPIRE", "k", "10", "FOO"]),
        "ERR Unsupported option FOO"
    );
    assert_eq!(
        fails(&mut con, &["EXPIRE", "k", "ten"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["EXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expire' command"
    );

    assert_eq!(run::<i64>(&mut con, &["PEXPIRE", "k", "100000"]), 1);
    let pttl: i64 = run(&mut con, &["PTTL", "k"]);
    assert!(pttl > 99_000 && pttl <= 100_000);
    let at = now_secs() + 500;
    assert_eq!(run::<i64>(&mut con, &["EXPIREAT", "k", &at.to_string()]), 1);
    assert_eq!(run::<u64>(&mut con, &["EXPIRETIME", "k"]), at);
    assert_eq!(run::<u64>(&mut con, &["PEXPIRETIME", "k"]), at * 1000);
    assert_eq!(
        run::<i64>(&mut con, &["PEXPIREAT", "k", &(at * 1000 + 5).to_string()]),
        1
    );
    assert_eq!(run::<u64>(&mut con, &["PEXPIRETIME", "k"]), at * 1000 + 5);
    assert_eq!(run::<i64>(&mut con, &["PERSIST", "k"]), 1);
    assert_eq!(run::<i64>(&mut con, &["PERSIST", "k"]), 0);
    assert_eq!(run::<i64>(&mut con, &["TTL", "k"]), -1);
    assert_eq!(run::<i64>(&mut con, &["EXPIRETIME", "k"]), -1);
    assert_eq!(run::<i64>(&mut con, &["EXPIRETIME", "nokey"]), -2);
    assert_eq!(run::<i64>(&mut con, &["PTTL", "nokey"]), -2);

    // A time in the past deletes the key.
    assert_eq!(run::<i64>(&mut con, &["EXPIRE", "k", "-1"]), 1);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "k"]), 0);
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(&mut con, &["PEXPIREAT", "k", "1"]), 1);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "k"]), 0);
}

#[test]
fn expired_keys_vanish_everywhere() {
    let server = TestServer::start();
    let mut con = server.client();
    for i in 0..50 {
        run::<()>(&mut con, &["SET", &format!("tmp:{i}"), "v", "PX", "100"]);
    }
    run::<()>(&mut con, &["SET", "keep", "v"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 51);
    std::thread::sleep(Duration::from_millis(150));
    // Visible state flips at the expiry, whether or not the reaper ran.
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["KEYS", "*"]),
        vec!["keep".to_string()]
    );
    let page: (String, Vec<String>) = run(&mut con, &["SCAN", "0", "COUNT", "1000"]);
    assert_eq!(page.1, vec!["keep".to_string()]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "tmp:1"]), 0);
    // The expiry cycle removes them from disk and counts them.
    wait_until("expiry cycle did not run", || {
        info_field(&mut con, "stats", "expired_keys") >= 50
    });
    assert_eq!(info_field(&mut con, "stats", "expired_keys"), 50);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    let keyspace: String = run(&mut con, &["INFO", "keyspace"]);
    assert!(keyspace.contains("db0:keys=1,expires=0"), "{keyspace}");
}

#[test]
fn rename_and_renamenx() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        fails(&mut con, &["RENAME", "nokey", "x"]),
        "ERR no such key"
    );
    assert_eq!(
        fails(&mut con, &["RENAMENX", "nokey", "x"]),
        "ERR no such key"
    );
    run::<()>(&mut con, &["SET", "a", "1", "EX", "100"]);
    run::<()>(&mut con, &["SET", "b", "2"]);
    assert_eq!(run::<String>(&mut con, &["RENAME", "a", "c"]), "OK");
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "a"]), 0);
    assert_eq!(run::<String>(&mut con, &["GET", "c"]), "1");
    assert!(
        run::<i64>(&mut con, &["TTL", "c"]) > 90,
        "TTL moves with the key"
    );
    assert_eq!(run::<i64>(&mut con, &["RENAMENX", "c", "b"]), 0);
    assert_eq!(run::<String>(&mut con, &["RENAME", "c", "b"]), "OK");
    assert_eq!(run::<String>(&mut con, &["GET", "b"]), "1");
    assert_eq!(run::<String>(&mut con, &["RENAME", "b", "b"]), "OK");
    assert_eq!(run::<i64>(&mut con, &["RENAMENX", "b", "b"]), 0);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    assert_eq!(run::<i64>(&mut con, &["RENAMENX", "b", "d"]), 1);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
}

#[test]
fn copy_and_move_between_databases() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "src", "v", "EX", "100"]);
    assert_eq!(run::<i64>(&mut con, &["COPY", "src", "dst"]), 1);
    assert_eq!(run::<String>(&mut con, &["GET", "dst"]), "v");
    assert!(run::<i64>(&mut con, &["TTL", "dst"]) > 90);
    run::<()>(&mut con, &["SET", "src", "w"]);
    assert_eq!(run::<i64>(&mut con, &["COPY", "src", "dst"]), 0);
    assert_eq!(run::<i64>(&mut con, &["COPY", "src", "dst", "REPLACE"]), 1);
    assert_eq!(run::<String>(&mut con, &["GET", "dst"]), "w");
    assert_eq!(run::<i64>(&mut con, &["COPY", "nokey", "x"]), 0);
    assert_eq!(run::<i64>(&mut con, &["COPY", "src", "src", "DB", "3"]), 1);
    assert_eq!(
        fails(&mut con, &["COPY", "src", "src"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        fails(&mut con, &["COPY", "src", "x", "DB", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        fails(&mut con, &["COPY", "src", "x", "BOGUS"]),
        "ERR syntax error"
    );

    assert_eq!(run::<i64>(&mut con, &["MOVE", "src", "1"]), 1);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "src"]), 0);
    run::<()>(&mut con, &["SET", "src", "again"]);
    assert_eq!(
        run::<i64>(&mut con, &["MOVE", "src", "1"]),
        0,
        "exists in the target"
    );
    assert_eq!(run::<i64>(&mut con, &["MOVE", "nokey", "1"]), 0);
    assert_eq!(
        fails(&mut con, &["MOVE", "src", "0"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(
        fails(&mut con, &["MOVE", "src", "99"]),
        "ERR DB index is out of range"
    );

    run::<()>(&mut con, &["SELECT", "1"]);
    assert_eq!(run::<String>(&mut con, &["GET", "src"]), "w");
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    run::<()>(&mut con, &["SELECT", "3"]);
    assert_eq!(run::<String>(&mut con, &["GET", "src"]), "w");
}

#[test]
fn select_isolates_databases() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "db0"]);
    run::<()>(&mut con, &["SELECT", "5"]);
    assert_eq!(run::<Value>(&mut con, &["GET", "k"]), Value::Nil);
    run::<()>(&mut con, &["SET", "k", "db5"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    run::<()>(&mut con, &["FLUSHDB"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 0);
    run::<()>(&mut con, &["SELECT", "0"]);
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "db0");
    assert_eq!(
        fails(&mut con, &["SELECT", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        fails(&mut con, &["SELECT", "-1"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        fails(&mut con, &["SELECT", "x"]),
        "ERR value is not an integer or out of range"
    );
    run::<()>(&mut con, &["SELECT", "2"]);
    run::<()>(&mut con, &["SET", "other", "v"]);
    run::<()>(&mut con, &["FLUSHALL", "SYNC"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 0);
    run::<()>(&mut con, &["SELECT", "0"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 0);
    assert_eq!(fails(&mut con, &["FLUSHALL", "LATER"]), "ERR syntax error");
    run::<()>(&mut con, &["SET", "after", "flush"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
}

#[test]
fn keys_scan_randomkey() {
    let server = TestServer::start();
    let mut con = server.client();
    for i in 0..300 {
        run::<()>(&mut con, &["SET", &format!("user:{i}"), "v"]);
    }
    run::<()>(&mut con, &["SET", "other", "v"]);
    let mut keys: Vec<String> = run(&mut con, &["KEYS", "user:1?"]);
    keys.sort();
    assert_eq!(
        keys,
        (10..20).map(|i| format!("user:{i}")).collect::<Vec<_>>()
    );
    assert_eq!(run::<Vec<String>>(&mut con, &["KEYS", "*"]).len(), 301);

    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut pages = 0;
    loop {
        let (next, batch): (String, Vec<String>) = run(
            &mut con,
            &["SCAN", &cursor, "MATCH", "user:*", "COUNT", "25"],
        );
        assert!(batch.len() <= 25);
        seen.extend(batch);
        pages += 1;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    assert_eq!(seen.len(), 300);
    assert!(pages >= 12);
    let (_, strings): (String, Vec<String>) =
        run(&mut con, &["SCAN", "0", "COUNT", "1000", "TYPE", "string"]);
    assert_eq!(strings.len(), 301);
    let (_, hashes): (String, Vec<String>) =
        run(&mut con, &["SCAN", "0", "COUNT", "1000", "TYPE", "hash"]);
    assert!(hashes.is_empty());
    assert_eq!(fails(&mut con, &["SCAN", "abc"]), "ERR invalid cursor");
    assert_eq!(fails(&mut con, &["SCAN", "--1"]), "ERR invalid cursor");
    let (_, first_page): (String, Vec<String>) = run(&mut con, &["SCAN", ""]);
    assert!(
        !first_page.is_empty(),
        "an empty cursor is 0, as strtoul reads it"
    );
    assert_eq!(
        fails(&mut con, &["SCAN", "0", "COUNT", "-1"]),
        "ERR syntax error"
    );
    // strtoul's wrap-around, as Redis reads cursors: -1 is a cursor, if not one we gave out.
    let (next, _): (String, Vec<String>) = run(&mut con, &["SCAN", "-1"]);
    assert!(next.parse::<u64>().is_ok(), "a page, not an error: {next}");
    assert_eq!(
        fails(&mut con, &["SCAN", "0", "COUNT", "0"]),
        "ERR syntax error"
    );
    assert_eq!(fails(&mut con, &["SCAN", "0", "MATCH"]), "ERR syntax error");

    let random: String = run(&mut con, &["RANDOMKEY"]);
    assert!(random.starts_with("user:") || random == "other");
    run::<()>(&mut con, &["FLUSHDB"]);
    assert_eq!(run::<Value>(&mut con, &["RANDOMKEY"]), Value::Nil);
}

#[test]
fn object_encoding() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "n", "12345"]);
    run::<()>(&mut con, &["SET", "s", "short"]);
    run::<()>(&mut con, &["SET", "l", &"x".repeat(100)]);
    assert_eq!(run::<String>(&mut con, &["OBJECT", "ENCODING", "n"]), "int");
    assert_eq!(
        run::<String>(&mut con, &["OBJECT", "ENCODING", "s"]),
        "embstr"
    );
    assert_eq!(run::<String>(&mut con, &["OBJECT", "ENCODING", "l"]), "raw");
    assert_eq!(
        run::<Value>(&mut con, &["OBJECT", "ENCODING", "none"]),
        Value::Nil
    );
    assert_eq!(
        fails(&mut con, &["OBJECT", "FOO", "n"]),
        "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
    );
}

/// DEBUG OBJECT in Redis's format, and DEBUG SLEEP's reply. (DEBUG DIGEST is compared with
/// Redis's in scripts/compare/digest.txt.)
#[test]
fn debug_object_and_sleep() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["RPUSH", "l", "a", "b"]);
    let line: String = run(&mut con, &["DEBUG", "OBJECT", "l"]);
    assert!(line.starts_with("Value at:"), "{line}");
    assert!(
        line.contains(" refcount:1 encoding:listpack serializedlength:"),
        "{line}"
    );
    assert!(line.contains(" lru_seconds_idle:"), "{line}");
    assert_eq!(
        fails(&mut con, &["DEBUG", "OBJECT", "none"]),
        "ERR no such key"
    );

    assert_eq!(run::<String>(&mut con, &["DEBUG", "SLEEP", "0.01"]), "OK");
    assert_eq!(
        run::<String>(&mut con, &["DEBUG", "SLEEP", "nonsense"]),
        "OK"
    );
}

/// Deleting or replacing a collection too large for point deletes range-deletes its records,
/// which no read asks for again: the data cache keeps the records of other keys.
#[test]
fn deleting_a_large_collection_keeps_other_keys_cached() {
    let server = TestServer::start();
    let mut con = server.client();
    let value = "v".repeat(100);
    for i in 0..200 {
        run::<i64>(&mut con, &["HSET", "kept", &format!("f{i}"), &value]);
    }
    assert_eq!(run::<String>(&mut con, &["HGET", "kept", "f7"]), value);
    for round in 0..3 {
        for i in 0..200 {
            run::<i64>(&mut con, &["SADD", "gone", &format!("m{round}:{i}")]);
            run::<i64>(&mut con, &["RPUSH", "replaced", &format!("{i:0200}")]);
        }
        assert_eq!(run::<i64>(&mut con, &["DEL", "gone"]), 1);
        run::<()>(&mut con, &["SET", "replaced", "a string now"]);
        let (read, misses) =
            data_cache_misses_during(&mut con, |c| run::<String>(c, &["HGET", "kept", "f7"]));
        assert_eq!(read, value);
        assert_eq!(misses, 0, "round {round}: kept's field is still cached");
        assert_eq!(run::<i64>(&mut con, &["EXISTS", "gone"]), 0);
        run::<i64>(&mut con, &["DEL", "replaced"]);
    }
}

#[test]
fn object_refcount_idletime_and_help() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "small", "42"]);
    run::<()>(&mut con, &["SET", "large", "123456"]);
    run::<()>(&mut con, &["SET", "text", "hello"]);
    run::<()>(&mut con, &["RPUSH", "list", "a"]);
    let refcount = |con: &mut redis::Connection, key: &str| -> Option<i64> {
        run(con, &["OBJECT", "REFCOUNT", key])
    };
    // Redis shares the integers below 10000.
    assert_eq!(refcount(&mut con, "small"), Some(2147483647));
    assert_eq!(refcount(&mut con, "large"), Some(1));
    assert_eq!(refcount(&mut con, "text"), Some(1));
    assert_eq!(refcount(&mut con, "list"), Some(1));
    assert_eq!(refcount(&mut con, "missing"), None);

    let idle = |con: &mut redis::Connection, key: &str| -> Option<i64> {
        run(con, &["OBJECT", "IDLETIME", key])
    };
    assert_eq!(idle(&mut con, "missing"), None);
    std::thread::sleep(Duration::from_millis(2100));
    // TYPE, EXISTS, TTL and OBJECT look without touching, as in Redis.
    run::<String>(&mut con, &["TYPE", "text"]);
    run::<i64>(&mut con, &["EXISTS", "text"]);
    run::<i64>(&mut con, &["TTL", "text"]);
    assert!(
        idle(&mut con, "text").unwrap() >= 2,
        "untouched by TYPE, EXISTS, TTL"
    );
    run::<String>(&mut con, &["GET", "text"]);
    assert!(idle(&mut con, "text").unwrap() <= 1, "a read touches");
    run::<i64>(&mut con, &["RPUSH", "list", "b"]);
    assert!(idle(&mut con, "list").unwrap() <= 1, "a write touches");
    assert!(idle(&mut con, "small").unwrap() >= 2);

    let help: Vec<String> = run(&mut con, &["OBJECT", "HELP"]);
    assert_eq!(help.len(), 15, "{help:?}");
    assert!(help.contains(&"IDLETIME <key>".to_string()));
    assert!(help.contains(&"REFCOUNT <key>".to_string()));
}

#[test]
fn swapdb_exchanges_databases_and_survives_a_restart() {
    let mut server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "in0", "zero"]);
    run::<()>(&mut con, &["HSET", "h", "f", "0"]);
    run::<()>(&mut con, &["SELECT", "1"]);
    run::<()>(&mut con, &["SET", "in1", "one"]);
    run::<()>(&mut con, &["RPUSH", "h", "1"]);
    run::<()>(&mut con, &["SWAPDB", "0", "1"]);
    // The connection stays on database 1, which now holds database 0's keys.
    assert_eq!(
        run::<Option<String>>(&mut con, &["GET", "in0"]),
        Some("zero".into())
    );
    assert_eq!(run::<Option<String>>(&mut con, &["GET", "in1"]), None);
    assert_eq!(run::<String>(&mut con, &["TYPE", "h"]), "hash");
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 2);
    run::<()>(&mut con, &["SET", "later", "x"]);
    run::<()>(&mut con, &["SELECT", "0"]);
    assert_eq!(run::<String>(&mut con, &["GET", "in1"]), "one");
    assert_eq!(run::<String>(&mut con, &["TYPE", "h"]), "list");
    let keyspace: String = run(&mut con, &["INFO", "keyspace"]);
    assert!(keyspace.contains("db0:keys=2,"), "{keyspace}");
    assert!(keyspace.contains("db1:keys=3,"), "{keyspace}");
    // MOVE, COPY and SWAPDB inside MULTI see the swapped databases.
    assert_eq!(run::<i64>(&mut con, &["MOVE", "in1", "1"]), 1);
    let (swapped, read): (String, Option<String>) = redis::pipe()
        .atomic()
        .cmd("SWAPDB")
        .arg(1)
        .arg(0)
        .cmd("GET")
        .arg("in1")
        .query(&mut con)
        .unwrap();
    assert_eq!((swapped.as_str(), read.as_deref()), ("OK", Some("one")));

    server.restart();
    let mut con = server.client();
    assert_eq!(run::<String>(&mut con, &["GET", "in0"]), "zero");
    assert_eq!(run::<String>(&mut con, &["GET", "later"]), "x");
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 4);
    run::<()>(&mut con, &["SELECT", "1"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    assert_eq!(run::<String>(&mut con, &["TYPE", "h"]), "list");
    run::<()>(&mut con, &["FLUSHDB"]);
    run::<()>(&mut con, &["SELECT", "0"]);
    assert_eq!(
        run::<i64>(&mut con, &["DBSIZE"]),
        4,
        "FLUSHDB emptied the other one"
    );

    assert_eq!(
        fails(&mut con, &["SWAPDB", "0", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        fails(&mut con, &["SWAPDB", "-1", "0"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        fails(&mut con, &["SWAPDB", "a", "1"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        fails(&mut con, &["SWAPDB", "0", "b"]),
        "ERR invalid second DB index"
    );
    assert_eq!(run::<String>(&mut con, &["SWAPDB", "2", "2"]), "OK");
}

#[test]
fn swapdb_serves_blocked_clients_and_touches_watched_keys_that_exist() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut blocked = server.client();
    let waiter =
        std::thread::spawn(move || -> Vec<String> { run(&mut blocked, &["BLPOP", "queue", "10"]) });
    wait_for_blocked(&mut con, 1);
    run::<()>(&mut con, &["SELECT", "1"]);
    run::<()>(&mut con, &["RPUSH", "queue", "job"]);
    run::<()>(&mut con, &["SET", "elsewhere", "1"]);
    let mut watcher = server.client();
    run::<()>(&mut watcher, &["WATCH", "elsewhere"]);
    let mut calm = server.client();
    run::<()>(&mut calm, &["WATCH", "nowhere"]);
    run::<()>(&mut con, &["SWAPDB", "1", "0"]);
    assert_eq!(waiter.join().unwrap(), ["queue", "job"]);
    let exec = exec_ping::<Value>;
    assert_eq!(
        exec(&mut watcher),
        Value::Nil,
        "a watched key that exists in the other one"
    );
    assert!(
        matches!(exec(&mut calm), Value::Array(_)),
        "a key in neither"
    );
    // A watch taken after the swap follows database 0 to where it is stored now.
    run::<()>(&mut watcher, &["WATCH", "elsewhere"]);
    run::<()>(&mut con, &["SELECT", "0"]);
    run::<()>(&mut con, &["SET", "elsewhere", "2"]);
    assert_eq!(exec(&mut watcher), Value::Nil);
}

#[test]
fn swapdb_inside_multi_wakes_blocked_clients_and_names_databases_after_the_swap() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    );
    let mut blocked = server.client();
    let waiter =
        std::thread::spawn(move || -> Vec<String> { run(&mut blocked, &["BLPOP", "queue", "10"]) });
    wait_for_blocked(&mut con, 1);
    let mut watcher = server.client();
    run::<()>(&mut watcher, &["WATCH", "k"]);
    let mut listener = server.client();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyspace@*__:k").unwrap();
    // In database 1, then swapped into 0, where the client waits; then k is set in 0.
    let (pushed, swapped, set): (i64, String, String) = redis::pipe()
        .atomic()
        .cmd("SELECT")
        .arg(1)
        .ignore()
        .cmd("RPUSH")
        .arg("queue")
        .arg("job")
        .cmd("SWAPDB")
        .arg(0)
        .arg(1)
        .cmd("SELECT")
        .arg(0)
        .ignore()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut con)
        .unwrap();
    assert_eq!((pushed, swapped.as_str(), set.as_str()), (1, "OK", "OK"));
    assert_eq!(waiter.join().unwrap(), ["queue", "job"]);
    let message = pubsub.get_message().unwrap();
    assert_eq!(message.get_channel_name(), "__keyspace@0__:k");
    assert_eq!(exec_ping::<Value>(&mut watcher), Value::Nil);
}
