//! The latest write batches in memory, for replicas that have caught up with the WAL.
//!
//! A replica's feed reads the batches it lacks from the WAL, but the crate's WAL iterator
//! cannot continue past the end it reached, and a new one rereads the WAL file from its
//! start: with one replica attached that doubled a master's CPU under SET load. So while
//! replicas are attached, each write also keeps a copy of its batch here, and a feed that
//! has caught up reads the next batches from this ring; the WAL serves only a feed further
//! behind than the ring reaches.
//!
//! Writes that are kept take a lock around RocksDB's write, so that the sequence number read
//! after it is their own and the ring is in order; the server's own group commit
//! (`StorageWrites`) already makes such writes few.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Bytes of batches kept; older ones are dropped (a feed that needs them reads the WAL).
const KEPT_BYTES: usize = 16 << 20;

/// What the ring holds after a sequence number.
#[derive(Debug, PartialEq, Eq)]
pub enum Recent {
    /// The next batches, in RocksDB's bytes, and the last sequence number they cover.
    Batches(Vec<Arc<[u8]>>, u64),
    /// Nothing written after it yet.
    UpToDate,
    /// The next batch is not here (older than the ring, or written before it started).
    NotHeld,
}

#[derive(Default)]
pub(crate) struct RecentBatches {
    on: AtomicBool,
    /// Held around each kept write, so batches are numbered and kept in order.
    pub(crate) write_order: Mutex<()>,
    ring: Mutex<Ring>,
    /// Called after each kept write (it wakes the feeds).
    listener: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

#[derive(Default)]
struct Ring {
    /// (first sequence number, last sequence number, the batch's bytes)
    batches: VecDeque<(u64, u64, Arc<[u8]>)>,
    bytes: usize,
}

impl RecentBatches {
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// Starts or stops keeping batches; either way, forgets those kept so far.
    pub(crate) fn set_on(&self, on: bool) {
        let _order = self.write_order.lock();
        self.on.store(on, Ordering::SeqCst);
        *self.ring.lock() = Ring::default();
    }

    pub(crate) fn set_listener(&self, listener: Arc<dyn Fn() + Send + Sync>) {
        *self.listener.lock() = Some(listener);
    }

    /// Keeps a batch written under `write_order` whose last sequence number is `last`; its
    /// bytes' header gets its first sequence number, as the WAL's copy has it.
    pub(crate) fn keep(&self, mut bytes: Vec<u8>, count: u64, last: u64) {
        let first = last + 1 - count.max(1);
        if let Some(header) = bytes.get_mut(..8) {
            header.copy_from_slice(&first.to_le_bytes());
        }
        let mut ring = self.ring.lock();
        ring.bytes += bytes.len();
        ring.batches.push_back((first, last, Arc::from(bytes)));
        while ring.bytes > KEPT_BYTES {
            match ring.batches.pop_front() {
                Some((_, _, dropped)) => ring.bytes -= dropped.len(),
                None => break,
            }
        }
    }

    pub(crate) fn notify(&self) {
        let listener = self.listener.lock().clone();
        if let Some(listener) = listener {
            listener();
        }
    }

    /// The batches after sequence number `after`, up to about `max_bytes`; `latest` is the
    /// engine's last sequence number.
    pub(crate) fn since(&self, after: u64, max_bytes: usize, latest: u64) -> Recent {
        let ring = self.ring.lock();
        let Some(&(front, _, _)) = ring.batches.front() else {
            return if latest > after {
                Recent::NotHeld
            } else {
                Recent::UpToDate
            };
        };
        if front > after + 1 {
            return Recent::NotHeld;
        }
        let start = ring
            .batches
            .partition_point(|&(first, _, _)| first <= after);
        let mut taken = Vec::new();
        let mut bytes = 0;
        let mut next = after;
        for (first, last, batch) in ring.batches.iter().skip(start) {
            if *first != next + 1 {
                return Recent::NotHeld;
            }
            bytes += batch.len();
            taken.push(batch.clone());
            next = *last;
            if bytes >= max_bytes {
                break;
            }
        }
        match taken.is_empty() {
            true => Recent::UpToDate,
            false => Recent::Batches(taken, next),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(count: u32) -> Vec<u8> {
        let mut bytes = vec![0u8; 12];
        bytes[8..].copy_from_slice(&count.to_le_bytes());
        bytes
    }

    #[test]
    fn batches_come_back_in_order_from_any_batch_boundary() {
        let recent = RecentBatches::default();
        recent.set_on(true);
        recent.keep(batch(2), 2, 12);
        recent.keep(batch(1), 1, 13);
        recent.keep(batch(3), 3, 16);
        match recent.since(12, usize::MAX, 16) {
            Recent::Batches(batches, next) => {
                assert_eq!(next, 16);
                assert_eq!(batches.len(), 2);
                assert_eq!(&batches[0][..8], &13u64.to_le_bytes());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(recent.since(16, usize::MAX, 16), Recent::UpToDate);
        assert_eq!(recent.since(9, usize::MAX, 16), Recent::NotHeld);
        match recent.since(10, 1, 16) {
            Recent::Batches(batches, next) => assert_eq!((batches.len(), next), (1, 12)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_empty_ring_sends_a_feed_behind_it_to_the_wal() {
        let recent = RecentBatches::default();
        recent.set_on(true);
        assert_eq!(recent.since(5, usize::MAX, 7), Recent::NotHeld);
        assert_eq!(recent.since(7, usize::MAX, 7), Recent::UpToDate);
    }
}
