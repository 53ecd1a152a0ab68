//! String commands against a real server.

mod common;

use common::{fails, run, TestServer};
use redis::Value;

fn nil(con: &mut redis::Connection, args: &[&str]) {
    assert_eq!(run::<Value>(con, args), Value::Nil, "{args:?}");
}

#[test]
fn set_get_and_conditions() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<String>(&mut con, &["SET", "k", "v"]), "OK");
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v");
    nil(&mut con, &["GET", "missing"]);

    nil(&mut con, &["SET", "k", "x", "NX"]);
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v");
    nil(&mut con, &["SET", "new", "x", "XX"]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "new"]), 0);
    assert_eq!(run::<String>(&mut con, &["SET", "k", "y", "XX"]), "OK");
    assert_eq!(run::<String>(&mut con, &["SET", "k", "z", "GET"]), "y");
    nil(&mut con, &["SET", "fresh", "1", "GET"]);
    assert_eq!(
        run::<String>(&mut con, &["SET", "k", "w", "NX", "GET"]),
        "z"
    );
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "z");

    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "NX", "XX"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX", "10", "PX", "5"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "KEEPTTL", "EX", "5"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "BOGUS"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX", "0"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX", "-5"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX", "9223372036854775807"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX", "ten"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["SET", "k"]),
        "ERR wrong number of arguments for 'set' command"
    );
    assert_eq!(
        fails(&mut con, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
}

#[test]
fn set_expiry_options() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "v", "EX", "100"]);
    let ttl: i64 = run(&mut con, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    run::<()>(&mut con, &["SET", "k", "v2", "KEEPTTL"]);
    assert!(run::<i64>(&mut con, &["TTL", "k"]) > 0);
    run::<()>(&mut con, &["SET", "k", "v3"]);
    assert_eq!(run::<i64>(&mut con, &["TTL", "k"]), -1);
    run::<()>(&mut con, &["SET", "k", "v", "PX", "100000"]);
    let pttl: i64 = run(&mut con, &["PTTL", "k"]);
    assert!(pttl > 99_000 && pttl <= 100_000, "pttl {pttl}");
    let at = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1000)
        .to_string();
    run::<()>(&mut con, &["SET", "k", "v", "EXAT", &at]);
    assert_eq!(run::<String>(&mut con, &["EXPIRETIME", "k"]), at);
    run::<()>(&mut con, &["SET", "gone", "v", "PXAT", "1000"]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "gone"]), 0);

    run::<()>(&mut con, &["SET", "short", "v", "PX", "50"]);
    assert_eq!(run::<String>(&mut con, &["GET", "short"]), "v");
    std::thread::sleep(std::time::Duration::from_millis(80));
    nil(&mut con, &["GET", "short"]);
    assert_eq!(run::<i64>(&mut con, &["TTL", "short"]), -2);
    // Redis reads every option before the time.
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX", "x", "FOO"]),
        "ERR syntax error"
    );
    // An expiry option may repeat (the last counts) but not mix with another.
    run::<()>(&mut con, &["SET", "twice", "v", "EX", "10", "EX", "200"]);
    assert!(run::<i64>(&mut con, &["TTL", "twice"]) > 100);
    run::<()>(&mut con, &["SET", "twice", "v", "KEEPTTL", "KEEPTTL"]);
    assert!(run::<i64>(&mut con, &["TTL", "twice"]) > 100);
    assert_eq!(
        fails(&mut con, &["SET", "k", "v", "EX", "10", "PX", "20"]),
        "ERR syntax error"
    );
}

#[test]
fn setnx_setex_psetex_getset_getdel() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["SETNX", "k", "1"]), 1);
    assert_eq!(run::<i64>(&mut con, &["SETNX", "k", "2"]), 0);
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "1");
    assert_eq!(run::<String>(&mut con, &["SETEX", "e", "100", "v"]), "OK");
    assert!(run::<i64>(&mut con, &["TTL", "e"]) > 90);
    assert_eq!(
        fails(&mut con, &["SETEX", "e", "0", "v"]),
        "ERR invalid expire time in 'setex' command"
    );
    assert_eq!(
        run::<String>(&mut con, &["PSETEX", "p", "100000", "v"]),
        "OK"
    );
    assert!(run::<i64>(&mut con, &["PTTL", "p"]) > 90_000);
    assert_eq!(
        fails(&mut con, &["PSETEX", "p", "-1", "v"]),
        "ERR invalid expire time in 'psetex' command"
    );
    assert_eq!(run::<String>(&mut con, &["GETSET", "k", "2"]), "1");
    nil(&mut con, &["GETSET", "nothing", "x"]);
    assert_eq!(run::<String>(&mut con, &["GETDEL", "k"]), "2");
    nil(&mut con, &["GETDEL", "k"]);
    run::<()>(&mut con, &["SETEX", "k", "100", "v"]);
    assert_eq!(run::<String>(&mut con, &["GETSET", "k", "w"]), "v");
    assert_eq!(
        run::<i64>(&mut con, &["TTL", "k"]),
        -1,
        "GETSET clears the TTL"
    );
}

#[test]
fn getex_changes_expiry() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<String>(&mut con, &["GETEX", "k"]), "v");
    assert_eq!(run::<i64>(&mut con, &["TTL", "k"]), -1);
    assert_eq!(run::<String>(&mut con, &["GETEX", "k", "EX", "100"]), "v");
    assert!(run::<i64>(&mut con, &["TTL", "k"]) > 90);
    assert_eq!(run::<String>(&mut con, &["GETEX", "k", "PERSIST"]), "v");
    assert_eq!(run::<i64>(&mut con, &["TTL", "k"]), -1);
    assert_eq!(run::<String>(&mut con, &["GETEX", "k", "PXAT", "1"]), "v");
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "k"]), 0);
    nil(&mut con, &["GETEX", "missing", "EX", "10"]);
    // Redis reads the time only once it has found the key.
    nil(&mut con, &["GETEX", "missing", "EX", "x"]);
    // As in SET, an option may repeat (the last counts) but not mix with another.
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(
        run::<String>(&mut con, &["GETEX", "k", "EX", "100", "EX", "200"]),
        "v"
    );
    assert!(run::<i64>(&mut con, &["TTL", "k"]) > 150);
    assert_eq!(
        run::<String>(&mut con, &["GETEX", "k", "PERSIST", "PERSIST"]),
        "v"
    );
    assert_eq!(run::<i64>(&mut con, &["TTL", "k"]), -1);
    assert_eq!(
        fails(&mut con, &["GETEX", "k", "PERSIST", "EX", "1"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["GETEX", "missing", "FOO", "1"]),
        "ERR syntax error"
    );
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(fails(&mut con, &["GETEX", "k", "EX"]), "ERR syntax error");
    assert_eq!(
        fails(&mut con, &["GETEX", "k", "EX", "0"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(
        fails(&mut con, &["GETEX", "k", "PERSIST", "EX", "1"]),
        "ERR syntax error"
    );
}

#[test]
fn mget_mset_msetnx() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        run::<String>(&mut con, &["MSET", "a", "1", "b", "2", "a", "3"]),
        "OK"
    );
    let values: Vec<Option<String>> = run(&mut con, &["MGET", "a", "b", "c"]);
    assert_eq!(values, vec![Some("3".into()), Some("2".into()), None]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 2);
    assert_eq!(
        fails(&mut con, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(run::<i64>(&mut con, &["MSETNX", "c", "1", "a", "9"]), 0);
    nil(&mut con, &["GET", "c"]);
    assert_eq!(run::<i64>(&mut con, &["MSETNX", "c", "1", "d", "2"]), 1);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 4);
}

#[test]
fn counters() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["INCR", "n"]), 1);
    assert_eq!(run::<i64>(&mut con, &["INCRBY", "n", "10"]), 11);
    assert_eq!(run::<i64>(&mut con, &["DECR", "n"]), 10);
    assert_eq!(run::<i64>(&mut con, &["DECRBY", "n", "-5"]), 15);
    run::<()>(&mut con, &["SET", "n", "9223372036854775807"]);
    assert_eq!(
        fails(&mut con, &["INCR", "n"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        fails(&mut con, &["DECRBY", "x", "-9223372036854775808"]),
        "ERR decrement would overflow",
        "the decrement itself cannot be negated"
    );
    run::<()>(&mut con, &["SET", "s", "abc"]);
    assert_eq!(
        fails(&mut con, &["INCR", "s"]),
        "ERR value is not an integer or out of range"
    );
    run::<()>(&mut con, &["SET", "s", " 1"]);
    assert_eq!(
        fails(&mut con, &["INCR", "s"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["INCRBY", "n", "1.5"]),
        "ERR value is not an integer or out of range"
    );

    run::<()>(&mut con, &["SET", "f", "10.50"]);
    assert_eq!(
        run::<String>(&mut con, &["INCRBYFLOAT", "f", "0.1"]),
        "10.6"
    );
    assert_eq!(run::<String>(&mut con, &["INCRBYFLOAT", "f", "-5"]), "5.6");
    run::<()>(&mut con, &["SET", "dec", "0.1"]);
    assert_eq!(
        run::<String>(&mut con, &["INCRBYFLOAT", "dec", "0.2"]),
        "0.3",
        "decimal, like Redis's long double"
    );
    run::<()>(&mut con, &["SET", "g", "5.0e3"]);
    assert_eq!(
        run::<String>(&mut con, &["INCRBYFLOAT", "g", "2.0e2"]),
        "5200"
    );
    assert_eq!(run::<String>(&mut con, &["INCRBYFLOAT", "newf", "3"]), "3");
    assert_eq!(
        fails(&mut con, &["INCRBYFLOAT", "f", "abc"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        fails(&mut con, &["INCRBYFLOAT", "s", "1"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        fails(&mut con, &["INCRBYFLOAT", "f", "inf"]),
        "ERR increment would produce NaN or Infinity",
        "inf is a float, as strtold reads it; the sum is what fails"
    );
    run::<()>(&mut con, &["SET", "stored-inf", "-inf"]);
    assert_eq!(
        fails(&mut con, &["INCRBYFLOAT", "stored-inf", "1"]),
        "ERR increment would produce NaN or Infinity"
    );
    for out_of_range in ["1e-5000", "nan", "0x"] {
        assert_eq!(
            fails(&mut con, &["INCRBYFLOAT", "f", out_of_range]),
            "ERR value is not a valid float"
        );
    }
    // x86-64's 80-bit long double, as Redis there: representation errors show past the 19th
    // digit, and doubles' range is no limit.
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            run::<String>(&mut con, &["INCRBYFLOAT", "ld", "12345.678"]),
            "12345.67799999999999994"
        );
        assert_eq!(
            run::<String>(&mut con, &["INCRBYFLOAT", "ld", "1e400"]).len(),
            401
        );
        run::<()>(&mut con, &["SET", "big", "1e4932"]);
        assert_eq!(
            fails(&mut con, &["INCRBYFLOAT", "big", "1e4932"]),
            "ERR increment would produce NaN or Infinity"
        );
    }

    // Counters keep the TTL.
    run::<()>(&mut con, &["SET", "t", "1", "EX", "100"]);
    run::<()>(&mut con, &["INCR", "t"]);
    assert!(run::<i64>(&mut con, &["TTL", "t"]) > 90);
}

#[test]
fn append_strlen_ranges() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["APPEND", "k", "Hello"]), 5);
    assert_eq!(run::<i64>(&mut con, &["APPEND", "k", " World"]), 11);
    assert_eq!(run::<i64>(&mut con, &["STRLEN", "k"]), 11);
    assert_eq!(run::<i64>(&mut con, &["STRLEN", "nokey"]), 0);
    run::<()>(&mut con, &["SET", "s", "This is a string"]);
    assert_eq!(
        run::<String>(&mut con, &["GETRANGE", "s", "0", "3"]),
        "This"
    );
    assert_eq!(
        run::<String>(&mut con, &["GETRANGE", "s", "-3", "-1"]),
        "ing"
    );
    assert_eq!(
        run::<String>(&mut con, &["GETRANGE", "s", "0", "-1"]),
        "This is a string"
    );
    assert_eq!(
        run::<String>(&mut con, &["GETRANGE", "s", "10", "100"]),
        "string"
    );
    assert_eq!(run::<String>(&mut con, &["GETRANGE", "s", "5", "3"]), "");
    assert_eq!(run::<String>(&mut con, &["GETRANGE", "s", "-1", "-5"]), "");
    assert_eq!(run::<String>(&mut con, &["SUBSTR", "s", "0", "3"]), "This");
    assert_eq!(
        run::<String>(&mut con, &["GETRANGE", "nokey", "0", "3"]),
        ""
    );

    run::<()>(&mut con, &["SET", "key1", "Hello World"]);
    assert_eq!(
        run::<i64>(&mut con, &["SETRANGE", "key1", "6", "Redis"]),
        11
    );
    assert_eq!(run::<String>(&mut con, &["GET", "key1"]), "Hello Redis");
    assert_eq!(
        run::<i64>(&mut con, &["SETRANGE", "key2", "6", "Redis"]),
        11
    );
    assert_eq!(
        run::<Vec<u8>>(&mut con, &["GET", "key2"]),
        b"\0\0\0\0\0\0Redis"
    );
    assert_eq!(run::<i64>(&mut con, &["SETRANGE", "key3", "0", ""]), 0);
    run::<()>(&mut con, &["RPUSH", "list", "a"]);
    assert_eq!(
        fails(&mut con, &["SETRANGE", "list", "4294967296", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value",
        "the type is checked before the length"
    );
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "key3"]), 0);
    assert_eq!(
        fails(&mut con, &["SETRANGE", "key1", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(
        fails(&mut con, &["SETRANGE", "key1", "536870911", "xx"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
}

#[test]
fn large_values_round_trip() {
    let server = TestServer::start();
    let mut con = server.client();
    let big = vec![b'x'; 8 << 20];
    redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query::<()>(&mut con)
        .unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut con).unwrap();
    assert_eq!(back.len(), big.len());
    assert_eq!(run::<i64>(&mut con, &["STRLEN", "big"]), 8 << 20);
    let binary = b"\x00\r\n\xff";
    redis::cmd("SET")
        .arg("bin")
        .arg(&binary[..])
        .query::<()>(&mut con)
        .unwrap();
    assert_eq!(
        redis::cmd("GET")
            .arg("bin")
            .query::<Vec<u8>>(&mut con)
            .unwrap(),
        binary
    );
}

#[test]
fn lcs_answers_as_redis_does() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
    assert_eq!(run::<String>(&mut con, &["LCS", "key1", "key2"]), "mytext");
    assert_eq!(run::<i64>(&mut con, &["LCS", "key1", "key2", "LEN"]), 6);
    assert_eq!(run::<String>(&mut con, &["LCS", "key1", "nokey"]), "");

    // Runs are listed from the end of the strings, with the total length after them.
    let mut raw = server.raw();
    raw.command(&["LCS", "key1", "key2", "IDX"]);
    raw.expect(
        b"*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n\
          *2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n",
    );
    raw.command(&["HELLO", "3"]);
    raw.command(&["PING"]);
    raw.skip_through(b"+PONG\r\n");
    raw.command(&[
        "LCS",
        "key1",
        "key2",
        "IDX",
        "MINMATCHLEN",
        "4",
        "WITHMATCHLEN",
    ]);
    raw.expect(
        b"%2\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n\
          $3\r\nlen\r\n:6\r\n",
    );

    // A string stored in fragments compares like any other.
    let long = format!("{}hello{}", "x".repeat(3000), "x".repeat(3000));
    run::<()>(&mut con, &["SET", "long", &long]);
    run::<()>(&mut con, &["SET", "short", "hello"]);
    assert_eq!(run::<String>(&mut con, &["LCS", "long", "short"]), "hello");

    run::<()>(&mut con, &["HSET", "hash", "f", "v"]);
    assert_eq!(
        fails(&mut con, &["LCS", "key1", "hash"]),
        "ERR The specified keys must contain string values"
    );
    assert_eq!(
        fails(&mut con, &["LCS", "key1", "key2", "LEN", "IDX"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(
        fails(&mut con, &["LCS", "key1", "key2", "MINMATCHLEN"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["LCS", "key1", "key2", "MINMATCHLEN", "x"]),
        "ERR value is not an integer or out of range"
    );
    run::<()>(&mut con, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    let wide = "a".repeat(600);
    run::<()>(&mut con, &["MSET", "w1", &wide, "w2", &wide]);
    assert_eq!(
        fails(&mut con, &["LCS", "w1", "w2"]),
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
    );
    assert_eq!(run::<String>(&mut con, &["PING"]), "PONG");
}

/// With blob files on, large values leave the metadata records for blob files at the first
/// flush; they must read back the same after a restart, whole and in part, and expire.
#[test]
fn values_in_blob_files_read_back_after_a_restart() {
    let mut server = TestServer::start_with(&["--rocksdb.min-blob-size", "2kb"]);
    let value = |i: usize| format!("{i:05}").repeat(1000);
    {
        let mut con = server.client();
        for i in 0..200 {
            run::<()>(&mut con, &["SET", &format!("k{i}"), &value(i)]);
        }
        run::<()>(&mut con, &["SET", "small", "v"]);
        run::<()>(&mut con, &["SET", "expiring", &value(7), "PX", "300"]);
    }
    // A clean stop flushes the memtables, which writes the blob files.
    server.restart();
    let blobs = std::fs::read_dir(server.dir.path().join("data").join("db"))
        .expect("data directory")
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".blob"))
        .count();
    assert!(blobs > 0, "no blob file was written");
    let mut con = server.client();
    for i in [0, 77, 199] {
        assert_eq!(
            run::<String>(&mut con, &["GET", &format!("k{i}")]),
            value(i)
        );
    }
    let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let values: Vec<String> = run(&mut con, &mget);
    assert!(values.iter().enumerate().all(|(i, v)| *v == value(i)));
    assert_eq!(
        run::<String>(&mut con, &["GETRANGE", "k3", "4990", "4999"]),
        "0000300003"
    );
    assert_eq!(run::<String>(&mut con, &["GET", "small"]), "v");
    std::thread::sleep(std::time::Duration::from_millis(400));
    nil(&mut con, &["GET", "expiring"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 201);
}
