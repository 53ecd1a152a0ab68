//! Keyspace notifications (`notify-keyspace-events`).
//!
//! The type layer reports which keys a command's writes changed, and whether each was deleted
//! (read from the write batch itself, see [`crate::types::WrittenKeys`]); this file names the
//! event, as Redis does for each command, and publishes `__keyspace@<db>__:<key>` and
//! `__keyevent@<db>__:<event>` messages.

use bytes::Bytes;

use super::args::is;
use super::table::key_count;
use super::{command_keys, CommandSpec, Context, Flags};
use crate::server::pubsub::Kind;
use crate::server::Services;
use crate::types::WrittenKey;

/// Event classes, as letters in `notify-keyspace-events`.
pub const KEYSPACE: u32 = 1;
pub const KEYEVENT: u32 = 1 << 1;
const GENERIC: u32 = 1 << 2;
const STRING: u32 = 1 << 3;
const LIST: u32 = 1 << 4;
const SET: u32 = 1 << 5;
const HASH: u32 = 1 << 6;
const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
/// Never fires: Shale never evicts.
const EVICTED: u32 = 1 << 9;
/// Streams; no stream commands exist yet.
const STREAM: u32 = 1 << 10;
/// Module events; Shale has no modules.
const MODULE: u32 = 1 << 11;
/// `new`: a key was created.
pub const NEW: u32 = 1 << 12;
/// `keymiss`: a read found no key.
pub const KEY_MISS: u32 = 1 << 13;
/// What `A` stands for; as in Redis, it leaves out `n` and `m`.
const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The type classes and `n` in the order Redis prints them, then the others.
const CLASS_LETTERS: [(char, u32); 11] = [
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('d', MODULE),
    ('n', NEW),
];
const OTHER_LETTERS: [(char, u32); 3] = [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)];

/// Parses `notify-keyspace-events` as Redis 7.0 does; `None` for a letter it does not know.
pub fn parse_classes(text: &str) -> Option<u32> {
    text.chars().try_fold(0, |flags, c| match c {
        'A' => Some(flags | ALL),
        c => CLASS_LETTERS
            .iter()
            .chain(&OTHER_LETTERS)
            .find(|(letter, _)| *letter == c)
            .map(|(_, flag)| flags | flag),
    })
}

/// The spelling of `flags` that CONFIG GET shows, as Redis 7.0 writes it: `A` stands for all
/// of its classes, and then, as in Redis, `n` goes unprinted.
pub fn format_classes(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        let set = CLASS_LETTERS.iter().filter(|(_, flag)| flags & flag != 0);
        out.extend(set.map(|(letter, _)| letter));
    }
    let set = OTHER_LETTERS.iter().filter(|(_, flag)| flags & flag != 0);
    out.extend(set.map(|(letter, _)| letter));
    out
}

/// The error for a class letter Redis does not know, in Redis's words.
pub const INVALID_CLASSES: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

/// An event held back until its transaction commits.
pub struct Event {
    class: u32,
    name: &'static str,
    db: u8,
    key: Vec<u8>,
}

/// Publishes events held back by a transaction, once it has committed.
pub fn publish_committed(services: &Services, events: Vec<Event>) {
    let flags = services.notify_classes();
    for event in events {
        if flags & event.class != 0 {
            publish_with(services, flags, event.name, event.db, &event.key);
        }
    }
}

/// Publishes the events of one command that changed `written`; inside a transaction, holds
/// them in `ctx.events` until it commits.
pub fn command_events(
    ctx: &mut Context<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
    written: &[WrittenKey],
) {
    let flags = ctx.services.notify_classes();
    if flags & (KEYSPACE | KEYEVENT) == 0 {
        return;
    }
    let keys = command_keys(spec, args);
    // Redis announces a new key as it adds it, before the command's own events.
    // Written keys name stored databases; events name the databases clients select.
    let (keyspace, txn) = (ctx.keyspace, ctx.txn);
    let number = |w: &WrittenKey| keyspace.db_number_in(w.db, txn);
    for written_key in written.iter().filter(|w| w.created) {
        emit(
            ctx,
            flags,
            NEW,
            "new",
            number(written_key),
            &written_key.key,
        );
    }
    let position_of = |w: &WrittenKey| keys.iter().position(|k| *k == w.key.as_slice());
    // In the order the command names its keys (RENAME: rename_from, then rename_to).
    let mut written: Vec<(Option<usize>, &WrittenKey)> =
        written.iter().map(|w| (position_of(w), w)).collect();
    written.sort_by_key(|(position, _)| position.unwrap_or(usize::MAX));
    for (position, written_key) in written {
        let db = number(written_key);
        let other_db = db as usize != ctx.client.db;
        for (class, name) in events(spec.name, args, position, other_db, written_key.deleted) {
            emit(ctx, flags, class, name, db, &written_key.key);
        }
    }
}

/// Publishes an event, or inside a transaction holds it until the transaction commits.
fn emit(ctx: &mut Context<'_>, flags: u32, class: u32, name: &'static str, db: u8, key: &[u8]) {
    if ctx.txn.is_some() {
        ctx.events.push(Event {
            class,
            name,
            db,
            key: key.to_vec(),
        });
    } else if flags & class != 0 {
        publish_with(ctx.services, flags, name, db, key);
    }
}

/// Publishes `keymiss` for each key that a command read and did not find, as Redis does
/// on every read lookup that misses. Checked after the command, only while class `m` is on:
/// the keys a read-only command names, and the keys a storing command reads from.
pub fn miss_events(ctx: &mut Context<'_>, spec: &CommandSpec, args: &[Bytes]) {
    let flags = ctx.services.notify_classes();
    if flags & KEY_MISS == 0 || flags & (KEYSPACE | KEYEVENT) == 0 {
        return;
    }
    let keys = command_keys(spec, args);
    let read: &[&[u8]] = match spec.name {
        // Introspection that Redis looks up without notifying.
        "object|encoding" | "object|freq" | "object|idletime" | "object|refcount"
        | "memory|usage" => return,
        "sinterstore" | "sunionstore" | "sdiffstore" | "zunionstore" | "zinterstore"
        | "zdiffstore" | "zrangestore" | "pfmerge" => keys.get(1..).unwrap_or_default(),
        "bitop" => keys.get(1..).unwrap_or_default(),
        "sort" => keys.get(..1).unwrap_or_default(),
        _ if spec.flags.contains(Flags::READONLY) => &keys,
        _ => return,
    };
    let missing: Vec<Vec<u8>> = read
        .iter()
        .filter(|key| ctx.db().exists(&[Bytes::copy_from_slice(key)]).ok() == Some(0))
        .map(|key| key.to_vec())
        .collect();
    let db = ctx.client.db as u8;
    for key in missing {
        emit(ctx, flags, KEY_MISS, "keymiss", db, &key);
    }
}

/// The `expired` event of a key the expiry cycle removed.
pub fn expired_event(services: &Services, db: u8, key: &[u8]) {
    let flags = services.notify_classes();
    if flags & EXPIRED != 0 {
        publish_with(services, flags, "expired", db, key);
    }
}

fn publish_with(services: &Services, flags: u32, event: &str, db: u8, key: &[u8]) {
    let pubsub = &services.pubsub;
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        pubsub.publish(
            Kind::Channel,
            &Bytes::from(channel),
            &Bytes::copy_from_slice(event.as_bytes()),
        );
    }
    if flags & KEYEVENT != 0 {
        let channel = Bytes::from(format!("__keyevent@{db}__:{event}"));
        pubsub.publish(Kind::Channel, &channel, &Bytes::copy_from_slice(key));
    }
}

/// Redis's events for a key that `command` changed: `position` is where the key stands among
/// the command's keys, `deleted` whether the write removed it.
fn events(
    command: &str,
    args: &[Bytes],
    position: Option<usize>,
    other_db: bool,
    deleted: bool,
) -> Vec<(u32, &'static str)> {
    // Options of SET and GETEX follow the value or the key; ZADD's come before the scores.
    let has = |option: &str| match command {
        "set" => args.iter().skip(3).any(|a| is(a, option)),
        "zadd" => args
            .iter()
            .skip(2)
            .take_while(|a| {
                ["nx", "xx", "gt", "lt", "ch", "incr"]
                    .iter()
                    .any(|o| is(a, o))
            })
            .any(|a| is(a, option)),
        _ => args.iter().skip(2).any(|a| is(a, option)),
    };
    // The LEFT|RIGHT or MIN|MAX after the keys of LMPOP, BLMPOP, ZMPOP and BZMPOP.
    let after_keys = |count_at: usize| args.get(count_at + 1 + key_count(args, count_at));
    let end_event = |arg: Option<&Bytes>, left: &'static str, right: &'static str| {
        if arg.is_some_and(|a| is(a, "left")) {
            left
        } else {
            right
        }
    };
    let source = position == Some(0);
    let primary: Option<(u32, &'static str)> = match command {
        "del" | "unlink" | "getdel" => return vec![(GENERIC, "del")],
        "expire" | "pexpire" | "expireat" | "pexpireat" if deleted => {
            return vec![(GENERIC, "del")]
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" => Some((GENERIC, "expire")),
        "persist" => Some((GENERIC, "persist")),
        "getex" if has("persist") => Some((GENERIC, "persist")),
        "getex" => Some((GENERIC, "expire")),
        "rename" | "renamenx" if source => Some((GENERIC, "rename_from")),
        "rename" | "renamenx" => Some((GENERIC, "rename_to")),
        "copy" => Some((GENERIC, "copy_to")),
        "move" if other_db => Some((GENERIC, "move_to")),
        "move" => Some((GENERIC, "move_from")),
        "set" | "setnx" | "getset" | "mset" | "msetnx" | "bitop" => Some((STRING, "set")),
        "setex" | "psetex" => {
            return vec![(STRING, "set"), (GENERIC, "expire")];
        }
        "incr" | "decr" | "incrby" | "decrby" => Some((STRING, "incrby")),
        "incrbyfloat" => Some((STRING, "incrbyfloat")),
        "append" => Some((STRING, "append")),
        "setrange" => Some((STRING, "setrange")),
        "setbit" | "bitfield" => Some((STRING, "setbit")),
        "pfadd" | "pfmerge" => Some((STRING, "pfadd")),
        "lpush" | "lpushx" => Some((LIST, "lpush")),
        "rpush" | "rpushx" => Some((LIST, "rpush")),
        "lpop" | "blpop" => Some((LIST, "lpop")),
        "rpop" | "brpop" => Some((LIST, "rpop")),
        "lmpop" => Some((LIST, end_event(after_keys(1), "lpop", "rpop"))),
        "blmpop" => Some((LIST, end_event(after_keys(2), "lpop", "rpop"))),
        "linsert" => Some((LIST, "linsert")),
        "lset" => Some((LIST, "lset")),
        "lrem" => Some((LIST, "lrem")),
        "ltrim" => Some((LIST, "ltrim")),
        "rpoplpush" | "brpoplpush" if source => Some((LIST, "rpop")),
        "rpoplpush" | "brpoplpush" => Some((LIST, "lpush")),
        "lmove" | "blmove" if source => Some((LIST, end_event(args.get(3), "lpop", "rpop"))),
        "lmove" | "blmove" => Some((LIST, end_event(args.get(4), "lpush", "rpush"))),
        "hset" | "hsetnx" | "hmset" => Some((HASH, "hset")),
        "hdel" => Some((HASH, "hdel")),
        "hincrby" => Some((HASH, "hincrby")),
        "hincrbyfloat" => Some((HASH, "hincrbyfloat")),
        "sadd" => Some((SET, "sadd")),
        "srem" => Some((SET, "srem")),
        "spop" => Some((SET, "spop")),
        "smove" if source => Some((SET, "srem")),
        "smove" => Some((SET, "sadd")),
        "sinterstore" | "sunionstore" | "sdiffstore" if deleted => None,
        "sinterstore" => Some((SET, "sinterstore")),
        "sunionstore" => Some((SET, "sunionstore")),
        "sdiffstore" => Some((SET, "sdiffstore")),
        "zadd" if has("incr") => Some((ZSET, "zincr")),
        "zadd" => Some((ZSET, "zadd")),
        "zincrby" => Some((ZSET, "zincr")),
        "zrem" => Some((ZSET, "zrem")),
        "zremrangebyrank" => Some((ZSET, "zremrangebyrank")),
        "zremrangebyscore" => Some((ZSET, "zremrangebyscore")),
        "zremrangebylex" => Some((ZSET, "zremrangebylex")),
        "zpopmin" | "bzpopmin" => Some((ZSET, "zpopmin")),
        "zpopmax" | "bzpopmax" => Some((ZSET, "zpopmax")),
        "zmpop" if after_keys(1).is_some_and(|a| is(a, "max")) => Some((ZSET, "zpopmax")),
        "bzmpop" if after_keys(2).is_some_and(|a| is(a, "max")) => Some((ZSET, "zpopmax")),
        "zmpop" | "bzmpop" => Some((ZSET, "zpopmin")),
        "sort" if deleted => None,
        "sort" => Some((LIST, "sortstore")),
        "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" if deleted => None,
        "zunionstore" => Some((ZSET, "zunionstore")),
        "zinterstore" => Some((ZSET, "zinterstore")),
        "zdiffstore" => Some((ZSET, "zdiffstore")),
        "zrangestore" => Some((ZSET, "zrangestore")),
        _ => None,
    };
    let mut out: Vec<(u32, &'static str)> = primary.into_iter().collect();
    if command == "set" && (has("ex") || has("px") || has("exat") || has("pxat")) {
        out.push((GENERIC, "expire"));
    }
    let moved_away = matches!(command, "rename" | "renamenx" | "move") && deleted;
    if deleted && !moved_away {
        out.push((GENERIC, "del"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_letters_round_trip() {
        assert_eq!(
            parse_classes("KEA").map(format_classes).as_deref(),
            Some("AKE")
        );
        assert_eq!(
            parse_classes("Elg").map(format_classes).as_deref(),
            Some("glE")
        );
        assert_eq!(parse_classes(""), Some(0));
        assert_eq!(parse_classes("Kq"), None);
        // Spellings Redis 7.0's CONFIG GET gives back.
        for (set, get) in [
            ("$lshzxeKE", "$lshzxeKE"),
            ("En", "nE"),
            ("Kt", "tK"),
            ("AKEmn", "AKEm"),
            ("KEg$lshzxetd", "AKE"),
            ("x$", "$x"),
            ("gd", "gd"),
        ] {
            assert_eq!(parse_classes(set).map(format_classes).as_deref(), Some(get));
        }
    }

    #[test]
    fn events_follow_redis() {
        let args = |line: &str| -> Vec<Bytes> {
            line.split(' ')
                .map(|a| Bytes::from(a.to_string()))
                .collect()
        };
        assert_eq!(
            events("lpop", &args("lpop l"), Some(0), false, true),
            [(LIST, "lpop"), (GENERIC, "del")]
        );
        assert_eq!(
            events("set", &args("set k v EX 10"), Some(0), false, false),
            [(STRING, "set"), (GENERIC, "expire")]
        );
        assert_eq!(
            events(
                "lmove",
                &args("lmove a b LEFT RIGHT"),
                Some(1),
                false,
                false
            ),
            [(LIST, "rpush")]
        );
        assert_eq!(
            events("rename", &args("rename a b"), Some(0), false, true),
            [(GENERIC, "rename_from")]
        );
        assert_eq!(
            events("expire", &args("expire k -1"), Some(0), false, true),
            [(GENERIC, "del")]
        );
    }
}
