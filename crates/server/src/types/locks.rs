//! Striped per-key locks: commands on one key serialize, commands on different keys run in
//! parallel. Multi-key commands take their stripes in index order, so they cannot deadlock.

use std::hash::{BuildHasher, Hasher};

use parking_lot::{Mutex, MutexGuard};

const STRIPES: usize = 4096;

pub struct LockTable {
    stripes: Box<[Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
}

/// Held stripes; released on drop.
pub struct KeyGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            hasher: Default::default(),
        }
    }
}

impl LockTable {
    fn stripe(&self, db: u8, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write_u8(db);
        h.write(key);
        (h.finish() as usize) % STRIPES
    }

    /// Locks the stripes of `keys` in `db`, in ascending stripe order.
    ///
    /// These are `parking_lot` mutexes, not tokio's: they are held only across synchronous
    /// storage calls, never across an `.await`.
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, db: u8, keys: &[K]) -> KeyGuard<'a> {
        let mut indexes: Vec<usize> = keys.iter().map(|k| self.stripe(db, k.as_ref())).collect();
        indexes.sort_unstable();
        indexes.dedup();
        KeyGuard {
            _guards: indexes
                .into_iter()
                .map(|i| self.stripes[i].lock())
                .collect(),
        }
    }

    /// Locks keys that live in different databases (MOVE, COPY ... DB).
    pub fn lock_across<'a>(&'a self, keys: &[(u8, &[u8])]) -> KeyGuard<'a> {
        let mut indexes: Vec<usize> = keys.iter().map(|(db, k)| self.stripe(*db, k)).collect();
        indexes.sort_unstable();
        indexes.dedup();
        KeyGuard {
            _guards: indexes
                .into_iter()
                .map(|i| self.stripes[i].lock())
                .collect(),
        }
    }

    /// Locks every stripe: for FLUSHDB/FLUSHALL, which must not interleave with any write.
    pub fn lock_all(&self) -> KeyGuard<'_> {
        KeyGuard {
            _guards: self.stripes.iter().map(|m| m.lock()).collect(),
        }
    }
}
