//! Connections that send templated commands and time each round trip.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::report::Tail;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::engine::EngineTarget;
use crate::options::Options;
use crate::payload::Payloads;
use crate::reply::reply_end;
use crate::report::Report;
use crate::template::{Template, ValueSource};

/// State shared by the connections and the reporter.
struct Shared {
    /// Operations left to start when `-c` is given.
    budget: Option<AtomicU64>,
    stop: AtomicBool,
    measuring: AtomicBool,
    completed: AtomicU64,
    errors: AtomicU64,
    value_bytes: AtomicU64,
    /// Latencies of the current second, for its percentiles (one lock per round trip).
    second: std::sync::Mutex<Histogram<u64>>,
}

impl Shared {
    /// Books `ops` operations that took since `started`, once measuring.
    fn record(
        &self,
        latency: &mut Histogram<u64>,
        started: Instant,
        ops: u64,
        errors: u64,
        value_bytes: u64,
    ) -> std::io::Result<()> {
        if !self.measuring.load(Ordering::Relaxed) {
            return Ok(());
        }
        let elapsed = started.elapsed().as_micros().max(1) as u64;
        latency
            .record_n(elapsed, ops)
            .map_err(std::io::Error::other)?;
        if let Ok(mut second) = self.second.lock() {
            second
                .record_n(elapsed, ops)
                .map_err(std::io::Error::other)?;
        }
        self.completed.fetch_add(ops, Ordering::Relaxed);
        self.errors.fetch_add(errors, Ordering::Relaxed);
        self.value_bytes.fetch_add(value_bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Claims up to `want` operations; 0 when the budget or the time is up.
    fn claim(&self, want: u64) -> u64 {
        if self.stop.load(Ordering::Relaxed) {
            return 0;
        }
        let Some(budget) = &self.budget else {
            return want;
        };
        let mut left = budget.load(Ordering::Relaxed);
        loop {
            let take = want.min(left);
            if take == 0 {
                return 0;
            }
            match budget.compare_exchange(left, left - take, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return take,
                Err(now) => left = now,
            }
        }
    }
}

async fn send_auth(stream: &mut TcpStream, auth: &str) -> std::io::Result<()> {
    let parts: Vec<&str> = match auth.split_once(':') {
        Some((user, password)) => vec!["AUTH", user, password],
        None => vec!["AUTH", auth],
    };
    let mut request = format!("*{}\r\n", parts.len());
    for p in &parts {
        request.push_str(&format!("${}\r\n{p}\r\n", p.len()));
    }
    stream.write_all(request.as_bytes()).await?;
    let mut buf = vec![0u8; 512];
    let n = stream.read(&mut buf).await?;
    if buf[..n].starts_with(b"-") {
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&buf[..n]).trim().to_string(),
        ));
    }
    Ok(())
}

/// One connection's loop; returns its latency histogram (microseconds per operation).
async fn connection(
    options: Arc<Options>,
    template: Arc<Template>,
    shared: Arc<Shared>,
    seed: u64,
    payloads: Arc<Payloads>,
    sequence: Arc<AtomicU64>,
) -> std::io::Result<Histogram<u64>> {
    let mut stream = TcpStream::connect((options.host.as_str(), options.port)).await?;
    stream.set_nodelay(true)?;
    if let Some(auth) = &options.auth {
        send_auth(&mut stream, auth).await?;
    }
    let mut values = ValueSource::new(
        seed,
        options.distribution,
        options.range,
        options.hot,
        options.range2,
        payloads,
        sequence,
    );
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(std::io::Error::other)?;
    let per_trip = if options.batching > 0 {
        options.batching
    } else {
        options.pipeline
    } as u64;
    let mut request = Vec::new();
    let mut input = vec![0u8; 64 * 1024];
    let mut buffered = Vec::new();
    loop {
        let ops = shared.claim(per_trip);
        if ops == 0 {
            return Ok(latency);
        }
        request.clear();
        let value_bytes = values.value_bytes;
        let mut expected = ops as usize;
        if options.batching > 0 {
            request.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n");
            expected += 2;
        }
        for _ in 0..ops {
            template.render(&mut values, &mut request);
        }
        if options.batching > 0 {
            request.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
        }
        let started = Instant::now();
        stream.write_all(&request).await?;
        let mut pos = 0;
        let mut errors = 0;
        while expected > 0 {
            match reply_end(&buffered, pos) {
                Some((end, is_error)) => {
                    pos = end;
                    expected -= 1;
                    errors += is_error as u64;
                }
                None => {
                    let n = stream.read(&mut input).await?;
                    if n == 0 {
                        return Err(std::io::Error::other("server closed the connection"));
                    }
                    buffered.extend_from_slice(&input[..n]);
                }
            }
        }
        buffered.drain(..pos);
        let sent = values.value_bytes - value_bytes;
        shared.record(&mut latency, started, ops, errors, sent)?;
    }
}

/// One `--engine` connection's loop: the same requests, run on the engine in place.
async fn engine_connection(
    options: Arc<Options>,
    template: Arc<Template>,
    shared: Arc<Shared>,
    engine: Arc<EngineTarget>,
    mut values: ValueSource,
) -> std::io::Result<Histogram<u64>> {
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(std::io::Error::other)?;
    let mut request = Vec::new();
    loop {
        let ops = shared.claim(options.pipeline as u64);
        if ops == 0 {
            return Ok(latency);
        }
        request.clear();
        let value_bytes = values.value_bytes;
        for _ in 0..ops {
            template.render(&mut values, &mut request);
        }
        let started = Instant::now();
        // Each connection blocks a thread of its own in the engine, as a server's would.
        let errors =
            tokio::task::block_in_place(|| engine.run(&request)).map_err(std::io::Error::other)?;
        let sent = values.value_bytes - value_bytes;
        shared.record(&mut latency, started, ops, errors, sent)?;
    }
}

/// Runs the load and gathers the report; `progress` gets one line a second.
pub async fn run(options: Options, progress: impl Fn(String)) -> Result<Report, String> {
    let template = Arc::new(Template::parse(&options.command));
    if template.is_empty() {
        return Err("empty command".into());
    }
    let options = Arc::new(options);
    let shared = Arc::new(Shared {
        budget: options.total.map(AtomicU64::new),
        stop: AtomicBool::new(false),
        measuring: AtomicBool::new(options.warmup.is_zero()),
        completed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        value_bytes: AtomicU64::new(0),
        second: std::sync::Mutex::new(
            Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?,
        ),
    });
    let sequence = Arc::new(AtomicU64::new(0));
    let payloads = Arc::new(Payloads::new(
        options.payload,
        options.value_size,
        options.seed,
    ));
    let engine = match &options.engine {
        Some(dir) => Some(Arc::new(EngineTarget::open(dir)?)),
        None => None,
    };
    let tasks: Vec<_> = (0..options.connections)
        .map(|i| {
            let seed = options.seed.wrapping_add(i as u64);
            match &engine {
                Some(engine) => {
                    let values = ValueSource::new(
                        seed,
                        options.distribution,
                        options.range,
                        options.hot,
                        options.range2,
                        payloads.clone(),
                        sequence.clone(),
                    );
                    tokio::spawn(engine_connection(
                        options.clone(),
                        template.clone(),
                        shared.clone(),
                        engine.clone(),
                        values,
                    ))
                }
                None => tokio::spawn(connection(
                    options.clone(),
                    template.clone(),
                    shared.clone(),
                    seed,
                    payloads.clone(),
                    sequence.clone(),
                )),
            }
        })
        .collect();
    if !options.warmup.is_zero() {
        tokio::time::sleep(options.warmup).await;
        shared.measuring.store(true, Ordering::Relaxed);
    }
    let started = Instant::now();
    let mut per_second = Vec::new();
    let mut tails = Vec::new();
    let mut last = 0;
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    loop {
        let done = tasks.iter().all(|t| t.is_finished());
        if done {
            break;
        }
        tokio::select! {
            _ = ticker.tick() => {
                let now = shared.completed.load(Ordering::Relaxed);
                per_second.push(now - last);
                let tail = shared.second.lock().map_or(Tail::default(), |mut second| {
                    let tail = Tail {
                        p99_us: second.value_at_quantile(0.99),
                        p999_us: second.value_at_quantile(0.999),
                    };
                    second.reset();
                    tail
                });
                tails.push(tail);
                progress(format!(
                    "second {:>4}: {:>10} ops/s  p99 {:.3} ms  p99.9 {:.3} ms",
                    per_second.len(),
                    now - last,
                    tail.p99_us as f64 / 1000.0,
                    tail.p999_us as f64 / 1000.0
                ));
                last = now;
                if options.total.is_none() && started.elapsed() >= options.duration {
                    shared.stop.store(true, Ordering::Relaxed);
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
    let elapsed = started.elapsed();
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).map_err(|e| e.to_string())?;
    for task in tasks {
        let histogram = task
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        latency.add(histogram).map_err(|e| e.to_string())?;
    }
    let ops = shared.completed.load(Ordering::Relaxed);
    if ops > last {
        per_second.push(ops - last);
    }
    if let Some(engine) = &engine {
        tokio::task::block_in_place(|| engine.settle(Duration::from_secs(600)));
    }
    Ok(Report {
        command: options.command.clone(),
        connections: options.connections,
        ops,
        errors: shared.errors.load(Ordering::Relaxed),
        value_bytes: shared.value_bytes.load(Ordering::Relaxed),
        elapsed,
        latency,
        per_second,
        tails,
    })
}
