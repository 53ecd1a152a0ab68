//! Writing the format as Redis 7.0 writes it: strings with its integer and LZF encodings, and
//! each value in the type Redis 7.0 would give it under its default limits (small hashes and
//! sorted sets as listpacks, sets of integers as intsets, lists as quicklists of listpacks).

use crate::{intset, kind, listpack, lzf, Value};

/// `hash-max-listpack-entries`, `hash-max-listpack-value` and the sorted-set twins.
const LISTPACK_ENTRIES: usize = 128;
const LISTPACK_VALUE: usize = 64;
/// `set-max-intset-entries`.
const INTSET_ENTRIES: usize = 512;
/// `list-max-listpack-size -2`: 8 KB nodes.
const LIST_NODE_BYTES: usize = 8192;
/// Quicklist v2's container code of a node packed as a listpack.
const NODE_PACKED: u64 = 2;

pub fn length(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// A string: an integer of up to 32 bits in its binary form, more than 20 bytes compressed
/// when that saves something, otherwise as it is.
pub fn string(out: &mut Vec<u8>, data: &[u8]) {
    if data.len() <= 11 {
        if let Some(v) = crate::canonical_integer(data) {
            if let Ok(v) = i8::try_from(v) {
                out.extend_from_slice(&[0xc0, v as u8]);
                return;
            } else if let Ok(v) = i16::try_from(v) {
                out.push(0xc1);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            } else if let Ok(v) = i32::try_from(v) {
                out.push(0xc2);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
        }
    }
    if data.len() > 20 {
        if let Some(packed) = lzf::compress(data) {
            out.push(0xc3);
            length(out, packed.len() as u64);
            length(out, data.len() as u64);
            out.extend_from_slice(&packed);
            return;
        }
    }
    length(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A score as Redis's `d2string` writes it into a listpack: integers without a fraction,
/// `inf`, `-inf`, `-0`, otherwise digits that read back as the same double.
fn score_text(score: f64) -> String {
    if score.is_infinite() {
        return if score > 0.0 { "inf" } else { "-inf" }.into();
    }
    if score == 0.0 {
        return if score.is_sign_negative() { "-0" } else { "0" }.into();
    }
    if score.fract() == 0.0 && score.abs() < (1u64 << 53) as f64 {
        return (score as i64).to_string();
    }
    format!("{score:?}")
}

/// The type code and body of `value`, as a DUMP payload has them.
pub fn object(out: &mut Vec<u8>, value: &Value) {
    typed(out, None, value)
}

/// The type code, `key` and body of `value`, as an RDB file has them.
pub fn keyed_object(out: &mut Vec<u8>, key: &[u8], value: &Value) {
    typed(out, Some(key), value)
}

/// The type code (with `key` after it, in a file) then the body.
fn typed(out: &mut Vec<u8>, key: Option<&[u8]>, value: &Value) {
    let start = |out: &mut Vec<u8>, code: u8| {
        out.push(code);
        if let Some(key) = key {
            string(out, key);
        }
    };
    match value {
        Value::String(data) => {
            start(out, kind::STRING);
            string(out, data);
        }
        Value::Stream(stream) => {
            start(out, kind::STREAM_LISTPACKS_2);
            crate::stream::write(out, stream);
        }
        Value::List(items) => {
            start(out, kind::LIST_QUICKLIST_2);
            let nodes = list_nodes(items);
            length(out, nodes.len() as u64);
            for node in nodes {
                length(out, NODE_PACKED);
                string(out, &listpack::encode(node.iter().map(|i| i.as_ref())));
            }
        }
        Value::Set(members) => {
            let integers: Option<Vec<i64>> = members
                .iter()
                .map(|m| crate::canonical_integer(m))
                .collect();
            match integers {
                Some(values) if values.len() <= INTSET_ENTRIES => {
                    start(out, kind::SET_INTSET);
                    string(out, &intset::encode(&values));
                }
                _ => {
                    start(out, kind::SET);
                    length(out, members.len() as u64);
                    for member in members {
                        string(out, member);
                    }
                }
            }
        }
        Value::Hash(pairs) => {
            let small = pairs.len() <= LISTPACK_ENTRIES
                && pairs
                    .iter()
                    .all(|(f, v)| f.len() <= LISTPACK_VALUE && v.len() <= LISTPACK_VALUE);
            if small {
                start(out, kind::HASH_LISTPACK);
                let entries = pairs.iter().flat_map(|(f, v)| [f.as_ref(), v.as_ref()]);
                string(out, &listpack::encode(entries));
            } else {
                start(out, kind::HASH);
                length(out, pairs.len() as u64);
                for (field, value) in pairs {
                    string(out, field);
                    string(out, value);
                }
            }
        }
        Value::SortedSet(members) => {
            let small = members.len() <= LISTPACK_ENTRIES
                && members.iter().all(|(m, _)| m.len() <= LISTPACK_VALUE);
            if small {
                start(out, kind::ZSET_LISTPACK);
                let scores: Vec<String> = members.iter().map(|(_, s)| score_text(*s)).collect();
                let entries = members
                    .iter()
                    .zip(&scores)
                    .flat_map(|((m, _), s)| [m.as_ref(), s.as_bytes()]);
                string(out, &listpack::encode(entries));
            } else {
                start(out, kind::ZSET_2);
                length(out, members.len() as u64);
                for (member, score) in members {
                    string(out, member);
                    out.extend_from_slice(&score.to_bits().to_le_bytes());
                }
            }
        }
        Value::Roaring(serialized) => {
            start(out, kind::SHALE_ROARING);
            string(out, serialized);
        }
    }
}

/// Items split into quicklist nodes of at most 8 KB of listpack each (an item larger than
/// that has a node of its own).
fn list_nodes(items: &[bytes::Bytes]) -> Vec<&[bytes::Bytes]> {
    const EMPTY_LISTPACK: usize = 7;
    let mut nodes = Vec::new();
    let (mut start, mut size) = (0, EMPTY_LISTPACK);
    for (i, item) in items.iter().enumerate() {
        let entry = listpack::entry_size(item);
        if i > start && size + entry > LIST_NODE_BYTES {
            nodes.push(&items[start..i]);
            (start, size) = (i, EMPTY_LISTPACK);
        }
        size += entry;
    }
    if start < items.len() {
        nodes.push(&items[start..]);
    }
    nodes
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::read::Decoder;

    fn round_trip(value: &Value) -> (u8, Value) {
        let mut out = Vec::new();
        object(&mut out, value);
        let mut decoder = Decoder::new(&out[..]);
        let code = decoder.byte().unwrap();
        let read = decoder.value(code).unwrap();
        assert!(decoder.into_inner().is_empty(), "bytes left over");
        (code, read)
    }

    fn b(s: impl AsRef<[u8]>) -> Bytes {
        Bytes::copy_from_slice(s.as_ref())
    }

    #[test]
    fn strings_take_redis_encodings() {
        for (text, first) in [
            ("12", 0xc0),
            ("-200", 0xc1),
            ("100000", 0xc2),
            ("10000000000", 0x0b),
            ("012", 0x03),
        ] {
            let mut out = Vec::new();
            string(&mut out, text.as_bytes());
            assert_eq!(out[0], first, "{text}");
        }
        let mut out = Vec::new();
        string(&mut out, &[b'a'; 100]);
        assert_eq!(out[0], 0xc3);
    }

    #[test]
    fn every_value_round_trips_in_the_type_redis_would_choose() {
        let many: Vec<Bytes> = (0..3000).map(|i| b(format!("item-{i}"))).collect();
        let cases = vec![
            (Value::String(b("hello\r\n\0")), kind::STRING),
            (Value::String(b("")), kind::STRING),
            (Value::List(many.clone()), kind::LIST_QUICKLIST_2),
            (
                Value::List(vec![b("x".repeat(20000)), b("1")]),
                kind::LIST_QUICKLIST_2,
            ),
            (
                Value::Set(vec![b("1"), b("-5"), b("99999999999")]),
                kind::SET_INTSET,
            ),
            (Value::Set(vec![b("1"), b("a")]), kind::SET),
            (
                Value::Set((0..600).map(|i| b(i.to_string())).collect()),
                kind::SET,
            ),
            (
                Value::Hash(vec![(b("f"), b("v")), (b("n"), b("12"))]),
                kind::HASH_LISTPACK,
            ),
            (Value::Hash(vec![(b("f"), b("v".repeat(65)))]), kind::HASH),
            (
                Value::SortedSet(vec![
                    (b("a"), 1.5),
                    (b("b"), f64::INFINITY),
                    (b("c"), f64::NEG_INFINITY),
                    (b("d"), -0.0),
                    (b("e"), 0.1),
                    (b("f"), 1e300),
                    (b("g"), 3.0),
                ]),
                kind::ZSET_LISTPACK,
            ),
            (
                Value::SortedSet(
                    (0..200)
                        .map(|i| (b(i.to_string()), i as f64 / 3.0))
                        .collect(),
                ),
                kind::ZSET_2,
            ),
            (Value::Roaring(b([1, 2, 3])), kind::SHALE_ROARING),
        ];
        for (value, want) in cases {
            let (code, read) = round_trip(&value);
            assert_eq!(code, want, "{value:?}");
            match (&value, &read) {
                (Value::Set(a), Value::Set(b)) => {
                    let (mut a, mut b) = (a.clone(), b.clone());
                    a.sort();
                    b.sort();
                    assert_eq!(a, b);
                }
                (Value::SortedSet(a), Value::SortedSet(b)) => {
                    for ((m1, s1), (m2, s2)) in a.iter().zip(b) {
                        assert_eq!(m1, m2);
                        assert_eq!(s1.to_bits(), s2.to_bits(), "{m1:?}");
                    }
                }
                _ => assert_eq!(value, read),
            }
        }
    }

    #[test]
    fn list_nodes_stay_within_8_kb() {
        let items: Vec<Bytes> = (0..5000).map(|i| b(format!("element-{i:08}"))).collect();
        let nodes = list_nodes(&items);
        assert!(nodes.len() > 1);
        for node in &nodes {
            assert!(listpack::encode(node.iter().map(|i| i.as_ref())).len() <= LIST_NODE_BYTES);
        }
        assert_eq!(nodes.iter().map(|n| n.len()).sum::<usize>(), items.len());
    }
}
