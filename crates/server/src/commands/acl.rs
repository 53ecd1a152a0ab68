//! ACL and the permission check every command passes (see [`crate::services::acl`]).

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is, subcommand_syntax};
use super::table::{command_channels, key_access};
use super::{command_keys, help_reply, resolve, CommandSpec, Context};
use crate::error::Error;
use crate::services::acl::catalog::{Categories, CATEGORY_NAMES};
use crate::services::acl::log::{self, now_ms, Reason};
use crate::services::acl::user::{channel_allowed, Denied, KeyAccess, Request, User};
use crate::services::acl::{file, Changed, UserCell, DEFAULT_USER};
use crate::services::pubsub::Kind;
use crate::services::Running;

/// Where a refused command was to run, which decides its error and its ACL LOG context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    TopLevel,
    /// Queued after MULTI.
    Queued,
    /// Run by EXEC, after the rules changed since it was queued.
    Exec,
    Script,
}

/// Redis's ACL check of a command before it runs or is queued: a refusal is logged and
/// answered with `-NOPERM` (or, in a script, the error `redis.call` raises).
pub(super) fn check(
    ctx: &Context<'_>,
    spec: &'static CommandSpec,
    args: &[Bytes],
) -> Result<(), Error> {
    if ctx.from_master || ctx.client.user.is_unrestricted() {
        return Ok(());
    }
    let named = Named::of(spec, args);
    let Err(denied) = ctx.client.user.check(&named.request(ctx, spec, args)) else {
        return Ok(());
    };
    let place = if ctx.in_script {
        Place::Script
    } else if ctx.in_exec {
        Place::Exec
    } else if ctx.client.multi.is_some() {
        Place::Queued
    } else {
        Place::TopLevel
    };
    let context = match place {
        Place::TopLevel => log::Context::TopLevel,
        Place::Queued | Place::Exec => log::Context::Multi,
        Place::Script => log::Context::Lua,
    };
    let reason = match denied {
        Denied::Command => Reason::Command,
        Denied::Key(_) => Reason::Key,
        Denied::Channel(_) => Reason::Channel,
    };
    let object = Bytes::copy_from_slice(named.object(denied, spec));
    let running = Running {
        name: spec.name,
        args,
    };
    let username = ctx.client.user.name.clone();
    record(ctx, running, reason, context, object, username);
    Err(denial(place, denied, spec))
}

/// Whether the connection's user may run the command (`redis.acl_check_cmd`), logging nothing.
/// Arguments too few for the command name no keys or channels, as in Redis.
pub(super) fn allows(ctx: &Context<'_>, spec: &'static CommandSpec, args: &[Bytes]) -> bool {
    if ctx.from_master || ctx.client.user.is_unrestricted() {
        return true;
    }
    let named = match spec.accepts(args.len()) {
        true => Named::of(spec, args),
        false => Named::default(),
    };
    ctx.client
        .user
        .check(&named.request(ctx, spec, args))
        .is_ok()
}

/// Whether the connection's user may run the command with read access to every key, which
/// SORT's BY and GET patterns need (`ACLUserCheckCmdWithUnrestrictedKeyAccess`).
pub(super) fn reads_every_key(ctx: &Context<'_>, args: &[Bytes]) -> bool {
    if ctx.from_master || ctx.client.user.is_unrestricted() {
        return true;
    }
    let Ok(spec) = resolve(args) else {
        return false;
    };
    let named = Named::of(spec, args);
    ctx.client
        .user
        .allows_with_every_key(&named.request(ctx, spec, args), KeyAccess::READ)
}

/// What a command names that ACL rules check: its keys, each with how the command uses it,
/// and the channels it publishes or subscribes to.
#[derive(Default)]
struct Named<'a> {
    keys: Vec<(&'a [u8], KeyAccess)>,
    channels: Vec<(&'a [u8], bool)>,
}

impl<'a> Named<'a> {
    fn of(spec: &CommandSpec, args: &'a [Bytes]) -> Named<'a> {
        Named {
            keys: command_keys(spec, args)
                .into_iter()
                .enumerate()
                .map(|(i, key)| (key, key_access(spec, args, i)))
                .collect(),
            channels: command_channels(spec, args),
        }
    }

    fn request<'r>(
        &'r self,
        ctx: &Context<'_>,
        spec: &CommandSpec,
        args: &'r [Bytes],
    ) -> Request<'r> {
        let id = spec.index();
        // A first-arg rule (`+select|0`) looks past the subcommand of a container.
        let first_arg = match ctx.services.acl.catalog().entry(id).parent {
            Some(_) => 2,
            None => 1,
        };
        Request {
            command: id,
            no_auth: spec.flags.contains(super::Flags::NO_AUTH),
            first_arg: args.get(first_arg).map(|a| &a[..]),
            keys: &self.keys,
            channels: &self.channels,
        }
    }

    /// What a refusal names: the command, or the key or channel refused.
    fn object(&self, denied: Denied, spec: &'static CommandSpec) -> &[u8] {
        match denied {
            Denied::Command => spec.name.as_bytes(),
            Denied::Key(i) => self.keys[i].0,
            Denied::Channel(i) => self.channels[i].0,
        }
    }
}

/// The error of a refusal, worded as Redis words it where it happened.
fn denial(place: Place, denied: Denied, spec: &CommandSpec) -> Error {
    let line = match (place, denied) {
        (Place::Script, Denied::Command) => {
            return Error::msg("The user executing the script can't run this command or subcommand")
        }
        (Place::Script, Denied::Key(_)) => {
            return Error::msg("The user executing the script can't access at least one of the keys mentioned in the command arguments")
        }
        (Place::Script, Denied::Channel(_)) => {
            return Error::msg("The user executing the script can't publish to the channel mentioned in the command")
        }
        (Place::Exec, denied) => format!(
            "ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {}",
            match denied {
                Denied::Command => "no permission to execute the command or subcommand",
                Denied::Key(_) => "no permission to touch the specified keys",
                Denied::Channel(_) => "no permission to access one of the channels used as arguments",
            }
        ),
        (_, Denied::Command) => format!(
            "this user has no permissions to run the '{}' command",
            spec.name
        ),
        (_, Denied::Key(_)) => {
            "this user has no permissions to access one of the keys used as arguments".into()
        }
        (_, Denied::Channel(_)) => {
            "this user has no permissions to access one of the channels used as arguments".into()
        }
    };
    Error::NoPerm(line)
}

/// Adds a refusal to ACL LOG, with the client as CLIENT LIST shows it running `command`.
fn record(
    ctx: &Context<'_>,
    command: Running<'_>,
    reason: Reason,
    context: log::Context,
    object: Bytes,
    username: Bytes,
) {
    ctx.services.acl.log.add(log::Entry {
        count: 1,
        reason,
        context,
        object,
        username,
        at_ms: now_ms(),
        client_info: ctx.client.handle.describe(Some(command), false),
    });
}

/// A failed AUTH or HELLO AUTH, which ACL LOG shows with the name tried.
pub(super) fn record_failed_auth(ctx: &Context<'_>, args: &[Bytes], username: &[u8]) {
    let context = match ctx.client.multi {
        Some(_) => log::Context::Multi,
        None => log::Context::TopLevel,
    };
    let name = if is(&args[0], "hello") {
        "hello"
    } else {
        "auth"
    };
    let running = Running { name, args };
    let username = Bytes::copy_from_slice(username);
    record(
        ctx,
        running,
        Reason::Auth,
        context,
        args[0].clone(),
        username,
    );
}

/// Logs the connection in as `user`.
pub(super) fn log_in(ctx: &mut Context<'_>, user: std::sync::Arc<UserCell>) {
    ctx.client.handle.info.lock().user = user.name.clone();
    ctx.client.user = user;
    ctx.client.authenticated = true;
}

/// ACL SETUSER username [rule ...]
pub fn acl_setuser(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let name = &args[2];
    if crate::services::acl::user::has_spaces(name) {
        return Err(Error::msg(
            "Usernames can't contain spaces or null characters",
        ));
    }
    let changed = ctx
        .services
        .acl
        .set_user(name, &args[3..])
        .map_err(|e| Error::msg(e.to_string()))?;
    if let Changed::Channels(cell) = changed {
        disconnect_forbidden_subscribers(ctx, &cell);
    }
    Ok(Reply::OK)
}

/// Closes the connections of `cell`'s user subscribed to a channel or pattern its rules no
/// longer allow (`ACLKillPubsubClientsIfNeeded`).
fn disconnect_forbidden_subscribers(ctx: &mut Context<'_>, cell: &UserCell) {
    let Some(allowed) = cell.current().channel_patterns() else {
        return;
    };
    let permits = |name: &[u8], pattern: bool| channel_allowed(&allowed, name, pattern);
    for client in ctx.services.clients.all() {
        let info = client.info.lock().clone();
        if info.user != cell.name || !info.is_subscribed() {
            continue;
        }
        let forbidden = ctx
            .services
            .pubsub
            .subscriptions_of(client.id)
            .iter()
            .any(|(kind, name)| !permits(name, *kind == Kind::Pattern));
        if forbidden {
            if client.id == ctx.client.handle.id {
                ctx.client.closing = Some(crate::services::Closing::AfterReply);
            } else {
                client.kill();
            }
        }
    }
}

/// ACL DELUSER username [username ...]
pub fn acl_deluser(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args[2..]
        .iter()
        .any(|name| &name[..] == DEFAULT_USER.as_bytes())
    {
        return Err(Error::msg("The 'default' user cannot be removed"));
    }
    let deleted = ctx.services.acl.delete_users(&args[2..]);
    if ctx
        .services
        .disconnect_users(&deleted, ctx.client.handle.id)
    {
        ctx.client.closing = Some(crate::services::Closing::AfterReply);
    }
    Ok(Reply::Integer(deleted.len() as i64))
}

/// ACL GETUSER username
pub fn acl_getuser(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let Some(cell) = ctx.services.acl.user(&args[2]) else {
        return Ok(Reply::Null);
    };
    let user: User = (**cell.current()).clone();
    let catalog = ctx.services.acl.catalog();
    let describe = |selector: &crate::services::acl::user::Selector| {
        vec![
            (
                Reply::bulk("commands"),
                Reply::bulk(selector.describe_commands(catalog)),
            ),
            (Reply::bulk("keys"), Reply::bulk(selector.describe_keys())),
            (
                Reply::bulk("channels"),
                Reply::bulk(selector.describe_channels()),
            ),
        ]
    };
    let mut fields = vec![
        (
            Reply::bulk("flags"),
            Reply::Set(user.flag_names().into_iter().map(Reply::bulk).collect()),
        ),
        (
            Reply::bulk("passwords"),
            Reply::Array(
                user.passwords()
                    .iter()
                    .map(|p| Reply::bulk(p.clone()))
                    .collect(),
            ),
        ),
    ];
    fields.extend(describe(user.root()));
    fields.push((
        Reply::bulk("selectors"),
        Reply::Array(
            user.extra_selectors()
                .iter()
                .map(|s| Reply::Map(describe(s)))
                .collect(),
        ),
    ));
    Ok(Reply::Map(fields))
}

/// ACL LIST
pub fn acl_list(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let acl = &ctx.services.acl;
    Ok(Reply::Array(
        acl.users()
            .iter()
            .map(|user| Reply::bulk(acl.describe(user)))
            .collect(),
    ))
}

/// ACL USERS
pub fn acl_users(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Array(
        ctx.services
            .acl
            .users()
            .iter()
            .map(|user| Reply::Bulk(user.name.clone()))
            .collect(),
    ))
}

/// ACL WHOAMI
pub fn acl_whoami(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Bulk(ctx.client.user.name.clone()))
}

/// ACL CAT [category]
pub fn acl_cat(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let Some(name) = args.get(2) else {
        return Ok(Reply::Array(
            CATEGORY_NAMES.iter().map(|n| Reply::bulk(*n)).collect(),
        ));
    };
    if args.len() > 3 {
        return Err(subcommand_syntax(&args[1], "ACL"));
    }
    let category = Categories::named(name).ok_or_else(|| {
        let shown = String::from_utf8_lossy(name);
        Error::msg(format!("Unknown category '{}'", truncate(&shown, 128)))
    })?;
    let catalog = ctx.services.acl.catalog();
    Ok(Reply::Array(
        catalog
            .in_category(category)
            .map(|id| Reply::bulk(catalog.entry(id).name))
            .collect(),
    ))
}

fn truncate(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// ACL GENPASS [bits]
pub fn acl_genpass(_ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    const MAX_BITS: i64 = 4096;
    if args.len() > 3 {
        return Err(subcommand_syntax(&args[1], "ACL"));
    }
    let bits = match args.get(2) {
        Some(bits) => int(bits)?,
        None => 256,
    };
    if bits <= 0 || bits > MAX_BITS {
        return Err(Error::msg(format!("ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}")));
    }
    let chars = (bits as usize).div_ceil(4);
    let hex: String = (0..chars)
        .map(|_| char::from(b"0123456789abcdef"[rand::random::<u8>() as usize % 16]))
        .collect();
    Ok(Reply::bulk(hex))
}

/// ACL LOG [count | RESET]
pub fn acl_log(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() > 3 {
        return Err(subcommand_syntax(&args[1], "ACL"));
    }
    let count = match args.get(2) {
        Some(arg) if is(arg, "reset") => {
            ctx.services.acl.log.reset();
            return Ok(Reply::OK);
        }
        Some(arg) => int(arg)?.max(0) as usize,
        None => 10,
    };
    let now = now_ms();
    let entries = ctx.services.acl.log.newest(count);
    Ok(Reply::Array(
        entries
            .into_iter()
            .map(|e| {
                Reply::Map(vec![
                    (Reply::bulk("count"), Reply::Integer(e.count as i64)),
                    (Reply::bulk("reason"), Reply::bulk(e.reason.name())),
                    (Reply::bulk("context"), Reply::bulk(e.context.name())),
                    (Reply::bulk("object"), Reply::Bulk(e.object)),
                    (Reply::bulk("username"), Reply::Bulk(e.username)),
                    (
                        Reply::bulk("age-seconds"),
                        Reply::Double(now.saturating_sub(e.at_ms) as f64 / 1000.0),
                    ),
                    (Reply::bulk("client-info"), Reply::bulk(e.client_info)),
                ])
            })
            .collect(),
    ))
}

/// ACL DRYRUN username command [arg ...]
pub fn acl_dryrun(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let Some(cell) = ctx.services.acl.user(&args[2]) else {
        return Err(Error::msg(format!(
            "User '{}' not found",
            String::from_utf8_lossy(&args[2])
        )));
    };
    let command = &args[3..];
    let spec = resolve(command).map_err(|_| {
        Error::msg(format!(
            "Command '{}' not found",
            String::from_utf8_lossy(&args[3])
        ))
    })?;
    if !spec.accepts(command.len()) {
        return Err(Error::msg(format!(
            "wrong number of arguments for '{}' command",
            spec.name
        )));
    }
    let named = Named::of(spec, command);
    let Err(denied) = cell.check(&named.request(ctx, spec, command)) else {
        return Ok(Reply::OK);
    };
    let object = String::from_utf8_lossy(named.object(denied, spec));
    let answer = match denied {
        Denied::Command => format!("This user has no permissions to run the '{object}' command"),
        Denied::Key(_) => format!("This user has no permissions to access the '{object}' key"),
        Denied::Channel(_) => {
            format!("This user has no permissions to access the '{object}' channel")
        }
    };
    Ok(Reply::bulk(answer))
}

/// ACL LOAD and ACL SAVE need an ACL file.
fn acl_file(ctx: &Context<'_>) -> Result<std::path::PathBuf, Error> {
    ctx.services.config.read().aclfile.clone().ok_or_else(|| {
        Error::msg("This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")
    })
}

/// ACL LOAD: replaces every user with the file's, all or none; the connections of users no
/// longer there are closed.
pub fn acl_load(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let path = acl_file(ctx)?;
    let lines = file::read(&path).map_err(Error::msg)?;
    let acl = &ctx.services.acl;
    let before = acl.users();
    acl.replace_users(&lines, &path.display().to_string())
        .map_err(Error::msg)?;
    let gone: Vec<_> = before
        .into_iter()
        .filter(|old| {
            acl.user(&old.name)
                .is_none_or(|new| !std::sync::Arc::ptr_eq(&new, old))
        })
        .filter(|old| &old.name[..] != DEFAULT_USER.as_bytes())
        .collect();
    if ctx.services.disconnect_users(&gone, ctx.client.handle.id) {
        ctx.client.closing = Some(crate::services::Closing::AfterReply);
    }
    Ok(Reply::OK)
}

/// ACL SAVE
pub fn acl_save(ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    let path = acl_file(ctx)?;
    file::save(&ctx.services.acl, &path).map_err(|err| {
        tracing::warn!("Saving the ACL file {}: {err}", path.display());
        Error::msg("There was an error trying to save the ACLs. Please check the server logs for more information")
    })?;
    Ok(Reply::OK)
}

/// ACL HELP
pub fn acl_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CAT [<category>]",
        "    List all commands that belong to <category>, or all command categories",
        "    when no category is specified.",
        "DELUSER <username> [<username> ...]",
        "    Delete a list of users.",
        "DRYRUN <username> <command> [<arg> ...]",
        "    Returns whether the user can execute the given command without executing the command.",
        "GETUSER <username>",
        "    Get the user's details.",
        "GENPASS [<bits>]",
        "    Generate a secure 256-bit user password. The optional `bits` argument can",
        "    be used to specify a different size.",
        "LIST",
        "    Show users details in config file format.",
        "LOAD",
        "    Reload users from the ACL file.",
        "LOG [<count> | RESET]",
        "    Show the ACL log entries.",
        "SAVE",
        "    Save the current config to the ACL file.",
        "SETUSER <username> <attribute> [<attribute> ...]",
        "    Create or modify a user with the specified attributes.",
        "USERS",
        "    List all the registered usernames.",
        "WHOAMI",
        "    Return the current connection username.",
    ]))
}
