//! A stream as Redis's serialization carries it (`shale_rdb::stream::Stream`), for DUMP,
//! RESTORE, MIGRATE and RDB files: read whole from its records, and written as records.

use std::collections::HashMap;

use bytes::Bytes;
use shale_rdb::stream::{nodes_of, Consumer, Group, Id, Node, NodeLimits, Stream};
use shale_storage::metadata::KeyKind;
use shale_storage::Cf;

use super::id::StreamId;
use super::stored::{
    consumer_pending_sub, consumer_sub, encode_entry, encode_node, entry_sub, group_sub, node_sub,
    pending_sub, ConsumerRecord, GroupRecord, Nodes, PendingRecord, StreamMeta,
};
use super::{corrupt, Entry};
use crate::error::Error;
use crate::keyspace::Db;

fn id(pair: Id) -> StreamId {
    pair.into()
}

fn pair(id: StreamId) -> Id {
    id.into()
}

/// Whether `nodes` hold `entries` as nodes do: each its count of them, in order, between its
/// master ID and its last one, before the next node's.
fn nodes_hold(nodes: &[Node], entries: &[(Id, Vec<(Bytes, Bytes)>)]) -> bool {
    let mut at: usize = 0;
    for (i, node) in nodes.iter().enumerate() {
        let end = at.checked_add(node.live as usize);
        let Some(held) = end.and_then(|end| entries.get(at..end)) else {
            return false;
        };
        at += held.len();
        let inside = held
            .iter()
            .all(|(id, _)| node.master <= *id && *id <= node.last);
        let before_next = nodes.get(i + 1).is_none_or(|next| node.last < next.master);
        if !inside || node.master > node.last || !before_next {
            return false;
        }
    }
    at == entries.len()
}

impl<'a> Db<'a> {
    /// The whole stream at `key`, groups included; `None` if there is none.
    pub(crate) fn stream_value(&self, key: &[u8]) -> Result<Option<Stream>, Error> {
        let Some((stream, meta)) = self.stream_of(key)? else {
            return Ok(None);
        };
        let entries: Vec<Entry> =
            self.entries(key, &stream, (StreamId::MIN, StreamId::MAX), 0, false)?;
        let nodes = self.stream_nodes(key, &stream, &meta)?;
        let mut groups = Vec::new();
        for (name, record) in self.groups(key, &stream)? {
            let mut pending = Vec::new();
            let mut owned: HashMap<Bytes, Vec<Id>> = HashMap::new();
            self.scan_pending(
                key,
                &stream,
                &name,
                (StreamId::MIN, StreamId::MAX),
                &mut |id, p| {
                    pending.push((pair(id), p.delivered_ms, p.deliveries));
                    owned.entry(p.consumer).or_default().push(pair(id));
                    true
                },
            )?;
            let consumers = self
                .consumers(key, &stream, &name)?
                .into_iter()
                .map(|(consumer, c)| Consumer {
                    pending: owned.remove(&consumer).unwrap_or_default(),
                    name: consumer,
                    seen_ms: c.seen_ms,
                })
                .collect();
            groups.push(Group {
                name,
                last_id: pair(record.last_id),
                entries_read: record.entries_read,
                pending,
                consumers,
            });
        }
        Ok(Some(Stream {
            entries: entries
                .into_iter()
                .map(|(id, fields)| (pair(id), fields))
                .collect(),
            last_id: pair(meta.last_id),
            first_id: pair(meta.first_id),
            max_deleted: pair(meta.max_deleted),
            entries_added: meta.entries_added,
            groups,
            nodes,
        }))
    }

    /// Replaces whatever `key` holds with `stream`, expiring at `expire_at` (Unix ms, 0 for
    /// never), in its nodes (or, if they do not hold its entries, in those Redis would make of
    /// them). The caller holds the key's lock.
    pub(crate) fn store_stream(
        &self,
        key: &'a [u8],
        stream: &Stream,
        expire_at: u64,
    ) -> Result<(), Error> {
        let computed;
        let nodes = if nodes_hold(&stream.nodes, &stream.entries) {
            &stream.nodes
        } else {
            computed = nodes_of(&stream.entries, NodeLimits::default());
            &computed
        };
        // Each group's pending entries by owner, checked before anything is staged: every
        // pending entry has its owner.
        let mut owners: Vec<HashMap<Id, &Bytes>> = Vec::with_capacity(stream.groups.len());
        for group in &stream.groups {
            let owner: HashMap<Id, &Bytes> = group
                .consumers
                .iter()
                .flat_map(|c| c.pending.iter().map(move |id| (*id, &c.name)))
                .collect();
            if group.pending.iter().any(|p| !owner.contains_key(&p.0)) {
                return Err(corrupt());
            }
            owners.push(owner);
        }
        self.replace_with_collection(key, KeyKind::Stream, expire_at, |write| {
            for (entry, fields) in &stream.entries {
                write.put(Cf::Data, &entry_sub(id(*entry)), encode_entry(fields));
            }
            for node in nodes {
                write.put(Cf::Data, &node_sub(id(node.master)), encode_node(node));
            }
            for (group, owner) in stream.groups.iter().zip(&owners) {
                let record = GroupRecord {
                    last_id: id(group.last_id),
                    entries_read: group.entries_read,
                    pending: group.pending.len() as u64,
                };
                write.put(Cf::Data, &group_sub(&group.name), record.encode());
                for consumer in &group.consumers {
                    let record = ConsumerRecord {
                        seen_ms: consumer.seen_ms,
                        pending: consumer.pending.len() as u64,
                    };
                    write.put(
                        Cf::Data,
                        &consumer_sub(&group.name, &consumer.name),
                        record.encode(),
                    );
                    for entry in &consumer.pending {
                        let sub = consumer_pending_sub(&group.name, &consumer.name, id(*entry));
                        write.put(Cf::Data, &sub, Vec::new());
                    }
                }
                for (entry, delivered_ms, deliveries) in &group.pending {
                    let record = PendingRecord {
                        delivered_ms: *delivered_ms,
                        deliveries: *deliveries,
                        consumer: owner
                            .get(entry)
                            .map(|name| (*name).clone())
                            .unwrap_or_default(),
                    };
                    write.put(
                        Cf::Data,
                        &pending_sub(&group.name, id(*entry)),
                        record.encode(),
                    );
                }
            }
            write.size = stream.entries.len() as u64;
            write.extra = StreamMeta {
                last_id: id(stream.last_id),
                first_id: id(stream.first_id),
                max_deleted: id(stream.max_deleted),
                entries_added: stream.entries_added,
                groups: stream.groups.len() as u64,
                nodes: Nodes::Recorded {
                    tail: nodes.last().map(|node| id(node.master)),
                },
            }
            .encode();
        })
    }
}
