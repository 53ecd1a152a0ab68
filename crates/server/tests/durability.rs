//! Restarts, crashes and the WAL.

mod common;

use std::time::Duration;

use common::{run, TestServer};

/// Comfortably longer than the 10 ms in which buffered WAL records reach the OS.
const WAL_FLUSHED: Duration = Duration::from_millis(100);

#[test]
fn data_survives_a_clean_restart() {
    let mut server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "plain", "v"]);
    run::<()>(&mut con, &["SET", "ttl", "v", "EX", "1000"]);
    run::<()>(&mut con, &["SELECT", "4"]);
    run::<()>(&mut con, &["SET", "db4", "v"]);
    drop(con);
    server.stop();
    server.start_again();
    let mut con = server.client();
    assert_eq!(run::<String>(&mut con, &["GET", "plain"]), "v");
    assert!(run::<i64>(&mut con, &["TTL", "ttl"]) > 990);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 2);
    run::<()>(&mut con, &["SELECT", "4"]);
    assert_eq!(run::<String>(&mut con, &["GET", "db4"]), "v");
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
}

#[test]
fn acknowledged_writes_survive_sigkill_with_fsync_always() {
    let mut server = TestServer::start_with(&["--appendfsync", "always"]);
    const N: usize = 2000;
    // Several connections writing at once, so group commit has something to group.
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let url = server.url();
            std::thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                for i in (t..N).step_by(4) {
                    let _: () = redis::cmd("SET")
                        .arg(format!("key:{i}"))
                        .arg(i)
                        .query(&mut con)
                        .unwrap();
                }
                let _: i64 = redis::cmd("INCRBY")
                    .arg("counter")
                    .arg(1)
                    .query(&mut con)
                    .unwrap();
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    server.kill();
    server.start_again();
    let mut con = server.client();
    assert_eq!(run::<usize>(&mut con, &["DBSIZE"]), N + 1);
    for i in 0..N {
        assert_eq!(run::<usize>(&mut con, &["GET", &format!("key:{i}")]), i);
    }
    assert_eq!(run::<i64>(&mut con, &["GET", "counter"]), 4);
}

#[test]
fn writes_survive_sigkill_with_everysec() {
    // With everysec the WAL reaches the OS within 10 ms of a write, unsynced: a process crash
    // after that loses nothing; only a machine crash could lose the last second.
    let mut server = TestServer::start();
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("SET").arg(format!("k{i}")).arg("v").ignore();
    }
    pipe.query::<()>(&mut con).unwrap();
    std::thread::sleep(WAL_FLUSHED);
    server.kill();
    server.start_again();
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 500);
}

#[test]
fn counters_and_expiry_survive_restart() {
    let mut server = TestServer::start();
    let mut con = server.client();
    for i in 0..20 {
        run::<()>(&mut con, &["SET", &format!("short{i}"), "v", "PX", "300"]);
    }
    run::<()>(&mut con, &["SET", "long", "v"]);
    std::thread::sleep(WAL_FLUSHED);
    server.kill();
    std::thread::sleep(Duration::from_millis(400));
    server.start_again();
    let mut con = server.client();
    let size: i64 = run(&mut con, &["DBSIZE"]);
    let context: (Vec<String>, String) = (
        run(&mut con, &["KEYS", "*"]),
        run(&mut con, &["INFO", "keyspace"]),
    );
    assert_eq!(
        size, 1,
        "expired while down: not counted; live keys and counters: {context:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let info: String = run(&mut con, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=1,expires=0"), "{info}");
    let stats: String = run(&mut con, &["INFO", "stats"]);
    assert!(
        stats.contains("expired_keys:20"),
        "reaped after restart: {stats}"
    );
}

#[test]
fn byte_patches_survive_sigkill_with_fsync_always() {
    // SETBIT inside a long bitmap and PFADD to a dense HLL write patches (merge operands) of
    // fragments; WAL replay must apply them in order.
    let mut server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut con = server.client();
    run::<()>(&mut con, &["SETBIT", "bits", "99999", "1"]);
    let offsets: Vec<u64> = (0..300).map(|i| (i * 7919 + 13) % 99_999).collect();
    for offset in &offsets {
        run::<()>(&mut con, &["SETBIT", "bits", &offset.to_string(), "1"]);
    }
    for offset in offsets.iter().step_by(3) {
        run::<()>(&mut con, &["SETBIT", "bits", &offset.to_string(), "0"]);
    }
    let mut add = redis::cmd("PFADD");
    add.arg("hll");
    for i in 0..5000 {
        add.arg(format!("e{i}"));
    }
    let _: i64 = add.query(&mut con).unwrap();
    for i in 0..100 {
        run::<()>(&mut con, &["PFADD", "hll", &format!("late{i}")]);
    }
    // PFCOUNT stores the count it computed: a write, synced before its reply.
    let count: i64 = run(&mut con, &["PFCOUNT", "hll"]);
    let bits: Vec<u8> = run(&mut con, &["GET", "bits"]);
    let hll: Vec<u8> = run(&mut con, &["GET", "hll"]);
    assert_eq!(i64::from_le_bytes(hll[8..16].try_into().unwrap()), count);
    drop(con);
    server.kill();
    server.start_again();
    let mut con = server.client();
    assert_eq!(run::<Vec<u8>>(&mut con, &["GET", "bits"]), bits);
    assert_eq!(run::<Vec<u8>>(&mut con, &["GET", "hll"]), hll);
    assert_eq!(
        hll.len(),
        12304,
        "the HLL is dense, so it lives in fragments"
    );
}
