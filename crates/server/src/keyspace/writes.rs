//! Storage writes of many connections, combined into one RocksDB write.

use std::sync::atomic::{AtomicUsize, Ordering};

use shale_storage::{Engine, StorageError, WriteBatch};

use super::combine::{Combiner, Entry, Guest, Handback};

/// Storage writes of connections, combined: a connection that finds another one writing
/// queues its batch and suspends; the writer then writes its own batch and all those queued
/// as one. In RocksDB's own queue a waiting writer holds its thread, spinning and yielding
/// (see "Storage writes of many connections" in docs/design.md).
///
/// A queued batch is written even if its connection's task is dropped meanwhile, which only
/// a runtime shutting down does; the keys' locks are then released before the write.
pub(crate) struct StorageWrites {
    combiner: Combiner<WriteBatch, Result<(), StorageError>>,
    /// How many more leaders let their worker serve the connections that are ready before
    /// they write, so that those connections' batches join the write. Reset whenever a write
    /// carries other connections' batches; a lone client's writes never wait for others.
    crowded: AtomicUsize,
}

impl StorageWrites {
    pub(super) fn new() -> Self {
        StorageWrites {
            combiner: Combiner::new(1),
            crowded: AtomicUsize::new(0),
        }
    }

    pub(super) async fn write(
        &self,
        engine: &dyn Engine,
        mut batch: WriteBatch,
    ) -> Result<(), StorageError> {
        let leadership = match self.combiner.enter(0, || std::mem::take(&mut batch)) {
            Entry::Lead(leadership) => {
                let crowded = self.crowded.load(Ordering::Relaxed);
                if crowded > 0 {
                    self.crowded.store(crowded - 1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                leadership
            }
            Entry::Queued(handback) => match handback.await {
                Ok(Handback::Ran(result)) => return result,
                Ok(Handback::Lead(leadership, own)) => {
                    batch = own;
                    leadership
                }
                Err(_) => {
                    // Only a writer that died mid-write drops a queued batch unanswered.
                    let lost = "the write was lost with the connection writing it";
                    return Err(StorageError::Engine(lost.into()));
                }
            },
        };
        let guests = leadership.take_guests();
        if !guests.is_empty() {
            self.crowded.store(CROWDED_WRITES, Ordering::Relaxed);
        }
        let result = write_with_guests(engine, batch, guests);
        // Writers that queued meanwhile are written here too, so the lane is rarely handed to
        // a task that has to be scheduled first.
        for _ in 0..EXTRA_WRITE_ROUNDS {
            let guests = leadership.take_guests();
            if guests.is_empty() {
                break;
            }
            let _ = write_with_guests(engine, WriteBatch::new(), guests);
        }
        if leadership.hand_on() {
            // The next writer was woken on this thread, where it waits behind this task until
            // it yields, and every writer of the server waits behind it.
            tokio::task::yield_now().await;
        }
        result
    }
}

/// Leaders that wait for other connections' batches after a write that carried some.
const CROWDED_WRITES: usize = 8;

/// Rounds of queued writes a leader does after its own before it hands the lane on.
const EXTRA_WRITE_ROUNDS: usize = 3;

/// Writes `batch` and the guests' batches as one and hands each guest the result.
fn write_with_guests(
    engine: &dyn Engine,
    mut batch: WriteBatch,
    guests: Vec<Guest<WriteBatch, Result<(), StorageError>>>,
) -> Result<(), StorageError> {
    let mut handbacks = Vec::with_capacity(guests.len());
    for Guest { job, handback } in guests {
        batch.append(job);
        handbacks.push(handback);
    }
    if !handbacks.is_empty() {
        batch.fold_counters();
    }
    let result = engine.write(batch);
    for handback in handbacks {
        let _ = handback.send(Handback::Ran(result.clone()));
    }
    result
}
