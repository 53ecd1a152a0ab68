//! The command table and the dispatcher. Each file parses the arguments of one family of
//! commands, calls the type layer and shapes the reply; none of them touches key bytes.
//!
//! The dispatcher checks what the table declares (existence, arity, authentication) before any
//! command code runs, so handlers start from well-formed argument counts.

mod acl;
mod args;
mod bitmap;
mod cluster;
mod connection;
mod debug;
mod dump;
mod function;
mod geo;
mod hash;
mod hyperloglog;
mod info;
mod keys;
mod latency;
mod list;
mod migrate;
mod notify;
mod pubsub;
mod replication;
mod roaring;
mod scripting;
mod server;
mod set;
mod sort;
mod stream;
mod string;
mod table;
mod transaction;
mod zset;

use std::time::Instant;

use bytes::Bytes;
use shale_protocol::{Bulks, Reply};
use shale_storage::{ReadAhead, StorageError};

use crate::error::Error;
use crate::keyspace::{Db, HeldStripes, Keyspace, Transaction, WrittenKeys};
use crate::services::blocking::{Attempt, BlockRequest, Wants};
use crate::services::monitor::Origin;
use crate::services::notifications::Event;
use crate::services::{ClientState, Closing, Services};
use crate::types::read_ahead::PlannedRead;
use crate::types::ScanBuffer;

pub use cluster::{blocked_route, ScriptSlot};
pub use replication::{run_for_master, ReplicaWait};
use table::KeyEvent;
pub use table::{
    acl_catalog, command_keys, lookup, position, resolve, CommandSpec, Flags, Unresolved,
    ALL_COMMANDS, COMMANDS,
};

/// What a command may reach: the keyspace, its own connection and the server's services.
pub struct Context<'a> {
    pub keyspace: &'a Keyspace,
    pub client: &'a mut ClientState,
    pub services: &'a Services,
    /// The transaction (EXEC, a script) the command runs in, if any.
    pub txn: Option<&'a Transaction>,
    /// The stripes of the command's keys, if its connection locked them before it ran.
    pub held: Option<&'a HeldStripes>,
    /// Set by a blocking command that found its keys empty: the connection waits, then sends
    /// the reply that the wait produces instead of the handler's.
    pub block: Option<BlockRequest>,
    /// The keys the current command wrote, while keyspace notifications are on.
    pub written: WrittenKeys,
    /// Keyspace events of a transaction's commands, published once it commits.
    pub events: Vec<Event>,
    /// Set by a command whose error reply is one a command it ran has already counted (a
    /// script returning what `redis.call` raised), so INFO counts each error once.
    pub error_counted: bool,
    /// The command runs for a script (`redis.call`).
    pub in_script: bool,
    /// The command runs for EXEC, queued after MULTI.
    pub in_exec: bool,
    /// Keyspace events the handler reported (`Context::notify`), while notifications are on.
    pub reported: Vec<notify::Reported>,
    /// Set by WAIT when too few replicas have acknowledged yet: the connection waits for
    /// them, then replies with their number instead of the handler's.
    pub replica_wait: Option<ReplicaWait>,
    /// The command comes from this replica's Redis master: it may write.
    pub from_master: bool,
    /// In cluster mode, the slot the running script's keys must share.
    pub script_slot: ScriptSlot,
    /// Records read in advance for the run of pipelined reads this command belongs to.
    pub read_ahead: Option<&'a ReadAhead>,
    /// Whether the running command's lookups count as keyspace hits and misses.
    pub counts_lookups: bool,
}

impl<'a> Context<'a> {
    /// A context for one command (or a transaction's commands) of `client`, before it has run.
    pub fn new(
        services: &'a Services,
        client: &'a mut ClientState,
        txn: Option<&'a Transaction>,
        held: Option<&'a HeldStripes>,
    ) -> Self {
        Context {
            keyspace: &services.keyspace,
            client,
            services,
            txn,
            held,
            block: None,
            written: Default::default(),
            events: Vec::new(),
            error_counted: false,
            in_script: false,
            in_exec: false,
            reported: Vec::new(),
            replica_wait: None,
            from_master: false,
            script_slot: ScriptSlot::default(),
            read_ahead: None,
            counts_lookups: false,
        }
    }

    /// Reports a keyspace event of `key` in the selected database, for a command whose row
    /// says its handler reports them (`Events::Reported`). It is published if the command's
    /// write changed the key.
    pub fn notify(&mut self, class: u32, name: &'static str, key: &[u8]) {
        self.notify_in(self.client.db, class, name, key);
    }

    /// [`Context::notify`] of an event left out if the write deleted the key (GETEX with a
    /// time in the past announces only `del`).
    pub fn notify_unless_deleted(&mut self, class: u32, name: &'static str, key: &[u8]) {
        self.report(self.client.db, table::kept(class, name), key);
    }

    /// [`Context::notify`] for a key of database `db` (MOVE, COPY ... DB).
    pub fn notify_in(&mut self, db: usize, class: u32, name: &'static str, key: &[u8]) {
        self.report(db, table::each(class, name), key);
    }

    fn report(&mut self, db: usize, event: KeyEvent, key: &[u8]) {
        if self.services.notify_classes() != 0 {
            self.reported.push(notify::Reported {
                db: db as u8,
                event,
                key: key.to_vec(),
            });
        }
    }

    /// The connection's selected database.
    pub fn db(&self) -> Db<'_> {
        self.db_at(self.client.db)
    }

    /// Whether a blocking command may block: not inside a transaction or script, where it
    /// acts as if its timeout had passed.
    pub fn may_block(&self) -> bool {
        self.txn.is_none()
    }

    /// Another database, in the same transaction if there is one.
    pub fn db_at(&self, index: usize) -> Db<'_> {
        let notifying = self.services.notify_classes() != 0;
        let db = self.keyspace.db_in(
            index,
            self.txn,
            notifying.then_some(&self.written),
            self.held,
        );
        let db = db.counting_lookups(self.counts_lookups);
        match self.read_ahead {
            Some(ahead) => db.reading_ahead(ahead),
            None => db,
        }
    }
}

/// A command handler: `args[0]` is the command name as sent.
pub type Handler = fn(&mut Context<'_>, &[Bytes]) -> Result<Reply, Error>;

/// The result of one command: its reply, and whether it may have written (and so must be
/// durable before the reply is sent under `appendfsync always`).
pub struct Outcome {
    pub reply: Reply,
    pub spec: Option<&'static CommandSpec>,
    /// Refused before it ran (arity, authentication, subscribed context): Redis books such a
    /// command as a rejected call, not as a call that failed.
    pub rejected: bool,
    /// An error reply that was counted when the command it came from answered.
    pub error_counted: bool,
}

impl Outcome {
    fn ran(reply: Reply, spec: Option<&'static CommandSpec>) -> Outcome {
        Outcome {
            reply,
            spec,
            rejected: false,
            error_counted: false,
        }
    }

    fn rejected(err: Error, spec: &'static CommandSpec) -> Outcome {
        Outcome {
            rejected: true,
            ..Outcome::ran(err.to_reply(), Some(spec))
        }
    }

    /// Counts the reply in INFO's error figures if it is an error not counted yet.
    pub fn count_error(&self, stats: &crate::services::ServerStats) {
        match &self.reply {
            Reply::Error(line) if !self.error_counted => stats.record_errors(line, 1),
            _ => {}
        }
    }
}

/// The reads of a command whose records are read ahead of it (GET, HGET, MGET); `None` for
/// every other command, and for a request with the wrong number of arguments, which fails as
/// it runs.
pub fn planned_reads<'a>(spec: &CommandSpec, args: &'a [Bytes]) -> Option<PlannedReads<'a>> {
    match (spec.name, args) {
        ("get", [_, key]) => Some(PlannedReads::One(PlannedRead::String { key })),
        ("hget", [_, key, field]) => Some(PlannedReads::One(PlannedRead::HashField { key, field })),
        ("mget", [_, keys @ ..]) if !keys.is_empty() => Some(PlannedReads::Strings(keys)),
        _ => None,
    }
}

/// What [`planned_reads`] finds a command will read.
pub enum PlannedReads<'a> {
    /// One record (GET, HGET): a pipeline's run of such commands is read together.
    One(PlannedRead<'a>),
    /// Strings (MGET), read on their own.
    Strings(&'a [Bytes]),
}

impl<'a> PlannedReads<'a> {
    /// How many records it reads first: one per key.
    pub fn keys(&self) -> usize {
        match self {
            PlannedReads::One(_) => 1,
            PlannedReads::Strings(keys) => keys.len(),
        }
    }

    /// Adds the reads to `all`.
    pub fn add_to(self, all: &mut Vec<PlannedRead<'a>>) {
        match self {
            PlannedReads::One(read) => all.push(read),
            PlannedReads::Strings(keys) => {
                all.extend(keys.iter().map(|key| PlannedRead::String { key }))
            }
        }
    }
}

/// The flags of a command whose lookups count as keyspace hits and misses, as Redis counts
/// those of commands that read and not a write's own.
const LOOKUPS_COUNTED: Flags = Flags::READONLY
    .with(Flags::READS_SOURCES)
    .with(Flags::READS_FIRST_KEY)
    .with(Flags::COUNTS_LOOKUP);

/// Runs one request after the table's checks; inside MULTI, queues it instead.
pub fn execute(ctx: &mut Context<'_>, args: &[Bytes]) -> Outcome {
    let mut outcome = run_isolated(ctx, args);
    if outcome.rejected && outcome.spec.is_some_and(|spec| spec.name == "exec") {
        abort_transaction(ctx, &mut outcome);
    }
    if let Some(multi) = &mut ctx.client.multi {
        // A command refused before it could be queued dooms the transaction.
        multi.refused |= outcome.reply.is_error() && !outcome.spec.is_some_and(runs_in_multi);
    }
    outcome
}

/// Fault injection for tests of [`run_isolated`]: the command named by `SHALE_INJECT_PANIC`
/// panics when it runs. Read once, at the first command.
static INJECTED_PANIC: std::sync::LazyLock<Option<Vec<u8>>> = std::sync::LazyLock::new(|| {
    let name = std::env::var("SHALE_INJECT_PANIC").ok()?;
    tracing::warn!("SHALE_INJECT_PANIC is set: the command {name} panics (a fault-injection test)");
    Some(name.into_bytes())
});

/// Runs a command so that a panic in it (a bug) fails that command alone: its client gets an
/// error and is disconnected after it, since what the command did to the connection's state
/// is unknown; the server and its other clients go on. Key locks and uncommitted writes are
/// released as the panic unwinds.
fn run_isolated(ctx: &mut Context<'_>, args: &[Bytes]) -> Outcome {
    let run = std::panic::AssertUnwindSafe(|| check_and_run(ctx, args));
    match std::panic::catch_unwind(run) {
        Ok(outcome) => outcome,
        Err(_) => {
            let name = String::from_utf8_lossy(args.first().map_or(&b""[..], |a| &a[..]));
            tracing::error!("the command {name} failed with a panic; its client is disconnected");
            ctx.services.stats.record_panic();
            // What the command staged may be half done: the transaction it wrote into (EXEC,
            // a script, a pipeline's batch) commits nothing, and what it noted is dropped.
            if let Some(txn) = ctx.txn {
                txn.poison();
            }
            ctx.written = WrittenKeys::default();
            ctx.reported.clear();
            ctx.block = None;
            ctx.replica_wait = None;
            ctx.error_counted = false;
            ctx.client.closing = Some(Closing::AfterReply);
            Outcome::ran(
                Error::msg("internal error: the command failed; the connection closes").to_reply(),
                None,
            )
        }
    }
}

/// An EXEC refused before it runs (by ACL rules, say) discards the transaction, if any, and
/// says why as Redis's `execCommandAbort` does.
fn abort_transaction(ctx: &mut Context<'_>, outcome: &mut Outcome) {
    if ctx.client.multi.take().is_some() {
        ctx.keyspace.unwatch(&mut ctx.client.watching);
        ctx.client.share_state();
    }
    if let Reply::Error(line) = &outcome.reply {
        outcome.reply = Error::ExecAbortedBy(line.to_string()).to_reply();
    }
}

/// Runs a command of a transaction (EXEC) or a script, and books it in INFO as Redis does:
/// its call and time, or its refusal, and its error.
pub fn execute_nested(ctx: &mut Context<'_>, args: &[Bytes]) -> Outcome {
    let started = Instant::now();
    let outcome = execute(ctx, args);
    let stats = &ctx.services.stats;
    outcome.count_error(stats);
    match outcome.spec {
        Some(spec) if outcome.rejected => stats.record_rejected(spec.index()),
        Some(spec) => {
            let elapsed = started.elapsed();
            let usec = elapsed.as_micros() as u64;
            stats.record_calls(spec.index(), 1, usec, outcome.reply.is_error() as u64);
            let latencies = &ctx.services.latencies;
            if latencies.enabled() {
                latencies.record(spec.index(), elapsed.as_nanos() as u64);
            }
            if monitored(spec) {
                let origin = if ctx.in_script {
                    Origin::Script
                } else {
                    Origin::Client(ctx.client.handle.addr)
                };
                ctx.services.monitors.feed(ctx.client.db, origin, args);
            }
        }
        None => {}
    }
    outcome
}

/// A range read's strings as one reply buffer, for `Reply::Bulks` and `Reply::BulkMap`.
fn bulks(read: ScanBuffer) -> Result<Bulks, Error> {
    let (bytes, ends) = read.into_parts();
    Bulks::new(bytes, ends).ok_or(Error::msg("internal error: malformed range read"))
}

/// Whether MONITOR shows a command once it has run: not the administrative ones, whose
/// arguments Redis keeps from monitors, nor those that show themselves as they start.
pub fn monitored(spec: &CommandSpec) -> bool {
    !spec.flags.contains(Flags::ADMIN) && !spec.flags.contains(Flags::SKIP_MONITOR)
}

fn check_and_run(ctx: &mut Context<'_>, args: &[Bytes]) -> Outcome {
    let spec = match resolve(args) {
        Ok(spec) => spec,
        Err(unresolved) => return Outcome::ran(unknown(unresolved, args).to_reply(), None),
    };
    if !spec.accepts(args.len()) {
        return Outcome::rejected(Error::WrongArity(spec.name.to_string()), spec);
    }
    if !ctx.client.authenticated && !spec.flags.contains(Flags::NO_AUTH) {
        return Outcome::rejected(Error::NoAuth, spec);
    }
    if ctx.client.multi.is_some() && spec.flags.contains(Flags::NO_MULTI) {
        let err = Error::msg("Command not allowed inside a transaction");
        return Outcome::rejected(err, spec);
    }
    if let Err(err) = acl::check(ctx, spec, args) {
        return Outcome::rejected(err, spec);
    }
    if let Err(err) = cluster::check_route(ctx, spec, args) {
        if spec.name != "exec" {
            return Outcome::rejected(err, spec);
        }
        // As Redis: a redirected EXEC discards its transaction and answers with the
        // redirection itself.
        if ctx.client.multi.take().is_some() {
            ctx.keyspace.unwatch(&mut ctx.client.watching);
            ctx.client.share_state();
        }
        return Outcome::ran(err.to_reply(), Some(spec));
    }
    if let Some(reason) = ctx.keyspace.engine().write_failure() {
        if !ctx.from_master && refused_while_unwritable(ctx, spec) {
            return Outcome::rejected(StorageError::Unwritable(reason).into(), spec);
        }
    }
    if spec.flags.contains(Flags::WRITE) && !ctx.from_master {
        // As Redis checks them: after authentication, before the transaction queues it.
        if let Err(err) = ctx.services.replication.check_min_replicas() {
            return Outcome::rejected(err, spec);
        }
        if ctx.keyspace.is_replica() {
            return Outcome::rejected(Error::ReadOnly, spec);
        }
    }
    if !ctx.client.resp3 && !ctx.client.subscriptions.is_empty() && !allowed_while_subscribed(spec)
    {
        let err = Error::msg(format!(
            "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ));
        return Outcome::rejected(err, spec);
    }
    if let Some(multi) = &mut ctx.client.multi {
        if !runs_in_multi(spec) {
            multi.queue(args);
            ctx.client.share_state();
            // As in Redis, CLIENT LIST shows the command queued last.
            ctx.client.handle.info.lock().last_command = spec.name;
            return Outcome::ran(Reply::status("QUEUED"), None);
        }
    }
    if INJECTED_PANIC.as_deref() == Some(spec.name.as_bytes()) {
        panic!("a panic injected by SHALE_INJECT_PANIC");
    }
    let counts = spec.flags.intersects(LOOKUPS_COUNTED);
    let outer = std::mem::replace(&mut ctx.counts_lookups, counts);
    let result = (spec.handler)(ctx, args);
    ctx.counts_lookups = outer;
    // A handler that failed after it ran a script (its commit) replies with an error of its own.
    let error_counted = std::mem::take(&mut ctx.error_counted) && result.is_ok();
    let reply = result.unwrap_or_else(|err| err.to_reply());
    if !spec.flags.contains(Flags::NO_TOUCH) {
        let db = ctx.db().index() as u8;
        ctx.keyspace.access.touch(db, &command_keys(spec, args));
    }
    notify::miss_events(ctx, spec, args);
    let written = ctx.written.take();
    let reported = std::mem::take(&mut ctx.reported);
    if !written.is_empty() {
        notify::command_events(ctx, spec, args, &written, reported);
    }
    Outcome {
        error_counted,
        ..Outcome::ran(reply, Some(spec))
    }
}

/// What Redis refuses while its AOF cannot be written: writes, EXEC of a transaction with a
/// write, and PING, so that whoever watches the server notices.
fn refused_while_unwritable(ctx: &Context<'_>, spec: &CommandSpec) -> bool {
    let queued_write = || {
        ctx.client.multi.as_ref().is_some_and(|multi| {
            multi
                .commands()
                .iter()
                .any(|args| resolve(args).is_ok_and(|queued| queued.flags.contains(Flags::WRITE)))
        })
    };
    spec.flags.contains(Flags::WRITE)
        || spec.name == "ping"
        || (spec.name == "exec" && queued_write())
}

/// Every section of INFO, for the metrics endpoint.
pub fn info_report(services: &Services) -> Result<String, Error> {
    info::render(services, &services.keyspace, &["everything".to_string()])
}

/// The commands that run at once inside MULTI instead of being queued.
fn runs_in_multi(spec: &CommandSpec) -> bool {
    spec.flags.contains(Flags::RUNS_IN_MULTI)
}

/// Runs a blocking pop: [`wait_for`] an element of `keys`.
fn block_on(
    ctx: &mut Context<'_>,
    keys: Vec<Bytes>,
    timeout: Option<std::time::Duration>,
    timeout_reply: Reply,
    attempt: Attempt,
) -> Result<Reply, Error> {
    wait_for(
        ctx,
        keys,
        timeout,
        timeout_reply,
        attempt,
        Wants::AnyElement,
    )
}

/// Runs a blocking command: replies at once if `attempt` finds something on `keys` (or if the
/// command may not block here), else asks the connection to wait for the keys.
fn wait_for(
    ctx: &mut Context<'_>,
    keys: Vec<Bytes>,
    timeout: Option<std::time::Duration>,
    timeout_reply: Reply,
    attempt: Attempt,
    wants: Wants,
) -> Result<Reply, Error> {
    if let Some(reply) = attempt(ctx.db(), &keys)? {
        return Ok(reply);
    }
    if !ctx.may_block() {
        return Ok(timeout_reply);
    }
    ctx.block = Some(BlockRequest {
        db: ctx.client.db,
        keys,
        timeout,
        timeout_reply,
        attempt,
        wants,
    });
    // Never sent: the connection replies with what the wait produces.
    Ok(Reply::Null)
}

/// The reply of a container command's HELP subcommand.
/// A container's HELP reply: its lines, then HELP's own, as Redis's `addReplyHelp` ends them.
fn help_reply(lines: &[&str]) -> Reply {
    Reply::Array(
        lines
            .iter()
            .chain(&["HELP", "    Prints this help."])
            .map(|l| Reply::Status(l.to_string().into()))
            .collect(),
    )
}

/// What a RESP2 connection may run while it has subscriptions.
fn allowed_while_subscribed(spec: &CommandSpec) -> bool {
    spec.flags.contains(Flags::WHILE_SUBSCRIBED)
}

/// The error for a command or subcommand that does not exist; like Redis, it is booked under
/// no command.
fn unknown(unresolved: Unresolved, args: &[Bytes]) -> Error {
    if let Unresolved::Subcommand(container) = unresolved {
        let sub = &args[1];
        return Error::UnknownSubcommand {
            sub: String::from_utf8_lossy(&sub[..sub.len().min(128)]).into_owned(),
            command: container.name.to_ascii_uppercase(),
        };
    }
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    let preview: String = args[1..]
        .iter()
        .take(16)
        .map(|a| format!("'{}' ", String::from_utf8_lossy(&a[..a.len().min(128)])))
        .collect();
    Error::UnknownCommand {
        name,
        args: preview,
    }
}
