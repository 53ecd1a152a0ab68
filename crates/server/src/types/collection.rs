//! What every collection type shares: opening a collection for a read or a write, element
//! keys under the collection's `key|version` prefix, small collections' elements packed in
//! their metadata instead (read and written here, so no command sees the difference), and
//! committing the new metadata.

use bytes::{Bytes, BytesMut};
use shale_storage::keys as k;
use shale_storage::metadata::{Body, KeyKind, Metadata};
use shale_storage::{Cf, ScanDirection, StorageError};

use super::packed_elements::{self, PackedEdit, PACKED_LIMIT, PACKED_MAX_ELEMENTS};
use crate::error::Error;
use crate::keyspace::{now_ms, Change, Db};

/// A point read of element `sub` in `cf` of a packed collection. A packed sorted set's
/// score-index entry `score · member` is there if the member has that score.
fn packed_lookup(packed: &[u8], cf: Cf, sub: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    let find = |sub: &[u8]| packed_elements::find(packed, sub).ok_or_else(corrupt_packing);
    if cf != Cf::Score {
        return Ok(find(sub)?.map(<[u8]>::to_vec));
    }
    let member = sub.get(8..).unwrap_or_default();
    let score = find(member)?;
    Ok(score
        .filter(|score| k::score_suffix(k::score_of_value(score), member) == sub)
        .map(|_| Vec::new()))
}

fn corrupt_packing() -> Error {
    Error::Storage(StorageError::Corrupt("packed collection elements"))
}

/// The most a [`ScanBuffer`] reserves ahead of what it holds.
const RESERVE_LIMIT: usize = 1 << 20;

/// Byte strings read by one scan, copied into one buffer that they then share: one allocation
/// for all of them instead of one each (LRANGE 0 99 reads 100 values per command).
#[derive(Default)]
pub(crate) struct ScanBuffer {
    bytes: BytesMut,
    ends: Vec<usize>,
}

impl ScanBuffer {
    /// A buffer for `items` strings, sized at the first push as if all were as long as it
    /// (a list's elements usually are alike), up to 1 MiB, instead of growing by doubling.
    pub fn for_items(items: usize) -> Self {
        ScanBuffer {
            bytes: BytesMut::new(),
            ends: Vec::with_capacity(items),
        }
    }

    pub fn push(&mut self, item: &[u8]) {
        if self.ends.is_empty() {
            let expected = item.len().saturating_mul(self.ends.capacity());
            self.bytes
                .reserve(expected.min(RESERVE_LIMIT).max(item.len()));
        }
        self.bytes.extend_from_slice(item);
        self.ends.push(self.bytes.len());
    }

    /// The buffer and the offset where each pushed string ends in it.
    pub fn into_parts(self) -> (Bytes, Vec<usize>) {
        (self.bytes.freeze(), self.ends)
    }

    /// The pushed strings, in order.
    pub fn into_items(self) -> impl Iterator<Item = Bytes> {
        let all = self.bytes.freeze();
        let mut start = 0;
        self.ends.into_iter().map(move |end| {
            let item = all.slice(start..end);
            start = end;
            item
        })
    }

    /// The pushed strings, taken as (first, second) pairs.
    pub fn into_pairs(self) -> Vec<(Bytes, Bytes)> {
        let mut items = self.into_items();
        std::iter::from_fn(|| Some((items.next()?, items.next()?))).collect()
    }
}

/// A live collection, as a read sees it.
#[derive(Debug, Clone)]
pub(crate) struct Collection {
    pub version: u64,
    pub size: u64,
    pub extra: Bytes,
    /// The elements packed in `extra` (of a small hash, set, sorted set or list), `None` if
    /// they are records.
    pub packed: Option<Bytes>,
}

impl Collection {
    /// The collection `meta` describes, `None` if it is not one.
    pub fn of(meta: Metadata) -> Option<Collection> {
        match meta.body {
            Body::Collection {
                version,
                size,
                extra,
            } => Some(Collection {
                version,
                size,
                packed: meta.kind.packed_part(&extra),
                extra,
            }),
            Body::Inline(_) => None,
        }
    }
}

/// A collection opened for writing under its key lock: the current state (or a fresh, empty
/// version if the key does not exist), the pending changes, and what is stored now.
pub(crate) struct CollectionWrite<'a> {
    db: Db<'a>,
    key: &'a [u8],
    kind: KeyKind,
    stored: Option<Metadata>,
    expire_at: u64,
    pub existed: bool,
    pub version: u64,
    pub size: u64,
    /// The type's own bytes (a list's head, tail and shift byte, a Roaring bitmap's packed
    /// containers); `stage` puts the packed elements, if any, after them.
    pub extra: Bytes,
    pub change: Change,
    /// `Some` while the elements are packed: changes go to it, and `stage` packs them.
    packed: Option<PackedEdit>,
}

impl<'a> Db<'a> {
    /// The live collection at `key`, `None` if missing, `WRONGTYPE` if another type.
    pub(crate) fn collection(
        &self,
        key: &[u8],
        kind: KeyKind,
    ) -> Result<Option<Collection>, Error> {
        Ok(self.typed_meta(key, kind)?.and_then(Collection::of))
    }

    /// Opens `key` for a write; the caller holds its lock. A missing (or expired) key becomes
    /// an empty collection with a fresh version, which `commit` creates if it gains elements.
    pub(crate) fn open_for_write(
        &self,
        key: &'a [u8],
        kind: KeyKind,
    ) -> Result<CollectionWrite<'a>, Error> {
        let stored = self.raw_meta(key)?;
        let live = stored.as_ref().filter(|m| !m.is_expired(now_ms()));
        let (existed, version, size, extra, expire_at) = match live {
            Some(meta) if meta.kind != kind => return Err(Error::WrongType),
            Some(Metadata {
                body:
                    Body::Collection {
                        version,
                        size,
                        extra,
                    },
                expire_at,
                ..
            }) => (true, *version, *size, extra.clone(), *expire_at),
            Some(_) => return Err(Error::WrongType),
            None => (false, self.ks.versions.next()?, 0, Bytes::new(), 0),
        };
        // A new hash, set, sorted set or list starts packed; a stored one is packed if its
        // extra field holds elements.
        let packed = match kind.packed_part(&extra) {
            Some(packed) => Some(PackedEdit::open(packed).ok_or_else(corrupt_packing)?),
            None if !existed && kind.packs_elements() => Some(PackedEdit::empty()),
            None => None,
        };
        Ok(CollectionWrite {
            db: *self,
            key,
            kind,
            stored,
            expire_at,
            existed,
            version,
            size,
            extra,
            change: Change::default(),
            packed,
        })
    }

    /// Replaces whatever `key` holds (any type) with a new collection of `kind` expiring at
    /// `expire_at` (Unix ms, 0 for never), whose elements `fill` stages; an empty result
    /// deletes the key. The caller holds the key's lock.
    pub(crate) fn replace_with_collection(
        &self,
        key: &'a [u8],
        kind: KeyKind,
        expire_at: u64,
        fill: impl FnOnce(&mut CollectionWrite<'a>),
    ) -> Result<(), Error> {
        let mut write = self.fresh_write(key, kind, self.ks.versions.next()?)?;
        write.expire_at = expire_at;
        if kind.packs_elements() {
            write.packed = Some(PackedEdit::empty());
        }
        fill(&mut write);
        write.commit()
    }

    /// An empty collection under `version` that will replace whatever `key` holds, its
    /// elements records.
    fn fresh_write(
        &self,
        key: &'a [u8],
        kind: KeyKind,
        version: u64,
    ) -> Result<CollectionWrite<'a>, Error> {
        Ok(CollectionWrite {
            db: *self,
            key,
            kind,
            stored: self.raw_meta(key)?,
            expire_at: 0,
            existed: false,
            version,
            size: 0,
            extra: Bytes::new(),
            change: Change::default(),
            packed: None,
        })
    }

    /// Points `key` at a collection whose elements were already written under `version`
    /// (by a command too large for one batch), replacing whatever it held.
    pub(crate) fn replace_with_version(
        &self,
        key: &'a [u8],
        kind: KeyKind,
        version: u64,
        size: u64,
    ) -> Result<(), Error> {
        let mut write = self.fresh_write(key, kind, version)?;
        write.size = size;
        write.commit()
    }

    /// Visits the elements of `collection` in `cf` within `bounds` (suffixes after the
    /// prefix, the upper one excluded; empty and `None` for all) in `direction`; `visit` gets
    /// the suffix and the value and returns whether to go on. A packed collection is read
    /// from its metadata (a sorted set's score index derived from its members).
    pub(crate) fn scan_elements(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
        bounds: (&[u8], Option<&[u8]>),
        direction: ScanDirection,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let Some(packed) = &collection.packed else {
            return self.scan_records(cf, key, collection.version, bounds, direction, visit);
        };
        let (lower, upper) = bounds;
        let below = |sub: &[u8]| !lower.is_empty() && sub < lower;
        let past = |sub: &[u8]| upper.is_some_and(|end| sub >= end);
        if cf != Cf::Score && direction == ScanDirection::Forward {
            // The common case, straight from the packed bytes.
            for entry in packed_elements::entries(packed) {
                let (sub, value) = entry.ok_or_else(corrupt_packing)?;
                if below(sub) {
                    continue;
                }
                if past(sub) || !visit(sub, value) {
                    break;
                }
            }
            return Ok(());
        }
        if cf == Cf::Score {
            // The index a packed sorted set derives from its members: score bytes, then
            // member, so sorting the pairs sorts the suffixes.
            let mut index = packed_elements::entries(packed)
                .map(|entry| {
                    let (member, score) = entry.ok_or_else(corrupt_packing)?;
                    Ok((k::score_bytes(k::score_of_value(score)), member))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            index.sort_unstable();
            if direction == ScanDirection::Reverse {
                index.reverse();
            }
            let mut sub = Vec::new();
            for (score, member) in index {
                sub.clear();
                sub.extend_from_slice(&score);
                sub.extend_from_slice(member);
                if !below(&sub) && !past(&sub) && !visit(&sub, &[]) {
                    break;
                }
            }
            return Ok(());
        }
        // What is left is a reverse scan of the packed elements.
        let mut within: Vec<(&[u8], &[u8])> = Vec::new();
        for entry in packed_elements::entries(packed) {
            let (sub, value) = entry.ok_or_else(corrupt_packing)?;
            if !below(sub) && !past(sub) {
                within.push((sub, value));
            }
        }
        for (sub, value) in within.into_iter().rev() {
            if !visit(sub, value) {
                break;
            }
        }
        Ok(())
    }

    /// [`Db::scan_elements`] over the element records of one collection version.
    pub(crate) fn scan_records(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        bounds: (&[u8], Option<&[u8]>),
        direction: ScanDirection,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), Error> {
        let prefix = k::element_prefix(self.index, key, version);
        let mut lower = prefix.clone();
        lower.extend_from_slice(bounds.0);
        let upper = match bounds.1 {
            Some(end) => [prefix.as_slice(), end].concat(),
            None => k::prefix_end(&prefix),
        };
        let skip = prefix.len();
        self.engine()
            .scan(cf, &lower, &upper, direction, &mut |raw, value| {
                visit(&raw[skip..], value)
            })?;
        Ok(())
    }

    /// Every element of `collection` in `cf`, as (suffix, value) pairs.
    pub(crate) fn all_elements(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
    ) -> Result<Vec<(Bytes, Bytes)>, Error> {
        Ok(self.all_elements_read(cf, key, collection)?.into_pairs())
    }

    /// Every element of `collection` in `cf`, suffix and value after each other.
    pub(crate) fn all_elements_read(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
    ) -> Result<ScanBuffer, Error> {
        let mut read = ScanBuffer::default();
        self.scan_elements(
            cf,
            key,
            collection,
            (&[], None),
            ScanDirection::Forward,
            &mut |sub, value| {
                read.push(sub);
                read.push(value);
                true
            },
        )?;
        Ok(read)
    }

    /// Point reads of several elements of `collection`.
    pub(crate) fn get_elements(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
        subs: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, Error> {
        let Some(packed) = &collection.packed else {
            return self.get_records(cf, key, collection.version, subs);
        };
        subs.iter()
            .map(|sub| packed_lookup(packed, cf, sub))
            .collect()
    }

    pub(crate) fn get_element(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
        sub: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .get_elements(cf, key, collection, &[sub])?
            .pop()
            .flatten())
    }

    /// Point reads of several element records of one collection version.
    pub(crate) fn get_records(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        subs: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, Error> {
        let prefix = k::element_prefix(self.index, key, version);
        let raw: Vec<Vec<u8>> = subs.iter().map(|sub| [&prefix, *sub].concat()).collect();
        Ok(self.engine().multi_get(cf, &raw)?)
    }

    pub(crate) fn get_record(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        sub: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .engine()
            .get(cf, &k::element_key(self.index, key, version, sub))?)
    }
}

/// One page of an HSCAN/SSCAN/ZSCAN: the items, and the element to resume after if more
/// remain.
pub struct Page<T> {
    pub items: Vec<T>,
    pub resume: Option<Bytes>,
}

impl<T> Default for Page<T> {
    fn default() -> Self {
        Page {
            items: Vec::new(),
            resume: None,
        }
    }
}

impl Db<'_> {
    /// Up to `count` elements after `after`, and the last one returned if more remain.
    pub(crate) fn scan_page(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
        after: Option<&[u8]>,
        count: usize,
    ) -> Result<Page<(Bytes, Bytes)>, Error> {
        let start = after.map(|a| [a, &[0u8][..]].concat()).unwrap_or_default();
        let mut page = Vec::new();
        let mut more = false;
        self.scan_elements(
            cf,
            key,
            collection,
            (&start, None),
            ScanDirection::Forward,
            &mut |sub, value| {
                if page.len() == count {
                    more = true;
                    return false;
                }
                page.push((Bytes::copy_from_slice(sub), Bytes::copy_from_slice(value)));
                true
            },
        )?;
        let resume = if more {
            page.last().map(|(sub, _)| sub.clone())
        } else {
            None
        };
        Ok(Page {
            items: page,
            resume,
        })
    }

    /// The element an HSCAN/SSCAN/ZSCAN cursor of `key` resumes after; a cursor that was
    /// forgotten (or belongs to another key) starts over, which SCAN's contract allows.
    pub fn element_cursor(&self, key: &[u8], cursor: u64) -> Option<Bytes> {
        if cursor == 0 {
            return None;
        }
        self.ks
            .cursors
            .load(cursor, &self.cursor_scope(key))
            .map(Bytes::from)
    }

    /// A cursor that resumes after `position` in `key`'s elements.
    pub fn save_element_cursor(&self, key: &[u8], position: &[u8]) -> u64 {
        self.ks
            .cursors
            .store(self.cursor_scope(key), position.to_vec())
    }

    fn cursor_scope(&self, key: &[u8]) -> Vec<u8> {
        [&[b'e', self.index][..], key].concat()
    }
}

impl CollectionWrite<'_> {
    /// The collection as a read would see it, pending changes aside.
    pub fn collection(&self) -> Collection {
        Collection {
            version: self.version,
            size: self.size,
            extra: self.extra.clone(),
            packed: self.kind.packed_part(&self.extra),
        }
    }

    pub fn element_key(&self, sub: &[u8]) -> Vec<u8> {
        k::element_key(self.db.index, self.key, self.version, sub)
    }

    /// The packed elements this write changes, if they are packed and `cf` is theirs.
    fn packed_in(&mut self, cf: Cf) -> Option<&mut PackedEdit> {
        self.packed.as_mut().filter(|_| cf == Cf::Data)
    }

    /// Whether a change to `cf` is already part of the packed elements: a packed sorted set
    /// has no score index of its own to change.
    fn derived(&self, cf: Cf) -> bool {
        self.packed.is_some() && cf == Cf::Score
    }

    pub fn get(&self, cf: Cf, sub: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.get_many(cf, &[sub])?.pop().flatten())
    }

    /// Point reads of the collection as stored, this write's changes aside, whichever its
    /// layout (so a command reads the same on either side of the move to records).
    pub fn get_many(&self, cf: Cf, subs: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        if !self.existed {
            return Ok(vec![None; subs.len()]);
        }
        self.db.get_elements(cf, self.key, &self.collection(), subs)
    }

    pub fn put(&mut self, cf: Cf, sub: &[u8], value: Vec<u8>) {
        if let Some(packed) = self.packed_in(cf) {
            packed.set(sub, Some(Bytes::from(value)));
            if packed.len() > PACKED_LIMIT || packed.count() > PACKED_MAX_ELEMENTS {
                self.unpack();
            }
            return;
        }
        if self.derived(cf) {
            return;
        }
        let key = self.element_key(sub);
        self.change.batch.put(cf, key, value);
    }

    pub fn delete(&mut self, cf: Cf, sub: &[u8]) {
        if let Some(packed) = self.packed_in(cf) {
            packed.set(sub, None);
            return;
        }
        if self.derived(cf) {
            return;
        }
        let key = self.element_key(sub);
        self.change.batch.delete(cf, key);
    }

    /// Deletes the elements in `[start, end)` of this version's suffixes in `cf`.
    pub fn delete_range(&mut self, cf: Cf, start: &[u8], end: &[u8]) {
        if let Some(packed) = self.packed_in(cf) {
            let doomed: Vec<Vec<u8>> = packed
                .elements()
                .into_iter()
                .filter(|(sub, _)| start <= *sub && *sub < end)
                .map(|(sub, _)| sub.to_vec())
                .collect();
            for sub in doomed {
                packed.set(&sub, None);
            }
            return;
        }
        if self.derived(cf) {
            return;
        }
        let (from, to) = (self.element_key(start), self.element_key(end));
        self.change.batch.delete_range(cf, from, to);
    }

    /// Moves packed elements that outgrew the packed form into records of their own, under
    /// the same version; the collection stays that way.
    fn unpack(&mut self) {
        let Some(packed) = self.packed.take() else {
            return;
        };
        for (sub, value) in packed.elements() {
            if self.kind == KeyKind::ZSet {
                let index = k::score_suffix(k::score_of_value(value), sub);
                let key = self.element_key(&index);
                self.change.batch.put(Cf::Score, key, Vec::new());
            }
            let key = self.element_key(sub);
            self.change.batch.put(Cf::Data, key, value.to_vec());
        }
    }

    /// Writes the new metadata (or deletes the key if it has no elements left) and the staged
    /// element changes in one batch.
    pub fn commit(self) -> Result<(), Error> {
        let db = self.db;
        db.write(self.stage()?)
    }

    /// Stages the new metadata with the element changes and returns them unwritten, for
    /// commands that change several keys in one batch.
    pub fn stage(mut self) -> Result<Change, Error> {
        if self.kind.packs_elements() {
            // A type's own bytes are zeros until it sets them (a new sorted set's floor).
            let own_len = self.kind.own_extra_len();
            let mut own = self.extra[..own_len.min(self.extra.len())].to_vec();
            own.resize(own_len, 0);
            self.extra = match &self.packed {
                Some(packed) => packed.pack_after(&own).into(),
                None => own.into(),
            };
        }
        let new = (self.size > 0 || self.kind.exists_empty()).then(|| Metadata {
            kind: self.kind,
            expire_at: self.expire_at,
            body: Body::Collection {
                version: self.version,
                size: self.size,
                extra: self.extra.clone(),
            },
        });
        if new.is_some() || self.stored.is_some() {
            self.db.stage_replace(
                &mut self.change,
                self.key,
                self.stored.as_ref(),
                new.as_ref(),
            )?;
        }
        Ok(self.change)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_buffer_reserves_for_its_window_but_at_most_a_mebibyte() {
        let mut small = ScanBuffer::for_items(100);
        small.push(&[7; 128]);
        assert!(small.bytes.capacity() >= 128 * 100);
        // A first element of 2 MiB in a window of 1,024 must not reserve 2 GiB.
        let mut large = ScanBuffer::for_items(1024);
        large.push(&vec![7; 2 << 20]);
        assert!(large.bytes.capacity() < 4 << 20);
        assert_eq!(
            large.into_items().next().map(|item| item.len()),
            Some(2 << 20)
        );
    }

    #[test]
    fn scan_buffer_hands_back_what_was_pushed_in_order() {
        let mut read = ScanBuffer::default();
        for item in [&b"a"[..], b"", b"bcd", b"e"] {
            read.push(item);
        }
        let pairs = read.into_pairs();
        let b = Bytes::from_static;
        assert_eq!(pairs, [(b(b"a"), b(b"")), (b(b"bcd"), b(b"e"))]);
    }
}
