//! The value of a metadata record.
//!
//! ```text
//! kind:u8 expire_at_ms:u64            (0 = no expiry)
//! string:      value bytes            (the whole string, inline: GET is one lookup)
//! fragmented string (kind byte 7): version:u64 length:u64, bytes in 4 KiB fragments
//! collections: version:u64 size:u64 extra bytes (per type, e.g. list head and tail)
//! ```

use bytes::Bytes;

use crate::StorageError;

const HEADER_LEN: usize = 9;
/// The kind byte of a string stored in fragments; it reads back as [`KeyKind::String`].
const FRAGMENTED_STRING: u8 = 7;

/// The Redis type of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum KeyKind {
    String = 1,
    Hash = 2,
    List = 3,
    Set = 4,
    ZSet = 5,
    Roaring = 6,
    /// Kind byte 8: 7 is taken by strings in fragments.
    Stream = 8,
}

impl KeyKind {
    pub const ALL: [KeyKind; 7] = [
        KeyKind::String,
        KeyKind::Hash,
        KeyKind::List,
        KeyKind::Set,
        KeyKind::ZSet,
        KeyKind::Roaring,
        KeyKind::Stream,
    ];

    fn from_byte(b: u8) -> Option<KeyKind> {
        Some(match b {
            1 => KeyKind::String,
            2 => KeyKind::Hash,
            3 => KeyKind::List,
            4 => KeyKind::Set,
            5 => KeyKind::ZSet,
            6 => KeyKind::Roaring,
            8 => KeyKind::Stream,
            FRAGMENTED_STRING => KeyKind::String,
            _ => return None,
        })
    }

    /// The name TYPE replies with.
    pub fn type_name(self) -> &'static str {
        match self {
            KeyKind::String => "string",
            KeyKind::Hash => "hash",
            KeyKind::List => "list",
            KeyKind::Set => "set",
            KeyKind::ZSet => "zset",
            KeyKind::Roaring => "tairroaring",
            KeyKind::Stream => "stream",
        }
    }
}

/// Where a key's content lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A string held in the metadata record itself.
    Inline(Bytes),
    /// Elements in the data (and score) families under `key|version`.
    Collection {
        version: u64,
        size: u64,
        extra: Bytes,
    },
}

/// Bytes at the start of a list's extra field: head, tail, chunk shift and change counter.
pub const LIST_LAYOUT_LEN: usize = 21;
/// Bytes at the start of a sorted set's extra field: the floor of its scores.
pub const ZSET_FLOOR_LEN: usize = 8;

impl KeyKind {
    /// Whether collections of this kind keep their elements packed in their metadata while
    /// they are small: the data-family records they would have. A sorted set's score index
    /// is derived from its members and scores; a list's chunks and spilled elements follow
    /// its head, tail and shift byte.
    pub fn packs_elements(self) -> bool {
        matches!(
            self,
            KeyKind::Hash | KeyKind::Set | KeyKind::ZSet | KeyKind::List
        )
    }

    /// Whether a collection of this kind still exists with no elements: a stream does, as in
    /// Redis (XDEL of its last entry, XGROUP CREATE ... MKSTREAM).
    pub fn exists_empty(self) -> bool {
        self == KeyKind::Stream
    }

    /// How many bytes at the start of a collection's extra field are its type's own (a
    /// list's layout, a sorted set's floor), before any packed elements.
    pub fn own_extra_len(self) -> usize {
        match self {
            KeyKind::List => LIST_LAYOUT_LEN,
            KeyKind::ZSet => ZSET_FLOOR_LEN,
            _ => 0,
        }
    }

    /// The packed elements in a collection's extra field, `None` if its elements are records.
    pub fn packed_part(self, extra: &Bytes) -> Option<Bytes> {
        let own = self.own_extra_len();
        (self.packs_elements() && extra.len() > own).then(|| extra.slice(own..))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    pub kind: KeyKind,
    /// Absolute expiry in Unix milliseconds; 0 means none.
    pub expire_at: u64,
    pub body: Body,
}

impl Metadata {
    pub fn string(value: Bytes, expire_at: u64) -> Metadata {
        Metadata {
            kind: KeyKind::String,
            expire_at,
            body: Body::Inline(value),
        }
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// Whether this is a collection whose elements (or Roaring containers) are all packed in
    /// it, so it has no records elsewhere.
    pub fn holds_no_records(&self) -> bool {
        match &self.body {
            Body::Collection { extra, .. } if self.kind == KeyKind::Roaring => !extra.is_empty(),
            Body::Collection { extra, .. } => self.kind.packed_part(extra).is_some(),
            Body::Inline(_) => false,
        }
    }

    /// The collection version, if the key stores elements outside its metadata.
    pub fn version(&self) -> Option<u64> {
        match self.body {
            Body::Collection { version, .. } => Some(version),
            Body::Inline(_) => None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let body_len = match &self.body {
            Body::Inline(v) => v.len(),
            Body::Collection { extra, .. } => 16 + extra.len(),
        };
        let mut out = Vec::with_capacity(HEADER_LEN + body_len);
        out.push(match (&self.kind, &self.body) {
            (KeyKind::String, Body::Collection { .. }) => FRAGMENTED_STRING,
            (kind, _) => *kind as u8,
        });
        out.extend_from_slice(&self.expire_at.to_be_bytes());
        match &self.body {
            Body::Inline(v) => out.extend_from_slice(v),
            Body::Collection {
                version,
                size,
                extra,
            } => {
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&size.to_be_bytes());
                out.extend_from_slice(extra);
            }
        }
        out
    }

    pub fn decode(raw: Vec<u8>) -> Result<Metadata, StorageError> {
        let (kind, expire_at) =
            peek_header(&raw).ok_or(StorageError::Corrupt("metadata header"))?;
        let raw = Bytes::from(raw);
        let body = if raw[0] == KeyKind::String as u8 {
            Body::Inline(raw.slice(HEADER_LEN..))
        } else {
            if raw.len() < HEADER_LEN + 16 {
                return Err(StorageError::Corrupt("collection metadata"));
            }
            let version = u64::from_be_bytes(raw[9..17].try_into().unwrap_or_default());
            let size = u64::from_be_bytes(raw[17..25].try_into().unwrap_or_default());
            Body::Collection {
                version,
                size,
                extra: raw.slice(25..),
            }
        };
        Ok(Metadata {
            kind,
            expire_at,
            body,
        })
    }
}

/// The type and expiry of a raw metadata record, without decoding (or copying) the rest.
pub fn peek_header(raw: &[u8]) -> Option<(KeyKind, u64)> {
    let kind = KeyKind::from_byte(*raw.first()?)?;
    let expire_at = u64::from_be_bytes(raw.get(1..HEADER_LEN)?.try_into().ok()?);
    Some((kind, expire_at))
}

/// Whether a raw metadata record is a string kept in fragments, records of their own.
pub fn is_fragmented_string(raw: &[u8]) -> bool {
    raw.first() == Some(&FRAGMENTED_STRING)
}

/// Whether a metadata record is an inline string whose own expiry has passed, the only kind
/// of record the compaction filter may drop: it needs nothing but the record in hand.
pub fn is_expired_inline_string(raw: &[u8], now_ms: u64) -> bool {
    raw.first() == Some(&(KeyKind::String as u8))
        && matches!(peek_header(raw), Some((_, at)) if at != 0 && at <= now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_round_trip_and_golden_bytes() {
        let meta = Metadata::string(Bytes::from("hi"), 0x0102);
        let raw = meta.encode();
        assert_eq!(raw, [1, 0, 0, 0, 0, 0, 0, 1, 2, b'h', b'i']);
        assert_eq!(Metadata::decode(raw).unwrap(), meta);
    }

    #[test]
    fn collection_round_trip() {
        let meta = Metadata {
            kind: KeyKind::Hash,
            expire_at: 0,
            body: Body::Collection {
                version: 9,
                size: 3,
                extra: Bytes::from_static(b"xy"),
            },
        };
        assert_eq!(Metadata::decode(meta.encode()).unwrap(), meta);
    }

    #[test]
    fn fragmented_strings_read_back_as_strings() {
        let meta = Metadata {
            kind: KeyKind::String,
            expire_at: 5,
            body: Body::Collection {
                version: 3,
                size: 1 << 20,
                extra: Bytes::new(),
            },
        };
        let raw = meta.encode();
        assert_eq!(raw[0], FRAGMENTED_STRING);
        assert_eq!(Metadata::decode(raw.clone()).unwrap(), meta);
        assert!(
            !is_expired_inline_string(&raw, 100),
            "fragments must be reaped with their metadata"
        );
    }

    #[test]
    fn corrupt_records_are_errors() {
        assert!(Metadata::decode(vec![]).is_err());
        assert!(Metadata::decode(vec![99, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Metadata::decode(vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
    }

    #[test]
    fn compaction_filter_drops_only_expired_strings() {
        let expired = Metadata::string(Bytes::from("v"), 10).encode();
        let live = Metadata::string(Bytes::from("v"), 0).encode();
        assert!(is_expired_inline_string(&expired, 10));
        assert!(!is_expired_inline_string(&expired, 9));
        assert!(!is_expired_inline_string(&live, u64::MAX));
        let mut hash = expired.clone();
        hash[0] = KeyKind::Hash as u8;
        assert!(!is_expired_inline_string(&hash, 100));
    }
}
