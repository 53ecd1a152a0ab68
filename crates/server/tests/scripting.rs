//! EVAL, EVALSHA and SCRIPT against a real server.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{fails, run, wait_for_blocked, TestServer};

fn sha1(text: &str) -> String {
    sha1_smol::Sha1::from(text).digest().to_string()
}

#[test]
fn keys_args_calls_and_reply_conversions() {
    let server = TestServer::start();
    let mut con = server.client();
    let echoed: Vec<String> = run(
        &mut con,
        &[
            "EVAL",
            "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}",
            "2",
            "k1",
            "k2",
            "a1",
            "a2",
        ],
    );
    assert_eq!(echoed, ["k1", "k2", "a1", "a2"]);
    let got: String = run(
        &mut con,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
            "1",
            "k",
            "v",
        ],
    );
    assert_eq!(got, "v");
    let mut raw = server.raw();
    // Numbers are truncated, true is 1, false is nil, and an array ends at its first nil.
    raw.command(&["EVAL", "return {1, 2.9, 'x', true, false, nil, 5}", "0"]);
    raw.expect(b"*5\r\n:1\r\n:2\r\n$1\r\nx\r\n:1\r\n$-1\r\n");
    raw.command(&["EVAL", "return redis.status_reply('FINE')", "0"]);
    raw.expect(b"+FINE\r\n");
    raw.command(&["EVAL", "return redis.error_reply('MYCODE went wrong')", "0"]);
    raw.expect(b"-MYCODE went wrong\r\n");
    raw.command(&["EVAL", "return redis.call('GET', 'missing')", "0"]);
    raw.expect(b"$-1\r\n");
    raw.command(&["EVAL", "return redis.call('INCRBY', 'n', 41) + 1", "0"]);
    raw.expect(b":42\r\n");
    // A range read's values reach the script as a Lua array, empty strings included.
    run::<()>(&mut con, &["RPUSH", "l", "a", "", "ccc"]);
    let script = "local r = redis.call('LRANGE', KEYS[1], 0, -1) return {#r, r[1], r[2], r[3]}";
    raw.command(&["EVAL", script, "1", "l"]);
    raw.expect(b"*4\r\n:3\r\n$1\r\na\r\n$0\r\n\r\n$3\r\nccc\r\n");
    // With RESP3 chosen, a map reply reaches the script as {map = ...} and goes back as a map.
    run::<()>(&mut con, &["HSET", "h", "f", "v"]);
    let mut raw3 = server.raw();
    raw3.send(b"HELLO 3\r\nPING\r\n");
    raw3.skip_through(b"+PONG\r\n");
    raw3.command(&[
        "EVAL",
        "redis.setresp(3); return redis.call('HGETALL', 'h')",
        "0",
    ]);
    raw3.expect(b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    raw.command(&["EVAL", "return redis.call('HGETALL', 'h')", "0"]);
    raw.expect(b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
    let decoded: i64 = run(
        &mut con,
        &[
            "EVAL",
            "return cjson.decode(ARGV[1]).x[2]",
            "0",
            "{\"x\":[5,6]}",
        ],
    );
    assert_eq!(decoded, 6);
    let encoded: String = run(
        &mut con,
        &["EVAL", "return cjson.encode({1, 2, {a = 'b'}})", "0"],
    );
    assert_eq!(encoded, "[1,2,{\"a\":\"b\"}]");
    let hex: String = run(&mut con, &["EVAL", "return redis.sha1hex('')", "0"]);
    assert_eq!(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

#[test]
fn numbers_become_integers_as_redis_casts_them() {
    let server = TestServer::start();
    let mut con = server.client();
    let eval = |con: &mut redis::Connection, script: &str| -> Vec<i64> {
        run(con, &["EVAL", &format!("return {{{script}}}"), "0"])
    };
    assert_eq!(eval(&mut con, "-3.7, 2.9, 0"), [-3, 2, 0]);
    // Beyond i64 (2^63-1 is 2^63 as a double), and NaN, Redis on x86-64 answers i64::MIN.
    assert_eq!(
        eval(&mut con, "9223372036854775807, 1e30, -1e30, 0/0"),
        [i64::MIN; 4]
    );
    let incr: i64 = run(
        &mut con,
        &[
            "EVAL",
            "return redis.call('INCRBY', KEYS[1], ARGV[1])",
            "1",
            "n",
            "9223372036854775807",
        ],
    );
    assert_eq!(incr, i64::MIN);
}

#[test]
fn errors_name_the_script_line() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "s", "x"]);
    let script = "local a = 1\nerror('boom')";
    assert_eq!(
        fails(&mut con, &["EVAL", script, "0"]),
        format!(
            "ERR user_script:2: boom script: {}, on @user_script:2.",
            sha1(script)
        )
    );
    let script = "local x = 1\nredis.call('LPUSH', 's', 'y')\nreturn x";
    assert_eq!(
        fails(&mut con, &["EVAL", script, "0"]),
        format!(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: {}, on @user_script:2.",
            sha1(script)
        )
    );
    let caught: String = run(
        &mut con,
        &["EVAL", "return redis.pcall('LPUSH', 's', 'y')['err']", "0"],
    );
    assert_eq!(
        caught,
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    assert!(fails(&mut con, &["EVAL", "return undefined_name", "0"])
        .starts_with("ERR user_script:1: Script attempted to access nonexistent global variable 'undefined_name'"));
    assert_eq!(
        fails(&mut con, &["EVAL", "x = 5", "0"]),
        format!(
            "ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.",
            sha1("x = 5")
        )
    );
    // A failed call the script returns at once names its line too.
    let script = "\nreturn redis.call('LPUSH', 's', 'y')";
    assert_eq!(
        fails(&mut con, &["EVAL", script, "0"]),
        format!(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: {}, on @user_script:2.",
            sha1(script)
        )
    );
    assert_eq!(
        fails(&mut con, &["EVAL", "this is not lua", "0"]),
        "ERR Error compiling script (new function): user_script:1: '=' expected near 'is'"
    );
    // As Redis 7.0.15 answers each.
    for (script, error) in [
        (
            "return redis.call('NOSUCH')",
            "ERR Unknown Redis command called from script",
        ),
        (
            "return redis.call('MULTI')",
            "ERR This Redis command is not allowed from script",
        ),
    ] {
        assert_eq!(
            fails(&mut con, &["EVAL", script, "0"]),
            format!("{error} script: {}, on @user_script:1.", sha1(script))
        );
    }
    let script = "return redis.call('SET', 'a', 1)";
    assert_eq!(
        fails(&mut con, &["EVAL_RO", script, "0"]),
        format!(
            "ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:1.",
            sha1(script)
        )
    );
    assert_eq!(
        fails(&mut con, &["EVAL", "return 1", "-1"]),
        "ERR Number of keys can't be negative"
    );
    assert_eq!(
        fails(&mut con, &["EVAL", "return 1", "3", "a"]),
        "ERR Number of keys can't be greater than number of args"
    );
}

#[test]
fn the_script_cache() {
    let server = TestServer::start();
    let mut con = server.client();
    let script = "return 'cached'";
    let sha: String = run(&mut con, &["SCRIPT", "LOAD", script]);
    assert_eq!(sha, sha1(script));
    let got: String = run(&mut con, &["EVALSHA", &sha.to_uppercase(), "0"]);
    assert_eq!(got, "cached");
    let exists: Vec<i64> = run(&mut con, &["SCRIPT", "EXISTS", &sha, "0000"]);
    assert_eq!(exists, [1, 0]);
    // EVAL caches too.
    run::<String>(&mut con, &["EVAL", "return 'x'", "0"]);
    let got: String = run(&mut con, &["EVALSHA", &sha1("return 'x'"), "0"]);
    assert_eq!(got, "x");
    run::<()>(&mut con, &["SCRIPT", "FLUSH"]);
    assert_eq!(
        fails(&mut con, &["EVALSHA", &sha, "0"]),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        fails(&mut con, &["SCRIPT", "KILL"]),
        "NOTBUSY No scripts in execution right now."
    );
}

/// A Lua loop that runs for `ms` milliseconds by the server's clock, after writing key A.
fn slow_script(ms: u64) -> String {
    format!(
        "redis.call('SET', KEYS[1], 'during')\n\
         local function now() local t = redis.call('TIME') return t[1] * 1000 + t[2] / 1000 end\n\
         local stop = now() + {ms}\n\
         while now() < stop do end\n\
         return 'done'"
    )
}

#[test]
fn a_two_second_script_on_one_key_does_not_stop_other_keys() {
    let server = TestServer::start();
    let mut script_con = server.client();
    let mut other = server.client();
    run::<()>(&mut other, &["SET", "a", "before"]);
    let sent = Instant::now();
    let runner = thread::spawn(move || {
        let reply: String = run(&mut script_con, &["EVAL", &slow_script(2000), "1", "a"]);
        (reply, sent.elapsed())
    });
    // The script starts after it was sent and commits after running 2 s by the server's
    // clock, so whatever is read before `sent + 2 s` predates the commit.
    let window = Duration::from_millis(1900);
    let mut served_during_script = 0;
    while !runner.is_finished() {
        run::<()>(&mut other, &["SET", "b", "1"]);
        assert_eq!(run::<i64>(&mut other, &["INCR", "b"]), 2);
        let a: String = run(&mut other, &["GET", "a"]);
        if sent.elapsed() < window {
            assert_eq!(
                a, "before",
                "the script's write is not visible before it ends"
            );
            served_during_script += 1;
        }
    }
    let (reply, took) = runner.join().unwrap();
    assert_eq!(reply, "done");
    assert!(took >= Duration::from_secs(2));
    assert!(
        served_during_script > 0,
        "key b was served while the script ran"
    );
    assert_eq!(run::<String>(&mut other, &["GET", "a"]), "during");
}

#[test]
fn writers_waiting_for_a_scripts_key_do_not_stall_the_server() {
    // Two worker threads and more waiting writers than threads: were a waiting writer to keep
    // its thread, nothing else could be served until the script ends.
    let server = TestServer::start_with(&["--threads", "2"]);
    let mut script_con = server.client();
    let mut other = server.client();
    let sent = Instant::now();
    let runner = thread::spawn(move || {
        run::<String>(&mut script_con, &["EVAL", &slow_script(2000), "1", "a"])
    });
    thread::sleep(Duration::from_millis(200));
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let mut con = server.client();
            thread::spawn(move || run::<()>(&mut con, &["SET", "a", &format!("writer {i}")]))
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    // The script commits after running 2 s by the server's clock, so a reply that arrives
    // before `sent + 2 s` was served while the writers waited.
    assert_eq!(run::<String>(&mut other, &["PING"]), "PONG");
    run::<()>(&mut other, &["SET", "b", "1"]);
    assert!(
        sent.elapsed() < Duration::from_millis(1900),
        "served while writers waited for the script's key"
    );
    assert_eq!(runner.join().unwrap(), "done");
    for writer in writers {
        writer.join().unwrap();
    }
    let a: String = run(&mut other, &["GET", "a"]);
    assert!(
        a.starts_with("writer "),
        "the waiting writers ran after the script: {a}"
    );
}

/// SCRIPT KILL on `con` until a script has run past the time limit and is stopped.
fn kill_script(con: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match redis::cmd("SCRIPT").arg("KILL").query::<()>(con) {
            Ok(()) => return,
            Err(err) if err.code() == Some("NOTBUSY") && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(50));
            }
            Err(err) => panic!("SCRIPT KILL: {err}"),
        }
    }
}

/// Redis's error for a script stopped by SCRIPT KILL at a line of `script`.
fn killed_at(script: &str) -> String {
    format!(
        "ERR Script killed by user with SCRIPT KILL... script: {}, on @user_script:",
        sha1(script)
    )
}

#[test]
fn script_kill_stops_a_script_and_drops_its_writes() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["CONFIG", "SET", "lua-time-limit", "100"]);
    let mut looping = server.client();
    let script = slow_script(60_000);
    let sent = script.clone();
    let runner = thread::spawn(move || fails(&mut looping, &["EVAL", &sent, "1", "a"]));
    kill_script(&mut con);
    let reply = runner.join().unwrap();
    assert!(reply.starts_with(&killed_at(&script)), "{reply}");
    assert_eq!(run::<Option<String>>(&mut con, &["GET", "a"]), None);
}

#[test]
fn script_kill_stops_a_script_that_catches_errors() {
    let server = TestServer::start_with(&["--lua-time-limit", "100"]);
    let mut con = server.client();
    // Redis's "Timedout read-only scripts can be killed by SCRIPT KILL even when use pcall",
    // and the same with xpcall and a handler that ignores the error.
    for script in [
        "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
        "local f = function() while 1 do redis.call('ping') end end\n\
         while 1 do xpcall(f, function() return 'ignored' end) end",
    ] {
        let mut looping = server.client();
        let sent = script.to_string();
        let runner = thread::spawn(move || fails(&mut looping, &["EVAL", &sent, "0"]));
        kill_script(&mut con);
        let reply = runner.join().unwrap();
        assert!(reply.starts_with(&killed_at(script)), "{reply}");
        assert!(no_script_running(&mut con));
    }
}

#[test]
fn a_killed_script_leaves_its_client_usable() {
    // Redis's "Timedout script does not cause a false dead client": the command pipelined
    // after the script is answered once the script is killed.
    let server = TestServer::start_with(&["--lua-time-limit", "100"]);
    let mut con = server.client();
    let script = "while 1 do redis.call('ping') end";
    let mut client = server.raw();
    client.pipeline(&[&["EVAL", script, "0"], &["PING"]]);
    kill_script(&mut con);
    assert_eq!(
        client.read_line(),
        format!("-{}1.", killed_at(script)),
        "the script's reply"
    );
    assert_eq!(client.read_line(), "+PONG");
    client.command(&["EVAL", "return redis.call('PING')", "0"]);
    assert_eq!(client.read_line(), "+PONG");
    // A script that ran past the time limit without being killed leaves it usable too.
    client.command(&[
        "EVAL",
        "for i = 1, 100000 do redis.call('ping') end return 'ok'",
        "0",
    ]);
    assert_eq!(client.read_line(), "$2");
    assert_eq!(client.read_line(), "ok");
    client.command(&["PING"]);
    assert_eq!(client.read_line(), "+PONG");
}

#[test]
fn a_script_inside_exec_can_be_killed_until_it_writes() {
    let server = TestServer::start_with(&["--lua-time-limit", "100"]);
    let mut con = server.client();
    // Killed before it writes: its reply is the error, and the EXEC's other writes commit.
    let mut client = server.raw();
    let script = "while true do end";
    client.pipeline(&[
        &["MULTI"],
        &["SET", "x", "1"],
        &["EVAL", script, "0"],
        &["EXEC"],
    ]);
    kill_script(&mut con);
    for reply in ["+OK", "+QUEUED", "+QUEUED", "*2", "+OK"] {
        assert_eq!(client.read_line(), reply);
    }
    assert_eq!(client.read_line(), format!("-{}1.", killed_at(script)));
    assert_eq!(run::<String>(&mut con, &["GET", "x"]), "1");
    // Once it has written, its writes belong to the EXEC's: Redis's refusal.
    let script = "redis.call('SET', 'y', 'written')\n\
                  local function now() local t = redis.call('TIME') return t[1] + t[2] / 1e6 end\n\
                  local stop = now() + 1.5 while now() < stop do end return 'done'";
    client.pipeline(&[&["MULTI"], &["EVAL", script, "0"], &["EXEC"]]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let refusal = loop {
        match redis::cmd("SCRIPT").arg("KILL").query::<()>(&mut con) {
            Err(err) if err.code() == Some("NOTBUSY") && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(err) => break common::error_line(err),
            Ok(()) => panic!("SCRIPT KILL stopped a script that wrote inside EXEC"),
        }
    };
    assert_eq!(
        refusal,
        "UNKILLABLE Sorry the script already executed write commands against the dataset. \
         You can either wait the script termination or kill the server in a hard way using the \
         SHUTDOWN NOSAVE command."
    );
    for reply in ["+OK", "+QUEUED", "*1", "$4", "done"] {
        assert_eq!(client.read_line(), reply);
    }
    assert_eq!(run::<String>(&mut con, &["GET", "y"]), "written");
}

#[test]
fn a_script_inside_exec_is_stopped_once_its_client_has_gone() {
    let server = TestServer::start_with(&["--lua-time-limit", "200"]);
    let mut con = server.client();
    con.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut looping = server.raw();
    looping.pipeline(&[
        &["MULTI"],
        &["EVAL", "while true do end", "1", "held"],
        &["EXEC"],
    ]);
    thread::sleep(Duration::from_millis(100));
    drop(looping);
    // The EXEC holds the key until the script is stopped; a write of it waits for that.
    run::<()>(&mut con, &["SET", "held", "mine"]);
    assert_eq!(run::<String>(&mut con, &["GET", "held"]), "mine");
    assert!(no_script_running(&mut con));
}

#[test]
fn scripts_wake_blocked_clients_and_run_inside_multi() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut blocked = server.client();
    let waiter = thread::spawn(move || run::<Vec<String>>(&mut blocked, &["BLPOP", "jobs", "0"]));
    wait_for_blocked(&mut con, 1);
    run::<i64>(
        &mut con,
        &[
            "EVAL",
            "return redis.call('RPUSH', KEYS[1], 'job1')",
            "1",
            "jobs",
        ],
    );
    assert_eq!(waiter.join().unwrap(), ["jobs", "job1"]);

    let (set, got): (String, String) = redis::pipe()
        .atomic()
        .cmd("EVAL")
        .arg("return redis.call('SET', KEYS[1], 'in-multi')")
        .arg(1)
        .arg("m")
        .cmd("GET")
        .arg("m")
        .query(&mut con)
        .unwrap();
    assert_eq!((set.as_str(), got.as_str()), ("OK", "in-multi"));
    // As in Redis 7.0, scripts may not run BLPOP and its like; BLMPOP, which they may run,
    // returns at once on an empty list.
    assert!(fails(
        &mut con,
        &["EVAL", "return redis.call('BLPOP', 'none', 0)", "0"]
    )
    .starts_with("ERR This Redis command is not allowed from script"));
    let popped: Option<Vec<String>> = run(
        &mut con,
        &[
            "EVAL",
            "return redis.call('BLMPOP', 0, 1, 'none', 'LEFT')",
            "0",
        ],
    );
    assert_eq!(popped, None);
}

#[test]
fn nothing_a_script_changes_outlives_it() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "v"]);
    // Each write is refused, as Redis 7.0 refuses it (tests/scripting_sandbox.rs has the
    // errors); the script goes on past them.
    let tamper = "for _, f in ipairs({\n\
                    function() redis.call = function() return 'intercepted' end end,\n\
                    function() rawset(string, 'upper', nil) end,\n\
                    function() rawset(_G, 'leftover', 1) end,\n\
                  }) do pcall(f) end\n\
                  return 1";
    // Run it more often than there are pooled Lua states, so every state sees it.
    for _ in 0..4 {
        run::<i64>(&mut con, &["EVAL", tamper, "0"]);
    }
    let got: String = run(&mut con, &["EVAL", "return redis.call('GET', 'k')", "0"]);
    assert_eq!(got, "v");
    let upper: String = run(
        &mut con,
        &["EVAL", "return string.upper('a') .. ('b'):upper()", "0"],
    );
    assert_eq!(upper, "AB");
    assert!(fails(&mut con, &["EVAL", "return leftover", "0"])
        .contains("Script attempted to access nonexistent global variable 'leftover'"));
}

#[test]
fn loaded_chunks_are_source_text_and_run_in_the_scripts_globals() {
    let server = TestServer::start();
    let mut con = server.client();
    // A binary chunk is refused, however it is handed over.
    let refused: bool = run(
        &mut con,
        &[
            "EVAL",
            "local dumped = string.dump(function() return 1 end)\n\
             local pieces = {dumped}\n\
             local f = load(function() return table.remove(pieces, 1) end)\n\
             return loadstring(dumped) == nil and f == nil",
            "0",
        ],
    );
    assert!(refused);
    let got: String = run(
        &mut con,
        &["EVAL", "return loadstring('return KEYS[1]')()", "1", "k"],
    );
    assert_eq!(got, "k");
    let from_reader: i64 = run(
        &mut con,
        &[
            "EVAL",
            "local pieces = {'return ', '41 + 1'}\n\
             return load(function() return table.remove(pieces, 1) end)()",
            "0",
        ],
    );
    assert_eq!(from_reader, 42);
    // What a loaded chunk writes to its globals stays in its run, as the script's own would.
    for _ in 0..4 {
        assert!(fails(
            &mut con,
            &["EVAL", "loadstring('leaked = 1')() return 1", "0"]
        )
        .contains("Attempt to modify a readonly table"));
    }
    assert!(fails(
        &mut con,
        &["EVAL", "return loadstring('return leaked')()", "0"]
    )
    .contains("Script attempted to access nonexistent global variable 'leaked'"));
}

#[test]
fn a_table_that_holds_itself_is_refused_not_expanded() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        fails(
            &mut con,
            &["EVAL", "local t = {} t[1] = t t[2] = t return t", "0"]
        ),
        "ERR reached lua stack limit",
        "as Redis answers"
    );
    let pong: String = run(&mut con, &["PING"]);
    assert_eq!(pong, "PONG");
    // Shared tables are expanded where they appear, as long as the reply stays small.
    let nested: Vec<Vec<i64>> = run(
        &mut con,
        &["EVAL", "local t = {1, 2} return {t, t, t}", "0"],
    );
    assert_eq!(nested, vec![vec![1, 2]; 3]);
}

/// Waits until no script is running: SCRIPT KILL answers NOTBUSY.
fn no_script_running(con: &mut redis::Connection) -> bool {
    matches!(
        redis::cmd("SCRIPT").arg("KILL").query::<()>(con),
        Err(err) if err.code() == Some("NOTBUSY")
    )
}

#[test]
fn shutdown_ends_a_looping_script_whose_client_left_and_keeps_acknowledged_writes() {
    let mut server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut con = server.client();
    for i in 0..200 {
        run::<()>(&mut con, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    let mut looping = server.raw();
    looping.command(&[
        "EVAL",
        "redis.call('SET', KEYS[1], 'lost') while true do end",
        "1",
        "k0",
    ]);
    thread::sleep(Duration::from_millis(300));
    drop(looping);
    // Others are still served while it loops.
    assert_eq!(run::<String>(&mut con, &["GET", "k1"]), "v1");
    let mut admin = server.raw();
    admin.command(&["SHUTDOWN", "NOSAVE"]);
    let status = server
        .wait_exit_within(Duration::from_secs(5))
        .expect("shale-server still running 5 s after SHUTDOWN");
    assert!(status.success(), "exit status {status}");
    server.start_again();
    let mut con = server.client();
    for i in 0..200 {
        let value: String = run(&mut con, &["GET", &format!("k{i}")]);
        assert_eq!(value, format!("v{i}"), "the script's write never committed");
    }
}

#[test]
fn sigterm_ends_a_running_script_and_a_transaction_waiting_behind_it() {
    let mut server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "kept", "yes"]);
    let mut looping = server.raw();
    looping.command(&["EVAL", "while true do end", "1", "a"]);
    thread::sleep(Duration::from_millis(200));
    let mut queued = server.raw();
    queued.pipeline(&[&["MULTI"], &["SET", "a", "1"], &["EXEC"]]);
    thread::sleep(Duration::from_millis(300));
    server.terminate();
    let status = server
        .wait_exit_within(Duration::from_secs(5))
        .expect("shale-server still running 5 s after SIGTERM");
    assert!(status.success(), "exit status {status}");
    server.start_again();
    let mut con = server.client();
    assert_eq!(run::<String>(&mut con, &["GET", "kept"]), "yes");
    assert_eq!(run::<Option<String>>(&mut con, &["GET", "a"]), None);
}

#[test]
fn a_script_past_its_time_limit_is_stopped_once_its_client_has_gone() {
    let server = TestServer::start_with(&["--lua-time-limit", "200"]);
    let mut con = server.client();
    con.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut looping = server.raw();
    let script = "redis.call('SET', KEYS[2], 'lost') while true do end";
    looping.command(&["EVAL", script, "2", "held", "other"]);
    thread::sleep(Duration::from_millis(100));
    drop(looping);
    // The script holds its keys until it is stopped; a write of one waits for that.
    run::<()>(&mut con, &["SET", "held", "mine"]);
    assert_eq!(run::<String>(&mut con, &["GET", "held"]), "mine");
    assert_eq!(run::<Option<String>>(&mut con, &["GET", "other"]), None);
    assert!(no_script_running(&mut con));
}

#[test]
fn a_script_past_its_time_limit_runs_on_while_its_client_waits() {
    let server = TestServer::start_with(&["--lua-time-limit", "100"]);
    let mut con = server.client();
    let reply: String = run(&mut con, &["EVAL", &slow_script(1000), "1", "a"]);
    assert_eq!(reply, "done");
    assert_eq!(run::<String>(&mut con, &["GET", "a"]), "during");
}
