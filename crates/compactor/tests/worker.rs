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
    // Jobs the worker cannot run: a family Shale does not have, an input that is not base64,
    // one whose input compacts another family (or none), a database that is not there.
    let dir = tempfile::tempdir().expect("temp dir");
    let output = dir.path().join("out");
    let job = |family: &str, input: &str| {
        format!(
            r#"{{"db":"/nonexistent/db","output":"{}","family":"{family}","settings":{{"block_size":4096,"bloom_bits_per_key":10.0,"min_blob_size":0}},"input":"{input}"}}"#,
            output.display()
        )
    };
    // RocksDB's serialized input of a compaction of family `meta`.
    let meta = "AQAAAGNmX25hbWU9NkQ2NTc0NjE7aW5wdXRfZmlsZXM9O29wdGlvbnNfZmlsZV9udW1iZXI9MTs=";
    for (family, input, answer) in [
        ("nope", meta, "bad job: unknown column family\n"),
        ("meta", "!!", "bad job: input is not base64\n"),
        (
            "data",
            meta,
            "bad job: the input compacts another column family\n",
        ),
        (
            "meta",
            "AQAAAGdhcmJhZ2U=",
            "bad job: the input compacts another column family\n",
        ),
    ] {
        let (status, body) = worker.request("POST", "/compact", &job(family, input));
        assert_eq!((status, body.as_str()), (400, answer), "{family} {input}");
    }
    let (status, body) = worker.request("POST", "/compact", &job("meta", meta));
    assert_eq!(status, 500, "{body}");
    let (status, metrics) = worker.request("GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("shale_compactor_jobs_failed_total 5"),
        "{metrics}"
    );
}
