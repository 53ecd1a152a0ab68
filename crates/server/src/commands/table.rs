//! The static command table: one declarative line per command.

use std::sync::LazyLock;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use crate::config::event_classes::{GENERIC, HASH, LIST, SET, STRING, ZSET};
use crate::services::acl::catalog::{Catalog, CatalogEntry, Categories};
use crate::services::acl::user::KeyAccess;

use super::{
    acl, bitmap, cluster, connection, debug, dump, function, geo, hash, hyperloglog, keys, latency,
    list, migrate, pubsub, replication, roaring, scripting, server, set, sort, stream, string,
    transaction, zset, Handler,
};

/// Command flags, named as COMMAND INFO reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags(u32);

impl Flags {
    pub const WRITE: Flags = Flags(1);
    pub const READONLY: Flags = Flags(1 << 1);
    pub const DENYOOM: Flags = Flags(1 << 2);
    pub const ADMIN: Flags = Flags(1 << 3);
    pub const NOSCRIPT: Flags = Flags(1 << 4);
    pub const LOADING: Flags = Flags(1 << 5);
    pub const STALE: Flags = Flags(1 << 6);
    pub const FAST: Flags = Flags(1 << 7);
    pub const NO_AUTH: Flags = Flags(1 << 8);
    pub const PUBSUB: Flags = Flags(1 << 9);
    pub const BLOCKING: Flags = Flags(1 << 11);
    /// MONITOR shows the command as it starts, not once it has run (scripts, so that their
    /// own commands follow them).
    pub const SKIP_MONITOR: Flags = Flags(1 << 12);
    /// Internal (not reported): runs other commands (EXEC, scripts), so it may write.
    pub const RUNS_COMMANDS: Flags = Flags(1 << 10);
    /// Internal (not reported): a read that may write (PFCOUNT stores the count it computed),
    /// so its reply waits for the WAL sync as a write's does.
    pub const MAY_WRITE: Flags = Flags(1 << 13);
    /// Refused inside MULTI, which then aborts: `-ERR Command not allowed inside a
    /// transaction`.
    pub const NO_MULTI: Flags = Flags(1 << 14);
    /// Internal (not reported): looks its keys up without making them recently used (OBJECT
    /// IDLETIME), as Redis's `LOOKUP_NOTOUCH` lookups do.
    pub const NO_TOUCH: Flags = Flags(1 << 15);
    /// Internal (not reported): runs at once inside MULTI instead of being queued.
    pub const RUNS_IN_MULTI: Flags = Flags(1 << 16);
    /// Internal (not reported): allowed on a RESP2 connection that has subscriptions.
    pub const WHILE_SUBSCRIBED: Flags = Flags(1 << 17);
    /// Internal (not reported): locks its keys as it runs rather than before, since they may
    /// lie in another database (MOVE, COPY ... DB).
    pub const LOCKS_LATE: Flags = Flags(1 << 18);
    /// Internal (not reported): changes the connection's database (SELECT), which EXEC follows
    /// when it declares the keys of the commands queued after it.
    pub const SELECTS_DB: Flags = Flags(1 << 19);
    /// Internal (not reported): looks its keys up without announcing a miss (`keymiss`), as
    /// Redis's OBJECT and MEMORY USAGE do.
    pub const NO_KEYMISS: Flags = Flags(1 << 20);
    /// Internal (not reported): a write that reads its keys after the first, which it stores
    /// to, as a read does: a missing one is announced (`keymiss`).
    pub const READS_SOURCES: Flags = Flags(1 << 21);
    /// Internal (not reported): a write that reads its first key as a read does (SORT).
    pub const READS_FIRST_KEY: Flags = Flags(1 << 22);
    /// Internal (not reported): a write whose lookup of its key counts as a keyspace hit or
    /// miss, as Redis's do for those that read it as GET does (GETSET, GETDEL, GETEX, SET ...
    /// GET) and for COPY's source and XREADGROUP's streams.
    pub const COUNTS_LOOKUP: Flags = Flags(1 << 23);
    pub const NONE: Flags = Flags(0);

    /// In the order of Redis's flag bits, which COMMAND INFO follows.
    const NAMES: [(Flags, &'static str); 13] = [
        (Flags::WRITE, "write"),
        (Flags::READONLY, "readonly"),
        (Flags::DENYOOM, "denyoom"),
        (Flags::ADMIN, "admin"),
        (Flags::PUBSUB, "pubsub"),
        (Flags::NOSCRIPT, "noscript"),
        (Flags::BLOCKING, "blocking"),
        (Flags::LOADING, "loading"),
        (Flags::STALE, "stale"),
        (Flags::SKIP_MONITOR, "skip_monitor"),
        (Flags::FAST, "fast"),
        (Flags::NO_AUTH, "no_auth"),
        (Flags::NO_MULTI, "no_multi"),
    ];

    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any of `other`'s flags is set.
    pub fn intersects(self, other: Flags) -> bool {
        self.0 & other.0 != 0
    }

    pub fn names(self) -> Vec<&'static str> {
        Flags::NAMES
            .iter()
            .filter(|(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// One command: name, arity (negative: at least that many), flags, key positions (first,
/// last, step; last -1 means "to the end") and its group for COMMAND DOCS. A container
/// (CONFIG, CLIENT, ...) lists its subcommands, each a command of its own named
/// `container|sub`, as Redis 7 names them in errors, INFO commandstats and COMMAND.
pub struct CommandSpec {
    pub name: &'static str,
    pub arity: i32,
    pub flags: Flags,
    pub keys: Keys,
    /// The keyspace events of a write command (see `notify`).
    pub events: Events,
    pub group: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
}

const W: Flags = Flags::WRITE.with(Flags::DENYOOM);
const WF: Flags = W.with(Flags::FAST);
const D: Flags = Flags::WRITE;
const DF: Flags = Flags::WRITE.with(Flags::FAST);
const R: Flags = Flags::READONLY;
const RF: Flags = Flags::READONLY.with(Flags::FAST);
const CONN: Flags = Flags::NOSCRIPT
    .with(Flags::LOADING)
    .with(Flags::STALE)
    .with(Flags::FAST);
/// Connection commands that scripts may run too.
const SCRIPTABLE: Flags = Flags::LOADING.with(Flags::STALE).with(Flags::FAST);
/// Subscription commands: allowed in RESP2 subscribed mode.
const PUBSUB: Flags = Flags::PUBSUB
    .with(Flags::NOSCRIPT)
    .with(Flags::LOADING)
    .with(Flags::STALE);
const ADMIN: Flags = Flags::ADMIN
    .with(Flags::NOSCRIPT)
    .with(Flags::LOADING)
    .with(Flags::STALE);
/// REPLICAOF and SLAVEOF: not while loading, as in Redis.
const REPLICATION: Flags = Flags::ADMIN.with(Flags::NOSCRIPT).with(Flags::STALE);

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $summary:literal, $handler:path) => {
        spec!(
            $name,
            $arity,
            $flags,
            $keys,
            $group,
            $summary,
            $handler,
            Events::None
        )
    };
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $summary:literal, $handler:path, $events:expr) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            keys: $keys,
            events: $events,
            group: $group,
            summary: $summary,
            handler: $handler,
            subcommands: &[],
        }
    };
}

/// A container: without a subcommand its handler runs (COMMAND lists every command; the
/// others' arity of -2 refuses them first).
macro_rules! container {
    ($name:literal, $arity:expr, $flags:expr, $group:literal, $summary:literal, $handler:path, $subcommands:expr) => {
        CommandSpec {
            subcommands: $subcommands,
            ..spec!($name, $arity, $flags, NO_KEYS, $group, $summary, $handler)
        }
    };
}

/// Where a command's keys are.
#[derive(Clone, Copy)]
pub enum Keys {
    /// Redis's first, last and step: a last of -1 is the last argument, -2 the one before.
    Range(i32, i32, i32),
    /// A count at `count_at` and that many keys after it, after the keys at `fixed`
    /// (ZUNIONSTORE's destination). COMMAND INFO shows `reported`, as Redis does.
    Counted {
        count_at: usize,
        fixed: &'static [usize],
        reported: (i32, i32, i32),
    },
    /// Found in the arguments by a function (SORT ... STORE, TR.BITOPCARD).
    Found {
        by: fn(&[Bytes]) -> Vec<&[u8]>,
        reported: (i32, i32, i32),
    },
}

impl Keys {
    /// First, last and step, as COMMAND INFO reports them.
    pub fn reported(self) -> (i32, i32, i32) {
        match self {
            Keys::Range(first, last, step) => (first, last, step),
            Keys::Counted { reported, .. } | Keys::Found { reported, .. } => reported,
        }
    }
}

/// The keyspace events a write command causes, as Redis's commands announce them.
#[derive(Clone, Copy)]
pub enum Events {
    /// A command that writes nothing.
    None,
    /// A write that announces nothing of its own (a key it deletes still gets `del`):
    /// FLUSHDB, FLUSHALL and SWAPDB, as in Redis, and the TR.* commands, whose TairRoaring
    /// events Shale does not reproduce.
    Silent,
    /// One event per key the command names, the i-th for its i-th key and the last for the
    /// rest, published for the keys its write changed.
    ByKey(&'static [KeyEvent]),
    /// Events that depend on the command's options or outcome, which its handler reports
    /// (`Context::notify`).
    Reported,
}

/// The event of one key of a command.
#[derive(Clone, Copy)]
pub struct KeyEvent {
    pub class: u32,
    pub name: &'static str,
    /// Left out when the write deleted the key (a STORE of an empty result, EXPIRE in the
    /// past): only `del` is announced then.
    pub unless_deleted: bool,
}

/// `name` of `class`.
pub(super) const fn each(class: u32, name: &'static str) -> KeyEvent {
    KeyEvent {
        class,
        name,
        unless_deleted: false,
    }
}

/// `name` of `class`, unless the write deleted the key.
pub(super) const fn kept(class: u32, name: &'static str) -> KeyEvent {
    KeyEvent {
        class,
        name,
        unless_deleted: true,
    }
}

const NO_KEYS: Keys = Keys::Range(0, 0, 0);
const KEY1: Keys = Keys::Range(1, 1, 1);
const KEY12: Keys = Keys::Range(1, 2, 1);
const ALL_KEYS: Keys = Keys::Range(1, -1, 1);
const PAIRS: Keys = Keys::Range(1, -1, 2);
const ALL_BUT_LAST: Keys = Keys::Range(1, -2, 1);
/// `numkeys key...` right after the command name (LMPOP, ZUNION, SINTERCARD, ...).
const COUNTED_FIRST: Keys = Keys::Counted {
    count_at: 1,
    fixed: &[],
    reported: (0, 0, 0),
};
/// `arg numkeys key...` (BLMPOP, BZMPOP, EVAL, ...).
const COUNTED_SECOND: Keys = Keys::Counted {
    count_at: 2,
    fixed: &[],
    reported: (0, 0, 0),
};
/// MIGRATE's key argument, or the keys after its KEYS option.
const MIGRATE_KEYS: Keys = Keys::Found {
    by: migrate::migrate_keys,
    reported: (3, 3, 1),
};
/// `destination numkeys key...` (ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE).
const STORE_COUNTED: Keys = Keys::Counted {
    count_at: 2,
    fixed: &[1],
    reported: (1, 1, 1),
};

#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    // connection
    spec!("ping", -1, SCRIPTABLE.with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "connection", "Returns the server's liveliness response.", connection::ping),
    spec!("echo", 2, SCRIPTABLE, NO_KEYS, "connection", "Returns the given string.", connection::echo),
    spec!("hello", -1, CONN.with(Flags::NO_AUTH), NO_KEYS, "connection", "Handshakes with the server.", connection::hello),
    spec!("auth", -2, CONN.with(Flags::NO_AUTH), NO_KEYS, "connection", "Authenticates the connection.", connection::auth),
    spec!("select", 2, SCRIPTABLE.with(Flags::SELECTS_DB), NO_KEYS, "connection", "Changes the selected database.", connection::select),
    spec!("quit", -1, CONN.with(Flags::NO_AUTH).with(Flags::RUNS_IN_MULTI).with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "connection", "Closes the connection.", connection::quit),
    spec!("reset", 1, CONN.with(Flags::NO_AUTH).with(Flags::RUNS_IN_MULTI).with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "connection", "Resets the connection.", connection::reset),
    container!("client", -2, Flags::NONE, "connection", "A container for client connection commands.", connection::client_help, CLIENT),
    // transactions
    spec!("multi", 1, CONN.with(Flags::RUNS_IN_MULTI), NO_KEYS, "transactions", "Starts a transaction.", transaction::multi),
    spec!("exec", 1, Flags::NOSCRIPT.with(Flags::LOADING).with(Flags::STALE).with(Flags::RUNS_COMMANDS).with(Flags::RUNS_IN_MULTI), NO_KEYS, "transactions", "Executes all commands in a transaction.", transaction::exec),
    spec!("discard", 1, CONN.with(Flags::RUNS_IN_MULTI), NO_KEYS, "transactions", "Discards a transaction.", transaction::discard),
    spec!("watch", -2, CONN.with(Flags::RUNS_IN_MULTI), ALL_KEYS, "transactions", "Monitors changes to keys to determine the execution of a transaction.", transaction::watch),
    spec!("unwatch", 1, CONN, NO_KEYS, "transactions", "Forgets about watched keys of a transaction.", transaction::unwatch),
    // scripting
    spec!("eval", -3, Flags::NOSCRIPT.with(Flags::STALE).with(Flags::SKIP_MONITOR).with(Flags::RUNS_COMMANDS), COUNTED_SECOND, "scripting", "Executes a server-side Lua script.", scripting::eval),
    spec!("evalsha", -3, Flags::NOSCRIPT.with(Flags::STALE).with(Flags::SKIP_MONITOR).with(Flags::RUNS_COMMANDS), COUNTED_SECOND, "scripting", "Executes a server-side Lua script by SHA1 digest.", scripting::evalsha),
    spec!("eval_ro", -3, Flags::NOSCRIPT.with(Flags::STALE).with(Flags::SKIP_MONITOR).with(Flags::READONLY).with(Flags::RUNS_COMMANDS), COUNTED_SECOND, "scripting", "Executes a read-only server-side Lua script.", scripting::eval_ro),
    spec!("evalsha_ro", -3, Flags::NOSCRIPT.with(Flags::STALE).with(Flags::SKIP_MONITOR).with(Flags::READONLY).with(Flags::RUNS_COMMANDS), COUNTED_SECOND, "scripting", "Executes a read-only server-side Lua script by SHA1 digest.", scripting::evalsha_ro),
    container!("script", -2, Flags::NONE, "scripting", "A container for Lua scripts management commands.", scripting::script_help, SCRIPT),
    spec!("fcall", -3, Flags::NOSCRIPT.with(Flags::STALE).with(Flags::SKIP_MONITOR).with(Flags::RUNS_COMMANDS), COUNTED_SECOND, "scripting", "Invokes a function.", function::fcall),
    spec!("fcall_ro", -3, Flags::NOSCRIPT.with(Flags::STALE).with(Flags::SKIP_MONITOR).with(Flags::READONLY).with(Flags::RUNS_COMMANDS), COUNTED_SECOND, "scripting", "Invokes a read-only function.", function::fcall_ro),
    container!("function", -2, Flags::NONE, "scripting", "A container for function commands.", function::function_help, FUNCTION),
    container!("acl", -2, Flags::NONE, "server", "A container for Access List Control commands.", acl::acl_help, ACL),
    // server
    container!("command", -1, Flags::LOADING.with(Flags::STALE), "server", "Returns detailed information about commands.", server::command, COMMAND),
    spec!("info", -1, Flags::LOADING.with(Flags::STALE), NO_KEYS, "server", "Returns information and statistics about the server.", server::info),
    container!("config", -2, Flags::NONE, "server", "A container for server configuration commands.", server::config_help, CONFIG),
    spec!("save", 1, Flags::ADMIN.with(Flags::NOSCRIPT).with(Flags::NO_MULTI), NO_KEYS, "server", "Synchronously saves the database(s) to disk.", server::save),
    spec!("bgsave", -1, Flags::ADMIN.with(Flags::NOSCRIPT), NO_KEYS, "server", "Asynchronously saves the database(s) to disk.", server::bgsave),
    spec!("lastsave", 1, Flags::LOADING.with(Flags::STALE).with(Flags::FAST), NO_KEYS, "server", "Returns the Unix timestamp of the last successful save to disk.", server::lastsave),
    spec!("dbsize", 1, RF, NO_KEYS, "server", "Returns the number of keys in the database.", server::dbsize),
    spec!("flushdb", -1, D, NO_KEYS, "server", "Removes all keys from the current database.", server::flushdb, Events::Silent),
    spec!("flushall", -1, D, NO_KEYS, "server", "Removes all keys from all databases.", server::flushall, Events::Silent),
    spec!("swapdb", 3, DF, NO_KEYS, "server", "Swaps two Redis databases.", server::swapdb, Events::Silent),
    spec!("time", 1, Flags::LOADING.with(Flags::STALE).with(Flags::FAST), NO_KEYS, "server", "Returns the server time.", server::time),
    container!("latency", -2, Flags::NONE, "server", "A container for latency diagnostics commands", latency::help, LATENCY),
    container!("slowlog", -2, Flags::NONE, "server", "A container for slow log commands.", server::slowlog_help, SLOWLOG),
    spec!("shutdown", -1, ADMIN.with(Flags::NO_MULTI), NO_KEYS, "server", "Shuts down the server.", server::shutdown),
    container!("memory", -2, Flags::NONE, "server", "A container for memory diagnostics commands.", server::memory_help, MEMORY),
    spec!("role", 1, CONN, NO_KEYS, "server", "Returns the replication role.", replication::role),
    spec!("replicaof", 3, REPLICATION, NO_KEYS, "server", "Configures a server as replica of another, or promotes it to a master.", replication::replicaof),
    spec!("slaveof", 3, REPLICATION, NO_KEYS, "server", "Sets a Redis server as a replica of another, or promotes it to being a master.", replication::replicaof),
    spec!("replconf", -1, ADMIN, NO_KEYS, "server", "An internal command for configuring the replication stream.", replication::replconf),
    spec!("psync", -3, ADMIN.with(Flags::NO_MULTI), NO_KEYS, "server", "An internal command used in replication.", replication::psync),
    spec!("debug", -2, ADMIN, NO_KEYS, "server", "A container for debugging commands.", debug::debug),
    spec!("monitor", 1, ADMIN, NO_KEYS, "server", "Listens for all requests received by the server in real-time.", server::monitor),
    spec!("wait", 3, Flags::NOSCRIPT, NO_KEYS, "generic", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", replication::wait),
    // strings
    spec!("get", 2, RF, KEY1, "string", "Returns the string value of a key.", string::get),
    spec!("set", -3, W.with(Flags::COUNTS_LOOKUP), KEY1, "string", "Sets the string value of a key.", string::set, Events::Reported),
    spec!("setnx", 3, WF, KEY1, "string", "Sets the value of a key only when it doesn't exist.", string::setnx, Events::ByKey(&[each(STRING, "set")])),
    spec!("setex", 4, W, KEY1, "string", "Sets the value and expiration time in seconds of a key.", string::setex, Events::Reported),
    spec!("psetex", 4, W, KEY1, "string", "Sets the value and expiration time in milliseconds of a key.", string::psetex, Events::Reported),
    spec!("getset", 3, WF.with(Flags::COUNTS_LOOKUP), KEY1, "string", "Returns the previous value of a key after setting it.", string::getset, Events::ByKey(&[each(STRING, "set")])),
    spec!("getdel", 2, DF.with(Flags::COUNTS_LOOKUP), KEY1, "string", "Returns the value of a key after deleting it.", string::getdel, Events::ByKey(&[each(GENERIC, "del")])),
    spec!("getex", -2, DF.with(Flags::COUNTS_LOOKUP), KEY1, "string", "Returns the value of a key after changing its expiration.", string::getex, Events::Reported),
    spec!("mget", -2, RF, ALL_KEYS, "string", "Atomically returns the values of one or more keys.", string::mget),
    spec!("mset", -3, W, PAIRS, "string", "Atomically sets the values of one or more keys.", string::mset, Events::ByKey(&[each(STRING, "set")])),
    spec!("msetnx", -3, W, PAIRS, "string", "Sets the values of keys only when none of them exist.", string::msetnx, Events::ByKey(&[each(STRING, "set")])),
    spec!("incr", 2, WF, KEY1, "string", "Increments the integer value of a key by one.", string::incr, Events::ByKey(&[each(STRING, "incrby")])),
    spec!("decr", 2, WF, KEY1, "string", "Decrements the integer value of a key by one.", string::decr, Events::ByKey(&[each(STRING, "incrby")])),
    spec!("incrby", 3, WF, KEY1, "string", "Increments the integer value of a key by a number.", string::incrby, Events::ByKey(&[each(STRING, "incrby")])),
    spec!("decrby", 3, WF, KEY1, "string", "Decrements the integer value of a key by a number.", string::decrby, Events::ByKey(&[each(STRING, "incrby")])),
    spec!("incrbyfloat", 3, WF, KEY1, "string", "Increments the floating point value of a key.", string::incrbyfloat, Events::ByKey(&[each(STRING, "incrbyfloat")])),
    spec!("append", 3, WF, KEY1, "string", "Appends a string to the value of a key.", string::append, Events::ByKey(&[each(STRING, "append")])),
    spec!("strlen", 2, RF, KEY1, "string", "Returns the length of a string value.", string::strlen),
    spec!("getrange", 4, R, KEY1, "string", "Returns a substring of the string stored at a key.", string::getrange),
    spec!("substr", 4, R, KEY1, "string", "Returns a substring of the string stored at a key.", string::getrange),
    spec!("lcs", -3, R, KEY12, "string", "Finds the longest common substring.", string::lcs),
    spec!("setrange", 4, W, KEY1, "string", "Overwrites part of a string value from an offset.", string::setrange, Events::ByKey(&[each(STRING, "setrange")])),
    // generic
    spec!("del", -2, D, ALL_KEYS, "generic", "Deletes one or more keys.", keys::del, Events::ByKey(&[each(GENERIC, "del")])),
    spec!("unlink", -2, DF, ALL_KEYS, "generic", "Deletes one or more keys without blocking.", keys::del, Events::ByKey(&[each(GENERIC, "del")])),
    spec!("exists", -2, RF.with(Flags::NO_TOUCH), ALL_KEYS, "generic", "Counts how many of the given keys exist.", keys::exists),
    spec!("type", 2, RF.with(Flags::NO_TOUCH), KEY1, "generic", "Returns the type of the value stored at a key.", keys::key_type),
    spec!("expire", -3, DF, KEY1, "generic", "Sets the expiration time of a key in seconds.", keys::expire, Events::ByKey(&[kept(GENERIC, "expire")])),
    spec!("pexpire", -3, DF, KEY1, "generic", "Sets the expiration time of a key in milliseconds.", keys::pexpire, Events::ByKey(&[kept(GENERIC, "expire")])),
    spec!("expireat", -3, DF, KEY1, "generic", "Sets the expiration time of a key to a Unix timestamp.", keys::expireat, Events::ByKey(&[kept(GENERIC, "expire")])),
    spec!("pexpireat", -3, DF, KEY1, "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp.", keys::pexpireat, Events::ByKey(&[kept(GENERIC, "expire")])),
    spec!("ttl", 2, RF.with(Flags::NO_TOUCH), KEY1, "generic", "Returns the expiration time in seconds of a key.", keys::ttl),
    spec!("pttl", 2, RF.with(Flags::NO_TOUCH), KEY1, "generic", "Returns the expiration time in milliseconds of a key.", keys::pttl),
    spec!("expiretime", 2, RF.with(Flags::NO_TOUCH), KEY1, "generic", "Returns the expiration time of a key as a Unix timestamp.", keys::expiretime),
    spec!("pexpiretime", 2, RF.with(Flags::NO_TOUCH), KEY1, "generic", "Returns the expiration time of a key as a Unix milliseconds timestamp.", keys::pexpiretime),
    spec!("persist", 2, DF, KEY1, "generic", "Removes the expiration time of a key.", keys::persist, Events::ByKey(&[each(GENERIC, "persist")])),
    spec!("rename", 3, D, KEY12, "generic", "Renames a key and overwrites the destination.", keys::rename, Events::ByKey(&[each(GENERIC, "rename_from"), each(GENERIC, "rename_to")])),
    spec!("renamenx", 3, DF, KEY12, "generic", "Renames a key only when the target key name doesn't exist.", keys::renamenx, Events::ByKey(&[each(GENERIC, "rename_from"), each(GENERIC, "rename_to")])),
    spec!("copy", -3, W.with(Flags::LOCKS_LATE).with(Flags::COUNTS_LOOKUP), KEY12, "generic", "Copies the value of a key to a new key.", keys::copy, Events::Reported),
    spec!("dump", 2, R, KEY1, "generic", "Returns a serialized representation of the value stored at a key.", dump::dump),
    spec!("restore", -4, W.with(Flags::NO_TOUCH), KEY1, "generic", "Creates a key from the serialized representation of a value.", dump::restore, Events::ByKey(&[kept(GENERIC, "restore")])),
    spec!("migrate", -6, D, MIGRATE_KEYS, "generic", "Atomically transfers a key from one Redis instance to another.", migrate::migrate, Events::Silent),
    spec!("move", 3, DF.with(Flags::LOCKS_LATE), KEY1, "generic", "Moves a key to another database.", keys::move_key, Events::Reported),
    spec!("keys", 2, R, NO_KEYS, "generic", "Returns all key names that match a pattern.", keys::keys),
    spec!("scan", -2, R, NO_KEYS, "generic", "Iterates over the key names in the database.", keys::scan),
    spec!("sort", -2, W.with(Flags::READS_FIRST_KEY), Keys::Found { by: sort_keys, reported: (1, 1, 1) }, "generic", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", sort::sort, Events::ByKey(&[kept(LIST, "sortstore")])),
    spec!("sort_ro", -2, R, KEY1, "generic", "Returns the sorted elements of a list, a set, or a sorted set.", sort::sort_ro),
    spec!("randomkey", 1, R, NO_KEYS, "generic", "Returns a random key name from the database.", keys::randomkey),
    spec!("touch", -2, RF, ALL_KEYS, "generic", "Returns the number of existing keys out of those specified.", keys::touch),
    container!("object", -2, Flags::NONE, "generic", "A container for object introspection commands.", keys::object_help, OBJECT),
    // hashes
    spec!("hset", -4, WF, KEY1, "hash", "Creates or modifies the value of a field in a hash.", hash::hset, Events::ByKey(&[each(HASH, "hset")])),
    spec!("hsetnx", 4, WF, KEY1, "hash", "Sets the value of a field in a hash only when the field doesn't exist.", hash::hsetnx, Events::ByKey(&[each(HASH, "hset")])),
    spec!("hmset", -4, WF, KEY1, "hash", "Sets the values of multiple fields.", hash::hmset, Events::ByKey(&[each(HASH, "hset")])),
    spec!("hget", 3, RF, KEY1, "hash", "Returns the value of a field in a hash.", hash::hget),
    spec!("hmget", -3, RF, KEY1, "hash", "Returns the values of all fields in a hash.", hash::hmget),
    spec!("hgetall", 2, R, KEY1, "hash", "Returns all fields and values in a hash.", hash::hgetall),
    spec!("hkeys", 2, R, KEY1, "hash", "Returns all fields in a hash.", hash::hkeys),
    spec!("hvals", 2, R, KEY1, "hash", "Returns all values in a hash.", hash::hvals),
    spec!("hdel", -3, DF, KEY1, "hash", "Deletes one or more fields and their values from a hash.", hash::hdel, Events::ByKey(&[each(HASH, "hdel")])),
    spec!("hlen", 2, RF, KEY1, "hash", "Returns the number of fields in a hash.", hash::hlen),
    spec!("hexists", 3, RF, KEY1, "hash", "Determines whether a field exists in a hash.", hash::hexists),
    spec!("hstrlen", 3, RF, KEY1, "hash", "Returns the length of the value of a field.", hash::hstrlen),
    spec!("hincrby", 4, WF, KEY1, "hash", "Increments the integer value of a field in a hash by a number.", hash::hincrby, Events::ByKey(&[each(HASH, "hincrby")])),
    spec!("hincrbyfloat", 4, WF, KEY1, "hash", "Increments the floating point value of a field by a number.", hash::hincrbyfloat, Events::ByKey(&[each(HASH, "hincrbyfloat")])),
    spec!("hrandfield", -2, R, KEY1, "hash", "Returns one or more random fields from a hash.", hash::hrandfield),
    spec!("hscan", -3, R, KEY1, "hash", "Iterates over fields and values of a hash.", hash::hscan),
    // lists
    spec!("lpush", -3, WF, KEY1, "list", "Prepends one or more elements to a list.", list::lpush, Events::ByKey(&[each(LIST, "lpush")])),
    spec!("rpush", -3, WF, KEY1, "list", "Appends one or more elements to a list.", list::rpush, Events::ByKey(&[each(LIST, "rpush")])),
    spec!("lpushx", -3, WF, KEY1, "list", "Prepends elements to a list only when the list exists.", list::lpushx, Events::ByKey(&[each(LIST, "lpush")])),
    spec!("rpushx", -3, WF, KEY1, "list", "Appends elements to a list only when the list exists.", list::rpushx, Events::ByKey(&[each(LIST, "rpush")])),
    spec!("lpop", -2, DF, KEY1, "list", "Returns the first elements in a list after removing it.", list::lpop, Events::ByKey(&[each(LIST, "lpop")])),
    spec!("rpop", -2, DF, KEY1, "list", "Returns and removes the last elements of a list.", list::rpop, Events::ByKey(&[each(LIST, "rpop")])),
    spec!("llen", 2, RF, KEY1, "list", "Returns the length of a list.", list::llen),
    spec!("lrange", 4, R, KEY1, "list", "Returns a range of elements from a list.", list::lrange),
    spec!("lindex", 3, R, KEY1, "list", "Returns an element from a list by its index.", list::lindex),
    spec!("lset", 4, W, KEY1, "list", "Sets the value of an element in a list by its index.", list::lset, Events::ByKey(&[each(LIST, "lset")])),
    spec!("linsert", 5, W, KEY1, "list", "Inserts an element before or after another element in a list.", list::linsert, Events::ByKey(&[each(LIST, "linsert")])),
    spec!("lrem", 4, D, KEY1, "list", "Removes elements from a list.", list::lrem, Events::ByKey(&[each(LIST, "lrem")])),
    spec!("ltrim", 4, D, KEY1, "list", "Removes elements from both ends a list.", list::ltrim, Events::ByKey(&[each(LIST, "ltrim")])),
    spec!("lpos", -3, R, KEY1, "list", "Returns the index of matching elements in a list.", list::lpos),
    spec!("lmove", 5, W, KEY12, "list", "Returns an element after popping it from one list and pushing it to another.", list::lmove, Events::Reported),
    spec!("rpoplpush", 3, W, KEY12, "list", "Returns the last element of a list after removing and pushing it to another list.", list::rpoplpush, Events::Reported),
    spec!("lmpop", -4, D, COUNTED_FIRST, "list", "Returns multiple elements from a list after removing them.", list::lmpop, Events::Reported),
    spec!("blpop", -3, D.with(Flags::NOSCRIPT).with(Flags::BLOCKING), ALL_BUT_LAST, "list", "Removes and returns the first element in a list. Blocks until an element is available otherwise.", list::blpop, Events::ByKey(&[each(LIST, "lpop")])),
    spec!("brpop", -3, D.with(Flags::NOSCRIPT).with(Flags::BLOCKING), ALL_BUT_LAST, "list", "Removes and returns the last element in a list. Blocks until an element is available otherwise.", list::brpop, Events::ByKey(&[each(LIST, "rpop")])),
    spec!("blmove", 6, W.with(Flags::NOSCRIPT).with(Flags::BLOCKING), KEY12, "list", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise.", list::blmove, Events::Reported),
    spec!("brpoplpush", 4, W.with(Flags::NOSCRIPT).with(Flags::BLOCKING), KEY12, "list", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise.", list::brpoplpush, Events::Reported),
    spec!("blmpop", -5, D.with(Flags::BLOCKING), COUNTED_SECOND, "list", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise.", list::blmpop, Events::Reported),
    // sets
    spec!("sadd", -3, WF, KEY1, "set", "Adds one or more members to a set.", set::sadd, Events::ByKey(&[each(SET, "sadd")])),
    spec!("srem", -3, DF, KEY1, "set", "Removes one or more members from a set.", set::srem, Events::ByKey(&[each(SET, "srem")])),
    spec!("smembers", 2, R, KEY1, "set", "Returns all members of a set.", set::smembers),
    spec!("sismember", 3, RF, KEY1, "set", "Determines whether a member belongs to a set.", set::sismember),
    spec!("smismember", -3, RF, KEY1, "set", "Determines whether multiple members belong to a set.", set::smismember),
    spec!("scard", 2, RF, KEY1, "set", "Returns the number of members in a set.", set::scard),
    spec!("spop", -2, DF, KEY1, "set", "Returns one or more random members from a set after removing them.", set::spop, Events::ByKey(&[each(SET, "spop")])),
    spec!("srandmember", -2, R, KEY1, "set", "Get one or multiple random members from a set.", set::srandmember),
    spec!("smove", 4, DF, KEY12, "set", "Moves a member from one set to another.", set::smove, Events::ByKey(&[each(SET, "srem"), each(SET, "sadd")])),
    spec!("sinter", -2, R, ALL_KEYS, "set", "Returns the intersect of multiple sets.", set::sinter),
    spec!("sunion", -2, R, ALL_KEYS, "set", "Returns the union of multiple sets.", set::sunion),
    spec!("sdiff", -2, R, ALL_KEYS, "set", "Returns the difference of multiple sets.", set::sdiff),
    spec!("sinterstore", -3, W.with(Flags::READS_SOURCES), ALL_KEYS, "set", "Stores the intersect of multiple sets in a key.", set::sinterstore, Events::ByKey(&[kept(SET, "sinterstore")])),
    spec!("sunionstore", -3, W.with(Flags::READS_SOURCES), ALL_KEYS, "set", "Stores the union of multiple sets in a key.", set::sunionstore, Events::ByKey(&[kept(SET, "sunionstore")])),
    spec!("sdiffstore", -3, W.with(Flags::READS_SOURCES), ALL_KEYS, "set", "Stores the difference of multiple sets in a key.", set::sdiffstore, Events::ByKey(&[kept(SET, "sdiffstore")])),
    spec!("sintercard", -3, R, COUNTED_FIRST, "set", "Returns the number of members of the intersect of multiple sets.", set::sintercard),
    spec!("sscan", -3, R, KEY1, "set", "Iterates over members of a set.", set::sscan),
    // sorted sets
    spec!("zadd", -4, WF, KEY1, "sorted-set", "Adds one or more members to a sorted set, or updates their scores.", zset::zadd, Events::Reported),
    spec!("zincrby", 4, WF, KEY1, "sorted-set", "Increments the score of a member in a sorted set.", zset::zincrby, Events::ByKey(&[each(ZSET, "zincr")])),
    spec!("zrem", -3, DF, KEY1, "sorted-set", "Removes one or more members from a sorted set.", zset::zrem, Events::ByKey(&[each(ZSET, "zrem")])),
    spec!("zscore", 3, RF, KEY1, "sorted-set", "Returns the score of a member in a sorted set.", zset::zscore),
    spec!("zmscore", -3, RF, KEY1, "sorted-set", "Returns the score of one or more members in a sorted set.", zset::zmscore),
    spec!("zcard", 2, RF, KEY1, "sorted-set", "Returns the number of members in a sorted set.", zset::zcard),
    spec!("zcount", 4, RF, KEY1, "sorted-set", "Returns the count of members in a sorted set that have scores within a range.", zset::zcount),
    spec!("zlexcount", 4, RF, KEY1, "sorted-set", "Returns the number of members in a sorted set within a lexicographical range.", zset::zlexcount),
    spec!("zrange", -4, R, KEY1, "sorted-set", "Returns members in a sorted set within a range of indexes.", zset::zrange),
    spec!("zrangestore", -5, W.with(Flags::READS_SOURCES), KEY12, "sorted-set", "Stores a range of members from sorted set in a key.", zset::zrangestore, Events::ByKey(&[kept(ZSET, "zrangestore")])),
    spec!("zrangebyscore", -4, R, KEY1, "sorted-set", "Returns members in a sorted set within a range of scores.", zset::zrangebyscore),
    spec!("zrevrangebyscore", -4, R, KEY1, "sorted-set", "Returns members in a sorted set within a range of scores in reverse order.", zset::zrevrangebyscore),
    spec!("zrangebylex", -4, R, KEY1, "sorted-set", "Returns members in a sorted set within a lexicographical range.", zset::zrangebylex),
    spec!("zrevrangebylex", -4, R, KEY1, "sorted-set", "Returns members in a sorted set within a lexicographical range in reverse order.", zset::zrevrangebylex),
    spec!("zrevrange", -4, R, KEY1, "sorted-set", "Returns members in a sorted set within a range of indexes in reverse order.", zset::zrevrange),
    spec!("zrank", -3, RF, KEY1, "sorted-set", "Returns the index of a member in a sorted set ordered by ascending scores.", zset::zrank),
    spec!("zrevrank", -3, RF, KEY1, "sorted-set", "Returns the index of a member in a sorted set ordered by descending scores.", zset::zrevrank),
    spec!("zremrangebyrank", 4, D, KEY1, "sorted-set", "Removes members in a sorted set within a range of indexes.", zset::zremrangebyrank, Events::ByKey(&[each(ZSET, "zremrangebyrank")])),
    spec!("zremrangebyscore", 4, D, KEY1, "sorted-set", "Removes members in a sorted set within a range of scores.", zset::zremrangebyscore, Events::ByKey(&[each(ZSET, "zremrangebyscore")])),
    spec!("zremrangebylex", 4, D, KEY1, "sorted-set", "Removes members in a sorted set within a lexicographical range.", zset::zremrangebylex, Events::ByKey(&[each(ZSET, "zremrangebylex")])),
    spec!("zpopmin", -2, DF, KEY1, "sorted-set", "Returns the lowest-scoring members from a sorted set after removing them.", zset::zpopmin, Events::ByKey(&[each(ZSET, "zpopmin")])),
    spec!("zpopmax", -2, DF, KEY1, "sorted-set", "Returns the highest-scoring members from a sorted set after removing them.", zset::zpopmax, Events::ByKey(&[each(ZSET, "zpopmax")])),
    spec!("bzpopmin", -3, DF.with(Flags::NOSCRIPT).with(Flags::BLOCKING), ALL_BUT_LAST, "sorted-set", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise.", zset::bzpopmin, Events::ByKey(&[each(ZSET, "zpopmin")])),
    spec!("bzpopmax", -3, DF.with(Flags::NOSCRIPT).with(Flags::BLOCKING), ALL_BUT_LAST, "sorted-set", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.", zset::bzpopmax, Events::ByKey(&[each(ZSET, "zpopmax")])),
    spec!("bzmpop", -5, D.with(Flags::BLOCKING), COUNTED_SECOND, "sorted-set", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise.", zset::bzmpop, Events::Reported),
    spec!("zmpop", -4, D, COUNTED_FIRST, "sorted-set", "Returns the highest- or lowest-scoring members from sorted sets after removing them.", zset::zmpop, Events::Reported),
    spec!("zrandmember", -2, R, KEY1, "sorted-set", "Returns one or more random members from a sorted set.", zset::zrandmember),
    spec!("zunion", -3, R, COUNTED_FIRST, "sorted-set", "Returns the union of multiple sorted sets.", zset::zunion),
    spec!("zinter", -3, R, COUNTED_FIRST, "sorted-set", "Returns the intersect of multiple sorted sets.", zset::zinter),
    spec!("zdiff", -3, R, COUNTED_FIRST, "sorted-set", "Returns the difference between multiple sorted sets.", zset::zdiff),
    spec!("zunionstore", -4, W.with(Flags::READS_SOURCES), STORE_COUNTED, "sorted-set", "Stores the union of multiple sorted sets in a key.", zset::zunionstore, Events::ByKey(&[kept(ZSET, "zunionstore")])),
    spec!("zinterstore", -4, W.with(Flags::READS_SOURCES), STORE_COUNTED, "sorted-set", "Stores the intersect of multiple sorted sets in a key.", zset::zinterstore, Events::ByKey(&[kept(ZSET, "zinterstore")])),
    spec!("zdiffstore", -4, W.with(Flags::READS_SOURCES), STORE_COUNTED, "sorted-set", "Stores the difference of multiple sorted sets in a key.", zset::zdiffstore, Events::ByKey(&[kept(ZSET, "zdiffstore")])),
    spec!("zintercard", -3, R, COUNTED_FIRST, "sorted-set", "Returns the number of members of the intersect of multiple sorted sets.", zset::zintercard),
    spec!("zscan", -3, R, KEY1, "sorted-set", "Iterates over members and scores of a sorted set.", zset::zscan),
    // streams
    spec!("xadd", -5, WF, KEY1, "stream", "Appends a new message to a stream. Creates the key if it doesn't exist.", stream::xadd, Events::Reported),
    spec!("xrange", -4, R, KEY1, "stream", "Returns the messages from a stream within a range of IDs.", stream::xrange),
    spec!("xrevrange", -4, R, KEY1, "stream", "Returns the messages from a stream within a range of IDs in reverse order.", stream::xrevrange),
    spec!("xlen", 2, RF, KEY1, "stream", "Return the number of messages in a stream.", stream::xlen),
    spec!("xdel", -3, DF, KEY1, "stream", "Returns the number of messages after removing them from a stream.", stream::xdel, Events::Reported),
    spec!("xtrim", -4, D, KEY1, "stream", "Deletes messages from the beginning of a stream.", stream::xtrim, Events::Reported),
    spec!("xsetid", -3, WF, KEY1, "stream", "An internal command for replicating stream values.", stream::xsetid, Events::Reported),
    spec!("xread", -4, R.with(Flags::BLOCKING), Keys::Found { by: stream_keys, reported: (0, 0, 0) }, "stream", "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", stream::xread),
    spec!("xreadgroup", -7, D.with(Flags::BLOCKING).with(Flags::COUNTS_LOOKUP), Keys::Found { by: stream_keys, reported: (0, 0, 0) }, "stream", "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.", stream::xreadgroup, Events::Reported),
    spec!("xack", -4, DF, KEY1, "stream", "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", stream::xack, Events::Silent),
    spec!("xpending", -3, R, KEY1, "stream", "Returns the information and entries from a stream consumer group's pending entries list.", stream::xpending),
    spec!("xclaim", -6, DF, KEY1, "stream", "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", stream::xclaim, Events::Reported),
    spec!("xautoclaim", -6, DF, KEY1, "stream", "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", stream::xautoclaim, Events::Reported),
    container!("xgroup", -2, Flags::NONE, "stream", "A container for consumer groups commands.", stream::xgroup_help, XGROUP),
    container!("xinfo", -2, Flags::NONE, "stream", "A container for stream introspection commands.", stream::xinfo_help, XINFO),
    spec!("geoadd", -5, W, KEY1, "geo", "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", geo::geoadd, Events::ByKey(&[each(ZSET, "zadd")])),
    spec!("geodist", -4, R, KEY1, "geo", "Returns the distance between two members of a geospatial index.", geo::geodist),
    spec!("geohash", -2, R, KEY1, "geo", "Returns members from a geospatial index as geohash strings.", geo::geohash),
    spec!("geopos", -2, R, KEY1, "geo", "Returns the longitude and latitude of members from a geospatial index.", geo::geopos),
    spec!("georadius", -6, W.with(Flags::READS_FIRST_KEY), Keys::Found { by: georadius_keys, reported: (1, 1, 1) }, "geo", "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", geo::georadius, Events::ByKey(&[kept(ZSET, "georadiusstore")])),
    spec!("georadius_ro", -6, R, KEY1, "geo", "Returns members from a geospatial index that are within a distance from a coordinate.", geo::georadius_ro),
    spec!("georadiusbymember", -5, W.with(Flags::READS_FIRST_KEY), Keys::Found { by: georadius_keys, reported: (1, 1, 1) }, "geo", "Queries a geospatial index for members within a distance from a member, optionally stores the result.", geo::georadiusbymember, Events::ByKey(&[kept(ZSET, "georadiusstore")])),
    spec!("georadiusbymember_ro", -5, R, KEY1, "geo", "Returns members from a geospatial index that are within a distance from a member.", geo::georadiusbymember_ro),
    spec!("geosearch", -7, R, KEY1, "geo", "Queries a geospatial index for members inside an area of a box or a circle.", geo::geosearch),
    spec!("geosearchstore", -8, W.with(Flags::READS_SOURCES), KEY12, "geo", "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", geo::geosearchstore, Events::ByKey(&[kept(ZSET, "geosearchstore")])),
    // roaring bitmaps (TairRoaring)
    spec!("tr.setbit", 4, WF, KEY1, "tairroaring", "Sets or clears one bit of a Roaring bitmap.", roaring::setbit, Events::Silent),
    spec!("tr.setbits", -3, W, KEY1, "tairroaring", "Sets bits of a Roaring bitmap.", roaring::setbits, Events::Silent),
    spec!("tr.clearbits", -3, D, KEY1, "tairroaring", "Clears bits of a Roaring bitmap.", roaring::clearbits, Events::Silent),
    spec!("tr.setrange", 4, W, KEY1, "tairroaring", "Sets every bit of a range.", roaring::setrange, Events::Silent),
    spec!("tr.fliprange", 4, W, KEY1, "tairroaring", "Inverts every bit of a range.", roaring::fliprange, Events::Silent),
    spec!("tr.appendbitarray", 4, W, KEY1, "tairroaring", "Writes a string of 0 and 1 after an offset.", roaring::appendbitarray, Events::Silent),
    spec!("tr.setbitarray", 3, W, KEY1, "tairroaring", "Replaces a Roaring bitmap with a string of 0 and 1.", roaring::setbitarray, Events::Silent),
    spec!("tr.setintarray", -3, W, KEY1, "tairroaring", "Replaces a Roaring bitmap with a list of offsets.", roaring::setintarray, Events::Silent),
    spec!("tr.appendintarray", -3, W, KEY1, "tairroaring", "Sets bits of a Roaring bitmap.", roaring::appendintarray, Events::Silent),
    spec!("tr.bitop", -4, W, ALL_KEYS, "tairroaring", "Stores AND, OR, XOR, DIFF or NOT of Roaring bitmaps.", roaring::bitop, Events::Silent),
    spec!("tr.bitopcard", -3, R, Keys::Found { by: keys_after_operation, reported: (0, 0, 0) }, "tairroaring", "Counts AND, OR, XOR, DIFF or NOT of Roaring bitmaps.", roaring::bitopcard),
    spec!("tr.optimize", 2, W, KEY1, "tairroaring", "Re-packs the containers of a Roaring bitmap.", roaring::optimize, Events::Silent),
    spec!("tr.getbit", 3, RF, KEY1, "tairroaring", "Returns one bit of a Roaring bitmap.", roaring::getbit),
    spec!("tr.getbits", -3, RF, KEY1, "tairroaring", "Returns bits of a Roaring bitmap.", roaring::getbits),
    spec!("tr.bitcount", -2, R, KEY1, "tairroaring", "Counts the set bits, optionally within a range.", roaring::bitcount),
    spec!("tr.bitpos", -3, R, KEY1, "tairroaring", "Returns the offset of the n-th bit equal to a value.", roaring::bitpos),
    spec!("tr.scan", -3, R, KEY1, "tairroaring", "Iterates over the set bits from an offset.", roaring::scan),
    spec!("tr.range", 4, R, KEY1, "tairroaring", "Returns the set bits within a range.", roaring::range_cmd),
    spec!("tr.rangebitarray", 4, R, KEY1, "tairroaring", "Returns a range as a string of 0 and 1.", roaring::rangebitarray),
    spec!("tr.min", 2, RF, KEY1, "tairroaring", "Returns the smallest set bit.", roaring::min),
    spec!("tr.max", 2, RF, KEY1, "tairroaring", "Returns the largest set bit.", roaring::max),
    spec!("tr.rank", 3, R, KEY1, "tairroaring", "Counts the set bits up to an offset.", roaring::rank),
    spec!("tr.jaccard", 3, R, KEY12, "tairroaring", "Returns the Jaccard similarity of two Roaring bitmaps.", roaring::jaccard),
    spec!("tr.contains", 3, R, KEY12, "tairroaring", "Tells whether one Roaring bitmap contains another.", roaring::contains),
    spec!("tr.stat", -2, R, KEY1, "tairroaring", "Returns statistics of a Roaring bitmap.", roaring::stat),
    // bitmaps on strings
    spec!("setbit", 4, W, KEY1, "bitmap", "Sets or clears the bit at offset of the string value.", bitmap::setbit, Events::ByKey(&[each(STRING, "setbit")])),
    spec!("getbit", 3, RF, KEY1, "bitmap", "Returns a bit value by offset.", bitmap::getbit),
    spec!("bitcount", -2, R, KEY1, "bitmap", "Counts the number of set bits in a string.", bitmap::bitcount),
    spec!("bitpos", -3, R, KEY1, "bitmap", "Finds the first set or clear bit in a string.", bitmap::bitpos),
    spec!("bitop", -4, W.with(Flags::READS_SOURCES), Keys::Range(2, -1, 1), "bitmap", "Performs bitwise operations on multiple strings, and stores the result.", bitmap::bitop, Events::ByKey(&[kept(STRING, "set")])),
    spec!("bitfield", -2, W, KEY1, "bitmap", "Performs arbitrary bitfield integer operations on strings.", bitmap::bitfield, Events::ByKey(&[each(STRING, "setbit")])),
    spec!("bitfield_ro", -2, RF, KEY1, "bitmap", "Performs arbitrary read-only bitfield integer operations on strings.", bitmap::bitfield_ro),
    // HyperLogLog
    spec!("pfadd", -2, WF, KEY1, "hyperloglog", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", hyperloglog::pfadd, Events::ByKey(&[each(STRING, "pfadd")])),
    spec!("pfcount", -2, R.with(Flags::MAY_WRITE), ALL_KEYS, "hyperloglog", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", hyperloglog::pfcount),
    spec!("pfmerge", -2, W.with(Flags::READS_SOURCES), ALL_KEYS, "hyperloglog", "Merges one or more HyperLogLog values into a single key.", hyperloglog::pfmerge, Events::ByKey(&[each(STRING, "pfadd")])),
    // pub/sub
    spec!("subscribe", -2, PUBSUB.with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "pubsub", "Listens for messages published to channels.", pubsub::subscribe_cmd),
    spec!("unsubscribe", -1, PUBSUB.with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "pubsub", "Stops listening to messages posted to channels.", pubsub::unsubscribe_cmd),
    spec!("psubscribe", -2, PUBSUB.with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "pubsub", "Listens for messages published to channels that match one or more patterns.", pubsub::psubscribe),
    spec!("punsubscribe", -1, PUBSUB.with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "pubsub", "Stops listening to messages published to channels that match one or more patterns.", pubsub::punsubscribe),
    spec!("ssubscribe", -2, PUBSUB.with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "pubsub", "Listens for messages published to shard channels.", pubsub::ssubscribe),
    spec!("sunsubscribe", -1, PUBSUB.with(Flags::WHILE_SUBSCRIBED), NO_KEYS, "pubsub", "Stops listening to messages posted to shard channels.", pubsub::sunsubscribe),
    spec!("publish", 3, Flags::PUBSUB.with(Flags::LOADING).with(Flags::STALE).with(Flags::FAST), NO_KEYS, "pubsub", "Posts a message to a channel.", pubsub::publish),
    spec!("spublish", 3, Flags::PUBSUB.with(Flags::LOADING).with(Flags::STALE).with(Flags::FAST), NO_KEYS, "pubsub", "Post a message to a shard channel.", pubsub::spublish),
    container!("pubsub", -2, Flags::NONE, "pubsub", "A container for Pub/Sub commands.", pubsub::pubsub_help, PUBSUB_SUBCOMMANDS),
    // cluster
    container!("cluster", -2, Flags::NONE, "cluster", "A container for Redis Cluster commands.", cluster::cluster_help, CLUSTER),
    container!("clusterx", -2, Flags::NONE, "cluster", "A container for the commands a cluster's control plane sends.", cluster::clusterx_help, CLUSTERX),
    spec!("readonly", 1, SCRIPTABLE, NO_KEYS, "cluster", "Enables read queries for a connection to a cluster replica node.", cluster::readonly),
    spec!("readwrite", 1, SCRIPTABLE, NO_KEYS, "cluster", "Disables read queries for a connection to a cluster replica node.", cluster::readwrite),
    spec!("asking", 1, Flags::FAST, NO_KEYS, "cluster", "Sent by cluster clients after an -ASK redirect.", cluster::asking),
];

/// Flags of the subcommands that only read or change the connection or the server.
const SUB: Flags = Flags::NOSCRIPT.with(Flags::LOADING).with(Flags::STALE);
const SUB_ADMIN: Flags = SUB.with(Flags::ADMIN);
const SLOWLOG_FLAGS: Flags = Flags::ADMIN.with(Flags::LOADING).with(Flags::STALE);
/// HELP, which Redis lets scripts run too.
const HELP: Flags = Flags::LOADING.with(Flags::STALE);
const KEY2: Keys = Keys::Range(2, 2, 1);

#[rustfmt::skip]
static CLIENT: &[CommandSpec] = &[
    spec!("client|id", 2, SUB, NO_KEYS, "connection", "Returns the unique client ID of the connection.", connection::client_id),
    spec!("client|setname", 3, SUB, NO_KEYS, "connection", "Sets the connection name.", connection::client_setname),
    spec!("client|getname", 2, SUB, NO_KEYS, "connection", "Returns the name of the connection.", connection::client_getname),
    spec!("client|setinfo", 4, SUB, NO_KEYS, "connection", "Sets information specific to the client or connection.", connection::client_setinfo),
    spec!("client|info", 2, SUB, NO_KEYS, "connection", "Returns information about the connection.", connection::client_info),
    spec!("client|list", -2, SUB_ADMIN, NO_KEYS, "connection", "Lists open connections.", connection::client_list),
    spec!("client|kill", -3, SUB_ADMIN, NO_KEYS, "connection", "Terminates open connections.", connection::client_kill),
    spec!("client|reply", 3, SUB, NO_KEYS, "connection", "Instructs the server whether to reply to commands.", connection::client_reply),
    spec!("client|unblock", -3, SUB_ADMIN, NO_KEYS, "connection", "Unblocks a client blocked by a blocking command from a different connection.", connection::client_unblock),
    spec!("client|help", 2, HELP, NO_KEYS, "connection", "Returns helpful text about the different subcommands.", connection::client_help),
];

#[rustfmt::skip]
static SCRIPT: &[CommandSpec] = &[
    spec!("script|load", 3, Flags::NOSCRIPT.with(Flags::STALE), NO_KEYS, "scripting", "Loads a server-side Lua script to the script cache.", scripting::script_load),
    spec!("script|exists", -3, Flags::NOSCRIPT, NO_KEYS, "scripting", "Determines whether server-side Lua scripts exist in the script cache.", scripting::script_exists),
    spec!("script|flush", -2, Flags::NOSCRIPT, NO_KEYS, "scripting", "Removes all server-side Lua scripts from the script cache.", scripting::script_flush),
    spec!("script|kill", 2, Flags::NOSCRIPT, NO_KEYS, "scripting", "Terminates a server-side Lua script during execution.", scripting::script_kill),
    spec!("script|help", 2, HELP, NO_KEYS, "scripting", "Returns helpful text about the different subcommands.", scripting::script_help),
];

#[rustfmt::skip]
static ACL: &[CommandSpec] = &[
    spec!("acl|cat", -2, SUB, NO_KEYS, "server", "Lists the ACL categories, or the commands inside a category.", acl::acl_cat),
    spec!("acl|deluser", -3, SUB_ADMIN, NO_KEYS, "server", "Deletes ACL users, and terminates their connections.", acl::acl_deluser),
    spec!("acl|dryrun", -4, SUB_ADMIN, NO_KEYS, "server", "Simulates the execution of a command by a user, without executing the command.", acl::acl_dryrun),
    spec!("acl|genpass", -2, SUB, NO_KEYS, "server", "Generates a pseudorandom, secure password that can be used to identify ACL users.", acl::acl_genpass),
    spec!("acl|getuser", 3, SUB_ADMIN, NO_KEYS, "server", "Lists the ACL rules of a user.", acl::acl_getuser),
    spec!("acl|list", 2, SUB_ADMIN, NO_KEYS, "server", "Dumps the effective rules in ACL file format.", acl::acl_list),
    spec!("acl|load", 2, SUB_ADMIN, NO_KEYS, "server", "Reloads the rules from the configured ACL file.", acl::acl_load),
    spec!("acl|log", -2, SUB_ADMIN, NO_KEYS, "server", "Lists recent security events generated due to ACL rules.", acl::acl_log),
    spec!("acl|save", 2, SUB_ADMIN, NO_KEYS, "server", "Saves the effective ACL rules in the configured ACL file.", acl::acl_save),
    spec!("acl|setuser", -3, SUB_ADMIN, NO_KEYS, "server", "Creates and modifies an ACL user and its rules.", acl::acl_setuser),
    spec!("acl|users", 2, SUB_ADMIN, NO_KEYS, "server", "Lists all ACL users.", acl::acl_users),
    spec!("acl|whoami", 2, SUB, NO_KEYS, "server", "Returns the authenticated username of the current connection.", acl::acl_whoami),
    spec!("acl|help", 2, HELP, NO_KEYS, "server", "Returns helpful text about the different subcommands.", acl::acl_help),
];

#[rustfmt::skip]
static FUNCTION: &[CommandSpec] = &[
    spec!("function|load", -3, Flags::NOSCRIPT.with(Flags::WRITE).with(Flags::DENYOOM), NO_KEYS, "scripting", "Creates a library.", function::function_load, Events::Silent),
    spec!("function|delete", 3, Flags::NOSCRIPT.with(Flags::WRITE), NO_KEYS, "scripting", "Deletes a library and its functions.", function::function_delete, Events::Silent),
    spec!("function|flush", -2, Flags::NOSCRIPT.with(Flags::WRITE), NO_KEYS, "scripting", "Deletes all libraries and functions.", function::function_flush, Events::Silent),
    spec!("function|dump", 2, Flags::NOSCRIPT, NO_KEYS, "scripting", "Dumps all libraries into a serialized binary payload.", function::function_dump),
    spec!("function|restore", -3, Flags::NOSCRIPT.with(Flags::WRITE).with(Flags::DENYOOM), NO_KEYS, "scripting", "Restores all libraries from a payload.", function::function_restore, Events::Silent),
    spec!("function|list", -2, Flags::NOSCRIPT, NO_KEYS, "scripting", "Returns information about all libraries.", function::function_list),
    spec!("function|stats", 2, Flags::NOSCRIPT, NO_KEYS, "scripting", "Returns information about a function during execution.", function::function_stats),
    spec!("function|kill", 2, Flags::NOSCRIPT, NO_KEYS, "scripting", "Terminates a function during execution.", function::function_kill),
    spec!("function|help", 2, HELP, NO_KEYS, "scripting", "Returns helpful text about the different subcommands.", function::function_help),
];

#[rustfmt::skip]
static COMMAND: &[CommandSpec] = &[
    spec!("command|count", 2, HELP, NO_KEYS, "server", "Returns a count of commands.", server::command_count),
    spec!("command|info", -2, HELP, NO_KEYS, "server", "Returns information about one, multiple or all commands.", server::command_info),
    spec!("command|docs", -2, HELP, NO_KEYS, "server", "Returns documentary information about one, multiple or all commands.", server::command_docs),
    spec!("command|list", -2, HELP, NO_KEYS, "server", "Returns a list of command names.", server::command_list),
    spec!("command|getkeys", -4, HELP, NO_KEYS, "server", "Extracts the key names from an arbitrary command.", server::command_getkeys),
    spec!("command|help", 2, HELP, NO_KEYS, "server", "Returns helpful text about the different subcommands.", server::command_help),
];

#[rustfmt::skip]
static CONFIG: &[CommandSpec] = &[
    spec!("config|get", -3, SUB_ADMIN, NO_KEYS, "server", "Returns the effective values of configuration parameters.", server::config_get),
    spec!("config|set", -4, SUB_ADMIN, NO_KEYS, "server", "Sets configuration parameters in-flight.", server::config_set),
    spec!("config|resetstat", 2, SUB_ADMIN, NO_KEYS, "server", "Resets the server's statistics.", server::config_resetstat),
    spec!("config|rewrite", 2, SUB_ADMIN, NO_KEYS, "server", "Persists the effective configuration to file.", server::config_rewrite),
    spec!("config|help", 2, HELP, NO_KEYS, "server", "Returns helpful text about the different subcommands.", server::config_help),
];

#[rustfmt::skip]
const LATENCY_FLAGS: Flags = Flags::ADMIN
    .with(Flags::NOSCRIPT)
    .with(Flags::LOADING)
    .with(Flags::STALE);
static LATENCY: &[CommandSpec] = &[
    spec!(
        "latency|doctor",
        2,
        LATENCY_FLAGS,
        NO_KEYS,
        "server",
        "Return a human readable latency analysis report.",
        latency::doctor
    ),
    spec!(
        "latency|histogram",
        -2,
        LATENCY_FLAGS,
        NO_KEYS,
        "server",
        "Return the cumulative distribution of latencies of a subset of commands or all.",
        latency::histogram
    ),
    spec!(
        "latency|history",
        3,
        LATENCY_FLAGS,
        NO_KEYS,
        "server",
        "Return timestamp-latency samples for the event.",
        latency::history
    ),
    spec!(
        "latency|latest",
        2,
        LATENCY_FLAGS,
        NO_KEYS,
        "server",
        "Return the latest latency samples for all events.",
        latency::latest
    ),
    spec!(
        "latency|reset",
        -2,
        LATENCY_FLAGS,
        NO_KEYS,
        "server",
        "Reset latency data for one or more events.",
        latency::reset
    ),
    spec!(
        "latency|help",
        2,
        HELP,
        NO_KEYS,
        "server",
        "Show helpful text about the different subcommands.",
        latency::help
    ),
];
static SLOWLOG: &[CommandSpec] = &[
    spec!(
        "slowlog|get",
        -2,
        SLOWLOG_FLAGS,
        NO_KEYS,
        "server",
        "Returns the slow log's entries.",
        server::slowlog_get
    ),
    spec!(
        "slowlog|len",
        2,
        SLOWLOG_FLAGS,
        NO_KEYS,
        "server",
        "Returns the number of entries in the slow log.",
        server::slowlog_len
    ),
    spec!(
        "slowlog|reset",
        2,
        SLOWLOG_FLAGS,
        NO_KEYS,
        "server",
        "Clears all entries from the slow log.",
        server::slowlog_reset
    ),
    spec!(
        "slowlog|help",
        2,
        HELP,
        NO_KEYS,
        "server",
        "Returns helpful text about the different subcommands.",
        server::slowlog_help
    ),
];

#[rustfmt::skip]
static MEMORY: &[CommandSpec] = &[
    spec!("memory|usage", -3, R.with(Flags::NO_TOUCH).with(Flags::NO_KEYMISS), KEY2, "server", "Estimates the memory usage of a key.", server::memory_usage),
    spec!("memory|help", 2, HELP, NO_KEYS, "server", "Returns helpful text about the different subcommands.", server::memory_help),
];

#[rustfmt::skip]
static XGROUP: &[CommandSpec] = &[
    spec!("xgroup|create", -5, W, KEY2, "stream", "Creates a consumer group.", stream::xgroup_create, Events::Reported),
    spec!("xgroup|createconsumer", 5, W, KEY2, "stream", "Creates a consumer in a consumer group.", stream::xgroup_createconsumer, Events::Reported),
    spec!("xgroup|delconsumer", 5, D, KEY2, "stream", "Deletes a consumer from a consumer group.", stream::xgroup_delconsumer, Events::Reported),
    spec!("xgroup|destroy", 4, D, KEY2, "stream", "Destroys a consumer group.", stream::xgroup_destroy, Events::Reported),
    spec!("xgroup|setid", -5, D, KEY2, "stream", "Sets the last-delivered ID of a consumer group.", stream::xgroup_setid, Events::Reported),
    spec!("xgroup|help", 2, HELP, NO_KEYS, "stream", "Returns helpful text about the different subcommands.", stream::xgroup_help),
];

static XINFO: &[CommandSpec] = &[
    spec!(
        "xinfo|consumers",
        4,
        R,
        KEY2,
        "stream",
        "Returns a list of the consumers in a consumer group.",
        stream::xinfo_consumers
    ),
    spec!(
        "xinfo|groups",
        3,
        R,
        KEY2,
        "stream",
        "Returns a list of the consumer groups of a stream.",
        stream::xinfo_groups
    ),
    spec!(
        "xinfo|stream",
        -3,
        R,
        KEY2,
        "stream",
        "Returns information about a stream.",
        stream::xinfo_stream
    ),
    spec!(
        "xinfo|help",
        2,
        HELP,
        NO_KEYS,
        "stream",
        "Returns helpful text about the different subcommands.",
        stream::xinfo_help
    ),
];

static OBJECT: &[CommandSpec] = &[
    spec!(
        "object|encoding",
        3,
        R.with(Flags::NO_TOUCH).with(Flags::NO_KEYMISS),
        KEY2,
        "generic",
        "Returns the internal encoding of a Redis object.",
        keys::object_encoding
    ),
    spec!(
        "object|freq",
        3,
        R.with(Flags::NO_TOUCH).with(Flags::NO_KEYMISS),
        KEY2,
        "generic",
        "Returns the logarithmic access frequency counter of a Redis object.",
        keys::object_freq
    ),
    spec!(
        "object|idletime",
        3,
        R.with(Flags::NO_TOUCH).with(Flags::NO_KEYMISS),
        KEY2,
        "generic",
        "Returns the time since the last access to a Redis object.",
        keys::object_idletime
    ),
    spec!(
        "object|refcount",
        3,
        R.with(Flags::NO_TOUCH).with(Flags::NO_KEYMISS),
        KEY2,
        "generic",
        "Returns the reference count of a value of a key.",
        keys::object_refcount
    ),
    spec!(
        "object|help",
        2,
        HELP,
        NO_KEYS,
        "generic",
        "Returns helpful text about the different subcommands.",
        keys::object_help
    ),
];

/// CLUSTER's subcommands that only read the topology, as Redis flags them.
const CLUSTER_READ: Flags = Flags::STALE;

#[rustfmt::skip]
static CLUSTER: &[CommandSpec] = &[
    spec!("cluster|info", 2, CLUSTER_READ, NO_KEYS, "cluster", "Returns information about the state of a node.", cluster::cluster_info),
    spec!("cluster|nodes", 2, CLUSTER_READ, NO_KEYS, "cluster", "Returns the cluster configuration for a node.", cluster::cluster_nodes),
    spec!("cluster|slots", 2, CLUSTER_READ, NO_KEYS, "cluster", "Returns the mapping of cluster slots to nodes.", cluster::cluster_slots),
    spec!("cluster|shards", 2, CLUSTER_READ, NO_KEYS, "cluster", "Returns the mapping of cluster slots to shards.", cluster::cluster_shards),
    spec!("cluster|myid", 2, CLUSTER_READ, NO_KEYS, "cluster", "Returns the ID of a node.", cluster::cluster_myid),
    spec!("cluster|keyslot", 3, CLUSTER_READ, NO_KEYS, "cluster", "Returns the hash slot for a key.", cluster::cluster_keyslot),
    spec!("cluster|countkeysinslot", 3, CLUSTER_READ, NO_KEYS, "cluster", "Returns the number of keys in a hash slot.", cluster::cluster_countkeysinslot),
    spec!("cluster|getkeysinslot", 4, CLUSTER_READ, NO_KEYS, "cluster", "Returns the key names in a hash slot.", cluster::cluster_getkeysinslot),
    spec!("cluster|replicas", 3, Flags::ADMIN.with(Flags::STALE), NO_KEYS, "cluster", "Lists the replica nodes of a master node.", cluster::cluster_replicas),
    spec!("cluster|slaves", 3, Flags::ADMIN.with(Flags::STALE), NO_KEYS, "cluster", "Lists the replica nodes of a master node.", cluster::cluster_replicas),
    spec!("cluster|import", 4, SUB_ADMIN.with(Flags::WRITE).with(Flags::NO_MULTI), NO_KEYS, "cluster", "Receives slots a migrating master sends.", cluster::cluster_import, Events::Silent),
    spec!("cluster|reset", -2, Flags::ADMIN.with(Flags::STALE).with(Flags::NOSCRIPT), NO_KEYS, "cluster", "Resets a node.", cluster::cluster_reset),
    spec!("cluster|help", 2, HELP, NO_KEYS, "cluster", "Returns helpful text about the different subcommands.", cluster::cluster_help),
];

#[rustfmt::skip]
static CLUSTERX: &[CommandSpec] = &[
    spec!("clusterx|version", 2, SUB_ADMIN, NO_KEYS, "cluster", "Returns the version of the node's topology.", cluster::clusterx_version),
    spec!("clusterx|myid", 2, SUB_ADMIN, NO_KEYS, "cluster", "Returns the ID of the node.", cluster::cluster_myid),
    spec!("clusterx|setnodeid", 3, SUB_ADMIN, NO_KEYS, "cluster", "Sets the ID of the node.", cluster::clusterx_setnodeid),
    spec!("clusterx|setnodes", -4, SUB_ADMIN, NO_KEYS, "cluster", "Sets the cluster's topology.", cluster::clusterx_setnodes),
    spec!("clusterx|migrate", 4, SUB_ADMIN, NO_KEYS, "cluster", "Moves slots with their keys to another master.", cluster::clusterx_migrate),
    spec!("clusterx|setslot", 6, SUB_ADMIN, NO_KEYS, "cluster", "Gives one slot to a master.", cluster::clusterx_setslot),
    spec!("clusterx|help", 2, HELP, NO_KEYS, "cluster", "Returns helpful text about the different subcommands.", cluster::clusterx_help),
];

#[rustfmt::skip]
static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    spec!("pubsub|channels", -2, PUBSUB_INFO, NO_KEYS, "pubsub", "Returns the active channels.", pubsub::pubsub_channels),
    spec!("pubsub|numsub", -2, PUBSUB_INFO, NO_KEYS, "pubsub", "Returns a count of subscribers to channels.", pubsub::pubsub_numsub),
    spec!("pubsub|numpat", 2, PUBSUB_INFO, NO_KEYS, "pubsub", "Returns a count of unique pattern subscriptions.", pubsub::pubsub_numpat),
    spec!("pubsub|shardchannels", -2, PUBSUB_INFO, NO_KEYS, "pubsub", "Returns the active shard channels.", pubsub::pubsub_shardchannels),
    spec!("pubsub|shardnumsub", -2, PUBSUB_INFO, NO_KEYS, "pubsub", "Returns the count of subscribers of shard channels.", pubsub::pubsub_shardnumsub),
    spec!("pubsub|help", 2, HELP, NO_KEYS, "pubsub", "Returns helpful text about the different subcommands.", pubsub::pubsub_help),
];
/// PUBSUB's introspection subcommands.
const PUBSUB_INFO: Flags = Flags::PUBSUB.with(Flags::LOADING).with(Flags::STALE);

/// The keys a command names, as its table row says where they are.
pub fn command_keys<'a>(spec: &CommandSpec, args: &'a [Bytes]) -> Vec<&'a [u8]> {
    match spec.keys {
        Keys::Range(first, _, _) if first <= 0 => Vec::new(),
        Keys::Range(first, last, step) => {
            let first = first as usize;
            let last = match last {
                n if n < 0 => (args.len() as i32 + n) as usize,
                n => n as usize,
            };
            let step = step.max(1) as usize;
            (first..=last.min(args.len().saturating_sub(1)))
                .step_by(step)
                .map(|i| args[i].as_ref())
                .collect()
        }
        Keys::Counted {
            count_at, fixed, ..
        } => {
            let count = key_count(args, count_at);
            fixed
                .iter()
                .filter_map(|&i| args.get(i))
                .chain(args.iter().skip(count_at + 1).take(count))
                .map(|a| a.as_ref())
                .collect()
        }
        Keys::Found { by, .. } => by(args),
    }
}

/// SORT's keys: the sorted key, and the destination of STORE.
fn sort_keys(args: &[Bytes]) -> Vec<&[u8]> {
    let store = sort::parse(args, true, true)
        .ok()
        .and_then(|(_, store)| store);
    args.get(1)
        .into_iter()
        .chain(store)
        .map(|a| a.as_ref())
        .collect()
}

/// GEORADIUS's and GEORADIUSBYMEMBER's keys: the source and the last STORE or STOREDIST key,
/// found from the sixth argument on as Redis finds them.
fn georadius_keys(args: &[Bytes]) -> Vec<&[u8]> {
    let mut keys: Vec<&[u8]> = args.get(1).map(|a| a.as_ref()).into_iter().collect();
    let mut stored = None;
    let mut i = 5;
    while i < args.len() {
        let arg = args[i].as_ref();
        if (arg.eq_ignore_ascii_case(b"store") || arg.eq_ignore_ascii_case(b"storedist"))
            && i + 1 < args.len()
        {
            stored = Some(args[i + 1].as_ref());
            i += 1;
        }
        i += 1;
    }
    keys.extend(stored);
    keys
}

/// XREAD's and XREADGROUP's keys: the first half of what follows STREAMS.
fn stream_keys(args: &[Bytes]) -> Vec<&[u8]> {
    let Some(at) = args
        .iter()
        .position(|a| a.as_ref().eq_ignore_ascii_case(b"streams"))
    else {
        return Vec::new();
    };
    let rest = &args[at + 1..];
    rest[..rest.len() / 2].iter().map(|a| a.as_ref()).collect()
}

/// TR.BITOPCARD's keys: everything after the operation.
fn keys_after_operation(args: &[Bytes]) -> Vec<&[u8]> {
    args.iter().skip(2).map(|a| a.as_ref()).collect()
}

/// The number of keys a command states at `args[at]` (`numkeys`); 0 if it is not a count,
/// which the command itself then refuses.
pub fn key_count(args: &[Bytes], at: usize) -> usize {
    args.get(at)
        .and_then(|a| std::str::from_utf8(a).ok())
        .and_then(|a| a.parse::<usize>().ok())
        .unwrap_or(0)
}

/// Every command runs a lookup here, so it hashes with Fx rather than SipHash: the names are
/// ours, not an attacker's.
static BY_NAME: LazyLock<FxHashMap<&'static [u8], &'static CommandSpec>> = LazyLock::new(|| {
    COMMANDS
        .iter()
        .map(|spec| (spec.name.as_bytes(), spec))
        .collect()
});

impl CommandSpec {
    /// Where the command sits in [`ALL_COMMANDS`], which indexes its statistics.
    pub fn index(&self) -> usize {
        position(self).unwrap_or(usize::MAX)
    }

    /// Whether `argc` arguments (the name included) fit the arity: exactly it when positive,
    /// at least its magnitude when negative.
    pub fn accepts(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }
}

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut buf = [0u8; 32];
    let lower = buf.get_mut(..name.len())?;
    for (dst, src) in lower.iter_mut().zip(name) {
        *dst = src.to_ascii_lowercase();
    }
    BY_NAME.get(&*lower).copied()
}

/// Finds a command or a subcommand by its full name (`config|get`), as COMMAND INFO and
/// LATENCY HISTOGRAM take it.
pub fn lookup_full(name: &[u8]) -> Option<&'static CommandSpec> {
    match name.iter().position(|&b| b == b'|') {
        Some(bar) => lookup(&name[..bar])?
            .subcommands
            .iter()
            .find(|sub| sub.name.as_bytes().eq_ignore_ascii_case(name)),
        None => lookup(name),
    }
}

/// Why [`resolve`] found no command to run.
pub enum Unresolved {
    Command,
    /// A container was named with a subcommand it does not have.
    Subcommand(&'static CommandSpec),
}

/// The command that runs `args`: for a container given a subcommand, the subcommand's entry.
pub fn resolve(args: &[Bytes]) -> Result<&'static CommandSpec, Unresolved> {
    let spec = args
        .first()
        .and_then(|name| lookup(name))
        .ok_or(Unresolved::Command)?;
    match args.get(1) {
        Some(sub) if !spec.subcommands.is_empty() => spec
            .subcommands
            .iter()
            .find(|s| s.name.as_bytes()[spec.name.len() + 1..].eq_ignore_ascii_case(sub))
            .ok_or(Unresolved::Subcommand(spec)),
        _ => Ok(spec),
    }
}

/// Every command and subcommand: [`COMMANDS`] in order, then each container's subcommands.
/// Per-command statistics are kept in this order.
pub static ALL_COMMANDS: LazyLock<Vec<&'static CommandSpec>> = LazyLock::new(|| {
    COMMANDS
        .iter()
        .chain(COMMANDS.iter().flat_map(|spec| spec.subcommands))
        .collect()
});

/// Where `spec` sits in [`ALL_COMMANDS`]. Commands are found by their address in
/// [`COMMANDS`], so that recording a call costs no lookup by name; subcommands, which are
/// rarely run, by a search.
pub fn position(spec: &CommandSpec) -> Option<usize> {
    let table = COMMANDS.as_ptr_range();
    let at: *const CommandSpec = spec;
    if table.contains(&at) {
        return Some((at as usize - table.start as usize) / std::mem::size_of::<CommandSpec>());
    }
    ALL_COMMANDS[COMMANDS.len()..]
        .iter()
        .position(|sub| std::ptr::eq(*sub, spec))
        .map(|i| COMMANDS.len() + i)
}

/// ACL categories a command has beyond those its flags and group give it, as Redis's command
/// table names them (`acl_categories`); the group's own category is then not added.
const EXTRA_CATEGORIES: &[(&str, &[&str])] = &[
    ("command", &["connection"]),
    ("dbsize", &["keyspace"]),
    ("flushall", &["keyspace", "dangerous"]),
    ("flushdb", &["keyspace", "dangerous"]),
    ("swapdb", &["keyspace", "dangerous"]),
    ("info", &["dangerous"]),
    ("keys", &["keyspace", "dangerous"]),
    ("migrate", &["keyspace", "dangerous"]),
    ("restore", &["keyspace", "dangerous"]),
    ("lastsave", &["admin", "dangerous"]),
    ("role", &["admin", "dangerous"]),
    ("sort", &["set", "sortedset", "list", "dangerous"]),
    ("sort_ro", &["set", "sortedset", "list", "dangerous"]),
    ("wait", &["connection"]),
    ("readonly", &["connection"]),
    ("readwrite", &["connection"]),
    ("asking", &["connection"]),
];

/// The category every command of a group has (Redis's `generic` group is `@keyspace`).
fn group_category(group: &str) -> Categories {
    match group {
        "string" => Categories::of("string"),
        "list" => Categories::of("list"),
        "set" => Categories::of("set"),
        "sorted-set" => Categories::of("sortedset"),
        "hash" => Categories::of("hash"),
        "stream" => Categories::of("stream"),
        "geo" => Categories::of("geo"),
        "bitmap" => Categories::of("bitmap"),
        "hyperloglog" => Categories::of("hyperloglog"),
        "generic" => Categories::of("keyspace"),
        "connection" => Categories::of("connection"),
        "transactions" => Categories::of("transaction"),
        "scripting" => Categories::of("scripting"),
        _ => Categories::NONE,
    }
}

/// A command's ACL categories, derived as Redis derives them (`setImplicitACLCategories`):
/// `@write`, `@read` (not for scripting commands), `@admin` and `@dangerous`, `@pubsub`,
/// `@fast` or else `@slow`, `@blocking` from its flags; its group's category, or the
/// exceptions of [`EXTRA_CATEGORIES`] (a subcommand follows its container's). A container
/// itself has no group category.
pub fn acl_categories(spec: &CommandSpec) -> Categories {
    let flags = spec.flags;
    let mut categories = Categories::NONE;
    let mut flag_category = |flag: Flags, names: &[&str]| {
        if flags.contains(flag) {
            for name in names {
                categories = categories.with(Categories::of(name));
            }
        }
    };
    flag_category(Flags::WRITE, &["write"]);
    flag_category(Flags::ADMIN, &["admin", "dangerous"]);
    flag_category(Flags::PUBSUB, &["pubsub"]);
    flag_category(Flags::FAST, &["fast"]);
    flag_category(Flags::BLOCKING, &["blocking"]);
    if !flags.contains(Flags::FAST) {
        categories = categories.with(Categories::of("slow"));
    }
    let group = group_category(spec.group);
    if flags.contains(Flags::READONLY) && group != Categories::of("scripting") {
        categories = categories.with(Categories::of("read"));
    }
    let container = spec.name.split('|').next().unwrap_or(spec.name);
    match EXTRA_CATEGORIES.iter().find(|(name, _)| *name == container) {
        Some((_, extra)) => extra
            .iter()
            .fold(categories, |all, name| all.with(Categories::of(name))),
        None if spec.subcommands.is_empty() => categories.with(group),
        None => categories,
    }
}

/// The commands as ACL rules see them, ids being [`ALL_COMMANDS`] indexes.
pub fn acl_catalog() -> Catalog {
    let index_of = |spec: &CommandSpec| spec.index();
    let entries = ALL_COMMANDS
        .iter()
        .map(|spec| CatalogEntry {
            name: spec.name,
            parent: spec
                .name
                .split_once('|')
                .and_then(|(container, _)| lookup(container.as_bytes()))
                .map(index_of),
            subcommands: spec.subcommands.iter().map(index_of).collect(),
            categories: acl_categories(spec),
        })
        .collect();
    Catalog::new(entries)
}

/// How commands use their keys where their flags do not say it (a read-only command reads
/// its keys, a write changes them, another only looks at them), from Redis's key
/// specifications: the i-th entry for the i-th key, the last for the rest. ACL key patterns
/// for reads or writes only (`%R~`, `%W~`) check it.
const KEY_ACCESS: &[(&str, &[KeyAccess])] = &[
    ("eval", &[RW]),
    ("evalsha", &[RW]),
    ("fcall", &[RW]),
    ("getset", &[RW]),
    ("getdel", &[RW]),
    ("getex", &[RW]),
    ("incr", &[RW]),
    ("decr", &[RW]),
    ("incrby", &[RW]),
    ("decrby", &[RW]),
    ("incrbyfloat", &[RW]),
    ("move", &[RW]),
    ("migrate", &[RW]),
    ("hincrby", &[RW]),
    ("hincrbyfloat", &[RW]),
    ("lpop", &[RW]),
    ("rpop", &[RW]),
    ("lmpop", &[RW]),
    ("blpop", &[RW]),
    ("brpop", &[RW]),
    ("blmpop", &[RW]),
    ("spop", &[RW]),
    ("zincrby", &[RW]),
    ("zpopmin", &[RW]),
    ("zpopmax", &[RW]),
    ("bzpopmin", &[RW]),
    ("bzpopmax", &[RW]),
    ("zmpop", &[RW]),
    ("bzmpop", &[RW]),
    ("setbit", &[RW]),
    ("strlen", &[KeyAccess::META]),
    ("exists", &[KeyAccess::META]),
    ("type", &[KeyAccess::META]),
    ("touch", &[KeyAccess::META]),
    ("hlen", &[KeyAccess::META]),
    ("hexists", &[KeyAccess::META]),
    ("hstrlen", &[KeyAccess::META]),
    ("llen", &[KeyAccess::META]),
    ("sismember", &[KeyAccess::META]),
    ("scard", &[KeyAccess::META]),
    ("zcard", &[KeyAccess::META]),
    ("xlen", &[KeyAccess::META]),
    ("memory|usage", &[KeyAccess::META]),
    ("object|encoding", &[KeyAccess::META]),
    ("object|freq", &[KeyAccess::META]),
    ("object|idletime", &[KeyAccess::META]),
    ("object|refcount", &[KeyAccess::META]),
    ("rename", &[RW, KeyAccess::WRITE]),
    ("renamenx", &[RW, KeyAccess::WRITE]),
    ("lmove", &[RW, KeyAccess::WRITE]),
    ("blmove", &[RW, KeyAccess::WRITE]),
    ("rpoplpush", &[RW, KeyAccess::WRITE]),
    ("brpoplpush", &[RW, KeyAccess::WRITE]),
    ("smove", &[RW, KeyAccess::WRITE]),
    ("copy", &[KeyAccess::READ, KeyAccess::WRITE]),
    ("sort", &[KeyAccess::READ, KeyAccess::WRITE]),
    ("georadius", &[KeyAccess::READ, KeyAccess::WRITE]),
    ("georadiusbymember", &[KeyAccess::READ, KeyAccess::WRITE]),
    ("sinterstore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("sunionstore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("sdiffstore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("zrangestore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("zunionstore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("zinterstore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("zdiffstore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("geosearchstore", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("bitop", &[KeyAccess::WRITE, KeyAccess::READ]),
    ("xreadgroup", &[KeyAccess::READ]),
    ("pfcount", &[KeyAccess::READ]),
    ("pfmerge", &[RW, KeyAccess::READ]),
];

const RW: KeyAccess = KeyAccess::READ_WRITE;

/// How `spec` uses its `i`-th key; SET and BITFIELD read their key only with some options
/// (Redis's `setGetKeys`, `bitfieldGetKeys`).
pub fn key_access(spec: &CommandSpec, args: &[Bytes], i: usize) -> KeyAccess {
    match spec.name {
        "set" if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) => return RW,
        "set" => return KeyAccess::WRITE,
        "bitfield" if bitfield_reads_only(args) => return KeyAccess::READ,
        "bitfield" => return RW,
        _ => {}
    }
    let access = KEY_ACCESS_BY_COMMAND[spec.index()];
    access[i.min(access.len() - 1)]
}

/// [`KEY_ACCESS`], or what the flags say, for each command by [`ALL_COMMANDS`] index: the
/// permission check of a user with key patterns looks it up for every key.
static KEY_ACCESS_BY_COMMAND: LazyLock<Vec<&'static [KeyAccess]>> = LazyLock::new(|| {
    ALL_COMMANDS
        .iter()
        .map(
            |spec| match KEY_ACCESS.iter().find(|(name, _)| *name == spec.name) {
                Some((_, access)) => *access,
                None if spec.flags.contains(Flags::WRITE) => &[KeyAccess::WRITE],
                None if spec.flags.contains(Flags::READONLY) => &[KeyAccess::READ],
                None => &[KeyAccess::META],
            },
        )
        .collect()
});

/// Whether a BITFIELD only reads: GET and OVERFLOW with their arguments, nothing else.
fn bitfield_reads_only(args: &[Bytes]) -> bool {
    let mut i = 2;
    while i < args.len() {
        let remaining = args.len() - i - 1;
        match &args[i] {
            a if a.eq_ignore_ascii_case(b"get") && remaining >= 2 => i += 3,
            a if a.eq_ignore_ascii_case(b"overflow") && remaining >= 1 => i += 2,
            _ => return false,
        }
    }
    true
}

/// The channels a command publishes or subscribes to, which ACL channel patterns check;
/// `true` marks PSUBSCRIBE's patterns, which must equal a pattern of the user's.
pub fn command_channels<'a>(spec: &CommandSpec, args: &'a [Bytes]) -> Vec<(&'a [u8], bool)> {
    match spec.name {
        "subscribe" | "ssubscribe" => args.iter().skip(1).map(|c| (&c[..], false)).collect(),
        "psubscribe" => args.iter().skip(1).map(|c| (&c[..], true)).collect(),
        "publish" | "spublish" => args.get(1).map(|c| (&c[..], false)).into_iter().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|a| Bytes::from(a.to_string()))
            .collect()
    }

    #[test]
    fn table_is_consistent() {
        assert_eq!(BY_NAME.len(), COMMANDS.len(), "command names are unique");
        for spec in ALL_COMMANDS.iter() {
            assert!(spec.arity != 0, "{}: arity 0", spec.name);
            assert_eq!(
                spec.name,
                spec.name.to_ascii_lowercase(),
                "{}: lowercase",
                spec.name
            );
            assert!(
                !(spec.flags.contains(Flags::WRITE) && spec.flags.contains(Flags::READONLY)),
                "{}: write and readonly",
                spec.name
            );
            let (first, _, step) = spec.keys.reported();
            if first > 0 {
                assert!(step > 0, "{}: key step", spec.name);
                assert!(
                    spec.arity < 0 || spec.arity > first,
                    "{}: first key beyond arity",
                    spec.name
                );
            }
            if let Keys::Counted { count_at, .. } = spec.keys {
                assert!(
                    count_at < spec.arity.unsigned_abs() as usize,
                    "{}",
                    spec.name
                );
            }
        }
    }

    #[test]
    fn keys_come_from_positions_or_counts() {
        let keys = |line: &str| -> Vec<String> {
            let args = args(line);
            let spec = lookup(&args[0]).unwrap();
            command_keys(spec, &args)
                .into_iter()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect()
        };
        assert_eq!(keys("get a"), ["a"]);
        assert_eq!(keys("mset a 1 b 2"), ["a", "b"]);
        assert_eq!(keys("del a b c"), ["a", "b", "c"]);
        assert_eq!(keys("bitop and d s1 s2"), ["d", "s1", "s2"]);
        assert_eq!(keys("zunionstore d 2 a b weights 1 2"), ["d", "a", "b"]);
        assert_eq!(keys("lmpop 2 a b left"), ["a", "b"]);
        assert_eq!(keys("lmpop 9 a"), ["a"]);
        assert!(keys("ping").is_empty());
    }

    #[test]
    fn subcommands_resolve_by_their_second_argument() {
        let name = |line: &str| resolve(&args(line)).ok().map(|spec| spec.name);
        assert_eq!(name("CONFIG Get maxmemory"), Some("config|get"));
        assert_eq!(name("config"), Some("config"));
        assert_eq!(name("command"), Some("command"));
        assert_eq!(name("get config"), Some("get"));
        assert!(
            matches!(resolve(&args("config nosuch")), Err(Unresolved::Subcommand(s)) if s.name == "config")
        );
        assert!(matches!(
            resolve(&args("nosuch get")),
            Err(Unresolved::Command)
        ));
        for container in COMMANDS.iter().filter(|spec| !spec.subcommands.is_empty()) {
            for sub in container.subcommands {
                assert!(
                    sub.name.starts_with(&format!("{}|", container.name)),
                    "{}",
                    sub.name
                );
                assert!(
                    sub.arity.abs() >= 2,
                    "{}: arity counts the container",
                    sub.name
                );
                assert!(sub.subcommands.is_empty(), "{}: one level", sub.name);
            }
        }
        let positions: Vec<usize> = ALL_COMMANDS
            .iter()
            .filter_map(|spec| position(spec))
            .collect();
        assert_eq!(positions, (0..ALL_COMMANDS.len()).collect::<Vec<_>>());
    }

    #[test]
    fn internal_flags_mark_the_commands_redis_treats_apart() {
        let marked = |flag: Flags| -> Vec<&str> {
            let mut names: Vec<&str> = ALL_COMMANDS
                .iter()
                .filter(|spec| spec.flags.contains(flag))
                .map(|spec| spec.name)
                .collect();
            names.sort_unstable();
            names
        };
        let in_multi = ["discard", "exec", "multi", "quit", "reset", "watch"];
        assert_eq!(marked(Flags::RUNS_IN_MULTI), in_multi);
        let subscribed = [
            "ping",
            "psubscribe",
            "punsubscribe",
            "quit",
            "reset",
            "ssubscribe",
            "subscribe",
            "sunsubscribe",
            "unsubscribe",
        ];
        assert_eq!(marked(Flags::WHILE_SUBSCRIBED), subscribed);
        assert_eq!(marked(Flags::LOCKS_LATE), ["copy", "move"]);
        assert_eq!(marked(Flags::SELECTS_DB), ["select"]);
        assert_eq!(
            marked(Flags::NO_MULTI),
            ["cluster|import", "psync", "save", "shutdown"]
        );
        let no_keymiss = [
            "memory|usage",
            "object|encoding",
            "object|freq",
            "object|idletime",
            "object|refcount",
        ];
        assert_eq!(marked(Flags::NO_KEYMISS), no_keymiss);
        assert_eq!(
            marked(Flags::READS_FIRST_KEY),
            ["georadius", "georadiusbymember", "sort"]
        );
        for spec in ALL_COMMANDS.iter() {
            let reads = spec.flags.contains(Flags::READS_SOURCES);
            assert!(
                !reads || spec.flags.contains(Flags::WRITE),
                "{} reads sources but writes nothing",
                spec.name
            );
        }
    }

    #[test]
    fn every_write_names_its_events_or_announces_none() {
        let unnamed: Vec<&str> = ALL_COMMANDS
            .iter()
            .filter(|spec| spec.flags.contains(Flags::WRITE))
            .filter(|spec| matches!(spec.events, Events::None))
            .map(|spec| spec.name)
            .collect();
        assert!(unnamed.is_empty(), "writes without events: {unnamed:?}");
        let silent_reads: Vec<&str> = ALL_COMMANDS
            .iter()
            .filter(|spec| !spec.flags.contains(Flags::WRITE))
            .filter(|spec| !matches!(spec.events, Events::None))
            .map(|spec| spec.name)
            .collect();
        assert!(silent_reads.is_empty(), "events of reads: {silent_reads:?}");
    }

    #[test]
    fn lookup_ignores_case() {
        assert_eq!(lookup(b"GeT").map(|s| s.name), Some("get"));
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'a'; 100]).is_none());
    }
}
