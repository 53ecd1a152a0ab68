//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC holds every key its commands name (and the watched keys), checks WATCH, runs the
//! commands against a [`crate::types::Transaction`] and commits their writes as one batch.

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::db_index;
use super::{command_keys, execute_nested, publish_committed, resolve, Context, Event};
use crate::error::Error;
use crate::server::{ClientState, QueuedTransaction, Services};
use crate::types::{HeldStripes, Keyspace, Transaction};

/// A transaction whose commands ran, with the keyspace events to publish once it commits. Its
/// keys stay locked until it is dropped.
pub struct Committing {
    pub txn: Transaction,
    pub events: Vec<Event>,
}

impl Committing {
    /// What follows the commit: the events go out, the locks are released, and the space of
    /// databases the transaction flushed is reclaimed (waiting for it after FLUSHALL SYNC).
    pub fn committed(self, services: &Services) -> Result<(), Error> {
        publish_committed(services, self.events);
        let (ranges, wait) = self.txn.take_reclaims();
        drop(self.txn);
        if wait {
            services.keyspace.reclaim(&ranges)?;
        } else if !ranges.is_empty() {
            services.reclaim_in_background(ranges);
        }
        Ok(())
    }
}

/// Starts the transaction of an EXEC or a script: it takes over `declared_locks`, the stripes
/// its connection locked for the keys it declares, or locks `keys` now.
pub fn begin_declared(
    keyspace: &Keyspace,
    declared_locks: Option<HeldStripes>,
    keys: &[(u8, &[u8])],
) -> Result<Transaction, Error> {
    match declared_locks {
        Some(held) => Ok(keyspace.begin_holding(held)),
        None => keyspace.begin(keys),
    }
}

/// Commits the transaction of an EXEC or a script. A script that took over its connection's
/// locks ([`begin_declared`]) leaves it to the connection instead, which shares the storage
/// write with other connections' rather than waiting in RocksDB's queue on its thread. It may
/// wait holding its locks because every client that wants them then waits without a thread
/// too; a transaction that locked them itself, synchronously, must not.
pub fn finish_transaction(
    ctx: &mut Context<'_>,
    txn: Transaction,
    events: Vec<Event>,
    declared_held: bool,
) -> Result<(), Error> {
    let committing = Committing { txn, events };
    if declared_held {
        ctx.committing = Some(committing);
        return Ok(());
    }
    ctx.keyspace.commit(&committing.txn)?;
    committing.committed(ctx.services)
}

pub fn multi(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.client.multi.is_some() {
        return Err(Error::msg("MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(QueuedTransaction::default());
    ctx.client.share_state();
    Ok(Reply::OK)
}

pub fn discard(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.client.multi.take().is_none() {
        return Err(Error::msg("DISCARD without MULTI"));
    }
    ctx.client.share_state();
    ctx.keyspace.unwatch(&mut ctx.client.watching);
    Ok(Reply::OK)
}

pub fn watch(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.client.multi.is_some() {
        return Err(Error::msg("WATCH inside MULTI is not allowed"));
    }
    // Never inside a transaction, so not through `ctx.db()`.
    let db = ctx.keyspace.db(ctx.client.db);
    db.watch(&mut ctx.client.watching, &args[1..])?;
    Ok(Reply::OK)
}

pub fn unwatch(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    ctx.keyspace.unwatch(&mut ctx.client.watching);
    Ok(Reply::OK)
}

pub fn exec(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let Some(queued) = ctx.client.multi.take() else {
        return Err(Error::msg("EXEC without MULTI"));
    };
    ctx.client.share_state();
    if queued.refused {
        ctx.keyspace.unwatch(&mut ctx.client.watching);
        return Err(Error::Prefixed(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    let declared_locks = ctx.declared_locks.take();
    let keys = declared_keys(ctx.keyspace, ctx.client, queued.commands());
    let txn = begin_declared(ctx.keyspace, declared_locks, &keys)?;
    let broken = ctx.keyspace.watch_broken(&ctx.client.watching);
    ctx.keyspace.unwatch(&mut ctx.client.watching);
    if broken {
        return Ok(Reply::NullArray);
    }
    let mut inner = Context::new(ctx.services, &mut *ctx.client, Some(&txn), None);
    let mut replies = Vec::with_capacity(queued.commands().len());
    for args in queued.commands() {
        replies.push(execute_nested(&mut inner, args).reply);
    }
    let events = std::mem::take(&mut inner.events);
    // Committed here even when the connection took the locks: waiting for a turn in the
    // shared writes, an EXEC of many writes kept its keys longer than it saved, and MULTI/EXEC
    // of 10 SETs after a load lost 11% of its throughput.
    finish_transaction(ctx, txn, events, false)?;
    Ok(Reply::Array(replies))
}

/// Every key the queued commands name and every watched key, each with its database (SELECT
/// inside the transaction switches databases for the commands after it).
pub fn declared_keys<'a>(
    keyspace: &Keyspace,
    client: &'a ClientState,
    commands: &'a [Vec<Bytes>],
) -> Vec<(u8, &'a [u8])> {
    let mut keys = keyspace.watched_keys(&client.watching);
    let mut db = client.db as u8;
    for args in commands {
        let Ok(spec) = resolve(args) else {
            continue;
        };
        if spec.name == "select" {
            if let Some(index) = args
                .get(1)
                .and_then(|a| db_index(a, keyspace.databases()).ok())
            {
                db = index as u8;
            }
        }
        keys.extend(command_keys(spec, args).into_iter().map(|key| (db, key)));
    }
    keys
}
