//! Hash commands.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::metadata::KeyKind;

use super::args::{check_paired_count, element_scan_args, int, is, random_count, scan_matches};
use super::{bulks, Context};
use crate::error::Error;
use crate::types::numbers::{classify_long_double, LongDouble};

fn field_pairs(args: &[Bytes], command: &str) -> Result<Vec<(Bytes, Bytes)>, Error> {
    if !args.len().is_multiple_of(2) {
        return Err(Error::WrongArity(command.into()));
    }
    Ok(args
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect())
}

/// HSET key field value [field value ...]
pub fn hset(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let pairs = field_pairs(&args[2..], "hset")?;
    Ok(Reply::Integer(ctx.db().hset(&args[1], &pairs)?))
}

/// HMSET key field value [field value ...]; replies OK, which YCSB's client relies on.
pub fn hmset(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let pairs = field_pairs(&args[2..], "hmset")?;
    ctx.db().hset(&args[1], &pairs)?;
    Ok(Reply::OK)
}

pub fn hsetnx(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().hsetnx(&args[1], &args[2], &args[3])? as i64,
    ))
}

pub fn hget(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk_or_null(ctx.db().hget(&args[1], &args[2])?))
}

pub fn hmget(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let values = ctx.db().hmget(&args[1], &args[2..])?;
    Ok(Reply::Array(
        values.into_iter().map(Reply::bulk_or_null).collect(),
    ))
}

pub fn hgetall(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::BulkMap(bulks(ctx.db().hgetall(&args[1])?)?))
}

pub fn hkeys(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let pairs = ctx.db().hgetall(&args[1])?.into_pairs();
    Ok(Reply::Array(
        pairs.into_iter().map(|(f, _)| Reply::Bulk(f)).collect(),
    ))
}

pub fn hvals(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let pairs = ctx.db().hgetall(&args[1])?.into_pairs();
    Ok(Reply::Array(
        pairs.into_iter().map(|(_, v)| Reply::Bulk(v)).collect(),
    ))
}

pub fn hdel(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().hdel(&args[1], &args[2..])?))
}

pub fn hlen(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().hlen(&args[1])?))
}

pub fn hexists(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().hexists(&args[1], &args[2])? as i64))
}

pub fn hstrlen(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().hstrlen(&args[1], &args[2])?))
}

pub fn hincrby(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let delta = int(&args[3])?;
    Ok(Reply::Integer(ctx.db().hincrby(&args[1], &args[2], delta)?))
}

pub fn hincrbyfloat(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    // Redis reads the increment before it looks the hash up.
    match classify_long_double(&args[3]) {
        LongDouble::Invalid => return Err(Error::NotFloat),
        LongDouble::Infinite => return Err(Error::msg("value is NaN or Infinity")),
        LongDouble::Finite => {}
    }
    Ok(Reply::Bulk(
        ctx.db().hincrbyfloat(&args[1], &args[2], &args[3])?,
    ))
}

/// HRANDFIELD key [count [WITHVALUES]]
pub fn hrandfield(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let count = args.get(2).map(|c| random_count(c)).transpose()?;
    let with_values = match args.get(3) {
        None => false,
        Some(a) if is(a, "withvalues") && args.len() == 4 => true,
        Some(_) => return Err(Error::Syntax),
    };
    if let Some(count) = count.filter(|_| with_values) {
        check_paired_count(count)?;
    }
    let picked = ctx.db().hrandfield(&args[1], count)?;
    let Some(_) = count else {
        return Ok(Reply::bulk_or_null(
            picked.into_iter().next().map(|(f, _)| f),
        ));
    };
    if with_values && ctx.client.resp3 {
        return Ok(Reply::Array(
            picked
                .into_iter()
                .map(|(f, v)| Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)]))
                .collect(),
        ));
    }
    let mut out = Vec::new();
    for (field, value) in picked {
        out.push(Reply::Bulk(field));
        if with_values {
            out.push(Reply::Bulk(value));
        }
    }
    Ok(Reply::Array(out))
}

/// The reply of every SCAN-family command: `[cursor, [items...]]`.
pub(super) fn scan_reply(cursor: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![Reply::bulk(cursor.to_string()), Reply::Array(items)])
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]
pub fn hscan(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let db = ctx.db();
    let Some(options) = element_scan_args(&args[2..], || db.exists_as(&args[1], &[KeyKind::Hash]))?
    else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let after = db.element_cursor(&args[1], options.cursor);
    let page = db.hscan(&args[1], after.as_deref(), options.count)?;
    let cursor = page
        .resume
        .map_or(0, |last| db.save_element_cursor(&args[1], &last));
    let mut items = Vec::new();
    for (field, value) in page.items {
        if scan_matches(options.pattern, &field) {
            items.push(Reply::Bulk(field));
            items.push(Reply::Bulk(value));
        }
    }
    Ok(scan_reply(cursor, items))
}
