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

/// The table file written last.
fn newest_table(server: &TestServer) -> PathBuf {
    let db = server.dir.path().join("data").join("db");
    let mut tables: Vec<PathBuf> = std::fs::read_dir(db)
        .expect("db dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    tables.sort();
    tables.pop().expect("a table file")
}

#[test]
fn a_damaged_table_is_named_and_repair_keeps_what_is_readable() {
    let mut server = TestServer::start();
    let mut con = server.client();
    fill(&mut con, "a");
    server.restart(); // a clean stop flushes the memtables: one table file of a-keys
    let mut con = server.client();
    fill(&mut con, "b");
    server.stop();
    let damaged = newest_table(&server);
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
