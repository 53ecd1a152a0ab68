//! Whether the database takes writes, and what its directory has room for.
//!
//! A full disk or a directory turned read-only makes RocksDB fail a WAL write, sync or flush.
//! From then on the engine reports the failure (the server refuses writes with MISCONF, as
//! Redis does when its AOF cannot be written) until a recovery has made writes work again;
//! each recovery starts a new *generation*, so a write made before it whose WAL record may
//! have been lost is never acknowledged after it.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub(crate) struct WriteHealth {
    failing: AtomicBool,
    reason: Mutex<Option<Arc<str>>>,
    /// Wakes the calls waiting for a failure's cause ([`WriteHealth::fail`]).
    reason_kept: Condvar,
    generation: AtomicU64,
}

/// What RocksDB says of a write to a file whose writer failed before: no cause, which the
/// call that met the failure has, and notes a moment later (79 µs in a run that showed it).
const REPEATED_FAILURES: [&str; 2] = [
    "Seen error. Skip writing buffer.",
    "Writer has previous error.",
];

/// How long a call that met a repeated failure waits for its cause.
const CAUSE_PATIENCE: Duration = Duration::from_millis(100);

impl WriteHealth {
    /// Notes a failed write, sync or flush; returns the failure's reason, the first cause
    /// noted. A call that met a failure repeated without its cause waits for the cause to be
    /// noted, and takes RocksDB's words only if none comes, until one does.
    pub(crate) fn fail(&self, reason: &str) -> Arc<str> {
        let repeated = REPEATED_FAILURES.contains(&reason);
        let mut kept = self.reason.lock();
        let deadline = Instant::now() + CAUSE_PATIENCE;
        while repeated && kept.is_none() {
            if self.reason_kept.wait_until(&mut kept, deadline).timed_out() {
                break;
            }
        }
        match kept.as_ref() {
            Some(cause) if repeated || !REPEATED_FAILURES.contains(&&**cause) => cause.clone(),
            _ => {
                let reason: Arc<str> = reason.into();
                *kept = Some(reason.clone());
                self.failing.store(true, Ordering::Release);
                self.reason_kept.notify_all();
                reason
            }
        }
    }

    pub(crate) fn failure(&self) -> Option<Arc<str>> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        self.reason.lock().clone()
    }

    /// Writes work again, in a new generation.
    pub(crate) fn recovered(&self) {
        let mut kept = self.reason.lock();
        self.generation.fetch_add(1, Ordering::AcqRel);
        *kept = None;
        self.failing.store(false, Ordering::Release);
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

/// The reason RocksDB's message gives, as `strerror` words it: its last part
/// ("IO error: While appending to file: .../000012.log: No space left on device").
pub(crate) fn reason_of(message: &str) -> &str {
    message.rsplit(": ").next().unwrap_or(message).trim()
}

/// An I/O error's reason as `strerror` words it, without Rust's "(os error N)".
pub(crate) fn io_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// How much room a recovery wants before it reopens the database: reopening writes a new
/// MANIFEST, OPTIONS file and WAL, and what it replays must fit in a flush soon after (the
/// memtables are kept small when room is short, see [`memtable_size_for`]).
pub(crate) const RECOVERY_ROOM: u64 = 4 << 20;

/// Whether `dir` takes a write of [`RECOVERY_ROOM`] bytes and its sync: the file is removed
/// after.
pub(crate) fn probe_writable(dir: &Path) -> std::io::Result<()> {
    let path = dir.join("write-probe");
    let written = write_synced(&path, RECOVERY_ROOM);
    let removed = std::fs::remove_file(&path);
    written?;
    match removed {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// A file of [`RESERVE_SIZE`] bytes kept in the database directory while the disk has room,
/// and removed before the database opens on a disk short of [`OPEN_ROOM`]: opening writes a
/// new MANIFEST, WAL, OPTIONS file and LOG, and fails if it cannot; worse, RocksDB, when its WAL is flushed by hand, hangs in its
/// open if that WAL's write fails (`DB::Open` waits on a mutex it holds, from
/// `WALIOStatusCheck`).
const RESERVE: &str = "space-reserve";
const RESERVE_SIZE: u64 = 12 << 20;

/// Below this much free space (after the reserve is given back) the database is not opened,
/// for the reasons above.
pub(crate) const OPEN_ROOM: u64 = 10 << 20;

/// Makes room to open the database in `dir`: gives the reserve back if the free space is
/// short, and refuses if it still is.
pub(crate) fn room_to_open(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if free_space(dir)? < RESERVE_SIZE + OPEN_ROOM {
        match std::fs::remove_file(dir.join(RESERVE)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
    }
    if free_space(dir)? < OPEN_ROOM {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    Ok(())
}

/// Whether the probe and then an open could find their room: [`RECOVERY_ROOM`] free, and
/// [`OPEN_ROOM`] counting the reserve the open may give back. Asked before a recovery's
/// probe, so that a disk that stays full is not written to ten times a second.
pub(crate) fn could_open(dir: &Path) -> std::io::Result<()> {
    let reserve = match std::fs::metadata(dir.join(RESERVE)) {
        Ok(meta) => meta.len(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => 0,
        Err(err) => return Err(err),
    };
    let free = free_space(dir)?;
    if free < RECOVERY_ROOM || free + reserve < OPEN_ROOM {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    Ok(())
}

/// Puts the reserve back once the disk has room for it and for an open.
pub(crate) fn keep_reserve(dir: &Path, free: u64) -> std::io::Result<()> {
    let path = dir.join(RESERVE);
    // Only with room left for an open without it: otherwise the open's release and this
    // would alternate, each reserve taking writes' space again.
    if free < RESERVE_SIZE + OPEN_ROOM + RECOVERY_ROOM || path.exists() {
        return Ok(());
    }
    let written = write_synced(&path, RESERVE_SIZE);
    if written.is_err() {
        // Half a reserve would pass for a whole one.
        let _ = std::fs::remove_file(&path);
    }
    written
}

/// Writes a file of `bytes` zeros (a multiple of 64 KB) and syncs it.
fn write_synced(path: &Path, bytes: u64) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    let block = vec![0u8; 64 << 10];
    for _ in 0..bytes / block.len() as u64 {
        file.write_all(&block)?;
    }
    file.sync_all()
}

/// Bytes free for an unprivileged writer on the filesystem holding `dir`.
pub(crate) fn free_space(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a path with a NUL byte"))?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stats` is written by the call before it
    // is read, only when the call succeeds.
    let stats = unsafe {
        if libc::statvfs(path.as_ptr(), stats.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        stats.assume_init()
    };
    Ok(stats.f_bavail as u64 * stats.f_frsize as u64)
}

/// The memtable size that lets a flush of every family's memtable fit in `free` bytes, with
/// room to spare: an eighth of it rounded down to a power of two, at least 1 MB, at most
/// `configured`. A memtable holds what
/// its flush writes, and its WAL is only deleted after that flush; with memtables this small
/// a disk that fills leaves little to flush, and a few MB freed let writes resume.
pub(crate) fn memtable_size_for(free: u64, configured: usize) -> usize {
    let eighth = (free / 8).max(1);
    let power = 1usize << (63 - eighth.leading_zeros());
    power.clamp(1 << 20, configured.max(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_the_last_part_of_rocksdb_messages() {
        assert_eq!(
            reason_of("IO error: While appending to file: /d/000012.log: No space left on device"),
            "No space left on device"
        );
        assert_eq!(reason_of("plain"), "plain");
        let err = std::io::Error::from_raw_os_error(libc::EROFS);
        assert_eq!(io_reason(&err), "Read-only file system");
    }

    #[test]
    fn a_failure_lasts_until_recovery_which_starts_a_generation() {
        let health = WriteHealth::default();
        assert!(health.failure().is_none());
        health.fail("No space left on device");
        health.fail("later");
        assert_eq!(health.failure().as_deref(), Some("No space left on device"));
        let before = health.generation();
        health.recovered();
        assert!(health.failure().is_none());
        assert_eq!(health.generation(), before + 1);
    }

    #[test]
    fn a_repeated_failure_reports_its_cause() {
        let health = Arc::new(WriteHealth::default());
        // The call that met the failure notes its cause after the one that met it repeated.
        let cause = std::thread::spawn({
            let health = health.clone();
            move || {
                std::thread::sleep(Duration::from_millis(5));
                health.fail("No space left on device")
            }
        });
        assert_eq!(
            &*health.fail("Seen error. Skip writing buffer."),
            "No space left on device"
        );
        assert_eq!(&*cause.join().unwrap(), "No space left on device");
        health.recovered();
        // With no cause noted, RocksDB's words, until a cause comes.
        assert_eq!(
            &*health.fail("Writer has previous error."),
            "Writer has previous error."
        );
        assert_eq!(
            &*health.fail("No space left on device"),
            "No space left on device"
        );
        assert_eq!(health.failure().as_deref(), Some("No space left on device"));
    }

    #[test]
    fn memtables_shrink_with_free_space() {
        assert_eq!(memtable_size_for(1 << 40, 64 << 20), 64 << 20);
        assert_eq!(memtable_size_for(80 << 20, 64 << 20), 8 << 20);
        assert_eq!(memtable_size_for(200 << 20, 48 << 20), 16 << 20);
        assert_eq!(memtable_size_for(0, 64 << 20), 1 << 20);
        let dir = tempfile::tempdir().unwrap();
        assert!(free_space(dir.path()).unwrap() > 0);
        probe_writable(dir.path()).unwrap();
        assert!(!dir.path().join("write-probe").exists());
        keep_reserve(dir.path(), 1 << 40).unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join(RESERVE)).unwrap().len(),
            RESERVE_SIZE
        );
        room_to_open(dir.path()).unwrap();
    }
}
