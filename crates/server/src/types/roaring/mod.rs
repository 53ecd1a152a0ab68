//! Roaring bitmaps (Tair's TairRoaring): one record per 2^16-bit container,
//! `key|version|high16 → serialized container`. A single-bit command reads and writes one
//! small record however large the bitmap; set algebra streams container by container.
//!
//! A container is stored as a `roaring::RoaringBitmap` holding only the low 16 bits of its
//! values, in the crate's portable serialization. Small bitmaps keep their containers packed
//! in the metadata instead (`types/packed_containers.rs`); a bitmap leaves that form for good when it
//! outgrows it.

mod portable;

use std::collections::btree_map::Entry;
use std::collections::BTreeSet;

use bytes::Bytes;
use roaring::RoaringBitmap;
use shale_storage::metadata::KeyKind;
use shale_storage::{Cf, ScanDirection};

use super::collection::{Collection, CollectionWrite};
use super::packed_containers::{self, Containers, Packed, PACKED_LIMIT};
use crate::error::Error;
use crate::keyspace::Db;
use portable::{container_contains, decode, encode};

/// Output containers of TR.BITOP are written in batches of about this many bytes, so a result
/// never has to be in memory whole.
const BITOP_BATCH_BYTES: usize = 16 << 20;

/// TR.BITOP and TR.BITOPCARD operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Diff,
    Not,
}

/// The figures of TR.STAT.
#[derive(Debug, Default, Clone)]
pub struct RoaringStat {
    pub cardinality: u64,
    pub containers: u64,
    pub max: Option<u32>,
    pub min: Option<u32>,
    pub sum: u128,
    /// Per kind (array, bitset, run): containers, values, bytes.
    pub kinds: [(u64, u64, u64); 3],
}

fn split(offset: u32) -> (u16, u32) {
    ((offset >> 16) as u16, offset & 0xFFFF)
}

fn join(high: u16, low: u32) -> u32 {
    (high as u32) << 16 | low
}

/// The part of container `high` that falls within `[start, end]`, as low 16-bit values.
fn low_bounds(high: u16, start: u32, end: u32) -> std::ops::RangeInclusive<u32> {
    (join(high, 0).max(start) & 0xFFFF)..=(join(high, 0xFFFF).min(end) & 0xFFFF)
}

fn high_of(sub: &[u8]) -> u16 {
    sub.try_into().map_or(0, u16::from_be_bytes)
}

/// The containers packed in a bitmap's metadata, `None` if they are records of their own.
fn packed_in(extra: &Bytes) -> Result<Option<Packed>, Error> {
    if extra.is_empty() {
        return Ok(None);
    }
    Packed::parse(extra.clone()).map(Some).ok_or(Error::Storage(
        shale_storage::StorageError::Corrupt("packed roaring containers"),
    ))
}

/// Stages `containers` as a bitmap's content: packed in its metadata if they fit, else one
/// record each. Only for a version that has no container records yet.
fn store_containers(write: &mut CollectionWrite<'_>, containers: &Containers) {
    match packed_containers::pack(containers) {
        Some(packed) => write.extra = packed.into(),
        None => {
            for (high, container) in containers {
                write.put(Cf::Data, &high.to_be_bytes(), container.to_vec());
            }
            write.extra = Bytes::new();
        }
    }
}

/// A live bitmap as a read sees it.
struct Bitmap {
    collection: Collection,
    packed: Option<Packed>,
}

/// A bitmap opened for writing: containers are read on first use and written at the end.
struct BitmapWrite<'a> {
    inner: CollectionWrite<'a>,
    /// The containers of a packed bitmap (a new bitmap starts packed); `None` if they are
    /// records of their own.
    packed: Option<Packed>,
    dirty: std::collections::BTreeMap<u16, RoaringBitmap>,
    /// Range edits re-pack containers (runs where smaller); single bits leave them as they are.
    repack: bool,
}

impl<'a> BitmapWrite<'a> {
    fn container(&mut self, high: u16) -> Result<&mut RoaringBitmap, Error> {
        let slot = match self.dirty.entry(high) {
            Entry::Occupied(slot) => slot.into_mut(),
            Entry::Vacant(slot) => {
                let loaded = match &self.packed {
                    Some(packed) => packed.get(high).map(|raw| decode(&raw)).transpose()?,
                    None => self
                        .inner
                        .get(Cf::Data, &high.to_be_bytes())?
                        .map(|raw| decode(&raw))
                        .transpose()?,
                };
                slot.insert(loaded.unwrap_or_default())
            }
        };
        Ok(slot)
    }

    /// Sets or clears one bit; returns its previous value.
    fn set(&mut self, offset: u32, on: bool) -> Result<bool, Error> {
        let (high, low) = split(offset);
        let container = self.container(high)?;
        let changed = if on {
            container.insert(low)
        } else {
            container.remove(low)
        };
        let old = if changed { !on } else { on };
        if changed {
            if on {
                self.inner.size += 1;
            } else {
                self.inner.size -= 1;
            }
        }
        Ok(old)
    }

    /// Applies `edit` to every container overlapping `[start, end]`, with the low bounds of
    /// the overlap in that container.
    fn edit_range(
        &mut self,
        start: u32,
        end: u32,
        edit: impl Fn(&mut RoaringBitmap, u32, u32),
    ) -> Result<(), Error> {
        self.repack = true;
        for high in split(start).0..=split(end).0 {
            let low_start = if high == split(start).0 {
                split(start).1
            } else {
                0
            };
            let low_end = if high == split(end).0 {
                split(end).1
            } else {
                0xFFFF
            };
            let container = self.container(high)?;
            let before = container.len();
            edit(container, low_start, low_end);
            let after = container.len();
            self.inner.size = self.inner.size + after - before;
        }
        Ok(())
    }

    fn commit(mut self) -> Result<u64, Error> {
        let repack = self.repack;
        let changed: Vec<(u16, Option<Vec<u8>>)> = std::mem::take(&mut self.dirty)
            .into_iter()
            .map(|(high, mut container)| {
                if repack {
                    container.optimize();
                }
                (high, (!container.is_empty()).then(|| encode(&container)))
            })
            .collect();
        match self.packed.take() {
            Some(packed) => {
                let repacked = packed.with_changes(&changed);
                if repacked.len() <= PACKED_LIMIT {
                    self.inner.extra = repacked.into();
                } else {
                    let outgrown = packed_in(&repacked.into())?.unwrap_or_default();
                    store_containers(&mut self.inner, &outgrown.iter().collect());
                }
            }
            None => {
                for (high, container) in changed {
                    match container {
                        Some(raw) => self.inner.put(Cf::Data, &high.to_be_bytes(), raw),
                        None => self.inner.delete(Cf::Data, &high.to_be_bytes()),
                    }
                }
            }
        }
        let size = self.inner.size;
        self.inner.commit()?;
        Ok(size)
    }
}

impl<'a> Db<'a> {
    fn bitmap_of(&self, key: &[u8]) -> Result<Option<Bitmap>, Error> {
        let Some(collection) = self.collection(key, KeyKind::Roaring)? else {
            return Ok(None);
        };
        let packed = packed_in(&collection.extra)?;
        Ok(Some(Bitmap { collection, packed }))
    }

    fn open_bitmap(&self, key: &'a [u8]) -> Result<BitmapWrite<'a>, Error> {
        let inner = self.open_for_write(key, KeyKind::Roaring)?;
        let packed = if inner.existed {
            packed_in(&inner.extra)?
        } else {
            Some(Packed::default())
        };
        Ok(BitmapWrite {
            inner,
            packed,
            dirty: Default::default(),
            repack: false,
        })
    }

    /// Every container of a bitmap in `[from, to]` (high 16 bits), in `direction`.
    fn containers(
        &self,
        key: &[u8],
        bitmap: &Bitmap,
        range: (u16, u16),
        direction: ScanDirection,
        visit: &mut dyn FnMut(u16, RoaringBitmap) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        if let Some(packed) = &bitmap.packed {
            let mut in_range: Vec<(u16, Bytes)> = packed
                .iter()
                .skip_while(|(high, _)| *high < range.0)
                .take_while(|(high, _)| *high <= range.1)
                .collect();
            if direction == ScanDirection::Reverse {
                in_range.reverse();
            }
            for (high, raw) in in_range {
                if !visit(high, decode(&raw)?)? {
                    break;
                }
            }
            return Ok(());
        }
        let lower = range.0.to_be_bytes();
        let upper = range.1.checked_add(1).map(u16::to_be_bytes);
        let mut failure = None;
        self.scan_elements(
            Cf::Data,
            key,
            &bitmap.collection,
            (&lower, upper.as_ref().map(|u| u.as_slice())),
            direction,
            &mut |sub, raw| match decode(raw).and_then(|c| visit(high_of(sub), c)) {
                Ok(go_on) => go_on,
                Err(err) => {
                    failure = Some(err);
                    false
                }
            },
        )?;
        failure.map_or(Ok(()), Err)
    }

    fn container_of(
        &self,
        key: &[u8],
        bitmap: &Bitmap,
        high: u16,
    ) -> Result<Option<RoaringBitmap>, Error> {
        if let Some(packed) = &bitmap.packed {
            return packed.get(high).map(|raw| decode(&raw)).transpose();
        }
        self.get_element(Cf::Data, key, &bitmap.collection, &high.to_be_bytes())?
            .map(|raw| decode(&raw))
            .transpose()
    }

    pub fn tr_setbit(&self, key: &'a [u8], offset: u32, on: bool) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let mut bitmap = self.open_bitmap(key)?;
        let old = bitmap.set(offset, on)?;
        if old != on {
            bitmap.commit()?;
        }
        Ok(old)
    }

    /// TR.SETBITS (`on`) and TR.CLEARBITS: returns the cardinality after, or with `on` false
    /// the number of bits cleared.
    pub fn tr_setbits(&self, key: &'a [u8], offsets: &[u32], on: bool) -> Result<u64, Error> {
        let _guard = self.lock(&[key])?;
        let mut bitmap = self.open_bitmap(key)?;
        if !on && !bitmap.inner.existed {
            return Ok(0);
        }
        let mut changed = 0;
        for &offset in offsets {
            changed += (bitmap.set(offset, on)? != on) as u64;
        }
        let size = bitmap.commit()?;
        Ok(if on { size } else { changed })
    }

    /// TR.SETRANGE (`flip` false) and TR.FLIPRANGE: returns the cardinality after.
    pub fn tr_range_update(
        &self,
        key: &'a [u8],
        start: u32,
        end: u32,
        flip: bool,
    ) -> Result<u64, Error> {
        let _guard = self.lock(&[key])?;
        let mut bitmap = self.open_bitmap(key)?;
        bitmap.edit_range(start, end, |container, low, high| {
            if flip {
                let mut range = RoaringBitmap::new();
                range.insert_range(low..=high);
                *container ^= range;
            } else {
                container.insert_range(low..=high);
            }
        })?;
        bitmap.commit()
    }

    /// TR.APPENDBITARRAY: bit `first + i` takes character `i` of `bits` (true = 1).
    pub fn tr_write_bits(&self, key: &'a [u8], first: u32, bits: &[bool]) -> Result<u64, Error> {
        let _guard = self.lock(&[key])?;
        let mut bitmap = self.open_bitmap(key)?;
        for (i, &on) in bits.iter().enumerate() {
            bitmap.set(first + i as u32, on)?;
        }
        bitmap.commit()
    }

    /// TR.SETBITARRAY and TR.SETINTARRAY: the bitmap becomes exactly `offsets`.
    pub fn tr_replace(&self, key: &'a [u8], offsets: &[u32]) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let all: RoaringBitmap = offsets.iter().copied().collect();
        self.store_bitmap(key, &all, 0)
    }

    /// Replaces whatever `key` holds with `bitmap` (RESTORE, TR.SETBITARRAY); the caller
    /// holds the key's lock.
    pub(crate) fn store_bitmap(
        &self,
        key: &'a [u8],
        bitmap: &RoaringBitmap,
        expire_at: u64,
    ) -> Result<(), Error> {
        self.replace_with_collection(key, KeyKind::Roaring, expire_at, |write| {
            write_containers(write, bitmap);
        })
    }

    pub fn tr_optimize(&self, key: &'a [u8]) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(false);
        };
        let mut optimized = Containers::new();
        self.containers(
            key,
            &bitmap,
            (0, u16::MAX),
            ScanDirection::Forward,
            &mut |high, mut container| {
                container.optimize();
                optimized.insert(high, encode(&container).into());
                Ok(true)
            },
        )?;
        let mut write = self.open_for_write(key, KeyKind::Roaring)?;
        if bitmap.packed.is_some() {
            store_containers(&mut write, &optimized);
        } else {
            for (high, container) in optimized {
                write.put(Cf::Data, &high.to_be_bytes(), container.to_vec());
            }
        }
        write.commit()?;
        Ok(true)
    }

    /// Reads the one container in place, packed or not, decoding nothing.
    pub fn tr_getbit(&self, key: &[u8], offset: u32) -> Result<bool, Error> {
        let Some(collection) = self.collection(key, KeyKind::Roaring)? else {
            return Ok(false);
        };
        let (high, low) = split(offset);
        let raw = if collection.extra.is_empty() {
            self.get_element(Cf::Data, key, &collection, &high.to_be_bytes())?
                .map(Bytes::from)
        } else {
            packed_containers::find(&collection.extra, high).ok_or(Error::Storage(
                shale_storage::StorageError::Corrupt("packed roaring containers"),
            ))?
        };
        raw.map_or(Ok(false), |raw| container_contains(&raw, low))
    }

    /// TR.GETBITS: `None` if the key is missing.
    pub fn tr_getbits(&self, key: &[u8], offsets: &[u32]) -> Result<Option<Vec<bool>>, Error> {
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(None);
        };
        let highs: BTreeSet<u16> = offsets.iter().map(|&o| split(o).0).collect();
        let mut containers = std::collections::BTreeMap::new();
        match &bitmap.packed {
            Some(packed) => {
                for high in &highs {
                    if let Some(raw) = packed.get(*high) {
                        containers.insert(*high, decode(&raw)?);
                    }
                }
            }
            None => {
                let subs: Vec<[u8; 2]> = highs.iter().map(|h| h.to_be_bytes()).collect();
                let refs: Vec<&[u8]> = subs.iter().map(|s| s.as_slice()).collect();
                let loaded = self.get_elements(Cf::Data, key, &bitmap.collection, &refs)?;
                for (high, raw) in highs.iter().zip(loaded) {
                    if let Some(raw) = raw {
                        containers.insert(*high, decode(&raw)?);
                    }
                }
            }
        }
        Ok(Some(
            offsets
                .iter()
                .map(|&o| {
                    let (high, low) = split(o);
                    containers
                        .get(&high)
                        .is_some_and(|c: &RoaringBitmap| c.contains(low))
                })
                .collect(),
        ))
    }

    /// TR.BITCOUNT: the cardinality, optionally within `[start, end]`.
    pub fn tr_bitcount(&self, key: &[u8], range: Option<(u32, u32)>) -> Result<u64, Error> {
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(0);
        };
        let Some((start, end)) = range else {
            return Ok(bitmap.collection.size);
        };
        let mut count = 0;
        self.containers(
            key,
            &bitmap,
            (split(start).0, split(end).0),
            ScanDirection::Forward,
            &mut |high, c| {
                count += c.range_cardinality(low_bounds(high, start, end));
                Ok(true)
            },
        )?;
        Ok(count)
    }

    /// The set bits in `[start, end]`, at most `limit` of them.
    pub fn tr_range(
        &self,
        key: &[u8],
        start: u32,
        end: u32,
        limit: u64,
    ) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        self.tr_visit_range(key, start, end, &mut |bit| {
            if out.len() as u64 == limit {
                return false;
            }
            out.push(bit);
            true
        })?;
        Ok(out)
    }

    /// Hands `visit` the set bits in `[start, end]` in ascending order until it returns false.
    pub fn tr_visit_range(
        &self,
        key: &[u8],
        start: u32,
        end: u32,
        visit: &mut dyn FnMut(u32) -> bool,
    ) -> Result<(), Error> {
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(());
        };
        self.containers(
            key,
            &bitmap,
            (split(start).0, split(end).0),
            ScanDirection::Forward,
            &mut |high, c| {
                Ok(c.range(low_bounds(high, start, end))
                    .all(|low| visit(join(high, low))))
            },
        )
    }

    pub fn tr_exists(&self, key: &[u8]) -> Result<bool, Error> {
        Ok(self.bitmap_of(key)?.is_some())
    }

    /// TR.MIN (`max` false) and TR.MAX.
    pub fn tr_extreme(&self, key: &[u8], max: bool) -> Result<Option<u32>, Error> {
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(None);
        };
        let direction = if max {
            ScanDirection::Reverse
        } else {
            ScanDirection::Forward
        };
        let mut found = None;
        self.containers(key, &bitmap, (0, u16::MAX), direction, &mut |high, c| {
            found = if max { c.max() } else { c.min() }.map(|low| join(high, low));
            Ok(found.is_none())
        })?;
        Ok(found)
    }

    /// TR.RANK: set bits in `[0, offset]`; `None` if the key is missing.
    pub fn tr_rank(&self, key: &[u8], offset: u32) -> Result<Option<u64>, Error> {
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(None);
        };
        let (high, low) = split(offset);
        let mut rank = 0;
        self.containers(
            key,
            &bitmap,
            (0, high),
            ScanDirection::Forward,
            &mut |h, c| {
                rank += if h == high { c.rank(low) } else { c.len() };
                Ok(true)
            },
        )?;
        Ok(Some(rank))
    }

    /// TR.BITPOS: the offset of the `count`-th bit equal to `value` (from the top if negative).
    pub fn tr_bitpos(&self, key: &[u8], value: bool, count: i64) -> Result<Option<u32>, Error> {
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(None);
        };
        let mut remaining = count.unsigned_abs();
        let reverse = count < 0;
        let direction = if reverse {
            ScanDirection::Reverse
        } else {
            ScanDirection::Forward
        };
        let mut found = None;
        if value {
            self.containers(key, &bitmap, (0, u16::MAX), direction, &mut |high, c| {
                if remaining > c.len() {
                    remaining -= c.len();
                    return Ok(true);
                }
                let nth = if reverse {
                    c.len() - remaining
                } else {
                    remaining - 1
                };
                found = c.select(nth as u32).map(|low| join(high, low));
                Ok(false)
            })?;
            return Ok(found);
        }
        // Zeros: gaps between containers count 2^16 each.
        let top = if reverse {
            self.tr_extreme(key, true)?.unwrap_or(0)
        } else {
            u32::MAX
        };
        let mut expected: i64 = if reverse { split(top).0 as i64 } else { 0 };
        let zero_in = |high: u16, c: &RoaringBitmap, remaining: &mut u64| -> Option<u32> {
            let (lo, hi) = (
                0u32,
                if reverse && high == split(top).0 {
                    split(top).1
                } else {
                    0xFFFF
                },
            );
            let zeros = (hi - lo + 1) as u64 - c.range_cardinality(lo..=hi);
            if *remaining > zeros {
                *remaining -= zeros;
                return None;
            }
            let lows: Box<dyn Iterator<Item = u32>> = if reverse {
                Box::new((lo..=hi).rev())
            } else {
                Box::new(lo..=hi)
            };
            let mut seen = 0;
            for low in lows {
                if !c.contains(low) {
                    seen += 1;
                    if seen == *remaining {
                        return Some(join(high, low));
                    }
                }
            }
            None
        };
        let step: i64 = if reverse { -1 } else { 1 };
        // The missing containers from `expected` up to (not including) `until`, all zeros:
        // counted, not walked.
        let in_gap = |expected: &mut i64, until: i64, remaining: &mut u64| -> Option<u32> {
            let containers = (until - *expected).unsigned_abs();
            let zeros = containers << 16;
            if *remaining > zeros {
                *remaining -= zeros;
                *expected = until;
                return None;
            }
            let nth = *remaining - 1;
            let high = *expected + step * (nth >> 16) as i64;
            let low = match reverse {
                true => 0xFFFF - (nth & 0xFFFF) as u32,
                false => (nth & 0xFFFF) as u32,
            };
            Some(join(high as u16, low))
        };
        self.containers(
            key,
            &bitmap,
            (0, split(top).0),
            direction,
            &mut |high, c| {
                found = in_gap(&mut expected, high as i64, &mut remaining)
                    .or_else(|| zero_in(high, &c, &mut remaining));
                expected = high as i64 + step;
                Ok(found.is_none())
            },
        )?;
        if found.is_none() {
            let past_last = if reverse { -1 } else { u16::MAX as i64 + 1 };
            if (0..=u16::MAX as i64).contains(&expected) {
                found = in_gap(&mut expected, past_last, &mut remaining);
            }
        }
        Ok(found)
    }

    /// Statistics of every container, for TR.STAT.
    pub fn tr_stat(&self, key: &[u8]) -> Result<Option<RoaringStat>, Error> {
        let Some(bitmap) = self.bitmap_of(key)? else {
            return Ok(None);
        };
        let mut stat = RoaringStat::default();
        self.containers(
            key,
            &bitmap,
            (0, u16::MAX),
            ScanDirection::Forward,
            &mut |high, c| {
                let s = c.statistics();
                stat.cardinality += s.cardinality;
                stat.containers += s.n_containers as u64;
                stat.min = stat.min.or(s.min_value.map(|low| join(high, low)));
                stat.max = s.max_value.map(|low| join(high, low)).or(stat.max);
                stat.sum += c.iter().map(|low| join(high, low) as u128).sum::<u128>();
                // Array containers take two bytes a value and bitsets 8 KiB, as Tair counts them.
                let kinds = [
                    (
                        s.n_array_containers as u64,
                        s.n_values_array_containers as u64,
                        2 * s.n_values_array_containers as u64,
                    ),
                    (
                        s.n_bitset_containers as u64,
                        s.n_values_bitset_containers,
                        8192 * s.n_bitset_containers as u64,
                    ),
                    (
                        s.n_run_containers as u64,
                        s.n_values_run_containers,
                        s.n_bytes_run_containers,
                    ),
                ];
                for (total, add) in stat.kinds.iter_mut().zip(kinds) {
                    total.0 += add.0;
                    total.1 += add.1;
                    total.2 += add.2;
                }
                Ok(true)
            },
        )?;
        Ok(Some(stat))
    }

    /// The container numbers present in any of `keys`' bitmaps.
    fn container_union(&self, sources: &[(Bytes, Option<Bitmap>)]) -> Result<BTreeSet<u16>, Error> {
        let mut highs = BTreeSet::new();
        for (key, bitmap) in sources {
            if let Some(packed) = bitmap.as_ref().and_then(|b| b.packed.as_ref()) {
                highs.extend(packed.iter().map(|(high, _)| high));
            } else if let Some(bitmap) = bitmap {
                self.scan_elements(
                    Cf::Data,
                    key,
                    &bitmap.collection,
                    (&[], None),
                    ScanDirection::Forward,
                    &mut |sub, _| {
                        highs.insert(high_of(sub));
                        true
                    },
                )?;
            }
        }
        Ok(highs)
    }

    /// Runs `op` over `keys` container by container, handing each non-empty result container
    /// to `emit`; only one container per source is in memory at a time.
    fn bitop_stream(
        &self,
        op: BitOp,
        keys: &[Bytes],
        emit: &mut dyn FnMut(u16, RoaringBitmap) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let sources: Vec<(Bytes, Option<Bitmap>)> = keys
            .iter()
            .map(|k| Ok((k.clone(), self.bitmap_of(k)?)))
            .collect::<Result<_, Error>>()?;
        // NOT complements within [0, max]: the one figure it needs up front.
        let top = match (op, &sources[0]) {
            (BitOp::Not, (key, Some(_))) => self.tr_extreme(key, true)?,
            _ => None,
        };
        let highs: Vec<u16> = match op {
            BitOp::And | BitOp::Diff => self.container_union(&sources[..1])?.into_iter().collect(),
            BitOp::Or | BitOp::Xor => self.container_union(&sources)?.into_iter().collect(),
            BitOp::Not => match top {
                Some(max) => (0..=split(max).0).collect(),
                None => return Ok(()),
            },
        };
        for high in highs {
            let mut loaded = Vec::with_capacity(sources.len());
            for (key, bitmap) in &sources {
                loaded.push(match bitmap {
                    Some(b) => self.container_of(key, b, high)?.unwrap_or_default(),
                    None => RoaringBitmap::new(),
                });
            }
            let mut iter = loaded.into_iter();
            let first = iter.next().unwrap_or_default();
            let result = match op {
                BitOp::And => iter.fold(first, |acc, c| acc & c),
                BitOp::Or => iter.fold(first, |acc, c| acc | c),
                BitOp::Xor => iter.fold(first, |acc, c| acc ^ c),
                BitOp::Diff => iter.fold(first, |acc, c| acc - c),
                BitOp::Not => {
                    let limit = match top {
                        Some(max) if split(max).0 == high => split(max).1,
                        _ => 0xFFFF,
                    };
                    let mut full = RoaringBitmap::new();
                    full.insert_range(0..=limit);
                    full - first
                }
            };
            if !result.is_empty() {
                emit(high, result)?;
            }
        }
        Ok(())
    }

    pub fn tr_bitopcard(&self, op: BitOp, keys: &[Bytes]) -> Result<u64, Error> {
        let mut count = 0;
        self.bitop_stream(op, keys, &mut |_, c| {
            count += c.len();
            Ok(())
        })?;
        Ok(count)
    }

    /// TR.BITOP: stores the result in `dst` and returns its cardinality. The result is written
    /// under a fresh version in batches, then one last batch points the key at it, so the
    /// switch is atomic; a crash before that batch leaves the partial result unreferenced.
    pub fn tr_bitop(&self, op: BitOp, dst: &'a [u8], keys: &[Bytes]) -> Result<u64, Error> {
        let mut all: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        all.push(dst);
        let _guard = self.lock(&all)?;
        let version = self.ks.versions.next()?;
        let mut pending = shale_storage::WriteBatch::new();
        let mut pending_bytes = 0;
        let mut cardinality = 0;
        self.bitop_stream(op, keys, &mut |high, mut container| {
            container.optimize();
            cardinality += container.len();
            let value = encode(&container);
            pending_bytes += value.len();
            let element =
                shale_storage::keys::element_key(self.index, dst, version, &high.to_be_bytes());
            pending.put(Cf::Data, element, value);
            if pending_bytes >= BITOP_BATCH_BYTES {
                self.engine().write(std::mem::take(&mut pending))?;
                pending_bytes = 0;
            }
            Ok(())
        })?;
        if !pending.is_empty() {
            self.engine().write(pending)?;
        }
        self.replace_with_version(dst, KeyKind::Roaring, version, cardinality)?;
        Ok(cardinality)
    }

    /// TR.JACCARD: |A∩B| / |A∪B| (0 when both are empty).
    pub fn tr_jaccard(&self, a: &Bytes, b: &Bytes) -> Result<f64, Error> {
        let keys = [a.clone(), b.clone()];
        let inter = self.tr_bitopcard(BitOp::And, &keys)?;
        let union = self.tr_bitopcard(BitOp::Or, &keys)?;
        Ok(if union == 0 {
            0.0
        } else {
            inter as f64 / union as f64
        })
    }

    /// TR.CONTAINS: whether every bit of `a` is in `b`.
    pub fn tr_contains(&self, a: &Bytes, b: &Bytes) -> Result<bool, Error> {
        Ok(self.tr_bitopcard(BitOp::Diff, &[a.clone(), b.clone()])? == 0)
    }
}

/// Stages every container of `all` into a new version of a bitmap.
fn write_containers(write: &mut CollectionWrite<'_>, all: &RoaringBitmap) {
    let mut containers = Containers::new();
    let mut current: Option<(u16, RoaringBitmap)> = None;
    let mut flush = |entry: Option<(u16, RoaringBitmap)>| {
        if let Some((high, mut container)) = entry {
            container.optimize();
            containers.insert(high, encode(&container).into());
        }
    };
    for value in all.iter() {
        let (high, low) = split(value);
        match &mut current {
            Some((h, container)) if *h == high => {
                container.insert(low);
            }
            _ => {
                flush(current.take());
                let mut container = RoaringBitmap::new();
                container.insert(low);
                current = Some((high, container));
            }
        }
    }
    flush(current.take());
    store_containers(write, &containers);
    write.size = all.len();
}
