//! Replication between real shale-server processes: full sync, streaming, partial resyncs,
//! read-only replicas, WAIT, promotion.

mod common;

use std::time::Duration;

use common::{fails, info_field, run, wait_until, TestServer};

/// Databases the comparisons read.
const DATABASES: [u8; 3] = [0, 1, 2];

fn start_replica_of(master: &TestServer) -> TestServer {
    TestServer::start_with(&["--replicaof", &format!("127.0.0.1 {}", master.port)])
}

fn info_text(con: &mut redis::Connection, section: &str) -> String {
    run(con, &["INFO", section])
}

fn link_up(replica: &TestServer) -> bool {
    info_text(&mut replica.client(), "replication").contains("master_link_status:up")
}

/// Waits until `replica`'s link is up and it has every write `master` has.
fn wait_synced(master: &TestServer, replica: &TestServer) {
    let mut master_con = master.client();
    let mut replica_con = replica.client();
    wait_until("the replica caught up", || {
        let wanted = info_field(&mut master_con, "replication", "master_repl_offset");
        link_up(replica)
            && info_field(&mut replica_con, "replication", "slave_repl_offset") == wanted
    });
}

/// Every key of the compared databases with its type, value and whether it has a TTL, read
/// the way a client reads each type.
fn dataset(server: &TestServer) -> Vec<String> {
    let mut con = server.client();
    let mut out = Vec::new();
    for db in DATABASES {
        run::<()>(&mut con, &["SELECT", &db.to_string()]);
        let mut keys: Vec<String> = run(&mut con, &["KEYS", "*"]);
        keys.sort();
        for key in keys {
            let kind: String = run(&mut con, &["TYPE", &key]);
            let value = match kind.as_str() {
                "string" => format!("{:?}", run::<Vec<u8>>(&mut con, &["GET", &key])),
                "hash" => {
                    let mut pairs: Vec<(String, String)> = run(&mut con, &["HGETALL", &key]);
                    pairs.sort();
                    format!("{pairs:?}")
                }
                "list" => format!(
                    "{:?}",
                    run::<Vec<String>>(&mut con, &["LRANGE", &key, "0", "-1"])
                ),
                "set" => {
                    let mut members: Vec<String> = run(&mut con, &["SMEMBERS", &key]);
                    members.sort();
                    format!("{members:?}")
                }
                "zset" => format!(
                    "{:?}",
                    run::<Vec<String>>(&mut con, &["ZRANGE", &key, "0", "-1", "WITHSCORES"])
                ),
                "tairroaring" => format!(
                    "{:?}",
                    run::<Vec<i64>>(&mut con, &["TR.RANGE", &key, "0", "100000"])
                ),
                other => panic!("unexpected type {other}"),
            };
            let ttl: i64 = run(&mut con, &["PTTL", &key]);
            out.push(format!("{db} {key} {kind} {value} ttl={}", ttl > 0));
        }
    }
    out
}

/// DEBUG DIGEST: one line for the whole data set.
fn digest(server: &TestServer) -> String {
    run(&mut server.client(), &["DEBUG", "DIGEST"])
}

/// Keys of every type, in three databases.
fn fill(master: &TestServer, round: u32) {
    let mut con = master.client();
    for db in DATABASES {
        run::<()>(&mut con, &["SELECT", &db.to_string()]);
        for i in 0..50 {
            let n = format!("{round}-{i}");
            run::<()>(&mut con, &["SET", &format!("s{n}"), &format!("v{n}")]);
            run::<()>(&mut con, &["SET", &format!("t{n}"), "x", "EX", "1000"]);
            run::<()>(&mut con, &["HSET", &format!("h{}", i % 5), &n, "v"]);
            run::<()>(&mut con, &["RPUSH", &format!("l{}", i % 5), &n]);
            run::<()>(&mut con, &["SADD", &format!("z{}", i % 5), &n]);
            run::<()>(
                &mut con,
                &["ZADD", &format!("o{}", i % 5), &i.to_string(), &n],
            );
            run::<()>(
                &mut con,
                &["SETBIT", "bits", &(i * 37 + round).to_string(), "1"],
            );
            run::<()>(
                &mut con,
                &["TR.SETBIT", "roar", &(i * 1000 + round).to_string(), "1"],
            );
            run::<()>(&mut con, &["PFADD", "hll", &n]);
        }
        // A large collection, deleted by range deletes.
        let members: Vec<String> = (0..300).map(|i| format!("m{round}-{i}")).collect();
        let mut args = vec!["SADD", "big"];
        args.extend(members.iter().map(String::as_str));
        run::<()>(&mut con, &args);
    }
}

#[test]
fn a_replica_gets_every_type_by_full_sync_and_then_every_write() {
    let master = TestServer::start();
    fill(&master, 0);
    let replica = start_replica_of(&master);
    wait_synced(&master, &replica);
    assert_eq!(dataset(&replica), dataset(&master));
    let mut master_con = master.client();
    assert_eq!(info_field(&mut master_con, "stats", "sync_full"), 1);

    // Writes of every kind while it follows: transactions, scripts, pipelines, expiries,
    // deletes of large collections, FLUSHDB, SWAPDB.
    fill(&master, 1);
    let mut con = master.client();
    redis::pipe()
        .cmd("MULTI")
        .cmd("INCR")
        .arg("counter")
        .cmd("LPUSH")
        .arg("l0")
        .arg("in-multi")
        .cmd("EXEC")
        .query::<()>(&mut con)
        .expect("transaction");
    run::<()>(
        &mut con,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], 'a') redis.call('DEL', KEYS[2])",
            "2",
            "scripted",
            "s1-1",
        ],
    );
    let mut pipe = redis::pipe();
    for i in 0..100 {
        pipe.cmd("SET").arg(format!("p{i}")).arg(i);
    }
    pipe.query::<()>(&mut con).expect("pipeline");
    run::<()>(&mut con, &["SET", "short", "x", "PX", "100"]);
    run::<()>(&mut con, &["DEL", "big"]);
    run::<()>(&mut con, &["SELECT", "1"]);
    run::<()>(&mut con, &["FLUSHDB"]);
    run::<()>(&mut con, &["SET", "after-flush", "1"]);
    run::<()>(&mut con, &["SWAPDB", "1", "2"]);
    std::thread::sleep(Duration::from_millis(300));
    wait_synced(&master, &replica);
    let replicated = dataset(&replica);
    assert_eq!(replicated, dataset(&master));
    assert_eq!(digest(&replica), digest(&master));
    assert_ne!(digest(&master), "0".repeat(40));
    assert!(replicated.iter().any(|k| k.starts_with("2 after-flush")));
    assert!(
        !replicated.iter().any(|k| k.contains(" short ")),
        "expired on the master"
    );

    let mut replica_con = replica.client();
    for db in DATABASES {
        run::<()>(&mut master_con, &["SELECT", &db.to_string()]);
        run::<()>(&mut replica_con, &["SELECT", &db.to_string()]);
        let wanted: i64 = run(&mut master_con, &["DBSIZE"]);
        assert_eq!(run::<i64>(&mut replica_con, &["DBSIZE"]), wanted, "db {db}");
    }
    assert_eq!(info_field(&mut master_con, "stats", "sync_full"), 1);
}

#[test]
fn a_replica_refuses_writes_and_wait_counts_it() {
    let master = TestServer::start();
    let replica = start_replica_of(&master);
    wait_synced(&master, &replica);
    let mut replica_con = replica.client();
    assert_eq!(
        fails(&mut replica_con, &["SET", "k", "v"]),
        "READONLY You can't write against a read only replica."
    );
    // As Redis 7.0.15 answers it, the script's line named.
    assert_eq!(
        fails(
            &mut replica_con,
            &["EVAL", "return redis.call('SET', 'k', 'v')", "0"]
        ),
        "READONLY You can't write against a read only replica. script: 5c4d62f4e30c54fb15935b5892148e5ce7374077, on @user_script:1."
    );
    assert!(fails(&mut replica_con, &["WAIT", "1", "0"]).starts_with("ERR WAIT cannot be used"));
    let role: Vec<redis::Value> = run(&mut replica_con, &["ROLE"]);
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));

    let mut con = master.client();
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(&mut con, &["WAIT", "1", "5000"]), 1);
    assert_eq!(
        run::<Option<String>>(&mut replica_con, &["GET", "k"]).as_deref(),
        Some("v")
    );
    // Nobody else to wait for: it times out with what it has.
    run::<()>(&mut con, &["SET", "k", "w"]);
    assert_eq!(run::<i64>(&mut con, &["WAIT", "2", "200"]), 1);

    let info = info_text(&mut con, "replication");
    assert!(info.contains("connected_slaves:1\r\n"), "{info}");
    assert!(
        info.contains(&format!(",port={},state=online,", replica.port)),
        "{info}"
    );
    let master_role: Vec<redis::Value> = run(&mut con, &["ROLE"]);
    assert_eq!(master_role[0], redis::Value::BulkString(b"master".to_vec()));
}

#[test]
fn a_dropped_or_stopped_replica_continues_without_a_full_sync() {
    let master = TestServer::start();
    fill(&master, 0);
    let mut replica = start_replica_of(&master);
    wait_synced(&master, &replica);
    let mut con = master.client();
    assert_eq!(info_field(&mut con, "stats", "sync_full"), 1);

    // CLIENT KILL TYPE master: the link reconnects and continues.
    assert_eq!(
        run::<i64>(&mut replica.client(), &["CLIENT", "KILL", "TYPE", "master"]),
        1
    );
    fill(&master, 1);
    wait_until("a partial resync", || {
        info_field(&mut con, "stats", "sync_partial_ok") == 1
    });
    wait_synced(&master, &replica);
    assert_eq!(dataset(&replica), dataset(&master));

    // Stopped while writes go on: it catches up on the same link.
    replica.signal("STOP");
    fill(&master, 2);
    std::thread::sleep(Duration::from_secs(2));
    replica.signal("CONT");
    wait_synced(&master, &replica);
    assert_eq!(dataset(&replica), dataset(&master));

    // Restarted on its data: it continues from the offset it had.
    replica.stop();
    fill(&master, 3);
    replica.start_again();
    wait_synced(&master, &replica);
    assert_eq!(dataset(&replica), dataset(&master));
    assert_eq!(info_field(&mut con, "stats", "sync_partial_ok"), 2);
    assert_eq!(info_field(&mut con, "stats", "sync_full"), 1);
    assert_eq!(info_field(&mut con, "stats", "sync_partial_err"), 0);
}

#[test]
fn a_promoted_replica_keeps_its_sibling_without_a_full_sync() {
    let mut master = TestServer::start();
    fill(&master, 0);
    let promoted = start_replica_of(&master);
    let sibling = start_replica_of(&master);
    wait_synced(&master, &promoted);
    wait_synced(&master, &sibling);
    let old_id = info_text(&mut master.client(), "replication");
    master.kill();

    let mut con = promoted.client();
    run::<()>(&mut con, &["REPLICAOF", "NO", "ONE"]);
    let info = info_text(&mut con, "replication");
    assert!(info.contains("role:master\r\n"), "{info}");
    let old_id = old_id
        .lines()
        .find_map(|l| l.strip_prefix("master_replid:"))
        .expect("old id");
    assert!(info.contains(&format!("master_replid2:{old_id}")), "{info}");
    run::<()>(&mut con, &["SET", "after-promotion", "1"]);
    fill(&promoted, 1);

    let mut sibling_con = sibling.client();
    run::<()>(
        &mut sibling_con,
        &["REPLICAOF", "127.0.0.1", &promoted.port.to_string()],
    );
    assert_eq!(
        run::<String>(
            &mut sibling_con,
            &["REPLICAOF", "127.0.0.1", &promoted.port.to_string()]
        ),
        "OK Already connected to specified master"
    );
    wait_synced(&promoted, &sibling);
    assert_eq!(dataset(&sibling), dataset(&promoted));
    assert_eq!(digest(&sibling), digest(&promoted));
    assert_eq!(info_field(&mut con, "stats", "sync_partial_ok"), 1);
    assert_eq!(info_field(&mut con, "stats", "sync_full"), 0);

    // A write on the new master makes a new collection version, above the old master's.
    run::<()>(&mut con, &["DEL", "h0"]);
    run::<()>(&mut con, &["HSET", "h0", "f", "v"]);
    wait_synced(&promoted, &sibling);
    let fields: Vec<String> = run(&mut sibling_con, &["HKEYS", "h0"]);
    assert_eq!(fields, ["f"]);
}

#[test]
fn a_replica_of_a_replica_follows_the_master_through_it() {
    let master = TestServer::start();
    fill(&master, 0);
    let middle = start_replica_of(&master);
    wait_synced(&master, &middle);
    let last = start_replica_of(&middle);
    wait_synced(&middle, &last);
    fill(&master, 1);
    wait_synced(&master, &middle);
    wait_synced(&middle, &last);
    assert_eq!(digest(&last), digest(&master));
    let info = info_text(&mut last.client(), "replication");
    assert!(
        info.contains(&format!("master_port:{}\r\n", middle.port)),
        "{info}"
    );
    let middle_info = info_text(&mut middle.client(), "replication");
    assert!(
        middle_info.contains("connected_slaves:1\r\n"),
        "{middle_info}"
    );
    // A chain shares one history: the same ID all along.
    let id = |info: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix("master_replid:"))
            .map(str::to_string)
    };
    assert_eq!(
        id(&info),
        id(&info_text(&mut master.client(), "replication"))
    );
}

#[test]
fn a_replica_killed_during_a_full_sync_starts_over_on_restart() {
    let master = TestServer::start();
    let mut con = master.client();
    // About 100 MB, so that the transfer lasts long enough to be caught in it.
    let mut pipe = redis::pipe();
    for i in 0..100u64 {
        let value: String = (0..1 << 20)
            .map(|j: u64| char::from(b'a' + ((i * 31 + j * 7) % 26) as u8))
            .collect();
        pipe.cmd("SET").arg(format!("big{i}")).arg(value).ignore();
    }
    pipe.query::<()>(&mut con).expect("load");
    let mut replica = start_replica_of(&master);
    let mut caught = false;
    wait_until("the full sync to start", || {
        let info = info_text(&mut replica.client(), "replication");
        caught = info.contains("master_sync_in_progress:1");
        caught || info.contains("master_link_status:up")
    });
    replica.kill();
    replica.start_again();
    wait_synced(&master, &replica);
    assert_eq!(digest(&replica), digest(&master));
    let data = replica.dir.path().join("data");
    let mut entries: Vec<String> = std::fs::read_dir(&data)
        .expect("data dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("db") || name == "incoming")
        .collect();
    entries.sort();
    assert_eq!(
        entries.len(),
        1,
        "what is left of the interrupted sync: {entries:?}"
    );
    if caught {
        assert_eq!(info_field(&mut con, "stats", "sync_full"), 2);
    }
}

#[test]
fn a_replica_authenticates_and_min_replicas_guards_writes() {
    let master = TestServer::start_with(&["--requirepass", "secret"]);
    let authed = || {
        redis::Client::open(format!("redis://:secret@127.0.0.1:{}/", master.port))
            .and_then(|c| c.get_connection())
            .expect("connect with the password")
    };
    let mut con = authed();
    run::<()>(&mut con, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    assert_eq!(
        fails(&mut con, &["SET", "k", "v"]),
        "NOREPLICAS Not enough good replicas to write."
    );
    let replica = TestServer::start_with(&[
        "--replicaof",
        &format!("127.0.0.1 {}", master.port),
        "--masterauth",
        "secret",
    ]);
    wait_until("the replica's link", || link_up(&replica));
    wait_until("a good replica", || {
        info_text(&mut con, "replication").contains("min_slaves_good_slaves:1\r\n")
    });
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(&mut con, &["WAIT", "1", "5000"]), 1);
    assert_eq!(
        run::<Option<String>>(&mut replica.client(), &["GET", "k"]).as_deref(),
        Some("v")
    );
}

#[test]
fn a_full_sync_under_concurrent_writes_ends_with_the_same_data() {
    let master = TestServer::start();
    fill(&master, 0);
    let port = master.port;
    let writer = std::thread::spawn(move || {
        let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection())
            .expect("connect");
        for i in 0..2000 {
            let mut pipe = redis::pipe();
            pipe.cmd("MULTI")
                .cmd("INCR")
                .arg("counter")
                .cmd("HSET")
                .arg("h-under-sync")
                .arg(i % 50)
                .arg(i)
                .cmd("EXEC")
                .cmd("SET")
                .arg(format!("under-sync:{i}"))
                .arg(i)
                .arg("PX")
                .arg(50 + i % 200);
            pipe.query::<()>(&mut con).expect("writes during the sync");
        }
    });
    let replica = start_replica_of(&master);
    writer.join().expect("writer");
    // Past every expiry written, so that both read the same keys as live whenever they read.
    std::thread::sleep(Duration::from_millis(400));
    wait_synced(&master, &replica);
    assert_eq!(digest(&replica), digest(&master));
    assert_eq!(dataset(&replica), dataset(&master));
}
