//! Sorted-set commands, with Redis's score and range syntax.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::metadata::KeyKind;

use super::args::{
    self, check_paired_count, element_scan_args, int, intercard_limit, is, mpop_count,
    mpop_numkeys, pop_count, random_count, scan_matches,
};
use super::hash::scan_reply;
use super::{block_on, Context};
use crate::config::event_classes::ZSET;
use crate::error::Error;
use crate::services::blocking::Attempt;
use crate::types::numbers::{parse_double, parse_range_double};
use crate::types::set::SetOp;
use crate::types::zset::{
    Aggregate, LexBound, RangeBy, RangeSpec, ScoreBound, ScoredMember, ZaddOptions,
};

/// A score as `strtod` reads it: `inf`, `+inf`, `-inf` allowed, NaN and spaces not.
fn score(arg: &[u8]) -> Result<f64, Error> {
    parse_double(arg).ok_or(Error::NotFloat)
}

/// A bound of a score range, read as Redis's `zslParseRange` reads it: `strtod` with only NaN
/// and trailing text refused, so leading spaces are skipped, an empty bound is 0 and `1e400`
/// is infinity.
fn score_bound(arg: &[u8]) -> Result<ScoreBound, Error> {
    let (exclusive, text) = match arg.strip_prefix(b"(") {
        Some(rest) => (true, rest),
        None => (false, arg),
    };
    let value = parse_range_double(text).ok_or_else(|| Error::msg("min or max is not a float"))?;
    Ok(ScoreBound { value, exclusive })
}

fn lex_bound(arg: &Bytes) -> Result<LexBound, Error> {
    match arg.first() {
        Some(b'-') if arg.len() == 1 => Ok(LexBound::Min),
        Some(b'+') if arg.len() == 1 => Ok(LexBound::Max),
        Some(b'[') => Ok(LexBound::Inclusive(arg.slice(1..))),
        Some(b'(') => Ok(LexBound::Exclusive(arg.slice(1..))),
        _ => Err(Error::msg("min or max not valid string range item")),
    }
}

/// Members with optional scores: flat in RESP2, `[member, score]` pairs in RESP3.
fn scored_reply(items: Vec<ScoredMember>, with_scores: bool, resp3: bool) -> Reply {
    if !with_scores {
        return Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect());
    }
    if resp3 {
        return Reply::Array(
            items
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect(),
        );
    }
    Reply::Array(
        items
            .into_iter()
            .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
            .collect(),
    )
}

/// ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut options = ZaddOptions::default();
    let mut i = 2;
    while i < args.len() {
        let arg = &args[i];
        let flag = if is(arg, "nx") {
            &mut options.nx
        } else if is(arg, "xx") {
            &mut options.xx
        } else if is(arg, "gt") {
            &mut options.gt
        } else if is(arg, "lt") {
            &mut options.lt
        } else if is(arg, "ch") {
            &mut options.ch
        } else if is(arg, "incr") {
            &mut options.incr
        } else {
            break;
        };
        *flag = true;
        i += 1;
    }
    let rest = &args[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    if options.nx && options.xx {
        return Err(Error::msg(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (options.gt && options.lt) || (options.nx && (options.gt || options.lt)) {
        return Err(Error::msg(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if options.incr && rest.len() > 2 {
        return Err(Error::msg(
            "INCR option supports a single increment-element pair",
        ));
    }
    let pairs = rest
        .chunks_exact(2)
        .map(|p| Ok((score(&p[0])?, p[1].clone())))
        .collect::<Result<Vec<_>, Error>>()?;
    let (count, last) = ctx.db().zadd(&args[1], options, &pairs)?;
    let event = if options.incr { "zincr" } else { "zadd" };
    ctx.notify(ZSET, event, &args[1]);
    Ok(if options.incr {
        last.map_or(Reply::Null, Reply::Double)
    } else {
        Reply::Integer(count)
    })
}

pub fn zincrby(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let options = ZaddOptions {
        incr: true,
        ..ZaddOptions::default()
    };
    let (_, last) = ctx
        .db()
        .zadd(&args[1], options, &[(score(&args[2])?, args[3].clone())])?;
    Ok(last.map_or(Reply::Null, Reply::Double))
}

pub fn zrem(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().zrem(&args[1], &args[2..])?))
}

pub fn zscore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(ctx
        .db()
        .zscore(&args[1], &args[2])?
        .map_or(Reply::Null, Reply::Double))
}

pub fn zmscore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let scores = ctx.db().zmscore(&args[1], &args[2..])?;
    Ok(Reply::Array(
        scores
            .into_iter()
            .map(|s| s.map_or(Reply::Null, Reply::Double))
            .collect(),
    ))
}

pub fn zcard(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().zcard(&args[1])?))
}

pub fn zcount(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let by = RangeBy::Score(score_bound(&args[2])?, score_bound(&args[3])?);
    Ok(Reply::Integer(ctx.db().zcount(&args[1], by)?))
}

pub fn zlexcount(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let by = RangeBy::Lex(lex_bound(&args[2])?, lex_bound(&args[3])?);
    Ok(Reply::Integer(ctx.db().zcount(&args[1], by)?))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeKind {
    Rank,
    Score,
    Lex,
}

/// The range selected by `first second` under `kind`; with `rev`, score and lex ranges are
/// given as max then min.
fn range_by(kind: RangeKind, first: &Bytes, second: &Bytes, rev: bool) -> Result<RangeBy, Error> {
    let (low, high) = if rev {
        (second, first)
    } else {
        (first, second)
    };
    Ok(match kind {
        RangeKind::Rank => RangeBy::Rank(int(first)?, int(second)?),
        RangeKind::Score => RangeBy::Score(score_bound(low)?, score_bound(high)?),
        RangeKind::Lex => RangeBy::Lex(lex_bound(low)?, lex_bound(high)?),
    })
}

struct RangeOptions {
    kind: RangeKind,
    rev: bool,
    limit: Option<(i64, i64)>,
    with_scores: bool,
}

/// Parses the options after `min max`. `fixed` is the kind a legacy command implies (then
/// BYSCORE/BYLEX/REV are not accepted); `allow_scores` is false for ZRANGESTORE. Each of
/// BYSCORE, BYLEX and REV may appear once, and only one of BYSCORE and BYLEX, as in Redis.
fn range_options(
    rest: &[Bytes],
    fixed: Option<(RangeKind, bool)>,
    allow_scores: bool,
) -> Result<RangeOptions, Error> {
    let mut kind = fixed.map(|(kind, _)| kind);
    let mut rev = fixed.map(|(_, rev)| rev);
    let mut limit = None;
    let mut with_scores = false;
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        if kind.is_none() && is(arg, "byscore") {
            kind = Some(RangeKind::Score);
        } else if kind.is_none() && is(arg, "bylex") {
            kind = Some(RangeKind::Lex);
        } else if rev.is_none() && is(arg, "rev") {
            rev = Some(true);
        } else if is(arg, "withscores") && allow_scores {
            with_scores = true;
        } else if is(arg, "limit") && i + 2 < rest.len() {
            limit = Some((int(&rest[i + 1])?, int(&rest[i + 2])?));
            i += 2;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    let (kind, rev) = (kind.unwrap_or(RangeKind::Rank), rev.unwrap_or(false));
    if kind == RangeKind::Rank {
        // Redis 7.0 refuses a LIMIT on a rank range only if its count is not -1 (no limit),
        // and then ignores the offset.
        if limit.is_some_and(|(_, count)| count != -1) {
            return Err(Error::msg(
                "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
            ));
        }
        limit = None;
    }
    if with_scores && kind == RangeKind::Lex {
        return Err(Error::msg(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    Ok(RangeOptions {
        kind,
        rev,
        limit,
        with_scores,
    })
}

fn range_reply(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    fixed: Option<(RangeKind, bool)>,
) -> Result<Reply, Error> {
    let options = range_options(&args[4..], fixed, true)?;
    let spec = RangeSpec {
        by: range_by(options.kind, &args[2], &args[3], options.rev)?,
        rev: options.rev,
        limit: options.limit,
    };
    let items = ctx.db().zrange(&args[1], &spec)?;
    Ok(scored_reply(items, options.with_scores, ctx.client.resp3))
}

/// ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    range_reply(ctx, args, None)
}

pub fn zrevrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args[4..].iter().any(|a| is(a, "limit")) {
        return Err(Error::Syntax);
    }
    range_reply(ctx, args, Some((RangeKind::Rank, true)))
}

pub fn zrangebyscore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    range_reply(ctx, args, Some((RangeKind::Score, false)))
}

pub fn zrevrangebyscore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    range_reply(ctx, args, Some((RangeKind::Score, true)))
}

pub fn zrangebylex(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    range_reply(ctx, args, Some((RangeKind::Lex, false)))
}

pub fn zrevrangebylex(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    range_reply(ctx, args, Some((RangeKind::Lex, true)))
}

/// ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let options = range_options(&args[5..], None, false)?;
    let spec = RangeSpec {
        by: range_by(options.kind, &args[3], &args[4], options.rev)?,
        rev: options.rev,
        limit: options.limit,
    };
    Ok(Reply::Integer(
        ctx.db().zrangestore(&args[1], &args[2], &spec)?,
    ))
}

/// ZRANK/ZREVRANK key member [WITHSCORE]
fn rank(ctx: &mut Context<'_>, args: &[Bytes], rev: bool) -> Result<Reply, Error> {
    let with_score = match args.get(3) {
        None => false,
        Some(a) if is(a, "withscore") && args.len() == 4 => true,
        Some(_) => return Err(Error::Syntax),
    };
    Ok(match ctx.db().zrank(&args[1], &args[2], rev)? {
        None if with_score => Reply::NullArray,
        None => Reply::Null,
        Some((rank, score)) if with_score => {
            Reply::Array(vec![Reply::Integer(rank), Reply::Double(score)])
        }
        Some((rank, _)) => Reply::Integer(rank),
    })
}

pub fn zrank(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    rank(ctx, args, false)
}

pub fn zrevrank(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    rank(ctx, args, true)
}

pub fn zremrangebyrank(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let by = RangeBy::Rank(int(&args[2])?, int(&args[3])?);
    Ok(Reply::Integer(ctx.db().zremrange(&args[1], by)?))
}

pub fn zremrangebyscore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let by = RangeBy::Score(score_bound(&args[2])?, score_bound(&args[3])?);
    Ok(Reply::Integer(ctx.db().zremrange(&args[1], by)?))
}

pub fn zremrangebylex(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let by = RangeBy::Lex(lex_bound(&args[2])?, lex_bound(&args[3])?);
    Ok(Reply::Integer(ctx.db().zremrange(&args[1], by)?))
}

/// ZPOPMIN/ZPOPMAX key [count]
fn pop(ctx: &mut Context<'_>, args: &[Bytes], max: bool) -> Result<Reply, Error> {
    let n = match args.get(2) {
        None => None,
        Some(n) if args.len() == 3 => Some(pop_count(n)?),
        Some(_) => return Err(Error::Syntax),
    };
    let popped = ctx.db().zpop(&args[1], max, n.unwrap_or(1))?;
    if n.is_none() {
        return Ok(Reply::Array(
            popped
                .into_iter()
                .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
                .collect(),
        ));
    }
    Ok(scored_reply(popped, true, ctx.client.resp3))
}

pub fn zpopmin(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    pop(ctx, args, false)
}

pub fn zpopmax(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    pop(ctx, args, true)
}

/// The `MIN|MAX [COUNT count]` of ZMPOP and BZMPOP, never empty (see [`mpop_numkeys`]):
/// whether to pop the highest, and how many.
fn mpop_options(rest: &[Bytes]) -> Result<(bool, u64), Error> {
    let max = if is(&rest[0], "max") {
        true
    } else if is(&rest[0], "min") {
        false
    } else {
        return Err(Error::Syntax);
    };
    Ok((max, mpop_count(&rest[1..])?))
}

fn mpop_reply(popped: Option<(Bytes, Vec<ScoredMember>)>) -> Option<Reply> {
    popped.map(|(key, members)| {
        Reply::Array(vec![
            Reply::Bulk(key),
            Reply::Array(
                members
                    .into_iter()
                    .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                    .collect(),
            ),
        ])
    })
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
pub fn zmpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (keys, rest) = mpop_numkeys(&args[1..])?;
    let (max, n) = mpop_options(rest)?;
    notify_pops(ctx, keys, max);
    Ok(mpop_reply(ctx.db().zmpop(keys, max, n)?).unwrap_or(Reply::NullArray))
}

/// The pop event of each of `keys`, published for the one a pop changes.
fn notify_pops(ctx: &mut Context<'_>, keys: &[Bytes], max: bool) {
    let event = if max { "zpopmax" } else { "zpopmin" };
    for key in keys {
        ctx.notify(ZSET, event, key);
    }
}

/// BZPOPMIN/BZPOPMAX key [key ...] timeout
fn blocking_pop(ctx: &mut Context<'_>, args: &[Bytes], max: bool) -> Result<Reply, Error> {
    let (keys, timeout) = args[1..].split_at(args.len() - 2);
    let timeout = args::timeout(&timeout[0])?;
    let attempt: Attempt = Box::new(move |db, keys| {
        Ok(db.zmpop(keys, max, 1)?.and_then(|(key, members)| {
            let (member, score) = members.into_iter().next()?;
            Some(Reply::Array(vec![
                Reply::Bulk(key),
                Reply::Bulk(member),
                Reply::Double(score),
            ]))
        }))
    });
    block_on(ctx, keys.to_vec(), timeout, Reply::NullArray, attempt)
}

pub fn bzpopmin(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    blocking_pop(ctx, args, false)
}

pub fn bzpopmax(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    blocking_pop(ctx, args, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (keys, rest) = mpop_numkeys(&args[2..])?;
    let (max, n) = mpop_options(rest)?;
    // Redis reads the timeout last.
    let timeout = args::timeout(&args[1])?;
    // Published for the key it pops at once; one served later announces nothing.
    notify_pops(ctx, keys, max);
    let attempt: Attempt = Box::new(move |db, keys| Ok(mpop_reply(db.zmpop(keys, max, n)?)));
    block_on(ctx, keys.to_vec(), timeout, Reply::NullArray, attempt)
}

/// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let Some(n) = args.get(2) else {
        let picked = ctx.db().zrandmember(&args[1], 1)?;
        return Ok(Reply::bulk_or_null(
            picked.into_iter().next().map(|(m, _)| m),
        ));
    };
    let count = random_count(n)?;
    let with_scores = match args.get(3) {
        None => false,
        Some(a) if is(a, "withscores") && args.len() == 4 => true,
        Some(_) => return Err(Error::Syntax),
    };
    if with_scores {
        check_paired_count(count)?;
    }
    let picked = ctx.db().zrandmember(&args[1], count)?;
    Ok(scored_reply(picked, with_scores, ctx.client.resp3))
}

/// Parsed `numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
struct Combine<'a> {
    keys: &'a [Bytes],
    weights: Vec<f64>,
    aggregate: Aggregate,
    with_scores: bool,
}

/// Parses the arguments of ZUNION, ZINTER, ZDIFF and their STORE forms. Redis looks the
/// input keys up before it reads the options after them, so when an option is bad,
/// `check_sources` runs first (a key of another type is WRONGTYPE).
fn combine_args<'a>(
    args: &'a [Bytes],
    command: &str,
    op: SetOp,
    allow_scores: bool,
    check_sources: impl FnOnce(&[Bytes]) -> Result<(), Error>,
) -> Result<Combine<'a>, Error> {
    let mut parsed = Combine {
        keys: combine_keys(args, command)?,
        weights: Vec::new(),
        aggregate: Aggregate::Sum,
        with_scores: false,
    };
    match combine_options(&mut parsed, args, op, allow_scores) {
        Ok(()) => Ok(parsed),
        Err(err) => {
            check_sources(parsed.keys)?;
            Err(err)
        }
    }
}

/// The input keys after `numkeys` of ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD.
fn combine_keys<'a>(args: &'a [Bytes], command: &str) -> Result<&'a [Bytes], Error> {
    let n = int(&args[0])?;
    if n <= 0 {
        return Err(Error::msg(format!(
            "at least 1 input key is needed for '{command}' command"
        )));
    }
    args.get(1..1 + n as usize).ok_or(Error::Syntax)
}

fn combine_options(
    parsed: &mut Combine<'_>,
    args: &[Bytes],
    op: SetOp,
    allow_scores: bool,
) -> Result<(), Error> {
    let n = parsed.keys.len();
    let mut i = 1 + n;
    while i < args.len() {
        let arg = &args[i];
        if op != SetOp::Diff && is(arg, "weights") && i + n < args.len() {
            parsed.weights = args[i + 1..=i + n]
                .iter()
                .map(|w| parse_double(w).ok_or_else(|| Error::msg("weight value is not a float")))
                .collect::<Result<_, _>>()?;
            i += n;
        } else if op != SetOp::Diff && is(arg, "aggregate") && i + 1 < args.len() {
            let which = &args[i + 1];
            parsed.aggregate = if is(which, "sum") {
                Aggregate::Sum
            } else if is(which, "min") {
                Aggregate::Min
            } else if is(which, "max") {
                Aggregate::Max
            } else {
                return Err(Error::Syntax);
            };
            i += 1;
        } else if allow_scores && is(arg, "withscores") {
            parsed.with_scores = true;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    Ok(())
}

/// Fails with WRONGTYPE if one of `keys` is neither a sorted set nor a set.
fn check_sources(ctx: &mut Context<'_>, keys: &[Bytes]) -> Result<(), Error> {
    for key in keys {
        ctx.db().exists_as(key, &[KeyKind::ZSet, KeyKind::Set])?;
    }
    Ok(())
}

fn combine(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    op: SetOp,
    command: &str,
) -> Result<Reply, Error> {
    let parsed = combine_args(&args[1..], command, op, true, |keys| {
        check_sources(ctx, keys)
    })?;
    let items = ctx
        .db()
        .zcombine(op, parsed.keys, &parsed.weights, parsed.aggregate)?;
    Ok(scored_reply(items, parsed.with_scores, ctx.client.resp3))
}

fn combine_store(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    op: SetOp,
    command: &str,
) -> Result<Reply, Error> {
    let parsed = combine_args(&args[2..], command, op, false, |keys| {
        check_sources(ctx, keys)
    })?;
    Ok(Reply::Integer(ctx.db().zcombine_store(
        op,
        &args[1],
        parsed.keys,
        &parsed.weights,
        parsed.aggregate,
    )?))
}

pub fn zunion(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    combine(ctx, args, SetOp::Union, "zunion")
}

pub fn zinter(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    combine(ctx, args, SetOp::Inter, "zinter")
}

pub fn zdiff(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    combine(ctx, args, SetOp::Diff, "zdiff")
}

pub fn zunionstore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    combine_store(ctx, args, SetOp::Union, "zunionstore")
}

pub fn zinterstore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    combine_store(ctx, args, SetOp::Inter, "zinterstore")
}

pub fn zdiffstore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    combine_store(ctx, args, SetOp::Diff, "zdiffstore")
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let keys = combine_keys(&args[1..], "zintercard")?;
    let limit = match intercard_limit(&args[2 + keys.len()..]) {
        Ok(limit) => limit,
        // As in ZINTER, Redis looks the keys up before it reads LIMIT.
        Err(err) => {
            check_sources(ctx, keys)?;
            return Err(err);
        }
    };
    Ok(Reply::Integer(ctx.db().zintercard(keys, limit)?))
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub fn zscan(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let db = ctx.db();
    let Some(options) = element_scan_args(&args[2..], || db.exists_as(&args[1], &[KeyKind::ZSet]))?
    else {
        return Ok(scan_reply(0, Vec::new()));
    };
    let after = db.element_cursor(&args[1], options.cursor);
    let page = db.zscan(&args[1], after.as_deref(), options.count)?;
    let cursor = page
        .resume
        .map_or(0, |last| db.save_element_cursor(&args[1], &last));
    let mut items = Vec::new();
    for (member, s) in page.items {
        if scan_matches(options.pattern, &member) {
            items.push(Reply::Bulk(member));
            items.push(Reply::bulk(shale_protocol::format_double(s)));
        }
    }
    Ok(scan_reply(cursor, items))
}
