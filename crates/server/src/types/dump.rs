//! DUMP and RESTORE: a key's value as Redis's serialization carries it
//! ([`shale_rdb::Value`]), and a value written back under a key. The codec itself is the
//! `shale-rdb` crate; this maps its values onto the types here.

use bytes::Bytes;
use roaring::RoaringBitmap;
use shale_rdb::dump::DumpError;
use shale_rdb::{RdbError, Value};
use shale_storage::metadata::{KeyKind, Metadata};

use super::zset::{RangeBy, RangeSpec};
use crate::error::Error;
use crate::keyspace::{now_ms, Change, Db};

/// What RESTORE did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    Created,
    /// The expiry was already past: nothing was created; `replaced` says whether an old key
    /// was deleted instead (REPLACE).
    Expired {
        replaced: bool,
    },
}

impl<'a> Db<'a> {
    /// The value of `key` and its expiry (Unix ms, 0 for none); `None` if it does not exist.
    /// Read under the key's lock, so a concurrent write cannot tear it.
    pub fn dump_value(&self, key: &[u8]) -> Result<Option<(Value, u64)>, Error> {
        let _guard = self.lock(&[key])?;
        let Some(meta) = self.live_meta(key)? else {
            return Ok(None);
        };
        // The readers below look the key up again; only the lookup above counts.
        let this = self.uncounted();
        let value = match meta.kind {
            KeyKind::String => Value::String(this.get(key)?.unwrap_or_default()),
            KeyKind::List => Value::List(this.lrange(key, 0, -1)?.into_items().collect()),
            KeyKind::Set => Value::Set(this.smembers(key)?),
            KeyKind::Hash => Value::Hash(this.hgetall(key)?.into_pairs()),
            KeyKind::ZSet => {
                let all = RangeSpec {
                    by: RangeBy::Rank(0, -1),
                    rev: false,
                    limit: None,
                };
                Value::SortedSet(this.zrange(key, &all)?)
            }
            KeyKind::Roaring => {
                let mut bitmap = RoaringBitmap::new();
                this.tr_visit_range(key, 0, u32::MAX, &mut |bit| {
                    bitmap.insert(bit);
                    true
                })?;
                let mut serialized = Vec::with_capacity(bitmap.serialized_size());
                bitmap
                    .serialize_into(&mut serialized)
                    .map_err(|e| Error::msg(format!("can't serialize a bitmap: {e}")))?;
                Value::Roaring(Bytes::from(serialized))
            }
            KeyKind::Stream => match this.stream_value(key)? {
                Some(stream) => Value::Stream(Box::new(stream)),
                None => return Ok(None),
            },
        };
        Ok(Some((value, meta.expire_at)))
    }

    /// RESTORE: writes `value` at `key`, expiring at `expire_at` (Unix ms, 0 for never).
    /// Without `replace`, an existing key is `BUSYKEY`; an expiry already past creates nothing
    /// (and, with `replace`, deletes the old key).
    pub fn restore(
        &self,
        key: &'a [u8],
        value: Value,
        expire_at: u64,
        replace: bool,
    ) -> Result<Restored, Error> {
        let _guard = self.lock(&[key])?;
        let now = now_ms();
        let stored = self.raw_meta(key)?;
        let live = stored.as_ref().filter(|m| !m.is_expired(now));
        if live.is_some() && !replace {
            return Err(Error::BusyKey);
        }
        if expire_at != 0 && expire_at <= now {
            if live.is_none() {
                return Ok(Restored::Expired { replaced: false });
            }
            let mut change = Change::default();
            self.stage_replace(&mut change, key, stored.as_ref(), None)?;
            self.write(change)?;
            return Ok(Restored::Expired { replaced: true });
        }
        match value {
            Value::String(data) => {
                let new = Metadata::string(data, expire_at);
                let mut change = Change::default();
                self.stage_replace(&mut change, key, stored.as_ref(), Some(&new))?;
                self.write(change)?;
            }
            Value::List(items) => self.store_list(key, &items, expire_at)?,
            Value::Set(members) => self.store_set(key, &members, expire_at)?,
            Value::Hash(pairs) => self.store_hash(key, &pairs, expire_at)?,
            Value::SortedSet(members) => {
                self.zstore(key, &members, expire_at)?;
            }
            Value::Roaring(serialized) => {
                let bitmap = RoaringBitmap::deserialize_from(&serialized[..])
                    .map_err(|e| DumpError::BadFormat(e.into()))?;
                if bitmap.is_empty() {
                    return Err(DumpError::BadFormat(RdbError::EmptyKey).into());
                }
                self.store_bitmap(key, &bitmap, expire_at)?;
            }
            Value::Stream(stream) => {
                self.store_stream(key, &stream, expire_at)?;
            }
        }
        Ok(Restored::Created)
    }
}
