//! Small Roaring bitmaps packed into their metadata record, as small strings are: a single-bit
//! command on one is then one point read and one write, instead of two of each (metadata and
//! container record).
//!
//! The packed form is `(high:u16 BE · length:u32 BE · container)*` in ascending `high`, each
//! container in the same encoding as a container record, so moving between the two layouts
//! copies bytes and decodes nothing.

use std::collections::BTreeMap;

use bytes::Bytes;

/// Bitmaps whose packed form is at most this long stay packed (the inline limit of strings).
pub const PACKED_LIMIT: usize = 4096;

const HEADER: usize = 6;

/// The containers of a packed bitmap, by their high 16 bits, still encoded.
pub type Containers = BTreeMap<u16, Bytes>;

/// Splits a packed bitmap into its encoded containers; `None` if the bytes are malformed.
pub fn unpack(packed: &Bytes) -> Option<Containers> {
    let mut containers = Containers::new();
    let mut at = 0;
    while at < packed.len() {
        let header = packed.get(at..at + HEADER)?;
        let high = u16::from_be_bytes([header[0], header[1]]);
        let len = u32::from_be_bytes([header[2], header[3], header[4], header[5]]) as usize;
        let start = at + HEADER;
        let end = start.checked_add(len).filter(|&end| end <= packed.len())?;
        containers.insert(high, packed.slice(start..end));
        at = end;
    }
    Some(containers)
}

/// Container `high` of a packed bitmap, found without splitting the others out; `None` if the
/// bytes are malformed.
pub fn find(packed: &Bytes, high: u16) -> Option<Option<Bytes>> {
    let mut at = 0;
    while at < packed.len() {
        let header = packed.get(at..at + HEADER)?;
        let this = u16::from_be_bytes([header[0], header[1]]);
        let len = u32::from_be_bytes([header[2], header[3], header[4], header[5]]) as usize;
        let start = at + HEADER;
        let end = start.checked_add(len).filter(|&end| end <= packed.len())?;
        if this >= high {
            return Some((this == high).then(|| packed.slice(start..end)));
        }
        at = end;
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
