//! The node's side: RocksDB's `CompactionService`, through its C API. RocksDB calls
//! `schedule` when a compaction starts (on its compaction thread), `wait` for its result, and
//! `on_installation` once it installed it; any job no worker runs to a verified end is
//! answered "use local", and RocksDB compacts it here as it would have without workers.
//! Flushes never come here.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::Read;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rocksdb::{AsRawPtr, Options};

use super::job::{decode, encode, FamilySettings, JobReply, JobRequest};
use super::serialized::CompactionResult;
use super::worker::input_bytes;

/// Where a node's jobs write, inside its database directory so the files rename into it.
const OUTPUT_DIR: &str = "remote-compaction";

const SUCCESS: c_int = librocksdb_sys::rocksdb_compactionservice_jobstatus_success as c_int;
const USE_LOCAL: c_int = librocksdb_sys::rocksdb_compactionservice_jobstatus_use_local as c_int;
/// How often a wait looks whether the database is closing.
const CLOSING_POLL: Duration = Duration::from_millis(50);
const CRC32C: &[u8] = b"FileChecksumCrc32c";
/// The longest reply read from a worker: a result is a few KB per output file.
const MAX_REPLY: u64 = 8 << 20;

/// The workers a node sends its compactions to, and what came of them.
pub struct RemoteCompaction {
    workers: ArcSwap<Vec<String>>,
    timeout_millis: AtomicU64,
    next_worker: AtomicUsize,
    settings: FamilySettings,
    /// Jobs from `schedule` until their end (a fallback, or their installation).
    jobs: Mutex<HashMap<String, Job>>,
    /// Names this process's jobs apart from those of an earlier one in the same directory.
    session: String,
    job_count: AtomicU64,
    agent: ureq::Agent,
    counts: Counts,
}

#[derive(Clone)]
struct Job {
    family: String,
    db: PathBuf,
    output: PathBuf,
    input: Vec<u8>,
}

#[derive(Default)]
struct Counts {
    local: AtomicU64,
    local_bytes_read: AtomicU64,
    running: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    fallbacks: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    micros: AtomicU64,
}

/// Where the node's compactions ran since it started, and what the remote ones did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompactionStats {
    pub workers: u64,
    /// Compactions run here: with no workers, or after falling back.
    pub local: u64,
    /// The bytes of their input files. (RocksDB's own counts of compaction I/O need its
    /// I/O stats context, which this build leaves out.)
    pub local_bytes_read: u64,
    /// Jobs on workers now.
    pub running: u64,
    /// Jobs a worker ran and the node installed.
    pub done: u64,
    /// Jobs that failed after a worker's result was accepted (RocksDB could not install it).
    pub failed: u64,
    /// Jobs compacted locally after all: no worker took them, or what one answered failed or
    /// did not verify.
    pub fallbacks: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Time from a job's dispatch to its verified result, summed.
    pub micros: u64,
}

/// Why a job fell back to local compaction.
#[derive(Debug, thiserror::Error)]
enum Fallback {
    #[error("no worker took it")]
    NoWorker,
    #[error("worker {0}: {1}")]
    Worker(String, String),
    #[error("worker {0}'s result does not verify: {1}")]
    Unverified(String, String),
    #[error("the database is closing")]
    Closing,
    #[error("the node could not send it: {0}")]
    Unsendable(&'static str),
    #[error("RocksDB could not read the result")]
    Unreadable,
}

impl RemoteCompaction {
    pub fn new(settings: FamilySettings) -> Arc<RemoteCompaction> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        Arc::new(RemoteCompaction {
            workers: ArcSwap::from_pointee(Vec::new()),
            timeout_millis: AtomicU64::new(300_000),
            next_worker: AtomicUsize::new(0),
            settings,
            jobs: Mutex::new(HashMap::new()),
            session: format!("{:x}-{:x}", nanos, std::process::id()),
            job_count: AtomicU64::new(0),
            agent,
            counts: Counts::default(),
        })
    }

    /// Sets the workers (base URLs, as `http://host:port`) and how long a job may take on
    /// one; an empty list compacts locally. Jobs under way finish where they are.
    pub fn configure(&self, workers: &[String], timeout: Duration) {
        let workers = workers
            .iter()
            .map(|url| url.trim_end_matches('/').to_string())
            .collect();
        self.workers.store(Arc::new(workers));
        self.timeout_millis
            .store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn stats(&self) -> CompactionStats {
        let c = &self.counts;
        CompactionStats {
            workers: self.workers.load().len() as u64,
            local: c.local.load(Ordering::Relaxed),
            local_bytes_read: c.local_bytes_read.load(Ordering::Relaxed),
            running: c.running.load(Ordering::Relaxed),
            done: c.done.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            fallbacks: c.fallbacks.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            micros: c.micros.load(Ordering::Relaxed),
        }
    }

    /// Makes `options` send compactions here; with no workers each is compacted locally.
    /// Each database opened with them has a service of its own, which closes with it.
    pub(crate) fn install(self: &Arc<Self>, options: &mut Options) {
        let installed = Installed {
            remote: self.clone(),
            closing: AtomicBool::new(false),
        };
        let state = Arc::into_raw(Arc::new(installed)) as *mut c_void;
        // SAFETY: `state` is an `Arc` released by `destroy` when RocksDB drops the service;
        // the callbacks only borrow it. The name is copied.
        unsafe {
            let service = librocksdb_sys::rocksdb_compactionservice_create(
                state,
                Some(destroy),
                Some(schedule),
                c"shale-remote-compaction".as_ptr(),
                Some(wait),
                Some(cancel_awaiting_jobs),
                Some(on_installation),
            );
            librocksdb_sys::rocksdb_options_set_compaction_service(options.as_raw_ptr(), service);
        }
    }

    /// Removes what jobs of earlier runs left in `db`'s output directory (a node killed
    /// while jobs were out, a worker that wrote after its node stopped waiting).
    pub(crate) fn clean(&self, db: &Path) {
        let root = db.join(OUTPUT_DIR);
        let Ok(entries) = std::fs::read_dir(&root) else {
            return;
        };
        let jobs = self.jobs.lock();
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !jobs.contains_key(name.to_string_lossy().as_ref()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    fn schedule(&self, db: &str, family: &str, input: &[u8]) -> Option<String> {
        if self.workers.load().is_empty() || db.is_empty() {
            return None;
        }
        let db = PathBuf::from(db);
        self.clean(&db);
        let id = format!(
            "{}-{}",
            self.session,
            self.job_count.fetch_add(1, Ordering::Relaxed)
        );
        let output = db.join(OUTPUT_DIR).join(&id);
        let job = Job {
            family: family.to_string(),
            db,
            output: output.clone(),
            input: input.to_vec(),
        };
        // Known before its directory exists, so a `clean` meanwhile leaves the directory be.
        self.jobs.lock().insert(id.clone(), job);
        if let Err(err) = std::fs::create_dir_all(&output) {
            tracing::warn!("remote compaction: creating {}: {err}", output.display());
            self.jobs.lock().remove(&id);
            return None;
        }
        Some(id)
    }

    /// The verified result of job `id`, or why it is compacted locally; gives up when
    /// `closing` is set (its database closes). A result counts once it is handed to RocksDB,
    /// not when a dispatch nobody waits for any more ends.
    fn wait(self: &Arc<Self>, id: &str, closing: &AtomicBool) -> Result<Vec<u8>, Fallback> {
        let job = self
            .jobs
            .lock()
            .get(id)
            .cloned()
            .ok_or(Fallback::Unsendable("unknown job"))?;
        let (sender, receiver) = std::sync::mpsc::channel();
        let dispatcher = self.clone();
        let spawned = std::thread::Builder::new()
            .name("remote-compaction".into())
            .spawn(move || {
                let _ = sender.send(dispatcher.dispatch(&job));
            });
        if spawned.is_err() {
            return Err(Fallback::Unsendable("no thread for it"));
        }
        loop {
            match receiver.recv_timeout(CLOSING_POLL) {
                Ok(outcome) => {
                    let verified = outcome?;
                    let c = &self.counts;
                    c.micros.fetch_add(verified.micros, Ordering::Relaxed);
                    c.bytes_read
                        .fetch_add(verified.bytes_read, Ordering::Relaxed);
                    c.bytes_written
                        .fetch_add(verified.bytes_written, Ordering::Relaxed);
                    return Ok(verified.serialized);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if closing.load(Ordering::Acquire) {
                        return Err(Fallback::Closing);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Fallback::Unsendable("its thread ended"))
                }
            }
        }
    }

    /// Sends `job` to the workers in turn, from the next one, until one takes it; a worker
    /// that took it and failed is not retried elsewhere (local compaction is as quick).
    fn dispatch(&self, job: &Job) -> Result<Verified, Fallback> {
        let workers = self.workers.load_full();
        let (Some(db), Some(output)) = (job.db.to_str(), job.output.to_str()) else {
            return Err(Fallback::Unsendable("its paths are not UTF-8"));
        };
        let request = JobRequest {
            db: db.to_string(),
            output: output.to_string(),
            family: job.family.clone(),
            settings: self.settings,
            input: encode(&job.input),
        };
        let timeout = Duration::from_millis(self.timeout_millis.load(Ordering::Relaxed));
        let first = self.next_worker.fetch_add(1, Ordering::Relaxed);
        for turn in 0..workers.len() {
            let worker = &workers[(first + turn) % workers.len()];
            let started = Instant::now();
            let reply = match self.post(worker, &request, timeout) {
                Ok(reply) => reply,
                Err(Posted::NotTaken) => continue,
                Err(Posted::Failed(why)) => return Err(Fallback::Worker(worker.clone(), why)),
            };
            let serialized = decode(&reply.result)
                .ok_or_else(|| Fallback::Unverified(worker.clone(), "not base64".into()))?;
            let (result, serialized) = verify(&serialized, &job.output)
                .map_err(|why| Fallback::Unverified(worker.clone(), why))?;
            return Ok(Verified {
                serialized,
                bytes_read: input_bytes(&job.input, &job.db),
                bytes_written: result.bytes_written(),
                micros: started.elapsed().as_micros() as u64,
            });
        }
        Err(Fallback::NoWorker)
    }

    fn post(
        &self,
        worker: &str,
        request: &JobRequest,
        timeout: Duration,
    ) -> Result<JobReply, Posted> {
        let sent = self
            .agent
            .post(format!("{worker}/compact"))
            .config()
            .timeout_global(Some(timeout))
            .build()
            .send_json(request);
        let mut response = match sent {
            Ok(response) => response,
            Err(ureq::Error::ConnectionFailed | ureq::Error::HostNotFound) => {
                return Err(Posted::NotTaken)
            }
            Err(ureq::Error::Io(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(Posted::NotTaken)
            }
            Err(err) => return Err(Posted::Failed(err.to_string())),
        };
        let status = response.status();
        if status == 503 {
            // Busy with as many jobs as it runs at once.
            return Err(Posted::NotTaken);
        }
        if !status.is_success() {
            let mut text = String::new();
            let _ = response
                .body_mut()
                .as_reader()
                .take(1024)
                .read_to_string(&mut text);
            return Err(Posted::Failed(format!("{status}: {}", text.trim())));
        }
        response
            .body_mut()
            .with_config()
            .limit(MAX_REPLY)
            .read_json()
            .map_err(|err| Posted::Failed(format!("reading its answer: {err}")))
    }

    fn finish(&self, id: &str) {
        if let Some(job) = self.jobs.lock().remove(id) {
            let _ = std::fs::remove_dir_all(&job.output);
        }
    }
}

enum Posted {
    NotTaken,
    Failed(String),
}

/// A worker's result that checked out, pointed at the node's job directory, with its figures.
struct Verified {
    serialized: Vec<u8>,
    bytes_read: u64,
    bytes_written: u64,
    micros: u64,
}

/// Checks a worker's result against the files in `output` (the job's directory as the node
/// sees it) and points it there: a compaction that succeeded, each file it names a table
/// file of the size it says, whose CRC32C is the one the worker computed as it wrote it.
fn verify(serialized: &[u8], output: &Path) -> Result<(CompactionResult, Vec<u8>), String> {
    let result = CompactionResult::parse(serialized).ok_or("not a compaction result")?;
    // RocksDB renames the files into the database: across filesystems that fails, and
    // RocksDB takes the failure for a fatal error of its own.
    if let (Some(db), Ok(files)) = (output.parent().and_then(Path::parent), output.metadata()) {
        use std::os::unix::fs::MetadataExt;
        let db = db
            .metadata()
            .map_err(|err| format!("{}: {err}", db.display()))?;
        if db.dev() != files.dev() {
            return Err("its output is on another filesystem than the database".into());
        }
    }
    if result.status_code != 0 {
        return Err(format!(
            "its compaction failed (status code {})",
            result.status_code
        ));
    }
    for (i, file) in result.output_files.iter().enumerate() {
        // RocksDB would rename the first and fail on the second: a background error.
        if result.output_files[..i]
            .iter()
            .any(|earlier| earlier.file_name == file.file_name)
        {
            return Err("it names a file twice".into());
        }
        let name = std::str::from_utf8(&file.file_name).map_err(|_| "a file name is not UTF-8")?;
        let number = name.strip_suffix(".sst").unwrap_or("");
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{name:?} is not a table file's name"));
        }
        let path = output.join(name);
        let size = std::fs::metadata(&path)
            .map_err(|err| format!("{}: {err}", path.display()))?
            .len();
        if size != file.file_size || size == 0 {
            return Err(format!("{name} has {size} bytes, not {}", file.file_size));
        }
        if file.checksum_function != CRC32C || file.checksum.len() != 4 {
            return Err(format!("{name} comes without its CRC32C"));
        }
        if crc32c_of(&path)
            .map_err(|err| format!("reading {name}: {err}"))?
            .to_be_bytes()
            != file.checksum[..]
        {
            return Err(format!("{name} does not match its checksum"));
        }
    }
    let path = output.to_str().ok_or("the output path is not UTF-8")?;
    let rewritten = result.with_output_path(serialized, path.as_bytes());
    Ok((result, rewritten))
}

fn crc32c_of(path: &Path) -> std::io::Result<u32> {
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut crc = 0;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            return Ok(crc);
        }
        crc = crc32c::crc32c_append(crc, &buffer[..read]);
    }
}

/// One open database's service: the shared workers and counts, and whether the database is
/// closing (RocksDB's `CancelAwaitingJobs`, at every close).
struct Installed {
    remote: Arc<RemoteCompaction>,
    closing: AtomicBool,
}

/// The `Installed` a callback's state points to, as an `Arc` of its own.
///
/// # Safety
/// `state` is the pointer `install` made from an `Arc`, still held by the service.
unsafe fn installed(state: *mut c_void) -> Arc<Installed> {
    let this = state as *const Installed;
    Arc::increment_strong_count(this);
    Arc::from_raw(this)
}

/// Reads a callback's text argument; "" if it is not UTF-8.
///
/// # Safety
/// `text` points to `len` readable bytes.
unsafe fn text<'a>(text: *const c_char, len: usize) -> &'a str {
    if text.is_null() {
        return "";
    }
    std::str::from_utf8(std::slice::from_raw_parts(text.cast::<u8>(), len)).unwrap_or("")
}

/// Runs a callback's body; a panic in it (a bug) must not unwind into RocksDB's C++.
fn guarded<T>(otherwise: T, body: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(AssertUnwindSafe(body)).unwrap_or(otherwise)
}

unsafe extern "C" fn destroy(state: *mut c_void) {
    drop(Arc::from_raw(state as *const Installed));
}

unsafe extern "C" fn schedule(
    state: *mut c_void,
    info: *const librocksdb_sys::rocksdb_compactionservice_jobinfo_t,
    input: *const c_char,
    input_len: usize,
) -> *mut librocksdb_sys::rocksdb_compactionservice_scheduleresponse_t {
    let installed = installed(state);
    let remote = &installed.remote;
    let (mut db_len, mut family_len) = (0, 0);
    let db = text(
        librocksdb_sys::rocksdb_compactionservice_jobinfo_t_get_db_name(info, &mut db_len),
        db_len,
    );
    let family = text(
        librocksdb_sys::rocksdb_compactionservice_jobinfo_t_get_cf_name(info, &mut family_len),
        family_len,
    );
    let input = std::slice::from_raw_parts(input.cast::<u8>(), input_len);
    let scheduled = guarded(None, || {
        if installed.closing.load(Ordering::Acquire) {
            return None;
        }
        remote
            .schedule(db, family, input)
            .and_then(|id| CString::new(id).ok())
    });
    let mut error = std::ptr::null_mut();
    match scheduled {
        Some(id) => {
            remote.counts.running.fetch_add(1, Ordering::Relaxed);
            librocksdb_sys::rocksdb_compactionservice_scheduleresponse_create(
                id.as_ptr(),
                SUCCESS,
                &mut error,
            )
        }
        None => {
            guarded((), || {
                let counts = &remote.counts;
                counts.local.fetch_add(1, Ordering::Relaxed);
                if !db.is_empty() {
                    let bytes = input_bytes(input, Path::new(db));
                    counts.local_bytes_read.fetch_add(bytes, Ordering::Relaxed);
                }
            });
            librocksdb_sys::rocksdb_compactionservice_scheduleresponse_create_with_status(
                USE_LOCAL, &mut error,
            )
        }
    }
}

unsafe extern "C" fn wait(
    state: *mut c_void,
    id: *const c_char,
    result: *mut *mut c_char,
    result_len: *mut usize,
) -> c_int {
    let installed = installed(state);
    let remote = &installed.remote;
    let id = CStr::from_ptr(id).to_string_lossy().into_owned();
    let outcome = guarded(Err(Fallback::Unsendable("it panicked")), || {
        remote.wait(&id, &installed.closing)
    });
    let why = match outcome {
        Ok(serialized) => {
            let copy = libc::malloc(serialized.len().max(1)).cast::<u8>();
            if !copy.is_null() {
                std::ptr::copy_nonoverlapping(serialized.as_ptr(), copy, serialized.len());
                *result = copy.cast();
                *result_len = serialized.len();
                return SUCCESS;
            }
            Fallback::Unsendable("no memory for the result")
        }
        Err(why) => why,
    };
    guarded((), || remote.fall_back(&id, &why));
    USE_LOCAL
}

impl RemoteCompaction {
    fn fall_back(&self, id: &str, why: &Fallback) {
        if !matches!(why, Fallback::Closing) {
            tracing::warn!("remote compaction {id} runs locally: {why}");
        }
        self.counts.running.fetch_sub(1, Ordering::Relaxed);
        self.counts.fallbacks.fetch_add(1, Ordering::Relaxed);
        self.counts.local.fetch_add(1, Ordering::Relaxed);
        if let Some(job) = self.jobs.lock().get(id) {
            self.counts
                .local_bytes_read
                .fetch_add(input_bytes(&job.input, &job.db), Ordering::Relaxed);
        }
        self.finish(id);
    }
}

unsafe extern "C" fn cancel_awaiting_jobs(state: *mut c_void) {
    installed(state).closing.store(true, Ordering::Release);
}

unsafe extern "C" fn on_installation(state: *mut c_void, id: *const c_char, status: c_int) {
    let installed = installed(state);
    let remote = &installed.remote;
    let id = CStr::from_ptr(id).to_string_lossy().into_owned();
    guarded((), || {
        let counts = &remote.counts;
        match status {
            SUCCESS => {
                counts.running.fetch_sub(1, Ordering::Relaxed);
                counts.done.fetch_add(1, Ordering::Relaxed);
                remote.finish(&id);
            }
            // RocksDB could not read the result after all and compacts locally.
            USE_LOCAL => remote.fall_back(&id, &Fallback::Unreadable),
            _ => {
                tracing::error!("remote compaction {id}: RocksDB could not install its result");
                counts.running.fetch_sub(1, Ordering::Relaxed);
                counts.failed.fetch_add(1, Ordering::Relaxed);
                remote.finish(&id);
            }
        }
    });
}
