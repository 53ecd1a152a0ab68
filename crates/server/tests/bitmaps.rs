//! Redis bitmap commands on strings, with Redis's documented examples, and the fragmented
//! storage of long bitmaps.

mod common;

use common::{fails, info_field, run, TestServer};
use redis::Value;

fn bytes_written(con: &mut redis::Connection) -> u64 {
    info_field(con, "rocksdb", "bytes_written")
}

#[test]
fn setbit_getbit_bitcount_bitpos() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["SETBIT", "mykey", "7", "1"]), 0);
    assert_eq!(run::<i64>(&mut con, &["SETBIT", "mykey", "7", "0"]), 1);
    assert_eq!(run::<Vec<u8>>(&mut con, &["GET", "mykey"]), b"\x00");
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "mykey", "100"]), 0);
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "nokey", "0"]), 0);
    assert_eq!(
        fails(&mut con, &["SETBIT", "k", "4294967296", "1"]),
        "ERR bit offset is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["SETBIT", "k", "-1", "1"]),
        "ERR bit offset is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["SETBIT", "k", "1", "2"]),
        "ERR bit is not an integer or out of range"
    );

    run::<()>(&mut con, &["SET", "s", "foobar"]);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "s"]), 26);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "s", "0", "0"]), 4);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "s", "1", "1"]), 6);
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "s", "1", "1", "BYTE"]),
        6
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "s", "5", "30", "BIT"]),
        17
    );
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "s", "-2", "-1"]), 7);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "nokey"]), 0);
    assert_eq!(fails(&mut con, &["BITCOUNT", "s", "0"]), "ERR syntax error");

    redis::cmd("SET")
        .arg("p")
        .arg(&b"\xff\xf0\x00"[..])
        .query::<()>(&mut con)
        .unwrap();
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "p", "0"]), 12);
    redis::cmd("SET")
        .arg("q")
        .arg(&b"\x00\xff\xf0"[..])
        .query::<()>(&mut con)
        .unwrap();
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "q", "1", "0"]), 8);
    run::<()>(&mut con, &["SET", "two", "ab"]);
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "two", "1", "-3", "-7"]),
        1,
        "Redis 7.0's BITPOS clamps inverted negative ends to byte 0"
    );
    // Redis looks the key up before it reads the range.
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "missing", "1"]), 0);
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "missing", "1", "x"]), -1);
    assert_eq!(fails(&mut con, &["BITCOUNT", "q", "1"]), "ERR syntax error");
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "q", "-1", "-2", "FOO"]),
        0,
        "an inverted range from the end is answered before the unit is read"
    );
    assert_eq!(
        fails(&mut con, &["BITPOS", "q", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["BITPOS", "q", "1", "0", "x", "FOO"]),
        "ERR syntax error",
        "the unit is read before the end"
    );
    run::<()>(&mut con, &["RPUSH", "list", "a"]);
    assert_eq!(
        fails(&mut con, &["BITPOS", "list", "1", "x"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "q", "1", "2"]), 16);
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "q", "1", "2", "-1", "BYTE"]),
        16
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "q", "1", "7", "15", "BIT"]),
        8
    );
    redis::cmd("SET")
        .arg("ones")
        .arg(&b"\xff\xff"[..])
        .query::<()>(&mut con)
        .unwrap();
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "ones", "0"]),
        16,
        "padded with zeros"
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "ones", "0", "0", "-1"]),
        -1
    );
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "nokey", "0"]), 0);
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "nokey", "1"]), -1);
    assert_eq!(
        fails(&mut con, &["BITPOS", "s", "2"]),
        "ERR The bit argument must be 1 or 0."
    );
}

#[test]
fn bitop() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "key1", "foobar"]);
    run::<()>(&mut con, &["SET", "key2", "abcdef"]);
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "AND", "dest", "key1", "key2"]),
        6
    );
    assert_eq!(run::<String>(&mut con, &["GET", "dest"]), "`bc`ab");
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "OR", "dest", "key1", "key2", "nokey"]),
        6
    );
    assert_eq!(run::<String>(&mut con, &["GET", "dest"]), "goofev");
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "XOR", "dest", "key1", "key2"]),
        6
    );
    assert_eq!(
        run::<Vec<u8>>(&mut con, &["GET", "dest"]),
        b"\x07\x0d\x0c\x06\x04\x14"
    );
    assert_eq!(run::<i64>(&mut con, &["BITOP", "NOT", "dest", "key1"]), 6);
    assert_eq!(
        run::<Vec<u8>>(&mut con, &["GET", "dest"]),
        b"\x99\x90\x90\x9d\x9e\x8d"
    );
    assert_eq!(run::<i64>(&mut con, &["BITOP", "AND", "dest", "nokey"]), 0);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "dest"]), 0);
    run::<()>(&mut con, &["HSET", "h", "f", "v"]);
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "OR", "h", "key1"]),
        6,
        "overwrites other types"
    );
    assert_eq!(run::<String>(&mut con, &["GET", "h"]), "foobar");
    assert_eq!(
        fails(&mut con, &["BITOP", "NOT", "dest", "key1", "key2"]),
        "ERR BITOP NOT must be called with a single source key."
    );
    assert_eq!(
        fails(&mut con, &["BITOP", "NAND", "dest", "key1"]),
        "ERR syntax error"
    );
}

#[test]
fn bitfield() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        run::<Vec<i64>>(
            &mut con,
            &["BITFIELD", "bf", "INCRBY", "i5", "100", "1", "GET", "u4", "0"]
        ),
        [1, 0]
    );
    assert_eq!(
        run::<Vec<i64>>(
            &mut con,
            &["BITFIELD", "bf", "SET", "i8", "0", "100", "GET", "i8", "0"]
        ),
        [0, 100]
    );
    assert_eq!(
        run::<Vec<i64>>(
            &mut con,
            &["BITFIELD", "sat", "OVERFLOW", "SAT", "SET", "u8", "0", "-1", "GET", "u8", "0"]
        ),
        [0, 255],
        "an unsigned SET reads -1 as 2^64 - 1, as Redis does"
    );
    assert_eq!(
        run::<Vec<i64>>(
            &mut con,
            &[
                "BITFIELD", "bf", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2",
                "102", "1"
            ]
        ),
        [1, 1]
    );
    assert_eq!(
        run::<Vec<Option<i64>>>(
            &mut con,
            &[
                "BITFIELD", "bf", "OVERFLOW", "FAIL", "INCRBY", "u2", "102", "1", "INCRBY", "u2",
                "102", "5"
            ]
        ),
        [Some(2), None]
    );
    assert_eq!(
        run::<Vec<i64>>(
            &mut con,
            &["BITFIELD", "bf", "OVERFLOW", "WRAP", "INCRBY", "i8", "#1", "200"]
        ),
        [-56]
    );
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["BITFIELD_RO", "bf", "GET", "i8", "0"]),
        [100]
    );
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["BITFIELD", "nobf", "GET", "u8", "0"]),
        [0]
    );
    // A write that OVERFLOW FAIL refuses still grows the string first, as in Redis.
    assert_eq!(
        run::<Vec<Option<i64>>>(
            &mut con,
            &["BITFIELD", "grown", "OVERFLOW", "FAIL", "INCRBY", "u2", "#5", "-1"]
        ),
        [None]
    );
    assert_eq!(run::<Vec<u8>>(&mut con, &["GET", "grown"]), [0, 0]);
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "nobf"]),
        0,
        "GETs create nothing"
    );
    assert_eq!(
        fails(&mut con, &["BITFIELD", "bf", "GET", "u64", "0"]),
        "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
    );
    assert_eq!(
        fails(&mut con, &["BITFIELD", "bf", "GET", "i8", "-1"]),
        "ERR bit offset is not an integer or out of range"
    );
    assert_eq!(
        fails(&mut con, &["BITFIELD", "bf", "OVERFLOW", "MAYBE"]),
        "ERR Invalid OVERFLOW type specified"
    );
    assert_eq!(
        fails(&mut con, &["BITFIELD", "bf", "FOO", "i8", "0"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["BITFIELD_RO", "bf", "SET", "i8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    // Every operation is parsed before a write is refused; OVERFLOW alone is no write.
    assert_eq!(
        fails(&mut con, &["BITFIELD_RO", "bf", "SET", "i8", "0", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        run::<Vec<i64>>(
            &mut con,
            &["BITFIELD_RO", "bf", "OVERFLOW", "SAT", "GET", "u1", "0"]
        )
        .len(),
        1
    );
    assert_eq!(
        fails(&mut con, &["BITFIELD", "bf", "GET", "I8", "0"]),
        "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        "types are lower case only, as in Redis"
    );
}

#[test]
fn long_bitmaps_live_in_fragments_and_read_as_one_string() {
    let mut server = TestServer::start();
    let mut con = server.client();
    let before = bytes_written(&mut con);
    assert_eq!(
        run::<i64>(&mut con, &["SETBIT", "big", "4294967295", "1"]),
        0
    );
    let written = bytes_written(&mut con) - before;
    assert!(
        written < 16 * 1024,
        "SETBIT at 2^32-1 wrote {written} bytes"
    );
    assert_eq!(run::<i64>(&mut con, &["STRLEN", "big"]), 536_870_912);
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "big", "4294967295"]), 1);
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "big", "12345"]), 0);
    assert_eq!(
        run::<Vec<u8>>(&mut con, &["GETRANGE", "big", "-1", "-1"]),
        b"\x01"
    );
    assert_eq!(
        fails(&mut con, &["APPEND", "big", "xy"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    run::<()>(&mut con, &["SETBIT", "wide", "999999", "1"]);
    assert_eq!(run::<i64>(&mut con, &["APPEND", "wide", "xy"]), 125_002);
    assert_eq!(
        run::<Vec<u8>>(&mut con, &["GETRANGE", "wide", "-3", "-1"]),
        b"\x01xy"
    );

    run::<()>(&mut con, &["SETBIT", "mid", "40000", "1"]);
    assert_eq!(run::<i64>(&mut con, &["STRLEN", "mid"]), 5001);
    run::<()>(&mut con, &["SETRANGE", "mid", "10000", "hello"]);
    let whole: Vec<u8> = run(&mut con, &["GET", "mid"]);
    assert_eq!(whole.len(), 10005);
    assert_eq!(whole[5000], 0x80);
    assert_eq!(&whole[10000..], b"hello");
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "mid"]),
        1 + 5 * 8
            - [b'h', b'e', b'l', b'l', b'o']
                .iter()
                .map(|b: &u8| b.count_zeros() as i64)
                .sum::<i64>()
    );
    assert_eq!(
        run::<String>(&mut con, &["OBJECT", "ENCODING", "mid"]),
        "raw"
    );
    drop(con);
    server.restart();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "mid", "40000"]), 1);
    assert_eq!(
        run::<String>(&mut con, &["GETRANGE", "mid", "10000", "10004"]),
        "hello"
    );
    run::<()>(&mut con, &["SET", "mid", "5"]);
    assert_eq!(
        run::<i64>(&mut con, &["INCR", "mid"]),
        6,
        "an overwrite drops the fragments"
    );
    assert_eq!(run::<i64>(&mut con, &["DEL", "big"]), 1);
    assert_eq!(run::<Value>(&mut con, &["GET", "big"]), Value::Nil);
    run::<()>(&mut con, &["TR.SETBIT", "roar", "1", "1"]);
    assert_eq!(
        fails(&mut con, &["SETBIT", "roar", "1", "1"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        fails(&mut con, &["GETBIT", "roar", "1"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn setbit_on_a_fragmented_string_writes_the_byte_not_the_fragment() {
    let mut server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SETBIT", "wide", "160000", "1"]);
    let offsets: Vec<u64> = (0..200).map(|i| (i * 7919) % 160_000).collect();
    let before = bytes_written(&mut con);
    for offset in &offsets {
        run::<()>(&mut con, &["SETBIT", "wide", &offset.to_string(), "1"]);
    }
    let written = bytes_written(&mut con) - before;
    // Whole 4 KiB fragments would be over 800 KB.
    assert!(written < 200 * 256, "200 SETBITs wrote {written} bytes");

    // Patches of one fragment in one transaction, read back inside it and after it.
    run::<()>(&mut con, &["MULTI"]);
    run::<()>(&mut con, &["SETBIT", "wide", "8", "1"]);
    run::<()>(&mut con, &["SETBIT", "wide", "9", "1"]);
    run::<()>(&mut con, &["GETBIT", "wide", "8"]);
    run::<()>(&mut con, &["SETBIT", "wide", "8", "0"]);
    let replies: Vec<i64> = run(&mut con, &["EXEC"]);
    assert_eq!(replies, vec![0, 0, 1, 1]);

    // A WATCHed bitmap is changed by a SETBIT that only patches a fragment.
    let mut other = server.client();
    run::<()>(&mut con, &["WATCH", "wide"]);
    run::<()>(&mut other, &["SETBIT", "wide", "12345", "1"]);
    run::<()>(&mut con, &["MULTI"]);
    run::<()>(&mut con, &["GET", "wide"]);
    assert_eq!(run::<Value>(&mut con, &["EXEC"]), Value::Nil);

    let expected = |offset: u64| {
        offset == 160_000 || offset == 9 || offset == 12345 || offsets.contains(&offset)
    };
    let check = |con: &mut redis::Connection| {
        let whole: Vec<u8> = run(con, &["GET", "wide"]);
        assert_eq!(whole.len(), 20_001);
        for offset in 0..=160_000u64 {
            let bit = whole[(offset / 8) as usize] >> (7 - offset % 8) & 1 == 1;
            assert_eq!(bit, expected(offset), "bit {offset}");
        }
    };
    check(&mut con);
    drop((con, other));
    server.restart();
    let mut con = server.client();
    check(&mut con);
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "wide"]),
        (0..=160_000u64).filter(|&o| expected(o)).count() as i64
    );
}

/// Records that reads of the data family asked for, through its cache.
fn data_reads(con: &mut redis::Connection) -> u64 {
    info_field(con, "rocksdb", "data_cache_hits") + info_field(con, "rocksdb", "data_cache_misses")
}

#[test]
fn bit_commands_over_a_sparse_bitmap_read_what_is_stored() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", ""]);
    assert_eq!(run::<i64>(&mut con, &["SETBIT", "k", "4294967295", "1"]), 0);
    run::<i64>(&mut con, &["SETBIT", "k", "9", "1"]);
    let before = data_reads(&mut con);
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "k", "1"]), 9);
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "k", "1", "2"]), 4294967295);
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "k", "1", "16", "-1", "BIT"]),
        4294967295
    );
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "k", "0"]), 0);
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "k", "0", "9", "9", "BIT"]),
        -1
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "k", "0", "9", "-1", "BIT"]),
        10
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "k", "0", "4096"]),
        32768,
        "in a gap"
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "k", "0", "-1"]),
        4294967288
    );
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "k"]), 2);
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "k", "0", "536870911"]),
        2
    );
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "k", "2", "-2"]), 0);
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "k", "10", "4294967295", "BIT"]),
        1
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "OR", "o", "k", "k"]),
        536870912
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "AND", "a", "k", "o"]),
        536870912
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "XOR", "x", "k", "o"]),
        536870912
    );
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "o"]), 2);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "a"]), 2);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "x"]), 0);
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "a", "1", "2"]), 4294967295);
    let got: Vec<u8> = run(&mut con, &["GETRANGE", "o", "536870910", "-1"]);
    assert_eq!(got, [0, 1]);
    // The 512 MB the bitmap spans are 131,072 fragments; two are stored.
    let reads = data_reads(&mut con) - before;
    assert!(reads < 1000, "{reads} records read through the cache");
}

#[test]
fn bit_commands_over_a_dense_bitmap_still_count_every_byte() {
    let server = TestServer::start();
    let mut con = server.client();
    let ones = vec![0xFFu8; 20_000];
    redis::cmd("SET")
        .arg("d")
        .arg(&ones)
        .query::<()>(&mut con)
        .unwrap();
    run::<i64>(&mut con, &["SETBIT", "d", "100000", "0"]);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "d"]), 159_999);
    assert_eq!(run::<i64>(&mut con, &["BITPOS", "d", "0"]), 100_000);
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "d", "0", "12501"]),
        160_000
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITPOS", "d", "0", "12501", "-1"]),
        -1
    );
    assert_eq!(
        run::<i64>(&mut con, &["BITCOUNT", "d", "1", "-2", "BYTE"]),
        159_983
    );
    assert_eq!(run::<i64>(&mut con, &["BITOP", "NOT", "n", "d"]), 20_000);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "n"]), 1);
    assert_eq!(
        run::<i64>(&mut con, &["BITOP", "AND", "a", "d", "n"]),
        20_000
    );
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "a"]), 0);
}

#[test]
fn bit_writes_that_change_nothing_count_no_change() {
    let server = TestServer::start();
    let mut con = server.client();
    let changes =
        |con: &mut redis::Connection| info_field(con, "persistence", "rdb_changes_since_last_save");
    assert_eq!(run::<i64>(&mut con, &["SETBIT", "b", "3", "1"]), 0);
    let _: Vec<i64> = run(&mut con, &["BITFIELD", "f", "SET", "u8", "0", "200"]);
    let before = changes(&mut con);
    // As in Redis 7.0.15: a bit or field set to what it holds, in a string that need not
    // grow, is no change (nor is a SETRANGE of nothing).
    for args in [
        &["SETBIT", "b", "3", "1"][..],
        &["SETBIT", "b", "0", "0"],
        &["BITFIELD", "f", "SET", "u8", "0", "200"],
        &["BITFIELD", "f", "INCRBY", "u8", "0", "0", "GET", "u8", "0"],
        &[
            "BITFIELD", "f", "SET", "i4", "0", "-4", "OVERFLOW", "FAIL", "INCRBY", "u4", "4", "99",
        ],
        &["BITFIELD", "missing", "GET", "u8", "0"],
        &["SETRANGE", "b", "0", ""],
    ] {
        let _: redis::Value = run(&mut con, args);
        assert_eq!(changes(&mut con), before, "{args:?}");
    }
    // What changes a bit, or grows the string, counts.
    let _: i64 = run(&mut con, &["SETBIT", "b", "3", "0"]);
    let after_setbit = changes(&mut con);
    assert!(after_setbit > before);
    let _: i64 = run(&mut con, &["SETBIT", "b", "15", "0"]);
    let after_growth = changes(&mut con);
    assert!(after_growth > after_setbit, "a string that grows changes");
    let _: Vec<i64> = run(&mut con, &["BITFIELD", "f", "INCRBY", "u8", "0", "1"]);
    assert!(changes(&mut con) > after_growth);
}
