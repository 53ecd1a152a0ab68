//! Redis bitmap commands on strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::metadata::KeyKind;

use super::args::{int, is};
use super::Context;
use crate::error::Error;
use crate::types::bitmap::{BitwiseOp, FieldOp, FieldType, Overflow, Unit};

/// A bit offset below 2^32 (512 MB of string), as Redis accepts.
fn bit_offset(arg: &[u8]) -> Result<u64, Error> {
    int(arg)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .filter(|&n| n < 1 << 32)
        .ok_or_else(|| Error::msg("bit offset is not an integer or out of range"))
}

fn bit(arg: &[u8]) -> Result<bool, Error> {
    match arg {
        b"0" => Ok(false),
        b"1" => Ok(true),
        _ => Err(Error::msg("bit is not an integer or out of range")),
    }
}

fn unit(arg: Option<&Bytes>) -> Result<Unit, Error> {
    match arg {
        None => Ok(Unit::Byte),
        Some(a) if is(a, "byte") => Ok(Unit::Byte),
        Some(a) if is(a, "bit") => Ok(Unit::Bit),
        Some(_) => Err(Error::Syntax),
    }
}

pub fn setbit(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (offset, on) = (bit_offset(&args[2])?, bit(&args[3])?);
    Ok(Reply::Integer(ctx.db().setbit(&args[1], offset, on)? as i64))
}

pub fn getbit(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.db().getbit(&args[1], bit_offset(&args[2])?)? as i64,
    ))
}

/// BITCOUNT key [start end [BYTE | BIT]]
pub fn bitcount(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let range = match count_range(args) {
        Ok(range) => range,
        Err(err) if ctx.db().exists_as(&args[1], &[KeyKind::String])? => return Err(err),
        Err(_) => return Ok(Reply::Integer(0)),
    };
    Ok(Reply::Integer(ctx.db().bitcount(&args[1], range)? as i64))
}

/// BITPOS key bit [start [end [BYTE | BIT]]]
pub fn bitpos(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let target = match int(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(Error::msg("The bit argument must be 1 or 0.")),
    };
    let (start, end, unit) = match pos_range(args) {
        Ok(range) => range,
        Err(err) if ctx.db().exists_as(&args[1], &[KeyKind::String])? => return Err(err),
        Err(_) => return Ok(Reply::Integer(if target { -1 } else { 0 })),
    };
    Ok(Reply::Integer(
        ctx.db().bitpos(&args[1], target, start, end, unit)?,
    ))
}

fn count_range(args: &[Bytes]) -> Result<Option<(i64, i64, Unit)>, Error> {
    match args.len() {
        2 => Ok(None),
        4 | 5 => {
            let (start, end) = (int(&args[2])?, int(&args[3])?);
            // Redis answers an inverted range from the end before it reads the unit.
            if start < 0 && end < 0 && start > end {
                return Ok(Some((start, end, Unit::Byte)));
            }
            Ok(Some((start, end, unit(args.get(4))?)))
        }
        _ => Err(Error::Syntax),
    }
}

type PosRange = (Option<i64>, Option<i64>, Unit);

fn pos_range(args: &[Bytes]) -> Result<PosRange, Error> {
    if args.len() > 6 {
        return Err(Error::Syntax);
    }
    // In Redis's order: the unit is read before the end.
    let start = args.get(3).map(|a| int(a)).transpose()?;
    let unit = unit(args.get(5))?;
    let end = args.get(4).map(|a| int(a)).transpose()?;
    Ok((start, end, unit))
}

/// BITOP AND | OR | XOR | NOT destkey key [key ...]
pub fn bitop(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let op = if is(&args[1], "and") {
        BitwiseOp::And
    } else if is(&args[1], "or") {
        BitwiseOp::Or
    } else if is(&args[1], "xor") {
        BitwiseOp::Xor
    } else if is(&args[1], "not") {
        BitwiseOp::Not
    } else {
        return Err(Error::Syntax);
    };
    if op == BitwiseOp::Not && args.len() != 4 {
        return Err(Error::msg(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    Ok(Reply::Integer(
        ctx.db().bitop(op, &args[2], &args[3..])? as i64
    ))
}

fn field_type(arg: &[u8]) -> Result<FieldType, Error> {
    let invalid = || {
        Error::msg("Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
    };
    let (signed, digits) = match arg.split_first() {
        Some((b'i', rest)) => (true, rest),
        Some((b'u', rest)) => (false, rest),
        _ => return Err(invalid()),
    };
    let bits: u32 = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse().ok())
        .ok_or_else(invalid)?;
    if bits == 0 || bits > 64 || (!signed && bits == 64) {
        return Err(invalid());
    }
    Ok(FieldType { signed, bits })
}

/// An offset, or `#n` for the n-th field of this type.
fn field_offset(arg: &[u8], ty: FieldType) -> Result<u64, Error> {
    let invalid = || Error::msg("bit offset is not an integer or out of range");
    let (multiply, digits) = match arg.strip_prefix(b"#") {
        Some(rest) => (true, rest),
        None => (false, arg),
    };
    let n = u64::try_from(int(digits).map_err(|_| invalid())?).map_err(|_| invalid())?;
    let offset = if multiply {
        n.checked_mul(ty.bits as u64).ok_or_else(invalid)?
    } else {
        n
    };
    if offset + ty.bits as u64 > 1 << 32 {
        return Err(invalid());
    }
    Ok(offset)
}

fn field_ops(args: &[Bytes], read_only: bool) -> Result<Vec<FieldOp>, Error> {
    let mut ops = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let sub = &args[i];
        let needs = if is(sub, "get") {
            2
        } else if is(sub, "set") || is(sub, "incrby") {
            3
        } else if is(sub, "overflow") {
            1
        } else {
            0
        };
        if needs == 0 || args.len() < i + 1 + needs {
            return Err(Error::Syntax);
        }
        if is(sub, "overflow") {
            let mode = &args[i + 1];
            ops.push(FieldOp::Overflow(if is(mode, "wrap") {
                Overflow::Wrap
            } else if is(mode, "sat") {
                Overflow::Sat
            } else if is(mode, "fail") {
                Overflow::Fail
            } else {
                return Err(Error::msg("Invalid OVERFLOW type specified"));
            }));
        } else {
            let ty = field_type(&args[i + 1])?;
            let offset = field_offset(&args[i + 2], ty)?;
            ops.push(if is(sub, "get") {
                FieldOp::Get(ty, offset)
            } else if is(sub, "set") {
                FieldOp::Set(ty, offset, int(&args[i + 3])?)
            } else {
                FieldOp::IncrBy(ty, offset, int(&args[i + 3])?)
            });
        }
        i += 1 + needs;
    }
    // Redis parses every operation before it refuses a write in BITFIELD_RO.
    let writes = ops
        .iter()
        .any(|op| matches!(op, FieldOp::Set(..) | FieldOp::IncrBy(..)));
    if read_only && writes {
        return Err(Error::msg("BITFIELD_RO only supports the GET subcommand"));
    }
    Ok(ops)
}

fn field_reply(values: Vec<Option<i64>>) -> Reply {
    Reply::Array(
        values
            .into_iter()
            .map(|v| v.map_or(Reply::Null, Reply::Integer))
            .collect(),
    )
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type offset increment |
/// OVERFLOW WRAP|SAT|FAIL] ...
pub fn bitfield(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let ops = field_ops(&args[2..], false)?;
    Ok(field_reply(ctx.db().bitfield(&args[1], &ops)?))
}

/// BITFIELD_RO key [GET type offset ...]
pub fn bitfield_ro(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let ops = field_ops(&args[2..], true)?;
    Ok(field_reply(ctx.db().bitfield(&args[1], &ops)?))
}
