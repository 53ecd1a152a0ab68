//! Publishing keyspace notifications: `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>`
//! messages, for the classes `notify-keyspace-events` enables. Which events a command causes is
//! the commands' business (`commands/notify.rs`); this only delivers them.

use bytes::Bytes;

use super::pubsub::{Kind, PubSub};
use super::Services;
use crate::config::event_classes::{EXPIRED, KEYEVENT, KEYSPACE};

/// One event: its class, its name, and the key and database (by number) it concerns. Inside a
/// transaction it is held until the commit.
pub struct Event {
    class: u32,
    name: &'static str,
    db: u8,
    key: Vec<u8>,
}

impl Event {
    pub fn new(class: u32, name: &'static str, db: u8, key: &[u8]) -> Event {
        Event {
            class,
            name,
            db,
            key: key.to_vec(),
        }
    }
}

/// The publisher, with the classes enabled when it was made.
pub struct Notifications<'a> {
    pubsub: &'a PubSub,
    classes: u32,
}

impl Services {
    pub fn notifications(&self) -> Notifications<'_> {
        Notifications {
            pubsub: &self.pubsub,
            classes: self.notify_classes(),
        }
    }
}

impl Notifications<'_> {
    /// Whether events of `class` are published (and `K` or `E` is on).
    pub fn enabled(&self, class: u32) -> bool {
        self.classes & class != 0 && self.classes & (KEYSPACE | KEYEVENT) != 0
    }

    /// Publishes `event` if its class is enabled.
    pub fn publish(&self, event: Event) {
        if self.classes & event.class != 0 {
            self.publish_as(event.name, event.db, &event.key);
        }
    }

    /// Publishes the events a transaction held back, once it has committed.
    pub fn publish_all(&self, events: Vec<Event>) {
        for event in events {
            self.publish(event);
        }
    }

    /// The `expired` event of a key the expiry cycle removed.
    pub fn expired(&self, db: u8, key: &[u8]) {
        self.publish(Event::new(EXPIRED, "expired", db, key));
    }

    fn publish_as(&self, event: &str, db: u8, key: &[u8]) {
        if self.classes & KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            self.pubsub.publish(
                Kind::Channel,
                &Bytes::from(channel),
                &Bytes::copy_from_slice(event.as_bytes()),
            );
        }
        if self.classes & KEYEVENT != 0 {
            let channel = Bytes::from(format!("__keyevent@{db}__:{event}"));
            self.pubsub
                .publish(Kind::Channel, &channel, &Bytes::copy_from_slice(key));
        }
    }
}
