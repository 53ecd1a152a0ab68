//! Where a string's bytes live. Small strings sit inline in their metadata record; a string
//! that bit and range commands grow beyond [`INLINE_LIMIT`] moves into 4 KiB fragments,
//! `key|version|index:u32 → bytes`, so SETBIT at offset 2^32-1 writes one fragment, not 512 MB.
//! Missing fragments, and missing bytes at the end of a fragment, read as zeros. GET, STRLEN,
//! GETRANGE and APPEND see one string either way.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::ops::Range;

use bytes::{Bytes, BytesMut};
use shale_storage::metadata::{Body, KeyKind, Metadata};
use shale_storage::{Cf, ScanDirection};

use crate::error::Error;
use crate::keyspace::{now_ms, Change, Db};

pub const FRAGMENT: u64 = 4096;
/// Fragment indexes are 32 bits, so no string may be longer than this; `proto-max-bulk-len`,
/// which bounds every string a command writes, cannot be set above it.
pub const MAX_STRING_LEN: u64 = FRAGMENT << 32;
/// Strings written by range and bit commands stay inline up to this length.
pub const INLINE_LIMIT: u64 = 4096;
/// A read of up to this many fragments asks for each; a longer one scans for those stored.
const POINT_READ_FRAGMENTS: u64 = 16;

fn fragment_suffix(index: u64) -> [u8; 4] {
    (index as u32).to_be_bytes()
}

impl<'a> Db<'a> {
    /// The whole value of a string record, assembled from its fragments if it has them.
    pub(crate) fn string_bytes(&self, key: &[u8], meta: &Metadata) -> Result<Bytes, Error> {
        match (&meta.kind, &meta.body) {
            (KeyKind::String, Body::Inline(v)) => Ok(v.clone()),
            (KeyKind::String, Body::Collection { size, .. }) => {
                Ok(Bytes::from(self.string_range(key, meta, 0, *size)?))
            }
            _ => Err(Error::WrongType),
        }
    }

    /// Bytes `[start, end)` of a string record (clamped to its length).
    pub(crate) fn string_range(
        &self,
        key: &[u8],
        meta: &Metadata,
        start: u64,
        end: u64,
    ) -> Result<Vec<u8>, Error> {
        match (&meta.kind, &meta.body) {
            (KeyKind::String, Body::Inline(v)) => {
                let end = end.min(v.len() as u64);
                Ok(if start >= end {
                    Vec::new()
                } else {
                    v[start as usize..end as usize].to_vec()
                })
            }
            (KeyKind::String, Body::Collection { version, size, .. }) => {
                let end = end.min(*size);
                if start >= end {
                    return Ok(Vec::new());
                }
                let mut out = vec![0u8; (end - start) as usize];
                let first = start / FRAGMENT;
                let last = (end - 1) / FRAGMENT;
                if last - first >= POINT_READ_FRAGMENTS {
                    // A long range reads the fragments that exist, not every one it spans.
                    self.stored_fragments(key, meta, start, end, &mut |at, fragment| {
                        copy_overlap(&mut out, start, fragment, at);
                        true
                    })?;
                    return Ok(out);
                }
                let suffixes: Vec<[u8; 4]> = (first..=last).map(fragment_suffix).collect();
                let subs: Vec<&[u8]> = suffixes.iter().map(|s| s.as_slice()).collect();
                let fragments = self.get_records(Cf::Data, key, *version, &subs)?;
                for (index, fragment) in (first..=last).zip(fragments) {
                    let Some(fragment) = fragment else { continue };
                    copy_overlap(&mut out, start, &fragment, index * FRAGMENT);
                }
                Ok(out)
            }
            _ => Err(Error::WrongType),
        }
    }

    /// Visits the stored parts of a string that overlap bytes `[start, end)`, in order: the
    /// byte offset where each begins and its bytes (an inline value is one part at 0). What
    /// lies between them is zeros, so a command over a sparse bitmap costs what is stored, not
    /// the length it spans. `visit` returns whether to go on.
    pub(crate) fn stored_fragments(
        &self,
        key: &[u8],
        meta: &Metadata,
        start: u64,
        end: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<(), Error> {
        match (&meta.kind, &meta.body) {
            (KeyKind::String, Body::Inline(v)) => {
                if start < end && start < v.len() as u64 {
                    visit(0, v);
                }
                Ok(())
            }
            (KeyKind::String, Body::Collection { version, size, .. }) => {
                let end = end.min(*size);
                if start >= end {
                    return Ok(());
                }
                let lower = fragment_suffix(start / FRAGMENT);
                // Past the last index, which may be the last one 32 bits can name.
                let upper = ((end - 1) / FRAGMENT < u32::MAX as u64)
                    .then(|| fragment_suffix((end - 1) / FRAGMENT + 1));
                let bounds = (lower.as_slice(), upper.as_ref().map(|u| u.as_slice()));
                let mut malformed = false;
                self.scan_records(
                    Cf::Data,
                    key,
                    *version,
                    bounds,
                    ScanDirection::Forward,
                    &mut |suffix, bytes| match <[u8; 4]>::try_from(suffix) {
                        Ok(index) => visit(u32::from_be_bytes(index) as u64 * FRAGMENT, bytes),
                        Err(_) => {
                            malformed = true;
                            false
                        }
                    },
                )?;
                match malformed {
                    true => Err(Error::msg("corrupt record: string fragment")),
                    false => Ok(()),
                }
            }
            _ => Err(Error::WrongType),
        }
    }

    /// Where the first stored part of a string that reaches byte `from` or beyond begins (it
    /// may begin before `from`; see [`Db::stored_fragments`]), or `None` if there is none.
    pub(crate) fn next_stored(
        &self,
        key: &[u8],
        meta: &Metadata,
        from: u64,
    ) -> Result<Option<u64>, Error> {
        let mut found = None;
        self.stored_fragments(key, meta, from, u64::MAX, &mut |at, _| {
            found = Some(at);
            false
        })?;
        Ok(found)
    }

    /// Opens the string at `key` for a partial write; the caller holds its lock. A missing or
    /// expired key is an empty string; another type is `WRONGTYPE`.
    pub(crate) fn open_string(&self, key: &'a [u8]) -> Result<StringWrite<'a>, Error> {
        let stored = self.raw_meta(key)?;
        let live = stored.as_ref().filter(|m| !m.is_expired(now_ms()));
        let (repr, expire_at, existed) = match live {
            None => (Repr::Inline(BytesMut::new()), 0, false),
            Some(meta) if meta.kind != KeyKind::String => return Err(Error::WrongType),
            Some(Metadata {
                body: Body::Inline(v),
                expire_at,
                ..
            }) => (Repr::Inline(BytesMut::from(v.as_ref())), *expire_at, true),
            Some(Metadata {
                body: Body::Collection { version, size, .. },
                expire_at,
                ..
            }) => (
                Repr::Fragmented {
                    version: *version,
                    len: *size,
                    dirty: BTreeMap::new(),
                },
                *expire_at,
                true,
            ),
        };
        Ok(StringWrite {
            db: *self,
            key,
            stored,
            expire_at,
            existed,
            repr,
            create_empty: false,
        })
    }
}

impl<'a> Db<'a> {
    /// A new empty string that will replace whatever `key` holds (BITOP's destination); an
    /// empty result deletes the key.
    pub(crate) fn new_string(&self, key: &'a [u8]) -> Result<StringWrite<'a>, Error> {
        let stored = self.raw_meta(key)?;
        Ok(StringWrite {
            db: *self,
            key,
            stored,
            expire_at: 0,
            existed: false,
            repr: Repr::Inline(BytesMut::new()),
            create_empty: false,
        })
    }
}

/// Copies the part of `src` (which starts at absolute offset `src_at`) that overlaps `dst`
/// (which starts at `dst_at`).
fn copy_overlap(dst: &mut [u8], dst_at: u64, src: &[u8], src_at: u64) {
    let from = dst_at.max(src_at);
    let to = (dst_at + dst.len() as u64).min(src_at + src.len() as u64);
    if from < to {
        dst[(from - dst_at) as usize..(to - dst_at) as usize]
            .copy_from_slice(&src[(from - src_at) as usize..(to - src_at) as usize]);
    }
}

enum Repr {
    Inline(BytesMut),
    /// Fragments this write has read or changed are in `dirty`; the rest are on disk.
    Fragmented {
        version: u64,
        len: u64,
        dirty: BTreeMap<u64, Fragment>,
    },
}

/// A fragment as this write has it.
struct Fragment {
    bytes: Vec<u8>,
    changed: Changed,
}

/// What of a fragment a write has changed, and so how it is written back.
enum Changed {
    Nothing,
    /// These bytes, written back as a patch if few (SETBIT changes one byte of 4 KiB).
    Span(Range<usize>),
    /// A fragment of a new version: written whole.
    Whole,
}

impl Fragment {
    fn touch(&mut self, span: Range<usize>) {
        self.changed = match &self.changed {
            Changed::Nothing => Changed::Span(span),
            Changed::Span(old) => Changed::Span(old.start.min(span.start)..old.end.max(span.end)),
            Changed::Whole => Changed::Whole,
        };
    }
}

/// A fragment whose changed bytes are at most this many is written back as a patch.
const PATCH_LIMIT: usize = FRAGMENT as usize / 4;

/// A string opened for partial reads and writes under its key lock.
pub(crate) struct StringWrite<'a> {
    db: Db<'a>,
    key: &'a [u8],
    stored: Option<Metadata>,
    expire_at: u64,
    pub existed: bool,
    repr: Repr,
    /// Create the key even if it stays empty (APPEND of "" to a missing key).
    create_empty: bool,
}

impl StringWrite<'_> {
    /// Makes `commit` create the key even if it is empty.
    pub fn create_even_if_empty(&mut self) {
        self.create_empty = true;
    }

    pub fn len(&self) -> u64 {
        match &self.repr {
            Repr::Inline(v) => v.len() as u64,
            Repr::Fragmented { len, .. } => *len,
        }
    }

    fn fragment(&mut self, index: u64) -> Result<&mut Fragment, Error> {
        let Repr::Fragmented { version, dirty, .. } = &mut self.repr else {
            return Err(Error::msg("internal error: fragment of an inline string"));
        };
        let slot = match dirty.entry(index) {
            Entry::Occupied(slot) => slot.into_mut(),
            Entry::Vacant(slot) => {
                let suffix = fragment_suffix(index);
                let bytes = self
                    .db
                    .get_record(Cf::Data, self.key, *version, &suffix)?
                    .unwrap_or_default();
                slot.insert(Fragment {
                    bytes,
                    changed: Changed::Nothing,
                })
            }
        };
        Ok(slot)
    }

    /// Bytes `[start, end)`, zero beyond the end of the string.
    pub fn read(&mut self, start: u64, end: u64) -> Result<Vec<u8>, Error> {
        let mut out = vec![0u8; end.saturating_sub(start) as usize];
        match &self.repr {
            Repr::Inline(v) => copy_overlap(&mut out, start, v, 0),
            Repr::Fragmented { len, .. } => {
                let stop = end.min(*len);
                if start < stop {
                    for index in start / FRAGMENT..=(stop - 1) / FRAGMENT {
                        let fragment = self.fragment(index)?;
                        copy_overlap(&mut out, start, &fragment.bytes, index * FRAGMENT);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Writes `data` at `offset`, growing the string with zeros as needed.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Error> {
        let new_len = self.len().max(offset + data.len() as u64);
        if let Repr::Inline(value) = &mut self.repr {
            if new_len <= INLINE_LIMIT {
                value.resize(new_len as usize, 0);
                value[offset as usize..offset as usize + data.len()].copy_from_slice(data);
                return Ok(());
            }
            self.move_to_fragments()?;
        }
        let end = offset + data.len() as u64;
        if let Repr::Fragmented { len, .. } = &mut self.repr {
            *len = new_len;
        }
        if data.is_empty() {
            return Ok(());
        }
        for index in offset / FRAGMENT..=(end - 1) / FRAGMENT {
            let base = index * FRAGMENT;
            let (from, to) = (offset.max(base), end.min(base + FRAGMENT));
            let span = (from - base) as usize..(to - base) as usize;
            let fragment = self.fragment(index)?;
            if fragment.bytes.len() < span.end {
                fragment.bytes.resize(span.end, 0);
            }
            fragment.bytes[span.clone()]
                .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
            fragment.touch(span);
        }
        Ok(())
    }

    /// Makes the string `value`, keeping its expiry. A string in fragments that keeps its
    /// length writes only the bytes that differ, fragment by fragment (a PFADD changes a
    /// register and the cached count of a 12 KB HLL); otherwise the value is written whole.
    pub fn replace(&mut self, value: &[u8]) -> Result<(), Error> {
        if matches!(self.repr, Repr::Fragmented { len, .. } if len == value.len() as u64) {
            for (index, chunk) in value.chunks(FRAGMENT as usize).enumerate() {
                let index = index as u64;
                let fragment = self.fragment(index)?;
                let old = &fragment.bytes;
                let differs = |i: &usize| old.get(*i) != chunk.get(*i);
                let Some(first) = (0..chunk.len()).find(differs) else {
                    continue;
                };
                let last = (0..chunk.len()).rev().find(differs).unwrap_or(first);
                self.write(index * FRAGMENT + first as u64, &chunk[first..=last])?;
            }
            return Ok(());
        }
        self.repr = Repr::Inline(BytesMut::from(value));
        if value.len() as u64 > INLINE_LIMIT {
            self.move_to_fragments()?;
        }
        Ok(())
    }

    /// Moves an inline value into fragments under a fresh version.
    fn move_to_fragments(&mut self) -> Result<(), Error> {
        let Repr::Inline(value) = &self.repr else {
            return Ok(());
        };
        let mut dirty = BTreeMap::new();
        for (index, chunk) in value.chunks(FRAGMENT as usize).enumerate() {
            let fragment = Fragment {
                bytes: chunk.to_vec(),
                changed: Changed::Whole,
            };
            dirty.insert(index as u64, fragment);
        }
        let len = value.len() as u64;
        self.repr = Repr::Fragmented {
            version: self.db.ks.versions.next()?,
            len,
            dirty,
        };
        Ok(())
    }

    /// Writes the changed fragments and the metadata in one batch; an empty string that did
    /// not exist is not created.
    pub fn commit(self) -> Result<(), Error> {
        let mut change = Change::default();
        let db = self.db;
        if self.len() == 0 && !self.existed && !self.create_empty {
            // Nothing to create; a replaced key (BITOP's destination) is deleted.
            if self.stored.is_some() {
                db.stage_replace(&mut change, self.key, self.stored.as_ref(), None)?;
                db.write(change)?;
            }
            return Ok(());
        }
        let new = match self.repr {
            Repr::Inline(value) => Metadata::string(value.freeze(), self.expire_at),
            Repr::Fragmented {
                version,
                len,
                dirty,
            } => {
                for (index, fragment) in dirty {
                    let key = shale_storage::keys::element_key(
                        db.index,
                        self.key,
                        version,
                        &fragment_suffix(index),
                    );
                    match fragment.changed {
                        Changed::Nothing => {}
                        Changed::Span(span) if span.len() <= PATCH_LIMIT => {
                            change
                                .batch
                                .patch(key, span.start as u32, &fragment.bytes[span]);
                        }
                        Changed::Span(_) | Changed::Whole => {
                            change.batch.put(Cf::Data, key, fragment.bytes);
                        }
                    }
                }
                Metadata {
                    kind: KeyKind::String,
                    expire_at: self.expire_at,
                    body: Body::Collection {
                        version,
                        size: len,
                        extra: Bytes::new(),
                    },
                }
            }
        };
        // Metadata that a change of fragments leaves as it was (a SETBIT within the string)
        // is not written again; a write that changes nothing still writes it, as before.
        let unchanged = self.existed && self.stored.as_ref() == Some(&new);
        if !unchanged || change.batch.is_empty() {
            db.stage_replace(&mut change, self.key, self.stored.as_ref(), Some(&new))?;
        }
        db.write(change)
    }
}

#[cfg(test)]
mod tests {
    use super::copy_overlap;

    #[test]
    fn overlaps_copy_only_the_shared_part() {
        let mut dst = [0u8; 4];
        copy_overlap(&mut dst, 10, b"abcdef", 8);
        assert_eq!(&dst, b"cdef");
        let mut dst = [0u8; 4];
        copy_overlap(&mut dst, 10, b"xy", 12);
        assert_eq!(&dst, b"\0\0xy");
        let mut dst = [0u8; 2];
        copy_overlap(&mut dst, 0, b"zz", 5);
        assert_eq!(&dst, b"\0\0");
    }
}
