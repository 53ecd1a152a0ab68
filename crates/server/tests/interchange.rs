//! Moving keys between a real Redis 7.0 and Shale in Redis's own format: DUMP payloads from
//! each restored into the other, compared by DEBUG DIGEST (which Shale computes as Redis
//! does) and TTL; RESTORE's options and errors; hostile payloads.

mod common;

use common::{run, RedisServer, TestServer};
use redis::Connection;

/// Every type and encoding edge, written with plain commands (the same on both servers).
fn corpus() -> Vec<Vec<Vec<u8>>> {
    let b = |s: &str| s.as_bytes().to_vec();
    let mut commands: Vec<Vec<Vec<u8>>> = vec![
        vec![b("SET"), b("s:int"), b("12345")],
        vec![b("SET"), b("s:neg"), b("-9223372036854775808")],
        vec![b("SET"), b("s:bigint"), b("99999999999999999999")],
        vec![b("SET"), b("s:binary"), b"a\0b\r\nc\xff".to_vec()],
        vec![b("SET"), b("s:empty"), b("")],
        vec![b("SET"), b("s:compressible"), b("ab").repeat(600)],
        vec![b("SET"), b("s:float"), b("3.14")],
        vec![b("SET"), b("s:ttl"), b("soon"), b("PX"), b("500000")],
        vec![
            b("HSET"),
            b("h:small"),
            b("f"),
            b("v"),
            b("n"),
            b("-7"),
            b(""),
            b("empty"),
        ],
        vec![
            b("RPUSH"),
            b("l:small"),
            b("a"),
            b("1"),
            b("-1"),
            b(""),
            b"\0\r\n".to_vec(),
        ],
        vec![
            b("SADD"),
            b("set:ints"),
            b("1"),
            b("-5"),
            b("70000"),
            b("9223372036854775807"),
        ],
        vec![b("SADD"), b("set:strings"), b("a"), b("b"), b("1.5"), b("")],
        vec![
            b("ZADD"),
            b("z:small"),
            b("1.5"),
            b("a"),
            b("inf"),
            b("b"),
            b("-inf"),
            b("c"),
            b("0.1"),
            b("d"),
            b("-3"),
            b("e"),
            b("1e300"),
            b("f"),
        ],
        vec![b("HSET"), b("h:ttl"), b("f"), b("v")],
        vec![b("PEXPIRE"), b("h:ttl"), b("300000")],
    ];
    let mut big_hash = vec![b("HSET"), b("h:big")];
    for i in 0..200 {
        big_hash.push(format!("field:{i}").into_bytes());
        big_hash.push(format!("value {i}").repeat(1 + i % 20).into_bytes());
    }
    commands.push(big_hash);
    let mut long_value = vec![b("HSET"), b("h:longvalue"), b("f"), b("x").repeat(100)];
    long_value.extend([b("g"), b("y")]);
    commands.push(long_value);
    let mut big_list = vec![b("RPUSH"), b("l:big")];
    big_list.extend((0..3000).map(|i| format!("{}", i * 7919 % 100000).into_bytes()));
    big_list.push(b("z").repeat(20000));
    commands.push(big_list);
    let mut big_intset = vec![b("SADD"), b("set:bigints")];
    big_intset.extend((0..600).map(|i| (i * 3).to_string().into_bytes()));
    commands.push(big_intset);
    let mut big_zset = vec![b("ZADD"), b("z:big")];
    for i in 0..300 {
        big_zset.push(format!("{}", i as f64 / 7.0).into_bytes());
        big_zset.push(format!("member:{i}").into_bytes());
    }
    commands.push(big_zset);
    let mut long_member = vec![b("ZADD"), b("z:longmember"), b("2"), b("m").repeat(80)];
    long_member.extend([b("3"), b("short")]);
    commands.push(long_member);
    // Streams: nodes with and without the master's fields, deletions, an empty stream, and
    // consumer groups with pending entries, consumers and an unknown read count.
    for i in 1..=250u64 {
        let mut add = vec![
            b("XADD"),
            b("x:big"),
            format!("{}-{}", 1000 + i / 3, i % 3).into_bytes(),
        ];
        if i % 6 == 0 {
            add.extend([b("other"), b("v").repeat(i as usize % 70), b("n"), b("-12")]);
        } else {
            add.extend([b("n"), i.to_string().into_bytes(), b("name"), b("value")]);
        }
        commands.push(add);
    }
    for command in [
        "XDEL x:big 1001-0 1040-1",
        "XGROUP CREATE x:big workers 0",
        "XGROUP CREATE x:big late $ ENTRIESREAD 7",
        "XREADGROUP GROUP workers alice COUNT 3 STREAMS x:big >",
        "XREADGROUP GROUP workers bob COUNT 2 STREAMS x:big >",
        "XGROUP CREATECONSUMER x:big workers carol",
        "XACK x:big workers 1000-2",
        "XADD x:empty 1-1 f v",
        "XDEL x:empty 1-1",
        "XGROUP CREATE x:empty g $",
    ] {
        commands.push(command.split(' ').map(b).collect());
    }
    commands
}

fn load(con: &mut Connection, commands: &[Vec<Vec<u8>>]) {
    for command in commands {
        let mut cmd = redis::cmd(std::str::from_utf8(&command[0]).expect("name"));
        for arg in &command[1..] {
            cmd.arg(arg.as_slice());
        }
        cmd.query::<redis::Value>(con).expect("corpus command");
    }
}

fn keys(con: &mut Connection) -> Vec<String> {
    let mut keys: Vec<String> = run(con, &["KEYS", "*"]);
    keys.sort();
    keys
}

fn dump(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(con).expect("DUMP")
}

fn restore(con: &mut Connection, key: &str, ttl: i64, payload: &[u8]) -> redis::RedisResult<()> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(ttl)
        .arg(payload)
        .query(con)
}

/// Copies every key of `from` into `to` by DUMP and RESTORE with its remaining TTL.
fn copy_all(from: &mut Connection, to: &mut Connection) {
    for key in keys(from) {
        let ttl: i64 = run(from, &["PTTL", &key]);
        restore(to, &key, ttl.max(0), &dump(from, &key))
            .unwrap_or_else(|e| panic!("RESTORE {key}: {e}"));
    }
}

/// The same keys, values (DEBUG DIGEST-VALUE) and TTLs within a second.
fn assert_same(a: &mut Connection, b: &mut Connection) {
    let (keys_a, keys_b) = (keys(a), keys(b));
    let only_a: Vec<&String> = keys_a.iter().filter(|k| !keys_b.contains(k)).collect();
    let only_b: Vec<&String> = keys_b.iter().filter(|k| !keys_a.contains(k)).collect();
    assert!(
        only_a.is_empty() && only_b.is_empty(),
        "keys only in the first: {only_a:?}; only in the second: {only_b:?}"
    );
    for key in keys(a) {
        let digest =
            |con: &mut Connection| -> Vec<String> { run(con, &["DEBUG", "DIGEST-VALUE", &key]) };
        assert_eq!(digest(a), digest(b), "value of {key}");
        if run::<String>(a, &["TYPE", &key]) == "stream" {
            // The digest covers the entries; the groups, their pending entries and
            // consumers are compared here (idle times aside).
            let groups =
                |con: &mut Connection| -> redis::Value { run(con, &["XINFO", "GROUPS", &key]) };
            assert_eq!(groups(a), groups(b), "groups of {key}");
            let stream = |con: &mut Connection| -> Vec<redis::Value> {
                let info: Vec<redis::Value> = run(con, &["XINFO", "STREAM", &key]);
                info[6..].to_vec()
            };
            assert_eq!(stream(a), stream(b), "counters of {key}");
            let owners = |con: &mut Connection| -> redis::Value {
                let script =
                    "local r = {} for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do \
                    table.insert(r, redis.call('XPENDING', KEYS[1], g[2])) \
                    local p = redis.call('XPENDING', KEYS[1], g[2], '-', '+', 1000) \
                    for _, e in ipairs(p) do e[3] = 0 end table.insert(r, p) end return r";
                run(con, &["EVAL", script, "1", &key])
            };
            assert_eq!(owners(a), owners(b), "pending entries of {key}");
        }
        let (ttl_a, ttl_b): (i64, i64) = (run(a, &["PTTL", &key]), run(b, &["PTTL", &key]));
        assert!(
            (ttl_a - ttl_b).abs() < 1000 && (ttl_a < 0) == (ttl_b < 0),
            "TTL of {key}: {ttl_a} vs {ttl_b}"
        );
    }
    let dataset = |con: &mut Connection| -> String { run(con, &["DEBUG", "DIGEST"]) };
    assert_eq!(dataset(a), dataset(b));
}

#[test]
fn redis_payloads_restore_into_shale_with_the_same_values_and_ttls() {
    let redis = RedisServer::start(&[]);
    let shale = TestServer::start();
    let (mut r, mut s) = (redis.client(), shale.client());
    load(&mut r, &corpus());
    copy_all(&mut r, &mut s);
    assert_same(&mut r, &mut s);
}

#[test]
fn shale_payloads_restore_into_redis_even_with_deep_sanitization() {
    let shale = TestServer::start();
    let mut s = shale.client();
    load(&mut s, &corpus());
    for sanitize in ["no", "yes"] {
        let redis = RedisServer::start(&["--sanitize-dump-payload", sanitize]);
        let mut r = redis.client();
        copy_all(&mut s, &mut r);
        assert_same(&mut s, &mut r);
        // And back again, so Shale reads its own payloads too.
        let again = TestServer::start();
        let mut a = again.client();
        copy_all(&mut r, &mut a);
        assert_same(&mut r, &mut a);
    }
}

#[test]
fn restore_options_and_replies_match_redis() {
    let redis = RedisServer::start(&[]);
    let shale = TestServer::start();
    let (mut r, mut s) = (redis.client(), shale.client());
    for con in [&mut r, &mut s] {
        run::<()>(con, &["SET", "src", "value"]);
    }
    let payload = dump(&mut r, "src");
    let mut version_11 = payload.clone();
    let body = version_11.len() - 10;
    version_11[body] = 11;
    let mut bad_crc = payload.clone();
    *bad_crc.last_mut().expect("footer") ^= 1;
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (
            vec![b"src".to_vec(), b"0".to_vec(), payload.clone()],
            "BUSYKEY",
        ),
        (
            vec![b"k1".to_vec(), b"-1".to_vec(), payload.clone()],
            "invalid ttl",
        ),
        (
            vec![b"k1".to_vec(), b"x".to_vec(), payload.clone()],
            "not integer",
        ),
        (vec![b"k1".to_vec(), b"0".to_vec(), bad_crc], "bad crc"),
        (
            vec![b"k1".to_vec(), b"0".to_vec(), version_11],
            "version 11",
        ),
        (
            vec![b"k1".to_vec(), b"0".to_vec(), b"short".to_vec()],
            "too short",
        ),
        (vec![b"k1".to_vec(), b"0".to_vec(), Vec::new()], "empty"),
        // Longer than body and footer together: Redis reads a body that falls short into the
        // footer (a 9-byte string of "abc" and footer bytes restores there), Shale never.
        (with_footer(b"\x00\x20abc"), "truncated body"),
        (with_footer(b"\x2a\x00"), "unknown type"),
        (with_footer(b"\x02\x00"), "empty set"),
        (with_footer(b"\x02\x02\x01a\x01a"), "duplicate member"),
    ];
    let mut options: Vec<(Vec<Vec<u8>>, &str)> = [
        (&["REPLACE", "IDLETIME", "-1"][..], "negative idletime"),
        (&["FREQ", "256"], "freq too high"),
        (&["FREQ", "-1"], "negative freq"),
        (&["IDLETIME", "5", "FREQ", "5"], "idletime and freq"),
        (&["BOGUS"], "unknown option"),
        (&["IDLETIME"], "idletime without a value"),
    ]
    .into_iter()
    .map(|(extra, what)| {
        let mut args = vec![b"k2".to_vec(), b"0".to_vec(), payload.clone()];
        args.extend(extra.iter().map(|a| a.as_bytes().to_vec()));
        (args, what)
    })
    .collect();
    options.push((
        vec![
            b"k3".to_vec(),
            b"1000".to_vec(),
            payload.clone(),
            b"ABSTTL".to_vec(),
        ],
        "absttl in the past",
    ));
    for (args, what) in cases.into_iter().chain(options) {
        let reply = |con: &mut Connection| {
            let mut cmd = redis::cmd("RESTORE");
            for arg in &args {
                cmd.arg(arg.as_slice());
            }
            match cmd.query::<redis::Value>(con) {
                Ok(value) => format!("{value:?}"),
                Err(err) => format!("{:?} {:?}", err.code(), err.detail()),
            }
        };
        assert_eq!(reply(&mut s), reply(&mut r), "{what}");
    }
    for con in [&mut r, &mut s] {
        let exists: i64 = run(con, &["EXISTS", "k1", "k2", "k3"]);
        assert_eq!(exists, 0);
    }

    // REPLACE over another type, IDLETIME seen by OBJECT IDLETIME, ABSTTL in the future.
    run::<()>(&mut s, &["RPUSH", "k4", "x"]);
    redis::cmd("RESTORE")
        .arg("k4")
        .arg(0)
        .arg(&payload)
        .arg("REPLACE")
        .arg("IDLETIME")
        .arg(1000)
        .query::<()>(&mut s)
        .expect("RESTORE REPLACE IDLETIME");
    let idle: i64 = run(&mut s, &["OBJECT", "IDLETIME", "k4"]);
    assert!((1000..1010).contains(&idle), "idle {idle}");
    assert_eq!(run::<String>(&mut s, &["GET", "k4"]), "value");
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
        + 60_000;
    redis::cmd("RESTORE")
        .arg("k5")
        .arg(at)
        .arg(&payload)
        .arg("ABSTTL")
        .query::<()>(&mut s)
        .expect("RESTORE ABSTTL");
    assert_eq!(run::<i64>(&mut s, &["PEXPIRETIME", "k5"]), at);
    // A restored key past its time replaces nothing unless REPLACE, which deletes.
    redis::cmd("RESTORE")
        .arg("k5")
        .arg(1)
        .arg(&payload)
        .arg("ABSTTL")
        .arg("REPLACE")
        .query::<()>(&mut s)
        .expect("RESTORE in the past");
    assert_eq!(run::<i64>(&mut s, &["EXISTS", "k5"]), 0);
}

/// A payload of `body` with a correct version-10 footer, as RESTORE arguments.
fn with_footer(body: &[u8]) -> Vec<Vec<u8>> {
    let mut payload = body.to_vec();
    payload.extend_from_slice(&10u16.to_le_bytes());
    let crc = shale_rdb::crc64::crc64(0, &payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    vec![b"fresh".to_vec(), b"0".to_vec(), payload]
}

#[test]
fn roaring_bitmaps_move_between_shale_servers_and_redis_refuses_them() {
    let (a, b) = (TestServer::start(), TestServer::start());
    let (mut a, mut b) = (a.client(), b.client());
    run::<i64>(
        &mut a,
        &["TR.SETBITS", "bits", "1", "5", "70000", "4000000000"],
    );
    let payload = dump(&mut a, "bits");
    restore(&mut b, "bits", 0, &payload).expect("RESTORE into Shale");
    let digest =
        |con: &mut Connection| -> Vec<String> { run(con, &["DEBUG", "DIGEST-VALUE", "bits"]) };
    assert_eq!(digest(&mut a), digest(&mut b));
    assert_eq!(run::<i64>(&mut b, &["TR.BITCOUNT", "bits"]), 4);
    let redis = RedisServer::start(&[]);
    let err = restore(&mut redis.client(), "bits", 0, &payload).expect_err("Redis refuses it");
    assert_eq!(err.detail(), Some("Bad data format"));
}

#[test]
fn mangled_payloads_get_errors_and_the_server_stays_up() {
    let shale = TestServer::start();
    let mut s = shale.client();
    load(&mut s, &corpus());
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let payloads: Vec<Vec<u8>> = keys(&mut s).iter().map(|k| dump(&mut s, k)).collect();
    for round in 0..2000 {
        let mut body = payloads[round % payloads.len()].clone();
        body.truncate(body.len() - 10);
        match next() % 3 {
            0 => {
                let at = next() as usize % body.len();
                body[at] = next() as u8;
            }
            1 => body.truncate(next() as usize % body.len()),
            _ => {
                let at = next() as usize % body.len();
                body.insert(at, next() as u8);
            }
        }
        let args = with_footer(&body);
        let reply = redis::cmd("RESTORE")
            .arg("fuzzed")
            .arg(0)
            .arg(&args[2])
            .arg("REPLACE")
            .query::<redis::Value>(&mut s);
        if let Err(err) = reply {
            assert_eq!(err.detail(), Some("Bad data format"), "round {round}");
        }
    }
    assert_eq!(run::<String>(&mut s, &["PING"]), "PONG");
    // The other keys are untouched.
    let redis = RedisServer::start(&[]);
    let mut r = redis.client();
    load(&mut r, &corpus());
    run::<i64>(&mut s, &["DEL", "fuzzed"]);
    assert_same(&mut r, &mut s);
}

/// MIGRATE with `extra` arguments (options, then KEYS and the keys) from `con`.
fn migrate(con: &mut Connection, port: u16, db: i64, extra: &[&str]) -> String {
    let mut cmd = redis::cmd("MIGRATE");
    cmd.arg("127.0.0.1").arg(port).arg("").arg(db).arg(5000);
    cmd.arg(extra);
    match cmd.query::<redis::Value>(con) {
        Ok(value) => format!("{value:?}"),
        Err(err) => format!("{:?} {:?}", err.code(), err.detail()),
    }
}

fn migrate_all(con: &mut Connection, port: u16, options: &[&str]) -> String {
    let keys = keys(con);
    let mut extra: Vec<&str> = options.to_vec();
    extra.push("KEYS");
    extra.extend(keys.iter().map(String::as_str));
    migrate(con, port, 0, &extra)
}

#[test]
fn migrate_moves_keys_both_ways_with_redis_replies() {
    let redis = RedisServer::start(&["--requirepass", "secret"]);
    let shale = TestServer::start();
    let mut r = redis.client();
    run::<()>(&mut r, &["AUTH", "secret"]);
    let mut s = shale.client();
    load(&mut s, &corpus());

    // Shale → Redis: COPY keeps the source, a second run meets BUSYKEY, REPLACE moves.
    let ok = "ok".to_string();
    assert_eq!(
        migrate_all(&mut s, redis.port, &["COPY", "AUTH", "secret"]),
        ok
    );
    assert_same(&mut s, &mut r);
    assert_eq!(
        migrate_all(&mut s, redis.port, &["AUTH2", "default", "secret"]),
        "Some(\"ERR\") Some(\"Target instance replied with error: BUSYKEY Target key name already exists.\")"
    );
    assert!(!keys(&mut s).is_empty(), "keys the target refused stay");
    assert_eq!(
        migrate_all(&mut s, redis.port, &["REPLACE", "AUTH", "secret"]),
        ok
    );
    assert!(keys(&mut s).is_empty(), "moved keys are deleted here");

    // Redis → Shale, into database 3.
    let reference = RedisServer::start(&[]);
    let mut reference = reference.client();
    load(&mut reference, &corpus());
    assert_eq!(migrate_all(&mut r, shale.port, &[]), ok);
    run::<()>(&mut s, &["SELECT", "0"]);
    assert_same(&mut reference, &mut s);
    assert!(keys(&mut r).is_empty());
    run::<()>(&mut s, &["SET", "one", "1"]);
    assert_eq!(
        migrate(&mut s, shale.port, 3, &["KEYS", "one"]),
        ok,
        "a server migrating to itself, another database"
    );
    run::<()>(&mut s, &["SELECT", "3"]);
    assert_eq!(run::<String>(&mut s, &["GET", "one"]), "1");
}

#[test]
fn migrate_errors_match_redis() {
    let target = RedisServer::start(&["--requirepass", "secret"]);
    let closed = common::free_port();
    let redis = RedisServer::start(&[]);
    let shale = TestServer::start();
    let (mut r, mut s) = (redis.client(), shale.client());
    for con in [&mut r, &mut s] {
        run::<()>(con, &["SET", "k", "v"]);
    }
    let cases: Vec<(u16, i64, Vec<&str>)> = vec![
        (target.port, 0, vec!["KEYS", "missing"]),
        (closed, 0, vec!["KEYS", "k"]),
        (target.port, 0, vec!["COPY", "KEYS", "k"]),
        (target.port, 0, vec!["AUTH", "wrong", "KEYS", "k"]),
        (target.port, 99, vec!["COPY", "AUTH", "secret", "KEYS", "k"]),
        (target.port, 0, vec!["BOGUS"]),
        (target.port, 0, vec!["AUTH"]),
    ];
    for (port, db, extra) in cases {
        assert_eq!(
            migrate(&mut s, port, db, &extra),
            migrate(&mut r, port, db, &extra),
            "{port} {db} {extra:?}"
        );
    }
    let key_and_keys = |con: &mut Connection| -> String {
        let reply = redis::cmd("MIGRATE")
            .arg(
                &[
                    "127.0.0.1",
                    &target.port.to_string(),
                    "k",
                    "0",
                    "100",
                    "KEYS",
                    "k",
                ][..],
            )
            .query::<()>(con);
        format!("{reply:?}")
    };
    assert_eq!(key_and_keys(&mut s), key_and_keys(&mut r));
    let bad_timeout = |con: &mut Connection| -> String {
        let reply = redis::cmd("MIGRATE")
            .arg(&["127.0.0.1", &target.port.to_string(), "k", "x", "y"][..])
            .query::<()>(con);
        format!("{reply:?}")
    };
    assert_eq!(bad_timeout(&mut s), bad_timeout(&mut r));
    for con in [&mut r, &mut s] {
        assert_eq!(run::<String>(con, &["GET", "k"]), "v", "nothing moved");
    }
}

#[test]
fn migrate_keeps_its_connection_to_a_target() {
    let target = TestServer::start();
    let source = TestServer::start();
    let (mut t, mut s) = (target.client(), source.client());
    let cached = |con: &mut Connection| common::info_field(con, "stats", "migrate_cached_sockets");
    assert_eq!(cached(&mut s), 0);
    for key in ["a", "b", "c"] {
        run::<()>(&mut s, &["SET", key, "1"]);
    }
    let ok = "ok".to_string();
    assert_eq!(migrate(&mut s, target.port, 2, &["KEYS", "a"]), ok);
    assert_eq!(migrate(&mut s, target.port, 2, &["KEYS", "b"]), ok);
    assert_eq!(cached(&mut s), 1);
    // One connection for both, and one SELECT: the second finds the database selected.
    let connections =
        |con: &mut Connection| common::info_field(con, "stats", "total_connections_received");
    assert_eq!(connections(&mut t), 2, "the test's own and MIGRATE's");
    let stats: String = run(&mut t, &["INFO", "commandstats"]);
    assert!(common::command_stats(&stats, "select").starts_with("cmdstat_select:calls=1,"));

    // A connection the target closed is replaced, and the MIGRATE still succeeds.
    let mine: i64 = run(&mut t, &["CLIENT", "ID"]);
    let list: String = run(&mut t, &["CLIENT", "LIST"]);
    let link = list
        .lines()
        .filter_map(|line| {
            line.strip_prefix("id=")?
                .split(' ')
                .next()?
                .parse::<i64>()
                .ok()
        })
        .find(|&id| id != mine)
        .expect("MIGRATE's connection");
    assert_eq!(
        run::<i64>(&mut t, &["CLIENT", "KILL", "ID", &link.to_string()]),
        1
    );
    assert_eq!(migrate(&mut s, target.port, 2, &["KEYS", "c"]), ok);
    assert_eq!(connections(&mut t), 3);
    run::<()>(&mut t, &["SELECT", "2"]);
    assert_eq!(run::<i64>(&mut t, &["EXISTS", "a", "b", "c"]), 3);
    assert_eq!(cached(&mut s), 1);

    // Closed after 10 seconds unused, as Redis closes it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while cached(&mut s) > 0 {
        assert!(std::time::Instant::now() < deadline, "still cached");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    common::wait_until("the target sees the connection closed", || {
        common::info_field(&mut t, "clients", "connected_clients") == 1
    });
}

/// Runs `shale-server` with `args` (a subcommand) and returns whether it succeeded, and its
/// output.
fn shale_command(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_shale-server"))
        .args(args)
        .output()
        .expect("run shale-server");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn a_redis_rdb_file_loads_with_every_type_database_and_ttl() {
    let redis = RedisServer::start(&[]);
    let mut r = redis.client();
    load(&mut r, &corpus());
    run::<()>(&mut r, &["SELECT", "5"]);
    load(&mut r, &corpus()[..4]);
    run::<()>(&mut r, &["SET", "gone", "soon", "PX", "300"]);
    run::<String>(&mut r, &["FUNCTION", "LOAD", &library("saved")]);
    run::<()>(&mut r, &["SAVE"]);
    let file = redis.dir.path().join("dump.rdb");
    std::thread::sleep(std::time::Duration::from_millis(400));

    let shale = TestServer::start_with(&["--import-rdb", file.to_str().expect("path")]);
    let mut s = shale.client();
    for db in ["0", "5"] {
        run::<()>(&mut r, &["SELECT", db]);
        run::<()>(&mut s, &["SELECT", db]);
        assert_same(&mut r, &mut s);
    }
    assert_eq!(
        run::<i64>(&mut s, &["EXISTS", "gone"]),
        0,
        "expired keys are left out"
    );
    assert_eq!(
        run::<String>(&mut s, &["FCALL_RO", "saved_echo", "0", "x"]),
        "x"
    );
}

#[test]
fn a_damaged_rdb_file_is_refused_and_the_data_stays() {
    let redis = RedisServer::start(&[]);
    let mut r = redis.client();
    load(&mut r, &corpus());
    run::<()>(&mut r, &["SAVE"]);
    let good = std::fs::read(redis.dir.path().join("dump.rdb")).expect("dump.rdb");
    let work = tempfile::tempdir().expect("temp dir");
    let data = work.path().join("data");
    let import = |file: &[u8]| {
        let path = work.path().join("in.rdb");
        std::fs::write(&path, file).expect("write");
        shale_command(&[
            "import-rdb".as_ref(),
            path.as_os_str(),
            "--dir".as_ref(),
            data.as_os_str(),
        ])
    };
    let (ok, output) = import(&good);
    assert!(ok, "{output}");
    assert!(output.contains("imported 22 keys"), "{output}");
    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x40;
    for (bad, what) in [
        (flipped, "a flipped byte"),
        (good[..good.len() - 20].to_vec(), "a cut file"),
        (b"REDIS0011".to_vec(), "a newer version"),
    ] {
        let (ok, output) = import(&bad);
        assert!(!ok, "{what} was accepted: {output}");
    }
    // The first import is still what the directory holds.
    let shale = TestServer::start_with(&["--dir", data.to_str().expect("path")]);
    assert_same(&mut r, &mut shale.client());
}

#[test]
fn an_exported_rdb_file_loads_into_redis() {
    let mut shale = TestServer::start();
    let mut s = shale.client();
    load(&mut s, &corpus());
    run::<()>(&mut s, &["SELECT", "2"]);
    load(&mut s, &corpus()[4..8]);
    run::<()>(&mut s, &["SELECT", "0"]);
    run::<i64>(&mut s, &["TR.SETBITS", "bits", "3"]);
    run::<String>(&mut s, &["FUNCTION", "LOAD", &library("exported")]);
    shale.stop();
    let out = tempfile::tempdir().expect("temp dir");
    let file = out.path().join("out.rdb");
    let data = shale.dir.path().join("data");
    let (ok, output) = shale_command(&[
        "export-rdb".as_ref(),
        file.as_os_str(),
        "--dir".as_ref(),
        data.as_os_str(),
    ]);
    assert!(ok, "{output}");
    assert!(output.contains("1 Roaring bitmaps left out"), "{output}");
    assert!(output.contains("1 function libraries"), "{output}");

    let redis = RedisServer::start(&[
        "--dir",
        out.path().to_str().expect("path"),
        "--dbfilename",
        "out.rdb",
    ]);
    shale.start_again();
    let (mut r, mut s) = (redis.client(), shale.client());
    run::<i64>(&mut s, &["DEL", "bits"]);
    assert_eq!(
        run::<String>(&mut r, &["FCALL_RO", "exported_echo", "0", "x"]),
        "x"
    );
    for db in ["0", "2"] {
        run::<()>(&mut r, &["SELECT", db]);
        run::<()>(&mut s, &["SELECT", db]);
        assert_same(&mut r, &mut s);
    }
}

/// A library `name` with one read-only function, `<name>_echo`, that returns its argument.
fn library(name: &str) -> String {
    format!(
        "#!lua name={name}\nredis.register_function{{function_name='{name}_echo', \
         callback=function(keys, args) return args[1] end, flags={{'no-writes'}}}}"
    )
}

fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let info: String = run(con, &["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

/// Waits until Shale's offset is Redis's with the link up.
fn wait_caught_up(r: &mut Connection, s: &mut Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let master = info_field(r, "replication", "master_repl_offset");
        let replica = info_field(s, "replication", "slave_repl_offset");
        let up = info_field(s, "replication", "master_link_status").as_deref() == Some("up");
        if up && master.is_some() && master == replica {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Shale never caught up: master {master:?}, replica {replica:?}, up {up}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Writes of every kind the stream rewrites, in two databases, until `stop`.
fn write_to_redis(port: u16, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u64 {
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect");
    let mut rounds = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let n = rounds.to_string();
        let mut pipe = redis::pipe();
        pipe.cmd("SET").arg(format!("w:{n}")).arg(&n).ignore();
        pipe.cmd("EXPIRE").arg(format!("w:{n}")).arg(1000).ignore();
        pipe.cmd("SET")
            .arg(format!("short:{n}"))
            .arg(&n)
            .arg("PX")
            .arg(50)
            .ignore();
        pipe.cmd("DEL").arg(format!("w:{}", rounds / 2)).ignore();
        pipe.cmd("INCRBYFLOAT").arg("float").arg("0.1").ignore();
        pipe.cmd("RPUSH").arg("queue").arg(&n).arg("x").ignore();
        pipe.cmd("LPOP").arg("queue").ignore();
        pipe.cmd("SADD")
            .arg("pool")
            .arg(&n)
            .arg(format!("m{n}"))
            .arg("y")
            .ignore();
        pipe.cmd("SPOP").arg("pool").arg(2).ignore();
        pipe.cmd("HINCRBY")
            .arg("counts")
            .arg(rounds % 7)
            .arg(1)
            .ignore();
        pipe.cmd("ZADD")
            .arg("board")
            .arg(rounds as f64 / 3.0)
            .arg(&n)
            .ignore();
        pipe.atomic();
        pipe.query::<()>(&mut con).expect("pipeline");
        redis::cmd("EVAL")
            .arg("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])")
            .arg(2)
            .arg("scripted")
            .arg("script-count")
            .arg(&n)
            .query::<i64>(&mut con)
            .expect("EVAL");
        redis::cmd("SELECT")
            .arg(2)
            .query::<()>(&mut con)
            .expect("SELECT");
        redis::cmd("LPUSH")
            .arg("other-db")
            .arg(&n)
            .query::<i64>(&mut con)
            .expect("LPUSH");
        redis::cmd("SELECT")
            .arg(0)
            .query::<()>(&mut con)
            .expect("SELECT");
        rounds += 1;
    }
    rounds
}

fn live_migration(diskless: &str) {
    let redis = RedisServer::start(&[
        "--repl-diskless-sync",
        diskless,
        "--repl-diskless-sync-delay",
        "0",
        "--repl-backlog-size",
        "64mb",
    ]);
    let shale = TestServer::start();
    let (mut r, mut s) = (redis.client(), shale.client());
    load(&mut r, &corpus());
    run::<()>(&mut s, &["SET", "replaced", "by the sync"]);
    run::<String>(&mut r, &["FUNCTION", "LOAD", &library("snapshot")]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (port, stop) = (redis.port, stop.clone());
        std::thread::spawn(move || write_to_redis(port, stop))
    };
    run::<()>(&mut s, &["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while info_field(&mut s, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(
            std::time::Instant::now() < deadline,
            "the link never came up"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let refused = redis::cmd("SET").arg("k").arg("v").query::<()>(&mut s);
    assert_eq!(
        refused.expect_err("a replica refuses writes").code(),
        Some("READONLY")
    );
    run::<String>(&mut r, &["FUNCTION", "LOAD", &library("stream")]);
    // A dropped link continues where it was.
    run::<i64>(&mut s, &["CLIENT", "KILL", "TYPE", "master"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = writer.join().expect("writer");
    assert!(rounds > 10, "too few writes: {rounds}");
    // Redis still counts keys past their expiry that it has not removed yet in DEBUG DIGEST,
    // Shale never: reading them makes Redis remove them, and send their DELs.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut touch = redis::pipe();
    for n in 0..rounds {
        touch.cmd("EXISTS").arg(format!("short:{n}")).ignore();
    }
    touch.query::<()>(&mut r).expect("EXISTS");
    wait_caught_up(&mut r, &mut s);
    assert_eq!(
        info_field(&mut r, "stats", "sync_full").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut r, "stats", "sync_partial_ok").as_deref(),
        Some("1")
    );
    // Key by key, then the whole (DEBUG DIGEST covers every database).
    for db in ["0", "2"] {
        run::<()>(&mut r, &["SELECT", db]);
        run::<()>(&mut s, &["SELECT", db]);
        assert_same(&mut r, &mut s);
    }
    // Libraries come with the snapshot and the stream.
    for name in ["snapshot", "stream"] {
        let called = format!("{name}_echo");
        assert_eq!(
            run::<String>(&mut s, &["FCALL_RO", &called, "0", "hi"]),
            "hi"
        );
    }
    // Redis's WAIT counts Shale's acknowledgements.
    run::<()>(&mut r, &["SELECT", "0"]);
    run::<()>(&mut r, &["SET", "acked", "1"]);
    assert_eq!(run::<i64>(&mut r, &["WAIT", "1", "5000"]), 1);
    // REPLICAOF NO ONE ends it; the data stays and takes writes.
    run::<()>(&mut s, &["REPLICAOF", "NO", "ONE"]);
    run::<()>(&mut s, &["SELECT", "0"]);
    assert_eq!(run::<String>(&mut s, &["GET", "acked"]), "1");
    run::<()>(&mut s, &["SET", "own", "write"]);
}

#[test]
fn shale_follows_a_redis_master_through_a_diskless_sync_and_its_stream() {
    live_migration("yes");
}

#[test]
fn shale_follows_a_redis_master_through_a_disk_sync_and_its_stream() {
    live_migration("no");
}

#[test]
fn a_silent_redis_master_is_given_up_after_repl_timeout() {
    let redis = RedisServer::start(&["--repl-diskless-sync-delay", "0"]);
    let shale = TestServer::start_with(&["--repl-timeout", "2"]);
    let mut s = shale.client();
    run::<()>(&mut s, &["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    let wait_for = |s: &mut Connection, status: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while info_field(s, "replication", "master_link_status").as_deref() != Some(status) {
            assert!(
                std::time::Instant::now() < deadline,
                "the link never went {status}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    wait_for(&mut s, "up");
    // A stopped master sends nothing, not even its pings: the link must not stay up.
    redis.signal("STOP");
    wait_for(&mut s, "down");
    redis.signal("CONT");
    wait_for(&mut s, "up");
}
