//! Set commands.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::metadata::KeyKind;

use super::args::{
    element_scan_args, intercard_limit, numkeys, pop_count, random_count, scan_matches,
};
use super::hash::scan_reply;
use super::Context;
use crate::error::Error;
use crate::types::set::SetOp;

fn members(values: Vec<Bytes>) -> Reply {
    Reply::Set(values.into_iter().map(Reply::Bulk).collect())
}

pub fn sadd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().sadd(&args[1], &args[2..])?))
}

pub fn srem(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().srem(&args[1], &args[2..])?))
}

pub fn smembers(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(members(ctx.db().smembers(&args[1])?))
}

pub fn sismember(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let found = ctx.db().smismember(&args[1], &args[2..3])?;
    Ok(Reply::Integer(found[0] as i64))
}

pub fn smismember(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let found = ctx.db().smismember(&args[1], &args[2..])?;
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|f| Reply::Integer(f as i64))
            .collect(),
    ))
}

pub fn scard(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().scard(&args[1])?))
}

/// SPOP key [count]
pub fn spop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    match args.get(2) {
        None => Ok(Reply::bulk_or_null(
            ctx.db().spop(&args[1], 1)?.into_iter().next(),
        )),
        Some(n) if args.len() == 3 => Ok(members(ctx.db().spop(&args[1], pop_count(n)?)?)),
        Some(_) => Err(Error::Syntax),
    }
}

/// SRANDMEMBER key [count]
pub fn srandmember(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    match args.get(2) {
        None => Ok(Reply::bulk_or_null(
            ctx.db().srandmember(&args[1], 1)?.into_iter().next(),
        )),
        Some(n) if args.len() == 3 => {
            let picked = ctx.db().srandmember(&args[1], random_count(n)?)?;
            Ok(Reply::Array(picked.into_iter().map(Reply::Bulk).collect()))
        }
        Some(_) => Err(Error::Syntax),
    }
}

pub fn smove(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().smove(&args[1], &args[2], &args[3])? as i64,
    ))
}

pub fn sinter(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(members(ctx.db().set_algebra(SetOp::Inter, &args[1..])?))
}

pub fn sunion(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(members(ctx.db().set_algebra(SetOp::Union, &args[1..])?))
}

pub fn sdiff(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(members(ctx.db().set_algebra(SetOp::Diff, &args[1..])?))
}

pub fn sinterstore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().set_algebra_store(
        SetOp::Inter,
        &args[1],
        &args[2..],
    )?))
}

pub fn sunionstore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().set_algebra_store(
        SetOp::Union,
        &args[1],
        &args[2..],
    )?))
}

pub fn sdiffstore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().set_algebra_store(
        SetOp::Diff,
        &args[1],
        &args[2..],
    )?))
}

/// The keys and limit of `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
fn intercard_args(args: &[Bytes]) -> Result<(&[Bytes], usize), Error> {
    let (keys, rest) = numkeys(&args[1..])?;
    Ok((keys, intercard_limit(rest)?))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn sintercard(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (keys, limit) = intercard_args(args)?;
    Ok(Reply::Integer(ctx.db().sintercard(keys, limit)?))
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]
pub fn sscan(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let db = ctx.db();
    let Some(options) = element_scan_args(&args[2..], || db.exists_as(&args[1], &[KeyKind::Set]))?
    else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let after = db.element_cursor(&args[1], options.cursor);
    let page = db.sscan(&args[1], after.as_deref(), options.count)?;
    let cursor = page
        .resume
        .map_or(0, |last| db.save_element_cursor(&args[1], &last));
    let items = page
        .items
        .into_iter()
        .filter(|m| scan_matches(options.pattern, m))
        .map(Reply::Bulk)
        .collect();
    Ok(scan_reply(cursor, items))
}
