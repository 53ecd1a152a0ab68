//! Offloaded compaction with real processes: nodes (`shale-server`) sending their compactions
//! to `shale-compactor` workers, and every way a job can go wrong: a worker killed or hung
//! mid-job, one that answers an error, garbage or files damaged after it wrote them, one
//! whose output filesystem is full, a node killed while jobs are out. Each run's data (every
//! key, value and TTL: DEBUG DIGEST, and DBSIZE) must equal the same commands' with local
//! compaction, and the node must serve reads throughout.
//!
//! `shale-compactor` is built by `cargo test --workspace` (its own tests start it); these
//! tests find it beside `shale-server`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{info_field, run, TestServer};

/// Small memtables, so a few MB of writes make several compactions.
const SMALL_MEMTABLES: [&str; 2] = ["--rocksdb.write-buffer-size", "1mb"];
/// Expiry times far ahead, so both servers keep the same TTLs.
const FAR_FUTURE_MS: u64 = 4_000_000_000_000;

/// A `shale-compactor` process.
struct Worker {
    child: Option<Child>,
    url: String,
}

impl Worker {
    fn start(extra: &[&str]) -> Worker {
        let binary =
            Path::new(env!("CARGO_BIN_EXE_shale-server")).with_file_name("shale-compactor");
        assert!(
            binary.exists(),
            "{} is missing: `cargo test --workspace` builds it",
            binary.display()
        );
        let mut child = Command::new(binary)
            .args(["--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn shale-compactor");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let url = loop {
            let line = lines.next().expect("worker exited").expect("read");
            if let Some(rest) = line.strip_prefix("shale-compactor ready on ") {
                break rest.split(',').next().expect("url").to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Worker {
            child: Some(child),
            url,
        }
    }

    fn pid(&self) -> String {
        self.child.as_ref().expect("running").id().to_string()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// A figure of its `/metrics`.
    fn metric(&self, name: &str) -> f64 {
        let body = http_get(&self.url, "/metrics");
        body.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from {body}"))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn http_get(url: &str, path: &str) -> String {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("connect to worker");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

fn node(workers: &[&Worker], extra: &[&str]) -> TestServer {
    let urls: Vec<&str> = workers.iter().map(|w| w.url.as_str()).collect();
    let joined = urls.join(" ");
    let mut args = SMALL_MEMTABLES.to_vec();
    if !workers.is_empty() {
        args.extend(["--compaction-workers", &joined]);
    }
    args.extend(extra);
    TestServer::start_with(&args)
}

fn value(n: u64) -> String {
    format!("{n:08}").repeat(256)
}

/// Writes round `round` of the workload: overwritten strings with TTLs, hashes, sorted sets,
/// counters, appends and deletes (every family, and both merge operators).
fn write_round(con: &mut redis::Connection, round: u64) {
    let mut pipe = redis::pipe();
    for i in 0..500 {
        let n = round * 500 + i;
        let key = format!("s{}", n % 3000);
        pipe.cmd("SET").arg(&key).arg(value(n)).ignore();
        if n.is_multiple_of(7) {
            pipe.cmd("PEXPIREAT")
                .arg(&key)
                .arg(FAR_FUTURE_MS + n)
                .ignore();
        }
        if n.is_multiple_of(5) {
            pipe.cmd("HSET")
                .arg(format!("h{}", n % 40))
                .arg(format!("f{n}"))
                .arg(n)
                .ignore();
        }
        if n.is_multiple_of(11) {
            let member = format!("m{}", n % 300);
            pipe.cmd("ZADD")
                .arg(format!("z{}", n % 20))
                .arg(n)
                .arg(member)
                .ignore();
        }
        if n.is_multiple_of(13) {
            pipe.cmd("INCRBY")
                .arg(format!("c{}", n % 10))
                .arg(n)
                .ignore();
        }
        if n.is_multiple_of(17) {
            pipe.cmd("APPEND")
                .arg(format!("a{}", n % 10))
                .arg(format!("{n},"))
                .ignore();
        }
        if n.is_multiple_of(19) {
            pipe.cmd("DEL").arg(format!("s{}", (n * 7) % 3000)).ignore();
        }
    }
    pipe.query::<()>(con).expect("workload round");
}

const ROUNDS: u64 = 40;

fn load(server: &TestServer) {
    let mut con = server.client();
    for round in 0..ROUNDS {
        write_round(&mut con, round);
    }
}

/// What the workload leaves: DEBUG DIGEST and DBSIZE.
fn fingerprint(server: &TestServer) -> (String, u64) {
    let mut con = server.client();
    (
        run(&mut con, &["DEBUG", "DIGEST"]),
        run(&mut con, &["DBSIZE"]),
    )
}

/// The workload's fingerprint with local compaction, computed once.
fn reference() -> (String, u64) {
    static REFERENCE: std::sync::OnceLock<(String, u64)> = std::sync::OnceLock::new();
    REFERENCE
        .get_or_init(|| {
            let server = node(&[], &[]);
            load(&server);
            fingerprint(&server)
        })
        .clone()
}

fn compactions(server: &TestServer, field: &str) -> u64 {
    info_field(&mut server.client(), "rocksdb", field)
}

/// Reads a key the workload never changes, over and over, until dropped; every read must be
/// answered with its value.
struct Reader {
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Reader {
    fn start(server: &TestServer) -> Reader {
        let mut con = server.client();
        run::<()>(&mut con, &["SET", "fixed", "value"]);
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let thread = std::thread::spawn({
            let (stop, reads) = (stop.clone(), reads.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let got: String = run(&mut con, &["GET", "fixed"]);
                    assert_eq!(got, "value");
                    reads.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        });
        Reader {
            stop,
            reads,
            thread: Some(thread),
        }
    }

    /// Stops and returns how many reads were answered.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("running")
            .join()
            .expect("every read answered");
        self.reads.load(Ordering::Relaxed)
    }
}

/// Loads `server` with the workload while a reader reads, and checks the data against local
/// compaction's (computed once, by the first test that needs it).
fn load_and_check(server: &TestServer) {
    let expected = reference();
    let reader = Reader::start(server);
    load(server);
    assert!(reader.finish() > 0);
    let mut con = server.client();
    run::<()>(&mut con, &["DEL", "fixed"]);
    assert_eq!(fingerprint(server), expected);
}

/// Waits until `condition` holds, polling; panics after `limit`.
fn wait_for(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until no flush or compaction runs or is due, here or on a worker, for 20 polls in a
/// row: a flush that ends can start another compaction a moment after a quiet poll.
fn settle(server: &TestServer) {
    let mut quiet = 0;
    wait_for("compactions to end", Duration::from_secs(60), || {
        let idle = [
            "num_running_flushes",
            "num_running_compactions",
            "remote_compactions_running",
            "estimate_pending_compaction_bytes",
        ]
        .iter()
        .all(|field| compactions(server, field) == 0);
        quiet = if idle { quiet + 1 } else { 0 };
        quiet >= 20
    });
}

/// Where the node's jobs write their output.
fn jobs_root(server: &TestServer) -> PathBuf {
    server
        .dir
        .path()
        .join("data")
        .join("db")
        .join("remote-compaction")
}

fn job_dirs(server: &TestServer) -> Vec<PathBuf> {
    std::fs::read_dir(jobs_root(server))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn compactions_run_on_the_worker_and_change_no_data() {
    // Two running and four taken: more than the node's three compactions at once, so none
    // is turned away busy.
    let worker = Worker::start(&["--jobs", "2"]);
    let server = node(&[&worker], &[]);
    load_and_check(&server);
    settle(&server);
    let done = compactions(&server, "remote_compactions_done");
    assert!(done >= 3, "{done} remote compactions");
    assert_eq!(compactions(&server, "remote_compaction_fallbacks"), 0);
    assert_eq!(compactions(&server, "local_compactions"), 0);
    assert!(compactions(&server, "remote_compaction_read_bytes") > 0);
    assert_eq!(
        worker.metric("shale_compactor_jobs_done_total") as u64,
        done
    );
    assert_eq!(worker.metric("shale_compactor_jobs_failed_total"), 0.0);
    // Each job's directory goes once it is installed.
    assert!(job_dirs(&server).is_empty(), "{:?}", job_dirs(&server));

    // Without workers (CONFIG SET, no restart), compactions run locally again.
    let mut con = server.client();
    run::<()>(&mut con, &["CONFIG", "SET", "compaction-workers", ""]);
    for round in ROUNDS..ROUNDS + 12 {
        write_round(&mut con, round);
    }
    wait_for("a local compaction", Duration::from_secs(30), || {
        compactions(&server, "local_compactions") > 0
    });
    assert_eq!(compactions(&server, "remote_compactions_done"), done);
    assert_eq!(compactions(&server, "compaction_workers"), 0);
    // And back to the worker.
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "compaction-workers", &worker.url],
    );
    let config: Vec<String> = run(&mut con, &["CONFIG", "GET", "compaction-workers"]);
    assert_eq!(config, ["compaction-workers", worker.url.as_str()]);
    for round in ROUNDS + 12..ROUNDS + 24 {
        write_round(&mut con, round);
    }
    wait_for("a remote compaction", Duration::from_secs(30), || {
        compactions(&server, "remote_compactions_done") > done
    });
}

#[test]
fn bad_worker_settings_are_refused() {
    let server = node(&[], &[]);
    let mut con = server.client();
    let refusal = common::fails(
        &mut con,
        &["CONFIG", "SET", "compaction-workers", "ftp://x"],
    );
    assert!(refusal.contains("is not a worker's URL"), "{refusal}");
    let refusal = common::fails(
        &mut con,
        &["CONFIG", "SET", "compaction-remote-timeout", "0"],
    );
    assert!(refusal.starts_with("ERR CONFIG SET failed"), "{refusal}");
}

/// Loads `server` with the workload while a reader reads; once a job runs on `worker`, does
/// `fault` to it. Then checks the data against local compaction's, and that jobs fell back.
fn fault_mid_job(server: &TestServer, worker: &mut Worker, fault: impl FnOnce(&mut Worker)) {
    let expected = reference();
    let reader = Reader::start(server);
    let loader = std::thread::spawn({
        let mut con = server.client();
        move || {
            for round in 0..ROUNDS {
                write_round(&mut con, round);
            }
        }
    });
    wait_for("a job on the worker", Duration::from_secs(60), || {
        worker.metric("shale_compactor_jobs_running") >= 1.0
    });
    fault(worker);
    loader.join().expect("every write acknowledged");
    assert!(reader.finish() > 0);
    run::<()>(&mut server.client(), &["DEL", "fixed"]);
    assert_eq!(fingerprint(server), expected);
    assert!(compactions(server, "remote_compaction_fallbacks") >= 1);
    assert!(compactions(server, "local_compactions") >= 1);
}

#[test]
fn a_worker_killed_mid_job_changes_no_data() {
    let mut worker = Worker::start(&["--jobs", "1"]);
    let server = node(&[&worker], &[]);
    fault_mid_job(&server, &mut worker, Worker::kill);
}

#[test]
fn a_worker_hung_mid_job_times_out_and_changes_no_data() {
    let mut worker = Worker::start(&["--jobs", "1"]);
    let server = node(&[&worker], &["--compaction-remote-timeout", "1"]);
    // Stopped, it still accepts connections (the kernel does) and answers nothing.
    fault_mid_job(&server, &mut worker, |worker| worker.signal("STOP"));
}

/// What a misbehaving worker answers each job.
#[derive(Clone, Copy, Debug)]
enum Misbehaviour {
    /// An HTTP error.
    Error,
    /// A 200 whose body is not a job's reply.
    NotJson,
    /// A reply whose result is not RocksDB's.
    Garbage,
    /// A real worker's reply, with its first output file cut short.
    CutFile,
    /// A real worker's reply, with a byte of its first output file changed.
    DamagedFile,
}

/// A worker that misbehaves: an HTTP server that answers every job as `misbehaviour` says,
/// passing the job to `real` first where the misbehaviour needs a real result.
struct BadWorker {
    url: String,
}

impl BadWorker {
    fn start(misbehaviour: Misbehaviour, real: Option<String>) -> BadWorker {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let real = real.clone();
                std::thread::spawn(move || answer(stream, misbehaviour, real.as_deref()));
            }
        });
        BadWorker { url }
    }
}

fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((head, body))
}

fn respond(stream: &mut TcpStream, status: &str, body: &[u8]) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(body);
}

fn answer(mut stream: TcpStream, misbehaviour: Misbehaviour, real: Option<&str>) {
    let Some((_, body)) = read_request(&mut stream) else {
        return;
    };
    match misbehaviour {
        Misbehaviour::Error => respond(&mut stream, "500 Internal Server Error", b"no\n"),
        Misbehaviour::NotJson => respond(&mut stream, "200 OK", b"<html>hello</html>"),
        Misbehaviour::Garbage => {
            respond(&mut stream, "200 OK", br#"{"result":"AQAAAGdhcmJhZ2U="}"#)
        }
        Misbehaviour::CutFile | Misbehaviour::DamagedFile => {
            let real = real.expect("a real worker");
            let address = real.trim_start_matches("http://");
            let mut upstream = TcpStream::connect(address).expect("real worker");
            let _ = write!(
                upstream,
                "POST /compact HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = upstream.write_all(&body);
            let mut response = Vec::new();
            let _ = upstream.read_to_end(&mut response);
            let request: serde_json::Value = serde_json::from_slice(&body).expect("job");
            let output = PathBuf::from(request["output"].as_str().expect("output"));
            if let Some(file) = std::fs::read_dir(&output)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "sst"))
            {
                let mut bytes = std::fs::read(&file).expect("output file");
                match misbehaviour {
                    Misbehaviour::CutFile => bytes.truncate(bytes.len() / 2),
                    _ => {
                        let middle = bytes.len() / 2;
                        bytes[middle] ^= 0x55;
                    }
                }
                std::fs::write(&file, bytes).expect("damage");
            }
            let _ = stream.write_all(&response);
        }
    }
}

#[test]
fn answers_that_do_not_verify_are_compacted_locally() {
    let real = Worker::start(&["--jobs", "1"]);
    for misbehaviour in [
        Misbehaviour::Error,
        Misbehaviour::NotJson,
        Misbehaviour::Garbage,
        Misbehaviour::CutFile,
        Misbehaviour::DamagedFile,
    ] {
        let real_jobs = real.metric("shale_compactor_jobs_done_total");
        let bad = BadWorker::start(misbehaviour, Some(real.url.clone()));
        let server = TestServer::start_with(&[
            SMALL_MEMTABLES[0],
            SMALL_MEMTABLES[1],
            "--compaction-workers",
            &bad.url,
        ]);
        load_and_check(&server);
        settle(&server);
        let fallbacks = compactions(&server, "remote_compaction_fallbacks");
        assert!(fallbacks >= 3, "{misbehaviour:?}: {fallbacks} fallbacks");
        assert_eq!(
            compactions(&server, "remote_compactions_done"),
            0,
            "{misbehaviour:?}"
        );
        assert_eq!(compactions(&server, "remote_compactions_failed"), 0);
        assert!(job_dirs(&server).is_empty(), "{misbehaviour:?}");
        if matches!(
            misbehaviour,
            Misbehaviour::CutFile | Misbehaviour::DamagedFile
        ) {
            // The real worker did the jobs; only the damage made them fall back.
            let done = real.metric("shale_compactor_jobs_done_total") - real_jobs;
            assert!(
                done >= 3.0,
                "{misbehaviour:?}: {done} jobs on the real worker"
            );
        }
    }
}

/// Rounds written before the node is killed: a round fills about one memtable, a compaction
/// starts at 4 level-0 files, and writes stop at 36.
const KILLED_AFTER: u64 = 12;

#[test]
fn a_node_killed_while_jobs_are_out_cleans_up_at_its_next_start() {
    let mut worker = Worker::start(&["--jobs", "1"]);
    worker.signal("STOP");
    let mut server = node(&[&worker], &["--appendfsync", "always"]);
    // A part of the workload, every write acknowledged, while the jobs hang on the worker
    // (few enough level-0 files that writes do not stop).
    let mut con = server.client();
    for round in 0..KILLED_AFTER {
        write_round(&mut con, round);
    }
    wait_for("a job out", Duration::from_secs(60), || {
        compactions(&server, "remote_compactions_running") >= 1
    });
    assert!(!job_dirs(&server).is_empty());
    server.kill();
    worker.kill();

    // The worker is gone (connections refused): compactions run locally.
    server.start_again();
    assert!(job_dirs(&server).is_empty(), "{:?}", job_dirs(&server));
    let mut con = server.client();
    for round in KILLED_AFTER..ROUNDS {
        write_round(&mut con, round);
    }
    assert_eq!(fingerprint(&server), reference());
    assert!(compactions(&server, "local_compactions") >= 1);
}

#[test]
fn a_full_output_filesystem_is_compacted_locally() {
    let worker = Worker::start(&["--jobs", "1"]);
    let server = node(&[&worker], &[]);
    // The jobs' output directory on a filesystem of its own, too small for any output.
    let root = jobs_root(&server);
    std::fs::create_dir_all(&root).expect("output root");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&root)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: can't mount a tmpfs here (the test needs root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(root);
    load_and_check(&server);
    assert!(compactions(&server, "remote_compaction_fallbacks") >= 3);
    assert_eq!(compactions(&server, "remote_compactions_done"), 0);
    assert!(worker.metric("shale_compactor_jobs_failed_total") >= 1.0);
}

#[test]
fn two_nodes_share_two_workers_and_one_killed_mid_load_changes_no_data() {
    let first = Worker::start(&["--jobs", "2"]);
    let mut second = Worker::start(&["--jobs", "2"]);
    let nodes = [node(&[&first, &second], &[]), node(&[&second, &first], &[])];
    let expected = reference();
    let loaders: Vec<_> = nodes
        .iter()
        .map(|server| {
            let mut con = server.client();
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    write_round(&mut con, round);
                }
            })
        })
        .collect();
    // Each node sends its jobs to its workers in turn, so two jobs done by each node were
    // done on both workers.
    wait_for(
        "jobs of both nodes on both workers",
        Duration::from_secs(60),
        || {
            first.metric("shale_compactor_jobs_done_total") >= 2.0
                && second.metric("shale_compactor_jobs_done_total") >= 2.0
                && nodes
                    .iter()
                    .all(|server| compactions(server, "remote_compactions_done") >= 2)
        },
    );
    second.kill();
    for loader in loaders {
        loader.join().expect("every write acknowledged");
    }
    for server in &nodes {
        assert_eq!(fingerprint(server), expected);
    }
}

/// A replica's full sync opens the copy it received and closes the database it had (RocksDB
/// then cancels that database's waits for good): the new database's jobs still go to the
/// worker.
#[test]
fn a_replica_sends_its_jobs_after_a_full_sync() {
    let worker = Worker::start(&["--jobs", "2"]);
    let master = node(&[], &[]);
    let replica = node(&[&worker], &[]);
    run::<()>(&mut master.client(), &["SET", "before", "the sync"]);
    let port = master.port.to_string();
    run::<()>(&mut replica.client(), &["REPLICAOF", "127.0.0.1", &port]);
    wait_for("the replica's link", Duration::from_secs(60), || {
        common::info_text(&mut replica.client(), "replication", "master_link_status") == "up"
    });
    load(&master);
    wait_for(
        "a remote compaction on the replica",
        Duration::from_secs(60),
        || compactions(&replica, "remote_compactions_done") >= 1,
    );
    assert_eq!(compactions(&replica, "remote_compaction_fallbacks"), 0);
}
