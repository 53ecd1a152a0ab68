//! Pub/sub commands: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBE forms, PUBLISH,
//! SPUBLISH and PUBSUB.

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::text;
use super::{help_reply, Context};
use crate::error::Error;
use crate::services::pubsub::Kind;

fn confirmation(word: &'static str, name: Option<Bytes>, count: i64) -> Reply {
    Reply::Push(vec![
        Reply::bulk(word),
        Reply::bulk_or_null(name),
        Reply::Integer(count),
    ])
}

fn subscribe(ctx: &mut Context<'_>, args: &[Bytes], kind: Kind) -> Result<Reply, Error> {
    let mut replies = Vec::new();
    for name in &args[1..] {
        if ctx.client.subscriptions.insert(kind, name.clone()) {
            ctx.services
                .pubsub
                .subscribe(kind, name.clone(), &ctx.client.subscriber);
        }
        replies.push(confirmation(
            kind.subscribe_word(),
            Some(name.clone()),
            ctx.client.subscriptions.count(kind),
        ));
    }
    ctx.client.share_state();
    Ok(Reply::Sequence(replies))
}

fn unsubscribe(ctx: &mut Context<'_>, args: &[Bytes], kind: Kind) -> Result<Reply, Error> {
    let names: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        ctx.client.subscriptions.ordered(kind)
    };
    if names.is_empty() {
        return Ok(confirmation(
            kind.unsubscribe_word(),
            None,
            ctx.client.subscriptions.count(kind),
        ));
    }
    let id = ctx.client.handle.id;
    let mut replies = Vec::new();
    for name in names {
        ctx.client.subscriptions.remove(kind, &name);
        ctx.services.pubsub.unsubscribe(kind, &name, id);
        replies.push(confirmation(
            kind.unsubscribe_word(),
            Some(name),
            ctx.client.subscriptions.count(kind),
        ));
    }
    ctx.client.share_state();
    Ok(Reply::Sequence(replies))
}

pub fn subscribe_cmd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    subscribe(ctx, args, Kind::Channel)
}

pub fn psubscribe(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    subscribe(ctx, args, Kind::Pattern)
}

pub fn ssubscribe(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    subscribe(ctx, args, Kind::Shard)
}

pub fn unsubscribe_cmd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    unsubscribe(ctx, args, Kind::Channel)
}

pub fn punsubscribe(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    unsubscribe(ctx, args, Kind::Pattern)
}

pub fn sunsubscribe(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    unsubscribe(ctx, args, Kind::Shard)
}

pub fn publish(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.services.pubsub.publish(
        Kind::Channel,
        &args[1],
        &args[2],
    )))
}

pub fn spublish(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.services.pubsub.publish(
        Kind::Shard,
        &args[1],
        &args[2],
    )))
}

/// PUBSUB CHANNELS [pattern]
pub fn pubsub_channels(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    channels(ctx, args, Kind::Channel)
}

/// PUBSUB SHARDCHANNELS [pattern]
pub fn pubsub_shardchannels(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    channels(ctx, args, Kind::Shard)
}

/// PUBSUB NUMSUB [channel ...]
pub fn pubsub_numsub(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(subscriber_counts(ctx, args, Kind::Channel))
}

/// PUBSUB SHARDNUMSUB [channel ...]
pub fn pubsub_shardnumsub(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(subscriber_counts(ctx, args, Kind::Shard))
}

/// PUBSUB NUMPAT
pub fn pubsub_numpat(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(
        ctx.services.pubsub.active_count(Kind::Pattern),
    ))
}

/// PUBSUB HELP
pub fn pubsub_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
    ]))
}

/// The active channels of `kind`, all or those matching the pattern in `args[2]`.
fn channels(ctx: &Context<'_>, args: &[Bytes], kind: Kind) -> Result<Reply, Error> {
    if args.len() > 3 {
        return Err(Error::WrongArity(format!(
            "pubsub|{}",
            text(&args[1]).to_ascii_lowercase()
        )));
    }
    let names = ctx
        .services
        .pubsub
        .channels(kind, args.get(2).map(|p| p.as_ref()));
    Ok(Reply::Array(names.into_iter().map(Reply::Bulk).collect()))
}

/// Each channel of `args[2..]` with its number of subscribers.
fn subscriber_counts(ctx: &Context<'_>, args: &[Bytes], kind: Kind) -> Reply {
    let registry = &ctx.services.pubsub;
    Reply::Map(
        args[2..]
            .iter()
            .map(|name| {
                (
                    Reply::Bulk(name.clone()),
                    Reply::Integer(registry.subscriber_count(kind, name)),
                )
            })
            .collect(),
    )
}
