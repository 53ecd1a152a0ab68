//! RDB files in and out of a data directory, while no server runs on it: a `dump.rdb` of
//! Redis loaded into a fresh database that replaces the current one only once the whole file
//! has been read and its checksum matched ([`import`]), and an RDB file written from the
//! current one that Redis 7.0 loads ([`export`]). The format is the `shale-rdb` crate's.

pub mod export;
pub mod import;

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
