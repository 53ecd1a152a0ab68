//! Byte patches: the value of [`Op::Patch`](crate::Op::Patch), a list of segments that each
//! overwrite some bytes of a record at an offset, growing it with zeros as needed.
//!
//! SETBIT on a fragmented string changes one byte of a 4 KiB fragment; writing the fragment
//! whole put 4 KiB into the WAL and the memtable for that byte. A patch carries the byte. The
//! engine applies patches when the record is read and folds them into it on compaction, and
//! two patches in a row are one patch: their segments, in order.

use crate::engine::StorageError;

/// How long a patched record may grow: fragments are 4 KiB. A corrupt length must not make a
/// read allocate gigabytes.
const RECORD_LIMIT: usize = 1 << 16;

/// One segment: `at: u32 BE · len: u32 BE · bytes`.
pub fn encode(at: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + bytes.len());
    out.extend_from_slice(&at.to_be_bytes());
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
    out
}

/// Applies the segments of `patch` to `value` in order; an error if the patch is malformed or
/// would grow the record beyond [`RECORD_LIMIT`].
pub fn apply(value: &mut Vec<u8>, patch: &[u8]) -> Result<(), StorageError> {
    apply_segments(value, patch).ok_or(StorageError::Corrupt("byte patch"))
}

fn apply_segments(value: &mut Vec<u8>, mut patch: &[u8]) -> Option<()> {
    while !patch.is_empty() {
        let at = u32::from_be_bytes(patch.get(..4)?.try_into().ok()?) as usize;
        let len = u32::from_be_bytes(patch.get(4..8)?.try_into().ok()?) as usize;
        let bytes = patch.get(8..8 + len)?;
        let end = at.checked_add(len).filter(|&end| end <= RECORD_LIMIT)?;
        if value.len() < end {
            value.resize(end, 0);
        }
        value[at..end].copy_from_slice(bytes);
        patch = &patch[8 + len..];
    }
    Some(())
}

/// The record `base` (missing: empty) with `patches` applied in order.
pub fn patched<'p>(
    base: Option<&[u8]>,
    patches: impl IntoIterator<Item = &'p [u8]>,
) -> Result<Vec<u8>, StorageError> {
    let mut value = base.map(<[u8]>::to_vec).unwrap_or_default();
    for patch in patches {
        apply(&mut value, patch)?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_overwrite_in_order_and_grow_with_zeros() {
        let first = encode(1, b"xy");
        let second = [encode(6, b"z"), encode(2, b"Q")].concat();
        assert_eq!(
            patched(Some(b"abcd"), [first.as_slice(), second.as_slice()]).ok(),
            Some(b"axQd\0\0z".to_vec())
        );
        assert_eq!(
            patched(None, [encode(2, b"a").as_slice()]).ok(),
            Some(b"\0\0a".to_vec())
        );
        assert_eq!(patched(Some(b"keep"), []).ok(), Some(b"keep".to_vec()));
    }

    #[test]
    fn malformed_patches_are_refused() {
        let truncated = &encode(0, b"abc")[..10];
        assert_eq!(patched(None, [truncated]).ok(), None);
        assert_eq!(patched(None, [&[0u8, 0, 0][..]]).ok(), None);
        assert_eq!(
            patched(None, [encode(u32::MAX, b"x").as_slice()]).ok(),
            None
        );
    }
}
