//! Streams: entries keyed by ID, so ranges and reads are scans of one prefix; the nodes Redis
//! would keep them in, consumer groups, their consumers and their pending entries are records
//! beside them (`stored`, `nodes`), so no part of a stream is held in memory. Semantics follow
//! Redis 7.0's `t_stream.c`.

mod groups;
pub mod id;
mod nodes;
mod serialized;
mod stored;

use bytes::Bytes;
use shale_rdb::stream::{append_entry, NodeLimits};
use shale_storage::metadata::KeyKind;
use shale_storage::{Cf, ScanDirection};

use super::collection::{Collection, CollectionWrite};
use crate::error::Error;
use crate::keyspace::{now_ms, Db};
pub use groups::{
    key_required, no_such_group, no_such_key_or_group, ClaimOptions, Claimed, ConsumerInfo,
    GroupInfo, GroupStart, PendingEntry, PendingFilter, PendingSummary, ReadGroupStart, StreamInfo,
    StreamInfoFull,
};
use id::StreamId;
pub use stored::Fields;
use stored::{decode_entry, encode_entry, encode_node, entry_sub, node_sub, Nodes, StreamMeta};

/// An entry: its ID and its field-value pairs.
pub type Entry = (StreamId, Fields);

/// How XADD and XTRIM trim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimTo {
    MaxLen(u64),
    MinId(StreamId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    pub to: TrimTo,
    /// `~`: whole nodes only.
    pub approx: bool,
    /// Entries removed at most, counted by whole nodes (0: no limit).
    pub limit: u64,
}

/// XADD's ID argument: `*`, or `ms-*`, or explicit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddId {
    Auto,
    SequenceOf(u64),
    Explicit(StreamId),
}

/// What XADD did.
pub struct Added {
    pub id: StreamId,
    /// Entries the trim removed.
    pub trimmed: u64,
}

/// A stream opened for a write: its collection write and its own metadata.
pub(super) struct StreamWrite<'a> {
    pub write: CollectionWrite<'a>,
    pub meta: StreamMeta,
}

impl<'a> StreamWrite<'a> {
    fn commit(mut self) -> Result<(), Error> {
        self.write.extra = self.meta.encode();
        self.write.commit()
    }
}

impl<'a> Db<'a> {
    fn stream_of(&self, key: &[u8]) -> Result<Option<(Collection, StreamMeta)>, Error> {
        Ok(self.collection(key, KeyKind::Stream)?.map(|c| {
            let meta = StreamMeta::decode(&c.extra);
            (c, meta)
        }))
    }

    /// Opens the stream at `key` for a write (the caller holds its lock); `None` if there is
    /// none, unless `create`.
    fn open_stream(&self, key: &'a [u8], create: bool) -> Result<Option<StreamWrite<'a>>, Error> {
        let write = self.open_for_write(key, KeyKind::Stream)?;
        if !write.existed && !create {
            return Ok(None);
        }
        let meta = StreamMeta::decode(&write.extra);
        Ok(Some(StreamWrite { write, meta }))
    }

    /// Visits the entries from `from` to `to` (inclusive) in ID order, or reversed, until
    /// `visit` returns false.
    fn scan_entries(
        &self,
        key: &[u8],
        stream: &Collection,
        (from, to): (StreamId, StreamId),
        rev: bool,
        visit: &mut dyn FnMut(StreamId, &[u8]) -> bool,
    ) -> Result<(), Error> {
        if from > to {
            return Ok(());
        }
        let lower = entry_sub(from);
        let upper = [entry_sub(to).as_slice(), &[0]].concat();
        let direction = if rev {
            ScanDirection::Reverse
        } else {
            ScanDirection::Forward
        };
        self.scan_elements(
            Cf::Data,
            key,
            stream,
            (&lower, Some(&upper)),
            direction,
            &mut |sub, value| match sub.get(1..).and_then(StreamId::from_bytes) {
                Some(id) => visit(id, value),
                None => true,
            },
        )
    }

    /// Up to `count` entries (0: all) from `from` to `to`.
    fn entries(
        &self,
        key: &[u8],
        stream: &Collection,
        range: (StreamId, StreamId),
        count: usize,
        rev: bool,
    ) -> Result<Vec<Entry>, Error> {
        let mut out = Vec::new();
        let mut damaged = false;
        self.scan_entries(key, stream, range, rev, &mut |id, value| {
            match decode_entry(value) {
                Some(fields) => out.push((id, fields)),
                None => damaged = true,
            }
            !damaged && (count == 0 || out.len() < count)
        })?;
        if damaged {
            return Err(corrupt());
        }
        Ok(out)
    }

    /// The first (or last) entry's ID.
    fn edge_id(
        &self,
        key: &[u8],
        stream: &Collection,
        last: bool,
    ) -> Result<Option<StreamId>, Error> {
        let mut edge = None;
        self.scan_entries(
            key,
            stream,
            (StreamId::MIN, StreamId::MAX),
            last,
            &mut |id, _| {
                edge = Some(id);
                false
            },
        )?;
        Ok(edge)
    }

    /// XADD: `None` if there is no stream and NOMKSTREAM said not to make one. The entry goes
    /// to the last node or, if that is full by `limits`, to a new one.
    pub fn xadd(
        &self,
        key: &'a [u8],
        id: AddId,
        no_create: bool,
        trim: Option<Trim>,
        fields: &[(Bytes, Bytes)],
        limits: NodeLimits,
    ) -> Result<Option<Added>, Error> {
        let _guard = self.lock(&[key])?;
        let Some(mut stream) = self.open_stream_nodes(key, !no_create)? else {
            return Ok(None);
        };
        let last = stream.meta.last_id;
        if last == StreamId::MAX {
            return Err(Error::msg(
                "The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        let too_small = || {
            Error::msg(
                "The ID specified in XADD is equal or smaller than the target stream top item",
            )
        };
        let new_id = match id {
            AddId::Explicit(id) => id,
            AddId::SequenceOf(ms) if ms == last.ms => {
                if last.seq == u64::MAX {
                    return Err(too_small());
                }
                StreamId::new(ms, last.seq + 1)
            }
            AddId::SequenceOf(ms) => StreamId::new(ms, 0),
            AddId::Auto => {
                let now = now_ms();
                if now > last.ms {
                    StreamId::new(now, 0)
                } else {
                    last.next().ok_or_else(too_small)?
                }
            }
        };
        if new_id <= last {
            return Err(too_small());
        }
        let (node, _) = append_entry(self.tail_node(&stream)?, limits, new_id.into(), fields);
        let mut tail = Some(node);
        stream.write.size += 1;
        stream.meta.last_id = new_id;
        stream.meta.entries_added = stream.meta.entries_added.wrapping_add(1);
        if stream.meta.first_id.is_zero() || stream.write.size == 1 {
            stream.meta.first_id = new_id;
        }
        let trimmed = match trim {
            Some(trim) => self.trim_nodes(key, &mut stream, trim, &mut tail)?,
            None => 0,
        };
        // Written after the trim's range deletes, unless the trim took the entry's node.
        if let Some(node) = tail {
            let master = StreamId::from(node.master);
            stream
                .write
                .put(Cf::Data, &entry_sub(new_id), encode_entry(fields));
            stream
                .write
                .put(Cf::Data, &node_sub(master), encode_node(&node));
            stream.meta.nodes = Nodes::Recorded { tail: Some(master) };
        }
        stream.commit()?;
        Ok(Some(Added {
            id: new_id,
            trimmed,
        }))
    }

    /// XTRIM: the entries removed; 0 if there is no stream.
    pub fn xtrim(&self, key: &'a [u8], trim: Trim) -> Result<u64, Error> {
        let _guard = self.lock(&[key])?;
        let Some(mut stream) = self.open_stream_nodes(key, false)? else {
            return Ok(0);
        };
        let removed = self.trim_nodes(key, &mut stream, trim, &mut None)?;
        // Nodes left without live entries may go though no entry does.
        if !stream.write.change.batch.is_empty() {
            stream.commit()?;
        }
        Ok(removed)
    }

    /// XRANGE and XREVRANGE: up to `count` entries (0: all) from `start` to `end`.
    pub fn xrange(
        &self,
        key: &[u8],
        start: StreamId,
        end: StreamId,
        count: usize,
        rev: bool,
    ) -> Result<Vec<Entry>, Error> {
        let Some((stream, _)) = self.stream_of(key)? else {
            return Ok(Vec::new());
        };
        self.entries(key, &stream, (start, end), count, rev)
    }

    /// Whether `key` is a stream; `WRONGTYPE` if it is something else.
    pub fn exists_stream(&self, key: &[u8]) -> Result<bool, Error> {
        Ok(self.stream_of(key)?.is_some())
    }

    /// `WRONGTYPE` unless `key` is a stream or missing.
    pub fn check_stream_type(&self, key: &[u8]) -> Result<(), Error> {
        self.exists_stream(key).map(|_| ())
    }

    /// Every entry in ID order, one at a time (DEBUG DIGEST).
    pub(crate) fn visit_stream(
        &self,
        key: &[u8],
        visit: &mut dyn FnMut(StreamId, &Fields),
    ) -> Result<(), Error> {
        let Some((stream, _)) = self.stream_of(key)? else {
            return Ok(());
        };
        let mut damaged = false;
        self.scan_entries(
            key,
            &stream,
            (StreamId::MIN, StreamId::MAX),
            false,
            &mut |id, raw| {
                match decode_entry(raw) {
                    Some(fields) => visit(id, &fields),
                    None => damaged = true,
                }
                !damaged
            },
        )?;
        if damaged {
            return Err(corrupt());
        }
        Ok(())
    }

    pub fn xlen(&self, key: &[u8]) -> Result<i64, Error> {
        Ok(self.stream_of(key)?.map_or(0, |(s, _)| s.size as i64))
    }

    /// The ID of the newest entry ever added (`$`), 0-0 if there is no stream.
    pub fn stream_last_id(&self, key: &[u8]) -> Result<StreamId, Error> {
        Ok(self
            .stream_of(key)?
            .map_or(StreamId::MIN, |(_, meta)| meta.last_id))
    }

    /// XREAD of one stream: up to `count` entries (0: all) after `after`; `None` if there is
    /// no stream or nothing after it.
    pub fn xread(
        &self,
        key: &[u8],
        after: StreamId,
        count: usize,
    ) -> Result<Option<Vec<Entry>>, Error> {
        let Some((stream, _)) = self.stream_of(key)? else {
            return Ok(None);
        };
        let Some(start) = after.next() else {
            return Ok(None);
        };
        let entries = self.entries(key, &stream, (start, StreamId::MAX), count, false)?;
        Ok((!entries.is_empty()).then_some(entries))
    }

    /// XDEL: how many of `ids` were entries.
    pub fn xdel(&self, key: &'a [u8], ids: &[StreamId]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let Some(mut stream) = self.open_stream_nodes(key, false)? else {
            return Ok(0);
        };
        let collection = stream.write.collection();
        let mut nodes = nodes::NodeEdits::new();
        let mut deleted = 0;
        let mut first_deleted = false;
        let mut seen = std::collections::HashSet::new();
        for &id in ids {
            if !seen.insert(id) || stream.write.get(Cf::Data, &entry_sub(id))?.is_none() {
                continue;
            }
            stream.write.delete(Cf::Data, &entry_sub(id));
            self.delete_in_node(key, &collection, &mut nodes, id)?;
            stream.write.size = stream.write.size.saturating_sub(1);
            first_deleted |= id == stream.meta.first_id;
            stream.meta.max_deleted = stream.meta.max_deleted.max(id);
            deleted += 1;
        }
        if deleted == 0 {
            return Ok(0);
        }
        self.stage_node_edits(key, &mut stream, &nodes)?;
        if stream.write.size == 0 {
            stream.meta.first_id = StreamId::MIN;
        } else if first_deleted {
            let mut first = StreamId::MIN;
            self.scan_entries(
                key,
                &collection,
                (StreamId::MIN, StreamId::MAX),
                false,
                &mut |id, _| {
                    if seen.contains(&id) {
                        return true;
                    }
                    first = id;
                    false
                },
            )?;
            stream.meta.first_id = first;
        }
        stream.commit()?;
        Ok(deleted)
    }

    /// XSETID: sets the last ID, and optionally the entries-added counter and the greatest
    /// deleted ID (`None`: keep).
    pub fn xsetid(
        &self,
        key: &'a [u8],
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let Some(mut stream) = self.open_stream(key, false)? else {
            return Err(Error::NoSuchKey);
        };
        if stream.write.size > 0 {
            let collection = stream.write.collection();
            let top = self.edge_id(key, &collection, true)?.unwrap_or_default();
            if last_id < top {
                return Err(Error::msg(
                    "The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if entries_added.is_some_and(|added| stream.write.size > added) {
                return Err(Error::msg(
                    "The entries_added specified in XSETID is smaller than the target stream length",
                ));
            }
        }
        stream.meta.last_id = last_id;
        if let Some(added) = entries_added {
            stream.meta.entries_added = added;
        }
        if let Some(id) = max_deleted.filter(|id| !id.is_zero()) {
            stream.meta.max_deleted = id;
        }
        stream.commit()
    }
}

fn corrupt() -> Error {
    Error::Storage(shale_storage::StorageError::Corrupt("stream entry"))
}
