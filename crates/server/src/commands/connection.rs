//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET and CLIENT.

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{db_index, int, is, text};
use super::{acl, help_reply, Context};
use crate::error::Error;
use crate::services::acl::DEFAULT_USER;
use crate::services::blocking::Unblock;
use crate::services::{ClientHandle, Closing, Running};
use crate::REDIS_VERSION;

pub fn ping(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if !ctx.client.resp3 && !ctx.client.subscriptions.is_empty() && args.len() <= 2 {
        // Subscribed RESP2 clients get PING answered in the shape of a message.
        let payload = args.get(1).cloned().unwrap_or_default();
        return Ok(Reply::Array(vec![
            Reply::bulk("pong"),
            Reply::Bulk(payload),
        ]));
    }
    match args.len() {
        1 => Ok(Reply::status("PONG")),
        2 => Ok(Reply::Bulk(args[1].clone())),
        _ => Err(Error::WrongArity("ping".into())),
    }
}

pub fn echo(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Bulk(args[1].clone()))
}

/// Logs the connection in as `user` if `password` is one of its own; a refusal is logged.
fn authenticate(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    user: &[u8],
    password: &[u8],
) -> Result<(), Error> {
    match ctx.services.acl.authenticate(user, password) {
        Some(cell) => {
            acl::log_in(ctx, cell);
            Ok(())
        }
        None => {
            acl::record_failed_auth(ctx, args, user);
            Err(Error::WrongPass)
        }
    }
}

/// AUTH [username] password
pub fn auth(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (user, password) = match args.len() {
        2 => {
            if ctx.services.acl.default_user().current().nopass {
                return Err(Error::msg("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
            }
            (DEFAULT_USER.as_bytes(), &args[1][..])
        }
        3 => (&args[1][..], &args[2][..]),
        _ => return Err(Error::Syntax),
    };
    authenticate(ctx, args, user, password)?;
    Ok(Reply::OK)
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub fn hello(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut resp = if ctx.client.resp3 { 3 } else { 2 };
    if let Some(version) = args.get(1) {
        let version = int(version)
            .map_err(|_| Error::msg("Protocol version is not an integer or out of range"))?;
        if version != 2 && version != 3 {
            return Err(Error::NoProto);
        }
        resp = version as u8;
    }
    let mut name = None;
    let mut credentials = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "auth") && i + 2 < args.len() {
            credentials = Some((&args[i + 1], &args[i + 2]));
            i += 3;
        } else if is(&args[i], "setname") && i + 1 < args.len() {
            validate_name(&args[i + 1])?;
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            return Err(Error::msg(format!(
                "Syntax error in HELLO option '{}'",
                text(&args[i])
            )));
        }
    }
    if let Some((user, password)) = credentials {
        authenticate(ctx, args, user, password)?;
    }
    if !ctx.client.authenticated {
        return Err(Error::HelloNoAuth);
    }
    ctx.client.resp3 = resp == 3;
    {
        let mut info = ctx.client.handle.info.lock();
        info.resp = resp;
        if name.is_some() {
            info.name = name;
        }
    }
    let field = |k: &'static str, v: Reply| (Reply::bulk(k), v);
    Ok(Reply::Map(vec![
        field("server", Reply::bulk("redis")),
        field("version", Reply::bulk(REDIS_VERSION)),
        field("proto", Reply::Integer(resp as i64)),
        field("id", Reply::Integer(ctx.client.handle.id as i64)),
        field("mode", Reply::bulk("standalone")),
        field("role", Reply::bulk("master")),
        field("modules", Reply::Array(vec![])),
    ]))
}

pub fn select(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    // As Redis: the number is read, then refused in cluster mode, then checked.
    if ctx.services.cluster.is_some() && int(&args[1])? != 0 {
        return Err(Error::msg("SELECT is not allowed in cluster mode"));
    }
    ctx.client.db = db_index(&args[1], ctx.keyspace.databases())?;
    Ok(Reply::OK)
}

pub fn quit(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    ctx.client.closing = Some(Closing::AfterReply);
    Ok(Reply::OK)
}

pub fn reset(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let subscriptions = std::mem::take(&mut ctx.client.subscriptions);
    ctx.services
        .pubsub
        .forget(ctx.client.handle.id, &subscriptions);
    ctx.client.multi = None;
    ctx.keyspace.unwatch(&mut ctx.client.watching);
    ctx.services.monitors.remove(ctx.client.handle.id);
    ctx.client.handle.info.lock().monitor = false;
    ctx.client.db = 0;
    ctx.client.resp3 = false;
    ctx.client.cluster_readonly = false;
    let acl = &ctx.services.acl;
    ctx.client.authenticated = acl.default_needs_no_password();
    ctx.client.user = acl.default_user();
    ctx.client.handle.info.lock().user = ctx.client.user.name.clone();
    ctx.client.share_state();
    let mut info = ctx.client.handle.info.lock();
    info.name = None;
    info.resp = 2;
    Ok(Reply::status("RESET"))
}

fn validate_name(name: &[u8]) -> Result<(), Error> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(Error::msg(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// CLIENT ID
pub fn client_id(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.client.handle.id as i64))
}

/// CLIENT SETNAME name
pub fn client_setname(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    validate_name(&args[2])?;
    ctx.client.handle.info.lock().name = Some(args[2].clone()).filter(|n| !n.is_empty());
    Ok(Reply::OK)
}

/// CLIENT GETNAME
pub fn client_getname(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk_or_null(
        ctx.client.handle.info.lock().name.clone(),
    ))
}

/// CLIENT INFO
pub fn client_info(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let running = Running {
        name: "client|info",
        args,
    };
    Ok(Reply::Verbatim(Bytes::from(
        ctx.client.handle.describe(Some(running), false) + "\n",
    )))
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value
pub fn client_setinfo(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    validate_name(&args[3])?;
    let mut info = ctx.client.handle.info.lock();
    if is(&args[2], "lib-name") {
        info.lib_name = Some(args[3].clone());
    } else if is(&args[2], "lib-ver") {
        info.lib_ver = Some(args[3].clone());
    } else {
        return Err(Error::msg(format!(
            "Unrecognized option '{}'",
            text(&args[2])
        )));
    }
    Ok(Reply::OK)
}

/// CLIENT HELP
pub fn client_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "SETINFO <option> <value>",
        "    Set client meta attr. Options are:",
        "    * LIB-NAME: the client lib name.",
        "    * LIB-VER: the client lib version.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
    ]))
}

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP go unanswered themselves, as in Redis.
pub fn client_reply(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let replies = &mut ctx.client.replies;
    if is(&args[2], "on") {
        replies.on();
    } else if is(&args[2], "off") {
        replies.off();
    } else if is(&args[2], "skip") {
        replies.skip();
    } else {
        return Err(Error::Syntax);
    }
    Ok(Reply::OK)
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]
pub fn client_unblock(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if !(3..=4).contains(&args.len()) {
        return Err(Error::WrongArity("client|unblock".into()));
    }
    let id = int(&args[2])?;
    let how = match args.get(3) {
        None => Unblock::Timeout,
        Some(a) if is(a, "timeout") => Unblock::Timeout,
        Some(a) if is(a, "error") => Unblock::Error,
        Some(_) => {
            return Err(Error::msg(
                "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ))
        }
    };
    let unblocked = u64::try_from(id).is_ok_and(|id| ctx.services.blocking.unblock(id, how));
    Ok(Reply::Integer(unblocked as i64))
}

/// Which clients CLIENT LIST TYPE asks for.
#[derive(Clone, Copy, PartialEq)]
enum ClientType {
    /// Not subscribed to anything.
    Normal,
    PubSub,
    /// This replica's link to its master.
    Master,
    /// Replicas attached to this server.
    Replica,
}

impl ClientType {
    fn parse(name: &Bytes) -> Result<ClientType, Error> {
        if is(name, "normal") {
            Ok(ClientType::Normal)
        } else if is(name, "pubsub") {
            Ok(ClientType::PubSub)
        } else if is(name, "master") {
            Ok(ClientType::Master)
        } else if is(name, "replica") || is(name, "slave") {
            Ok(ClientType::Replica)
        } else {
            Err(Error::msg(format!("Unknown client type '{}'", text(name))))
        }
    }

    fn of(client: &ClientHandle) -> ClientType {
        let info = client.info.lock();
        if info.replica {
            ClientType::Replica
        } else if info.is_subscribed() {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...]
pub fn client_list(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut ids: Option<Vec<u64>> = None;
    let mut wanted = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "type") && i + 1 < args.len() {
            wanted = Some(ClientType::parse(&args[i + 1])?);
            i += 2;
        } else if is(&args[i], "id") && i + 1 < args.len() {
            let mut list = Vec::new();
            for arg in &args[i + 1..] {
                let id = int(arg)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| Error::msg("Invalid client ID"))?;
                list.push(id as u64);
            }
            ids = Some(list);
            i = args.len();
        } else {
            return Err(Error::Syntax);
        }
    }
    let me = ctx.client.handle.id;
    let mut text = String::new();
    for client in ctx.services.clients.all() {
        if ids.as_ref().is_some_and(|ids| !ids.contains(&client.id)) {
            continue;
        }
        if wanted.is_some_and(|wanted| wanted != ClientType::of(&client)) {
            continue;
        }
        let running = (client.id == me).then_some(Running {
            name: "client|list",
            args,
        });
        text.push_str(&client.describe(running, ctx.services.blocking.is_blocked(client.id)));
        text.push('\n');
    }
    Ok(Reply::Verbatim(Bytes::from(text)))
}

/// CLIENT KILL ip:port, or CLIENT KILL with filters (ID, TYPE, ADDR, LADDR, USER, SKIPME).
pub fn client_kill(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() == 3 {
        let addr = text(&args[2]);
        let target = ctx
            .services
            .clients
            .all()
            .into_iter()
            .find(|c| c.addr.to_string() == addr);
        return match target {
            Some(client) => {
                kill(ctx, &client);
                Ok(Reply::OK)
            }
            None => Err(Error::msg("No such client")),
        };
    }
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    let (mut id, mut addr, mut laddr, mut user, mut kind) = (None, None, None, None, None);
    let mut skip_me = true;
    for pair in args[2..].chunks_exact(2) {
        let (name, value) = (&pair[0], &pair[1]);
        if is(name, "id") {
            id = Some(
                int(value)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| Error::msg("client-id should be greater than 0"))?
                    as u64,
            );
        } else if is(name, "addr") {
            addr = Some(text(value));
        } else if is(name, "laddr") {
            laddr = Some(text(value));
        } else if is(name, "user") {
            if ctx.services.acl.user(value).is_none() {
                return Err(Error::msg(format!("No such user '{}'", text(value))));
            }
            user = Some(value.clone());
        } else if is(name, "skipme") {
            skip_me = if is(value, "yes") {
                true
            } else if is(value, "no") {
                false
            } else {
                return Err(Error::Syntax);
            };
        } else if is(name, "type") {
            kind = Some(ClientType::parse(value)?);
        } else {
            return Err(Error::Syntax);
        }
    }
    let mut killed = 0;
    // The link to the master is no client of this server's: it is dropped and reconnects.
    if kind == Some(ClientType::Master) && id.is_none() && addr.is_none() && laddr.is_none() {
        if let Some(master) = ctx.services.replication.master() {
            master.reset();
            killed += 1;
        }
    }
    for client in ctx.services.clients.all() {
        let matches = id.is_none_or(|id| client.id == id)
            && addr.as_ref().is_none_or(|a| client.addr.to_string() == *a)
            && laddr
                .as_ref()
                .is_none_or(|a| client.local_addr.to_string() == *a)
            && user.as_ref().is_none_or(|u| *u == client.info.lock().user)
            && kind.is_none_or(|kind| kind == ClientType::of(&client))
            && !(skip_me && client.id == ctx.client.handle.id);
        if matches {
            kill(ctx, &client);
            killed += 1;
        }
    }
    Ok(Reply::Integer(killed))
}

/// Kills a client; killing oneself closes after the reply, as in Redis.
fn kill(ctx: &mut Context<'_>, client: &crate::services::ClientHandle) {
    if client.id == ctx.client.handle.id {
        ctx.client.closing = Some(Closing::AfterReply);
    } else {
        client.kill();
    }
}
