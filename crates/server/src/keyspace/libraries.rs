//! Function libraries (FUNCTION LOAD) as stored: one record per library holding its code,
//! beside the databases, so FLUSHALL leaves them, a checkpoint carries them and a replica gets
//! them with its master's batches. What the code registers is learnt by running it, which is
//! the scripting layer's business; this module only counts changes, so that layer knows when
//! to read the records again.

use std::sync::atomic::Ordering;

use shale_storage::keys as k;
use shale_storage::{Cf, ScanDirection, WriteBatch};

use super::Keyspace;
use crate::error::Error;

/// One stored library.
pub struct StoredLibrary {
    pub name: Vec<u8>,
    pub code: Vec<u8>,
}

/// A change to the stored libraries, written as one batch.
#[derive(Default)]
pub struct LibraryEdit {
    /// Every library is deleted first (FUNCTION FLUSH, RESTORE FLUSH).
    pub clear: bool,
    pub delete: Vec<Vec<u8>>,
    /// Library name and code.
    pub put: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Keyspace {
    /// Every stored library, in name order.
    pub fn libraries(&self) -> Result<Vec<StoredLibrary>, Error> {
        let (start, end) = k::library_range();
        let mut out = Vec::new();
        self.engine.scan(
            Cf::Meta,
            &start,
            &end,
            ScanDirection::Forward,
            &mut |raw, code| {
                out.push(StoredLibrary {
                    name: raw[start.len()..].to_vec(),
                    code: code.to_vec(),
                });
                true
            },
        )?;
        Ok(out)
    }

    pub fn write_libraries(&self, edit: LibraryEdit) -> Result<(), Error> {
        self.check_writable()?;
        let mut batch = WriteBatch::default();
        if edit.clear {
            let (start, end) = k::library_range();
            batch.delete_range(Cf::Meta, start, end);
        }
        for name in edit.delete {
            batch.delete(Cf::Meta, k::library_key(&name));
        }
        for (name, code) in edit.put {
            batch.put(Cf::Meta, k::library_key(&name), code);
        }
        self.engine.write(batch)?;
        self.libraries_changed();
        Ok(())
    }

    /// Bumped after every change to the stored libraries, here or by a replicated batch.
    pub fn libraries_generation(&self) -> u64 {
        self.library_changes.load(Ordering::Acquire)
    }

    pub(super) fn libraries_changed(&self) {
        self.library_changes.fetch_add(1, Ordering::AcqRel);
    }
}
