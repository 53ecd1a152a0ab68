//! A stream's nodes. Redis keeps a stream's entries in listpacks, the nodes of a radix tree
//! keyed by their first ID, and trims by them: `~` removes whole nodes only, LIMIT counts the
//! entries of the nodes removed, and XINFO STREAM reports the nodes and the tree's own nodes.
//! Here each entry is a record; beside them, each node has one (`N · master ID`, a [`Node`])
//! with its counts and the size its listpack would have, so every boundary falls where
//! Redis's `streamAppendItem` puts it and a trim reads one record per node it removes, never
//! the entries of whole nodes.

use std::collections::BTreeMap;

use shale_rdb::stream::{append_entry, Node, NodeLimits};
use shale_storage::{Cf, ScanDirection};

use super::id::StreamId;
use super::stored::{
    decode_entry, decode_node, encode_node, entry_sub, node_sub, Nodes, StreamMeta, ENTRY, NODE,
};
use super::{corrupt, StreamWrite, Trim, TrimTo};
use crate::error::Error;
use crate::keyspace::Db;
use crate::types::collection::Collection;

/// The entry records' suffixes just past `id`.
fn entries_after(id: StreamId) -> Vec<u8> {
    match id.next() {
        Some(next) => entry_sub(next),
        None => [entry_sub(id).as_slice(), &[0]].concat(),
    }
}

/// Nodes a write changed (`None`: removed), by master ID.
pub(super) type NodeEdits = BTreeMap<StreamId, Option<Node>>;

impl<'a> Db<'a> {
    /// Visits the nodes from `from` on, or from `from` down, until `visit` returns false.
    fn scan_nodes(
        &self,
        key: &[u8],
        stream: &Collection,
        from: StreamId,
        rev: bool,
        visit: &mut dyn FnMut(Node) -> bool,
    ) -> Result<(), Error> {
        let (lower, upper, direction) = if rev {
            let upper = [node_sub(from).as_slice(), &[0]].concat();
            (vec![NODE], upper, ScanDirection::Reverse)
        } else {
            (node_sub(from), vec![NODE + 1], ScanDirection::Forward)
        };
        let mut damaged = false;
        self.scan_elements(
            Cf::Data,
            key,
            stream,
            (&lower, Some(&upper)),
            direction,
            &mut |sub, raw| {
                let node = sub
                    .get(1..)
                    .and_then(StreamId::from_bytes)
                    .and_then(|master| decode_node(master, raw));
                match node {
                    Some(node) => visit(node),
                    None => {
                        damaged = true;
                        false
                    }
                }
            },
        )?;
        match damaged {
            true => Err(corrupt()),
            false => Ok(()),
        }
    }

    /// The nodes of a stream stored before node records: those Redis would have made of its
    /// entries with the default limits, in order.
    fn unrecorded_nodes(
        &self,
        key: &[u8],
        stream: &Collection,
        visit: &mut dyn FnMut(Node),
    ) -> Result<(), Error> {
        let mut tail = None;
        let mut damaged = false;
        self.scan_entries(
            key,
            stream,
            (StreamId::MIN, StreamId::MAX),
            false,
            &mut |id, raw| {
                let Some(fields) = decode_entry(raw) else {
                    damaged = true;
                    return false;
                };
                let (node, full) =
                    append_entry(tail.take(), NodeLimits::default(), id.into(), &fields);
                if let Some(full) = full {
                    visit(full);
                }
                tail = Some(node);
                true
            },
        )?;
        if damaged {
            return Err(corrupt());
        }
        if let Some(node) = tail {
            visit(node);
        }
        Ok(())
    }

    /// Every node, in order.
    pub(super) fn stream_nodes(
        &self,
        key: &[u8],
        stream: &Collection,
        meta: &StreamMeta,
    ) -> Result<Vec<Node>, Error> {
        let mut nodes = Vec::new();
        match meta.nodes {
            Nodes::Recorded { .. } => {
                self.scan_nodes(key, stream, StreamId::MIN, false, &mut |node| {
                    nodes.push(node);
                    true
                })?
            }
            Nodes::Unrecorded => {
                self.unrecorded_nodes(key, stream, &mut |node| nodes.push(node))?
            }
        }
        Ok(nodes)
    }

    /// XINFO STREAM's `radix-tree-keys` and `radix-tree-nodes`: the nodes, and the nodes of the
    /// radix tree that holds them.
    pub(super) fn radix_tree(
        &self,
        key: &[u8],
        stream: &Collection,
        meta: &StreamMeta,
    ) -> Result<(u64, u64), Error> {
        let mut rax = RaxCount::default();
        let mut push = |node: Node| rax.push(StreamId::from(node.master).to_bytes());
        match meta.nodes {
            Nodes::Recorded { .. } => {
                self.scan_nodes(key, stream, StreamId::MIN, false, &mut |node| {
                    push(node);
                    true
                })?
            }
            Nodes::Unrecorded => self.unrecorded_nodes(key, stream, &mut push)?,
        }
        Ok((rax.keys, rax.finish()))
    }

    /// Opens the stream at `key` for a write that changes its entries (see `open_stream`). A
    /// stream stored before node records gets them first, in a write of their own.
    pub(super) fn open_stream_nodes(
        &self,
        key: &'a [u8],
        create: bool,
    ) -> Result<Option<StreamWrite<'a>>, Error> {
        let Some(mut stream) = self.open_stream(key, create)? else {
            return Ok(None);
        };
        if stream.meta.nodes != Nodes::Unrecorded {
            return Ok(Some(stream));
        }
        let collection = stream.write.collection();
        let mut tail = None;
        self.unrecorded_nodes(key, &collection, &mut |node| {
            let master = StreamId::from(node.master);
            stream
                .write
                .put(Cf::Data, &node_sub(master), encode_node(&node));
            tail = Some(master);
        })?;
        stream.meta.nodes = Nodes::Recorded { tail };
        stream.commit()?;
        self.open_stream(key, create)
    }

    /// The last node, if the stream has one.
    pub(super) fn tail_node(&self, stream: &StreamWrite<'_>) -> Result<Option<Node>, Error> {
        let Nodes::Recorded { tail: Some(master) } = stream.meta.nodes else {
            return Ok(None);
        };
        let raw = stream.write.get(Cf::Data, &node_sub(master))?;
        let node = raw.and_then(|raw| decode_node(master, &raw));
        node.ok_or_else(corrupt).map(Some)
    }

    /// Stages a trim as Redis's `streamTrim` makes it: whole nodes from the oldest while the
    /// threshold and LIMIT allow, then, unless approximate, the entries the threshold still
    /// asks for from the next node. `tail` is XADD's last node, changed and not stored yet,
    /// read in place of the stored one (`None` after, if the trim removed it). Returns the
    /// entries removed.
    pub(super) fn trim_nodes(
        &self,
        key: &[u8],
        stream: &mut StreamWrite<'_>,
        trim: Trim,
        tail: &mut Option<Node>,
    ) -> Result<u64, Error> {
        let collection = stream.write.collection();
        let mut walk = Walk {
            trim,
            length: stream.write.size,
            removed: 0,
            nodes_removed: false,
            stop: None,
        };
        let mut tail_seen = false;
        self.scan_nodes(
            key,
            &collection,
            StreamId::MIN,
            false,
            &mut |stored| match tail.as_ref().filter(|t| t.master == stored.master) {
                Some(changed) => {
                    tail_seen = true;
                    walk.take(changed.clone())
                }
                None => walk.take(stored),
            },
        )?;
        // XADD's new node is after every stored one.
        if walk.stop.is_none() && !tail_seen {
            if let Some(node) = tail.as_ref() {
                walk.take(node.clone());
            }
        }
        // Whole nodes: their entries and records in two range deletes.
        let kept = walk
            .stop
            .as_ref()
            .map(|(node, _)| StreamId::from(node.master));
        let mut resume = kept;
        if walk.nodes_removed {
            let (entries_end, nodes_end) = match kept {
                Some(master) => (entry_sub(master), node_sub(master)),
                None => (vec![ENTRY + 1], vec![NODE + 1]),
            };
            stream.write.delete_range(Cf::Data, &[ENTRY], &entries_end);
            stream.write.delete_range(Cf::Data, &[NODE], &nodes_end);
            if kept.is_none() {
                *tail = None;
                stream.meta.nodes = Nodes::Recorded { tail: None };
            }
        }
        // Entries within the next node, its oldest first.
        if let Some((mut node, true)) = walk.stop.take() {
            let (mut gone, mut last_gone) = (0, None);
            let master = StreamId::from(node.master);
            let range = (master, StreamId::from(node.last));
            self.scan_entries(key, &collection, range, false, &mut |id, _| {
                let stop = match trim.to {
                    TrimTo::MaxLen(max) => walk.length <= max,
                    TrimTo::MinId(min) => id >= min,
                };
                if !stop {
                    gone += 1;
                    walk.length -= 1;
                    last_gone = Some(id);
                }
                !stop
            })?;
            if let Some(last) = last_gone {
                stream
                    .write
                    .delete_range(Cf::Data, &entry_sub(master), &entries_after(last));
                node.delete(gone);
                walk.removed += gone;
                resume = last.next();
                match tail.as_mut().filter(|t| t.master == node.master) {
                    Some(changed) => *changed = node,
                    None => stream
                        .write
                        .put(Cf::Data, &node_sub(master), encode_node(&node)),
                }
            }
        }
        stream.write.size = walk.length;
        if walk.length == 0 {
            stream.meta.first_id = StreamId::MIN;
        } else if walk.removed > 0 {
            // The first entry left is stored after what went, or is XADD's, not stored yet.
            let mut first = None;
            if let Some(from) = resume {
                self.scan_entries(
                    key,
                    &collection,
                    (from, StreamId::MAX),
                    false,
                    &mut |id, _| {
                        first = Some(id);
                        false
                    },
                )?;
            }
            let added = tail.as_ref().map(|node| StreamId::from(node.last));
            stream.meta.first_id = first.or(added).unwrap_or_default();
        }
        Ok(walk.removed)
    }

    /// Flags the entry `id` deleted in its node, which goes when it has no live entry left
    /// (`streamIteratorRemoveEntry`). `edits` holds the nodes this write changed.
    pub(super) fn delete_in_node(
        &self,
        key: &[u8],
        stream: &Collection,
        edits: &mut NodeEdits,
        id: StreamId,
    ) -> Result<(), Error> {
        let mut holder = None;
        self.scan_nodes(key, stream, id, true, &mut |node| {
            holder = Some(node);
            false
        })?;
        let node = holder.ok_or_else(corrupt)?;
        let edit = edits.entry(node.master.into()).or_insert(Some(node));
        let live = edit.as_ref().map(|node| node.live).ok_or_else(corrupt)?;
        if live <= 1 {
            *edit = None;
        } else if let Some(node) = edit {
            node.delete(1);
        }
        Ok(())
    }

    /// Stages `edits`, and the stream's new last node if its last one went.
    pub(super) fn stage_node_edits(
        &self,
        key: &[u8],
        stream: &mut StreamWrite<'_>,
        edits: &NodeEdits,
    ) -> Result<(), Error> {
        for (master, edit) in edits {
            match edit {
                Some(node) => stream
                    .write
                    .put(Cf::Data, &node_sub(*master), encode_node(node)),
                None => stream.write.delete(Cf::Data, &node_sub(*master)),
            }
        }
        let Nodes::Recorded { tail: Some(tail) } = stream.meta.nodes else {
            return Ok(());
        };
        if !matches!(edits.get(&tail), Some(None)) {
            return Ok(());
        }
        let collection = stream.write.collection();
        let mut last = None;
        self.scan_nodes(key, &collection, tail, true, &mut |node| {
            let master = StreamId::from(node.master);
            if matches!(edits.get(&master), Some(None)) {
                return true;
            }
            last = Some(master);
            false
        })?;
        stream.meta.nodes = Nodes::Recorded { tail: last };
        Ok(())
    }
}

/// `streamTrim`'s walk over the nodes, oldest first.
struct Walk {
    trim: Trim,
    /// The stream's length as the walk leaves it.
    length: u64,
    /// Entries removed.
    removed: u64,
    /// Whether any node goes whole (one without live entries counts none).
    nodes_removed: bool,
    /// The node the walk stopped at, and whether entries within it go.
    stop: Option<(Node, bool)>,
}

impl Walk {
    /// Takes the next node; false when the walk stops at it.
    fn take(&mut self, node: Node) -> bool {
        if let TrimTo::MaxLen(max) = self.trim.to {
            if self.length <= max {
                self.stop = Some((node, false));
                return false;
            }
        }
        if self.trim.limit != 0 && self.removed + node.live > self.trim.limit {
            self.stop = Some((node, false));
            return false;
        }
        let whole = match self.trim.to {
            TrimTo::MaxLen(max) => self.length.saturating_sub(node.live) >= max,
            TrimTo::MinId(min) => StreamId::from(node.last) < min,
        };
        if whole {
            self.length = self.length.saturating_sub(node.live);
            self.removed += node.live;
            self.nodes_removed = true;
            return true;
        }
        self.stop = Some((node, !self.trim.approx));
        false
    }
}

/// The number of nodes of Redis's radix tree (`rax.c`) over 16-byte keys pushed in order.
/// Rax keeps its tree compressed through inserts and deletes, so the count follows from the
/// keys alone: the root, each key, each branching point below the root, and, on each edge of
/// more than one byte down from a branching point, the node rax splits off after the byte
/// that branches. `spine` holds the depths of the last key's branching ancestors, the root
/// first, then the key's own.
#[derive(Default)]
struct RaxCount {
    keys: u64,
    branches: u64,
    /// Edges of more than a byte below branching points, then below the root.
    long_edges: u64,
    root_long_edges: u64,
    root_children: u64,
    spine: Vec<usize>,
    last: Option<[u8; 16]>,
}

impl RaxCount {
    fn push(&mut self, key: [u8; 16]) {
        self.keys += 1;
        let Some(last) = self.last.replace(key) else {
            self.spine = vec![0, 16];
            self.root_children = 1;
            return;
        };
        let common = last.iter().zip(&key).take_while(|(a, b)| a == b).count();
        while let Some(&child) = self.spine.last().filter(|&&depth| depth > common) {
            self.spine.pop();
            let parent = self.spine.last().map_or(0, |&depth| depth.max(common));
            self.edge(parent, child);
        }
        match self.spine.last() {
            Some(&depth) if depth < common => {
                self.spine.push(common);
                self.branches += 1;
            }
            _ if common == 0 => self.root_children += 1,
            _ => {}
        }
        self.spine.push(16);
    }

    fn edge(&mut self, parent: usize, child: usize) {
        if child - parent > 1 {
            match parent {
                0 => self.root_long_edges += 1,
                _ => self.long_edges += 1,
            }
        }
    }

    fn finish(mut self) -> u64 {
        while self.spine.len() > 1 {
            if let Some(child) = self.spine.pop() {
                let parent = self.spine.last().copied().unwrap_or(0);
                self.edge(parent, child);
            }
        }
        // A root with one child is one compressed node down to it.
        let root_edges = match self.root_children {
            0 | 1 => 0,
            _ => self.root_long_edges,
        };
        1 + self.keys + self.branches + self.long_edges + root_edges
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use shale_storage::metadata::KeyKind;
    use shale_storage::MemoryEngine;

    use super::super::stored::encode_entry;
    use super::super::{AddId, Fields};
    use super::*;
    use crate::keyspace::Keyspace;

    fn key(ms: u64, seq: u64) -> [u8; 16] {
        StreamId::new(ms, seq).to_bytes()
    }

    /// The count from its definition: the root, the keys, the branching points and their
    /// children, as distinct prefixes.
    fn by_prefixes(keys: &[[u8; 16]]) -> u64 {
        let mut prefixes = std::collections::HashSet::new();
        prefixes.insert(Vec::new());
        for key in keys {
            prefixes.insert(key.to_vec());
        }
        for pair in keys.windows(2) {
            let common = pair[0]
                .iter()
                .zip(&pair[1])
                .take_while(|(a, b)| a == b)
                .count();
            prefixes.insert(pair[0][..common].to_vec());
            prefixes.insert(pair[0][..common + 1].to_vec());
            prefixes.insert(pair[1][..common + 1].to_vec());
        }
        prefixes.len() as u64
    }

    fn count(keys: &[[u8; 16]]) -> u64 {
        let mut rax = RaxCount::default();
        for key in keys {
            rax.push(*key);
        }
        rax.finish()
    }

    #[test]
    fn rax_nodes_are_redis_counts() {
        // Redis 7.0.15's XINFO STREAM after 1,000 XADDs of IDs 1-0 to 1000-0 (nodes at 1,
        // 101, ... 901), and after trims leave the nodes at 601 ... 1001.
        let nodes: Vec<_> = (0..10).map(|i| key(i * 100 + 1, 0)).collect();
        assert_eq!(count(&nodes), 26);
        let later: Vec<_> = (6..11).map(|i| key(i * 100 + 1, 0)).collect();
        assert_eq!(count(&later), 14);
        assert_eq!(count(&[]), 1);
        assert_eq!(count(&[key(5, 0)]), 2);
    }

    #[test]
    fn rax_nodes_follow_from_the_keys() {
        let mut seed = 7u64;
        let mut next = |bound: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % bound
        };
        for _ in 0..2000 {
            let mut keys: Vec<[u8; 16]> = (0..next(40))
                .map(|_| match next(3) {
                    0 => key(next(300), next(4)),
                    1 => key(next(1 << 20), 0),
                    _ => {
                        let mut k = [0u8; 16];
                        for b in &mut k {
                            *b = [0, 1, 2, 255][next(4) as usize];
                        }
                        k
                    }
                })
                .collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(count(&keys), by_prefixes(&keys), "{keys:?}");
        }
    }

    #[test]
    fn a_stream_stored_before_node_records_reads_trims_and_dumps() {
        let ks = Keyspace::open(Arc::new(MemoryEngine::default()), 16).expect("keyspace");
        let db = ks.db(0);
        let entries: Vec<(StreamId, Fields)> = (1..=250)
            .map(|i| {
                let value = Bytes::from(format!("v{i}"));
                (StreamId::new(i, 0), vec![(Bytes::from_static(b"f"), value)])
            })
            .collect();
        // As streams were stored before node records: entries and 64 bytes of metadata.
        {
            let _guard = db.lock(&[b"old"]).expect("lock");
            db.replace_with_collection(b"old", KeyKind::Stream, 0, |write| {
                for (id, fields) in &entries {
                    write.put(Cf::Data, &entry_sub(*id), encode_entry(fields));
                }
                write.size = entries.len() as u64;
                write.extra = StreamMeta {
                    last_id: StreamId::new(250, 0),
                    first_id: StreamId::new(1, 0),
                    entries_added: 250,
                    nodes: Nodes::Unrecorded,
                    ..StreamMeta::default()
                }
                .encode();
            })
            .expect("write");
        }
        for (id, fields) in &entries {
            let id = AddId::Explicit(*id);
            let limits = NodeLimits::default();
            db.xadd(b"new", id, false, None, fields, limits)
                .expect("xadd");
        }
        let info = |key: &[u8]| {
            let info = db.xinfo_stream(key).expect("info");
            (info.length, info.radix_keys, info.radix_nodes)
        };
        assert_eq!(info(b"old"), (250, 3, 8));
        assert_eq!(info(b"new"), (250, 3, 8));
        let all = |key: &[u8]| db.xrange(key, StreamId::MIN, StreamId::MAX, 0, false);
        assert_eq!(all(b"old").expect("old"), all(b"new").expect("new"));
        let value = |key: &[u8]| db.stream_value(key).expect("value");
        assert_eq!(value(b"old"), value(b"new"));
        let trim = Trim {
            to: TrimTo::MaxLen(120),
            approx: true,
            limit: 10_000,
        };
        assert_eq!(db.xtrim(b"old", trim).expect("trim"), 100);
        assert_eq!(db.xtrim(b"new", trim).expect("trim"), 100);
        assert_eq!(info(b"old"), info(b"new"));
        assert_eq!(value(b"old"), value(b"new"));
        // The trim gave the old stream its node records.
        let meta = db
            .stream_of(b"old")
            .expect("meta")
            .map(|(_, meta)| meta.nodes);
        let tail = Some(StreamId::new(201, 0));
        assert_eq!(meta, Some(Nodes::Recorded { tail }));
    }
}
