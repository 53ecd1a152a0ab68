//! Connection and server commands against a real server.

mod common;

use common::{command_stats, fails, info_field, run, wait_for_blocked, wait_until, TestServer};
use redis::Value;

#[test]
fn ping_echo_time() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(run::<String>(&mut con, &["PING"]), "PONG");
    assert_eq!(run::<String>(&mut con, &["PING", "hi"]), "hi");
    assert_eq!(
        fails(&mut con, &["PING", "a", "b"]),
        "ERR wrong number of arguments for 'ping' command"
    );
    assert_eq!(run::<String>(&mut con, &["ECHO", "x y"]), "x y");
    let (secs, micros): (u64, u64) = run(&mut con, &["TIME"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 2);
    assert!(micros < 1_000_000);
}

#[test]
fn auth_and_hello() {
    let server = TestServer::start_with(&["--requirepass", "s3cret"]);
    let mut raw = server.raw();
    raw.send(b"GET k\r\n");
    raw.expect(b"-NOAUTH Authentication required.\r\n");
    raw.send(b"AUTH wrong\r\n");
    raw.expect(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    raw.send(b"HELLO 2\r\n");
    raw.expect(b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n");
    raw.send(b"AUTH s3cret\r\nPING\r\n");
    raw.expect(b"+OK\r\n+PONG\r\n");
    raw.send(b"RESET\r\nPING\r\n");
    raw.expect(b"+RESET\r\n-NOAUTH Authentication required.\r\n");
    raw.send(b"AUTH default s3cret\r\n");
    raw.expect(b"+OK\r\n");

    let mut raw = server.raw();
    raw.send(b"HELLO 2 AUTH default s3cret SETNAME app1\r\nCLIENT GETNAME\r\n");
    raw.expect(b"*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n");

    let client =
        redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", server.port)).unwrap();
    let mut con = client.get_connection().unwrap();
    assert_eq!(run::<String>(&mut con, &["PING"]), "PONG");

    let open = TestServer::start();
    let mut con = open.client();
    assert_eq!(
        fails(&mut con, &["AUTH", "x"]),
        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    );
}

#[test]
fn client_commands() {
    let server = TestServer::start();
    let mut con = server.client();
    let id: i64 = run(&mut con, &["CLIENT", "ID"]);
    assert!(id > 0);
    assert_eq!(run::<Value>(&mut con, &["CLIENT", "GETNAME"]), Value::Nil);
    run::<()>(&mut con, &["CLIENT", "SETNAME", "worker-1"]);
    assert_eq!(run::<String>(&mut con, &["CLIENT", "GETNAME"]), "worker-1");
    assert_eq!(
        fails(&mut con, &["CLIENT", "SETNAME", "has space"]),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );
    run::<()>(&mut con, &["CLIENT", "SETINFO", "LIB-NAME", "redis-rs"]);
    let info: String = run(&mut con, &["CLIENT", "INFO"]);
    assert!(info.contains(&format!("id={id} ")), "{info}");
    assert!(info.contains("name=worker-1"), "{info}");
    assert!(info.contains("lib-name=redis-rs"), "{info}");
    assert!(info.contains("cmd=client|info "), "{info}");

    let mut other = server.client();
    let other_id: i64 = run(&mut other, &["CLIENT", "ID"]);
    let list: String = run(&mut con, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 2, "{list}");
    let only: String = run(&mut con, &["CLIENT", "LIST", "ID", &other_id.to_string()]);
    assert_eq!(only.lines().count(), 1);
    assert_eq!(
        run::<i64>(&mut con, &["CLIENT", "KILL", "ID", &other_id.to_string()]),
        1
    );
    // The kill reaches the other connection's task asynchronously.
    wait_until("killed client is not closed", || {
        redis::cmd("PING").query::<String>(&mut other).is_err()
    });
    assert_eq!(
        fails(&mut con, &["CLIENT", "KILL", "1.2.3.4:5"]),
        "ERR No such client"
    );
    assert_eq!(
        fails(&mut con, &["CLIENT", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try CLIENT HELP."
    );
    assert_eq!(
        fails(&mut con, &["CLIENT", "ID", "x"]),
        "ERR wrong number of arguments for 'client|id' command"
    );
}

#[test]
fn config_get_set_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shale.conf");
    std::fs::write(&file, "# my config\ntimeout 0\n").unwrap();
    let server = TestServer::start_with_config(Some(&file), &[]);
    let mut con = server.client();
    let got: Vec<String> = run(&mut con, &["CONFIG", "GET", "appendfsync"]);
    assert_eq!(got, vec!["appendfsync", "everysec"]);
    let many: Vec<String> = run(&mut con, &["CONFIG", "GET", "slowlog-*"]);
    assert_eq!(many.len(), 4);
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "appendfsync", "always", "timeout", "300"],
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["CONFIG", "GET", "timeout"])[1],
        "300"
    );
    let persistence: String = run(&mut con, &["INFO", "persistence"]);
    assert!(
        persistence.contains("appendfsync:always"),
        "the WAL syncer follows CONFIG SET: {persistence}"
    );
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "hash-max-listpack-entries", "1024"],
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["CONFIG", "GET", "hash-max-listpack-entries"])[1],
        "1024"
    );
    // Nothing is evicted: the values that say so are shown and only they are accepted.
    assert_eq!(
        run::<Vec<String>>(&mut con, &["CONFIG", "GET", "maxmemory*"]),
        ["maxmemory", "0", "maxmemory-policy", "noeviction"]
    );
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    );
    assert!(fails(&mut con, &["CONFIG", "SET", "maxmemory", "1gb"])
        .starts_with("ERR CONFIG SET failed (possibly related to argument 'maxmemory')"));
    let memory: String = run(&mut con, &["INFO", "memory"]);
    assert!(
        memory.contains("maxmemory_policy:noeviction\r\n"),
        "{memory}"
    );
    // Fragment indexes are 32 bits: a longer string would wrap around onto its first bytes.
    assert!(fails(
        &mut con,
        &["CONFIG", "SET", "proto-max-bulk-len", "100000gb"]
    )
    .starts_with("ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len')"));
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "proto-max-bulk-len", "16384gb"],
    );
    assert_eq!(
        fails(&mut con, &["SETRANGE", "s", "17592186044416", "X"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    run::<()>(&mut con, &["CONFIG", "SET", "proto-max-bulk-len", "512mb"]);
    assert_eq!(
        fails(&mut con, &["CONFIG", "SET", "port", "1"]),
        "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"
    );
    assert_eq!(
        fails(&mut con, &["CONFIG", "SET", "nosuch", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert!(
        fails(&mut con, &["CONFIG", "SET", "appendfsync", "sometimes"])
            .starts_with("ERR CONFIG SET failed (possibly related to argument 'appendfsync')")
    );
    assert_eq!(
        fails(
            &mut con,
            &["CONFIG", "SET", "timeout", "5", "maxclients", "x"]
        )
        .split(" - ")
        .next()
        .unwrap(),
        "ERR CONFIG SET failed (possibly related to argument 'maxclients')"
    );
    assert_eq!(
        run::<Vec<String>>(&mut con, &["CONFIG", "GET", "timeout"])[1],
        "300",
        "all or nothing"
    );
    run::<()>(&mut con, &["CONFIG", "REWRITE"]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("# my config\ntimeout 300\n"), "{text}");
    assert!(text.contains("appendfsync always"), "{text}");
    assert!(text.contains("hash-max-listpack-entries 1024"), "{text}");
    run::<()>(&mut con, &["CONFIG", "RESETSTAT"]);

    let plain = TestServer::start();
    let mut con = plain.client();
    assert_eq!(
        fails(&mut con, &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );
}

#[test]
fn info_sections() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "a", "1"]);
    run::<()>(&mut con, &["GET", "a"]);
    run::<()>(&mut con, &["GET", "nope"]);
    let info: String = run(&mut con, &["INFO"]);
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# Replication",
        "# CPU",
        "# Keyspace",
        "# RocksDB",
    ] {
        assert!(info.contains(section), "missing {section}");
    }
    assert!(info.contains("redis_version:7.0.15"));
    assert!(info.contains(&format!("tcp_port:{}", server.port)));
    assert!(info.contains("keyspace_hits:1\r\n"), "{info}");
    assert!(info.contains("keyspace_misses:1\r\n"), "{info}");
    assert!(info.contains("db0:keys=1,expires=0"));
    assert!(info.contains("block_cache_capacity:"));
    assert!(info.contains("mem_allocator:jemalloc-5.3.0\r\n"), "{info}");
    assert!(
        info.contains("# Cluster\r\ncluster_enabled:0\r\n"),
        "{info}"
    );
    assert!(info.contains("pubsub_channels:0\r\n"), "{info}");
    let rss = info_field(&mut con, "memory", "used_memory_rss");
    assert!(info_field(&mut con, "memory", "used_memory_peak") >= rss);
    assert!(info_field(&mut con, "memory", "total_system_memory") > 0);
    assert!(!info.contains("# Commandstats"));
    // As in Redis: a command refused before it runs is a rejected call, one that runs and
    // answers with an error a failed call, and a command with only refusals is still listed.
    fails(&mut con, &["GET"]);
    fails(&mut con, &["LPUSH", "nokey"]);
    run::<()>(&mut con, &["HSET", "hash", "f", "v"]);
    fails(&mut con, &["GET", "hash"]);
    let stats: String = run(&mut con, &["INFO", "commandstats"]);
    let get = command_stats(&stats, "get");
    assert!(get.starts_with("cmdstat_get:calls=3,"), "{stats}");
    assert!(get.ends_with(",rejected_calls=1,failed_calls=1"), "{stats}");
    assert!(stats.contains("cmdstat_set:calls=1,"), "{stats}");
    assert!(
        stats.contains(
            "cmdstat_lpush:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n"
        ),
        "{stats}"
    );
    let all: String = run(&mut con, &["INFO", "all"]);
    assert!(all.contains("# Commandstats"));
}

#[test]
fn client_list_shows_subscriptions_transactions_and_blocked_clients() {
    let server = TestServer::start();
    let mut subscriber = server.raw();
    subscriber.pipeline(&[
        &["CLIENT", "SETNAME", "sub"],
        &["SUBSCRIBE", "a", "b"],
        &["PSUBSCRIBE", "p*"],
    ]);
    subscriber.skip_through(b"p*\r\n:3\r\n");
    let mut queuing = server.client();
    run::<()>(&mut queuing, &["CLIENT", "SETNAME", "multi"]);
    run::<()>(&mut queuing, &["MULTI"]);
    run::<String>(&mut queuing, &["SET", "k", "v"]);
    run::<String>(&mut queuing, &["GET", "k"]);
    let mut blocked = server.raw();
    blocked.pipeline(&[&["CLIENT", "SETNAME", "blocked"], &["BLPOP", "nolist", "0"]]);
    let mut con = server.client();
    wait_for_blocked(&mut con, 1);
    let list: String = run(&mut con, &["CLIENT", "LIST"]);
    assert!(
        line_of(&list, "sub").contains(" flags=P db=0 sub=2 psub=1 ssub=0 multi=-1 "),
        "{list}"
    );
    // As in Redis, a client in MULTI shows the command it queued last.
    assert!(
        line_of(&list, "multi").contains(" flags=x db=0 sub=0 psub=0 ssub=0 multi=2 "),
        "{list}"
    );
    assert!(line_of(&list, "multi").contains(" cmd=get "), "{list}");
    assert!(line_of(&list, "blocked").contains(" flags=b "), "{list}");
    assert!(line_of(&list, "blocked").contains(" cmd=blpop "), "{list}");
    let pubsub: String = run(&mut con, &["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(pubsub.lines().count(), 1, "{pubsub}");
    assert!(pubsub.contains(" name=sub "), "{pubsub}");
    let normal: String = run(&mut con, &["CLIENT", "LIST", "TYPE", "normal"]);
    assert_eq!(normal.lines().count(), 3, "{normal}");
    assert_eq!(
        run::<i64>(&mut con, &["CLIENT", "KILL", "TYPE", "pubsub"]),
        1
    );
    assert_eq!(
        run::<i64>(&mut con, &["CLIENT", "KILL", "TYPE", "master"]),
        0
    );
    run::<()>(&mut queuing, &["DISCARD"]);
    let list: String = run(&mut con, &["CLIENT", "LIST"]);
    assert!(line_of(&list, "multi").contains(" flags=N "), "{list}");
}

#[test]
fn client_list_shows_buffers_of_each_client() {
    let server = TestServer::start();
    let mut con = server.client();
    // A request still being sent waits in its client's query buffer.
    let mut partial = server.raw();
    partial.command(&["CLIENT", "SETNAME", "partial"]);
    partial.expect(b"+OK\r\n");
    partial.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc");
    let mut queuing = server.client();
    run::<()>(&mut queuing, &["CLIENT", "SETNAME", "multi"]);
    run::<()>(&mut queuing, &["MULTI"]);
    run::<String>(&mut queuing, &["SET", "key", &"v".repeat(100)]);
    // A subscriber that reads nothing: once its socket is full, messages queue for it.
    let mut subscriber = server.raw();
    subscriber.command(&["CLIENT", "SETNAME", "sub"]);
    subscriber.expect(b"+OK\r\n");
    subscriber.command(&["SUBSCRIBE", "ch"]);
    let message = "m".repeat(64 * 1024);
    let field = |list: &str, name: &str, key: &str| -> u64 {
        line_of(list, name)
            .split(' ')
            .find_map(|f| f.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} for {name} in {list}"))
    };
    let mut list = String::new();
    wait_until("messages queue for the subscriber", || {
        for _ in 0..16 {
            run::<i64>(&mut con, &["PUBLISH", "ch", &message]);
        }
        list = run(&mut con, &["CLIENT", "LIST"]);
        field(&list, "sub", "oll") > 0
    });
    assert!(
        field(&list, "sub", "omem") >= field(&list, "sub", "oll") * 64 * 1024,
        "{list}"
    );
    assert!(line_of(&list, "sub").contains(" events=rw "), "{list}");
    assert!(
        field(&list, "sub", "tot-mem") >= field(&list, "sub", "omem"),
        "{list}"
    );
    assert_eq!(field(&list, "partial", "qbuf"), 28, "{list}");
    // INFO's figure is the sum of every client's buffers.
    let buffers = info_field(&mut con, "clients", "client_buffers_bytes");
    assert!(
        buffers >= field(&list, "partial", "rbs") + field(&list, "sub", "rbs"),
        "{buffers} {list}"
    );
    assert!(line_of(&list, "partial").contains(" events=r "), "{list}");
    assert!(field(&list, "multi", "multi-mem") >= 106, "{list}");
    assert_eq!(field(&list, "multi", "argv-mem"), 0, "{list}");
    // The asking client shows the command it runs, and that command's arguments.
    let me: String = run(&mut con, &["CLIENT", "INFO"]);
    assert!(me.contains(" argv-mem=10 "), "{me}");
    assert!(me.contains(" redir=-1 "), "{me}");
    let fd: i64 = me
        .split(' ')
        .find_map(|f| f.strip_prefix("fd="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1);
    assert!(fd > 2, "{me}");
    // The rest of the request runs, and the buffer empties.
    partial.send(b"defghij\r\n");
    partial.expect(b"+OK\r\n");
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "abcdefghij");
    let list: String = run(&mut con, &["CLIENT", "LIST"]);
    assert_eq!(field(&list, "partial", "qbuf"), 0, "{list}");
}

#[test]
fn client_reply_off_and_skip_withhold_replies_as_in_redis() {
    let server = TestServer::start();
    let mut raw = server.raw();
    // OFF and SKIP go unanswered themselves, and so does everything until ON, errors and
    // pipelined writes included; SKIP does nothing while replies are off.
    raw.pipeline(&[
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "a", "1"],
        &["SET", "b", "2"],
        &["GET"],
        &["CLIENT", "REPLY", "SKIP"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["INCR", "a"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["MULTI"],
        &["SET", "c", "3"],
        &["EXEC"],
        &["CLIENT", "REPLY", "FOO"],
    ]);
    raw.expect(b"+OK\r\n$1\r\n1\r\n$1\r\n2\r\n+QUEUED\r\n*1\r\n+OK\r\n-ERR syntax error\r\n");
    let mut con = server.client();
    assert_eq!(run::<String>(&mut con, &["GET", "b"]), "2");
    assert_eq!(run::<String>(&mut con, &["GET", "c"]), "3");
    // A skipped blocking command's reply is withheld too, once it comes.
    raw.pipeline(&[
        &["CLIENT", "REPLY", "SKIP"],
        &["BLPOP", "nolist", "0.05"],
        &["GET", "a"],
    ]);
    raw.expect(b"$1\r\n2\r\n");
    // Pub/sub messages and subscription confirmations are sent whatever the mode, as Redis
    // sends them.
    raw.pipeline(&[&["HELLO", "3"], &["CLIENT", "REPLY", "OFF"]]);
    raw.skip_through(b"modules\r\n*0\r\n");
    raw.command(&["SUBSCRIBE", "ch"]);
    raw.expect(b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    assert_eq!(run::<i64>(&mut con, &["PUBLISH", "ch", "hi"]), 1);
    raw.expect(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
    raw.command(&["CLIENT", "REPLY", "ON"]);
    raw.expect(b"+OK\r\n");
}

/// The CLIENT LIST line of the client named `name`, or "".
fn line_of<'a>(list: &'a str, name: &str) -> &'a str {
    list.lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_default()
}

#[test]
fn monitor_shows_every_command_as_redis_prints_it() {
    let server = TestServer::start();
    // Connected first: the client's own handshake commands would show too.
    let mut con = server.client();
    let mut monitor = server.raw();
    monitor.command(&["MONITOR"]);
    monitor.expect(b"+OK\r\n");
    run::<()>(&mut con, &["SET", "k", "a\"b\n"]);
    run::<Vec<String>>(&mut con, &["CONFIG", "GET", "port"]);
    fails(&mut con, &["AUTH", "secret"]);
    fails(&mut con, &["GET"]);
    run::<String>(
        &mut con,
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"],
    );
    // A timestamp, the database and the client, then the arguments as Redis quotes them;
    // administrative commands, refused ones and passwords are not shown.
    let mut next = || {
        let line = monitor.read_line();
        let (stamp, rest) = line.split_once(' ').expect("timestamp");
        let (secs, micros) = stamp[1..].split_once('.').expect("seconds.micros");
        assert!(stamp.starts_with('+') && secs.parse::<u64>().is_ok() && micros.len() == 6);
        rest.to_string()
    };
    let origin = |line: &str| line.split_once("] ").map(|(o, _)| o.to_string());
    let set = next();
    assert!(set.starts_with("[0 127.0.0.1:"), "{set}");
    assert!(set.ends_with(r#"] "SET" "k" "a\"b\n""#), "{set}");
    let auth = next();
    assert!(auth.ends_with(r#"] "AUTH" "(redacted)""#), "{auth}");
    assert_eq!(origin(&auth), origin(&set));
    let eval = next();
    assert!(
        eval.ends_with(r#"] "EVAL" "return redis.call('GET', KEYS[1])" "1" "k""#),
        "{eval}"
    );
    assert_eq!(next(), r#"[0 lua] "GET" "k""#);
    let list: String = run(&mut con, &["CLIENT", "LIST"]);
    assert!(list.contains(" flags=O "), "{list}");

    monitor.command(&["RESET"]);
    monitor.expect(b"+RESET\r\n");
    run::<()>(&mut con, &["SET", "k", "v"]);
    monitor.command(&["PING"]);
    monitor.expect(b"+PONG\r\n");
}

#[test]
fn command_introspection() {
    let server = TestServer::start();
    let mut con = server.client();
    let count: i64 = run(&mut con, &["COMMAND", "COUNT"]);
    assert!(count > 50);
    let all: Vec<Value> = run(&mut con, &["COMMAND"]);
    assert_eq!(all.len() as i64, count);
    let info: Vec<Value> = run(&mut con, &["COMMAND", "INFO", "get", "nosuch"]);
    let Value::Array(get) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(get[0], Value::BulkString(b"get".to_vec()));
    assert_eq!(get[1], Value::Int(2));
    assert_eq!(get[3], Value::Int(1));
    assert_eq!(info[1], Value::Nil);
    let names: Vec<String> = run(
        &mut con,
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "get*"],
    );
    assert!(names.contains(&"getrange".to_string()) && names.contains(&"get".to_string()));
    assert!(!names.contains(&"set".to_string()));
    let docs: Value = run(&mut con, &["COMMAND", "DOCS", "set"]);
    assert!(format!("{docs:?}").contains("summary"));
}

#[test]
fn subcommands_are_commands_of_their_own() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["CONFIG", "GET", "maxmemory"]);
    run::<()>(&mut con, &["Config", "get", "port"]);
    assert_eq!(
        fails(&mut con, &["CONFIG", "GET"]),
        "ERR wrong number of arguments for 'config|get' command"
    );
    assert_eq!(
        fails(&mut con, &["config", "nosuch"]),
        "ERR unknown subcommand 'nosuch'. Try CONFIG HELP."
    );
    run::<()>(&mut con, &["CLIENT", "ID"]);
    // As in Redis: calls, refusals and errors are booked under `container|sub`, and an
    // unknown subcommand only as an error.
    let stats: String = run(&mut con, &["INFO", "commandstats"]);
    assert!(
        command_stats(&stats, "config|get").starts_with("cmdstat_config|get:calls=2,"),
        "{stats}"
    );
    assert!(
        command_stats(&stats, "config|get").ends_with(",rejected_calls=1,failed_calls=0"),
        "{stats}"
    );
    assert!(command_stats(&stats, "client|id").starts_with("cmdstat_client|id:calls=1,"));
    assert_eq!(command_stats(&stats, "config"), "", "{stats}");
    let errors: String = run(&mut con, &["INFO", "errorstats"]);
    assert!(errors.contains("errorstat_ERR:count=2"), "{errors}");
    run::<String>(&mut con, &["CLIENT", "LIST"]);
    let list: String = run(&mut con, &["CLIENT", "LIST"]);
    assert!(list.contains("cmd=client|list "), "{list}");

    let names: Vec<String> = run(&mut con, &["COMMAND", "LIST"]);
    assert!(names.contains(&"config|get".to_string()) && names.contains(&"config".to_string()));
    let count: usize = run(&mut con, &["COMMAND", "COUNT"]);
    assert!(names.len() > count, "COUNT leaves subcommands out");
    let info: Vec<Value> = run(&mut con, &["COMMAND", "INFO", "memory", "memory|usage"]);
    let Value::Array(container) = &info[0] else {
        panic!("{info:?}")
    };
    let Value::Array(subcommands) = &container[9] else {
        panic!("{container:?}")
    };
    assert!(format!("{subcommands:?}").contains("memory|usage"));
    let Value::Array(usage) = &info[1] else {
        panic!("{info:?}")
    };
    assert_eq!(
        usage[1..6],
        [
            Value::Int(-3),
            usage[2].clone(),
            Value::Int(2),
            Value::Int(2),
            Value::Int(1)
        ]
    );
    let docs: Value = run(&mut con, &["COMMAND", "DOCS", "config"]);
    assert!(format!("{docs:?}").contains("config|set"), "{docs:?}");
}

#[test]
fn command_getkeys() {
    let server = TestServer::start();
    let mut con = server.client();
    let keys: Vec<String> = run(
        &mut con,
        &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
    );
    assert_eq!(keys, ["a", "b"]);
    let keys: Vec<String> = run(&mut con, &["COMMAND", "GETKEYS", "memory", "usage", "k"]);
    assert_eq!(keys, ["k"]);
    let keys: Vec<String> = run(
        &mut con,
        &[
            "COMMAND", "GETKEYS", "EVAL", "return 1", "2", "x", "y", "arg",
        ],
    );
    assert_eq!(keys, ["x", "y"]);
    assert_eq!(
        fails(&mut con, &["COMMAND", "GETKEYS", "nosuch", "a"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        fails(&mut con, &["COMMAND", "GETKEYS", "get", "a", "b"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        fails(&mut con, &["COMMAND", "GETKEYS", "echo", "a"]),
        "ERR The command has no key arguments"
    );
}

#[test]
fn slowlog() {
    let server = TestServer::start_with(&["--slowlog-log-slower-than", "0"]);
    let mut con = server.client();
    run::<()>(&mut con, &["SLOWLOG", "RESET"]);
    run::<()>(&mut con, &["SET", "k", "v"]);
    let len: i64 = run(&mut con, &["SLOWLOG", "LEN"]);
    assert!(len >= 1);
    let entries: Vec<Value> = run(&mut con, &["SLOWLOG", "GET", "1"]);
    assert_eq!(entries.len(), 1);
    let Value::Array(entry) = &entries[0] else {
        panic!()
    };
    assert_eq!(entry.len(), 6);
    assert_eq!(
        entry[3],
        Value::Array(vec![
            Value::BulkString(b"SLOWLOG".to_vec()),
            Value::BulkString(b"LEN".to_vec())
        ])
    );
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    );
    run::<()>(&mut con, &["SLOWLOG", "RESET"]);
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(&mut con, &["SLOWLOG", "LEN"]), 0);
}

#[test]
fn wait_and_role_report_no_replicas() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut raw = server.raw();
    raw.command(&["ROLE"]);
    raw.expect(b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<i64>(&mut con, &["WAIT", "1", "100"]), 0);
    assert_eq!(
        fails(&mut con, &["WAIT", "1", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        fails(&mut con, &["WAIT", "x", "0"]),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn maxclients_rejects_extra_connections() {
    let server = TestServer::start_with(&["--maxclients", "2"]);
    let _a = server.client();
    let _b = server.client();
    let mut raw = server.raw();
    raw.expect(b"-ERR max number of clients reached\r\n");
}

#[test]
fn shutdown_command_stops_the_server() {
    let mut server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert!(
        redis::cmd("SHUTDOWN").query::<Value>(&mut con).is_err(),
        "no reply, connection closed"
    );
    let status = server.wait_exit();
    assert!(status.success(), "{status:?}");
    server.start_again();
    let mut con = server.client();
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v");
}

#[test]
fn statistics_of_pipelined_commands_are_there_for_the_next_command() {
    let server = TestServer::start();
    let mut con = server.client();
    let (first, second): (String, String) = redis::pipe()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .ignore()
        .cmd("GET")
        .arg("k")
        .ignore()
        .cmd("GET")
        .arg("k")
        .ignore()
        .cmd("GET")
        .arg("nosuch")
        .ignore()
        .cmd("INFO")
        .arg("commandstats")
        .cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .expect("pipeline");
    assert!(first.contains("cmdstat_get:calls=3,"), "{first}");
    assert!(first.contains("cmdstat_set:calls=1,"), "{first}");
    assert!(!first.contains("cmdstat_info:"), "{first}");
    assert!(second.contains("cmdstat_info:calls=1,"), "{second}");
    let mut other = server.client();
    let seen: String = run(&mut other, &["INFO", "commandstats"]);
    assert!(seen.contains("cmdstat_get:calls=3,"), "{seen}");
    assert!(seen.contains("cmdstat_info:calls=2,"), "{seen}");
}

#[test]
fn metadata_cache_answers_repeated_reads_and_follows_every_write() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "v1"]);
    for _ in 0..3 {
        assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v1");
    }
    assert!(info_field(&mut con, "rocksdb", "meta_cache_hits") >= 2);
    assert!(info_field(&mut con, "memory", "meta_cache_used") > 0);
    run::<()>(&mut con, &["SET", "k", "v2"]);
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v2");
    run::<()>(&mut con, &["APPEND", "k", "!"]);
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v2!");
    run::<()>(&mut con, &["DEL", "k"]);
    assert_eq!(run::<Option<String>>(&mut con, &["GET", "k"]), None);
    run::<()>(&mut con, &["RPUSH", "k", "a"]);
    assert_eq!(run::<String>(&mut con, &["TYPE", "k"]), "list");
    run::<()>(&mut con, &["FLUSHALL"]);
    assert_eq!(run::<i64>(&mut con, &["EXISTS", "k"]), 0);
    assert_eq!(info_field(&mut con, "memory", "meta_cache_used"), 0);
}

#[test]
fn reads_never_go_back_in_time_while_a_key_is_written() {
    let server = TestServer::start();
    let writes = 3000;
    let writer_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let mut con = server.client();
        std::thread::spawn(move || {
            for _ in 0..writes {
                run::<i64>(&mut con, &["INCR", "n"]);
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let mut con = server.client();
            let writer_done = writer_done.clone();
            std::thread::spawn(move || {
                let mut last = 0;
                while last < writes && !writer_done.load(std::sync::atomic::Ordering::Relaxed) {
                    let seen = run::<Option<i64>>(&mut con, &["GET", "n"]).unwrap_or(0);
                    assert!(seen >= last, "read {seen} after {last}");
                    last = seen;
                }
            })
        })
        .collect();
    let written = writer.join();
    writer_done.store(true, std::sync::atomic::Ordering::Relaxed);
    written.expect("writer");
    for reader in readers {
        reader.join().expect("reader");
    }
    let mut con = server.client();
    assert_eq!(run::<i64>(&mut con, &["GET", "n"]), writes);
}

#[test]
fn record_caches_can_be_turned_off() {
    let server = TestServer::start_with(&[
        "--rocksdb.meta-cache-size",
        "0",
        "--rocksdb.data-cache-size",
        "0",
    ]);
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "k", "v"]);
    run::<i64>(&mut con, &["SETBIT", "bits", "100000", "1"]);
    for _ in 0..2 {
        assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v");
        assert_eq!(run::<i64>(&mut con, &["GETBIT", "bits", "100000"]), 1);
    }
    assert_eq!(info_field(&mut con, "memory", "meta_cache_capacity"), 0);
    assert_eq!(info_field(&mut con, "rocksdb", "meta_cache_hits"), 0);
    assert_eq!(info_field(&mut con, "memory", "data_cache_capacity"), 0);
    assert_eq!(info_field(&mut con, "rocksdb", "data_cache_hits"), 0);
}

#[test]
fn data_cache_answers_repeated_reads_of_fragments_and_follows_their_patches() {
    let server = TestServer::start();
    let mut con = server.client();
    // Bit 100,000 lies in the fourth 4 KB fragment of the bitmap.
    run::<i64>(&mut con, &["SETBIT", "bits", "100000", "1"]);
    for _ in 0..3 {
        assert_eq!(run::<i64>(&mut con, &["GETBIT", "bits", "100000"]), 1);
    }
    assert!(info_field(&mut con, "rocksdb", "data_cache_hits") >= 2);
    assert!(info_field(&mut con, "memory", "data_cache_used") > 0);
    // A SETBIT patches the cached fragment; a read of it sees both bits.
    run::<i64>(&mut con, &["SETBIT", "bits", "100001", "1"]);
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "bits", "100001"]), 1);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "bits"]), 2);
    run::<i64>(&mut con, &["SETBIT", "bits", "100000", "0"]);
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "bits", "100000"]), 0);
    run::<()>(&mut con, &["DEL", "bits"]);
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "bits", "100001"]), 0);
    run::<i64>(&mut con, &["SETBIT", "bits", "100002", "1"]);
    assert_eq!(run::<i64>(&mut con, &["BITCOUNT", "bits"]), 1);
    assert_eq!(run::<i64>(&mut con, &["GETBIT", "bits", "100001"]), 0);
}

#[test]
fn error_replies_are_counted_once_under_their_code() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "s", "v"]);
    fails(&mut con, &["LPUSH", "s", "x"]);
    fails(&mut con, &["SET", "s", "v", "NX", "XX"]);
    // Inside EXEC and inside scripts, each error a command gives counts once, whether the
    // script returns it, raises it or swallows it.
    let mut exec = redis::pipe();
    exec.atomic().cmd("LPUSH").arg("s").arg("x");
    let _: redis::RedisResult<Value> = exec.query(&mut con);
    for script in [
        "return redis.call('LPUSH', 's', 'x')",
        "return redis.pcall('LPUSH', 's', 'x')",
        "redis.pcall('LPUSH', 's', 'x') return 1",
        "return redis.error_reply('MYCODE made up')",
        // Refused before it runs: a rejected GET, and one error.
        "return redis.pcall('GET')",
        // Never reaches a command: one error, when EVAL answers.
        "return redis.call()",
    ] {
        let _: redis::RedisResult<Value> = redis::cmd("EVAL").arg(script).arg(0).query(&mut con);
    }
    let info: String = run(&mut con, &["INFO"]);
    let errors: Vec<&str> = info
        .lines()
        .filter(|line| line.starts_with("errorstat_"))
        .collect();
    assert_eq!(
        errors,
        [
            "errorstat_ERR:count=3",
            "errorstat_MYCODE:count=1",
            "errorstat_WRONGTYPE:count=5"
        ],
        "{info}"
    );
    assert_eq!(info_field(&mut con, "stats", "total_error_replies"), 9);
    // Commands run by EXEC and by scripts are booked as calls of their own.
    let commands: String = run(&mut con, &["INFO", "commandstats"]);
    let lpush = command_stats(&commands, "lpush");
    assert!(lpush.starts_with("cmdstat_lpush:calls=5,"), "{commands}");
    assert!(
        lpush.ends_with(",rejected_calls=0,failed_calls=5"),
        "{commands}"
    );
    assert!(
        commands.contains("cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,"),
        "{commands}"
    );
    run::<()>(&mut con, &["CONFIG", "RESETSTAT"]);
    let errorstats: String = run(&mut con, &["INFO", "errorstats"]);
    assert_eq!(errorstats.trim_end(), "# Errorstats");
}

#[test]
fn a_blocked_command_that_ends_in_an_error_counts_as_failed() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut blocked = server.client();
    let id: i64 = run(&mut blocked, &["CLIENT", "ID"]);
    let waiter = std::thread::spawn(move || fails(&mut blocked, &["BLPOP", "queue", "0"]));
    wait_for_blocked(&mut con, 1);
    run::<i64>(&mut con, &["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]);
    assert_eq!(
        waiter.join().unwrap(),
        "UNBLOCKED client unblocked via CLIENT UNBLOCK"
    );
    let errors: String = run(&mut con, &["INFO", "errorstats"]);
    assert!(
        errors.contains("errorstat_UNBLOCKED:count=1\r\n"),
        "{errors}"
    );
    let commands: String = run(&mut con, &["INFO", "commandstats"]);
    let blpop = command_stats(&commands, "blpop");
    assert!(blpop.starts_with("cmdstat_blpop:calls=1,"), "{commands}");
    assert!(
        blpop.ends_with(",rejected_calls=0,failed_calls=1"),
        "{commands}"
    );
}

#[test]
fn memory_usage_reports_the_bytes_a_key_takes_in_storage() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        run::<Option<i64>>(&mut con, &["MEMORY", "USAGE", "nokey"]),
        None
    );
    run::<()>(&mut con, &["SET", "s1", "hello"]);
    run::<()>(&mut con, &["SET", "s2", &"x".repeat(1000)]);
    let small: i64 = run(&mut con, &["MEMORY", "USAGE", "s1"]);
    let larger: i64 = run(&mut con, &["MEMORY", "USAGE", "s2"]);
    assert!(small > 5 && small < 64, "{small}");
    assert_eq!(larger - small, 995, "only the value differs");

    // Elements of one size: the sample of 5 predicts the whole list exactly.
    let element = "e".repeat(20);
    let mut push = redis::cmd("RPUSH");
    push.arg("list");
    for _ in 0..100 {
        push.arg(&element);
    }
    push.query::<()>(&mut con).unwrap();
    let sampled: i64 = run(&mut con, &["MEMORY", "USAGE", "list"]);
    let all: i64 = run(&mut con, &["MEMORY", "USAGE", "list", "SAMPLES", "0"]);
    assert_eq!(sampled, all);
    assert!(all > 100 * 20, "{all}");
    // A sorted-set member has a second record in the score index.
    run::<()>(&mut con, &["SADD", "set", "m1", "m2"]);
    run::<()>(&mut con, &["ZADD", "zset", "1", "m1", "2", "m2"]);
    let set: i64 = run(&mut con, &["MEMORY", "USAGE", "set"]);
    let zset: i64 = run(&mut con, &["MEMORY", "USAGE", "zset"]);
    assert!(zset > set, "{zset} {set}");

    assert_eq!(
        fails(&mut con, &["MEMORY", "USAGE", "list", "SAMPLES", "-1"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["MEMORY", "USAGE", "list", "SAMPLES"]),
        "ERR syntax error"
    );
    assert_eq!(
        fails(&mut con, &["MEMORY", "USAGE"]),
        "ERR wrong number of arguments for 'memory|usage' command"
    );
    assert_eq!(
        fails(&mut con, &["MEMORY", "DOCTOR"]),
        "ERR unknown subcommand 'DOCTOR'. Try MEMORY HELP."
    );
}

#[test]
fn latency_monitor_threshold_is_accepted_for_scripts_that_set_it() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "latency-monitor-threshold", "100"],
    );
    let got: Vec<String> = run(&mut con, &["CONFIG", "GET", "latency-monitor-threshold"]);
    assert_eq!(got, ["latency-monitor-threshold", "100"]);
    assert!(fails(
        &mut con,
        &["CONFIG", "SET", "latency-monitor-threshold", "soon"]
    )
    .starts_with("ERR CONFIG SET failed"));
}

/// `keyspace_hits` and `keyspace_misses` move as Redis's do: every lookup of a command that
/// reads counts, a write's own lookup does not (Redis's `lookupKeyRead` against
/// `lookupKeyWrite`), and neither does MEMORY USAGE.
#[test]
fn keyspace_hits_and_misses_count_what_redis_counts() {
    let redis = common::RedisServer::start(&[]);
    let server = TestServer::start();
    let (mut theirs, mut ours) = (redis.client(), server.client());
    let setup = [
        "SET s value",
        "SET n 5",
        "HSET h f v",
        "RPUSH l a b",
        "SADD st m",
        "ZADD z 1 m",
        "XADD x 1-1 f v",
        "SET w_a 1",
        "XGROUP CREATE x g 0",
    ];
    let commands = [
        "GET s",
        "GET missing",
        "GET h",
        "MGET s missing h",
        "STRLEN s",
        "GETRANGE s 0 1",
        "EXISTS s missing",
        "TYPE s",
        "TYPE missing",
        "TTL s",
        "PTTL missing",
        "DUMP s",
        "OBJECT ENCODING s",
        "MEMORY USAGE s",
        "HGET h f",
        "HGET missing f",
        "HGETALL h",
        "HEXISTS h f",
        "HMGET h f g",
        "HLEN h",
        "LRANGE l 0 -1",
        "LINDEX l 0",
        "LLEN missing",
        "SMEMBERS st",
        "SISMEMBER st m",
        "SUNION st missing",
        "ZSCORE z m",
        "ZRANGE z 0 -1",
        "ZCARD missing",
        "GETBIT s 0",
        "BITCOUNT s",
        "SUNIONSTORE dest st missing",
        "SINTERSTORE sd st missing",
        "ZUNIONSTORE zd 2 z missing",
        "ZRANGESTORE zd2 z 0 -1",
        "BITOP OR bd s missing",
        "PFADD hl a",
        "PFCOUNT hl",
        "PFCOUNT h",
        "PFMERGE hl2 hl missing",
        "GEOADD g 1 1 m",
        "GEOSEARCHSTORE gd g FROMMEMBER m BYRADIUS 1 km",
        "GEOPOS g m",
        "GEOSEARCH g FROMMEMBER m BYRADIUS 1 km",
        "GEORADIUS g 1 1 1 km",
        "LPOS l a",
        "SRANDMEMBER st",
        "HRANDFIELD h",
        "ZRANDMEMBER z",
        "SMISMEMBER st m x",
        "XRANGE missing - +",
        "XRANGE x - +",
        "XREVRANGE x + -",
        "XLEN x",
        "XPENDING x g",
        "XPENDING x g - + 10",
        "XINFO STREAM x",
        "XREAD STREAMS x 0",
        "XREAD STREAMS x $",
        "XREADGROUP GROUP g c STREAMS x >",
        "TOUCH s missing",
        "UNLINK missing",
        "RANDOMKEY",
        "SORT l ALPHA",
        "SORT l ALPHA GET w_*",
        "LRANGE big 0 -1",
        "LINDEX big 5",
        "LMOVE l l2 LEFT LEFT",
        "COPY s s3",
        "RENAME s3 s4",
        "XLEN missing",
        "EVAL return(redis.call('get','s')) 0",
        "GETDEL n",
        "GETEX s",
        "GETSET s other",
        "SET s value GET",
        "SET s value",
        "INCR n",
        "HSET h g w",
        "RPUSH l c",
        "SADD st x",
        "DEL missing",
        "EXPIRE s 100",
        "APPEND s x",
    ];
    let counters = |con: &mut redis::Connection| {
        (
            info_field(con, "stats", "keyspace_hits"),
            info_field(con, "stats", "keyspace_misses"),
        )
    };
    // A list too long to be packed into its metadata, read in chunks.
    let long = format!("RPUSH big{}", format!(" {}", "x".repeat(100)).repeat(300));
    for line in setup.iter().copied().chain([long.as_str()]) {
        let args: Vec<&str> = line.split(' ').collect();
        run::<redis::Value>(&mut theirs, &args);
        run::<redis::Value>(&mut ours, &args);
    }
    let mut differences = Vec::new();
    for line in commands {
        let args: Vec<&str> = line.split(' ').collect();
        let moved = |con: &mut redis::Connection| {
            let (hits, misses) = counters(con);
            let _ = redis::cmd(args[0])
                .arg(&args[1..])
                .query::<redis::Value>(con);
            let (hits_after, misses_after) = counters(con);
            (hits_after - hits, misses_after - misses)
        };
        let (expected, got) = (moved(&mut theirs), moved(&mut ours));
        if expected != got {
            differences.push(format!("{line}: Redis {expected:?}, Shale {got:?}"));
        }
    }
    assert!(differences.is_empty(), "{differences:#?}");
}
