//! A real `shale-server` process on an ephemeral port in a temporary directory.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct TestServer {
    child: Option<Child>,
    pub port: u16,
    pub dir: tempfile::TempDir,
    config_file: Option<std::path::PathBuf>,
    extra: Vec<String>,
    env: Vec<(String, String)>,
    /// A program the server runs under (`setpriv ...`), with its arguments.
    wrapper: Vec<String>,
}

impl TestServer {
    pub fn start() -> TestServer {
        TestServer::start_with(&[])
    }

    /// Starts with extra `--name value` arguments.
    pub fn start_with(extra: &[&str]) -> TestServer {
        TestServer::start_with_config(None, extra)
    }

    /// Starts with a config file (which redis-server syntax puts first) and extra arguments.
    pub fn start_with_config(config_file: Option<&std::path::Path>, extra: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = TestServer {
            child: None,
            port: 0,
            dir,
            config_file: config_file.map(|p| p.to_path_buf()),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            wrapper: Vec::new(),
        };
        server.spawn();
        server
    }

    /// Starts with environment variables set (fault injection).
    pub fn start_with_env(env: &[(&str, &str)]) -> TestServer {
        let mut server = TestServer {
            child: None,
            port: 0,
            dir: tempfile::tempdir().expect("temp dir"),
            config_file: None,
            extra: Vec::new(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            wrapper: Vec::new(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let binary = env!("CARGO_BIN_EXE_shale-server");
        let mut command = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        if let Some(file) = &self.config_file {
            command.arg(file);
        }
        let mut child = command
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
            .arg(self.dir.path().join("data"))
            .args(["--loglevel", "warning"])
            .args(&self.extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn shale-server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("server exited before it was ready")
                .expect("read stdout");
            if let Some(addr) = line.strip_prefix("Ready to accept connections tcp ") {
                break addr
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .expect("port");
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        self.port = port;
        self.child = Some(child);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        client.get_connection().expect("connect")
    }

    pub fn client_resp3(&self) -> redis::Connection {
        let client = redis::Client::open(format!("{}?protocol=resp3", self.url())).expect("client");
        client.get_connection().expect("connect")
    }

    pub fn raw(&self) -> RawClient {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        RawClient { stream }
    }

    /// Starts again on the same data directory and the same port (after [`Self::kill`]), so
    /// that peers that knew its address find it there.
    /// Starts under `wrapper` (a program and its arguments, to which the server's command line
    /// is appended), with extra arguments.
    pub fn start_wrapped(wrapper: &[&str], extra: &[&str]) -> TestServer {
        let mut server = TestServer {
            child: None,
            port: 0,
            dir: tempfile::tempdir().expect("temp dir"),
            config_file: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            wrapper: wrapper.iter().map(|s| s.to_string()).collect(),
        };
        server.spawn();
        server
    }

    pub fn start_again_on_same_port(&mut self) {
        self.extra
            .extend(["--port".to_string(), self.port.to_string()]);
        self.spawn();
    }

    /// Sends signal `name` (STOP, CONT, ...) to the running process.
    pub fn signal(&self, name: &str) {
        assert!(send_signal(self.pid(), name), "kill -{name} failed");
    }

    /// The process id, to signal it.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Kills the process with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops with SIGTERM and checks that the server exited cleanly, not killed by the signal.
    pub fn stop(&mut self) {
        let mut child = self.child.take().expect("running");
        send_signal(child.id(), "TERM");
        let status = child.wait().expect("wait");
        assert!(
            status.success(),
            "shale-server did not exit cleanly: {status}"
        );
    }

    /// Waits for the process to exit on its own (after SHUTDOWN).
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        self.child.take().expect("running").wait().expect("wait")
    }

    /// Waits at most `limit` for the process to exit on its own; `None` (after killing it) if
    /// it is still running then.
    pub fn wait_exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                self.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM without waiting.
    pub fn terminate(&self) {
        send_signal(self.pid(), "TERM");
    }

    /// Starts again on the same data directory (on a new port).
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
        self.spawn();
    }

    pub fn start_again(&mut self) {
        self.spawn();
    }

    /// Counts every record of a column family; only while the server is stopped.
    pub fn count_records(&self, cf: shale_storage::Cf) -> usize {
        self.record_lengths(cf).len()
    }

    /// The length of every record's value in a column family, in key order; only while the
    /// server is stopped.
    pub fn record_lengths(&self, cf: shale_storage::Cf) -> Vec<usize> {
        use shale_storage::{Engine, RocksConfig, RocksEngine, ScanDirection};
        let engine = RocksEngine::open(
            &self.dir.path().join("data").join("db"),
            &RocksConfig::default(),
        )
        .unwrap();
        let mut lengths = Vec::new();
        engine
            .scan(
                cf,
                &[],
                &[0xFF; 16],
                ScanDirection::Forward,
                &mut |_, value| {
                    lengths.push(value.len());
                    true
                },
            )
            .unwrap();
        lengths
    }
}

/// Sends signal `name` (TERM, STOP, CONT) to process `pid`; whether `kill` succeeded.
fn send_signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .is_ok_and(|status| status.success())
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A client that speaks raw bytes, to check exact wire replies.
pub struct RawClient {
    pub stream: TcpStream,
}

impl RawClient {
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Sends one command as a RESP array.
    pub fn command(&mut self, args: &[&str]) {
        self.send(request(args).as_bytes());
    }

    /// Sends several commands with one write, so the server reads them together.
    pub fn pipeline(&mut self, commands: &[&[&str]]) {
        let bytes: String = commands.iter().map(|args| request(args)).collect();
        self.send(bytes.as_bytes());
    }

    /// Reads exactly `expected.len()` bytes and compares them.
    pub fn expect(&mut self, expected: &[u8]) {
        let mut got = vec![0; expected.len()];
        self.stream.read_exact(&mut got).expect("read reply");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected)
        );
    }

    /// Reads and drops replies up to and including `marker`, such as HELLO's map before the
    /// reply of a PING sent after it.
    pub fn skip_through(&mut self, marker: &[u8]) {
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !seen.ends_with(marker) {
            self.stream.read_exact(&mut byte).expect("read reply");
            seen.push(byte[0]);
        }
    }

    /// Reads one line, without its CRLF.
    pub fn read_line(&mut self) -> String {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            self.stream.read_exact(&mut byte).expect("read line");
            line.push(byte[0]);
        }
        line.truncate(line.len() - 2);
        String::from_utf8_lossy(&line).into_owned()
    }

    /// Whether the server closed the connection (reads to EOF).
    pub fn is_closed(&mut self) -> bool {
        let mut rest = Vec::new();
        self.stream.read_to_end(&mut rest).is_ok() && rest.is_empty()
    }
}

/// One command as a RESP array.
fn request(args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for arg in args {
        out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    out
}

/// Collects `(channel, payload)` of pub/sub messages until `count` arrive.
pub fn collect_messages(pubsub: &mut redis::PubSub<'_>, count: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|_| {
            let msg = pubsub.get_message().expect("a message");
            (
                msg.get_channel_name().to_string(),
                msg.get_payload::<String>().unwrap(),
            )
        })
        .collect()
}

/// The resident memory of process `pid`, in kB (0 if it cannot be read).
pub fn resident_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A port nothing listens on now (the kernel's pick, released at once): for a program that
/// needs its port on its command line, or an address that refuses connections.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The full error line of a failed command: `CODE detail`.
pub fn error_line(err: redis::RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => err.to_string(),
    }
}

/// Runs a command that must fail and returns its error line.
pub fn fails(con: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(value) => panic!("{args:?} succeeded with {value:?}"),
        Err(err) => error_line(err),
    }
}

/// Runs a command and converts its reply.
/// A field of an INFO section, as text (empty if missing).
pub fn info_text(con: &mut redis::Connection, section: &str, field: &str) -> String {
    let info: String = run(con, &["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// A numeric field of an INFO section.
pub fn info_field(con: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = run(con, &["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} missing from INFO {section}"))
}

/// A deterministic source of numbers for model tests: each call gives one below `bound`.
pub fn numbers(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |bound| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % bound
    }
}

/// Runs `read` and counts the reads of the data family's record cache that missed meanwhile.
pub fn data_cache_misses_during<T>(
    con: &mut redis::Connection,
    read: impl FnOnce(&mut redis::Connection) -> T,
) -> (T, u64) {
    let misses = |con: &mut redis::Connection| info_field(con, "rocksdb", "data_cache_misses");
    let before = misses(con);
    let value = read(con);
    (value, misses(con) - before)
}

pub fn run<T: redis::FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// The Python interpreter that has redis-py: `scripts/test.sh` installs it into a virtualenv
/// and names it in `SHALE_PYTHON`; without it, a `python3` that can import redis.
pub fn python() -> String {
    if let Ok(python) = std::env::var("SHALE_PYTHON") {
        return python;
    }
    let importable = Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        importable,
        "redis-py is missing: run ./scripts/test.sh, or set SHALE_PYTHON to a python with redis"
    );
    "python3".into()
}

/// Runs MULTI, PING, EXEC and converts EXEC's reply: `["PONG"]`, or nil if a watch broke.
pub fn exec_ping<T: redis::FromRedisValue>(con: &mut redis::Connection) -> T {
    run::<()>(con, &["MULTI"]);
    run::<()>(con, &["PING"]);
    run(con, &["EXEC"])
}

/// Waits until INFO reports `n` blocked clients (a blocking command reached its wait).
/// Polls `done` until it holds, failing the test after 10 s: for what the server does in
/// the background (the expiry cycle, a kill reaching its connection).
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `cmdstat_<name>:` line of INFO commandstats, or "" if there is none.
pub fn command_stats<'a>(info: &'a str, name: &str) -> &'a str {
    let prefix = format!("cmdstat_{name}:");
    info.lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_default()
}

pub fn wait_for_blocked(con: &mut redis::Connection, n: usize) {
    for _ in 0..500 {
        let info: String = run(con, &["INFO", "clients"]);
        if info.contains(&format!("blocked_clients:{n}\r\n")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("never saw {n} blocked clients");
}

/// A real `redis-server` 7.0 (Debian's, which `scripts/test.sh` installs) on a free port in a
/// temporary directory, without persistence, with DEBUG enabled: the reference.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    /// Its `dir`, where SAVE writes `dump.rdb`.
    pub dir: tempfile::TempDir,
}

impl RedisServer {
    pub fn start(extra: &[&str]) -> RedisServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args([
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
                "--dir",
            ])
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is missing: run ./scripts/test.sh, which installs it");
        let server = RedisServer { child, port, dir };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while redis::Client::open(server.url())
            .and_then(|c| c.get_connection())
            .is_err()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to redis-server")
    }

    /// Sends signal `name` (STOP, CONT) to the process.
    pub fn signal(&self, name: &str) {
        assert!(send_signal(self.child.id(), name), "kill -{name} failed");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
