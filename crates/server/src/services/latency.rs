//! Latency figures as Redis 7.0 keeps them: a histogram of every command's run time (INFO
//! latencystats, LATENCY HISTOGRAM) and the latency monitor's events (LATENCY LATEST,
//! HISTORY, RESET): runs of a command, WAL syncs, RocksDB's flushes, compactions and write
//! stalls that took at least `latency-monitor-threshold` milliseconds.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::Mutex;

/// Sub-buckets per power of two: a value is known within 1/8 of itself (12.5%), as Redis's
/// histograms of two significant digits know it within 1%, in 2.6 KB per command instead of
/// Redis's 30 KB.
const SUB_BUCKETS: u64 = 8;
const SUB_BITS: u32 = 3;
/// Nanoseconds up to 2^40 (18 minutes); longer runs count in the last bucket.
const MAX_EXPONENT: u32 = 40;
const BUCKETS: usize = (SUB_BUCKETS + (MAX_EXPONENT - SUB_BITS + 1) as u64 * SUB_BUCKETS) as usize;

/// Run times in nanoseconds, counted in log-linear buckets; recorded without locks.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
}

fn bucket_of(nanos: u64) -> usize {
    let nanos = nanos.min((1 << (MAX_EXPONENT + 1)) - 1);
    if nanos < SUB_BUCKETS {
        return nanos as usize;
    }
    let exponent = 63 - nanos.leading_zeros();
    let sub = (nanos >> (exponent - SUB_BITS)) & (SUB_BUCKETS - 1);
    (SUB_BUCKETS + (exponent - SUB_BITS) as u64 * SUB_BUCKETS + sub) as usize
}

/// The highest value a bucket holds.
fn highest_in(bucket: usize) -> u64 {
    let bucket = bucket as u64;
    if bucket < SUB_BUCKETS {
        return bucket;
    }
    let exponent = (bucket - SUB_BUCKETS) / SUB_BUCKETS + SUB_BITS as u64;
    let sub = bucket % SUB_BUCKETS;
    ((SUB_BUCKETS + sub + 1) << (exponent - SUB_BITS as u64)) - 1
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn record(&self, nanos: u64) {
        self.buckets[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts as they are now, read once for what a report derives from them: a
    /// histogram taken bucket by bucket for each figure could differ between figures.
    pub fn snapshot(&self) -> Counts {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        Counts {
            total: buckets.iter().sum(),
            buckets,
        }
    }
}

/// A histogram's counts at one moment.
pub struct Counts {
    buckets: Vec<u64>,
    total: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The value below which `percentile` % of the runs fall, in nanoseconds (the highest
    /// value of its bucket, as Redis's histograms answer).
    pub fn value_at(&self, percentile: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let wanted = ((percentile / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                return highest_in(bucket);
            }
        }
        highest_in(BUCKETS - 1)
    }

    /// Runs up to each power of two of microseconds (1024 ns, 2048 ns, ...), cumulated, where
    /// the count grows: LATENCY HISTOGRAM's `histogram_usec`, keyed as Redis keys it (the
    /// bound in µs, rounded down).
    pub fn cumulative_usec(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut cumulative = 0;
        let mut reported = 0;
        let mut bound: u64 = 1024;
        let mut bucket = 0;
        while bucket < BUCKETS {
            while bucket < BUCKETS && highest_in(bucket) < bound {
                cumulative += self.buckets[bucket];
                bucket += 1;
            }
            if cumulative > reported {
                out.push(((bound - 1) / 1000, cumulative));
                reported = cumulative;
            }
            bound *= 2;
        }
        out
    }
}

/// A histogram per command of the table, made at its first run.
pub struct CommandLatencies {
    enabled: AtomicBool,
    commands: Box<[OnceLock<Histogram>]>,
}

impl CommandLatencies {
    pub fn new(commands: usize) -> Self {
        CommandLatencies {
            enabled: AtomicBool::new(true),
            commands: (0..commands).map(|_| OnceLock::new()).collect(),
        }
    }

    /// `latency-tracking`.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn record(&self, command: usize, nanos: u64) {
        if let Some(slot) = self.commands.get(command) {
            slot.get_or_init(Histogram::new).record(nanos);
        }
    }

    /// The histogram of the command at `command`, if it ran since the last reset.
    pub fn of(&self, command: usize) -> Option<&Histogram> {
        self.commands.get(command)?.get()
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for slot in self.commands.iter() {
            if let Some(histogram) = slot.get() {
                histogram
                    .buckets
                    .iter()
                    .for_each(|b| b.store(0, Ordering::Relaxed));
            }
        }
    }
}

/// Samples the monitor keeps per event, one per second at most, as Redis keeps 160.
const HISTORY_LEN: usize = 160;

#[derive(Default)]
struct EventHistory {
    /// (unix seconds, milliseconds), oldest first.
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// The latency monitor.
#[derive(Default)]
pub struct LatencyMonitor {
    /// `latency-monitor-threshold` in ms; 0 turns the monitor off.
    threshold: AtomicU64,
    events: Mutex<BTreeMap<&'static str, EventHistory>>,
}

/// What LATENCY LATEST says of an event.
pub struct Latest {
    pub event: &'static str,
    pub time: u64,
    pub latest: u64,
    pub max: u64,
}

/// An event's samples as Redis's `analyzeLatencyForEvent` sums them up.
pub struct Summary {
    pub event: &'static str,
    pub samples: u64,
    /// Mean latency, in ms (rounded down).
    pub avg: u64,
    /// Mean absolute deviation from `avg`, in ms (rounded down).
    pub mad: u64,
    /// Seconds since the oldest sample kept, at least 1.
    pub period: u64,
    /// The longest ever recorded, in ms.
    pub max: u64,
}

impl LatencyMonitor {
    pub fn set_threshold(&self, millis: u64) {
        self.threshold.store(millis, Ordering::Relaxed);
    }

    /// Records that `event` took `took`, if the monitor is on and it took long enough.
    pub fn note(&self, event: &'static str, took: Duration) {
        let threshold = self.threshold.load(Ordering::Relaxed);
        let millis = took.as_millis() as u64;
        if threshold == 0 || millis < threshold {
            return;
        }
        self.add(event, crate::services::replication::unix_secs(), millis);
    }

    fn add(&self, event: &'static str, now: u64, millis: u64) {
        let mut events = self.events.lock();
        let history = events.entry(event).or_default();
        history.max = history.max.max(millis);
        match history.samples.back_mut() {
            // One sample a second: the longest.
            Some((time, latest)) if *time == now => *latest = (*latest).max(millis),
            _ => {
                if history.samples.len() == HISTORY_LEN {
                    history.samples.pop_front();
                }
                history.samples.push_back((now, millis));
            }
        }
    }

    pub fn latest(&self) -> Vec<Latest> {
        let events = self.events.lock();
        events
            .iter()
            .filter_map(|(&event, history)| {
                let &(time, latest) = history.samples.back()?;
                Some(Latest {
                    event,
                    time,
                    latest,
                    max: history.max,
                })
            })
            .collect()
    }

    /// Each event's figures as LATENCY DOCTOR reports them, at `now` (unix seconds).
    pub fn summaries(&self, now: u64) -> Vec<Summary> {
        let events = self.events.lock();
        events
            .iter()
            .filter(|(_, history)| !history.samples.is_empty())
            .map(|(&event, history)| {
                let samples = history.samples.len() as u64;
                let sum: u64 = history.samples.iter().map(|&(_, millis)| millis).sum();
                let avg = sum / samples;
                let deviations: u64 = history
                    .samples
                    .iter()
                    .map(|&(_, millis)| avg.abs_diff(millis))
                    .sum();
                let oldest = history.samples.iter().map(|&(time, _)| time).min();
                Summary {
                    event,
                    samples,
                    avg,
                    mad: deviations / samples,
                    period: now.saturating_sub(oldest.unwrap_or(now)).max(1),
                    max: history.max,
                }
            })
            .collect()
    }

    /// Whether the monitor has ever recorded an event that is still kept.
    pub fn is_empty(&self) -> bool {
        self.events.lock().is_empty()
    }

    pub fn history(&self, event: &str) -> Vec<(u64, u64)> {
        let events = self.events.lock();
        events
            .get(event)
            .map(|h| h.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets the named events, or all; returns how many it forgot.
    pub fn reset(&self, named: &[&[u8]]) -> usize {
        let mut events = self.events.lock();
        if named.is_empty() {
            let count = events.len();
            events.clear();
            return count;
        }
        let before = events.len();
        events.retain(|event, _| !named.iter().any(|n| n == &event.as_bytes()));
        before - events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_values_within_an_eighth() {
        for value in [0, 1, 7, 8, 9, 15, 16, 100, 1023, 1024, 5000, 1 << 30] {
            let bucket = bucket_of(value);
            assert!(highest_in(bucket) >= value, "{value}");
            assert!(highest_in(bucket) - value <= value / 8, "{value}");
            if bucket > 0 {
                assert!(highest_in(bucket - 1) < value, "{value}");
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_and_the_cumulative_histogram() {
        let histogram = Histogram::new();
        for _ in 0..98 {
            histogram.record(1_500);
        }
        histogram.record(10_000);
        histogram.record(3_000_000);
        let counts = histogram.snapshot();
        assert_eq!(counts.total(), 100);
        assert_eq!(counts.value_at(50.0), 1_535);
        assert_eq!(counts.value_at(99.0), 10_239);
        assert!(counts.value_at(99.9) >= 3_000_000);
        // Redis's keys: 1024 ns is 1 µs, 2048 ns 2 µs, 16384 ns 16 µs, ...
        assert_eq!(
            counts.cumulative_usec(),
            vec![(2, 98), (16, 99), (4194, 100)]
        );
    }

    #[test]
    fn the_monitor_keeps_one_sample_a_second_and_the_maximum() {
        let monitor = LatencyMonitor::default();
        monitor.note("command", Duration::from_millis(500));
        assert!(monitor.latest().is_empty(), "off at threshold 0");
        monitor.set_threshold(100);
        monitor.note("command", Duration::from_millis(50));
        assert!(monitor.latest().is_empty());
        monitor.add("command", 10, 200);
        monitor.add("command", 10, 150);
        monitor.add("command", 11, 120);
        monitor.add("fast-command", 11, 300);
        assert_eq!(monitor.history("command"), vec![(10, 200), (11, 120)]);
        let latest = monitor.latest();
        assert_eq!(latest[0].event, "command");
        assert_eq!((latest[0].latest, latest[0].max), (120, 200));
        let summaries = monitor.summaries(14);
        let command = &summaries[0];
        assert_eq!(command.event, "command");
        assert_eq!(
            (
                command.samples,
                command.avg,
                command.mad,
                command.period,
                command.max
            ),
            (2, 160, 40, 4, 200)
        );
        assert_eq!(monitor.summaries(10)[1].period, 1, "at least a second");
        assert_eq!(monitor.reset(&[b"command"]), 1);
        assert_eq!(monitor.reset(&[]), 1);
    }
}
