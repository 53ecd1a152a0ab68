//! `--engine DIR`: the same requests run on Shale's storage engine itself (RocksDB with
//! Shale's options, `RocksEngine`), without a server in between: the engine's own limit for
//! a load, which a server's figures are divided by. An MSET writes each key's metadata record
//! as Shale stores a string, all of them in one batch, handed to the OS as Shale's
//! `appendfsync everysec` does; an MGET reads the records with one MultiGet. What Shale does
//! around them (reading each key's old record before a write, counters, the protocol) is the
//! server's cost, left out here.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use shale_protocol::{RequestLimits, RequestParser};
use shale_storage::keys::meta_key;
use shale_storage::metadata::Metadata;
use shale_storage::{Cf, Engine, MemoryBudget, RocksConfig, RocksEngine, WriteBatch};

pub struct EngineTarget {
    engine: RocksEngine,
}

impl EngineTarget {
    /// Sized as a server started alike would be: by the memory the process may use.
    pub fn open(dir: &Path) -> Result<EngineTarget, String> {
        let config = RocksConfig::sized(MemoryBudget::resolve(0).split());
        let engine = RocksEngine::open(dir, &config)
            .map_err(|e| format!("can't open the engine in {}: {e}", dir.display()))?;
        Ok(EngineTarget { engine })
    }

    /// Runs the requests encoded in `requests` (RESP, as they would be sent), in order.
    /// Returns how many of them are neither MSET nor MGET, which count as errors.
    pub fn run(&self, requests: &[u8]) -> Result<u64, String> {
        let mut buf = BytesMut::from(requests);
        let mut parser = RequestParser::default();
        let limits = RequestLimits::default();
        let mut unsupported = 0;
        while let Some(args) = parser
            .parse(&mut buf, &limits)
            .map_err(|e| format!("{e:?}"))?
        {
            let name = args.first().map(|a| a.to_ascii_uppercase());
            match name.as_deref() {
                Some(b"MSET") => self.mset(&args[1..])?,
                Some(b"MGET") => self.mget(&args[1..])?,
                _ => unsupported += 1,
            }
        }
        Ok(unsupported)
    }

    /// Waits, up to `limit`, until no flush or compaction runs or is due: what a load left
    /// is not the next run's (the server's runs wait alike).
    pub fn settle(&self, limit: Duration) {
        let started = Instant::now();
        while started.elapsed() < limit {
            let stats = self.engine.stats();
            if stats.running_compactions + stats.running_flushes + stats.pending_compaction_bytes
                == 0
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn mset(&self, pairs: &[Bytes]) -> Result<(), String> {
        let mut batch = WriteBatch::default();
        for pair in pairs.chunks_exact(2) {
            let record = Metadata::string(pair[1].clone(), 0).encode();
            batch.put(Cf::Meta, meta_key(0, &pair[0]), record);
        }
        self.engine.write(batch).map_err(|e| e.to_string())?;
        self.engine.flush_wal().map_err(|e| e.to_string())
    }

    fn mget(&self, keys: &[Bytes]) -> Result<(), String> {
        let raw: Vec<Vec<u8>> = keys.iter().map(|k| meta_key(0, k)).collect();
        self.engine
            .multi_get(Cf::Meta, &raw)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}
