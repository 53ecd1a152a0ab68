//! The command line.

use shale_storage::compaction::PathMap;

pub const USAGE: &str =
    "Usage: shale-compactor [--port 6390] [--bind 127.0.0.1] [--jobs N] [--path-map FROM=TO ...]

  --port      the HTTP port nodes send jobs to (6390)
  --bind      the address to listen on (127.0.0.1)
  --jobs      jobs run at once, each on one thread; as many more wait, and more than that
              are refused (503) so their nodes try another worker (the number of cores)
  --path-map  FROM=TO: a node's path prefix FROM is TO here (shared storage mounted
              elsewhere); may be given more than once

Nodes name it in `compaction-workers`, e.g. `compaction-workers http://10.0.0.7:6390`.";

pub struct Args {
    pub port: u16,
    pub bind: String,
    pub jobs: usize,
    pub path_maps: Vec<PathMap>,
}

pub enum Exit {
    Help,
    Error(String),
}

impl Args {
    pub fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, Exit> {
        let mut parsed = Args {
            port: 6390,
            bind: "127.0.0.1".into(),
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            path_maps: Vec::new(),
        };
        while let Some(arg) = args.next() {
            if arg == "--help" || arg == "-h" {
                return Err(Exit::Help);
            }
            let value = args
                .next()
                .ok_or_else(|| Exit::Error(format!("{arg} needs a value")))?;
            let invalid = |what: &str| Exit::Error(format!("{arg} {value}: {what}"));
            match arg.as_str() {
                "--port" => parsed.port = value.parse().map_err(|_| invalid("not a port"))?,
                "--bind" => parsed.bind = value,
                "--jobs" => {
                    parsed.jobs = value
                        .parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| invalid("not a positive number"))?
                }
                "--path-map" => parsed
                    .path_maps
                    .push(value.parse().map_err(|e: String| invalid(&e))?),
                _ => return Err(Exit::Error(format!("unknown option {arg}"))),
            }
        }
        Ok(parsed)
    }
}
