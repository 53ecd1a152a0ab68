//! Reading the format: lengths, strings, doubles and whole values, from any [`Read`] (a
//! payload in memory, or an RDB file streamed from disk). Nothing read is trusted: lengths
//! and counts only bound what is read, never what is allocated up front.

use std::collections::HashSet;
use std::io::Read;

use bytes::Bytes;

use crate::{intset, kind, listpack, lzf, ziplist, zipmap, RdbError, Value};

/// Bytes reserved ahead of a read, at most, whatever a length claims.
const RESERVE_LIMIT: u64 = 1 << 20;
/// Elements reserved ahead of a collection's reads, at most, whatever its count claims: a
/// payload of ten bytes must not reserve megabytes.
const RESERVE_ELEMENTS: u64 = 4096;

/// A length field: a length, or the marker of a specially encoded string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Plain(u64),
    /// `11xxxxxx`: an integer (0, 1, 2: 8, 16, 32 bits) or LZF (3) string follows.
    Encoded(u8),
}

/// Quicklist v2 node containers (`quicklist.h`).
const NODE_PLAIN: u64 = 1;
const NODE_PACKED: u64 = 2;

pub struct Decoder<R> {
    input: R,
}

impl<R: Read> Decoder<R> {
    pub fn new(input: R) -> Decoder<R> {
        Decoder { input }
    }

    pub fn into_inner(self) -> R {
        self.input
    }

    pub fn get_mut(&mut self) -> &mut R {
        &mut self.input
    }

    pub fn byte(&mut self) -> Result<u8, RdbError> {
        let mut byte = [0u8; 1];
        self.fill(&mut byte)?;
        Ok(byte[0])
    }

    pub fn fill(&mut self, buf: &mut [u8]) -> Result<(), RdbError> {
        self.input.read_exact(buf).map_err(|err| match err.kind() {
            std::io::ErrorKind::UnexpectedEof => RdbError::Truncated,
            _ => RdbError::Io(err),
        })
    }

    /// `len` bytes, growing the buffer as they arrive.
    pub fn bytes(&mut self, len: u64) -> Result<Vec<u8>, RdbError> {
        let mut out = Vec::with_capacity(len.min(RESERVE_LIMIT) as usize);
        let read = (&mut self.input).take(len).read_to_end(&mut out)?;
        match read as u64 == len {
            true => Ok(out),
            false => Err(RdbError::Truncated),
        }
    }

    pub fn u32_le(&mut self) -> Result<u32, RdbError> {
        let mut raw = [0u8; 4];
        self.fill(&mut raw)?;
        Ok(u32::from_le_bytes(raw))
    }

    pub fn u64_le(&mut self) -> Result<u64, RdbError> {
        let mut raw = [0u8; 8];
        self.fill(&mut raw)?;
        Ok(u64::from_le_bytes(raw))
    }

    pub fn length_field(&mut self) -> Result<Length, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Length::Plain((first & 0x3f) as u64),
            1 => Length::Plain(((first as u64 & 0x3f) << 8) | self.byte()? as u64),
            3 => Length::Encoded(first & 0x3f),
            _ => match first {
                0x80 => {
                    let mut raw = [0u8; 4];
                    self.fill(&mut raw)?;
                    Length::Plain(u32::from_be_bytes(raw) as u64)
                }
                0x81 => {
                    let mut raw = [0u8; 8];
                    self.fill(&mut raw)?;
                    Length::Plain(u64::from_be_bytes(raw))
                }
                _ => return Err(RdbError::Corrupt("unknown length encoding")),
            },
        })
    }

    pub fn length(&mut self) -> Result<u64, RdbError> {
        match self.length_field()? {
            Length::Plain(len) => Ok(len),
            Length::Encoded(_) => Err(RdbError::Corrupt(
                "an encoded string where a length belongs",
            )),
        }
    }

    /// A string in any of its encodings (integers come back in decimal).
    pub fn string(&mut self) -> Result<Bytes, RdbError> {
        match self.length_field()? {
            Length::Plain(len) => Ok(Bytes::from(self.bytes(len)?)),
            Length::Encoded(0) => Ok(crate::integer_text(self.byte()? as i8 as i64)),
            Length::Encoded(1) => {
                let mut raw = [0u8; 2];
                self.fill(&mut raw)?;
                Ok(crate::integer_text(i16::from_le_bytes(raw) as i64))
            }
            Length::Encoded(2) => {
                let mut raw = [0u8; 4];
                self.fill(&mut raw)?;
                Ok(crate::integer_text(i32::from_le_bytes(raw) as i64))
            }
            Length::Encoded(3) => {
                let compressed_len = self.length()?;
                let len = self.length()?;
                let compressed = self.bytes(compressed_len)?;
                let len = usize::try_from(len)
                    .map_err(|_| RdbError::Corrupt("compressed string too long"))?;
                lzf::decompress(&compressed, len)
                    .map(Bytes::from)
                    .ok_or(RdbError::Corrupt("bad LZF-compressed string"))
            }
            Length::Encoded(_) => Err(RdbError::Corrupt("unknown string encoding")),
        }
    }

    /// A sorted-set score of type 3: a length byte, then the number in text (253, 254 and
    /// 255 mean NaN, +inf and -inf).
    fn text_double(&mut self) -> Result<f64, RdbError> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            len => {
                let text = self.bytes(len as u64)?;
                parse_double(&text).ok_or(RdbError::Corrupt("bad sorted set score"))
            }
        }
    }

    fn binary_double(&mut self) -> Result<f64, RdbError> {
        Ok(f64::from_bits(self.u64_le()?))
    }

    /// The value of an object of type `code`.
    pub fn value(&mut self, code: u8) -> Result<Value, RdbError> {
        let value = match code {
            kind::STRING => Value::String(self.string()?),
            kind::LIST => Value::List(self.strings()?),
            kind::SET => Value::Set(self.strings()?),
            kind::ZSET | kind::ZSET_2 => {
                let count = self.length()?;
                let mut members = Vec::with_capacity(count.min(RESERVE_ELEMENTS) as usize);
                for _ in 0..count {
                    let member = self.string()?;
                    let score = match code {
                        kind::ZSET => self.text_double()?,
                        _ => self.binary_double()?,
                    };
                    members.push((member, score));
                }
                Value::SortedSet(members)
            }
            kind::HASH => {
                let count = self.length()?;
                let mut pairs = Vec::with_capacity(count.min(RESERVE_ELEMENTS) as usize);
                for _ in 0..count {
                    pairs.push((self.string()?, self.string()?));
                }
                Value::Hash(pairs)
            }
            kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
                let nodes = self.length()?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    let container = match code {
                        kind::LIST_QUICKLIST_2 => self.length()?,
                        _ => NODE_PACKED,
                    };
                    let node = self.string()?;
                    match (container, code) {
                        (NODE_PLAIN, _) => items.push(node),
                        (NODE_PACKED, kind::LIST_QUICKLIST_2) => {
                            items.extend(listpack::decode(&node)?)
                        }
                        (NODE_PACKED, _) => items.extend(ziplist::decode(&node)?),
                        _ => return Err(RdbError::Corrupt("unknown quicklist container")),
                    }
                }
                Value::List(items)
            }
            kind::LIST_ZIPLIST => Value::List(ziplist::decode(&self.string()?)?),
            kind::SET_INTSET => Value::Set(
                intset::decode(&self.string()?)?
                    .into_iter()
                    .map(crate::integer_text)
                    .collect(),
            ),
            kind::HASH_ZIPMAP => Value::Hash(zipmap::decode(&self.string()?)?),
            kind::HASH_ZIPLIST => Value::Hash(pairs(ziplist::decode(&self.string()?)?)?),
            kind::HASH_LISTPACK => Value::Hash(pairs(listpack::decode(&self.string()?)?)?),
            kind::ZSET_ZIPLIST => Value::SortedSet(scored(ziplist::decode(&self.string()?)?)?),
            kind::ZSET_LISTPACK => Value::SortedSet(scored(listpack::decode(&self.string()?)?)?),
            kind::SHALE_ROARING => Value::Roaring(self.string()?),
            kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 => Value::Stream(Box::new(
                crate::stream::read(self, code == kind::STREAM_LISTPACKS_2)?,
            )),
            kind::MODULE | kind::MODULE_2 => return Err(RdbError::Unsupported("module")),
            other => return Err(RdbError::UnknownType(other)),
        };
        check(&value)?;
        Ok(value)
    }

    fn strings(&mut self) -> Result<Vec<Bytes>, RdbError> {
        let count = self.length()?;
        let mut items = Vec::with_capacity(count.min(RESERVE_ELEMENTS) as usize);
        for _ in 0..count {
            items.push(self.string()?);
        }
        Ok(items)
    }
}

/// Alternate entries as field and value.
fn pairs(entries: Vec<Bytes>) -> Result<Vec<(Bytes, Bytes)>, RdbError> {
    if !entries.len().is_multiple_of(2) {
        return Err(RdbError::Corrupt("a field without its value"));
    }
    let mut entries = entries.into_iter();
    let mut out = Vec::with_capacity(entries.len() / 2);
    while let (Some(field), Some(value)) = (entries.next(), entries.next()) {
        out.push((field, value));
    }
    Ok(out)
}

/// Alternate entries as member and score (text).
fn scored(entries: Vec<Bytes>) -> Result<Vec<(Bytes, f64)>, RdbError> {
    pairs(entries)?
        .into_iter()
        .map(|(member, score)| {
            parse_double(&score)
                .map(|score| (member, score))
                .ok_or(RdbError::Corrupt("bad sorted set score"))
        })
        .collect()
}

/// A score as `strtod` reads Redis's own text of one (`inf`, `-inf`, decimals, exponents).
fn parse_double(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" | "-nan" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// What Redis refuses in any value: empty collections, NaN scores, repeated members and
/// fields.
fn check(value: &Value) -> Result<(), RdbError> {
    fn distinct<'a>(mut names: impl ExactSizeIterator<Item = &'a [u8]>) -> bool {
        let mut seen = HashSet::with_capacity(names.len());
        names.all(|name| seen.insert(name))
    }
    let (len, unique) = match value {
        // An empty stream is one: XDEL of its last entry leaves it.
        Value::String(_) | Value::Roaring(_) | Value::Stream(_) => return Ok(()),
        Value::List(items) => (items.len(), true),
        Value::Set(members) => (members.len(), distinct(members.iter().map(|m| m.as_ref()))),
        Value::Hash(pairs) => (pairs.len(), distinct(pairs.iter().map(|p| p.0.as_ref()))),
        Value::SortedSet(members) => {
            if members.iter().any(|(_, score)| score.is_nan()) {
                return Err(RdbError::Corrupt("sorted set with a NaN score"));
            }
            (
                members.len(),
                distinct(members.iter().map(|m| m.0.as_ref())),
            )
        }
    };
    match (len, unique) {
        (0, _) => Err(RdbError::EmptyKey),
        (_, false) => Err(RdbError::Corrupt("duplicate members or fields")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(code: u8, body: &[u8]) -> Result<Value, RdbError> {
        Decoder::new(body).value(code)
    }

    #[test]
    fn lengths_in_each_width() {
        let mut d = Decoder::new(
            &[
                0x3f, 0x7f, 0xff, 0x80, 0, 1, 0, 0, 0x81, 0, 0, 0, 1, 0, 0, 0, 0,
            ][..],
        );
        assert_eq!(d.length().unwrap(), 63);
        assert_eq!(d.length().unwrap(), 0x3fff);
        assert_eq!(d.length().unwrap(), 0x10000);
        assert_eq!(d.length().unwrap(), 1 << 32);
    }

    #[test]
    fn strings_in_each_encoding() {
        let mut d = Decoder::new(
            &[
                0x03, b'a', b'b', b'c', 0xc0, 0xfe, 0xc1, 0x00, 0x80, 0xc2, 0xff, 0xff, 0xff, 0x7f,
                0xc3, 0x05, 0x0a, 0x00, b'x', 0xe0, 0x00, 0x00,
            ][..],
        );
        assert_eq!(d.string().unwrap(), "abc");
        assert_eq!(d.string().unwrap(), "-2");
        assert_eq!(d.string().unwrap(), "-32768");
        assert_eq!(d.string().unwrap(), "2147483647");
        assert_eq!(d.string().unwrap(), "xxxxxxxxxx");
    }

    #[test]
    fn a_huge_claimed_length_fails_without_allocating_it() {
        let body = [0x81, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, b'a'];
        assert!(matches!(
            decode(kind::STRING, &body),
            Err(RdbError::Truncated)
        ));
        // Two compressed bytes claiming to expand to 2^60.
        let body = [0xc3, 0x02, 0x81, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x00, b'a'];
        assert!(decode(kind::STRING, &body).is_err());
        // A list claiming 2^62 elements.
        let body = [0x81, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x01, b'a'];
        assert!(matches!(
            decode(kind::LIST, &body),
            Err(RdbError::Truncated)
        ));
    }

    #[test]
    fn text_scores_of_type_3() {
        let body = [0x02, 0x01, b'a', 0x03, b'1', b'.', b'5', 0x01, b'b', 254];
        assert_eq!(
            decode(kind::ZSET, &body).unwrap(),
            Value::SortedSet(vec![("a".into(), 1.5), ("b".into(), f64::INFINITY)])
        );
        let nan = [0x01, 0x01, b'a', 253];
        assert!(decode(kind::ZSET, &nan).is_err());
    }

    #[test]
    fn what_redis_refuses_is_refused() {
        assert!(matches!(
            decode(kind::SET, &[0x00]),
            Err(RdbError::EmptyKey)
        ));
        let twice = [0x02, 0x01, b'a', 0x01, b'a'];
        assert!(decode(kind::SET, &twice).is_err());
        assert!(matches!(decode(42, &[]), Err(RdbError::UnknownType(42))));
        assert!(matches!(
            decode(kind::STREAM_LISTPACKS_2, &[]),
            Err(RdbError::Truncated)
        ));
    }
}
