//! MEMORY USAGE: what a key takes in storage.
//!
//! Redis reports the bytes a key holds in RAM. A key here lives in records, so this reports the
//! bytes of those records as written (their keys and values, before compression): the measure
//! that grows with the key as Redis's does. As in Redis, a collection's size is estimated from
//! a sample of its elements.

use shale_storage::keys as k;
use shale_storage::metadata::{Body, KeyKind};
use shale_storage::{Cf, ScanDirection};

use super::fragments::FRAGMENT;
use crate::error::Error;
use crate::keyspace::Db;

/// Bytes of a string fragment's key after the element prefix: its index.
const FRAGMENT_SUFFIX: u64 = 4;

impl Db<'_> {
    /// Bytes of `key`'s records, a collection's estimated from up to `samples` elements (all of
    /// them for `None`); `None` if the key does not exist.
    pub fn memory_usage(&self, key: &[u8], samples: Option<u64>) -> Result<Option<u64>, Error> {
        // Redis finds the key without a lookup, so it counts no hit or miss.
        let Some(meta) = self.uncounted().live_meta(key)? else {
            return Ok(None);
        };
        let own = (k::meta_key(self.index, key).len() + meta.encode().len()) as u64;
        let Body::Collection { version, size, .. } = meta.body else {
            return Ok(Some(own));
        };
        let prefix = k::element_prefix(self.index, key, version).len() as u64;
        let elements = match meta.kind {
            // `size` is the string's length, in 4 KiB fragments.
            KeyKind::String => size.div_ceil(FRAGMENT) * (prefix + FRAGMENT_SUFFIX) + size,
            _ if meta.holds_no_records() => 0,
            // `size` counts bits, not containers (at most 65,536): all are read.
            KeyKind::Roaring => self.element_bytes(key, version, prefix, None)?.0,
            kind => {
                let (bytes, read) = self.element_bytes(key, version, prefix, samples)?;
                // A sorted-set member also has a record of about the same size in the score
                // index.
                let records = if kind == KeyKind::ZSet { 2 } else { 1 };
                if read == 0 {
                    0
                } else {
                    (bytes as f64 / read as f64 * size as f64) as u64 * records
                }
            }
        };
        Ok(Some(own + elements))
    }

    /// The bytes of the first `limit` element records of a collection version (all for
    /// `None`), and how many it read.
    fn element_bytes(
        &self,
        key: &[u8],
        version: u64,
        prefix: u64,
        limit: Option<u64>,
    ) -> Result<(u64, u64), Error> {
        let (mut bytes, mut read) = (0u64, 0u64);
        let limit = limit.unwrap_or(u64::MAX);
        self.scan_records(
            Cf::Data,
            key,
            version,
            (&[], None),
            ScanDirection::Forward,
            &mut |sub, value| {
                bytes += prefix + (sub.len() + value.len()) as u64;
                read += 1;
                read < limit
            },
        )?;
        Ok((bytes, read))
    }
}
