//! `shale-bench`: a load generator for any Redis-compatible server, with the options of
//! Tair's Go load tool and the output redis-benchmark users expect.
//!
//! Layout: `options` parses the command line, `template` renders each request with fresh
//! `__RAND__` values and `payload` supplies the `__VALUE__` bytes, `runner` drives the
//! connections and `reply` finds reply boundaries, `report` prints throughput and latency;
//! `engine` runs the requests on Shale's storage engine instead of a server.

mod engine;
mod options;
mod payload;
mod reply;
mod report;
mod runner;
mod template;

use std::io::IsTerminal;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help") {
        println!("{}", options::USAGE);
        return;
    }
    let options = match options::parse(&args) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("shale-bench: {err}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("shale-bench: {err}");
            std::process::exit(1);
        }
    };
    let (json, quiet) = (options.json, options.quiet);
    let terminal = std::io::stderr().is_terminal();
    let result = runtime.block_on(runner::run(options, move |line| {
        if quiet {
            return;
        }
        if terminal {
            eprint!("\r{line}");
        } else {
            eprintln!("{line}");
        }
    }));
    if terminal && !quiet {
        eprintln!();
    }
    match result {
        Ok(report) if json => println!("{}", report.json()),
        Ok(report) => print!("{}", report.text()),
        Err(err) => {
            eprintln!("shale-bench: {err}");
            std::process::exit(1);
        }
    }
}
