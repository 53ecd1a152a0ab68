//! Collection versions: unique and increasing for the life of the data directory, never reused
//! after a delete and re-create, so a new collection never sees elements of an old one.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use shale_storage::{keys as k, Cf, Engine, WriteBatch};

use super::now_ms;
use crate::error::Error;

/// Versions handed out between two persisted reservations.
const RESERVATION: u64 = 1 << 20;

pub struct VersionGenerator {
    next: AtomicU64,
    /// Versions below this are covered by the reservation on disk.
    reserved: Mutex<u64>,
    engine: std::sync::Arc<dyn Engine>,
}

impl VersionGenerator {
    /// Starts above both the clock (in microseconds) and the last reservation on disk. The
    /// first version handed out writes the next reservation: a replica, which hands out none,
    /// writes nothing of its own.
    pub fn open(engine: std::sync::Arc<dyn Engine>) -> Result<Self, Error> {
        let start = first_free(engine.as_ref())?;
        Ok(VersionGenerator {
            next: AtomicU64::new(start),
            reserved: Mutex::new(start),
            engine,
        })
    }

    /// Continues above the reservation on disk, which a master's batches may have raised
    /// (a replica promoted, or switched to a copy of its master's data).
    pub fn resume(&self) -> Result<(), Error> {
        let start = first_free(self.engine.as_ref())?;
        let mut reserved = self.reserved.lock();
        if start > self.next.load(Ordering::Relaxed) {
            self.next.store(start, Ordering::Relaxed);
            *reserved = start;
        }
        Ok(())
    }

    pub fn next(&self) -> Result<u64, Error> {
        let version = self.next.fetch_add(1, Ordering::Relaxed);
        if version >= *self.reserved.lock() {
            self.reserve(version)?;
        }
        Ok(version)
    }

    fn reserve(&self, from: u64) -> Result<(), Error> {
        let mut reserved = self.reserved.lock();
        if from < *reserved {
            return Ok(());
        }
        let limit = from + RESERVATION;
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, k::version_key(), limit.to_be_bytes().to_vec());
        self.engine.write(batch)?;
        self.engine.sync_wal()?;
        *reserved = limit;
        Ok(())
    }
}

/// The lowest version no reservation on disk covers, and not below the clock.
fn first_free(engine: &dyn Engine) -> Result<u64, Error> {
    let stored = engine
        .get(Cf::Meta, &k::version_key())?
        .and_then(|raw| <[u8; 8]>::try_from(raw.as_slice()).ok())
        .map_or(0, u64::from_be_bytes);
    Ok(stored.max(now_ms() * 1000))
}
