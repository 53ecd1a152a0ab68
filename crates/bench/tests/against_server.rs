//! shale-bench against a real shale-server: the counts add up.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary sits next to this test's `deps` directory when the workspace is built.
fn start_server() -> Server {
    let exe = std::env::current_exe().unwrap();
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("shale-server");
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(binary)
        .args(["--port", "0", "--loglevel", "warning", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("shale-server is built with the workspace");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = loop {
        let line = lines.next().expect("server output").unwrap();
        if let Some(addr) = line.strip_prefix("Ready to accept connections tcp ") {
            break addr.rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Server {
        child,
        port,
        _dir: dir,
    }
}

fn bench(port: u16, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_shale-bench"))
        .args(["-port", &port.to_string(), "-q", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn field(json: &str, name: &str) -> u64 {
    let start = json.find(&format!("\"{name}\":")).unwrap() + name.len() + 3;
    json[start..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn command(port: u16, line: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    let mut buf = [0u8; 256];
    let n = stream.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn operation_counts_add_up() {
    let server = start_server();
    let json = bench(
        server.port,
        &["-p", "4", "-c", "2000", "-command", "INCR counter"],
    );
    assert_eq!(field(&json, "ops"), 2000, "{json}");
    assert_eq!(field(&json, "errors"), 0, "{json}");
    assert_eq!(command(server.port, "GET counter"), "$4\r\n2000\r\n");

    let json = bench(
        server.port,
        &[
            "-p",
            "3",
            "-c",
            "1000",
            "-batching",
            "10",
            "-command",
            "INCR batched",
        ],
    );
    assert_eq!(field(&json, "ops"), 1000, "{json}");
    assert_eq!(command(server.port, "GET batched"), "$4\r\n1000\r\n");

    let json = bench(
        server.port,
        &[
            "-p",
            "2",
            "-c",
            "500",
            "-P",
            "16",
            "-r",
            "50",
            "--value-size",
            "7",
            "-command",
            "SET key:__RAND__ __VALUE__",
        ],
    );
    assert_eq!(field(&json, "ops"), 500, "{json}");
    assert_eq!(field(&json, "value_bytes"), 500 * 7, "{json}");
    let size = command(server.port, "DBSIZE");
    let keys: u64 = size.trim_start_matches(':').trim().parse().unwrap();
    assert!((3..=52).contains(&keys), "{size}");

    // A sequential MSET load writes each key of the range exactly once.
    let json = bench(
        server.port,
        &[
            "-p",
            "4",
            "-c",
            "100",
            "--mset",
            "4",
            "--dist",
            "sequential",
            "-r",
            "400",
            "--value-size",
            "10-20",
            "--text",
        ],
    );
    assert_eq!(field(&json, "ops"), 100, "{json}");
    let bytes = field(&json, "value_bytes");
    assert!((4000..=8000).contains(&bytes), "{json}");
    // key:0..399, plus `counter` and `batched` from above.
    assert_eq!(command(server.port, "DBSIZE"), ":402\r\n");

    let json = bench(
        server.port,
        &["-p", "2", "-c", "100", "-command", "NOSUCHCOMMAND"],
    );
    assert_eq!(field(&json, "errors"), 100, "{json}");
}

#[test]
fn timed_runs_report_every_second() {
    let server = start_server();
    let json = bench(
        server.port,
        &["-p", "2", "-d", "2", "--mget", "4", "-r", "100"],
    );
    assert!(field(&json, "ops") > 0, "{json}");
    let per_second = &json[json.find("\"per_second\":[").unwrap()..];
    assert!(per_second.matches(',').count() >= 1, "{json}");
}
