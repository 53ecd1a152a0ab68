//! `shale-server [config-file] [--name value ...]`, like `redis-server`; `import-rdb` and
//! `export-rdb` move an RDB file into or out of the data directory and exit.

use std::io::IsTerminal;
use std::path::PathBuf;

use shale_server::config::{Config, PARAMS};

/// jemalloc for Rust and, unprefixed (on Linux), for RocksDB's C++ as well: under glibc's
/// malloc, allocation was 5-8% of server CPU, and jemalloc cut CPU per MGET of 32 keys by 9%
/// and per SET by 7%.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const USAGE: &str = "Usage: shale-server [/path/to/shale.conf] [--option value ...]
       shale-server [/path/to/shale.conf] --import-rdb dump.rdb [--option value ...]
       shale-server import-rdb dump.rdb [/path/to/shale.conf] [--option value ...]
       shale-server export-rdb dump.rdb [/path/to/shale.conf] [--option value ...]
       shale-server repair [/path/to/shale.conf] [--option value ...]
       shale-server --version
       shale-server --help

Examples:
       shale-server                         (defaults: 127.0.0.1:6379, data in ./shale-data)
       shale-server /etc/shale/shale.conf
       shale-server --port 7000 --dir /tmp/shale
       shale-server shale.conf --appendfsync always --rocksdb.block-cache-size 1gb
       shale-server --import-rdb dump.rdb   (loads Redis's file into ./shale-data, then serves)
       shale-server export-rdb out.rdb --dir /tmp/shale   (writes a file Redis loads, exits)
       shale-server repair --dir /tmp/shale   (rebuilds a damaged database from what is readable)

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

/// What the command line asks for besides serving.
enum Task {
    Serve { import: Option<PathBuf> },
    Import(PathBuf),
    Export(PathBuf),
    Repair,
}

/// Takes the task's words off the arguments.
fn task(args: &mut Vec<String>) -> Result<Task, String> {
    let path_after = |args: &mut Vec<String>, at: usize, what: &str| -> Result<PathBuf, String> {
        if at + 1 >= args.len() {
            return Err(format!("{what} needs the path of an RDB file"));
        }
        let path = PathBuf::from(args.remove(at + 1));
        args.remove(at);
        Ok(path)
    };
    match args.first().map(String::as_str) {
        Some("import-rdb") => return path_after(args, 0, "import-rdb").map(Task::Import),
        Some("export-rdb") => return path_after(args, 0, "export-rdb").map(Task::Export),
        Some("repair") => {
            args.remove(0);
            return Ok(Task::Repair);
        }
        _ => {}
    }
    let import = match args.iter().position(|a| a == "--import-rdb") {
        Some(at) => Some(path_after(args, at, "--import-rdb")?),
        None => None,
    };
    Ok(Task::Serve { import })
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
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
    let task = task(&mut args);
    let config =
        task.and_then(|task| parse_args(&args).map(|(file, overrides)| (task, file, overrides)));
    let config = config.and_then(|(task, file, overrides)| {
        Config::load(file.as_deref(), &overrides).map(|config| (task, config, file))
    });
    let (task, config, file) = match config {
        Ok(loaded) => loaded,
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
    let import = match task {
        Task::Serve { import } => import,
        Task::Import(path) => match shale_server::interchange::import::import_rdb(&path, &config) {
            Ok(done) => {
                println!(
                    "imported {} keys ({} expired, {} skipped) from {} in {:.1} s",
                    done.keys,
                    done.expired,
                    done.skipped,
                    path.display(),
                    done.seconds
                );
                return;
            }
            Err(err) => fail(&err),
        },
        Task::Export(path) => match shale_server::interchange::export::export_rdb(&config, &path) {
            Ok(done) => {
                println!(
                    "exported {} keys ({} Roaring bitmaps left out) to {} in {:.1} s",
                    done.keys,
                    done.skipped,
                    path.display(),
                    done.seconds
                );
                return;
            }
            Err(err) => fail(&err),
        },
        Task::Repair => {
            let path = shale_server::datadir::DataDir::new(&config.dir).current();
            match shale_storage::RocksEngine::repair(&path, &config.rocks) {
                Ok(salvage_failed) => {
                    if let Some(err) = salvage_failed {
                        eprintln!(
                            "the WAL could not be replayed before the repair ({err}): RocksDB's repair replayed it, into the column families it found table files of"
                        );
                    }
                    println!(
                        "repaired {}; table files that could not be read whole are in {}",
                        path.display(),
                        path.join("lost").display()
                    );
                    return;
                }
                Err(err) => fail(&format!("can't repair {}: {err}", path.display())),
            }
        }
    };
    if let Some(path) = import {
        if let Err(err) = shale_server::interchange::import::import_rdb(&path, &config) {
            fail(&err);
        }
    }
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

fn fail(err: &str) -> ! {
    eprintln!("shale-server: {err}");
    std::process::exit(1);
}
