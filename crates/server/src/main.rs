//! `shale-server [config-file] [--name value ...]`, like `redis-server`.

use std::io::IsTerminal;
use std::path::PathBuf;

use shale_server::config::{Config, PARAMS};

/// jemalloc for Rust and, unprefixed (on Linux), for RocksDB's C++ as well: under glibc's
/// malloc, allocation was 5-8% of server CPU, and jemalloc cut CPU per MGET of 32 keys by 9%
/// and per SET by 7%.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const USAGE: &str = "Usage: shale-server [/path/to/shale.conf] [--option value ...]
       shale-server --version
       shale-server --help

Examples:
       shale-server                         (defaults: 127.0.0.1:6379, data in ./shale-data)
       shale-server /etc/shale/shale.conf
       shale-server --port 7000 --dir /tmp/shale
       shale-server shale.conf --appendfsync always --rocksdb.block-cache-size 1gb

Options are the config file's directives; see README.md for the list.";

/// `--name value...` options given on the command line.
type Overrides = Vec<(String, Vec<String>)>;

/// The config file (if any) and the overrides.
fn parse_args(args: &[String]) -> Result<(Option<PathBuf>, Overrides), String> {
    let mut file = None;
    let mut overrides: Overrides = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if let Some(name) = arg.strip_prefix("--") {
            overrides.push((name.to_string(), Vec::new()));
        } else if let Some((_, values)) = overrides.last_mut() {
            values.push(arg.clone());
        } else if i == 0 {
            file = Some(PathBuf::from(arg));
        } else {
            return Err(format!("unexpected argument '{arg}'"));
        }
    }
    Ok((file, overrides))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--help") | Some("-h") => {
            println!(
                "{USAGE}\n\nDirectives: {}",
                PARAMS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
            );
            return;
        }
        Some("--version") | Some("-v") => {
            println!(
                "shale-server v={} (redis {})",
                env!("CARGO_PKG_VERSION"),
                shale_server::REDIS_VERSION
            );
            return;
        }
        _ => {}
    }
    let config = parse_args(&args).and_then(|(file, overrides)| {
        Config::load(file.as_deref(), &overrides).map(|config| (config, file))
    });
    let (config, file) = match config {
        Ok(pair) => pair,
        Err(err) => {
            eprintln!("*** FATAL CONFIG ERROR ***\n{err}\n\n{USAGE}");
            std::process::exit(1);
        }
    };
    let level = match config.loglevel.as_str() {
        "debug" => "debug",
        "verbose" => "info",
        "warning" => "warn",
        "nothing" => "off",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let file = file.map(|f| std::fs::canonicalize(&f).unwrap_or(f));
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.threads > 0 {
        builder.worker_threads(config.threads);
    }
    // Every client waiting for a key that a script or EXEC holds occupies a blocking thread
    // (`keyspace/locks.rs`); they are started only when needed.
    builder.max_blocking_threads(config.maxclients.saturating_add(512));
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("can't start runtime: {err}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(shale_server::network::run(config, file));
    // `run` has synced the WAL. A thread still inside a command (a script that has not yet
    // seen its stop) must not keep the process alive, nor be running while the C++ statics of
    // RocksDB are destroyed at exit: the process ends here, as a crash after the sync would.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    if let Err(err) = result {
        eprintln!("shale-server: {err}");
        std::process::exit(1);
    }
    // SAFETY: `_exit` only ends the process; nothing of ours runs after it.
    unsafe { libc::_exit(0) }
}
