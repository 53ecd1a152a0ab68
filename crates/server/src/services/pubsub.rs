//! Publish/subscribe: the registry of channel and pattern subscribers, and delivery.
//!
//! Each connection has a bounded queue of messages; PUBLISH pushes into the queues of the
//! receivers without waiting. A subscriber whose waiting output breaks its class's
//! `client-output-buffer-limit` (pubsub for subscribers, normal for monitors), or that leaves
//! [`QUEUE_LIMIT`] messages unread, is disconnected, so a slow reader cannot grow the server's
//! memory.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use shale_protocol::Reply;
use tokio::sync::mpsc;

use super::ClientHandle;
use crate::config::{OutputLimit, OutputLimits};
use crate::types::pattern::glob_match;

/// Messages a subscriber may have waiting before it is disconnected.
pub const QUEUE_LIMIT: usize = 16 * 1024;

/// Which namespace a subscription lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    pub fn subscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    pub fn unsubscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// The client class whose output limit applies to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputClass {
    /// MONITOR lines.
    Normal,
    /// Pub/sub messages.
    PubSub,
}

/// The output limits of the classes whose clients receive queued messages, as CONFIG SET
/// last set them; read on every message, so atomics rather than the config's lock.
#[derive(Default)]
pub struct SharedOutputLimits {
    normal: [AtomicU64; 3],
    pubsub: [AtomicU64; 3],
}

impl SharedOutputLimits {
    pub fn set(&self, limits: &OutputLimits) {
        for (slots, limit) in [(&self.normal, limits.normal), (&self.pubsub, limits.pubsub)] {
            slots[0].store(limit.hard, Ordering::Relaxed);
            slots[1].store(limit.soft, Ordering::Relaxed);
            slots[2].store(limit.soft_seconds, Ordering::Relaxed);
        }
    }

    fn get(&self, class: OutputClass) -> OutputLimit {
        let slots = match class {
            OutputClass::Normal => &self.normal,
            OutputClass::PubSub => &self.pubsub,
        };
        OutputLimit {
            hard: slots[0].load(Ordering::Relaxed),
            soft: slots[1].load(Ordering::Relaxed),
            soft_seconds: slots[2].load(Ordering::Relaxed),
        }
    }
}

/// How a connection receives its messages.
#[derive(Clone)]
pub struct Subscriber {
    pub client: Arc<ClientHandle>,
    pub queue: mpsc::Sender<Reply>,
    pub limits: Arc<SharedOutputLimits>,
}

impl Subscriber {
    /// Queues one message (a pub/sub message, a MONITOR line). A connection whose output
    /// waiting to be written would break `class`'s limit with it, or that leaves
    /// [`QUEUE_LIMIT`] messages unread, is disconnected instead. Whether the message was
    /// queued.
    pub fn send(&self, message: Reply, class: OutputClass) -> bool {
        let bytes = message.payload_len();
        let pending = self.client.buffers.pending_output() + bytes as u64;
        if self.client.output_over(self.limits.get(class), pending) {
            tracing::warn!(
                "closing client {}: {pending} bytes of output waiting, over \
                 client-output-buffer-limit",
                self.client.addr
            );
            self.client.kill();
            return false;
        }
        // Counted before it is queued, so the connection never takes it uncounted.
        let gauges = &self.client.buffers;
        gauges.message_queued(bytes);
        let sent = self.queue.try_send(message);
        if sent.is_err() {
            gauges.message_taken(bytes);
        }
        match sent {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    "closing client {}: {} messages unread",
                    self.client.addr,
                    QUEUE_LIMIT
                );
                self.client.kill();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

type Registry = HashMap<Bytes, HashMap<u64, Subscriber>>;

#[derive(Default)]
pub struct PubSub {
    registries: Mutex<HashMap<Kind, Registry>>,
}

impl PubSub {
    pub fn subscribe(&self, kind: Kind, name: Bytes, subscriber: &Subscriber) {
        let mut registries = self.registries.lock();
        registries
            .entry(kind)
            .or_default()
            .entry(name)
            .or_default()
            .insert(subscriber.client.id, subscriber.clone());
    }

    pub fn unsubscribe(&self, kind: Kind, name: &[u8], client: u64) {
        let mut registries = self.registries.lock();
        if let Some(registry) = registries.get_mut(&kind) {
            if let Some(subscribers) = registry.get_mut(name) {
                subscribers.remove(&client);
                if subscribers.is_empty() {
                    registry.remove(name);
                }
            }
        }
    }

    /// Delivers a message; returns how many subscriptions received it.
    pub fn publish(&self, kind: Kind, channel: &Bytes, message: &Bytes) -> i64 {
        let registries = self.registries.lock();
        let mut received = 0;
        let (direct, word) = match kind {
            Kind::Shard => (Kind::Shard, "smessage"),
            _ => (Kind::Channel, "message"),
        };
        if let Some(subscribers) = registries.get(&direct).and_then(|r| r.get(channel)) {
            for subscriber in subscribers.values() {
                received += deliver(
                    subscriber,
                    vec![
                        Reply::bulk(word),
                        Reply::Bulk(channel.clone()),
                        Reply::Bulk(message.clone()),
                    ],
                );
            }
        }
        if kind == Kind::Channel {
            for (pattern, subscribers) in registries.get(&Kind::Pattern).into_iter().flatten() {
                if !glob_match(pattern, channel, false) {
                    continue;
                }
                for subscriber in subscribers.values() {
                    let push = vec![
                        Reply::bulk("pmessage"),
                        Reply::Bulk(pattern.clone()),
                        Reply::Bulk(channel.clone()),
                        Reply::Bulk(message.clone()),
                    ];
                    received += deliver(subscriber, push);
                }
            }
        }
        received
    }

    /// Active channels (with at least one subscriber), optionally matching `pattern`.
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let registries = self.registries.lock();
        let mut names: Vec<Bytes> = registries
            .get(&kind)
            .into_iter()
            .flat_map(|r| r.keys())
            .filter(|name| pattern.is_none_or(|p| glob_match(p, name, false)))
            .cloned()
            .collect();
        names.sort();
        names
    }

    pub fn subscriber_count(&self, kind: Kind, name: &[u8]) -> i64 {
        self.registries
            .lock()
            .get(&kind)
            .and_then(|r| r.get(name))
            .map_or(0, |s| s.len() as i64)
    }

    /// How many channels (patterns, shard channels) of `kind` have subscribers: PUBSUB
    /// NUMPAT, and INFO's pubsub_channels and friends.
    pub fn active_count(&self, kind: Kind) -> i64 {
        self.registries
            .lock()
            .get(&kind)
            .map_or(0, |r| r.len() as i64)
    }

    /// Every channel, pattern and shard channel `client` is subscribed to (found by a scan:
    /// only ACL changes ask).
    pub fn subscriptions_of(&self, client: u64) -> Vec<(Kind, Bytes)> {
        let registries = self.registries.lock();
        registries
            .iter()
            .flat_map(|(kind, registry)| {
                registry
                    .iter()
                    .filter(|(_, subscribers)| subscribers.contains_key(&client))
                    .map(|(name, _)| (*kind, name.clone()))
            })
            .collect()
    }

    /// Drops every subscription of a client (on disconnect and RESET).
    pub fn forget(&self, client: u64, subscriptions: &Subscriptions) {
        for (kind, name) in subscriptions.all() {
            self.unsubscribe(kind, name, client);
        }
    }
}

fn deliver(subscriber: &Subscriber, push: Vec<Reply>) -> i64 {
    subscriber.send(Reply::Push(push), OutputClass::PubSub) as i64
}

/// A connection's own subscriptions.
#[derive(Default, Debug, Clone)]
pub struct Subscriptions {
    channels: Names,
    patterns: Names,
    shard: Names,
}

/// Names with the order they were subscribed in: UNSUBSCRIBE and friends without arguments
/// answer in that order, as Redis does for patterns (its channels come in hash order).
#[derive(Default, Debug, Clone)]
struct Names {
    next: u64,
    names: HashMap<Bytes, u64>,
}

impl Subscriptions {
    fn names(&self, kind: Kind) -> &Names {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn names_mut(&mut self, kind: Kind) -> &mut Names {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Adds a subscription; false if there was one.
    pub fn insert(&mut self, kind: Kind, name: Bytes) -> bool {
        let names = self.names_mut(kind);
        match names.names.entry(name) {
            Entry::Occupied(_) => false,
            Entry::Vacant(slot) => {
                slot.insert(names.next);
                names.next += 1;
                true
            }
        }
    }

    pub fn remove(&mut self, kind: Kind, name: &[u8]) {
        self.names_mut(kind).names.remove(name);
    }

    /// The subscriptions of `kind`, oldest first.
    pub fn ordered(&self, kind: Kind) -> Vec<Bytes> {
        let mut all: Vec<(&Bytes, u64)> = self
            .names(kind)
            .names
            .iter()
            .map(|(name, &order)| (name, order))
            .collect();
        all.sort_unstable_by_key(|&(_, order)| order);
        all.into_iter().map(|(name, _)| name.clone()).collect()
    }

    pub fn len(&self, kind: Kind) -> usize {
        self.names(kind).names.len()
    }

    fn all(&self) -> impl Iterator<Item = (Kind, &Bytes)> {
        [Kind::Channel, Kind::Pattern, Kind::Shard]
            .into_iter()
            .flat_map(move |kind| self.names(kind).names.keys().map(move |name| (kind, name)))
    }

    /// The count SUBSCRIBE and friends reply with: channels plus patterns (shard channels
    /// count on their own, as in Redis).
    pub fn count(&self, kind: Kind) -> i64 {
        match kind {
            Kind::Shard => self.len(Kind::Shard) as i64,
            _ => (self.len(Kind::Channel) + self.len(Kind::Pattern)) as i64,
        }
    }

    pub fn is_empty(&self) -> bool {
        [Kind::Channel, Kind::Pattern, Kind::Shard]
            .into_iter()
            .all(|kind| self.len(kind) == 0)
    }
}
