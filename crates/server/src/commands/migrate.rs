//! MIGRATE: keys sent to another server (Redis or Shale) as RESTORE commands carrying DUMP
//! payloads, then deleted here unless COPY, with Redis 7.0's replies.
//!
//! Unlike Redis, no connection is kept for the next MIGRATE to the same target: each opens
//! its own (so it always sends SELECT, as Redis does on a fresh one, and never needs Redis's
//! retry of a cached connection the target had closed).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;
use shale_protocol::{encode_request, Reply};

use super::args::{int, is, text};
use super::Context;
use crate::error::Error;
use crate::keyspace::{now_ms, off_worker};

/// The longest reply line read from the target (Redis reads 1024 bytes).
const MAX_REPLY_LINE: u64 = 1024;

struct Options<'a> {
    copy: bool,
    replace: bool,
    /// The username (AUTH2) and password (AUTH, AUTH2) to send first.
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: &'a [Bytes],
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
/// [AUTH2 username password] [KEYS key ...]
fn parse(args: &[Bytes]) -> Result<Options<'_>, Error> {
    let mut options = Options {
        copy: false,
        replace: false,
        auth: None,
        keys: &args[3..4],
    };
    let mut i = 6;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "copy") {
            options.copy = true;
        } else if is(&args[i], "replace") {
            options.replace = true;
        } else if is(&args[i], "auth") && more >= 1 {
            options.auth = Some((None, &args[i + 1]));
            i += 1;
        } else if is(&args[i], "auth2") && more >= 2 {
            options.auth = Some((Some(&args[i + 1]), &args[i + 2]));
            i += 2;
        } else if is(&args[i], "keys") {
            if !args[3].is_empty() {
                return Err(Error::msg(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            options.keys = &args[i + 1..];
            break;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    Ok(options)
}

/// MIGRATE's keys, for key extraction: the key argument, or those after KEYS.
pub fn migrate_keys(args: &[Bytes]) -> Vec<&[u8]> {
    match args.len() >= 6 {
        true => parse(args)
            .map(|o| o.keys.iter().map(|k| k.as_ref()).collect())
            .unwrap_or_default(),
        false => Vec::new(),
    }
}

pub fn migrate(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let options = parse(args)?;
    let timeout = match int(&args[5])? {
        t if t <= 0 => 1000,
        t => t as u64,
    };
    let db = int(&args[4])?;
    let mut found = Vec::new();
    for key in options.keys {
        if let Some(dumped) = ctx.db().dump_value(key)? {
            found.push((key, dumped));
        }
    }
    if found.is_empty() {
        return Ok(Reply::status("NOKEY"));
    }

    // AUTH, SELECT and one RESTORE per key that has not expired meanwhile, sent at once.
    let mut request = Vec::new();
    if let Some((user, password)) = options.auth {
        let mut auth: Vec<&[u8]> = vec![b"AUTH"];
        auth.extend(user);
        auth.push(password);
        encode_request(&mut request, &auth);
    }
    encode_request(&mut request, &[b"SELECT", db.to_string().as_bytes()]);
    let now = now_ms();
    let mut sent = Vec::new();
    for (key, (value, expire_at)) in &found {
        let ttl = match *expire_at {
            0 => 0,
            at if at < now => continue,
            at => (at - now).max(1),
        };
        let payload = shale_rdb::dump::encode(value);
        let ttl = ttl.to_string();
        let mut restore: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), &payload];
        if options.replace {
            restore.push(b"REPLACE");
        }
        encode_request(&mut request, &restore);
        sent.push(*key);
    }

    let host = text(&args[1]);
    let port = text(&args[2]);
    let timeout = Duration::from_millis(timeout);
    let exchange = off_worker(|| -> Result<Vec<Vec<u8>>, Error> {
        let connection = connect(&host, &port, timeout)?;
        let mut writer = &connection;
        writer
            .write_all(&request)
            .map_err(|_| Error::IoErr("writing to target instance"))?;
        let expected = sent.len() + 1 + options.auth.is_some() as usize;
        let mut reader = BufReader::new(&connection);
        let mut lines = Vec::with_capacity(expected);
        for _ in 0..expected {
            let mut line = Vec::new();
            let read = Read::take(&mut reader, MAX_REPLY_LINE).read_until(b'\n', &mut line);
            match read {
                Ok(n) if n > 0 && line.ends_with(b"\n") => lines.push(line),
                // The keys the target took before the link failed still count.
                _ => break,
            }
        }
        Ok(lines)
    })?;

    // Replies: AUTH's, SELECT's, then each RESTORE's. A key the target took is deleted here
    // (unless COPY); the first error the target sent becomes the reply.
    let preamble = 1 + options.auth.is_some() as usize;
    let preamble_error = exchange
        .iter()
        .take(preamble)
        .find(|line| line.starts_with(b"-"));
    let mut target_error = preamble_error.cloned();
    for (key, line) in sent.iter().zip(exchange.iter().skip(preamble)) {
        if line.starts_with(b"-") || preamble_error.is_some() {
            target_error.get_or_insert_with(|| line.clone());
        } else if !options.copy {
            ctx.db().delete(std::slice::from_ref(*key))?;
        }
    }
    if let Some(line) = target_error {
        let message = String::from_utf8_lossy(&line[1..]);
        return Err(Error::msg(format!(
            "Target instance replied with error: {}",
            message.trim_end_matches(['\r', '\n'])
        )));
    }
    if exchange.len() < preamble + sent.len() {
        return Err(Error::IoErr("reading from target instance"));
    }
    Ok(Reply::OK)
}

/// A connection to the target. As in Redis, whose connect does not wait for the target to
/// accept, a refused connection shows as a failed write.
fn connect(host: &str, port: &str, timeout: Duration) -> Result<TcpStream, Error> {
    let unreachable = || Error::IoErr("connecting to the client");
    let port: u16 = port.parse().map_err(|_| unreachable())?;
    let address = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut all| all.next())
        .ok_or_else(unreachable)?;
    let connection = match TcpStream::connect_timeout(&address, timeout) {
        Ok(connection) => connection,
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(Error::IoErr("writing to target instance"))
        }
        Err(_) => return Err(unreachable()),
    };
    let configured = connection
        .set_read_timeout(Some(timeout))
        .and_then(|()| connection.set_write_timeout(Some(timeout)));
    configured.map_err(|_| unreachable())?;
    let _ = connection.set_nodelay(true);
    Ok(connection)
}
