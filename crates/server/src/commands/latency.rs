//! LATENCY: the latency monitor's events and the commands' run-time histograms.

use std::fmt::Write;

use bytes::Bytes;
use shale_protocol::Reply;

use super::table::{lookup_full, CommandSpec};
use super::{help_reply, Context};
use crate::error::Error;
use crate::services::latency::{Counts, Summary};

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

/// LATENCY HISTOGRAM [command ...]: for each command that ran (of those named, by name or as
/// `container|subcommand`, a container standing also for its subcommands), its calls and their
/// cumulative distribution.
pub fn histogram(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let latencies = &ctx.services.latencies;
    let specs: Vec<&'static CommandSpec> = if args.len() == 2 {
        super::table::ALL_COMMANDS.iter().copied().collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|name| lookup_full(name))
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

/// LATENCY DOCTOR: Redis's report on the monitor's events, with the advice Redis gives for
/// the events Shale records (command, fast-command, expire-cycle) and for huge pages.
pub fn doctor(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let settings = {
        let config = ctx.services.config.read();
        Settings {
            threshold: config.latency_monitor_threshold,
            slower_than: config.slowlog_log_slower_than,
            hz: config.hz,
        }
    };
    let monitor = &ctx.services.latency_monitor;
    let report = if monitor.is_empty() && settings.threshold == 0 {
        DISABLED.to_string()
    } else {
        let now = crate::services::replication::unix_secs();
        report(&monitor.summaries(now), &settings, anon_huge_pages() > 0)
    };
    Ok(Reply::Verbatim(Bytes::from(report)))
}

const DISABLED: &str = "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n";

/// The configuration the report's advice depends on.
struct Settings {
    /// `latency-monitor-threshold`, in ms.
    threshold: u64,
    /// `slowlog-log-slower-than`, in µs.
    slower_than: i64,
    hz: u32,
}

/// Redis's `createLatencyReport`, line for line, over the events Shale records.
fn report(events: &[Summary], settings: &Settings, huge_pages: bool) -> String {
    let mut out = String::new();
    let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut hz, mut large_objects) = (false, false, false);
    let mut advices = 0;
    for (number, e) in events.iter().enumerate() {
        if number == 0 {
            out.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let _ = write!(
            out,
            "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
            number + 1,
            e.event,
            e.samples,
            e.avg,
            e.mad,
            e.period as f64 / e.samples as f64,
            e.max
        );
        match e.event {
            "command" => {
                if settings.slower_than < 0 {
                    slowlog_enabled = true;
                    advices += 1;
                } else if settings.slower_than / 1000 > settings.threshold as i64 {
                    slowlog_tuning = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            "expire-cycle" => {
                hz = true;
                large_objects = true;
                advices += 2;
            }
            _ => {}
        }
        out.push('\n');
    }
    if huge_pages {
        advices += 1;
    }

    if events.is_empty() && advices == 0 {
        out.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return out;
    }
    if advices == 0 {
        out.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        return out;
    }
    out.push_str("\nI have a few advices for you:\n\n");
    let threshold_usec = settings.threshold * 1000;
    if slowlog_enabled {
        let _ = writeln!(out, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {threshold_usec}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
    }
    if slowlog_tuning {
        let _ = writeln!(out, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_usec}'.");
    }
    if slowlog_inspect {
        out.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if scheduler {
        out.push_str(concat!(
            "- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n",
            "  1) Lower the system load.\n",
            "  2) Use a computer / VM just for Redis if you are running other software in the same system.\n",
            "  3) Check if you have a \"noisy neighbour\" problem.\n",
            "  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n",
            "  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n",
        ));
    }
    if hz && settings.hz < 100 {
        out.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
    }
    if large_objects {
        out.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if huge_pages {
        out.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
    }
    out
}

/// The process's transparent huge pages, in bytes: the `AnonHugePages` of its mappings.
fn anon_huge_pages() -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    smaps
        .lines()
        .filter_map(|line| line.strip_prefix("AnonHugePages:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

/// LATENCY HELP
pub fn help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
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
