//! The keys a command's writes changed, read from its write batches, for keyspace
//! notifications: a metadata record put or deleted, or an element written.

use std::collections::HashMap;

use parking_lot::Mutex;
use shale_storage::keys as k;
use shale_storage::{Cf, Op, WriteBatch};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenKey {
    pub db: u8,
    pub key: Vec<u8>,
    /// Whether the write removed the key.
    pub deleted: bool,
    /// Whether the write created the key (it did not exist, or had expired).
    pub created: bool,
}

/// The keys in the order first written, and where each stands (so that a command writing
/// many keys costs linear time).
#[derive(Default)]
pub struct WrittenKeys(Mutex<Written>);

type Written = (Vec<WrittenKey>, HashMap<(u8, Vec<u8>), usize>);

impl WrittenKeys {
    pub fn take(&self) -> Vec<WrittenKey> {
        let mut written = self.0.lock();
        if written.0.is_empty() {
            return Vec::new();
        }
        written.1.clear();
        std::mem::take(&mut written.0)
    }

    /// Notes that a write about to be staged creates `key`; its batch is noted later.
    pub(super) fn note_created(&self, db: u8, key: &[u8]) {
        let (keys, index) = &mut *self.0.lock();
        match index.get(&(db, key.to_vec())) {
            Some(&at) => keys[at].created = true,
            None => {
                index.insert((db, key.to_vec()), keys.len());
                keys.push(WrittenKey {
                    db,
                    key: key.to_vec(),
                    deleted: false,
                    created: true,
                });
            }
        }
    }

    pub(super) fn note(&self, batch: &WriteBatch) {
        let mut written = self.0.lock();
        for op in &batch.ops {
            let (cf, raw, deleted) = match op {
                Op::Put { cf, key, .. } => (*cf, key, false),
                Op::Delete { cf, key } => (*cf, key, *cf == Cf::Meta),
                Op::DeleteRange { cf, start, .. } => (*cf, start, false),
                Op::Patch { key, .. } => (Cf::Data, key, false),
                Op::AddCounter { .. } => continue,
            };
            if cf == Cf::Expire {
                continue;
            }
            let Some((db, key)) = k::owner_of(cf, raw) else {
                continue;
            };
            let (keys, index) = &mut *written;
            match index.get(&(db, key.to_vec())) {
                Some(&at) if cf == Cf::Meta => keys[at].deleted = deleted,
                Some(_) => {}
                None => {
                    index.insert((db, key.to_vec()), keys.len());
                    keys.push(WrittenKey {
                        db,
                        key: key.to_vec(),
                        deleted,
                        created: false,
                    });
                }
            }
        }
    }
}
