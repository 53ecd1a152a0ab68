//! MONITOR: every command the server runs, as Redis prints it, sent to the connections that
//! asked through their message queue, which bounds what a slow monitor may leave unread. With
//! no monitor connected, a command pays one atomic load.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::pubsub::{OutputClass, Subscriber};
use bytes::Bytes;
use parking_lot::Mutex;
use shale_protocol::Reply;

/// Who ran a command.
#[derive(Clone, Copy)]
pub enum Origin {
    Client(SocketAddr),
    /// A script's `redis.call`.
    Script,
}

#[derive(Default)]
pub struct Monitors {
    connections: Mutex<Vec<Subscriber>>,
    count: AtomicUsize,
}

impl Monitors {
    /// Whether anybody monitors: the check every command makes.
    fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    pub fn add(&self, subscriber: &Subscriber) {
        let mut connections = self.connections.lock();
        if connections
            .iter()
            .all(|s| s.client.id != subscriber.client.id)
        {
            connections.push(subscriber.clone());
        }
        self.count.store(connections.len(), Ordering::Relaxed);
    }

    pub fn remove(&self, client: u64) {
        if !self.active() {
            return;
        }
        let mut connections = self.connections.lock();
        connections.retain(|s| s.client.id != client);
        self.count.store(connections.len(), Ordering::Relaxed);
    }

    /// Sends the line of one command to every monitor, if there is any.
    pub fn feed(&self, db: usize, origin: Origin, args: &[Bytes]) {
        if !self.active() {
            return;
        }
        let line = Reply::Status(monitor_line(SystemTime::now(), db, origin, args).into());
        for monitor in self.connections.lock().iter() {
            monitor.send(line.clone(), OutputClass::Normal);
        }
    }
}

/// `1700000000.123456 [0 127.0.0.1:5000] "SET" "k" "v"`, with secrets redacted as Redis does.
fn monitor_line(now: SystemTime, db: usize, origin: Origin, args: &[Bytes]) -> String {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut line = format!(
        "{}.{:06} [{db} ",
        since_epoch.as_secs(),
        since_epoch.subsec_micros()
    );
    match origin {
        Origin::Client(addr) => line.push_str(&addr.to_string()),
        Origin::Script => line.push_str("lua"),
    }
    line.push(']');
    let redacted = redacted_from(args);
    for (i, arg) in args.iter().enumerate() {
        line.push(' ');
        if redacted.contains(&i) {
            line.push_str("\"(redacted)\"");
        } else {
            quote(&mut line, arg);
        }
    }
    line
}

/// The positions of arguments that carry a password: AUTH's, and HELLO's AUTH pair.
fn redacted_from(args: &[Bytes]) -> Vec<usize> {
    let name = &args[0];
    if name.eq_ignore_ascii_case(b"auth") {
        return (1..args.len()).collect();
    }
    if name.eq_ignore_ascii_case(b"hello") {
        if let Some(at) = args.iter().position(|a| a.eq_ignore_ascii_case(b"auth")) {
            return vec![at + 1, at + 2];
        }
    }
    Vec::new()
}

/// Redis's `sdscatrepr`: quoted, with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b` escaped and
/// other unprintable bytes as `\xNN`.
fn quote(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(items: &[&[u8]]) -> Vec<Bytes> {
        items.iter().map(|a| Bytes::copy_from_slice(a)).collect()
    }

    #[test]
    fn lines_are_printed_and_quoted_as_redis_prints_them() {
        let at = UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_123);
        let client = Origin::Client("127.0.0.1:5000".parse().unwrap());
        assert_eq!(
            monitor_line(at, 2, client, &args(&[b"SET", b"k", b"a b\"\\\n\x01\xff"])),
            r#"1700000000.000123 [2 127.0.0.1:5000] "SET" "k" "a b\"\\\n\x01\xff""#
        );
        assert_eq!(
            monitor_line(at, 0, Origin::Script, &args(&[b"GET", b"k"])),
            r#"1700000000.000123 [0 lua] "GET" "k""#
        );
        assert_eq!(
            monitor_line(at, 0, client, &args(&[b"auth", b"user", b"pw"])),
            r#"1700000000.000123 [0 127.0.0.1:5000] "auth" "(redacted)" "(redacted)""#
        );
        assert_eq!(
            monitor_line(at, 0, client, &args(&[b"HELLO", b"3", b"AUTH", b"u", b"p"])),
            r#"1700000000.000123 [0 127.0.0.1:5000] "HELLO" "3" "AUTH" "(redacted)" "(redacted)""#
        );
    }
}
