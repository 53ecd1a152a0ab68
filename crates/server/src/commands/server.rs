//! Server commands: COMMAND, INFO, CONFIG, DBSIZE, FLUSHDB, FLUSHALL, TIME, SLOWLOG, SHUTDOWN.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is, text};
use super::table::{lookup, CommandSpec, Flags, COMMANDS};
use super::{help_reply, Context};
use crate::config::Config;
use crate::error::Error;
use crate::server::{info, Closing};
use crate::types::pattern::glob_match;

fn acl_categories(spec: &CommandSpec) -> Vec<Reply> {
    let mut cats = vec![format!(
        "@{}",
        if spec.group == "generic" {
            "keyspace"
        } else {
            spec.group
        }
    )];
    if spec.flags.contains(Flags::WRITE) {
        cats.push("@write".into());
    }
    if spec.flags.contains(Flags::READONLY) {
        cats.push("@read".into());
    }
    cats.push(
        if spec.flags.contains(Flags::FAST) {
            "@fast"
        } else {
            "@slow"
        }
        .into(),
    );
    if spec.flags.contains(Flags::ADMIN) {
        cats.push("@admin".into());
        cats.push("@dangerous".into());
    }
    cats.into_iter().map(|c| Reply::Status(c.into())).collect()
}

/// The COMMAND INFO entry of one command, in Redis 7's ten-field form.
fn command_info(spec: &CommandSpec) -> Reply {
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Integer(spec.arity as i64),
        Reply::Set(spec.flags.names().into_iter().map(Reply::status).collect()),
        Reply::Integer(spec.first_key as i64),
        Reply::Integer(spec.last_key as i64),
        Reply::Integer(spec.step as i64),
        Reply::Set(acl_categories(spec)),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
}

fn command_docs(spec: &CommandSpec) -> Reply {
    Reply::Map(vec![
        (Reply::bulk("summary"), Reply::bulk(spec.summary)),
        (Reply::bulk("group"), Reply::bulk(spec.group)),
    ])
}

/// COMMAND [COUNT | INFO name... | DOCS name... | LIST [FILTERBY ...] | HELP]
pub fn command(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
    };
    let named = || args[2..].iter().filter_map(|name| lookup(name));
    if is(sub, "count") && args.len() == 2 {
        Ok(Reply::Integer(COMMANDS.len() as i64))
    } else if is(sub, "info") {
        if args.len() == 2 {
            return Ok(Reply::Array(COMMANDS.iter().map(command_info).collect()));
        }
        Ok(Reply::Array(
            args[2..]
                .iter()
                .map(|n| lookup(n).map_or(Reply::NullArray, command_info))
                .collect(),
        ))
    } else if is(sub, "docs") {
        let specs: Vec<&CommandSpec> = if args.len() == 2 {
            COMMANDS.iter().collect()
        } else {
            named().collect()
        };
        Ok(Reply::Map(
            specs
                .into_iter()
                .map(|s| (Reply::bulk(s.name), command_docs(s)))
                .collect(),
        ))
    } else if is(sub, "list") {
        let names = COMMANDS.iter().filter(|spec| match args.get(3) {
            Some(value) if args.len() == 5 && is(&args[2], "filterby") && is(value, "pattern") => {
                glob_match(&args[4], spec.name.as_bytes(), true)
            }
            Some(value) if args.len() == 5 && is(&args[2], "filterby") && is(value, "aclcat") => {
                let wanted = format!("@{}", text(&args[4]).to_ascii_lowercase());
                acl_categories(spec).contains(&Reply::Status(wanted.into()))
            }
            Some(value) if args.len() == 5 && is(&args[2], "filterby") && is(value, "module") => {
                false
            }
            _ => true,
        });
        if args.len() != 2 && args.len() != 5 {
            return Err(Error::Syntax);
        }
        Ok(Reply::Array(names.map(|s| Reply::bulk(s.name)).collect()))
    } else if is(sub, "help") {
        Ok(help_reply(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "COUNT",
            "INFO [<command-name> ...]",
            "DOCS [<command-name> ...]",
            "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
            "HELP",
        ]))
    } else {
        Err(Error::UnknownSubcommand {
            sub: text(sub),
            command: "COMMAND",
        })
    }
}

/// INFO [section ...]
pub fn info(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let sections: Vec<String> = args[1..]
        .iter()
        .map(|a| text(a).to_ascii_lowercase())
        .collect();
    let report = info::render(ctx.services, ctx.keyspace, &sections)?;
    Ok(Reply::Verbatim(Bytes::from(report)))
}

/// CONFIG GET pattern... | SET name value... | RESETSTAT | REWRITE | HELP
pub fn config(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let sub = &args[1];
    if is(sub, "get") {
        if args.len() < 3 {
            return Err(Error::WrongArity("config|get".into()));
        }
        let entries = ctx.services.config.read().entries();
        let mut pairs = Vec::new();
        for (name, value) in entries {
            if args[2..]
                .iter()
                .any(|p| glob_match(p, name.as_bytes(), true))
            {
                pairs.push((Reply::bulk(name), Reply::bulk(value)));
            }
        }
        Ok(Reply::Map(pairs))
    } else if is(sub, "set") {
        if args.len() < 4 || !args.len().is_multiple_of(2) {
            return Err(Error::WrongArity("config|set".into()));
        }
        config_set(ctx, &args[2..])
    } else if is(sub, "resetstat") && args.len() == 2 {
        ctx.services.stats.reset();
        Ok(Reply::OK)
    } else if is(sub, "rewrite") && args.len() == 2 {
        let path = ctx
            .services
            .config_file
            .as_ref()
            .ok_or_else(|| Error::msg("The server is running without a config file"))?;
        ctx.services
            .config
            .read()
            .rewrite(path)
            .map_err(|e| Error::msg(format!("Rewriting config file: {e}")))?;
        Ok(Reply::OK)
    } else if is(sub, "help") {
        Ok(help_reply(&[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "SET <directive> <value>",
            "RESETSTAT",
            "REWRITE",
            "HELP",
        ]))
    } else {
        Err(Error::UnknownSubcommand {
            sub: text(sub),
            command: "CONFIG",
        })
    }
}

/// Applies all pairs or none: every value is validated on a copy first.
fn config_set(ctx: &mut Context<'_>, pairs: &[Bytes]) -> Result<Reply, Error> {
    let mut updated = ctx.services.config.read().clone();
    for pair in pairs.chunks_exact(2) {
        let name = text(&pair[0]).to_ascii_lowercase();
        let value = text(&pair[1]);
        match Config::is_mutable(&name) {
            None => {
                return Err(Error::msg(format!("Unknown option or number of arguments for CONFIG SET - '{name}'")))
            }
            Some(false) => {
                return Err(Error::msg(format!("CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config")))
            }
            Some(true) => updated.apply(&name, &value).map_err(|reason| {
                Error::msg(format!("CONFIG SET failed (possibly related to argument '{name}') - {reason}"))
            })?,
        }
    }
    *ctx.services.config.write() = updated;
    ctx.services.apply_config();
    Ok(Reply::OK)
}

pub fn dbsize(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().size()? as i64))
}

/// FLUSHDB/FLUSHALL [ASYNC | SYNC]: the keys are gone at once either way (range deletes);
/// SYNC also waits until compaction has returned their disk space, ASYNC lets it run behind.
fn flush(ctx: &mut Context<'_>, args: &[Bytes], all: bool) -> Result<Reply, Error> {
    let wait = match args.get(1) {
        None => false,
        Some(a) if is(a, "async") && args.len() == 2 => false,
        Some(a) if is(a, "sync") && args.len() == 2 => true,
        Some(_) => return Err(Error::Syntax),
    };
    let ranges = ctx.db().flush(all)?;
    match ctx.txn {
        // The ranges are deleted only when the transaction commits.
        Some(txn) => txn.reclaim_after_commit(ranges, wait),
        None if wait => ctx.keyspace.reclaim(&ranges)?,
        None => ctx.services.reclaim_in_background(ranges),
    }
    Ok(Reply::OK)
}

pub fn flushdb(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    flush(ctx, args, false)
}

pub fn flushall(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    flush(ctx, args, true)
}

pub fn time(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Ok(Reply::Array(vec![
        Reply::bulk(now.as_secs().to_string()),
        Reply::bulk(now.subsec_micros().to_string()),
    ]))
}

/// SLOWLOG GET [count] | LEN | RESET | HELP
pub fn slowlog(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let sub = &args[1];
    let log = &ctx.services.slowlog;
    if is(sub, "get") && args.len() <= 3 {
        let count = match args.get(2) {
            None => 10,
            Some(n) => {
                let n = int(n)?;
                if n < -1 {
                    return Err(Error::msg("count should be greater than or equal to -1"));
                }
                if n == -1 {
                    usize::MAX
                } else {
                    n as usize
                }
            }
        };
        let entries = log.latest(count);
        Ok(Reply::Array(
            entries
                .into_iter()
                .map(|e| {
                    Reply::Array(vec![
                        Reply::Integer(e.id as i64),
                        Reply::Integer(e.timestamp as i64),
                        Reply::Integer(e.duration_us as i64),
                        Reply::Array(e.args.into_iter().map(Reply::Bulk).collect()),
                        Reply::bulk(e.client_addr),
                        Reply::bulk(e.client_name),
                    ])
                })
                .collect(),
        ))
    } else if is(sub, "len") && args.len() == 2 {
        Ok(Reply::Integer(log.count() as i64))
    } else if is(sub, "reset") && args.len() == 2 {
        log.reset();
        Ok(Reply::OK)
    } else if is(sub, "help") {
        Ok(help_reply(&[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "LEN",
            "RESET",
            "HELP",
        ]))
    } else if is(sub, "get") || is(sub, "len") || is(sub, "reset") {
        Err(Error::WrongArity(format!(
            "slowlog|{}",
            text(sub).to_ascii_lowercase()
        )))
    } else {
        Err(Error::UnknownSubcommand {
            sub: text(sub),
            command: "SLOWLOG",
        })
    }
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]. Every acknowledged write is already in the
/// WAL, so SAVE and NOSAVE mean the same here, and there is nothing slow for NOW or FORCE to
/// skip; ABORT has no shutdown in progress to cancel.
pub fn shutdown(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    for arg in &args[1..] {
        if is(arg, "abort") {
            return Err(Error::msg("No shutdown in progress."));
        }
        if !["nosave", "save", "now", "force"]
            .iter()
            .any(|o| is(arg, o))
        {
            return Err(Error::Syntax);
        }
    }
    ctx.services.shutdown.trigger();
    ctx.client.closing = Some(Closing::Immediately);
    Ok(Reply::OK)
}

/// WAIT numreplicas timeout: there are no replicas yet, so it answers 0 at once.
pub fn wait(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    int(&args[1])?;
    if int(&args[2])? < 0 {
        return Err(Error::msg("timeout is negative"));
    }
    Ok(Reply::Integer(0))
}

/// MEMORY USAGE key [SAMPLES count] | HELP. USAGE reports the bytes of the key's records in
/// storage (see `types/memory.rs`); DOCTOR, MALLOC-STATS, PURGE and STATS describe Redis's
/// allocator and are not provided.
pub fn memory(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let sub = &args[1];
    if is(sub, "help") && args.len() == 2 {
        return Ok(help_reply(&[
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "USAGE <key> [SAMPLES <count>]",
            "    Return the bytes that <key> and its value take in storage (keys and values of",
            "    its records, before compression). Nested values are sampled up to <count>",
            "    times (default: 5, 0 means sample all).",
            "HELP",
            "    Print this help.",
        ]));
    }
    if !is(sub, "usage") {
        return Err(Error::UnknownSubcommand {
            sub: text(sub),
            command: "MEMORY",
        });
    }
    if args.len() < 3 {
        return Err(Error::WrongArity("memory|usage".into()));
    }
    let mut samples = Some(5);
    let mut i = 3;
    while i < args.len() {
        if !is(&args[i], "samples") || i + 1 >= args.len() {
            return Err(Error::Syntax);
        }
        samples = match int(&args[i + 1])? {
            0 => None,
            n => Some(u64::try_from(n).map_err(|_| Error::Syntax)?),
        };
        i += 2;
    }
    let usage = ctx.db().memory_usage(&args[2], samples)?;
    Ok(usage.map_or(Reply::Null, |bytes| Reply::Integer(bytes as i64)))
}

/// ROLE: a server without replication is a master with no replicas, at offset 0 (what
/// INFO replication says too). Sentinel-aware clients ask this before they trust a node.
pub fn role(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Array(vec![
        Reply::bulk("master"),
        Reply::Integer(0),
        Reply::Array(Vec::new()),
    ]))
}
