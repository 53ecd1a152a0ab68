//! A damaged table file is reported, not hidden: a read that meets it fails with an error
//! naming the file and the server goes on; `shale-server repair` rebuilds the database from
//! what is readable.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::process::Command;

use common::{run, TestServer};

fn fill(con: &mut redis::Connection, prefix: &str) {
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET")
            .arg(format!("{prefix}{i}"))
            .arg(format!("{prefix}-{i}-{}", "x".repeat(100)))
            .ignore();
    }
    pipe.query::<()>(con).expect("fill");
}

/// The files of the database in `data` with extension `ext` (`sst`, `log`), oldest first.
fn files(data: &std::path::Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data.join("db"))
        .expect("db dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// The file of the database in `data` with extension `ext` written last.
fn newest(data: &std::path::Path, ext: &str) -> PathBuf {
    files(data, ext).pop().expect("a file")
}

#[test]
fn a_damaged_table_is_named_and_repair_keeps_what_is_readable() {
    let mut server = TestServer::start();
    let mut con = server.client();
    fill(&mut con, "a");
    server.restart(); // a clean stop flushes the memtables: table files of a-keys
    let before = files(&server.dir.path().join("data"), "sst");
    let mut con = server.client();
    fill(&mut con, "b");
    server.stop();
    // The b-keys' metadata: the largest of the tables the second stop flushed, whichever
    // family was flushed last.
    let damaged = files(&server.dir.path().join("data"), "sst")
        .into_iter()
        .filter(|file| !before.contains(file))
        .max_by_key(|file| std::fs::metadata(file).map_or(0, |m| m.len()))
        .expect("a table of b-keys");
    let length = std::fs::metadata(&damaged).expect("table").len();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&damaged)
        .expect("open table");
    file.seek(SeekFrom::Start(length / 4)).expect("seek");
    file.write_all(&[0xA5; 256]).expect("damage");
    drop(file);
    let name = damaged
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_string();

    server.start_again();
    let mut con = server.client();
    let errors: Vec<String> = (0..2000)
        .filter_map(|i| {
            redis::cmd("GET")
                .arg(format!("b{i}"))
                .query::<Option<String>>(&mut con)
                .err()
                .map(common::error_line)
        })
        .collect();
    assert!(!errors.is_empty(), "no read met the damage");
    assert!(
        errors[0].contains("Corruption") && errors[0].contains(&name),
        "{}",
        errors[0]
    );
    assert_eq!(run::<String>(&mut con, &["PING"]), "PONG");
    assert!(run::<Option<String>>(&mut con, &["GET", "a7"]).is_some());
    server.stop();

    let data = server.dir.path().join("data");
    let repaired = Command::new(env!("CARGO_BIN_EXE_shale-server"))
        .args(["repair", "--dir"])
        .arg(&data)
        .output()
        .expect("repair");
    assert!(
        repaired.status.success(),
        "{}",
        String::from_utf8_lossy(&repaired.stderr)
    );
    assert!(data.join("db").join("lost").join(&name).exists());
    server.start_again();
    let mut con = server.client();
    for i in 0..2000 {
        let value: Option<String> = run(&mut con, &["GET", &format!("a{i}")]);
        assert!(value.is_some_and(|v| v.starts_with(&format!("a-{i}-"))));
        // What the damaged file held is gone, and reading it fails no more.
        let _: Option<String> = run(&mut con, &["GET", &format!("b{i}")]);
    }
}

/// One SET per write, so each is a WAL record of its own.
fn set_each(con: &mut redis::Connection, prefix: &str, count: usize) {
    for i in 0..count {
        let _: () = run(con, &["SET", &format!("{prefix}{i}"), &"v".repeat(100)]);
    }
}

fn damage(path: &std::path::Path, at: u64, bytes: usize) {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open WAL");
    file.seek(SeekFrom::Start(at)).expect("seek");
    file.write_all(&vec![0xA5; bytes]).expect("damage");
}

/// A server started on a data directory by hand, to read what it logs at start.
struct Started {
    child: std::process::Child,
    /// Its port, once it said it was ready; `None` if it exited first.
    port: Option<u16>,
    stderr: std::thread::JoinHandle<String>,
}

impl Started {
    fn on(data: &std::path::Path) -> Started {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale-server"))
            .args([
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                "--loglevel",
                "warning",
                "--dir",
            ])
            .arg(data)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let stderr = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut text);
            text
        });
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let port = lines.find_map(|line| {
            let line = line.ok()?;
            let addr = line.strip_prefix("Ready to accept connections tcp ")?;
            addr.rsplit(':').next()?.parse().ok()
        });
        std::thread::spawn(move || for _ in lines {});
        Started {
            child,
            port,
            stderr,
        }
    }

    /// Stops the server (if it runs) and returns what it logged.
    fn log(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.join().unwrap_or_default()
    }
}

#[test]
fn damage_inside_the_wal_stops_the_start_and_repair_keeps_the_writes_around_it() {
    let mut server = TestServer::start();
    let mut con = server.client();
    set_each(&mut con, "w", 2000);
    std::thread::sleep(std::time::Duration::from_millis(200)); // the WAL flushed to the OS
    server.kill();
    let data = server.dir.path().join("data");
    let wal = newest(&data, "log");
    let length = std::fs::metadata(&wal).expect("WAL").len();
    damage(&wal, length / 4, 64);

    let started = Started::on(&data);
    let refused = started.port.is_none();
    let output = started.log();
    assert!(refused, "started on a damaged WAL: {output}");
    eprintln!("start refused: {}", output.lines().last().unwrap_or(""));
    let name = wal.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        output.contains("is damaged at byte") && output.contains(name),
        "{output}"
    );

    let repaired = Command::new(env!("CARGO_BIN_EXE_shale-server"))
        .args(["repair", "--dir"])
        .arg(&data)
        .output()
        .expect("repair");
    assert!(repaired.status.success(), "{repaired:?}");
    server.start_again();
    let mut con = server.client();
    let missing: Vec<usize> = (0..2000)
        .filter(|i| run::<Option<String>>(&mut con, &["GET", &format!("w{i}")]).is_none())
        .collect();
    // The damaged record's 32 KB block (about 250 writes) is lost; what is before and after
    // it is kept.
    eprintln!(
        "after repair: {} of 2000 keys missing ({:?}..={:?})",
        missing.len(),
        missing.first(),
        missing.last()
    );
    assert!(!missing.is_empty() && missing.len() < 400, "{missing:?}");
    assert!(
        !missing.contains(&0) && !missing.contains(&1999),
        "{missing:?}"
    );
}

#[test]
fn a_damaged_last_wal_record_is_dropped_with_a_warning() {
    let mut server = TestServer::start();
    let mut con = server.client();
    set_each(&mut con, "t", 2000);
    std::thread::sleep(std::time::Duration::from_millis(200));
    server.kill();
    let data = server.dir.path().join("data");
    let wal = newest(&data, "log");
    let length = std::fs::metadata(&wal).expect("WAL").len();
    damage(&wal, length - 20, 4);

    let started = Started::on(&data);
    let Some(port) = started.port else {
        panic!("did not start: {}", started.log());
    };
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut con = client.get_connection().expect("connect");
    let present = (0..2000)
        .filter(|i| run::<Option<String>>(&mut con, &["GET", &format!("t{i}")]).is_some())
        .count();
    let _: () = run(&mut con, &["SET", "after", "restart"]);
    std::thread::sleep(std::time::Duration::from_millis(200)); // the WAL flushed to the OS
    let output = started.log(); // a kill: the new write is in the newer WAL only
    assert!(output.contains("damaged record"), "{output}");
    eprintln!("{present} of 2000 keys; {}", output.trim());
    // The torn write is dropped (unless the WAL's last record was a write of the server's).
    assert!(present >= 1999, "{present}");

    // What the damaged WAL held was flushed at that start: the next start does not meet it.
    let again = Started::on(&data);
    let Some(port) = again.port else {
        panic!("did not start again: {}", again.log());
    };
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut con = client.get_connection().expect("connect");
    assert_eq!(
        run::<Option<String>>(&mut con, &["GET", "after"]).as_deref(),
        Some("restart")
    );
    assert!(run::<Option<String>>(&mut con, &["GET", "t0"]).is_some());
    let output = again.log();
    assert!(!output.contains("damaged"), "{output}");
}

#[test]
fn repair_of_a_directory_without_a_database_fails() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repaired = Command::new(env!("CARGO_BIN_EXE_shale-server"))
        .args(["repair", "--dir"])
        .arg(dir.path())
        .output()
        .expect("repair");
    assert!(!repaired.status.success());
    assert!(String::from_utf8_lossy(&repaired.stderr).contains("no database in"));
    assert!(!dir.path().join("db").join("CURRENT").exists());
}
