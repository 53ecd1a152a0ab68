//! Apache Kvrocks Controller 1.2.0 running a Shale cluster, unchanged: built from
//! `third_party/kvrocks-controller` by `scripts/test.sh`, which names it in `SHALE_KVCTL`, with
//! its embedded Raft store. It makes a cluster of two shards (a master and a replica each)
//! from four fresh nodes, moves slots with their keys between the shards, and fails a master
//! that was SIGKILLed over to its replica; the nodes are real shale-server processes.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
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

#[test]
fn kvrocks_controller_creates_migrates_and_fails_over_a_shale_cluster() {
    let mut nodes: Vec<TestServer> = (0..4)
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
    let mut first = nodes[0].client();
    let layout = shards(&controller.cluster());
    assert_eq!(layout[0].1, ["0-8191"]);
    assert_eq!(layout[1].1, ["8192-16383"]);
    assert_eq!(
        info_text(&mut nodes[1].client(), "replication", "role"),
        "slave"
    );

    // Keys on both shards, written where CLUSTER KEYSLOT says.
    let masters = [nodes[0].port, nodes[2].port];
    let mut cons: Vec<redis::Connection> =
        [&nodes[0], &nodes[2]].iter().map(|n| n.client()).collect();
    let keys: Vec<String> = (0..2000).map(|i| format!("key:{i}")).collect();
    for key in &keys {
        let slot = shale_storage::keys::slot(key.as_bytes());
        let shard = usize::from(slot > 8191);
        run::<()>(&mut cons[shard], &["SET", key, key]);
    }
    let moving: Vec<&String> = keys
        .iter()
        .filter(|k| shale_storage::keys::slot(k.as_bytes()) < 100)
        .collect();
    assert!(!moving.is_empty());

    // Slots 0-99 move, with their keys, to the second shard.
    let (status, body) = controller.call(
        "POST",
        "namespaces/ns/clusters/c/migrate",
        r#"{"target":1,"slot":"0-99","slot_only":false}"#,
    );
    assert_eq!(status, 200, "{body}");
    wait_until("the controller saw the migration end", || {
        let cluster = controller.cluster();
        let layout = shards(&cluster);
        cluster["shards"][0]["migrating_slot"].is_null()
            && layout[1].1.contains(&"0-99".to_string())
    });
    let mut second = nodes[2].client();
    for key in &moving {
        assert_eq!(run::<String>(&mut second, &["GET", key]), **key);
    }
    let moved = common::fails(&mut first, &["GET", moving[0]]);
    assert!(
        moved.ends_with(&format!("127.0.0.1:{}", masters[1])),
        "{moved}"
    );
    let slot = shale_storage::keys::slot(moving[0].as_bytes()).to_string();
    wait_until("the source deleted the moved keys", || {
        run::<i64>(&mut first, &["CLUSTER", "COUNTKEYSINSLOT", &slot]) == 0
    });

    // The first master dies after a write its replica acknowledged (WAIT 1); the controller
    // promotes the replica.
    let staying = keys
        .iter()
        .find(|k| (100..8192).contains(&shale_storage::keys::slot(k.as_bytes())))
        .expect("a key of the first shard");
    run::<()>(&mut first, &["SET", staying, "acknowledged"]);
    assert_eq!(run::<i64>(&mut first, &["WAIT", "1", "5000"]), 1);
    nodes[0].kill();
    let mut promoted = nodes[1].client();
    wait_until("the controller promoted the replica", || {
        info_text(&mut promoted, "replication", "role") == "master"
    });
    assert_eq!(
        run::<String>(&mut promoted, &["GET", staying]),
        "acknowledged"
    );
    let layout = shards(&controller.cluster());
    assert_eq!(
        layout[0].0,
        [
            (addr(&nodes[0]), "slave".to_string()),
            (addr(&nodes[1]), "master".to_string())
        ]
    );
    // Every key of the first shard is on the promoted replica.
    for key in &keys {
        let slot = shale_storage::keys::slot(key.as_bytes());
        if (100..8192).contains(&slot) && key != staying {
            assert_eq!(run::<String>(&mut promoted, &["GET", key]), *key);
        }
    }
}
