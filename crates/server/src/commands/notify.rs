//! Keyspace notifications (`notify-keyspace-events`): the events of one command.
//!
//! A command's table row names its events (`Events::ByKey`), or its handler reports them
//! (`Context::notify`) where they depend on its options or outcome. The keyspace reports which
//! keys the command's write changed, and whether each was created or deleted (read from the
//! write batch itself, see [`crate::keyspace::WrittenKeys`]). This file puts the two together
//! as Redis announces them (`new` first, the command's events, `del` after them) and hands
//! them to the notifications service ([`crate::services::notifications`]), which publishes
//! them. `keymiss` is found here too.

use bytes::Bytes;

use super::table::{Events, KeyEvent};
use super::{command_keys, CommandSpec, Context, Flags};
use crate::config::event_classes::*;
use crate::keyspace::WrittenKey;
use crate::services::notifications::{Event, Notifications};

/// An event a handler reported (`Context::notify`), for a key of database `db` (by number).
pub struct Reported {
    pub db: u8,
    pub event: KeyEvent,
    pub key: Vec<u8>,
}

/// Publishes the events of one command whose write changed `written`; inside a transaction,
/// holds them in `ctx.events` until it commits. A created key gets `new` first, as Redis
/// announces it when it adds the key; then each key the command names (or its handler
/// reported) gets the command's event, if the write changed it, and `del` after it if the
/// write removed it and the event was not a generic one (`rename_from`, `del`, ...).
pub fn command_events(
    ctx: &mut Context<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
    written: &[WrittenKey],
    reported: Vec<Reported>,
) {
    let services = ctx.services;
    let notifications = services.notifications();
    if services.notify_classes() & (KEYSPACE | KEYEVENT) == 0 {
        return;
    }
    // Written keys name stored databases; events name the databases clients select.
    let (keyspace, txn) = (ctx.keyspace, ctx.txn);
    let mut written: Vec<(u8, &WrittenKey, bool)> = written
        .iter()
        .map(|w| (keyspace.db_number_in(w.db, txn), w, false))
        .collect();
    for &(db, w, _) in written.iter().filter(|(_, w, _)| w.created) {
        emit(ctx, &notifications, NEW, "new", db, &w.key);
    }
    let db = ctx.client.db as u8;
    let events: Vec<(u8, KeyEvent, Vec<u8>)> = match spec.events {
        Events::ByKey(per_key) => command_keys(spec, args)
            .into_iter()
            .enumerate()
            .filter_map(|(i, key)| {
                let event = per_key.get(i).or(per_key.last())?;
                Some((db, *event, key.to_vec()))
            })
            .collect(),
        Events::Reported => reported
            .into_iter()
            .map(|r| (r.db, r.event, r.key))
            .collect(),
        Events::None | Events::Silent => Vec::new(),
    };
    // Each key's events in the order given, then its `del`.
    let mut at = 0;
    while at < events.len() {
        let (db, _, key) = &events[at];
        let same_key = events[at..]
            .iter()
            .take_while(|(d, _, k)| d == db && k == key)
            .count();
        let group = &events[at..at + same_key];
        at += same_key;
        let Some(entry) = written
            .iter_mut()
            .find(|(d, w, done)| !done && d == db && w.key == *key)
        else {
            continue;
        };
        entry.2 = true;
        let deleted = entry.1.deleted;
        let mut generic = false;
        for (i, (db, event, key)) in group.iter().enumerate() {
            // A key named twice in a row (DEL a a, BLPOP a a) gets its event once.
            let repeated = group[..i]
                .iter()
                .any(|(_, e, _)| e.class == event.class && e.name == event.name);
            let left_out = repeated || (event.unless_deleted && deleted);
            if !left_out {
                emit(ctx, &notifications, event.class, event.name, *db, key);
                generic |= event.class == GENERIC;
            }
        }
        if deleted && !generic {
            emit(ctx, &notifications, GENERIC, "del", *db, key);
        }
    }
    for (db, w, done) in written {
        if w.deleted && !done {
            emit(ctx, &notifications, GENERIC, "del", db, &w.key);
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
