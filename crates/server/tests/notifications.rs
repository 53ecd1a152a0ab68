//! Keyspace notifications (`notify-keyspace-events`) against a real server.

mod common;

use std::time::Duration;

use common::{collect_messages, fails, run, TestServer};

#[test]
fn events_name_the_command_and_the_key() {
    let server = TestServer::start();
    let mut con = server.client();
    assert_eq!(
        fails(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "KQ"]),
        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
    );
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    );
    let got: Vec<String> = run(&mut con, &["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(got, ["notify-keyspace-events", "AKE"]);

    let mut listener = server.client();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();

    run::<()>(&mut con, &["SET", "k", "v", "EX", "100"]);
    run::<()>(&mut con, &["RPUSH", "l", "a"]);
    run::<String>(&mut con, &["LPOP", "l"]);
    run::<()>(&mut con, &["HSET", "h", "f", "v"]);
    run::<()>(&mut con, &["SADD", "s", "m"]);
    run::<()>(&mut con, &["ZADD", "z", "1", "m"]);
    run::<()>(&mut con, &["RENAME", "k", "k2"]);
    run::<()>(&mut con, &["DEL", "k2", "missing"]);
    run::<i64>(&mut con, &["INCR", "n"]);
    let expected = [
        ("set", "k"),
        ("expire", "k"),
        ("rpush", "l"),
        ("lpop", "l"),
        ("del", "l"),
        ("hset", "h"),
        ("sadd", "s"),
        ("zadd", "z"),
        ("rename_from", "k"),
        ("rename_to", "k2"),
        ("del", "k2"),
        ("incrby", "n"),
    ];
    expect_keyevents(&mut pubsub, &expected);

    // Nothing is published for writes that change nothing.
    run::<i64>(&mut con, &["SREM", "s", "absent"]);
    run::<()>(&mut con, &["SET", "last", "x"]);
    assert_eq!(
        collect_messages(&mut pubsub, 1),
        [("__keyevent@0__:set".to_string(), "last".to_string())]
    );
}

#[test]
fn keyspace_channels_and_expired_events() {
    let server = TestServer::start_with(&["--notify-keyspace-events", "Kgx"]);
    let mut con = server.client();
    let mut listener = server.client();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:*").unwrap();
    run::<()>(&mut con, &["SET", "plain", "v"]);
    run::<()>(&mut con, &["SET", "short", "v", "PX", "50"]);
    let events = collect_messages(&mut pubsub, 2);
    assert_eq!(
        events,
        [
            ("__keyspace@0__:short".to_string(), "expire".to_string()),
            ("__keyspace@0__:short".to_string(), "expired".to_string()),
        ],
        "string events are off (no $), generic and expired are on"
    );
}

/// Reads `expected.len()` messages of `__keyevent@0__:*` and compares them, as (event, key).
fn expect_keyevents(pubsub: &mut redis::PubSub<'_>, expected: &[(&str, &str)]) {
    let events = collect_messages(pubsub, expected.len());
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(event, key)| (format!("__keyevent@0__:{event}"), key.to_string()))
        .collect();
    assert_eq!(events, expected);
}

/// A listener on every keyspace event of database 0.
fn listen(server: &TestServer) -> redis::Connection {
    let listener = server.client();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    listener
}

#[test]
fn every_class_redis_accepts_is_accepted_and_printed_as_redis_prints_it() {
    let server = TestServer::start();
    let mut con = server.client();
    for (set, get) in [
        ("$lshzxeKE", "$lshzxeKE"),
        ("KEA", "AKE"),
        ("En", "nE"),
        ("Kt", "tK"),
        ("AKEmn", "AKEm"),
        ("Km", "Km"),
        ("gd", "gd"),
        ("KEg$lshzxetd", "AKE"),
        ("", ""),
    ] {
        run::<()>(&mut con, &["CONFIG", "SET", "notify-keyspace-events", set]);
        let got: Vec<String> = run(&mut con, &["CONFIG", "GET", "notify-keyspace-events"]);
        assert_eq!(got[1], get, "{set}");
    }
}

#[test]
fn new_keys_and_key_misses_have_events() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "Enm$"],
    );
    let mut listener = listen(&server);
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    run::<()>(&mut con, &["SET", "k", "1"]);
    run::<()>(&mut con, &["SET", "k", "2"]);
    run::<Option<String>>(&mut con, &["GET", "nothing"]);
    run::<String>(&mut con, &["GET", "k"]);
    run::<i64>(&mut con, &["EXISTS", "absent"]);
    run::<Vec<Option<String>>>(&mut con, &["MGET", "k", "gone"]);
    run::<i64>(&mut con, &["SUNIONSTORE", "dst", "src"]);
    run::<()>(&mut con, &["RPUSH", "fresh", "a"]);
    let expected = [
        ("new", "k"),
        ("set", "k"),
        ("set", "k"),
        ("keymiss", "nothing"),
        ("keymiss", "absent"),
        ("keymiss", "gone"),
        ("keymiss", "src"),
        ("new", "fresh"),
    ];
    expect_keyevents(&mut pubsub, &expected);
}

#[test]
fn smove_announces_the_destination_only_when_it_gained_the_member() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    );
    run::<()>(&mut con, &["SADD", "src", "m", "n"]);
    run::<()>(&mut con, &["SADD", "dst", "m"]);
    let mut listener = listen(&server);
    let mut pubsub = listener.as_pubsub();
    pubsub.psubscribe("__keyevent@0__:*").unwrap();
    assert_eq!(run::<i64>(&mut con, &["SMOVE", "src", "dst", "m"]), 1);
    assert_eq!(run::<i64>(&mut con, &["SMOVE", "src", "dst", "n"]), 1);
    let expected = [
        ("srem", "src"),
        ("srem", "src"),
        ("del", "src"),
        ("sadd", "dst"),
    ];
    expect_keyevents(&mut pubsub, &expected);
}
