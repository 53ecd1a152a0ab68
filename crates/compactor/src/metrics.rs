//! The worker's figures, in Prometheus's text format (`GET /metrics`).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
pub struct Metrics {
    running: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    micros: AtomicU64,
}

/// A job counted as running until dropped.
pub struct Running<'a>(&'a AtomicU64);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    pub fn start(&self) -> Running<'_> {
        self.running.fetch_add(1, Ordering::Relaxed);
        Running(&self.running)
    }

    pub fn done(&self, took: Duration, bytes_read: u64, bytes_written: u64) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes_read, Ordering::Relaxed);
        self.bytes_written
            .fetch_add(bytes_written, Ordering::Relaxed);
        self.micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        metric(
            "shale_compactor_jobs_running",
            "gauge",
            "Jobs running now.",
            get(&self.running).to_string(),
        );
        metric(
            "shale_compactor_jobs_done_total",
            "counter",
            "Jobs that ended with a result.",
            get(&self.done).to_string(),
        );
        metric(
            "shale_compactor_jobs_failed_total",
            "counter",
            "Jobs that ended with an error.",
            get(&self.failed).to_string(),
        );
        metric(
            "shale_compactor_read_bytes_total",
            "counter",
            "Bytes the jobs done read.",
            get(&self.bytes_read).to_string(),
        );
        metric(
            "shale_compactor_written_bytes_total",
            "counter",
            "Bytes the jobs done wrote.",
            get(&self.bytes_written).to_string(),
        );
        metric(
            "shale_compactor_job_seconds_total",
            "counter",
            "Seconds the jobs done took, summed (divide by jobs done for seconds per job).",
            format!("{:.6}", get(&self.micros) as f64 / 1e6),
        );
        out
    }
}
