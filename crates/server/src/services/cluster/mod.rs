//! Cluster mode (`cluster-enabled yes`): this node's ID and the topology its control plane
//! (Apache Kvrocks Controller, or `scripts/cluster.sh`) pushes with CLUSTERX SETNODES; which
//! node serves each key (MOVED, CLUSTERDOWN); the replication role the topology gives this
//! node. Nodes do not talk to each other about the topology: there is no gossip, so a
//! topology changes only when the control plane says so, and every node reports the
//! control plane's version as its epoch.
//!
//! The state survives restarts in `nodes.conf` in the data directory, written before a change
//! is applied, so what a node serves is always what it would serve after a restart.

pub mod topology;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::error::Error;
use crate::services::replication::Replication;
pub use topology::{Node, Role, SlotRange, Topology, TopologyError, NODE_ID_LEN};

const NODES_FILE: &str = "nodes.conf";

/// What the control plane told this node.
#[derive(Default, Clone)]
struct State {
    /// CLUSTERX SETNODEID's ID, or the one found for this node's address in a topology.
    myid: Option<String>,
    /// `None` until the first SETNODES: the node is not initialized.
    topology: Option<Arc<Topology>>,
}

impl State {
    fn myself(&self) -> Option<&Node> {
        self.topology.as_ref()?.node(self.myid.as_deref()?)
    }
}

/// What a node told it is a replica should follow, or that it should stop following.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WantedRole {
    /// The topology does not name this node, or names a master it does not list: replication
    /// stays as it is.
    Unknown,
    Master,
    ReplicaOf(String, u16),
}

pub struct Cluster {
    file: PathBuf,
    state: RwLock<State>,
}

/// Where this server listens: how it finds itself in a topology pushed without SETNODEID.
#[derive(Clone, Copy)]
pub struct Listening<'a> {
    pub port: u16,
    pub bind: &'a [String],
}

impl Cluster {
    /// The cluster state kept in `dir`, as the last run left it; a damaged file stops the
    /// start, as Redis refuses a corrupted `nodes.conf`.
    pub fn open(dir: &Path) -> Result<Cluster, String> {
        let file = dir.join(NODES_FILE);
        let state = match std::fs::read_to_string(&file) {
            Ok(text) => parse_file(&text)
                .map_err(|e| format!("the cluster state in {} is damaged: {e}", file.display()))?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(err) => return Err(format!("can't read {}: {err}", file.display())),
        };
        Ok(Cluster {
            file,
            state: RwLock::new(state),
        })
    }

    pub fn myid(&self) -> Option<String> {
        self.state.read().myid.clone()
    }

    pub fn topology(&self) -> Option<Arc<Topology>> {
        self.state.read().topology.clone()
    }

    /// The topology's version; -1 before the first.
    pub fn version(&self) -> i64 {
        self.state
            .read()
            .topology
            .as_ref()
            .map_or(-1, |t| t.version)
    }

    /// CLUSTERX SETNODEID.
    pub fn set_node_id(&self, id: &str) -> Result<(), Error> {
        let mut state = self.state.write();
        let mut next = state.clone();
        next.myid = Some(id.to_string());
        self.save(&next)?;
        *state = next;
        Ok(())
    }

    /// CLUSTERX SETNODES: a newer topology replaces the current one, the same version changes
    /// nothing, an older one is refused unless forced. Returns whether it was applied.
    pub fn set_nodes(
        &self,
        text: &str,
        version: i64,
        force: bool,
        listening: Listening<'_>,
    ) -> Result<bool, Error> {
        let mut state = self.state.write();
        let current = state.topology.as_ref().map_or(-1, |t| t.version);
        if version < 0 || (!force && version < current) {
            return Err(Error::msg("Invalid cluster version"));
        }
        if !force && version == current {
            return Ok(false);
        }
        let topology = Topology::parse(text, version)?;
        let mut next = state.clone();
        if next.myid.is_none() || force {
            next.myid = find_myself(&topology, listening).or(next.myid);
        }
        next.topology = Some(Arc::new(topology));
        self.save(&next)?;
        *state = next;
        Ok(true)
    }

    /// CLUSTERX SETSLOT slot NODE id version: gives one slot to a master, as the version
    /// after the current one.
    pub fn set_slot(&self, slot: u16, id: &str, version: i64) -> Result<(), Error> {
        let mut state = self.state.write();
        let Some(current) = state.topology.as_deref() else {
            return Err(Error::msg("Invalid cluster version"));
        };
        if version != current.version + 1 {
            return Err(Error::msg("Invalid cluster version"));
        }
        let index = current
            .index_of(id)
            .ok_or_else(|| Error::msg("No this node in the cluster"))?;
        if !current.nodes[index].is_master() {
            return Err(Error::msg("The node isn't a master"));
        }
        let mut topology = current.clone();
        topology.assign(slot, index);
        topology.version = version;
        let mut next = state.clone();
        next.topology = Some(Arc::new(topology));
        self.save(&next)?;
        *state = next;
        Ok(())
    }

    /// CLUSTER RESET: forgets the topology, and with `hard` the node ID too.
    pub fn reset(&self, hard: bool) -> Result<(), Error> {
        let mut state = self.state.write();
        let next = State {
            myid: if hard { None } else { state.myid.clone() },
            topology: None,
        };
        self.save(&next)?;
        *state = next;
        Ok(())
    }

    /// Whether this node serves `slot` for a command: its own slots, and its master's reads
    /// on a connection that sent READONLY. Otherwise the redirection a Redis Cluster client
    /// follows.
    pub fn route(&self, slot: u16, write: bool, readonly: bool) -> Result<(), Error> {
        let state = self.state.read();
        let Some(topology) = &state.topology else {
            return Err(Error::ClusterDown("Hash slot not served"));
        };
        let Some(owner) = topology.owner(slot) else {
            return Err(Error::ClusterDown("Hash slot not served"));
        };
        let me = state.myid.as_deref();
        if me == Some(owner.id.as_str()) {
            return Ok(());
        }
        let reads_of_my_master =
            || matches!(state.myself().map(|n| &n.role), Some(Role::Replica(m)) if *m == owner.id);
        if readonly && !write && reads_of_my_master() {
            return Ok(());
        }
        Err(Error::Moved {
            slot,
            addr: owner.addr(),
        })
    }

    /// The replication role the topology gives this node.
    pub fn wanted_role(&self) -> WantedRole {
        let state = self.state.read();
        let (Some(topology), Some(me)) = (&state.topology, state.myself()) else {
            return WantedRole::Unknown;
        };
        match &me.role {
            Role::Master => WantedRole::Master,
            Role::Replica(master) => match topology.node(master) {
                Some(node) => WantedRole::ReplicaOf(node.host.clone(), node.port),
                None => WantedRole::Unknown,
            },
        }
    }

    /// Makes replication what the topology says: a master stops following, a replica follows
    /// its master (and keeps its link if it already does).
    pub fn apply_role(&self, replication: &Replication) -> Result<(), Error> {
        match self.wanted_role() {
            WantedRole::Unknown => {}
            WantedRole::Master => {
                if replication.master().is_some() {
                    replication.promote()?;
                    tracing::info!("the cluster topology makes this node a master");
                }
            }
            WantedRole::ReplicaOf(host, port) => {
                let following = replication
                    .master()
                    .is_some_and(|m| m.host.eq_ignore_ascii_case(&host) && m.port == port);
                if !following {
                    tracing::info!(
                        "the cluster topology makes this node a replica of {host}:{port}"
                    );
                    replication.follow(host, port);
                }
            }
        }
        Ok(())
    }

    /// Writes `state` to `nodes.conf` whole or not at all.
    fn save(&self, state: &State) -> Result<(), Error> {
        let write = || -> std::io::Result<()> {
            let tmp = self.file.with_extension("tmp");
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(file_text(state).as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.file)?;
            if let Some(dir) = self.file.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| {
            Error::msg(format!(
                "can't save the cluster state in {}: {e}",
                self.file.display()
            ))
        })
    }
}

/// The node of `topology` at this server's port and one of its addresses.
fn find_myself(topology: &Topology, listening: Listening<'_>) -> Option<String> {
    let local = |host: &str| {
        listening
            .bind
            .iter()
            .any(|b| b == host || b == "0.0.0.0" || b == "::" || b == "*")
    };
    topology
        .nodes
        .iter()
        .find(|n| n.port == listening.port && local(&n.host))
        .map(|n| n.id.clone())
}

/// `nodes.conf`: `id <id>`, then `version <n>` and the topology's lines, each after `node `.
fn file_text(state: &State) -> String {
    let mut out =
        String::from("# Shale's cluster state, written by CLUSTERX SETNODEID and SETNODES.\n");
    if let Some(id) = &state.myid {
        out.push_str(&format!("id {id}\n"));
    }
    if let Some(topology) = &state.topology {
        out.push_str(&format!("version {}\n", topology.version));
        for line in topology.to_text().lines() {
            out.push_str(&format!("node {line}\n"));
        }
    }
    out
}

fn parse_file(text: &str) -> Result<State, String> {
    let mut state = State::default();
    let mut version = None;
    let mut nodes = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "id" if value.len() == NODE_ID_LEN => state.myid = Some(value.to_string()),
            "version" => {
                version = Some(
                    value
                        .parse::<i64>()
                        .map_err(|_| format!("bad line: {line}"))?,
                )
            }
            "node" => {
                nodes.push_str(value);
                nodes.push('\n');
            }
            _ => return Err(format!("bad line: {line}")),
        }
    }
    if let Some(version) = version {
        let topology = Topology::parse(&nodes, version).map_err(|e| e.to_string())?;
        state.topology = Some(Arc::new(topology));
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a0bbd6a0ef4af9ac8cb79d8ba8e0de4bd2f9e3c8";
    const B: &str = "b0bbd6a0ef4af9ac8cb79d8ba8e0de4bd2f9e3c8";

    fn cluster(dir: &Path) -> Cluster {
        Cluster::open(dir).expect("opens")
    }

    const BIND: &[String] = &[];

    fn at_7001() -> Listening<'static> {
        static BIND: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec!["127.0.0.1".to_string()]);
        Listening {
            port: 7001,
            bind: &BIND,
        }
    }

    #[test]
    fn the_state_survives_a_restart() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = cluster(dir.path());
        assert_eq!(first.version(), -1);
        first.set_node_id(A).expect("id");
        let text =
            format!("{A} 127.0.0.1 7001 master - 0-8191\n{B} 127.0.0.1 7002 master - 8192-16383\n");
        assert!(first
            .set_nodes(&text, 2, false, at_7001())
            .expect("applied"));
        drop(first);
        let again = cluster(dir.path());
        assert_eq!(again.myid().as_deref(), Some(A));
        assert_eq!(again.version(), 2);
        assert_eq!(again.topology().expect("topology").slots_assigned(), 16384);
        assert!(again.route(0, true, false).is_ok());
        assert!(matches!(
            again.route(16383, false, false),
            Err(Error::Moved { slot: 16383, .. })
        ));
    }

    #[test]
    fn versions_only_move_forward() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = cluster(dir.path());
        let text = format!("{A} 127.0.0.1 7001 master - 0-16383\n");
        assert!(cluster
            .set_nodes(&text, 5, false, at_7001())
            .expect("applied"));
        // Found by its port and address, without SETNODEID.
        assert_eq!(cluster.myid().as_deref(), Some(A));
        assert!(!cluster
            .set_nodes("not even parsed", 5, false, at_7001())
            .expect("same version"));
        assert!(cluster.set_nodes(&text, 4, false, at_7001()).is_err());
        assert!(cluster
            .set_nodes(&text, 4, true, at_7001())
            .expect("forced"));
        assert_eq!(cluster.version(), 4);
        assert!(cluster.set_slot(7, A, 6).is_err());
        cluster.set_slot(7, A, 5).expect("next version");
        cluster.reset(false).expect("reset");
        assert_eq!(cluster.version(), -1);
        assert_eq!(cluster.myid().as_deref(), Some(A));
        assert!(matches!(
            cluster.route(0, false, false),
            Err(Error::ClusterDown(_))
        ));
    }

    #[test]
    fn a_replica_serves_its_masters_reads_after_readonly() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = cluster(dir.path());
        cluster.set_node_id(B).expect("id");
        let text = format!("{A} 10.0.0.1 7001 master - 0-16383\n{B} 127.0.0.1 7002 slave {A}\n");
        let elsewhere = Listening {
            port: 9999,
            bind: BIND,
        };
        cluster
            .set_nodes(&text, 1, false, elsewhere)
            .expect("applied");
        assert_eq!(
            cluster.wanted_role(),
            WantedRole::ReplicaOf("10.0.0.1".into(), 7001)
        );
        assert!(cluster.route(5, false, true).is_ok());
        assert!(matches!(
            cluster.route(5, true, true),
            Err(Error::Moved { .. })
        ));
        assert!(matches!(
            cluster.route(5, false, false),
            Err(Error::Moved { .. })
        ));
    }
}
