//! Loading a Redis RDB file into a data directory.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_rdb::file::{FileReader, Record};
use shale_storage::{Engine, RocksEngine};

use super::Counted;
use crate::config::Config;
use crate::error::Error;
use crate::keyspace::Keyspace;
use crate::services::replication::datadir::DataDir;
use crate::types::dump::Restored;

/// How often the import logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// File bytes read ahead.
const READ_BUFFER: usize = 1 << 20;

/// What an import did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Imported {
    pub keys: u64,
    /// Keys already past their expiry, left out.
    pub expired: u64,
    /// Keys with a value this server cannot hold (module types, empty collections).
    pub skipped: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// Loads `path` into a fresh database beside the current one in `config.dir`, and makes it
/// current once the whole file is in and its checksum matched; the old data is then removed.
/// A file that fails leaves the data directory as it was.
pub fn import_rdb(path: &Path, config: &Config) -> Result<Imported, String> {
    let started = Instant::now();
    let file = File::open(path).map_err(|e| format!("can't open {}: {e}", path.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    std::fs::create_dir_all(&config.dir)
        .map_err(|e| format!("can't create data directory {}: {e}", config.dir.display()))?;
    let data_dir = DataDir::new(&config.dir);
    data_dir.remove_leftovers();
    let incoming = data_dir
        .fresh_incoming()
        .map_err(|e| format!("can't make a directory for the import: {e}"))?;
    let mut imported = {
        let engine = Arc::new(
            RocksEngine::open(&incoming, &config.rocks)
                .map_err(|e| format!("can't create a database in {}: {e}", incoming.display()))?,
        );
        let keyspace = Keyspace::open(engine.clone(), config.databases)
            .map_err(|e| format!("can't open the keyspace: {e}"))?;
        let read = Arc::new(AtomicU64::new(0));
        let input = Counted {
            inner: BufReader::with_capacity(READ_BUFFER, file),
            count: read.clone(),
        };
        let loaded = load(input, &keyspace, size, &read);
        let flushed = engine
            .flush_memtables()
            .map_err(|e| format!("can't flush the import: {e}"));
        let imported = loaded.map_err(|e| format!("{}: {e}", path.display()))?;
        flushed?;
        imported
    };
    data_dir
        .install_incoming()
        .map_err(|e| format!("can't install the imported database: {e}"))?;
    // The data is no longer any master's history.
    data_dir
        .forget_replication_id()
        .map_err(|e| format!("can't reset the replication ID: {e}"))?;
    data_dir.remove_leftovers();
    imported.seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        "imported {}: {} keys ({} expired and {} skipped left out), {} MB in {:.1} s, {:.0} keys/s",
        path.display(),
        imported.keys,
        imported.expired,
        imported.skipped,
        imported.bytes / 1_000_000,
        imported.seconds,
        imported.keys as f64 / imported.seconds.max(1e-9)
    );
    Ok(imported)
}

/// Reads every record and restores each key into `keyspace`.
fn load(
    input: impl std::io::Read,
    keyspace: &Keyspace,
    size: u64,
    read: &AtomicU64,
) -> Result<Imported, String> {
    let mut reader = FileReader::new(input).map_err(|e| e.to_string())?;
    tracing::info!("loading an RDB file of version {}", reader.version());
    let mut imported = Imported::default();
    let mut reported = Instant::now();
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
            Record::Function(code) => {
                let first_line = code.split(|&b| b == b'\n').next().unwrap_or_default();
                tracing::warn!(
                    "skipped a function library ({}): Shale has no functions",
                    String::from_utf8_lossy(first_line)
                );
            }
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
    imported.bytes = read.load(Ordering::Relaxed);
    Ok(imported)
}
