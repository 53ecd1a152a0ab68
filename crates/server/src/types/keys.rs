//! Operations that work on a key of any type: existence, deletion, expiry, renaming, copying,
//! moving, enumeration and flushing.

use bytes::Bytes;
use rand::Rng;
use shale_storage::keys as k;
use shale_storage::metadata::{peek_header, Body, KeyKind, Metadata};
use shale_storage::{Cf, ScanDirection};

use super::collection::Collection;
use super::packed_elements;
use crate::error::Error;
use crate::keyspace::{now_ms, Change, Db};

/// The NX/XX/GT/LT options of the EXPIRE family; every one given must hold.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExpireCondition {
    /// Only if the key has no expiry.
    pub nx: bool,
    /// Only if the key has an expiry.
    pub xx: bool,
    /// Only if the new expiry is later (no expiry counts as infinitely late).
    pub gt: bool,
    /// Only if the new expiry is earlier.
    pub lt: bool,
}

/// One page of SCAN.
pub struct ScanPage {
    pub cursor: u64,
    pub keys: Vec<Bytes>,
}

/// SCAN cursors keep the slot in their low bits so that a forgotten cursor resumes at the
/// start of its slot (see `cursor`).
const SLOT_BITS: u32 = 14;

impl<'a> Db<'a> {
    pub fn exists(&self, keys: &[Bytes]) -> Result<i64, Error> {
        let mut count = 0;
        for key in keys {
            count += self.live_meta(key)?.is_some() as i64;
        }
        Ok(count)
    }

    pub fn delete(&self, keys: &[Bytes]) -> Result<i64, Error> {
        self.delete_keys(keys, false)
    }

    /// DEL; `moved` for keys of slots that moved to another node, which clients may no longer
    /// write here.
    fn delete_keys(&self, keys: &[Bytes], moved: bool) -> Result<i64, Error> {
        let _guard = self.lock(keys)?;
        let mut change = Change::default();
        change.ignores_slot_moves = moved;
        let mut deleted = 0;
        let first = super::first_occurrences(keys);
        let now = now_ms();
        for (key, first) in keys.iter().zip(first) {
            if !first {
                continue;
            }
            if let Some(meta) = self.raw_meta(key)? {
                deleted += !meta.is_expired(now) as i64;
                self.stage_replace(&mut change, key, Some(&meta), None)?;
            }
        }
        self.write(change)?;
        Ok(deleted)
    }

    pub fn key_type(&self, key: &[u8]) -> Result<Option<KeyKind>, Error> {
        Ok(self.live_meta(key)?.map(|m| m.kind))
    }

    /// Whether `key` exists, and WRONGTYPE if it is not one of `kinds`: for commands that, as
    /// in Redis, look their key up before they read the rest of their arguments.
    pub fn exists_as(&self, key: &[u8], kinds: &[KeyKind]) -> Result<bool, Error> {
        match self.key_type(key)? {
            Some(kind) if !kinds.contains(&kind) => Err(Error::WrongType),
            found => Ok(found.is_some()),
        }
    }

    /// The absolute expiry of `key`: `None` if missing, `Some(0)` if it has none.
    pub fn expire_at(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        Ok(self.live_meta(key)?.map(|m| m.expire_at))
    }

    /// Sets the absolute expiry of `key` (Unix ms, may be in the past, which deletes the key).
    /// Returns whether the key existed and the condition held.
    pub fn set_expiry(
        &self,
        key: &[u8],
        at_ms: i64,
        condition: ExpireCondition,
    ) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let now = now_ms();
        let Some(old) = self.raw_meta(key)?.filter(|m| !m.is_expired(now)) else {
            return Ok(false);
        };
        let has_expiry = old.expire_at != 0;
        let current = old.expire_at as i64;
        if (condition.nx && has_expiry)
            || (condition.xx && !has_expiry)
            || (condition.gt && (!has_expiry || at_ms <= current))
            || (condition.lt && has_expiry && at_ms >= current)
        {
            return Ok(false);
        }
        let mut change = Change::default();
        if at_ms <= now as i64 {
            self.stage_replace(&mut change, key, Some(&old), None)?;
        } else {
            let new = Metadata {
                expire_at: at_ms as u64,
                ..old.clone()
            };
            self.stage_replace(&mut change, key, Some(&old), Some(&new))?;
        }
        self.write(change)?;
        Ok(true)
    }

    pub fn persist(&self, key: &[u8]) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let Some(old) = self.live_meta(key)? else {
            return Ok(false);
        };
        if old.expire_at == 0 {
            return Ok(false);
        }
        let new = Metadata {
            expire_at: 0,
            ..old.clone()
        };
        let mut change = Change::default();
        self.stage_replace(&mut change, key, Some(&old), Some(&new))?;
        self.write(change)?;
        Ok(true)
    }

    /// RENAME and RENAMENX: returns `false` only when `only_if_absent` and `dst` exists.
    pub fn rename(&self, src: &[u8], dst: &[u8], only_if_absent: bool) -> Result<bool, Error> {
        let _guard = self.lock(&[src, dst])?;
        let now = now_ms();
        let Some(old_src) = self.raw_meta(src)?.filter(|m| !m.is_expired(now)) else {
            return Err(Error::NoSuchKey);
        };
        if src == dst {
            return Ok(!only_if_absent);
        }
        let old_dst = self.raw_meta(dst)?;
        if only_if_absent && old_dst.as_ref().is_some_and(|m| !m.is_expired(now)) {
            return Ok(false);
        }
        let mut change = Change::default();
        let moved = self.stage_clone(&mut change, src, &old_src, *self, dst)?;
        self.stage_replace(&mut change, dst, old_dst.as_ref(), Some(&moved))?;
        self.stage_replace(&mut change, src, Some(&old_src), None)?;
        self.write(change)?;
        Ok(true)
    }

    /// COPY: returns whether the copy was made.
    pub fn copy_to(
        &self,
        src: &[u8],
        target: Db<'_>,
        dst: &[u8],
        replace: bool,
    ) -> Result<bool, Error> {
        let _guard = self.lock_across(&[(self.index, src), (target.index, dst)])?;
        let now = now_ms();
        let Some(source) = self.live_meta(src)? else {
            return Ok(false);
        };
        let old_dst = target.raw_meta(dst)?;
        if !replace && old_dst.as_ref().is_some_and(|m| !m.is_expired(now)) {
            return Ok(false);
        }
        let mut change = Change::default();
        let copy = self.stage_clone(&mut change, src, &source, target, dst)?;
        target.stage_replace(&mut change, dst, old_dst.as_ref(), Some(&copy))?;
        self.write(change)?;
        Ok(true)
    }

    /// MOVE: returns whether the key moved (it must exist here and not in `target`).
    pub fn move_to(&self, key: &[u8], target: Db<'_>) -> Result<bool, Error> {
        let _guard = self.lock_across(&[(self.index, key), (target.index, key)])?;
        let now = now_ms();
        let Some(source) = self.raw_meta(key)?.filter(|m| !m.is_expired(now)) else {
            return Ok(false);
        };
        let old_dst = target.raw_meta(key)?;
        if old_dst.as_ref().is_some_and(|m| !m.is_expired(now)) {
            return Ok(false);
        }
        let mut change = Change::default();
        let moved = self.stage_clone(&mut change, key, &source, target, key)?;
        target.stage_replace(&mut change, key, old_dst.as_ref(), Some(&moved))?;
        self.stage_replace(&mut change, key, Some(&source), None)?;
        self.write(change)?;
        Ok(true)
    }

    /// Stages a copy of `meta`'s content under `dst` in `target` and returns the metadata the
    /// copy needs. Elements are keyed by their user key, so a collection is copied element by
    /// element under a fresh version.
    fn stage_clone(
        &self,
        change: &mut Change,
        src: &[u8],
        meta: &Metadata,
        target: Db<'_>,
        dst: &[u8],
    ) -> Result<Metadata, Error> {
        let Body::Collection {
            version,
            size,
            extra,
        } = &meta.body
        else {
            return Ok(meta.clone());
        };
        let new_version = self.ks.versions.next()?;
        let old_prefix = k::element_prefix(self.index, src, *version);
        let new_prefix = k::element_prefix(target.index, dst, new_version);
        let end = k::prefix_end(&old_prefix);
        let families = if meta.holds_no_records() {
            &[][..]
        } else {
            &[Cf::Data, Cf::Score][..]
        };
        for &cf in families {
            self.engine().scan(
                cf,
                &old_prefix,
                &end,
                ScanDirection::Forward,
                &mut |key, value| {
                    let mut new_key = new_prefix.clone();
                    new_key.extend_from_slice(&key[old_prefix.len()..]);
                    change.batch.put(cf, new_key, value.to_vec());
                    true
                },
            )?;
        }
        Ok(Metadata {
            body: Body::Collection {
                version: new_version,
                size: *size,
                extra: extra.clone(),
            },
            ..meta.clone()
        })
    }

    pub fn touch(&self, keys: &[Bytes]) -> Result<i64, Error> {
        self.exists(keys)
    }

    /// OBJECT ENCODING: the name Redis would give the key's in-memory encoding.
    /// OBJECT REFCOUNT: 1 for every value a client can reach, except the integers 0 to 9999,
    /// which Redis shares (with `noeviction`, Shale's only policy) and counts as `INT_MAX`.
    pub fn refcount(&self, key: &[u8]) -> Result<Option<i64>, Error> {
        Ok(self.live_meta(key)?.map(|meta| match &meta.body {
            Body::Inline(v) if meta.kind == KeyKind::String && is_shared_integer(v) => {
                i32::MAX as i64
            }
            _ => 1,
        }))
    }

    /// OBJECT IDLETIME: seconds since the key was last read or written (see `access`).
    pub fn idle_secs(&self, key: &[u8]) -> Result<Option<u64>, Error> {
        let exists = self.live_meta(key)?.is_some();
        Ok(exists.then(|| self.ks.access.idle_secs(self.index, key)))
    }

    pub fn encoding(&self, key: &[u8]) -> Result<Option<&'static str>, Error> {
        let Some(meta) = self.live_meta(key)? else {
            return Ok(None);
        };
        // The elements packed in the metadata of a small hash, set, sorted set or list.
        let packed = Collection::of(meta.clone()).and_then(|c| c.packed);
        Ok(Some(match (&meta.kind, &meta.body) {
            (KeyKind::String, Body::Inline(v)) if is_redis_int(v) => "int",
            (KeyKind::String, Body::Inline(v)) if v.len() <= 44 => "embstr",
            (KeyKind::String, _) => "raw",
            (KeyKind::Hash, _) if packed.is_some() => "listpack",
            (KeyKind::Hash, _) => "hashtable",
            (KeyKind::List, _) if packed.is_some() => "listpack",
            (KeyKind::List, _) => "quicklist",
            // As Redis 7.2 names its small sets.
            (KeyKind::Set, _) => match &packed {
                Some(members)
                    if packed_elements::entries(members)
                        .all(|entry| entry.is_some_and(|(member, _)| is_redis_int(member))) =>
                {
                    "intset"
                }
                Some(_) => "listpack",
                None => "hashtable",
            },
            (KeyKind::ZSet, _) if packed.is_some() => "listpack",
            (KeyKind::ZSet, _) => "skiplist",
            (KeyKind::Roaring, _) => "roaring",
            (KeyKind::Stream, _) => "stream",
        }))
    }

    /// Up to `count` live keys in storage order, after `after` (from the first when `None`):
    /// a walk over every key that, unlike SCAN, keeps no cursor (an RDB export).
    pub fn keys_after(&self, after: Option<&[u8]>, count: usize) -> Result<Vec<Bytes>, Error> {
        let start = after.map(|key| {
            let mut raw = k::meta_key(self.index, key);
            raw.push(0);
            raw
        });
        let mut out = Vec::with_capacity(count);
        self.visit_live_keys(start, &mut |key| {
            out.push(Bytes::copy_from_slice(key));
            out.len() < count
        })?;
        Ok(out)
    }

    /// Every live key matching `pattern`.
    pub fn keys(&self, pattern: &[u8]) -> Result<Vec<Bytes>, Error> {
        let match_all = pattern == b"*";
        let mut out = Vec::new();
        self.visit_live_keys(None, &mut |key| {
            if match_all || super::pattern::glob_match(pattern, key, false) {
                out.push(Bytes::copy_from_slice(key));
            }
            true
        })?;
        Ok(out)
    }

    /// Visits the live keys in storage order from the metadata key `start` (the first when
    /// `None`) while `visit` returns true.
    fn visit_live_keys(
        &self,
        start: Option<Vec<u8>>,
        visit: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<(), Error> {
        let (first, end) = k::db_range(self.index);
        let now = now_ms();
        self.engine().scan(
            Cf::Meta,
            &start.unwrap_or(first),
            &end,
            ScanDirection::Forward,
            &mut |raw, value| is_expired_record(value, now) || visit(k::user_key_of_meta(raw)),
        )?;
        Ok(())
    }

    /// One page of SCAN: visits about `count` keys from `cursor`.
    pub fn scan(
        &self,
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        kind: Option<KeyKind>,
    ) -> Result<ScanPage, Error> {
        let scope = [self.index];
        let (db_start, end) = k::db_range(self.index);
        let start = if cursor == 0 {
            db_start
        } else {
            let slot = (cursor & ((1 << SLOT_BITS) - 1)) as u16;
            self.ks
                .cursors
                .load(cursor >> SLOT_BITS, &scope)
                .unwrap_or_else(|| {
                    let mut at = db_start.clone();
                    at.extend_from_slice(&slot.to_be_bytes());
                    at
                })
        };
        let now = now_ms();
        let mut keys = Vec::new();
        let mut visited = 0;
        let mut resume: Option<Vec<u8>> = None;
        self.engine().scan(
            Cf::Meta,
            &start,
            &end,
            ScanDirection::Forward,
            &mut |raw, value| {
                if visited == count {
                    resume = Some(raw.to_vec());
                    return false;
                }
                visited += 1;
                let key = k::user_key_of_meta(raw);
                let Some(meta_kind) = record_kind(value, now) else {
                    return true;
                };
                if kind.is_some_and(|want| want != meta_kind) {
                    return true;
                }
                if pattern.is_some_and(|p| !super::pattern::glob_match(p, key, false)) {
                    return true;
                }
                keys.push(Bytes::copy_from_slice(key));
                true
            },
        )?;
        let cursor = match resume {
            None => 0,
            Some(position) => {
                let slot = u16::from_be_bytes([position[1], position[2]]) as u64;
                let id = self.ks.cursors.store(scope.to_vec(), position);
                (id << SLOT_BITS) | slot
            }
        };
        Ok(ScanPage { cursor, keys })
    }

    /// Up to `count` live keys of a cluster slot, in key order (CLUSTER GETKEYSINSLOT).
    pub fn keys_in_slot(&self, slot: u16, count: usize) -> Result<Vec<Bytes>, Error> {
        self.keys_in_slots(slot, slot, None, count, false)
    }

    /// Up to `count` keys of the slots `first..=last` after `after`, in slot and key order;
    /// with `expired`, also keys past their expiry that are still stored.
    pub fn keys_in_slots(
        &self,
        first: u16,
        last: u16,
        after: Option<&[u8]>,
        count: usize,
        expired: bool,
    ) -> Result<Vec<Bytes>, Error> {
        let mut keys = Vec::new();
        if count == 0 {
            return Ok(keys);
        }
        let (mut start, end) = k::slot_range(self.index, first, last);
        if let Some(after) = after {
            start = k::meta_key(self.index, after);
            start.push(0);
        }
        let now = now_ms();
        self.engine().scan(
            Cf::Meta,
            &start,
            &end,
            ScanDirection::Forward,
            &mut |raw, value| {
                if expired || !is_expired_record(value, now) {
                    keys.push(Bytes::copy_from_slice(k::user_key_of_meta(raw)));
                }
                keys.len() < count
            },
        )?;
        Ok(keys)
    }

    /// The live keys of a cluster slot (CLUSTER COUNTKEYSINSLOT): a scan of the slot's
    /// metadata, where Redis keeps a count.
    pub fn count_in_slot(&self, slot: u16) -> Result<usize, Error> {
        let (start, end) = k::slot_range(self.index, slot, slot);
        let now = now_ms();
        let mut count = 0;
        self.engine().scan(
            Cf::Meta,
            &start,
            &end,
            ScanDirection::Forward,
            &mut |_, value| {
                count += !is_expired_record(value, now) as usize;
                true
            },
        )?;
        Ok(count)
    }

    /// Deletes a batch of keys of the slots `first..=last` after `after` (a few hundred, as
    /// DEL deletes them, while clients' writes to the slots may be refused) and returns the
    /// first and the last, or `None` when none is left. For slots that moved away, or that an
    /// import left half done. Each batch goes on after the last: one that started over from
    /// the slots' first key would step over every tombstone the batches before it left.
    pub fn delete_slot_batch(
        &self,
        first: u16,
        last: u16,
        after: Option<&[u8]>,
    ) -> Result<Option<(Bytes, Bytes)>, Error> {
        let keys = self.keys_in_slots(first, last, after, 256, true)?;
        let (Some(head), Some(tail)) = (keys.first().cloned(), keys.last().cloned()) else {
            return Ok(None);
        };
        self.delete_keys(&keys, true)?;
        Ok(Some((head, tail)))
    }

    /// A random live key, found by seeking to a random slot.
    pub fn random_key(&self) -> Result<Option<Bytes>, Error> {
        let (db_start, db_end) = k::db_range(self.index);
        let now = now_ms();
        for _ in 0..16 {
            let mut pivot = db_start.clone();
            pivot.extend_from_slice(&rand::rng().random_range(0..k::SLOTS).to_be_bytes());
            for (lower, upper) in [(&pivot, &db_end), (&db_start, &pivot)] {
                let mut found = None;
                let mut skipped_expired = false;
                self.engine().scan(
                    Cf::Meta,
                    lower,
                    upper,
                    ScanDirection::Forward,
                    &mut |raw, value| {
                        if is_expired_record(value, now) {
                            skipped_expired = true;
                            return true;
                        }
                        found = Some(Bytes::copy_from_slice(k::user_key_of_meta(raw)));
                        false
                    },
                )?;
                if found.is_some() {
                    return Ok(found);
                }
                if skipped_expired {
                    break;
                }
            }
            if self.size()? == 0 {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// The number of live keys: the key counter minus the keys that have expired but are not
    /// reaped yet, which the expiry index lists.
    pub fn size(&self) -> Result<u64, Error> {
        let _due = self.ks.due_expiry_lock.lock();
        let total = self.counted(false);
        let due = self.due_expiries(now_ms())?;
        Ok((total - due as i64).max(0) as u64)
    }

    /// The number of live keys with an expiry.
    pub fn expiring_size(&self) -> Result<u64, Error> {
        let _due = self.ks.due_expiry_lock.lock();
        let total = self.counted(true);
        let due = self.due_expiries(now_ms())?;
        Ok((total - due as i64).max(0) as u64)
    }
}

/// The type of a raw metadata record, unless it has expired.
fn record_kind(value: &[u8], now: u64) -> Option<KeyKind> {
    let (kind, expire_at) = peek_header(value)?;
    (expire_at == 0 || expire_at > now).then_some(kind)
}

fn is_expired_record(value: &[u8], now: u64) -> bool {
    record_kind(value, now).is_none()
}

/// Whether Redis would store this string as one of its shared integers, 0 to 9999.
fn is_shared_integer(v: &[u8]) -> bool {
    is_redis_int(v)
        && std::str::from_utf8(v).is_ok_and(|s| s.parse::<u16>().is_ok_and(|n| n < 10000))
}

/// Whether Redis would store this string as an integer (OBJECT ENCODING "int").
fn is_redis_int(v: &[u8]) -> bool {
    v.len() <= 20 && super::string::parse_strict_i64(v).is_some()
}
