//! Loading a Redis RDB file into a data directory.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use shale_storage::{Engine, RocksConfig, RocksEngine};

use super::{Counted, Imported};
use crate::config::Config;
use crate::datadir::DataDir;
use crate::keyspace::Keyspace;

/// File bytes read ahead.
const READ_BUFFER: usize = 1 << 20;

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
    let loaded =
        load_into(&incoming, file, size, config).map_err(|e| format!("{}: {e}", path.display()));
    let mut imported = match loaded {
        Ok(imported) => imported,
        Err(err) => {
            // The database is closed by now: nothing half-loaded is left behind.
            if let Err(removed) = std::fs::remove_dir_all(&incoming) {
                tracing::warn!("can't remove {}: {removed}", incoming.display());
            }
            return Err(err);
        }
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
        "imported {}: {} keys ({} expired and {} skipped left out) and {} function libraries, {} MB in {:.1} s, {:.0} keys/s",
        path.display(),
        imported.keys,
        imported.expired,
        imported.skipped,
        imported.libraries,
        imported.bytes / 1_000_000,
        imported.seconds,
        imported.keys as f64 / imported.seconds.max(1e-9)
    );
    Ok(imported)
}

/// Loads the file into a new database in `incoming`, flushed and closed when this returns.
fn load_into(incoming: &Path, file: File, size: u64, config: &Config) -> Result<Imported, String> {
    let bulk = RocksConfig {
        bulk_load: true,
        ..config.rocks.clone()
    };
    let engine = Arc::new(
        RocksEngine::open(incoming, &bulk)
            .map_err(|e| format!("can't create a database in {}: {e}", incoming.display()))?,
    );
    let keyspace = Keyspace::open(engine.clone(), config.databases)
        .map_err(|e| format!("can't open the keyspace: {e}"))?;
    let read = Arc::new(AtomicU64::new(0));
    let input = Counted {
        inner: BufReader::with_capacity(READ_BUFFER, file),
        count: read.clone(),
    };
    let imported = super::load(input, &keyspace, size, &read)?;
    engine
        .flush_memtables()
        .map_err(|e| format!("can't flush the import: {e}"))?;
    Ok(imported)
}
