//! Listpacks (`listpack.c`), Redis 7's packed encoding of small hashes, sorted sets and list
//! nodes: a 6-byte header (total bytes, u32; entry count, u16, 65535 if unknown), entries,
//! and 0xFF. An entry is an encoding byte, its data, and the entry's length written
//! backwards so the list can be walked from its end.

use bytes::Bytes;

use crate::{integer_text, RdbError};

const HEADER: usize = 6;
const EOF: u8 = 0xff;
const UNKNOWN_COUNT: u16 = u16::MAX;

fn corrupt(what: &'static str) -> RdbError {
    RdbError::Corrupt(what)
}

/// The entries of a listpack, integers in decimal (as Redis returns them), after checking
/// every length, back-length and the count.
pub fn decode(lp: &[u8]) -> Result<Vec<Bytes>, RdbError> {
    if lp.len() < HEADER + 1 {
        return Err(corrupt("listpack shorter than its header"));
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    if total != lp.len() {
        return Err(corrupt("listpack length differs from its header"));
    }
    let mut entries = Vec::with_capacity((count as usize).min(lp.len() / 2));
    let mut at = HEADER;
    loop {
        let first = *lp.get(at).ok_or(corrupt("listpack without its end"))?;
        if first == EOF {
            break;
        }
        let (entry, len) = entry(&lp[at..])?;
        let backlen_at = at + len;
        let backlen = backlen_size(len as u64);
        let written = lp
            .get(backlen_at..backlen_at + backlen)
            .ok_or(corrupt("listpack entry past the end"))?;
        if written != &encode_backlen(len as u64)[..] {
            return Err(corrupt("listpack entry with a wrong back-length"));
        }
        entries.push(entry);
        at = backlen_at + backlen;
    }
    if at + 1 != lp.len() {
        return Err(corrupt("listpack with bytes after its end"));
    }
    if count != UNKNOWN_COUNT && count as usize != entries.len() {
        return Err(corrupt("listpack count differs from its entries"));
    }
    Ok(entries)
}

/// One entry at the start of `p`, and the bytes of its encoding and data.
fn entry(p: &[u8]) -> Result<(Bytes, usize), RdbError> {
    let short = || corrupt("listpack entry past the end");
    let byte = |i: usize| p.get(i).copied().ok_or_else(short);
    let string = |from: usize, len: usize| -> Result<(Bytes, usize), RdbError> {
        let data = p.get(from..from + len).ok_or_else(short)?;
        Ok((Bytes::copy_from_slice(data), from + len))
    };
    let int = |bytes: usize| -> Result<(Bytes, usize), RdbError> {
        let data = p.get(1..1 + bytes).ok_or_else(short)?;
        let mut raw = [0u8; 8];
        raw[..bytes].copy_from_slice(data);
        let unsigned = u64::from_le_bytes(raw);
        let shift = 64 - 8 * bytes as u32;
        let value = ((unsigned << shift) as i64) >> shift;
        Ok((integer_text(value), 1 + bytes))
    };
    let first = byte(0)?;
    match first {
        _ if first & 0x80 == 0 => Ok((integer_text(first as i64), 1)),
        _ if first & 0xc0 == 0x80 => string(1, (first & 0x3f) as usize),
        _ if first & 0xe0 == 0xc0 => {
            let raw = ((first as u16 & 0x1f) << 8 | byte(1)? as u16) as i64;
            let value = if raw >= 1 << 12 { raw - (1 << 13) } else { raw };
            Ok((integer_text(value), 2))
        }
        _ if first & 0xf0 == 0xe0 => string(2, ((first as usize & 0x0f) << 8) | byte(1)? as usize),
        0xf0 => {
            let len = u32::from_le_bytes([byte(1)?, byte(2)?, byte(3)?, byte(4)?]) as usize;
            string(5, len)
        }
        0xf1 => int(2),
        0xf2 => int(3),
        0xf3 => int(4),
        0xf4 => int(8),
        _ => Err(corrupt("listpack entry with an unknown encoding")),
    }
}

fn backlen_size(len: u64) -> usize {
    match len {
        0..=127 => 1,
        128..16383 => 2,
        16383..2097151 => 3,
        2097151..268435455 => 4,
        _ => 5,
    }
}

/// The entry length written backwards: 7 bits a byte, the high bit marking all but the first.
fn encode_backlen(len: u64) -> Vec<u8> {
    let size = backlen_size(len);
    (0..size)
        .map(|i| {
            let shift = 7 * (size - 1 - i);
            let bits = ((len >> shift) & 127) as u8;
            if i == 0 {
                (len >> shift) as u8
            } else {
                bits | 128
            }
        })
        .collect()
}

/// A listpack of `entries`, each stored as Redis stores it: as an integer when it is one in
/// canonical form, otherwise as a string.
pub fn encode<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut lp = vec![0u8; HEADER];
    let mut count: usize = 0;
    for data in entries {
        let start = lp.len();
        match crate::canonical_integer(data) {
            Some(v) => encode_integer(&mut lp, v),
            None => encode_string(&mut lp, data),
        }
        let len = (lp.len() - start) as u64;
        lp.extend_from_slice(&encode_backlen(len));
        count += 1;
    }
    lp.push(EOF);
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let count = if count < UNKNOWN_COUNT as usize {
        count as u16
    } else {
        UNKNOWN_COUNT
    };
    lp[4..6].copy_from_slice(&count.to_le_bytes());
    lp
}

fn encode_integer(lp: &mut Vec<u8>, v: i64) {
    match v {
        0..=127 => lp.push(v as u8),
        -4096..=4095 => {
            let raw = if v < 0 { (1 << 13) + v } else { v } as u16;
            lp.push((raw >> 8) as u8 | 0xc0);
            lp.push(raw as u8);
        }
        -32768..=32767 => {
            lp.push(0xf1);
            lp.extend_from_slice(&(v as i16).to_le_bytes());
        }
        -8388608..=8388607 => {
            lp.push(0xf2);
            lp.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        }
        -2147483648..=2147483647 => {
            lp.push(0xf3);
            lp.extend_from_slice(&(v as i32).to_le_bytes());
        }
        _ => {
            lp.push(0xf4);
            lp.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn encode_string(lp: &mut Vec<u8>, data: &[u8]) {
    let len = data.len();
    if len < 64 {
        lp.push(0x80 | len as u8);
    } else if len < 4096 {
        lp.push(0xe0 | (len >> 8) as u8);
        lp.push(len as u8);
    } else {
        lp.push(0xf0);
        lp.extend_from_slice(&(len as u32).to_le_bytes());
    }
    lp.extend_from_slice(data);
}

/// The bytes `data` takes as a listpack entry, back-length included.
pub fn entry_size(data: &[u8]) -> usize {
    match crate::canonical_integer(data) {
        Some(v) => integer_entry_size(v),
        None => {
            let body = string_header_len(data.len()) + data.len();
            body + backlen_size(body as u64)
        }
    }
}

/// The bytes the integer `v` takes as a listpack entry (`lpAppendInteger`), back-length
/// included.
pub fn integer_entry_size(v: i64) -> usize {
    let mut scratch = Vec::with_capacity(9);
    encode_integer(&mut scratch, v);
    scratch.len() + backlen_size(scratch.len() as u64)
}

fn string_header_len(len: usize) -> usize {
    match len {
        0..64 => 1,
        64..4096 => 2,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(entries: &[Bytes]) -> Vec<&[u8]> {
        entries.iter().map(|e| e.as_ref()).collect()
    }

    #[test]
    fn every_encoding_round_trips() {
        let long = "x".repeat(5000);
        let mid = "y".repeat(300);
        let samples: Vec<&[u8]> = vec![
            b"0",
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"4096",
            b"-32768",
            b"32767",
            b"-8388608",
            b"8388607",
            b"8388608",
            b"-2147483648",
            b"2147483647",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"9223372036854775808",
            b"",
            b"hello",
            b"007",
            b"+1",
            b"-0",
            b"1.5",
            mid.as_bytes(),
            long.as_bytes(),
        ];
        let lp = encode(samples.iter().copied());
        assert_eq!(texts(&decode(&lp).unwrap()), samples);
    }

    #[test]
    fn matches_redis_bytes() {
        // lpNew + lpAppend("a") + lpAppend("1024"): as listpack.c writes them.
        let lp = encode([&b"a"[..], b"1024"]);
        assert_eq!(
            lp,
            [0x0d, 0, 0, 0, 0x02, 0, 0x81, b'a', 0x02, 0xc4, 0x00, 0x02, 0xff]
        );
    }

    #[test]
    fn backlengths_of_every_size() {
        for len in [1u64, 127, 128, 16382, 16383, 2097150, 2097151, 268435455] {
            let mut bytes = encode_backlen(len);
            // Decoded from the right, as lpDecodeBacklen reads it.
            bytes.reverse();
            let mut value = 0u64;
            for (i, b) in bytes.iter().enumerate() {
                value |= ((b & 127) as u64) << (7 * i);
                if b & 128 == 0 {
                    assert_eq!(i + 1, bytes.len());
                }
            }
            assert_eq!(value, len);
        }
    }

    #[test]
    fn entry_size_matches_the_encoding() {
        for data in [&b"5"[..], b"hello", &[b'z'; 70], b"-100000"] {
            assert_eq!(encode([data]).len() - HEADER - 1, entry_size(data));
        }
        for v in [0, 127, 128, -4096, 4096, -32769, 8388608, i64::MIN] {
            let text = v.to_string();
            assert_eq!(integer_entry_size(v), entry_size(text.as_bytes()));
        }
    }

    #[test]
    fn damage_is_refused() {
        let lp = encode([&b"abc"[..], b"12"]);
        for cut in 0..lp.len() {
            assert!(decode(&lp[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_count = lp.clone();
        wrong_count[4] = 5;
        assert!(decode(&wrong_count).is_err());
        let mut wrong_backlen = lp.clone();
        wrong_backlen[HEADER + 4] = 9;
        assert!(decode(&wrong_backlen).is_err());
        let mut huge_string = lp.clone();
        huge_string[HEADER] = 0xf0;
        assert!(decode(&huge_string).is_err());
    }
}
