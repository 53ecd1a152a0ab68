//! The worker's side: one job is RocksDB's `DB::OpenAndCompact` on the node's database, with
//! the options the node gives that family (`rocks::family_options`), so its merge operators,
//! compaction filters, prefix extractor and table format are the node's own. They read
//! nothing but the record in hand, which is why every family's compactions can move.

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use rocksdb::{AsRawPtr, Cache, Options};

use super::job::{decode, encode, JobReply, JobRequest};
use super::serialized::{self, CompactionResult};
use crate::engine::Cf;
use crate::rocks::family_options;

/// A job that could not run; the node compacts locally instead.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("bad job: {0}")]
    BadJob(String),
    #[error("{0}")]
    Compaction(String),
}

impl JobError {
    /// Whether the job itself was wrong, as opposed to its run failing.
    pub fn is_bad_job(&self) -> bool {
        matches!(self, JobError::BadJob(_))
    }
}

/// A path prefix of the node's (`from`) as this worker sees it (`to`): shared storage
/// mounted elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathMap {
    from: PathBuf,
    to: PathBuf,
}

impl std::str::FromStr for PathMap {
    type Err = String;

    fn from_str(text: &str) -> Result<PathMap, String> {
        match text.split_once('=') {
            Some((from, to)) if !from.is_empty() && !to.is_empty() => Ok(PathMap {
                from: from.into(),
                to: to.into(),
            }),
            _ => Err(format!("a path map is FROM=TO, not {text:?}")),
        }
    }
}

/// `path` as this worker sees it: under the first map whose `from` holds it.
pub fn map_path(maps: &[PathMap], path: &Path) -> PathBuf {
    maps.iter()
        .find_map(|map| Some(map.to.join(path.strip_prefix(&map.from).ok()?)))
        .unwrap_or_else(|| path.to_path_buf())
}

/// Set to stop a job under way (its node stopped waiting); RocksDB checks it between keys.
pub struct Cancel(*mut u8);

// SAFETY: the flag is a `std::atomic<bool>` RocksDB allocated; every access is atomic.
unsafe impl Send for Cancel {}
unsafe impl Sync for Cancel {}

impl Cancel {
    pub fn new() -> Cancel {
        // SAFETY: a plain allocation, freed in `drop`.
        Cancel(unsafe { librocksdb_sys::rocksdb_open_and_compact_canceled_create() })
    }

    pub fn cancel(&self) {
        // SAFETY: the flag lives until `drop`.
        unsafe { librocksdb_sys::rocksdb_open_and_compact_canceled_set(self.0, 1) }
    }
}

impl Default for Cancel {
    fn default() -> Self {
        Cancel::new()
    }
}

impl Drop for Cancel {
    fn drop(&mut self) {
        // SAFETY: created by `rocksdb_open_and_compact_canceled_create`, dropped once.
        unsafe { librocksdb_sys::rocksdb_open_and_compact_canceled_destroy(self.0) }
    }
}

/// What a job read and wrote, for the worker's figures.
pub struct JobDone {
    pub reply: JobReply,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// Runs one job: blocks for as long as the compaction takes.
pub fn run_job(
    request: &JobRequest,
    maps: &[PathMap],
    cancel: &Cancel,
) -> Result<JobDone, JobError> {
    let bad = |what: &str| JobError::BadJob(what.to_string());
    let family = Cf::ALL
        .into_iter()
        .find(|cf| cf.name() == request.family)
        .ok_or_else(|| bad("unknown column family"))?;
    let input = decode(&request.input).ok_or_else(|| bad("input is not base64"))?;
    // The family the options are built for must be the one RocksDB compacts: one the database
    // lacks would crash OpenAndCompact, another would run under the wrong merge operator.
    if serialized::input_family(&input).as_deref() != Some(family.name()) {
        return Err(bad("the input compacts another column family"));
    }
    let db = map_path(maps, Path::new(&request.db));
    let output = map_path(maps, Path::new(&request.output));
    let c_path = |path: &Path| {
        CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| bad("a path holds NUL"))
    };
    let (c_db, c_output) = (c_path(&db)?, c_path(&output)?);
    std::fs::create_dir_all(&output)
        .map_err(|err| JobError::Compaction(format!("creating {}: {err}", output.display())))?;

    let config = request.settings.config();
    // Compactions read without filling the block cache; this one holds index and filter
    // blocks of the inputs only.
    let cache = Cache::new_lru_cache(8 << 20);
    let mut base = Options::default();
    // SAFETY: `base` is alive; the factory's reference is shared, then the wrapper freed.
    unsafe {
        let checksums = librocksdb_sys::rocksdb_file_checksum_gen_crc32c_factory_create();
        librocksdb_sys::rocksdb_options_set_file_checksum_gen_factory(base.as_raw_ptr(), checksums);
        librocksdb_sys::rocksdb_file_checksum_gen_factory_destroy(checksums);
    }
    base.set_max_background_jobs(1);
    let options = family_options(family, &base, &cache, &config);

    let mut result_len = 0usize;
    let mut error: *mut c_char = ptr::null_mut();
    // SAFETY: every pointer passed lives until the call returns (`options` keeps the merge
    // operators and filters the override refers to); what RocksDB allocates is freed here.
    let result = unsafe {
        let overrides =
            librocksdb_sys::rocksdb_compaction_service_options_override_create_from_options(
                options.as_raw_ptr(),
            );
        let run = librocksdb_sys::rocksdb_open_and_compact_options_create();
        librocksdb_sys::rocksdb_open_and_compact_options_set_canceled(run, cancel.0);
        let result = librocksdb_sys::rocksdb_open_and_compact_with_options(
            run,
            c_db.as_ptr(),
            c_output.as_ptr(),
            input.as_ptr().cast(),
            input.len(),
            &mut result_len,
            overrides,
            &mut error,
        );
        librocksdb_sys::rocksdb_open_and_compact_options_destroy(run);
        librocksdb_sys::rocksdb_compaction_service_options_override_destroy(overrides);
        result
    };
    if !error.is_null() {
        // SAFETY: a NUL-terminated message RocksDB allocated.
        let message = unsafe {
            let message = std::ffi::CStr::from_ptr(error)
                .to_string_lossy()
                .into_owned();
            librocksdb_sys::rocksdb_free(error.cast());
            message
        };
        return Err(JobError::Compaction(message));
    }
    if result.is_null() {
        return Err(JobError::Compaction("RocksDB answered no result".into()));
    }
    // SAFETY: `result_len` bytes RocksDB allocated with malloc.
    let serialized = unsafe {
        let bytes = std::slice::from_raw_parts(result.cast::<u8>(), result_len).to_vec();
        librocksdb_sys::rocksdb_free(result.cast());
        bytes
    };
    let written = CompactionResult::parse(&serialized).map_or(0, |r| r.bytes_written());
    Ok(JobDone {
        reply: JobReply {
            result: encode(&serialized),
        },
        bytes_read: input_bytes(&input, &db),
        bytes_written: written,
    })
}

/// The bytes of the table files in `db` that a serialized input compacts.
pub(crate) fn input_bytes(input: &[u8], db: &Path) -> u64 {
    serialized::input_files(input)
        .unwrap_or_default()
        .iter()
        .filter_map(|name| std::fs::metadata(db.join(name)).ok())
        .map(|file| file.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_by_prefix() {
        let maps: Vec<PathMap> = vec!["/data=/mnt/node1".parse().unwrap()];
        assert_eq!(
            map_path(&maps, Path::new("/data/db/1")),
            Path::new("/mnt/node1/db/1")
        );
        assert_eq!(
            map_path(&maps, Path::new("/database")),
            Path::new("/database")
        );
        assert!("nodelimiter".parse::<PathMap>().is_err());
        assert!("=/x".parse::<PathMap>().is_err());
    }
}
