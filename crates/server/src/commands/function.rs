//! FCALL, FCALL_RO and FUNCTION: libraries of Lua functions (see [`crate::scripting::functions`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shale_protocol::Reply;
use shale_rdb::dump::{decode_functions, encode_functions};

use super::args::{is, subcommand_syntax};
use super::scripting::{check_declared, run_timed};
use super::{help_reply, Context, ScriptSlot};
use crate::error::Error;
use crate::keyspace::off_worker;
use crate::scripting::flags::ScriptFlags;
use crate::scripting::functions::{Libraries, RestorePolicy};
use crate::scripting::{FunctionCall, Invocation, Target};
use crate::services::monitor::Origin;
use crate::types::pattern::glob_match;

pub fn fcall(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    call(ctx, args, false)
}

pub fn fcall_ro(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    call(ctx, args, true)
}

/// The stored libraries; when they changed, reading them runs their code, which hands this
/// worker's other connections to another thread first.
fn libraries(ctx: &Context<'_>) -> Result<Arc<Libraries>, Error> {
    let (scripts, keyspace) = (&ctx.services.scripts, ctx.keyspace);
    match scripts.libraries_are_current(keyspace) {
        true => scripts.libraries(keyspace),
        false => off_worker(|| scripts.libraries(keyspace)),
    }
}

/// FCALL[_RO] function numkeys [key ...] [arg ...], checked in Redis's order.
fn call(ctx: &mut Context<'_>, args: &[Bytes], read_only: bool) -> Result<Reply, Error> {
    let origin = Origin::Client(ctx.client.handle.addr);
    ctx.services.monitors.feed(ctx.client.db, origin, args);
    let libraries = libraries(ctx)?;
    let function = libraries
        .function(&args[1])
        .ok_or(Error::msg("Function not found"))?;
    let numkeys = std::str::from_utf8(&args[2])
        .ok()
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or(Error::msg("Bad number of keys provided"))?;
    if numkeys > (args.len() - 3) as i64 {
        return Err(Error::msg(
            "Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(Error::msg("Number of keys can't be negative"));
    }
    check_declared(ctx, function.flags, read_only)?;
    let read_only = read_only || function.flags.contains(ScriptFlags::NO_WRITES);
    let (keys, argv) = args[3..].split_at(numkeys as usize);
    let cross_slot = function.flags.contains(ScriptFlags::ALLOW_CROSS_SLOT);
    ctx.script_slot = ScriptSlot::of(keys, cross_slot);
    let invocation = Invocation {
        target: Target::Function {
            name: &function.name,
            libraries: &libraries,
        },
        keys,
        args: argv,
    };
    let running = FunctionCall {
        name: function.name.clone(),
        command: args.to_vec(),
    };
    let speed_key = format!("function {}", function.name);
    run_timed(ctx, &invocation, read_only, &speed_key, Some(running))
}

/// FUNCTION LOAD [REPLACE] code
pub fn function_load(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut replace = false;
    for option in &args[2..args.len() - 1] {
        if !is(option, "replace") {
            return Err(Error::msg(format!(
                "Unknown option given: {}",
                String::from_utf8_lossy(option)
            )));
        }
        replace = true;
    }
    let code = args[args.len() - 1].clone();
    // What a master sends is loaded however long it takes, as Redis loads it.
    let timeout = !ctx.from_master;
    let (scripts, keyspace) = (&ctx.services.scripts, ctx.keyspace);
    let name = off_worker(|| scripts.load_library(keyspace, code, replace, timeout))?;
    Ok(Reply::bulk(name))
}

/// FUNCTION DELETE library
pub fn function_delete(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ctx.services
        .scripts
        .delete_library(ctx.keyspace, &args[2])?;
    Ok(Reply::OK)
}

/// FUNCTION FLUSH [ASYNC|SYNC]
pub fn function_flush(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() > 3 {
        return Err(subcommand_syntax(&args[1], "FUNCTION"));
    }
    match args.get(2) {
        None => {}
        Some(mode) if is(mode, "sync") || is(mode, "async") => {}
        Some(_) => return Err(Error::msg("FUNCTION FLUSH only supports SYNC|ASYNC option")),
    }
    ctx.services.scripts.flush_libraries(ctx.keyspace)?;
    Ok(Reply::OK)
}

/// FUNCTION DUMP: every library's code, in Redis's payload format.
pub fn function_dump(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let libraries = libraries(ctx)?;
    let payload = encode_functions(libraries.iter().map(|library| &library.code[..]));
    Ok(Reply::bulk(payload))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
pub fn function_restore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() > 4 {
        return Err(subcommand_syntax(&args[1], "FUNCTION"));
    }
    let policy = match args.get(3) {
        None => RestorePolicy::Append,
        Some(p) if is(p, "append") => RestorePolicy::Append,
        Some(p) if is(p, "replace") => RestorePolicy::Replace,
        Some(p) if is(p, "flush") => RestorePolicy::Flush,
        Some(_) => {
            return Err(Error::msg(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    let codes = decode_functions(&args[2]).map_err(|err| Error::msg(err.to_string()))?;
    let (scripts, keyspace) = (&ctx.services.scripts, ctx.keyspace);
    let timeout = !ctx.from_master;
    off_worker(|| scripts.restore_libraries(keyspace, codes, policy, timeout))?;
    Ok(Reply::OK)
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
pub fn function_list(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (mut with_code, mut pattern) = (false, None);
    let mut i = 2;
    while i < args.len() {
        let arg = &args[i];
        if !with_code && is(arg, "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(arg, "libraryname") {
            i += 1;
            let Some(p) = args.get(i) else {
                return Err(Error::msg("library name argument was not given"));
            };
            pattern = Some(p);
        } else {
            return Err(Error::msg(format!(
                "Unknown argument {}",
                String::from_utf8_lossy(arg)
            )));
        }
        i += 1;
    }
    let libraries = libraries(ctx)?;
    let listed = libraries
        .iter()
        .filter(|library| pattern.is_none_or(|p| glob_match(p, library.name.as_bytes(), true)))
        .map(|library| {
            let functions = library
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (Reply::bulk("name"), Reply::bulk(f.name.clone())),
                        (
                            Reply::bulk("description"),
                            Reply::bulk_or_null(f.description.clone()),
                        ),
                        (
                            Reply::bulk("flags"),
                            Reply::Set(f.flags.names().map(Reply::status).collect()),
                        ),
                    ])
                })
                .collect();
            let mut fields = vec![
                (
                    Reply::bulk("library_name"),
                    Reply::bulk(library.name.clone()),
                ),
                (Reply::bulk("engine"), Reply::bulk("LUA")),
                (Reply::bulk("functions"), Reply::Array(functions)),
            ];
            if with_code {
                fields.push((
                    Reply::bulk("library_code"),
                    Reply::Bulk(library.code.clone()),
                ));
            }
            Reply::Map(fields)
        })
        .collect();
    Ok(Reply::Array(listed))
}

/// FUNCTION STATS: the function running longest, if any, and the counts of the one engine.
pub fn function_stats(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let libraries = libraries(ctx)?;
    let running = match ctx.services.scripts.running_function() {
        None => Reply::Null,
        Some(f) => Reply::Map(vec![
            (Reply::bulk("name"), Reply::bulk(f.name)),
            (
                Reply::bulk("command"),
                Reply::Array(f.command.into_iter().map(Reply::Bulk).collect()),
            ),
            (
                Reply::bulk("duration_ms"),
                Reply::Integer(f.duration.as_millis() as i64),
            ),
        ]),
    };
    let lua = Reply::Map(vec![
        (
            Reply::bulk("libraries_count"),
            Reply::Integer(libraries.library_count() as i64),
        ),
        (
            Reply::bulk("functions_count"),
            Reply::Integer(libraries.function_count() as i64),
        ),
    ]);
    Ok(Reply::Map(vec![
        (Reply::bulk("running_script"), running),
        (
            Reply::bulk("engines"),
            Reply::Map(vec![(Reply::bulk("LUA"), lua)]),
        ),
    ]))
}

/// FUNCTION KILL
pub fn function_kill(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let limit = Duration::from_millis(ctx.services.config.read().lua_time_limit);
    ctx.services.scripts.kill(limit, true)?;
    Ok(Reply::OK)
}

/// FUNCTION HELP
pub fn function_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries. Both modes delete them at once.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
    ]))
}
