//! Bounded memory under abuse: many idle connections, a client that never reads its replies,
//! huge bulk strings announced and never sent. Each is measured in the server's resident
//! memory, held to a bound, and the server must keep serving another client meanwhile.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{resident_kb, run, TestServer};

/// Raises this process's open-file limit to its hard limit (the server started after
/// inherits it); returns how many descriptors may be open.
fn raise_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

/// A PING on a fresh connection answers within a second: the server still serves others.
fn serves_others(server: &TestServer) {
    let started = Instant::now();
    assert_eq!(run::<String>(&mut server.client(), &["PING"]), "PONG");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "PING took {:?}",
        started.elapsed()
    );
}

#[test]
fn thousands_of_idle_connections_cost_a_bounded_amount_each() {
    let wanted = ((raise_file_limit().saturating_sub(200)) / 2).clamp(100, 9000) as usize;
    let server = TestServer::start();
    serves_others(&server);
    let before = resident_kb(server.pid());
    let idle: Vec<TcpStream> = (0..wanted)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).expect("connect"))
        .collect();
    // Every connection is registered (and so has its buffers) before memory is read.
    let deadline = Instant::now() + Duration::from_secs(30);
    while run::<String>(&mut server.client(), &["INFO", "clients"])
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0)
        < wanted
    {
        assert!(Instant::now() < deadline, "connections not registered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let per_connection = (resident_kb(server.pid()).saturating_sub(before)) / wanted as u64;
    eprintln!("{wanted} idle connections: {per_connection} kB each");
    assert!(
        per_connection <= 32,
        "{per_connection} kB per idle connection"
    );
    serves_others(&server);
    drop(idle);
}

#[test]
fn a_client_that_never_reads_is_not_buffered_without_bound() {
    let server = TestServer::start();
    let mut con = server.client();
    let value = "x".repeat(1 << 20);
    run::<()>(&mut con, &["SET", "big", &value]);
    let before = resident_kb(server.pid());
    // 1 GB of replies asked for, none read.
    let mut greedy = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    greedy
        .set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let request = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(1024);
    let _ = greedy.write_all(&request);
    std::thread::sleep(Duration::from_secs(2));
    let grown = resident_kb(server.pid()).saturating_sub(before);
    eprintln!("a client not reading 1 GB of replies: {grown} kB more");
    assert!(
        grown < 200 * 1024,
        "{grown} kB held for a client that does not read"
    );
    serves_others(&server);
    // It still gets its replies once it reads.
    let mut first = [0u8; 16];
    greedy
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    greedy.read_exact(&mut first).expect("read");
    assert_eq!(&first[..10], b"$1048576\r\n");
}

#[test]
fn huge_bulk_strings_announced_and_not_sent_cost_what_arrived() {
    let server = TestServer::start();
    let before = resident_kb(server.pid());
    // 50 clients each announce a 500 MB value and send 1 MB of it.
    let stalled: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
            let _ = stream.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$500000000\r\n");
            let _ = stream.write_all(&vec![b'v'; 1 << 20]);
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let grown = resident_kb(server.pid()).saturating_sub(before);
    eprintln!("50 half-sent 500 MB values: {grown} kB more");
    assert!(grown < 128 * 1024, "{grown} kB for 50 MB received");
    serves_others(&server);
    drop(stalled);
}
