//! Random elements of collections too large to read whole: seeks to random keys between the
//! first and the last element.
//!
//! SPOP deletes what its seek finds, so afterwards every key between the probe and the popped
//! element is empty or a tombstone, and a later seek landing there walks those tombstones
//! again. Elements after a gap are the likeliest to be found, so gaps grow, and a set popped
//! down from 100k members costs thousands of steps per pop. Pops therefore remember the empty
//! ranges they create ([`Gaps`]) and seek past them. Only pops learn gaps, under the key's
//! lock, and anything that adds elements to a version forgets its gaps first, so a gap never
//! hides an element; if one ever does, the pop falls back to sampling without gaps.

use std::collections::HashSet;

use bytes::Bytes;
use rand::seq::SliceRandom;
use rand::Rng;
use shale_storage::{Cf, ScanDirection};

use super::collection::Collection;
use super::packed_elements::PACKED_MAX_ELEMENTS;
use crate::error::Error;
use crate::keyspace::sampling::{Gaps, Hints, Learnt, BOUNDS_REUSE};
use crate::keyspace::Db;

/// Collections up to this size are sampled uniformly from a full read; larger ones by random
/// seeks, which favours elements after gaps in the key space but reads only what it returns.
/// No packed collection is larger, so the seeks only ever meet element records.
const FULL_SAMPLE_LIMIT: u64 = 128;
const _: () = assert!(PACKED_MAX_ELEMENTS as u64 <= FULL_SAMPLE_LIMIT);

/// Elements a pop chose, and what it learnt choosing them.
pub(crate) struct PopPick {
    pub elements: Vec<(Bytes, Bytes)>,
    pub learnt: Learnt,
}

/// A random key between `first` and `last`: their common prefix, then at each later position
/// a byte drawn between theirs. Probes spread over the key space the elements occupy (for
/// `member:000123`-style keys, uniformly over the numbers).
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

/// The smallest key after `element`.
fn successor(element: &[u8]) -> Bytes {
    let mut key = Vec::with_capacity(element.len() + 1);
    key.extend_from_slice(element);
    key.push(0);
    key.into()
}

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
            let mut all = self.all_elements(cf, key, collection)?;
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
        let mut seen = HashSet::new();
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
                self.scan_records(
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

    /// Up to `count` distinct random elements for a pop, which must delete exactly these and
    /// then hand `learnt` to [`Sampling::keep`]. The caller holds the key's lock.
    pub(crate) fn pick_for_pop(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
        count: u64,
    ) -> Result<PopPick, Error> {
        let version = collection.version;
        let taken = self.ks.sampling.take(version);
        let gaps = taken.as_ref().is_some_and(|hints| !hints.gaps.is_empty());
        if count >= collection.size || (collection.size <= FULL_SAMPLE_LIMIT && !gaps) {
            return self.pick_without_gaps(cf, key, collection, count);
        }
        let mut hints = match taken {
            Some(hints) if hints.uses < BOUNDS_REUSE => hints,
            taken => {
                let gaps = taken.map(|hints| hints.gaps).unwrap_or_default();
                let Some((first, last)) = self.edges_outside(cf, key, version, &gaps)? else {
                    return self.pick_without_gaps(cf, key, collection, count);
                };
                Hints {
                    first,
                    last,
                    uses: 0,
                    gaps,
                }
            }
        };
        hints.uses += 1;
        let mut rng = rand::rng();
        let mut elements = Vec::new();
        while (elements.len() as u64) < count {
            let probe = random_probe(&hints.first, &hints.last, &mut rng);
            match self.next_outside(cf, key, version, &mut hints.gaps, &probe)? {
                Some(element) => elements.push(element),
                None => return self.pick_without_gaps(cf, key, collection, count),
            }
        }
        Ok(PopPick {
            elements,
            learnt: Learnt(Some((version, hints))),
        })
    }

    fn pick_without_gaps(
        &self,
        cf: Cf,
        key: &[u8],
        collection: &Collection,
        count: u64,
    ) -> Result<PopPick, Error> {
        let count = count.min(i64::MAX as u64) as i64;
        Ok(PopPick {
            elements: self.random_elements(cf, key, collection, count)?,
            learnt: Learnt(None),
        })
    }

    /// The first element at or after `probe` outside `gaps`, wrapping around to the first
    /// one. The stretch it skipped and the element itself become a gap, which also keeps a
    /// multi-element pop from choosing the element twice.
    fn next_outside(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        gaps: &mut Gaps,
        probe: &[u8],
    ) -> Result<Option<(Bytes, Bytes)>, Error> {
        for from in [probe, &[][..]] {
            let (empty_from, mut seek) = gaps.seek_point(from);
            while let Some(at) = seek {
                // Scan only up to the next gap: elements in it are gone or chosen already.
                let next = gaps.range_after(&at);
                let end = next.as_ref().map(|(start, _)| start.as_ref());
                if let Some(element) =
                    self.edge_element(cf, key, version, (&at, end), ScanDirection::Forward)?
                {
                    gaps.insert(empty_from, Some(successor(&element.0)));
                    return Ok(Some(element));
                }
                seek = next.and_then(|(_, end)| end);
            }
            gaps.insert(empty_from, None);
        }
        Ok(None)
    }

    /// The first and last element, looking past the gaps at either end.
    fn edges_outside(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        gaps: &Gaps,
    ) -> Result<Option<(Bytes, Bytes)>, Error> {
        let Some(seek) = gaps.seek_point(&[]).1 else {
            return Ok(None);
        };
        let first = self.edge_element(cf, key, version, (&seek, None), ScanDirection::Forward)?;
        let end = gaps.trailing_start().map(Bytes::as_ref);
        let last = self.edge_element(cf, key, version, (&[], end), ScanDirection::Reverse)?;
        Ok(first.zip(last).map(|((first, _), (last, _))| (first, last)))
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
        if let Some(bounds) = self.ks.sampling.bounds(version) {
            return Ok(Some(bounds));
        }
        let whole = (&[][..], None);
        let (Some((first, _)), Some((last, _))) = (
            self.edge_element(cf, key, version, whole, ScanDirection::Forward)?,
            self.edge_element(cf, key, version, whole, ScanDirection::Reverse)?,
        ) else {
            return Ok(None);
        };
        self.ks
            .sampling
            .set_bounds(version, first.clone(), last.clone());
        Ok(Some((first, last)))
    }

    /// The first (or last) element within `bounds`, with its value.
    fn edge_element(
        &self,
        cf: Cf,
        key: &[u8],
        version: u64,
        bounds: (&[u8], Option<&[u8]>),
        direction: ScanDirection,
    ) -> Result<Option<(Bytes, Bytes)>, Error> {
        let mut found = None;
        self.scan_records(cf, key, version, bounds, direction, &mut |sub, value| {
            found = Some((Bytes::copy_from_slice(sub), Bytes::copy_from_slice(value)));
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
        let forward = ScanDirection::Forward;
        match self.edge_element(cf, key, version, (probe, None), forward)? {
            Some(element) => Ok(Some(element)),
            None => self.edge_element(cf, key, version, (&[], None), forward),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::sampling::GAP_OVERHEAD;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn ranges(gaps: &Gaps) -> Vec<(String, Option<String>)> {
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        gaps.ranges
            .iter()
            .map(|(s, e)| (text(s), e.as_ref().map(text)))
            .collect()
    }

    #[test]
    fn seek_point_jumps_to_the_end_of_the_holding_range() {
        let mut gaps = Gaps::default();
        gaps.insert(b("c"), Some(b("f")));
        assert_eq!(gaps.seek_point(b"d"), (b("c"), Some(b("f"))));
        assert_eq!(gaps.seek_point(b"c"), (b("c"), Some(b("f"))));
        assert_eq!(
            gaps.seek_point(b"f"),
            (b("f"), Some(b("f"))),
            "end is exclusive"
        );
        assert_eq!(gaps.seek_point(b"a"), (b("a"), Some(b("a"))));
        gaps.insert(b("x"), None);
        assert_eq!(gaps.seek_point(b"y"), (b("x"), None));
        assert_eq!(gaps.trailing_start(), Some(&b("x")));
    }

    #[test]
    fn inserts_merge_overlapping_and_touching_ranges() {
        let mut gaps = Gaps::default();
        gaps.insert(b("b"), Some(b("d")));
        gaps.insert(b("f"), Some(b("h")));
        gaps.insert(b("m"), Some(b("p")));
        assert_eq!(ranges(&gaps).len(), 3);
        gaps.insert(b("d"), Some(b("f")));
        assert_eq!(
            ranges(&gaps),
            [
                ("b".into(), Some("h".into())),
                ("m".into(), Some("p".into()))
            ]
        );
        gaps.insert(b("c"), Some(b("n")));
        assert_eq!(ranges(&gaps), [("b".into(), Some("p".into()))]);
        gaps.insert(b("o"), None);
        assert_eq!(ranges(&gaps), [("b".into(), None)]);
        assert_eq!(gaps.bytes, 1 + GAP_OVERHEAD);
    }

    #[test]
    fn successor_is_the_next_key() {
        assert_eq!(successor(b"ab"), Bytes::from_static(b"ab\0"));
        assert!(successor(b"ab").as_ref() > b"ab".as_ref());
        assert!(successor(b"ab").as_ref() < b"ab\0\0".as_ref());
    }
}
