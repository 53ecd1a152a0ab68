//! DEBUG DIGEST and DEBUG DIGEST-VALUE as Redis 7.0 computes them (`debug.c`): SHA1s mixed
//! and XORed so that the result depends on every key, value and database, and not on the
//! order of keys or of set, hash and sorted-set elements. An operator compares a replica with
//! its master, or Shale with Redis, by one line each.
//!
//! Two differences: keys past their expiry are left out (Redis counts the ones it has not
//! removed yet), and a Roaring bitmap, which Redis holds only through TairRoaring's module,
//! mixes in the decimal text of each set bit under Redis's module type code.

use bytes::Bytes;
use shale_storage::metadata::KeyKind;

use super::numbers::format_g17;
use super::zset::{RangeBy, RangeSpec};
use crate::error::Error;
use crate::keyspace::{Db, Keyspace};

/// A digest, 20 bytes as SHA1 gives them.
pub type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    sha1_smol::Sha1::from(data).digest().bytes()
}

/// `digest ^= SHA1(data)`: order-free.
fn xor(digest: &mut Digest, data: &[u8]) {
    for (d, h) in digest.iter_mut().zip(sha1(data)) {
        *d ^= h;
    }
}

/// `digest = SHA1(digest ^ SHA1(data))`: order matters.
fn mix(digest: &mut Digest, data: &[u8]) {
    xor(digest, data);
    *digest = sha1(digest);
}

/// Redis's object type codes, mixed in as four big-endian bytes.
fn type_code(kind: KeyKind) -> u32 {
    match kind {
        KeyKind::String => 0,
        KeyKind::List => 1,
        KeyKind::Set => 2,
        KeyKind::ZSet => 3,
        KeyKind::Hash => 4,
        KeyKind::Roaring => 5,
        KeyKind::Stream => 6,
    }
}

/// Forty lowercase hex digits, as DEBUG prints a digest.
pub fn hex(digest: &Digest) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Keyspace {
    /// DEBUG DIGEST: every database with keys, by the number clients select.
    pub fn dataset_digest(&self) -> Result<Digest, Error> {
        let mut all = [0u8; 20];
        for number in 0..self.databases() {
            let db = self.db(number);
            let keys = db.keys(b"*")?;
            if keys.is_empty() {
                continue;
            }
            mix(&mut all, &(number as u32).to_be_bytes());
            for key in keys {
                let mut digest = [0u8; 20];
                mix(&mut digest, &key);
                db.mix_value(&mut digest, &key)?;
                xor(&mut all, &digest);
            }
        }
        Ok(all)
    }
}

impl Db<'_> {
    /// DEBUG DIGEST-VALUE of one key: its type, value and whether it expires, without its
    /// name; zeros if it does not exist.
    pub fn value_digest(&self, key: &[u8]) -> Result<Digest, Error> {
        let mut digest = [0u8; 20];
        self.mix_value(&mut digest, key)?;
        Ok(digest)
    }

    fn mix_value(&self, digest: &mut Digest, key: &[u8]) -> Result<(), Error> {
        let Some(kind) = self.key_type(key)? else {
            return Ok(());
        };
        mix(digest, &type_code(kind).to_be_bytes());
        match kind {
            KeyKind::String => mix(digest, &self.get(key)?.unwrap_or_default()),
            KeyKind::List => {
                for element in self.lrange(key, 0, -1)?.into_items() {
                    mix(digest, &element);
                }
            }
            KeyKind::Set => {
                for member in self.smembers(key)? {
                    xor(digest, &member);
                }
            }
            KeyKind::ZSet => {
                let all = RangeSpec {
                    by: RangeBy::Rank(0, -1),
                    rev: false,
                    limit: None,
                };
                for (member, score) in self.zrange(key, &all)? {
                    xor_pair(digest, &member, format_g17(score).as_bytes());
                }
            }
            KeyKind::Hash => {
                for (field, value) in self.hgetall(key)?.into_pairs() {
                    xor_pair(digest, &field, &value);
                }
            }
            KeyKind::Roaring => self.tr_visit_range(key, 0, u32::MAX, &mut |bit| {
                mix(digest, bit.to_string().as_bytes());
                true
            })?,
            KeyKind::Stream => self.visit_stream(key, &mut |id, fields| {
                mix(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (field, value) in fields {
                    mix(digest, field);
                    mix(digest, value);
                }
            })?,
        }
        if self.expire_at(key)?.is_some_and(|at| at != 0) {
            xor(digest, b"!!expire!!");
        }
        Ok(())
    }
}

/// A hash field or sorted-set member with its value or score: mixed on their own, then XORed
/// in, so the order of elements does not matter.
fn xor_pair(digest: &mut Digest, first: &Bytes, second: &[u8]) {
    let mut element = [0u8; 20];
    mix(&mut element, first);
    mix(&mut element, second);
    xor(digest, &element);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_digest_prints_as_forty_zeros() {
        assert_eq!(hex(&[0; 20]), "0".repeat(40));
    }

    #[test]
    fn xor_is_order_free_and_mix_is_not() {
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        xor(&mut a, b"x");
        xor(&mut a, b"y");
        xor(&mut b, b"y");
        xor(&mut b, b"x");
        assert_eq!(a, b);
        let (mut c, mut d) = ([0u8; 20], [0u8; 20]);
        mix(&mut c, b"x");
        mix(&mut c, b"y");
        mix(&mut d, b"y");
        mix(&mut d, b"x");
        assert_ne!(c, d);
    }
}
