//! What every collection type shares: opening a collection for a read or a write, element
//! keys under the collection's `key|version` prefix, and committing the new metadata.

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::Rng;
use shale_storage::keys as k;
use shale_storage::metadata::{Body, KeyKind, Metadata};
use shale_storage::{Cf, ScanDirection};

use super::{now_ms, Change, Db};
use crate::error::Error;

/// A live collection, as a read sees it.
#[derive(Debug, Clone)]
pub(crate) struct Collection {
    pub version: u64,
    pub size: u64,
    pub extra: Bytes,
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
    pub extra: Bytes,
    pub change: Change,
}

impl<'a> Db<'a> {
    /// The live collection at `key`, `None` if missing, `WRONGTYPE` if another type.
    pub(crate) fn collection(
        &self,
        key: &[u8],
        kind: KeyKind,
    ) -> Result<Option<Collection>, Error> {
        Ok(self
            .typed_meta(key, kind)?
            .and_then(|meta| match meta.body {
                Body::Collection {
                    version,
                    size,
                    extra,
                } => Some(Collection {
                    version,
                    size,
                    extra,
                }),
                Body::Inline(_) => None,
            }))
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
        })
    }

    /// Replaces whatever `key` holds (any type) with a new collection of `kind`, whose elements
    /// `fill` stages; an empty result deletes the key. The caller holds the key's lock.
    pub(crate) fn replace_with_collection(
        &self,
        key: &'a [u8],
        kind: KeyKind,
        fill: impl FnOnce(&mut CollectionWrite<'a>),
    ) -> Result<(), Error> {
        let mut write = self.fresh_write(key, kind, self.ks.versions.next()?)?;
        fill(&mut write);
        write.commit()
    }

    /// An empty collection under `version` that will replace whatever `key` holds.
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

    /// Visits the elements of one collection version in `cf` from `start` (a suffix after the
    /// prefix; empty for the beginning) in `direction`; `visit` gets the suffix and the value.
    pub(crate) fn scan_elements(
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

    /// Every element of a collection version in `cf`, as (suffix, value) pairs.
    pub(crate) fn all_elements(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
    ) -> Result<Vec<(Bytes, Bytes)>, Error> {
        let mut out = Vec::new();
        self.scan_elements(
            cf,
            key,
            version,
            (&[], None),
            ScanDirection::Forward,
            &mut |sub, value| {
                out.push((Bytes::copy_from_slice(sub), Bytes::copy_from_slice(value)));
                true
            },
        )?;
        Ok(out)
    }

    /// Point reads of several elements of one version.
    pub(crate) fn get_elements(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        subs: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, Error> {
        let raw: Vec<Vec<u8>> = subs
            .iter()
            .map(|s| k::element_key(self.index, key, version, s))
            .collect();
        Ok(self.engine().multi_get(cf, &raw)?)
    }

    pub(crate) fn get_element(
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

/// A random key between `first` and `last`: their common prefix, then at each later position
/// a byte drawn between theirs. Probes spread over the key space the members occupy (for
/// `member:000123`-style keys, uniformly over the numbers), so they do not pile up where
/// earlier pops left tombstones.
fn random_probe(first: &[u8], last: &[u8], rng: &mut impl Rng) -> Vec<u8> {
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let mut probe = first[..common].to_vec();
    for i in common..first.len().max(last.len()) {
        let a = first.get(i).copied().unwrap_or(0);
        let b = last.get(i).copied().unwrap_or(u8::MAX);
        probe.push(rng.random_range(a.min(b)..=a.max(b)));
    }
    probe
}

/// Per (db, key, version): the first and last element and how often they were used.
pub(crate) type SampleBounds = std::collections::HashMap<(u8, Bytes, u64), (Bytes, Bytes, u32)>;

/// Sample bounds are recomputed after this many uses, and at most this many are remembered.
const SAMPLE_BOUNDS_REUSE: u32 = 1024;
const SAMPLE_BOUNDS_ENTRIES: usize = 4096;

/// Collections up to this size are sampled uniformly from a full read; larger ones by random
/// seeks, which favours elements after gaps in the key space but reads only what it returns.
const FULL_SAMPLE_LIMIT: u64 = 128;

impl Db<'_> {
    /// Random elements with Redis's rules: a positive `count` gives distinct elements (all of
    /// them when it exceeds the size), a negative one may repeat.
    pub(crate) fn random_elements(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
        count: i64,
    ) -> Result<Vec<(Bytes, Bytes)>, Error> {
        let mut rng = rand::rng();
        let wanted = count.unsigned_abs();
        if collection.size <= FULL_SAMPLE_LIMIT || (count > 0 && wanted >= collection.size) {
            let mut all = self.all_elements(cf, key, collection.version)?;
            if all.is_empty() {
                return Ok(all);
            }
            if count >= 0 {
                all.shuffle(&mut rng);
                all.truncate(wanted as usize);
                return Ok(all);
            }
            return Ok((0..wanted)
                .map(|_| all[rng.random_range(0..all.len())].clone())
                .collect());
        }
        let version = collection.version;
        let Some((first, last)) = self.sample_bounds(cf, key, version)? else {
            return Ok(Vec::new());
        };
        let mut picked: Vec<(Bytes, Bytes)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut attempts = 0;
        while (picked.len() as u64) < wanted && attempts < wanted * 4 + 16 {
            attempts += 1;
            let probe = random_probe(&first, &last, &mut rng);
            let Some(element) = self.first_element_from(cf, key, version, &probe)? else {
                continue;
            };
            if count < 0 || seen.insert(element.0.clone()) {
                picked.push(element);
            }
        }
        if (picked.len() as u64) < wanted {
            // Unlucky probes: fill up with the elements that follow the first pick.
            let start = picked
                .first()
                .map(|(sub, _)| sub.to_vec())
                .unwrap_or_default();
            for bounds in [(start.as_slice(), None), (&[][..], Some(start.as_slice()))] {
                self.scan_elements(
                    cf,
                    key,
                    version,
                    bounds,
                    ScanDirection::Forward,
                    &mut |sub, value| {
                        if (picked.len() as u64) >= wanted {
                            return false;
                        }
                        if seen.insert(Bytes::copy_from_slice(sub)) {
                            picked
                                .push((Bytes::copy_from_slice(sub), Bytes::copy_from_slice(value)));
                        }
                        true
                    },
                )?;
            }
        }
        Ok(picked)
    }

    /// The first and last element of a collection, remembered for a while: finding the last
    /// one walks backwards over the tombstones of earlier pops, and backward steps in a
    /// memtable cost a skiplist search each. Stale bounds only narrow the sample until the
    /// next refresh.
    fn sample_bounds(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
    ) -> Result<Option<(Bytes, Bytes)>, Error> {
        let cache_key = (self.index, Bytes::copy_from_slice(key), version);
        if let Some(bounds) = self.ks.sample_bounds.lock().get_mut(&cache_key) {
            bounds.2 += 1;
            if bounds.2 < SAMPLE_BOUNDS_REUSE {
                return Ok(Some((bounds.0.clone(), bounds.1.clone())));
            }
        }
        let (Some(first), Some(last)) = (
            self.edge_element(cf, key, version, ScanDirection::Forward)?,
            self.edge_element(cf, key, version, ScanDirection::Reverse)?,
        ) else {
            return Ok(None);
        };
        let mut cache = self.ks.sample_bounds.lock();
        if cache.len() >= SAMPLE_BOUNDS_ENTRIES {
            cache.clear();
        }
        cache.insert(cache_key, (first.clone(), last.clone(), 0));
        Ok(Some((first, last)))
    }

    /// The suffix of the first (or last) element.
    fn edge_element(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        direction: ScanDirection,
    ) -> Result<Option<Bytes>, Error> {
        let mut found = None;
        self.scan_elements(cf, key, version, (&[], None), direction, &mut |sub, _| {
            found = Some(Bytes::copy_from_slice(sub));
            false
        })?;
        Ok(found)
    }

    /// The first element at or after `probe`, wrapping around to the first one.
    fn first_element_from(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        probe: &[u8],
    ) -> Result<Option<(Bytes, Bytes)>, Error> {
        for start in [probe, &[][..]] {
            let mut found = None;
            self.scan_elements(
                cf,
                key,
                version,
                (start, None),
                ScanDirection::Forward,
                &mut |sub, value| {
                    found = Some((Bytes::copy_from_slice(sub), Bytes::copy_from_slice(value)));
                    false
                },
            )?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
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
        version: u64,
        after: Option<&[u8]>,
        count: usize,
    ) -> Result<Page<(Bytes, Bytes)>, Error> {
        let start = after.map(|a| [a, &[0u8][..]].concat()).unwrap_or_default();
        let mut page = Vec::new();
        let mut more = false;
        self.scan_elements(
            cf,
            key,
            version,
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
    pub fn element_key(&self, sub: &[u8]) -> Vec<u8> {
        k::element_key(self.db.index, self.key, self.version, sub)
    }

    pub fn get(&self, cf: Cf, sub: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        if !self.existed {
            return Ok(None);
        }
        self.db.get_element(cf, self.key, self.version, sub)
    }

    pub fn get_many(&self, cf: Cf, subs: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        if !self.existed {
            return Ok(vec![None; subs.len()]);
        }
        self.db.get_elements(cf, self.key, self.version, subs)
    }

    pub fn put(&mut self, cf: Cf, sub: &[u8], value: Vec<u8>) {
        let key = self.element_key(sub);
        self.change.batch.put(cf, key, value);
    }

    pub fn delete(&mut self, cf: Cf, sub: &[u8]) {
        let key = self.element_key(sub);
        self.change.batch.delete(cf, key);
    }

    /// Deletes the elements in `[start, end)` of this version's suffixes in `cf`.
    pub fn delete_range(&mut self, cf: Cf, start: &[u8], end: &[u8]) {
        let (from, to) = (self.element_key(start), self.element_key(end));
        self.change.batch.delete_range(cf, from, to);
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
        let new = (self.size > 0).then(|| Metadata {
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
