//! Small hashes, sets, sorted sets and lists packed into their metadata record, as Redis keeps
//! them in a listpack: a command on one is one point read and one write whatever it touches, and
//! reading all of it is that one read instead of a scan that steps over every version of every
//! element still in the memtables. A sorted set packs its members and scores, and its score
//! index is derived from them when a scan asks for it; a list packs its chunks and spilled
//! elements after its head, tail and chunk shift (`collection.rs`, `list.rs`).
//!
//! The packed form is `(sub_len:varint · sub · value_len:varint · value)*` in ascending `sub`,
//! the order of element records, so a scan sees the same elements in the same order either
//! way. Varints are LEB128, so a set member's empty value costs one byte.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use bytes::Bytes;

/// Collections whose packed form is at most this long stay packed (the inline limit of
/// strings and of packed Roaring bitmaps).
pub const PACKED_LIMIT: usize = 4096;

/// Collections of at most this many elements stay packed: random sampling reads such small
/// collections whole, so it never has to seek within a packed one.
pub const PACKED_MAX_ELEMENTS: usize = 128;

/// The LEB128 varint at `at`, which moves past it. Lists' chunk entries start with one too.
pub(super) fn read_varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
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

pub(super) fn put_varint(out: &mut Vec<u8>, mut value: usize) {
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

/// The length-prefixed byte string (`len:varint · bytes`) at `at`, which moves past it; `None`
/// if the bytes there are malformed.
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

/// Appends `bytes` as a length-prefixed string, the encoding [`slice_at`] reads.
fn put_slice(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Appends the packed form of `elements`, which must be in ascending order, to `out`.
fn pack_into<'e>(out: &mut Vec<u8>, elements: impl IntoIterator<Item = (&'e [u8], &'e [u8])>) {
    for (sub, value) in elements {
        put_slice(out, sub);
        put_slice(out, value);
    }
}

/// A packed collection as a write changes it: the stored packed form, untouched, and the
/// changes on top, merged only when the write is staged. Splitting every stored element out
/// for a write that changes one cost two reference counts per element.
pub struct PackedEdit {
    stored: Bytes,
    /// Changed elements: `Some` is the new value, `None` a delete.
    changes: BTreeMap<Bytes, Option<Bytes>>,
    /// The length of the packed form and the number of elements, the changes included.
    len: usize,
    count: usize,
}

impl PackedEdit {
    /// A collection with no elements yet.
    pub fn empty() -> PackedEdit {
        PackedEdit {
            stored: Bytes::new(),
            changes: BTreeMap::new(),
            len: 0,
            count: 0,
        }
    }

    /// Edits `stored`; `None` if its bytes are malformed.
    pub fn open(stored: Bytes) -> Option<PackedEdit> {
        let mut count = 0;
        for entry in entries(&stored) {
            entry?;
            count += 1;
        }
        Some(PackedEdit {
            len: stored.len(),
            count,
            stored,
            changes: BTreeMap::new(),
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Puts (`Some`) or deletes (`None`) element `sub`.
    pub fn set(&mut self, sub: &[u8], value: Option<Bytes>) {
        let current = match self.changes.get(sub) {
            Some(change) => change.as_deref(),
            None => find(&self.stored, sub).flatten(),
        };
        if let Some(old) = current {
            self.len -= entry_len(sub, old);
            self.count -= 1;
        }
        if let Some(new) = &value {
            self.len += entry_len(sub, new);
            self.count += 1;
        }
        self.changes.insert(Bytes::copy_from_slice(sub), value);
    }

    /// The elements with the changes applied, in order.
    pub fn elements(&self) -> Vec<(&[u8], &[u8])> {
        let mut out = Vec::with_capacity(self.count);
        // `open` checked the stored bytes, so no entry is malformed.
        let mut stored = entries(&self.stored).flatten().peekable();
        let mut changes = self.changes.iter().peekable();
        loop {
            let order = match (stored.peek(), changes.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some((sub, _)), Some((changed, _))) => (*sub).cmp(changed.as_ref()),
            };
            if order != Ordering::Greater {
                let unchanged = stored.next().filter(|_| order == Ordering::Less);
                out.extend(unchanged);
            }
            if order != Ordering::Less {
                if let Some((sub, Some(value))) = changes.next() {
                    out.push((sub.as_ref(), value.as_ref()));
                }
            }
        }
        out
    }

    /// `own` followed by the packed form of the elements.
    pub fn pack_after(&self, own: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(own.len() + self.len);
        out.extend_from_slice(own);
        pack_into(&mut out, self.elements());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    fn sample() -> Model {
        let long = vec![b'x'; 300];
        [
            (vec![], vec![]),
            (b"a".to_vec(), b"1".to_vec()),
            (b"ab".to_vec(), long.clone()),
            (long, vec![]),
        ]
        .into_iter()
        .collect()
    }

    fn packed(model: &Model) -> Bytes {
        let mut edit = PackedEdit::empty();
        for (sub, value) in model {
            edit.set(sub, Some(Bytes::copy_from_slice(value)));
        }
        Bytes::from(edit.pack_after(&[]))
    }

    fn read_back(packed: &[u8]) -> Model {
        entries(packed)
            .map(|e| e.map(|(s, v)| (s.to_vec(), v.to_vec())).unwrap())
            .collect()
    }

    #[test]
    fn packing_keeps_every_element_in_order() {
        let model = sample();
        let packed = packed(&model);
        let expected: usize = model.iter().map(|(s, v)| entry_len(s, v)).sum();
        assert_eq!(packed.len(), expected);
        assert_eq!(read_back(&packed), model);
        assert!(read_back(&[]).is_empty());
    }

    #[test]
    fn edits_merge_as_a_map_would() {
        let mut model = sample();
        let mut edit = PackedEdit::open(packed(&model)).unwrap();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for step in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let sub = vec![b'a' + (state % 7) as u8; (state >> 8) as usize % 3];
            if state & 0x30000 == 0 {
                model.remove(&sub);
                edit.set(&sub, None);
            } else {
                let value = vec![b'v'; (state >> 20) as usize % 200];
                model.insert(sub.clone(), value.clone());
                edit.set(&sub, Some(Bytes::from(value)));
            }
            let merged: Model = edit
                .elements()
                .into_iter()
                .map(|(s, v)| (s.to_vec(), v.to_vec()))
                .collect();
            assert_eq!(merged, model, "step {step}");
            let packed = edit.pack_after(b"own");
            assert_eq!(&packed[..3], b"own");
            assert_eq!(edit.len(), packed.len() - 3, "step {step}");
            assert_eq!(edit.count(), model.len(), "step {step}");
            if step % 100 == 0 {
                // Start over from what was packed, as the next write would.
                edit = PackedEdit::open(Bytes::copy_from_slice(&packed[3..])).unwrap();
            }
        }
    }

    #[test]
    fn find_answers_as_the_map_does() {
        let model = sample();
        let packed = packed(&model);
        for (sub, value) in &model {
            assert_eq!(find(&packed, sub), Some(Some(value.as_slice())));
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
        let packed = packed(&sample());
        for cut in 1..packed.len() {
            let truncated = packed.slice(..cut);
            // Every cut ends inside an element except those between two of them.
            let whole = entries(&packed)
                .scan(0, |at, e| {
                    let (s, v) = e?;
                    *at += entry_len(s, v);
                    Some(*at)
                })
                .any(|end| end == cut);
            assert_eq!(
                PackedEdit::open(truncated.clone()).is_some(),
                whole,
                "cut at {cut}"
            );
            let _ = find(&truncated, b"\xff");
        }
        assert!(PackedEdit::open(Bytes::from_static(&[0xff; 11])).is_none());
    }
}
