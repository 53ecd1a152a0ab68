//! Many clients writing the same keys at once: connections lock a write command's keys
//! before it runs (waiting as tasks, not threads) or hand it to the connection writing them at
//! the moment, and nothing may be lost, misdelivered or deadlock.

mod common;

use std::thread;

use common::{run, TestServer};

const CLIENTS: usize = 8;
const ROUNDS: usize = 300;

#[test]
fn writes_to_hot_keys_from_many_clients_lose_nothing() {
    let server = TestServer::start_with(&["--threads", "2"]);
    let mut setup = server.client();
    let members: Vec<String> = (0..CLIENTS).map(|i| format!("m{i}")).collect();
    for member in &members {
        run::<()>(&mut setup, &["SADD", "left", member]);
    }
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut con = server.client();
            let member = members[i].clone();
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    run::<i64>(&mut con, &["INCR", "counter"]);
                    run::<i64>(&mut con, &["HINCRBY", "hash", "field", "1"]);
                    run::<i64>(&mut con, &["LPUSH", "list", &format!("{i}:{round}")]);
                    // Two keys, taken in stripe order whichever way the member moves.
                    let (from, to) = if round % 2 == 0 {
                        ("left", "right")
                    } else {
                        ("right", "left")
                    };
                    assert_eq!(run::<i64>(&mut con, &["SMOVE", from, to, &member]), 1);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("client thread");
    }
    let total = (CLIENTS * ROUNDS) as i64;
    assert_eq!(run::<i64>(&mut setup, &["GET", "counter"]), total);
    assert_eq!(run::<i64>(&mut setup, &["HGET", "hash", "field"]), total);
    assert_eq!(run::<i64>(&mut setup, &["LLEN", "list"]), total);
    // Every client made an even number of moves, so every member is back on the left.
    assert_eq!(run::<i64>(&mut setup, &["SCARD", "left"]), CLIENTS as i64);
    assert_eq!(run::<i64>(&mut setup, &["EXISTS", "right"]), 0);
}

#[test]
fn scripts_and_transactions_on_hot_keys_lose_nothing() {
    // Both hold their declared keys from before their first command until their writes are
    // committed: a script's GET and SET must see no other write in between, whether from a
    // script or from an EXEC.
    let server = TestServer::start_with(&["--threads", "2"]);
    let script = "local v = tonumber(redis.call('GET', KEYS[1]) or '0'); \
                  redis.call('SET', KEYS[1], v + 1); return v + 1";
    let workers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut con = server.client();
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    let key = format!("hot{}", round % 3);
                    if i % 2 == 0 {
                        run::<i64>(&mut con, &["EVAL", script, "1", &key]);
                    } else {
                        let _: () = redis::pipe()
                            .atomic()
                            .cmd("INCR")
                            .arg(&key)
                            .ignore()
                            .cmd("INCR")
                            .arg("total")
                            .ignore()
                            .query(&mut con)
                            .expect("EXEC");
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("client thread");
    }
    let mut con = server.client();
    let sum: i64 = (0..3)
        .map(|k| run::<i64>(&mut con, &["GET", &format!("hot{k}")]))
        .sum();
    assert_eq!(sum, (CLIENTS * ROUNDS) as i64);
    assert_eq!(
        run::<i64>(&mut con, &["GET", "total"]),
        (CLIENTS / 2 * ROUNDS) as i64
    );
}

#[test]
fn commands_that_lock_keys_in_other_databases_run_beside_writers() {
    // COPY ... DB and MOVE lock a key of another database, which the connection did not
    // take before the command ran.
    let server = TestServer::start_with(&["--threads", "2"]);
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let mut con = server.client();
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    run::<i64>(&mut con, &["INCR", "shared"]);
                    let key = format!("moved:{i}:{round}");
                    run::<()>(&mut con, &["SET", &key, "v"]);
                    assert_eq!(run::<i64>(&mut con, &["MOVE", &key, "1"]), 1);
                    assert_eq!(
                        run::<i64>(&mut con, &["COPY", "shared", "copy", "DB", "2", "REPLACE"]),
                        1
                    );
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("client thread");
    }
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["GET", "shared"]), 4 * ROUNDS as i64);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 1);
    run::<()>(&mut con, &["SELECT", "1"]);
    assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), 4 * ROUNDS as i64);
    run::<()>(&mut con, &["SELECT", "2"]);
    assert!(run::<i64>(&mut con, &["GET", "copy"]) > 0);
}

#[test]
fn moves_between_two_databases_in_opposite_directions_do_not_deadlock() {
    let server = TestServer::start_with(&["--threads", "2"]);
    let movers: Vec<_> = [("0", "1"), ("1", "0")]
        .into_iter()
        .map(|(from, to)| {
            let mut con = server.client();
            thread::spawn(move || {
                run::<()>(&mut con, &["SELECT", from]);
                let mut moved = 0;
                for _ in 0..ROUNDS {
                    run::<()>(&mut con, &["SET", "k", from]);
                    moved += run::<i64>(&mut con, &["MOVE", "k", to]);
                }
                moved
            })
        })
        .collect();
    for mover in movers {
        // Each MOVE answers (1 or 0, when the other database has the key), never an error.
        assert!(mover.join().expect("client thread") <= ROUNDS as i64);
    }
}

#[test]
fn combined_writes_reach_their_own_clients_in_their_own_databases() {
    // Writes to one busy key from many connections run as one transaction by whichever
    // connection writes it at the moment; each must still get its own reply and run in its
    // own client's database.
    let server = TestServer::start_with(&["--threads", "2"]);
    let clients = 2 * CLIENTS;
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let mut con = server.client();
            thread::spawn(move || {
                let db = (i % 2).to_string();
                run::<()>(&mut con, &["SELECT", &db]);
                let mut seen = Vec::with_capacity(ROUNDS);
                for round in 0..ROUNDS {
                    seen.push(run::<i64>(&mut con, &["INCR", "counter"]));
                    if round % 50 == i % 50 {
                        assert!(common::fails(&mut con, &["LPUSH", "counter", "x"])
                            .starts_with("WRONGTYPE"));
                        assert_eq!(
                            common::fails(&mut con, &["INCRBY", "counter", "x"]),
                            "ERR value is not an integer or out of range"
                        );
                    }
                }
                (db, seen)
            })
        })
        .collect();
    let mut seen_in = [Vec::new(), Vec::new()];
    for worker in workers {
        let (db, seen) = worker.join().expect("client thread");
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "a client's own increments come back in order"
        );
        seen_in[if db == "0" { 0 } else { 1 }].extend(seen);
    }
    let per_db = (clients / 2 * ROUNDS) as i64;
    for (db, seen) in seen_in.iter_mut().enumerate() {
        seen.sort_unstable();
        // Every reply is a distinct value of this database's counter: no client got
        // another's reply.
        assert_eq!(*seen, (1..=per_db).collect::<Vec<_>>(), "database {db}");
    }
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["GET", "counter"]), per_db);
    run::<()>(&mut con, &["SELECT", "1"]);
    assert_eq!(run::<i64>(&mut con, &["GET", "counter"]), per_db);
    let info: String = run(&mut con, &["INFO", "all"]);
    assert_eq!(
        number_after(&info, "cmdstat_incr:calls="),
        Some((clients * ROUNDS) as u64),
        "every INCR is counted once"
    );
    // Whether writes overlap depends on the scheduler; on a loaded machine one burst may
    // not, but many bursts in a row always do.
    let combined = |con: &mut redis::Connection| {
        let info: String = run(con, &["INFO", "stats"]);
        number_after(&info, "combined_writes:").unwrap_or(0)
    };
    for _ in 0..20 {
        if combined(&mut con) > 0 {
            break;
        }
        let bursts: Vec<_> = (0..clients)
            .map(|_| {
                let mut con = server.client();
                thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        run::<i64>(&mut con, &["INCR", "burst"]);
                    }
                })
            })
            .collect();
        for burst in bursts {
            burst.join().expect("client thread");
        }
    }
    assert!(
        combined(&mut con) > 0,
        "with {clients} clients on one key, some writes were combined"
    );
}

/// The number after `prefix` in an INFO reply, up to a comma or the line's end.
fn number_after(info: &str, prefix: &str) -> Option<u64> {
    let line = info.lines().find_map(|line| line.strip_prefix(prefix))?;
    line.split(',').next()?.parse().ok()
}

#[test]
fn key_counts_stay_exact_when_many_clients_write_at_once() {
    // Concurrent writes of distinct keys reach storage together, with their key counter
    // updates summed; DBSIZE and the expiry count must add up, and still do after a crash.
    let mut server = TestServer::start_with(&["--threads", "2", "--appendfsync", "always"]);
    let clients = 2 * CLIENTS;
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let mut con = server.client();
            thread::spawn(move || {
                for n in 0..ROUNDS {
                    let key = format!("k{i}:{n}");
                    if n % 4 == 0 {
                        run::<()>(&mut con, &["SET", &key, "v", "EX", "1000"]);
                    } else {
                        run::<()>(&mut con, &["SET", &key, "v"]);
                    }
                    if n % 3 == 0 {
                        assert_eq!(run::<i64>(&mut con, &["DEL", &key]), 1);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("client thread");
    }
    let kept = (0..ROUNDS).filter(|n| n % 3 != 0);
    let keys = (clients * kept.clone().count()) as i64;
    let expiring = (clients * kept.filter(|n| n % 4 == 0).count()) as i64;
    let expected = format!("db0:keys={keys},expires={expiring},");
    for round in ["before", "after"] {
        let mut con = server.client();
        assert_eq!(run::<i64>(&mut con, &["DBSIZE"]), keys, "{round} the crash");
        let keyspace: String = run(&mut con, &["INFO", "keyspace"]);
        assert!(
            keyspace.contains(&expected),
            "{round} the crash: {keyspace}"
        );
        server.kill();
        server.start_again();
    }
}

/// List reads take no lock: while other clients pop from one end and push onto the other,
/// every read sees one state of the list, never a position its chunk no longer holds.
#[test]
fn list_reads_see_one_state_while_the_list_moves() {
    let server = TestServer::start_with(&["--threads", "2"]);
    let mut setup = server.client();
    let element = |i: usize| format!("{i:08}{}", "y".repeat(100));
    for i in 0..100 {
        run::<i64>(&mut setup, &["RPUSH", "l", &element(i)]);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let mut con = server.client();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut pipe = redis::pipe();
                    for _ in 0..50 {
                        n += 1;
                        pipe.cmd("LPOP").arg("l").ignore();
                        pipe.cmd("RPUSH")
                            .arg("l")
                            .arg(element(1_000_000 * (w + 1) + n))
                            .ignore();
                    }
                    pipe.query::<()>(&mut con).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut con = server.client();
            thread::spawn(move || {
                for _ in 0..4000 {
                    let first: String = run(&mut con, &["LINDEX", "l", "0"]);
                    let last: String = run(&mut con, &["LINDEX", "l", "-1"]);
                    let some: Vec<String> = run(&mut con, &["LRANGE", "l", "0", "3"]);
                    assert_eq!((first.len(), last.len(), some.len()), (108, 108, 4));
                }
            })
        })
        .collect();
    for reader in readers {
        reader.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(run::<i64>(&mut setup, &["LLEN", "l"]), 100);
}
