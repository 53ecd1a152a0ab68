//! When each key was last read or written, for OBJECT IDLETIME.
//!
//! Redis keeps a 24-bit clock in every object. Shale's keys are on disk, and writing a time
//! into a key's metadata on every read would turn reads into writes, so the clock lives in
//! memory: a direct-mapped table of [`SLOTS`] entries, each the fingerprint of the key last
//! accessed in that slot and the second it was accessed (8 MiB in all). A key whose slot
//! another key has taken since, or that nothing accessed since the server started, reads as
//! idle since the start, as every key of a Redis that has just loaded its data does. A
//! fingerprint shared by two keys of one slot (one chance in 2^32) lends one the other's time.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Slots of the table: a working set of up to about a million keys keeps exact times.
const SLOTS: usize = 1 << 20;

pub struct AccessClock {
    /// Unix seconds when the server started.
    started: u64,
    hasher: RandomState,
    /// `fingerprint << 32 | Unix seconds` (which fit 32 bits until 2106); 0 for a slot never
    /// used.
    slots: Box<[AtomicU64]>,
}

impl Default for AccessClock {
    fn default() -> Self {
        AccessClock {
            started: unix_secs(),
            hasher: RandomState::new(),
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl AccessClock {
    /// Notes that `keys` of `db` were read or written now. The table is far larger than the
    /// CPU's caches, so each key's slot is a miss: every place is hashed first and the slots
    /// visited after, so that a command's misses overlap instead of following one another
    /// (one after each key's hash cost MGETs of 32 cached keys a tenth of their CPU).
    pub fn touch(&self, db: u8, keys: &[&[u8]]) {
        const BATCH: usize = 16;
        let now = unix_secs();
        for chunk in keys.chunks(BATCH) {
            let mut entries = [(0, 0); BATCH];
            for (entry, key) in entries.iter_mut().zip(chunk) {
                *entry = self.entry(db, key, now);
            }
            for &(slot, entry) in &entries[..chunk.len()] {
                self.store(slot, entry);
            }
        }
    }

    /// Seconds since `key` was last accessed.
    pub fn idle_secs(&self, db: u8, key: &[u8]) -> u64 {
        let (slot, fingerprint) = self.place(db, key);
        let entry = self.slots[slot].load(Ordering::Relaxed);
        let at = match entry >> 32 == fingerprint && entry != 0 {
            true => entry as u32 as u64,
            false => self.started,
        };
        unix_secs().saturating_sub(at)
    }

    /// Sets the time of `key`'s last access to `idle` seconds ago (RESTORE ... IDLETIME).
    pub fn set_idle(&self, db: u8, key: &[u8], idle: u64) {
        self.set(db, key, unix_secs().saturating_sub(idle));
    }

    fn set(&self, db: u8, key: &[u8], at: u64) {
        let (slot, entry) = self.entry(db, key, at);
        self.store(slot, entry);
    }

    /// The slot of `key` and the entry saying it was accessed at `at`.
    fn entry(&self, db: u8, key: &[u8], at: u64) -> (usize, u64) {
        let (slot, fingerprint) = self.place(db, key);
        (slot, fingerprint << 32 | at.min(u32::MAX as u64))
    }

    fn store(&self, slot: usize, entry: u64) {
        let slot = &self.slots[slot];
        // Read first: most accesses of a hot key find its entry as it is.
        if slot.load(Ordering::Relaxed) != entry {
            slot.store(entry, Ordering::Relaxed);
        }
    }

    /// The key's slot and its 32-bit fingerprint, from independent bits of one hash.
    fn place(&self, db: u8, key: &[u8]) -> (usize, u64) {
        let mut hasher = self.hasher.build_hasher();
        hasher.write_u8(db);
        hasher.write(key);
        let hash = hasher.finish();
        ((hash as usize) & (SLOTS - 1), hash >> 32)
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_keys_are_idle_from_their_access_and_others_from_the_start() {
        let clock = AccessClock {
            started: unix_secs() - 100,
            ..AccessClock::default()
        };
        assert_eq!(clock.idle_secs(0, b"never"), 100);
        clock.touch(0, &[b"k"]);
        assert_eq!(clock.idle_secs(0, b"k"), 0);
        assert_eq!(clock.idle_secs(1, b"k"), 100, "databases are apart");
        clock.set_idle(0, b"k", 30);
        assert_eq!(clock.idle_secs(0, b"k"), 30);
        clock.set_idle(0, b"k", 1000);
        assert_eq!(clock.idle_secs(0, b"k"), 1000, "older than the start");
        // Keys of one command, more than a batch; two of them may share a slot (one chance in
        // about 1,300), two pairs hardly ever.
        let many: Vec<Vec<u8>> = (0..40).map(|i| format!("m{i}").into_bytes()).collect();
        let keys: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        clock.touch(0, &keys);
        let touched = keys.iter().filter(|key| clock.idle_secs(0, key) == 0);
        assert!(touched.count() >= keys.len() - 1);
    }
}
