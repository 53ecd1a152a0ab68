//! PFADD, PFCOUNT and PFMERGE against the values Redis 7.0 gives for the same input.

mod common;

use common::{fails, info_field, run, TestServer};
use redis::Value;

fn add_range(con: &mut redis::Connection, key: &str, prefix: &str, count: usize) {
    for start in (0..count).step_by(1000) {
        let mut cmd = redis::cmd("PFADD");
        cmd.arg(key);
        for i in start..(start + 1000).min(count) {
            cmd.arg(format!("{prefix}{i}"));
        }
        let _: i64 = cmd.query(con).unwrap();
    }
}

#[test]
fn values_counts_and_merges_are_redis_s() {
    let mut server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["PFADD", "s", "a", "b", "c"]), 1);
    assert_eq!(run::<i64>(&mut con, &["PFADD", "s", "a"]), 0);
    // Sparse, cached count marked stale; PFCOUNT caches it in the value.
    let sparse_tail = b"`\xf3\x80P\xb1\x84K\xfb\x80BZ";
    let stale = [&b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80"[..], sparse_tail].concat();
    assert_eq!(run::<Vec<u8>>(&mut con, &["GET", "s"]), stale);
    assert_eq!(run::<i64>(&mut con, &["PFCOUNT", "s"]), 3);
    let cached = [&b"HYLL\x01\0\0\0\x03\0\0\0\0\0\0\0"[..], sparse_tail].concat();
    assert_eq!(run::<Vec<u8>>(&mut con, &["GET", "s"]), cached);

    // Past 3000 bytes the value turns dense: 12,304 bytes.
    add_range(&mut con, "h", "el", 20000);
    assert_eq!(run::<i64>(&mut con, &["PFCOUNT", "h"]), 20020);
    assert_eq!(run::<i64>(&mut con, &["STRLEN", "h"]), 12304);
    add_range(&mut con, "m", "x", 100);
    assert_eq!(run::<i64>(&mut con, &["PFCOUNT", "m"]), 99);
    assert_eq!(
        run::<i64>(&mut con, &["PFCOUNT", "h", "m", "missing"]),
        20116
    );
    assert_eq!(run::<String>(&mut con, &["PFMERGE", "u", "h", "m"]), "OK");
    assert_eq!(run::<i64>(&mut con, &["PFCOUNT", "u"]), 20116);
    assert_eq!(run::<String>(&mut con, &["PFMERGE", "empty"]), "OK");
    assert_eq!(run::<i64>(&mut con, &["PFCOUNT", "empty"]), 0);

    drop(con);
    server.restart();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["PFCOUNT", "h", "m"]), 20116);
    assert_eq!(run::<i64>(&mut con, &["PFCOUNT", "u"]), 20116);
}

#[test]
fn adding_to_a_dense_hll_writes_the_changed_bytes_only() {
    let server = TestServer::start();
    let mut con = server.client();
    add_range(&mut con, "h", "el", 20000);
    let before = info_field(&mut con, "rocksdb", "bytes_written");
    let mut changed = 0;
    for i in 0..200 {
        changed += run::<i64>(&mut con, &["PFADD", "h", &format!("more{i}")]);
    }
    let written = info_field(&mut con, "rocksdb", "bytes_written") - before;
    assert!(changed > 0);
    // Rewriting the 12 KB value would be over 2 MB.
    assert!(written < 200 * 512, "200 PFADDs wrote {written} bytes");
    assert_eq!(run::<i64>(&mut con, &["STRLEN", "h"]), 12304);
}

#[test]
fn errors_ttls_and_watch_are_as_in_redis() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "str", "hello"]);
    run::<()>(&mut con, &["LPUSH", "list", "a"]);
    run::<()>(&mut con, &["SET", "fake", "HYLL\x01xxxxxxxxxxxxxxx"]);
    let not_hll = "WRONGTYPE Key is not a valid HyperLogLog string value.";
    assert_eq!(fails(&mut con, &["PFADD", "str", "a"]), not_hll);
    assert_eq!(fails(&mut con, &["PFCOUNT", "str"]), not_hll);
    assert_eq!(fails(&mut con, &["PFMERGE", "dest", "str"]), not_hll);
    assert_eq!(
        fails(&mut con, &["PFADD", "list", "a"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        fails(&mut con, &["PFCOUNT", "fake", "str"]),
        "INVALIDOBJ Corrupted HLL object detected"
    );
    assert_eq!(
        fails(&mut con, &["PFADD"]),
        "ERR wrong number of arguments for 'pfadd' command"
    );
    assert_eq!(run::<Value>(&mut con, &["EXISTS", "dest"]), Value::Int(0));
    // A 512 MB string is refused from its first bytes.
    run::<()>(&mut con, &["SETBIT", "huge", "4294967295", "1"]);
    assert_eq!(fails(&mut con, &["PFCOUNT", "huge"]), not_hll);
    assert_eq!(fails(&mut con, &["PFCOUNT", "huge", "huge"]), not_hll);
    assert_eq!(fails(&mut con, &["PFADD", "huge", "a"]), not_hll);
    assert_eq!(fails(&mut con, &["PFMERGE", "dest", "huge"]), not_hll);

    // PFADD and PFMERGE keep the TTL; a stale PFCOUNT writes its cached count, which WATCH
    // sees, as in Redis.
    run::<()>(&mut con, &["PFADD", "t", "a"]);
    run::<()>(&mut con, &["EXPIRE", "t", "1000"]);
    run::<()>(&mut con, &["PFADD", "t", "b"]);
    run::<()>(&mut con, &["PFMERGE", "t", "t"]);
    assert!(run::<i64>(&mut con, &["TTL", "t"]) > 990);
    let mut other = server.client();
    run::<()>(&mut con, &["WATCH", "t"]);
    assert_eq!(run::<i64>(&mut other, &["PFCOUNT", "t"]), 2);
    run::<()>(&mut con, &["MULTI"]);
    run::<()>(&mut con, &["PFCOUNT", "t"]);
    assert_eq!(run::<Value>(&mut con, &["EXEC"]), Value::Nil);
    run::<()>(&mut con, &["WATCH", "t"]);
    assert_eq!(run::<i64>(&mut other, &["PFCOUNT", "t"]), 2);
    run::<()>(&mut con, &["MULTI"]);
    run::<()>(&mut con, &["PFCOUNT", "t"]);
    assert_eq!(run::<Vec<i64>>(&mut con, &["EXEC"]), vec![2]);
}
