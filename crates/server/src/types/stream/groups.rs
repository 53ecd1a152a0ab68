//! Consumer groups: each group, consumer and pending entry is a record (`stored`), so a group
//! with a million pending entries costs no memory until a command walks them. Semantics,
//! counters and the lag follow Redis 7.0's `t_stream.c`.

use std::collections::BTreeMap;

use bytes::Bytes;
use shale_storage::{Cf, ScanDirection};

use super::id::StreamId;
use super::stored::{
    consumer_pending_prefix, consumer_pending_sub, consumer_sub, consumers_prefix, decode_entry,
    entry_sub, group_sub, pending_prefix, pending_sub, prefix_end, ConsumerRecord, GroupRecord,
    PendingRecord, StreamMeta, GROUP, UNKNOWN_READS,
};
use super::{corrupt, Entry, StreamWrite};
use crate::error::Error;
use crate::keyspace::{now_ms, Db};
use crate::types::collection::Collection;

/// Where XGROUP CREATE and SETID put a group: `$` or an ID.
#[derive(Debug, Clone, Copy)]
pub enum GroupStart {
    Last,
    Id(StreamId),
}

/// XREADGROUP's ID: `>` (entries never delivered) or the consumer's history after an ID.
#[derive(Debug, Clone, Copy)]
pub enum ReadGroupStart {
    New,
    History(StreamId),
}

/// XPENDING's summary.
pub struct PendingSummary {
    pub count: u64,
    pub range: Option<PendingRange>,
}

/// The lowest and highest pending IDs, and each consumer with pending entries.
pub type PendingRange = (StreamId, StreamId, Vec<(Bytes, u64)>);

/// A consumer with its pending entries: ID, delivery time, deliveries.
pub type ConsumerDetail = (ConsumerInfo, Vec<(StreamId, u64, u64)>);

/// A group with its pending entries (and their delivery times) and its consumers.
pub type GroupDetail = (GroupInfo, Vec<(PendingEntry, u64)>, Vec<ConsumerDetail>);

pub struct PendingFilter<'f> {
    pub start: StreamId,
    pub end: StreamId,
    pub count: u64,
    pub min_idle: i64,
    pub consumer: Option<&'f [u8]>,
}

/// One line of XPENDING's extended form.
pub struct PendingEntry {
    pub id: StreamId,
    pub consumer: Bytes,
    pub idle: i64,
    pub deliveries: u64,
}

pub struct ClaimOptions {
    pub min_idle: i64,
    /// The delivery time to set (IDLE or TIME), Unix ms.
    pub delivered_ms: Option<i64>,
    pub retry_count: Option<i64>,
    pub force: bool,
    pub just_id: bool,
    pub last_id: StreamId,
}

/// What a claim returns: the entries (or only their IDs), and whether it created the consumer.
pub struct Claimed {
    pub entries: Vec<Entry>,
    pub ids: Vec<StreamId>,
    pub created_consumer: bool,
    /// XAUTOCLAIM: where the next call starts, and the pending IDs whose entries were gone.
    pub next: StreamId,
    pub deleted: Vec<StreamId>,
}

pub struct GroupInfo {
    pub name: Bytes,
    pub consumers: u64,
    pub pending: u64,
    pub last_delivered: StreamId,
    pub entries_read: Option<i64>,
    pub lag: Option<i64>,
}

pub struct ConsumerInfo {
    pub name: Bytes,
    pub pending: u64,
    pub idle: i64,
    pub seen_ms: u64,
}

pub struct StreamInfo {
    pub length: u64,
    /// The nodes, and the nodes of Redis's radix tree over them.
    pub radix_keys: u64,
    pub radix_nodes: u64,
    pub last_generated: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub recorded_first: StreamId,
    pub groups: u64,
    pub first: Option<Entry>,
    pub last: Option<Entry>,
}

/// XINFO STREAM FULL: the entries and each group with its pending entries and consumers.
pub struct StreamInfoFull {
    pub info: StreamInfo,
    pub entries: Vec<Entry>,
    pub groups: Vec<GroupDetail>,
}

/// The outcome of XREADGROUP on one stream: `None` when nothing was there for `>` (a
/// blocking read waits then), else the entries, `None` fields for history entries deleted
/// since.
pub struct ReadGroup {
    pub entries: Option<Vec<(StreamId, Option<super::Fields>)>>,
    pub created_consumer: bool,
}

pub fn no_such_group(key: &[u8], group: &[u8]) -> Error {
    Error::NoGroup(format!(
        "No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

/// XGROUP's error for a missing key.
pub fn key_required() -> Error {
    Error::msg("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
}

/// The error XPENDING, XCLAIM and XAUTOCLAIM give when the key or the group is missing.
pub fn no_such_key_or_group(key: &[u8], group: &[u8]) -> Error {
    Error::NoGroup(format!(
        "No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// Redis's `streamRangeHasTombstones` from `start` to the end.
fn has_tombstones_after(meta: &StreamMeta, length: u64, start: StreamId) -> bool {
    if length == 0 || meta.max_deleted.is_zero() || meta.first_id > meta.max_deleted {
        return false;
    }
    start <= meta.max_deleted
}

/// Redis's `streamEstimateDistanceFromFirstEverEntry`.
fn estimate_reads(meta: &StreamMeta, length: u64, id: StreamId) -> i64 {
    if meta.entries_added == 0 {
        return 0;
    }
    if length == 0 && id <= meta.last_id {
        return meta.entries_added as i64;
    }
    if id == meta.last_id {
        return meta.entries_added as i64;
    } else if id > meta.last_id {
        return UNKNOWN_READS;
    }
    if meta.max_deleted.is_zero() || meta.max_deleted < meta.first_id {
        if id < meta.first_id {
            return meta.entries_added.wrapping_sub(length) as i64;
        } else if id == meta.first_id {
            return meta.entries_added.wrapping_sub(length).wrapping_add(1) as i64;
        }
    }
    UNKNOWN_READS
}

/// Redis's `streamReplyWithCGLag`: `None` when it cannot be known.
fn lag(meta: &StreamMeta, length: u64, group: &GroupRecord) -> Option<i64> {
    if meta.entries_added == 0 {
        return Some(0);
    }
    if group.entries_read != UNKNOWN_READS && !has_tombstones_after(meta, length, group.last_id) {
        return Some((meta.entries_added as i64).wrapping_sub(group.entries_read));
    }
    let reads = estimate_reads(meta, length, group.last_id);
    (reads != UNKNOWN_READS).then(|| (meta.entries_added as i64).wrapping_sub(reads))
}

/// A group's changes staged by one command: its record, and its consumers' records as they
/// become (`None`: deleted), written once at the end.
struct GroupEdit {
    name: Bytes,
    record: GroupRecord,
    consumers: BTreeMap<Bytes, Option<ConsumerRecord>>,
}

impl<'a> Db<'a> {
    fn group_record(
        &self,
        key: &[u8],
        stream: &Collection,
        group: &[u8],
    ) -> Result<Option<GroupRecord>, Error> {
        match self.get_element(Cf::Data, key, stream, &group_sub(group))? {
            Some(raw) => Ok(Some(GroupRecord::decode(&raw).ok_or_else(corrupt)?)),
            None => Ok(None),
        }
    }

    /// Opens `key` and its group `group` for a write; `no_group` makes the error for a
    /// missing key or group.
    fn open_group(
        &self,
        key: &'a [u8],
        group: &[u8],
        no_group: impl Fn() -> Error,
    ) -> Result<(StreamWrite<'a>, GroupEdit), Error> {
        self.open_group_or(key, group, &no_group, &no_group)
    }

    /// [`Db::open_group`] with an error of its own for a missing key.
    fn open_group_or(
        &self,
        key: &'a [u8],
        group: &[u8],
        no_key: &dyn Fn() -> Error,
        no_group: &dyn Fn() -> Error,
    ) -> Result<(StreamWrite<'a>, GroupEdit), Error> {
        let stream = self.open_stream(key, false)?.ok_or_else(no_key)?;
        let record = match stream.write.get(Cf::Data, &group_sub(group))? {
            Some(raw) => GroupRecord::decode(&raw).ok_or_else(corrupt)?,
            None => return Err(no_group()),
        };
        let edit = GroupEdit {
            name: Bytes::copy_from_slice(group),
            record,
            consumers: BTreeMap::new(),
        };
        Ok((stream, edit))
    }

    /// The consumer's record as this command sees it: staged, or stored.
    fn consumer_in(
        &self,
        stream: &StreamWrite<'_>,
        edit: &mut GroupEdit,
        consumer: &[u8],
    ) -> Result<Option<ConsumerRecord>, Error> {
        if let Some(staged) = edit.consumers.get(consumer) {
            return Ok(*staged);
        }
        let stored = match stream
            .write
            .get(Cf::Data, &consumer_sub(&edit.name, consumer))?
        {
            Some(raw) => Some(ConsumerRecord::decode(&raw).ok_or_else(corrupt)?),
            None => None,
        };
        edit.consumers
            .insert(Bytes::copy_from_slice(consumer), stored);
        Ok(stored)
    }

    /// Looks the consumer up, refreshing its seen time, or creates it (`true` if it did).
    fn touch_consumer(
        &self,
        stream: &StreamWrite<'_>,
        edit: &mut GroupEdit,
        consumer: &[u8],
        now: u64,
    ) -> Result<bool, Error> {
        let found = self.consumer_in(stream, edit, consumer)?;
        let record = ConsumerRecord {
            seen_ms: now,
            pending: found.map_or(0, |c| c.pending),
        };
        edit.consumers
            .insert(Bytes::copy_from_slice(consumer), Some(record));
        Ok(found.is_none())
    }

    fn adjust_pending(
        &self,
        stream: &StreamWrite<'_>,
        edit: &mut GroupEdit,
        consumer: &[u8],
        delta: i64,
    ) -> Result<(), Error> {
        let found = self.consumer_in(stream, edit, consumer)?;
        if let Some(mut record) = found {
            record.pending = record.pending.saturating_add_signed(delta);
            edit.consumers
                .insert(Bytes::copy_from_slice(consumer), Some(record));
        }
        Ok(())
    }

    fn finish_group(&self, mut stream: StreamWrite<'a>, edit: GroupEdit) -> Result<(), Error> {
        stream
            .write
            .put(Cf::Data, &group_sub(&edit.name), edit.record.encode());
        for (consumer, record) in &edit.consumers {
            let sub = consumer_sub(&edit.name, consumer);
            match record {
                Some(record) => stream.write.put(Cf::Data, &sub, record.encode()),
                None => stream.write.delete(Cf::Data, &sub),
            }
        }
        stream.commit()
    }

    /// The pending records of `group` from `start` to `end`, until `visit` returns false.
    pub(super) fn scan_pending(
        &self,
        key: &[u8],
        stream: &Collection,
        group: &[u8],
        (start, end): (StreamId, StreamId),
        visit: &mut dyn FnMut(StreamId, PendingRecord) -> bool,
    ) -> Result<(), Error> {
        let lower = pending_sub(group, start);
        let upper = [pending_sub(group, end).as_slice(), &[0]].concat();
        let prefix_len = pending_prefix(group).len();
        let mut damaged = false;
        self.scan_elements(
            Cf::Data,
            key,
            stream,
            (&lower, Some(&upper)),
            ScanDirection::Forward,
            &mut |sub, value| {
                let id = sub.get(prefix_len..).and_then(StreamId::from_bytes);
                match (id, PendingRecord::decode(value)) {
                    (Some(id), Some(record)) => visit(id, record),
                    _ => {
                        damaged = true;
                        false
                    }
                }
            },
        )?;
        if damaged {
            return Err(corrupt());
        }
        Ok(())
    }

    /// The IDs `consumer` of `group` has pending from `start` to `end`, at most `limit` of
    /// them (0: all), in ID order.
    fn consumer_pending_ids(
        &self,
        key: &[u8],
        stream: &Collection,
        group: &[u8],
        consumer: &[u8],
        (start, end): (StreamId, StreamId),
        limit: usize,
    ) -> Result<Vec<StreamId>, Error> {
        let prefix = consumer_pending_prefix(group, consumer);
        let lower = [prefix.as_slice(), &start.to_bytes()].concat();
        let upper = [prefix.as_slice(), &end.to_bytes(), &[0]].concat();
        let mut ids = Vec::new();
        self.scan_elements(
            Cf::Data,
            key,
            stream,
            (&lower, Some(&upper)),
            ScanDirection::Forward,
            &mut |sub, _| {
                if let Some(id) = sub.get(prefix.len()..).and_then(StreamId::from_bytes) {
                    ids.push(id);
                }
                limit == 0 || ids.len() < limit
            },
        )?;
        Ok(ids)
    }

    /// Records `id` as delivered to `consumer` now, moving it from its previous owner.
    fn deliver(
        &self,
        stream: &mut StreamWrite<'_>,
        edit: &mut GroupEdit,
        id: StreamId,
        previous: Option<&PendingRecord>,
        record: PendingRecord,
    ) -> Result<(), Error> {
        let group = edit.name.clone();
        match previous {
            Some(old) if old.consumer != record.consumer => {
                stream
                    .write
                    .delete(Cf::Data, &consumer_pending_sub(&group, &old.consumer, id));
                self.adjust_pending(stream, edit, &old.consumer, -1)?;
                self.adjust_pending(stream, edit, &record.consumer, 1)?;
            }
            Some(_) => {}
            None => {
                edit.record.pending = edit.record.pending.saturating_add(1);
                self.adjust_pending(stream, edit, &record.consumer, 1)?;
            }
        }
        stream.write.put(
            Cf::Data,
            &consumer_pending_sub(&group, &record.consumer, id),
            Vec::new(),
        );
        stream
            .write
            .put(Cf::Data, &pending_sub(&group, id), record.encode());
        Ok(())
    }

    /// Removes `id` from the pending lists.
    fn forget_pending(
        &self,
        stream: &mut StreamWrite<'_>,
        edit: &mut GroupEdit,
        id: StreamId,
        record: &PendingRecord,
    ) -> Result<(), Error> {
        let group = edit.name.clone();
        stream.write.delete(Cf::Data, &pending_sub(&group, id));
        stream.write.delete(
            Cf::Data,
            &consumer_pending_sub(&group, &record.consumer, id),
        );
        edit.record.pending = edit.record.pending.saturating_sub(1);
        self.adjust_pending(stream, edit, &record.consumer, -1)
    }

    fn entry_fields(
        &self,
        key: &[u8],
        stream: &Collection,
        id: StreamId,
    ) -> Result<Option<super::Fields>, Error> {
        match self.get_element(Cf::Data, key, stream, &entry_sub(id))? {
            Some(raw) => Ok(Some(decode_entry(&raw).ok_or_else(corrupt)?)),
            None => Ok(None),
        }
    }

    /// XGROUP CREATE.
    pub fn xgroup_create(
        &self,
        key: &'a [u8],
        group: &[u8],
        start: GroupStart,
        mkstream: bool,
        entries_read: i64,
    ) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let Some(mut stream) = self.open_stream(key, mkstream)? else {
            return Err(key_required());
        };
        if stream.write.get(Cf::Data, &group_sub(group))?.is_some() {
            return Err(Error::BusyGroup);
        }
        let last_id = match start {
            GroupStart::Last => stream.meta.last_id,
            GroupStart::Id(id) => id,
        };
        let record = GroupRecord {
            last_id,
            entries_read,
            pending: 0,
        };
        stream
            .write
            .put(Cf::Data, &group_sub(group), record.encode());
        stream.meta.groups += 1;
        stream.commit()
    }

    /// XGROUP SETID.
    pub fn xgroup_setid(
        &self,
        key: &'a [u8],
        group: &[u8],
        start: GroupStart,
        entries_read: i64,
    ) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let (stream, mut edit) =
            self.open_group_or(key, group, &key_required, &|| no_such_group(key, group))?;
        edit.record.last_id = match start {
            GroupStart::Last => stream.meta.last_id,
            GroupStart::Id(id) => id,
        };
        edit.record.entries_read = entries_read;
        self.finish_group(stream, edit)
    }

    /// XGROUP DESTROY: whether there was such a group.
    pub fn xgroup_destroy(&self, key: &'a [u8], group: &[u8]) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let Some(mut stream) = self.open_stream(key, false)? else {
            return Err(key_required());
        };
        if stream.write.get(Cf::Data, &group_sub(group))?.is_none() {
            return Ok(false);
        }
        stream.write.delete(Cf::Data, &group_sub(group));
        for prefix in [
            consumers_prefix(group),
            pending_prefix(group),
            consumer_pending_prefix(group, b"")[..5 + group.len()].to_vec(),
        ] {
            stream
                .write
                .delete_range(Cf::Data, &prefix, &prefix_end(&prefix));
        }
        stream.meta.groups = stream.meta.groups.saturating_sub(1);
        stream.commit()?;
        Ok(true)
    }

    /// XGROUP CREATECONSUMER: whether it created one.
    pub fn xgroup_createconsumer(
        &self,
        key: &'a [u8],
        group: &[u8],
        consumer: &[u8],
    ) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let (stream, mut edit) =
            self.open_group_or(key, group, &key_required, &|| no_such_group(key, group))?;
        if self.consumer_in(&stream, &mut edit, consumer)?.is_some() {
            return Ok(false);
        }
        let record = ConsumerRecord {
            seen_ms: now_ms(),
            pending: 0,
        };
        edit.consumers
            .insert(Bytes::copy_from_slice(consumer), Some(record));
        self.finish_group(stream, edit)?;
        Ok(true)
    }

    /// XGROUP DELCONSUMER: the consumer's pending entries, which are dropped with it; `None`
    /// if there was no such consumer.
    pub fn xgroup_delconsumer(
        &self,
        key: &'a [u8],
        group: &[u8],
        consumer: &[u8],
    ) -> Result<Option<u64>, Error> {
        let _guard = self.lock(&[key])?;
        let (mut stream, mut edit) =
            self.open_group_or(key, group, &key_required, &|| no_such_group(key, group))?;
        let Some(record) = self.consumer_in(&stream, &mut edit, consumer)? else {
            return Ok(None);
        };
        let collection = stream.write.collection();
        let all = (StreamId::MIN, StreamId::MAX);
        let owned = self.consumer_pending_ids(key, &collection, group, consumer, all, 0)?;
        for id in &owned {
            stream.write.delete(Cf::Data, &pending_sub(group, *id));
        }
        let prefix = consumer_pending_prefix(group, consumer);
        stream
            .write
            .delete_range(Cf::Data, &prefix, &prefix_end(&prefix));
        edit.record.pending = edit.record.pending.saturating_sub(owned.len() as u64);
        edit.consumers
            .insert(Bytes::copy_from_slice(consumer), None);
        self.finish_group(stream, edit)?;
        Ok(Some(record.pending.max(owned.len() as u64)))
    }

    /// XREADGROUP of one stream, for `consumer` of `group`.
    pub fn xreadgroup(
        &self,
        key: &'a [u8],
        group: &[u8],
        consumer: &[u8],
        start: ReadGroupStart,
        count: usize,
        no_ack: bool,
    ) -> Result<ReadGroup, Error> {
        let _guard = self.lock(&[key])?;
        let no_group = || {
            Error::NoGroup(format!(
                "No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(group)
            ))
        };
        let (mut stream, mut edit) = self.open_group(key, group, no_group)?;
        let collection = stream.write.collection();
        let now = now_ms();
        match start {
            ReadGroupStart::New => {
                let Some(from) = edit.record.last_id.next() else {
                    return Ok(ReadGroup {
                        entries: None,
                        created_consumer: false,
                    });
                };
                let entries =
                    self.entries(key, &collection, (from, StreamId::MAX), count, false)?;
                if entries.is_empty() {
                    return Ok(ReadGroup {
                        entries: None,
                        created_consumer: false,
                    });
                }
                let created = self.touch_consumer(&stream, &mut edit, consumer, now)?;
                let length = stream.write.size;
                for (id, _) in &entries {
                    let meta = stream.meta;
                    edit.record.entries_read = if edit.record.entries_read != UNKNOWN_READS
                        && !has_tombstones_after(&meta, length, *id)
                    {
                        edit.record.entries_read.wrapping_add(1)
                    } else if meta.entries_added > 0 {
                        estimate_reads(&meta, length, *id)
                    } else {
                        edit.record.entries_read
                    };
                    edit.record.last_id = *id;
                    if !no_ack {
                        let previous = match stream.write.get(Cf::Data, &pending_sub(group, *id))? {
                            Some(raw) => Some(PendingRecord::decode(&raw).ok_or_else(corrupt)?),
                            None => None,
                        };
                        let record = PendingRecord {
                            delivered_ms: now,
                            deliveries: 1,
                            consumer: Bytes::copy_from_slice(consumer),
                        };
                        self.deliver(&mut stream, &mut edit, *id, previous.as_ref(), record)?;
                    }
                }
                self.finish_group(stream, edit)?;
                Ok(ReadGroup {
                    entries: Some(entries.into_iter().map(|(id, f)| (id, Some(f))).collect()),
                    created_consumer: created,
                })
            }
            ReadGroupStart::History(after) => {
                let created = self.touch_consumer(&stream, &mut edit, consumer, now)?;
                let mut out = Vec::new();
                if let Some(from) = after.next() {
                    let range = (from, StreamId::MAX);
                    let ids =
                        self.consumer_pending_ids(key, &collection, group, consumer, range, count)?;
                    for id in ids {
                        let fields = self.entry_fields(key, &collection, id)?;
                        if fields.is_some() {
                            if let Some(raw) =
                                stream.write.get(Cf::Data, &pending_sub(group, id))?
                            {
                                let mut record = PendingRecord::decode(&raw).ok_or_else(corrupt)?;
                                record.delivered_ms = now;
                                record.deliveries = record.deliveries.wrapping_add(1);
                                stream.write.put(
                                    Cf::Data,
                                    &pending_sub(group, id),
                                    record.encode(),
                                );
                            }
                        }
                        out.push((id, fields));
                    }
                }
                self.finish_group(stream, edit)?;
                Ok(ReadGroup {
                    entries: Some(out),
                    created_consumer: created,
                })
            }
        }
    }

    /// Whether `key` is a stream with the group `group`.
    pub fn stream_has_group(&self, key: &[u8], group: &[u8]) -> Result<bool, Error> {
        match self.stream_of(key)? {
            Some((stream, _)) => Ok(self.group_record(key, &stream, group)?.is_some()),
            None => Ok(false),
        }
    }

    /// XACK: how many of `ids` were pending.
    pub fn xack(&self, key: &'a [u8], group: &[u8], ids: &[StreamId]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let (mut stream, mut edit) = match self.open_group(key, group, || Error::NoSuchKey) {
            Ok(opened) => opened,
            Err(Error::NoSuchKey) => return Ok(0),
            Err(other) => return Err(other),
        };
        let mut acknowledged = 0;
        let mut seen = std::collections::HashSet::new();
        for &id in ids {
            if !seen.insert(id) {
                continue;
            }
            if let Some(raw) = stream.write.get(Cf::Data, &pending_sub(group, id))? {
                let record = PendingRecord::decode(&raw).ok_or_else(corrupt)?;
                self.forget_pending(&mut stream, &mut edit, id, &record)?;
                acknowledged += 1;
            }
        }
        if acknowledged > 0 {
            self.finish_group(stream, edit)?;
        }
        Ok(acknowledged)
    }

    fn read_group(
        &self,
        key: &[u8],
        group: &[u8],
    ) -> Result<(Collection, StreamMeta, GroupRecord), Error> {
        let (stream, meta) = self
            .stream_of(key)?
            .ok_or_else(|| no_such_key_or_group(key, group))?;
        let record = self
            .group_record(key, &stream, group)?
            .ok_or_else(|| no_such_key_or_group(key, group))?;
        Ok((stream, meta, record))
    }

    /// The consumers of `group`, in name order.
    pub(super) fn consumers(
        &self,
        key: &[u8],
        stream: &Collection,
        group: &[u8],
    ) -> Result<Vec<(Bytes, ConsumerRecord)>, Error> {
        let prefix = consumers_prefix(group);
        let mut out = Vec::new();
        let mut damaged = false;
        self.scan_elements(
            Cf::Data,
            key,
            stream,
            (&prefix, Some(&prefix_end(&prefix))),
            ScanDirection::Forward,
            &mut |sub, value| {
                match ConsumerRecord::decode(value) {
                    Some(record) => {
                        out.push((Bytes::copy_from_slice(&sub[prefix.len()..]), record))
                    }
                    None => damaged = true,
                }
                !damaged
            },
        )?;
        if damaged {
            return Err(corrupt());
        }
        Ok(out)
    }

    /// XPENDING key group.
    pub fn xpending_summary(&self, key: &[u8], group: &[u8]) -> Result<PendingSummary, Error> {
        let (stream, _, record) = self.read_group(key, group)?;
        let mut first = None;
        self.scan_pending(
            key,
            &stream,
            group,
            (StreamId::MIN, StreamId::MAX),
            &mut |id, _| {
                first = Some(id);
                false
            },
        )?;
        let Some(first) = first else {
            return Ok(PendingSummary {
                count: 0,
                range: None,
            });
        };
        let prefix = pending_prefix(group);
        let mut last = first;
        self.scan_elements(
            Cf::Data,
            key,
            &stream,
            (&prefix, Some(&prefix_end(&prefix))),
            ScanDirection::Reverse,
            &mut |sub, _| {
                if let Some(id) = sub.get(prefix.len()..).and_then(StreamId::from_bytes) {
                    last = id;
                }
                false
            },
        )?;
        let owners = self
            .consumers(key, &stream, group)?
            .into_iter()
            .filter(|(_, c)| c.pending > 0)
            .map(|(name, c)| (name, c.pending))
            .collect();
        Ok(PendingSummary {
            count: record.pending,
            range: Some((first, last, owners)),
        })
    }

    /// XPENDING key group [IDLE min] start end count [consumer].
    pub fn xpending(
        &self,
        key: &[u8],
        group: &[u8],
        filter: &PendingFilter<'_>,
    ) -> Result<Vec<PendingEntry>, Error> {
        let (stream, _, _) = self.read_group(key, group)?;
        let now = now_ms() as i64;
        let mut out = Vec::new();
        if filter.count == 0 || filter.start > filter.end {
            return Ok(out);
        }
        let mut take = |id: StreamId, record: PendingRecord| {
            let idle = now.wrapping_sub(record.delivered_ms as i64);
            if filter.min_idle != 0 && idle < filter.min_idle {
                return true;
            }
            out.push(PendingEntry {
                id,
                consumer: record.consumer,
                idle: idle.max(0),
                deliveries: record.deliveries,
            });
            (out.len() as u64) < filter.count
        };
        match filter.consumer {
            None => {
                self.scan_pending(key, &stream, group, (filter.start, filter.end), &mut take)?
            }
            Some(consumer) => {
                if self
                    .get_element(Cf::Data, key, &stream, &consumer_sub(group, consumer))?
                    .is_none()
                {
                    return Ok(out);
                }
                // Without IDLE, the first COUNT are the reply.
                let limit = match filter.min_idle {
                    0 => usize::try_from(filter.count).unwrap_or(usize::MAX),
                    _ => 0,
                };
                let range = (filter.start, filter.end);
                let ids = self.consumer_pending_ids(key, &stream, group, consumer, range, limit)?;
                for id in ids {
                    if let Some(raw) =
                        self.get_element(Cf::Data, key, &stream, &pending_sub(group, id))?
                    {
                        let record = PendingRecord::decode(&raw).ok_or_else(corrupt)?;
                        if !take(id, record) {
                            break;
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// XCLAIM.
    pub fn xclaim(
        &self,
        key: &'a [u8],
        group: &[u8],
        consumer: &[u8],
        ids: &[StreamId],
        options: &ClaimOptions,
    ) -> Result<Claimed, Error> {
        let _guard = self.lock(&[key])?;
        let (mut stream, mut edit) =
            self.open_group(key, group, || no_such_key_or_group(key, group))?;
        let now = now_ms() as i64;
        if options.last_id > edit.record.last_id {
            edit.record.last_id = options.last_id;
        }
        let delivered = match options.delivered_ms {
            Some(t) if (0..=now).contains(&t) => t,
            _ => now,
        };
        let collection = stream.write.collection();
        let mut claimed = Claimed {
            entries: Vec::new(),
            ids: Vec::new(),
            created_consumer: false,
            next: StreamId::MIN,
            deleted: Vec::new(),
        };
        let mut touched = false;
        // One claim per ID, as later repeats find the entry already theirs.
        let mut current: BTreeMap<StreamId, Option<PendingRecord>> = BTreeMap::new();
        for &id in ids {
            let pending = match current.get(&id) {
                Some(staged) => staged.clone(),
                None => match stream.write.get(Cf::Data, &pending_sub(group, id))? {
                    Some(raw) => Some(PendingRecord::decode(&raw).ok_or_else(corrupt)?),
                    None => None,
                },
            };
            let fields = self.entry_fields(key, &collection, id)?;
            let Some(fields) = fields else {
                if let Some(record) = pending {
                    self.forget_pending(&mut stream, &mut edit, id, &record)?;
                    current.insert(id, None);
                }
                continue;
            };
            let (previous, owned) = match pending {
                Some(record) => (Some(record), true),
                None if options.force => (None, false),
                None => continue,
            };
            if owned && options.min_idle != 0 {
                if let Some(record) = &previous {
                    if now.wrapping_sub(record.delivered_ms as i64) < options.min_idle {
                        continue;
                    }
                }
            }
            if !touched {
                claimed.created_consumer =
                    self.touch_consumer(&stream, &mut edit, consumer, now as u64)?;
                touched = true;
            }
            let deliveries = match (options.retry_count, &previous) {
                (Some(n), _) => n.max(0) as u64,
                (None, Some(record)) if !options.just_id => record.deliveries.wrapping_add(1),
                (None, Some(record)) => record.deliveries,
                // Redis creates the forced entry with one delivery, then counts this one.
                (None, None) if !options.just_id => 2,
                (None, None) => 1,
            };
            let record = PendingRecord {
                delivered_ms: delivered as u64,
                deliveries,
                consumer: Bytes::copy_from_slice(consumer),
            };
            self.deliver(
                &mut stream,
                &mut edit,
                id,
                previous.as_ref(),
                record.clone(),
            )?;
            current.insert(id, Some(record));
            if options.just_id {
                claimed.ids.push(id);
            } else {
                claimed.entries.push((id, fields));
            }
        }
        self.finish_group(stream, edit)?;
        Ok(claimed)
    }

    /// XAUTOCLAIM.
    #[allow(clippy::too_many_arguments)]
    pub fn xautoclaim(
        &self,
        key: &'a [u8],
        group: &[u8],
        consumer: &[u8],
        min_idle: i64,
        start: StreamId,
        count: u64,
        just_id: bool,
    ) -> Result<Claimed, Error> {
        let _guard = self.lock(&[key])?;
        let (mut stream, mut edit) =
            self.open_group(key, group, || no_such_key_or_group(key, group))?;
        let now = now_ms() as i64;
        let collection = stream.write.collection();
        let mut claimed = Claimed {
            entries: Vec::new(),
            ids: Vec::new(),
            created_consumer: false,
            next: StreamId::MIN,
            deleted: Vec::new(),
        };
        let mut attempts = count.saturating_mul(10);
        let mut left = count;
        // The pending entries examined, and the one after them, which the cursor names.
        let mut examined: Vec<(StreamId, PendingRecord)> = Vec::new();
        let mut next = None;
        self.scan_pending(
            key,
            &collection,
            group,
            (start, StreamId::MAX),
            &mut |id, record| {
                if attempts == 0 || left == 0 {
                    next = Some(id);
                    return false;
                }
                attempts -= 1;
                let gone = !matches!(
                    self.get_element(Cf::Data, key, &collection, &entry_sub(id)),
                    Ok(Some(_))
                );
                let idle_enough =
                    min_idle == 0 || now.wrapping_sub(record.delivered_ms as i64) >= min_idle;
                if gone || idle_enough {
                    left -= 1;
                }
                examined.push((id, record));
                true
            },
        )?;
        let mut touched = false;
        for (id, record) in examined {
            let Some(fields) = self.entry_fields(key, &collection, id)? else {
                self.forget_pending(&mut stream, &mut edit, id, &record)?;
                claimed.deleted.push(id);
                continue;
            };
            if min_idle != 0 && now.wrapping_sub(record.delivered_ms as i64) < min_idle {
                continue;
            }
            if !touched {
                claimed.created_consumer =
                    self.touch_consumer(&stream, &mut edit, consumer, now as u64)?;
                touched = true;
            }
            let new = PendingRecord {
                delivered_ms: now as u64,
                deliveries: record.deliveries.wrapping_add(u64::from(!just_id)),
                consumer: Bytes::copy_from_slice(consumer),
            };
            self.deliver(&mut stream, &mut edit, id, Some(&record), new)?;
            if just_id {
                claimed.ids.push(id);
            } else {
                claimed.entries.push((id, fields));
            }
        }
        claimed.next = next.unwrap_or(StreamId::MIN);
        self.finish_group(stream, edit)?;
        Ok(claimed)
    }

    fn group_info(
        &self,
        key: &[u8],
        stream: &Collection,
        meta: &StreamMeta,
        name: Bytes,
        record: GroupRecord,
    ) -> Result<GroupInfo, Error> {
        Ok(GroupInfo {
            consumers: self.consumers(key, stream, &name)?.len() as u64,
            pending: record.pending,
            last_delivered: record.last_id,
            entries_read: (record.entries_read != UNKNOWN_READS).then_some(record.entries_read),
            lag: lag(meta, stream.size, &record),
            name,
        })
    }

    /// The groups of a stream, in name order.
    pub(super) fn groups(
        &self,
        key: &[u8],
        stream: &Collection,
    ) -> Result<Vec<(Bytes, GroupRecord)>, Error> {
        let mut out = Vec::new();
        let mut damaged = false;
        self.scan_elements(
            Cf::Data,
            key,
            stream,
            (&[GROUP], Some(&[GROUP + 1])),
            ScanDirection::Forward,
            &mut |sub, value| {
                match GroupRecord::decode(value) {
                    Some(record) => out.push((Bytes::copy_from_slice(&sub[1..]), record)),
                    None => damaged = true,
                }
                !damaged
            },
        )?;
        if damaged {
            return Err(corrupt());
        }
        Ok(out)
    }

    /// XINFO GROUPS.
    pub fn xinfo_groups(&self, key: &[u8]) -> Result<Vec<GroupInfo>, Error> {
        let (stream, meta) = self.stream_of(key)?.ok_or(Error::NoSuchKey)?;
        self.groups(key, &stream)?
            .into_iter()
            .map(|(name, record)| self.group_info(key, &stream, &meta, name, record))
            .collect()
    }

    /// XINFO CONSUMERS.
    pub fn xinfo_consumers(&self, key: &[u8], group: &[u8]) -> Result<Vec<ConsumerInfo>, Error> {
        let (stream, _) = self.stream_of(key)?.ok_or(Error::NoSuchKey)?;
        if self.group_record(key, &stream, group)?.is_none() {
            return Err(no_such_group(key, group));
        }
        let now = now_ms() as i64;
        Ok(self
            .consumers(key, &stream, group)?
            .into_iter()
            .map(|(name, c)| ConsumerInfo {
                name,
                pending: c.pending,
                idle: now.wrapping_sub(c.seen_ms as i64).max(0),
                seen_ms: c.seen_ms,
            })
            .collect())
    }

    fn stream_info(
        &self,
        key: &[u8],
        stream: &Collection,
        meta: &StreamMeta,
        edges: bool,
    ) -> Result<StreamInfo, Error> {
        let edge = |rev| -> Result<Option<Entry>, Error> {
            Ok(self
                .entries(key, stream, (StreamId::MIN, StreamId::MAX), 1, rev)?
                .pop())
        };
        let (radix_keys, radix_nodes) = self.radix_tree(key, stream, meta)?;
        Ok(StreamInfo {
            length: stream.size,
            radix_keys,
            radix_nodes,
            last_generated: meta.last_id,
            max_deleted: meta.max_deleted,
            entries_added: meta.entries_added,
            recorded_first: meta.first_id,
            groups: meta.groups,
            first: if edges { edge(false)? } else { None },
            last: if edges { edge(true)? } else { None },
        })
    }

    /// XINFO STREAM.
    pub fn xinfo_stream(&self, key: &[u8]) -> Result<StreamInfo, Error> {
        let (stream, meta) = self.stream_of(key)?.ok_or(Error::NoSuchKey)?;
        self.stream_info(key, &stream, &meta, true)
    }

    /// XINFO STREAM FULL, with at most `count` entries and pending entries per list (0: all).
    pub fn xinfo_stream_full(&self, key: &[u8], count: usize) -> Result<StreamInfoFull, Error> {
        let (stream, meta) = self.stream_of(key)?.ok_or(Error::NoSuchKey)?;
        let info = self.stream_info(key, &stream, &meta, false)?;
        let entries = self.entries(key, &stream, (StreamId::MIN, StreamId::MAX), count, false)?;
        let mut groups = Vec::new();
        for (name, record) in self.groups(key, &stream)? {
            let mut pending = Vec::new();
            self.scan_pending(
                key,
                &stream,
                &name,
                (StreamId::MIN, StreamId::MAX),
                &mut |id, p| {
                    pending.push((
                        PendingEntry {
                            id,
                            consumer: p.consumer,
                            idle: 0,
                            deliveries: p.deliveries,
                        },
                        p.delivered_ms,
                    ));
                    count == 0 || pending.len() < count
                },
            )?;
            let mut consumers = Vec::new();
            for (consumer, c) in self.consumers(key, &stream, &name)? {
                let all = (StreamId::MIN, StreamId::MAX);
                let ids = self.consumer_pending_ids(key, &stream, &name, &consumer, all, count)?;
                let mut owned = Vec::new();
                for id in ids {
                    if let Some(raw) =
                        self.get_element(Cf::Data, key, &stream, &pending_sub(&name, id))?
                    {
                        let p = PendingRecord::decode(&raw).ok_or_else(corrupt)?;
                        owned.push((id, p.delivered_ms, p.deliveries));
                    }
                }
                consumers.push((
                    ConsumerInfo {
                        name: consumer,
                        pending: c.pending,
                        idle: 0,
                        seen_ms: c.seen_ms,
                    },
                    owned,
                ));
            }
            let info = self.group_info(key, &stream, &meta, name, record)?;
            groups.push((info, pending, consumers));
        }
        Ok(StreamInfoFull {
            info,
            entries,
            groups,
        })
    }
}
