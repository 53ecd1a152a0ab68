//! Server counters (INFO stats, INFO commandstats) and the slow log.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::Mutex;

#[derive(Default)]
pub struct CommandStats {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub failed: AtomicU64,
    pub rejected: AtomicU64,
}

pub struct ServerStats {
    pub connections_received: AtomicU64,
    pub connections_rejected: AtomicU64,
    pub commands_processed: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub error_replies: AtomicU64,
    /// Error replies by their code (INFO errorstats), at most [`ERROR_CODES`] codes.
    error_codes: Mutex<BTreeMap<String, u64>>,
    /// Writes that a busy key's current writer ran for another connection (`combine`).
    pub combined_writes: AtomicU64,
    /// Commands that failed with a panic (a bug), each isolated to its connection.
    pub command_panics: AtomicU64,
    /// One per command of the table, by its position there (`CommandSpec::index`).
    pub commands: Vec<CommandStats>,
    /// Recent (time ms, commands processed) samples for instantaneous_ops_per_sec.
    samples: Mutex<VecDeque<(u64, u64)>>,
}

impl ServerStats {
    /// Statistics for a command table of `commands` entries.
    pub fn new(commands: usize) -> Self {
        ServerStats {
            connections_received: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            commands_processed: AtomicU64::new(0),
            net_input_bytes: AtomicU64::new(0),
            net_output_bytes: AtomicU64::new(0),
            error_replies: AtomicU64::new(0),
            error_codes: Mutex::new(BTreeMap::new()),
            combined_writes: AtomicU64::new(0),
            command_panics: AtomicU64::new(0),
            commands: (0..commands).map(|_| CommandStats::default()).collect(),
            samples: Mutex::new(VecDeque::new()),
        }
    }
}

/// Distinct error codes INFO errorstats tracks. Scripts can make up any code
/// (`redis.error_reply`), so the table is bounded; later codes count only in
/// total_error_replies.
const ERROR_CODES: usize = 128;

/// The code INFO errorstats files an error line under, as Redis takes it: the first word, if
/// a space ends it within the first 32 bytes of the reply (whose `-` this line lacks), else
/// `ERR`.
fn error_code(line: &str) -> &str {
    let head = &line.as_bytes()[..line.len().min(31)];
    match head.iter().position(|&b| b == b' ') {
        Some(end) => &line[..end],
        None => "ERR",
    }
}

impl ServerStats {
    /// Counts `count` error replies of one line.
    pub fn record_errors(&self, line: &str, count: u64) {
        self.error_replies.fetch_add(count, Ordering::Relaxed);
        let code = error_code(line);
        let mut codes = self.error_codes.lock();
        if let Some(seen) = codes.get_mut(code) {
            *seen += count;
        } else if codes.len() < ERROR_CODES {
            codes.insert(code.to_string(), count);
        }
    }

    /// The error codes seen, in byte order (as Redis lists them), with their counts.
    pub fn error_codes(&self) -> Vec<(String, u64)> {
        let codes = self.error_codes.lock();
        codes.iter().map(|(code, n)| (code.clone(), *n)).collect()
    }

    /// Records `calls` executions of the command at `command` in the table that took `usec`
    /// µs in all.
    pub fn record_calls(&self, command: usize, calls: u64, usec: u64, failed: u64) {
        self.commands_processed.fetch_add(calls, Ordering::Relaxed);
        if let Some(stats) = self.commands.get(command) {
            stats.calls.fetch_add(calls, Ordering::Relaxed);
            stats.usec.fetch_add(usec, Ordering::Relaxed);
            if failed > 0 {
                stats.failed.fetch_add(failed, Ordering::Relaxed);
            }
        }
    }

    /// Records the failure of a call booked before its reply was known (a blocking command).
    pub fn record_failure(&self, command: usize) {
        if let Some(stats) = self.commands.get(command) {
            stats.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn record_panic(&self) {
        self.command_panics.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a command refused before it ran: neither a call nor a failed one.
    pub fn record_rejected(&self, command: usize) {
        if let Some(stats) = self.commands.get(command) {
            stats.rejected.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes a throughput sample; called by the cron a few times a second.
    pub fn sample(&self, now_ms: u64) {
        let mut samples = self.samples.lock();
        samples.push_back((now_ms, self.commands_processed.load(Ordering::Relaxed)));
        if samples.len() > 16 {
            samples.pop_front();
        }
    }

    pub fn instantaneous_ops_per_sec(&self) -> u64 {
        let samples = self.samples.lock();
        match (samples.front(), samples.back()) {
            (Some(&(t0, c0)), Some(&(t1, c1))) if t1 > t0 => (c1 - c0) * 1000 / (t1 - t0),
            _ => 0,
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for counter in [
            &self.connections_received,
            &self.connections_rejected,
            &self.commands_processed,
            &self.net_input_bytes,
            &self.net_output_bytes,
            &self.error_replies,
            &self.combined_writes,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        for stats in &self.commands {
            for counter in [&stats.calls, &stats.usec, &stats.failed, &stats.rejected] {
                counter.store(0, Ordering::Relaxed);
            }
        }
        self.error_codes.lock().clear();
        self.samples.lock().clear();
    }
}

#[derive(Clone)]
pub struct SlowEntry {
    pub id: u64,
    pub timestamp: u64,
    pub duration_us: u64,
    pub args: Vec<Bytes>,
    pub client_addr: String,
    pub client_name: String,
}

/// Commands slower than `slowlog-log-slower-than`, newest first, at most `slowlog-max-len`.
#[derive(Default)]
pub struct SlowLog {
    next_id: AtomicU64,
    entries: Mutex<VecDeque<SlowEntry>>,
    /// The two settings, copied here by `Services::apply_config`: every command reads them,
    /// and the config's lock would be a write to a shared cache line each time.
    slower_than: AtomicI64,
    max_len: AtomicUsize,
}

/// Redis keeps at most this many arguments, each cut to this many bytes.
const MAX_ARGS: usize = 32;
const MAX_ARG_LEN: usize = 128;

impl SlowLog {
    pub fn configure(&self, slower_than: i64, max_len: usize) {
        self.slower_than.store(slower_than, Ordering::Relaxed);
        self.max_len.store(max_len, Ordering::Relaxed);
    }

    /// Whether a command that ran for `duration_us` belongs in the log.
    pub fn is_slow(&self, duration_us: u64) -> bool {
        let slower_than = self.slower_than.load(Ordering::Relaxed);
        slower_than >= 0 && duration_us >= slower_than as u64
    }

    pub fn push(&self, args: &[Bytes], duration_us: u64, client_addr: String, client_name: String) {
        let mut kept: Vec<Bytes> = args
            .iter()
            .take(if args.len() > MAX_ARGS {
                MAX_ARGS - 1
            } else {
                MAX_ARGS
            })
            .map(|a| {
                if a.len() > MAX_ARG_LEN {
                    let more = a.len() - MAX_ARG_LEN;
                    let mut cut = a[..MAX_ARG_LEN].to_vec();
                    cut.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
                    Bytes::from(cut)
                } else {
                    a.clone()
                }
            })
            .collect();
        if args.len() > MAX_ARGS {
            kept.push(Bytes::from(format!(
                "... ({} more arguments)",
                args.len() - MAX_ARGS + 1
            )));
        }
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            duration_us,
            args: kept,
            client_addr,
            client_name,
        };
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(self.max_len.load(Ordering::Relaxed));
    }

    pub fn latest(&self, count: usize) -> Vec<SlowEntry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }

    pub fn count(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_filed_under_their_first_word() {
        assert_eq!(
            error_code("WRONGTYPE Operation against a key holding the wrong kind of value"),
            "WRONGTYPE"
        );
        assert_eq!(error_code("ERR syntax error"), "ERR");
        assert_eq!(error_code("NOSPACE"), "ERR");
        assert_eq!(error_code(&format!("{} late space", "X".repeat(40))), "ERR");
        assert_eq!(
            error_code(&format!("{} fits", "X".repeat(30))),
            "X".repeat(30)
        );
        assert_eq!(error_code(&format!("{} too long", "X".repeat(31))), "ERR");
    }

    #[test]
    fn error_codes_are_bounded() {
        let stats = ServerStats::new(1);
        for i in 0..ERROR_CODES + 10 {
            stats.record_errors(&format!("CODE{i:03} made up"), 1);
        }
        stats.record_errors("CODE000 again", 2);
        let codes = stats.error_codes();
        assert_eq!(codes.len(), ERROR_CODES);
        assert_eq!(codes[0], ("CODE000".to_string(), 3));
        assert_eq!(
            stats.error_replies.load(Ordering::Relaxed),
            ERROR_CODES as u64 + 12
        );
    }
}
