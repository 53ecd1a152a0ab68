//! The keys family for a database written before it existed.
//!
//! Every write keeps a key's header (the keys family) in step with its metadata, so a
//! database opened for the first time by a version with the family has none yet: the first
//! open writes one for every metadata record, then the record saying it is done, so an open
//! cut short builds them again.

use shale_storage::keys as k;
use shale_storage::metadata::KeyHeader;
use shale_storage::{Cf, Engine, ScanDirection, StorageError, WriteBatch};

/// Headers are written this many at a time.
const BATCH: usize = 4096;

/// Writes the header of every key unless the database says they are all there; returns how
/// many it wrote.
pub(super) fn build_missing(engine: &dyn Engine) -> Result<u64, StorageError> {
    if engine.get(Cf::Meta, &k::key_headers_built_key())?.is_some() {
        return Ok(0);
    }
    let (start, end) = k::all_dbs_range();
    let mut batch = WriteBatch::new();
    let mut built = 0;
    let mut failed = None;
    engine.scan(
        Cf::Meta,
        &start,
        &end,
        ScanDirection::Forward,
        &mut |raw, value| {
            let Some(header) = KeyHeader::of_record(value) else {
                failed = Some(StorageError::Corrupt("metadata header"));
                return false;
            };
            batch.put(Cf::Keys, raw.to_vec(), header.encode());
            built += 1;
            if batch.ops.len() < BATCH {
                return true;
            }
            match engine.write(std::mem::take(&mut batch)) {
                Ok(()) => true,
                Err(err) => {
                    failed = Some(err);
                    false
                }
            }
        },
    )?;
    if let Some(err) = failed {
        return Err(err);
    }
    batch.put(Cf::Meta, k::key_headers_built_key(), Vec::new());
    engine.write(batch)?;
    Ok(built)
}
