//! Functions (FUNCTION LOAD, FCALL) against real processes: libraries persist with the data,
//! follow a Shale master to its replicas, move to and from Redis as FUNCTION DUMP payloads,
//! and a running function is shown and stopped as Redis shows and stops it.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{error_line, fails, run, wait_until, RedisServer, TestServer};

/// A library `name` with a writing function `<name>_set` and a read-only `<name>_get`.
fn library(name: &str) -> String {
    format!(
        "#!lua name={name}
local function key(keys) return keys[1] end
redis.register_function('{name}_set', function(keys, args)
  return redis.call('SET', key(keys), args[1])
end)
redis.register_function{{function_name='{name}_get', flags={{'no-writes'}},
  callback=function(keys) return redis.call('GET', key(keys)) end}}"
    )
}

/// A reply flattened to its strings, integers and nils, in order.
fn flat(value: &redis::Value) -> Vec<String> {
    match value {
        redis::Value::Nil => vec!["nil".into()],
        redis::Value::Int(n) => vec![n.to_string()],
        redis::Value::BulkString(s) => vec![String::from_utf8_lossy(s).into_owned()],
        redis::Value::SimpleString(s) => vec![s.clone()],
        redis::Value::Array(items) => items.iter().flat_map(flat).collect(),
        other => panic!("unexpected reply {other:?}"),
    }
}

fn stats(con: &mut redis::Connection) -> Vec<String> {
    flat(&run::<redis::Value>(con, &["FUNCTION", "STATS"]))
}

/// A read-only function that loops until it is killed.
const LOOPING: &str = "#!lua name=looping
redis.register_function{function_name='spin', flags={'no-writes'},
  callback=function() while true do end end}";

#[test]
fn libraries_outlive_flushall_a_restart_and_a_crash() {
    let mut server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut con = server.client();
    assert_eq!(
        run::<String>(&mut con, &["FUNCTION", "LOAD", &library("lib")]),
        "lib"
    );
    run::<String>(&mut con, &["FCALL", "lib_set", "1", "k", "v"]);
    run::<()>(&mut con, &["FLUSHALL"]);
    assert_eq!(
        run::<Option<String>>(&mut con, &["FCALL_RO", "lib_get", "1", "k"]),
        None,
        "FLUSHALL removes keys, not libraries"
    );
    server.restart();
    let mut con = server.client();
    run::<String>(&mut con, &["FCALL", "lib_set", "1", "k", "v2"]);
    assert_eq!(
        run::<String>(&mut con, &["FCALL_RO", "lib_get", "1", "k"]),
        "v2"
    );

    // Acknowledged with appendfsync always: a kill -9 loses neither a load nor a delete.
    run::<String>(&mut con, &["FUNCTION", "LOAD", &library("second")]);
    run::<()>(&mut con, &["FUNCTION", "DELETE", "lib"]);
    server.kill();
    server.start_again();
    let mut con = server.client();
    assert_eq!(
        fails(&mut con, &["FCALL", "lib_get", "1", "k"]),
        "ERR Function not found"
    );
    run::<String>(&mut con, &["FCALL", "second_set", "1", "k", "v3"]);
    assert_eq!(
        stats(&mut con),
        [
            "running_script",
            "nil",
            "engines",
            "LUA",
            "libraries_count",
            "1",
            "functions_count",
            "2"
        ]
    );
    run::<()>(&mut con, &["FUNCTION", "FLUSH"]);
    server.restart();
    let listed: Vec<redis::Value> = run(&mut server.client(), &["FUNCTION", "LIST"]);
    assert!(listed.is_empty(), "FUNCTION FLUSH lasts: {listed:?}");
}

#[test]
fn libraries_follow_the_master_and_a_replica_runs_only_read_only_functions() {
    let master = TestServer::start();
    let mut m = master.client();
    run::<String>(&mut m, &["FUNCTION", "LOAD", &library("before")]);
    run::<String>(&mut m, &["FCALL", "before_set", "1", "k", "v"]);
    let replica = TestServer::start_with(&["--replicaof", &format!("127.0.0.1 {}", master.port)]);
    let mut r = replica.client();
    // The full sync brings the first library, the stream the second.
    wait_until("the replica has the first library", || {
        redis::cmd("FCALL_RO")
            .arg("before_get")
            .arg(1)
            .arg("k")
            .query::<String>(&mut r)
            .is_ok_and(|v| v == "v")
    });
    run::<String>(&mut m, &["FUNCTION", "LOAD", &library("after")]);
    wait_until("the replica has the second library", || {
        redis::cmd("FCALL_RO")
            .arg("after_get")
            .arg(1)
            .arg("k")
            .query::<String>(&mut r)
            .is_ok_and(|v| v == "v")
    });
    // A function that may write is refused before it runs, as Redis refuses it.
    assert_eq!(
        fails(&mut r, &["FCALL", "after_set", "1", "k", "x"]),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(
        fails(&mut r, &["FUNCTION", "LOAD", &library("own")]),
        "READONLY You can't write against a read only replica."
    );
    run::<()>(&mut m, &["FUNCTION", "DELETE", "before"]);
    wait_until("the replica forgot the deleted library", || {
        redis::cmd("FCALL_RO")
            .arg("before_get")
            .arg(1)
            .arg("k")
            .query::<String>(&mut r)
            .is_err_and(|e| e.to_string().contains("Function not found"))
    });
}

#[test]
fn function_dump_payloads_move_between_redis_and_shale() {
    let redis = RedisServer::start(&[]);
    let shale = TestServer::start();
    let (mut r, mut s) = (redis.client(), shale.client());
    run::<String>(&mut r, &["FUNCTION", "LOAD", &library("fromredis")]);
    let payload: Vec<u8> = run(&mut r, &["FUNCTION", "DUMP"]);
    redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&payload)
        .query::<()>(&mut s)
        .expect("Shale restores Redis's payload");
    run::<String>(&mut s, &["FCALL", "fromredis_set", "1", "k", "v"]);
    assert_eq!(
        run::<String>(&mut s, &["FCALL_RO", "fromredis_get", "1", "k"]),
        "v"
    );

    run::<String>(&mut s, &["FUNCTION", "LOAD", &library("fromshale")]);
    let payload: Vec<u8> = run(&mut s, &["FUNCTION", "DUMP"]);
    // Both servers answer each restore policy alike: APPEND collides, REPLACE and FLUSH
    // take the payload.
    for con in [&mut r, &mut s] {
        let appended = redis::cmd("FUNCTION")
            .arg("RESTORE")
            .arg(&payload)
            .query::<()>(con);
        assert_eq!(
            error_line(appended.expect_err("a library of that name exists")),
            "ERR Library fromredis already exists"
        );
        for policy in ["REPLACE", "FLUSH"] {
            redis::cmd("FUNCTION")
                .arg("RESTORE")
                .arg(&payload)
                .arg(policy)
                .query::<()>(con)
                .expect("restore");
        }
        run::<String>(con, &["FCALL", "fromshale_set", "1", "k", "both"]);
        assert_eq!(
            run::<String>(con, &["FCALL_RO", "fromshale_get", "1", "k"]),
            "both"
        );
        let listed: Vec<redis::Value> = run(con, &["FUNCTION", "LIST"]);
        assert_eq!(listed.len(), 2);
    }
    let mut damaged = payload.clone();
    damaged[3] ^= 1;
    let refused = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&damaged)
        .query::<()>(&mut s)
        .expect_err("a damaged payload");
    assert_eq!(
        error_line(refused),
        "ERR DUMP payload version or checksum are wrong"
    );
}

/// FUNCTION KILL on `con` until a function has run past the time limit and is stopped.
fn kill_function(con: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match redis::cmd("FUNCTION").arg("KILL").query::<()>(con) {
            Ok(()) => return,
            Err(err) if err.code() == Some("NOTBUSY") && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(50));
            }
            Err(err) => panic!("FUNCTION KILL: {err}"),
        }
    }
}

#[test]
fn a_running_function_shows_in_stats_and_only_function_kill_stops_it() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["CONFIG", "SET", "lua-time-limit", "100"]);
    run::<String>(&mut con, &["FUNCTION", "LOAD", LOOPING]);
    let mut looping = server.client();
    let runner = thread::spawn(move || fails(&mut looping, &["FCALL_RO", "spin", "0", "arg"]));
    wait_until("the function runs past the time limit", || {
        let busy = redis::cmd("SCRIPT").arg("KILL").query::<()>(&mut con);
        busy.is_err_and(|e| e.code() == Some("BUSY"))
    });
    assert_eq!(
        fails(&mut con, &["SCRIPT", "KILL"]),
        "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
    );
    let shown = stats(&mut con);
    assert_eq!(
        shown[..8],
        [
            "running_script",
            "name",
            "spin",
            "command",
            "FCALL_RO",
            "spin",
            "0",
            "arg"
        ]
    );
    assert_eq!(shown[8], "duration_ms");
    assert!(
        shown[9].parse::<u64>().expect("milliseconds") >= 100,
        "{shown:?}"
    );
    kill_function(&mut con);
    assert_eq!(
        runner.join().expect("runner"),
        "ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:3."
    );
    assert_eq!(stats(&mut con)[..2], ["running_script", "nil"]);
    // With a script running, FUNCTION KILL points at SCRIPT KILL instead.
    let mut scripted = server.client();
    let script = thread::spawn(move || fails(&mut scripted, &["EVAL", "while true do end", "0"]));
    wait_until("the script runs past the time limit", || {
        let busy = redis::cmd("FUNCTION").arg("KILL").query::<()>(&mut con);
        busy.is_err_and(|e| e.code() == Some("BUSY"))
    });
    run::<()>(&mut con, &["SCRIPT", "KILL"]);
    script.join().expect("script");
}
