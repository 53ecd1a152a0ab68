//! Argument parsing shared by command families.

use std::time::Duration;

use bytes::Bytes;

use crate::error::Error;
use crate::keyspace::now_ms;
use crate::types::numbers::{parse_timeout_ms, TimeoutError};
use crate::types::string::parse_strict_i64;

pub fn int(arg: &[u8]) -> Result<i64, Error> {
    parse_strict_i64(arg).ok_or(Error::NotInteger)
}

/// A non-negative integer that fits a `usize`.
pub fn count(arg: &[u8]) -> Result<usize, Error> {
    usize::try_from(int(arg)?).map_err(|_| Error::NotInteger)
}

/// A non-negative integer, or `message` also for text that is no integer at all, as Redis's
/// `getPositiveLongFromObjectOrReply` answers.
pub fn non_negative(arg: &[u8], message: &'static str) -> Result<u64, Error> {
    int(arg)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| Error::msg(message))
}

/// An integer above 0, or `message` also for text that is no integer at all.
pub fn positive(arg: &[u8], message: &'static str) -> Result<u64, Error> {
    non_negative(arg, message)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::msg(message))
}

/// The count of LPOP, RPOP, SPOP, ZPOPMIN and ZPOPMAX, with Redis's message.
pub fn pop_count(arg: &[u8]) -> Result<u64, Error> {
    non_negative(arg, "value is out of range, must be positive")
}

/// A blocking command's timeout in seconds, fractions allowed; `None` for 0 (no limit).
pub fn timeout(arg: &[u8]) -> Result<Option<Duration>, Error> {
    let ms = parse_timeout_ms(arg).map_err(|err| {
        Error::msg(match err {
            TimeoutError::NotFloat => "timeout is not a float or out of range",
            TimeoutError::OutOfRange => "timeout is out of range",
            TimeoutError::Negative => "timeout is negative",
        })
    })?;
    // Redis adds it to the current time, which must not overflow either.
    if ms > (i64::MAX as u64).saturating_sub(now_ms()) {
        return Err(Error::msg("timeout is out of range"));
    }
    Ok((ms > 0).then(|| Duration::from_millis(ms)))
}

/// Splits SINTERCARD's `numkeys key [key ...] rest...` into the keys and the rest, with
/// Redis's messages.
pub fn numkeys(args: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), Error> {
    let n = numkeys_value(&args[0])?;
    if args.len() < 1 + n {
        return Err(Error::msg(
            "Number of keys can't be greater than number of args",
        ));
    }
    Ok((&args[1..1 + n], &args[1 + n..]))
}

/// `numkeys key [key ...]` of LMPOP, ZMPOP and their blocking forms, which Redis answers with
/// a syntax error when the keys leave no room for the direction after them.
pub fn mpop_numkeys(args: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), Error> {
    let n = numkeys_value(&args[0])?;
    if args.len() < 2 + n {
        return Err(Error::Syntax);
    }
    Ok((&args[1..1 + n], &args[1 + n..]))
}

fn numkeys_value(arg: &[u8]) -> Result<usize, Error> {
    Ok(positive(arg, "numkeys should be greater than 0")? as usize)
}

/// The `[LIMIT limit]` after the keys of SINTERCARD and ZINTERCARD; 0 means none.
pub fn intercard_limit(rest: &[Bytes]) -> Result<usize, Error> {
    let mut limit = 0;
    let mut options = rest.iter();
    // In Redis's order: each LIMIT's value is read before what follows it.
    while let Some(option) = options.next() {
        match options.next() {
            Some(value) if is(option, "limit") => {
                limit = count(value).map_err(|_| Error::msg("LIMIT can't be negative"))?;
            }
            _ => return Err(Error::Syntax),
        }
    }
    Ok(limit)
}

/// `[COUNT count]` after the direction of LMPOP and ZMPOP, read in Redis's order.
pub fn mpop_count(rest: &[Bytes]) -> Result<u64, Error> {
    let mut count = None;
    let mut options = rest.iter();
    while let Some(option) = options.next() {
        match options.next() {
            Some(n) if count.is_none() && is(option, "count") => {
                count = Some(positive(n, "count should be greater than 0")?);
            }
            _ => return Err(Error::Syntax),
        }
    }
    Ok(count.unwrap_or(1))
}

/// Case-insensitive comparison with an option name.
/// Redis's `addReplySubcommandSyntaxError`: a subcommand that exists, given the wrong
/// arguments.
pub fn subcommand_syntax(sub: &[u8], command: &str) -> Error {
    Error::msg(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {command} HELP.",
        String::from_utf8_lossy(sub)
    ))
}

pub fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

pub fn text(arg: &Bytes) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// The options of SCAN, HSCAN, SSCAN and ZSCAN after the cursor.
pub struct ScanArgs<'a> {
    pub cursor: u64,
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub type_name: Option<&'a [u8]>,
}

/// Parses `cursor [MATCH pattern] [COUNT count] [TYPE type]` (TYPE only if `allow_type`).
pub fn scan_args<'a>(args: &'a [Bytes], allow_type: bool) -> Result<ScanArgs<'a>, Error> {
    let cursor = scan_cursor(&args[0]).ok_or_else(|| Error::msg("invalid cursor"))?;
    let mut parsed = ScanArgs {
        cursor,
        pattern: None,
        count: 10,
        type_name: None,
    };
    let mut i = 1;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(Error::Syntax)?;
        if is(&args[i], "match") {
            parsed.pattern = Some(value.as_ref()).filter(|p| *p != b"*");
        } else if is(&args[i], "count") {
            // An integer below 1 is a syntax error in Redis, not a bad integer.
            parsed.count = usize::try_from(int(value)?)
                .ok()
                .filter(|&n| n >= 1)
                .ok_or(Error::Syntax)?;
        } else if allow_type && is(&args[i], "type") {
            parsed.type_name = Some(value);
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    Ok(parsed)
}

/// The arguments of HSCAN, SSCAN and ZSCAN, in Redis's order: the cursor, then the key
/// (`exists` is WRONGTYPE if it has another type), then the options; `None` when the key is
/// missing and the options are bad, which Redis answers with an empty page.
pub fn element_scan_args(
    args: &[Bytes],
    exists: impl FnOnce() -> Result<bool, Error>,
) -> Result<Option<ScanArgs<'_>>, Error> {
    match scan_args(args, false) {
        Ok(parsed) => Ok(Some(parsed)),
        Err(err) if scan_cursor(&args[0]).is_none() || exists()? => Err(err),
        Err(_) => Ok(None),
    }
}

/// A cursor as Redis's `strtoul` reads it: a minus sign wraps around (`-1` is 2^64 - 1), and
/// an empty cursor is 0.
fn scan_cursor(arg: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty() {
        return Some(0);
    }
    match text.strip_prefix('-') {
        Some(digits) if !digits.starts_with(['+', '-']) => {
            digits.parse::<u64>().ok().map(u64::wrapping_neg)
        }
        _ => text.parse().ok(),
    }
}

/// Whether a SCAN pattern (if any) matches.
pub fn scan_matches(pattern: Option<&[u8]>, item: &[u8]) -> bool {
    pattern.is_none_or(|p| crate::types::pattern::glob_match(p, item, false))
}

/// The count of SRANDMEMBER, HRANDFIELD and ZRANDMEMBER. Negative counts (repeats allowed)
/// are answered in full, so their size is bounded (ours: Redis would try to build any reply).
pub fn random_count(arg: &[u8]) -> Result<i64, Error> {
    const LIMIT: i64 = 1 << 24;
    let n = int(arg)?;
    if n == i64::MIN {
        return Err(Error::msg(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    if n < -LIMIT {
        return Err(Error::msg("value is out of range"));
    }
    Ok(n)
}

/// With WITHVALUES or WITHSCORES a reply holds two items per pick: Redis refuses counts whose
/// double would overflow (after it has read the rest of the arguments).
pub fn check_paired_count(count: i64) -> Result<(), Error> {
    if count > i64::MAX / 2 {
        return Err(Error::msg("value is out of range"));
    }
    Ok(())
}

/// A database index for SELECT, MOVE and COPY ... DB.
pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, Error> {
    let index = int(arg)?;
    usize::try_from(index)
        .ok()
        .filter(|&i| i < databases)
        .ok_or_else(|| Error::msg("DB index is out of range"))
}
