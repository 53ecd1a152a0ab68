//! Stream entry IDs, `ms-seq`, read and printed as Redis reads and prints them.

use std::fmt;

/// An entry ID: milliseconds, then a sequence number within them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next ID, `None` past the last possible one (Redis's `streamIncrID`).
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The previous ID, `None` before 0-0 (Redis's `streamDecrID`).
    pub fn previous(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// Big-endian, so byte order is ID order.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut out = [0; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<StreamId> {
        let ms = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
        let seq = u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
        Some(StreamId { ms, seq })
    }
}

/// The `(ms, seq)` pairs of `shale_rdb::stream`.
impl From<(u64, u64)> for StreamId {
    fn from((ms, seq): (u64, u64)) -> StreamId {
        StreamId { ms, seq }
    }
}

impl From<StreamId> for (u64, u64) {
    fn from(id: StreamId) -> (u64, u64) {
        (id.ms, id.seq)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An ID argument as Redis's `streamGenericParseIDOrReply` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedId {
    pub id: StreamId,
    /// False for `ms-*` (XADD only) and, where allowed, for a bare `ms`.
    pub seq_given: bool,
}

/// How an ID argument may be written.
#[derive(Debug, Clone, Copy)]
pub struct IdSyntax {
    /// The sequence of a bare `ms`.
    pub missing_seq: u64,
    /// `-` and `+` refused.
    pub strict: bool,
    /// `ms-*` allowed (XADD's ID).
    pub star_seq: bool,
}

/// `None` if `text` is no ID of this syntax.
pub fn parse_id(text: &[u8], syntax: IdSyntax) -> Option<ParsedId> {
    // Redis copies the argument into 128 bytes and stops at a NUL.
    if text.len() > 127 {
        return None;
    }
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    let whole = |id| {
        Some(ParsedId {
            id,
            seq_given: true,
        })
    };
    match text {
        b"-" | b"+" if syntax.strict => return None,
        b"-" => return whole(StreamId::MIN),
        b"+" => return whole(StreamId::MAX),
        _ => {}
    }
    let (ms_text, seq_text) = match text.iter().position(|&b| b == b'-') {
        Some(dash) => (&text[..dash], Some(&text[dash + 1..])),
        None => (text, None),
    };
    let ms = c_string_to_u64(ms_text)?;
    Some(match seq_text {
        Some(b"*") if syntax.star_seq => ParsedId {
            id: StreamId::new(ms, 0),
            seq_given: false,
        },
        Some(seq) => ParsedId {
            id: StreamId::new(ms, c_string_to_u64(seq)?),
            seq_given: true,
        },
        None => ParsedId {
            id: StreamId::new(ms, syntax.missing_seq),
            seq_given: true,
        },
    })
}

/// Redis's `string2ull`: a strict decimal `long long` that is not negative, or failing that
/// what C's `strtoull` reads of the whole text (leading spaces, a sign; a minus wraps).
fn c_string_to_u64(text: &[u8]) -> Option<u64> {
    if let Some(n) = crate::types::string::parse_strict_i64(text) {
        return u64::try_from(n).ok();
    }
    let start = text
        .iter()
        .position(|b| !b.is_ascii_whitespace() && *b != 0x0b)?;
    let mut rest = &text[start..];
    let negative = match rest.first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for digit in rest {
        value = value.checked_mul(10)?.checked_add((digit - b'0') as u64)?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: IdSyntax = IdSyntax {
        missing_seq: 0,
        strict: false,
        star_seq: false,
    };

    #[test]
    fn ids_parse_as_redis_parses_them() {
        let parse = |t: &str| parse_id(t.as_bytes(), PLAIN).map(|p| p.id);
        assert_eq!(parse("1-2"), Some(StreamId::new(1, 2)));
        assert_eq!(parse("5"), Some(StreamId::new(5, 0)));
        assert_eq!(parse("-"), Some(StreamId::MIN));
        assert_eq!(parse("+"), Some(StreamId::MAX));
        assert_eq!(
            parse("18446744073709551615-1"),
            Some(StreamId::new(u64::MAX, 1))
        );
        assert_eq!(parse("18446744073709551616"), None);
        assert_eq!(parse(" 7"), Some(StreamId::new(7, 0)));
        assert_eq!(parse("+7"), Some(StreamId::new(7, 0)));
        assert_eq!(parse("-1"), None);
        assert_eq!(parse("1-"), None);
        assert_eq!(parse("a"), None);
        assert_eq!(parse("1-*"), None);
        let star = IdSyntax {
            star_seq: true,
            strict: true,
            ..PLAIN
        };
        assert_eq!(
            parse_id(b"3-*", star),
            Some(ParsedId {
                id: StreamId::new(3, 0),
                seq_given: false
            })
        );
        assert_eq!(parse_id(b"-", star), None);
    }

    #[test]
    fn neighbours_wrap_only_at_the_ends() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(
            StreamId::new(2, 0).previous(),
            Some(StreamId::new(1, u64::MAX))
        );
        assert_eq!(StreamId::MIN.previous(), None);
        assert_eq!(StreamId::new(3, 4).to_string(), "3-4");
    }
}
