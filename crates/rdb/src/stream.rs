//! Streams as Redis 7.0 serializes them (`RDB_TYPE_STREAM_LISTPACKS_2`, and the older
//! `RDB_TYPE_STREAM_LISTPACKS` read): listpack nodes keyed by a master ID, then the length,
//! the ID counters and the consumer groups with their pending entries and consumers.
//!
//! A node's listpack starts with a master entry (`count · deleted · field count · fields ·
//! 0`); each entry follows as `flags · ms-delta · seq-delta · [field count] · (field) value ...
//! · lp-count`, its fields left out when they are the master's (flag 2) and its flag 1 set
//! once deleted. IDs are deltas from the master ID, in wrapping 64-bit arithmetic.
//!
//! [`Node`] is what a node is beside its entries: its master entry, counts and the bytes its
//! listpack takes, so a server can place node boundaries where Redis's `streamAppendItem`
//! does and write them here as they were.

use std::collections::HashSet;

use bytes::Bytes;

use crate::read::Decoder;
use crate::write::{length, string};
use crate::{listpack, RdbError};

/// An entry ID: milliseconds, sequence.
pub type Id = (u64, u64);

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    pub entries: Vec<(Id, Vec<(Bytes, Bytes)>)>,
    pub last_id: Id,
    pub first_id: Id,
    pub max_deleted: Id,
    pub entries_added: u64,
    pub groups: Vec<Group>,
    /// The nodes holding `entries`, in order, their live counts adding up to the entries.
    pub nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub name: Bytes,
    pub last_id: Id,
    /// -1 when unknown.
    pub entries_read: i64,
    /// Pending entries: ID, delivery time (Unix ms), deliveries.
    pub pending: Vec<(Id, u64, u64)>,
    pub consumers: Vec<Consumer>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    pub name: Bytes,
    pub seen_ms: u64,
    /// The IDs of the group's pending entries this consumer owns.
    pub pending: Vec<Id>,
}

const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;
/// Redis's `STREAM_LISTPACK_MAX_SIZE`: no node limit in bytes is above it.
const LISTPACK_MAX: u64 = 1 << 30;
/// A listpack without entries: its header and end byte.
const EMPTY_LISTPACK: u64 = 7;
/// Elements reserved ahead at most, whatever a count claims.
const RESERVE: u64 = 4096;

fn corrupt(what: &'static str) -> RdbError {
    RdbError::Corrupt(what)
}

fn id_bytes((ms, seq): Id) -> [u8; 16] {
    let mut out = [0; 16];
    out[..8].copy_from_slice(&ms.to_be_bytes());
    out[8..].copy_from_slice(&seq.to_be_bytes());
    out
}

fn id_from(bytes: &[u8]) -> Result<Id, RdbError> {
    let ms = bytes.get(..8).and_then(|b| b.try_into().ok());
    let seq = bytes.get(8..16).and_then(|b| b.try_into().ok());
    match (ms, seq, bytes.len()) {
        (Some(ms), Some(seq), 16) => Ok((u64::from_be_bytes(ms), u64::from_be_bytes(seq))),
        _ => Err(corrupt("stream ID of the wrong size")),
    }
}

/// Redis's `stream-node-max-entries` (0: no limit) and `stream-node-max-bytes` (0: the
/// listpack maximum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    pub entries: u64,
    pub bytes: u64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            entries: 100,
            bytes: 4096,
        }
    }
}

/// A node as Redis keeps one: a listpack under its master ID that starts with a master
/// entry (the field names of the entry that opened it) and keeps its deleted entries,
/// flagged, until the whole node goes. `bytes` is the size `listpack.c` gives that listpack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub master: Id,
    pub fields: Vec<Bytes>,
    /// Entries not deleted (the master entry's count).
    pub live: u64,
    /// Entries flagged deleted.
    pub deleted: u64,
    /// The listpack's size (`lpBytes`).
    pub bytes: u64,
    /// The last entry's ID, deleted or not.
    pub last: Id,
}

fn integer_size(v: i64) -> u64 {
    listpack::integer_entry_size(v) as u64
}

fn element_size(data: &[u8]) -> u64 {
    listpack::entry_size(data) as u64
}

impl Node {
    /// The node the entry `id` opens: an empty listpack, the master entry, then the entry.
    pub fn new(id: Id, fields: &[(Bytes, Bytes)]) -> Node {
        let names: Vec<Bytes> = fields.iter().map(|(f, _)| f.clone()).collect();
        let master_entry = 3 * integer_size(0)
            + integer_size(names.len() as i64)
            + names.iter().map(|f| element_size(f)).sum::<u64>();
        let mut node = Node {
            master: id,
            fields: names,
            live: 0,
            deleted: 0,
            bytes: EMPTY_LISTPACK + master_entry,
            last: id,
        };
        node.append(id, fields);
        node
    }

    /// Whether `streamAppendItem` puts an entry of `fields` in a new node instead: when the
    /// listpack's bytes and the entry's data reach the byte limit, or the entries, deleted
    /// ones included, reach the entry limit.
    pub fn is_full(&self, limits: NodeLimits, fields: &[(Bytes, Bytes)]) -> bool {
        let max_bytes = match limits.bytes {
            0 => LISTPACK_MAX,
            bytes => bytes.min(LISTPACK_MAX),
        };
        let data: u64 = fields.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        self.bytes.saturating_add(data) >= max_bytes
            || (limits.entries != 0 && self.live.saturating_add(self.deleted) >= limits.entries)
    }

    fn same_fields(&self, fields: &[(Bytes, Bytes)]) -> bool {
        fields.len() == self.fields.len()
            && fields.iter().zip(&self.fields).all(|((f, _), m)| f == m)
    }

    /// Appends the entry `id`: flags, ID deltas, the field count and names unless they are
    /// the master entry's, the values and the entry's element count.
    pub fn append(&mut self, id: Id, fields: &[(Bytes, Bytes)]) {
        self.set_counts(self.live + 1, self.deleted);
        let same = self.same_fields(fields);
        let n = fields.len() as i64;
        let mut size = integer_size(if same { FLAG_SAME_FIELDS } else { 0 })
            + integer_size(id.0.wrapping_sub(self.master.0) as i64)
            + integer_size(id.1.wrapping_sub(self.master.1) as i64)
            + fields.iter().map(|(_, v)| element_size(v)).sum::<u64>();
        if same {
            size += integer_size(n + 3);
        } else {
            size += integer_size(n)
                + fields.iter().map(|(f, _)| element_size(f)).sum::<u64>()
                + integer_size(2 * n + 4);
        }
        self.bytes += size;
        self.last = id;
    }

    /// Flags `n` live entries deleted, as XDEL and a trim within the node do: only the master
    /// entry's counts change size.
    pub fn delete(&mut self, n: u64) {
        let n = n.min(self.live);
        self.set_counts(self.live - n, self.deleted + n);
    }

    fn set_counts(&mut self, live: u64, deleted: u64) {
        let size = |v: u64| integer_size(v as i64);
        let old = size(self.live) + size(self.deleted);
        self.bytes = (self.bytes + size(live) + size(deleted)).saturating_sub(old);
        self.live = live;
        self.deleted = deleted;
    }
}

/// Adds the entry `id` after the node `tail` as `streamAppendItem` does: to it, or, when it
/// is full (or there is none), to a new node. Returns the node that is the tail now, and the
/// one that was full.
pub fn append_entry(
    tail: Option<Node>,
    limits: NodeLimits,
    id: Id,
    fields: &[(Bytes, Bytes)],
) -> (Node, Option<Node>) {
    match tail {
        Some(mut node) if !node.is_full(limits, fields) => {
            node.append(id, fields);
            (node, None)
        }
        full => (Node::new(id, fields), full),
    }
}

/// The nodes Redis would have made of `entries`, appended one by one under `limits`.
pub fn nodes_of(entries: &[(Id, Vec<(Bytes, Bytes)>)], limits: NodeLimits) -> Vec<Node> {
    let mut nodes = Vec::new();
    let mut tail = None;
    for (id, fields) in entries {
        let (node, full) = append_entry(tail, limits, *id, fields);
        nodes.extend(full);
        tail = Some(node);
    }
    nodes.extend(tail);
    nodes
}

/// Reads a stream of type `code` (15 or 19).
pub fn read<R: std::io::Read>(input: &mut Decoder<R>, v2: bool) -> Result<Stream, RdbError> {
    let mut stream = Stream::default();
    let nodes = input.length()?;
    let mut last_master = None;
    for _ in 0..nodes {
        let master = id_from(&input.string()?)?;
        if last_master.is_some_and(|last| last >= master) {
            return Err(corrupt("stream nodes out of order"));
        }
        last_master = Some(master);
        let node = node_entries(&input.string()?, master, &mut stream.entries)?;
        stream.nodes.push(node);
    }
    let length = input.length()?;
    if length != stream.entries.len() as u64 {
        return Err(corrupt("stream length differs from its entries"));
    }
    stream.last_id = (input.length()?, input.length()?);
    if v2 {
        stream.first_id = (input.length()?, input.length()?);
        stream.max_deleted = (input.length()?, input.length()?);
        stream.entries_added = input.length()?;
    } else {
        stream.first_id = stream.entries.first().map_or((0, 0), |e| e.0);
        stream.entries_added = length;
    }
    if stream.entries.last().is_some_and(|e| e.0 > stream.last_id) {
        return Err(corrupt("stream entry after the stream's last ID"));
    }
    let groups = input.length()?;
    let mut group_names = HashSet::new();
    for _ in 0..groups {
        let name = input.string()?;
        if !group_names.insert(name.clone()) {
            return Err(corrupt("duplicated consumer group"));
        }
        let last_id = (input.length()?, input.length()?);
        let entries_read = if v2 {
            input.length()? as i64
        } else {
            estimate_reads(&stream, last_id)
        };
        let count = input.length()?;
        let mut pending = Vec::with_capacity(count.min(RESERVE) as usize);
        for _ in 0..count {
            let mut raw = [0u8; 16];
            input.fill(&mut raw)?;
            let delivered = input.u64_le()?;
            pending.push((id_from(&raw)?, delivered, input.length()?));
        }
        pending.sort_unstable_by_key(|p| p.0);
        if pending.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(corrupt("duplicated pending entry"));
        }
        let consumers_count = input.length()?;
        let mut consumers: Vec<Consumer> =
            Vec::with_capacity(consumers_count.min(RESERVE) as usize);
        let mut owned = 0usize;
        let mut consumer_names = HashSet::new();
        for _ in 0..consumers_count {
            let name = input.string()?;
            if !consumer_names.insert(name.clone()) {
                return Err(corrupt("duplicated consumer"));
            }
            let seen_ms = input.u64_le()?;
            let count = input.length()?;
            let mut ids = Vec::with_capacity(count.min(RESERVE) as usize);
            for _ in 0..count {
                let mut raw = [0u8; 16];
                input.fill(&mut raw)?;
                let id = id_from(&raw)?;
                if pending.binary_search_by_key(&id, |p| p.0).is_err() {
                    return Err(corrupt("consumer entry not in its group's pending list"));
                }
                ids.push(id);
            }
            owned += ids.len();
            consumers.push(Consumer {
                name,
                seen_ms,
                pending: ids,
            });
        }
        // Every pending entry has exactly one owner (Shale keeps none without one).
        let mut all: Vec<Id> = consumers
            .iter()
            .flat_map(|c| c.pending.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        if all.len() != owned || owned != pending.len() {
            return Err(corrupt("pending entry without exactly one consumer"));
        }
        stream.groups.push(Group {
            name,
            last_id,
            entries_read,
            pending,
            consumers,
        });
    }
    Ok(stream)
}

/// A group's read count in an old stream, which has none: Redis's
/// `streamEstimateDistanceFromFirstEverEntry` for a stream without deletions, -1 if unknown.
fn estimate_reads(stream: &Stream, id: Id) -> i64 {
    let length = stream.entries.len() as u64;
    if stream.entries_added == 0 {
        return 0;
    }
    if (length == 0 && id <= stream.last_id) || id == stream.last_id {
        return stream.entries_added as i64;
    }
    if id > stream.last_id {
        return -1;
    }
    match id.cmp(&stream.first_id) {
        std::cmp::Ordering::Less => stream.entries_added.wrapping_sub(length) as i64,
        std::cmp::Ordering::Equal => {
            stream.entries_added.wrapping_sub(length).wrapping_add(1) as i64
        }
        std::cmp::Ordering::Greater => -1,
    }
}

fn integer(entry: &[u8]) -> Result<i64, RdbError> {
    std::str::from_utf8(entry)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(corrupt("stream listpack integer expected"))
}

/// Appends the live entries of one node, checking its layout as Redis's deep check does,
/// and returns the node.
fn node_entries(
    lp: &[u8],
    master: Id,
    out: &mut Vec<(Id, Vec<(Bytes, Bytes)>)>,
) -> Result<Node, RdbError> {
    let items = listpack::decode(lp)?;
    let mut items = items.into_iter();
    let mut next = || items.next().ok_or(corrupt("stream listpack ends early"));
    let count = integer(&next()?)?;
    let deleted = integer(&next()?)?;
    let master_count = integer(&next()?)?;
    let total = count.checked_add(deleted).unwrap_or(-1);
    if count < 0 || deleted < 0 || master_count < 0 || total <= 0 {
        return Err(corrupt("bad stream master entry"));
    }
    let mut master_fields = Vec::with_capacity((master_count as u64).min(RESERVE) as usize);
    for _ in 0..master_count {
        master_fields.push(next()?);
    }
    if integer(&next()?)? != 0 {
        return Err(corrupt("stream master entry without its terminator"));
    }
    let mut live = 0;
    let mut last = master;
    for _ in 0..total {
        let flags = integer(&next()?)?;
        let ms = master.0.wrapping_add(integer(&next()?)? as u64);
        let seq = master.1.wrapping_add(integer(&next()?)? as u64);
        last = (ms, seq);
        let (fields, extra) = if flags & FLAG_SAME_FIELDS != 0 {
            let mut fields = Vec::with_capacity(master_fields.len());
            for field in &master_fields {
                fields.push((field.clone(), next()?));
            }
            (fields, 3)
        } else {
            let n = integer(&next()?)?;
            if n < 0 {
                return Err(corrupt("bad stream entry field count"));
            }
            let mut fields = Vec::with_capacity((n as u64).min(RESERVE) as usize);
            for _ in 0..n {
                fields.push((next()?, next()?));
            }
            (fields, n.saturating_add(4))
        };
        if integer(&next()?)? != (fields.len() as i64).saturating_add(extra) {
            return Err(corrupt("bad stream entry lp-count"));
        }
        if flags & FLAG_DELETED != 0 {
            continue;
        }
        if out.last().is_some_and(|e| e.0 >= (ms, seq)) {
            return Err(corrupt("stream entries out of order"));
        }
        out.push(((ms, seq), fields));
        live += 1;
    }
    if live != count || next().is_ok() {
        return Err(corrupt("stream node counts differ from its entries"));
    }
    Ok(Node {
        master,
        fields: master_fields,
        live: count as u64,
        deleted: deleted as u64,
        bytes: lp.len() as u64,
        last,
    })
}

/// Writes the body of a stream of type 19, node by node as `stream.nodes` has them (or as
/// Redis's default limits would make them, if they do not hold the entries). A node
/// without live entries is left out, and deleted entries, which are not kept, with it.
pub fn write(out: &mut Vec<u8>, stream: &Stream) {
    let held = stream
        .nodes
        .iter()
        .try_fold(0u64, |sum, n| sum.checked_add(n.live));
    let computed;
    let nodes = if held == Some(stream.entries.len() as u64) {
        &stream.nodes
    } else {
        computed = nodes_of(&stream.entries, NodeLimits::default());
        &computed
    };
    length(out, nodes.iter().filter(|n| n.live > 0).count() as u64);
    let mut at = 0;
    for node in nodes.iter().filter(|n| n.live > 0) {
        let entries = &stream.entries[at..at + node.live as usize];
        at += entries.len();
        string(out, &id_bytes(node.master));
        string(out, &node_listpack(node, entries));
    }
    length(out, stream.entries.len() as u64);
    for value in [
        stream.last_id.0,
        stream.last_id.1,
        stream.first_id.0,
        stream.first_id.1,
        stream.max_deleted.0,
        stream.max_deleted.1,
        stream.entries_added,
    ] {
        length(out, value);
    }
    length(out, stream.groups.len() as u64);
    for group in &stream.groups {
        string(out, &group.name);
        length(out, group.last_id.0);
        length(out, group.last_id.1);
        length(out, group.entries_read as u64);
        length(out, group.pending.len() as u64);
        for (id, delivered, deliveries) in &group.pending {
            out.extend_from_slice(&id_bytes(*id));
            out.extend_from_slice(&delivered.to_le_bytes());
            length(out, *deliveries);
        }
        length(out, group.consumers.len() as u64);
        for consumer in &group.consumers {
            string(out, &consumer.name);
            out.extend_from_slice(&consumer.seen_ms.to_le_bytes());
            length(out, consumer.pending.len() as u64);
            for id in &consumer.pending {
                out.extend_from_slice(&id_bytes(*id));
            }
        }
    }
}

/// The listpack of `node` holding `entries`, its live ones: each entry without its field
/// names when they are the master entry's.
fn node_listpack(node: &Node, entries: &[(Id, Vec<(Bytes, Bytes)>)]) -> Vec<u8> {
    let text = |v: i64| Bytes::from(v.to_string());
    let mut items: Vec<Bytes> = vec![
        text(entries.len() as i64),
        text(0),
        text(node.fields.len() as i64),
    ];
    items.extend(node.fields.iter().cloned());
    items.push(text(0));
    for (id, fields) in entries {
        let same = node.same_fields(fields);
        let n = fields.len() as i64;
        items.push(text(if same { FLAG_SAME_FIELDS } else { 0 }));
        items.push(text(id.0.wrapping_sub(node.master.0) as i64));
        items.push(text(id.1.wrapping_sub(node.master.1) as i64));
        if same {
            items.extend(fields.iter().map(|(_, v)| v.clone()));
            items.push(text(n + 3));
        } else {
            items.push(text(n));
            for (f, v) in fields {
                items.push(f.clone());
                items.push(v.clone());
            }
            items.push(text(2 * n + 4));
        }
    }
    listpack::encode(items.iter().map(|i| i.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Stream {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let entries = (0..250u64)
            .map(|i| {
                let fields = if i % 7 == 0 {
                    vec![(b("other"), b(&i.to_string())), (b("x"), b(""))]
                } else {
                    vec![(b("n"), b(&i.to_string())), (b("name"), b("value"))]
                };
                ((1000 + i / 3, i % 3), fields)
            })
            .collect::<Vec<_>>();
        Stream {
            nodes: nodes_of(&entries, NodeLimits::default()),
            entries,
            last_id: (2000, 5),
            first_id: (1000, 0),
            max_deleted: (999, 1),
            entries_added: 300,
            groups: vec![Group {
                name: b("g"),
                last_id: (1010, 1),
                entries_read: -1,
                pending: vec![((1000, 0), 77, 2), ((1001, 1), 78, 1)],
                consumers: vec![
                    Consumer {
                        name: b("a"),
                        seen_ms: 90,
                        pending: vec![(1000, 0)],
                    },
                    Consumer {
                        name: b("b"),
                        seen_ms: 91,
                        pending: vec![(1001, 1)],
                    },
                ],
            }],
        }
    }

    #[test]
    fn streams_round_trip_through_nodes() {
        let stream = sample();
        let mut out = Vec::new();
        write(&mut out, &stream);
        let mut input = Decoder::new(&out[..]);
        assert_eq!(read(&mut input, true).expect("a stream"), stream);
        let sizes: Vec<u64> = stream.nodes.iter().map(|n| n.live).collect();
        assert_eq!(sizes, [100, 100, 50]);
    }

    #[test]
    fn nodes_are_written_as_redis_writes_them() {
        // XADD s 1-1 a 1 b 2, XADD s 1-2 a 3 b 4, XADD s 2-0 c hello: Redis 7.0.15's DUMP,
        // without its type byte and its footer (RDB version, CRC).
        let redis = "0110000000000000000100000000000000014042420000001900030100010201816102\
                     816202000102010001000101010201050102010001010103010401050100010101dfff\
                     0201018163028568656c6c6f060601ff030200010100000300";
        let redis: Vec<u8> = (0..redis.len() / 2)
            .map(|i| u8::from_str_radix(&redis[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let entries = vec![
            ((1, 1), vec![(b("a"), b("1")), (b("b"), b("2"))]),
            ((1, 2), vec![(b("a"), b("3")), (b("b"), b("4"))]),
            ((2, 0), vec![(b("c"), b("hello"))]),
        ];
        let stream = Stream {
            nodes: nodes_of(&entries, NodeLimits::default()),
            entries,
            last_id: (2, 0),
            first_id: (1, 1),
            entries_added: 3,
            ..Stream::default()
        };
        let mut out = Vec::new();
        write(&mut out, &stream);
        assert_eq!(out, redis);
        assert_eq!(stream.nodes[0].bytes, 66);
    }

    #[test]
    fn node_sizes_are_their_listpacks() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let long = "x".repeat(5000);
        let entries: Vec<(Id, Vec<(Bytes, Bytes)>)> = (0..400u64)
            .map(|i| {
                let value = match i % 5 {
                    0 => b(&i.to_string()),
                    1 => b(&"y".repeat(70 + i as usize)),
                    2 => b(&long[..(i as usize * 13) % 5000]),
                    3 => b(&(-(i as i64) * 100_003).to_string()),
                    _ => b(""),
                };
                let fields = match i % 7 {
                    0 => vec![(b("other"), value)],
                    _ => vec![(b("n"), value), (b("12"), b("v"))],
                };
                // Sequences that go down as milliseconds go up: negative deltas.
                (((1 << 40) + i * 300, (i * 7919) % 13), fields)
            })
            .collect();
        for limits in [
            NodeLimits::default(),
            NodeLimits {
                entries: 0,
                bytes: 0,
            },
            NodeLimits {
                entries: 3,
                bytes: 1 << 40,
            },
            NodeLimits {
                entries: 1000,
                bytes: 20_000,
            },
        ] {
            let nodes = nodes_of(&entries, limits);
            let mut at = 0;
            for node in &nodes {
                let held = &entries[at..at + node.live as usize];
                at += held.len();
                assert_eq!(node_listpack(node, held).len() as u64, node.bytes);
                assert_eq!(node.last, held[held.len() - 1].0);
            }
            assert_eq!(at, entries.len());
        }
        // A node's counts change size when they cross an encoding's bounds.
        let one = vec![(b("f"), b("v"))];
        let mut node = Node::new((1, 0), &one);
        for seq in 1..200 {
            node.append((1, seq), &one);
        }
        let held: Vec<_> = (0..200).map(|seq| ((1, seq), one.clone())).collect();
        assert_eq!(node_listpack(&node, &held).len() as u64, node.bytes);
        let before = node.bytes;
        node.delete(100);
        // 200 (two bytes and a back-length) is now 100 (one), and 0 deleted now 100.
        assert_eq!(node.bytes, before - 1);
    }

    #[test]
    fn damaged_streams_are_refused() {
        let mut stream = sample();
        stream.groups[0].consumers[1].pending.push((5, 5));
        let mut out = Vec::new();
        write(&mut out, &stream);
        assert!(read(&mut Decoder::new(&out[..]), true).is_err());
        let mut out = Vec::new();
        write(&mut out, &sample());
        for cut in [1, out.len() / 3, out.len() - 1] {
            assert!(read(&mut Decoder::new(&out[..cut]), true).is_err());
        }
    }
}
