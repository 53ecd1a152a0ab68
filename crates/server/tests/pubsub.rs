//! Publish/subscribe against a real server, on the wire.

mod common;

use std::time::Duration;

use common::{run, TestServer};

#[test]
fn channels_and_patterns() {
    let server = TestServer::start();
    let mut publisher = server.client();
    let mut sub = server.raw();
    sub.send(b"SUBSCRIBE news sport\r\n");
    sub.expect(b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$5\r\nsport\r\n:2\r\n");
    sub.send(b"PSUBSCRIBE n*\r\n");
    sub.expect(b"*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:3\r\n");
    assert_eq!(
        run::<i64>(&mut publisher, &["PUBLISH", "news", "hello"]),
        2,
        "channel and pattern"
    );
    sub.expect(b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    sub.expect(b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    assert_eq!(
        run::<i64>(&mut publisher, &["PUBLISH", "weather", "rain"]),
        0
    );
    assert_eq!(
        run::<Vec<String>>(&mut publisher, &["PUBSUB", "CHANNELS"]),
        ["news", "sport"]
    );
    assert_eq!(
        run::<Vec<String>>(&mut publisher, &["PUBSUB", "CHANNELS", "s*"]),
        ["sport"]
    );
    assert_eq!(
        run::<(String, i64, String, i64)>(&mut publisher, &["PUBSUB", "NUMSUB", "news", "none"]),
        ("news".into(), 1, "none".into(), 0)
    );
    assert_eq!(run::<i64>(&mut publisher, &["PUBSUB", "NUMPAT"]), 1);
    let stats: String = run(&mut publisher, &["INFO", "stats"]);
    assert!(
        stats.contains("pubsub_channels:2\r\npubsub_patterns:1\r\n"),
        "{stats}"
    );

    sub.send(b"GET k\r\n");
    sub.expect(b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n");
    sub.send(b"PING\r\n");
    sub.expect(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    sub.send(b"UNSUBSCRIBE\r\n");
    sub.expect(b"*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:2\r\n*3\r\n$11\r\nunsubscribe\r\n$5\r\nsport\r\n:1\r\n");
    sub.send(b"PUNSUBSCRIBE\r\n");
    sub.expect(b"*3\r\n$12\r\npunsubscribe\r\n$2\r\nn*\r\n:0\r\n");
    sub.send(b"UNSUBSCRIBE\r\n");
    sub.expect(b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    sub.send(b"SET k v\r\n");
    sub.expect(b"+OK\r\n");
    assert_eq!(run::<i64>(&mut publisher, &["PUBSUB", "NUMPAT"]), 0);
}

#[test]
fn resp3_pushes_and_shard_channels() {
    let server = TestServer::start();
    let mut publisher = server.client();
    let mut sub = server.raw();
    sub.send(b"HELLO 3\r\nPING\r\n");
    sub.skip_through(b"+PONG\r\n");
    sub.send(b"SSUBSCRIBE orders\r\n");
    sub.expect(b">3\r\n$10\r\nssubscribe\r\n$6\r\norders\r\n:1\r\n");
    assert_eq!(run::<i64>(&mut publisher, &["SPUBLISH", "orders", "42"]), 1);
    assert_eq!(
        run::<i64>(&mut publisher, &["PUBLISH", "orders", "42"]),
        0,
        "shard channels are their own namespace"
    );
    sub.expect(b">3\r\n$8\r\nsmessage\r\n$6\r\norders\r\n$2\r\n42\r\n");
    sub.send(b"GET nothing\r\n");
    sub.expect(b"_\r\n");
    // A script's commands run for its own client, which subscribes to nothing.
    sub.command(&["EVAL", "return redis.call('SET', 'x', '1')", "0"]);
    sub.expect(b"+OK\r\n");
    assert_eq!(
        run::<Vec<String>>(&mut publisher, &["PUBSUB", "SHARDCHANNELS"]),
        ["orders"]
    );
}

#[test]
fn disconnect_and_reset_drop_subscriptions() {
    let server = TestServer::start();
    let mut publisher = server.client();
    {
        let mut sub = server.raw();
        sub.send(b"SUBSCRIBE gone\r\n");
        sub.skip_through(b"$4\r\ngone\r\n:1\r\n");
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(run::<i64>(&mut publisher, &["PUBLISH", "gone", "x"]), 0);
    let mut sub = server.raw();
    sub.send(b"PSUBSCRIBE *\r\n");
    sub.skip_through(b"$1\r\n*\r\n:1\r\n");
    sub.send(b"RESET\r\n");
    sub.expect(b"+RESET\r\n");
    assert_eq!(run::<i64>(&mut publisher, &["PUBLISH", "any", "x"]), 0);
}

/// Publishes 64 KB messages to `channel` until no subscriber receives them (at most 4,096).
/// Returns how many were received.
fn publish_until_nobody_listens(con: &mut redis::Connection, channel: &str) -> usize {
    let message = "m".repeat(64 * 1024);
    for sent in 0..4096 {
        if run::<i64>(con, &["PUBLISH", channel, &message]) == 0 {
            return sent;
        }
    }
    panic!("the subscriber was never disconnected");
}

#[test]
fn subscriber_over_its_output_limit_is_disconnected() {
    let server = TestServer::start();
    let mut con = server.client();
    let limits: Vec<String> = run(&mut con, &["CONFIG", "GET", "client-output-buffer-limit"]);
    assert_eq!(
        limits[1],
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    run::<()>(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 2mb 0 0",
        ],
    );
    let limits: Vec<String> = run(&mut con, &["CONFIG", "GET", "client-output-buffer-limit"]);
    assert_eq!(
        limits[1],
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 2097152 0 0"
    );
    // A subscriber that never reads: the socket's buffers fill, then 2 MB of messages wait.
    let mut subscriber = server.raw();
    subscriber.command(&["SUBSCRIBE", "ch"]);
    subscriber.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    let received = publish_until_nobody_listens(&mut con, "ch");
    // Without the limit it would take 16,384 messages (1 GB) to be disconnected.
    assert!(received < 2048, "{received} messages before the disconnect");
    let mut rest = Vec::new();
    assert!(
        std::io::Read::read_to_end(&mut subscriber.stream, &mut rest).is_ok(),
        "the subscriber's connection stays open"
    );
    // The soft limit: over it for longer than its seconds.
    run::<()>(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 0 256kb 1",
        ],
    );
    let mut subscriber = server.raw();
    subscriber.command(&["SUBSCRIBE", "ch"]);
    subscriber.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    let message = "m".repeat(64 * 1024);
    common::wait_until("more than the soft limit waits for the subscriber", || {
        run::<i64>(&mut con, &["PUBLISH", "ch", &message]);
        let list: String = run(&mut con, &["CLIENT", "LIST", "TYPE", "pubsub"]);
        let waiting: u64 = list
            .split(' ')
            .find_map(|f| f.strip_prefix("omem="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        waiting > 256 * 1024
    });
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(run::<i64>(&mut con, &["PUBLISH", "ch", &message]), 0);
    assert_eq!(publish_until_nobody_listens(&mut con, "ch"), 0);
    // Errors, as Redis words them; nothing changes.
    for (value, reason) in [
        (
            "pubsub 1 2",
            "Wrong number of arguments in buffer limit configuration.",
        ),
        (
            "master 0 0 0",
            "Invalid client class specified in buffer limit configuration.",
        ),
        (
            "normal 1mb 0 0 pubsub x 0 0",
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
        ),
    ] {
        let err = common::fails(
            &mut con,
            &["CONFIG", "SET", "client-output-buffer-limit", value],
        );
        assert_eq!(
            err,
            format!(
                "ERR CONFIG SET failed (possibly related to argument \
                 'client-output-buffer-limit') - {reason}"
            )
        );
    }
    let limits: Vec<String> = run(&mut con, &["CONFIG", "GET", "client-output-buffer-limit"]);
    assert_eq!(
        limits[1],
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 0 262144 1"
    );
}

#[test]
fn a_message_published_before_a_subscribers_request_comes_before_its_reply() {
    let server = TestServer::start();
    let mut publisher = server.client();
    let mut subscriber = server.raw();
    subscriber.command(&["SUBSCRIBE", "ch"]);
    subscriber.expect(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    for i in 0..200 {
        let payload = format!("m{i:03}");
        let receivers: i64 = run(&mut publisher, &["PUBLISH", "ch", &payload]);
        assert_eq!(receivers, 1);
        subscriber.command(&["PING"]);
        let message = format!("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\n{payload}\r\n");
        subscriber.expect(message.as_bytes());
        subscriber.expect(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }
}

#[test]
fn unsubscribing_from_everything_without_arguments() {
    let server = TestServer::start();
    let mut publisher = server.client();
    for resp3 in [false, true] {
        let mut sub = server.raw();
        let (push, null) = if resp3 {
            sub.send(b"HELLO 3\r\nPING\r\n");
            sub.skip_through(b"+PONG\r\n");
            (">", "_")
        } else {
            ("*", "$-1")
        };
        let confirm = |word: &str, name: Option<&str>, count: i64| {
            let name = name.map_or(format!("{null}\r\n"), |n| {
                format!("${}\r\n{n}\r\n", n.len())
            });
            format!("{push}3\r\n${}\r\n{word}\r\n{name}:{count}\r\n", word.len())
        };
        sub.send(b"PSUBSCRIBE b* a* c*\r\nSUBSCRIBE news\r\nSSUBSCRIBE orders\r\n");
        sub.skip_through(confirm("ssubscribe", Some("orders"), 1).as_bytes());
        // Patterns in the order they were subscribed, as Redis keeps them.
        sub.send(b"PUNSUBSCRIBE\r\n");
        let expected = [("b*", 3), ("a*", 2), ("c*", 1)]
            .map(|(pattern, count)| confirm("punsubscribe", Some(pattern), count))
            .concat();
        sub.expect(expected.as_bytes());
        assert_eq!(run::<i64>(&mut publisher, &["PUBSUB", "NUMPAT"]), 0);
        assert_eq!(run::<i64>(&mut publisher, &["PUBLISH", "abc", "m"]), 0);
        assert_eq!(run::<i64>(&mut publisher, &["PUBLISH", "news", "m"]), 1);
        let message = if resp3 { ">3\r\n" } else { "*3\r\n" };
        sub.expect(format!("{message}$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\nm\r\n").as_bytes());
        sub.send(b"PUNSUBSCRIBE\r\n");
        sub.expect(confirm("punsubscribe", None, 1).as_bytes());

        sub.send(b"UNSUBSCRIBE\r\n");
        sub.expect(confirm("unsubscribe", Some("news"), 0).as_bytes());
        assert_eq!(run::<i64>(&mut publisher, &["PUBLISH", "news", "m"]), 0);
        sub.send(b"UNSUBSCRIBE\r\n");
        sub.expect(confirm("unsubscribe", None, 0).as_bytes());

        // Shard channels count on their own.
        sub.send(b"SUNSUBSCRIBE\r\n");
        sub.expect(confirm("sunsubscribe", Some("orders"), 0).as_bytes());
        assert_eq!(run::<i64>(&mut publisher, &["SPUBLISH", "orders", "m"]), 0);
        sub.send(b"SUNSUBSCRIBE\r\n");
        sub.expect(confirm("sunsubscribe", None, 0).as_bytes());
        // No longer in subscribed mode.
        sub.send(b"SET k v\r\n");
        sub.expect(b"+OK\r\n");
    }
}
