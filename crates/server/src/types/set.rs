//! Sets: one element per member in the data family, `key|version|member → ""`.

use std::collections::BTreeSet;

use bytes::Bytes;
use shale_storage::metadata::KeyKind;
use shale_storage::Cf;

use super::collection::{Collection, Page};
use super::first_occurrences;
use crate::error::Error;
use crate::keyspace::Db;

/// The set algebra of SINTER, SUNION and SDIFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    Inter,
    Union,
    Diff,
}

impl<'a> Db<'a> {
    pub fn sadd(&self, key: &[u8], members: &[Bytes]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::Set)?;
        let subs: Vec<&[u8]> = members.iter().map(|m| m.as_ref()).collect();
        let existing = write.get_many(Cf::Data, &subs)?;
        let first = first_occurrences(members);
        let mut added = 0;
        for (i, member) in members.iter().enumerate() {
            if existing[i].is_none() && first[i] {
                write.put(Cf::Data, member, Vec::new());
                added += 1;
            }
        }
        if added > 0 {
            self.ks.sampling.forget_gaps(write.version);
            write.size += added as u64;
            write.commit()?;
        }
        Ok(added)
    }

    pub fn srem(&self, key: &[u8], members: &[Bytes]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::Set)?;
        if !write.existed {
            return Ok(0);
        }
        let subs: Vec<&[u8]> = members.iter().map(|m| m.as_ref()).collect();
        let existing = write.get_many(Cf::Data, &subs)?;
        let first = first_occurrences(members);
        let mut removed = 0;
        for (i, member) in members.iter().enumerate() {
            if existing[i].is_some() && first[i] {
                write.delete(Cf::Data, member);
                removed += 1;
            }
        }
        if removed > 0 {
            write.size -= removed as u64;
            write.commit()?;
        }
        Ok(removed)
    }

    fn set_of(&self, key: &[u8]) -> Result<Option<Collection>, Error> {
        self.collection(key, KeyKind::Set)
    }

    pub fn smembers(&self, key: &[u8]) -> Result<Vec<Bytes>, Error> {
        let Some(set) = self.set_of(key)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .all_elements(Cf::Data, key, &set)?
            .into_iter()
            .map(|(m, _)| m)
            .collect())
    }

    pub fn smismember(&self, key: &[u8], members: &[Bytes]) -> Result<Vec<bool>, Error> {
        let Some(set) = self.set_of(key)? else {
            return Ok(vec![false; members.len()]);
        };
        let subs: Vec<&[u8]> = members.iter().map(|m| m.as_ref()).collect();
        Ok(self
            .get_elements(Cf::Data, key, &set, &subs)?
            .iter()
            .map(Option::is_some)
            .collect())
    }

    pub fn scard(&self, key: &[u8]) -> Result<i64, Error> {
        Ok(self.set_of(key)?.map_or(0, |s| s.size as i64))
    }

    /// SRANDMEMBER with Redis's count rules.
    pub fn srandmember(&self, key: &[u8], count: i64) -> Result<Vec<Bytes>, Error> {
        let Some(set) = self.set_of(key)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .random_elements(Cf::Data, key, &set, count)?
            .into_iter()
            .map(|(m, _)| m)
            .collect())
    }

    /// SPOP: removes and returns up to `count` random members.
    pub fn spop(&self, key: &[u8], count: u64) -> Result<Vec<Bytes>, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::Set)?;
        if !write.existed {
            return Ok(Vec::new());
        }
        let pick = self.pick_for_pop(Cf::Data, key, &write.collection(), count)?;
        for (member, _) in &pick.elements {
            write.delete(Cf::Data, member);
        }
        write.size -= pick.elements.len() as u64;
        write.commit()?;
        self.ks.sampling.keep(pick.learnt);
        Ok(pick.elements.into_iter().map(|(m, _)| m).collect())
    }

    /// SMOVE: returns whether the member was in `src`.
    pub fn smove(&self, src: &[u8], dst: &[u8], member: &[u8]) -> Result<bool, Error> {
        let _guard = self.lock(&[src, dst])?;
        let mut from = self.open_for_write(src, KeyKind::Set)?;
        if !from.existed {
            return Ok(false);
        }
        let mut to = self.open_for_write(dst, KeyKind::Set)?;
        if from.get(Cf::Data, member)?.is_none() {
            return Ok(false);
        }
        if src == dst {
            return Ok(true);
        }
        from.delete(Cf::Data, member);
        from.size -= 1;
        let mut change = from.stage()?;
        // A destination that has the member already is not written: as in Redis, it gets no
        // `sadd` event and its watchers keep their transactions.
        if to.get(Cf::Data, member)?.is_none() {
            self.ks.sampling.forget_gaps(to.version);
            to.put(Cf::Data, member, Vec::new());
            to.size += 1;
            change.append(to.stage()?);
        }
        self.write(change)?;
        Ok(true)
    }

    /// Loads the members of every key for SINTER/SUNION/SDIFF (missing keys are empty sets).
    fn load_sets(&self, keys: &[Bytes]) -> Result<Vec<(Bytes, Option<Collection>)>, Error> {
        keys.iter()
            .map(|key| Ok((key.clone(), self.set_of(key)?)))
            .collect()
    }

    /// SINTER, SUNION, SDIFF, in member order.
    pub fn set_algebra(&self, op: SetOp, keys: &[Bytes]) -> Result<Vec<Bytes>, Error> {
        let sets = self.load_sets(keys)?;
        match op {
            SetOp::Union => {
                let mut out = BTreeSet::new();
                for (key, set) in &sets {
                    if let Some(set) = set {
                        out.extend(
                            self.all_elements(Cf::Data, key, set)?
                                .into_iter()
                                .map(|(m, _)| m),
                        );
                    }
                }
                Ok(out.into_iter().collect())
            }
            SetOp::Inter => self.intersect(&sets, usize::MAX),
            SetOp::Diff => {
                let Some((first_key, Some(first))) = sets.first() else {
                    return Ok(Vec::new());
                };
                let mut out: Vec<Bytes> = self
                    .all_elements(Cf::Data, first_key, first)?
                    .into_iter()
                    .map(|(m, _)| m)
                    .collect();
                for (key, set) in &sets[1..] {
                    let Some(set) = set else { continue };
                    if out.is_empty() {
                        break;
                    }
                    let subs: Vec<&[u8]> = out.iter().map(|m| m.as_ref()).collect();
                    let present = self.get_elements(Cf::Data, key, set, &subs)?;
                    out = out
                        .into_iter()
                        .zip(present)
                        .filter(|(_, p)| p.is_none())
                        .map(|(m, _)| m)
                        .collect();
                }
                Ok(out)
            }
        }
    }

    /// Members of the smallest set that all others contain, stopping at `limit`.
    fn intersect(
        &self,
        sets: &[(Bytes, Option<Collection>)],
        limit: usize,
    ) -> Result<Vec<Bytes>, Error> {
        if sets.iter().any(|(_, s)| s.is_none()) {
            return Ok(Vec::new());
        }
        let smallest = (0..sets.len())
            .min_by_key(|&i| sets[i].1.as_ref().map_or(0, |s| s.size))
            .unwrap_or(0);
        let (small_key, small) = &sets[smallest];
        let Some(small) = small else {
            return Ok(Vec::new());
        };
        let mut out: Vec<Bytes> = self
            .all_elements(Cf::Data, small_key, small)?
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        for (i, (key, set)) in sets.iter().enumerate() {
            let Some(set) = set else { continue };
            if i == smallest || out.is_empty() {
                continue;
            }
            let subs: Vec<&[u8]> = out.iter().map(|m| m.as_ref()).collect();
            let present = self.get_elements(Cf::Data, key, set, &subs)?;
            out = out
                .into_iter()
                .zip(present)
                .filter(|(_, p)| p.is_some())
                .map(|(m, _)| m)
                .collect();
        }
        out.truncate(limit);
        Ok(out)
    }

    pub fn sintercard(&self, keys: &[Bytes], limit: usize) -> Result<i64, Error> {
        let sets = self.load_sets(keys)?;
        Ok(self
            .intersect(&sets, if limit == 0 { usize::MAX } else { limit })?
            .len() as i64)
    }

    /// SINTERSTORE, SUNIONSTORE, SDIFFSTORE: returns the size of the stored set.
    pub fn set_algebra_store(&self, op: SetOp, dst: &[u8], keys: &[Bytes]) -> Result<i64, Error> {
        let mut all: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        all.push(dst);
        let _guard = self.lock(&all)?;
        let members = self.set_algebra(op, keys)?;
        self.store_set(dst, &members, 0)?;
        Ok(members.len() as i64)
    }

    /// Replaces whatever `dst` holds with a set of `members` (distinct); the caller holds the
    /// key's lock.
    pub(crate) fn store_set(
        &self,
        dst: &'a [u8],
        members: &[Bytes],
        expire_at: u64,
    ) -> Result<(), Error> {
        self.replace_with_collection(dst, KeyKind::Set, expire_at, |write| {
            for member in members {
                write.put(Cf::Data, member, Vec::new());
            }
            write.size = members.len() as u64;
        })
    }

    /// One page of SSCAN.
    pub fn sscan(
        &self,
        key: &[u8],
        after: Option<&[u8]>,
        count: usize,
    ) -> Result<Page<Bytes>, Error> {
        let Some(set) = self.set_of(key)? else {
            return Ok(Page::default());
        };
        let page = self.scan_page(Cf::Data, key, &set, after, count)?;
        Ok(Page {
            items: page.items.into_iter().map(|(m, _)| m).collect(),
            resume: page.resume,
        })
    }
}
