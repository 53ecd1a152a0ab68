//! Generic key commands.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::metadata::KeyKind;

use super::args::{db_index, int, is, scan_args, text};
use super::{help_reply, Context};
use crate::config::event_classes::GENERIC;
use crate::error::Error;
use crate::keyspace::now_ms;
use crate::types::ExpireCondition;

pub fn del(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().delete(&args[1..])?))
}

pub fn exists(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().exists(&args[1..])?))
}

pub fn touch(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().touch(&args[1..])?))
}

pub fn key_type(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let name = ctx
        .db()
        .key_type(&args[1])?
        .map_or("none", KeyKind::type_name);
    Ok(Reply::status(name))
}

/// EXPIRE key seconds [NX | XX | GT | LT], and its three siblings.
fn expire_generic(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    unit_ms: i64,
    absolute: bool,
    command: &'static str,
) -> Result<Reply, Error> {
    let mut condition = ExpireCondition::default();
    for arg in &args[3..] {
        if is(arg, "nx") {
            condition.nx = true;
        } else if is(arg, "xx") {
            condition.xx = true;
        } else if is(arg, "gt") {
            condition.gt = true;
        } else if is(arg, "lt") {
            condition.lt = true;
        } else {
            return Err(Error::msg(format!("Unsupported option {}", text(arg))));
        }
    }
    if condition.nx && (condition.xx || condition.gt || condition.lt) {
        return Err(Error::msg(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if condition.gt && condition.lt {
        return Err(Error::msg(
            "GT and LT options at the same time are not compatible",
        ));
    }
    // Redis reads the options before the time.
    let value = int(&args[2])?;
    let invalid = || Error::InvalidExpire(command);
    let mut at = value.checked_mul(unit_ms).ok_or_else(invalid)?;
    if !absolute {
        at = at.checked_add(now_ms() as i64).ok_or_else(invalid)?;
    }
    Ok(Reply::Integer(
        ctx.db().set_expiry(&args[1], at, condition)? as i64,
    ))
}

pub fn expire(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    expire_generic(ctx, args, 1000, false, "expire")
}

pub fn pexpire(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    expire_generic(ctx, args, 1, false, "pexpire")
}

pub fn expireat(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    expire_generic(ctx, args, 1000, true, "expireat")
}

pub fn pexpireat(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    expire_generic(ctx, args, 1, true, "pexpireat")
}

/// The reply of TTL-style commands: -2 missing, -1 no expiry, else `shape(expire_at_ms)`.
fn ttl_generic(
    ctx: &mut Context<'_>,
    key: &[u8],
    shape: impl Fn(u64) -> i64,
) -> Result<Reply, Error> {
    Ok(Reply::Integer(match ctx.db().expire_at(key)? {
        None => -2,
        Some(0) => -1,
        Some(at) => shape(at),
    }))
}

pub fn ttl(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ttl_generic(ctx, &args[1], |at| {
        ((at.saturating_sub(now_ms()) + 500) / 1000) as i64
    })
}

pub fn pttl(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ttl_generic(ctx, &args[1], |at| at.saturating_sub(now_ms()) as i64)
}

pub fn expiretime(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ttl_generic(ctx, &args[1], |at| ((at + 500) / 1000) as i64)
}

pub fn pexpiretime(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ttl_generic(ctx, &args[1], |at| at as i64)
}

pub fn persist(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().persist(&args[1])? as i64))
}

pub fn rename(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ctx.db().rename(&args[1], &args[2], false)?;
    Ok(Reply::OK)
}

pub fn renamenx(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().rename(&args[1], &args[2], true)? as i64
    ))
}

/// COPY source destination [DB destination-db] [REPLACE]
pub fn copy(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut target = ctx.client.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            target = db_index(&args[i + 1], ctx.keyspace.databases())?;
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if target != ctx.client.db && ctx.services.cluster.is_some() {
        return Err(Error::msg(
            "Copying to another database is not allowed in cluster mode",
        ));
    }
    if target == ctx.client.db && args[1] == args[2] {
        return Err(Error::msg("source and destination objects are the same"));
    }
    let copied = ctx
        .db()
        .copy_to(&args[1], ctx.db_at(target), &args[2], replace)?;
    ctx.notify_in(target, GENERIC, "copy_to", &args[2]);
    Ok(Reply::Integer(copied as i64))
}

pub fn move_key(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.services.cluster.is_some() {
        return Err(Error::msg("MOVE is not allowed in cluster mode"));
    }
    let target = db_index(&args[2], ctx.keyspace.databases())?;
    if target == ctx.client.db {
        return Err(Error::msg("source and destination objects are the same"));
    }
    ctx.notify(GENERIC, "move_from", &args[1]);
    ctx.notify_in(target, GENERIC, "move_to", &args[1]);
    Ok(Reply::Integer(
        ctx.db().move_to(&args[1], ctx.db_at(target))? as i64,
    ))
}

pub fn keys(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let keys = ctx.db().keys(&args[1])?;
    Ok(Reply::Array(keys.into_iter().map(Reply::Bulk).collect()))
}

fn kind_by_name(name: &[u8]) -> Option<KeyKind> {
    KeyKind::ALL
        .into_iter()
        .find(|kind| is(name, kind.type_name()))
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
pub fn scan(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let options = scan_args(&args[1..], true)?;
    let kind = options.type_name.map(kind_by_name);
    let mut page = ctx.db().scan(
        options.cursor,
        options.pattern,
        options.count,
        kind.flatten(),
    )?;
    if kind == Some(None) {
        // An unknown type matches nothing, as in Redis.
        page.keys.clear();
    }
    Ok(Reply::Array(vec![
        Reply::bulk(page.cursor.to_string()),
        Reply::Array(page.keys.into_iter().map(Reply::Bulk).collect()),
    ]))
}

pub fn randomkey(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk_or_null(ctx.db().random_key()?))
}

/// OBJECT ENCODING key
pub fn object_encoding(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk_or_null(ctx.db().encoding(&args[2])?))
}

/// OBJECT REFCOUNT key
pub fn object_refcount(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(ctx
        .db()
        .refcount(&args[2])?
        .map_or(Reply::Null, Reply::Integer))
}

/// OBJECT IDLETIME key
pub fn object_idletime(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(ctx
        .db()
        .idle_secs(&args[2])?
        .map_or(Reply::Null, |idle| Reply::Integer(idle as i64)))
}

/// OBJECT FREQ: Redis tracks access frequency only under an LFU `maxmemory-policy`, and
/// Shale's policy is always `noeviction`, so an existing key gets Redis's answer for that case.
pub fn object_freq(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.db().encoding(&args[2])?.is_none() {
        return Ok(Reply::Null);
    }
    Err(Error::msg(
        "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
    ))
}

/// OBJECT HELP
pub fn object_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
    ]))
}
