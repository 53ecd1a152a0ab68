//! A list's stored form: its layout in the metadata (head, tail, shift, flags, change
//! counter) and its chunks, `(len << 1):varint · bytes` per element held inline, the byte `1`
//! for one spilled into a record of its own.

use bytes::Bytes;
use shale_storage::StorageError;

use super::{
    CHUNK_BYTES, FLAGGED_ENTRIES, INLINE_FACTOR, LAYOUT_LEN, MAX_SHIFT, SPILLED_MARK, SPILLS,
};
use crate::error::Error;
use crate::types::packed_elements::{put_varint, read_varint};

/// The chunk size (as a shift) for a list whose first element is `len` bytes long.
pub(super) fn shift_for(len: usize) -> u8 {
    let slots = (CHUNK_BYTES / (len + 2)).max(1);
    ((usize::BITS - 1 - slots.leading_zeros()) as u8).min(MAX_SHIFT)
}

/// Where a list's elements lie: positions `[head, tail)`, in chunks of `2^shift` positions.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub(super) head: u64,
    pub(super) tail: u64,
    pub(super) shift: u8,
    /// Whether the list has ever spilled an element.
    pub(super) spills: bool,
    /// Writes so far, wrapping: reads check that it did not move while they read.
    pub(super) writes: u32,
}

impl Layout {
    pub(super) fn of(extra: &[u8]) -> Result<Layout, Error> {
        let word = |at: usize| {
            extra
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
        };
        let writes = extra
            .get(17..LAYOUT_LEN)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes);
        match (word(0), word(8), extra.get(16), writes) {
            (Some(head), Some(tail), Some(&byte), Some(writes))
                if head <= tail
                    && byte & FLAGGED_ENTRIES != 0
                    && byte & !(SPILLS | FLAGGED_ENTRIES) <= MAX_SHIFT =>
            {
                Ok(Layout {
                    head,
                    tail,
                    shift: byte & !(SPILLS | FLAGGED_ENTRIES),
                    spills: byte & SPILLS != 0,
                    writes,
                })
            }
            _ => Err(corrupt()),
        }
    }

    pub(super) fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(LAYOUT_LEN);
        out.extend_from_slice(&self.head.to_be_bytes());
        out.extend_from_slice(&self.tail.to_be_bytes());
        let spills = if self.spills { SPILLS } else { 0 };
        out.push(self.shift | FLAGGED_ENTRIES | spills);
        out.extend_from_slice(&self.writes.to_be_bytes());
        Bytes::from(out)
    }

    pub(super) fn len(&self) -> u64 {
        self.tail - self.head
    }

    pub(super) fn chunk_of(&self, position: u64) -> u64 {
        position >> self.shift
    }

    /// The position of chunk `chunk`'s first element.
    pub(super) fn first_in(&self, chunk: u64) -> u64 {
        self.head.max(chunk << self.shift)
    }

    /// The longest element a chunk holds inline.
    pub(super) fn inline_limit(&self) -> usize {
        match self.shift {
            0 => usize::MAX,
            shift => INLINE_FACTOR * (CHUNK_BYTES >> shift),
        }
    }
}

pub(super) fn corrupt() -> Error {
    Error::Storage(StorageError::Corrupt("list chunk"))
}

/// One position's entry in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored<'a> {
    Inline(&'a [u8]),
    /// In a record of its own, under [`list_spill_suffix`] of its position.
    Spilled,
}

/// The entry at `at`, which moves past it; `None` if the bytes there are malformed.
pub(super) fn entry_at<'r>(raw: &'r [u8], at: &mut usize) -> Option<Stored<'r>> {
    let header = read_varint(raw, at)?;
    if header & 1 == 1 {
        return (header == SPILLED_MARK).then_some(Stored::Spilled);
    }
    let end = at
        .checked_add(header >> 1)
        .filter(|&end| end <= raw.len())?;
    let element = &raw[*at..end];
    *at = end;
    Some(Stored::Inline(element))
}

pub(super) fn put_entry(out: &mut Vec<u8>, entry: Stored<'_>) {
    match entry {
        Stored::Inline(element) => {
            put_varint(out, element.len() << 1);
            out.extend_from_slice(element);
        }
        Stored::Spilled => put_varint(out, SPILLED_MARK),
    }
}

/// The entries of a stored chunk, in order; a `None` item, the last, means the bytes are
/// malformed from there on.
pub(super) fn chunk_entries(raw: &[u8]) -> impl Iterator<Item = Option<Stored<'_>>> + '_ {
    let mut next = Some(0);
    std::iter::from_fn(move || {
        let mut at = next.filter(|&at| at < raw.len())?;
        let entry = entry_at(raw, &mut at);
        next = entry.is_some().then_some(at);
        Some(entry)
    })
}

/// An entry taken out of a chunk: the element, or the mark that it was spilled.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Taken {
    Inline(Bytes),
    Spilled,
}

impl Taken {
    pub(super) fn of(entry: Stored<'_>) -> Taken {
        match entry {
            Stored::Inline(element) => Taken::Inline(Bytes::copy_from_slice(element)),
            Stored::Spilled => Taken::Spilled,
        }
    }
}

/// A chunk as a write changes it: its stored bytes, edited in place, so a push or pop at an
/// end splits no element out but the one it takes.
pub(super) struct Chunk {
    pub(super) raw: Vec<u8>,
}

impl Chunk {
    /// Where entry `index` starts: past the entries before it.
    pub(super) fn offset(&self, index: usize) -> Result<usize, Error> {
        let mut at = 0;
        for _ in 0..index {
            at = self.entry(at)?.1;
        }
        Ok(at)
    }

    /// The entry that starts at `at`, and where it ends.
    pub(super) fn entry(&self, at: usize) -> Result<(Stored<'_>, usize), Error> {
        let mut end = at;
        let entry = entry_at(&self.raw, &mut end).ok_or_else(corrupt)?;
        Ok((entry, end))
    }

    pub(super) fn push_front(&mut self, entry: Stored<'_>) {
        let element_len = match entry {
            Stored::Inline(element) => element.len(),
            Stored::Spilled => 0,
        };
        let mut out = Vec::with_capacity(self.raw.len() + element_len + 10);
        put_entry(&mut out, entry);
        out.extend_from_slice(&self.raw);
        self.raw = out;
    }

    pub(super) fn push_back(&mut self, entry: Stored<'_>) {
        put_entry(&mut self.raw, entry);
    }

    pub(super) fn pop_front(&mut self) -> Result<Taken, Error> {
        let (entry, end) = self.entry(0)?;
        let taken = Taken::of(entry);
        self.raw.drain(..end);
        Ok(taken)
    }

    pub(super) fn pop_back(&mut self) -> Result<Taken, Error> {
        let mut last = 0;
        loop {
            let (entry, end) = self.entry(last)?;
            if end == self.raw.len() {
                let taken = Taken::of(entry);
                self.raw.truncate(last);
                return Ok(taken);
            }
            last = end;
        }
    }

    /// Keeps the first `count` entries.
    pub(super) fn truncate(&mut self, count: usize) -> Result<(), Error> {
        let at = self.offset(count)?;
        self.raw.truncate(at);
        Ok(())
    }

    /// Drops the first `count` entries.
    pub(super) fn drop_front(&mut self, count: usize) -> Result<(), Error> {
        let at = self.offset(count)?;
        self.raw.drain(..at);
        Ok(())
    }

    /// Replaces entry `index`; returns whether the old one was spilled.
    pub(super) fn replace(&mut self, index: usize, entry: Stored<'_>) -> Result<bool, Error> {
        let start = self.offset(index)?;
        let (old, end) = self.entry(start)?;
        let was_spilled = old == Stored::Spilled;
        let mut encoded = Vec::new();
        put_entry(&mut encoded, entry);
        self.raw.splice(start..end, encoded);
        Ok(was_spilled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::list::MIDDLE;
    use shale_storage::keys::{list_spill_suffix, list_suffix};

    fn entries(chunk: &Chunk) -> Vec<Option<Vec<u8>>> {
        chunk_entries(&chunk.raw)
            .map(|entry| match entry.unwrap() {
                Stored::Inline(element) => Some(element.to_vec()),
                Stored::Spilled => None,
            })
            .collect()
    }

    fn stored(entry: &Option<Vec<u8>>) -> Stored<'_> {
        entry.as_deref().map_or(Stored::Spilled, Stored::Inline)
    }

    fn taken(entry: Option<Vec<u8>>) -> Taken {
        entry.map_or(Taken::Spilled, |e| Taken::Inline(e.into()))
    }

    #[test]
    fn chunks_hold_about_chunk_bytes_of_elements_like_the_first() {
        assert_eq!(shift_for(0), MAX_SHIFT);
        assert_eq!(shift_for(3), MAX_SHIFT);
        assert_eq!(shift_for(128), 3);
        assert_eq!(shift_for(1000), 1);
        assert_eq!(shift_for(5000), 0);
    }

    #[test]
    fn chunks_spill_long_elements_and_stay_within_a_few_chunk_sizes() {
        for shift in 1..=MAX_SHIFT {
            let layout = Layout {
                head: 0,
                tail: 0,
                shift,
                spills: false,
                writes: 0,
            };
            let limit = layout.inline_limit();
            let longest_chunk = (1 << shift) * (limit + 3);
            assert!(
                longest_chunk <= INLINE_FACTOR * CHUNK_BYTES + 3 * 64,
                "{shift}"
            );
        }
        let one_per_chunk = Layout {
            head: 0,
            tail: 0,
            shift: 0,
            spills: false,
            writes: 0,
        };
        assert_eq!(one_per_chunk.inline_limit(), usize::MAX);
    }

    #[test]
    fn chunk_edits_in_place_match_a_model() {
        let mut chunk = Chunk { raw: Vec::new() };
        let mut model: Vec<Option<Vec<u8>>> = Vec::new();
        let long = vec![b'x'; 300];
        let pushed = [
            Some(b"a".to_vec()),
            Some(Vec::new()),
            Some(long),
            None,
            Some(b"bc".to_vec()),
            None,
            Some(b"d".to_vec()),
        ];
        for (i, entry) in pushed.into_iter().enumerate() {
            if i % 2 == 0 {
                chunk.push_back(stored(&entry));
                model.push(entry);
            } else {
                chunk.push_front(stored(&entry));
                model.insert(0, entry);
            }
        }
        assert_eq!(entries(&chunk), model);
        assert_eq!(chunk.pop_front().unwrap(), taken(model.remove(0)));
        assert_eq!(chunk.pop_back().unwrap(), taken(model.pop().unwrap()));
        assert_eq!(chunk.pop_front().unwrap(), taken(model.remove(0)));
        assert!(!chunk.replace(1, Stored::Spilled).unwrap());
        model[1] = None;
        assert!(chunk.replace(1, Stored::Inline(b"new")).unwrap());
        model[1] = Some(b"new".to_vec());
        assert_eq!(entries(&chunk), model);
        chunk.drop_front(1).unwrap();
        model.remove(0);
        chunk.truncate(2).unwrap();
        model.truncate(2);
        assert_eq!(entries(&chunk), model);
        assert_eq!(chunk.pop_back().unwrap(), taken(model.pop().unwrap()));
        assert_eq!(chunk.pop_back().unwrap(), taken(model.pop().unwrap()));
        assert!(chunk.raw.is_empty());
        assert!(chunk.pop_front().is_err());
        assert!(chunk.pop_back().is_err());
    }

    #[test]
    fn malformed_chunks_and_layouts_are_corrupt() {
        // An inline element of 5 bytes with one there; an odd header other than the spill mark.
        for raw in [vec![10, b'a'], vec![3]] {
            let chunk = Chunk { raw };
            assert!(chunk.offset(1).is_err());
            assert_eq!(chunk_entries(&chunk.raw).last(), Some(None));
        }
        let layout = Layout {
            head: 10,
            tail: 20,
            shift: 3,
            spills: false,
            writes: 7,
        };
        let encoded = layout.encode();
        let read = Layout::of(&encoded).unwrap();
        assert_eq!(
            (read.head, read.tail, read.shift, read.spills, read.writes),
            (10, 20, 3, false, 7)
        );
        assert_eq!(read.first_in(1), 10);
        assert_eq!(read.first_in(2), 16);
        let spilling = Layout::of(
            &Layout {
                spills: true,
                ..layout
            }
            .encode(),
        )
        .unwrap();
        assert_eq!((spilling.shift, spilling.spills), (3, true));
        assert!(Layout::of(&encoded[..LAYOUT_LEN - 1]).is_err());
        let mut unflagged = encoded.to_vec();
        unflagged[16] = 3;
        assert!(
            Layout::of(&unflagged).is_err(),
            "a list written before entries carried the spill flag"
        );
        let backwards = Layout {
            head: 20,
            tail: 10,
            ..layout
        };
        assert!(Layout::of(&backwards.encode()).is_err());
        let too_wide = Layout {
            shift: MAX_SHIFT + 1,
            ..layout
        };
        assert!(Layout::of(&too_wide.encode()).is_err());
    }

    #[test]
    fn spill_records_sort_after_every_chunk_of_their_list() {
        let last_chunk = u64::MAX >> 1;
        assert!(list_spill_suffix(0).as_slice() > list_suffix(last_chunk).as_slice());
        assert!(list_spill_suffix(MIDDLE) < list_spill_suffix(MIDDLE + 1));
    }
}
