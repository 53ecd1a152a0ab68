//! The cluster's topology as its control plane pushes it (`CLUSTERX SETNODES`): the nodes, the
//! master that owns each slot, and the version. Parsing and printing only, no I/O, with the
//! texts Apache Kvrocks Controller sends and parses (docs/research/kvrocks-controller-contract.md).

use std::fmt::Write;

use shale_storage::keys::SLOTS;

use crate::error::Error;

/// Node IDs are 40 bytes; the controller makes them of `[a-zA-Z0-9]`, Redis of hex digits.
pub const NODE_ID_LEN: usize = 40;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Master,
    /// A replica of the master with this ID.
    Replica(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub host: String,
    pub port: u16,
    pub role: Role,
}

impl Node {
    /// `host:port`, as MOVED names a node.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn is_master(&self) -> bool {
        self.role == Role::Master
    }
}

/// Why a topology text or a slot range is refused, in Kvrocks's words (after `ERR `).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("Invalid cluster nodes info")]
    NodesInfo,
    #[error("Invalid cluster node id")]
    NodeId,
    #[error("Invalid cluster node port")]
    Port,
    #[error("Invalid cluster node role")]
    Role,
    #[error("Slot is out of range")]
    SlotOutOfRange,
    #[error("Slot distribution is overlapped")]
    Overlapped,
    #[error("Invalid nodes definition: Missing newline between node entries.")]
    MissingNewline,
}

impl From<TopologyError> for Error {
    fn from(err: TopologyError) -> Error {
        Error::msg(err.to_string())
    }
}

/// A run of slots, first and last included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
}

impl SlotRange {
    /// `N` or `A-B` with `A <= B` (CLUSTERX MIGRATE, SETSLOT); SETNODES wants `A < B`, checked
    /// by its parser.
    pub fn parse(text: &str) -> Option<SlotRange> {
        let slot = |s: &str| {
            s.parse::<u16>()
                .ok()
                .filter(|&n| n < SLOTS && !s.starts_with('+'))
        };
        let (first, last) = match text.split_once('-') {
            Some((a, b)) => (slot(a)?, slot(b)?),
            None => (slot(text)?, slot(text)?),
        };
        (first <= last).then_some(SlotRange { first, last })
    }

    pub fn contains(&self, slot: u16) -> bool {
        (self.first..=self.last).contains(&slot)
    }

    pub fn slots(&self) -> std::ops::RangeInclusive<u16> {
        self.first..=self.last
    }
}

/// `N` for one slot, `A-B` for more, as the controller writes and reads them.
impl std::fmt::Display for SlotRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub version: i64,
    pub nodes: Vec<Node>,
    /// The node (an index into `nodes`) that owns each slot.
    owners: Vec<Option<u16>>,
}

impl Topology {
    /// Reads SETNODES' text: a line per node, `<id> <host> <port> master - <slots...>` or
    /// `<id> <host> <port> slave <master-id>`, slots as `N` or `A-B`. Empty lines and repeated
    /// spaces are ignored, replicas may come before their master, as Kvrocks accepts them.
    pub fn parse(text: &str, version: i64) -> Result<Topology, TopologyError> {
        let mut nodes: Vec<Node> = Vec::new();
        let mut owners = vec![None; SLOTS as usize];
        for line in text.split('\n') {
            let fields: Vec<&str> = line.split(' ').filter(|f| !f.is_empty()).collect();
            if fields.is_empty() {
                continue;
            }
            if fields.len() < 5 {
                return Err(TopologyError::NodesInfo);
            }
            let id = fields[0];
            if id.len() != NODE_ID_LEN || nodes.iter().any(|n| n.id == id) {
                return Err(TopologyError::NodeId);
            }
            let port = fields[2].parse::<u16>().map_err(|_| TopologyError::Port)?;
            let role = match fields[3].to_ascii_lowercase().as_str() {
                "master" => {
                    if fields[4] != "-" {
                        return Err(TopologyError::NodesInfo);
                    }
                    Role::Master
                }
                "slave" | "replica" => {
                    if fields[4].len() != NODE_ID_LEN {
                        return Err(TopologyError::NodeId);
                    }
                    if fields.len() != 5 {
                        return Err(TopologyError::NodesInfo);
                    }
                    Role::Replica(fields[4].to_string())
                }
                _ => return Err(TopologyError::Role),
            };
            let index = nodes.len() as u16;
            for text in &fields[5..] {
                if text.len() == NODE_ID_LEN {
                    return Err(TopologyError::MissingNewline);
                }
                let range = SlotRange::parse(text)
                    .filter(|r| r.first < r.last || !text.contains('-'))
                    .ok_or(TopologyError::SlotOutOfRange)?;
                for slot in range.slots() {
                    let owner = &mut owners[slot as usize];
                    if owner.is_some() {
                        return Err(TopologyError::Overlapped);
                    }
                    *owner = Some(index);
                }
            }
            nodes.push(Node {
                id: id.to_string(),
                host: fields[1].to_string(),
                port,
                role,
            });
        }
        Ok(Topology {
            version,
            nodes,
            owners,
        })
    }

    /// The text [`Topology::parse`] reads back, masters with their slots.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (index, node) in self.nodes.iter().enumerate() {
            let _ = write!(out, "{} {} {} ", node.id, node.host, node.port);
            match &node.role {
                Role::Master => {
                    out.push_str("master -");
                    for range in self.ranges_of(index) {
                        let _ = write!(out, " {range}");
                    }
                }
                Role::Replica(master) => {
                    let _ = write!(out, "slave {master}");
                }
            }
            out.push('\n');
        }
        out
    }

    pub fn owner(&self, slot: u16) -> Option<&Node> {
        let index = (*self.owners.get(slot as usize)?)?;
        self.nodes.get(index as usize)
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Gives `slot` to the node at `index` (CLUSTERX SETSLOT, a finished migration).
    pub fn assign(&mut self, slot: u16, index: usize) {
        if let Some(owner) = self.owners.get_mut(slot as usize) {
            *owner = Some(index as u16);
        }
    }

    /// The runs of slots the node at `index` owns, in order.
    pub fn ranges_of(&self, index: usize) -> Vec<SlotRange> {
        self.runs()
            .into_iter()
            .filter(|(_, owner)| *owner == index)
            .map(|(range, _)| range)
            .collect()
    }

    /// Every maximal run of slots with one owner, in slot order, with that owner's index.
    pub fn runs(&self) -> Vec<(SlotRange, usize)> {
        let mut runs: Vec<(SlotRange, usize)> = Vec::new();
        for (slot, owner) in self.owners.iter().enumerate() {
            let Some(owner) = owner.map(usize::from) else {
                continue;
            };
            let slot = slot as u16;
            match runs.last_mut() {
                Some((range, last)) if *last == owner && range.last + 1 == slot => {
                    range.last = slot
                }
                _ => runs.push((
                    SlotRange {
                        first: slot,
                        last: slot,
                    },
                    owner,
                )),
            }
        }
        runs
    }

    /// The replicas of the master with ID `master`, in topology order.
    pub fn replicas_of<'a>(&'a self, master: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes
            .iter()
            .filter(move |n| matches!(&n.role, Role::Replica(m) if m == master))
    }

    pub fn slots_assigned(&self) -> usize {
        self.owners.iter().filter(|o| o.is_some()).count()
    }

    /// Masters that own at least one slot (CLUSTER INFO's `cluster_size`).
    pub fn size(&self) -> usize {
        let mut owning = vec![false; self.nodes.len()];
        for owner in self.owners.iter().flatten() {
            owning[*owner as usize] = true;
        }
        owning.iter().filter(|&&o| o).count()
    }

    /// CLUSTER NODES: Redis's format, one `\n`-ended line per node, the topology version as
    /// every node's config epoch, `myself` first among the flags (the controller reads the
    /// role after the first comma). There is no cluster bus: its port is shown as Redis
    /// derives it, every link as connected.
    pub fn nodes_text(&self, myself: Option<&str>, now_ms: u64) -> String {
        let mut out = String::new();
        for index in 0..self.nodes.len() {
            out.push_str(&self.node_line(index, myself, now_ms));
            out.push('\n');
        }
        out
    }

    /// The CLUSTER NODES line of the node at `index`, without its newline.
    pub fn node_line(&self, index: usize, myself: Option<&str>, now_ms: u64) -> String {
        let node = &self.nodes[index];
        let me = myself == Some(node.id.as_str());
        let role = if node.is_master() { "master" } else { "slave" };
        let flags = if me {
            format!("myself,{role}")
        } else {
            role.to_string()
        };
        let master = match &node.role {
            Role::Master => "-",
            Role::Replica(id) => id.as_str(),
        };
        let pong = if me { 0 } else { now_ms };
        let mut line = format!(
            "{} {}:{}@{} {flags} {master} 0 {pong} {} connected",
            node.id,
            node.host,
            node.port,
            u32::from(node.port) + 10000,
            self.version
        );
        for range in self.ranges_of(index) {
            let _ = write!(line, " {range}");
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a0bbd6a0ef4af9ac8cb79d8ba8e0de4bd2f9e3c8";
    const B: &str = "Zq8fK2mB0xLw7rTn3Y5vPc1HsJd9GeQa6UoIi4Ek";
    const C: &str = "c0bbd6a0ef4af9ac8cb79d8ba8e0de4bd2f9e3c8";

    #[test]
    fn reads_what_the_controller_sends() {
        // A replica before its master, a master without slots written with a trailing
        // space, single slots, and the final newline.
        let text = format!(
            "{C} 127.0.0.1 7003 slave {A}\n{A} 127.0.0.1 7001 master - 0-5460 5462\n{B} 127.0.0.1 7002 master - \n"
        );
        let topology = Topology::parse(&text, 3).expect("parses");
        assert_eq!(topology.version, 3);
        assert_eq!(topology.nodes.len(), 3);
        assert_eq!(topology.owner(0).map(|n| n.id.as_str()), Some(A));
        assert_eq!(topology.owner(5461), None);
        assert_eq!(topology.owner(5462).map(|n| n.port), Some(7001));
        assert_eq!(topology.slots_assigned(), 5462);
        assert_eq!(topology.size(), 1);
        assert_eq!(topology.replicas_of(A).count(), 1);
        assert_eq!(
            topology.ranges_of(1),
            vec![
                SlotRange {
                    first: 0,
                    last: 5460
                },
                SlotRange {
                    first: 5462,
                    last: 5462
                }
            ]
        );
        let again = Topology::parse(&topology.to_text(), 3).expect("round trip");
        assert_eq!(again, topology);
    }

    #[test]
    fn refuses_what_kvrocks_refuses() {
        let cases = [
            (
                format!("{A} 127.0.0.1 7001 master"),
                TopologyError::NodesInfo,
            ),
            (
                "abc 127.0.0.1 7001 master -".to_string(),
                TopologyError::NodeId,
            ),
            (format!("{A} 127.0.0.1 x master -"), TopologyError::Port),
            (format!("{A} 127.0.0.1 7001 leader -"), TopologyError::Role),
            (
                format!("{A} 127.0.0.1 7001 master - 5-5"),
                TopologyError::SlotOutOfRange,
            ),
            (
                format!("{A} 127.0.0.1 7001 master - 16384"),
                TopologyError::SlotOutOfRange,
            ),
            (
                format!("{A} 127.0.0.1 7001 master - 9-3"),
                TopologyError::SlotOutOfRange,
            ),
            (
                format!("{A} h 1 master - 0-10\n{B} h 2 master - 10"),
                TopologyError::Overlapped,
            ),
            (
                format!("{A} h 1 master - 0 {B} h 2 master -"),
                TopologyError::MissingNewline,
            ),
            (format!("{A} h 1 slave {B} 5"), TopologyError::NodesInfo),
            (
                format!("{A} h 1 master -\n{A} h 2 master -"),
                TopologyError::NodeId,
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(Topology::parse(&text, 1), Err(expected), "{text}");
        }
    }

    #[test]
    fn nodes_text_is_what_the_controller_parses() {
        let text = format!("{A} 10.0.0.1 7001 master - 0-100 200\n{C} 10.0.0.2 7002 slave {A}\n");
        let topology = Topology::parse(&text, 7).expect("parses");
        let nodes = topology.nodes_text(Some(C), 1000);
        assert_eq!(
            nodes,
            format!(
                "{A} 10.0.0.1:7001@17001 master - 0 1000 7 connected 0-100 200\n\
                 {C} 10.0.0.2:7002@17002 myself,slave {A} 0 0 7 connected\n"
            )
        );
    }

    #[test]
    fn slot_ranges_parse_as_migrate_reads_them() {
        assert_eq!(SlotRange::parse("5"), Some(SlotRange { first: 5, last: 5 }));
        assert_eq!(
            SlotRange::parse("5-5"),
            Some(SlotRange { first: 5, last: 5 })
        );
        assert_eq!(
            SlotRange::parse("0-16383").map(|r| r.to_string()),
            Some("0-16383".into())
        );
        for bad in ["-1", "", "16384", "3-1", "a", "+5", "1-2-3"] {
            assert_eq!(SlotRange::parse(bad), None, "{bad}");
        }
    }
}
