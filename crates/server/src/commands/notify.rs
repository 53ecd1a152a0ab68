//! Keyspace notifications (`notify-keyspace-events`): which events each command causes.
//!
//! The type layer reports which keys a command's writes changed, and whether each was deleted
//! (read from the write batch itself, see [`crate::keyspace::WrittenKeys`]); this file names the
//! event, as Redis does for each command, and hands it to the notifications service
//! ([`crate::services::notifications`]), which publishes it.

use bytes::Bytes;

use super::args::is;
use super::table::key_count;
use super::{command_keys, CommandSpec, Context, Flags};
use crate::config::event_classes::*;
use crate::keyspace::WrittenKey;
use crate::services::notifications::{Event, Notifications};

/// Publishes the events of one command that changed `written`; inside a transaction, holds
/// them in `ctx.events` until it commits.
pub fn command_events(
    ctx: &mut Context<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
    written: &[WrittenKey],
) {
    let services = ctx.services;
    let notifications = services.notifications();
    let flags = services.notify_classes();
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
            &notifications,
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
            emit(ctx, &notifications, class, name, db, &written_key.key);
        }
    }
}

/// Publishes an event, or inside a transaction holds it until the transaction commits.
fn emit(
    ctx: &mut Context<'_>,
    notifications: &Notifications<'_>,
    class: u32,
    name: &'static str,
    db: u8,
    key: &[u8],
) {
    if ctx.txn.is_some() {
        ctx.events.push(Event::new(class, name, db, key));
    } else if notifications.enabled(class) {
        notifications.publish(Event::new(class, name, db, key));
    }
}

/// Publishes `keymiss` for each key that a command read and did not find, as Redis does
/// on every read lookup that misses. Checked after the command, only while class `m` is on:
/// the keys a read-only command names, and the keys a storing command reads from.
pub fn miss_events(ctx: &mut Context<'_>, spec: &CommandSpec, args: &[Bytes]) {
    let services = ctx.services;
    let notifications = services.notifications();
    if !notifications.enabled(KEY_MISS) {
        return;
    }
    let keys = command_keys(spec, args);
    let flags = spec.flags;
    let read: &[&[u8]] = if flags.contains(Flags::NO_KEYMISS) {
        return;
    } else if flags.contains(Flags::READS_SOURCES) {
        keys.get(1..).unwrap_or_default()
    } else if flags.contains(Flags::READS_FIRST_KEY) {
        keys.get(..1).unwrap_or_default()
    } else if flags.contains(Flags::READONLY) {
        &keys
    } else {
        return;
    };
    let missing: Vec<Vec<u8>> = read
        .iter()
        .filter(|key| ctx.db().exists(&[Bytes::copy_from_slice(key)]).ok() == Some(0))
        .map(|key| key.to_vec())
        .collect();
    let db = ctx.client.db as u8;
    for key in missing {
        emit(ctx, &notifications, KEY_MISS, "keymiss", db, &key);
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
