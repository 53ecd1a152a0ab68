//! Failover by Redis Sentinel 7.0 (Debian's `redis-sentinel`, unchanged): three sentinels
//! watch a Shale master and two Shale replicas; the master is killed while a client writes.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{python, run, TestServer};

const MASTER_NAME: &str = "mymaster";

/// A `redis-sentinel` process with its own config file, which it rewrites as it learns.
struct Sentinel {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Sentinel {
    fn start(master_port: u16) -> Sentinel {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = common::free_port();
        let config = dir.path().join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nlogfile {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 10000\n\
                 sentinel parallel-syncs {MASTER_NAME} 2\n",
                dir.path().display(),
                dir.path().join("sentinel.log").display()
            ),
        )
        .expect("sentinel config");
        let child = Command::new("redis-sentinel")
            .arg(&config)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-sentinel is missing: run ./scripts/test.sh, which installs it");
        let sentinel = Sentinel { child, port, dir };
        wait_for("the sentinel to listen", Duration::from_secs(10), || {
            sentinel.connect().is_some()
        });
        sentinel
    }

    /// The sentinel's log, for a test that failed.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default()
    }

    fn connect(&self) -> Option<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .ok()?
            .get_connection()
            .ok()
    }

    /// `SENTINEL MASTER mymaster` as field → value.
    fn master_state(&self) -> Vec<(String, String)> {
        let Some(mut con) = self.connect() else {
            return Vec::new();
        };
        let flat: Vec<String> = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(MASTER_NAME)
            .query(&mut con)
            .unwrap_or_default();
        flat.chunks_exact(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect()
    }

    fn field(&self, name: &str) -> Option<String> {
        self.master_state()
            .into_iter()
            .find_map(|(k, v)| (k == name).then_some(v))
    }

    fn master_port(&self) -> Option<u16> {
        let mut con = self.connect()?;
        let addr: Vec<String> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query(&mut con)
            .ok()?;
        addr.get(1)?.parse().ok()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// INFO replication, or nothing while the server does not answer.
fn replication_info(server: &TestServer) -> String {
    redis::Client::open(server.url())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut con| redis::cmd("INFO").arg("replication").query(&mut con))
        .unwrap_or_default()
}

/// Whether `replica` follows the server on `master_port` with every write it has.
fn follows(replica: &TestServer, master: &TestServer) -> bool {
    let info = replication_info(replica);
    let master_info = replication_info(master);
    let Some(wanted) = master_info
        .lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
    else {
        return false;
    };
    info.contains(&format!("master_port:{}\r\n", master.port))
        && info.contains("master_link_status:up")
        && info.contains(&format!("slave_repl_offset:{wanted}\r\n"))
}

/// Waits until the master Sentinel names is not `old_port`, says it is a master, and every
/// other server follows it; returns it. Sentinel may fail over more than once: a sentinel
/// that missed the first election's result can win a second one, so the first replica it
/// promotes need not be the last.
fn settle<'a>(
    sentinel: &Sentinel,
    servers: &[&'a TestServer],
    old_port: u16,
    seconds: u64,
) -> &'a TestServer {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let master = sentinel
            .master_port()
            .filter(|&port| port != old_port)
            .and_then(|port| servers.iter().find(|s| s.port == port));
        if let Some(&master) = master {
            if replication_info(master).contains("role:master")
                && servers
                    .iter()
                    .all(|s| s.port == master.port || follows(s, master))
            {
                return master;
            }
        }
        if Instant::now() > deadline {
            let states: Vec<String> = servers
                .iter()
                .map(|s| format!("port {}:\n{}", s.port, replication_info(s)))
                .collect();
            panic!(
                "Sentinel's master and the servers did not settle in {seconds} s:\n{}\n\
                 sentinel log:\n{}",
                states.join("\n"),
                sentinel.log()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes `key:<n>` in a loop and records each `n` that `WAIT 1` confirmed reached a replica,
/// until the master stops answering or `stop` is set.
fn write_until_failure(port: u16, stop: Arc<AtomicBool>, acked: Arc<Mutex<Vec<u64>>>) {
    let Ok(mut con) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
    else {
        return;
    };
    let _ = con.set_read_timeout(Some(Duration::from_secs(2)));
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let written: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("key:{n}"))
            .arg(n)
            .query(&mut con);
        if written.is_err() {
            return;
        }
        match redis::cmd("WAIT").arg(1).arg(1000).query::<i64>(&mut con) {
            Ok(replicas) if replicas >= 1 => acked.lock().expect("acked").push(n),
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

fn assert_has_keys(server: &TestServer, keys: &[u64]) {
    let mut con = server.client();
    for chunk in keys.chunks(500) {
        let names: Vec<String> = chunk.iter().map(|n| format!("key:{n}")).collect();
        let values: Vec<Option<u64>> = redis::cmd("MGET")
            .arg(&names)
            .query(&mut con)
            .expect("MGET");
        for (n, value) in chunk.iter().zip(values) {
            assert_eq!(value, Some(*n), "acknowledged write key:{n} lost");
        }
    }
}

#[test]
fn sentinel_fails_a_killed_master_over_without_losing_acknowledged_writes() {
    let mut master = TestServer::start_with(&["--replica-priority", "100"]);
    let replicaof = format!("127.0.0.1 {}", master.port);
    let replicas = [
        TestServer::start_with(&["--replicaof", &replicaof]),
        TestServer::start_with(&["--replicaof", &replicaof]),
    ];
    for replica in &replicas {
        wait_for("the replicas to sync", Duration::from_secs(20), || {
            follows(replica, &master)
        });
    }
    let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(master.port)).collect();
    for sentinel in &sentinels {
        wait_for(
            "each sentinel to know both replicas and the other sentinels",
            Duration::from_secs(30),
            || {
                sentinel.field("num-slaves").as_deref() == Some("2")
                    && sentinel.field("num-other-sentinels").as_deref() == Some("2")
            },
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (port, stop, acked) = (master.port, stop.clone(), acked.clone());
        std::thread::spawn(move || write_until_failure(port, stop, acked))
    };
    std::thread::sleep(Duration::from_millis(1500));
    let old_port = master.port;
    master.kill();
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    let acked = acked.lock().expect("acked").clone();
    assert!(
        acked.len() > 50,
        "too few acknowledged writes: {}",
        acked.len()
    );

    // Sentinel promotes one replica and points the other at it.
    settle(
        &sentinels[0],
        &replicas.iter().collect::<Vec<_>>(),
        old_port,
        90,
    );
    for replica in &replicas {
        assert_has_keys(replica, &acked);
    }

    // The old master, back on its data, becomes a replica of the new one. Sentinel waits 8 s
    // after it reappears and reads a replica's INFO every 10 s; a failover retried after a
    // split vote adds twice failover-timeout.
    master.start_again_on_same_port();
    let all: Vec<&TestServer> = replicas.iter().chain([&master]).collect();
    let promoted = settle(&sentinels[0], &all, old_port, 180);
    assert_has_keys(&master, &acked);
    let mut con = promoted.client();
    run::<()>(&mut con, &["SET", "after-failover", "1"]);
    wait_for(
        "the old master to get new writes",
        Duration::from_secs(10),
        || run::<Option<String>>(&mut master.client(), &["GET", "after-failover"]).is_some(),
    );
    let new_port = promoted.port;

    // A Sentinel-aware client finds the new master.
    let addresses: Vec<String> = sentinels.iter().map(|s| s.port.to_string()).collect();
    let output = Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sentinel_check.py"))
        .arg(MASTER_NAME)
        .args(&addresses)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "redis-py Sentinel failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!("master 127.0.0.1 {new_port} after-failover 1")
    );
}
