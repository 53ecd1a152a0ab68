//! The records a run of pipelined reads will ask for, read in one batch per family before the
//! first of them runs (see [`ReadAhead`]).

use shale_storage::keys as k;
use shale_storage::metadata::{is_fragmented_string, KeyKind, Metadata};
use shale_storage::{Cf, ReadAhead};

use super::collection::Collection;
use crate::error::Error;
use crate::keyspace::{now_ms, Db};

/// What one command of the run reads.
pub enum PlannedRead<'k> {
    /// A string's value (GET).
    String { key: &'k [u8] },
    /// One field of a hash (HGET).
    HashField { key: &'k [u8], field: &'k [u8] },
}

impl PlannedRead<'_> {
    fn key(&self) -> &[u8] {
        match self {
            PlannedRead::String { key } | PlannedRead::HashField { key, .. } => key,
        }
    }
}

impl Db<'_> {
    /// Reads what `reads` will ask for into `ahead`: every key's metadata in one batch, then
    /// the element records of the hash fields that live in records (not packed) in another.
    /// A string kept in fragments is not read ahead: its fragments are read when its GET runs,
    /// which may be after the connection waited to send earlier replies.
    pub fn read_ahead(&self, ahead: &ReadAhead, reads: &[PlannedRead]) -> Result<(), Error> {
        let metas = reads
            .iter()
            .map(|r| k::meta_key(self.index, r.key()))
            .collect();
        let now = now_ms();
        let mut fields = Vec::new();
        ahead.read(Cf::Meta, metas, |i, raw| {
            let Some(raw) = raw else {
                return true;
            };
            let PlannedRead::HashField { key, field } = &reads[i] else {
                // A string in fragments is left to its GET, which reads the metadata with the
                // fragments, so that it never pairs this length with later bytes.
                return !is_fragmented_string(raw);
            };
            let Ok(meta) = Metadata::decode(raw.to_vec()) else {
                return true;
            };
            if meta.kind != KeyKind::Hash || meta.is_expired(now) {
                return true;
            }
            if let Some(Collection {
                version,
                packed: None,
                ..
            }) = Collection::of(meta)
            {
                fields.push(k::element_key(self.index, key, version, field));
            }
            true
        })?;
        if !fields.is_empty() {
            ahead.read(Cf::Data, fields, |_, _| true)?;
        }
        // The run's access times, all at once so that their cache misses overlap: each
        // command's own touch then finds its slot as it is (GET `-P 16`: a twentieth of the
        // server's CPU waited on those misses one command at a time).
        let keys: Vec<&[u8]> = reads.iter().map(PlannedRead::key).collect();
        self.ks.access.touch(self.index, &keys);
        Ok(())
    }
}
