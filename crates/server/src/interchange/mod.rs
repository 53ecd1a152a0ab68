//! Redis's RDB format in and out of the keyspace (the codec is the `shale-rdb` crate's):
//! [`load`] restores every key of a stream of records (a file, or the snapshot a Redis master
//! sends its replica); [`import`] loads a `dump.rdb` into a fresh database that replaces the
//! current one only once the whole file has been read and its checksum matched; [`export`]
//! writes the current one as a file Redis 7.0 loads. Import and export run while no server
//! runs on the data directory.

pub mod export;
pub mod import;

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_rdb::file::{FileReader, Record};

use crate::error::Error;
use crate::keyspace::Keyspace;
use crate::scripting::functions::RestorePolicy;
use crate::scripting::Scripts;
use crate::types::dump::Restored;

/// How often a load logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What a load did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Imported {
    pub keys: u64,
    /// Keys already past their expiry, left out.
    pub expired: u64,
    /// Keys with a value this server cannot hold (module types, empty collections).
    pub skipped: u64,
    /// Function libraries.
    pub libraries: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// A reader that counts the bytes it passes on, for progress reports.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Reads every record of `input` and restores each key into `keyspace`, logging progress
/// against `size` bytes (0 if unknown) as `read` counts them.
pub fn load(
    input: impl std::io::Read,
    keyspace: &Keyspace,
    size: u64,
    read: &AtomicU64,
) -> Result<Imported, String> {
    let mut reader = FileReader::new(input).map_err(|e| e.to_string())?;
    tracing::info!("loading an RDB file of version {}", reader.version());
    let mut imported = Imported::default();
    let mut reported = Instant::now();
    let mut libraries = Vec::new();
    loop {
        let record = reader.next_record().map_err(|e| e.to_string())?;
        match record {
            Record::Aux(key, value) => tracing::info!(
                "RDB {}: {}",
                String::from_utf8_lossy(&key),
                String::from_utf8_lossy(&value)
            ),
            Record::ResizeDb { .. } => {}
            Record::Key(entry) => {
                let index = usize::try_from(entry.db)
                    .ok()
                    .filter(|&db| db < keyspace.databases())
                    .ok_or_else(|| {
                        format!(
                            "the file has database {}, this server {} (see `databases`)",
                            entry.db,
                            keyspace.databases()
                        )
                    })?;
                let db = keyspace.db(index);
                let expire_at = entry.expire_at.unwrap_or(0);
                match db.restore(&entry.key, entry.value, expire_at, false) {
                    Ok(Restored::Created) => imported.keys += 1,
                    Ok(Restored::Expired { .. }) => imported.expired += 1,
                    Err(Error::BusyKey) => {
                        return Err(format!(
                            "key {:?} appears twice in database {}",
                            String::from_utf8_lossy(&entry.key),
                            entry.db
                        ))
                    }
                    Err(err) => {
                        return Err(format!(
                            "key {:?}: {err}",
                            String::from_utf8_lossy(&entry.key)
                        ))
                    }
                }
            }
            Record::SkippedKey { db, key, reason } => {
                imported.skipped += 1;
                tracing::warn!(
                    "skipped key {:?} of database {db}: {reason}",
                    String::from_utf8_lossy(&key)
                );
            }
            Record::Function(code) => libraries.push(code),
            Record::ModuleAux(name) => {
                tracing::warn!("skipped auxiliary data of module type {name}")
            }
            Record::End { checksummed } => {
                if !checksummed {
                    tracing::warn!("the file was saved without a checksum: nothing checked");
                }
                break;
            }
        }
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = Instant::now();
            tracing::info!(
                "loading: {} of {} MB, {} keys",
                read.load(Ordering::Relaxed) / 1_000_000,
                size / 1_000_000,
                imported.keys
            );
        }
    }
    // As Redis loads them: each library must load, or the file does not.
    imported.libraries = libraries.len() as u64;
    Scripts::default()
        .restore_libraries(keyspace, libraries, RestorePolicy::Flush, false)
        .map_err(|e| format!("a function library does not load: {e}"))?;
    imported.bytes = read.load(Ordering::Relaxed);
    Ok(imported)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use shale_rdb::file::FileWriter;
    use shale_rdb::Value;
    use shale_storage::MemoryEngine;

    use super::*;
    use crate::keyspace::as_redis_replica;

    #[test]
    fn a_replica_keeps_keys_past_their_expiry_and_an_import_leaves_them_out() {
        let mut file = FileWriter::new(Vec::new(), &[]).expect("header");
        file.select_db(0, 2, 1).expect("select");
        let value = Value::String(Bytes::from("v"));
        file.key(b"stale", &value, 1).expect("stale key");
        file.key(b"kept", &value, 0).expect("kept key");
        let file = file.finish().expect("finish");
        for (replica, keys, expired) in [(false, 1, 1), (true, 2, 0)] {
            let keyspace = Keyspace::open(Arc::new(MemoryEngine::default()), 16).expect("open");
            let read = AtomicU64::new(0);
            let run = || load(&file[..], &keyspace, 0, &read);
            let imported = match replica {
                true => as_redis_replica(run),
                false => run(),
            }
            .expect("load");
            assert_eq!(
                (imported.keys, imported.expired),
                (keys, expired),
                "replica {replica}"
            );
            // Stored, though no client sees it (DBSIZE neither) until the master's DEL.
            let stored = keyspace.db(0).raw_meta(b"stale").expect("read").is_some();
            assert_eq!(stored, replica);
            assert_eq!(keyspace.db(0).size().expect("size"), 1);
        }
    }
}
