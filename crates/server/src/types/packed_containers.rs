//! Small Roaring bitmaps packed into their metadata record, as small strings are: a single-bit
//! command on one is then one point read and one write, instead of two of each (metadata and
//! container record).
//!
//! The packed form is `(high:u16 BE · length:u32 BE · container)*` in ascending `high`, each
//! container in the same encoding as a container record, so moving between the two layouts
//! copies bytes and decodes nothing.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;

/// Bitmaps whose packed form is at most this long stay packed (the inline limit of strings).
pub const PACKED_LIMIT: usize = 4096;

const HEADER: usize = 6;

/// The containers of a packed bitmap, by their high 16 bits, still encoded.
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

/// Splits a packed bitmap into its encoded containers; `None` if the bytes are malformed.
pub fn unpack(packed: &Bytes) -> Option<Containers> {
    entries(packed)
        .map(|entry| entry.map(|(high, span)| (high, packed.slice(span))))
        .collect()
}

/// Container `high` of a packed bitmap, found without splitting the others out; `None` if the
/// bytes are malformed before it.
pub fn find(packed: &Bytes, high: u16) -> Option<Option<Bytes>> {
    for entry in entries(packed) {
        let (this, span) = entry?;
        if this >= high {
            return Some((this == high).then(|| packed.slice(span)));
        }
    }
    Some(None)
}

/// The packed form of `containers`, or `None` if it would be longer than [`PACKED_LIMIT`].
pub fn pack(containers: &Containers) -> Option<Vec<u8>> {
    let len: usize = containers.values().map(|c| HEADER + c.len()).sum();
    if len > PACKED_LIMIT {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    for (high, container) in containers {
        out.extend_from_slice(&high.to_be_bytes());
        out.extend_from_slice(&(container.len() as u32).to_be_bytes());
        out.extend_from_slice(container);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_in_order() {
        let containers: Containers = [
            (7u16, Bytes::from_static(b"seven")),
            (0, Bytes::from_static(b"")),
            (u16::MAX, Bytes::from_static(b"last")),
        ]
        .into_iter()
        .collect();
        let packed = Bytes::from(pack(&containers).unwrap());
        assert_eq!(&packed[..2], &0u16.to_be_bytes());
        assert_eq!(unpack(&packed), Some(containers));
    }

    #[test]
    fn one_container_is_found_in_place() {
        let containers: Containers = [
            (2u16, Bytes::from_static(b"two")),
            (9, Bytes::from_static(b"nine")),
        ]
        .into_iter()
        .collect();
        let packed = Bytes::from(pack(&containers).unwrap());
        assert_eq!(find(&packed, 9), Some(Some(Bytes::from_static(b"nine"))));
        assert_eq!(find(&packed, 2), Some(Some(Bytes::from_static(b"two"))));
        assert_eq!(find(&packed, 5), Some(None));
        assert_eq!(find(&packed, 10), Some(None));
        assert_eq!(find(&packed.slice(..packed.len() - 1), 9), None);
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
        assert_eq!(unpack(&Bytes::from_static(b"\x00\x01\x00\x00")), None);
        assert_eq!(
            unpack(&Bytes::from_static(b"\x00\x01\x00\x00\x00\x09abc")),
            None
        );
        assert_eq!(unpack(&Bytes::new()), Some(Containers::new()));
    }
}
