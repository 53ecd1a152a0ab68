//! The command table and the dispatcher. Each file parses the arguments of one family of
//! commands, calls the type layer and shapes the reply; none of them touches key bytes.
//!
//! The dispatcher checks what the table declares (existence, arity, authentication) before any
//! command code runs, so handlers start from well-formed argument counts.

mod args;
mod bitmap;
mod connection;
mod hash;
mod keys;
mod list;
mod pubsub;
mod roaring;
mod server;
mod set;
mod string;
mod table;
mod zset;

use bytes::Bytes;
use shale_protocol::Reply;

use crate::error::Error;
use crate::server::{ClientState, Services};
use crate::types::{Db, Keyspace};

pub use table::{lookup, CommandSpec, Flags, COMMANDS};

/// What a command may reach: the keyspace, its own connection and the server's services.
pub struct Context<'a> {
    pub keyspace: &'a Keyspace,
    pub client: &'a mut ClientState,
    pub services: &'a Services,
}

impl Context<'_> {
    /// The connection's selected database.
    pub fn db(&self) -> Db<'_> {
        self.keyspace.db(self.client.db)
    }
}

/// A command handler: `args[0]` is the command name as sent.
pub type Handler = fn(&mut Context<'_>, &[Bytes]) -> Result<Reply, Error>;

/// The result of one command: its reply, and whether it may have written (and so must be
/// durable before the reply is sent under `appendfsync always`).
pub struct Outcome {
    pub reply: Reply,
    pub spec: Option<&'static CommandSpec>,
}

/// Runs one request after the table's checks.
pub fn execute(ctx: &mut Context<'_>, args: &[Bytes]) -> Outcome {
    let Some(spec) = lookup(&args[0]) else {
        return Outcome {
            reply: unknown_command(args).to_reply(),
            spec: None,
        };
    };
    let argc = args.len() as i32;
    if (spec.arity > 0 && argc != spec.arity) || (spec.arity < 0 && argc < -spec.arity) {
        let err = Error::WrongArity(spec.name.to_string());
        return Outcome {
            reply: err.to_reply(),
            spec: Some(spec),
        };
    }
    if !ctx.client.authenticated && !spec.flags.contains(Flags::NO_AUTH) {
        return Outcome {
            reply: Error::NoAuth.to_reply(),
            spec: Some(spec),
        };
    }
    if !ctx.client.resp3 && !ctx.client.subscriptions.is_empty() && !allowed_while_subscribed(spec)
    {
        let err = Error::msg(format!(
            "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ));
        return Outcome {
            reply: err.to_reply(),
            spec: Some(spec),
        };
    }
    let reply = (spec.handler)(ctx, args).unwrap_or_else(|err| err.to_reply());
    Outcome {
        reply,
        spec: Some(spec),
    }
}

/// The reply of a container command's HELP subcommand.
fn help_reply(lines: &[&str]) -> Reply {
    Reply::Array(
        lines
            .iter()
            .map(|l| Reply::Status(l.to_string().into()))
            .collect(),
    )
}

/// What a RESP2 connection may run while it has subscriptions.
fn allowed_while_subscribed(spec: &CommandSpec) -> bool {
    let subscription = spec.flags.contains(Flags::PUBSUB) && spec.name.contains("subscribe");
    subscription || matches!(spec.name, "ping" | "quit" | "reset")
}

fn unknown_command(args: &[Bytes]) -> Error {
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    let preview: String = args[1..]
        .iter()
        .take(16)
        .map(|a| format!("'{}' ", String::from_utf8_lossy(&a[..a.len().min(128)])))
        .collect();
    Error::UnknownCommand {
        name,
        args: preview,
    }
}
