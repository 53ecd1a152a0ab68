//! Redis semantics over the keyspace, one file per type. Each adds the operations of its type
//! to [`Db`]; they return plain values, never RESP. The shared encodings of collections
//! (`collection`, `packed_elements`, `packed_containers`, `fragments`) sit beside them, and
//! `read_ahead` batches the reads of pipelined GETs and HGETs.

pub mod bitmap;
mod collection;
pub mod digest;
pub mod dump;
mod fragments;
pub mod geo;
pub mod geohash;
pub mod hash;
mod hyperloglog;
mod keys;
pub mod lcs;
pub mod list;
mod memory;
pub mod numbers;
mod packed_containers;
mod packed_elements;
pub mod pattern;
pub mod read_ahead;
pub mod roaring;
pub(crate) mod sampling;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod zset;

pub(crate) use collection::ScanBuffer;
pub(crate) use fragments::MAX_STRING_LEN;
pub use keys::{ExpireCondition, ScanPage};

/// Resolves Redis element indexes (negative from the end) to an inclusive window of a
/// collection of `len` elements, as LRANGE and ZRANGE do; `None` if it is empty.
pub(crate) fn index_window(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as u64, stop as u64))
}

/// Resolves Redis byte (or bit) indexes of a string of `len`, as GETRANGE and BITCOUNT do:
/// both ends clamp into the string; `None` if the range is empty, and if both ends count from
/// the end with the start after the end.
pub(crate) fn byte_window(start: i64, end: i64, len: i64) -> Option<(u64, u64)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    clamped_window(start, end, len)
}

/// [`byte_window`] without the check of inverted negative ends, as Redis 7.0's BITPOS reads
/// its range: `-3 -7` of a 2-byte string is byte 0.
pub(crate) fn clamped_window(start: i64, end: i64, len: i64) -> Option<(u64, u64)> {
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    (len > 0 && start <= end && start < len).then_some((start as u64, end as u64))
}

/// For each item, whether it is the first occurrence of its value (commands may name the same
/// field, member or key twice); linear time, so a long argument list cannot stall a worker.
pub(crate) fn first_occurrences<T: AsRef<[u8]>>(items: &[T]) -> Vec<bool> {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items
        .iter()
        .map(|item| seen.insert(item.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests;
