//! The one error type of command execution, and its one mapping to the wire.

use std::borrow::Cow;

use shale_protocol::Reply;
use shale_storage::StorageError;
use thiserror::Error;

/// Everything a command can fail with. Each variant owns its Redis prefix in [`Error::to_reply`],
/// so no layer ever formats an error line itself and `WRONGTYPE` can never turn into `ERR`.
#[derive(Debug, Error)]
pub enum Error {
    #[error("wrong number of arguments for '{0}' command")]
    WrongArity(String),
    #[error("unknown command")]
    UnknownCommand { name: String, args: String },
    #[error("unknown subcommand")]
    UnknownSubcommand { sub: String, command: String },
    #[error("wrong type")]
    WrongType,
    #[error("value is not an integer or out of range")]
    NotInteger,
    #[error("value is not a valid float")]
    NotFloat,
    #[error("increment or decrement would overflow")]
    Overflow,
    #[error("syntax error")]
    Syntax,
    #[error("no such key")]
    NoSuchKey,
    #[error("authentication required")]
    NoAuth,
    #[error("invalid expire time in '{0}' command")]
    InvalidExpire(&'static str),
    #[error("string exceeds maximum allowed size (proto-max-bulk-len)")]
    StringTooLong,
    /// An `ERR` reply with its own text.
    #[error("{0}")]
    Message(Cow<'static, str>),
    #[error("invalid username-password pair or user is disabled.")]
    WrongPass,
    #[error("unsupported protocol version")]
    NoProto,
    /// HELLO with a protocol version from a client that has not authenticated.
    #[error("HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")]
    HelloNoAuth,
    #[error("Transaction discarded because of previous errors.")]
    ExecAbort,
    /// EXEC refused before it ran: the refusal's own line.
    #[error("Transaction discarded because of: {0}")]
    ExecAbortedBy(String),
    #[error("No matching script. Please use EVAL.")]
    NoScript,
    #[error("No scripts in execution right now.")]
    NotBusy,
    /// A blocked client's wait ended by something other than its keys; the text says what.
    #[error("{0}")]
    Unblocked(&'static str),
    #[error("Key is not a valid HyperLogLog string value.")]
    NotHyperLogLog,
    #[error("Corrupted HLL object detected")]
    CorruptHyperLogLog,
    #[error("You can't write against a read only replica.")]
    ReadOnly,
    #[error("Not enough good replicas to write.")]
    NoReplicas,
    /// SCRIPT KILL or FUNCTION KILL while only the other kind runs past the time limit; names
    /// the kill command that would stop it.
    #[error("Redis is busy running a script. You can only call {0} or SHUTDOWN NOSAVE.")]
    Busy(&'static str),
    /// SCRIPT KILL or FUNCTION KILL of a script that may not be stopped; the text says why.
    #[error("{0}")]
    Unkillable(&'static str),
    #[error("Can't SYNC while not connected with my master")]
    NoMasterLink,
    /// A consumer group or its key is missing; the text names them as the command does.
    #[error("{0}")]
    NoGroup(String),
    #[error("Consumer Group name already exists")]
    BusyGroup,
    /// An ACL refusal; the text says what was refused.
    #[error("{0}")]
    NoPerm(String),
    #[error("Target key name already exists.")]
    BusyKey,
    /// MIGRATE's link to its target failed while doing what it names.
    #[error("error or timeout {0}")]
    IoErr(&'static str),
    /// Cluster mode: the key's slot is served by the node at `addr` (`host:port`).
    #[error("{slot} {addr}")]
    Moved { slot: u16, addr: String },
    #[error("Keys in request don't hash to the same slot")]
    CrossSlot,
    /// Cluster mode: the slot has no owner, or the node has no topology yet.
    #[error("{0}")]
    ClusterDown(&'static str),
    /// Cluster mode: the slot is moving; the client may try again in a moment.
    #[error("{0}")]
    TryAgain(&'static str),
    /// A RESTORE payload that is not one: its own line, after `ERR`.
    #[error("{0}")]
    Dump(#[from] shale_rdb::dump::DumpError),
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
}

impl Error {
    pub fn msg(text: impl Into<Cow<'static, str>>) -> Error {
        Error::Message(text.into())
    }

    pub fn to_reply(&self) -> Reply {
        let line: Cow<'static, str> = match self {
            Error::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".into()
            }
            Error::NoAuth => "NOAUTH Authentication required.".into(),
            Error::UnknownCommand { name, args } => {
                format!("ERR unknown command '{name}', with args beginning with: {args}").into()
            }
            Error::UnknownSubcommand { sub, command } => {
                format!("ERR unknown subcommand '{sub}'. Try {command} HELP.").into()
            }
            // Redis's reply when its AOF cannot be written, naming the WAL.
            Error::Storage(StorageError::Unwritable(reason)) => {
                format!("MISCONF Errors writing to the WAL: {reason}").into()
            }
            other => format!("{} {other}", other.prefix()).into(),
        };
        Reply::Error(line)
    }

    /// The code a reply of this error starts with.
    fn prefix(&self) -> &'static str {
        match self {
            Error::WrongType | Error::NotHyperLogLog => "WRONGTYPE",
            Error::NoAuth | Error::HelloNoAuth => "NOAUTH",
            Error::WrongPass => "WRONGPASS",
            Error::NoProto => "NOPROTO",
            Error::ExecAbort | Error::ExecAbortedBy(_) => "EXECABORT",
            Error::NoScript => "NOSCRIPT",
            Error::NotBusy => "NOTBUSY",
            Error::Unblocked(_) => "UNBLOCKED",
            Error::CorruptHyperLogLog => "INVALIDOBJ",
            Error::ReadOnly => "READONLY",
            Error::Busy(_) => "BUSY",
            Error::Unkillable(_) => "UNKILLABLE",
            Error::NoReplicas => "NOREPLICAS",
            Error::NoMasterLink => "NOMASTERLINK",
            Error::BusyKey => "BUSYKEY",
            Error::NoGroup(_) => "NOGROUP",
            Error::BusyGroup => "BUSYGROUP",
            Error::NoPerm(_) => "NOPERM",
            Error::IoErr(_) => "IOERR",
            Error::Moved { .. } => "MOVED",
            Error::CrossSlot => "CROSSSLOT",
            Error::ClusterDown(_) => "CLUSTERDOWN",
            Error::TryAgain(_) => "TRYAGAIN",
            _ => "ERR",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(err: Error) -> String {
        match err.to_reply() {
            Reply::Error(text) => text.into_owned(),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn prefixes_match_redis() {
        assert_eq!(
            line(Error::WrongType),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
        assert_eq!(
            line(Error::WrongArity("get".into())),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            line(Error::NotInteger),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(line(Error::NoAuth), "NOAUTH Authentication required.");
        assert_eq!(
            line(StorageError::Unwritable("No space left on device".into()).into()),
            "MISCONF Errors writing to the WAL: No space left on device"
        );
        assert_eq!(
            line(Error::WrongPass),
            "WRONGPASS invalid username-password pair or user is disabled."
        );
        assert_eq!(
            line(Error::NotHyperLogLog),
            "WRONGTYPE Key is not a valid HyperLogLog string value."
        );
        assert_eq!(
            line(Error::ExecAbort),
            "EXECABORT Transaction discarded because of previous errors."
        );
        assert_eq!(
            line(Error::UnknownSubcommand {
                sub: "x".into(),
                command: "CONFIG".into()
            }),
            "ERR unknown subcommand 'x'. Try CONFIG HELP."
        );
        assert_eq!(
            line(Error::Moved {
                slot: 3999,
                addr: "127.0.0.1:7001".into()
            }),
            "MOVED 3999 127.0.0.1:7001"
        );
        assert_eq!(
            line(Error::CrossSlot),
            "CROSSSLOT Keys in request don't hash to the same slot"
        );
    }
}
