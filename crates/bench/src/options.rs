//! Command-line options, named like Tair's Go load tool (`-h -port -a -p -c -d -command -r -r2
//! -batching`) plus what redis-benchmark and memtier users expect.

use std::time::Duration;

use crate::payload::{PayloadKind, ValueSize};

/// How `__RAND__` values are drawn from `[0, r)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    Uniform,
    Sequential,
    /// Zipf with exponent `s` (hot keys at the low end).
    Zipfian(f64),
    /// Normal around the middle of the range, standard deviation range/6.
    Gaussian,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub host: String,
    pub port: u16,
    /// `user:password` or a bare password.
    pub auth: Option<String>,
    pub connections: usize,
    /// Total operations; overrides `duration`.
    pub total: Option<u64>,
    pub duration: Duration,
    pub warmup: Duration,
    pub command: String,
    pub range: u64,
    /// `--hot N`: `__RAND__` takes only N values of the range, spread across it.
    pub hot: Option<u64>,
    pub range2: u64,
    /// Commands wrapped in one MULTI/EXEC per round trip (0: none).
    pub batching: usize,
    /// Plain pipelining depth.
    pub pipeline: usize,
    pub value_size: ValueSize,
    pub payload: PayloadKind,
    pub distribution: Distribution,
    pub json: bool,
    /// Suppress the per-second lines.
    pub quiet: bool,
    /// Runs MSET and MGET on Shale's storage engine in this directory instead of a server.
    pub engine: Option<std::path::PathBuf>,
    /// Seeds the random keys, offsets and values: the same seed replays the same commands,
    /// so a second run of a write on one server would only rewrite what the first wrote.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            host: "127.0.0.1".into(),
            port: 6379,
            auth: None,
            connections: 4,
            total: None,
            duration: Duration::from_secs(30),
            warmup: Duration::ZERO,
            command: "TR.GETBIT foo-__RAND__ __RAND2__".into(),
            range: 100_000_000,
            hot: None,
            range2: 100_000_000,
            batching: 0,
            pipeline: 1,
            value_size: ValueSize {
                min: 3,
                max: 3,
                mean: None,
            },
            seed: 0x5EED,
            payload: PayloadKind::Letters,
            distribution: Distribution::Uniform,
            json: false,
            quiet: false,
            engine: None,
        }
    }
}

pub const USAGE: &str = "Usage: shale-bench [options]
  -h <host>            server address (default 127.0.0.1)
  -port <port>         server port (default 6379)
  -a <user:password>   authenticate (or a bare password)
  -p <n>               parallel connections (default 4)
  -c <n>               total operations; overrides -d
  -d <seconds>         test duration (default 30)
  -command <cmd>       command template (default \"TR.GETBIT foo-__RAND__ __RAND2__\");
                       __RAND__ / __RAND2__ become random integers below -r / -r2,
                       __VALUE__ a value of --value-size bytes
  -r <n>               range of __RAND__ (default 100000000)
  -r2 <n>              range of __RAND2__ (default 100000000)
  --hot <n>            __RAND__ takes n values of -r's range, spread evenly across it
                       (hot keys among the others); --dist draws among those n
  -batching <n>        n commands per MULTI/EXEC round trip
  -P <n>               pipeline n commands per round trip
  --value-size <n>     bytes of __VALUE__ (default 3), or a range such as 1024-4096, with
                       :MEAN for more short values than long (1024-8192:2867)
  --text               __VALUE__ is text-like (words), not random letters
  --dist <kind>        __RAND__ distribution: uniform, sequential, zipfian[:s], gaussian
  --mset <n>           shortcut: MSET of n random keys (key:__RAND__ __VALUE__ ...)
  --mget <n>           shortcut: MGET of n random keys
  --warmup <seconds>   run this long before measuring
  --seed <n>           seed of the random numbers and values (default 24301): the same seed
                       sends the same commands, another seed new keys and offsets
  --engine <dir>       run --mset/--mget on Shale's storage engine in <dir>, no server:
                       the engine's own limit (-p threads, -P requests per batch)
  --json               print the result as JSON
  -q                   no per-second lines
  --help               this text";

/// Parses arguments (without the program name).
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut i = 0;
    let value = |i: usize| {
        args.get(i + 1)
            .cloned()
            .ok_or_else(|| format!("{} needs a value", args[i]))
    };
    fn num<T: std::str::FromStr>(text: String, name: &str) -> Result<T, String> {
        text.parse()
            .map_err(|_| format!("{name}: not a number: {text}"))
    }
    while i < args.len() {
        let name = args[i].as_str();
        let mut consumed = 2;
        match name {
            "-h" => options.host = value(i)?,
            "-port" | "--port" => options.port = num(value(i)?, name)?,
            "-a" => options.auth = Some(value(i)?),
            "-p" => options.connections = num(value(i)?, name)?,
            "-c" => options.total = Some(num(value(i)?, name)?),
            "-d" => options.duration = Duration::from_secs_f64(num(value(i)?, name)?),
            "-command" | "--command" => options.command = value(i)?,
            "-r" => options.range = num(value(i)?, name)?,
            "-r2" => options.range2 = num(value(i)?, name)?,
            "--hot" => options.hot = Some(num(value(i)?, name)?),
            "-batching" => options.batching = num(value(i)?, name)?,
            "-P" => options.pipeline = num(value(i)?, name)?,
            "--value-size" => options.value_size = ValueSize::parse(&value(i)?)?,
            "--text" => {
                options.payload = PayloadKind::Text;
                consumed = 1;
            }
            "--warmup" => options.warmup = Duration::from_secs_f64(num(value(i)?, name)?),
            "--seed" => options.seed = num(value(i)?, name)?,
            "--dist" => options.distribution = parse_distribution(&value(i)?)?,
            "--mset" => {
                let n: usize = num(value(i)?, name)?;
                options.command = format!("MSET{}", " key:__RAND__ __VALUE__".repeat(n));
            }
            "--mget" => {
                let n: usize = num(value(i)?, name)?;
                options.command = format!("MGET{}", " key:__RAND__".repeat(n));
            }
            "--engine" => options.engine = Some(value(i)?.into()),
            "--json" => {
                options.json = true;
                consumed = 1;
            }
            "-q" => {
                options.quiet = true;
                consumed = 1;
            }
            other => return Err(format!("unknown option {other}\n\n{USAGE}")),
        }
        i += consumed;
    }
    if options.connections == 0
        || options.range == 0
        || options.range2 == 0
        || options.hot == Some(0)
        || options.pipeline == 0
    {
        return Err("-p, -r, -r2, --hot and -P must be positive".into());
    }
    Ok(options)
}

fn parse_distribution(text: &str) -> Result<Distribution, String> {
    match text.split_once(':') {
        Some(("zipfian", s)) => Ok(Distribution::Zipfian(
            s.parse().map_err(|_| format!("bad zipf exponent {s}"))?,
        )),
        _ => match text {
            "uniform" => Ok(Distribution::Uniform),
            "sequential" => Ok(Distribution::Sequential),
            "zipfian" => Ok(Distribution::Zipfian(0.99)),
            "gaussian" => Ok(Distribution::Gaussian),
            other => Err(format!("unknown distribution {other}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tair_tool_command_lines_parse() {
        let o = parse(&args(&[
            "-h",
            "10.0.0.1",
            "-a",
            "user:pw",
            "-d",
            "30",
            "-r",
            "100000",
            "-r2",
            "10000000",
            "-command",
            "TR.SETBIT foo-__RAND__ __RAND2__ 1",
            "-p",
            "20",
            "-c",
            "1000",
        ]))
        .unwrap();
        assert_eq!(o.host, "10.0.0.1");
        assert_eq!(o.auth.as_deref(), Some("user:pw"));
        assert_eq!(
            (o.range, o.range2, o.connections, o.total),
            (100_000, 10_000_000, 20, Some(1000))
        );
        assert_eq!(o.command, "TR.SETBIT foo-__RAND__ __RAND2__ 1");
        assert_eq!(o.duration, Duration::from_secs(30));
    }

    #[test]
    fn extras_and_errors() {
        let o = parse(&args(&[
            "--mget",
            "3",
            "--dist",
            "zipfian:1.2",
            "-P",
            "16",
            "--json",
            "-batching",
            "10",
            "--value-size",
            "10-20",
            "--text",
            "--seed",
            "7",
        ]))
        .unwrap();
        assert_eq!(o.seed, 7);
        assert_eq!(
            o.value_size,
            ValueSize {
                min: 10,
                max: 20,
                mean: None
            }
        );
        assert_eq!(o.payload, PayloadKind::Text);
        assert_eq!(o.command, "MGET key:__RAND__ key:__RAND__ key:__RAND__");
        assert_eq!(o.distribution, Distribution::Zipfian(1.2));
        assert_eq!((o.pipeline, o.batching, o.json), (16, 10, true));
        assert!(parse(&args(&["-p"])).is_err());
        assert!(parse(&args(&["-p", "x"])).is_err());
        assert!(parse(&args(&["--bogus"])).is_err());
        assert!(parse(&args(&["--dist", "pareto"])).is_err());
        assert!(parse(&args(&["-r", "0"])).is_err());
    }
}
