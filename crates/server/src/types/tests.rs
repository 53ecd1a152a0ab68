//! The types' semantics, checked in-process against both engines: the in-memory twin, which
//! makes these checks take milliseconds, and RocksDB, which the server runs on. A change to a
//! type is checked here without starting a server; the tests over TCP check the wire.

use std::sync::Arc;

use bytes::Bytes;
use shale_storage::metadata::KeyKind;
use shale_storage::{Engine, MemoryEngine, RocksConfig, RocksEngine};

use super::bitmap::Unit;
use super::list::End;
use super::set::SetOp;
use super::string::SetOptions;
use super::zset::{RangeBy, RangeSpec, ScoreBound, ZaddOptions};
use super::ExpireCondition;
use crate::error::Error;
use crate::keyspace::{now_ms, Keyspace};

/// Runs `check` on a fresh keyspace of 16 databases over each engine.
fn on_both_engines(check: impl Fn(&Keyspace)) {
    let dir = tempfile::tempdir().expect("temp dir");
    let rocks = RocksEngine::open(&dir.path().join("db"), &RocksConfig::default()).expect("open");
    let engines: [(&str, Arc<dyn Engine>); 2] = [
        ("memory", Arc::new(MemoryEngine::default())),
        ("rocksdb", Arc::new(rocks)),
    ];
    for (name, engine) in engines {
        let keyspace = Keyspace::open(engine, 16).expect("keyspace");
        eprintln!("on {name}");
        check(&keyspace);
    }
}

fn b(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

fn bs(texts: &[&str]) -> Vec<Bytes> {
    texts.iter().map(|t| b(t)).collect()
}

#[test]
fn strings_set_grow_count_and_refuse_other_types() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        db.set(b"s", b("10"), SetOptions::default()).unwrap();
        assert_eq!(db.incr_by(b"s", 5).unwrap(), 15);
        assert_eq!(db.append(b"s", b"x", 1 << 20).unwrap(), 3);
        assert!(matches!(db.incr_by(b"s", 1), Err(Error::NotInteger)));
        assert_eq!(db.setrange(b"s", 10, b"!", 1 << 20).unwrap(), 11);
        assert_eq!(db.getrange(b"s", 0, -1).unwrap(), b("15x\0\0\0\0\0\0\0!"));
        assert_eq!(db.get(b"missing").unwrap(), None);
        db.hset(b"h", &[(b("f"), b("v"))]).unwrap();
        assert!(matches!(db.get(b"h"), Err(Error::WrongType)));
        assert!(db
            .mset(&[(b("a"), b("1")), (b("b"), b("2"))], true)
            .unwrap());
        assert!(!db
            .mset(&[(b("b"), b("3")), (b("c"), b("4"))], true)
            .unwrap());
        assert_eq!(
            db.mget(&bs(&["a", "b", "c"])).unwrap(),
            [Some(b("1")), Some(b("2")), None]
        );
    });
}

#[test]
fn long_bitmaps_count_and_find_bits_across_absent_fragments() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        db.setbit(b"bits", (1 << 32) - 1, true).unwrap();
        db.setbit(b"bits", 9, true).unwrap();
        assert_eq!(db.bitcount(b"bits", None).unwrap(), 2);
        assert_eq!(
            db.bitpos(b"bits", true, Some(2), None, Unit::Byte).unwrap(),
            (1 << 32) - 1
        );
        assert_eq!(
            db.bitpos(b"bits", false, Some(4096), None, Unit::Byte)
                .unwrap(),
            32768
        );
        assert_eq!(
            db.bitpos(b"bits", false, Some(9), Some(9), Unit::Bit)
                .unwrap(),
            -1
        );
        assert_eq!(db.bitcount(b"bits", Some((10, -1, Unit::Bit))).unwrap(), 1);
    });
}

#[test]
fn hashes_set_increment_and_delete_fields() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        let pairs: Vec<(Bytes, Bytes)> = (0..300)
            .map(|i| (b(&format!("f{i}")), b(&i.to_string())))
            .collect();
        // Past the packed limit, so the fields become records.
        assert_eq!(db.hset(b"h", &pairs).unwrap(), 300);
        assert_eq!(db.hset(b"h", &pairs[..10]).unwrap(), 0);
        assert_eq!(db.hincrby(b"h", b"f7", 3).unwrap(), 10);
        assert_eq!(db.hdel(b"h", &bs(&["f1", "f2", "nope"])).unwrap(), 2);
        assert_eq!(db.hlen(b"h").unwrap(), 298);
        assert_eq!(db.hget(b"h", b"f299").unwrap(), Some(b("299")));
        let all = db.hgetall(b"h").unwrap().into_pairs();
        assert_eq!(all.len(), 298);
        let fields: Vec<Bytes> = all.into_iter().map(|(f, _)| f).collect();
        assert_eq!(db.hdel(b"h", &fields).unwrap(), 298);
        assert_eq!(db.key_type(b"h").unwrap(), None, "an emptied hash is gone");
    });
}

#[test]
fn lists_push_pop_insert_remove_and_trim_across_chunks() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        let items: Vec<Bytes> = (0..500).map(|i| b(&i.to_string())).collect();
        let mut model: Vec<Bytes> = items.clone();
        assert_eq!(db.push(b"l", End::Right, &items, false).unwrap(), 500);
        assert_eq!(db.pop(b"l", End::Left, 2).unwrap(), Some(bs(&["0", "1"])));
        model.drain(..2);
        assert_eq!(db.linsert(b"l", true, b"250", &b("x")).unwrap(), 499);
        let at = model.iter().position(|v| v == "250").unwrap();
        model.insert(at, b("x"));
        assert_eq!(db.lrem(b"l", 0, b"100").unwrap(), 1);
        model.retain(|v| v != "100");
        db.ltrim(b"l", 3, -4).unwrap();
        model = model[3..model.len() - 3].to_vec();
        let read: Vec<Bytes> = db.lrange(b"l", 0, -1).unwrap().into_items().collect();
        assert_eq!(read, model);
        assert_eq!(db.lindex(b"l", -1).unwrap(), model.last().cloned());
        assert_eq!(db.llen(b"l").unwrap(), model.len() as i64);
    });
}

#[test]
fn sets_add_remove_pop_and_combine() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        let members: Vec<Bytes> = (0..200).map(|i| b(&format!("m{i}"))).collect();
        assert_eq!(db.sadd(b"a", &members).unwrap(), 200);
        assert_eq!(db.sadd(b"b", &members[100..]).unwrap(), 100);
        assert_eq!(db.srem(b"a", &bs(&["m0", "zz"])).unwrap(), 1);
        assert_eq!(
            db.set_algebra(SetOp::Inter, &bs(&["a", "b"]))
                .unwrap()
                .len(),
            100
        );
        assert_eq!(
            db.set_algebra(SetOp::Diff, &bs(&["a", "b"])).unwrap().len(),
            99
        );
        assert_eq!(
            db.set_algebra(SetOp::Union, &bs(&["a", "b", "none"]))
                .unwrap()
                .len(),
            199
        );
        let popped = db.spop(b"b", 30).unwrap();
        assert_eq!(popped.len(), 30);
        assert_eq!(db.scard(b"b").unwrap(), 70);
        assert!(db.smismember(b"b", &popped).unwrap().iter().all(|&m| !m));
        assert!(db.smove(b"a", b"c", b"m5").unwrap());
        assert_eq!(db.smembers(b"c").unwrap(), [b("m5")]);
    });
}

fn bound(value: f64, exclusive: bool) -> ScoreBound {
    ScoreBound { value, exclusive }
}

#[test]
fn sorted_sets_rank_range_and_remove_by_score() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        let pairs: Vec<(f64, Bytes)> = (0..300).map(|i| (i as f64, b(&format!("m{i}")))).collect();
        assert_eq!(
            db.zadd(b"z", ZaddOptions::default(), &pairs).unwrap().0,
            300
        );
        assert_eq!(db.zrank(b"z", b"m42", false).unwrap(), Some((42, 42.0)));
        assert_eq!(db.zrank(b"z", b"m42", true).unwrap(), Some((257, 42.0)));
        let removed = db
            .zremrange(
                b"z",
                RangeBy::Score(bound(f64::NEG_INFINITY, false), bound(100.0, true)),
            )
            .unwrap();
        assert_eq!(removed, 100);
        let first = db
            .zrange(
                b"z",
                &RangeSpec {
                    by: RangeBy::Rank(0, 1),
                    rev: false,
                    limit: None,
                },
            )
            .unwrap();
        assert_eq!(first, [(b("m100"), 100.0), (b("m101"), 101.0)]);
        assert_eq!(db.zpop(b"z", true, 1).unwrap(), [(b("m299"), 299.0)]);
        assert_eq!(db.zcard(b"z").unwrap(), 199);
        assert_eq!(db.zscore(b"z", b"m5").unwrap(), None);
    });
}

#[test]
fn keys_expire_rename_and_count_per_database() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        db.set(b"k", b("v"), SetOptions::default()).unwrap();
        db.sadd(b"s", &bs(&["a"])).unwrap();
        assert!(db.rename(b"k", b"k2", false).unwrap());
        assert_eq!(db.get(b"k2").unwrap(), Some(b("v")));
        let past = now_ms() as i64 - 1;
        assert!(db
            .set_expiry(b"s", past, ExpireCondition::default())
            .unwrap());
        assert_eq!(db.key_type(b"s").unwrap(), None, "expired at once");
        assert_eq!(db.key_type(b"k2").unwrap(), Some(KeyKind::String));
        assert_eq!(db.delete(&bs(&["k2", "nope"])).unwrap(), 1);
        let other = ks.db(3);
        other.set(b"x", b("1"), SetOptions::default()).unwrap();
        db.swap_with(3).unwrap();
        assert_eq!(ks.db(0).get(b"x").unwrap(), Some(b("1")));
        assert_eq!(ks.db(3).get(b"x").unwrap(), None);
        ks.db(0).flush(false).unwrap();
        assert_eq!(ks.db(0).get(b"x").unwrap(), None);
    });
}

#[test]
fn a_transaction_reads_its_own_writes_and_commits_them_whole() {
    on_both_engines(|ks| {
        let txn = ks
            .begin(&[(0, b"a".as_slice()), (0, b"b".as_slice())])
            .unwrap();
        let db = ks.db_in(0, Some(&txn), None, None);
        db.set(b"a", b("1"), SetOptions::default()).unwrap();
        assert_eq!(db.incr_by(b"a", 1).unwrap(), 2);
        db.push(b"b", End::Left, &bs(&["x"]), false).unwrap();
        assert_eq!(ks.db(0).get(b"a").unwrap(), None, "not before the commit");
        ks.commit(&txn).unwrap();
        drop(txn);
        assert_eq!(ks.db(0).get(b"a").unwrap(), Some(b("2")));
        assert_eq!(ks.db(0).llen(b"b").unwrap(), 1);
    });
}

#[test]
fn roaring_bitmaps_count_rank_and_find_zeros_past_missing_containers() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        // Containers 0, 1 and 3; container 2 is missing.
        let offsets: Vec<u32> = (0..70_000).step_by(7).chain([3 << 16]).collect();
        let set = db.tr_setbits(b"r", &offsets, true).unwrap();
        assert_eq!(set, offsets.len() as u64);
        assert_eq!(db.tr_bitcount(b"r", None).unwrap(), offsets.len() as u64);
        assert_eq!(
            db.tr_rank(b"r", 3 << 16).unwrap(),
            Some(offsets.len() as u64)
        );
        // The first zero of container 2, which holds nothing, and the last one overall.
        let zeros_before_2 = (2u64 << 16) - (offsets.len() as u64 - 1);
        let nth = zeros_before_2 as i64 + 1;
        assert_eq!(db.tr_bitpos(b"r", false, nth).unwrap(), Some(2 << 16));
        assert_eq!(db.tr_bitpos(b"r", false, -1).unwrap(), Some((3 << 16) - 1));
        let and = crate::types::roaring::BitOp::And;
        assert_eq!(db.tr_bitop(and, b"and", &bs(&["r", "none"])).unwrap(), 0);
    });
}

#[test]
fn hyperloglogs_count_what_was_added_within_their_error() {
    on_both_engines(|ks| {
        let db = ks.db(0);
        let a: Vec<Bytes> = (0..5_000).map(|i| b(&format!("a{i}"))).collect();
        let c: Vec<Bytes> = (0..5_000).map(|i| b(&format!("c{i}"))).collect();
        assert!(db.pfadd(b"ha", &a, 3000).unwrap());
        assert!(!db.pfadd(b"ha", &a[..10], 3000).unwrap(), "nothing new");
        db.pfadd(b"hc", &c, 3000).unwrap();
        let one = db.pfcount(&bs(&["ha"])).unwrap() as f64;
        assert!((one - 5_000.0).abs() < 5_000.0 * 0.02, "{one}");
        let both = db.pfcount(&bs(&["ha", "hc"])).unwrap() as f64;
        assert!((both - 10_000.0).abs() < 10_000.0 * 0.02, "{both}");
    });
}

#[test]
fn the_reaper_removes_due_keys_and_names_them() {
    on_both_engines(|ks| {
        let db = ks.db(2);
        for i in 0..10 {
            db.set(format!("k{i}").as_bytes(), b("v"), SetOptions::default())
                .unwrap();
        }
        // Far enough ahead that no key is already past it when its expiry is set (which
        // deletes it at once), then reaped as of a later time.
        let soon = now_ms() as i64 + 60_000;
        for i in 0..4 {
            db.set_expiry(format!("k{i}").as_bytes(), soon, ExpireCondition::default())
                .unwrap();
        }
        let mut reaped = Vec::new();
        let removed = db
            .reap_expired(soon as u64 + 10, 100, &mut |key| reaped.push(key.to_vec()))
            .unwrap();
        assert_eq!(removed, 4);
        reaped.sort();
        assert_eq!(
            reaped,
            [
                b"k0".to_vec(),
                b"k1".to_vec(),
                b"k2".to_vec(),
                b"k3".to_vec()
            ]
        );
        let page = db.scan(0, None, 100, None).unwrap();
        assert_eq!(page.keys.len(), 6);
    });
}
