//! Hashes: one element per field in the data family, `key|version|field → value`.

use bytes::Bytes;
use shale_storage::metadata::KeyKind;
use shale_storage::Cf;

use super::collection::{Page, ScanBuffer};
use super::first_occurrences;
use super::numbers::{add_long_doubles, FloatError};
use super::string::parse_strict_i64;
use crate::error::Error;
use crate::keyspace::Db;

impl<'a> Db<'a> {
    /// Replaces whatever `key` holds with a hash of `pairs` (distinct fields) expiring at
    /// `expire_at` (RESTORE); the caller holds the key's lock.
    pub(crate) fn store_hash(
        &self,
        key: &'a [u8],
        pairs: &[(Bytes, Bytes)],
        expire_at: u64,
    ) -> Result<(), Error> {
        self.replace_with_collection(key, KeyKind::Hash, expire_at, |write| {
            for (field, value) in pairs {
                write.put(Cf::Data, field, value.to_vec());
            }
            write.size = pairs.len() as u64;
        })
    }

    /// HSET/HMSET: returns how many fields were new.
    pub fn hset(&self, key: &[u8], pairs: &[(Bytes, Bytes)]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::Hash)?;
        let fields: Vec<&[u8]> = pairs.iter().map(|(f, _)| f.as_ref()).collect();
        let existing = write.get_many(Cf::Data, &fields)?;
        let first = first_occurrences(&fields);
        let mut added = 0;
        for (i, (field, value)) in pairs.iter().enumerate() {
            if existing[i].is_none() && first[i] {
                added += 1;
            }
            write.put(Cf::Data, field, value.to_vec());
        }
        write.size += added as u64;
        write.commit()?;
        Ok(added)
    }

    pub fn hsetnx(&self, key: &[u8], field: &[u8], value: &[u8]) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::Hash)?;
        if write.get(Cf::Data, field)?.is_some() {
            return Ok(false);
        }
        write.put(Cf::Data, field, value.to_vec());
        write.size += 1;
        write.commit()?;
        Ok(true)
    }

    pub fn hget(&self, key: &[u8], field: &[u8]) -> Result<Option<Bytes>, Error> {
        let Some(hash) = self.collection(key, KeyKind::Hash)? else {
            return Ok(None);
        };
        Ok(self
            .get_element(Cf::Data, key, &hash, field)?
            .map(Bytes::from))
    }

    pub fn hmget(&self, key: &[u8], fields: &[Bytes]) -> Result<Vec<Option<Bytes>>, Error> {
        let Some(hash) = self.collection(key, KeyKind::Hash)? else {
            return Ok(vec![None; fields.len()]);
        };
        let subs: Vec<&[u8]> = fields.iter().map(|f| f.as_ref()).collect();
        Ok(self
            .get_elements(Cf::Data, key, &hash, &subs)?
            .into_iter()
            .map(|v| v.map(Bytes::from))
            .collect())
    }

    /// Every field and its value, one after the other, in field order.
    pub(crate) fn hgetall(&self, key: &[u8]) -> Result<ScanBuffer, Error> {
        let Some(hash) = self.collection(key, KeyKind::Hash)? else {
            return Ok(ScanBuffer::default());
        };
        self.all_elements_read(Cf::Data, key, &hash)
    }

    pub fn hdel(&self, key: &[u8], fields: &[Bytes]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::Hash)?;
        if !write.existed {
            return Ok(0);
        }
        let subs: Vec<&[u8]> = fields.iter().map(|f| f.as_ref()).collect();
        let existing = write.get_many(Cf::Data, &subs)?;
        let first = first_occurrences(fields);
        let mut removed = 0;
        for (i, field) in fields.iter().enumerate() {
            if existing[i].is_some() && first[i] {
                write.delete(Cf::Data, field);
                removed += 1;
            }
        }
        if removed > 0 {
            write.size -= removed as u64;
            write.commit()?;
        }
        Ok(removed)
    }

    pub fn hlen(&self, key: &[u8]) -> Result<i64, Error> {
        Ok(self
            .collection(key, KeyKind::Hash)?
            .map_or(0, |h| h.size as i64))
    }

    pub fn hexists(&self, key: &[u8], field: &[u8]) -> Result<bool, Error> {
        Ok(self.hget(key, field)?.is_some())
    }

    pub fn hstrlen(&self, key: &[u8], field: &[u8]) -> Result<i64, Error> {
        Ok(self.hget(key, field)?.map_or(0, |v| v.len() as i64))
    }

    /// Read-modify-write of one field: `update` gets the current value.
    fn hupdate<R>(
        &self,
        key: &[u8],
        field: &[u8],
        update: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, R), Error>,
    ) -> Result<R, Error> {
        let _guard = self.lock(&[key])?;
        let mut write = self.open_for_write(key, KeyKind::Hash)?;
        let current = write.get(Cf::Data, field)?;
        let (value, result) = update(current.as_deref())?;
        if current.is_none() {
            write.size += 1;
        }
        write.put(Cf::Data, field, value);
        write.commit()?;
        Ok(result)
    }

    pub fn hincrby(&self, key: &[u8], field: &[u8], delta: i64) -> Result<i64, Error> {
        self.hupdate(key, field, |current| {
            let old = match current {
                Some(v) => {
                    parse_strict_i64(v).ok_or_else(|| Error::msg("hash value is not an integer"))?
                }
                None => 0,
            };
            let new = old.checked_add(delta).ok_or(Error::Overflow)?;
            Ok((new.to_string().into_bytes(), new))
        })
    }

    pub fn hincrbyfloat(&self, key: &[u8], field: &[u8], increment: &[u8]) -> Result<Bytes, Error> {
        self.hupdate(key, field, |current| {
            let text = add_long_doubles(current, increment).map_err(|e| match e {
                FloatError::CurrentNotFloat => Error::msg("hash value is not a float"),
                FloatError::IncrementNotFloat => Error::NotFloat,
                FloatError::NotFinite => Error::msg("increment would produce NaN or Infinity"),
            })?;
            Ok((text.clone().into_bytes(), Bytes::from(text)))
        })
    }

    /// HRANDFIELD: `count` as in Redis (negative allows repeats); `None` picks one field.
    pub fn hrandfield(&self, key: &[u8], count: Option<i64>) -> Result<Vec<(Bytes, Bytes)>, Error> {
        let Some(hash) = self.collection(key, KeyKind::Hash)? else {
            return Ok(Vec::new());
        };
        self.random_elements(Cf::Data, key, &hash, count.unwrap_or(1))
    }

    /// One page of HSCAN from the field after `after` (`None`: the start).
    pub fn hscan(
        &self,
        key: &[u8],
        after: Option<&[u8]>,
        count: usize,
    ) -> Result<Page<(Bytes, Bytes)>, Error> {
        let Some(hash) = self.collection(key, KeyKind::Hash)? else {
            return Ok(Page::default());
        };
        self.scan_page(Cf::Data, key, &hash, after, count)
    }
}
