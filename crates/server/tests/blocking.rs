//! Blocking list and sorted-set commands, and WAIT, against a real server (every command
//! against every way its wait ends is in `wait_endings.rs`).

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{fails, run, wait_for_blocked, wait_until, TestServer};

/// Runs a blocking command on its own connection and thread.
fn spawn_blocked(server: &TestServer, args: &[&str]) -> thread::JoinHandle<redis::Value> {
    let reply = spawn_blocked_reply(server, args);
    thread::spawn(move || reply.join().unwrap().expect("a reply that is not an error"))
}

/// Runs a blocking command on its own connection and thread; an error reply as its line.
fn spawn_blocked_reply(
    server: &TestServer,
    args: &[&str],
) -> thread::JoinHandle<Result<redis::Value, String>> {
    let mut con = server.client();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    thread::spawn(move || {
        let mut cmd = redis::cmd(&args[0]);
        for arg in &args[1..] {
            cmd.arg(arg);
        }
        cmd.query(&mut con).map_err(common::error_line)
    })
}

fn bulk(s: &str) -> redis::Value {
    redis::Value::BulkString(s.as_bytes().to_vec())
}

fn array(items: &[&str]) -> redis::Value {
    redis::Value::Array(items.iter().map(|s| bulk(s)).collect())
}

#[test]
fn waiters_are_served_first_come_first_served() {
    let server = TestServer::start();
    let mut con = server.client();
    let first = spawn_blocked(&server, &["BLPOP", "q", "other", "0"]);
    wait_for_blocked(&mut con, 1);
    let second = spawn_blocked(&server, &["BLPOP", "q", "0"]);
    wait_for_blocked(&mut con, 2);
    let third = spawn_blocked(&server, &["BRPOP", "q", "5"]);
    wait_for_blocked(&mut con, 3);
    assert_eq!(run::<i64>(&mut con, &["RPUSH", "q", "1", "2"]), 2);
    assert_eq!(first.join().unwrap(), array(&["q", "1"]));
    assert_eq!(second.join().unwrap(), array(&["q", "2"]));
    wait_for_blocked(&mut con, 1);
    run::<()>(&mut con, &["RPUSH", "q", "3", "4"]);
    assert_eq!(third.join().unwrap(), array(&["q", "4"]));
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "q", "0", "-1"]),
        ["3"]
    );
    wait_for_blocked(&mut con, 0);
}

#[test]
fn timeouts_and_immediate_replies() {
    let server = TestServer::start();
    let mut con = server.client();
    let started = Instant::now();
    let timed_out: redis::Value = run(&mut con, &["BLPOP", "empty", "0.2"]);
    assert_eq!(timed_out, redis::Value::Nil);
    assert!(started.elapsed() >= Duration::from_millis(200));
    let moved: Option<String> = run(&mut con, &["BRPOPLPUSH", "empty", "dst", "0.05"]);
    assert_eq!(moved, None);

    run::<()>(&mut con, &["RPUSH", "full", "a", "b"]);
    let got: Vec<String> = run(&mut con, &["BRPOP", "empty", "full", "1"]);
    assert_eq!(got, ["full", "b"]);
    run::<()>(&mut con, &["SET", "s", "x"]);
    assert_eq!(
        fails(&mut con, &["BLPOP", "s", "1"]),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert_eq!(
        fails(&mut con, &["BLPOP", "q", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        fails(&mut con, &["BLPOP", "q", "soon"]),
        "ERR timeout is not a float or out of range"
    );
    assert_eq!(
        fails(&mut con, &["BLMPOP", "0", "0", "q", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        fails(&mut con, &["BLMPOP", "x", "0", "q", "LEFT"]),
        "ERR numkeys should be greater than 0",
        "Redis reads the timeout last"
    );
    // A long double, rounded up to whole milliseconds, as Redis reads timeouts.
    let tiny: redis::Value = run(&mut con, &["BLPOP", "q", "1e-400"]);
    assert_eq!(tiny, redis::Value::Nil);
    assert_eq!(
        fails(&mut con, &["BLPOP", "q", "-inf"]),
        "ERR timeout is negative"
    );
}

#[test]
fn raw_replies_of_timeouts() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.send(b"BLPOP nothing 0.01\r\nBLMOVE nothing d LEFT LEFT 0.01\r\nBZPOPMIN nothing 0.01\r\n");
    raw.expect(b"*-1\r\n*-1\r\n*-1\r\n");
    // Inside MULTI a blocking command on empty keys replies at once as if it timed out,
    // except that BLMOVE and BRPOPLPUSH then reply a null bulk string, as in Redis.
    raw.send(b"MULTI\r\nBLPOP nothing 0\r\nBZMPOP 0 1 nothing MIN\r\nBLMOVE nothing d LEFT LEFT 0\r\nBRPOPLPUSH nothing d 0\r\nEXEC\r\n");
    raw.expect(
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n*-1\r\n*-1\r\n$-1\r\n$-1\r\n",
    );
}

#[test]
fn a_push_inside_exec_wakes_a_waiter_after_the_commit() {
    let server = TestServer::start();
    let mut con = server.client();
    let waiter = spawn_blocked(
        &server,
        &["BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "2"],
    );
    wait_for_blocked(&mut con, 1);
    let _: () = redis::pipe()
        .atomic()
        .cmd("RPUSH")
        .arg("b")
        .arg("1")
        .arg("2")
        .arg("3")
        .ignore()
        .cmd("LPOP")
        .arg("b")
        .ignore()
        .query(&mut con)
        .unwrap();
    let expected = redis::Value::Array(vec![bulk("b"), array(&["3", "2"])]);
    assert_eq!(waiter.join().unwrap(), expected);
    assert_eq!(run::<i64>(&mut con, &["LLEN", "b"]), 0);
}

#[test]
fn moves_chain_into_other_waiters() {
    let server = TestServer::start();
    let mut con = server.client();
    let tail = spawn_blocked(&server, &["BLPOP", "second", "0"]);
    wait_for_blocked(&mut con, 1);
    let mover = spawn_blocked(
        &server,
        &["BLMOVE", "first", "second", "LEFT", "RIGHT", "0"],
    );
    wait_for_blocked(&mut con, 2);
    run::<()>(&mut con, &["LPUSH", "first", "job"]);
    assert_eq!(mover.join().unwrap(), bulk("job"));
    assert_eq!(tail.join().unwrap(), array(&["second", "job"]));
}

#[test]
fn sorted_set_pops_block_too() {
    let server = TestServer::start();
    let mut con = server.client();
    let min = spawn_blocked(&server, &["BZPOPMIN", "z", "0"]);
    wait_for_blocked(&mut con, 1);
    let max = spawn_blocked(&server, &["BZPOPMAX", "z", "0"]);
    wait_for_blocked(&mut con, 2);
    run::<()>(
        &mut con,
        &["ZADD", "z", "1", "one", "2", "two", "3", "three"],
    );
    assert_eq!(min.join().unwrap(), array(&["z", "one", "1"]));
    assert_eq!(max.join().unwrap(), array(&["z", "three", "3"]));
    let mpop = spawn_blocked(&server, &["BZMPOP", "0", "1", "y", "MAX", "COUNT", "5"]);
    wait_for_blocked(&mut con, 1);
    run::<()>(&mut con, &["ZADD", "y", "5", "e", "4", "d"]);
    let expected = redis::Value::Array(vec![
        bulk("y"),
        redis::Value::Array(vec![array(&["e", "5"]), array(&["d", "4"])]),
    ]);
    assert_eq!(mpop.join().unwrap(), expected);
}

#[test]
fn client_unblock_ends_a_wait_with_a_timeout_or_an_error() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut blocked = server.client();
    let id: i64 = run(&mut blocked, &["CLIENT", "ID"]);
    let waiter = thread::spawn(move || {
        let timeout: redis::Value = run(&mut blocked, &["BLPOP", "nothing", "0"]);
        let error = fails(&mut blocked, &["BLPOP", "nothing", "0"]);
        (timeout, error)
    });
    wait_for_blocked(&mut con, 1);
    assert_eq!(
        run::<i64>(&mut con, &["CLIENT", "UNBLOCK", &id.to_string()]),
        1
    );
    // Until the client starts its second wait, UNBLOCK finds only the first, which is over.
    let unblocked = (0..500).any(|_| {
        let done = run::<i64>(&mut con, &["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]) == 1;
        if !done {
            thread::sleep(std::time::Duration::from_millis(10));
        }
        done
    });
    assert!(unblocked, "the second wait was unblocked");
    let (timeout, error) = waiter.join().unwrap();
    assert_eq!(timeout, redis::Value::Nil);
    assert_eq!(error, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
    assert_eq!(
        run::<i64>(&mut con, &["CLIENT", "UNBLOCK", &id.to_string()]),
        0
    );
    assert_eq!(
        fails(&mut con, &["CLIENT", "UNBLOCK", "1", "SOMEHOW"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
}

#[test]
fn a_client_that_leaves_while_blocked_is_forgotten() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut raw = server.raw();
    raw.send(b"BLPOP gone 0\r\n");
    wait_for_blocked(&mut con, 1);
    drop(raw);
    wait_for_blocked(&mut con, 0);
    run::<()>(&mut con, &["RPUSH", "gone", "kept"]);
    assert_eq!(
        run::<i64>(&mut con, &["LLEN", "gone"]),
        1,
        "nobody popped it"
    );
}

#[test]
fn a_move_into_a_destination_of_another_type_answers_that_waiter_and_serves_the_next() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "target", "nolist"]);
    let wrong = spawn_blocked_reply(&server, &["BRPOPLPUSH", "blist", "target", "0"]);
    wait_for_blocked(&mut con, 1);
    let right = spawn_blocked(&server, &["BLMOVE", "blist", "dst", "LEFT", "RIGHT", "0"]);
    wait_for_blocked(&mut con, 2);
    run::<()>(&mut con, &["RPUSH", "blist", "a", "b", "c"]);
    assert_eq!(
        wrong.join().unwrap(),
        Err("WRONGTYPE Operation against a key holding the wrong kind of value".to_string())
    );
    assert_eq!(right.join().unwrap(), bulk("a"));
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "blist", "0", "-1"]),
        ["b", "c"],
        "the waiter that failed took nothing"
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "dst", "0", "-1"]),
        ["a"]
    );
}

#[test]
fn a_wait_for_replicas_ends_by_acknowledgement_timeout_unblock_kill_or_role_change() {
    let master = TestServer::start();
    let mut con = master.client();
    run::<()>(&mut con, &["SET", "k", "v"]);
    // No replica: the timeout ends it with the count, as does CLIENT UNBLOCK ... TIMEOUT.
    assert_eq!(run::<i64>(&mut con, &["WAIT", "1", "50"]), 0);
    let mut waiting = master.client();
    let id: i64 = run(&mut waiting, &["CLIENT", "ID"]);
    let unblocked = thread::spawn(move || {
        let count: i64 = run(&mut waiting, &["WAIT", "1", "0"]);
        let error = fails(&mut waiting, &["WAIT", "1", "0"]);
        (count, error)
    });
    wait_for_blocked(&mut con, 1);
    run::<()>(&mut con, &["CLIENT", "UNBLOCK", &id.to_string()]);
    wait_until("the second WAIT blocks", || {
        run::<i64>(&mut con, &["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]) == 1
    });
    assert_eq!(
        unblocked.join().unwrap(),
        (
            0,
            "UNBLOCKED client unblocked via CLIENT UNBLOCK".to_string()
        )
    );
    wait_for_blocked(&mut con, 0);

    // A replica's acknowledgement.
    let acked = spawn_blocked(&master, &["WAIT", "1", "0"]);
    wait_for_blocked(&mut con, 1);
    let replica = TestServer::start();
    let mut replica_con = replica.client();
    run::<()>(
        &mut replica_con,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    assert_eq!(acked.join().unwrap(), redis::Value::Int(1));
    run::<()>(&mut replica_con, &["REPLICAOF", "NO", "ONE"]);
    wait_until("the replica is gone", || {
        run::<i64>(&mut con, &["WAIT", "1", "10"]) == 0
    });
    run::<()>(&mut con, &["SET", "k", "w"]);

    // Killed: the connection closes unanswered.
    let mut killed = master.raw();
    killed.command(&["CLIENT", "ID"]);
    let id = killed.read_line();
    killed.command(&["WAIT", "1", "0"]);
    wait_for_blocked(&mut con, 1);
    run::<()>(
        &mut con,
        &["CLIENT", "KILL", "ID", id.trim_start_matches(':')],
    );
    assert!(killed.is_closed());
    wait_for_blocked(&mut con, 0);

    // This server becomes a replica: an error, then the connection closes.
    let mut demoted = master.raw();
    demoted.command(&["WAIT", "1", "0"]);
    wait_for_blocked(&mut con, 1);
    let nobody = common::free_port().to_string();
    run::<()>(&mut con, &["REPLICAOF", "127.0.0.1", &nobody]);
    demoted.expect(
        b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
    );
    assert!(demoted.is_closed());
}
