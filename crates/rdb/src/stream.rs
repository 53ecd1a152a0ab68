//! Streams as Redis 7.0 serializes them (`RDB_TYPE_STREAM_LISTPACKS_2`, and the older
//! `RDB_TYPE_STREAM_LISTPACKS` read): listpack nodes keyed by a master ID, then the length,
//! the ID counters and the consumer groups with their pending entries and consumers.
//!
//! A node's listpack starts with a master entry (`count · deleted · field count · fields ·
//! 0`); each entry follows as `flags · ms-delta · seq-delta · [field count] · (field) value ...
//! · lp-count`, its fields left out when they are the master's (flag 2) and its flag 1 set
//! once deleted. IDs are deltas from the master ID, in wrapping 64-bit arithmetic.

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
/// Redis's `stream-node-max-entries` and `stream-node-max-bytes` defaults.
const NODE_ENTRIES: usize = 100;
const NODE_BYTES: usize = 4096;
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
        node_entries(&input.string()?, master, &mut stream.entries)?;
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

/// Appends the live entries of one node, checking its layout as Redis's deep check does.
fn node_entries(
    lp: &[u8],
    master: Id,
    out: &mut Vec<(Id, Vec<(Bytes, Bytes)>)>,
) -> Result<(), RdbError> {
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
    for _ in 0..total {
        let flags = integer(&next()?)?;
        let ms = master.0.wrapping_add(integer(&next()?)? as u64);
        let seq = master.1.wrapping_add(integer(&next()?)? as u64);
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
    Ok(())
}

/// Writes the body of a stream of type 19.
pub fn write(out: &mut Vec<u8>, stream: &Stream) {
    let nodes = nodes(&stream.entries);
    length(out, nodes.len() as u64);
    for (master, lp) in &nodes {
        string(out, &id_bytes(*master));
        string(out, lp);
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

/// The entries in listpack nodes of at most Redis's default entries and about its bytes, each
/// with its first entry's fields as the master fields.
fn nodes(entries: &[(Id, Vec<(Bytes, Bytes)>)]) -> Vec<(Id, Vec<u8>)> {
    let mut nodes = Vec::new();
    let mut start = 0;
    while start < entries.len() {
        let master = entries[start].0;
        let master_fields: Vec<&[u8]> = entries[start].1.iter().map(|(f, _)| f.as_ref()).collect();
        let mut items: Vec<Bytes> = Vec::new();
        let mut bytes = 0;
        let mut end = start;
        while end < entries.len()
            && end - start < NODE_ENTRIES
            && (end == start || bytes < NODE_BYTES)
        {
            let (id, fields) = &entries[end];
            let same = fields.len() == master_fields.len()
                && fields
                    .iter()
                    .zip(&master_fields)
                    .all(|((f, _), m)| f.as_ref() == *m);
            let ms_delta = id.0.wrapping_sub(master.0) as i64;
            let seq_delta = id.1.wrapping_sub(master.1) as i64;
            let flags = if same { FLAG_SAME_FIELDS } else { 0 };
            items.push(Bytes::from(flags.to_string()));
            items.push(Bytes::from(ms_delta.to_string()));
            items.push(Bytes::from(seq_delta.to_string()));
            if same {
                items.extend(fields.iter().map(|(_, v)| v.clone()));
            } else {
                items.push(Bytes::from(fields.len().to_string()));
                for (f, v) in fields {
                    items.push(f.clone());
                    items.push(v.clone());
                }
            }
            let lp_count = if same {
                fields.len() + 3
            } else {
                2 * fields.len() + 4
            };
            items.push(Bytes::from(lp_count.to_string()));
            bytes += fields.iter().map(|(f, v)| f.len() + v.len()).sum::<usize>();
            end += 1;
        }
        let mut lp_items: Vec<Bytes> = vec![
            Bytes::from((end - start).to_string()),
            Bytes::from_static(b"0"),
            Bytes::from(master_fields.len().to_string()),
        ];
        lp_items.extend(master_fields.iter().map(|f| Bytes::copy_from_slice(f)));
        lp_items.push(Bytes::from_static(b"0"));
        lp_items.extend(items);
        nodes.push((
            master,
            listpack::encode(lp_items.iter().map(|i| i.as_ref())),
        ));
        start = end;
    }
    nodes
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
            .collect();
        Stream {
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
        assert_eq!(nodes(&stream.entries).len(), 3);
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
