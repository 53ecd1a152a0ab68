//! Clients blocked in BLPOP, BZPOPMIN and the like.
//!
//! Each key has a FIFO queue of waiters. Writes note the lists and sorted sets they fill
//! ([`crate::keyspace::ReadyKeys`]); after every command, the connection that ran it serves those
//! keys: it runs the pop of each waiter in queue order on the waiter's behalf and hands over
//! the reply, so the client that blocked first is served first, as in Redis. A waiter's state
//! lock makes serving, timing out and CLIENT UNBLOCK exclusive: a popped element is never
//! lost to a timeout.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use shale_protocol::Reply;
use tokio::sync::Notify;

use crate::error::Error;
use crate::keyspace::{lock_off_worker, Db, Keyspace};

/// A blocking command's non-blocking try on some of its keys, in order: its reply, or `None`
/// while they are empty. Serving a filled key tries only that key, as Redis does.
pub type Attempt = Box<dyn Fn(Db<'_>, &[Bytes]) -> Result<Option<Reply>, Error> + Send + Sync>;

/// What a blocking command asks of its connection when its keys are empty.
pub struct BlockRequest {
    pub db: usize,
    pub keys: Vec<Bytes>,
    /// `None` waits forever.
    pub timeout: Option<Duration>,
    pub timeout_reply: Reply,
    pub attempt: Attempt,
    pub wants: Wants,
}

/// What a waiter waits for, which decides whether a waiter that cannot be served stops the
/// serving of a key's queue.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Wants {
    /// Any element (a pop): when the first waiter finds nothing, nor will the next.
    AnyElement,
    /// Entries after its own ID (a stream read): the next waiter may be served when this
    /// one is not.
    EntriesAfterOwnId,
}

enum WaitState {
    Waiting,
    Done(Reply),
}

pub struct Waiter {
    client_id: u64,
    request: BlockRequest,
    state: Mutex<WaitState>,
    woken: Notify,
}

impl Waiter {
    /// Serving holds the state while it waits for the waiter's keys, perhaps behind a task
    /// that needs the very worker that wants the state next: so it is waited for as stripes
    /// are, moving off the worker after a moment.
    fn state(&self) -> MutexGuard<'_, WaitState> {
        lock_off_worker(&self.state)
    }
}

/// How CLIENT UNBLOCK ends a wait.
#[derive(Clone, Copy)]
pub enum Unblock {
    Timeout,
    Error,
}

type QueueKey = (u8, Vec<u8>);

/// How long CLIENT UNBLOCK waits for a waiter that is being served.
const UNBLOCK_WAIT: Duration = Duration::from_millis(100);

#[derive(Default)]
pub struct Blocking {
    queues: Mutex<HashMap<QueueKey, VecDeque<Arc<Waiter>>>>,
    by_client: Mutex<HashMap<u64, Arc<Waiter>>>,
}

impl Blocking {
    /// Queues a waiter on every key of `request`, then tries once more: a write between the
    /// command's own try and the queueing would otherwise go unnoticed.
    pub fn block(&self, keyspace: &Keyspace, client_id: u64, request: BlockRequest) -> Arc<Waiter> {
        let waiter = Arc::new(Waiter {
            client_id,
            request,
            state: Mutex::new(WaitState::Waiting),
            woken: Notify::new(),
        });
        keyspace.ready.client_blocked();
        {
            let mut queues = self.queues.lock();
            for key in &waiter.request.keys {
                queues
                    .entry((waiter.request.db as u8, key.to_vec()))
                    .or_default()
                    .push_back(waiter.clone());
            }
        }
        self.by_client.lock().insert(client_id, waiter.clone());
        self.try_serve(keyspace, &waiter, &waiter.request.keys);
        waiter
    }

    /// Waits until the waiter is served, unblocked or times out, and returns its reply.
    pub async fn wait(&self, keyspace: &Keyspace, waiter: &Arc<Waiter>) -> Reply {
        let timeout = waiter.request.timeout.unwrap_or(Duration::MAX);
        let _ = tokio::time::timeout(timeout, async {
            loop {
                let notified = waiter.woken.notified();
                if !matches!(*waiter.state(), WaitState::Waiting) {
                    return;
                }
                notified.await;
            }
        })
        .await;
        self.finish(keyspace, waiter)
    }

    /// Ends a wait (served, timed out, or the client went away) and takes the waiter out of
    /// every queue.
    pub fn finish(&self, keyspace: &Keyspace, waiter: &Arc<Waiter>) -> Reply {
        let reply = {
            let mut state = waiter.state();
            match std::mem::replace(
                &mut *state,
                WaitState::Done(waiter.request.timeout_reply.clone()),
            ) {
                WaitState::Done(reply) => reply,
                WaitState::Waiting => waiter.request.timeout_reply.clone(),
            }
        };
        self.dequeue(waiter);
        let mut by_client = self.by_client.lock();
        if by_client
            .get(&waiter.client_id)
            .is_some_and(|w| Arc::ptr_eq(w, waiter))
        {
            by_client.remove(&waiter.client_id);
            keyspace.ready.client_unblocked();
        }
        reply
    }

    /// The keys that clients wait on in databases `dbs`.
    fn keys_in(&self, dbs: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let queues = self.queues.lock();
        queues
            .keys()
            .filter(|(db, _)| dbs.contains(db))
            .cloned()
            .collect()
    }

    pub fn blocked_clients(&self) -> usize {
        self.by_client.lock().len()
    }

    pub fn is_blocked(&self, client_id: u64) -> bool {
        self.by_client.lock().contains_key(&client_id)
    }

    /// CLIENT UNBLOCK: whether the client was blocked.
    pub fn unblock(&self, client_id: u64, how: Unblock) -> bool {
        let Some(waiter) = self.by_client.lock().get(&client_id).cloned() else {
            return false;
        };
        // A waiter's state is locked while it is being served, which takes key locks; inside
        // EXEC this command may hold those, so it must not wait for the state lock.
        let Some(mut state) = waiter.state.try_lock_for(UNBLOCK_WAIT) else {
            return false;
        };
        if !matches!(*state, WaitState::Waiting) {
            return false;
        }
        *state = WaitState::Done(match how {
            Unblock::Timeout => waiter.request.timeout_reply.clone(),
            Unblock::Error => Error::Unblocked.to_reply(),
        });
        waiter.woken.notify_one();
        true
    }

    /// Serves the waiters of every key that writes filled since the last call, including keys
    /// that the served pops themselves fill (BLMOVE into a list another client waits on).
    pub fn serve_ready(&self, keyspace: &Keyspace) {
        loop {
            let (ready, swapped) = keyspace.ready.take();
            if ready.is_empty() && swapped.is_empty() {
                return;
            }
            for (stored, key) in ready {
                let db = keyspace.db_number(stored);
                self.serve_key(keyspace, db, Bytes::from(key));
            }
            // SWAPDB: the keys waited on in either database may hold something now.
            for (db, key) in self.keys_in(&swapped) {
                self.serve_key(keyspace, db, Bytes::from(key));
            }
        }
    }

    fn serve_key(&self, keyspace: &Keyspace, db: u8, key: Bytes) {
        let id = (db, key.to_vec());
        let only = [key];
        // Waiters passed over, which stay at the front of the queue in order.
        let mut passed = 0;
        loop {
            let next = self
                .queues
                .lock()
                .get(&id)
                .and_then(|queue| queue.get(passed).cloned());
            let Some(waiter) = next else {
                return;
            };
            match self.try_serve(keyspace, &waiter, &only) {
                Served::Yes => {}
                // Timed out or unblocked, and not yet out of the queues: take it out here.
                Served::AlreadyDone => self.dequeue(&waiter),
                Served::NotThisOne => passed += 1,
                Served::NothingThere => return,
            }
        }
    }

    fn try_serve(&self, keyspace: &Keyspace, waiter: &Arc<Waiter>, keys: &[Bytes]) -> Served {
        let mut state = waiter.state();
        if !matches!(*state, WaitState::Waiting) {
            return Served::AlreadyDone;
        }
        let db = keyspace.db(waiter.request.db);
        let reply = match (waiter.request.attempt)(db, keys) {
            Ok(Some(reply)) => reply,
            Ok(None) if waiter.request.wants == Wants::EntriesAfterOwnId => {
                return Served::NotThisOne
            }
            Ok(None) => return Served::NothingThere,
            // A key that now holds another type does not serve the waiter, which keeps
            // waiting, as in Redis 7.0; waiters of another kind may be served.
            Err(Error::WrongType) => return Served::NotThisOne,
            Err(err) => err.to_reply(),
        };
        *state = WaitState::Done(reply);
        drop(state);
        self.dequeue(waiter);
        waiter.woken.notify_one();
        Served::Yes
    }

    /// Takes a waiter out of its queues, so the next one is at the front.
    fn dequeue(&self, waiter: &Arc<Waiter>) {
        let mut queues = self.queues.lock();
        for key in &waiter.request.keys {
            let id = (waiter.request.db as u8, key.to_vec());
            if let Some(queue) = queues.get_mut(&id) {
                queue.retain(|w| !Arc::ptr_eq(w, waiter));
                if queue.is_empty() {
                    queues.remove(&id);
                }
            }
        }
    }
}

enum Served {
    Yes,
    AlreadyDone,
    NothingThere,
    /// Nothing for this waiter, perhaps something for the next one.
    NotThisOne,
}
