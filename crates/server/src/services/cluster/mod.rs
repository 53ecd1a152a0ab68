//! Cluster mode (`cluster-enabled yes`): this node's ID and the topology its control plane
//! (Apache Kvrocks Controller, or `scripts/cluster.sh`) pushes with CLUSTERX SETNODES; which
//! node serves each key (MOVED, CLUSTERDOWN); the replication role the topology gives this
//! node. Nodes do not talk to each other about the topology: there is no gossip, so a
//! topology changes only when the control plane says so, and every node reports the
//! control plane's version as its epoch.
//!
//! The state survives restarts in `nodes.conf` in the data directory, written before a change
//! is applied, so what a node serves is always what it would serve after a restart.

pub mod migration;
pub mod topology;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::Error;
use crate::services::replication::Replication;
pub use topology::{Node, Role, SlotRange, Topology, TopologyError, NODE_ID_LEN};

const NODES_FILE: &str = "nodes.conf";

/// What the control plane told this node, and the slots it moved.
#[derive(Default, Clone)]
struct State {
    /// CLUSTERX SETNODEID's ID, or the one found for this node's address in a topology.
    myid: Option<String>,
    /// `None` until the first SETNODES: the node is not initialized.
    topology: Option<Arc<Topology>>,
    /// The last migration this node ran as its source. Kept apart from the topology, which
    /// SETNODES replaces: the controller polls its state until it has seen it end.
    migration: Option<Migration>,
    /// The last slots this node imported.
    import: Option<Import>,
    /// Slots whose keys here belong to another node (they moved away, or an import of them
    /// failed), until they are deleted.
    leftovers: Vec<SlotRange>,
}

/// A migration of slots to another master (CLUSTERX MIGRATE), as CLUSTER INFO reports it
/// until the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    pub range: SlotRange,
    /// The destination's node ID.
    pub destination: String,
    pub state: MigrationState,
    /// After success, until a topology gives the slots to another node: commands on them are
    /// redirected to the destination, which has them.
    pub redirecting: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationState {
    Start,
    Success,
    Fail,
}

impl Migration {
    /// `<range> <destination> <state> <redirecting>`, as `nodes.conf` and the replicated
    /// record (`Keyspace::record_migration`) keep it.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {}",
            self.range,
            self.destination,
            self.state.name(),
            self.redirecting as u8
        )
    }
}

impl MigrationState {
    /// As CLUSTER INFO's `migrating_state` says it.
    pub fn name(self) -> &'static str {
        match self {
            MigrationState::Start => "start",
            MigrationState::Success => "success",
            MigrationState::Fail => "fail",
        }
    }
}

/// Slots this node received from another (CLUSTER IMPORT, sent by the source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub range: SlotRange,
    pub state: ImportState,
    /// After success, until a topology gives the slots to this node: every client's commands
    /// on them are served here.
    pub serving: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportState {
    Start,
    Success,
    Error,
}

impl ImportState {
    /// As CLUSTER INFO's `import_state` says it (Kvrocks's words).
    pub fn name(self) -> &'static str {
        match self {
            ImportState::Start => "start",
            ImportState::Success => "success",
            ImportState::Error => "error",
        }
    }
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
    /// Held by a deletion of leftover keys across each of its batches, and by an import's
    /// start, so that no batch of a deletion runs once an import of those slots began.
    cleaning: Mutex<()>,
    /// Held while the migration's line is read and written with the data
    /// (`migration::record`).
    recording: Mutex<()>,
    /// Counts the states installed, so that clients blocked on keys see whether their slots
    /// moved away.
    changes: tokio::sync::watch::Sender<u64>,
}

/// What routing needs to know of a connection.
#[derive(Debug, Clone, Copy, Default)]
pub struct Connection {
    /// It sent READONLY (or uses shard channels, which a replica serves alike).
    pub readonly: bool,
    /// It is the link of the import running here (it sent CLUSTER IMPORT ... 0).
    pub import_link: bool,
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
            cleaning: Mutex::new(()),
            recording: Mutex::new(()),
            changes: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Changes whenever a new state is installed (topology, migration, import).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Installs `next` as the state that `state` guards, and says so to the blocked clients.
    fn install(&self, state: &mut State, next: State) {
        *state = next;
        self.changes.send_modify(|count| *count += 1);
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
        self.install(&mut state, next);
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
        settle_moves(&mut next, &topology);
        next.topology = Some(Arc::new(topology));
        self.save(&next)?;
        self.install(&mut state, next);
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
        self.install(&mut state, next);
        Ok(())
    }

    /// CLUSTER RESET: forgets the topology and the slots moved, and with `hard` the node ID
    /// too; not while slots move.
    pub fn reset(&self, hard: bool) -> Result<(), Error> {
        let mut state = self.state.write();
        if state
            .migration
            .as_ref()
            .is_some_and(|m| m.state == MigrationState::Start)
        {
            return Err(Error::msg("Can't reset cluster while migrating slot"));
        }
        if state
            .import
            .as_ref()
            .is_some_and(|i| i.state == ImportState::Start)
        {
            return Err(Error::msg("Can't reset cluster while importing slot"));
        }
        let next = State {
            myid: if hard { None } else { state.myid.clone() },
            ..State::default()
        };
        self.save(&next)?;
        self.install(&mut state, next);
        Ok(())
    }

    /// Whether this node serves `slot` for a command, as Kvrocks decides it: its own slots
    /// (unless they moved away), slots it is importing to the connection of the import, slots
    /// it imported, and its master's reads on a connection that sent READONLY. Otherwise the
    /// redirection a Redis Cluster client follows.
    pub fn route(&self, slot: u16, write: bool, connection: Connection) -> Result<(), Error> {
        let state = self.state.read();
        let Some(topology) = &state.topology else {
            return Err(Error::ClusterDown("Hash slot not served"));
        };
        let Some(owner) = topology.owner(slot) else {
            return Err(Error::ClusterDown("Hash slot not served"));
        };
        let me = state.myid.as_deref();
        if me == Some(owner.id.as_str()) {
            return match &state.migration {
                Some(m) if m.redirecting && m.range.contains(slot) => {
                    let addr = topology
                        .node(&m.destination)
                        .map_or_else(String::new, Node::addr);
                    Err(Error::Moved { slot, addr })
                }
                _ => Ok(()),
            };
        }
        if let Some(import) = state.import.as_ref().filter(|i| i.range.contains(slot)) {
            let link = import.state == ImportState::Start && connection.import_link;
            if link || import.serving {
                return Ok(());
            }
        }
        let readonly = connection.readonly;
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

    /// The last migration and import, for CLUSTER INFO.
    /// The last migration's line, for the replicated record.
    pub fn migration_line(&self) -> Option<String> {
        self.state.read().migration.as_ref().map(Migration::line)
    }

    /// After this node was promoted: takes over the last migration its master recorded (its
    /// [`Migration::line`]), which CLUSTER INFO reports to the controller, since it now polls
    /// this node. One that was running died with the master and failed (the destination
    /// drops what it got when their link closes). One that succeeded redirects its slots
    /// while the topology still gives them here, and their keys here are a leftover. Returns
    /// the slots whose keys are to be deleted.
    pub fn adopt_migration(&self, line: &str) -> Result<Option<SlotRange>, Error> {
        let mut migration = parse_migration(line)
            .ok_or_else(|| Error::msg(format!("bad migration record: {line}")))?;
        let mut state = self.state.write();
        let mut next = state.clone();
        let mut leftover = None;
        match migration.state {
            MigrationState::Start => migration.state = MigrationState::Fail,
            MigrationState::Success if migration.redirecting => {
                let range = migration.range;
                migration.redirecting = next
                    .topology
                    .as_deref()
                    .is_some_and(|t| owns(t, next.myid.as_deref(), range));
                if !next.leftovers.contains(&range) {
                    next.leftovers.push(range);
                }
                leftover = Some(range);
            }
            MigrationState::Success | MigrationState::Fail => {}
        }
        next.migration = Some(migration);
        self.save(&next)?;
        self.install(&mut state, next);
        Ok(leftover)
    }

    pub fn moves(&self) -> (Option<Migration>, Option<Import>) {
        let state = self.state.read();
        (state.migration.clone(), state.import.clone())
    }

    /// Whether a migration from this node runs.
    pub fn migrating(&self) -> bool {
        let state = self.state.read();
        state
            .migration
            .as_ref()
            .is_some_and(|m| m.state == MigrationState::Start)
    }

    /// Whether the topology makes this node a master (CLUSTER INFO shows migrations on one).
    pub fn is_master(&self) -> bool {
        self.state.read().myself().is_some_and(Node::is_master)
    }

    /// CLUSTERX MIGRATE's checks, in Kvrocks's order and words, then the migration recorded
    /// as started, before the reply, so the controller's first poll finds it. Returns the
    /// destination.
    pub fn begin_migration(&self, range: SlotRange, destination: &str) -> Result<Node, Error> {
        let mut state = self.state.write();
        let topology = state
            .topology
            .clone()
            .ok_or(Error::ClusterDown("The cluster is not initialized"))?;
        let target = topology
            .node(destination)
            .ok_or_else(|| Error::msg("Can't find the destination node id"))?;
        let last = state.migration.as_ref();
        if last.is_some_and(|m| m.redirecting && range.slots().any(|slot| m.range.contains(slot))) {
            return Err(Error::msg("Can't migrate slot which has been migrated"));
        }
        let myid = state.myid.as_deref();
        if range
            .slots()
            .any(|slot| topology.owner(slot).map(|n| n.id.as_str()) != myid)
        {
            return Err(Error::msg("Can't migrate slot which doesn't belong to me"));
        }
        if !state.myself().is_some_and(Node::is_master) {
            return Err(Error::msg("Slave can't migrate slot"));
        }
        if !target.is_master() {
            return Err(Error::msg("Can't migrate slot to a slave"));
        }
        if myid == Some(target.id.as_str()) {
            return Err(Error::msg("Can't migrate slot to myself"));
        }
        if last.is_some_and(|m| m.state == MigrationState::Start) {
            return Err(Error::msg("There is already a migrating job"));
        }
        // Its slots are redirected by this record until a topology takes over.
        if last.is_some_and(|m| m.redirecting) {
            return Err(Error::msg(
                "The slots of the last migration are not in the topology yet",
            ));
        }
        let mut next = state.clone();
        next.migration = Some(Migration {
            range,
            destination: target.id.clone(),
            state: MigrationState::Start,
            redirecting: false,
        });
        self.save(&next)?;
        self.install(&mut state, next);
        Ok(target.clone())
    }

    /// The end of the running migration: on success its slots are redirected to the
    /// destination from now on.
    pub fn end_migration(&self, success: bool) -> Result<(), Error> {
        let mut state = self.state.write();
        let mut next = state.clone();
        if let Some(m) = next.migration.as_mut() {
            m.state = match success {
                true => MigrationState::Success,
                false => MigrationState::Fail,
            };
            m.redirecting = success;
            if success {
                next.leftovers.push(m.range);
            }
        }
        let saved = self.save(&next);
        // A success stands even if it could not be recorded: the destination serves the
        // slots already, and this node must redirect to it.
        self.install(&mut state, next);
        saved
    }

    /// CLUSTER IMPORT range 0: this node receives `range` on the calling connection. Returns
    /// false if that import already runs.
    pub fn begin_import(&self, range: SlotRange) -> Result<bool, Error> {
        let _cleaning = self.cleaning.lock();
        let mut state = self.state.write();
        let topology = state
            .topology
            .clone()
            .ok_or(Error::ClusterDown("The cluster is not initialized"))?;
        if !state.myself().is_some_and(Node::is_master) {
            return Err(Error::msg("Slave can't import slot"));
        }
        let myid = state.myid.as_deref();
        if range.slots().any(|slot| {
            topology
                .owner(slot)
                .is_some_and(|n| Some(n.id.as_str()) == myid)
        }) {
            return Err(Error::msg("Can't import slot which belongs to me"));
        }
        // One at a time, and the last must be in the topology before the next.
        if let Some(import) = state
            .import
            .as_ref()
            .filter(|i| i.state == ImportState::Start || i.serving)
        {
            if import.range == range && import.state == ImportState::Start {
                return Ok(false);
            }
            return Err(Error::msg(format!(
                "only one importing job is allowed, current importing: {}",
                import.range
            )));
        }
        let mut next = state.clone();
        next.import = Some(Import {
            range,
            state: ImportState::Start,
            serving: false,
        });
        // Slots coming back stop being redirected away, and what is left of them here is
        // the import's to delete.
        if let Some(m) = next.migration.as_mut() {
            if range.slots().any(|slot| m.range.contains(slot)) {
                m.redirecting = false;
            }
        }
        next.leftovers
            .retain(|left| !left.slots().any(|slot| range.contains(slot)));
        self.save(&next)?;
        self.install(&mut state, next);
        Ok(true)
    }

    /// CLUSTER IMPORT range 1 or 2: the import of `range` succeeded (its slots are served
    /// here to every client from now on) or failed.
    pub fn end_import(&self, range: SlotRange, success: bool) -> Result<(), Error> {
        let mut state = self.state.write();
        let current = state
            .import
            .as_ref()
            .filter(|i| i.state == ImportState::Start);
        match current {
            Some(import) if import.range == range => {}
            Some(import) => {
                return Err(Error::msg(format!(
                    "mismatch slot, importing slot(s): {}, but got: {range}",
                    import.range
                )))
            }
            None => return Err(Error::msg("no slot is being imported")),
        }
        let mut next = state.clone();
        if let Some(import) = next.import.as_mut() {
            import.state = match success {
                true => ImportState::Success,
                false => ImportState::Error,
            };
            import.serving = success;
            if !success {
                next.leftovers.push(range);
            }
        }
        self.save(&next)?;
        self.install(&mut state, next);
        Ok(())
    }

    /// The connection of the running import closed before it ended: the import failed.
    /// Returns its slots, whose keys here are to be deleted.
    pub fn import_link_lost(&self) -> Option<SlotRange> {
        let range = {
            let state = self.state.read();
            let import = state.import.as_ref()?;
            (import.state == ImportState::Start).then_some(import.range)?
        };
        match self.end_import(range, false) {
            Ok(()) => Some(range),
            Err(err) => {
                tracing::warn!(
                    "the import of slots {range} failed, but could not be recorded: {}",
                    err_text(&err)
                );
                Some(range)
            }
        }
    }

    /// At start: a migration or an import that a stop interrupted has failed. Returns the
    /// slots whose keys here belong to another node (moved away, or half imported).
    pub fn recover(&self) -> Vec<SlotRange> {
        let mut state = self.state.write();
        let mut next = state.clone();
        if let Some(m) = next
            .migration
            .as_mut()
            .filter(|m| m.state == MigrationState::Start)
        {
            m.state = MigrationState::Fail;
        }
        if let Some(i) = next
            .import
            .as_mut()
            .filter(|i| i.state == ImportState::Start)
        {
            i.state = ImportState::Error;
            next.leftovers.push(i.range);
        }
        if let Err(err) = self.save(&next) {
            tracing::warn!("{}", err_text(&err));
        }
        self.install(&mut state, next);
        state.leftovers.clone()
    }

    /// Whether the keys of `range` here are still to be deleted.
    pub fn is_leftover(&self, range: SlotRange) -> bool {
        self.state.read().leftovers.contains(&range)
    }

    /// The keys of `range` here are deleted.
    pub fn cleaned(&self, range: SlotRange) -> Result<(), Error> {
        let mut state = self.state.write();
        let mut next = state.clone();
        next.leftovers.retain(|left| *left != range);
        self.save(&next)?;
        self.install(&mut state, next);
        Ok(())
    }

    /// Held across each batch of a deletion of leftover keys (see `cleaning`).
    pub fn cleaning(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.cleaning.lock()
    }

    /// Held while the migration's line is recorded with the data (see `recording`).
    pub fn recording(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.recording.lock()
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
    /// its master (and keeps its link if it already does). Returns whether this node was
    /// promoted.
    pub fn apply_role(&self, replication: &Replication) -> Result<bool, Error> {
        match self.wanted_role() {
            WantedRole::Unknown => {}
            WantedRole::Master => {
                if replication.master().is_some() {
                    replication.promote()?;
                    tracing::info!("the cluster topology makes this node a master");
                    return Ok(true);
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
        Ok(false)
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

/// A new topology ends what the moved slots' markers stood in for: slots that went to
/// another node are redirected by the topology itself, slots that came here are owned.
fn settle_moves(state: &mut State, topology: &Topology) {
    let myid = state.myid.clone();
    let mine = |range: SlotRange| owns(topology, myid.as_deref(), range);
    if let Some(range) = state.migration.as_ref().map(|m| m.range) {
        if !mine(range) {
            if let Some(m) = state.migration.as_mut() {
                m.redirecting = false;
            }
        }
    }
    if let Some(range) = state.import.as_ref().map(|i| i.range) {
        if mine(range) {
            if let Some(i) = state.import.as_mut() {
                i.serving = false;
            }
        }
    }
}

/// Whether the node `myid` owns the first slot of `range` (slots move as whole ranges).
fn owns(topology: &Topology, myid: Option<&str>, range: SlotRange) -> bool {
    let owner = topology.owner(range.first).map(|n| n.id.as_str());
    owner.is_some() && owner == myid
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
    if let Some(m) = &state.migration {
        out.push_str(&format!("migration {}\n", m.line()));
    }
    if let Some(i) = &state.import {
        out.push_str(&format!(
            "import {} {} {}\n",
            i.range,
            i.state.name(),
            i.serving as u8
        ));
    }
    for range in &state.leftovers {
        out.push_str(&format!("leftover {range}\n"));
    }
    out
}

/// An error's reply text, for a log line.
fn err_text(err: &Error) -> String {
    match err.to_reply() {
        shale_protocol::Reply::Error(line) => line.into_owned(),
        _ => String::new(),
    }
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
            "migration" => {
                state.migration = Some(parse_migration(value).ok_or(format!("bad line: {line}"))?)
            }
            "import" => {
                state.import = Some(parse_import(value).ok_or(format!("bad line: {line}"))?)
            }
            "leftover" => state
                .leftovers
                .push(SlotRange::parse(value).ok_or(format!("bad line: {line}"))?),
            _ => return Err(format!("bad line: {line}")),
        }
    }
    if let Some(version) = version {
        let topology = Topology::parse(&nodes, version).map_err(|e| e.to_string())?;
        state.topology = Some(Arc::new(topology));
    }
    Ok(state)
}

fn parse_migration(text: &str) -> Option<Migration> {
    let fields: Vec<&str> = text.split(' ').collect();
    let [range, destination, state, redirecting] = fields[..] else {
        return None;
    };
    Some(Migration {
        range: SlotRange::parse(range)?,
        destination: destination.to_string(),
        state: [
            MigrationState::Start,
            MigrationState::Success,
            MigrationState::Fail,
        ]
        .into_iter()
        .find(|s| s.name() == state)?,
        redirecting: redirecting == "1",
    })
}

fn parse_import(text: &str) -> Option<Import> {
    let fields: Vec<&str> = text.split(' ').collect();
    let [range, state, serving] = fields[..] else {
        return None;
    };
    Some(Import {
        range: SlotRange::parse(range)?,
        state: [ImportState::Start, ImportState::Success, ImportState::Error]
            .into_iter()
            .find(|s| s.name() == state)?,
        serving: serving == "1",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "a0bbd6a0ef4af9ac8cb79d8ba8e0de4bd2f9e3c8";
    const B: &str = "b0bbd6a0ef4af9ac8cb79d8ba8e0de4bd2f9e3c8";

    const PLAIN: Connection = Connection {
        readonly: false,
        import_link: false,
    };
    const READONLY: Connection = Connection {
        readonly: true,
        import_link: false,
    };

    fn cluster(dir: &Path) -> Cluster {
        Cluster::open(dir).expect("opens")
    }

    /// A at 7001 holds the first half of the slots, B at 7002 the second.
    fn two_masters() -> String {
        format!("{A} 127.0.0.1 7001 master - 0-8191\n{B} 127.0.0.1 7002 master - 8192-16383\n")
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
        let text = two_masters();
        assert!(first
            .set_nodes(&text, 2, false, at_7001())
            .expect("applied"));
        drop(first);
        let again = cluster(dir.path());
        assert_eq!(again.myid().as_deref(), Some(A));
        assert_eq!(again.version(), 2);
        assert_eq!(again.topology().expect("topology").slots_assigned(), 16384);
        assert!(again.route(0, true, PLAIN).is_ok());
        assert!(matches!(
            again.route(16383, false, PLAIN),
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
            cluster.route(0, false, PLAIN),
            Err(Error::ClusterDown(_))
        ));
    }

    #[test]
    fn a_promoted_replica_takes_over_its_masters_migration() {
        let dir = tempfile::tempdir().expect("temp dir");
        let node = cluster(dir.path());
        node.set_node_id(A).expect("id");
        let text = two_masters();
        node.set_nodes(&text, 1, false, at_7001()).expect("applied");
        let range = SlotRange { first: 0, last: 99 };
        let moves = |node: &Cluster| node.moves().0.expect("a migration");

        // A running one died with the master.
        let running = format!("0-99 {B} start 0");
        assert_eq!(node.adopt_migration(&running).expect("adopted"), None);
        assert_eq!(moves(&node).state, MigrationState::Fail);
        assert!(node.route(5, true, PLAIN).is_ok());

        // A finished one redirects while the topology still gives the slots here, and their
        // keys are a leftover.
        let finished = format!("0-99 {B} success 1");
        assert_eq!(
            node.adopt_migration(&finished).expect("adopted"),
            Some(range)
        );
        assert!(moves(&node).redirecting);
        assert!(node.is_leftover(range));
        assert!(matches!(
            node.route(5, false, PLAIN),
            Err(Error::Moved { slot: 5, .. })
        ));
        assert_eq!(
            Cluster::open(dir.path()).expect("reopens").migration_line(),
            Some(finished)
        );

        // One whose slots a topology or an import took over since leaves the keys alone.
        node.cleaned(range).expect("cleaned");
        let settled = format!("0-99 {B} success 0");
        assert_eq!(node.adopt_migration(&settled).expect("adopted"), None);
        assert!(!node.is_leftover(range));
        assert!(node.route(5, true, PLAIN).is_ok());
        assert!(node.adopt_migration("garbage").is_err());
    }

    #[test]
    fn a_migration_and_an_import_are_recorded_and_outlive_a_restart() {
        let dir = tempfile::tempdir().expect("temp dir");
        let source = cluster(dir.path());
        source.set_node_id(A).expect("id");
        let text = two_masters();
        source
            .set_nodes(&text, 1, false, at_7001())
            .expect("applied");
        let range = SlotRange { first: 0, last: 99 };
        let refused = |result: Result<Node, Error>| match result {
            Err(err) => err_text(&err),
            Ok(node) => panic!("accepted, to {node:?}"),
        };
        assert_eq!(
            refused(source.begin_migration(
                SlotRange {
                    first: 8000,
                    last: 8200
                },
                B
            )),
            "ERR Can't migrate slot which doesn't belong to me"
        );
        assert_eq!(
            refused(source.begin_migration(range, A)),
            "ERR Can't migrate slot to myself"
        );
        assert_eq!(
            refused(source.begin_migration(range, "x")),
            "ERR Can't find the destination node id"
        );
        assert_eq!(source.begin_migration(range, B).expect("starts").port, 7002);
        assert_eq!(
            refused(source.begin_migration(range, B)),
            "ERR There is already a migrating job"
        );
        assert!(source.reset(false).is_err());
        // Interrupted by a stop: failed, and the keys stay (they are still this node's).
        drop(source);
        let source = cluster(dir.path());
        assert!(source.recover().is_empty());
        let (migration, _) = source.moves();
        assert_eq!(migration.expect("kept").state, MigrationState::Fail);
        source.begin_migration(range, B).expect("again");
        source.end_migration(true).expect("success");
        assert!(matches!(
            source.route(5, false, PLAIN),
            Err(Error::Moved { slot: 5, .. })
        ));
        assert!(source.is_leftover(range));
        assert!(source
            .begin_migration(
                SlotRange {
                    first: 200,
                    last: 300
                },
                B
            )
            .is_err());
        // The slots given to the destination: redirected by the topology itself now.
        let moved = format!(
            "{A} 127.0.0.1 7001 master - 100-8191\n{B} 127.0.0.1 7002 master - 0-99 8192-16383\n"
        );
        source
            .set_nodes(&moved, 2, false, at_7001())
            .expect("applied");
        let (migration, _) = source.moves();
        let migration = migration.expect("kept");
        assert_eq!(
            (migration.state, migration.redirecting),
            (MigrationState::Success, false)
        );
        assert_eq!(source.recover(), vec![range]);

        // The destination's side: served to the import's connection, then to everyone.
        let other = tempfile::tempdir().expect("temp dir");
        let destination = cluster(other.path());
        destination.set_node_id(B).expect("id");
        destination
            .set_nodes(&text, 1, false, at_7001())
            .expect("applied");
        assert!(destination
            .begin_import(SlotRange {
                first: 8192,
                last: 8192
            })
            .is_err());
        assert!(destination.begin_import(range).expect("starts"));
        assert!(!destination.begin_import(range).expect("the same"));
        let link = Connection {
            readonly: false,
            import_link: true,
        };
        assert!(destination.route(5, true, link).is_ok());
        assert!(destination.route(5, true, PLAIN).is_err());
        assert!(destination
            .end_import(SlotRange { first: 0, last: 5 }, true)
            .is_err());
        destination.end_import(range, true).expect("success");
        assert!(destination.route(5, true, PLAIN).is_ok());
        assert_eq!(destination.import_link_lost(), None);
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
        assert!(cluster.route(5, false, READONLY).is_ok());
        assert!(matches!(
            cluster.route(5, true, READONLY),
            Err(Error::Moved { .. })
        ));
        assert!(matches!(
            cluster.route(5, false, PLAIN),
            Err(Error::Moved { .. })
        ));
    }
}
