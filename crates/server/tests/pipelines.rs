//! Pipelined writes: a connection runs consecutive write commands of one read as one implicit
//! transaction. Replies, visibility and side effects must be those of commands run one by one.

mod common;

use std::thread;
use std::time::Duration;

use common::{collect_messages, run, wait_for_blocked, TestServer};

#[test]
fn pipelined_writes_see_what_earlier_ones_wrote() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.pipeline(&[
        &["SET", "k", "1"],
        &["INCR", "k"],
        &["INCRBY", "k", "5"],
        &["LPUSH", "k", "x"],
        &["APPEND", "s", "ab"],
        &["APPEND", "s", "cd"],
        &["GET", "k"],
        &["RPUSH", "l", "a", "b"],
        &["LPOP", "l"],
        &["DEL", "s"],
        &["GET", "s"],
        &["HSET", "h", "f", "1"],
        &["HINCRBY", "h", "f", "2"],
    ]);
    raw.expect(
        b"+OK\r\n:2\r\n:7\r\n\
          -WRONGTYPE Operation against a key holding the wrong kind of value\r\n\
          :2\r\n:4\r\n$1\r\n7\r\n:2\r\n$1\r\na\r\n:1\r\n$-1\r\n:1\r\n:3\r\n",
    );
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["GET", "k"]), 7);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "l", "0", "-1"]),
        ["b"]
    );
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "s"]), 0);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 3);
}

#[test]
fn pipelines_from_many_clients_on_the_same_keys_lose_nothing() {
    const CLIENTS: usize = 4;
    const PIPELINES: usize = 50;
    const DEPTH: usize = 40;
    let server = TestServer::start_with(&["--threads", "2"]);
    let workers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let mut con = server.client();
            thread::spawn(move || {
                for round in 0..PIPELINES {
                    let mut pipe = redis::pipe();
                    for i in 0..DEPTH {
                        pipe.cmd("INCR").arg("counter");
                        pipe.cmd("HINCRBY").arg("hash").arg("field").arg(1);
                        pipe.cmd("RPUSH")
                            .arg("list")
                            .arg(format!("{client}:{round}:{i}"));
                        // A key of its own beside the shared ones.
                        pipe.cmd("SET").arg(format!("own:{client}")).arg(round);
                    }
                    pipe.query::<()>(&mut con).expect("pipeline");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("client thread");
    }
    let total = (CLIENTS * PIPELINES * DEPTH) as i64;
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["GET", "counter"]), total);
    assert_eq!(run::<i64>(&mut con, &["HGET", "hash", "field"]), total);
    assert_eq!(run::<i64>(&mut con, &["LLEN", "list"]), total);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 3 + CLIENTS as i64);
}

#[test]
fn each_pipelined_push_serves_blocked_clients_first() {
    let server = TestServer::start();
    let mut blocked = server.client();
    let waiter = thread::spawn(move || run::<Vec<String>>(&mut blocked, &["BLPOP", "q", "0"]));
    let mut con = server.client();
    wait_for_blocked(&mut con, 1);
    let mut raw = server.raw();
    raw.pipeline(&[&["RPUSH", "q", "a"], &["RPUSH", "q", "b"]]);
    // As in Redis: the first push is popped before the second runs.
    raw.expect(b":1\r\n:1\r\n");
    assert_eq!(waiter.join().expect("blocked client"), ["q", "a"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["LRANGE", "q", "0", "-1"]),
        ["b"]
    );
}

#[test]
fn pipelined_writes_publish_their_keyspace_events_in_order() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "E$l"],
    );
    let mut listener = server.client();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    let mut raw = server.raw();
    raw.pipeline(&[&["SET", "a", "1"], &["RPUSH", "l", "x"], &["SET", "b", "2"]]);
    raw.expect(b"+OK\r\n:1\r\n+OK\r\n");
    let events = collect_messages(&mut pubsub, 3);
    assert_eq!(
        events,
        [
            ("__keyevent@0__:set".to_string(), "a".to_string()),
            ("__keyevent@0__:rpush".to_string(), "l".to_string()),
            ("__keyevent@0__:set".to_string(), "b".to_string()),
        ]
    );
}

#[test]
fn a_watched_key_written_in_another_clients_pipeline_aborts_exec() {
    let server = TestServer::start();
    let mut watcher = server.client();
    run::<()>(&mut watcher, &["WATCH", "w"]);
    let mut raw = server.raw();
    raw.pipeline(&[&["SET", "x", "1"], &["SET", "w", "1"]]);
    raw.expect(b"+OK\r\n+OK\r\n");
    run::<()>(&mut watcher, &["MULTI"]);
    run::<()>(&mut watcher, &["SET", "w", "mine"]);
    assert_eq!(
        run::<redis::Value>(&mut watcher, &["EXEC"]),
        redis::Value::Nil
    );
    assert_eq!(run::<String>(&mut watcher, &["GET", "w"]), "1");
}

/// Pipelined GETs and HGETs read their records in one batch before the first runs; each must
/// still answer as if run alone, whatever the key holds, and the statistics must count each.
#[test]
fn pipelined_reads_answer_as_if_run_one_by_one() {
    let server = TestServer::start();
    let mut con = server.client();
    let large = "x".repeat(100_000);
    run::<()>(&mut con, &["SET", "s", "small"]);
    run::<()>(&mut con, &["SET", "large", &large]);
    run::<()>(&mut con, &["SETRANGE", "fragments", "10000", "end"]);
    run::<()>(&mut con, &["HSET", "packed", "f", "v"]);
    for i in 0..200 {
        // More fields than a hash packs, so its fields are records of their own.
        run::<()>(
            &mut con,
            &["HSET", "records", &format!("f{i}"), &format!("v{i}")],
        );
    }
    run::<()>(&mut con, &["RPUSH", "list", "a"]);
    run::<()>(&mut con, &["SET", "gone", "v", "PX", "1"]);
    thread::sleep(Duration::from_millis(5));

    let mut raw = server.raw();
    raw.pipeline(&[
        &["GET", "s"],
        &["GET", "missing"],
        &["HGET", "packed", "f"],
        &["HGET", "records", "f77"],
        &["HGET", "records", "nope"],
        &["GET", "gone"],
        &["GET", "list"],
        &["HGET", "s", "f"],
        &["GET", "s"],
        &["GET"],
        &["HGET", "records", "f77"],
        &["SET", "s", "new"],
        &["GET", "s"],
        &["GET", "fragments"],
    ]);
    raw.expect(
        b"$5\r\nsmall\r\n$-1\r\n$1\r\nv\r\n$3\r\nv77\r\n$-1\r\n$-1\r\n\
          -WRONGTYPE Operation against a key holding the wrong kind of value\r\n\
          -WRONGTYPE Operation against a key holding the wrong kind of value\r\n\
          $5\r\nsmall\r\n-ERR wrong number of arguments for 'get' command\r\n$3\r\nv77\r\n\
          +OK\r\n$3\r\nnew\r\n",
    );
    let mut fragments = vec![0u8; 10_000];
    fragments.extend_from_slice(b"end");
    raw.expect(format!("${}\r\n", fragments.len()).as_bytes());
    raw.expect(&fragments);
    raw.expect(b"\r\n");

    // A run longer than one batch of reads, with the large value in it, each GET counted.
    let before = hits_and_misses(&mut con);
    let mut long: Vec<Vec<String>> = Vec::new();
    for i in 0..40 {
        let key = if i % 10 == 3 {
            "large".to_string()
        } else {
            format!("k{i}")
        };
        long.push(vec!["GET".into(), key]);
    }
    let long: Vec<Vec<&str>> = long
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    let long: Vec<&[&str]> = long.iter().map(Vec::as_slice).collect();
    raw.pipeline(&long);
    for i in 0..40 {
        if i % 10 == 3 {
            raw.expect(format!("$100000\r\n{large}\r\n").as_bytes());
        } else {
            raw.expect(b"$-1\r\n");
        }
    }
    let (hits, misses) = hits_and_misses(&mut con);
    assert_eq!((hits - before.0, misses - before.1), (4, 36));
}

fn hits_and_misses(con: &mut redis::Connection) -> (i64, i64) {
    let info = run::<String>(con, &["INFO", "stats"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .expect("keyspace statistics")
    };
    (field("keyspace_hits:"), field("keyspace_misses:"))
}
