//! Strings: values stored inline in their metadata record, so GET is one point read.

use bytes::Bytes;
use shale_storage::keys as k;
use shale_storage::metadata::{Body, KeyKind, Metadata};
use shale_storage::Cf;

use super::numbers::{add_long_doubles, FloatError};
use crate::error::Error;
use crate::keyspace::{now_ms, Change, Db};

/// The NX/XX condition of SET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetCondition {
    Always,
    IfAbsent,
    IfPresent,
}

/// What a write does to the key's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryChange {
    /// Remove any expiry (plain SET).
    Clear,
    /// Keep the current expiry (KEEPTTL; GETEX without options).
    Keep,
    /// Expire at this Unix time in ms; a time in the past deletes the key.
    At(i64),
}

#[derive(Debug, Clone, Copy)]
pub struct SetOptions {
    pub condition: SetCondition,
    pub expiry: ExpiryChange,
    /// Return the previous value (SET ... GET, GETSET).
    pub get: bool,
}

impl Default for SetOptions {
    fn default() -> Self {
        SetOptions {
            condition: SetCondition::Always,
            expiry: ExpiryChange::Clear,
            get: false,
        }
    }
}

pub struct SetOutcome {
    pub written: bool,
    pub previous: Option<Bytes>,
}

/// Parses an integer the way Redis's `string2ll` does: no sign but `-`, no spaces, no leading
/// zeros, at most 20 characters.
pub fn parse_strict_i64(v: &[u8]) -> Option<i64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits[0] == b'0' && (digits.len() > 1 || v[0] == b'-') {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

impl<'a> Db<'a> {
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        match self.typed_meta(key, KeyKind::String)? {
            Some(meta) => Ok(Some(self.string_bytes(key, &meta)?)),
            None => Ok(None),
        }
    }

    /// MGET: one batched read; keys of other types read as nil.
    pub fn mget(&self, keys: &[Bytes]) -> Result<Vec<Option<Bytes>>, Error> {
        let raw_keys: Vec<Vec<u8>> = keys
            .iter()
            .map(|key| k::meta_key(self.index, key))
            .collect();
        let now = now_ms();
        let mut out = Vec::with_capacity(keys.len());
        for (key, raw) in keys
            .iter()
            .zip(self.engine().multi_get(Cf::Meta, &raw_keys)?)
        {
            let meta = raw
                .map(Metadata::decode)
                .transpose()?
                .filter(|meta| !meta.is_expired(now));
            // A key of another type is found, as Redis counts it, and reads as nil.
            self.record_lookup(meta.is_some());
            out.push(meta.and_then(|meta| self.string_bytes(key, &meta).ok()));
        }
        Ok(out)
    }

    pub fn set(&self, key: &[u8], value: Bytes, options: SetOptions) -> Result<SetOutcome, Error> {
        let _guard = self.lock(&[key])?;
        let now = now_ms();
        let stored = self.raw_meta(key)?;
        let live = stored.as_ref().filter(|m| !m.is_expired(now));
        if options.get {
            self.record_lookup(live.is_some());
        }
        let previous = match live {
            Some(meta) if options.get => Some(self.string_bytes(key, meta)?),
            _ => None,
        };
        let allowed = match options.condition {
            SetCondition::Always => true,
            SetCondition::IfAbsent => live.is_none(),
            SetCondition::IfPresent => live.is_some(),
        };
        if !allowed {
            return Ok(SetOutcome {
                written: false,
                previous,
            });
        }
        let expire_at = match options.expiry {
            ExpiryChange::Clear => Some(0),
            ExpiryChange::Keep => Some(live.map_or(0, |m| m.expire_at)),
            ExpiryChange::At(at) if at <= now as i64 => None,
            ExpiryChange::At(at) => Some(at as u64),
        };
        let new = expire_at.map(|at| Metadata::string(value, at));
        let mut change = Change::default();
        self.stage_replace(&mut change, key, stored.as_ref(), new.as_ref())?;
        self.write(change)?;
        Ok(SetOutcome {
            written: true,
            previous,
        })
    }

    /// MSET and MSETNX: all pairs in one batch; with `only_if_none_exist`, nothing is written if
    /// any key exists. Returns whether the pairs were written.
    pub fn mset(&self, pairs: &[(Bytes, Bytes)], only_if_none_exist: bool) -> Result<bool, Error> {
        let keys: Vec<&Bytes> = pairs.iter().map(|(key, _)| key).collect();
        let _guard = self.lock(&keys)?;
        let now = now_ms();
        let stored = self.raw_metas(&keys)?;
        if only_if_none_exist && stored.iter().flatten().any(|m| !m.is_expired(now)) {
            return Ok(false);
        }
        // A key given twice takes its last value; stage each key once, against what is stored.
        let mut change = Change::default();
        let keys_last_first: Vec<&Bytes> = keys.iter().rev().copied().collect();
        let last = super::first_occurrences(&keys_last_first);
        for (i, (key, value)) in pairs.iter().enumerate() {
            if !last[pairs.len() - 1 - i] {
                continue;
            }
            let new = Metadata::string(value.clone(), 0);
            self.stage_replace(&mut change, key, stored[i].as_ref(), Some(&new))?;
        }
        self.write(change)?;
        Ok(true)
    }

    pub fn getdel(&self, key: &[u8]) -> Result<Option<Bytes>, Error> {
        let _guard = self.lock(&[key])?;
        let Some(meta) = self.typed_meta(key, KeyKind::String)? else {
            return Ok(None);
        };
        let value = self.string_bytes(key, &meta)?;
        let mut change = Change::default();
        self.stage_replace(&mut change, key, Some(&meta), None)?;
        self.write(change)?;
        Ok(Some(value))
    }

    /// GETEX: the value, after applying `change` to the expiry (`Keep` changes nothing).
    pub fn getex(&self, key: &[u8], change: ExpiryChange) -> Result<Option<Bytes>, Error> {
        let _guard = self.lock(&[key])?;
        let Some(meta) = self.typed_meta(key, KeyKind::String)? else {
            return Ok(None);
        };
        let value = self.string_bytes(key, &meta)?;
        let new = match change {
            ExpiryChange::Keep => return Ok(Some(value)),
            ExpiryChange::Clear => Some(Metadata {
                expire_at: 0,
                ..meta.clone()
            }),
            ExpiryChange::At(at) if at <= now_ms() as i64 => None,
            ExpiryChange::At(at) => Some(Metadata {
                expire_at: at as u64,
                ..meta.clone()
            }),
        };
        if new.as_ref() != Some(&meta) {
            let mut change = Change::default();
            self.stage_replace(&mut change, key, Some(&meta), new.as_ref())?;
            self.write(change)?;
        }
        Ok(Some(value))
    }

    /// Read-modify-write of a string that keeps its expiry: `update` gets the current value
    /// (empty if missing) and returns the new one with the command's result.
    fn update_string<R>(
        &self,
        key: &[u8],
        update: impl FnOnce(Option<&Bytes>) -> Result<(Bytes, R), Error>,
    ) -> Result<R, Error> {
        let _guard = self.lock(&[key])?;
        let now = now_ms();
        let stored = self.raw_meta(key)?;
        let live = stored.as_ref().filter(|m| !m.is_expired(now));
        let current = live.map(|m| self.string_bytes(key, m)).transpose()?;
        let (value, result) = update(current.as_ref())?;
        let new = Metadata::string(value, live.map_or(0, |m| m.expire_at));
        let mut change = Change::default();
        self.stage_replace(&mut change, key, stored.as_ref(), Some(&new))?;
        self.write(change)?;
        Ok(result)
    }

    pub fn incr_by(&self, key: &[u8], delta: i64) -> Result<i64, Error> {
        self.update_string(key, |current| {
            let old = match current {
                Some(v) => parse_strict_i64(v).ok_or(Error::NotInteger)?,
                None => 0,
            };
            let new = old.checked_add(delta).ok_or(Error::Overflow)?;
            Ok((Bytes::from(itoa::Buffer::new().format(new).to_owned()), new))
        })
    }

    /// INCRBYFLOAT: returns the new value as stored (shortest exact decimal form).
    pub fn incr_by_float(&self, key: &[u8], increment: &[u8]) -> Result<Bytes, Error> {
        self.update_string(key, |current| {
            let text =
                add_long_doubles(current.map(|v| v.as_ref()), increment).map_err(|e| match e {
                    FloatError::NotFinite => Error::msg("increment would produce NaN or Infinity"),
                    FloatError::CurrentNotFloat | FloatError::IncrementNotFloat => Error::NotFloat,
                })?;
            let text = Bytes::from(text);
            Ok((text.clone(), text))
        })
    }

    pub fn append(&self, key: &'a [u8], tail: &[u8], max_len: usize) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut string = self.open_string(key)?;
        let len = string.len();
        if len as usize + tail.len() > max_len {
            return Err(Error::StringTooLong);
        }
        string.write(len, tail)?;
        string.create_even_if_empty();
        let new_len = string.len() as i64;
        string.commit()?;
        Ok(new_len)
    }

    pub fn strlen(&self, key: &[u8]) -> Result<i64, Error> {
        Ok(self
            .typed_meta(key, KeyKind::String)?
            .map_or(0, |meta| string_len(&meta)))
    }

    /// GETRANGE with Redis's index rules (negative counts from the end, both ends inclusive);
    /// reads only the fragments the range covers.
    pub fn getrange(&self, key: &[u8], start: i64, end: i64) -> Result<Bytes, Error> {
        let Some(meta) = self.typed_meta(key, KeyKind::String)? else {
            return Ok(Bytes::new());
        };
        let Some((start, end)) = super::byte_window(start, end, string_len(&meta)) else {
            return Ok(Bytes::new());
        };
        Ok(Bytes::from(self.string_range(
            key,
            &meta,
            start,
            end + 1,
        )?))
    }

    /// SETRANGE: returns the new length. An empty `patch` only reports the length.
    pub fn setrange(
        &self,
        key: &'a [u8],
        offset: usize,
        patch: &[u8],
        max_len: usize,
    ) -> Result<i64, Error> {
        if patch.is_empty() {
            return self.strlen(key);
        }
        let _guard = self.lock(&[key])?;
        let mut string = self.open_string(key)?;
        if offset.saturating_add(patch.len()) > max_len {
            return Err(Error::StringTooLong);
        }
        string.write(offset as u64, patch)?;
        let new_len = string.len() as i64;
        string.commit()?;
        Ok(new_len)
    }
}

/// The length of a string record, without reading fragments.
pub(crate) fn string_len(meta: &Metadata) -> i64 {
    match &meta.body {
        Body::Inline(v) => v.len() as i64,
        Body::Collection { size, .. } => *size as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_like_string2ll() {
        assert_eq!(parse_strict_i64(b"123"), Some(123));
        assert_eq!(parse_strict_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_strict_i64(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"+1",
            b" 1",
            b"1 ",
            b"01",
            b"-0",
            b"1a",
            b"9223372036854775808",
            b"-",
        ] {
            assert_eq!(
                parse_strict_i64(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
