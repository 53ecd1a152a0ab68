//! The keys a command's writes changed, read from its write batches, for keyspace
//! notifications: a metadata record put or deleted, or an element written.

use parking_lot::Mutex;
use shale_storage::keys as k;
use shale_storage::{Cf, Op, WriteBatch};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenKey {
    pub db: u8,
    pub key: Vec<u8>,
    /// Whether the write removed the key.
    pub deleted: bool,
}

#[derive(Default)]
pub struct WrittenKeys(Mutex<Vec<WrittenKey>>);

impl WrittenKeys {
    pub fn take(&self) -> Vec<WrittenKey> {
        std::mem::take(&mut *self.0.lock())
    }

    pub(super) fn note(&self, batch: &WriteBatch) {
        let mut written = self.0.lock();
        for op in &batch.ops {
            let (cf, raw, deleted) = match op {
                Op::Put { cf, key, .. } => (*cf, key, false),
                Op::Delete { cf, key } => (*cf, key, *cf == Cf::Meta),
                Op::DeleteRange { cf, start, .. } => (*cf, start, false),
                Op::AddCounter { .. } => continue,
            };
            if cf == Cf::Expire {
                continue;
            }
            let Some((db, key)) = k::owner_of(cf, raw) else {
                continue;
            };
            match written.iter_mut().find(|w| w.db == db && w.key == key) {
                Some(entry) if cf == Cf::Meta => entry.deleted = deleted,
                Some(_) => {}
                None => written.push(WrittenKey {
                    db,
                    key: key.to_vec(),
                    deleted,
                }),
            }
        }
    }
}
