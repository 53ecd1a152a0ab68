//! Every way a blocked client's wait can end, for every blocking command: a table of commands
//! against a table of endings, run against Shale and against Redis 7.0, which must answer
//! alike. Each blocked client must be answered (or, killed, leave what it waited for in
//! place); none may be left waiting.

mod common;

use std::thread;

use common::{error_line, free_port, run, wait_for_blocked, wait_until, RedisServer, TestServer};

/// A blocking command and what serves it. In the command lines, `K` stands for the waited
/// key, `D` and `S` for keys in its slot, and `T` for the timeout.
struct Blocker {
    wait: &'static [&'static str],
    /// A timeout that ends the wait at once, in the command's unit.
    short: &'static str,
    /// What the key holds before the wait (a stream, for the stream reads).
    setup: &'static [&'static [&'static str]],
    /// A write that serves the wait, and the waiter's reply to it (`@` for the key).
    fill: &'static [&'static str],
    served: &'static str,
    /// A read that shows what `fill` wrote is still there, and its reply.
    left: (&'static [&'static str], &'static str),
    /// XREADGROUP, whose wait ends when its stream goes away.
    group: bool,
}

const BLOCKERS: &[Blocker] = &[
    list(&["BLPOP", "K", "T"], "[@,a]"),
    list(&["BRPOP", "K", "T"], "[@,a]"),
    list(&["BLMOVE", "K", "D", "LEFT", "RIGHT", "T"], "a"),
    list(&["BRPOPLPUSH", "K", "D", "T"], "a"),
    list(&["BLMPOP", "T", "1", "K", "LEFT"], "[@,[a]]"),
    zset(&["BZPOPMIN", "K", "T"], "[@,a,1]"),
    zset(&["BZPOPMAX", "K", "T"], "[@,a,1]"),
    zset(&["BZMPOP", "T", "1", "K", "MIN"], "[@,[[a,1]]]"),
    Blocker {
        wait: &["XREAD", "BLOCK", "T", "STREAMS", "K", "$"],
        short: "50",
        setup: &[&["XADD", "K", "0-1", "f", "v"]],
        fill: &["XADD", "K", "1-1", "f", "v"],
        served: "[[@,[[1-1,[f,v]]]]]",
        left: (&["XLEN", "K"], "2"),
        group: false,
    },
    Blocker {
        wait: &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "T",
            "STREAMS",
            "K",
            ">",
        ],
        short: "50",
        setup: &[&["XGROUP", "CREATE", "K", "g", "$", "MKSTREAM"]],
        fill: &["XADD", "K", "1-1", "f", "v"],
        served: "[[@,[[1-1,[f,v]]]]]",
        left: (&["XPENDING", "K", "g"], "[0,nil,nil,nil]"),
        group: true,
    },
];

const fn list(wait: &'static [&'static str], served: &'static str) -> Blocker {
    Blocker {
        wait,
        short: "0.05",
        setup: &[],
        fill: &["RPUSH", "K", "a"],
        served,
        left: (&["LLEN", "K"], "1"),
        group: false,
    }
}

const fn zset(wait: &'static [&'static str], served: &'static str) -> Blocker {
    Blocker {
        wait,
        short: "0.05",
        setup: &[],
        fill: &["ZADD", "K", "1", "a"],
        served,
        left: (&["ZCARD", "K"], "1"),
        group: false,
    }
}

/// How a wait may end.
#[derive(Debug, Clone, Copy)]
enum Way {
    /// The write it waits for.
    Filled,
    /// Its timeout.
    TimedOut,
    /// Its key overwritten with a string: a stream read by a group ends, the rest wait on.
    Overwritten,
    Deleted,
    /// MULTI, DEL, SADD, EXEC.
    TypeChangedInMulti,
    /// A key renamed onto it (a stream without the group, for XREADGROUP).
    RenamedOnto,
    /// Its key renamed to another (streams only: the other keys do not exist while waited).
    RenamedAway,
    /// SWAPDB with a database holding what it waits for.
    Swapped,
    FlushAll,
    FlushDb,
    /// XGROUP DESTROY (XREADGROUP only).
    GroupDestroyed,
    /// CLIENT KILL: nothing is answered, and nothing is taken.
    Killed,
    UnblockedWithError,
    UnblockedAsTimeout,
    /// This server becomes a replica: an error, and the connection closes.
    BecameReplica,
}

const WAYS: [Way; 15] = [
    Way::Filled,
    Way::TimedOut,
    Way::Overwritten,
    Way::Deleted,
    Way::TypeChangedInMulti,
    Way::RenamedOnto,
    Way::RenamedAway,
    Way::Swapped,
    Way::FlushAll,
    Way::FlushDb,
    Way::GroupDestroyed,
    Way::Killed,
    Way::UnblockedWithError,
    Way::UnblockedAsTimeout,
    Way::BecameReplica,
];

const STREAM_GONE: &str = "UNBLOCKED the stream key no longer exists";
const NO_GROUP: &str = "NOGROUP the consumer group this client was blocked on no longer exists";
const ROLE_CHANGED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// A reply as compact text: arrays in brackets, nil, numbers and strings as they are.
fn text(value: &redis::Value) -> String {
    match value {
        redis::Value::Nil => "nil".into(),
        redis::Value::Int(n) => n.to_string(),
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Okay => "OK".into(),
        redis::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(text).collect();
            format!("[{}]", items.join(","))
        }
        other => format!("{other:?}"),
    }
}

/// Sends a command, and its reply as text (an error as its line).
fn call(con: &mut redis::Connection, args: &[String]) -> String {
    let mut cmd = redis::cmd(&args[0]);
    for arg in &args[1..] {
        cmd.arg(arg);
    }
    match cmd.query::<redis::Value>(con) {
        Ok(value) => text(&value),
        Err(err) if err.is_io_error() || err.is_connection_dropped() => "closed".into(),
        Err(err) => error_line(err),
    }
}

/// A command line with the placeholders filled in.
fn line(args: &[&str], key: &str, timeout: &str) -> Vec<String> {
    args.iter()
        .map(|arg| match *arg {
            "K" => key.to_string(),
            "D" => format!("{key}dst"),
            "S" => format!("{key}src"),
            "T" => timeout.to_string(),
            other => other.to_string(),
        })
        .collect()
}

/// The command lines a way runs while the client waits (with `#ID` for the client's ID and
/// `NOBODY` for a port nothing listens on), and the reply it ends the wait with; `None` if
/// the wait goes on, to be served by the fill.
fn event(
    way: Way,
    blocker: &Blocker,
) -> Option<(Vec<&'static [&'static str]>, Option<&'static str>)> {
    let stream = !blocker.setup.is_empty();
    let ends_group = |reply: &'static str| blocker.group.then_some(reply);
    Some(match way {
        Way::Filled => (vec![], None),
        Way::TimedOut => (vec![], Some("nil")),
        Way::Overwritten => (
            vec![&["SET", "K", "x"], &["DEL", "K"]],
            ends_group(STREAM_GONE),
        ),
        Way::Deleted => (vec![&["DEL", "K"]], ends_group(STREAM_GONE)),
        Way::TypeChangedInMulti => (
            vec![
                &["MULTI"],
                &["DEL", "K"],
                &["SADD", "K", "m"],
                &["EXEC"],
                &["DEL", "K"],
            ],
            ends_group(STREAM_GONE),
        ),
        // The fill written to another key first, which then takes this one's place.
        Way::RenamedOnto => (vec![&["RENAME", "S", "K"]], ends_group(NO_GROUP)),
        Way::RenamedAway if stream => (vec![&["RENAME", "K", "S"]], ends_group(STREAM_GONE)),
        Way::RenamedAway => return None,
        Way::Swapped => (vec![&["SWAPDB", "0", "1"]], ends_group(NO_GROUP)),
        Way::FlushAll => (vec![&["FLUSHALL"]], ends_group(STREAM_GONE)),
        Way::FlushDb => (vec![&["FLUSHDB"]], ends_group(STREAM_GONE)),
        Way::GroupDestroyed if blocker.group => {
            (vec![&["XGROUP", "DESTROY", "K", "g"]], Some(NO_GROUP))
        }
        Way::GroupDestroyed => return None,
        Way::Killed => (vec![&["CLIENT", "KILL", "ID", "#ID"]], Some("closed")),
        Way::UnblockedWithError => (
            vec![&["CLIENT", "UNBLOCK", "#ID", "ERROR"]],
            Some("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
        ),
        Way::UnblockedAsTimeout => (vec![&["CLIENT", "UNBLOCK", "#ID"]], Some("nil")),
        Way::BecameReplica => (
            vec![&["REPLICAOF", "127.0.0.1", "NOBODY"]],
            Some(ROLE_CHANGED),
        ),
    })
}

/// Runs every blocker against every way on the server `connect` reaches; returns one line per
/// case that was not answered as expected.
fn run_table(connect: &dyn Fn() -> redis::Connection) -> Vec<String> {
    let mut con = connect();
    let nobody = free_port().to_string();
    let mut failures = Vec::new();
    for (b, blocker) in BLOCKERS.iter().enumerate() {
        for way in WAYS {
            let Some((commands, ending)) = event(way, blocker) else {
                continue;
            };
            let key = format!("{{k{b}}}");
            let sub = |args: &[&str]| line(args, &key, "0");
            call(&mut con, &sub(&["FLUSHALL"]));
            for setup in blocker.setup {
                call(&mut con, &sub(setup));
            }
            match way {
                Way::RenamedOnto => {
                    call(&mut con, &line(blocker.fill, &format!("{key}src"), "0"));
                }
                Way::Swapped => {
                    call(&mut con, &sub(&["SELECT", "1"]));
                    call(&mut con, &sub(blocker.fill));
                    call(&mut con, &sub(&["SELECT", "0"]));
                }
                _ => {}
            }
            let mut waiter = connect();
            let id = call(&mut waiter, &sub(&["CLIENT", "ID"]));
            let timeout = match way {
                Way::TimedOut => blocker.short,
                _ => "0",
            };
            let wait = line(blocker.wait, &key, timeout);
            let waiting = thread::spawn(move || {
                let reply = call(&mut waiter, &wait);
                let open = call(&mut waiter, &["PING".to_string()]) == "PONG";
                (reply, open)
            });
            wait_for_blocked(&mut con, 1);
            for command in commands {
                let args: Vec<String> = sub(command)
                    .into_iter()
                    .map(|arg| match arg.as_str() {
                        "#ID" => id.clone(),
                        "NOBODY" => nobody.clone(),
                        _ => arg,
                    })
                    .collect();
                call(&mut con, &args);
            }
            let served_by_fill = ending.is_none() || matches!(way, Way::Killed);
            if served_by_fill && !matches!(way, Way::RenamedOnto | Way::Swapped) {
                call(&mut con, &sub(blocker.fill));
            }
            let (reply, open) = waiting.join().expect("the waiting thread");
            let expected = ending.unwrap_or(blocker.served).replace('@', &key);
            let expected = match way {
                Way::Killed => "closed".to_string(),
                _ => expected,
            };
            let closes = matches!(way, Way::Killed | Way::BecameReplica);
            if reply != expected || open == closes {
                failures.push(format!(
                    "{} / {way:?}: answered {reply:?} (connection open: {open}), expected {expected:?}",
                    blocker.wait[0]
                ));
            }
            if matches!(way, Way::Killed) {
                let left = call(&mut con, &sub(blocker.left.0));
                if left != blocker.left.1 {
                    failures.push(format!(
                        "{} / Killed: a killed client took what it waited for ({left})",
                        blocker.wait[0]
                    ));
                }
            }
            if matches!(way, Way::BecameReplica) {
                call(&mut con, &sub(&["REPLICAOF", "NO", "ONE"]));
            }
            wait_for_blocked(&mut con, 0);
        }
    }
    failures
}

#[test]
fn every_blocking_command_is_answered_however_its_wait_ends_as_redis_answers() {
    let shale = TestServer::start();
    let shale_failures = run_table(&|| shale.client());
    let redis = RedisServer::start(&[]);
    let redis_failures = run_table(&|| redis.client());
    assert!(
        redis_failures.is_empty(),
        "the table does not describe Redis 7.0:\n{}",
        redis_failures.join("\n")
    );
    assert!(
        shale_failures.is_empty(),
        "Shale answered otherwise:\n{}",
        shale_failures.join("\n")
    );
}

/// Cluster node IDs as Apache Kvrocks Controller makes them.
const NODE_A: &str = "kvrocksNode0000000000000000000000000000A";
const NODE_B: &str = "kvrocksNode0000000000000000000000000000B";

/// A topology of this node (A) and another master (B) that owns the slots `b_owns`.
fn topology(a_port: u16, b_port: u16, b_owns: &[u16]) -> String {
    let range = |first: u16, last: u16| match first == last {
        true => first.to_string(),
        false => format!("{first}-{last}"),
    };
    let mut a_ranges = Vec::new();
    let mut start = 0;
    for &slot in b_owns {
        if slot > start {
            a_ranges.push(range(start, slot - 1));
        }
        start = slot + 1;
    }
    if start <= 16383 {
        a_ranges.push(range(start, 16383));
    }
    let b_ranges: Vec<String> = b_owns.iter().map(u16::to_string).collect();
    format!(
        "{NODE_A} 127.0.0.1 {a_port} master - {}\n{NODE_B} 127.0.0.1 {b_port} master - {}\n",
        a_ranges.join(" "),
        b_ranges.join(" ")
    )
}

#[test]
fn a_wait_on_a_slot_that_moves_away_is_redirected() {
    let node = TestServer::start_with(&["--cluster-enabled", "yes"]);
    let mut con = node.client();
    let b_port = free_port();
    let mut moved: Vec<u16> = Vec::new();
    let mut version = 1;
    run::<()>(&mut con, &["CLUSTERX", "SETNODEID", NODE_A]);
    let push = |con: &mut redis::Connection, moved: &[u16], version: i64| {
        let text = topology(node.port, b_port, moved);
        run::<()>(con, &["CLUSTERX", "SETNODES", &text, &version.to_string()]);
    };
    push(&mut con, &moved, version);
    for (b, blocker) in BLOCKERS.iter().enumerate() {
        let key = format!("{{k{b}}}");
        for setup in blocker.setup {
            call(&mut con, &line(setup, &key, "0"));
        }
        let slot: u16 = run(&mut con, &["CLUSTER", "KEYSLOT", &key]);
        let mut waiter = node.client();
        let wait = line(blocker.wait, &key, "0");
        let waiting = thread::spawn(move || call(&mut waiter, &wait));
        wait_for_blocked(&mut con, 1);
        moved.push(slot);
        moved.sort_unstable();
        version += 1;
        push(&mut con, &moved, version);
        assert_eq!(
            waiting.join().expect("the waiting thread"),
            format!("MOVED {slot} 127.0.0.1:{b_port}"),
            "{} on a slot moved away",
            blocker.wait[0]
        );
        wait_for_blocked(&mut con, 0);
    }
    wait_until("no client blocked", || {
        common::info_field(&mut con, "clients", "blocked_clients") == 0
    });
}
