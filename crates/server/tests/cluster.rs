//! Cluster mode with real shale-server processes: the topology pushed as Apache Kvrocks
//! Controller pushes it (CLUSTERX SETNODEID and SETNODES), the replies the controller parses,
//! redirections, replicas that follow the topology, a failover by a new topology, and
//! redis-py's cluster client across the nodes.

mod common;

use std::process::Command;

use common::{fails, info_text, python, run, wait_until, TestServer};

/// Node IDs as the controller makes them: 40 characters of `[a-zA-Z0-9]`.
const IDS: [&str; 4] = [
    "kvrocksNode0000000000000000000000000000A",
    "kvrocksNode0000000000000000000000000000B",
    "kvrocksNode0000000000000000000000000000C",
    "kvrocksNode0000000000000000000000000000D",
];

fn start_node() -> TestServer {
    TestServer::start_with(&["--cluster-enabled", "yes"])
}

/// Sends every node its ID and the topology, as the controller's sync does.
fn push(nodes: &[&TestServer], topology: &str, version: i64) {
    for (node, id) in nodes.iter().zip(IDS) {
        push_to(node, id, topology, version);
    }
}

/// Sends one node its ID and the topology.
fn push_to(node: &TestServer, id: &str, topology: &str, version: i64) {
    let mut con = node.client();
    run::<()>(&mut con, &["CLUSTERX", "SETNODEID", id]);
    run::<()>(
        &mut con,
        &["CLUSTERX", "SETNODES", topology, &version.to_string()],
    );
}

/// Three masters splitting the slots as the controller does, and a replica of the first,
/// written the way `Shard.ToSlotsString` writes them (the replica's line first).
fn topology(ports: [u16; 4]) -> String {
    let [a, b, c, d] = IDS;
    format!(
        "{d} 127.0.0.1 {} slave {a}\n{a} 127.0.0.1 {} master - 0-5460\n{b} 127.0.0.1 {} master - 5461-10922\n{c} 127.0.0.1 {} master - 10923-16383\n",
        ports[3], ports[0], ports[1], ports[2]
    )
}

#[test]
fn cluster_commands_need_cluster_mode() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        fails(&mut con, &["CLUSTER", "INFO"]),
        "ERR Cluster mode is not enabled"
    );
    assert_eq!(
        fails(&mut con, &["CLUSTERX", "VERSION"]),
        "ERR Cluster mode is not enabled"
    );
    assert_eq!(
        fails(&mut con, &["READONLY"]),
        "ERR This instance has cluster support disabled"
    );
    assert_eq!(info_text(&mut con, "cluster", "cluster_enabled"), "0");
    // Without cluster mode nothing is redirected and every database is there.
    run::<()>(&mut con, &["SELECT", "3"]);
    run::<()>(&mut con, &["SET", "foo", "bar"]);
}

#[test]
fn a_node_without_a_topology_serves_no_slot() {
    let node = start_node();
    let mut con = node.client();
    assert_eq!(info_text(&mut con, "cluster", "cluster_enabled"), "1");
    // The controller looks for this text to know a node is new.
    assert_eq!(
        fails(&mut con, &["CLUSTER", "INFO"]),
        "CLUSTERDOWN The cluster is not initialized"
    );
    assert_eq!(run::<String>(&mut con, &["CLUSTERX", "VERSION"]), "-1");
    assert_eq!(run::<String>(&mut con, &["CLUSTERX", "MYID"]), "");
    assert_eq!(
        fails(&mut con, &["GET", "foo"]),
        "CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(run::<i64>(&mut con, &["CLUSTER", "KEYSLOT", "foo"]), 12182);
    assert_eq!(run::<String>(&mut con, &["PING"]), "PONG");
    assert_eq!(
        fails(&mut con, &["SELECT", "1"]),
        "ERR SELECT is not allowed in cluster mode"
    );
    run::<()>(&mut con, &["SELECT", "0"]);
    assert_eq!(
        fails(&mut con, &["REPLICAOF", "127.0.0.1", "1"]),
        "ERR REPLICAOF not allowed in cluster mode."
    );
    assert_eq!(
        fails(&mut con, &["CLUSTERX", "SETNODES", "x", "1"]),
        "ERR Invalid cluster nodes info"
    );
    assert_eq!(
        fails(&mut con, &["CLUSTERX", "SETNODEID", "short"]),
        "ERR Invalid node id"
    );
}

#[test]
fn a_cluster_redirects_replicates_fails_over_and_survives_restarts() {
    let mut nodes: Vec<TestServer> = (0..4).map(|_| start_node()).collect();
    let ports = [nodes[0].port, nodes[1].port, nodes[2].port, nodes[3].port];
    let text = topology(ports);
    push(&nodes.iter().collect::<Vec<_>>(), &text, 1);
    let [a, b, _, d] = IDS;
    let mut first = nodes[0].client();

    // CLUSTER INFO as the controller splits it: by "\r\n", then by ":".
    let info: String = run(&mut first, &["CLUSTER", "INFO"]);
    let fields: Vec<(&str, &str)> = info
        .split("\r\n")
        .filter_map(|line| line.split_once(':'))
        .collect();
    for expected in [
        ("cluster_state", "ok"),
        ("cluster_slots_assigned", "16384"),
        ("cluster_known_nodes", "4"),
        ("cluster_size", "3"),
        ("cluster_current_epoch", "1"),
        ("cluster_my_epoch", "1"),
    ] {
        assert!(fields.contains(&expected), "{expected:?} in {info:?}");
    }
    assert!(!info.contains("migrating_slot"), "{info}");

    // CLUSTER NODES as the controller parses it: "\n" lines, single spaces, 'myself' first.
    let nodes_text: String = run(&mut first, &["CLUSTER", "NODES"]);
    assert!(!nodes_text.contains('\r'));
    let mine = nodes_text
        .lines()
        .find(|l| l.starts_with(a))
        .expect("own line");
    let fields: Vec<&str> = mine.split(' ').collect();
    assert_eq!(
        fields[1],
        format!("127.0.0.1:{}@{}", ports[0], u32::from(ports[0]) + 10000)
    );
    assert_eq!(fields[2], "myself,master");
    assert_eq!(fields[6], "1");
    assert_eq!(fields[8..], ["0-5460"]);
    let replica_line = nodes_text
        .lines()
        .find(|l| l.starts_with(d))
        .expect("replica");
    assert_eq!(replica_line.split(' ').nth(3), Some(a));

    // Keys go to the master that owns their slot ("foo" is in slot 12182, the third
    // master's); hash tags keep keys together.
    let slot =
        |con: &mut redis::Connection, key: &str| run::<i64>(con, &["CLUSTER", "KEYSLOT", key]);
    let low_key = (0..)
        .map(|i| format!("key:{i}"))
        .find(|k| slot(&mut first, k) <= 5460)
        .expect("a key of the first master");
    run::<()>(&mut first, &["SET", &low_key, "1"]);
    let moved = fails(&mut first, &["GET", "foo"]);
    assert_eq!(moved, format!("MOVED 12182 127.0.0.1:{}", ports[2]));
    assert_eq!(
        fails(&mut first, &["MSET", &low_key, "1", "foo", "2"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    let tagged = format!("{{{low_key}}}");
    run::<()>(
        &mut first,
        &[
            "MSET",
            &format!("{tagged}.a"),
            "1",
            &format!("{tagged}.b"),
            "2",
        ],
    );

    // A transaction: each command is checked as it is queued, and EXEC with all of them.
    run::<()>(&mut first, &["MULTI"]);
    let queued = fails(&mut first, &["SET", "foo", "x"]);
    assert!(queued.starts_with("MOVED 12182"), "{queued}");
    assert_eq!(
        fails(&mut first, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    let other_low = (0..)
        .map(|i| format!("other:{i}"))
        .find(|k| slot(&mut first, k) <= 5460 && slot(&mut first, k) != slot(&mut first, &low_key))
        .expect("a second slot of the first master");
    run::<()>(&mut first, &["MULTI"]);
    run::<()>(&mut first, &["SET", &low_key, "2"]);
    run::<()>(&mut first, &["SET", &other_low, "2"]);
    assert_eq!(
        fails(&mut first, &["EXEC"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    // The transaction is gone: a second EXEC has none.
    assert_eq!(fails(&mut first, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(run::<String>(&mut first, &["GET", &low_key]), "1");

    // Scripts: declared keys are routed like a command's; an undeclared key elsewhere fails.
    let moved = fails(&mut first, &["EVAL", "return 1", "1", "foo"]);
    assert!(moved.starts_with("MOVED 12182"), "{moved}");
    let refused = fails(
        &mut first,
        &["EVAL", "return redis.call('GET', 'foo')", "0"],
    );
    assert!(
        refused.contains("Script attempted to access a non local key in a cluster node"),
        "{refused}"
    );
    let crossing = format!("redis.call('GET', '{other_low}') return redis.call('GET', KEYS[1])");
    let refused = fails(&mut first, &["EVAL", &crossing, "1", &low_key]);
    assert!(
        refused.contains("Script attempted to access keys that do not hash to the same slot"),
        "{refused}"
    );
    let allowed = format!("#!lua flags=allow-cross-slot-keys\n{crossing}");
    assert_eq!(
        run::<String>(&mut first, &["EVAL", &allowed, "1", &low_key]),
        "1"
    );
    // The key and the two tagged with it share a slot.
    let low_slot = slot(&mut first, &low_key).to_string();
    assert_eq!(
        run::<i64>(&mut first, &["CLUSTER", "COUNTKEYSINSLOT", &low_slot]),
        3
    );
    let in_slot: Vec<String> = run(&mut first, &["CLUSTER", "GETKEYSINSLOT", &low_slot, "2"]);
    assert_eq!(in_slot, vec![low_key.clone(), format!("{tagged}.a")]);

    // The replica follows its master, serves its reads after READONLY, redirects otherwise.
    let mut replica = nodes[3].client();
    wait_until("the replica has the first master's keys", || {
        run::<i64>(&mut replica, &["DBSIZE"]) == 3
    });
    assert_eq!(info_text(&mut replica, "replication", "role"), "slave");
    let sequence: u64 = info_text(&mut replica, "keyspace", "sequence")
        .parse()
        .expect("sequence");
    assert!(sequence > 0);
    let moved = fails(&mut replica, &["GET", &low_key]);
    assert_eq!(
        moved,
        format!(
            "MOVED {} 127.0.0.1:{}",
            slot(&mut replica, &low_key),
            ports[0]
        )
    );
    run::<()>(&mut replica, &["READONLY"]);
    assert_eq!(run::<String>(&mut replica, &["GET", &low_key]), "1");
    assert!(fails(&mut replica, &["SET", &low_key, "2"]).starts_with("MOVED"));
    assert!(fails(&mut replica, &["GET", "foo"]).starts_with("MOVED 12182"));

    // Versions: an older topology is refused, the same one changes nothing.
    assert_eq!(
        fails(&mut first, &["CLUSTERX", "SETNODES", &text, "0"]),
        "ERR Invalid cluster version"
    );
    run::<()>(&mut first, &["CLUSTERX", "SETNODES", "ignored", "1"]);

    // A crash keeps the ID and the topology.
    nodes[0].kill();
    nodes[0].start_again_on_same_port();
    let mut first = nodes[0].client();
    assert_eq!(run::<String>(&mut first, &["CLUSTERX", "VERSION"]), "1");
    assert_eq!(run::<String>(&mut first, &["CLUSTERX", "MYID"]), a);
    assert_eq!(run::<String>(&mut first, &["GET", &low_key]), "1");

    // A failover as the controller makes one: the replica becomes the master, the old
    // master its replica, by a new version of the topology.
    let failed_over = text
        .replace(
            &format!("{d} 127.0.0.1 {} slave {a}", ports[3]),
            &format!("{d} 127.0.0.1 {} master - 0-5460", ports[3]),
        )
        .replace(
            &format!("{a} 127.0.0.1 {} master - 0-5460", ports[0]),
            &format!("{a} 127.0.0.1 {} slave {d}", ports[0]),
        );
    push(&nodes.iter().collect::<Vec<_>>(), &failed_over, 2);
    let mut promoted = nodes[3].client();
    run::<()>(&mut promoted, &["SET", &low_key, "after"]);
    assert_eq!(info_text(&mut promoted, "replication", "role"), "master");
    run::<()>(&mut first, &["READONLY"]);
    wait_until("the old master follows the new one", || {
        run::<Option<String>>(&mut first, &["GET", &low_key]).as_deref() == Some("after")
    });
    assert_eq!(info_text(&mut first, "replication", "role"), "slave");
    let mut second = nodes[1].client();
    let moved = fails(&mut second, &["GET", &low_key]);
    assert!(
        moved.ends_with(&format!("127.0.0.1:{}", ports[3])),
        "{moved}"
    );
    assert_eq!(run::<String>(&mut second, &["CLUSTERX", "MYID"]), b);

    // A master with keys refuses CLUSTER RESET; a replica drops its data and its topology.
    assert_eq!(
        fails(&mut promoted, &["CLUSTER", "RESET"]),
        "ERR CLUSTER RESET can't be called with master nodes containing keys"
    );
    run::<()>(&mut first, &["CLUSTER", "RESET", "HARD"]);
    assert_eq!(run::<String>(&mut first, &["CLUSTERX", "VERSION"]), "-1");
    assert_eq!(run::<String>(&mut first, &["CLUSTERX", "MYID"]), "");
    assert_eq!(info_text(&mut first, "replication", "role"), "master");
    assert_eq!(
        fails(&mut first, &["CLUSTER", "NODES"]),
        "CLUSTERDOWN The cluster is not initialized"
    );
}

#[test]
fn redis_py_cluster_client_spreads_keys_over_the_masters() {
    let nodes: Vec<TestServer> = (0..4).map(|_| start_node()).collect();
    let ports = [nodes[0].port, nodes[1].port, nodes[2].port, nodes[3].port];
    push(&nodes.iter().collect::<Vec<_>>(), &topology(ports), 1);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/cluster_check.py");
    let output = Command::new(python())
        .arg(script)
        .arg(ports[0].to_string())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "redis-py cluster checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("cluster checks passed"), "{stdout}");
    // Every master got a share of the keys the client wrote through the first node.
    for node in &nodes[..3] {
        let keys: i64 = run(&mut node.client(), &["DBSIZE"]);
        assert!(keys > 100, "a master holds {keys} keys");
    }
}

/// Names of `count` keys in slots `first..=last`, `prefix` and a number.
fn names_in_slots(prefix: &str, first: u16, last: u16, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|key| (first..=last).contains(&shale_storage::keys::slot(key.as_bytes())))
        .take(count)
        .collect()
}

/// `count` keys of every type in slots `first..=last`, written in one pipeline.
fn fill_slots(con: &mut redis::Connection, first: u16, last: u16, count: usize) -> Vec<String> {
    let keys = names_in_slots("k", first, last, count);
    let mut pipe = redis::pipe();
    for (i, key) in keys.iter().enumerate() {
        let value = format!("v{i}");
        match i % 5 {
            0 => pipe.cmd("SET").arg(key).arg(&value).arg("EX").arg(1000),
            1 => pipe
                .cmd("HSET")
                .arg(key)
                .arg("f")
                .arg(&value)
                .arg("g")
                .arg("x"),
            2 => pipe.cmd("RPUSH").arg(key).arg("a").arg("b").arg(&value),
            3 => pipe.cmd("SADD").arg(key).arg("a").arg(&value),
            _ => pipe.cmd("ZADD").arg(key).arg(1).arg("a").arg(2).arg(&value),
        };
        pipe.ignore();
    }
    pipe.query::<()>(con).expect("filled");
    keys
}

/// DEBUG DIGEST-VALUE of each key, and whether it has a TTL: what must arrive unchanged.
fn values(con: &mut redis::Connection, keys: &[String]) -> Vec<String> {
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("DEBUG")
            .arg("DIGEST-VALUE")
            .arg(key)
            .cmd("PTTL")
            .arg(key);
    }
    let replies: Vec<redis::Value> = pipe.query(con).expect("digests");
    replies
        .chunks(2)
        .zip(keys)
        .map(|(pair, key)| {
            let ttl: i64 = redis::from_redis_value(pair[1].clone()).expect("ttl");
            format!("{key} {:?} {}", pair[0], ttl > 0)
        })
        .collect()
}

#[test]
fn slots_migrate_with_their_keys_while_clients_write_them() {
    let nodes: Vec<TestServer> = (0..3).map(|_| start_node()).collect();
    let [a, b, c, _] = IDS;
    let text = |version: &str| {
        let ranges = match version {
            "1" => ("0-8191", "8192-16383"),
            _ => ("1001-8191", "0-1000 8192-16383"),
        };
        format!(
            "{a} 127.0.0.1 {} master - {}\n{b} 127.0.0.1 {} master - {}\n{c} 127.0.0.1 {} slave {b}\n",
            nodes[0].port, ranges.0, nodes[1].port, ranges.1, nodes[2].port
        )
    };
    push(&nodes.iter().collect::<Vec<_>>(), &text("1"), 1);
    let mut source = nodes[0].client();
    let mut destination = nodes[1].client();
    let keys = fill_slots(&mut source, 0, 1000, 20000);
    let staying = names_in_slots("s", 1001, 8191, 1);
    run::<()>(&mut source, &["SET", &staying[0], "stays"]);

    // Refusals, in Kvrocks's words.
    assert_eq!(
        fails(&mut source, &["CLUSTERX", "MIGRATE", "9000", b]),
        "ERR Can't migrate slot which doesn't belong to me"
    );
    assert_eq!(
        fails(&mut source, &["CLUSTERX", "MIGRATE", "0-10", a]),
        "ERR Can't migrate slot to myself"
    );
    assert_eq!(
        fails(&mut source, &["CLUSTERX", "MIGRATE", "0-10", c]),
        "ERR Can't migrate slot to a slave"
    );
    assert_eq!(
        fails(&mut source, &["CLUSTERX", "MIGRATE", "0-10", "unknown"]),
        "ERR Can't find the destination node id"
    );
    assert_eq!(
        fails(&mut source, &["CLUSTERX", "MIGRATE", "5-1", b]),
        "ERR Invalid slot range: `5-1`"
    );

    // A writer sets 500 keys of the slots over and over throughout, following the cluster's
    // answers as a cluster client does; the last value acknowledged for each must arrive.
    let ports = (nodes[0].port, nodes[1].port);
    let written = names_in_slots("w", 0, 1000, 500);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, written) = (stop.clone(), written.clone());
        std::thread::spawn(move || {
            let connect = |port: u16| {
                redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .and_then(|c| c.get_connection())
                    .expect("connects")
            };
            let mut model = std::collections::HashMap::new();
            let mut con = connect(ports.0);
            let (mut n, mut refused) = (0u64, 0u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 5000 {
                let key = &written[(n % 500) as usize];
                match redis::cmd("SET").arg(key).arg(n).query::<()>(&mut con) {
                    Ok(()) => {
                        model.insert(key.clone(), n);
                        n += 1;
                    }
                    Err(err) if err.code() == Some("MOVED") => con = connect(ports.1),
                    Err(err) if err.code() == Some("TRYAGAIN") => {
                        refused += 1;
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    Err(err) => panic!("SET failed: {err}"),
                }
            }
            (model, refused)
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    let before = values(&mut source, &keys);
    run::<()>(&mut source, &["CLUSTERX", "MIGRATE", "0-1000", b]);
    let info = |con: &mut redis::Connection| run::<String>(con, &["CLUSTER", "INFO"]);
    // The controller polls for these lines from the reply on.
    let first = info(&mut source);
    assert!(first.contains("migrating_slot(s):0-1000\r\n"), "{first}");
    assert!(
        first.contains(&format!("destination_node:{b}\r\n")),
        "{first}"
    );
    wait_until("the migration ended", || {
        info(&mut source).contains("migrating_state:success")
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (model, refused) = writer.join().expect("writer");
    assert_eq!(model.len(), 500);
    eprintln!("writes refused with TRYAGAIN during the migration: {refused}");

    // The destination serves the slots before the topology changes; the source redirects.
    assert!(info(&mut destination).contains("import_state:success"));
    assert_eq!(values(&mut destination, &keys), before);
    for (key, value) in &model {
        let stored: u64 = run(&mut destination, &["GET", key]);
        assert_eq!(stored, *value, "{key}");
    }
    let moved = fails(&mut source, &["GET", &keys[1]]);
    assert!(
        moved.ends_with(&format!("127.0.0.1:{}", nodes[1].port)),
        "{moved}"
    );
    // The source drops the keys it gave away, and keeps the others.
    wait_until("the source deleted the migrated keys", || {
        run::<usize>(&mut source, &["DBSIZE"]) == staying.len()
    });
    // The destination's replica has them too.
    let mut replica = nodes[2].client();
    wait_until("the replica has the imported keys", || {
        run::<usize>(&mut replica, &["DBSIZE"]) == keys.len() + written.len()
    });

    // The controller's next topology gives the slots to the destination; the state stays
    // reported until the next migration.
    push(&nodes.iter().collect::<Vec<_>>(), &text("2"), 2);
    assert!(info(&mut source).contains("migrating_state:success"));
    let slot = shale_storage::keys::slot(keys[1].as_bytes()).to_string();
    assert_eq!(
        run::<i64>(&mut source, &["CLUSTER", "COUNTKEYSINSLOT", &slot]),
        0
    );
    run::<()>(&mut destination, &["SET", &keys[1], "new"]);
}

#[test]
fn a_failed_migration_leaves_both_sides_as_they_were() {
    let nodes: Vec<TestServer> = (0..2).map(|_| start_node()).collect();
    let [a, b, c, _] = IDS;
    // The third master listens nowhere.
    let closed = common::free_port();
    let text = format!(
        "{a} 127.0.0.1 {} master - 0-8191\n{b} 127.0.0.1 {} master - 8192-16000\n{c} 127.0.0.1 {closed} master - 16001-16383\n",
        nodes[0].port, nodes[1].port
    );
    push(&nodes.iter().collect::<Vec<_>>(), &text, 1);
    let mut source = nodes[0].client();
    let keys = fill_slots(&mut source, 0, 100, 50);
    run::<()>(&mut source, &["CLUSTERX", "MIGRATE", "0-100", c]);
    let info = |con: &mut redis::Connection| run::<String>(con, &["CLUSTER", "INFO"]);
    wait_until("the migration failed", || {
        info(&mut source).contains("migrating_state:fail")
    });
    assert!(info(&mut source).contains("migrating_slot(s):0-100\r\n"));
    assert_eq!(run::<usize>(&mut source, &["DBSIZE"]), keys.len());
    run::<()>(&mut source, &["SET", &keys[0], "still here"]);

    // An import whose source goes away is dropped by the destination.
    let payload: Vec<u8> = run(&mut source, &["DUMP", &keys[1]]);
    let slot: i64 = run(&mut source, &["CLUSTER", "KEYSLOT", &keys[1]]);
    let mut destination = nodes[1].client();
    {
        let mut link = nodes[1].client();
        run::<()>(&mut link, &["CLUSTER", "IMPORT", &slot.to_string(), "0"]);
        redis::cmd("RESTORE")
            .arg(&keys[1])
            .arg(0)
            .arg(payload)
            .query::<()>(&mut link)
            .expect("restored on the import's connection");
        // Only that connection may write the slot meanwhile.
        assert!(fails(&mut destination, &["GET", &keys[1]]).starts_with("MOVED"));
        assert_eq!(
            fails(&mut destination, &["CLUSTER", "IMPORT", "5", "0"]),
            format!("ERR only one importing job is allowed, current importing: {slot}")
        );
    }
    wait_until("the destination dropped the import", || {
        info(&mut destination).contains("import_state:error")
    });
    wait_until("the imported key is gone", || {
        run::<usize>(&mut destination, &["DBSIZE"]) == 0
    });
}

/// Asserts that CLUSTER INFO reports the migration of slots 0-1000 in `state`: the lines the
/// controller polls for.
fn assert_reports_migration(con: &mut redis::Connection, state: &str) {
    let reported = run::<String>(con, &["CLUSTER", "INFO"]);
    assert!(
        reported.contains("migrating_slot(s):0-1000\r\n"),
        "{reported}"
    );
    assert!(
        reported.contains(&format!("migrating_state:{state}\r\n")),
        "{reported}"
    );
}

#[test]
fn a_replica_promoted_during_a_migration_reports_how_it_ended() {
    // A (nodes[0]) and its replica A' (nodes[1]) hold slots 0-8191, B (nodes[2]) the rest.
    let mut nodes: Vec<TestServer> = (0..3).map(|_| start_node()).collect();
    let [a, b, _, a2] = IDS;
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let text = |master: &str, replica: &str| {
        let port = |id: &str| if id == a { ports[0] } else { ports[1] };
        format!(
            "{master} 127.0.0.1 {} master - 0-8191\n{replica} 127.0.0.1 {} slave {master}\n{b} 127.0.0.1 {} master - 8192-16383\n",
            port(master),
            port(replica),
            ports[2]
        )
    };
    let first = text(a, a2);
    for (node, id) in nodes.iter().zip([a, a2, b]) {
        push_to(node, id, &first, 1);
    }
    let mut source = nodes[0].client();
    let keys = fill_slots(&mut source, 0, 1000, 2000);
    let staying = names_in_slots("s", 1001, 8191, 1);
    run::<()>(&mut source, &["SET", &staying[0], "stays"]);
    let info = |con: &mut redis::Connection| run::<String>(con, &["CLUSTER", "INFO"]);

    // The destination hangs, so the migration is still running when A is SIGKILLed, after
    // its replica acknowledged the migration's start.
    nodes[2].signal("STOP");
    run::<()>(&mut source, &["CLUSTERX", "MIGRATE", "0-1000", b]);
    assert_eq!(run::<i64>(&mut source, &["WAIT", "1", "5000"]), 1);
    nodes[0].kill();
    nodes[2].signal("CONT");
    // The controller's failover: A' is master, the dead A its replica.
    let second = text(a2, a);
    push_to(&nodes[1], a2, &second, 2);
    push_to(&nodes[2], b, &second, 2);
    let mut promoted = nodes[1].client();
    // An end the controller acts on: the migration died.
    assert_reports_migration(&mut promoted, "fail");
    assert_eq!(run::<usize>(&mut promoted, &["DBSIZE"]), keys.len() + 1);
    run::<()>(
        &mut promoted,
        &["SET", &keys[0], "written after the failover"],
    );
    let mut destination = nodes[2].client();
    wait_until("the destination dropped the import", || {
        !info(&mut destination).contains("import_state:start")
    });
    assert_eq!(run::<usize>(&mut destination, &["DBSIZE"]), 0);

    // A comes back as A's replica; A' moves the slots to B, and dies after its replica has
    // the migration's success, before the controller moved the slots in the topology.
    nodes[0].start_again_on_same_port();
    push_to(&nodes[0], a, &second, 2);
    let mut master = nodes[1].client();
    assert_eq!(run::<i64>(&mut master, &["WAIT", "1", "10000"]), 1);
    run::<()>(&mut master, &["CLUSTERX", "MIGRATE", "0-1000", b]);
    wait_until("the migration succeeded", || {
        info(&mut master).contains("migrating_state:success")
    });
    assert_eq!(run::<i64>(&mut master, &["WAIT", "1", "5000"]), 1);
    nodes[1].kill();
    let third = text(a, a2);
    push_to(&nodes[0], a, &third, 3);
    push_to(&nodes[2], b, &third, 3);
    let mut promoted = nodes[0].client();
    assert_reports_migration(&mut promoted, "success");
    // The slots are B's: redirected there, and deleted here.
    let moved = fails(&mut promoted, &["GET", &keys[0]]);
    assert!(
        moved.ends_with(&format!("127.0.0.1:{}", ports[2])),
        "{moved}"
    );
    wait_until("the promoted node deleted the moved keys", || {
        run::<usize>(&mut promoted, &["DBSIZE"]) == 1
    });
    assert_eq!(run::<String>(&mut promoted, &["GET", &staying[0]]), "stays");
    assert_eq!(run::<usize>(&mut destination, &["DBSIZE"]), keys.len());
    assert_eq!(
        run::<String>(&mut destination, &["GET", &keys[0]]),
        "written after the failover"
    );
}
