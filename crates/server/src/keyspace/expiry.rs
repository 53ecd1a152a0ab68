//! Reaping expired keys.
//!
//! Every key with an expiry has an entry `db|expire_at|slot|key` in the expiry index, written
//! in the same batch as its metadata. The reaper reads only the entries that are due, so its
//! cost follows the number of expiring keys, not the size of the database. A per-database
//! watermark remembers up to where everything has been reaped, so the reaper does not walk
//! over the tombstones of entries it already removed. New entries always lie in the future
//! when they are written (an expiry in the past deletes the key instead), and the watermark
//! trails the clock by [`WATERMARK_LAG_MS`], so nothing lands below it.
//!
//! The compaction filter may drop an expired string's metadata before the reaper sees it;
//! the reaper then finds an index entry without matching metadata. That key was counted and is
//! gone, so the reaper removes the entry and decrements the counters, exactly as for a key it
//! deletes itself.

use std::sync::atomic::Ordering;

use shale_storage::keys as k;
use shale_storage::{Cf, ScanDirection};

use super::{Change, Db};
use crate::error::Error;

const WATERMARK_LAG_MS: u64 = 2000;

impl<'a> Db<'a> {
    fn due_range(&self, now: u64) -> (Vec<u8>, Vec<u8>) {
        let watermark = self.ks.expiry_watermarks[self.index()].load(Ordering::Relaxed);
        (
            k::expire_bound(self.index, watermark),
            k::expire_bound(self.index, now + 1),
        )
    }

    /// How many keys have expired by `now` but are not reaped yet.
    pub(crate) fn due_expiries(&self, now: u64) -> Result<u64, Error> {
        let (lower, upper) = self.due_range(now);
        let mut count = 0;
        self.engine().scan(
            Cf::Expire,
            &lower,
            &upper,
            ScanDirection::Forward,
            &mut |_, _| {
                count += 1;
                true
            },
        )?;
        Ok(count)
    }

    /// Removes up to `limit` keys that expired by `now`, each in its own batch under its lock,
    /// and tells `on_expired` each key. Returns how many entries were due; fewer than `limit`
    /// means none is left.
    pub fn reap_expired(
        &self,
        now: u64,
        limit: usize,
        on_expired: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, Error> {
        let (lower, upper) = self.due_range(now);
        let mut due: Vec<(u64, Vec<u8>)> = Vec::new();
        self.engine().scan(
            Cf::Expire,
            &lower,
            &upper,
            ScanDirection::Forward,
            &mut |raw, _| {
                if let Some((at, key)) = k::decode_expire_key(raw) {
                    due.push((at, key.to_vec()));
                }
                due.len() < limit
            },
        )?;
        let mut reaped = 0;
        for (at, key) in &due {
            let _guard = self.lock(&[key])?;
            // A write to the key between the scan and the lock may have removed the entry
            // (and adjusted the counters) already.
            let entry = k::expire_key(self.index, *at, key);
            if self.engine().get(Cf::Expire, &entry)?.is_none() {
                continue;
            }
            reaped += 1;
            let mut change = Change {
                ignores_slot_moves: true,
                ..Change::default()
            };
            match self.raw_meta(key)? {
                Some(meta) if meta.expire_at == *at => {
                    self.stage_replace(&mut change, key, Some(&meta), None)?;
                }
                _ => {
                    change.batch.delete(Cf::Expire, entry);
                    change.count(self.index, -1, -1);
                    change.removes_due_expiry = true;
                }
            }
            self.write(change)?;
            on_expired(key);
        }
        self.ks.stats.expired.fetch_add(reaped, Ordering::Relaxed);
        if due.len() < limit {
            let watermark = &self.ks.expiry_watermarks[self.index()];
            watermark.fetch_max(now.saturating_sub(WATERMARK_LAG_MS), Ordering::Relaxed);
        }
        Ok(due.len())
    }
}
