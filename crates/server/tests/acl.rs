//! ACL users against real processes: categories as Redis 7.0.15 has them, users from the
//! configuration and the ACL file, the default user and `requirepass`, the log, and the
//! connections a change of rules closes. Replies are compared with Redis's in
//! scripts/compare/acl.txt.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{error_line, fails, run, wait_until, RedisServer, TestServer};
use redis::Value;

fn login(port: u16, user: &str, password: &str) -> redis::Connection {
    redis::Client::open(format!("redis://{user}:{password}@127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("log in")
}

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

fn clients(con: &mut redis::Connection) -> String {
    run(con, &["CLIENT", "LIST"])
}

/// Every command of COMMAND with its ACL categories.
fn categories(con: &mut redis::Connection) -> BTreeMap<String, Vec<String>> {
    fn walk(entries: &[Value], out: &mut BTreeMap<String, Vec<String>>) {
        for entry in entries {
            let Value::Array(fields) = entry else {
                continue;
            };
            let mut cats: Vec<String> = match &fields[6] {
                Value::Array(c) | Value::Set(c) => c.iter().map(text).collect(),
                _ => Vec::new(),
            };
            cats.sort();
            out.insert(text(&fields[0]), cats);
            if let Some(Value::Array(subs)) = fields.get(9) {
                walk(subs, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&run::<Vec<Value>>(con, &["COMMAND"]), &mut out);
    out
}

#[test]
fn every_command_is_in_redis_categories_and_acl_cat_lists_them() {
    let redis = RedisServer::start(&[]);
    let shale = TestServer::start();
    let (mut r, mut s) = (redis.client(), shale.client());
    let (theirs, ours) = (categories(&mut r), categories(&mut s));
    let mut compared = 0;
    for (name, cats) in &ours {
        if let Some(expected) = theirs.get(name) {
            assert_eq!(cats, expected, "categories of {name}");
            compared += 1;
        }
    }
    assert!(compared > 290, "only {compared} commands in common");
    let names: Vec<String> = run(&mut s, &["ACL", "CAT"]);
    assert_eq!(names, run::<Vec<String>>(&mut r, &["ACL", "CAT"]));
    for category in &names {
        let listed = |con: &mut redis::Connection| {
            let mut listed: Vec<String> = run(con, &["ACL", "CAT", category]);
            listed.retain(|c| ours.contains_key(c) && theirs.contains_key(c));
            listed.sort();
            listed
        };
        assert_eq!(listed(&mut s), listed(&mut r), "ACL CAT {category}");
    }
}

#[test]
fn requirepass_is_the_default_users_password() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        fails(&mut con, &["AUTH", "x"]),
        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    );
    run::<()>(&mut con, &["CONFIG", "SET", "requirepass", "secret"]);
    let mut fresh = server.client();
    assert!(fails(&mut fresh, &["GET", "k"]).starts_with("NOAUTH"));
    assert_eq!(
        fails(&mut fresh, &["AUTH", "wrong"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    run::<()>(&mut fresh, &["AUTH", "default", "secret"]);
    let user: Vec<Value> = run(&mut con, &["ACL", "GETUSER", "default"]);
    let shown: Vec<String> = user.iter().map(text).collect();
    assert!(
        format!("{user:?}")
            .contains("2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"),
        "the password is kept as its SHA-256: {shown:?}"
    );
    // Another parameter set later leaves the password as ACL rules changed it.
    run::<()>(&mut con, &["ACL", "SETUSER", "default", ">other"]);
    run::<()>(&mut con, &["CONFIG", "SET", "maxclients", "100"]);
    login(server.port, "default", "other");
    run::<()>(&mut con, &["CONFIG", "SET", "requirepass", ""]);
    run::<Option<String>>(&mut server.client(), &["GET", "k"]);
    // HELLO logs in as it switches protocol.
    let mut hello = server.client();
    run::<()>(
        &mut con,
        &["ACL", "SETUSER", "bob", "on", ">pw", "+@all", "~*"],
    );
    let reply: Value = run(&mut hello, &["HELLO", "2", "AUTH", "bob", "pw"]);
    assert!(format!("{reply:?}").contains("proto"));
    assert_eq!(run::<String>(&mut hello, &["ACL", "WHOAMI"]), "bob");
    assert_eq!(
        fails(&mut hello, &["HELLO", "2", "AUTH", "bob", "nope"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
}

fn start_with_config(text: &str) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("shale.conf");
    std::fs::write(&path, text).expect("config");
    (TestServer::start_with_config(Some(&path), &[]), dir)
}

/// Runs shale-server with a config file and returns whether it exited with an error, and
/// its output.
fn refused_start(text: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("shale.conf");
    std::fs::write(&path, text).expect("config");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_shale-server"))
        .arg(&path)
        .args(["--port", "0", "--dir"])
        .arg(dir.path().join("data"))
        .output()
        .expect("run shale-server");
    assert!(!output.status.success(), "the server started");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn users_come_from_config_lines_and_the_acl_file() {
    let (server, _dir) = start_with_config(
        "user default on >defpass ~* &* +@all\nuser reader on >r \"~cache:*\" +@read\n",
    );
    assert!(fails(&mut server.client(), &["PING"]).starts_with("NOAUTH"));
    let mut admin = login(server.port, "default", "defpass");
    let mut reader = login(server.port, "reader", "r");
    run::<Option<String>>(&mut reader, &["GET", "cache:1"]);
    assert_eq!(
        fails(&mut reader, &["SET", "cache:1", "v"]),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    let users: Vec<String> = run(&mut admin, &["ACL", "USERS"]);
    assert_eq!(users, ["default", "reader"]);
    assert!(fails(&mut admin, &["ACL", "SAVE"])
        .starts_with("ERR This Redis instance is not configured to use an ACL file."));
}

#[test]
fn users_outlive_a_restart_through_config_rewrite() {
    let (mut server, _dir) = start_with_config("requirepass first\n");
    let mut con = login(server.port, "default", "first");
    run::<()>(
        &mut con,
        &[
            "ACL",
            "SETUSER",
            "keeper",
            "on",
            ">k",
            "~keep:*",
            "+@all",
            "(+get ~x*)",
        ],
    );
    run::<()>(&mut con, &["CONFIG", "REWRITE"]);
    server.restart();
    let mut keeper = login(server.port, "keeper", "k");
    run::<()>(&mut keeper, &["SET", "keep:1", "v"]);
    run::<Option<String>>(&mut keeper, &["GET", "x1"]);
    assert!(fails(&mut keeper, &["SET", "x1", "v"]).starts_with("NOPERM"));
    // The default user's password came back from its `user` line.
    login(server.port, "default", "first");
}

#[test]
fn acl_save_and_load_round_trip_and_a_bad_file_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let aclfile = dir.path().join("users.acl");
    std::fs::write(&aclfile, "user default on nopass ~* &* +@all\n").expect("acl file");
    let (mut server, _config_dir) = start_with_config(&format!("aclfile {}\n", aclfile.display()));
    let mut con = server.client();
    run::<()>(
        &mut con,
        &["ACL", "SETUSER", "alice", "on", ">a", "~a:*", "+@hash"],
    );
    run::<()>(&mut con, &["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(&aclfile).expect("saved");
    assert!(
        saved.contains("user alice on #") && saved.contains("~a:* resetchannels -@all +@hash"),
        "{saved}"
    );
    let mut alice = login(server.port, "alice", "a");
    // A file with a bad line is refused whole.
    std::fs::write(
        &aclfile,
        "user default on nopass ~* &* +@all\nuser bob on +nosuch\n",
    )
    .expect("acl file");
    assert_eq!(
        fails(&mut con, &["ACL", "LOAD"]),
        format!(
            "ERR {}:2: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            aclfile.display()
        )
    );
    run::<i64>(&mut alice, &["HSET", "a:1", "f", "v"]);
    // A good one replaces every user; alice is gone, and so is her connection.
    std::fs::write(
        &aclfile,
        "user default on nopass ~* &* +@all\nuser bob on >b +@all ~*\n",
    )
    .expect("acl file");
    run::<()>(&mut con, &["ACL", "LOAD"]);
    assert_eq!(
        run::<Vec<String>>(&mut con, &["ACL", "USERS"]),
        ["bob", "default"]
    );
    wait_until("alice's connection is closed", || {
        !clients(&mut con).contains("user=alice")
    });
    assert!(redis::cmd("PING").query::<String>(&mut alice).is_err());
    login(server.port, "bob", "b");
    // The file is what a restart starts from.
    run::<()>(&mut con, &["ACL", "SETUSER", "carol", "on", ">c", "+ping"]);
    run::<()>(&mut con, &["ACL", "SAVE"]);
    server.restart();
    assert_eq!(
        run::<String>(&mut login(server.port, "carol", "c"), &["PING"]),
        "PONG"
    );
    assert!(refused_start(&format!(
        "aclfile {}\nuser carol on nopass\n",
        aclfile.display()
    ))
    .contains("either an ACL file or declare users directly in your redis.conf, but not both"));
    assert!(refused_start("user carol on +nosuch\n")
        .contains("Unknown command or category name in ACL"));
}

#[test]
fn the_log_records_refusals_and_failed_logins() {
    let server = TestServer::start();
    let mut admin = server.client();
    run::<()>(
        &mut admin,
        &[
            "ACL", "SETUSER", "bob", "on", ">pw", "~k*", "+get", "+eval", "+multi",
        ],
    );
    let mut bob = login(server.port, "bob", "pw");
    for _ in 0..3 {
        fails(&mut bob, &["SET", "k1", "v"]);
    }
    fails(&mut bob, &["GET", "x1"]);
    fails(&mut bob, &["EVAL", "return redis.call('DEL', 'k1')", "0"]);
    run::<()>(&mut bob, &["MULTI"]);
    fails(&mut bob, &["DEL", "k1"]);
    let _ = redis::cmd("AUTH")
        .arg("bob")
        .arg("bad")
        .query::<()>(&mut admin);
    let log: Vec<Value> = run(&mut admin, &["ACL", "LOG"]);
    let entries: Vec<BTreeMap<String, String>> = log
        .iter()
        .map(|entry| {
            let Value::Array(fields) = entry else {
                panic!("{entry:?}")
            };
            fields
                .chunks(2)
                .map(|pair| (text(&pair[0]), text(&pair[1])))
                .collect()
        })
        .collect();
    let summary: Vec<(String, String, String, String, String)> = entries
        .iter()
        .map(|e| {
            let field = |name: &str| e.get(name).cloned().unwrap_or_default();
            (
                field("count"),
                field("reason"),
                field("context"),
                field("object"),
                field("username"),
            )
        })
        .collect();
    let row = |count: &str, reason: &str, context: &str, object: &str, user: &str| {
        (
            count.to_string(),
            reason.to_string(),
            context.to_string(),
            object.to_string(),
            user.to_string(),
        )
    };
    assert_eq!(
        summary,
        [
            row("1", "auth", "toplevel", "AUTH", "bob"),
            row("1", "command", "multi", "del", "bob"),
            row("1", "command", "lua", "del", "bob"),
            row("1", "key", "toplevel", "x1", "bob"),
            row("3", "command", "toplevel", "set", "bob"),
            // redis-rs names itself with CLIENT SETINFO as it connects, which bob may not.
            row("2", "command", "toplevel", "client|setinfo", "bob"),
        ]
    );
    assert!(entries[4]["client-info"].contains("user=bob"));
    run::<()>(&mut admin, &["ACL", "LOG", "RESET"]);
    assert!(run::<Vec<Value>>(&mut admin, &["ACL", "LOG"]).is_empty());
}

#[test]
fn channels_are_checked_and_changes_close_what_they_no_longer_allow() {
    let server = TestServer::start();
    let mut admin = server.client();
    run::<()>(
        &mut admin,
        &[
            "ACL", "SETUSER", "sub", "on", ">pw", "+@pubsub", "+ping", "&news.*", "&alerts",
        ],
    );
    let mut sub = login(server.port, "sub", "pw");
    assert_eq!(
        fails(&mut sub, &["SUBSCRIBE", "other"]),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    // A PSUBSCRIBE pattern must be one of the user's patterns, not just match it.
    assert!(fails(&mut sub, &["PSUBSCRIBE", "news.x*"]).starts_with("NOPERM"));
    let mut listener = login(server.port, "sub", "pw");
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe("alerts").expect("subscribe");
    pubsub.psubscribe("news.*").expect("psubscribe");
    assert_eq!(run::<i64>(&mut sub, &["PUBLISH", "news.today", "hi"]), 1);
    let message = pubsub.get_message().expect("message");
    assert_eq!(message.get_payload::<String>().expect("payload"), "hi");
    drop(pubsub);
    // Widening keeps subscribers; narrowing closes those subscribed to what is gone.
    let mut keeper = login(server.port, "sub", "pw");
    let mut kept = keeper.as_pubsub();
    kept.subscribe("news.sports").expect("subscribe");
    run::<()>(&mut admin, &["ACL", "SETUSER", "sub", "&more"]);
    run::<()>(
        &mut admin,
        &["ACL", "SETUSER", "sub", "resetchannels", "&news.*"],
    );
    // The listener (a channel and a pattern) is closed, the keeper (one channel) is not.
    wait_until("the subscriber to alerts is closed", || {
        !clients(&mut admin).contains("psub=1")
    });
    assert!(clients(&mut admin).contains("user=sub"));
    kept.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    assert_eq!(
        run::<i64>(&mut admin, &["PUBLISH", "news.sports", "goal"]),
        1
    );
    assert_eq!(
        kept.get_message()
            .expect("still subscribed")
            .get_payload::<String>()
            .expect("payload"),
        "goal"
    );
}

#[test]
fn deleting_a_user_closes_its_connections_and_off_refuses_new_logins() {
    let server = TestServer::start();
    let mut admin = server.client();
    run::<()>(
        &mut admin,
        &["ACL", "SETUSER", "temp", "on", ">pw", "+@all", "~*"],
    );
    let mut temp = login(server.port, "temp", "pw");
    run::<()>(&mut admin, &["ACL", "SETUSER", "temp", "off"]);
    // Off refuses new logins; the connection logged in runs on, as in Redis.
    assert_eq!(run::<String>(&mut temp, &["PING"]), "PONG");
    let refused = redis::cmd("AUTH")
        .arg("temp")
        .arg("pw")
        .query::<()>(&mut admin);
    assert_eq!(
        error_line(refused.expect_err("disabled")),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    let listed = clients(&mut admin);
    assert!(listed.contains("user=temp"), "{listed}");
    assert_eq!(
        run::<i64>(
            &mut admin,
            &["CLIENT", "KILL", "USER", "default", "SKIPME", "yes"]
        ),
        0
    );
    assert_eq!(
        fails(&mut admin, &["CLIENT", "KILL", "USER", "nosuch"]),
        "ERR No such user 'nosuch'"
    );
    assert_eq!(
        run::<i64>(&mut admin, &["ACL", "DELUSER", "temp", "nosuch"]),
        1
    );
    wait_until("the deleted user's connection is closed", || {
        !clients(&mut admin).contains("user=temp")
    });
    assert!(redis::cmd("PING").query::<String>(&mut temp).is_err());
}
