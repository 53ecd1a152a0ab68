//! SAVE, BGSAVE and LASTSAVE: a backup is a database directory another server starts from.

mod common;

use std::path::Path;

use common::{fails, info_field, info_text, run, wait_until, TestServer};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("read backup") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// A server started on a copy of `server`'s backup, as `db` of a data directory of its own.
fn start_from_backup(server: &TestServer, scratch: &Path) -> TestServer {
    let data = scratch.join("data");
    let _ = std::fs::remove_dir_all(&data);
    copy_dir(
        &server.dir.path().join("data").join("backup"),
        &data.join("db"),
    );
    TestServer::start_with(&["--dir", data.to_str().expect("path")])
}

#[test]
fn save_and_bgsave_write_backups_a_server_starts_from() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut fill = redis::pipe();
    for i in 0..2000 {
        fill.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    fill.cmd("HSET").arg("h").arg("f").arg("v").ignore();
    fill.cmd("RPUSH").arg("l").arg("a").arg("b").ignore();
    fill.query::<()>(&mut con).expect("fill");
    let started: i64 = run(&mut con, &["LASTSAVE"]);
    assert!(info_field(&mut con, "persistence", "rdb_changes_since_last_save") > 0);

    run::<()>(&mut con, &["SAVE"]);
    assert!(run::<i64>(&mut con, &["LASTSAVE"]) >= started);
    assert_eq!(
        info_field(&mut con, "persistence", "rdb_changes_since_last_save"),
        0
    );
    assert_eq!(
        info_field(&mut con, "persistence", "rdb_saves"),
        0,
        "SAVE is no BGSAVE"
    );
    assert_eq!(
        info_text(&mut con, "persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    run::<()>(&mut con, &["SET", "after", "save"]);

    let scratch = tempfile::tempdir().expect("temp dir");
    let restored = start_from_backup(&server, scratch.path());
    let mut copy = restored.client();
    assert_eq!(run::<String>(&mut copy, &["GET", "key:1999"]), "1999");
    assert_eq!(run::<String>(&mut copy, &["HGET", "h", "f"]), "v");
    assert_eq!(
        run::<Vec<String>>(&mut copy, &["LRANGE", "l", "0", "-1"]),
        ["a", "b"]
    );
    assert_eq!(
        run::<i64>(&mut copy, &["EXISTS", "after"]),
        0,
        "written after the backup"
    );
    assert_eq!(run::<i64>(&mut copy, &["DBSIZE"]), 2002);
    drop(restored);

    assert_eq!(
        run::<String>(&mut con, &["BGSAVE"]),
        "Background saving started"
    );
    wait_until("the background save ends", || {
        info_field(&mut con, "persistence", "rdb_bgsave_in_progress") == 0
    });
    assert_eq!(info_field(&mut con, "persistence", "rdb_saves"), 1);
    assert_eq!(
        info_text(&mut con, "persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    let restored = start_from_backup(&server, scratch.path());
    assert_eq!(
        run::<String>(&mut restored.client(), &["GET", "after"]),
        "save"
    );

    assert_eq!(fails(&mut con, &["BGSAVE", "NOW"]), "ERR syntax error");
    run::<()>(&mut con, &["MULTI"]);
    assert_eq!(
        fails(&mut con, &["SAVE"]),
        "ERR Command not allowed inside a transaction"
    );
}

/// packaging/shale.conf, every option at its default, is a configuration the server starts
/// with, and leaves every option as a server without it has it (the test's port, directory
/// and log level, given on the command line, override the file's).
#[test]
fn the_example_configuration_is_every_default() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/shale.conf");
    let configured = TestServer::start_with_config(Some(&example), &[]);
    let plain = TestServer::start();
    let all = |server: &TestServer| {
        let mut pairs: Vec<String> = run(&mut server.client(), &["CONFIG", "GET", "*"]);
        let mut options: Vec<(String, String)> = pairs
            .chunks_mut(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .filter(|(name, _)| name != "port" && name != "dir")
            .collect();
        options.sort();
        options
    };
    assert_eq!(all(&configured), all(&plain));
}
