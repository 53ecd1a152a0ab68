//! Roaring containers in the `roaring` crate's portable serialization (the format of
//! CRoaring and Java's RoaringBitmap): decoding, encoding, and a membership test that reads a
//! serialized container in place.

use roaring::RoaringBitmap;

use crate::error::Error;

pub(super) fn decode(raw: &[u8]) -> Result<RoaringBitmap, Error> {
    RoaringBitmap::deserialize_from(raw)
        .map_err(|_| Error::Storage(shale_storage::StorageError::Corrupt("roaring container")))
}

/// Whether the serialized container `raw` holds `low`, read in place: a single-bit read then
/// allocates nothing (decoding copies the whole container, 8 KiB for a bitset). Reads the
/// crate's portable format.
pub(super) fn container_contains(raw: &[u8], low: u32) -> Result<bool, Error> {
    serialized_contains(raw, low).ok_or(Error::Storage(shale_storage::StorageError::Corrupt(
        "roaring container",
    )))
}

/// Whether a serialized `RoaringBitmap` holds `value`; `None` if `raw` is malformed.
pub(super) fn serialized_contains(raw: &[u8], value: u32) -> Option<bool> {
    const NO_RUNS_COOKIE: u32 = 12346;
    const RUNS_COOKIE: u16 = 12347;
    let u16_at = |at: usize| {
        raw.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let cookie = u32::from_le_bytes(raw.get(0..4)?.try_into().ok()?);
    let (size, runs_at, mut at) = if cookie == NO_RUNS_COOKIE {
        let size = u32::from_le_bytes(raw.get(4..8)?.try_into().ok()?) as usize;
        (size, None, 8)
    } else if cookie as u16 == RUNS_COOKIE {
        let size = (cookie >> 16) as usize + 1;
        (size, Some(4), 4 + size.div_ceil(8))
    } else {
        return None;
    };
    let (wanted, low) = ((value >> 16) as u16, value & 0xFFFF);
    let low = low as u16;
    let descriptions = at;
    at += 4 * size;
    if runs_at.is_none() || size >= 4 {
        at += 4 * size;
    }
    for index in 0..size {
        let key = u16_at(descriptions + 4 * index)?;
        let cardinality = u16_at(descriptions + 4 * index + 2)? as usize + 1;
        let is_run = match runs_at {
            Some(bits) => raw.get(bits + index / 8)? & (1 << (index % 8)) != 0,
            None => false,
        };
        let len = if is_run {
            2 + 4 * u16_at(at)? as usize
        } else if cardinality <= 4096 {
            2 * cardinality
        } else {
            8192
        };
        let data = raw.get(at..at + len)?;
        if key >= wanted {
            return Some(
                key == wanted
                    && if is_run {
                        let runs = &data[2..];
                        let run = |i: usize| {
                            let start = u16::from_le_bytes([runs[4 * i], runs[4 * i + 1]]);
                            let length = u16::from_le_bytes([runs[4 * i + 2], runs[4 * i + 3]]);
                            (start, start.saturating_add(length))
                        };
                        let count = runs.len() / 4;
                        let after = partition(count, |i| run(i).0 <= low);
                        after > 0 && run(after - 1).1 >= low
                    } else if cardinality <= 4096 {
                        let value = |i: usize| u16::from_le_bytes([data[2 * i], data[2 * i + 1]]);
                        let after = partition(cardinality, |i| value(i) <= low);
                        after > 0 && value(after - 1) == low
                    } else {
                        data[low as usize / 8] & (1 << (low % 8)) != 0
                    },
            );
        }
        at += len;
    }
    Some(false)
}

/// The number of leading indexes in `0..len` for which `before` holds (it must hold for a
/// prefix only).
fn partition(len: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

pub(super) fn encode(container: &RoaringBitmap) -> Vec<u8> {
    let mut out = Vec::with_capacity(container.serialized_size());
    // Writing into a Vec cannot fail.
    let _ = container.serialize_into(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serialized(bitmap: &RoaringBitmap) -> Vec<u8> {
        encode(bitmap)
    }

    /// Array, bitset and run containers, alone and together, with and without the offset
    /// table the format adds for four containers or more.
    fn samples() -> Vec<RoaringBitmap> {
        let array: RoaringBitmap = [1, 7, 300, 65_535].into_iter().collect();
        let bitset: RoaringBitmap = (0..65_536).step_by(3).collect();
        let mut runs: RoaringBitmap = (100..2_000).chain(5_000..5_001).collect();
        runs.optimize();
        let mut mixed: RoaringBitmap = (0..10)
            .chain((1 << 16)..(1 << 16) + 5_000)
            .chain((3 << 16)..(3 << 16) + 70)
            .chain([(9 << 16) + 4, u32::MAX])
            .collect();
        mixed.optimize();
        let plain: RoaringBitmap = (0..6).map(|k| (k << 16) + 2 * k).collect();
        vec![RoaringBitmap::new(), array, bitset, runs, mixed, plain]
    }

    #[test]
    fn containers_are_read_in_place_as_decoded() {
        let probes: Vec<u32> = (0..70_000)
            .chain([(1 << 16) + 4_999, (1 << 16) + 5_000, (3 << 16) + 69])
            .chain([(9 << 16) + 4, (9 << 16) + 5, u32::MAX, u32::MAX - 1])
            .chain((0..6).map(|k| (k << 16) + 2 * k))
            .collect();
        for bitmap in samples() {
            let raw = serialized(&bitmap);
            for &value in &probes {
                assert_eq!(
                    serialized_contains(&raw, value),
                    Some(bitmap.contains(value)),
                    "value {value} in {bitmap:?}"
                );
            }
        }
    }

    #[test]
    fn truncated_containers_are_malformed_not_a_panic() {
        for bitmap in samples() {
            let raw = serialized(&bitmap);
            for len in 0..raw.len() {
                let probe = bitmap.max().unwrap_or(0);
                assert_ne!(serialized_contains(&raw[..len], probe), Some(true));
            }
        }
        assert_eq!(serialized_contains(b"\x01\x02\x03\x04\x00\x00", 1), None);
    }
}
