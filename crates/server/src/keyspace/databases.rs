//! Which stored database each database number names, so that SWAPDB is O(1).
//!
//! Every key begins with its database's byte, so exchanging the contents of two databases
//! would rewrite every key of both. Instead a client's database number (the one SELECT takes)
//! is mapped to the stored one when a [`super::Db`] handle is made, and SWAPDB exchanges two
//! entries of the map: one small record written with the change, and the in-memory copy here.
//! Everything keyed by stored database (key counters, expiry watermarks, the access clock)
//! moves with its data; what clients name by number (notifications, blocked clients) is
//! translated back.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use shale_storage::keys as k;
use shale_storage::{Cf, Engine};

use super::{Change, Db, KeyRange, Keyspace};
use crate::error::Error;

pub(super) struct DbMap {
    /// Database number → stored database.
    stored: Vec<AtomicU8>,
    /// Stored database → database number.
    numbered: Vec<AtomicU8>,
    /// Entries of a map written while more databases were configured, beyond those in use:
    /// written back with every new map, so a restart with fewer databases loses no swap.
    tail: Vec<u8>,
    /// Bumped by every change: a caller that locked keys by stored database after a wait
    /// checks it to know its locks are still the right ones.
    generation: AtomicU64,
}

impl DbMap {
    /// Reads the map written by the last SWAPDB; without one, each number is its own database.
    /// A map written while more databases were configured is kept if the databases in use
    /// now map among themselves; otherwise some of them would name data beyond the count.
    pub(super) fn load(engine: &dyn Engine, databases: usize) -> Result<DbMap, Error> {
        let mut map: Vec<u8> = engine.get(Cf::Meta, &k::db_map_key())?.unwrap_or_default();
        if !is_permutation(&map) {
            return Err(Error::msg("corrupt record: database map"));
        }
        map.extend(map.len() as u8..databases as u8);
        if !is_permutation(&map[..databases]) {
            return Err(Error::msg(format!(
                "SWAPDB has exchanged a database below {databases} with one above it: start with 'databases {}'",
                map.len()
            )));
        }
        let tail = map.split_off(databases);
        let numbered = inverse(&map);
        Ok(DbMap {
            stored: map.into_iter().map(AtomicU8::new).collect(),
            numbered: numbered.into_iter().map(AtomicU8::new).collect(),
            tail,
            generation: AtomicU64::new(0),
        })
    }

    pub(super) fn stored(&self, number: usize) -> u8 {
        self.stored[number].load(Ordering::Acquire)
    }

    pub(super) fn number(&self, stored: u8) -> u8 {
        self.numbered
            .get(stored as usize)
            .map_or(stored, |n| n.load(Ordering::Acquire))
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(super) fn current(&self) -> Vec<u8> {
        self.stored
            .iter()
            .map(|entry| entry.load(Ordering::Acquire))
            .collect()
    }

    /// The record to write for `map`: it and the entries of databases not in use now.
    pub(super) fn record(&self, map: &[u8]) -> Vec<u8> {
        [map, &self.tail].concat()
    }

    /// Installs a map whose record is being written. The caller holds every key lock. Returns
    /// the database numbers whose stored database changed.
    pub(super) fn apply(&self, map: &[u8]) -> Vec<u8> {
        let mut changed = Vec::new();
        for (number, (entry, stored)) in self.stored.iter().zip(map).enumerate() {
            if entry.swap(*stored, Ordering::AcqRel) != *stored {
                changed.push(number as u8);
            }
        }
        for (entry, number) in self.numbered.iter().zip(inverse(map)) {
            entry.store(number, Ordering::Release);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        changed
    }
}

/// `map` with the entries of databases `a` and `b` exchanged.
pub(super) fn swapped(map: &[u8], a: usize, b: usize) -> Vec<u8> {
    let mut out = map.to_vec();
    out.swap(a, b);
    out
}

fn is_permutation(map: &[u8]) -> bool {
    let mut seen = [false; 256];
    map.iter()
        .all(|&db| (db as usize) < map.len() && !std::mem::replace(&mut seen[db as usize], true))
}

fn inverse(map: &[u8]) -> Vec<u8> {
    let mut out = vec![0; map.len()];
    for (number, &stored) in map.iter().enumerate() {
        out[stored as usize] = number as u8;
    }
    out
}

impl Db<'_> {
    /// FLUSHDB (this database) or FLUSHALL (`all`): range deletes in one batch, O(1).
    /// Returns the deleted ranges for [`Keyspace::reclaim`].
    pub fn flush(&self, all: bool) -> Result<Vec<KeyRange>, Error> {
        let _guard = self.lock_all()?;
        let (start, end) = match all {
            false => k::db_range(self.index),
            true => k::all_dbs_range(),
        };
        let dbs: Vec<u8> = match all {
            false => vec![self.index],
            true => (0..self.ks.databases as u8).collect(),
        };
        self.ks
            .watches
            .raise_existing(&dbs, |db, key| self.stores(db, key));
        let mut change = Change::default();
        for cf in Cf::ALL {
            change.batch.delete_range(cf, start.clone(), end.clone());
        }
        for db in dbs {
            change.reset_counters(db);
        }
        self.write(change)?;
        Ok(vec![(start, end)])
    }
}

impl Db<'_> {
    /// SWAPDB: this database and database `other` exchange their contents. Their stored
    /// databases exchange numbers (see `databases`), so this costs one small write whatever
    /// they hold. As in Redis, the watched keys of either that exist in either are touched.
    pub fn swap_with(&self, other: usize) -> Result<(), Error> {
        let (a, b) = (self.number as usize, other);
        if a == b {
            return Ok(());
        }
        let _guard = self.lock_all()?;
        let map = match self.txn.and_then(|txn| txn.db_map.lock().clone()) {
            Some(map) => map,
            None => self.ks.db_map.current(),
        };
        // Watch registrations are filed by the installed map; the data to look at is where the
        // transaction's map (after an earlier SWAPDB of it) says.
        let watched = [self.ks.db_map.stored(a), self.ks.db_map.stored(b)];
        let exists = |_: u8, key: &[u8]| self.stores(map[a], key) || self.stores(map[b], key);
        self.ks.watches.raise_existing(&watched, exists);
        let map = swapped(&map, a, b);
        let mut change = Change::default();
        let record = self.ks.db_map.record(&map);
        change.batch.put(Cf::Meta, k::db_map_key(), record);
        match self.txn {
            Some(txn) => {
                txn.stage(change)?;
                *txn.db_map.lock() = Some(map);
            }
            None => {
                self.ks.write(change)?;
                self.ks.apply_db_map(&map);
            }
        }
        Ok(())
    }
}

impl Db<'_> {
    /// Whether stored database `index` holds a record of `key`, expired or not (as Redis's
    /// dictionary does until the key is reaped): the watched keys a flush or swap touches.
    fn stores(&self, index: u8, key: &[u8]) -> bool {
        let db = Db { index, ..*self };
        db.raw_meta(key).is_ok_and(|meta| meta.is_some())
    }
}

impl Keyspace {
    /// Compacts flushed ranges so their space is returned.
    pub fn reclaim(&self, ranges: &[KeyRange]) -> Result<(), Error> {
        for (start, end) in ranges {
            for cf in Cf::ALL {
                self.engine.compact_range(cf, start, end)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_storage::{MemoryEngine, WriteBatch};

    #[test]
    fn maps_load_grow_and_refuse_to_shrink_across_a_swap() {
        let engine = MemoryEngine::default();
        let map = DbMap::load(&engine, 4).unwrap();
        assert_eq!(map.current(), [0, 1, 2, 3]);
        let swapped_map = swapped(&map.current(), 1, 3);
        assert_eq!(map.apply(&swapped_map), [1, 3]);
        assert_eq!((map.stored(1), map.number(3)), (3, 1));
        let write = |record: Vec<u8>| {
            let mut batch = WriteBatch::new();
            batch.put(Cf::Meta, k::db_map_key(), record);
            engine.write(batch).unwrap();
        };
        write(map.record(&swapped_map));
        let six = DbMap::load(&engine, 6).unwrap();
        assert_eq!(six.current(), [0, 3, 2, 1, 4, 5]);
        assert!(
            DbMap::load(&engine, 2).is_err(),
            "database 1 names stored database 3"
        );
        // With one database in use, a new record keeps the swap of 1 and 3.
        let one = DbMap::load(&engine, 1).unwrap();
        assert_eq!(one.current(), [0]);
        write(one.record(&one.current()));
        assert_eq!(DbMap::load(&engine, 4).unwrap().current(), [0, 3, 2, 1]);
    }
}
