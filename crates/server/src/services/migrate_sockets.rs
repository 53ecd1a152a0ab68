//! MIGRATE's connections to its targets, kept as Redis keeps them: one per `host:port`, reused
//! by the next MIGRATE there, closed after [`IDLE_SECS`] unused or when one fails, at most
//! [`MAX_SOCKETS`] (INFO's `migrate_cached_sockets`).

use std::collections::HashMap;
use std::io::BufReader;
use std::net::TcpStream;
use std::sync::Arc;

use parking_lot::Mutex;

/// Seconds a connection may stay unused (Redis's `MIGRATE_SOCKET_CACHE_TTL`).
const IDLE_SECS: u64 = 10;
/// Connections kept at most (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`).
const MAX_SOCKETS: usize = 64;

/// A connection to a target; one MIGRATE at a time uses it.
pub struct TargetLink {
    pub stream: BufReader<TcpStream>,
    /// The database this connection has selected on the target, once a MIGRATE succeeded.
    pub selected_db: Option<i64>,
}

pub type SharedLink = Arc<Mutex<TargetLink>>;

struct Cached {
    link: SharedLink,
    /// Unix seconds.
    last_use: u64,
}

#[derive(Default)]
pub struct MigrateSockets {
    links: Mutex<HashMap<String, Cached>>,
}

impl MigrateSockets {
    /// The connection to `target` (`host:port`), the cached one or a new one `connect` opens;
    /// when [`MAX_SOCKETS`] are open, the one unused longest is closed first.
    pub fn get<E>(
        &self,
        target: &str,
        now: u64,
        connect: impl FnOnce() -> Result<TcpStream, E>,
    ) -> Result<SharedLink, E> {
        if let Some(cached) = self.links.lock().get_mut(target) {
            cached.last_use = now;
            return Ok(cached.link.clone());
        }
        // Connecting may take the whole timeout: not under the lock INFO and others take.
        let link = Arc::new(Mutex::new(TargetLink {
            stream: BufReader::new(connect()?),
            selected_db: None,
        }));
        let mut links = self.links.lock();
        if links.len() >= MAX_SOCKETS && !links.contains_key(target) {
            let oldest = links
                .iter()
                .min_by_key(|(_, cached)| cached.last_use)
                .map(|(name, _)| name.clone());
            if let Some(name) = oldest {
                links.remove(&name);
            }
        }
        // Another MIGRATE to the same target may have cached its own meanwhile: one is kept.
        let cached = links.entry(target.to_string()).or_insert(Cached {
            link,
            last_use: now,
        });
        Ok(cached.link.clone())
    }

    /// Closes `link` after an error on it, so that the next MIGRATE connects again.
    pub fn close(&self, target: &str, link: &SharedLink) {
        let mut links = self.links.lock();
        if links
            .get(target)
            .is_some_and(|cached| Arc::ptr_eq(&cached.link, link))
        {
            links.remove(target);
        }
    }

    /// Closes the connections unused for more than [`IDLE_SECS`] at `now`, but not one a
    /// MIGRATE is using.
    pub fn close_idle(&self, now: u64) {
        self.links.lock().retain(|_, cached| {
            now.saturating_sub(cached.last_use) <= IDLE_SECS || cached.link.is_locked()
        });
    }

    /// How many connections are open.
    pub fn count(&self) -> usize {
        self.links.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn links_are_reused_closed_on_error_and_when_idle() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let address = listener.local_addr().expect("address");
        let connect = || TcpStream::connect(address);
        let sockets = MigrateSockets::default();
        let first = sockets.get("a:1", 100, connect).expect("connect");
        let again = sockets.get("a:1", 105, || -> std::io::Result<TcpStream> {
            panic!("reused, not opened")
        });
        assert!(Arc::ptr_eq(&first, &again.expect("cached")));
        let other = sockets.get("b:1", 106, connect).expect("connect");
        assert_eq!(sockets.count(), 2);

        sockets.close("a:1", &other);
        assert_eq!(sockets.count(), 2, "only the failed link is closed");
        sockets.close("b:1", &other);
        assert_eq!(sockets.count(), 1);

        sockets.close_idle(115);
        assert_eq!(sockets.count(), 1, "10 seconds unused are not too many");
        let in_use = first.lock();
        sockets.close_idle(116);
        assert_eq!(sockets.count(), 1, "not while a MIGRATE uses it");
        drop(in_use);
        sockets.close_idle(116);
        assert_eq!(sockets.count(), 0);
    }

    #[test]
    fn the_link_unused_longest_makes_room() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
        let address = listener.local_addr().expect("address");
        let sockets = MigrateSockets::default();
        for i in 0..MAX_SOCKETS as u64 {
            let name = format!("h:{i}");
            sockets
                .get(&name, 1000 - i, || TcpStream::connect(address))
                .expect("connect");
        }
        sockets
            .get("new:1", 2000, || TcpStream::connect(address))
            .expect("connect");
        assert_eq!(sockets.count(), MAX_SOCKETS);
        let last = format!("h:{}", MAX_SOCKETS - 1);
        let reopened = std::cell::Cell::new(false);
        let _ = sockets.get(&last, 2001, || {
            reopened.set(true);
            TcpStream::connect(address)
        });
        assert!(reopened.get(), "the oldest was closed");
    }
}
