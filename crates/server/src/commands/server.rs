//! Server commands: COMMAND, INFO, CONFIG, DBSIZE, FLUSHDB, FLUSHALL, TIME, SLOWLOG, SHUTDOWN.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is, text};
use super::table::{
    acl_categories, command_keys, lookup_full, resolve, CommandSpec, ALL_COMMANDS, COMMANDS,
};
use super::{help_reply, info, Context};
use crate::config::Config;
use crate::error::Error;
use crate::keyspace::off_worker;
use crate::services::acl::catalog::Categories;
use crate::services::Closing;
use crate::types::pattern::glob_match;

/// A command's ACL categories as COMMAND INFO lists them: `@name` statuses.
fn categories(spec: &CommandSpec) -> Vec<Reply> {
    acl_categories(spec)
        .names()
        .map(|name| Reply::Status(format!("@{name}").into()))
        .collect()
}

/// The COMMAND INFO entry of one command, in Redis 7's ten-field form; a container's last
/// field holds the entries of its subcommands.
fn info_entry(spec: &CommandSpec) -> Reply {
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Integer(spec.arity as i64),
        Reply::Set(spec.flags.names().into_iter().map(Reply::status).collect()),
        Reply::Integer(spec.keys.reported().0 as i64),
        Reply::Integer(spec.keys.reported().1 as i64),
        Reply::Integer(spec.keys.reported().2 as i64),
        Reply::Set(categories(spec)),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
        Reply::Array(spec.subcommands.iter().map(info_entry).collect()),
    ])
}

fn docs_entry(spec: &CommandSpec) -> Reply {
    let mut fields = vec![
        (Reply::bulk("summary"), Reply::bulk(spec.summary)),
        (Reply::bulk("group"), Reply::bulk(spec.group)),
    ];
    if !spec.subcommands.is_empty() {
        let subcommands = spec
            .subcommands
            .iter()
            .map(|sub| (Reply::bulk(sub.name), docs_entry(sub)))
            .collect();
        fields.push((Reply::bulk("subcommands"), Reply::Map(subcommands)));
    }
    Reply::Map(fields)
}

/// COMMAND: every command's COMMAND INFO entry.
pub fn command(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Array(COMMANDS.iter().map(info_entry).collect()))
}

/// COMMAND COUNT: the commands, not counting subcommands.
pub fn command_count(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(COMMANDS.len() as i64))
}

/// COMMAND INFO [name ...]
pub fn command_info(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() == 2 {
        return Ok(Reply::Array(COMMANDS.iter().map(info_entry).collect()));
    }
    Ok(Reply::Array(
        args[2..]
            .iter()
            .map(|name| lookup_full(name).map_or(Reply::NullArray, info_entry))
            .collect(),
    ))
}

/// COMMAND DOCS [name ...]
pub fn command_docs(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let specs: Vec<&CommandSpec> = if args.len() == 2 {
        COMMANDS.iter().collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|name| lookup_full(name))
            .collect()
    };
    Ok(Reply::Map(
        specs
            .into_iter()
            .map(|spec| (Reply::bulk(spec.name), docs_entry(spec)))
            .collect(),
    ))
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: the names of
/// every command and subcommand.
pub fn command_list(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() != 2 && args.len() != 5 {
        return Err(Error::Syntax);
    }
    let filter = |spec: &CommandSpec| match args.get(3) {
        Some(value) if is(&args[2], "filterby") && is(value, "pattern") => {
            glob_match(&args[4], spec.name.as_bytes(), true)
        }
        Some(value) if is(&args[2], "filterby") && is(value, "aclcat") => {
            Categories::named(&args[4]).is_some_and(|c| acl_categories(spec).intersects(c))
        }
        Some(value) if is(&args[2], "filterby") && is(value, "module") => false,
        _ => true,
    };
    Ok(Reply::Array(
        ALL_COMMANDS
            .iter()
            .filter(|spec| filter(spec))
            .map(|spec| Reply::bulk(spec.name))
            .collect(),
    ))
}

/// COMMAND GETKEYS command [arg ...]: the keys the command would name.
pub fn command_getkeys(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let command = &args[2..];
    let spec = resolve(command).map_err(|_| Error::msg("Invalid command specified"))?;
    if !spec.accepts(command.len()) {
        return Err(Error::msg(
            "Invalid number of arguments specified for command",
        ));
    }
    let keys = command_keys(spec, command);
    if keys.is_empty() {
        return Err(Error::msg("The command has no key arguments"));
    }
    Ok(Reply::Array(
        keys.into_iter()
            .map(|key| Reply::Bulk(Bytes::copy_from_slice(key)))
            .collect(),
    ))
}

/// COMMAND HELP
pub fn command_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
    ]))
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

/// CONFIG GET pattern [pattern ...]
pub fn config_get(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let entries = ctx.services.config.read().entries();
    let pairs = entries
        .into_iter()
        .filter(|(name, _)| {
            args[2..]
                .iter()
                .any(|p| glob_match(p, name.as_bytes(), true))
        })
        .map(|(name, value)| (Reply::bulk(name), Reply::bulk(value)))
        .collect();
    Ok(Reply::Map(pairs))
}

/// CONFIG SET name value [name value ...]
pub fn config_set(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if !args.len().is_multiple_of(2) {
        return Err(Error::WrongArity("config|set".into()));
    }
    set_all(ctx, &args[2..])
}

/// CONFIG RESETSTAT
pub fn config_resetstat(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    ctx.services.stats.reset();
    ctx.services.latencies.reset();
    Ok(Reply::OK)
}

/// CONFIG REWRITE
pub fn config_rewrite(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let path = ctx
        .services
        .config_file
        .as_ref()
        .ok_or_else(|| Error::msg("The server is running without a config file"))?;
    let acl = &ctx.services.acl;
    let users: Vec<String> = acl
        .users()
        .iter()
        .map(|user| String::from_utf8_lossy(&acl.describe(user)).into_owned())
        .collect();
    ctx.services
        .config
        .read()
        .rewrite(path, &users)
        .map_err(|e| Error::msg(format!("Rewriting config file: {e}")))?;
    Ok(Reply::OK)
}

/// CONFIG HELP
pub fn config_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
    ]))
}

/// Applies all pairs or none: every value is validated on a copy first.
fn set_all(ctx: &mut Context<'_>, pairs: &[Bytes]) -> Result<Reply, Error> {
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

/// SAVE: a backup of the database in `<dir>/backup` (see [`crate::services::backup`]).
pub fn save(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let (backups, replication) = (&ctx.services.backups, &ctx.services.replication);
    off_worker(|| backups.save(replication.engine(), &replication.data_dir))?;
    Ok(Reply::OK)
}

/// BGSAVE [SCHEDULE]. As in Redis, SCHEDULE changes nothing when no AOF rewrite runs, which
/// Shale never has: a backup under way refuses another either way.
pub fn bgsave(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    match args.get(1) {
        None => {}
        Some(a) if is(a, "schedule") && args.len() == 2 => {}
        Some(_) => return Err(Error::Syntax),
    }
    let replication = &ctx.services.replication;
    ctx.services
        .backups
        .start(replication.engine().clone(), replication.data_dir.clone())?;
    Ok(Reply::status("Background saving started"))
}

/// LASTSAVE: when the last backup completed (the server's start before any), Unix seconds.
pub fn lastsave(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.services.backups.last_save() as i64))
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

/// SWAPDB index1 index2: O(1) whatever the databases hold (see `types::databases`).
pub fn swapdb(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.services.cluster.is_some() {
        return Err(Error::msg("SWAPDB is not allowed in cluster mode"));
    }
    // As Redis reads them: C ints, then checked against the number of databases.
    let c_int = |arg: &Bytes| int(arg).ok().filter(|n| i32::try_from(*n).is_ok());
    let first = c_int(&args[1]).ok_or_else(|| Error::msg("invalid first DB index"))?;
    let second = c_int(&args[2]).ok_or_else(|| Error::msg("invalid second DB index"))?;
    let databases = ctx.keyspace.databases();
    let index = |n: i64| {
        usize::try_from(n)
            .ok()
            .filter(|&n| n < databases)
            .ok_or_else(|| Error::msg("DB index is out of range"))
    };
    let (first, second) = (index(first)?, index(second)?);
    ctx.db_at(first).swap_with(second)?;
    Ok(Reply::OK)
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

/// SLOWLOG GET [count]
pub fn slowlog_get(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() > 3 {
        return Err(Error::WrongArity("slowlog|get".into()));
    }
    let count = match args.get(2) {
        None => 10,
        Some(n) => {
            let n = int(n)
                .ok()
                .filter(|&n| n >= -1)
                .ok_or_else(|| Error::msg("count should be greater than or equal to -1"))?;
            if n == -1 {
                usize::MAX
            } else {
                n as usize
            }
        }
    };
    let entries = ctx.services.slowlog.latest(count);
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
}

/// SLOWLOG LEN
pub fn slowlog_len(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.services.slowlog.count() as i64))
}

/// SLOWLOG RESET
pub fn slowlog_reset(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    ctx.services.slowlog.reset();
    Ok(Reply::OK)
}

/// SLOWLOG HELP
pub fn slowlog_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
    ]))
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

/// MEMORY USAGE key [SAMPLES count]: the bytes of the key's records in storage (see
/// `types/memory.rs`). DOCTOR, MALLOC-STATS, PURGE and STATS describe Redis's allocator and
/// are not provided.
pub fn memory_usage(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
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

/// MEMORY HELP
pub fn memory_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "USAGE <key> [SAMPLES <count>]",
        "    Return the bytes that <key> and its value take in storage (keys and values of",
        "    its records, before compression). Nested values are sampled up to <count>",
        "    times (default: 5, 0 means sample all).",
    ]))
}

/// MONITOR: from now on this connection receives a line for every command the server runs
/// (see `services/monitor.rs`), until it closes or sends RESET.
pub fn monitor(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    if ctx.txn.is_some() {
        return Err(Error::msg("Command not allowed inside a transaction"));
    }
    ctx.services.monitors.add(&ctx.client.subscriber);
    ctx.client.handle.info.lock().monitor = true;
    Ok(Reply::OK)
}
