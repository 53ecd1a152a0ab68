//! Redis's serialization format, as Redis 7.0 writes and reads it (`rdb.c`): the values of
//! DUMP and RESTORE, and the records of RDB files. Pure codec: bytes in, [`Value`]s out and
//! back; the server maps values onto its keyspace.
//!
//! - [`read`] and [`write`]: lengths, strings (integer and LZF encodings), doubles and whole
//!   values, every object type Redis 7.0 reads and the ones it writes.
//! - [`dump`]: a DUMP payload, the value with its RDB version and CRC-64 footer.
//! - [`file`]: RDB files, read as a stream of records and written.
//! - [`listpack`], [`ziplist`], [`intset`], [`zipmap`]: the packed encodings inside values;
//!   [`stream`]: streams, whose nodes are listpacks.
//! - [`lzf`], [`crc64`]: compression and checksums as Redis has them.

pub mod crc64;
pub mod dump;
pub mod file;
pub mod intset;
pub mod listpack;
pub mod lzf;
pub mod read;
pub mod stream;
pub mod write;
pub mod ziplist;
pub mod zipmap;

use bytes::Bytes;

/// The RDB version Redis 7.0 writes, and the newest this reads.
pub const RDB_VERSION: u16 = 10;

/// Object type codes (`rdb.h`).
pub mod kind {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    /// Shale's own: a Roaring bitmap in the portable serialization. Redis knows no type
    /// 128 and refuses it ("Bad data format"); Shale restores it.
    pub const SHALE_ROARING: u8 = 128;
}

/// A key's value as the format carries it, whatever encoding it came in.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(Bytes),
    List(Vec<Bytes>),
    Set(Vec<Bytes>),
    Hash(Vec<(Bytes, Bytes)>),
    SortedSet(Vec<(Bytes, f64)>),
    /// A Roaring bitmap, in the portable serialization (Shale's own type).
    Roaring(Bytes),
    Stream(Box<stream::Stream>),
}

#[derive(Debug, thiserror::Error)]
pub enum RdbError {
    #[error("unexpected end of data")]
    Truncated,
    #[error("{0}")]
    Corrupt(&'static str),
    #[error("unknown object type {0}")]
    UnknownType(u8),
    /// A type this server cannot hold (modules).
    #[error("{0} values are not supported")]
    Unsupported(&'static str),
    /// A collection without elements: Redis refuses to load one.
    #[error("empty collection")]
    EmptyKey,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// `data` as an i64 if it is one in canonical form (no sign on zero, no leading zeros or
/// plus, at most 20 bytes), as Redis's `string2ll` accepts it: those are the strings Redis
/// stores as integers.
pub fn canonical_integer(data: &[u8]) -> Option<i64> {
    if data.is_empty() || data.len() > 20 {
        return None;
    }
    let digits = data.strip_prefix(b"-").unwrap_or(data);
    let canonical = match digits {
        [b'0'] => data.len() == 1,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(data).ok()?.parse().ok()
}

/// An integer's decimal text.
pub(crate) fn integer_text(value: i64) -> Bytes {
    Bytes::from(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers_only() {
        for (text, want) in [
            (&b"0"[..], Some(0)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-0", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"", None),
            (b"-", None),
            (b"1.0", None),
        ] {
            assert_eq!(
                canonical_integer(text),
                want,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }
}
