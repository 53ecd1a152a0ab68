//! A network-level fuzzer: connections send every command in the table with arguments drawn at
//! random (numbers at the edges, option keywords, keys of every type, bytes), and some send
//! frames mutated into garbage. The server must survive all of it: it answers afterwards, and
//! every connection it served unregisters (a connection task that panicked would not, and is
//! what this looks for), with its memory bounded.
//!
//! The suite runs [`ROUNDS`] connections; `SHALE_FUZZ_ROUNDS=N` runs more, and
//! `SHALE_FUZZ_SEED=N` other inputs.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{fails, info_field, resident_kb, run, wait_until, TestServer};

const ROUNDS: usize = 120;
const COMMANDS_PER_CONNECTION: usize = 25;

/// Commands left out: they stop or pause the server, change its role or configuration, or
/// lock the fuzzer out (ACL), or connect elsewhere (MIGRATE).
const LEFT_OUT: &[&str] = &[
    "shutdown",
    "debug",
    "monitor",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "client",
    "replicaof",
    "slaveof",
    "failover",
    "sync",
    "psync",
    "replconf",
    "acl",
    "config",
    "migrate",
];

const KEYWORDS: &[&str] = &[
    "WITHSCORES",
    "LIMIT",
    "COUNT",
    "MATCH",
    "TYPE",
    "BY",
    "GET",
    "STORE",
    "REV",
    "BYSCORE",
    "BYLEX",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "EX",
    "PX",
    "EXAT",
    "KEEPTTL",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "WEIGHTS",
    "ALPHA",
    "ASC",
    "DESC",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "MAXLEN",
    "MINID",
    "~",
    "=",
    "*",
    "$",
    ">",
    "+",
    "-",
    "(1",
    "[a",
    "BLOCK",
    "STREAMS",
    "GROUP",
    "NOACK",
    "IDLE",
    "FORCE",
    "JUSTID",
    "IDX",
    "LEN",
    "FROMMEMBER",
    "FROMLONLAT",
    "BYRADIUS",
    "BYBOX",
    "km",
    "WITHCOORD",
    "WITHDIST",
    "WITHHASH",
    "ANY",
    "REPLACE",
    "ABSTTL",
    "FREQ",
    "IDLETIME",
    "OVERFLOW",
    "SAT",
    "u8",
    "i64",
    "#0",
    "RANK",
    "MAXLEN",
    "ENTRIESREAD",
    "MKSTREAM",
    "LIBRARYNAME",
    "WITHCODE",
    "FLUSH",
    "APPEND",
    "ASYNC",
    "SYNC",
    "NOW",
    "SCHEDULE",
    "DB",
];

const NUMBERS: &[&str] = &[
    "-1000",
    "-1",
    "0",
    "1",
    "2",
    "3",
    "17",
    "1000",
    "99999999999999999999",
    "1.5",
    "-0",
    "inf",
    "-inf",
    "nan",
    "1e400",
    "0x10",
    "",
    " 1",
    "9223372036854775807",
    "-9223372036854775808",
];

const KEYS: &[&str] = &[
    "str", "list", "hash", "set", "zset", "stream", "bits", "hll", "geo", "new", "{t}a", "{t}b",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

fn argument(rng: &mut Rng) -> Vec<u8> {
    match rng.next() % 5 {
        0 => rng.pick(KEYWORDS).as_bytes().to_vec(),
        1 | 2 => rng.pick(NUMBERS).as_bytes().to_vec(),
        3 => rng.pick(KEYS).as_bytes().to_vec(),
        _ => (0..rng.next() % 12).map(|_| rng.next() as u8).collect(),
    }
}

fn frame(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One connection's worth: commands with random arguments, and now and then a frame mangled
/// by flipped bytes or a cut.
fn traffic(rng: &mut Rng, commands: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..COMMANDS_PER_CONNECTION {
        let name = &commands[(rng.next() % commands.len() as u64) as usize];
        let mut args: Vec<Vec<u8>> = name.split('|').map(|p| p.as_bytes().to_vec()).collect();
        for _ in 0..rng.next() % 7 {
            args.push(argument(rng));
        }
        let mut bytes = frame(&args);
        if rng.next().is_multiple_of(20) {
            let at = (rng.next() % bytes.len() as u64) as usize;
            bytes[at] = rng.next() as u8;
            if rng.next().is_multiple_of(2) {
                bytes.truncate(at);
            }
        }
        out.extend_from_slice(&bytes);
    }
    out
}

fn fill(con: &mut redis::Connection) {
    for command in [
        "SET str hello",
        "RPUSH list a b c",
        "HSET hash f v g w",
        "SADD set a b c",
        "ZADD zset 1 a 2 b",
        "XADD stream 1-1 f v",
        "SETBIT bits 7 1",
        "PFADD hll a b",
        "GEOADD geo 13.36 38.11 palermo",
    ] {
        // A key the fuzzer turned into another type keeps it.
        let mut words = command.split(' ');
        let mut cmd = redis::cmd(words.next().unwrap_or("PING"));
        for arg in words {
            cmd.arg(arg);
        }
        let _ = cmd.query::<redis::Value>(con);
    }
}

#[test]
fn random_commands_and_mangled_frames_never_take_the_server_down() {
    let rounds = std::env::var("SHALE_FUZZ_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ROUNDS);
    let server = TestServer::start();
    let mut con = server.client();
    let commands: Vec<String> = run::<Vec<String>>(&mut con, &["COMMAND", "LIST"])
        .into_iter()
        .filter(|name| !LEFT_OUT.contains(&name.split('|').next().unwrap_or(name)))
        .collect();
    assert!(commands.len() > 200, "{} commands", commands.len());
    let seed = std::env::var("SHALE_FUZZ_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0xf022_5eed);
    let mut rng = Rng(seed | 1);
    let mut peak_kb = 0;
    for round in 0..rounds {
        if round % 20 == 0 {
            fill(&mut con);
        }
        let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_millis(40)))
            .expect("timeout");
        // Replies are read, not checked: a closed connection (a protocol error) is an answer.
        if stream.write_all(&traffic(&mut rng, &commands)).is_ok() {
            let mut sink = [0u8; 65536];
            while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
        }
        peak_kb = peak_kb.max(resident_kb(server.pid()));
    }
    // A command that panicked answers with an error like any other: the count shows it.
    assert_eq!(info_field(&mut con, "stats", "command_panics"), 0);
    // Blocked commands end with their connections; every connection must unregister.
    wait_until("every fuzzing connection is gone", || {
        run::<String>(&mut con, &["CLIENT", "LIST"]).lines().count() == 1
    });
    assert_eq!(run::<String>(&mut con, &["PING"]), "PONG");
    run::<()>(&mut con, &["SET", "after", "fuzz"]);
    assert_eq!(run::<String>(&mut con, &["GET", "after"]), "fuzz");
    assert!(peak_kb < 1 << 20, "resident memory reached {peak_kb} kB");
    eprintln!("{rounds} connections fuzzed, peak resident memory {peak_kb} kB");
}

#[test]
fn a_panicking_command_fails_alone_and_the_server_goes_on() {
    // LPUSH panics in this server, wherever it runs.
    let server = TestServer::start_with_env(&[("SHALE_INJECT_PANIC", "lpush")]);
    let mut other = server.client();
    run::<()>(&mut other, &["SET", "k", "v"]);
    let mut con = server.client();
    // The command's error, or its write's (the transaction it ran in commits nothing).
    assert!(fails(&mut con, &["LPUSH", "l", "a"]).starts_with("ERR internal error"));
    assert!(
        redis::cmd("PING").query::<String>(&mut con).is_err(),
        "closed"
    );
    // Inside a script: the script gets the error, and nothing it wrote commits.
    let mut scripted = server.client();
    let reply = redis::cmd("EVAL")
        .arg("redis.call('SET', 's', '1') return redis.pcall('LPUSH', 'l', 'a')")
        .arg(0)
        .query::<redis::Value>(&mut scripted);
    assert!(format!("{reply:?}").contains("internal error"), "{reply:?}");
    // Inside EXEC: nothing of the transaction commits.
    let mut exec = server.client();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("INCR")
        .arg("n")
        .cmd("LPUSH")
        .arg("l")
        .arg("a");
    assert!(pipe.query::<redis::Value>(&mut exec).is_err());
    // In a pipeline's batch of writes: the batch fails whole.
    let mut pipelined = server.client();
    let mut pipe = redis::pipe();
    pipe.cmd("SET")
        .arg("p")
        .arg("1")
        .cmd("LPUSH")
        .arg("l")
        .arg("a")
        .cmd("SET")
        .arg("q")
        .arg("1");
    assert!(pipe.query::<redis::Value>(&mut pipelined).is_err());
    assert_eq!(run::<String>(&mut other, &["GET", "k"]), "v");
    assert_eq!(
        run::<i64>(&mut other, &["EXISTS", "s", "n", "p", "q", "l"]),
        0
    );
    assert_eq!(info_field(&mut other, "stats", "command_panics"), 4);
    wait_until("the failed connections are gone", || {
        run::<String>(&mut other, &["CLIENT", "LIST"])
            .lines()
            .count()
            == 1
    });
    // No script is left listed as running.
    run::<()>(&mut other, &["CONFIG", "SET", "lua-time-limit", "0"]);
    assert_eq!(
        fails(&mut other, &["SCRIPT", "KILL"]),
        "NOTBUSY No scripts in execution right now."
    );
}
