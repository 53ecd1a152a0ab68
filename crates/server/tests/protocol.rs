//! The wire protocol: raw bytes in, exact bytes out, and what Redis closes on.

mod common;

use common::{run, TestServer};

#[test]
fn pipelining_and_inline_commands() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let mut batch = Vec::new();
    for i in 0..1000 {
        batch.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n$4\r\nk{i:03}\r\n$1\r\nv\r\n").as_bytes(),
        );
    }
    raw.send(&batch);
    raw.expect(&b"+OK\r\n".repeat(1000));
    raw.send(b"PING\r\nSET \"a b\" 'c d'\r\nGET \"a b\"\n\r\n");
    raw.expect(b"+PONG\r\n+OK\r\n$3\r\nc d\r\n");
    // A request split across writes.
    raw.send(b"*2\r\n$3\r\nG");
    std::thread::sleep(std::time::Duration::from_millis(20));
    raw.send(b"ET\r\n$4\r\nk001\r\n");
    raw.expect(b"$1\r\nv\r\n");
}

#[test]
fn errors_keep_the_connection() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.send(b"NOSUCH a b\r\n");
    raw.expect(b"-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n");
    raw.send(b"GET\r\n");
    raw.expect(b"-ERR wrong number of arguments for 'get' command\r\n");
    raw.send(b"PING\r\n");
    raw.expect(b"+PONG\r\n");
}

#[test]
fn protocol_errors_reply_and_close() {
    let server = TestServer::start();
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*abc\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-3\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$9999999999\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n+PING\r\n",
            b"-ERR Protocol error: expected '$', got '+'\r\n",
        ),
        (
            b"SET \"unbalanced\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, reply) in cases {
        let mut raw = server.raw();
        raw.send(input);
        raw.expect(reply);
        assert!(
            raw.is_closed(),
            "connection closed after {:?}",
            String::from_utf8_lossy(input)
        );
    }
    // Unauthenticated-size limits do not apply without requirepass; a huge count only fails
    // when it is not a number. Oversized inline requests close too.
    let mut raw = server.raw();
    raw.send(&vec![b'a'; 70 * 1024]);
    raw.expect(b"-ERR Protocol error: too big inline request\r\n");
    assert!(raw.is_closed());
}

#[test]
fn garbage_does_not_disturb_other_clients() {
    let server = TestServer::start();
    let mut con = server.client();
    run::<()>(&mut con, &["SET", "stable", "yes"]);
    let mut seed: u64 = 0x9E3779B97F4A7C15;
    for round in 0..200 {
        let mut raw = server.raw();
        let len = 1 + (round * 37) % 300;
        let garbage: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed & 0xFF) as u8
            })
            .collect();
        raw.send(&garbage);
        raw.stream.shutdown(std::net::Shutdown::Write).ok();
        let _ = raw.is_closed();
    }
    // Truncated frames followed by a disconnect.
    for frame in [
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk"[..],
        b"*2\r\n$3\r\nGET",
        b"*",
        b"$5\r\nhel",
    ] {
        let mut raw = server.raw();
        raw.send(frame);
    }
    assert_eq!(run::<String>(&mut con, &["GET", "stable"]), "yes");
    assert_eq!(run::<String>(&mut con, &["PING"]), "PONG");
}

#[test]
fn bulk_limit_is_configurable() {
    let server = TestServer::start_with(&["--proto-max-bulk-len", "1mb"]);
    let mut raw = server.raw();
    raw.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n");
    raw.expect(b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(raw.is_closed());
}

#[test]
fn resp3_after_hello() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.send(b"GET nokey\r\n");
    raw.expect(b"$-1\r\n");
    raw.send(b"HELLO 3\r\nPING\r\n");
    let mut header = [0u8; 2];
    std::io::Read::read_exact(&mut raw.stream, &mut header).unwrap();
    assert_eq!(&header, b"%7");
    // Past the rest of the map, then check RESP3 null.
    raw.skip_through(b"+PONG\r\n");
    raw.send(b"GET nokey\r\n");
    raw.expect(b"_\r\n");
    // HGETALL answers a map, LRANGE an array, both encoded from one shared buffer.
    raw.send(b"HSET h f1 v1 f2 v2\r\nHGETALL h\r\nRPUSH l a bc\r\nLRANGE l 0 -1\r\n");
    raw.expect(b":2\r\n%2\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n");
    raw.expect(b":2\r\n*2\r\n$1\r\na\r\n$2\r\nbc\r\n");
    raw.send(b"HELLO 4\r\n");
    raw.expect(b"-NOPROTO unsupported protocol version\r\n");
}

#[test]
fn resp3_clients_work() {
    let server = TestServer::start();
    let mut con = server.client_resp3();
    run::<()>(&mut con, &["SET", "k", "v"]);
    assert_eq!(run::<String>(&mut con, &["GET", "k"]), "v");
    let config: std::collections::HashMap<String, String> =
        run(&mut con, &["CONFIG", "GET", "port"]);
    assert_eq!(config["port"], server.port.to_string());
}
