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

mod chunk;
mod write;

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use shale_storage::keys::{list_spill_suffix, list_suffix};
use shale_storage::metadata::KeyKind;
use shale_storage::{Cf, ScanDirection};

use super::collection::{Collection, ScanBuffer};
use super::index_window as window;
use crate::error::Error;
use crate::keyspace::Db;
use chunk::{chunk_entries, corrupt, put_entry, shift_for, Layout, Stored};
use write::{Dropped, ListWrite};

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

impl<'a> Db<'a> {
    /// Replaces whatever `dst` holds with a list of `items` (SORT ... STORE, RESTORE); no
    /// items delete it. The caller holds the key's lock.
    pub(crate) fn store_list(
        &self,
        dst: &'a [u8],
        items: &[Bytes],
        expire_at: u64,
    ) -> Result<(), Error> {
        let mut layout = Layout {
            head: MIDDLE,
            tail: MIDDLE + items.len() as u64,
            shift: shift_for(items.first().map_or(0, Bytes::len)),
            spills: false,
            writes: 0,
        };
        self.replace_with_collection(dst, KeyKind::List, expire_at, |write| {
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
        // The first lookup is the command's, counted as a hit or miss; the checks and tries
        // after it are not.
        let mut lookup = *self;
        for _ in 0..READ_TRIES {
            let Some((list, layout)) = lookup.list_of(key)? else {
                return Ok(None);
            };
            lookup = self.uncounted();
            let outcome = read(&list, layout);
            if list.packed.is_some() {
                return outcome.map(Some);
            }
            let now = lookup.list_of(key)?.map(|(l, now)| (l.version, now.writes));
            if now == Some((list.version, layout.writes)) {
                return outcome.map(Some);
            }
        }
        let _guard = self.lock(&[key])?;
        let Some((list, layout)) = lookup.list_of(key)? else {
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
