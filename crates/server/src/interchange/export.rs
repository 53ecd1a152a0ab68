//! Writing a data directory as an RDB file that Redis 7.0 loads.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use shale_rdb::file::FileWriter;
use shale_rdb::Value;
use shale_storage::RocksEngine;

use crate::config::Config;
use crate::datadir::DataDir;
use crate::keyspace::Keyspace;

/// Keys read from storage at a time.
const PAGE: usize = 1000;
const WRITE_BUFFER: usize = 1 << 20;

/// What an export did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Exported {
    pub keys: u64,
    /// Roaring bitmaps, which Redis has no type for.
    pub skipped: u64,
    /// Function libraries.
    pub libraries: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// Writes every key of the current database in `config.dir` to `path` (through a temporary
/// file beside it, renamed when complete and synced).
pub fn export_rdb(config: &Config, path: &Path) -> Result<Exported, String> {
    let started = Instant::now();
    let current = DataDir::new(&config.dir).current();
    if !current.exists() {
        return Err(format!("no database in {}", config.dir.display()));
    }
    let engine = RocksEngine::open(&current, &config.rocks).map_err(|e| {
        format!(
            "can't open the database in {} (is a server running on it?): {e}",
            config.dir.display()
        )
    })?;
    let keyspace = Keyspace::open(Arc::new(engine), config.databases)
        .map_err(|e| format!("can't open the keyspace: {e}"))?;
    let partial = path.with_file_name(format!(
        ".{}.partial",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    let mut exported = write_file(&keyspace, &partial).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })?;
    std::fs::rename(&partial, path)
        .map_err(|e| format!("can't rename {}: {e}", partial.display()))?;
    exported.seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        "exported {} keys and {} function libraries to {} ({} MB, {} Roaring bitmaps left out) in {:.1} s",
        exported.keys,
        exported.libraries,
        path.display(),
        exported.bytes / 1_000_000,
        exported.skipped,
        exported.seconds
    );
    Ok(exported)
}

fn write_file(keyspace: &Keyspace, path: &Path) -> Result<Exported, String> {
    let io = |e: std::io::Error| format!("can't write {}: {e}", path.display());
    let file = File::create(path).map_err(io)?;
    let ctime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .to_string();
    let aux = [
        ("redis-ver", crate::REDIS_VERSION),
        ("redis-bits", "64"),
        ("ctime", ctime.as_str()),
        ("used-mem", "0"),
        ("aof-base", "0"),
    ];
    let mut writer =
        FileWriter::new(BufWriter::with_capacity(WRITE_BUFFER, file), &aux).map_err(io)?;
    let mut exported = Exported::default();
    let failed = |e: crate::error::Error| format!("can't read the database: {e}");
    for library in keyspace.libraries().map_err(failed)? {
        writer.function(&library.code).map_err(io)?;
        exported.libraries += 1;
    }
    for index in 0..keyspace.databases() {
        let db = keyspace.db(index);
        let size = db.size().map_err(failed)?;
        if size == 0 {
            continue;
        }
        let expiring = db.expiring_size().map_err(failed)?;
        writer.select_db(index as u64, size, expiring).map_err(io)?;
        let mut after = None;
        loop {
            let keys = db.keys_after(after.as_deref(), PAGE).map_err(failed)?;
            for key in &keys {
                match db.dump_value(key).map_err(failed)? {
                    Some((Value::Roaring(_), _)) => {
                        exported.skipped += 1;
                        tracing::warn!(
                            "left out {:?} of database {index}: Redis has no Roaring bitmaps",
                            String::from_utf8_lossy(key)
                        );
                    }
                    Some((value, expire_at)) => {
                        writer.key(key, &value, expire_at).map_err(io)?;
                        exported.keys += 1;
                    }
                    None => {}
                }
            }
            match keys.last() {
                Some(last) if keys.len() == PAGE => after = Some(last.to_vec()),
                _ => break,
            }
        }
    }
    let file = writer
        .finish()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    exported.bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(exported)
}
