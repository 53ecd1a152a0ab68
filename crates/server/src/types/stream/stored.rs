//! The stored form of a stream, records under `key|version` in the data family:
//!
//! | record | value |
//! |---|---|
//! | `E · id` | the entry: `count:u32 · (len:u32 · field · len:u32 · value)…` |
//! | `G · group` | a consumer group: `last_id · entries_read:i64 · pending:u64` |
//! | `C · group_len:u32 · group · consumer` | a consumer: `seen_ms:u64 · pending:u64` |
//! | `P · group_len:u32 · group · id` | a pending entry: `delivered_ms:u64 · deliveries:u64 · consumer` |
//! | `Q · group_len:u32 · group · consumer_len:u32 · consumer · id` | the same entry, in its consumer's list |
//! | `N · master_id` | a node: `live:u64 · deleted:u64 · bytes:u64 · last_id · count:u32 · (len:u32 · field)…` |
//!
//! IDs are 16 bytes big-endian, so entries, nodes and each pending list are scanned in ID
//! order. The metadata's size is the number of entries (XLEN), and its extra bytes
//! ([`StreamMeta`]) hold what XADD, XINFO and the groups' lag need without a scan.

use bytes::Bytes;
use shale_rdb::stream::Node;
pub use shale_storage::keys::prefix_end;

use super::id::StreamId;

pub const ENTRY: u8 = b'E';
pub const GROUP: u8 = b'G';
pub const CONSUMER: u8 = b'C';
pub const PENDING: u8 = b'P';
pub const CONSUMER_PENDING: u8 = b'Q';
pub const NODE: u8 = b'N';

/// Redis's `SCG_INVALID_ENTRIES_READ`: a group whose read count is unknown.
pub const UNKNOWN_READS: i64 = -1;

/// Which node records a stream has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nodes {
    /// None: the stream was stored before they were kept.
    Unrecorded,
    /// One per node; `tail` is the last node's master ID, `None` without nodes.
    Recorded { tail: Option<StreamId> },
}

/// The stream's own part of its metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamMeta {
    pub last_id: StreamId,
    /// 0-0 while empty.
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: u64,
    pub nodes: Nodes,
}

impl Default for StreamMeta {
    fn default() -> Self {
        StreamMeta {
            last_id: StreamId::MIN,
            first_id: StreamId::MIN,
            max_deleted: StreamId::MIN,
            entries_added: 0,
            groups: 0,
            nodes: Nodes::Recorded { tail: None },
        }
    }
}

/// The metadata of a stream stored before node records; after it, whether there is a tail
/// node (one byte) and its master ID.
const META_LEN: usize = 16 * 3 + 8 * 2;
const NODES_LEN: usize = 1 + 16;

impl StreamMeta {
    /// Empty bytes are a new stream's.
    pub fn decode(extra: &[u8]) -> StreamMeta {
        let id = |at: usize| StreamId::from_bytes(extra.get(at..at + 16).unwrap_or_default());
        let number = |at: usize| {
            extra
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_be_bytes)
        };
        StreamMeta {
            last_id: id(0).unwrap_or_default(),
            first_id: id(16).unwrap_or_default(),
            max_deleted: id(32).unwrap_or_default(),
            entries_added: number(48),
            groups: number(56),
            nodes: match extra.get(META_LEN) {
                None if extra.len() == META_LEN => Nodes::Unrecorded,
                Some(1) => Nodes::Recorded {
                    tail: id(META_LEN + 1),
                },
                _ => Nodes::Recorded { tail: None },
            },
        }
    }

    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(META_LEN + NODES_LEN);
        out.extend_from_slice(&self.last_id.to_bytes());
        out.extend_from_slice(&self.first_id.to_bytes());
        out.extend_from_slice(&self.max_deleted.to_bytes());
        out.extend_from_slice(&self.entries_added.to_be_bytes());
        out.extend_from_slice(&self.groups.to_be_bytes());
        if let Nodes::Recorded { tail } = self.nodes {
            out.push(tail.is_some() as u8);
            out.extend_from_slice(&tail.unwrap_or_default().to_bytes());
        }
        out.into()
    }
}

pub fn entry_sub(id: StreamId) -> Vec<u8> {
    [&[ENTRY][..], &id.to_bytes()].concat()
}

pub fn node_sub(master: StreamId) -> Vec<u8> {
    [&[NODE][..], &master.to_bytes()].concat()
}

pub fn encode_node(node: &Node) -> Vec<u8> {
    let names: usize = node.fields.iter().map(|f| 4 + f.len()).sum();
    let mut out = Vec::with_capacity(44 + names);
    for n in [node.live, node.deleted, node.bytes] {
        out.extend_from_slice(&n.to_be_bytes());
    }
    out.extend_from_slice(&StreamId::from(node.last).to_bytes());
    out.extend_from_slice(&(node.fields.len() as u32).to_be_bytes());
    for field in &node.fields {
        out.extend_from_slice(&(field.len() as u32).to_be_bytes());
        out.extend_from_slice(field);
    }
    out
}

/// The node at `master`; `None` if the record is damaged.
pub fn decode_node(master: StreamId, raw: &[u8]) -> Option<Node> {
    let number = |at: usize| Some(u64::from_be_bytes(raw.get(at..at + 8)?.try_into().ok()?));
    let word = |at: usize| Some(u32::from_be_bytes(raw.get(at..at + 4)?.try_into().ok()?) as usize);
    let count = word(40)?;
    let mut fields = Vec::with_capacity(count.min(1024));
    let mut at = 44;
    for _ in 0..count {
        let len = word(at)?;
        let end = (at + 4).checked_add(len)?;
        fields.push(Bytes::copy_from_slice(raw.get(at + 4..end)?));
        at = end;
    }
    Some(Node {
        master: master.into(),
        fields,
        live: number(0)?,
        deleted: number(8)?,
        bytes: number(16)?,
        last: StreamId::from_bytes(raw.get(24..40)?)?.into(),
    })
}

pub fn group_sub(group: &[u8]) -> Vec<u8> {
    [&[GROUP][..], group].concat()
}

fn with_group(tag: u8, group: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + group.len() + 40);
    out.push(tag);
    out.extend_from_slice(&(group.len() as u32).to_be_bytes());
    out.extend_from_slice(group);
    out
}

/// The prefix of every consumer of `group`.
pub fn consumers_prefix(group: &[u8]) -> Vec<u8> {
    with_group(CONSUMER, group)
}

pub fn consumer_sub(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    [consumers_prefix(group).as_slice(), consumer].concat()
}

/// The prefix of `group`'s pending entries.
pub fn pending_prefix(group: &[u8]) -> Vec<u8> {
    with_group(PENDING, group)
}

pub fn pending_sub(group: &[u8], id: StreamId) -> Vec<u8> {
    [pending_prefix(group).as_slice(), &id.to_bytes()].concat()
}

/// The prefix of `consumer`'s pending entries in `group`.
pub fn consumer_pending_prefix(group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut out = with_group(CONSUMER_PENDING, group);
    out.extend_from_slice(&(consumer.len() as u32).to_be_bytes());
    out.extend_from_slice(consumer);
    out
}

pub fn consumer_pending_sub(group: &[u8], consumer: &[u8], id: StreamId) -> Vec<u8> {
    [
        consumer_pending_prefix(group, consumer).as_slice(),
        &id.to_bytes(),
    ]
    .concat()
}

pub type Fields = Vec<(Bytes, Bytes)>;

pub fn encode_entry(fields: &[(Bytes, Bytes)]) -> Vec<u8> {
    let size: usize = fields.iter().map(|(f, v)| 8 + f.len() + v.len()).sum();
    let mut out = Vec::with_capacity(4 + size);
    out.extend_from_slice(&(fields.len() as u32).to_be_bytes());
    for (field, value) in fields {
        for part in [field, value] {
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part);
        }
    }
    out
}

/// `None` if the record is damaged.
pub fn decode_entry(raw: &[u8]) -> Option<Fields> {
    let mut at: usize = 0;
    let mut take = |len: usize| {
        let part = raw.get(at..at.checked_add(len)?)?;
        at += len;
        Some(part)
    };
    let word = |bytes: &[u8]| u32::from_be_bytes(bytes.try_into().unwrap_or_default()) as usize;
    let count = word(take(4)?);
    let mut fields = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let len = word(take(4)?);
        let field = Bytes::copy_from_slice(take(len)?);
        let len = word(take(4)?);
        let value = Bytes::copy_from_slice(take(len)?);
        fields.push((field, value));
    }
    Some(fields)
}

/// A consumer group's own record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRecord {
    pub last_id: StreamId,
    pub entries_read: i64,
    pub pending: u64,
}

impl GroupRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.last_id.to_bytes().to_vec();
        out.extend_from_slice(&self.entries_read.to_be_bytes());
        out.extend_from_slice(&self.pending.to_be_bytes());
        out
    }

    pub fn decode(raw: &[u8]) -> Option<GroupRecord> {
        Some(GroupRecord {
            last_id: StreamId::from_bytes(raw)?,
            entries_read: i64::from_be_bytes(raw.get(16..24)?.try_into().ok()?),
            pending: u64::from_be_bytes(raw.get(24..32)?.try_into().ok()?),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub seen_ms: u64,
    pub pending: u64,
}

impl ConsumerRecord {
    pub fn encode(&self) -> Vec<u8> {
        [self.seen_ms.to_be_bytes(), self.pending.to_be_bytes()].concat()
    }

    pub fn decode(raw: &[u8]) -> Option<ConsumerRecord> {
        Some(ConsumerRecord {
            seen_ms: u64::from_be_bytes(raw.get(..8)?.try_into().ok()?),
            pending: u64::from_be_bytes(raw.get(8..16)?.try_into().ok()?),
        })
    }
}

/// An entry delivered to a consumer and not yet acknowledged (Redis's NACK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRecord {
    pub delivered_ms: u64,
    pub deliveries: u64,
    pub consumer: Bytes,
}

impl PendingRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.consumer.len());
        out.extend_from_slice(&self.delivered_ms.to_be_bytes());
        out.extend_from_slice(&self.deliveries.to_be_bytes());
        out.extend_from_slice(&self.consumer);
        out
    }

    pub fn decode(raw: &[u8]) -> Option<PendingRecord> {
        Some(PendingRecord {
            delivered_ms: u64::from_be_bytes(raw.get(..8)?.try_into().ok()?),
            deliveries: u64::from_be_bytes(raw.get(8..16)?.try_into().ok()?),
            consumer: Bytes::copy_from_slice(raw.get(16..)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let meta = StreamMeta {
            last_id: StreamId::new(5, 1),
            first_id: StreamId::new(1, 0),
            max_deleted: StreamId::new(3, 3),
            entries_added: 9,
            groups: 2,
            nodes: Nodes::Recorded {
                tail: Some(StreamId::new(4, 0)),
            },
        };
        assert_eq!(StreamMeta::decode(&meta.encode()), meta);
        assert_eq!(StreamMeta::decode(&[]), StreamMeta::default());
        let unrecorded = StreamMeta {
            nodes: Nodes::Unrecorded,
            ..meta
        };
        assert_eq!(unrecorded.encode().len(), META_LEN);
        assert_eq!(StreamMeta::decode(&unrecorded.encode()), unrecorded);
        let fields = vec![
            (Bytes::from_static(b"a"), Bytes::from_static(b"")),
            (Bytes::from_static(b""), Bytes::from_static(b"xyz")),
        ];
        assert_eq!(decode_entry(&encode_entry(&fields)), Some(fields));
        assert_eq!(decode_entry(&[0, 0, 0, 2, 0, 0, 0, 9]), None);
        let pending = PendingRecord {
            delivered_ms: 7,
            deliveries: 2,
            consumer: Bytes::from_static(b"bob"),
        };
        assert_eq!(PendingRecord::decode(&pending.encode()), Some(pending));
    }

    #[test]
    fn node_records_are_these_bytes() {
        let node = Node {
            master: (7, 1),
            fields: vec![Bytes::from_static(b"ab"), Bytes::new()],
            live: 3,
            deleted: 1,
            bytes: 300,
            last: (9, 2),
        };
        let raw = encode_node(&node);
        let mut want = vec![0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1];
        want.extend([0, 0, 0, 0, 0, 0, 1, 44]);
        want.extend([0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 2]);
        want.extend([0, 0, 0, 2, 0, 0, 0, 2, b'a', b'b', 0, 0, 0, 0]);
        assert_eq!(raw, want);
        assert_eq!(decode_node(StreamId::new(7, 1), &raw), Some(node));
        assert_eq!(
            decode_node(StreamId::new(7, 1), &raw[..raw.len() - 1]),
            None
        );
        assert_eq!(node_sub(StreamId::new(1, 2))[..2], [b'N', 0]);
        // The meta of a stream with a tail node: the old 64 bytes, a 1, the tail's ID.
        let meta = StreamMeta {
            nodes: Nodes::Recorded {
                tail: Some(StreamId::new(1, 2)),
            },
            ..StreamMeta::default()
        };
        let encoded = meta.encode();
        assert_eq!(encoded.len(), 81);
        assert_eq!(
            encoded[64..],
            [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
        );
    }

    #[test]
    fn keys_keep_groups_and_consumers_apart() {
        // A group named "a" must not see the pending entries of a group named "ab".
        assert!(!pending_sub(b"ab", StreamId::MIN).starts_with(&pending_prefix(b"a")));
        assert!(!consumer_pending_sub(b"g", b"ab", StreamId::MIN)
            .starts_with(&consumer_pending_prefix(b"g", b"a")));
        assert!(entry_sub(StreamId::new(1, 2)) < entry_sub(StreamId::new(1, 3)));
    }
}
