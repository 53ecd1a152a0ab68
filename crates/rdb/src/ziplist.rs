//! Ziplists (`ziplist.c`), the packed encoding of Redis 6.2 and older, read from version 9
//! payloads and older files: a 10-byte header (total bytes, u32; offset of the last entry,
//! u32; entry count, u16, 65535 if unknown), entries, and 0xFF. An entry is the previous
//! entry's length (one byte, or 0xFE and a u32), an encoding with the length or integer
//! type, and the data.

use bytes::Bytes;

use crate::{integer_text, RdbError};

const HEADER: usize = 10;
const END: u8 = 0xff;
const BIG_PREVLEN: u8 = 0xfe;

fn corrupt(what: &'static str) -> RdbError {
    RdbError::Corrupt(what)
}

/// The entries of a ziplist, integers in decimal, after checking the header, every
/// previous-entry length and the count.
pub fn decode(zl: &[u8]) -> Result<Vec<Bytes>, RdbError> {
    if zl.len() < HEADER + 1 {
        return Err(corrupt("ziplist shorter than its header"));
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    if total != zl.len() {
        return Err(corrupt("ziplist length differs from its header"));
    }
    let mut entries = Vec::with_capacity((count as usize).min(zl.len() / 2));
    let (mut at, mut last, mut previous_len) = (HEADER, HEADER, 0usize);
    while *zl.get(at).ok_or(corrupt("ziplist without its end"))? != END {
        let (entry, len, prevlen) = entry(&zl[at..])?;
        if prevlen != previous_len {
            return Err(corrupt("ziplist entry with a wrong previous length"));
        }
        entries.push(entry);
        last = at;
        previous_len = len;
        at += len;
    }
    if at + 1 != zl.len() {
        return Err(corrupt("ziplist with bytes after its end"));
    }
    if tail != last {
        return Err(corrupt("ziplist tail offset is wrong"));
    }
    if count != u16::MAX && count as usize != entries.len() {
        return Err(corrupt("ziplist count differs from its entries"));
    }
    Ok(entries)
}

/// One entry at the start of `p`: its value, its whole length and the previous entry's.
fn entry(p: &[u8]) -> Result<(Bytes, usize, usize), RdbError> {
    let short = || corrupt("ziplist entry past the end");
    let byte = |i: usize| p.get(i).copied().ok_or_else(short);
    let (prevlen, mut at) = match byte(0)? {
        BIG_PREVLEN => {
            let raw = p.get(1..5).ok_or_else(short)?;
            (
                u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize,
                5,
            )
        }
        small => (small as usize, 1),
    };
    let encoding = byte(at)?;
    let string = |from: usize, len: usize| -> Result<(Bytes, usize), RdbError> {
        let data = p.get(from..from + len).ok_or_else(short)?;
        Ok((Bytes::copy_from_slice(data), from + len))
    };
    let int = |from: usize, bytes: usize| -> Result<(Bytes, usize), RdbError> {
        let data = p.get(from..from + bytes).ok_or_else(short)?;
        let mut raw = [0u8; 8];
        raw[..bytes].copy_from_slice(data);
        let shift = 64 - 8 * bytes as u32;
        let value = ((u64::from_le_bytes(raw) << shift) as i64) >> shift;
        Ok((integer_text(value), from + bytes))
    };
    let (value, end) = match encoding >> 6 {
        0 => string(at + 1, (encoding & 0x3f) as usize)?,
        1 => string(
            at + 2,
            ((encoding as usize & 0x3f) << 8) | byte(at + 1)? as usize,
        )?,
        2 => {
            let raw = p.get(at + 1..at + 5).ok_or_else(short)?;
            string(
                at + 5,
                u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize,
            )?
        }
        _ => {
            at += 1;
            match encoding {
                0xc0 => int(at, 2)?,
                0xd0 => int(at, 4)?,
                0xe0 => int(at, 8)?,
                0xf0 => int(at, 3)?,
                0xfe => int(at, 1)?,
                0xf1..=0xfd => (integer_text((encoding & 0x0f) as i64 - 1), at),
                _ => return Err(corrupt("ziplist entry with an unknown encoding")),
            }
        }
    };
    Ok((value, end, prevlen))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ziplist as ziplist.c writes one, for tests: strings and the integer encodings.
    pub(crate) fn build(entries: &[&[u8]]) -> Vec<u8> {
        let mut zl = vec![0u8; HEADER];
        let (mut previous, mut last) = (0usize, HEADER);
        for data in entries {
            let start = zl.len();
            last = start;
            if previous < 254 {
                zl.push(previous as u8);
            } else {
                zl.push(BIG_PREVLEN);
                zl.extend_from_slice(&(previous as u32).to_le_bytes());
            }
            match crate::canonical_integer(data) {
                Some(v @ 0..=12) => zl.push(0xf1 + v as u8),
                Some(v) if i8::try_from(v).is_ok() => zl.extend_from_slice(&[0xfe, v as u8]),
                Some(v) if i16::try_from(v).is_ok() => {
                    zl.push(0xc0);
                    zl.extend_from_slice(&(v as i16).to_le_bytes());
                }
                Some(v) if (-8388608..8388608).contains(&v) => {
                    zl.push(0xf0);
                    zl.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
                }
                Some(v) if i32::try_from(v).is_ok() => {
                    zl.push(0xd0);
                    zl.extend_from_slice(&(v as i32).to_le_bytes());
                }
                Some(v) => {
                    zl.push(0xe0);
                    zl.extend_from_slice(&v.to_le_bytes());
                }
                None if data.len() < 64 => {
                    zl.push(data.len() as u8);
                    zl.extend_from_slice(data);
                }
                None if data.len() < 16384 => {
                    zl.push(0x40 | (data.len() >> 8) as u8);
                    zl.push(data.len() as u8);
                    zl.extend_from_slice(data);
                }
                None => {
                    zl.push(0x80);
                    zl.extend_from_slice(&(data.len() as u32).to_be_bytes());
                    zl.extend_from_slice(data);
                }
            }
            previous = zl.len() - start;
        }
        zl.push(END);
        let total = zl.len() as u32;
        zl[..4].copy_from_slice(&total.to_le_bytes());
        zl[4..8].copy_from_slice(&(last as u32).to_le_bytes());
        zl[8..10].copy_from_slice(&(entries.len() as u16).to_le_bytes());
        zl
    }

    #[test]
    fn every_encoding_is_read() {
        let long = "z".repeat(20000);
        let mid = "m".repeat(300);
        let samples: Vec<&[u8]> = vec![
            b"0",
            b"12",
            b"13",
            b"-1",
            b"127",
            b"-129",
            b"32767",
            b"8388607",
            b"-8388608",
            b"2147483647",
            b"9223372036854775807",
            b"",
            b"abc",
            mid.as_bytes(),
            long.as_bytes(),
            b"after a long one",
        ];
        let zl = build(&samples);
        let read = decode(&zl).unwrap();
        let read: Vec<&[u8]> = read.iter().map(|e| e.as_ref()).collect();
        assert_eq!(read, samples);
    }

    #[test]
    fn damage_is_refused() {
        let zl = build(&[b"one", b"2", b"three"]);
        for cut in 0..zl.len() {
            assert!(decode(&zl[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_tail = zl.clone();
        wrong_tail[4] += 1;
        assert!(decode(&wrong_tail).is_err());
        let mut wrong_prevlen = zl.clone();
        wrong_prevlen[HEADER + 5] = 1;
        assert!(decode(&wrong_prevlen).is_err());
    }
}
