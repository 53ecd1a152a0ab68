//! Cluster mode's commands: CLUSTER as Redis Cluster clients use it, CLUSTERX as Apache
//! Kvrocks Controller drives a data node, READONLY, READWRITE and ASKING; and the check that
//! sends a command to the node serving its keys (MOVED, CROSSSLOT, CLUSTERDOWN).

use std::sync::Arc;

use bytes::Bytes;
use shale_protocol::Reply;
use shale_storage::keys::{slot, SLOTS};

use super::args::{int, is, text};
use super::{command_keys, help_reply, resolve, CommandSpec, Context, Flags};
use crate::error::Error;
use crate::keyspace::{now_ms, off_worker, FORBIDDEN};
use crate::services::cluster::migration::{self, Job};
use crate::services::cluster::{Cluster, Connection, Listening, SlotRange, Topology, NODE_ID_LEN};

/// The slot a script's keys must share in cluster mode, as Redis checks a script's commands:
/// that of the keys it declared, else of the first key one of its commands touched.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScriptSlot {
    pub slot: Option<u16>,
    /// The script declared `allow-cross-slot-keys`.
    pub cross_slot_allowed: bool,
}

impl ScriptSlot {
    /// For a script or function declaring `keys`.
    pub fn of(keys: &[Bytes], cross_slot_allowed: bool) -> ScriptSlot {
        ScriptSlot {
            slot: keys.first().map(|key| slot(key)),
            cross_slot_allowed,
        }
    }
}

/// Refuses a command whose keys this node does not serve, as Redis's `getNodeByQuery` does:
/// keys of several slots, a slot without an owner, a slot another node owns. EXEC is
/// checked with the keys of every command queued; the commands it then runs, and those a
/// replica's master sends, are not.
pub(super) fn check_route(
    ctx: &mut Context<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Result<(), Error> {
    let Some(cluster) = &ctx.services.cluster else {
        return Ok(());
    };
    if ctx.from_master || ctx.in_exec {
        return Ok(());
    }
    let keyed = keyed_slot(ctx, spec, args);
    // Inside a script, keys of several slots in one command are a non-local access too.
    let keyed = match keyed {
        Err(_) if ctx.in_script => Err(Error::msg(
            "Script attempted to access a non local key in a cluster node",
        )),
        other => other,
    };
    let Some((slot, write)) = keyed? else {
        return Ok(());
    };
    let connection = Connection {
        // Shard channels are served on a replica as its master's, READONLY or not.
        readonly: ctx.client.cluster_readonly || is_shard_channel_command(spec),
        import_link: ctx.client.cluster_import_link,
    };
    let mut routed = cluster.route(slot, write, connection);
    // The last phase of a migration of the slot.
    if routed.is_ok() && write && ctx.keyspace.slot_moves.forbids(slot) {
        routed = Err(Error::TryAgain(FORBIDDEN));
    }
    if !ctx.in_script {
        return routed;
    }
    match routed {
        Ok(()) => {}
        // Worth a retry by the script's client too.
        Err(err @ Error::TryAgain(_)) => return Err(err),
        Err(_) => {
            return Err(Error::msg(
                "Script attempted to access a non local key in a cluster node",
            ))
        }
    }
    let script = &mut ctx.script_slot;
    match script.slot {
        Some(first) if first != slot && !script.cross_slot_allowed => Err(Error::msg(
            "Script attempted to access keys that do not hash to the same slot",
        )),
        Some(_) => Ok(()),
        None => {
            script.slot = Some(slot);
            Ok(())
        }
    }
}

/// Whether this node still serves the keys of a client blocked on them (a blocking command
/// writes unless it is XREAD), else the redirection that ends its wait, as Redis's
/// `clusterRedirectBlockedClientIfNeeded` decides after a topology change.
pub fn blocked_route(
    cluster: &Cluster,
    client: &crate::services::ClientState,
    keys: &[Bytes],
    write: bool,
) -> Result<(), Error> {
    let Some(key) = keys.first() else {
        return Ok(());
    };
    let connection = Connection {
        readonly: client.cluster_readonly,
        import_link: client.cluster_import_link,
    };
    cluster.route(slot(key), write, connection)
}

/// The slot of a command's keys (for EXEC, of every queued command's) and whether it writes;
/// `None` without keys.
fn keyed_slot(
    ctx: &Context<'_>,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Result<Option<(u16, bool)>, Error> {
    if spec.name != "exec" {
        let write = spec.flags.contains(Flags::WRITE);
        return Ok(common_slot(spec, args)?.map(|slot| (slot, write)));
    }
    let Some(multi) = &ctx.client.multi else {
        return Ok(None);
    };
    let mut slot = None;
    let mut write = false;
    for queued in multi.commands() {
        let Ok(queued_spec) = resolve(queued) else {
            continue;
        };
        write |= queued_spec.flags.contains(Flags::WRITE);
        merge_slot(&mut slot, common_slot(queued_spec, queued)?)?;
    }
    Ok(slot.map(|slot| (slot, write)))
}

/// The slot all of a command's keys (or shard channels) are in; `None` without keys.
fn common_slot(spec: &CommandSpec, args: &[Bytes]) -> Result<Option<u16>, Error> {
    let keys: Vec<&[u8]> = if is_shard_channel_command(spec) {
        let channels = match spec.name {
            "spublish" => args.get(1..2).unwrap_or_default(),
            _ => args.get(1..).unwrap_or_default(),
        };
        channels.iter().map(|a| a.as_ref()).collect()
    } else {
        command_keys(spec, args)
    };
    let mut common = None;
    for key in keys {
        merge_slot(&mut common, Some(slot(key)))?;
    }
    Ok(common)
}

fn merge_slot(common: &mut Option<u16>, next: Option<u16>) -> Result<(), Error> {
    match (*common, next) {
        (Some(a), Some(b)) if a != b => Err(Error::CrossSlot),
        (None, next) => {
            *common = next;
            Ok(())
        }
        _ => Ok(()),
    }
}

/// SSUBSCRIBE, SUNSUBSCRIBE and SPUBLISH name shard channels, which Redis Cluster places in
/// slots as it places keys.
fn is_shard_channel_command(spec: &CommandSpec) -> bool {
    matches!(spec.name, "ssubscribe" | "sunsubscribe" | "spublish")
}

/// The cluster state, or the error CLUSTER and CLUSTERX give outside cluster mode.
fn cluster<'a>(ctx: &'a Context<'_>) -> Result<&'a Cluster, Error> {
    ctx.services.cluster.as_deref().ok_or_else(not_enabled)
}

/// [`cluster`], for a thread that outlives the command.
fn shared_cluster(ctx: &Context<'_>) -> Result<Arc<Cluster>, Error> {
    ctx.services.cluster.clone().ok_or_else(not_enabled)
}

fn not_enabled() -> Error {
    Error::msg("Cluster mode is not enabled")
}

/// The topology, or Kvrocks's error before the first one (which the controller looks for).
fn topology(cluster: &Cluster) -> Result<Arc<Topology>, Error> {
    cluster
        .topology()
        .ok_or(Error::ClusterDown("The cluster is not initialized"))
}

/// CLUSTER INFO: Redis's fields, with the topology's version as both epochs, as the
/// controller reads them. Every assigned slot is served whatever the others' state, as Redis
/// does with `cluster-require-full-coverage no`.
pub fn cluster_info(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let topology = topology(cluster(ctx)?)?;
    let assigned = topology.slots_assigned();
    let lines = [
        ("cluster_state", "ok".to_string()),
        ("cluster_slots_assigned", assigned.to_string()),
        ("cluster_slots_ok", assigned.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        ("cluster_known_nodes", topology.nodes.len().to_string()),
        ("cluster_size", topology.size().to_string()),
        ("cluster_current_epoch", topology.version.to_string()),
        ("cluster_my_epoch", topology.version.to_string()),
    ];
    let mut text: String = lines
        .iter()
        .map(|(name, value)| format!("{name}:{value}\r\n"))
        .collect();
    // What Kvrocks adds on a master, and the controller polls: the last migration (from its
    // start until the next one; never `-1`, which the controller cannot parse) and import.
    let cluster = cluster(ctx)?;
    if cluster.is_master() {
        let (migration, import) = cluster.moves();
        if let Some(m) = migration {
            text.push_str(&format!(
                "migrating_slot(s):{}\r\ndestination_node:{}\r\nmigrating_state:{}\r\n",
                m.range,
                m.destination,
                m.state.name()
            ));
        }
        if let Some(i) = import {
            text.push_str(&format!(
                "importing_slot(s):{}\r\nimport_state:{}\r\n",
                i.range,
                i.state.name()
            ));
        }
    }
    Ok(Reply::Verbatim(text.into()))
}

/// CLUSTER NODES.
pub fn cluster_nodes(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = cluster(ctx)?;
    let topology = topology(cluster)?;
    let myid = cluster.myid();
    Ok(Reply::Verbatim(
        topology.nodes_text(myid.as_deref(), now_ms()).into(),
    ))
}

/// CLUSTER SLOTS: each run of slots with one owner, its master then its replicas, each as
/// Redis 7.0 gives them (address, port, ID and a map of no further endpoints).
pub fn cluster_slots(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let topology = topology(cluster(ctx)?)?;
    let endpoint = |index: usize| {
        let node = &topology.nodes[index];
        Reply::Array(vec![
            Reply::bulk(node.host.clone()),
            Reply::Integer(i64::from(node.port)),
            Reply::bulk(node.id.clone()),
            Reply::Map(Vec::new()),
        ])
    };
    let runs = topology
        .runs()
        .into_iter()
        .map(|(range, owner)| {
            let mut entry = vec![
                Reply::Integer(i64::from(range.first)),
                Reply::Integer(i64::from(range.last)),
                endpoint(owner),
            ];
            let master = &topology.nodes[owner].id;
            entry.extend(
                topology
                    .replicas_of(master)
                    .filter_map(|r| topology.index_of(&r.id))
                    .map(endpoint),
            );
            Reply::Array(entry)
        })
        .collect();
    Ok(Reply::Array(runs))
}

/// CLUSTER SHARDS: each master's slots (as start and end pairs) and its nodes.
pub fn cluster_shards(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = cluster(ctx)?;
    let topology = topology(cluster)?;
    let own_offset = ctx.services.replication.offset() as i64;
    let myid = cluster.myid();
    let details = |index: usize| {
        let node = &topology.nodes[index];
        let field = |name: &'static str, value: Reply| (Reply::bulk(name), value);
        // Only this node's own offset is known here: the others' are not exchanged.
        let offset = if myid.as_deref() == Some(node.id.as_str()) {
            own_offset
        } else {
            0
        };
        let role = if node.is_master() {
            "master"
        } else {
            "replica"
        };
        Reply::Map(vec![
            field("id", Reply::bulk(node.id.clone())),
            field("port", Reply::Integer(i64::from(node.port))),
            field("ip", Reply::bulk(node.host.clone())),
            field("endpoint", Reply::bulk(node.host.clone())),
            field("role", Reply::bulk(role)),
            field("replication-offset", Reply::Integer(offset)),
            field("health", Reply::bulk("online")),
        ])
    };
    let shards = topology
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.is_master())
        .map(|(index, master)| {
            let slots = topology
                .ranges_of(index)
                .into_iter()
                .flat_map(|r| [r.first, r.last])
                .map(|s| Reply::Integer(i64::from(s)))
                .collect();
            let mut nodes = vec![details(index)];
            nodes.extend(
                topology
                    .replicas_of(&master.id)
                    .filter_map(|r| topology.index_of(&r.id))
                    .map(details),
            );
            Reply::Map(vec![
                (Reply::bulk("slots"), Reply::Array(slots)),
                (Reply::bulk("nodes"), Reply::Array(nodes)),
            ])
        })
        .collect();
    Ok(Reply::Array(shards))
}

/// CLUSTER MYID and CLUSTERX MYID: the node's ID, empty before it has one.
pub fn cluster_myid(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk(cluster(ctx)?.myid().unwrap_or_default()))
}

/// CLUSTER KEYSLOT key
pub fn cluster_keyslot(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    cluster(ctx)?;
    Ok(Reply::Integer(i64::from(slot(&args[2]))))
}

/// CLUSTER COUNTKEYSINSLOT slot
pub fn cluster_countkeysinslot(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    cluster(ctx)?;
    let slot = u16::try_from(int(&args[2])?)
        .ok()
        .filter(|&s| s < SLOTS)
        .ok_or_else(|| Error::msg("Invalid slot"))?;
    Ok(Reply::Integer(ctx.db().count_in_slot(slot)? as i64))
}

/// CLUSTER GETKEYSINSLOT slot count
pub fn cluster_getkeysinslot(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    cluster(ctx)?;
    let (slot, count) = (int(&args[2])?, int(&args[3])?);
    let invalid = || Error::msg("Invalid slot or number of keys");
    let slot = u16::try_from(slot)
        .ok()
        .filter(|&s| s < SLOTS)
        .ok_or_else(invalid)?;
    let count = usize::try_from(count).map_err(|_| invalid())?;
    let keys = ctx.db().keys_in_slot(slot, count)?;
    Ok(Reply::Array(keys.into_iter().map(Reply::Bulk).collect()))
}

/// CLUSTER REPLICAS node-id (and CLUSTER SLAVES): the master's replicas, as CLUSTER NODES
/// lines.
pub fn cluster_replicas(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = cluster(ctx)?;
    let topology = topology(cluster)?;
    let id = text(&args[2]);
    let node = topology
        .node(&id)
        .ok_or_else(|| Error::msg(format!("Unknown node {id}")))?;
    if !node.is_master() {
        return Err(Error::msg("The specified node is not a master"));
    }
    let myid = cluster.myid();
    let now = now_ms();
    Ok(Reply::Array(
        topology
            .replicas_of(&node.id)
            .filter_map(|r| topology.index_of(&r.id))
            .map(|index| Reply::bulk(topology.node_line(index, myid.as_deref(), now)))
            .collect(),
    ))
}

/// CLUSTER RESET [HARD|SOFT]: forgets the topology (HARD also the node ID). A master must
/// hold no keys; a replica stops replicating and drops its data, as in Redis.
pub fn cluster_reset(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = cluster(ctx)?;
    let hard = match args.get(2) {
        None => false,
        Some(a) if is(a, "hard") => true,
        Some(a) if is(a, "soft") => false,
        Some(_) => return Err(Error::Syntax),
    };
    if args.len() > 3 {
        return Err(Error::Syntax);
    }
    let replication = &ctx.services.replication;
    if replication.master().is_some() {
        replication.promote()?;
        let ranges = ctx.db().flush(true)?;
        ctx.services.reclaim_in_background(ranges);
    } else {
        for index in 0..ctx.keyspace.databases() {
            if ctx.db_at(index).size()? != 0 {
                return Err(Error::msg(
                    "CLUSTER RESET can't be called with master nodes containing keys",
                ));
            }
        }
    }
    cluster.reset(hard)?;
    Ok(Reply::OK)
}

pub fn cluster_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "IMPORT <slot>|<first-last> 0|1|2",
        "    Sent by a migrating master: receive the slots on this connection (0), they are",
        "    all here (1), or the migration failed (2).",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "REPLICAS <node-id>",
        "    Return <node-id> replicas.",
        "RESET [HARD|SOFT]",
        "    Reset current node (default: soft).",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
    ]))
}

pub fn clusterx_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "CLUSTERX <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "VERSION",
        "    Return the version of the node's topology, -1 before it has one.",
        "MYID",
        "    Return the node id.",
        "SETNODEID <node-id>",
        "    Set the node id (40 characters).",
        "SETNODES <topology> <version> [FORCE]",
        "    Set the topology: a line per node, '<id> <ip> <port> master - <slots...>' or",
        "    '<id> <ip> <port> slave <master-id>'; FORCE also takes an older version.",
        "SETSLOT <slot> NODE <node-id> <version>",
        "    Give a slot to a master, as the version after the current one.",
        "MIGRATE <slot>|<first-last> <node-id>",
        "    Move the slots with their keys to another master; CLUSTER INFO follows it.",
    ]))
}

/// CLUSTERX VERSION: the topology's version as a bulk string, -1 before the first.
pub fn clusterx_version(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::bulk(cluster(ctx)?.version().to_string()))
}

/// CLUSTERX SETNODEID id: this node's ID, which the control plane chose; the topology may
/// now name this node, and its role follows.
pub fn clusterx_setnodeid(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = shared_cluster(ctx)?;
    let id = std::str::from_utf8(&args[2])
        .ok()
        .filter(|id| id.len() == NODE_ID_LEN)
        .ok_or_else(|| Error::msg("Invalid node id"))?;
    cluster.set_node_id(id)?;
    take_role(ctx, &cluster)?;
    Ok(Reply::OK)
}

/// Replication as the topology says; a node promoted takes over its master's migration. A
/// master's record of its migration follows the topology, which may have taken its slots.
fn take_role(ctx: &Context<'_>, cluster: &Arc<Cluster>) -> Result<(), Error> {
    if cluster.apply_role(&ctx.services.replication)? {
        migration::take_over(cluster, &ctx.services.keyspace)?;
    }
    migration::record_or_warn(cluster, &ctx.services.keyspace);
    Ok(())
}

/// CLUSTERX SETNODES text version [FORCE]: the whole topology, as Kvrocks takes it.
pub fn clusterx_setnodes(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = shared_cluster(ctx)?;
    let force = match args.get(4) {
        None => false,
        Some(a) if is(a, "force") && args.len() == 5 => true,
        Some(_) => return Err(Error::msg("Invalid setnodes options")),
    };
    let version = int(&args[3]).map_err(|_| Error::msg("Invalid version"))?;
    let text =
        std::str::from_utf8(&args[2]).map_err(|_| Error::msg("Invalid cluster nodes info"))?;
    let bind = ctx.services.config.read().bind.clone();
    let listening = Listening {
        port: ctx.services.tcp_port,
        bind: &bind,
    };
    if cluster.set_nodes(text, version, force, listening)? {
        take_role(ctx, &cluster).map_err(|e| {
            Error::msg(format!(
                "failed to set master-replica replication: {}",
                reply_text(&e)
            ))
        })?;
    }
    Ok(Reply::OK)
}

/// CLUSTERX SETSLOT slot NODE id version: one slot to a master, as the next version.
pub fn clusterx_setslot(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = cluster(ctx)?;
    if !is(&args[3], "node") {
        return Err(Error::msg("Invalid setslot options"));
    }
    let slot = u16::try_from(int(&args[2])?)
        .ok()
        .filter(|&s| s < SLOTS)
        .ok_or_else(|| Error::msg("Invalid slot id"))?;
    let id = std::str::from_utf8(&args[4])
        .ok()
        .filter(|id| id.len() == NODE_ID_LEN)
        .ok_or_else(|| Error::msg("Invalid node id"))?;
    let version = int(&args[5])?;
    if version < 0 {
        return Err(Error::msg("Invalid version"));
    }
    cluster.set_slot(slot, id, version)?;
    Ok(Reply::OK)
}

/// CLUSTERX MIGRATE slot|first-last destination-id: moves the slots with their keys to
/// another master, in the background; CLUSTER INFO reports how it goes.
pub fn clusterx_migrate(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = shared_cluster(ctx)?;
    let range = slot_range(&args[2])?;
    let destination = std::str::from_utf8(&args[3]).unwrap_or_default();
    let destination = cluster.begin_migration(range, destination)?;
    // Before the reply: the controller polls a replica promoted from now on for it.
    if let Err(err) = migration::record(&cluster, &ctx.services.keyspace) {
        cluster.end_migration(false)?;
        return Err(err);
    }
    let password = ctx.services.config.read().requirepass.clone();
    let job = Job {
        range,
        destination,
        password,
    };
    migration::spawn(cluster, ctx.services.keyspace.clone(), job);
    Ok(Reply::OK)
}

/// CLUSTER IMPORT slot|first-last 0|1|2, which a migrating source sends its destination:
/// the import starts on this connection, succeeded, or failed.
pub fn cluster_import(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let cluster = shared_cluster(ctx)?;
    let range = slot_range(&args[2])?;
    let keyspace = &ctx.services.keyspace;
    match &args[3][..] {
        b"0" => {
            if cluster.begin_import(range)? {
                // Slots that once migrated away are written here again.
                let moves = &keyspace.slot_moves;
                if range.slots().any(|slot| moves.forbids(slot)) && !cluster.migrating() {
                    moves.stop();
                }
                // What an earlier import left of these slots.
                off_worker(|| migration::delete_all(keyspace, range))?;
                // A migration of them away no longer redirects them: nor may a replica
                // promoted later.
                migration::record_or_warn(&cluster, keyspace);
            }
            ctx.client.cluster_import_link = true;
        }
        b"1" => {
            cluster.end_import(range, true)?;
            ctx.client.cluster_import_link = false;
        }
        b"2" => {
            cluster.end_import(range, false)?;
            ctx.client.cluster_import_link = false;
            migration::delete_in_background(cluster, keyspace.clone(), range, "failed import");
        }
        _ => return Err(Error::msg("Invalid import state")),
    }
    Ok(Reply::OK)
}

/// A slot or a range of them, `N` or `first-last`, as Kvrocks reads them.
fn slot_range(arg: &[u8]) -> Result<SlotRange, Error> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(SlotRange::parse)
        .ok_or_else(|| {
            Error::msg(format!(
                "Invalid slot range: `{}`",
                String::from_utf8_lossy(arg)
            ))
        })
}

/// An error's text without its code, to be quoted in another error.
fn reply_text(err: &Error) -> String {
    match err.to_reply() {
        Reply::Error(line) => line
            .split_once(' ')
            .map_or(line.to_string(), |(_, t)| t.to_string()),
        _ => String::new(),
    }
}

/// READONLY: a replica serves its master's reads on this connection.
pub fn readonly(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    enabled(ctx)?;
    ctx.client.cluster_readonly = true;
    Ok(Reply::OK)
}

/// READWRITE: back to redirecting every key a replica's master owns.
pub fn readwrite(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    enabled(ctx)?;
    ctx.client.cluster_readonly = false;
    Ok(Reply::OK)
}

/// ASKING: accepted for clients that send it after an ASK redirection, which Shale never
/// sends (slots move whole, see `CLUSTERX MIGRATE`).
pub fn asking(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    enabled(ctx)?;
    Ok(Reply::OK)
}

/// Redis's refusal of READONLY, READWRITE and ASKING outside cluster mode.
fn enabled(ctx: &Context<'_>) -> Result<(), Error> {
    match ctx.services.cluster {
        Some(_) => Ok(()),
        None => Err(Error::msg("This instance has cluster support disabled")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_slot_share_it_and_others_cross() {
        let mut common = None;
        merge_slot(&mut common, Some(slot(b"{user}.a"))).expect("first");
        merge_slot(&mut common, Some(slot(b"{user}.b"))).expect("same tag");
        merge_slot(&mut common, None).expect("no key");
        assert_eq!(common, Some(slot(b"user")));
        assert!(matches!(
            merge_slot(&mut common, Some(slot(b"other"))),
            Err(Error::CrossSlot)
        ));
    }

    #[test]
    fn a_declared_slot_is_the_first_keys() {
        let keys = [Bytes::from_static(b"foo"), Bytes::from_static(b"bar")];
        assert_eq!(ScriptSlot::of(&keys, false).slot, Some(12182));
        assert_eq!(ScriptSlot::of(&[], true).slot, None);
    }
}
