//! MIGRATE: keys sent to another server (Redis or Shale) as RESTORE commands carrying DUMP
//! payloads, then deleted here unless COPY, with Redis 7.0's replies. Connections to targets
//! are kept for the next MIGRATE, as Redis keeps them (see [`MigrateSockets`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;
use shale_protocol::{encode_request, Reply};

use super::args::{int, is, text};
use super::Context;
use crate::error::Error;
use crate::keyspace::{now_ms, off_worker};
use crate::services::migrate_sockets::{MigrateSockets, TargetLink};
use crate::services::replication::unix_secs;

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

    // AUTH, then SELECT when the connection has another database selected, then one RESTORE
    // per key that has not expired meanwhile, sent at once.
    let mut auth = Vec::new();
    if let Some((user, password)) = options.auth {
        let mut command: Vec<&[u8]> = vec![b"AUTH"];
        command.extend(user);
        command.push(password);
        encode_request(&mut auth, &command);
    }
    let now = now_ms();
    let mut restores = Vec::new();
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
        encode_request(&mut restores, &restore);
        sent.push(*key);
    }
    let request = Request {
        auth: &auth,
        db,
        restores: &restores,
        count: sent.len(),
    };
    let (host, port) = (text(&args[1]), text(&args[2]));
    let target = Target {
        name: format!("{host}:{port}"),
        host,
        port,
        timeout: Duration::from_millis(timeout),
    };
    let sockets = &ctx.services.migrate_sockets;
    let transfer = off_worker(|| transfer(sockets, &target, &request))?;
    // A key the target took is deleted here, unless COPY, even if a later one failed.
    if !options.copy {
        for &i in &transfer.taken {
            ctx.db().delete(std::slice::from_ref(sent[i]))?;
        }
    }
    match transfer.error {
        Some(err) => Err(err),
        None => Ok(Reply::OK),
    }
}

/// What MIGRATE sends: AUTH's bytes (or none), the database, and `count` RESTOREs' bytes.
struct Request<'a> {
    auth: &'a [u8],
    db: i64,
    restores: &'a [u8],
    count: usize,
}

struct Target {
    /// `host:port`, the connection's name in the cache.
    name: String,
    host: String,
    port: String,
    timeout: Duration,
}

/// The RESTOREs the target acknowledged (by position) and the error MIGRATE replies with.
struct Transfer {
    taken: Vec<usize>,
    error: Option<Error>,
}

/// How an exchange on a connection ended.
enum Exchange {
    /// The connection failed before the first RESTORE's reply, while writing or not.
    Failed { writing: bool, timed_out: bool },
    /// The RESTOREs' replies, up to a read that failed (`broken`, and whether it timed out).
    Replied {
        taken: Vec<usize>,
        target_error: Option<Vec<u8>>,
        broken: Option<bool>,
    },
}

/// Sends the request on the target's cached connection, as Redis's MIGRATE does: a connection
/// that fails is closed, and the request sent once more on a new one if it failed before the
/// target answered any RESTORE and not by a timeout (a cached connection the target closed).
fn transfer(
    sockets: &MigrateSockets,
    target: &Target,
    request: &Request,
) -> Result<Transfer, Error> {
    let mut may_retry = true;
    loop {
        let link = sockets.get(&target.name, unix_secs(), || {
            connect(&target.host, &target.port, target.timeout)
        })?;
        let mut guard = link.lock();
        let exchange = exchange(&mut guard, request, target.timeout);
        let failed = |writing| {
            let doing = if writing {
                "writing to target instance"
            } else {
                "reading to target instance"
            };
            Error::IoErr(doing)
        };
        let (taken, target_error, broken) = match exchange {
            Exchange::Failed { writing, timed_out } => {
                sockets.close(&target.name, &link);
                if may_retry && !timed_out {
                    may_retry = false;
                    continue;
                }
                return Err(failed(writing));
            }
            Exchange::Replied {
                taken,
                target_error,
                broken,
            } => (taken, target_error, broken),
        };
        if let Some(timed_out) = broken {
            sockets.close(&target.name, &link);
            let nothing_read = taken.is_empty() && target_error.is_none();
            if nothing_read && may_retry && !timed_out {
                may_retry = false;
                continue;
            }
        }
        let error = match target_error {
            Some(line) => {
                // The target's selected database is no longer known.
                guard.selected_db = None;
                let message = String::from_utf8_lossy(&line[1..]);
                Some(Error::msg(format!(
                    "Target instance replied with error: {}",
                    message.trim_end_matches(['\r', '\n'])
                )))
            }
            None if broken.is_some() => Some(failed(false)),
            None => {
                guard.selected_db = Some(request.db);
                None
            }
        };
        return Ok(Transfer { taken, error });
    }
}

/// One attempt: the request written, then AUTH's, SELECT's and each RESTORE's reply read.
fn exchange(link: &mut TargetLink, request: &Request, timeout: Duration) -> Exchange {
    let select = link.selected_db != Some(request.db);
    let mut bytes = request.auth.to_vec();
    if select {
        encode_request(&mut bytes, &[b"SELECT", request.db.to_string().as_bytes()]);
    }
    bytes.extend_from_slice(request.restores);
    let stream = link.stream.get_mut();
    let written = stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .and_then(|()| stream.write_all(&bytes));
    if let Err(err) = written {
        return Exchange::Failed {
            writing: true,
            timed_out: timed_out(&err),
        };
    }
    let mut preamble_error = None;
    for expected in [!request.auth.is_empty(), select] {
        if !expected {
            continue;
        }
        match read_line(&mut link.stream) {
            Ok(line) if line.starts_with(b"-") => {
                preamble_error.get_or_insert(line);
            }
            Ok(_) => {}
            Err(err) => {
                return Exchange::Failed {
                    writing: false,
                    timed_out: timed_out(&err),
                }
            }
        }
    }
    let mut taken = Vec::new();
    let mut target_error = None;
    for i in 0..request.count {
        match read_line(&mut link.stream) {
            Ok(line) => match preamble_error.clone() {
                Some(error) => {
                    target_error.get_or_insert(error);
                }
                None if line.starts_with(b"-") => {
                    target_error.get_or_insert(line);
                }
                None => taken.push(i),
            },
            Err(err) => {
                let broken = Some(timed_out(&err));
                return Exchange::Replied {
                    taken,
                    target_error,
                    broken,
                };
            }
        }
    }
    Exchange::Replied {
        taken,
        target_error,
        broken: None,
    }
}

/// A reply line of at most [`MAX_REPLY_LINE`] bytes.
fn read_line(stream: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    Read::take(stream, MAX_REPLY_LINE).read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\n") {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(line)
}

fn timed_out(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
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
