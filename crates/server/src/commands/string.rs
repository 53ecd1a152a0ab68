//! String commands.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::metadata::KeyKind;

use super::args::{int, is};
use super::Context;
use crate::config::event_classes::{GENERIC, STRING};
use crate::error::Error;
use crate::keyspace::now_ms;
use crate::types::lcs::LcsRun;
use crate::types::string::{ExpiryChange, SetCondition, SetOptions};

/// Turns an EX/PX/EXAT/PXAT argument into an absolute Unix time in ms. SET-like commands
/// reject values below 1 and anything whose ms form overflows, with Redis's message.
pub(super) fn absolute_expiry(
    value: &[u8],
    unit_ms: i64,
    absolute: bool,
    command: &'static str,
) -> Result<i64, Error> {
    let n = int(value)?;
    let invalid = || Error::InvalidExpire(command);
    if n <= 0 {
        return Err(invalid());
    }
    let ms = n.checked_mul(unit_ms).ok_or_else(invalid)?;
    if absolute {
        Ok(ms)
    } else {
        ms.checked_add(now_ms() as i64).ok_or_else(invalid)
    }
}

/// The unit (ms) of EX/PX/EXAT/PXAT, and whether the time is absolute; `None` for another word.
fn expiry_unit(option: &[u8]) -> Option<(i64, bool)> {
    match option {
        a if is(a, "ex") => Some((1000, false)),
        a if is(a, "px") => Some((1, false)),
        a if is(a, "exat") => Some((1000, true)),
        a if is(a, "pxat") => Some((1, true)),
        _ => None,
    }
}

/// The expiry options of SET and GETEX as Redis reads them: EX, PX, EXAT or PXAT may repeat
/// (the last value counts) but not mix with each other or with the command's option for no
/// time (KEEPTTL, PERSIST); the time itself is read once every option has been.
#[derive(Default)]
struct ExpiryArgs<'a> {
    /// The unit (ms) and absoluteness of EX/PX/EXAT/PXAT, and the time's argument.
    timed: Option<((i64, bool), &'a Bytes)>,
    untimed: bool,
}

impl<'a> ExpiryArgs<'a> {
    /// Reads the expiry option at `args[i]`, if it is one: how many arguments it took, 0 if
    /// it is another word.
    fn read(&mut self, args: &'a [Bytes], i: usize, untimed: &str) -> Result<usize, Error> {
        if is(&args[i], untimed) && self.timed.is_none() {
            self.untimed = true;
            return Ok(1);
        }
        match expiry_unit(&args[i]) {
            Some(unit) if !self.untimed && self.timed.is_none_or(|(chosen, _)| chosen == unit) => {
                self.timed = Some((unit, args.get(i + 1).ok_or(Error::Syntax)?));
                Ok(2)
            }
            _ => Ok(0),
        }
    }

    /// The absolute time of EX/PX/EXAT/PXAT, if one was given; `command` names it in errors.
    fn at(&self, command: &'static str) -> Option<Result<i64, Error>> {
        self.timed
            .map(|((unit_ms, absolute), value)| absolute_expiry(value, unit_ms, absolute, command))
    }
}

/// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT ts | PXAT ts | KEEPTTL]
pub fn set(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut options = SetOptions::default();
    let mut expiry = ExpiryArgs::default();
    let mut i = 3;
    while i < args.len() {
        let taken = expiry.read(args, i, "keepttl")?;
        if taken > 0 {
            i += taken;
            continue;
        }
        let arg = &args[i];
        if is(arg, "nx") && options.condition != SetCondition::IfPresent {
            options.condition = SetCondition::IfAbsent;
        } else if is(arg, "xx") && options.condition != SetCondition::IfAbsent {
            options.condition = SetCondition::IfPresent;
        } else if is(arg, "get") {
            options.get = true;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if expiry.untimed {
        options.expiry = ExpiryChange::Keep;
    }
    if let Some(at) = expiry.at("set") {
        options.expiry = ExpiryChange::At(at?);
    }
    let outcome = ctx.db().set(&args[1], args[2].clone(), options)?;
    ctx.notify(STRING, "set", &args[1]);
    if matches!(options.expiry, ExpiryChange::At(_)) {
        ctx.notify(GENERIC, "expire", &args[1]);
    }
    Ok(if options.get {
        Reply::bulk_or_null(outcome.previous)
    } else if outcome.written {
        Reply::OK
    } else {
        Reply::Null
    })
}

pub fn setnx(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let options = SetOptions {
        condition: SetCondition::IfAbsent,
        ..SetOptions::default()
    };
    Ok(Reply::Integer(
        ctx.db().set(&args[1], args[2].clone(), options)?.written as i64,
    ))
}

pub fn setex(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    set_with_expiry(ctx, args, 1000, "setex")
}

pub fn psetex(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    set_with_expiry(ctx, args, 1, "psetex")
}

fn set_with_expiry(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    unit_ms: i64,
    command: &'static str,
) -> Result<Reply, Error> {
    let at = absolute_expiry(&args[2], unit_ms, false, command)?;
    let options = SetOptions {
        expiry: ExpiryChange::At(at),
        ..SetOptions::default()
    };
    ctx.db().set(&args[1], args[3].clone(), options)?;
    ctx.notify(STRING, "set", &args[1]);
    ctx.notify(GENERIC, "expire", &args[1]);
    Ok(Reply::OK)
}

pub fn getset(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let options = SetOptions {
        get: true,
        ..SetOptions::default()
    };
    Ok(Reply::bulk_or_null(
        ctx.db().set(&args[1], args[2].clone(), options)?.previous,
    ))
}

pub fn get(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk_or_null(ctx.db().get(&args[1])?))
}

pub fn getdel(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk_or_null(ctx.db().getdel(&args[1])?))
}

/// GETEX key [EX s | PX ms | EXAT ts | PXAT ts | PERSIST]
pub fn getex(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut expiry = ExpiryArgs::default();
    let mut i = 2;
    while i < args.len() {
        match expiry.read(args, i, "persist")? {
            0 => return Err(Error::Syntax),
            taken => i += taken,
        }
    }
    let change = match expiry.at("getex") {
        None if expiry.untimed => ExpiryChange::Clear,
        None => ExpiryChange::Keep,
        Some(Ok(at)) => ExpiryChange::At(at),
        // Redis reads the time only once it has found the key: a missing one is nil.
        Some(Err(err)) if ctx.db().exists_as(&args[1], &[KeyKind::String])? => return Err(err),
        Some(Err(_)) => return Ok(Reply::Null),
    };
    let event = match change {
        ExpiryChange::Clear => Some("persist"),
        ExpiryChange::At(_) => Some("expire"),
        ExpiryChange::Keep => None,
    };
    let value = ctx.db().getex(&args[1], change)?;
    if let Some(event) = event {
        // A time in the past deletes the key, which Redis announces as `del` alone.
        ctx.notify_unless_deleted(GENERIC, event, &args[1]);
    }
    Ok(Reply::bulk_or_null(value))
}

pub fn mget(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let values = ctx.db().mget(&args[1..])?;
    Ok(Reply::Array(
        values.into_iter().map(Reply::bulk_or_null).collect(),
    ))
}

fn pairs(args: &[Bytes], command: &str) -> Result<Vec<(Bytes, Bytes)>, Error> {
    if args.len().is_multiple_of(2) {
        return Err(Error::WrongArity(command.into()));
    }
    Ok(args[1..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect())
}

pub fn mset(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ctx.db().mset(&pairs(args, "mset")?, false)?;
    Ok(Reply::OK)
}

pub fn msetnx(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().mset(&pairs(args, "msetnx")?, true)? as i64,
    ))
}

pub fn incr(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().incr_by(&args[1], 1)?))
}

pub fn decr(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().incr_by(&args[1], -1)?))
}

pub fn incrby(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().incr_by(&args[1], int(&args[2])?)?))
}

pub fn decrby(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let delta = int(&args[2])?
        .checked_neg()
        .ok_or_else(|| Error::msg("decrement would overflow"))?;
    Ok(Reply::Integer(ctx.db().incr_by(&args[1], delta)?))
}

pub fn incrbyfloat(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Bulk(ctx.db().incr_by_float(&args[1], &args[2])?))
}

pub fn append(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let max = ctx.services.max_string_len();
    Ok(Reply::Integer(ctx.db().append(&args[1], &args[2], max)?))
}

pub fn strlen(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().strlen(&args[1])?))
}

pub fn getrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (start, end) = (int(&args[2])?, int(&args[3])?);
    Ok(Reply::Bulk(ctx.db().getrange(&args[1], start, end)?))
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
///
/// As in Redis, both keys are looked up before the options are read, and a key of another type
/// gets LCS's own error rather than WRONGTYPE.
pub fn lcs(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let Some((a, b)) = ctx.db().lcs_operands(&args[1], &args[2])? else {
        return Err(Error::msg("The specified keys must contain string values"));
    };
    let (mut want_len, mut want_idx, mut with_match_len, mut min_match_len) =
        (false, false, false, 0u32);
    let mut i = 3;
    while i < args.len() {
        match &args[i] {
            option if is(option, "len") => want_len = true,
            option if is(option, "idx") => want_idx = true,
            option if is(option, "withmatchlen") => with_match_len = true,
            option if is(option, "minmatchlen") && i + 1 < args.len() => {
                // Negative lengths count as 0; no run is longer than u32::MAX.
                min_match_len = int(&args[i + 1])?.clamp(0, u32::MAX as i64) as u32;
                i += 1;
            }
            _ => return Err(Error::Syntax),
        }
        i += 1;
    }
    if want_len && want_idx {
        return Err(Error::msg(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let table_limit = ctx.services.max_string_len();
    let found = ctx.db().lcs(&a, &b, table_limit, !want_len)?;
    let Some((subsequence, runs)) = found.walk else {
        return Ok(Reply::Integer(found.len.into()));
    };
    if !want_idx {
        return Ok(Reply::bulk(subsequence));
    }
    let range = |(start, end): (u32, u32)| {
        Reply::Array(vec![
            Reply::Integer(start.into()),
            Reply::Integer(end.into()),
        ])
    };
    let matches = runs
        .iter()
        .filter(|run| run.matched() >= min_match_len)
        .map(|run: &LcsRun| {
            let mut entry = vec![range(run.a), range(run.b)];
            if with_match_len {
                entry.push(Reply::Integer(run.matched().into()));
            }
            Reply::Array(entry)
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::bulk("matches"), Reply::Array(matches)),
        (Reply::bulk("len"), Reply::Integer(found.len.into())),
    ]))
}

pub fn setrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let offset = int(&args[2])?;
    let offset = usize::try_from(offset).map_err(|_| Error::msg("offset is out of range"))?;
    let max = ctx.services.max_string_len();
    Ok(Reply::Integer(
        ctx.db().setrange(&args[1], offset, &args[3], max)?,
    ))
}
