//! ACL LOG: the most recent refusals, similar ones (same reason, context, object and user
//! within a minute) counted in one entry, as Redis groups them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::Mutex;

/// Entries within this many milliseconds of each other may be grouped.
const GROUPING_MS: u64 = 60_000;
/// How many of the newest entries a refusal is compared with.
const GROUPING_SCAN: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    TopLevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::TopLevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command, key or channel refused; for AUTH, the command's name.
    pub object: Bytes,
    pub username: Bytes,
    /// Unix milliseconds of the last refusal counted.
    pub at_ms: u64,
    /// The CLIENT LIST line of the client refused last.
    pub client_info: String,
}

pub struct AclLog {
    entries: Mutex<VecDeque<Entry>>,
    max_len: AtomicUsize,
}

impl Default for AclLog {
    fn default() -> Self {
        AclLog {
            entries: Mutex::new(VecDeque::new()),
            max_len: AtomicUsize::new(128),
        }
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl AclLog {
    /// `acllog-max-len`, applied at the next refusal as Redis applies it.
    pub fn set_max_len(&self, max: usize) {
        self.max_len.store(max, Ordering::Relaxed);
    }

    pub fn add(&self, mut entry: Entry) {
        let mut entries = self.entries.lock();
        let similar = entries.iter().take(GROUPING_SCAN).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.at_ms.abs_diff(entry.at_ms) <= GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        if let Some(at) = similar {
            if let Some(mut existing) = entries.remove(at) {
                existing.count += 1;
                existing.at_ms = entry.at_ms;
                existing.client_info = std::mem::take(&mut entry.client_info);
                entries.push_front(existing);
            }
            return;
        }
        entries.push_front(entry);
        entries.truncate(self.max_len.load(Ordering::Relaxed));
    }

    /// The newest `count` entries, newest first.
    pub fn newest(&self, count: usize) -> Vec<Entry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &'static str, at_ms: u64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Command,
            context: Context::TopLevel,
            object: Bytes::from(object),
            username: Bytes::from("u"),
            at_ms,
            client_info: format!("at {at_ms}"),
        }
    }

    #[test]
    fn similar_refusals_within_a_minute_share_an_entry() {
        let log = AclLog::default();
        log.add(entry("get", 1_000));
        log.add(entry("set", 2_000));
        log.add(entry("get", 3_000));
        let newest = log.newest(10);
        assert_eq!(newest.len(), 2);
        assert_eq!(
            (newest[0].object.as_ref(), newest[0].count),
            (&b"get"[..], 2)
        );
        assert_eq!(newest[0].client_info, "at 3000");
        log.add(entry("get", 100_000));
        assert_eq!(log.newest(10).len(), 3, "a minute later it is a new entry");
        log.set_max_len(1);
        log.add(entry("del", 100_500));
        assert_eq!(log.newest(10).len(), 1);
    }
}
