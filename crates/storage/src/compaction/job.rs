//! What a node sends a worker and what the worker answers: JSON over HTTP (`POST /compact`).
//! RocksDB's own serialized input and result travel inside it as base64, untouched.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::rocks::RocksConfig;

/// One compaction for a worker to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRequest {
    /// The node's database directory, as the node sees it.
    pub db: String,
    /// The empty directory the worker writes the output files to, beside the database's
    /// files (the node renames them into the database).
    pub output: String,
    /// The column family compacted, which decides its merge operator and compaction filter.
    pub family: String,
    pub settings: FamilySettings,
    /// RocksDB's `CompactionServiceInput`, base64.
    pub input: String,
}

/// The worker's answer to a job it ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobReply {
    /// RocksDB's `CompactionServiceResult`, base64.
    pub result: String,
}

/// The node's settings that a family's table files depend on and that RocksDB's OPTIONS file
/// cannot carry to the worker (the table factory is replaced on the worker, and the
/// compaction filter depends on whether values go to blob files).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FamilySettings {
    pub block_size: usize,
    pub bloom_bits_per_key: f64,
    pub min_blob_size: u64,
}

impl FamilySettings {
    pub fn of(config: &RocksConfig) -> FamilySettings {
        FamilySettings {
            block_size: config.block_size,
            bloom_bits_per_key: config.bloom_bits_per_key,
            min_blob_size: config.min_blob_size,
        }
    }

    pub(crate) fn config(&self) -> RocksConfig {
        RocksConfig {
            block_size: self.block_size,
            bloom_bits_per_key: self.bloom_bits_per_key,
            min_blob_size: self.min_blob_size,
            ..RocksConfig::default()
        }
    }
}

pub(crate) fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}
