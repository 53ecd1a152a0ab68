//! List commands.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::metadata::KeyKind;

use super::args::{self, int, is, mpop_count, mpop_numkeys, non_negative, pop_count};
use super::{block_on, bulks, Context};
use crate::config::event_classes::LIST;
use crate::error::Error;
use crate::services::blocking::Attempt;
use crate::types::list::{End, PosOptions};

fn push(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    end: End,
    only_if_exists: bool,
) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().push(
        &args[1],
        end,
        &args[2..],
        only_if_exists,
    )?))
}

pub fn lpush(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    push(ctx, args, End::Left, false)
}

pub fn rpush(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    push(ctx, args, End::Right, false)
}

pub fn lpushx(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    push(ctx, args, End::Left, true)
}

pub fn rpushx(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    push(ctx, args, End::Right, true)
}

/// LPOP/RPOP key [count]
fn pop(ctx: &mut Context<'_>, args: &[Bytes], end: End) -> Result<Reply, Error> {
    let count = match args.len() {
        2 => None,
        3 => Some(pop_count(&args[2])?),
        _ => {
            return Err(Error::WrongArity(
                String::from_utf8_lossy(&args[0]).to_ascii_lowercase(),
            ))
        }
    };
    let popped = ctx.db().pop(&args[1], end, count.unwrap_or(1))?;
    Ok(match (popped, count) {
        (None, Some(_)) => Reply::NullArray,
        (None, None) => Reply::Null,
        (Some(values), Some(_)) => Reply::Array(values.into_iter().map(Reply::Bulk).collect()),
        (Some(values), None) => Reply::bulk_or_null(values.into_iter().next()),
    })
}

pub fn lpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    pop(ctx, args, End::Left)
}

pub fn rpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    pop(ctx, args, End::Right)
}

pub fn llen(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().llen(&args[1])?))
}

pub fn lrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (start, stop) = (int(&args[2])?, int(&args[3])?);
    Ok(Reply::Bulks(bulks(
        ctx.db().lrange(&args[1], start, stop)?,
    )?))
}

pub fn lindex(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let index = match int(&args[2]) {
        Ok(index) => index,
        // Redis looks the key up first: a missing key is nil whatever the index says.
        Err(err) if ctx.db().exists_as(&args[1], &[KeyKind::List])? => return Err(err),
        Err(_) => return Ok(Reply::Null),
    };
    Ok(Reply::bulk_or_null(ctx.db().lindex(&args[1], index)?))
}

pub fn lset(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let index = match int(&args[2]) {
        Ok(index) => index,
        // Redis looks the key up first.
        Err(err) if ctx.db().exists_as(&args[1], &[KeyKind::List])? => return Err(err),
        Err(_) => return Err(Error::NoSuchKey),
    };
    ctx.db().lset(&args[1], index, &args[3])?;
    Ok(Reply::OK)
}

/// LINSERT key BEFORE|AFTER pivot element
pub fn linsert(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let before = if is(&args[2], "before") {
        true
    } else if is(&args[2], "after") {
        false
    } else {
        return Err(Error::Syntax);
    };
    Ok(Reply::Integer(
        ctx.db().linsert(&args[1], before, &args[3], &args[4])?,
    ))
}

pub fn lrem(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().lrem(
        &args[1],
        int(&args[2])?,
        &args[3],
    )?))
}

pub fn ltrim(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ctx.db().ltrim(&args[1], int(&args[2])?, int(&args[3])?)?;
    Ok(Reply::OK)
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub fn lpos(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut options = PosOptions {
        rank: 1,
        count: 0,
        maxlen: 0,
    };
    let mut with_count = false;
    for pair in args[3..].chunks(2) {
        let [name, value] = pair else {
            return Err(Error::Syntax);
        };
        if is(name, "rank") {
            let n = int(value)?;
            if n == 0 {
                return Err(Error::msg("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
            if n == i64::MIN {
                return Err(Error::msg("value is out of range"));
            }
            options.rank = n;
        } else if is(name, "count") {
            options.count = non_negative(value, "COUNT can't be negative")?;
            with_count = true;
        } else if is(name, "maxlen") {
            options.maxlen = non_negative(value, "MAXLEN can't be negative")?;
        } else {
            return Err(Error::Syntax);
        }
    }
    let found = ctx.db().lpos(
        &args[1],
        &args[2],
        PosOptions {
            count: if with_count { options.count } else { 1 },
            ..options
        },
    )?;
    Ok(if with_count {
        Reply::Array(found.into_iter().map(Reply::Integer).collect())
    } else {
        found.first().map_or(Reply::Null, |&i| Reply::Integer(i))
    })
}

fn end(arg: &[u8]) -> Result<End, Error> {
    if is(arg, "left") {
        Ok(End::Left)
    } else if is(arg, "right") {
        Ok(End::Right)
    } else {
        Err(Error::Syntax)
    }
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
pub fn lmove(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (from, to) = (end(&args[3])?, end(&args[4])?);
    notify_move(ctx, args, from, to);
    Ok(Reply::bulk_or_null(
        ctx.db().lmove(&args[1], &args[2], from, to)?,
    ))
}

/// The events of LMOVE, BLMOVE, RPOPLPUSH and BRPOPLPUSH, in Redis's order: the push onto
/// the destination, then the pop from the source.
fn notify_move(ctx: &mut Context<'_>, args: &[Bytes], from: End, to: End) {
    let push = match to {
        End::Left => "lpush",
        End::Right => "rpush",
    };
    ctx.notify(LIST, push, &args[2]);
    ctx.notify(LIST, pop_event(from), &args[1]);
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Left => "lpop",
        End::Right => "rpop",
    }
}

pub fn rpoplpush(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    notify_move(ctx, args, End::Right, End::Left);
    Ok(Reply::bulk_or_null(ctx.db().lmove(
        &args[1],
        &args[2],
        End::Right,
        End::Left,
    )?))
}

/// The `LEFT|RIGHT [COUNT count]` of LMPOP and BLMPOP, never empty (see [`mpop_numkeys`]).
fn mpop_options(rest: &[Bytes]) -> Result<(End, u64), Error> {
    Ok((end(&rest[0])?, mpop_count(&rest[1..])?))
}

fn mpop_reply(popped: Option<(Bytes, Vec<Bytes>)>) -> Option<Reply> {
    popped.map(|(key, values)| {
        Reply::Array(vec![
            Reply::Bulk(key),
            Reply::Array(values.into_iter().map(Reply::Bulk).collect()),
        ])
    })
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub fn lmpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (keys, rest) = mpop_numkeys(&args[1..])?;
    let (which, count) = mpop_options(rest)?;
    for key in keys {
        ctx.notify(LIST, pop_event(which), key);
    }
    Ok(mpop_reply(ctx.db().lmpop(keys, which, count)?).unwrap_or(Reply::NullArray))
}

/// BLPOP/BRPOP key [key ...] timeout
fn blocking_pop(ctx: &mut Context<'_>, args: &[Bytes], which: End) -> Result<Reply, Error> {
    let (keys, timeout) = args[1..].split_at(args.len() - 2);
    let timeout = args::timeout(&timeout[0])?;
    let attempt: Attempt = Box::new(move |db, keys| {
        Ok(db.lmpop(keys, which, 1)?.map(|(key, values)| {
            Reply::Array(vec![
                Reply::Bulk(key),
                Reply::bulk_or_null(values.into_iter().next()),
            ])
        }))
    });
    block_on(ctx, keys.to_vec(), timeout, Reply::NullArray, attempt)
}

pub fn blpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    blocking_pop(ctx, args, End::Left)
}

pub fn brpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    blocking_pop(ctx, args, End::Right)
}

fn blocking_move(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    from: End,
    to: End,
    timeout: &[u8],
) -> Result<Reply, Error> {
    let timeout = args::timeout(timeout)?;
    let dst = args[2].clone();
    let attempt: Attempt = Box::new(move |db, keys| match db.lmove(&keys[0], &dst, from, to) {
        Ok(moved) => Ok(moved.map(Reply::Bulk)),
        // A destination of another type answers the waiter with the error and leaves the
        // element where it was, as in Redis; a source of another type keeps it waiting.
        Err(Error::WrongType) if db.key_type(&keys[0])? == Some(KeyKind::List) => {
            Ok(Some(Error::WrongType.to_reply()))
        }
        Err(err) => Err(err),
    });
    let keys = vec![args[1].clone()];
    // As in Redis: a null bulk string where it may not block (MULTI, scripts), a null array
    // when it timed out.
    if !ctx.may_block() {
        return Ok(attempt(ctx.db(), &keys)?.unwrap_or(Reply::Null));
    }
    block_on(ctx, keys, timeout, Reply::NullArray, attempt)
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
pub fn blmove(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (from, to) = (end(&args[3])?, end(&args[4])?);
    notify_move(ctx, args, from, to);
    blocking_move(ctx, args, from, to, &args[5])
}

/// BRPOPLPUSH source destination timeout
pub fn brpoplpush(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    notify_move(ctx, args, End::Right, End::Left);
    blocking_move(ctx, args, End::Right, End::Left, &args[3])
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub fn blmpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (keys, rest) = mpop_numkeys(&args[2..])?;
    let (which, count) = mpop_options(rest)?;
    // Redis reads the timeout last.
    let timeout = args::timeout(&args[1])?;
    // Published for the key it pops at once; one served later announces nothing.
    for key in keys {
        ctx.notify(LIST, pop_event(which), key);
    }
    let attempt: Attempt = Box::new(move |db, keys| Ok(mpop_reply(db.lmpop(keys, which, count)?)));
    block_on(ctx, keys.to_vec(), timeout, Reply::NullArray, attempt)
}
