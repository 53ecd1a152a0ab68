//! What random sampling remembers about large collection versions: their first and last
//! elements, and the empty ranges that pops have left (see `types/sampling.rs`, which samples
//! with them). Kept per collection version, within a memory budget.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

/// Bounds are recomputed after this many uses, and at most this many versions are remembered.
pub(crate) const BOUNDS_REUSE: u32 = 1024;
pub(crate) const REMEMBERED_VERSIONS: usize = 4096;

/// Memory all remembered gaps may take, counted as in [`Gaps::bytes`].
pub(crate) const GAP_BUDGET: usize = 16 << 20;

/// Per collection version: its first and last element, and the gaps its pops left.
pub(crate) struct Sampling {
    pub(crate) hints: Mutex<HashMap<u64, Hints>>,
    /// Bytes of all gaps in `hints`, kept under its lock; read without it so that writers can
    /// skip the lock while no gaps exist.
    pub(crate) gap_bytes: AtomicUsize,
}

pub(crate) struct Hints {
    pub(crate) first: Bytes,
    pub(crate) last: Bytes,
    pub(crate) uses: u32,
    pub(crate) gaps: Gaps,
}

/// What a pop learnt while choosing its elements, to remember once the pop has committed.
pub(crate) struct Learnt(pub(crate) Option<(u64, Hints)>);

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            hints: Mutex::new(HashMap::new()),
            gap_bytes: AtomicUsize::new(0),
        }
    }
}

impl Sampling {
    /// Forgets everything: on a replica, whose collections change by batches that say nothing
    /// of what sampling learnt.
    pub(crate) fn forget_all(&self) {
        if self.gap_bytes.load(Ordering::Relaxed) == 0 && self.hints.lock().is_empty() {
            return;
        }
        self.hints.lock().clear();
        self.gap_bytes.store(0, Ordering::Relaxed);
    }

    /// Remembered bounds of `version`, unless they are due for a refresh.
    pub(crate) fn bounds(&self, version: u64) -> Option<(Bytes, Bytes)> {
        let mut hints = self.hints.lock();
        let entry = hints.get_mut(&version)?;
        entry.uses += 1;
        (entry.uses < BOUNDS_REUSE).then(|| (entry.first.clone(), entry.last.clone()))
    }

    pub(crate) fn set_bounds(&self, version: u64, first: Bytes, last: Bytes) {
        let mut hints = self.hints.lock();
        if let Some(entry) = hints.get_mut(&version) {
            entry.first = first;
            entry.last = last;
            entry.uses = 0;
            return;
        }
        self.make_room(&mut hints);
        hints.insert(
            version,
            Hints {
                first,
                last,
                uses: 0,
                gaps: Gaps::default(),
            },
        );
    }

    /// Removes what is known about `version`, for a pop that holds its key's lock.
    pub(crate) fn take(&self, version: u64) -> Option<Hints> {
        let mut hints = self.hints.lock();
        let taken = hints.remove(&version)?;
        self.gap_bytes
            .fetch_sub(taken.gaps.bytes, Ordering::Relaxed);
        Some(taken)
    }

    /// Remembers what a committed pop learnt, within the gap budget: other versions' gaps go
    /// first, then this version's.
    pub fn keep(&self, learnt: Learnt) {
        let Learnt(Some((version, mut learnt))) = learnt else {
            return;
        };
        let mut hints = self.hints.lock();
        if learnt.gaps.bytes > GAP_BUDGET {
            learnt.gaps = Gaps::default();
        }
        if self.gap_bytes.load(Ordering::Relaxed) + learnt.gaps.bytes > GAP_BUDGET {
            for entry in hints.values_mut() {
                entry.gaps = Gaps::default();
            }
            self.gap_bytes.store(0, Ordering::Relaxed);
        }
        self.make_room(&mut hints);
        self.gap_bytes
            .fetch_add(learnt.gaps.bytes, Ordering::Relaxed);
        if let Some(old) = hints.insert(version, learnt) {
            self.gap_bytes.fetch_sub(old.gaps.bytes, Ordering::Relaxed);
        }
    }

    /// Drops the gaps of `version`; whoever adds elements to it calls this first, under the
    /// key's lock.
    pub fn forget_gaps(&self, version: u64) {
        if self.gap_bytes.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Some(entry) = self.hints.lock().get_mut(&version) {
            let gaps = std::mem::take(&mut entry.gaps);
            self.gap_bytes.fetch_sub(gaps.bytes, Ordering::Relaxed);
        }
    }

    pub(crate) fn make_room(&self, hints: &mut HashMap<u64, Hints>) {
        if hints.len() >= REMEMBERED_VERSIONS {
            hints.clear();
            self.gap_bytes.store(0, Ordering::Relaxed);
        }
    }
}

/// Ranges `[start, end)` of element suffixes known to hold no element; `end` `None` runs to
/// the end of the collection. Ranges never overlap or touch: inserting merges them.
#[derive(Default)]
pub(crate) struct Gaps {
    pub(crate) ranges: BTreeMap<Bytes, Option<Bytes>>,
    /// The bounds' bytes plus a fixed cost per range, for the memory budget.
    pub(crate) bytes: usize,
}

/// What a range costs besides its bounds' bytes: two `Bytes` and the map's node share.
pub(crate) const GAP_OVERHEAD: usize = 96;

impl Gaps {
    /// Where a seek for `probe` starts: the end of the range holding it, else `probe` itself
    /// (`None` when that range runs to the end). Also returns where the empty stretch before
    /// that point begins, for [`Gaps::insert`].
    pub(crate) fn seek_point(&self, probe: &[u8]) -> (Bytes, Option<Bytes>) {
        let holding = self
            .ranges
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(probe)))
            .next_back();
        match holding {
            Some((start, None)) => (start.clone(), None),
            Some((start, Some(end))) if probe < end.as_ref() => (start.clone(), Some(end.clone())),
            _ => {
                let probe = Bytes::copy_from_slice(probe);
                (probe.clone(), Some(probe))
            }
        }
    }

    /// The first range that starts after `key`.
    pub(crate) fn range_after(&self, key: &[u8]) -> Option<(Bytes, Option<Bytes>)> {
        self.ranges
            .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(start, end)| (start.clone(), end.clone()))
    }

    /// The start of the range that runs to the end, if there is one.
    pub(crate) fn trailing_start(&self) -> Option<&Bytes> {
        self.ranges
            .iter()
            .next_back()
            .and_then(|(start, end)| end.is_none().then_some(start))
    }

    /// Records that `[start, end)` holds no element, merging every range it overlaps or
    /// touches.
    pub(crate) fn insert(&mut self, mut start: Bytes, mut end: Option<Bytes>) {
        let before = self
            .ranges
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(start.as_ref())))
            .next_back()
            .filter(|(_, e)| e.as_ref().is_none_or(|e| *e >= start))
            .map(|(s, _)| s.clone());
        if let Some(s) = before {
            start = s;
        }
        loop {
            let next = self
                .ranges
                .range::<[u8], _>((Bound::Included(start.as_ref()), Bound::Unbounded))
                .next()
                .filter(|(s, _)| end.as_ref().is_none_or(|e| *s <= e))
                .map(|(s, _)| s.clone());
            let Some(s) = next else { break };
            if let Some(e) = self.ranges.remove(&s) {
                self.bytes -= Self::cost(&s, &e);
                end = match (end, e) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
        }
        self.bytes += Self::cost(&start, &end);
        self.ranges.insert(start, end);
    }

    pub(crate) fn cost(start: &Bytes, end: &Option<Bytes>) -> usize {
        start.len() + end.as_ref().map_or(0, Bytes::len) + GAP_OVERHEAD
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}
