//! Blocked clients: BLPOP, BZPOPMIN, XREADGROUP and the like wait on keys, WAIT on replicas.
//!
//! Each key has a FIFO queue of waiters. Writes note the keys whose metadata they write or
//! delete ([`crate::keyspace::ReadyKeys`]); after every command, the connection that ran it
//! serves those keys: it runs each waiter's attempt in queue order on the waiter's behalf and
//! hands over the reply, so the client that blocked first is served first, as in Redis. The
//! attempt decides what a key's new state means for its command: elements to pop, a wait that
//! goes on, or an error that ends it (a stream deleted under XREADGROUP).
//!
//! Every way a wait ends goes through a waiter's state, whose lock makes the endings exclusive
//! (served, timed out, CLIENT UNBLOCK, a role change, a slot moved away, the client gone): a
//! popped element is never lost to another ending.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use shale_protocol::Reply;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::error::Error;
use crate::keyspace::{lock_off_worker, Db, Keyspace};
use crate::services::clients::ClientHandle;

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

/// How a wait ended.
pub enum Ending {
    /// Served, or ended with an error; the connection closes after the reply when `close`
    /// (a server that became a replica, as Redis's `disconnectAllBlockedClients`).
    Reply { reply: Reply, close: bool },
    /// The timeout passed, or CLIENT UNBLOCK said so: the command's reply for a timeout.
    TimedOut,
}

impl Ending {
    /// The reply of a wait that this server ended by becoming a replica.
    pub fn role_changed() -> Ending {
        Ending::Reply {
            reply: Error::Unblocked(
                "force unblock from blocking operation, instance state changed (master -> replica?)",
            )
            .to_reply(),
            close: true,
        }
    }
}

enum WaitState {
    Waiting,
    Done(Ending),
}

pub struct Waiter {
    client: Arc<ClientHandle>,
    /// What it waits on: keys, or replicas (WAIT), which their own connection watches.
    keys: Option<BlockRequest>,
    /// When the timeout ends the wait; `None` waits forever.
    deadline: Option<Instant>,
    state: Mutex<WaitState>,
    woken: Notify,
}

impl Waiter {
    /// The keys it waits on, to see whether this node still serves them.
    pub fn keys(&self) -> &[Bytes] {
        self.keys.as_ref().map_or(&[], |request| &request.keys)
    }

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
    pub fn block(
        &self,
        keyspace: &Keyspace,
        client: Arc<ClientHandle>,
        request: BlockRequest,
    ) -> Arc<Waiter> {
        let timeout = request.timeout;
        let waiter = self.register(client, Some(request), timeout);
        keyspace.ready.client_blocked();
        if let Some(request) = &waiter.keys {
            let mut queues = self.queues.lock();
            for key in &request.keys {
                queues
                    .entry((request.db as u8, key.to_vec()))
                    .or_default()
                    .push_back(waiter.clone());
            }
        }
        self.try_serve(keyspace, &waiter, waiter.keys());
        waiter
    }

    /// Registers a client waiting for replicas (WAIT), whose connection watches their
    /// acknowledgements and ends the wait itself; it is blocked as CLIENT UNBLOCK, INFO and
    /// CLIENT LIST see it.
    pub fn block_on_replicas(
        &self,
        client: Arc<ClientHandle>,
        timeout: Option<Duration>,
    ) -> Arc<Waiter> {
        self.register(client, None, timeout)
    }

    fn register(
        &self,
        client: Arc<ClientHandle>,
        keys: Option<BlockRequest>,
        timeout: Option<Duration>,
    ) -> Arc<Waiter> {
        let id = client.id;
        let waiter = Arc::new(Waiter {
            client,
            keys,
            deadline: timeout.and_then(|timeout| Instant::now().checked_add(timeout)),
            state: Mutex::new(WaitState::Waiting),
            woken: Notify::new(),
        });
        self.by_client.lock().insert(id, waiter.clone());
        waiter
    }

    /// Waits until the waiter's wait ends in any way, or its deadline passes, and returns how
    /// it ended. Cancelled and called again, it keeps the deadline of the first call.
    pub async fn wait(&self, keyspace: &Keyspace, waiter: &Arc<Waiter>) -> Ending {
        let ended = async {
            loop {
                let notified = waiter.woken.notified();
                if !matches!(*waiter.state(), WaitState::Waiting) {
                    return;
                }
                notified.await;
            }
        };
        match waiter.deadline {
            Some(deadline) => {
                let _ = tokio::time::timeout_at(deadline, ended).await;
            }
            None => ended.await,
        }
        self.finish(keyspace, waiter)
    }

    /// Ends a wait (how it ended, if it did; else it timed out or the client went away) and
    /// takes the waiter out of every queue.
    pub fn finish(&self, keyspace: &Keyspace, waiter: &Arc<Waiter>) -> Ending {
        let ending =
            match std::mem::replace(&mut *waiter.state(), WaitState::Done(Ending::TimedOut)) {
                WaitState::Done(ending) => ending,
                WaitState::Waiting => Ending::TimedOut,
            };
        self.dequeue(waiter);
        let mut by_client = self.by_client.lock();
        if by_client
            .get(&waiter.client.id)
            .is_some_and(|w| Arc::ptr_eq(w, waiter))
        {
            by_client.remove(&waiter.client.id);
            if waiter.keys.is_some() {
                keyspace.ready.client_unblocked();
            }
        }
        ending
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
        let ending = match how {
            Unblock::Timeout => Ending::TimedOut,
            Unblock::Error => Ending::Reply {
                reply: Error::Unblocked("client unblocked via CLIENT UNBLOCK").to_reply(),
                close: false,
            },
        };
        // A waiter's state is locked while it is being served, which takes key locks; inside
        // EXEC this command may hold those, so it must not wait for the state lock.
        waiter
            .state
            .try_lock_for(UNBLOCK_WAIT)
            .is_some_and(|mut state| end(&waiter, &mut state, ending))
    }

    /// Ends a wait unless it already ended; whether it did.
    pub fn end(&self, waiter: &Waiter, ending: Ending) -> bool {
        end(waiter, &mut waiter.state(), ending)
    }

    /// Serves the waiters of every key that writes changed since the last call, including keys
    /// that the served commands themselves change (BLMOVE into a list another client waits on).
    pub fn serve_ready(&self, keyspace: &Keyspace) {
        loop {
            let changed = keyspace.ready.take();
            if changed.is_empty() {
                return;
            }
            for (stored, key) in changed.keys {
                let db = keyspace.db_number(stored);
                self.serve_key(keyspace, db, Bytes::from(key));
            }
            // A flush or SWAPDB: every key waited on there may hold something else now.
            let numbers: Vec<u8> = changed
                .databases
                .iter()
                .map(|&stored| keyspace.db_number(stored))
                .collect();
            for (db, key) in self.keys_in(&numbers) {
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
                // Its wait ended otherwise, and it is not yet out of the queues: out it goes.
                Served::AlreadyDone => self.dequeue(&waiter),
                Served::NotThisOne => passed += 1,
                Served::NothingThere => return,
            }
        }
    }

    fn try_serve(&self, keyspace: &Keyspace, waiter: &Arc<Waiter>, keys: &[Bytes]) -> Served {
        let Some(request) = &waiter.keys else {
            return Served::NotThisOne;
        };
        let mut state = waiter.state();
        // Killed, with its connection not yet gone: what it would be served would be lost.
        if !matches!(*state, WaitState::Waiting) || waiter.client.is_killed() {
            return Served::AlreadyDone;
        }
        let reply = match (request.attempt)(keyspace.db(request.db), keys) {
            Ok(Some(reply)) => reply,
            Ok(None) if request.wants == Wants::EntriesAfterOwnId => return Served::NotThisOne,
            Ok(None) => return Served::NothingThere,
            // A waited key that now holds another type does not serve the waiter, which keeps
            // waiting, as in Redis 7.0; waiters of another kind may be served. (An attempt
            // answers other wrong types, such as BLMOVE's destination's, as a reply.)
            Err(Error::WrongType) => return Served::NotThisOne,
            Err(err) => err.to_reply(),
        };
        *state = WaitState::Done(Ending::Reply {
            reply,
            close: false,
        });
        drop(state);
        self.dequeue(waiter);
        waiter.woken.notify_one();
        Served::Yes
    }

    /// Takes a waiter out of its queues, so the next one is at the front.
    fn dequeue(&self, waiter: &Arc<Waiter>) {
        let Some(request) = &waiter.keys else {
            return;
        };
        let mut queues = self.queues.lock();
        for key in &request.keys {
            let id = (request.db as u8, key.to_vec());
            if let Some(queue) = queues.get_mut(&id) {
                queue.retain(|w| !Arc::ptr_eq(w, waiter));
                if queue.is_empty() {
                    queues.remove(&id);
                }
            }
        }
    }
}

/// Ends a wait whose state is locked, unless it already ended; whether it did.
fn end(waiter: &Waiter, state: &mut WaitState, ending: Ending) -> bool {
    if !matches!(state, WaitState::Waiting) {
        return false;
    }
    *state = WaitState::Done(ending);
    waiter.woken.notify_one();
    true
}

enum Served {
    Yes,
    AlreadyDone,
    NothingThere,
    /// Nothing for this waiter, perhaps something for the next one.
    NotThisOne,
}
