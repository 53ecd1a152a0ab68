//! Sorted sets: `key|version|member → score` in the data family (point lookups, lexical
//! order) and `key|version|score_bytes|member → ""` in the score family (score order).
//!
//! A sorted set's own part of its metadata is its floor: `score_bytes` below which no member's
//! score lies. Removing the lowest members (ZREMRANGEBYRANK from 0, ZPOPMIN, ZREMRANGEBYSCORE
//! with no member below its minimum) raises it, adding a member below it lowers it, and scans
//! of the score index start there. Without it, a sorted set used as a sliding window (ZADD
//! now, ZREMRANGEBYSCORE 0 now-window) made every scan step over the deletes of all the
//! members it ever removed, until compaction dropped them.

use std::collections::BTreeMap;

use bytes::Bytes;
use shale_storage::keys::{
    score_bytes, score_from_bytes, score_of_value, score_suffix, score_value,
};
use shale_storage::metadata::KeyKind;
use shale_storage::{Cf, ScanDirection};

use super::collection::{Collection, CollectionWrite, Page};
use crate::error::Error;
use crate::keyspace::Db;

/// The bytes of a sorted set's floor, its own part of the metadata; zeros (a new sorted set's,
/// or one written before floors) lie below every score.
pub(super) const FLOOR_LEN: usize = shale_storage::metadata::ZSET_FLOOR_LEN;

pub(super) fn floor_of(extra: &[u8]) -> [u8; FLOOR_LEN] {
    extra
        .get(..FLOOR_LEN)
        .and_then(|b| b.try_into().ok())
        .unwrap_or([0; FLOOR_LEN])
}

/// Moves the floor of the sorted set `write` changes to `floor`.
fn set_floor(write: &mut CollectionWrite<'_>, floor: [u8; FLOOR_LEN]) {
    if floor != floor_of(&write.extra) {
        write.extra = Bytes::copy_from_slice(&floor);
    }
}

/// Raises the floor past `removed`, the highest of the lowest members a write removed.
fn raise_floor(write: &mut CollectionWrite<'_>, removed: Option<&ScoredMember>) {
    if let Some((_, score)) = removed {
        set_floor(write, floor_of(&write.extra).max(score_bytes(*score)));
    }
}

/// One end of a score range: `1.5`, `(1.5`, `-inf`, `+inf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    pub value: f64,
    pub exclusive: bool,
}

/// One end of a lexical range: `-`, `+`, `[a`, `(a`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LexBound {
    Min,
    Max,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

/// Which elements a range command selects.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeBy {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RangeSpec {
    pub by: RangeBy,
    /// Highest first. For score and lex ranges the bounds are still (min, max).
    pub rev: bool,
    /// LIMIT offset count; a negative count means all.
    pub limit: Option<(i64, i64)>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ZaddOptions {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub ch: bool,
    pub incr: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    Sum,
    Min,
    Max,
}

pub type ScoredMember = (Bytes, f64);

impl ScoreBound {
    /// As a minimum: whether `score` falls below it.
    fn rejects_from_below(&self, score: f64) -> bool {
        score < self.value || (self.exclusive && score == self.value)
    }

    /// As a maximum: whether `score` falls above it.
    fn rejects_from_above(&self, score: f64) -> bool {
        score > self.value || (self.exclusive && score == self.value)
    }
}

impl LexBound {
    fn lower_key(&self) -> Vec<u8> {
        match self {
            LexBound::Inclusive(m) | LexBound::Exclusive(m) => m.to_vec(),
            LexBound::Min | LexBound::Max => Vec::new(),
        }
    }

    fn admits_from_below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(m) => member >= m.as_ref(),
            LexBound::Exclusive(m) => member > m.as_ref(),
        }
    }

    fn admits_from_above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(m) => member <= m.as_ref(),
            LexBound::Exclusive(m) => member < m.as_ref(),
        }
    }
}

/// The exclusive upper suffix of every score-family entry with score `max` or below.
fn score_upper(max: f64) -> Option<Vec<u8>> {
    let bytes = u64::from_be_bytes(score_bytes(max));
    bytes.checked_add(1).map(|b| b.to_be_bytes().to_vec())
}

impl<'a> Db<'a> {
    pub(super) fn zset_of(&self, key: &[u8]) -> Result<Option<Collection>, Error> {
        self.collection(key, KeyKind::ZSet)
    }

    /// ZADD: returns the count (added, or changed with CH), or with INCR the new score (`None`
    /// when a condition prevented the update).
    pub fn zadd(
        &self,
        key: &[u8],
        options: ZaddOptions,
        pairs: &[(f64, Bytes)],
    ) -> Result<(i64, Option<f64>), Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::ZSet)?;
        let members: Vec<&[u8]> = pairs.iter().map(|(_, m)| m.as_ref()).collect();
        let mut current: BTreeMap<Bytes, Option<f64>> = BTreeMap::new();
        for (member, raw) in pairs
            .iter()
            .map(|(_, m)| m)
            .zip(write.get_many(Cf::Data, &members)?)
        {
            current
                .entry(member.clone())
                .or_insert(raw.map(|r| score_of_value(&r)));
        }
        let (mut added, mut changed) = (0, 0);
        let mut last_score = None;
        let mut floor = floor_of(&write.extra);
        for (score, member) in pairs {
            let old = current[member];
            // A new member's score is the increment itself, so ZINCRBY of -0 replies -0.
            let new = if options.incr {
                old.map_or(*score, |old| old + score)
            } else {
                *score
            };
            if new.is_nan() {
                return Err(Error::msg("resulting score is not a number (NaN)"));
            }
            let allowed = match old {
                None => !options.xx,
                Some(old) => {
                    !options.nx && (!options.gt || new > old) && (!options.lt || new < old)
                }
            };
            if !allowed {
                last_score = None;
                continue;
            }
            last_score = Some(new);
            match old {
                None => added += 1,
                Some(old) if old == new => continue,
                Some(old) => {
                    changed += 1;
                    write.delete(Cf::Score, &score_suffix(old, member));
                }
            }
            write.put(Cf::Data, member, score_value(new));
            write.put(Cf::Score, &score_suffix(new, member), Vec::new());
            floor = floor.min(score_bytes(new));
            current.insert(member.clone(), Some(new));
        }
        set_floor(&mut write, floor);
        if added + changed > 0 {
            write.size += added as u64;
            write.commit()?;
        }
        Ok((if options.ch { added + changed } else { added }, last_score))
    }

    pub fn zrem(&self, key: &[u8], members: &[Bytes]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::ZSet)?;
        let removed = remove_members(&mut write, members)?;
        if removed > 0 {
            write.commit()?;
        }
        Ok(removed)
    }

    pub fn zscore(&self, key: &[u8], member: &[u8]) -> Result<Option<f64>, Error> {
        let Some(zset) = self.zset_of(key)? else {
            return Ok(None);
        };
        Ok(self
            .get_element(Cf::Data, key, &zset, member)?
            .map(|raw| score_of_value(&raw)))
    }

    pub fn zmscore(&self, key: &[u8], members: &[Bytes]) -> Result<Vec<Option<f64>>, Error> {
        let Some(zset) = self.zset_of(key)? else {
            return Ok(vec![None; members.len()]);
        };
        let subs: Vec<&[u8]> = members.iter().map(|m| m.as_ref()).collect();
        let raw = self.get_elements(Cf::Data, key, &zset, &subs)?;
        Ok(raw
            .into_iter()
            .map(|r| r.map(|r| score_of_value(&r)))
            .collect())
    }

    pub fn zcard(&self, key: &[u8]) -> Result<i64, Error> {
        Ok(self.zset_of(key)?.map_or(0, |z| z.size as i64))
    }

    /// The members a range selects, with their scores, in the order the command replies.
    pub fn zrange(&self, key: &[u8], spec: &RangeSpec) -> Result<Vec<ScoredMember>, Error> {
        let Some(zset) = self.zset_of(key)? else {
            return Ok(Vec::new());
        };
        self.zrange_of(key, &zset, spec)
    }

    fn zrange_of(
        &self,
        key: &[u8],
        zset: &Collection,
        spec: &RangeSpec,
    ) -> Result<Vec<ScoredMember>, Error> {
        let direction = if spec.rev {
            ScanDirection::Reverse
        } else {
            ScanDirection::Forward
        };
        let mut window = match spec.limit {
            Some((offset, _)) if offset < 0 => return Ok(Vec::new()),
            Some((offset, count)) => LimitWindow {
                skip: offset as u64,
                take: if count < 0 { u64::MAX } else { count as u64 },
            },
            None => LimitWindow {
                skip: 0,
                take: u64::MAX,
            },
        };
        let mut out = Vec::new();
        match &spec.by {
            RangeBy::Rank(start, stop) => {
                let Some((first, last)) = super::index_window(*start, *stop, zset.size) else {
                    return Ok(out);
                };
                let mut rank = 0u64;
                self.scan_elements(
                    Cf::Score,
                    key,
                    zset,
                    (&floor_of(&zset.extra), None),
                    direction,
                    &mut |sub, _| {
                        if rank > last {
                            return false;
                        }
                        if rank >= first {
                            out.push(scored_from_index(sub));
                        }
                        rank += 1;
                        true
                    },
                )?;
            }
            RangeBy::Score(min, max) => {
                let lower = score_bytes(min.value).max(floor_of(&zset.extra));
                let upper = score_upper(max.value);
                if min.value > max.value {
                    return Ok(out);
                }
                self.scan_elements(
                    Cf::Score,
                    key,
                    zset,
                    (&lower, upper.as_deref()),
                    direction,
                    &mut |sub, _| {
                        let (member, score) = scored_from_index(sub);
                        if min.rejects_from_below(score) || max.rejects_from_above(score) {
                            return true;
                        }
                        match window.next() {
                            None => return false,
                            Some(false) => return true,
                            Some(true) => {}
                        }
                        out.push((member, score));
                        true
                    },
                )?;
            }
            RangeBy::Lex(min, max) => {
                let lower = min.lower_key();
                let upper = match max {
                    LexBound::Max => None,
                    LexBound::Min => return Ok(out),
                    LexBound::Inclusive(m) => Some([m.as_ref(), &[0u8][..]].concat()),
                    LexBound::Exclusive(m) => Some(m.to_vec()),
                };
                if matches!(min, LexBound::Max) {
                    return Ok(out);
                }
                self.scan_elements(
                    Cf::Data,
                    key,
                    zset,
                    (&lower, upper.as_deref()),
                    direction,
                    &mut |member, value| {
                        if !min.admits_from_below(member) || !max.admits_from_above(member) {
                            return true;
                        }
                        match window.next() {
                            None => return false,
                            Some(false) => return true,
                            Some(true) => {}
                        }
                        out.push((Bytes::copy_from_slice(member), score_of_value(value)));
                        true
                    },
                )?;
            }
        }
        Ok(out)
    }

    /// ZCOUNT and ZLEXCOUNT: the size of a score or lexical range.
    pub fn zcount(&self, key: &[u8], by: RangeBy) -> Result<i64, Error> {
        let spec = RangeSpec {
            by,
            rev: false,
            limit: None,
        };
        Ok(self.zrange(key, &spec)?.len() as i64)
    }

    /// ZRANK/ZREVRANK: the member's rank and score.
    pub fn zrank(&self, key: &[u8], member: &[u8], rev: bool) -> Result<Option<(i64, f64)>, Error> {
        let Some(zset) = self.zset_of(key)? else {
            return Ok(None);
        };
        let Some(raw) = self.get_element(Cf::Data, key, &zset, member)? else {
            return Ok(None);
        };
        let score = score_of_value(&raw);
        let target = score_suffix(score, member);
        let mut rank = 0i64;
        self.scan_elements(
            Cf::Score,
            key,
            &zset,
            (&floor_of(&zset.extra), Some(&target)),
            ScanDirection::Forward,
            &mut |_, _| {
                rank += 1;
                true
            },
        )?;
        Ok(Some((
            if rev {
                zset.size as i64 - 1 - rank
            } else {
                rank
            },
            score,
        )))
    }

    /// Whether a member's score lies below the score-index suffix `below`: a scan from the
    /// floor, which is short once the floor has risen to about there (a sliding window's
    /// `ZREMRANGEBYSCORE 0 now-window`, whose first call finds no member below 0).
    fn scores_below(&self, key: &[u8], zset: &Collection, below: &[u8]) -> Result<bool, Error> {
        let mut found = false;
        self.scan_elements(
            Cf::Score,
            key,
            zset,
            (&floor_of(&zset.extra), Some(below)),
            ScanDirection::Forward,
            &mut |_, _| {
                found = true;
                false
            },
        )?;
        Ok(found)
    }

    /// ZREMRANGEBYRANK/SCORE/LEX: removes what the range selects.
    pub fn zremrange(&self, key: &[u8], by: RangeBy) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::ZSet)?;
        if !write.existed {
            return Ok(0);
        }
        let lowest_first = match &by {
            RangeBy::Score(min, _) => {
                let below = if min.exclusive {
                    score_upper(min.value)
                } else {
                    Some(score_bytes(min.value).to_vec())
                };
                match below {
                    Some(below) => !self.scores_below(key, &write.collection(), &below)?,
                    None => false,
                }
            }
            RangeBy::Rank(start, stop) => {
                super::index_window(*start, *stop, write.size).is_some_and(|(first, _)| first == 0)
            }
            RangeBy::Lex(..) => false,
        };
        let doomed = self.zrange_of(
            key,
            &write.collection(),
            &RangeSpec {
                by,
                rev: false,
                limit: None,
            },
        )?;
        for (member, score) in &doomed {
            write.delete(Cf::Data, member);
            write.delete(Cf::Score, &score_suffix(*score, member));
        }
        if lowest_first {
            raise_floor(&mut write, doomed.last());
        }
        write.size -= doomed.len() as u64;
        if !doomed.is_empty() {
            write.commit()?;
        }
        Ok(doomed.len() as i64)
    }

    /// ZPOPMIN/ZPOPMAX: removes and returns up to `count` lowest (or highest) members.
    pub fn zpop(&self, key: &[u8], max: bool, count: u64) -> Result<Vec<ScoredMember>, Error> {
        let _guard = self.lock(&[key])?;
        self.zpop_locked(key, max, count)
    }

    /// ZMPOP: pops from the first of `keys` that holds a sorted set.
    pub fn zmpop(
        &self,
        keys: &[Bytes],
        max: bool,
        count: u64,
    ) -> Result<Option<(Bytes, Vec<ScoredMember>)>, Error> {
        let _guard = self.lock(keys)?;
        for key in keys {
            let popped = self.zpop_locked(key, max, count)?;
            if !popped.is_empty() {
                return Ok(Some((key.clone(), popped)));
            }
        }
        Ok(None)
    }

    fn zpop_locked(&self, key: &[u8], max: bool, count: u64) -> Result<Vec<ScoredMember>, Error> {
        let mut write = self.open_for_write(key, KeyKind::ZSet)?;
        if !write.existed || count == 0 {
            return Ok(Vec::new());
        }
        let last = count.min(write.size) as i64 - 1;
        let spec = RangeSpec {
            by: RangeBy::Rank(0, last),
            rev: max,
            limit: None,
        };
        let popped = self.zrange_of(key, &write.collection(), &spec)?;
        for (member, score) in &popped {
            write.delete(Cf::Data, member);
            write.delete(Cf::Score, &score_suffix(*score, member));
        }
        if !max {
            raise_floor(&mut write, popped.last());
        }
        write.size -= popped.len() as u64;
        write.commit()?;
        Ok(popped)
    }

    pub fn zrandmember(&self, key: &[u8], count: i64) -> Result<Vec<ScoredMember>, Error> {
        let Some(zset) = self.zset_of(key)? else {
            return Ok(Vec::new());
        };
        let picked = self.random_elements(Cf::Data, key, &zset, count)?;
        Ok(picked
            .into_iter()
            .map(|(m, s)| (m, score_of_value(&s)))
            .collect())
    }

    /// The members and scores of a sorted set or a set (score 1) for ZUNION and friends.
    fn scored_input(&self, key: &[u8]) -> Result<Vec<ScoredMember>, Error> {
        let Some(meta) = self.live_meta(key)? else {
            return Ok(Vec::new());
        };
        let kind = meta.kind;
        let elements = match Collection::of(meta) {
            Some(collection) if matches!(kind, KeyKind::ZSet | KeyKind::Set) => {
                self.all_elements(Cf::Data, key, &collection)?
            }
            _ => return Err(Error::WrongType),
        };
        Ok(elements
            .into_iter()
            .map(|(m, s)| match kind {
                KeyKind::ZSet => (m, score_of_value(&s)),
                _ => (m, 1.0),
            })
            .collect())
    }

    /// ZUNION, ZINTER, ZDIFF: the result sorted by score, then member.
    pub fn zcombine(
        &self,
        op: super::set::SetOp,
        keys: &[Bytes],
        weights: &[f64],
        aggregate: Aggregate,
    ) -> Result<Vec<ScoredMember>, Error> {
        let inputs: Vec<Vec<ScoredMember>> = keys
            .iter()
            .map(|k| self.scored_input(k))
            .collect::<Result<_, _>>()?;
        let mut result: BTreeMap<Bytes, f64> = BTreeMap::new();
        let weighted = |score: f64, i: usize| {
            let w = weights.get(i).copied().unwrap_or(1.0);
            let v = score * w;
            if v.is_nan() {
                0.0
            } else {
                v
            }
        };
        let combine = |a: f64, b: f64| {
            let v = match aggregate {
                Aggregate::Sum => a + b,
                Aggregate::Min => a.min(b),
                Aggregate::Max => a.max(b),
            };
            if v.is_nan() {
                0.0
            } else {
                v
            }
        };
        use super::set::SetOp;
        match op {
            SetOp::Union => {
                for (i, input) in inputs.iter().enumerate() {
                    for (member, score) in input {
                        let s = weighted(*score, i);
                        result
                            .entry(member.clone())
                            .and_modify(|v| *v = combine(*v, s))
                            .or_insert(s);
                    }
                }
            }
            SetOp::Inter => {
                if let Some(first) = inputs.first() {
                    result = first
                        .iter()
                        .map(|(m, s)| (m.clone(), weighted(*s, 0)))
                        .collect();
                    for (i, input) in inputs.iter().enumerate().skip(1) {
                        let other: BTreeMap<&Bytes, f64> =
                            input.iter().map(|(m, s)| (m, *s)).collect();
                        result = result
                            .into_iter()
                            .filter_map(|(m, v)| {
                                other.get(&m).map(|s| (m, combine(v, weighted(*s, i))))
                            })
                            .collect();
                    }
                }
            }
            SetOp::Diff => {
                if let Some(first) = inputs.first() {
                    result = first.iter().cloned().collect();
                    for input in &inputs[1..] {
                        for (member, _) in input {
                            result.remove(member);
                        }
                    }
                }
            }
        }
        let mut out: Vec<ScoredMember> = result.into_iter().collect();
        // -0 and 0 are one score, as in Redis, so members decide between them.
        out.sort_by(|a, b| {
            a.1.partial_cmp(&b.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| a.0.cmp(&b.0))
        });
        Ok(out)
    }

    /// Stores scored members (distinct) as a new sorted set at `dst` expiring at `expire_at`,
    /// replacing whatever it held.
    pub(crate) fn zstore(
        &self,
        dst: &'a [u8],
        members: &[ScoredMember],
        expire_at: u64,
    ) -> Result<i64, Error> {
        self.replace_with_collection(dst, KeyKind::ZSet, expire_at, |write| {
            for (member, score) in members {
                write.put(Cf::Data, member, score_value(*score));
                write.put(Cf::Score, &score_suffix(*score, member), Vec::new());
            }
            write.size = members.len() as u64;
        })?;
        Ok(members.len() as i64)
    }

    /// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE.
    pub fn zcombine_store(
        &self,
        op: super::set::SetOp,
        dst: &'a [u8],
        keys: &[Bytes],
        weights: &[f64],
        aggregate: Aggregate,
    ) -> Result<i64, Error> {
        let mut all: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        all.push(dst);
        let _guard = self.lock(&all)?;
        let members = self.zcombine(op, keys, weights, aggregate)?;
        self.zstore(dst, &members, 0)
    }

    /// ZRANGESTORE.
    pub fn zrangestore(&self, dst: &'a [u8], src: &[u8], spec: &RangeSpec) -> Result<i64, Error> {
        let _guard = self.lock(&[src, dst])?;
        let members = self.zrange(src, spec)?;
        self.zstore(dst, &members, 0)
    }

    /// ZINTERCARD: the intersection size, counting at most `limit` (0: no limit).
    pub fn zintercard(&self, keys: &[Bytes], limit: usize) -> Result<i64, Error> {
        let n = self
            .zcombine(super::set::SetOp::Inter, keys, &[], Aggregate::Sum)?
            .len();
        Ok(if limit == 0 { n } else { n.min(limit) } as i64)
    }

    /// One page of ZSCAN.
    pub fn zscan(
        &self,
        key: &[u8],
        after: Option<&[u8]>,
        count: usize,
    ) -> Result<Page<ScoredMember>, Error> {
        let Some(zset) = self.zset_of(key)? else {
            return Ok(Page::default());
        };
        let page = self.scan_page(Cf::Data, key, &zset, after, count)?;
        let items = page
            .items
            .into_iter()
            .map(|(m, s)| (m, score_of_value(&s)))
            .collect();
        Ok(Page {
            items,
            resume: page.resume,
        })
    }
}

/// LIMIT offset count, applied to the matches of a range in order.
struct LimitWindow {
    skip: u64,
    take: u64,
}

impl LimitWindow {
    /// Whether the next match is returned (`Some(false)`: skipped); `None` once full.
    fn next(&mut self) -> Option<bool> {
        if self.skip > 0 {
            self.skip -= 1;
            return Some(false);
        }
        if self.take == 0 {
            return None;
        }
        self.take -= 1;
        Some(true)
    }
}

pub(super) fn scored_from_index(sub: &[u8]) -> ScoredMember {
    let score = score_from_bytes(sub).unwrap_or(0.0);
    (Bytes::copy_from_slice(&sub[8.min(sub.len())..]), score)
}

/// Stages the removal of `members` (present ones only) and returns how many there were.
fn remove_members(write: &mut CollectionWrite<'_>, members: &[Bytes]) -> Result<i64, Error> {
    if !write.existed {
        return Ok(0);
    }
    let subs: Vec<&[u8]> = members.iter().map(|m| m.as_ref()).collect();
    let scores = write.get_many(Cf::Data, &subs)?;
    let first = super::first_occurrences(members);
    let mut removed = 0;
    for (i, member) in members.iter().enumerate() {
        let Some(raw) = &scores[i] else { continue };
        if !first[i] {
            continue;
        }
        write.delete(Cf::Data, member);
        write.delete(Cf::Score, &score_suffix(score_of_value(raw), member));
        removed += 1;
    }
    write.size -= removed as u64;
    Ok(removed)
}
