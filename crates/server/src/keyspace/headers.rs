//! The keys family for a database written before it existed.
//!
//! Every write keeps a key's header (the keys family) in step with its metadata, so only a
//! database from before the family has metadata records and no headers. Its first open writes
//! a header for every metadata record, under a record saying that a build is under way, so
//! that an open cut short builds them again. Any other open writes nothing: on a replica, a
//! write at the start would move the sequence number that is its replication offset.

use shale_storage::keys as k;
use shale_storage::metadata::KeyHeader;
use shale_storage::{Cf, Engine, ScanDirection, StorageError, WriteBatch};

/// Headers are written this many at a time.
const BATCH: usize = 4096;

/// Writes the header of every key if the keys family is empty while keys exist, or a build
/// was cut short; returns how many it wrote.
pub(super) fn build_missing(engine: &dyn Engine) -> Result<u64, StorageError> {
    let marker = k::key_headers_building_key();
    let resumed = engine.get(Cf::Meta, &marker)?.is_some();
    if !resumed && (holds_keys(engine, Cf::Keys)? || !holds_keys(engine, Cf::Meta)?) {
        return Ok(0);
    }
    let mut batch = WriteBatch::new();
    batch.put(Cf::Meta, marker.clone(), Vec::new());
    engine.write(batch)?;
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
    batch.delete(Cf::Meta, marker);
    engine.write(batch)?;
    Ok(built)
}

/// Whether family `cf` holds a record of any user key.
fn holds_keys(engine: &dyn Engine, cf: Cf) -> Result<bool, StorageError> {
    let (start, end) = k::all_dbs_range();
    let mut found = false;
    engine.scan(cf, &start, &end, ScanDirection::Forward, &mut |_, _| {
        found = true;
        false
    })?;
    Ok(found)
}
