//! Roaring bitmap commands (`TR.*`) against a real server, following the spec's examples.

mod common;

use common::{fails, run, TestServer};
use rand::{Rng, SeedableRng};
use redis::Value;
use roaring::RoaringBitmap;
use shale_storage::Cf;

const BAD_U32: &str = "ERR bad arguments, must be unsigned 32-bit integer";
const INVALID: &str = "ERR invalid arguments, maybe out of range or illegal";
const WRONG: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn bits(con: &mut redis::Connection, key: &str) -> Vec<u32> {
    run(con, &["TR.RANGE", key, "0", "4294967295"])
}

#[test]
fn writes_follow_the_spec() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["TR.SETBIT", "foo", "5", "0"]), 0);
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "foo"]),
        0,
        "setting 0 on a missing key creates nothing"
    );
    assert_eq!(run::<i64>(&mut con, &["TR.SETBIT", "foo", "5", "1"]), 0);
    assert_eq!(run::<i64>(&mut con, &["TR.SETBIT", "foo", "5", "1"]), 1);
    assert_eq!(run::<String>(&mut con, &["TYPE", "foo"]), "tairroaring");
    assert_eq!(run::<i64>(&mut con, &["TR.SETBIT", "foo", "5", "0"]), 1);
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "foo"]),
        0,
        "an emptied bitmap is deleted"
    );

    run::<()>(&mut con, &["TR.SETBITS", "s", "1", "3", "5", "7", "9"]);
    assert_eq!(
        run::<i64>(&mut con, &["TR.SETBITS", "s", "5", "7", "9", "11", "13"]),
        7
    );
    assert_eq!(
        run::<i64>(&mut con, &["TR.CLEARBITS", "s", "1", "2", "3"]),
        2
    );
    assert_eq!(run::<i64>(&mut con, &["TR.CLEARBITS", "nokey", "1"]), 0);
    assert_eq!(bits(&mut con, "s"), [5, 7, 9, 11, 13]);

    run::<()>(&mut con, &["TR.SETINTARRAY", "f", "0", "2", "3", "5"]);
    assert_eq!(run::<i64>(&mut con, &["TR.FLIPRANGE", "f", "0", "5"]), 2);
    assert_eq!(bits(&mut con, "f"), [1, 4]);
    assert_eq!(
        run::<i64>(&mut con, &["TR.FLIPRANGE", "newflip", "2", "4"]),
        3
    );
    assert_eq!(run::<i64>(&mut con, &["TR.SETRANGE", "r", "10", "19"]), 10);
    assert_eq!(
        run::<i64>(&mut con, &["TR.SETRANGE", "r", "65530", "65540"]),
        21,
        "across containers"
    );

    run::<()>(&mut con, &["TR.SETBITS", "a", "0"]);
    assert_eq!(
        run::<i64>(&mut con, &["TR.APPENDBITARRAY", "a", "1", "1101"]),
        4
    );
    assert_eq!(
        run::<String>(&mut con, &["TR.RANGEBITARRAY", "a", "0", "5"]),
        "101101"
    );
    assert_eq!(
        run::<i64>(&mut con, &["TR.APPENDBITARRAY", "b", "-1", "011"]),
        2
    );
    assert_eq!(bits(&mut con, "b"), [1, 2]);
    assert_eq!(
        run::<String>(&mut con, &["TR.SETBITARRAY", "c", "10101001"]),
        "OK"
    );
    assert_eq!(bits(&mut con, "c"), [0, 2, 4, 7]);
    assert_eq!(
        run::<String>(&mut con, &["TR.SETINTARRAY", "c", "100", "4294967295"]),
        "OK"
    );
    assert_eq!(bits(&mut con, "c"), [100, 4294967295]);
    assert_eq!(
        run::<String>(&mut con, &["TR.APPENDINTARRAY", "c", "1"]),
        "OK"
    );
    assert_eq!(bits(&mut con, "c"), [1, 100, 4294967295]);
    assert_eq!(run::<String>(&mut con, &["TR.OPTIMIZE", "c"]), "OK");
    assert_eq!(
        run::<Value>(&mut con, &["TR.OPTIMIZE", "nokey"]),
        Value::Nil
    );

    assert_eq!(
        fails(&mut con, &["TR.SETBIT", "x", "4294967296", "1"]),
        BAD_U32
    );
    assert_eq!(fails(&mut con, &["TR.SETBIT", "x", "-1", "1"]), BAD_U32);
    assert_eq!(fails(&mut con, &["TR.SETBIT", "x", "1", "2"]), INVALID);
    assert_eq!(fails(&mut con, &["TR.SETRANGE", "x", "5", "1"]), INVALID);
    assert_eq!(fails(&mut con, &["TR.SETBITARRAY", "x", "10a1"]), INVALID);
    assert_eq!(
        fails(&mut con, &["TR.APPENDBITARRAY", "x", "4294967295", "1"]),
        INVALID
    );
    assert_eq!(fails(&mut con, &["TR.SETBITS", "x", "1", "abc"]), BAD_U32);
    assert_eq!(
        fails(&mut con, &["TR.SETBIT", "x", "1"]),
        "ERR wrong number of arguments for 'tr.setbit' command"
    );
}

#[test]
fn reads_follow_the_spec() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["TR.SETRANGE", "n", "1", "9"]);
    assert_eq!(run::<i64>(&mut con, &["TR.GETBIT", "n", "9"]), 1);
    assert_eq!(run::<i64>(&mut con, &["TR.GETBIT", "n", "10"]), 0);
    assert_eq!(run::<i64>(&mut con, &["TR.GETBIT", "nokey", "10"]), 0);
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["TR.GETBITS", "n", "0", "1", "1", "100"]),
        [0, 1, 1, 0]
    );
    assert!(run::<Vec<i64>>(&mut con, &["TR.GETBITS", "nokey", "1"]).is_empty());
    assert_eq!(run::<i64>(&mut con, &["TR.BITCOUNT", "n"]), 9);
    assert_eq!(run::<i64>(&mut con, &["TR.BITCOUNT", "n", "0", "5"]), 5);
    assert_eq!(run::<i64>(&mut con, &["TR.BITCOUNT", "n", "9", "20"]), 1);
    assert_eq!(run::<i64>(&mut con, &["TR.BITCOUNT", "nokey"]), 0);
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "n", "1"]), 1);
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "n", "0"]), 0);
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "n", "1", "2"]), 2);
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "n", "1", "-4"]), 6);
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "n", "0", "2"]), 10);
    assert_eq!(
        run::<i64>(&mut con, &["TR.BITPOS", "n", "0", "-1"]),
        0,
        "zeros below the maximum only"
    );
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "n", "0", "-2"]), -1);
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "n", "1", "10"]), -1);
    assert_eq!(run::<i64>(&mut con, &["TR.BITPOS", "nokey", "1"]), -1);
    assert_eq!(fails(&mut con, &["TR.BITPOS", "n", "1", "0"]), INVALID);
    assert_eq!(run::<i64>(&mut con, &["TR.MIN", "n"]), 1);
    assert_eq!(run::<i64>(&mut con, &["TR.MAX", "n"]), 9);
    assert_eq!(run::<i64>(&mut con, &["TR.MIN", "nokey"]), -1);
    assert_eq!(run::<i64>(&mut con, &["TR.RANK", "n", "5"]), 5);
    assert_eq!(run::<i64>(&mut con, &["TR.RANK", "n", "1000000"]), 9);
    assert_eq!(run::<i64>(&mut con, &["TR.RANK", "nokey", "5"]), -1);
    assert_eq!(
        run::<Vec<i64>>(&mut con, &["TR.RANGE", "n", "3", "5"]),
        [3, 4, 5]
    );
    assert!(run::<Vec<i64>>(&mut con, &["TR.RANGE", "nokey", "3", "5"]).is_empty());
    assert_eq!(
        run::<Value>(&mut con, &["TR.RANGEBITARRAY", "nokey", "0", "5"]),
        Value::Nil
    );
    assert_eq!(fails(&mut con, &["TR.RANGE", "n", "5", "3"]), INVALID);

    run::<()>(&mut con, &["TR.SETBITS", "s", "1", "2", "3", "10"]);
    assert_eq!(
        run::<(i64, Vec<i64>)>(&mut con, &["TR.SCAN", "s", "0", "COUNT", "2"]),
        (3, vec![1, 2])
    );
    run::<()>(&mut con, &["TR.SETINTARRAY", "o", "1", "3", "5", "7", "9"]);
    assert_eq!(
        run::<(i64, Vec<i64>)>(&mut con, &["TR.SCAN", "o", "4", "COUNT", "2"]),
        (9, vec![5, 7])
    );
    assert_eq!(
        run::<(i64, Vec<i64>)>(&mut con, &["TR.SCAN", "o", "6"]),
        (0, vec![7, 9])
    );
    assert_eq!(
        run::<(i64, Vec<i64>)>(&mut con, &["TR.SCAN", "nokey", "0"]),
        (0, vec![])
    );

    run::<()>(&mut con, &["TR.SETRANGE", "ten", "1", "10"]);
    assert_eq!(run::<String>(&mut con, &["TR.JACCARD", "o", "ten"]), "0.5");
    assert_eq!(
        run::<String>(&mut con, &["TR.JACCARD", "nokey", "nokey2"]),
        "0"
    );
    assert_eq!(run::<i64>(&mut con, &["TR.CONTAINS", "o", "ten"]), 1);
    assert_eq!(run::<i64>(&mut con, &["TR.CONTAINS", "ten", "o"]), 0);
    assert_eq!(run::<i64>(&mut con, &["TR.CONTAINS", "nokey", "o"]), 1);

    run::<()>(&mut con, &["TR.SETINTARRAY", "st", "0", "2", "3", "5"]);
    let text: String = run(&mut con, &["TR.STAT", "st"]);
    assert_eq!(
        text,
        "cardinality: 4\r\nnumber of containers: 1\r\nmax value: 5\r\nmin value: 0\r\nsum value: 10\r\nnumber of array containers: 1\r\n\tarray container values: 4\r\n\tarray container bytes: 8\r\nnumber of bitset containers: 0\r\n\tbitset container values: 0\r\n\tbitset container bytes: 0\r\nnumber of run containers: 0\r\n\trun container values: 0\r\n\trun container bytes: 0"
    );
    let json: String = run(&mut con, &["TR.STAT", "st", "JSON"]);
    assert!(json.starts_with("{\"cardinality\":4,\"number_of_containers\":1,\"max_value\":5,\"min_value\":0,\"sum_value\":10,\"array_container\":{\"number_of_containers\":1,\"container_cardinality\":4,\"container_allocated_bytes\":8}"), "{json}");
    assert_eq!(run::<Value>(&mut con, &["TR.STAT", "nokey"]), Value::Nil);
}

#[test]
fn bitop_and_bitopcard() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["TR.SETINTARRAY", "a", "1", "2", "3", "70000"]);
    run::<()>(
        &mut con,
        &["TR.SETINTARRAY", "b", "2", "3", "4", "70000", "200000"],
    );
    assert_eq!(run::<i64>(&mut con, &["TR.BITOP", "d", "AND", "a", "b"]), 3);
    assert_eq!(bits(&mut con, "d"), [2, 3, 70000]);
    assert_eq!(run::<i64>(&mut con, &["TR.BITOP", "d", "OR", "a", "b"]), 6);
    assert_eq!(run::<i64>(&mut con, &["TR.BITOP", "d", "XOR", "a", "b"]), 3);
    assert_eq!(bits(&mut con, "d"), [1, 4, 200000]);
    assert_eq!(
        run::<i64>(&mut con, &["TR.BITOP", "d", "DIFF", "b", "a"]),
        2
    );
    run::<()>(&mut con, &["TR.SETINTARRAY", "n", "0", "2", "3", "5"]);
    assert_eq!(run::<i64>(&mut con, &["TR.BITOP", "d", "NOT", "n"]), 2);
    assert_eq!(bits(&mut con, "d"), [1, 4]);
    assert_eq!(
        run::<i64>(&mut con, &["TR.BITOPCARD", "AND", "a", "b", "nokey"]),
        0
    );
    assert_eq!(
        run::<i64>(&mut con, &["TR.BITOPCARD", "OR", "a", "nokey"]),
        4
    );
    assert_eq!(
        run::<i64>(&mut con, &["TR.BITOP", "d", "AND", "a", "nokey"]),
        0
    );
    assert_eq!(
        run::<i64>(&mut con, &["EXISTS", "d"]),
        0,
        "an empty result deletes the destination"
    );
    assert_eq!(fails(&mut con, &["TR.BITOP", "d", "DIFF", "a"]), INVALID);
    assert_eq!(
        fails(&mut con, &["TR.BITOP", "d", "NOT", "a", "b"]),
        INVALID
    );
    assert_eq!(
        fails(&mut con, &["TR.BITOP", "d", "NAND", "a", "b"]),
        INVALID
    );
    run::<()>(&mut con, &["SET", "str", "v"]);
    assert_eq!(fails(&mut con, &["TR.BITOPCARD", "OR", "a", "str"]), WRONG);
    assert_eq!(fails(&mut con, &["TR.GETBIT", "str", "1"]), WRONG);
    assert_eq!(fails(&mut con, &["TR.SETBIT", "str", "1", "1"]), WRONG);
}

#[test]
fn random_commands_match_an_in_memory_model() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut model = RoaringBitmap::new();
    let pick = |rng: &mut rand::rngs::StdRng| -> u32 {
        // Cluster offsets in a few containers, with some spread over the whole range.
        if rng.random_bool(0.8) {
            rng.random_range(0..200_000)
        } else {
            rng.random()
        }
    };
    for step in 0..600 {
        match rng.random_range(0..6) {
            0 => {
                let at = pick(&mut rng);
                let on = rng.random_bool(0.6);
                let old: i64 = run(
                    &mut con,
                    &[
                        "TR.SETBIT",
                        "m",
                        &at.to_string(),
                        if on { "1" } else { "0" },
                    ],
                );
                assert_eq!(old == 1, model.contains(at), "step {step}");
                if on {
                    model.insert(at);
                } else {
                    model.remove(at);
                }
            }
            1 => {
                let list: Vec<u32> = (0..rng.random_range(1..20))
                    .map(|_| pick(&mut rng))
                    .collect();
                let mut args = vec!["TR.SETBITS".to_string(), "m".into()];
                args.extend(list.iter().map(u32::to_string));
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                model.extend(list);
                assert_eq!(run::<u64>(&mut con, &refs), model.len(), "step {step}");
            }
            2 => {
                let start = pick(&mut rng);
                let end = start.saturating_add(rng.random_range(0..5000));
                model ^= RoaringBitmap::from_iter(start..=end);
                assert_eq!(
                    run::<u64>(
                        &mut con,
                        &["TR.FLIPRANGE", "m", &start.to_string(), &end.to_string()]
                    ),
                    model.len(),
                    "step {step}"
                );
            }
            3 => {
                let at = pick(&mut rng);
                let rank: i64 = run(&mut con, &["TR.RANK", "m", &at.to_string()]);
                let expected = if model.is_empty() && step == 0 {
                    -1
                } else {
                    model.rank(at) as i64
                };
                if run::<i64>(&mut con, &["EXISTS", "m"]) == 1 {
                    assert_eq!(rank, expected, "step {step}");
                }
            }
            4 => {
                let start = pick(&mut rng);
                let end = start.saturating_add(rng.random_range(0..100_000));
                let count: u64 = run(
                    &mut con,
                    &["TR.BITCOUNT", "m", &start.to_string(), &end.to_string()],
                );
                assert_eq!(count, model.range_cardinality(start..=end), "step {step}");
            }
            _ => {
                let list: Vec<u32> = (0..rng.random_range(1..10))
                    .map(|_| pick(&mut rng))
                    .collect();
                let mut args = vec!["TR.CLEARBITS".to_string(), "m".into()];
                args.extend(list.iter().map(u32::to_string));
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                let before = model.len();
                for v in &list {
                    model.remove(*v);
                }
                assert_eq!(
                    run::<u64>(&mut con, &refs),
                    before - model.len(),
                    "step {step}"
                );
            }
        }
        // The bitmap starts packed in its metadata and outgrows it on the way: check both.
        if step % 100 == 99 {
            assert_eq!(bits(&mut con, "m"), model.iter().collect::<Vec<_>>());
        }
    }
    assert_eq!(bits(&mut con, "m"), model.iter().collect::<Vec<_>>());
    assert_eq!(
        run::<i64>(&mut con, &["TR.MIN", "m"]),
        model.min().map_or(-1, |v| v as i64)
    );
    assert_eq!(
        run::<i64>(&mut con, &["TR.MAX", "m"]),
        model.max().map_or(-1, |v| v as i64)
    );
    assert_eq!(run::<u64>(&mut con, &["TR.BITCOUNT", "m"]), model.len());
    if let Some(nth) = model.select(model.len() as u32 / 2) {
        let pos: i64 = run(
            &mut con,
            &["TR.BITPOS", "m", "1", &(model.len() / 2 + 1).to_string()],
        );
        assert_eq!(pos, nth as i64);
    }
}

fn setbits(con: &mut redis::Connection, key: &str, offsets: impl IntoIterator<Item = u32>) {
    let mut cmd = redis::cmd("TR.SETBITS");
    cmd.arg(key);
    for offset in offsets {
        cmd.arg(offset);
    }
    cmd.query::<()>(con).unwrap();
}

#[test]
fn small_bitmaps_live_in_their_metadata_until_they_outgrow_it() {
    let mut server = TestServer::start();
    let mut con = server.client();
    // 100 bits in 100 containers pack into well under 4 KB: no container records.
    let sparse: Vec<u32> = (0..100u32).map(|i| i * 5 * 65_537).collect();
    setbits(&mut con, "small", sparse.iter().copied());
    run::<i64>(&mut con, &["TR.SETBIT", "small", "7", "1"]);
    run::<i64>(&mut con, &["TR.SETBIT", "small", "0", "0"]);
    run::<()>(&mut con, &["TR.OPTIMIZE", "small"]);
    run::<()>(
        &mut con,
        &["TR.SETINTARRAY", "copy", "1", "70000", "4000000000"],
    );
    drop(con);
    server.stop();
    assert_eq!(server.count_records(Cf::Data), 0);
    server.start_again();
    let mut con = server.client();
    let mut expected: Vec<u32> = sparse[1..].to_vec();
    expected.insert(0, 7);
    assert_eq!(bits(&mut con, "small"), expected);
    assert_eq!(run::<u64>(&mut con, &["TR.BITCOUNT", "small"]), 100);
    assert_eq!(bits(&mut con, "copy"), vec![1, 70000, 4000000000]);

    // 3,000 bits in one container (6 KB as an array) no longer fit: one record per container.
    setbits(&mut con, "small", (0..3000u32).map(|i| 2 * i + 1_000_000));
    expected.extend((0..3000u32).map(|i| 2 * i + 1_000_000));
    expected.sort_unstable();
    assert_eq!(bits(&mut con, "small"), expected);
    let containers = expected
        .iter()
        .map(|v| v >> 16)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    drop(con);
    server.stop();
    assert_eq!(server.count_records(Cf::Data), containers);
    server.start_again();
    let mut con = server.client();
    assert_eq!(bits(&mut con, "small"), expected);
    assert_eq!(
        run::<u64>(&mut con, &["TR.BITCOUNT", "small"]),
        expected.len() as u64
    );
    assert_eq!(
        run::<u64>(&mut con, &["TR.BITOPCARD", "AND", "small", "copy"]),
        0
    );
    // Deleting either kind leaves nothing behind.
    assert_eq!(run::<i64>(&mut con, &["DEL", "small", "copy"]), 2);
    drop(con);
    server.stop();
    assert_eq!(server.count_records(Cf::Data), 0);
}

#[test]
fn sparse_bitmap_over_the_whole_range_survives_restart() {
    let mut server = TestServer::start();
    let mut con = server.client();
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let mut model = RoaringBitmap::new();
    for _ in 0..100 {
        let mut cmd = redis::cmd("TR.SETBITS");
        cmd.arg("big");
        for _ in 0..10_000 {
            let v: u32 = rng.random();
            model.insert(v);
            cmd.arg(v);
        }
        cmd.query::<()>(&mut con).unwrap();
    }
    assert_eq!(run::<u64>(&mut con, &["TR.BITCOUNT", "big"]), model.len());
    drop(con);
    server.restart();
    let mut con = server.client();
    assert_eq!(run::<u64>(&mut con, &["TR.BITCOUNT", "big"]), model.len());
    assert_eq!(
        run::<i64>(&mut con, &["TR.MAX", "big"]),
        model.max().unwrap() as i64
    );
    let probe = model.select(123_456).unwrap();
    assert_eq!(
        run::<i64>(&mut con, &["TR.GETBIT", "big", &probe.to_string()]),
        1
    );
    // One TR.SETBIT writes one small record: the container and the metadata.
    let before: u64 = info_bytes_written(&mut con);
    let fresh = (0..)
        .map(|i| probe.wrapping_add(i))
        .find(|v| !model.contains(*v))
        .unwrap();
    assert_eq!(
        run::<i64>(&mut con, &["TR.SETBIT", "big", &fresh.to_string(), "1"]),
        0
    );
    let written = info_bytes_written(&mut con) - before;
    assert!(written < 4096, "one TR.SETBIT wrote {written} bytes");
}

fn info_bytes_written(con: &mut redis::Connection) -> u64 {
    let info: String = run(con, &["INFO", "rocksdb"]);
    info.lines()
        .find_map(|l| l.strip_prefix("bytes_written:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}
