//! LATENCY: the latency monitor's events and the commands' run-time histograms.

use bytes::Bytes;
use shale_protocol::Reply;

use super::table::{lookup, CommandSpec};
use super::{help_reply, Context};
use crate::error::Error;
use crate::services::latency::Counts;

/// LATENCY LATEST: each event's last sample and its maximum.
pub fn latest(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let events = ctx.services.latency_monitor.latest();
    Ok(Reply::Array(
        events
            .into_iter()
            .map(|e| {
                Reply::Array(vec![
                    Reply::bulk(e.event),
                    Reply::Integer(e.time as i64),
                    Reply::Integer(e.latest as i64),
                    Reply::Integer(e.max as i64),
                ])
            })
            .collect(),
    ))
}

/// LATENCY HISTORY event
pub fn history(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let event = String::from_utf8_lossy(&args[2]);
    let samples = ctx.services.latency_monitor.history(&event);
    Ok(Reply::Array(
        samples
            .into_iter()
            .map(|(time, millis)| {
                Reply::Array(vec![
                    Reply::Integer(time as i64),
                    Reply::Integer(millis as i64),
                ])
            })
            .collect(),
    ))
}

/// LATENCY RESET [event ...]
pub fn reset(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let named: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    let forgotten = ctx.services.latency_monitor.reset(&named);
    Ok(Reply::Integer(forgotten as i64))
}

/// LATENCY HISTOGRAM [command ...]: for each command that ran (of those named, a container
/// standing for its subcommands), its calls and their cumulative distribution.
pub fn histogram(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let latencies = &ctx.services.latencies;
    let specs: Vec<&'static CommandSpec> = if args.len() == 2 {
        super::table::ALL_COMMANDS.iter().copied().collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|name| lookup(name))
            .flat_map(|spec| std::iter::once(spec).chain(spec.subcommands.iter()))
            .collect()
    };
    let pairs = specs
        .into_iter()
        .filter_map(|spec| {
            let counts = latencies.of(spec.index())?.snapshot();
            (counts.total() > 0).then(|| (Reply::bulk(spec.name), distribution(&counts)))
        })
        .collect();
    Ok(Reply::Map(pairs))
}

fn distribution(counts: &Counts) -> Reply {
    let buckets = counts
        .cumulative_usec()
        .into_iter()
        .map(|(usec, count)| (Reply::Integer(usec as i64), Reply::Integer(count as i64)))
        .collect();
    Reply::Map(vec![
        (Reply::bulk("calls"), Reply::Integer(counts.total() as i64)),
        (Reply::bulk("histogram_usec"), Reply::Map(buckets)),
    ])
}

/// LATENCY HELP
pub fn help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
        "    If no commands are specified then all histograms are replied.",
    ]))
}
