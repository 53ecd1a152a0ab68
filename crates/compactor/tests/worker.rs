//! `shale-compactor` as a process: its command line, and its HTTP answers to anything but a
//! node's job. Jobs from real nodes are tested in the server's `offloaded_compaction.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

const BINARY: &str = env!("CARGO_BIN_EXE_shale-compactor");

struct Worker {
    child: Child,
    address: String,
}

impl Worker {
    fn start() -> Worker {
        let mut child = Command::new(BINARY)
            .args(["--port", "0", "--jobs", "2"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let address = loop {
            let line = lines.next().expect("exited").expect("read");
            if let Some(rest) = line.strip_prefix("shale-compactor ready on http://") {
                break rest.split(',').next().expect("address").to_string();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Worker { child, address }
    }

    /// The status code and body of a request.
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        let status = response[9..12].parse().expect("status");
        let body = response.split_once("\r\n\r\n").expect("head").1.to_string();
        (status, body)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_command_line_is_checked() {
    let help = Command::new(BINARY).arg("--help").output().expect("run");
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--path-map"));
    for bad in [
        &["--jobs", "0"][..],
        &["--port", "http"],
        &["--path-map", "nowhere"],
        &["--color", "blue"],
        &["--port"],
    ] {
        let run = Command::new(BINARY).args(bad).output().expect("run");
        assert_eq!(run.status.code(), Some(1), "{bad:?}");
        assert!(!run.stderr.is_empty(), "{bad:?} says why");
    }
}

#[test]
fn health_metrics_and_bad_jobs() {
    let worker = Worker::start();
    assert_eq!(worker.request("GET", "/health", ""), (200, "ok\n".into()));
    let (status, metrics) = worker.request("GET", "/metrics", "");
    assert_eq!(status, 200);
    for name in [
        "shale_compactor_jobs_running 0",
        "shale_compactor_jobs_done_total 0",
        "shale_compactor_jobs_failed_total 0",
        "shale_compactor_read_bytes_total 0",
        "shale_compactor_written_bytes_total 0",
        "shale_compactor_job_seconds_total 0.000000",
    ] {
        assert!(
            metrics.lines().any(|line| line == name),
            "{name} in {metrics}"
        );
    }
    // Not a job at all: axum's rejection, and the worker lives on.
    let (status, _) = worker.request("POST", "/compact", "{not json");
    assert_eq!(status, 400);
    let (status, _) = worker.request("POST", "/compact", r#"{"db":"/x"}"#);
    assert_eq!(status, 422);
    // A job the worker cannot run: a family Shale does not have, an input that is not base64,
    // a database that is not there.
    let job = |family: &str, input: &str| {
        format!(
            r#"{{"db":"/nonexistent/db","output":"/tmp/shale-compactor-test-out","family":"{family}","settings":{{"block_size":4096,"bloom_bits_per_key":10.0,"min_blob_size":0}},"input":"{input}"}}"#
        )
    };
    let (status, body) = worker.request("POST", "/compact", &job("nope", "AQAAAA=="));
    assert_eq!(
        (status, body.as_str()),
        (400, "bad job: unknown column family\n")
    );
    let (status, body) = worker.request("POST", "/compact", &job("meta", "!!"));
    assert_eq!(
        (status, body.as_str()),
        (400, "bad job: input is not base64\n")
    );
    let (status, _) = worker.request("POST", "/compact", &job("meta", "AQAAAGdhcmJhZ2U="));
    assert_eq!(status, 500);
    let (status, metrics) = worker.request("GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("shale_compactor_jobs_failed_total 3"),
        "{metrics}"
    );
    let _ = std::fs::remove_dir_all("/tmp/shale-compactor-test-out");
}
