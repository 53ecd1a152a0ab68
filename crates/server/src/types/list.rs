//! Lists: elements at consecutive positions between a head and a tail kept in the metadata,
//! stored in chunks of 2^shift consecutive positions, `key|version|chunk:u64 → entries`
//! (chunk = position >> shift). A chunk holds an entry for each of its positions that lie in
//! `[head, tail)`, in order, so a chunk's first entry is at the larger of the head and the
//! chunk's first position. Pushes and pops at either end rewrite one chunk and the metadata:
//! O(1) whatever the length; LINDEX and LSET read one chunk (and a spilled element's record,
//! below); LRANGE reads the chunks of the
//! positions it returns, which for short elements is a few records where one per element cost
//! a scan step each. `shift` is fixed when the list is created, from the length of its first
//! element, so that a chunk holds about [`CHUNK_BYTES`]. A small list keeps its records packed
//! in its metadata after the head, tail and shift (`packed_elements`).
//!
//! An element more than [`INLINE_FACTOR`] times longer than a chunk's share per position is
//! spilled: kept in a record of its own, `key|version|0xFF·position:u64` (after every chunk,
//! whose numbers stay near 2^63 >> shift), and only marked in its chunk. So a list created with
//! short elements and given long ones later still has chunks of a few KiB, and a push or pop
//! writes its own element, not the 64 long ones a chunk could otherwise hold. A chunk entry is
//! `(len << 1):varint · bytes` for an element held inline, the single byte `1` for a spilled one.
//!
//! Reads take no lock, and an element's position in its chunk follows from the head that the
//! metadata gave: a write between the two reads would make a read return the wrong element, or
//! fail. Every write bumps a counter in the metadata, and a read that touched records reads the
//! metadata again and starts over if the counter moved, as a seqlock does.

use std::borrow::Cow;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use bytes::Bytes;
use shale_storage::keys::{list_spill_suffix, list_suffix};
use shale_storage::metadata::KeyKind;
use shale_storage::{Cf, ScanDirection, StorageError};

use super::collection::{Collection, CollectionWrite, ScanBuffer};
use super::index_window as window;
use super::packed_elements::{put_varint, read_varint};
use crate::error::Error;
use crate::keyspace::Db;

/// Where a new list starts, so it can grow a long way in both directions.
const MIDDLE: u64 = 1 << 63;
/// An LRANGE reserves room for at most this many elements up front.
const RESERVED_ITEMS: u64 = 1024;
/// The bytes a chunk of elements as long as a list's first one holds, about.
const CHUNK_BYTES: usize = 2048;
/// At most 2^6 elements per chunk: an edit walks at most that many entries.
const MAX_SHIFT: u8 = 6;
/// Elements longer than this many times a chunk's share per position (`CHUNK_BYTES >> shift`)
/// are spilled, so a chunk of several positions holds at most about this many times
/// [`CHUNK_BYTES`]. A chunk of one position holds its element whatever its length.
const INLINE_FACTOR: usize = 4;
/// The top bit of the stored shift: set once the list has spilled an element, so that lists
/// that never did read nothing for spilled records when they drop positions.
const SPILLS: u8 = 0x80;
/// Set in the stored shift of every list in this format (chunk entries that carry the spill
/// flag, a write counter): a list written before, without it, reads as corrupt, not misread.
const FLAGGED_ENTRIES: u8 = 0x40;
/// The bytes of a list's own part of the metadata: head, tail, shift byte, write counter.
pub(super) const LAYOUT_LEN: usize = shale_storage::metadata::LIST_LAYOUT_LEN;
/// Reads that found the list changed under them start over this many times, then take the
/// key's lock.
const READ_TRIES: usize = 3;
/// Positions spanning more chunks than this are dropped with range deletes; fewer chunks go
/// record by record, as range deletes leave tombstones for reads to step over and empty the
/// data cache (`record_cache.rs`).
const FEW_CHUNKS: u64 = 16;
/// The chunk entry of a spilled element; an inline element's header is even.
const SPILLED_MARK: usize = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// LPOS options.
#[derive(Debug, Clone, Copy)]
pub struct PosOptions {
    /// 1-based match to start from; negative searches from the tail.
    pub rank: i64,
    /// Matches to return; 0 means all.
    pub count: u64,
    /// Elements to compare at most; 0 means all.
    pub maxlen: u64,
}

/// The chunk size (as a shift) for a list whose first element is `len` bytes long.
fn shift_for(len: usize) -> u8 {
    let slots = (CHUNK_BYTES / (len + 2)).max(1);
    ((usize::BITS - 1 - slots.leading_zeros()) as u8).min(MAX_SHIFT)
}

/// Where a list's elements lie: positions `[head, tail)`, in chunks of `2^shift` positions.
#[derive(Debug, Clone, Copy)]
struct Layout {
    head: u64,
    tail: u64,
    shift: u8,
    /// Whether the list has ever spilled an element.
    spills: bool,
    /// Writes so far, wrapping: reads check that it did not move while they read.
    writes: u32,
}

impl Layout {
    fn of(extra: &[u8]) -> Result<Layout, Error> {
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

    fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(LAYOUT_LEN);
        out.extend_from_slice(&self.head.to_be_bytes());
        out.extend_from_slice(&self.tail.to_be_bytes());
        let spills = if self.spills { SPILLS } else { 0 };
        out.push(self.shift | FLAGGED_ENTRIES | spills);
        out.extend_from_slice(&self.writes.to_be_bytes());
        Bytes::from(out)
    }

    fn len(&self) -> u64 {
        self.tail - self.head
    }

    fn chunk_of(&self, position: u64) -> u64 {
        position >> self.shift
    }

    /// The position of chunk `chunk`'s first element.
    fn first_in(&self, chunk: u64) -> u64 {
        self.head.max(chunk << self.shift)
    }

    /// The longest element a chunk holds inline.
    fn inline_limit(&self) -> usize {
        match self.shift {
            0 => usize::MAX,
            shift => INLINE_FACTOR * (CHUNK_BYTES >> shift),
        }
    }
}

fn corrupt() -> Error {
    Error::Storage(StorageError::Corrupt("list chunk"))
}

/// One position's entry in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored<'a> {
    Inline(&'a [u8]),
    /// In a record of its own, under [`list_spill_suffix`] of its position.
    Spilled,
}

/// The entry at `at`, which moves past it; `None` if the bytes there are malformed.
fn entry_at<'r>(raw: &'r [u8], at: &mut usize) -> Option<Stored<'r>> {
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

fn put_entry(out: &mut Vec<u8>, entry: Stored<'_>) {
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
fn chunk_entries(raw: &[u8]) -> impl Iterator<Item = Option<Stored<'_>>> + '_ {
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
enum Taken {
    Inline(Bytes),
    Spilled,
}

impl Taken {
    fn of(entry: Stored<'_>) -> Taken {
        match entry {
            Stored::Inline(element) => Taken::Inline(Bytes::copy_from_slice(element)),
            Stored::Spilled => Taken::Spilled,
        }
    }
}

/// A chunk as a write changes it: its stored bytes, edited in place, so a push or pop at an
/// end splits no element out but the one it takes.
struct Chunk {
    raw: Vec<u8>,
}

impl Chunk {
    /// Where entry `index` starts: past the entries before it.
    fn offset(&self, index: usize) -> Result<usize, Error> {
        let mut at = 0;
        for _ in 0..index {
            at = self.entry(at)?.1;
        }
        Ok(at)
    }

    /// The entry that starts at `at`, and where it ends.
    fn entry(&self, at: usize) -> Result<(Stored<'_>, usize), Error> {
        let mut end = at;
        let entry = entry_at(&self.raw, &mut end).ok_or_else(corrupt)?;
        Ok((entry, end))
    }

    fn push_front(&mut self, entry: Stored<'_>) {
        let element_len = match entry {
            Stored::Inline(element) => element.len(),
            Stored::Spilled => 0,
        };
        let mut out = Vec::with_capacity(self.raw.len() + element_len + 10);
        put_entry(&mut out, entry);
        out.extend_from_slice(&self.raw);
        self.raw = out;
    }

    fn push_back(&mut self, entry: Stored<'_>) {
        put_entry(&mut self.raw, entry);
    }

    fn pop_front(&mut self) -> Result<Taken, Error> {
        let (entry, end) = self.entry(0)?;
        let taken = Taken::of(entry);
        self.raw.drain(..end);
        Ok(taken)
    }

    fn pop_back(&mut self) -> Result<Taken, Error> {
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
    fn truncate(&mut self, count: usize) -> Result<(), Error> {
        let at = self.offset(count)?;
        self.raw.truncate(at);
        Ok(())
    }

    /// Drops the first `count` entries.
    fn drop_front(&mut self, count: usize) -> Result<(), Error> {
        let at = self.offset(count)?;
        self.raw.drain(..at);
        Ok(())
    }

    /// Replaces entry `index`; returns whether the old one was spilled.
    fn replace(&mut self, index: usize, entry: Stored<'_>) -> Result<bool, Error> {
        let start = self.offset(index)?;
        let (old, end) = self.entry(start)?;
        let was_spilled = old == Stored::Spilled;
        let mut encoded = Vec::new();
        put_entry(&mut encoded, entry);
        self.raw.splice(start..end, encoded);
        Ok(was_spilled)
    }
}

/// What becomes of the positions a write drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dropped {
    /// The same write pushes elements there again (LINSERT, LREM), so the chunks it empties
    /// stay in the write, to be refilled.
    Refilled,
    /// They are gone (LTRIM): many emptied chunks go with a range delete.
    Gone,
}

/// A list opened for writing: its collection, its layout, and the chunks and spilled elements
/// it changes, read on first use and written back at the end.
struct ListWrite<'a> {
    inner: CollectionWrite<'a>,
    layout: Layout,
    chunks: BTreeMap<u64, Chunk>,
    /// Spilled elements this write stores (`Some`) or removes (`None`), by position.
    spills: BTreeMap<u64, Option<Vec<u8>>>,
}

impl<'a> ListWrite<'a> {
    /// Chunk `chunk` as this write sees it, read on first use, to be changed.
    fn chunk(&mut self, chunk: u64) -> Result<&mut Chunk, Error> {
        match self.chunks.entry(chunk) {
            Entry::Occupied(slot) => Ok(slot.into_mut()),
            Entry::Vacant(slot) => {
                let raw = self
                    .inner
                    .get(Cf::Data, &list_suffix(chunk))?
                    .unwrap_or_default();
                Ok(slot.insert(Chunk { raw }))
            }
        }
    }

    /// Marks chunk `chunk` empty without reading it: all its positions are going.
    fn clear(&mut self, chunk: u64) {
        self.chunks.insert(chunk, Chunk { raw: Vec::new() });
    }

    /// The entry that stores `value` at `position`: the value itself, or the mark of a spilled
    /// element whose record this write will store.
    fn entry_for<'v>(&mut self, position: u64, value: &'v [u8]) -> Stored<'v> {
        if value.len() <= self.layout.inline_limit() {
            return Stored::Inline(value);
        }
        self.layout.spills = true;
        self.spills.insert(position, Some(value.to_vec()));
        Stored::Spilled
    }

    /// The element taken from `position`: a spilled one is read, and its record goes.
    fn element(&mut self, position: u64, taken: Taken) -> Result<Bytes, Error> {
        match taken {
            Taken::Inline(element) => Ok(element),
            Taken::Spilled => {
                let value = match self.spills.insert(position, None) {
                    Some(pending) => pending,
                    None => self.inner.get(Cf::Data, &list_spill_suffix(position))?,
                };
                value.map(Bytes::from).ok_or_else(corrupt)
            }
        }
    }

    /// Deletes the spilled elements at positions `[from, to)`, stored or added by this write,
    /// before their chunks change: found in the chunks when they are few, else with one range
    /// delete.
    fn drop_spills(&mut self, from: u64, to: u64) -> Result<(), Error> {
        if !self.layout.spills || from >= to {
            return Ok(());
        }
        let (first, last) = (self.layout.chunk_of(from), self.layout.chunk_of(to - 1));
        if last - first >= FEW_CHUNKS {
            self.spills
                .retain(|&position, _| position < from || position >= to);
            self.inner
                .delete_range(Cf::Data, &list_spill_suffix(from), &list_spill_suffix(to));
            return Ok(());
        }
        for chunk in first..=last {
            let start = self.layout.first_in(chunk);
            let mut marked = Vec::new();
            for (position, entry) in (start..).zip(chunk_entries(&self.chunk(chunk)?.raw)) {
                if entry.ok_or_else(corrupt)? == Stored::Spilled && (from..to).contains(&position) {
                    marked.push(position);
                }
            }
            for position in marked {
                self.spills.insert(position, None);
            }
        }
        Ok(())
    }

    /// Empties the whole chunks `[start, end)`: one by one when they are few or the write
    /// refills them, else with a range delete, after which this write must not touch them.
    fn drop_chunks(&mut self, start: u64, end: u64, dropped: Dropped) {
        if dropped == Dropped::Refilled || end.saturating_sub(start) <= FEW_CHUNKS {
            for chunk in start..end {
                self.clear(chunk);
            }
        } else {
            self.chunks
                .retain(|&chunk, _| chunk < start || chunk >= end);
            self.inner
                .delete_range(Cf::Data, &list_suffix(start), &list_suffix(end));
        }
    }

    fn push(&mut self, end: End, value: &[u8]) -> Result<(), Error> {
        match end {
            End::Left => {
                let position = self.layout.head - 1;
                let entry = self.entry_for(position, value);
                self.chunk(self.layout.chunk_of(position))?
                    .push_front(entry);
                self.layout.head = position;
            }
            End::Right => {
                let position = self.layout.tail;
                let entry = self.entry_for(position, value);
                self.chunk(self.layout.chunk_of(position))?.push_back(entry);
                self.layout.tail = position + 1;
            }
        }
        Ok(())
    }

    /// Removes up to `count` elements from one end.
    fn pop(&mut self, end: End, count: u64) -> Result<Vec<Bytes>, Error> {
        let count = count.min(self.layout.len());
        let mut values = Vec::with_capacity(count.min(RESERVED_ITEMS) as usize);
        for _ in 0..count {
            let (position, taken) = match end {
                End::Left => {
                    let position = self.layout.head;
                    self.layout.head += 1;
                    (
                        position,
                        self.chunk(self.layout.chunk_of(position))?.pop_front()?,
                    )
                }
                End::Right => {
                    self.layout.tail -= 1;
                    let position = self.layout.tail;
                    (
                        position,
                        self.chunk(self.layout.chunk_of(position))?.pop_back()?,
                    )
                }
            };
            values.push(self.element(position, taken)?);
        }
        Ok(values)
    }

    /// Replaces the element at `position`.
    fn replace(&mut self, position: u64, value: &[u8]) -> Result<(), Error> {
        let chunk = self.layout.chunk_of(position);
        let index = (position - self.layout.first_in(chunk)) as usize;
        let entry = self.entry_for(position, value);
        let was_spilled = self.chunk(chunk)?.replace(index, entry)?;
        if was_spilled && entry != Stored::Spilled {
            self.spills.insert(position, None);
        }
        Ok(())
    }

    /// Drops positions from `from` to the tail, reading only the chunk `from` falls in.
    fn truncate(&mut self, from: u64, dropped: Dropped) -> Result<(), Error> {
        let layout = self.layout;
        if from >= layout.tail {
            return Ok(());
        }
        self.drop_spills(from, layout.tail)?;
        let first = layout.chunk_of(from);
        let keep = (from - layout.first_in(first)) as usize;
        self.chunk(first)?.truncate(keep)?;
        self.drop_chunks(first + 1, layout.chunk_of(layout.tail - 1) + 1, dropped);
        self.layout.tail = from;
        Ok(())
    }

    /// Drops positions from the head to `to`, reading only the chunk `to` falls in.
    fn drop_front(&mut self, to: u64, dropped: Dropped) -> Result<(), Error> {
        let layout = self.layout;
        if to >= layout.tail {
            return self.truncate(layout.head, dropped);
        }
        if to <= layout.head {
            return Ok(());
        }
        self.drop_spills(layout.head, to)?;
        let last = layout.chunk_of(to);
        self.drop_chunks(layout.chunk_of(layout.head), last, dropped);
        let drop = (to - layout.first_in(last)) as usize;
        self.chunk(last)?.drop_front(drop)?;
        self.layout.head = to;
        Ok(())
    }

    /// Replaces the elements at positions `[from, to)`, a span from the head or to the tail,
    /// with `values`; the elements on the other side of the span keep their positions.
    fn replace_end(&mut self, (from, to): (u64, u64), values: &[Bytes]) -> Result<(), Error> {
        if from == self.layout.head {
            self.drop_front(to, Dropped::Refilled)?;
            for value in values.iter().rev() {
                self.push(End::Left, value)?;
            }
        } else {
            self.truncate(from, Dropped::Refilled)?;
            for value in values {
                self.push(End::Right, value)?;
            }
        }
        Ok(())
    }

    fn finish(mut self) -> CollectionWrite<'a> {
        for (chunk, Chunk { raw }) in std::mem::take(&mut self.chunks) {
            if raw.is_empty() {
                self.inner.delete(Cf::Data, &list_suffix(chunk));
            } else {
                self.inner.put(Cf::Data, &list_suffix(chunk), raw);
            }
        }
        for (position, value) in std::mem::take(&mut self.spills) {
            let sub = list_spill_suffix(position);
            match value {
                Some(value) => self.inner.put(Cf::Data, &sub, value),
                None => self.inner.delete(Cf::Data, &sub),
            }
        }
        self.layout.writes = self.layout.writes.wrapping_add(1);
        self.inner.size = self.layout.len();
        self.inner.extra = self.layout.encode();
        self.inner
    }
}

impl<'a> Db<'a> {
    /// Replaces whatever `dst` holds with a list of `items` (SORT ... STORE); no items delete
    /// it. The caller holds the key's lock.
    pub(crate) fn store_list(&self, dst: &'a [u8], items: &[Bytes]) -> Result<(), Error> {
        let mut layout = Layout {
            head: MIDDLE,
            tail: MIDDLE + items.len() as u64,
            shift: shift_for(items.first().map_or(0, Bytes::len)),
            spills: false,
            writes: 0,
        };
        self.replace_with_collection(dst, KeyKind::List, |write| {
            let mut chunks: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            for (position, item) in (MIDDLE..).zip(items) {
                let raw = chunks.entry(layout.chunk_of(position)).or_default();
                if item.len() <= layout.inline_limit() {
                    put_entry(raw, Stored::Inline(item));
                } else {
                    layout.spills = true;
                    put_entry(raw, Stored::Spilled);
                    write.put(Cf::Data, &list_spill_suffix(position), item.to_vec());
                }
            }
            for (chunk, raw) in chunks {
                write.put(Cf::Data, &list_suffix(chunk), raw);
            }
            write.size = layout.len();
            write.extra = layout.encode();
        })
    }

    fn list_of(&self, key: &[u8]) -> Result<Option<(Collection, Layout)>, Error> {
        let Some(list) = self.collection(key, KeyKind::List)? else {
            return Ok(None);
        };
        let layout = Layout::of(&list.extra)?;
        Ok(Some((list, layout)))
    }

    /// Runs `read` on the list at `key` as one state of it: see the module's comment. A list
    /// packed in its metadata is read in one go.
    fn read_list<T>(
        &self,
        key: &[u8],
        mut read: impl FnMut(&Collection, Layout) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        for _ in 0..READ_TRIES {
            let Some((list, layout)) = self.list_of(key)? else {
                return Ok(None);
            };
            let outcome = read(&list, layout);
            if list.packed.is_some() {
                return outcome.map(Some);
            }
            let now = self.list_of(key)?.map(|(l, now)| (l.version, now.writes));
            if now == Some((list.version, layout.writes)) {
                return outcome.map(Some);
            }
        }
        let _guard = self.lock(&[key])?;
        let Some((list, layout)) = self.list_of(key)? else {
            return Ok(None);
        };
        read(&list, layout).map(Some)
    }

    /// Opens `key` for a write; a new list takes its chunk size from `first`, the element
    /// it will start with.
    fn open_list(&self, key: &'a [u8], first: &[u8]) -> Result<ListWrite<'a>, Error> {
        let inner = self.open_for_write(key, KeyKind::List)?;
        let layout = if inner.existed {
            Layout::of(&inner.extra)?
        } else {
            Layout {
                head: MIDDLE,
                tail: MIDDLE,
                shift: shift_for(first.len()),
                spills: false,
                writes: 0,
            }
        };
        Ok(ListWrite {
            inner,
            layout,
            chunks: BTreeMap::new(),
            spills: BTreeMap::new(),
        })
    }

    /// LPUSH/RPUSH (and the X forms with `only_if_exists`): returns the new length.
    pub fn push(
        &self,
        key: &'a [u8],
        end: End,
        values: &[Bytes],
        only_if_exists: bool,
    ) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let first = values.first().map_or(&[][..], |v| v.as_ref());
        let mut list = self.open_list(key, first)?;
        if only_if_exists && !list.inner.existed {
            return Ok(0);
        }
        for value in values {
            list.push(end, value)?;
        }
        let len = list.layout.len() as i64;
        list.finish().commit()?;
        Ok(len)
    }

    /// LPOP/RPOP: removes up to `count` elements from one end.
    pub fn pop(&self, key: &'a [u8], end: End, count: u64) -> Result<Option<Vec<Bytes>>, Error> {
        let _guard = self.lock(&[key])?;
        self.pop_locked(key, end, count)
    }

    /// LMPOP: pops from the first of `keys` that holds a list.
    pub fn lmpop(
        &self,
        keys: &'a [Bytes],
        end: End,
        count: u64,
    ) -> Result<Option<(Bytes, Vec<Bytes>)>, Error> {
        let _guard = self.lock(keys)?;
        for key in keys {
            if let Some(values) = self.pop_locked(key, end, count)? {
                return Ok(Some((key.clone(), values)));
            }
        }
        Ok(None)
    }

    fn pop_locked(&self, key: &'a [u8], end: End, count: u64) -> Result<Option<Vec<Bytes>>, Error> {
        let mut list = self.open_list(key, &[])?;
        if !list.inner.existed {
            return Ok(None);
        }
        let values = list.pop(end, count)?;
        list.finish().commit()?;
        Ok(Some(values))
    }

    pub fn llen(&self, key: &[u8]) -> Result<i64, Error> {
        Ok(self.list_of(key)?.map_or(0, |(l, _)| l.size as i64))
    }

    /// Visits the elements at positions `[from, to)` in `direction`, with their positions;
    /// `visit` returns whether to go on.
    fn scan_list(
        &self,
        key: &[u8],
        list: &Collection,
        layout: Layout,
        (from, to): (u64, u64),
        direction: ScanDirection,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<(), Error> {
        if from >= to {
            return Ok(());
        }
        let lower = list_suffix(layout.chunk_of(from));
        let upper = list_suffix(layout.chunk_of(to - 1) + 1);
        let mut failure = None;
        self.scan_elements(
            Cf::Data,
            key,
            list,
            (&lower, Some(&upper)),
            direction,
            &mut |sub, raw| {
                let Ok(chunk) = <[u8; 8]>::try_from(sub).map(u64::from_be_bytes) else {
                    failure = Some(corrupt());
                    return false;
                };
                let first = layout.first_in(chunk);
                // A reverse scan yields chunks last to first; their elements are reversed here.
                let mut elements = Vec::new();
                for (position, entry) in (first..).zip(chunk_entries(raw)) {
                    let Some(entry) = entry else {
                        failure = Some(corrupt());
                        return false;
                    };
                    if position >= to {
                        break;
                    }
                    if position < from {
                        continue;
                    }
                    let element = match entry {
                        Stored::Inline(element) => Cow::Borrowed(element),
                        Stored::Spilled => match self.spilled(key, list, position) {
                            Ok(element) => Cow::Owned(element),
                            Err(err) => {
                                failure = Some(err);
                                return false;
                            }
                        },
                    };
                    if direction == ScanDirection::Forward {
                        if !visit(position, &element) {
                            return false;
                        }
                    } else {
                        elements.push((position, element));
                    }
                }
                elements
                    .into_iter()
                    .rev()
                    .all(|(position, element)| visit(position, &element))
            },
        )?;
        failure.map_or(Ok(()), Err)
    }

    /// The spilled element at `position`.
    fn spilled(&self, key: &[u8], list: &Collection, position: u64) -> Result<Vec<u8>, Error> {
        self.get_element(Cf::Data, key, list, &list_spill_suffix(position))?
            .ok_or_else(corrupt)
    }

    pub(crate) fn lrange(&self, key: &[u8], start: i64, stop: i64) -> Result<ScanBuffer, Error> {
        let read = self.read_list(key, |list, layout| {
            let Some((first, last)) = window(start, stop, layout.len()) else {
                return Ok(ScanBuffer::default());
            };
            let mut read = ScanBuffer::for_items((last - first + 1).min(RESERVED_ITEMS) as usize);
            let span = (layout.head + first, layout.head + last + 1);
            self.scan_list(
                key,
                list,
                layout,
                span,
                ScanDirection::Forward,
                &mut |_, v| {
                    read.push(v);
                    true
                },
            )?;
            Ok(read)
        })?;
        Ok(read.unwrap_or_default())
    }

    pub fn lindex(&self, key: &[u8], index: i64) -> Result<Option<Bytes>, Error> {
        let found = self.read_list(key, |list, layout| {
            let Some((offset, _)) = window(index, index, layout.len()) else {
                return Ok(None);
            };
            let position = layout.head + offset;
            let chunk = layout.chunk_of(position);
            let Some(raw) = self.get_element(Cf::Data, key, list, &list_suffix(chunk))? else {
                return Err(corrupt());
            };
            let at = (position - layout.first_in(chunk)) as usize;
            let element = match chunk_entries(&raw).nth(at).flatten().ok_or_else(corrupt)? {
                Stored::Inline(element) => Bytes::copy_from_slice(element),
                Stored::Spilled => self.spilled(key, list, position)?.into(),
            };
            Ok(Some(element))
        })?;
        Ok(found.flatten())
    }

    pub fn lset(&self, key: &'a [u8], index: i64, value: &[u8]) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key, value)?;
        if !list.inner.existed {
            return Err(Error::NoSuchKey);
        }
        let Some((offset, _)) = window(index, index, list.layout.len()) else {
            return Err(Error::msg("index out of range"));
        };
        list.replace(list.layout.head + offset, value)?;
        list.finish().commit()
    }

    /// The positions of the elements equal to `value`, ascending: the first `limit` found
    /// from the head, or from the tail if `from_tail`.
    fn list_matches(
        &self,
        key: &[u8],
        list: &ListWrite<'_>,
        value: &[u8],
        limit: usize,
        from_tail: bool,
    ) -> Result<Vec<u64>, Error> {
        let layout = list.layout;
        let direction = if from_tail {
            ScanDirection::Reverse
        } else {
            ScanDirection::Forward
        };
        let mut found = Vec::new();
        self.scan_list(
            key,
            &list.inner.collection(),
            layout,
            (layout.head, layout.tail),
            direction,
            &mut |position, element| {
                if element == value {
                    found.push(position);
                }
                found.len() < limit
            },
        )?;
        if from_tail {
            found.reverse();
        }
        Ok(found)
    }

    /// The elements at positions `[from, to)`, in order, but for those at `skip` (ascending).
    fn list_span(
        &self,
        key: &[u8],
        list: &ListWrite<'_>,
        (from, to): (u64, u64),
        skip: &[u64],
    ) -> Result<Vec<Bytes>, Error> {
        let mut elements = Vec::with_capacity((to - from).min(RESERVED_ITEMS) as usize);
        self.scan_list(
            key,
            &list.inner.collection(),
            list.layout,
            (from, to),
            ScanDirection::Forward,
            &mut |position, element| {
                if skip.binary_search(&position).is_err() {
                    elements.push(Bytes::copy_from_slice(element));
                }
                true
            },
        )?;
        Ok(elements)
    }

    /// LINSERT: returns the new length, -1 if the pivot is missing, 0 if the key is. The
    /// elements on the shorter side of the new one move by a place: O(pivot's index + the
    /// shorter side), as an insert next to either end of a long list moves few.
    pub fn linsert(
        &self,
        key: &'a [u8],
        before: bool,
        pivot: &[u8],
        value: &Bytes,
    ) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key, value)?;
        if !list.inner.existed {
            return Ok(0);
        }
        let Some(&found) = self.list_matches(key, &list, pivot, 1, false)?.first() else {
            return Ok(-1);
        };
        let layout = list.layout;
        let at = if before { found } else { found + 1 };
        if at - layout.head <= layout.tail - at {
            let mut front = self.list_span(key, &list, (layout.head, at), &[])?;
            front.push(value.clone());
            list.replace_end((layout.head, at), &front)?;
        } else {
            let mut back = vec![value.clone()];
            back.extend(self.list_span(key, &list, (at, layout.tail), &[])?);
            list.replace_end((at, layout.tail), &back)?;
        }
        let len = list.layout.len() as i64;
        list.finish().commit()?;
        Ok(len)
    }

    /// LREM: removes up to |count| occurrences (all if 0; from the tail if negative). The
    /// gaps close by moving the elements between the matches and those on the shorter side
    /// of them, so removing an element near either end of a long list moves few.
    pub fn lrem(&self, key: &'a [u8], count: i64, value: &[u8]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key, value)?;
        if !list.inner.existed {
            return Ok(0);
        }
        let limit = match count {
            0 => usize::MAX,
            count => usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX),
        };
        let doomed = self.list_matches(key, &list, value, limit, count < 0)?;
        let (Some(&first), Some(&last)) = (doomed.first(), doomed.last()) else {
            return Ok(0);
        };
        let layout = list.layout;
        let span = if last + 1 - layout.head <= layout.tail - first {
            (layout.head, last + 1)
        } else {
            (first, layout.tail)
        };
        let kept = self.list_span(key, &list, span, &doomed)?;
        list.replace_end(span, &kept)?;
        list.finish().commit()?;
        Ok(doomed.len() as i64)
    }

    /// LTRIM: keeps `[start, stop]`; whole chunks outside it go (with range deletes when
    /// many), and the chunks at the new ends are rewritten.
    pub fn ltrim(&self, key: &'a [u8], start: i64, stop: i64) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key, &[])?;
        if !list.inner.existed {
            return Ok(());
        }
        let layout = list.layout;
        let Some((first, last)) = window(start, stop, layout.len()) else {
            // Nothing stays: the key goes, and every record of its version with it.
            list.layout.tail = layout.head;
            return list.finish().commit();
        };
        list.drop_front(layout.head + first, Dropped::Gone)?;
        list.truncate(layout.head + last + 1, Dropped::Gone)?;
        list.finish().commit()
    }

    /// LPOS: the indexes of matching elements.
    pub fn lpos(&self, key: &[u8], element: &[u8], options: PosOptions) -> Result<Vec<i64>, Error> {
        let direction = if options.rank < 0 {
            ScanDirection::Reverse
        } else {
            ScanDirection::Forward
        };
        let want = if options.count == 0 {
            u64::MAX
        } else {
            options.count
        };
        let budget = if options.maxlen == 0 {
            u64::MAX
        } else {
            options.maxlen
        };
        let found = self.read_list(key, |list, layout| {
            let mut skip = options.rank.unsigned_abs() - 1;
            let (mut seen, mut out) = (0u64, Vec::new());
            self.scan_list(
                key,
                list,
                layout,
                (layout.head, layout.tail),
                direction,
                &mut |position, value| {
                    if seen == budget {
                        return false;
                    }
                    seen += 1;
                    if value == element {
                        if skip > 0 {
                            skip -= 1;
                        } else {
                            out.push((position - layout.head) as i64);
                            if out.len() as u64 == want {
                                return false;
                            }
                        }
                    }
                    true
                },
            )?;
            Ok(out)
        })?;
        Ok(found.unwrap_or_default())
    }

    /// LMOVE/RPOPLPUSH: pops from `src` and pushes to `dst` in one batch.
    pub fn lmove(
        &self,
        src: &'a [u8],
        dst: &'a [u8],
        from: End,
        to: End,
    ) -> Result<Option<Bytes>, Error> {
        let _guard = self.lock(&[src, dst])?;
        let mut source = self.open_list(src, &[])?;
        if !source.inner.existed {
            return Ok(None);
        }
        let Some(value) = source.pop(from, 1)?.pop() else {
            return Ok(None);
        };
        // A wrong-typed destination must fail before anything moves.
        let target = if src == dst {
            None
        } else {
            Some(self.open_list(dst, &value)?)
        };
        match target {
            None => {
                source.push(to, &value)?;
                source.finish().commit()?;
            }
            Some(mut target) => {
                let mut change = source.finish().stage()?;
                target.push(to, &value)?;
                change.append(target.finish().stage()?);
                self.write(change)?;
            }
        }
        Ok(Some(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
