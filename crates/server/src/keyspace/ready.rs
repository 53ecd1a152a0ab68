//! Lists and sorted sets that writes filled while clients block on keys (BLPOP, BZPOPMIN...).
//! As with WATCH, the keys come from the committed batch itself: any metadata record it
//! writes for a list or sorted set, whichever command, transaction or script wrote it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use shale_storage::keys as k;
use shale_storage::metadata::{peek_header, KeyKind};
use shale_storage::{Cf, Op, WriteBatch};

#[derive(Default)]
pub struct ReadyKeys {
    /// Blocked clients; batches are not looked at while there are none.
    blocked: AtomicUsize,
    /// Whether `keys` may be non-empty, so that [`ReadyKeys::take`] costs no lock after every
    /// command.
    noted: AtomicBool,
    keys: Mutex<Vec<(u8, Vec<u8>)>>,
    /// Database numbers that SWAPDB pointed at other stored databases: every key blocked
    /// clients wait on there is tried again.
    swapped: Mutex<Vec<u8>>,
}

impl ReadyKeys {
    pub fn client_blocked(&self) {
        self.blocked.fetch_add(1, Ordering::Relaxed);
    }

    pub fn client_unblocked(&self) {
        self.blocked.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn any_blocked(&self) -> bool {
        self.blocked.load(Ordering::Relaxed) > 0
    }

    /// The keys (stored database, key) and the swapped database numbers noted since the last
    /// call.
    pub fn take(&self) -> (Vec<(u8, Vec<u8>)>, Vec<u8>) {
        if !self.noted.swap(false, Ordering::AcqRel) {
            return Default::default();
        }
        let keys = std::mem::take(&mut *self.keys.lock());
        (keys, std::mem::take(&mut *self.swapped.lock()))
    }

    pub(super) fn note_swapped(&self, numbers: Vec<u8>) {
        if numbers.is_empty() || !self.any_blocked() {
            return;
        }
        self.swapped.lock().extend(numbers);
        self.noted.store(true, Ordering::Release);
    }

    pub(super) fn note(&self, batch: &WriteBatch) {
        self.add(self.fillable(batch));
    }

    /// The lists and sorted sets that `batch` writes, if any client is blocked.
    pub(super) fn fillable(&self, batch: &WriteBatch) -> Vec<(u8, Vec<u8>)> {
        let mut keys: Vec<(u8, Vec<u8>)> = Vec::new();
        if self.blocked.load(Ordering::Relaxed) == 0 {
            return keys;
        }
        for op in &batch.ops {
            if let Op::Put {
                cf: Cf::Meta,
                key,
                value,
            } = op
            {
                let fillable = matches!(
                    peek_header(value),
                    Some((KeyKind::List | KeyKind::ZSet | KeyKind::Stream, _))
                );
                if let (true, Some((db, user_key))) = (fillable, k::owner_of(Cf::Meta, key)) {
                    if !keys.iter().any(|(d, k)| *d == db && k == user_key) {
                        keys.push((db, user_key.to_vec()));
                    }
                }
            }
        }
        keys
    }

    pub(super) fn add(&self, fillable: Vec<(u8, Vec<u8>)>) {
        if fillable.is_empty() {
            return;
        }
        let mut keys = self.keys.lock();
        for key in fillable {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        self.noted.store(true, Ordering::Release);
    }
}
