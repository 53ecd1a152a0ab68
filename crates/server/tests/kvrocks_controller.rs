//! Apache Kvrocks Controller 1.2.0 running a Shale cluster, unchanged: built from
//! `third_party/kvrocks-controller` by `scripts/test.sh`, which names it in `SHALE_KVCTL`, with
//! its embedded Raft store. It makes a cluster of three shards (a master and a replica each)
//! from six fresh nodes, moves slots with their keys between shards while a client writes to
//! them, and fails a master that was SIGKILLed over to its replica. Two Redis Cluster client
//! libraries use the cluster throughout: redis-py's `RedisCluster`
//! (`tests/python/cluster_clients.py`) and go-redis's `ClusterClient`
//! (`tests/go/cluster_clients`, built by `scripts/test.sh` and named in `SHALE_GO_CLUSTER`).
//! The nodes are real shale-server processes.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{info_text, run, wait_until, TestServer};
use serde_json::Value;

/// The controller's process, stopped with the test.
struct Controller {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Controller {
    /// A single-node Raft controller that probes every second and fails a master over after
    /// three failed probes.
    fn start() -> Controller {
        let binary = std::env::var("SHALE_KVCTL")
            .expect("SHALE_KVCTL names Apache Kvrocks Controller's server: run ./scripts/test.sh");
        let dir = tempfile::tempdir().expect("temp dir");
        let (port, raft) = (common::free_port(), common::free_port());
        let config = format!(
            "addr: \"127.0.0.1:{port}\"\nstorage_type: raft\nraft:\n  id: 1\n  data_dir: \"{}\"\n  cluster_state: \"new\"\n  peers:\n    - \"http://127.0.0.1:{raft}\"\n  heartbeat_seconds: 1\n  election_seconds: 3\ncontroller:\n  failover:\n    ping_interval_seconds: 1\n    max_ping_count: 3\n",
            dir.path().join("raft").display()
        );
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, config).expect("config");
        let child = Command::new(binary)
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the controller");
        Controller {
            child,
            port,
            _dir: dir,
        }
    }

    /// An HTTP call of its API: the status and the JSON body; status 0 while it does not
    /// listen yet.
    fn call(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return (0, Value::Null);
        };
        let request = format!(
            "{method} /api/v1/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response");
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, serde_json::from_str(body).unwrap_or(Value::Null))
    }

    /// The cluster as the controller stores it.
    fn cluster(&self) -> Value {
        let (status, body) = self.call("GET", "namespaces/ns/clusters/c", "");
        assert_eq!(status, 200, "{body}");
        body["data"]["cluster"].clone()
    }
}

/// A shard as the controller stores it: its nodes' addresses and roles, and its slot ranges.
type Shard = (Vec<(String, String)>, Vec<String>);

fn shards(cluster: &Value) -> Vec<Shard> {
    let strings = |v: &Value| v.as_str().unwrap_or_default().to_string();
    cluster["shards"]
        .as_array()
        .map(|shards| {
            shards
                .iter()
                .map(|shard| {
                    let nodes = shard["nodes"].as_array().cloned().unwrap_or_default();
                    let nodes = nodes
                        .iter()
                        .map(|n| (strings(&n["addr"]), strings(&n["role"])))
                        .collect();
                    let ranges = shard["slot_ranges"].as_array().cloned().unwrap_or_default();
                    (nodes, ranges.iter().map(strings).collect())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Keys each client library writes, of six types across all slots.
const KEYS: &str = "100000";

/// redis-py's cluster client: `load` or `verify` of `KEYS` keys named `prefix:i`.
fn redis_py(mode: &str, port: u16, prefix: &str) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/cluster_clients.py"
    );
    let output = Command::new(common::python())
        .args([script, mode, &port.to_string(), prefix, KEYS])
        .output()
        .expect("run python");
    assert_succeeded("redis-py", mode, &output);
}

/// go-redis's cluster client, started: `load`, `verify`, `rewrite` or `acked`.
fn go_redis(mode: &str, port: u16, arg: &str, arg2: &str) -> Child {
    let binary = std::env::var("SHALE_GO_CLUSTER")
        .expect("SHALE_GO_CLUSTER names the go-redis check: run ./scripts/test.sh");
    Command::new(binary)
        .args([mode, &format!("127.0.0.1:{port}"), arg, arg2])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the go-redis check")
}

/// Waits for a go-redis run and returns the JSON line it printed.
fn finished(child: Child, mode: &str) -> Value {
    let output = child.wait_with_output().expect("the go-redis check");
    assert_succeeded("go-redis", mode, &output);
    serde_json::from_slice(&output.stdout).unwrap_or(Value::Null)
}

fn assert_succeeded(client: &str, mode: &str, output: &Output) {
    assert!(
        output.status.success(),
        "{client} {mode} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A hash tag whose slot is in `slots`.
fn tag_in(slots: std::ops::Range<u16>) -> String {
    (0..)
        .map(|n| format!("t{n}"))
        .find(|tag| slots.contains(&shale_storage::keys::slot(tag.as_bytes())))
        .expect("a tag")
}

/// The sum of the masters' key counts, which is the number of keys only if none is on two
/// nodes or on a node that does not serve its slot.
fn keys_on_masters(masters: &[&TestServer]) -> u64 {
    masters
        .iter()
        .map(|m| run::<u64>(&mut m.client(), &["DBSIZE"]))
        .sum()
}

#[test]
fn kvrocks_controller_runs_a_shale_cluster_for_two_client_libraries() {
    let mut nodes: Vec<TestServer> = (0..6)
        .map(|_| TestServer::start_with(&["--cluster-enabled", "yes"]))
        .collect();
    let addr = |node: &TestServer| format!("127.0.0.1:{}", node.port);
    let controller = Controller::start();

    // Until its Raft store has a leader the API refuses everything.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _) = controller.call("POST", "namespaces", r#"{"namespace":"ns"}"#);
        if status == 201 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the controller never elected a leader"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let nodes_json: Vec<String> = nodes.iter().map(|n| format!("\"{}\"", addr(n))).collect();
    let create = format!(
        r#"{{"name":"c","nodes":[{}],"replicas":2}}"#,
        nodes_json.join(",")
    );
    // The namespace reaches the Raft store's state a moment after the reply.
    loop {
        let (status, body) = controller.call("POST", "namespaces/ns/clusters", &create);
        if status == 201 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cluster was not created: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The controller gives every node its ID and the topology at its next probe.
    for node in &nodes {
        let mut con = node.client();
        wait_until("the controller initialized the node", || {
            run::<String>(&mut con, &["CLUSTERX", "VERSION"]) == "1"
        });
    }
    let layout = shards(&controller.cluster());
    assert_eq!(layout.len(), 3);
    for (shard, (members, _)) in layout.iter().enumerate() {
        assert_eq!(
            members,
            &[
                (addr(&nodes[2 * shard]), "master".to_string()),
                (addr(&nodes[2 * shard + 1]), "slave".to_string())
            ]
        );
    }
    assert_eq!(
        info_text(&mut nodes[1].client(), "replication", "role"),
        "slave"
    );
    let ranges: Vec<(u16, u16)> = layout
        .iter()
        .map(|(_, ranges)| {
            assert_eq!(ranges.len(), 1, "{ranges:?}");
            let (a, b) = ranges[0].split_once('-').expect("a range");
            (a.parse().expect("slot"), b.parse().expect("slot"))
        })
        .collect();
    assert_eq!((ranges[0].0, ranges[2].1), (0, 16383));

    // Each library writes 100,000 keys of six types over all slots; each reads both sets.
    let port = nodes[0].port;
    redis_py("load", port, "py");
    finished(go_redis("verify", port, "py", KEYS), "verify");
    finished(go_redis("load", port, "go", KEYS), "load");
    redis_py("verify", port, "go");
    let masters = [&nodes[0], &nodes[2], &nodes[4]];
    assert_eq!(keys_on_masters(&masters), 200_000);

    // The first 2,048 slots (about 25,000 of those keys) move to the second shard while
    // go-redis rewrites 500 keys of one of them, following MOVED and retrying TRYAGAIN.
    let dir = tempfile::tempdir().expect("temp dir");
    let stop = dir.path().join("stop");
    let stop_arg = stop.to_str().expect("path");
    let moving = tag_in(0..2048);
    let slot = shale_storage::keys::slot(moving.as_bytes()).to_string();
    let mut first = nodes[0].client();
    let in_slot = run::<i64>(&mut first, &["CLUSTER", "COUNTKEYSINSLOT", &slot]) + 500;
    let writer = go_redis("rewrite", port, &moving, stop_arg);
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = controller.call(
        "POST",
        "namespaces/ns/clusters/c/migrate",
        r#"{"target":1,"slot":"0-2047","slot_only":false}"#,
    );
    assert_eq!(status, 200, "{body}");
    wait_until("the controller saw the migration end", || {
        let cluster = controller.cluster();
        let layout = shards(&cluster);
        cluster["shards"][0]["migrating_slot"].is_null()
            && layout[1].1.contains(&"0-2047".to_string())
    });
    std::thread::sleep(Duration::from_millis(300));
    touch(&stop);
    let rewrites = finished(writer, "rewrite");
    assert!(rewrites["writes"].as_u64() > Some(500), "{rewrites}");
    let key = format!("w:{{{moving}}}:0");
    let moved = common::fails(&mut first, &["GET", &key]);
    assert!(moved.ends_with(&addr(&nodes[2])), "{moved}");
    wait_until("the source deleted the moved keys", || {
        keys_on_masters(&masters) == 200_500
    });
    assert_eq!(
        run::<i64>(&mut first, &["CLUSTER", "COUNTKEYSINSLOT", &slot]),
        0
    );
    assert_eq!(
        run::<i64>(
            &mut nodes[2].client(),
            &["CLUSTER", "COUNTKEYSINSLOT", &slot]
        ),
        in_slot
    );
    // The second shard's replica has the moved keys too.
    let mut replica = nodes[3].client();
    wait_until("the replica has the moved keys", || {
        run::<i64>(&mut replica, &["CLUSTER", "COUNTKEYSINSLOT", &slot]) == in_slot
    });

    // go-redis writes batches of new keys to the third master, each acknowledged by WAIT 1,
    // while that master is SIGKILLed; the controller promotes its replica, and every
    // acknowledged batch is there.
    let stop = dir.path().join("stop-acked");
    let third = tag_in(ranges[2].0..ranges[2].1 + 1);
    let writer = go_redis("acked", port, &third, stop.to_str().expect("path"));
    std::thread::sleep(Duration::from_millis(1000));
    nodes[4].kill();
    let mut promoted = nodes[5].client();
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_text(&mut promoted, "replication", "role") != "master" {
        assert!(
            Instant::now() < deadline,
            "the controller never promoted the replica"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1000));
    touch(&stop);
    let acked = finished(writer, "acked");
    assert!(acked["keys"].as_u64() > Some(0), "{acked}");
    assert!(acked["failures"].as_u64() > Some(0), "{acked}");
    let layout = shards(&controller.cluster());
    assert_eq!(
        layout[2].0,
        [
            (addr(&nodes[4]), "slave".to_string()),
            (addr(&nodes[5]), "master".to_string())
        ]
    );
    // Every key either library wrote is still there, read through the new topology.
    redis_py("verify", port, "py");
    finished(go_redis("verify", port, "go", KEYS), "verify");
}

fn touch(path: &Path) {
    std::fs::write(path, b"").expect("stop file");
}
