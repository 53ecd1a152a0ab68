//! Redis bitmaps: bit-level commands on strings. They read and write only the bytes (and so
//! the fragments) they touch; see `fragments` for how long strings are stored.

use bytes::Bytes;
use shale_storage::metadata::{KeyKind, Metadata};

use super::fragments::FRAGMENT;
use super::string::string_len;
use super::{byte_window, clamped_window};
use crate::error::Error;
use crate::keyspace::Db;

/// Bytes read at a time by BITCOUNT, BITPOS and BITOP.
const CHUNK: u64 = 64 * 1024;

/// Whether BITCOUNT/BITPOS indexes count bytes or bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Byte,
    Bit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitwiseOp {
    And,
    Or,
    Xor,
    Not,
}

/// A BITFIELD integer type: `i1`..`i64` or `u1`..`u63`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldType {
    pub signed: bool,
    pub bits: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    Get(FieldType, u64),
    Set(FieldType, u64, i64),
    IncrBy(FieldType, u64, i64),
    Overflow(Overflow),
}

impl FieldType {
    fn min(self) -> i128 {
        if self.signed {
            -(1i128 << (self.bits - 1))
        } else {
            0
        }
    }

    fn max(self) -> i128 {
        if self.signed {
            (1i128 << (self.bits - 1)) - 1
        } else {
            (1i128 << self.bits) - 1
        }
    }

    /// Fits `value` into the type under `overflow`; `None` when FAIL refuses it.
    fn fit(self, value: i128, overflow: Overflow) -> Option<i64> {
        if (self.min()..=self.max()).contains(&value) {
            return Some(value as i64);
        }
        match overflow {
            Overflow::Fail => None,
            Overflow::Sat => Some(value.clamp(self.min(), self.max()) as i64),
            Overflow::Wrap => {
                let span = 1i128 << self.bits;
                let wrapped = value.rem_euclid(span);
                Some(if self.signed && wrapped > self.max() {
                    wrapped - span
                } else {
                    wrapped
                } as i64)
            }
        }
    }

    fn decode(self, raw: u64) -> i64 {
        if self.signed && self.bits < 64 && raw >> (self.bits - 1) & 1 == 1 {
            (raw as i64) - (1i64 << self.bits)
        } else {
            raw as i64
        }
    }
}

/// Reads `bits` bits (at most 64) starting at bit `offset` of `bytes`, where bit 0 is the most
/// significant bit of byte 0 (Redis's order).
fn read_bits(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0u64, |acc, i| {
        let at = offset + i;
        let bit = bytes
            .get((at / 8) as usize)
            .map_or(0, |b| b >> (7 - at % 8) & 1);
        acc << 1 | bit as u64
    })
}

fn write_bits(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let at = offset + i;
        let bit = (value >> (bits as u64 - 1 - i)) & 1;
        let byte = &mut bytes[(at / 8) as usize];
        let mask = 1u8 << (7 - at % 8);
        *byte = if bit == 1 {
            *byte | mask
        } else {
            *byte & !mask
        };
    }
}

impl<'a> Db<'a> {
    fn string_meta(&self, key: &[u8]) -> Result<Option<Metadata>, Error> {
        self.typed_meta(key, KeyKind::String)
    }

    /// SETBIT: returns the bit's previous value.
    pub fn setbit(&self, key: &'a [u8], offset: u64, on: bool) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let mut string = self.open_string(key)?;
        let byte_at = offset / 8;
        let mut byte = string.read(byte_at, byte_at + 1)?;
        let old = read_bits(&byte, offset % 8, 1) == 1;
        // As in Redis, a bit already so in a string that need not grow is no change: nothing
        // is written, WATCH and keyspace events see nothing.
        if string.existed && byte_at < string.len() && old == on {
            return Ok(old);
        }
        write_bits(&mut byte, offset % 8, 1, on as u64);
        string.write(byte_at, &byte)?;
        string.commit()?;
        Ok(old)
    }

    pub fn getbit(&self, key: &[u8], offset: u64) -> Result<bool, Error> {
        let Some(meta) = self.string_meta(key)? else {
            return Ok(false);
        };
        let byte = self.string_range(key, &meta, offset / 8, offset / 8 + 1)?;
        Ok(read_bits(&byte, offset % 8, 1) == 1)
    }

    /// BITCOUNT key [start end [BYTE|BIT]]: reads only the stored parts of the range.
    pub fn bitcount(&self, key: &[u8], range: Option<(i64, i64, Unit)>) -> Result<u64, Error> {
        let Some(meta) = self.string_meta(key)? else {
            return Ok(0);
        };
        let len = string_len(&meta);
        let (start, end, unit) = range.unwrap_or((0, -1, Unit::Byte));
        let Some(bits) = bit_window(byte_window, start, end, len, unit) else {
            return Ok(0);
        };
        let mut count = 0u64;
        self.stored_fragments(key, &meta, bits.0 / 8, bits.1 / 8 + 1, &mut |at, bytes| {
            count += count_ones(bytes, at, bits);
            true
        })?;
        Ok(count)
    }

    /// BITPOS key bit [start [end [BYTE|BIT]]]: reads only the stored parts of the range;
    /// what lies between them is zeros.
    pub fn bitpos(
        &self,
        key: &[u8],
        bit: bool,
        start: Option<i64>,
        end: Option<i64>,
        unit: Unit,
    ) -> Result<i64, Error> {
        let Some(meta) = self.string_meta(key)? else {
            return Ok(if bit { -1 } else { 0 });
        };
        let len = string_len(&meta);
        let window = start.unwrap_or(0);
        let Some(bits) = bit_window(clamped_window, window, end.unwrap_or(-1), len, unit) else {
            return Ok(-1);
        };
        let (first_bit, last_bit) = bits;
        let mut found = None;
        // The first byte not yet seen: a stored part that begins after it leaves zeros between.
        let mut unseen = first_bit / 8;
        self.stored_fragments(
            key,
            &meta,
            first_bit / 8,
            last_bit / 8 + 1,
            &mut |at, bytes| {
                if !bit && at > unseen {
                    found = Some((unseen * 8).max(first_bit));
                    return false;
                }
                found = find_bit(bytes, at, bit, bits);
                unseen = unseen.max(at + bytes.len() as u64);
                found.is_none()
            },
        )?;
        if found.is_none() && !bit && unseen <= last_bit / 8 {
            found = Some((unseen * 8).max(first_bit));
        }
        Ok(match found {
            Some(position) => position as i64,
            // Looking for a zero without an explicit end: the string counts as padded with zeros.
            None if !bit && end.is_none() => last_bit as i64 + 1,
            None => -1,
        })
    }

    /// BITOP: stores the result in `dst` (deleting it when empty) and returns its length.
    /// AND, OR and XOR of sparse bitmaps visit only the stretches where a source (for AND,
    /// every source) has stored bytes; the rest of the result is zeros, left unwritten. NOT
    /// turns zeros into ones, so its result is written whole, as in Redis.
    pub fn bitop(&self, op: BitwiseOp, dst: &'a [u8], keys: &[Bytes]) -> Result<u64, Error> {
        let mut all: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        all.push(dst);
        let _guard = self.lock(&all)?;
        let sources: Vec<Option<Metadata>> = keys
            .iter()
            .map(|k| self.string_meta(k))
            .collect::<Result<_, _>>()?;
        let len = sources
            .iter()
            .flatten()
            .map(|m| string_len(m) as u64)
            .max()
            .unwrap_or(0);
        let mut result = self.new_string(dst)?;
        let mut at = 0;
        while let Some(from) = self.next_stretch(op, keys, &sources, at, len)? {
            let end = (from + CHUNK).min(len);
            let mut chunk: Option<Vec<u8>> = None;
            for (key, meta) in keys.iter().zip(&sources) {
                let mut bytes = match meta {
                    Some(meta) => self.string_range(key, meta, from, end)?,
                    None => Vec::new(),
                };
                bytes.resize((end - from) as usize, 0);
                chunk = Some(match chunk {
                    None if op == BitwiseOp::Not => bytes.iter().map(|b| !b).collect(),
                    None => bytes,
                    Some(mut acc) => {
                        for (a, b) in acc.iter_mut().zip(&bytes) {
                            *a = match op {
                                BitwiseOp::And => *a & b,
                                BitwiseOp::Or => *a | b,
                                BitwiseOp::Xor | BitwiseOp::Not => *a ^ b,
                            };
                        }
                        acc
                    }
                });
            }
            result.write(from, &chunk.unwrap_or_default())?;
            at = end;
        }
        // The result has the longest source's length, zeros where nothing was written.
        result.write(len, &[])?;
        result.commit()?;
        Ok(len)
    }

    /// Where BITOP's next stretch of work at or after byte `at` begins (on a fragment
    /// boundary), or `None` if the rest of the result is zeros.
    fn next_stretch(
        &self,
        op: BitwiseOp,
        keys: &[Bytes],
        sources: &[Option<Metadata>],
        at: u64,
        len: u64,
    ) -> Result<Option<u64>, Error> {
        if at >= len {
            return Ok(None);
        }
        let next = |key: &Bytes, meta: &Option<Metadata>, from: u64| match meta {
            Some(meta) => self.next_stored(key, meta, from),
            None => Ok(None),
        };
        let boundary = |offset: u64| (offset.max(at) / FRAGMENT) * FRAGMENT;
        match op {
            BitwiseOp::Not => Ok(Some(at)),
            BitwiseOp::Or | BitwiseOp::Xor => {
                let mut first: Option<u64> = None;
                for (key, meta) in keys.iter().zip(sources) {
                    if let Some(offset) = next(key, meta, at)? {
                        first = Some(first.map_or(offset, |f| f.min(offset)));
                    }
                }
                Ok(first.map(boundary))
            }
            // Every source must have stored bytes there: seek each to the farthest start
            // until they agree.
            BitwiseOp::And => {
                let mut from = at;
                loop {
                    let mut farthest = from;
                    for (key, meta) in keys.iter().zip(sources) {
                        match next(key, meta, from)? {
                            Some(offset) => farthest = farthest.max(boundary(offset)),
                            None => return Ok(None),
                        }
                    }
                    if farthest == boundary(from) || farthest >= len {
                        return Ok((farthest < len).then_some(farthest));
                    }
                    from = farthest;
                }
            }
        }
    }

    /// BITFIELD and BITFIELD_RO: one reply per GET, SET or INCRBY (`None` where FAIL
    /// refused an overflow).
    pub fn bitfield(&self, key: &'a [u8], ops: &[FieldOp]) -> Result<Vec<Option<i64>>, Error> {
        let _guard = self.lock(&[key])?;
        let mut string = self.open_string(key)?;
        // As in Redis, SET and INCRBY first grow the string, zero-padded, to the farthest byte
        // any of them reaches, even if OVERFLOW FAIL then leaves every field as it was.
        let farthest_write = ops
            .iter()
            .filter_map(|op| match *op {
                FieldOp::Set(ty, offset, _) | FieldOp::IncrBy(ty, offset, _) => {
                    Some((offset + ty.bits as u64 - 1) / 8)
                }
                _ => None,
            })
            .max();
        let grows = farthest_write.filter(|&last| last >= string.len());
        if let Some(last) = grows {
            string.write(last, &[0])?;
        }
        // As in Redis, fields set to the bits they had in a string that did not grow are no
        // change: nothing is written, WATCH and keyspace events see nothing.
        let mut changed = false;
        let mut overflow = Overflow::Wrap;
        let mut replies = Vec::new();
        for op in ops {
            let (ty, offset) = match *op {
                FieldOp::Overflow(mode) => {
                    overflow = mode;
                    continue;
                }
                FieldOp::Get(ty, offset)
                | FieldOp::Set(ty, offset, _)
                | FieldOp::IncrBy(ty, offset, _) => (ty, offset),
            };
            let (first, last) = (offset / 8, (offset + ty.bits as u64 - 1) / 8);
            let mut bytes = string.read(first, last + 1)?;
            let shift = offset % 8;
            let old = ty.decode(read_bits(&bytes, shift, ty.bits));
            let new = match *op {
                FieldOp::Get(..) => {
                    replies.push(Some(old));
                    continue;
                }
                FieldOp::Set(_, _, value) => {
                    // Redis reads the value of an unsigned SET as unsigned: -1 is 2^64 - 1.
                    let value = if ty.signed {
                        value as i128
                    } else {
                        value as u64 as i128
                    };
                    ty.fit(value, overflow).map(|v| (v, old))
                }
                FieldOp::IncrBy(_, _, incr) => {
                    ty.fit(old as i128 + incr as i128, overflow).map(|v| (v, v))
                }
                FieldOp::Overflow(_) => continue,
            };
            match new {
                None => replies.push(None),
                Some((stored, reply)) => {
                    let mask = if ty.bits == 64 {
                        u64::MAX
                    } else {
                        (1u64 << ty.bits) - 1
                    };
                    let bits = stored as u64 & mask;
                    if bits != read_bits(&bytes, shift, ty.bits) {
                        write_bits(&mut bytes, shift, ty.bits, bits);
                        string.write(first, &bytes)?;
                        changed = true;
                    }
                    replies.push(Some(reply));
                }
            }
        }
        if grows.is_some() || changed {
            string.commit()?;
        }
        Ok(replies)
    }
}

/// The inclusive bit window of a BITCOUNT or BITPOS range over a string of `len` bytes,
/// resolved by `window` (which reads negative ends as Redis does for that command).
fn bit_window(
    window: fn(i64, i64, i64) -> Option<(u64, u64)>,
    start: i64,
    end: i64,
    len: i64,
    unit: Unit,
) -> Option<(u64, u64)> {
    match unit {
        Unit::Bit => window(start, end, len * 8),
        Unit::Byte => window(start, end, len).map(|(first, last)| (first * 8, last * 8 + 7)),
    }
}

/// Where the bytes of the inclusive bit window `bits` lie in `bytes`, which begin at byte `at`
/// of the string: `[from, to)`, empty if none do.
fn window_span(bytes: &[u8], at: u64, bits: (u64, u64)) -> (usize, usize) {
    let from = (bits.0 / 8).saturating_sub(at) as usize;
    let to = ((bits.1 / 8 + 1).saturating_sub(at) as usize).min(bytes.len());
    (from, to)
}

/// The bits of `bytes` (which begin at byte `at` of the string) set within the inclusive bit
/// window `bits`.
fn count_ones(bytes: &[u8], at: u64, bits: (u64, u64)) -> u64 {
    let (first_byte, last_byte) = (bits.0 / 8, bits.1 / 8);
    let (from, to) = window_span(bytes, at, bits);
    if from >= to {
        return 0;
    }
    let mut count: u64 = bytes[from..to].iter().map(|b| b.count_ones() as u64).sum();
    // Bits of the window's end bytes that lie outside it.
    if at + (from as u64) == first_byte {
        let outside = bytes[from] & !(0xFFu8 >> (bits.0 % 8));
        count -= outside.count_ones() as u64;
    }
    if at + (to as u64 - 1) == last_byte {
        let outside = bytes[to - 1] & 0xFFu8.checked_shr(bits.1 as u32 % 8 + 1).unwrap_or(0);
        count -= outside.count_ones() as u64;
    }
    count
}

/// The position of the first bit equal to `bit` within the inclusive bit window `bits` in
/// `bytes`, which begin at byte `at` of the string.
fn find_bit(bytes: &[u8], at: u64, bit: bool, bits: (u64, u64)) -> Option<u64> {
    let (from, to) = window_span(bytes, at, bits);
    let (skip, skip_word) = if bit { (0x00, 0) } else { (0xFF, u64::MAX) };
    let window = bytes.get(from..to)?;
    // Whole words without the bit first: a dense bitmap's long runs go eight bytes a step.
    let words = window
        .chunks_exact(8)
        .take_while(|word| {
            <[u8; 8]>::try_from(*word).is_ok_and(|w| u64::from_ne_bytes(w) == skip_word)
        })
        .count();
    for (i, byte) in window.iter().enumerate().skip(words * 8) {
        if *byte == skip {
            continue;
        }
        let base = (at + (from + i) as u64) * 8;
        for b in 0..8 {
            let position = base + b;
            if position >= bits.0 && position <= bits.1 && (byte >> (7 - b) & 1 == 1) == bit {
                return Some(position);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_msb_first() {
        let mut bytes = [0u8; 2];
        write_bits(&mut bytes, 1, 1, 1);
        assert_eq!(bytes, [0b0100_0000, 0]);
        write_bits(&mut bytes, 6, 4, 0b1011);
        assert_eq!(bytes, [0b0100_0010, 0b1100_0000]);
        assert_eq!(read_bits(&bytes, 6, 4), 0b1011);
        assert_eq!(read_bits(&bytes, 0, 16), 0b0100_0010_1100_0000);
    }

    #[test]
    fn overflow_rules() {
        let u8t = FieldType {
            signed: false,
            bits: 8,
        };
        let i8t = FieldType {
            signed: true,
            bits: 8,
        };
        assert_eq!(u8t.fit(300, Overflow::Wrap), Some(44));
        assert_eq!(u8t.fit(300, Overflow::Sat), Some(255));
        assert_eq!(u8t.fit(-1, Overflow::Sat), Some(0));
        assert_eq!(u8t.fit(300, Overflow::Fail), None);
        assert_eq!(i8t.fit(128, Overflow::Wrap), Some(-128));
        assert_eq!(i8t.fit(-129, Overflow::Sat), Some(-128));
        assert_eq!(i8t.decode(0xFF), -1);
        let i64t = FieldType {
            signed: true,
            bits: 64,
        };
        assert_eq!(
            i64t.fit(i64::MAX as i128 + 1, Overflow::Wrap),
            Some(i64::MIN)
        );
    }

    #[test]
    fn ranges_resolve_like_redis() {
        assert_eq!(byte_window(0, -1, 10), Some((0, 9)));
        assert_eq!(byte_window(-3, -1, 10), Some((7, 9)));
        assert_eq!(byte_window(5, 100, 10), Some((5, 9)));
        assert_eq!(byte_window(5, 2, 10), None);
        assert_eq!(byte_window(0, -1, 0), None);
        assert_eq!(byte_window(-7, -8, 6), None);
        assert_eq!(clamped_window(-3, -7, 2), Some((0, 0)));
    }
}
