//! Small hashes, sets, sorted sets and lists packed into their metadata record, as Redis keeps
//! them in a listpack: a command on one is one point read and one write whatever it touches, and
//! reading all of it is that one read instead of a scan that steps over every version of every
//! element still in the memtables. A sorted set packs its members and scores, and its score
//! index is derived from them when a scan asks for it; a list packs its elements by position,
//! after its head and tail (`collection.rs`).
//!
//! The packed form is `(sub_len:varint · sub · value_len:varint · value)*` in ascending `sub`,
//! the order of element records, so a scan sees the same elements in the same order either
//! way. Varints are LEB128, so a set member's empty value costs one byte.

use std::collections::BTreeMap;

use bytes::Bytes;

/// Collections whose packed form is at most this long stay packed (the inline limit of
/// strings and of packed Roaring bitmaps).
pub const PACKED_LIMIT: usize = 4096;

/// Collections of at most this many elements stay packed: random sampling reads such small
/// collections whole, so it never has to seek within a packed one.
pub const PACKED_MAX_ELEMENTS: usize = 128;

/// The elements of a packed collection, by their suffix.
pub type Elements = BTreeMap<Bytes, Bytes>;

fn read_varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut value = 0usize;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= ((byte & 0x7f) as usize).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut value: usize) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_len(value: usize) -> usize {
    (usize::BITS - value.leading_zeros()).max(1).div_ceil(7) as usize
}

/// The bytes one element takes in the packed form.
pub fn entry_len(sub: &[u8], value: &[u8]) -> usize {
    varint_len(sub.len()) + sub.len() + varint_len(value.len()) + value.len()
}

fn slice_at<'p>(packed: &'p [u8], at: &mut usize) -> Option<&'p [u8]> {
    let len = read_varint(packed, at)?;
    let end = at.checked_add(len).filter(|&end| end <= packed.len())?;
    let slice = &packed[*at..end];
    *at = end;
    Some(slice)
}

/// The elements of a packed collection in order, as (suffix, value); a `None` item, the last,
/// means the bytes are malformed from there on.
pub fn entries(packed: &[u8]) -> impl Iterator<Item = Option<(&[u8], &[u8])>> + '_ {
    let mut next = Some(0);
    std::iter::from_fn(move || {
        let mut at = next.filter(|&at| at < packed.len())?;
        let entry = slice_at(packed, &mut at).zip(slice_at(packed, &mut at));
        next = entry.is_some().then_some(at);
        Some(entry)
    })
}

/// The value of element `sub`, found without splitting out the others; `None` if the bytes are
/// malformed before it.
pub fn find<'p>(packed: &'p [u8], sub: &[u8]) -> Option<Option<&'p [u8]>> {
    for entry in entries(packed) {
        let (this, value) = entry?;
        if this >= sub {
            return Some((this == sub).then_some(value));
        }
    }
    Some(None)
}

/// Splits a packed collection into its elements, which share its buffer; `None` if the bytes
/// are malformed.
pub fn unpack(packed: &Bytes) -> Option<Elements> {
    let base = packed.as_ptr() as usize;
    let share = |part: &[u8]| {
        let start = part.as_ptr() as usize - base;
        packed.slice(start..start + part.len())
    };
    entries(packed)
        .map(|entry| entry.map(|(sub, value)| (share(sub), share(value))))
        .collect()
}

/// The packed form of `elements`.
pub fn pack(elements: &Elements) -> Vec<u8> {
    let len = elements.iter().map(|(s, v)| entry_len(s, v)).sum();
    let mut out = Vec::with_capacity(len);
    for (sub, value) in elements {
        put_varint(&mut out, sub.len());
        out.extend_from_slice(sub);
        put_varint(&mut out, value.len());
        out.extend_from_slice(value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Elements {
        let long = Bytes::from(vec![b'x'; 300]);
        [
            (Bytes::new(), Bytes::new()),
            (Bytes::from_static(b"a"), Bytes::from_static(b"1")),
            (Bytes::from_static(b"ab"), long.clone()),
            (long, Bytes::from_static(b"")),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn unpack_returns_what_was_packed() {
        let elements = sample();
        let packed = Bytes::from(pack(&elements));
        let expected: usize = elements.iter().map(|(s, v)| entry_len(s, v)).sum();
        assert_eq!(packed.len(), expected);
        assert_eq!(unpack(&packed), Some(elements));
        assert_eq!(unpack(&Bytes::new()), Some(Elements::new()));
    }

    #[test]
    fn find_answers_as_the_map_does() {
        let elements = sample();
        let packed = pack(&elements);
        for (sub, value) in &elements {
            assert_eq!(find(&packed, sub), Some(Some(value.as_ref())));
        }
        for missing in [&b"0"[..], b"aa", b"b", b"\xff"] {
            assert_eq!(find(&packed, missing), Some(None));
        }
    }

    #[test]
    fn varints_take_the_bytes_they_are_counted_as() {
        for value in [0, 1, 127, 128, 300, 16383, 16384, usize::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
            assert_eq!(read_varint(&out, &mut 0), Some(value));
        }
    }

    #[test]
    fn malformed_bytes_are_reported_not_trusted() {
        let packed = pack(&sample());
        for cut in 1..packed.len() {
            let truncated = Bytes::copy_from_slice(&packed[..cut]);
            // Every cut ends inside an element except those between two of them.
            let whole = entries(&packed)
                .scan(0, |at, e| {
                    let (s, v) = e?;
                    *at += entry_len(s, v);
                    Some(*at)
                })
                .any(|end| end == cut);
            assert_eq!(unpack(&truncated).is_some(), whole, "cut at {cut}");
            let _ = find(&truncated, b"\xff");
        }
        assert_eq!(unpack(&Bytes::from_static(&[0xff; 11])), None);
    }
}
