//! Small Roaring bitmaps packed into their metadata record, as small strings are: a single-bit
//! command on one is then one point read and one write, instead of two of each (metadata and
//! container record).
//!
//! The packed form is `(high:u16 BE · length:u32 BE · container)*` in ascending `high`, each
//! container in the same encoding as a container record, so moving between the two layouts
//! copies bytes and decodes nothing. Commands read and edit the packed bytes in place: a
//! single-bit write copies the other containers' bytes once and splits nothing out.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;

/// Bitmaps whose packed form is at most this long stay packed (the inline limit of strings).
pub const PACKED_LIMIT: usize = 4096;

const HEADER: usize = 6;

/// Encoded containers by their high 16 bits: a bitmap's content on its way to records.
pub type Containers = BTreeMap<u16, Bytes>;

/// The container whose header starts at `at`: its high 16 bits and where its bytes lie;
/// `None` if the bytes there are malformed.
fn entry_at(packed: &[u8], at: usize) -> Option<(u16, Range<usize>)> {
    let header = packed.get(at..at + HEADER)?;
    let high = u16::from_be_bytes([header[0], header[1]]);
    let len = u32::from_be_bytes([header[2], header[3], header[4], header[5]]) as usize;
    let start = at + HEADER;
    let end = start.checked_add(len).filter(|&end| end <= packed.len())?;
    Some((high, start..end))
}

/// Where each container of a packed bitmap lies, in order, with its high 16 bits; a `None`
/// item, the last, means the bytes are malformed from there on. Yields positions, not slices,
/// so a search pays nothing for the containers it passes.
fn entries(packed: &[u8]) -> impl Iterator<Item = Option<(u16, Range<usize>)>> + '_ {
    let mut next = Some(0);
    std::iter::from_fn(move || {
        let at = next.filter(|&at| at < packed.len())?;
        let entry = entry_at(packed, at);
        next = entry.as_ref().map(|(_, span)| span.end);
        Some(entry)
    })
}

fn push_entry(out: &mut Vec<u8>, high: u16, container: &[u8]) {
    out.extend_from_slice(&high.to_be_bytes());
    out.extend_from_slice(&(container.len() as u32).to_be_bytes());
    out.extend_from_slice(container);
}

/// Container `high` of a packed bitmap, found without checking the containers after it, for
/// a single-bit read; `None` if the bytes are malformed before it.
pub fn find(packed: &Bytes, high: u16) -> Option<Option<Bytes>> {
    for entry in entries(packed) {
        let (this, span) = entry?;
        if this >= high {
            return Some((this == high).then(|| packed.slice(span)));
        }
    }
    Some(None)
}

/// A packed bitmap whose layout has been checked once, so that reading it cannot fail.
#[derive(Debug, Clone, Default)]
pub struct Packed(Bytes);

impl Packed {
    /// `None` if the bytes are malformed or their containers are not in ascending order.
    pub fn parse(bytes: Bytes) -> Option<Packed> {
        let mut last = None;
        for entry in entries(&bytes) {
            let (high, _) = entry?;
            if last.is_some_and(|last| last >= high) {
                return None;
            }
            last = Some(high);
        }
        Some(Packed(bytes))
    }

    /// Every container in ascending order of its high 16 bits, each a slice of the packed bytes.
    pub fn iter(&self) -> impl Iterator<Item = (u16, Bytes)> + '_ {
        entries(&self.0)
            .map_while(|entry| entry)
            .map(|(high, span)| (high, self.0.slice(span)))
    }

    /// Container `high`, if present.
    pub fn get(&self, high: u16) -> Option<Bytes> {
        find(&self.0, high).flatten()
    }

    /// The packed form with `changes` applied in one pass: each replaces or adds its container,
    /// or with `None` removes it. `changes` must be in ascending order. The result may be longer
    /// than [`PACKED_LIMIT`].
    pub fn with_changes(&self, changes: &[(u16, Option<Vec<u8>>)]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.len() + 64);
        let mut changes = changes.iter().peekable();
        for (high, container) in self.iter() {
            let mut replaced = false;
            while let Some((changed, new)) = changes.next_if(|(changed, _)| *changed <= high) {
                if let Some(new) = new {
                    push_entry(&mut out, *changed, new);
                }
                replaced |= *changed == high;
            }
            if !replaced {
                push_entry(&mut out, high, &container);
            }
        }
        for (changed, new) in changes {
            if let Some(new) = new {
                push_entry(&mut out, *changed, new);
            }
        }
        out
    }
}

/// The packed form of `containers`, or `None` if it would be longer than [`PACKED_LIMIT`].
pub fn pack(containers: &Containers) -> Option<Vec<u8>> {
    let len: usize = containers.values().map(|c| HEADER + c.len()).sum();
    if len > PACKED_LIMIT {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    for (high, container) in containers {
        push_entry(&mut out, *high, container);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(containers: &[(u16, &'static [u8])]) -> Packed {
        let containers: Containers = containers
            .iter()
            .map(|&(high, raw)| (high, Bytes::from_static(raw)))
            .collect();
        Packed::parse(pack(&containers).unwrap().into()).unwrap()
    }

    #[test]
    fn packing_round_trips_in_order() {
        let containers: Containers = [
            (7u16, Bytes::from_static(b"seven")),
            (0, Bytes::from_static(b"")),
            (u16::MAX, Bytes::from_static(b"last")),
        ]
        .into_iter()
        .collect();
        let bytes = Bytes::from(pack(&containers).unwrap());
        assert_eq!(&bytes[..2], &0u16.to_be_bytes());
        let unpacked: Containers = Packed::parse(bytes).unwrap().iter().collect();
        assert_eq!(unpacked, containers);
    }

    #[test]
    fn one_container_is_found_in_place() {
        let packed = packed(&[(2, b"two"), (9, b"nine")]);
        assert_eq!(packed.get(9), Some(Bytes::from_static(b"nine")));
        assert_eq!(packed.get(2), Some(Bytes::from_static(b"two")));
        assert_eq!(packed.get(5), None);
        assert_eq!(packed.get(10), None);
        let bytes = packed.0.clone();
        assert_eq!(find(&bytes, 9), Some(Some(Bytes::from_static(b"nine"))));
        assert_eq!(find(&bytes, 5), Some(None));
        assert_eq!(find(&bytes.slice(..bytes.len() - 1), 9), None);
    }

    #[test]
    fn changes_replace_add_and_remove_containers_in_one_pass() {
        let packed = packed(&[(2, b"two"), (5, b"five"), (9, b"nine")]);
        let changes = [
            (1, Some(b"one".to_vec())),
            (2, Some(b"TWO".to_vec())),
            (5, None),
            (7, Some(b"seven".to_vec())),
            (12, Some(b"twelve".to_vec())),
            (13, None),
        ];
        let changed = Packed::parse(packed.with_changes(&changes).into()).unwrap();
        let found: Vec<(u16, Bytes)> = changed.iter().collect();
        let expected: Vec<(u16, Bytes)> = [
            (1u16, &b"one"[..]),
            (2, b"TWO"),
            (7, b"seven"),
            (9, b"nine"),
            (12, b"twelve"),
        ]
        .into_iter()
        .map(|(high, raw)| (high, Bytes::copy_from_slice(raw)))
        .collect();
        assert_eq!(found, expected);
        assert!(packed
            .with_changes(&[(2, None), (5, None), (9, None)])
            .is_empty());
    }

    #[test]
    fn packing_stops_at_the_limit() {
        let fits: Containers = [(1u16, Bytes::from(vec![0; PACKED_LIMIT - HEADER]))].into();
        assert_eq!(pack(&fits).map(|p| p.len()), Some(PACKED_LIMIT));
        let over: Containers = [(1u16, Bytes::from(vec![0; PACKED_LIMIT - HEADER + 1]))].into();
        assert_eq!(pack(&over), None);
    }

    #[test]
    fn malformed_packs_are_rejected() {
        assert!(Packed::parse(Bytes::from_static(b"\x00\x01\x00\x00")).is_none());
        assert!(Packed::parse(Bytes::from_static(b"\x00\x01\x00\x00\x00\x09abc")).is_none());
        let out_of_order = b"\x00\x05\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00";
        assert!(Packed::parse(Bytes::from_static(out_of_order)).is_none());
        assert_eq!(Packed::parse(Bytes::new()).unwrap().iter().count(), 0);
    }
}
