//! Replication commands: REPLICAOF (and SLAVEOF), ROLE, WAIT, and the REPLCONF and PSYNC of a
//! replica's handshake.

use std::time::Duration;

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is, text};
use super::Context;
use crate::error::Error;
use crate::keyspace::{as_redis_replica, ReplicaMode};
use crate::services::replication::PsyncRequest;
use crate::services::{ClientState, Closing, Services};

/// What WAIT asks the connection to wait for: `needed` replicas at `offset`.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaWait {
    pub needed: usize,
    pub offset: u64,
    /// `None` waits forever.
    pub timeout: Option<Duration>,
}

/// REPLICAOF host port | NO ONE.
pub fn replicaof(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let services = ctx.services;
    // The topology says whom a cluster node replicates.
    if services.cluster.is_some() {
        return Err(Error::msg("REPLICAOF not allowed in cluster mode."));
    }
    let replication = &services.replication;
    if is(&args[1], "no") && is(&args[2], "one") {
        if replication.master().is_some() {
            replication.promote()?;
            services.config.write().replication.replicaof = None;
            tracing::info!("MASTER MODE enabled (user request)");
        }
        return Ok(Reply::OK);
    }
    if ctx.client.closing == Some(Closing::ToReplica) {
        return Err(Error::msg("Command is not valid when client is a replica."));
    }
    let port = int(&args[2])
        .ok()
        .and_then(|port| u16::try_from(port).ok())
        .ok_or_else(|| Error::msg("Invalid master port"))?;
    let host = text(&args[1]);
    if let Some(master) = replication.master() {
        if master.host.eq_ignore_ascii_case(&host) && master.port == port {
            return Ok(Reply::Status(
                "OK Already connected to specified master".into(),
            ));
        }
    }
    replication.follow(host.clone(), port);
    services.config.write().replication.replicaof = Some((host.clone(), port));
    tracing::info!("REPLICAOF {host}:{port} enabled (user request)");
    Ok(Reply::OK)
}

/// ROLE: `master`, offset, replicas; or `slave`, master host and port, link state, offset.
pub fn role(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let replication = &ctx.services.replication;
    let offset = replication.offset() as i64;
    Ok(match replication.master() {
        None => Reply::Array(vec![
            Reply::bulk("master"),
            Reply::Integer(offset),
            Reply::Array(
                replication
                    .replicas()
                    .iter()
                    .filter(|r| r.is_online())
                    .map(|r| {
                        Reply::Array(vec![
                            Reply::bulk(r.ip.clone()),
                            Reply::bulk(r.port.to_string()),
                            Reply::bulk(r.acked().to_string()),
                        ])
                    })
                    .collect(),
            ),
        ]),
        Some(master) => Reply::Array(vec![
            Reply::bulk("slave"),
            Reply::bulk(master.host.clone()),
            Reply::Integer(i64::from(master.port)),
            Reply::bulk(master.state().name()),
            Reply::Integer(if master.is_up() { offset } else { -1 }),
        ]),
    })
}

/// WAIT numreplicas timeout: how many replicas acknowledged this connection's writes, once
/// `numreplicas` have or `timeout` milliseconds passed.
pub fn wait(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let replication = &ctx.services.replication;
    if replication.master().is_some() {
        return Err(Error::msg("WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let needed = int(&args[1])?;
    let timeout = int(&args[2])?;
    if timeout < 0 {
        return Err(Error::msg("timeout is negative"));
    }
    // Every write so far, this connection's among them.
    let offset = replication.offset();
    let acked = replication.acknowledged(offset);
    if acked as i64 >= needed || ctx.txn.is_some() {
        return Ok(Reply::Integer(acked as i64));
    }
    ctx.replica_wait = Some(ReplicaWait {
        needed: needed as usize,
        offset,
        timeout: (timeout > 0).then(|| Duration::from_millis(timeout as u64)),
    });
    replication.request_acks();
    Ok(Reply::Integer(acked as i64))
}

/// REPLCONF listening-port | ip-address | capa | ack | getack: what a replica tells its
/// master during the handshake.
pub fn replconf(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    for pair in args[1..].chunks_exact(2) {
        let (option, value) = (&pair[0], &pair[1]);
        if is(option, "listening-port") {
            let port = int(value)
                .ok()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or(Error::NotInteger)?;
            ctx.client.replica.hello.listening_port = port;
        } else if is(option, "ip-address") {
            ctx.client.replica.hello.ip_address = Some(text(value));
        } else if is(option, "capa")
            || is(option, "ack")
            || is(option, "getack")
            || is(option, "shale")
        {
            // `shale`: a Shale replica asks, to know its master is no Redis.
            // Capabilities: every Shale replica has the ones that matter. Acknowledgements
            // arrive on a replica's stream, where the feed reads them.
        } else {
            return Err(Error::msg(format!(
                "Unrecognized REPLCONF option: {}",
                text(option)
            )));
        }
    }
    Ok(Reply::OK)
}

/// PSYNC replicationid offset: the connection becomes the replica's feed, which answers
/// `+FULLRESYNC` or `+CONTINUE` itself.
pub fn psync(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.keyspace.replica_mode() == ReplicaMode::OfRedis {
        return Err(Error::msg(
            "Shale can't feed replicas while it follows a Redis master",
        ));
    }
    if ctx.keyspace.is_replica()
        && !ctx
            .services
            .replication
            .master()
            .is_some_and(|master| master.is_up())
    {
        return Err(Error::NoMasterLink);
    }
    let offset = int(&args[2]).map_err(|_| Error::NotInteger)?;
    ctx.client.replica.psync = Some(PsyncRequest {
        id: text(&args[1]),
        offset,
    });
    ctx.client.closing = Some(Closing::ToReplica);
    Ok(Reply::Sequence(Vec::new()))
}

/// Runs one command of a Redis master's stream on this replica as the master's client: it may
/// write though the server is a replica; the reply goes nowhere but the link's log.
pub fn run_for_master(services: &Services, client: &mut ClientState, args: &[Bytes]) -> Reply {
    let mut ctx = Context::new(services, client, None, None);
    ctx.from_master = true;
    as_redis_replica(|| super::execute(&mut ctx, args).reply)
}
