//! A list opened for writing: pushes, pops, edits and drops of positions, staged chunk by
//! chunk and written back at the end.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use bytes::Bytes;
use shale_storage::keys::{list_spill_suffix, list_suffix};
use shale_storage::Cf;

use super::chunk::{chunk_entries, corrupt, Chunk, Layout, Stored, Taken};
use super::{End, FEW_CHUNKS, RESERVED_ITEMS};
use crate::error::Error;
use crate::types::collection::CollectionWrite;

/// What becomes of the positions a write drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dropped {
    /// The same write pushes elements there again (LINSERT, LREM), so the chunks it empties
    /// stay in the write, to be refilled.
    Refilled,
    /// They are gone (LTRIM): many emptied chunks go with a range delete.
    Gone,
}

/// A list opened for writing: its collection, its layout, and the chunks and spilled elements
/// it changes, read on first use and written back at the end.
pub(super) struct ListWrite<'a> {
    pub(super) inner: CollectionWrite<'a>,
    pub(super) layout: Layout,
    pub(super) chunks: BTreeMap<u64, Chunk>,
    /// Spilled elements this write stores (`Some`) or removes (`None`), by position.
    pub(super) spills: BTreeMap<u64, Option<Vec<u8>>>,
}

impl<'a> ListWrite<'a> {
    /// Chunk `chunk` as this write sees it, read on first use, to be changed.
    pub(super) fn chunk(&mut self, chunk: u64) -> Result<&mut Chunk, Error> {
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
    pub(super) fn clear(&mut self, chunk: u64) {
        self.chunks.insert(chunk, Chunk { raw: Vec::new() });
    }

    /// The entry that stores `value` at `position`: the value itself, or the mark of a spilled
    /// element whose record this write will store.
    pub(super) fn entry_for<'v>(&mut self, position: u64, value: &'v [u8]) -> Stored<'v> {
        if value.len() <= self.layout.inline_limit() {
            return Stored::Inline(value);
        }
        self.layout.spills = true;
        self.spills.insert(position, Some(value.to_vec()));
        Stored::Spilled
    }

    /// The element taken from `position`: a spilled one is read, and its record goes.
    pub(super) fn element(&mut self, position: u64, taken: Taken) -> Result<Bytes, Error> {
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
    pub(super) fn drop_spills(&mut self, from: u64, to: u64) -> Result<(), Error> {
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
    pub(super) fn drop_chunks(&mut self, start: u64, end: u64, dropped: Dropped) {
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

    pub(super) fn push(&mut self, end: End, value: &[u8]) -> Result<(), Error> {
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
    pub(super) fn pop(&mut self, end: End, count: u64) -> Result<Vec<Bytes>, Error> {
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
    pub(super) fn replace(&mut self, position: u64, value: &[u8]) -> Result<(), Error> {
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
    pub(super) fn truncate(&mut self, from: u64, dropped: Dropped) -> Result<(), Error> {
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
    pub(super) fn drop_front(&mut self, to: u64, dropped: Dropped) -> Result<(), Error> {
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
    pub(super) fn replace_end(
        &mut self,
        (from, to): (u64, u64),
        values: &[Bytes],
    ) -> Result<(), Error> {
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

    pub(super) fn finish(mut self) -> CollectionWrite<'a> {
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
