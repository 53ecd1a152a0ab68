//! MULTI/EXEC/DISCARD/WATCH against a real server.

mod common;

use std::thread;
use std::time::Duration;

use common::{exec_ping, fails, info_field, run, TestServer};

#[test]
fn exec_runs_the_queue_and_reports_each_reply() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.send(b"MULTI\r\nSET a 1\r\nINCR a\r\nLPUSH a x\r\nGET a\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n");
    raw.expect(b"*4\r\n+OK\r\n:2\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n$1\r\n2\r\n");
    raw.send(b"EXEC\r\nDISCARD\r\n");
    raw.expect(b"-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n");
}

#[test]
fn commands_read_what_earlier_commands_of_the_transaction_wrote() {
    let server = TestServer::start();
    let mut con = server.client();
    let (pushed, popped, set, field, deleted, exists, size): (
        i64,
        String,
        i64,
        String,
        i64,
        i64,
        i64,
    ) = redis::pipe()
        .atomic()
        .cmd("RPUSH")
        .arg("l")
        .arg("a")
        .arg("b")
        .cmd("LPOP")
        .arg("l")
        .cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .cmd("HGET")
        .arg("h")
        .arg("f")
        .cmd("DEL")
        .arg("h")
        .cmd("EXISTS")
        .arg("h")
        .cmd("DBSIZE")
        .query(&mut con)
        .unwrap();
    assert_eq!((pushed, popped.as_str(), set), (2, "a", 1));
    assert_eq!((field.as_str(), deleted, exists, size), ("v", 1, 0, 1));
    let rest: Vec<String> = run(&mut con, &["LRANGE", "l", "0", "-1"]);
    assert_eq!(rest, ["b"]);

    // FLUSHDB inside a transaction: later commands see the empty database.
    let (_, _, keys, size): (String, String, Vec<String>, i64) = redis::pipe()
        .atomic()
        .cmd("FLUSHDB")
        .cmd("SET")
        .arg("c")
        .arg("1")
        .cmd("KEYS")
        .arg("*")
        .cmd("DBSIZE")
        .query(&mut con)
        .unwrap();
    assert_eq!((keys, size), (vec!["c".to_string()], 1));
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
}

#[test]
fn queuing_errors_abort_and_other_errors_do_not() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.send(b"MULTI\r\nSET a 1\r\nNOSUCH x\r\nEXEC\r\nGET a\r\n");
    raw.expect(
        b"+OK\r\n+QUEUED\r\n-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n",
    );
    raw.expect(b"-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n");
    raw.send(b"MULTI\r\nGET\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n-ERR wrong number of arguments for 'get' command\r\n-EXECABORT Transaction discarded because of previous errors.\r\n");
    // Nested MULTI and WATCH inside MULTI are refused without dooming the transaction.
    raw.send(b"MULTI\r\nMULTI\r\nWATCH a\r\nSET a 2\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n-ERR MULTI calls can not be nested\r\n-ERR WATCH inside MULTI is not allowed\r\n+QUEUED\r\n*1\r\n+OK\r\n");
    raw.send(b"MULTI\r\nSET a 3\r\nDISCARD\r\nGET a\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n+OK\r\n$1\r\n2\r\n");
}

#[test]
fn watch_fails_exec_after_writes_from_anyone_expiry_or_flush() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut other = server.client();
    let exec_after = |con: &mut redis::Connection, key: &str, meddle: &mut dyn FnMut()| {
        run::<()>(con, &["WATCH", key]);
        meddle();
        run::<()>(con, &["MULTI"]);
        run::<()>(con, &["SET", "result", key]);
        run::<redis::Value>(con, &["EXEC"])
    };
    let untouched = exec_after(&mut con, "k", &mut || {});
    assert!(matches!(untouched, redis::Value::Array(_)), "{untouched:?}");

    let written = exec_after(&mut con, "k", &mut || {
        run::<()>(&mut other, &["SET", "k", "x"])
    });
    assert_eq!(written, redis::Value::Nil);

    let hashed = exec_after(&mut con, "h", &mut || {
        run::<()>(&mut other, &["HSET", "h", "f", "1"]);
    });
    assert_eq!(hashed, redis::Value::Nil, "a collection write");

    run::<()>(&mut other, &["SET", "e", "v", "PX", "100"]);
    let expired = exec_after(&mut con, "e", &mut || {
        thread::sleep(Duration::from_millis(200))
    });
    assert_eq!(expired, redis::Value::Nil, "a key that expired after WATCH");

    let flushed = exec_after(&mut con, "k", &mut || run::<()>(&mut other, &["FLUSHALL"]));
    assert_eq!(flushed, redis::Value::Nil);

    run::<()>(&mut con, &["WATCH", "k"]);
    run::<()>(&mut con, &["UNWATCH"]);
    run::<()>(&mut other, &["SET", "k", "y"]);
    run::<()>(&mut con, &["MULTI"]);
    let unwatched: redis::Value = run(&mut con, &["EXEC"]);
    assert!(matches!(unwatched, redis::Value::Array(_)));
    assert_eq!(
        fails(&mut con, &["WATCH"]),
        "ERR wrong number of arguments for 'watch' command"
    );
}

/// Runs `transactions` MULTIs that set x to i and y to i followed by `y_suffix`, while another
/// client checks with MGET that it always finds both from the same one. The MGET also reads
/// 30 other keys, so that its reads of x and y are further apart.
fn check_mget_sees_whole_transactions(server: &TestServer, transactions: i64, y_suffix: &str) {
    let mut writer = server.client();
    let mut reader = server.client();
    let others: Vec<String> = (0..30).map(|n| format!("other{n}")).collect();
    for other in &others {
        run::<()>(&mut writer, &["SET", other, "v"]);
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let checker = thread::spawn(move || {
        let mut checks = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let values: Vec<Option<String>> = redis::cmd("MGET")
                .arg("x")
                .arg(&others)
                .arg("y")
                .query(&mut reader)
                .unwrap();
            assert_eq!(values.len(), 32, "MGET of 32 keys answers 32 values");
            let (x, y) = (values[0].clone(), values[31].clone());
            let y = y.map(|y| y.split(':').next().unwrap_or_default().to_string());
            assert_eq!(x, y, "x and y are written by one EXEC");
            checks += 1;
        }
        checks
    });
    for i in 0..transactions {
        let _: () = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("x")
            .arg(i)
            .ignore()
            .cmd("SET")
            .arg("y")
            .arg(format!("{i}{y_suffix}"))
            .ignore()
            .query(&mut writer)
            .unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(checker.join().unwrap() > 0);
}

#[test]
fn readers_never_see_half_a_transaction() {
    let server = TestServer::start();
    check_mget_sees_whole_transactions(&server, 20_000, "");
}

#[test]
fn readers_never_see_half_a_transaction_of_cached_and_uncached_keys() {
    // x is small and stays in the metadata cache; y is over 8 KB, which the cache never holds,
    // so every MGET takes x from the cache and y from RocksDB.
    let server = TestServer::start();
    check_mget_sees_whole_transactions(&server, 20_000, &format!(":{}", "p".repeat(9000)));
    let mut con = server.client();
    assert!(info_field(&mut con, "rocksdb", "meta_cache_hits") > 0);
}

#[test]
fn a_long_transaction_is_isolated_and_other_keys_move_on() {
    let server = TestServer::start();
    let mut long = server.client();
    let mut other = server.client();
    const STEPS: usize = 50_000;
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..STEPS {
        pipe.cmd("INCR").arg("a").ignore();
    }
    pipe.cmd("GET").arg("a");
    let runner = thread::spawn(move || pipe.query::<(i64,)>(&mut long).unwrap().0);
    let mut a_values = Vec::new();
    let mut rounds = 0;
    while !runner.is_finished() {
        run::<()>(&mut other, &["SET", "b", "1"]);
        assert_eq!(run::<i64>(&mut other, &["INCR", "b"]), 2);
        a_values.push(run::<Option<i64>>(&mut other, &["GET", "a"]));
        rounds += 1;
    }
    assert_eq!(runner.join().unwrap(), STEPS as i64);
    assert!(rounds > 0);
    for a in a_values {
        assert!(
            a.is_none() || a == Some(STEPS as i64),
            "partial EXEC seen: {a:?}"
        );
    }
}

#[test]
fn flushes_break_only_watches_of_keys_that_existed() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut other = server.client();
    for flush in [&["FLUSHALL"][..], &["FLUSHDB"], &["FLUSHALL", "ASYNC"]] {
        run::<()>(&mut con, &["SET", "present", "1"]);
        run::<()>(&mut con, &["WATCH", "missing"]);
        run::<()>(&mut other, flush);
        let exec: Vec<String> = exec_ping(&mut con);
        assert_eq!(exec, ["PONG"], "{flush:?} of a missing watched key");

        run::<()>(&mut con, &["SET", "present", "1"]);
        run::<()>(&mut con, &["WATCH", "present"]);
        run::<()>(&mut other, flush);
        let exec: redis::Value = exec_ping(&mut con);
        assert_eq!(
            exec,
            redis::Value::Nil,
            "{flush:?} of a present watched key"
        );
    }
    // Another database's flush leaves this one's watches alone.
    run::<()>(&mut con, &["SET", "present", "1"]);
    run::<()>(&mut con, &["WATCH", "present"]);
    run::<()>(&mut other, &["SELECT", "3"]);
    run::<()>(&mut other, &["FLUSHDB"]);
    let exec: Vec<String> = exec_ping(&mut con);
    assert_eq!(exec, ["PONG"]);
}

#[test]
fn commands_flagged_no_multi_are_refused_when_queued_and_abort_exec() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.send(b"MULTI\r\nSET a 1\r\nSHUTDOWN\r\nEXEC\r\nGET a\r\n");
    raw.expect(b"+OK\r\n+QUEUED\r\n-ERR Command not allowed inside a transaction\r\n");
    raw.expect(b"-EXECABORT Transaction discarded because of previous errors.\r\n$-1\r\n");
    // Inside MULTI, WATCH and MULTI answer with their errors and do not abort.
    raw.send(b"MULTI\r\nWATCH x\r\nMULTI\r\nPING\r\nEXEC\r\n");
    raw.expect(b"+OK\r\n-ERR WATCH inside MULTI is not allowed\r\n-ERR MULTI calls can not be nested\r\n+QUEUED\r\n*1\r\n+PONG\r\n");
    let mut con = server.client();
    let info: Vec<redis::Value> = run(&mut con, &["COMMAND", "INFO", "shutdown"]);
    assert!(format!("{info:?}").contains("no_multi"), "{info:?}");
}
