//! Integer cursors for SCAN-family commands.
//!
//! Redis cursors are plain integers, but a position in an LSM tree is a key. The table maps a
//! number to the key where the next page starts. It is bounded, so an old cursor can be
//! forgotten; each caller then falls back to a coarser position it can encode in the number
//! itself (SCAN: the start of the cluster slot), so iteration still makes progress.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

const CAPACITY: usize = 16 * 1024;
/// Bound on the bytes of remembered positions (a member can be large).
const CAPACITY_BYTES: usize = 64 << 20;

pub struct CursorTable {
    inner: Mutex<Inner>,
}

struct Inner {
    next_id: u64,
    bytes: usize,
    entries: HashMap<u64, (Vec<u8>, Vec<u8>)>,
    order: VecDeque<u64>,
}

impl Default for CursorTable {
    fn default() -> Self {
        CursorTable {
            inner: Mutex::new(Inner {
                next_id: 1,
                bytes: 0,
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }
}

impl CursorTable {
    /// Remembers `position` for the iteration over `scope` and returns its id (never 0).
    pub fn store(&self, scope: Vec<u8>, position: Vec<u8>) -> u64 {
        let mut inner = self.inner.lock();
        let id = inner.next_id;
        inner.next_id = inner.next_id % (1 << 40) + 1;
        inner.bytes += scope.len() + position.len();
        while inner.order.len() >= CAPACITY
            || (inner.bytes > CAPACITY_BYTES && !inner.order.is_empty())
        {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if let Some((s, p)) = inner.entries.remove(&old) {
                inner.bytes -= s.len() + p.len();
            }
        }
        inner.entries.insert(id, (scope, position));
        inner.order.push_back(id);
        id
    }

    /// The position stored under `id` for `scope`, if it is still remembered.
    pub fn load(&self, id: u64, scope: &[u8]) -> Option<Vec<u8>> {
        let inner = self.inner.lock();
        match inner.entries.get(&id) {
            Some((s, position)) if s == scope => Some(position.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_scoped_and_bounded() {
        let table = CursorTable::default();
        let id = table.store(b"db0".to_vec(), b"pos".to_vec());
        assert_ne!(id, 0);
        assert_eq!(table.load(id, b"db0"), Some(b"pos".to_vec()));
        assert_eq!(table.load(id, b"db1"), None);
        for _ in 0..CAPACITY {
            table.store(vec![], vec![]);
        }
        assert_eq!(table.load(id, b"db0"), None);
        let big = table.store(b"k".to_vec(), vec![0; CAPACITY_BYTES / 2]);
        let bigger = table.store(b"k".to_vec(), vec![0; CAPACITY_BYTES / 2 + 1]);
        assert_eq!(table.load(big, b"k"), None, "bounded in bytes too");
        assert!(table.load(bigger, b"k").is_some());
    }
}
