//! MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC locks every key its commands name (and the watched keys), checks WATCH, runs the
//! commands against a [`crate::keyspace::Transaction`] and commits their writes as one batch.

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::db_index;
use super::{command_keys, execute_nested, resolve, Context, Flags};
use crate::error::Error;
use crate::services::QueuedTransaction;

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
        return Err(Error::ExecAbort);
    }
    let keys = declared_keys(ctx, queued.commands());
    let txn = ctx.keyspace.begin(&keys)?;
    let broken = ctx.keyspace.watch_broken(&ctx.client.watching);
    ctx.keyspace.unwatch(&mut ctx.client.watching);
    if broken {
        return Ok(Reply::NullArray);
    }
    let mut inner = Context::new(ctx.services, &mut *ctx.client, Some(&txn), None);
    inner.from_master = ctx.from_master;
    inner.in_exec = true;
    let mut replies = Vec::with_capacity(queued.commands().len());
    for args in queued.commands() {
        replies.push(execute_nested(&mut inner, args).reply);
    }
    let events = std::mem::take(&mut inner.events);
    ctx.keyspace.commit(&txn)?;
    ctx.services.notifications().publish_all(events);
    let (ranges, wait) = txn.take_reclaims();
    drop(txn);
    if wait {
        ctx.keyspace.reclaim(&ranges)?;
    } else if !ranges.is_empty() {
        ctx.services.reclaim_in_background(ranges);
    }
    Ok(Reply::Array(replies))
}

/// Every key the queued commands name and every watched key, each with its database (SELECT
/// inside the transaction switches databases for the commands after it).
fn declared_keys<'a>(ctx: &'a Context<'_>, commands: &'a [Vec<Bytes>]) -> Vec<(u8, &'a [u8])> {
    let mut keys = ctx.keyspace.watched_keys(&ctx.client.watching);
    let mut db = ctx.client.db as u8;
    for args in commands {
        let Ok(spec) = resolve(args) else {
            continue;
        };
        if spec.flags.contains(Flags::SELECTS_DB) {
            if let Some(index) = args
                .get(1)
                .and_then(|a| db_index(a, ctx.keyspace.databases()).ok())
            {
                db = index as u8;
            }
        }
        keys.extend(command_keys(spec, args).into_iter().map(|key| (db, key)));
    }
    keys
}
