//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT.
//!
//! A script runs in a transaction holding its declared keys (see [`crate::scripting`]); inside
//! MULTI it joins the transaction of the EXEC.

use std::time::{Duration, Instant};

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is};
use super::{execute_nested, help_reply, resolve, CommandSpec, Context, Flags, ScriptSlot};
use crate::error::Error;
use crate::keyspace::{off_worker, Transaction};
use crate::scripting::flags::{eval_shebang, ScriptFlags};
use crate::scripting::{FunctionCall, Invocation, RunningScript, ScriptHost, Target};
use crate::services::monitor::Origin;
use crate::services::notifications::Event;

pub fn eval(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    run(ctx, args, false, false)
}

pub fn evalsha(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    run(ctx, args, true, false)
}

pub fn eval_ro(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    run(ctx, args, false, true)
}

pub fn evalsha_ro(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    run(ctx, args, true, true)
}

fn run(
    ctx: &mut Context<'_>,
    args: &[Bytes],
    by_sha: bool,
    read_only: bool,
) -> Result<Reply, Error> {
    let numkeys = int(&args[2])?;
    if numkeys < 0 {
        return Err(Error::msg("Number of keys can't be negative"));
    }
    if numkeys as usize > args.len() - 3 {
        return Err(Error::msg(
            "Number of keys can't be greater than number of args",
        ));
    }
    let (keys, argv) = args[3..].split_at(numkeys as usize);
    let origin = Origin::Client(ctx.client.handle.addr);
    ctx.services.monitors.feed(ctx.client.db, origin, args);
    let scripts = &ctx.services.scripts;
    // A script with a bad shebang is refused before it is cached.
    let (sha, source, shebang) = if by_sha {
        let (sha, source) = scripts.lookup(&args[1]).ok_or(Error::NoScript)?;
        let shebang = eval_shebang(&source).map_err(Error::msg)?;
        (sha, source, shebang)
    } else {
        let shebang = eval_shebang(&args[1]).map_err(Error::msg)?;
        (scripts.load(args[1].clone()), args[1].clone(), shebang)
    };
    let body = match shebang {
        Some(shebang) => {
            check_declared(ctx, shebang.flags, read_only)?;
            &source[shebang.len..]
        }
        None => &source[..],
    };
    let read_only = read_only || shebang.is_some_and(|s| s.flags.contains(ScriptFlags::NO_WRITES));
    let cross_slot = shebang.is_some_and(|s| s.flags.contains(ScriptFlags::ALLOW_CROSS_SLOT));
    ctx.script_slot = ScriptSlot::of(keys, cross_slot);
    let invocation = Invocation {
        target: Target::Script { sha: &sha, body },
        keys,
        args: argv,
    };
    run_timed(ctx, &invocation, read_only, &sha, None)
}

/// What Redis's `scriptPrepareForRun` checks of the flags a script or function declares,
/// before it runs.
pub(super) fn check_declared(
    ctx: &Context<'_>,
    flags: ScriptFlags,
    read_only: bool,
) -> Result<(), Error> {
    if flags.contains(ScriptFlags::NO_CLUSTER) && ctx.services.cluster.is_some() {
        return Err(Error::msg(
            "Can not run script on cluster, 'no-cluster' flag is set.",
        ));
    }
    if flags.contains(ScriptFlags::NO_WRITES) || ctx.from_master {
        return Ok(());
    }
    if ctx.keyspace.is_replica() {
        return Err(Error::ReadOnly);
    }
    if read_only {
        return Err(Error::msg(
            "Can not execute a script with write flag using *_ro command.",
        ));
    }
    ctx.services.replication.check_min_replicas()
}

/// Runs a script or function, timed: `speed_key` names it among those known to be fast.
pub(super) fn run_timed(
    ctx: &mut Context<'_>,
    invocation: &Invocation<'_>,
    read_only: bool,
    speed_key: &str,
    function: Option<FunctionCall>,
) -> Result<Reply, Error> {
    let scripts = &ctx.services.scripts;
    // A script that may run long (it did last time, or it never ran) first hands the other
    // connections of its worker thread to another thread, or they would wait for it. That
    // costs about 100 µs, so scripts known to be short run in place.
    let started = Instant::now();
    let reply = if !scripts.is_fast(speed_key) {
        off_worker(|| run_in_transaction(ctx, invocation, read_only, function))
    } else {
        run_in_transaction(ctx, invocation, read_only, function)
    };
    ctx.services
        .scripts
        .record_duration(speed_key, started.elapsed());
    reply
}

fn run_in_transaction(
    ctx: &mut Context<'_>,
    invocation: &Invocation<'_>,
    read_only: bool,
    function: Option<FunctionCall>,
) -> Result<Reply, Error> {
    if let Some(txn) = ctx.txn {
        // Inside EXEC: the script's writes join the EXEC's, so it can be killed only before it
        // writes, and then has nothing to drop.
        let (reply, events, _) = run_script(ctx, txn, invocation, read_only, true, function)?;
        ctx.events.extend(events);
        return Ok(reply);
    }
    let db = ctx.client.db as u8;
    let keys: Vec<(u8, &[u8])> = invocation.keys.iter().map(|k| (db, k.as_ref())).collect();
    let txn = ctx.keyspace.begin(&keys)?;
    let (reply, events, killed) = run_script(ctx, &txn, invocation, read_only, false, function)?;
    if !killed {
        ctx.keyspace.commit(&txn)?;
        ctx.services.notifications().publish_all(events);
    }
    Ok(reply)
}

/// Runs the script's commands in `txn`, that of an EXEC if `in_exec`. Returns the reply, the
/// keyspace events to publish once `txn` commits, and whether SCRIPT KILL stopped it (then
/// its writes must not be committed).
fn run_script(
    ctx: &mut Context<'_>,
    txn: &Transaction,
    invocation: &Invocation<'_>,
    read_only: bool,
    in_exec: bool,
    function: Option<FunctionCall>,
) -> Result<(Reply, Vec<Event>, bool), Error> {
    let services = ctx.services;
    let mut vm = services
        .scripts
        .checkout()
        .map_err(|e| Error::msg(format!("can't start a Lua state: {e}")))?;
    let running = services
        .scripts
        .started(ctx.client.handle.fd, in_exec, function);
    let (caller_db, caller_resp3) = (ctx.client.db, ctx.client.resp3);
    // The script's commands run as a client of its own, which subscribes to nothing.
    let subscriptions = std::mem::take(&mut ctx.client.subscriptions);
    let mut inner = Context::new(services, &mut *ctx.client, Some(txn), None);
    inner.in_script = true;
    inner.from_master = ctx.from_master;
    inner.script_slot = ctx.script_slot;
    let mut host = Host {
        inner,
        read_only,
        script: &running.script,
    };
    let (reply, error_counted) = vm.run(invocation, &running.script, &mut host);
    ctx.error_counted = error_counted;
    let events = host.inner.events;
    let killed = running.script.is_killed();
    drop(running);
    services.scripts.checkin(vm);
    // SELECT inside a script does not change the caller's database.
    ctx.client.db = caller_db;
    ctx.client.resp3 = caller_resp3;
    ctx.client.subscriptions = subscriptions;
    Ok((reply, events, killed))
}

/// What a script's commands run in: a client of its own, in the script's transaction.
struct Host<'a> {
    inner: Context<'a>,
    read_only: bool,
    script: &'a RunningScript,
}

impl ScriptHost for Host<'_> {
    /// Each command a script runs is booked in INFO like any other; an error it gives the
    /// script counts once, when it happens, whether the script returns it, raises it or
    /// swallows it with pcall.
    fn call(&mut self, args: &[Bytes], resp3: bool) -> Reply {
        let services = self.inner.services;
        let spec = match script_refusal(args, self.read_only) {
            Ok(spec) => spec,
            Err((refusal, spec)) => {
                services.stats.record_errors(refusal, 1);
                if let Some(spec) = spec {
                    services.stats.record_rejected(spec.index());
                }
                return Reply::Error(refusal.into());
            }
        };
        if spec.flags.contains(Flags::WRITE) {
            self.script.writes();
        }
        self.inner.client.resp3 = resp3;
        execute_nested(&mut self.inner, args).reply
    }

    fn allows(&mut self, args: &[Bytes]) -> Option<bool> {
        let spec = resolve(args).ok()?;
        Some(super::acl::allows(&self.inner, spec, args))
    }
}

/// The command a script may run here, or the error line for one it may not, before it runs,
/// and the command if it exists (its refusal counts as a rejected call).
fn script_refusal(
    args: &[Bytes],
    read_only: bool,
) -> Result<&'static CommandSpec, (&'static str, Option<&'static CommandSpec>)> {
    let Ok(spec) = resolve(args) else {
        return Err(("ERR Unknown Redis command called from script", None));
    };
    let refusal = if !spec.accepts(args.len()) {
        "ERR Wrong number of args calling Redis command from script"
    } else if spec.flags.contains(Flags::NOSCRIPT) {
        "ERR This Redis command is not allowed from script"
    } else if read_only && spec.flags.contains(Flags::WRITE) {
        "ERR Write commands are not allowed from read-only scripts."
    } else {
        return Ok(spec);
    };
    Err((refusal, Some(spec)))
}

/// SCRIPT LOAD script
pub fn script_load(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    eval_shebang(&args[2]).map_err(Error::msg)?;
    Ok(Reply::bulk(ctx.services.scripts.load(args[2].clone())))
}

/// SCRIPT EXISTS sha1 [sha1 ...]
pub fn script_exists(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let scripts = &ctx.services.scripts;
    Ok(Reply::Array(
        args[2..]
            .iter()
            .map(|sha| Reply::Integer(scripts.exists(sha) as i64))
            .collect(),
    ))
}

/// SCRIPT FLUSH [ASYNC|SYNC]
pub fn script_flush(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() > 3 {
        return Err(Error::WrongArity("script|flush".into()));
    }
    match args.get(2) {
        None => {}
        Some(mode) if is(mode, "sync") || is(mode, "async") => {}
        Some(_) => return Err(Error::msg("SCRIPT FLUSH only support SYNC|ASYNC option")),
    }
    ctx.services.scripts.flush();
    Ok(Reply::OK)
}

/// SCRIPT KILL
pub fn script_kill(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let limit = Duration::from_millis(ctx.services.config.read().lua_time_limit);
    ctx.services.scripts.kill(limit, false)?;
    Ok(Reply::OK)
}

/// SCRIPT HELP
pub fn script_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Both modes flush it at once.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
    ]))
}
