//! Roaring bitmap commands (`TR.*`), with the replies and errors of Tair's TairRoaring.

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is};
use super::Context;
use crate::error::Error;
use crate::types::roaring::{BitOp, RoaringStat};

fn bad_u32() -> Error {
    Error::msg("bad arguments, must be unsigned 32-bit integer")
}

fn invalid() -> Error {
    Error::msg("invalid arguments, maybe out of range or illegal")
}

fn offset(arg: &[u8]) -> Result<u32, Error> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad_u32)
}

fn offsets(args: &[Bytes]) -> Result<Vec<u32>, Error> {
    args.iter().map(|a| offset(a)).collect()
}

fn bit_value(arg: &[u8]) -> Result<bool, Error> {
    match arg {
        b"0" => Ok(false),
        b"1" => Ok(true),
        _ => Err(invalid()),
    }
}

fn range(start: &[u8], end: &[u8]) -> Result<(u32, u32), Error> {
    let (start, end) = (offset(start)?, offset(end)?);
    if start > end {
        return Err(invalid());
    }
    Ok((start, end))
}

fn bit_array(arg: &[u8]) -> Result<Vec<bool>, Error> {
    arg.iter().map(|&c| bit_value(&[c])).collect()
}

/// TR.SETBIT key offset value
pub fn setbit(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (at, on) = (offset(&args[2])?, bit_value(&args[3])?);
    Ok(Reply::Integer(ctx.db().tr_setbit(&args[1], at, on)? as i64))
}

pub fn setbits(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let list = offsets(&args[2..])?;
    Ok(Reply::Integer(
        ctx.db().tr_setbits(&args[1], &list, true)? as i64
    ))
}

pub fn clearbits(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let list = offsets(&args[2..])?;
    Ok(Reply::Integer(
        ctx.db().tr_setbits(&args[1], &list, false)? as i64
    ))
}

pub fn appendintarray(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let list = offsets(&args[2..])?;
    ctx.db().tr_setbits(&args[1], &list, true)?;
    Ok(Reply::OK)
}

pub fn setrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (start, end) = range(&args[2], &args[3])?;
    Ok(Reply::Integer(
        ctx.db().tr_range_update(&args[1], start, end, false)? as i64,
    ))
}

pub fn fliprange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (start, end) = range(&args[2], &args[3])?;
    Ok(Reply::Integer(
        ctx.db().tr_range_update(&args[1], start, end, true)? as i64,
    ))
}

/// TR.APPENDBITARRAY key offset bitarray: character i lands on bit offset + 1 + i.
pub fn appendbitarray(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let after: i64 = match args[2].as_ref() {
        b"-1" => -1,
        other => offset(other)? as i64,
    };
    let bits = bit_array(&args[3])?;
    if after + bits.len() as i64 > u32::MAX as i64 {
        return Err(invalid());
    }
    Ok(Reply::Integer(
        ctx.db()
            .tr_write_bits(&args[1], (after + 1) as u32, &bits)? as i64,
    ))
}

/// TR.SETBITARRAY key bitarray: character i becomes bit i; the rest of the bitmap goes.
pub fn setbitarray(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args[2].len() as u64 > u32::MAX as u64 + 1 {
        return Err(invalid());
    }
    let bits = bit_array(&args[2])?;
    let ones: Vec<u32> = bits
        .iter()
        .enumerate()
        .filter(|(_, &b)| b)
        .map(|(i, _)| i as u32)
        .collect();
    ctx.db().tr_replace(&args[1], &ones)?;
    Ok(Reply::OK)
}

pub fn setintarray(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let list = offsets(&args[2..])?;
    ctx.db().tr_replace(&args[1], &list)?;
    Ok(Reply::OK)
}

fn bit_op(name: &[u8], keys: usize) -> Result<BitOp, Error> {
    let op = if is(name, "and") {
        BitOp::And
    } else if is(name, "or") {
        BitOp::Or
    } else if is(name, "xor") {
        BitOp::Xor
    } else if is(name, "diff") && keys == 2 {
        BitOp::Diff
    } else if is(name, "not") && keys == 1 {
        BitOp::Not
    } else {
        return Err(invalid());
    };
    Ok(op)
}

/// TR.BITOP destkey AND|OR|XOR|DIFF|NOT key [key ...]
pub fn bitop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let op = bit_op(&args[2], args.len() - 3)?;
    Ok(Reply::Integer(
        ctx.db().tr_bitop(op, &args[1], &args[3..])? as i64
    ))
}

pub fn bitopcard(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let op = bit_op(&args[1], args.len() - 2)?;
    Ok(Reply::Integer(ctx.db().tr_bitopcard(op, &args[2..])? as i64))
}

pub fn optimize(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(if ctx.db().tr_optimize(&args[1])? {
        Reply::OK
    } else {
        Reply::Null
    })
}

pub fn getbit(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().tr_getbit(&args[1], offset(&args[2])?)? as i64,
    ))
}

pub fn getbits(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let list = offsets(&args[2..])?;
    let bits = ctx.db().tr_getbits(&args[1], &list)?.unwrap_or_default();
    Ok(Reply::Array(
        bits.into_iter().map(|b| Reply::Integer(b as i64)).collect(),
    ))
}

/// TR.BITCOUNT key [start end]
pub fn bitcount(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let within = match args.len() {
        2 => None,
        4 => Some(range(&args[2], &args[3])?),
        _ => return Err(Error::Syntax),
    };
    Ok(Reply::Integer(
        ctx.db().tr_bitcount(&args[1], within)? as i64
    ))
}

/// TR.BITPOS key value [count]
pub fn bitpos(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let value = bit_value(&args[2])?;
    let count = match args.len() {
        3 => 1,
        4 => int(&args[3])
            .ok()
            .filter(|&c| c != 0 && c.unsigned_abs() <= u32::MAX as u64 + 1)
            .ok_or_else(invalid)?,
        _ => return Err(Error::Syntax),
    };
    Ok(Reply::Integer(
        ctx.db()
            .tr_bitpos(&args[1], value, count)?
            .map_or(-1, |p| p as i64),
    ))
}

/// TR.SCAN key start [COUNT count]
pub fn scan(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let start = offset(&args[2])?;
    let count = match &args[3..] {
        [] => 10,
        [option, n] if is(option, "count") => offset(n)?,
        _ => return Err(Error::Syntax),
    };
    if count == 0 || count as u64 > RANGE_REPLY_LIMIT {
        return Err(invalid());
    }
    let mut found = ctx
        .db()
        .tr_range(&args[1], start, u32::MAX, count as u64 + 1)?;
    let cursor = if found.len() > count as usize {
        found.pop().unwrap_or(0)
    } else {
        0
    };
    Ok(Reply::Array(vec![
        Reply::Integer(cursor as i64),
        Reply::Array(
            found
                .into_iter()
                .map(|o| Reply::Integer(o as i64))
                .collect(),
        ),
    ]))
}

/// TR.RANGE replies with at most this many offsets; a denser range is refused (ours), since a
/// few run containers can hold billions of bits.
const RANGE_REPLY_LIMIT: u64 = 1 << 24;

pub fn range_cmd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (start, end) = range(&args[2], &args[3])?;
    let found = ctx
        .db()
        .tr_range(&args[1], start, end, RANGE_REPLY_LIMIT + 1)?;
    if found.len() as u64 > RANGE_REPLY_LIMIT {
        return Err(invalid());
    }
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|o| Reply::Integer(o as i64))
            .collect(),
    ))
}

/// TR.RANGEBITARRAY key start end: `0`/`1` characters for every bit of the range.
pub fn rangebitarray(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (start, end) = range(&args[2], &args[3])?;
    let len = (end - start) as u64 + 1;
    if len > ctx.services.max_string_len() as u64 {
        return Err(invalid());
    }
    let db = ctx.db();
    if !db.tr_exists(&args[1])? {
        return Ok(Reply::Null);
    }
    let mut text = vec![b'0'; len as usize];
    db.tr_visit_range(&args[1], start, end, &mut |bit| {
        text[(bit - start) as usize] = b'1';
        true
    })?;
    Ok(Reply::Bulk(Bytes::from(text)))
}

fn extreme(ctx: &mut Context<'_>, args: &[Bytes], max: bool) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().tr_extreme(&args[1], max)?.map_or(-1, |v| v as i64),
    ))
}

pub fn min(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    extreme(ctx, args, false)
}

pub fn max(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    extreme(ctx, args, true)
}

pub fn rank(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let at = offset(&args[2])?;
    Ok(Reply::Integer(
        ctx.db().tr_rank(&args[1], at)?.map_or(-1, |r| r as i64),
    ))
}

pub fn jaccard(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let value = ctx.db().tr_jaccard(&args[1], &args[2])?;
    Ok(Reply::bulk(format!("{value}")))
}

pub fn contains(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().tr_contains(&args[1], &args[2])? as i64
    ))
}

/// TR.STAT key [JSON]
pub fn stat(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let json = match args.get(2) {
        None => false,
        Some(a) if is(a, "json") && args.len() == 3 => true,
        Some(_) => return Err(Error::Syntax),
    };
    let Some(stat) = ctx.db().tr_stat(&args[1])? else {
        return Ok(Reply::Null);
    };
    Ok(Reply::bulk(if json {
        stat_json(&stat)
    } else {
        stat_text(&stat)
    }))
}

const KINDS: [&str; 3] = ["array", "bitset", "run"];

fn stat_text(stat: &RoaringStat) -> String {
    let mut lines = vec![
        format!("cardinality: {}", stat.cardinality),
        format!("number of containers: {}", stat.containers),
        format!("max value: {}", stat.max.unwrap_or(0)),
        format!("min value: {}", stat.min.unwrap_or(0)),
        format!("sum value: {}", stat.sum),
    ];
    for (name, (containers, values, bytes)) in KINDS.iter().zip(stat.kinds) {
        lines.push(format!("number of {name} containers: {containers}"));
        lines.push(format!("\t{name} container values: {values}"));
        lines.push(format!("\t{name} container bytes: {bytes}"));
    }
    lines.join("\r\n")
}

fn stat_json(stat: &RoaringStat) -> String {
    let kinds: Vec<String> = KINDS
        .iter()
        .zip(stat.kinds)
        .map(|(name, (containers, values, bytes))| {
            format!("\"{name}_container\":{{\"number_of_containers\":{containers},\"container_cardinality\":{values},\"container_allocated_bytes\":{bytes}}}")
        })
        .collect();
    format!(
        "{{\"cardinality\":{},\"number_of_containers\":{},\"max_value\":{},\"min_value\":{},\"sum_value\":{},{}}}",
        stat.cardinality,
        stat.containers,
        stat.max.unwrap_or(0),
        stat.min.unwrap_or(0),
        stat.sum,
        kinds.join(",")
    )
}
