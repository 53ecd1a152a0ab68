//! Many clients writing the same keys at once: connections lock a write command's keys
//! before it runs (waiting as tasks, not threads), and nothing may be lost or deadlock.

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
