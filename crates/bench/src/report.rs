//! Results: throughput, latency percentiles from an HDR histogram, a text histogram and JSON.

use std::fmt::Write;
use std::time::Duration;

use hdrhistogram::Histogram;

pub struct Report {
    pub command: String,
    pub connections: usize,
    pub ops: u64,
    pub errors: u64,
    /// Bytes of `__VALUE__` payloads sent in measured operations.
    pub value_bytes: u64,
    pub elapsed: Duration,
    /// Per-operation latency in microseconds.
    pub latency: Histogram<u64>,
    /// Operations completed in each second of the measured run.
    pub per_second: Vec<u64>,
    /// The tail latency of each whole second of the run.
    pub tails: Vec<Tail>,
}

/// The tail latency of one second, in microseconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tail {
    pub p99_us: u64,
    pub p999_us: u64,
}

impl Report {
    pub fn qps(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn ms(&self, quantile: f64) -> f64 {
        self.latency.value_at_quantile(quantile) as f64 / 1000.0
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "command: {}", self.command);
        let _ = writeln!(
            out,
            "connections: {}  operations: {}  errors: {}  seconds: {:.2}",
            self.connections,
            self.ops,
            self.errors,
            self.elapsed.as_secs_f64()
        );
        let _ = writeln!(out, "QPS: {:.0}", self.qps());
        let _ = writeln!(
            out,
            "latency ms: avg {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
            self.latency.mean() / 1000.0,
            self.ms(0.5),
            self.ms(0.9),
            self.ms(0.99),
            self.ms(0.999),
            self.latency.max() as f64 / 1000.0
        );
        let _ = writeln!(out, "latency histogram:");
        let total = self.latency.len().max(1);
        let mut previous = 0;
        for bound_us in [
            100u64,
            200,
            500,
            1_000,
            2_000,
            5_000,
            10_000,
            20_000,
            50_000,
            100_000,
            u64::MAX,
        ] {
            let upto = if bound_us == u64::MAX {
                total
            } else {
                self.latency.count_between(0, bound_us)
            };
            let count = upto.saturating_sub(previous);
            previous = upto;
            if count == 0 {
                continue;
            }
            let label = if bound_us == u64::MAX {
                "> 100 ms".to_string()
            } else {
                format!("<= {} ms", bound_us as f64 / 1000.0)
            };
            let share = count as f64 * 100.0 / total as f64;
            let _ = writeln!(
                out,
                "  {label:>10}  {count:>10}  {share:6.2}%  {}",
                "#".repeat((share / 2.0).round() as usize)
            );
        }
        out
    }

    pub fn json(&self) -> String {
        let per_second: Vec<String> = self.per_second.iter().map(u64::to_string).collect();
        let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
        let p99: Vec<String> = self.tails.iter().map(|t| ms(t.p99_us)).collect();
        let p999: Vec<String> = self.tails.iter().map(|t| ms(t.p999_us)).collect();
        format!(
            "{{\"command\":{},\"connections\":{},\"ops\":{},\"errors\":{},\"value_bytes\":{},\"seconds\":{:.3},\"qps\":{:.1},\"latency_ms\":{{\"avg\":{:.4},\"p50\":{:.4},\"p90\":{:.4},\"p99\":{:.4},\"p999\":{:.4},\"max\":{:.4}}},\"per_second\":[{}],\"per_second_p99_ms\":[{}],\"per_second_p999_ms\":[{}]}}",
            json_string(&self.command),
            self.connections,
            self.ops,
            self.errors,
            self.value_bytes,
            self.elapsed.as_secs_f64(),
            self.qps(),
            self.latency.mean() / 1000.0,
            self.ms(0.5),
            self.ms(0.9),
            self.ms(0.99),
            self.ms(0.999),
            self.latency.max() as f64 / 1000.0,
            per_second.join(","),
            p99.join(","),
            p999.join(",")
        )
    }
}

fn json_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_histogram_and_json() {
        let mut latency = Histogram::<u64>::new(3).unwrap();
        for us in 1..=1000u64 {
            latency.record(us * 10).unwrap();
        }
        let report = Report {
            command: "GET \"k\"".into(),
            connections: 2,
            ops: 1000,
            errors: 1,
            value_bytes: 5,
            elapsed: Duration::from_secs(2),
            latency,
            per_second: vec![600, 400],
            tails: vec![
                Tail {
                    p99_us: 1500,
                    p999_us: 2000,
                },
                Tail::default(),
            ],
        };
        assert_eq!(report.qps(), 500.0);
        let text = report.text();
        assert!(text.contains("QPS: 500"), "{text}");
        assert!(text.contains("p50 5.0"), "{text}");
        assert!(text.contains("<= 0.1 ms"), "{text}");
        let json = report.json();
        assert!(
            json.starts_with(
                "{\"command\":\"GET \\\"k\\\"\",\"connections\":2,\"ops\":1000,\"errors\":1,\"value_bytes\":5,"
            ),
            "{json}"
        );
        assert!(
            json.ends_with(
                "\"per_second\":[600,400],\"per_second_p99_ms\":[1.500,0.000],\"per_second_p999_ms\":[2.000,0.000]}"
            ),
            "{json}"
        );
    }
}
