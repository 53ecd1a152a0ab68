//! Stream commands, parsed in the order Redis 7.0's `t_stream.c` parses them, so a wrong
//! command gets the error Redis finds first.

use bytes::Bytes;
use shale_protocol::Reply;
use shale_rdb::stream::NodeLimits;
use shale_storage::metadata::KeyKind;

use super::args::{int, is, subcommand_syntax};
use super::{help_reply, wait_for, Context};
use crate::config::event_classes::STREAM;
use crate::error::Error;
use crate::keyspace::now_ms;
use crate::services::blocking::{Attempt, Wants};
use crate::types::stream::id::{parse_id, IdSyntax, StreamId};
use crate::types::stream::{
    key_required, no_such_group, no_such_key_or_group, AddId, ClaimOptions, Claimed, Entry, Fields,
    GroupStart, PendingFilter, ReadGroupStart, StreamInfo, Trim, TrimTo,
};

/// Entries a blocked XREAD without COUNT is served at most, as in Redis.
const BLOCKED_READ_COUNT: usize = 1000;

const PLAIN: IdSyntax = IdSyntax {
    missing_seq: 0,
    strict: false,
    star_seq: false,
};
const STRICT: IdSyntax = IdSyntax {
    missing_seq: 0,
    strict: true,
    star_seq: false,
};

fn invalid_id() -> Error {
    Error::msg("Invalid stream ID specified as stream command argument")
}

fn strict_id(arg: &[u8]) -> Result<StreamId, Error> {
    parse_id(arg, STRICT).map(|p| p.id).ok_or_else(invalid_id)
}

/// A range bound: `-`, `+`, an ID, or `(ID` (exclusive); `missing_seq` completes a bare `ms`.
fn interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Error> {
    if arg.len() > 1 && arg[0] == b'(' {
        let syntax = IdSyntax {
            missing_seq,
            ..STRICT
        };
        return Ok((parse_id(&arg[1..], syntax).ok_or_else(invalid_id)?.id, true));
    }
    let syntax = IdSyntax {
        missing_seq,
        ..PLAIN
    };
    Ok((parse_id(arg, syntax).ok_or_else(invalid_id)?.id, false))
}

fn range_start(arg: &[u8]) -> Result<StreamId, Error> {
    match interval_id(arg, 0)? {
        (id, false) => Ok(id),
        (id, true) => id
            .next()
            .ok_or_else(|| Error::msg("invalid start ID for the interval")),
    }
}

fn range_end(arg: &[u8]) -> Result<StreamId, Error> {
    match interval_id(arg, u64::MAX)? {
        (id, false) => Ok(id),
        (id, true) => id
            .previous()
            .ok_or_else(|| Error::msg("invalid end ID for the interval")),
    }
}

fn id_reply(id: StreamId) -> Reply {
    Reply::bulk(id.to_string())
}

fn fields_reply(fields: Fields) -> Reply {
    Reply::Array(
        fields
            .into_iter()
            .flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)])
            .collect(),
    )
}

fn entry_reply((id, fields): Entry) -> Reply {
    Reply::Array(vec![id_reply(id), fields_reply(fields)])
}

fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}

/// XREAD's and XREADGROUP's reply: per stream, its name and entries; a map in RESP3.
fn streams_reply(streams: Vec<(Bytes, Reply)>, resp3: bool) -> Reply {
    if resp3 {
        Reply::Map(
            streams
                .into_iter()
                .map(|(k, v)| (Reply::Bulk(k), v))
                .collect(),
        )
    } else {
        Reply::Array(
            streams
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v]))
                .collect(),
        )
    }
}

/// XADD's and XTRIM's trimming options, read as Redis's `streamParseAddOrTrimArgsOrReply`.
struct AddOrTrim {
    trim: Option<Trim>,
    no_create: bool,
    id: Option<AddId>,
    /// Where XADD's ID is.
    id_at: usize,
}

/// `from_master`: a master's command trims without a limit, as Redis obeys its master.
fn add_or_trim_args(
    args: &[Bytes],
    xadd: bool,
    from_master: bool,
    limits: NodeLimits,
) -> Result<AddOrTrim, Error> {
    let mut to = None;
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut parsed = AddOrTrim {
        trim: None,
        no_create: false,
        id: None,
        id_at: 0,
    };
    let incompatible = "syntax error, MAXLEN and MINID options at the same time are not compatible";
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if xadd && opt.as_ref() == b"*" {
            parsed.id = Some(AddId::Auto);
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if to.is_some() {
                return Err(Error::msg(incompatible));
            }
            approx = false;
            let next = args[i + 1].as_ref();
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if is(opt, "maxlen") {
                let max = int(&args[i + 1])?;
                if max < 0 {
                    return Err(Error::msg("The MAXLEN argument must be >= 0."));
                }
                to = Some(TrimTo::MaxLen(max as u64));
            } else {
                to = Some(TrimTo::MinId(strict_id(&args[i + 1])?));
            }
            i += 1;
        } else if is(opt, "limit") && more > 0 {
            let n = int(&args[i + 1])?;
            if n < 0 {
                return Err(Error::msg("The LIMIT argument must be >= 0."));
            }
            limit = Some(n);
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            parsed.no_create = true;
        } else if xadd {
            let syntax = IdSyntax {
                star_seq: true,
                ..STRICT
            };
            let id = parse_id(opt, syntax).ok_or_else(invalid_id)?;
            parsed.id = Some(if id.seq_given {
                AddId::Explicit(id.id)
            } else {
                AddId::SequenceOf(id.id.ms)
            });
            break;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    parsed.id_at = i;
    if limit.is_some_and(|n| n != 0) && to.is_none() {
        return Err(Error::msg(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && to.is_none() {
        return Err(Error::msg(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit.is_some() && !approx && !from_master {
        return Err(Error::msg(
            "syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    let limit = match (approx, limit) {
        _ if from_master => 0,
        (true, Some(n)) => n as u64,
        // At most 100 nodes' worth, as Redis caps it.
        (true, None) => match 100i64.wrapping_mul(limits.entries as i64) {
            n if n <= 0 => 10_000,
            n => n.min(1_000_000) as u64,
        },
        (false, _) => 0,
    };
    parsed.trim = to.map(|to| Trim { to, approx, limit });
    Ok(parsed)
}

/// `stream-node-max-entries` and `stream-node-max-bytes`.
fn node_limits(ctx: &Context<'_>) -> NodeLimits {
    let config = ctx.services.config.read();
    NodeLimits {
        entries: config.stream_node_max_entries,
        bytes: config.stream_node_max_bytes,
    }
}

/// XADD key [NOMKSTREAM] [MAXLEN | MINID [= | ~] threshold [LIMIT count]] * | id field value
/// [field value ...]
pub fn xadd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let limits = node_limits(ctx);
    let parsed = add_or_trim_args(args, true, ctx.from_master, limits)?;
    let fields_at = parsed.id_at + 1;
    let rest = args.len().saturating_sub(fields_at);
    if rest < 2 || rest % 2 == 1 {
        return Err(Error::WrongArity("xadd".into()));
    }
    let id = parsed.id.unwrap_or(AddId::Auto);
    if id == AddId::Explicit(StreamId::MIN) {
        return Err(Error::msg(
            "The ID specified in XADD must be greater than 0-0",
        ));
    }
    let fields: Fields = args[fields_at..]
        .chunks_exact(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    let Some(added) =
        ctx.db()
            .xadd(&args[1], id, parsed.no_create, parsed.trim, &fields, limits)?
    else {
        return Ok(Reply::Null);
    };
    ctx.notify(STREAM, "xadd", &args[1]);
    if added.trimmed > 0 {
        ctx.notify(STREAM, "xtrim", &args[1]);
    }
    Ok(id_reply(added.id))
}

/// XTRIM key MAXLEN | MINID [= | ~] threshold [LIMIT count]
pub fn xtrim(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let parsed = add_or_trim_args(args, false, ctx.from_master, node_limits(ctx))?;
    let Some(trim) = parsed.trim else {
        return Err(Error::Syntax);
    };
    let removed = ctx.db().xtrim(&args[1], trim)?;
    if removed > 0 {
        ctx.notify(STREAM, "xtrim", &args[1]);
    }
    Ok(Reply::Integer(removed as i64))
}

fn range(ctx: &mut Context<'_>, args: &[Bytes], rev: bool) -> Result<Reply, Error> {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = range_start(start_arg)?;
    let end = range_end(end_arg)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            count = int(&args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(Error::Syntax);
        }
    }
    if !ctx.db().exists_stream(&args[1])? {
        return Ok(Reply::Array(Vec::new()));
    }
    if count == 0 {
        return Ok(Reply::NullArray);
    }
    let count = if count < 0 { 0 } else { count as usize };
    // The check above was the command's lookup, as Redis counts it.
    Ok(entries_reply(
        ctx.db()
            .uncounted()
            .xrange(&args[1], start, end, count, rev)?,
    ))
}

/// XRANGE key start end [COUNT count]
pub fn xrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    range(ctx, args, false)
}

/// XREVRANGE key end start [COUNT count]
pub fn xrevrange(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    range(ctx, args, true)
}

pub fn xlen(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().xlen(&args[1])?))
}

/// XDEL key id [id ...]
pub fn xdel(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    // The type and the key come first: XDEL of a missing key is 0 whatever its IDs.
    if !ctx.db().exists_stream(&args[1])? {
        return Ok(Reply::Integer(0));
    }
    let ids = args[2..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let deleted = ctx.db().xdel(&args[1], &ids)?;
    if deleted > 0 {
        ctx.notify(STREAM, "xdel", &args[1]);
    }
    Ok(Reply::Integer(deleted))
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub fn xsetid(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let id = strict_id(&args[2])?;
    let (mut entries_added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "entriesadded") && more > 0 {
            let n = int(&args[i + 1])?;
            if n < 0 {
                return Err(Error::msg("entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if is(&args[i], "maxdeletedid") && more > 0 {
            let max = strict_id(&args[i + 1])?;
            if id < max {
                return Err(Error::msg(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            max_deleted = Some(max);
        } else {
            return Err(Error::Syntax);
        }
        i += 2;
    }
    ctx.db().xsetid(&args[1], id, entries_added, max_deleted)?;
    ctx.notify(STREAM, "xsetid", &args[1]);
    Ok(Reply::OK)
}

/// A BLOCK argument in milliseconds, as Redis's `getTimeoutFromObjectOrReply` reads it.
fn block_timeout(arg: &[u8]) -> Result<Option<std::time::Duration>, Error> {
    let ms = super::args::int(arg)
        .map_err(|_| Error::msg("timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(Error::msg("timeout is negative"));
    }
    if ms > i64::MAX - now_ms() as i64 {
        return Err(Error::msg("timeout is out of range"));
    }
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...], and
/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS ...
fn read(ctx: &mut Context<'_>, args: &[Bytes], group_read: bool) -> Result<Reply, Error> {
    let (mut timeout, mut blocks, mut count) = (None, false, 0usize);
    let (mut streams_at, mut group, mut no_ack) = (0, None, false);
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if is(opt, "block") && more > 0 {
            if ctx.in_script {
                return Err(Error::msg(format!(
                    "{} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&args[0])
                )));
            }
            timeout = block_timeout(&args[i + 1])?;
            blocks = true;
            i += 1;
        } else if is(opt, "count") && more > 0 {
            count = usize::try_from(int(&args[i + 1])?.max(0)).unwrap_or(usize::MAX);
            i += 1;
        } else if is(opt, "streams") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                return Err(Error::msg("Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."));
            }
            break;
        } else if is(opt, "group") && more >= 2 {
            if !group_read {
                return Err(Error::msg(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((args[i + 1].clone(), args[i + 2].clone()));
            i += 2;
        } else if is(opt, "noack") {
            if !group_read {
                return Err(Error::msg(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            no_ack = true;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(Error::Syntax);
    }
    if group_read && group.is_none() {
        return Err(Error::msg("Missing GROUP option for XREADGROUP"));
    }
    let n = (args.len() - streams_at) / 2;
    let keys: Vec<Bytes> = args[streams_at..streams_at + n].to_vec();
    let id_args = &args[streams_at + n..];
    let resp3 = ctx.client.resp3;
    if let Some((group, consumer)) = group {
        let mut starts = Vec::with_capacity(n);
        for (key, arg) in keys.iter().zip(id_args) {
            if !ctx.db().stream_has_group(key, &group)? {
                return Err(Error::NoGroup(format!(
                    "No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(&group)
                )));
            }
            starts.push(match arg.as_ref() {
                b"$" => return Err(Error::msg("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")),
                b">" => ReadGroupStart::New,
                // The greatest ID is how Redis stores `>`, and it reads it as one.
                other => match strict_id(other)? {
                    StreamId::MAX => ReadGroupStart::New,
                    id => ReadGroupStart::History(id),
                },
            });
        }
        let served_count = if blocks && count == 0 {
            BLOCKED_READ_COUNT
        } else {
            count
        };
        let first = read_groups(ctx, &keys, &group, &consumer, &starts, count, no_ack, resp3)?;
        if first.is_some() || !blocks {
            return Ok(first.unwrap_or(Reply::NullArray));
        }
        let starts_of: Vec<(Bytes, ReadGroupStart)> = keys.iter().cloned().zip(starts).collect();
        let attempt: Attempt = Box::new(move |db, keys| {
            let mut streams = Vec::new();
            // Called with the keys that became ready: each is read from its own start.
            for key in keys {
                let Some(start) = starts_of.iter().find(|(k, _)| k == key).map(|(_, s)| s) else {
                    continue;
                };
                // A stream deleted or overwritten meanwhile ends the wait, as does a group
                // destroyed, with Redis's words.
                if db.key_type(key)? != Some(KeyKind::Stream) {
                    return Err(Error::Unblocked("the stream key no longer exists"));
                }
                let read = db
                    .xreadgroup(key, &group, &consumer, *start, served_count, no_ack)
                    .map_err(|err| match err {
                        Error::NoGroup(_) => Error::NoGroup(
                            "the consumer group this client was blocked on no longer exists".into(),
                        ),
                        other => other,
                    })?;
                if let Some(entries) = read.entries {
                    streams.push((key.clone(), group_entries_reply(entries)));
                }
            }
            Ok((!streams.is_empty()).then(|| streams_reply(streams, resp3)))
        });
        return wait_for(
            ctx,
            keys,
            timeout,
            Reply::NullArray,
            attempt,
            Wants::EntriesAfterOwnId,
        );
    }
    let mut afters = Vec::with_capacity(n);
    for (key, arg) in keys.iter().zip(id_args) {
        ctx.db().check_stream_type(key)?;
        afters.push((key.clone(), match arg.as_ref() {
            // Redis finds the last ID in the stream its check looked up.
            b"$" => ctx.db().uncounted().stream_last_id(key)?,
            b">" => return Err(Error::msg("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")),
            other => strict_id(other)?,
        }));
    }
    let served_count = if count == 0 {
        BLOCKED_READ_COUNT
    } else {
        count
    };
    let read_all = move |db: crate::keyspace::Db<'_>, keys: &[Bytes], count: usize| {
        let mut streams = Vec::new();
        // Called with every key first, then with the keys that became ready.
        for key in keys {
            let Some(after) = afters.iter().find(|(k, _)| k == key).map(|(_, a)| *a) else {
                continue;
            };
            if let Some(entries) = db.xread(key, after, count)? {
                streams.push((key.clone(), entries_reply(entries)));
            }
        }
        Ok::<_, Error>((!streams.is_empty()).then(|| streams_reply(streams, resp3)))
    };
    if let Some(reply) = read_all(ctx.db(), &keys, count)? {
        return Ok(reply);
    }
    if !blocks {
        return Ok(Reply::NullArray);
    }
    let attempt: Attempt = Box::new(move |db, keys| read_all(db, keys, served_count));
    wait_for(
        ctx,
        keys,
        timeout,
        Reply::NullArray,
        attempt,
        Wants::EntriesAfterOwnId,
    )
}

fn group_entries_reply(entries: Vec<(StreamId, Option<Fields>)>) -> Reply {
    Reply::Array(
        entries
            .into_iter()
            .map(|(id, fields)| {
                Reply::Array(vec![
                    id_reply(id),
                    fields.map_or(Reply::NullArray, fields_reply),
                ])
            })
            .collect(),
    )
}

/// XREADGROUP's reads of each stream, and the consumers it created announced.
#[allow(clippy::too_many_arguments)]
fn read_groups(
    ctx: &mut Context<'_>,
    keys: &[Bytes],
    group: &Bytes,
    consumer: &Bytes,
    starts: &[ReadGroupStart],
    count: usize,
    no_ack: bool,
    resp3: bool,
) -> Result<Option<Reply>, Error> {
    let mut streams = Vec::new();
    for (key, start) in keys.iter().zip(starts) {
        // Redis looks each stream up again to read it, and counts that lookup too; the check
        // of its group found it.
        ctx.db().record_lookup(true);
        let read = ctx
            .db()
            .xreadgroup(key, group, consumer, *start, count, no_ack)?;
        if read.created_consumer {
            ctx.notify(STREAM, "xgroup-createconsumer", key);
        }
        if let Some(entries) = read.entries {
            streams.push((key.clone(), group_entries_reply(entries)));
        }
    }
    Ok((!streams.is_empty()).then(|| streams_reply(streams, resp3)))
}

pub fn xread(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    read(ctx, args, false)
}

pub fn xreadgroup(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    read(ctx, args, true)
}

/// XGROUP's options after the ID: MKSTREAM (CREATE) and ENTRIESREAD (CREATE, SETID).
fn xgroup_options(args: &[Bytes], create: bool) -> Result<(bool, i64), Error> {
    let (mut mkstream, mut entries_read) = (false, -1);
    let mut i = 5;
    while i < args.len() {
        if create && is(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(&args[i], "entriesread") && i + 1 < args.len() {
            entries_read = int(&args[i + 1])?;
            if entries_read < 0 && entries_read != -1 {
                return Err(Error::msg("value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax(&args[1], "XGROUP"));
        }
    }
    Ok((mkstream, entries_read))
}

fn group_start(
    arg: &[u8],
    parse: impl Fn(&[u8]) -> Result<StreamId, Error>,
) -> Result<GroupStart, Error> {
    if arg == b"$" {
        Ok(GroupStart::Last)
    } else {
        Ok(GroupStart::Id(parse(arg)?))
    }
}

/// XGROUP CREATE key group id | $ [MKSTREAM] [ENTRIESREAD entries-read]
pub fn xgroup_create(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (mkstream, entries_read) = xgroup_options(args, true)?;
    if !ctx.db().exists_stream(&args[2])? && !mkstream {
        return Err(key_required());
    }
    if args.len() > 8 {
        return Err(subcommand_syntax(&args[1], "XGROUP"));
    }
    let start = group_start(&args[4], strict_id)?;
    ctx.db()
        .xgroup_create(&args[2], &args[3], start, mkstream, entries_read)?;
    ctx.notify(STREAM, "xgroup-create", &args[2]);
    Ok(Reply::OK)
}

/// XGROUP SETID key group id | $ [ENTRIESREAD entries-read]
pub fn xgroup_setid(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (_, entries_read) = xgroup_options(args, false)?;
    if !ctx.db().exists_stream(&args[2])? {
        return Err(key_required());
    }
    if !ctx.db().stream_has_group(&args[2], &args[3])? {
        return Err(no_such_group(&args[2], &args[3]));
    }
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax(&args[1], "XGROUP"));
    }
    let start = if args[4].as_ref() == b"$" {
        GroupStart::Last
    } else {
        // SETID reads a bare `-` or `+` as an ID, as Redis does.
        GroupStart::Id(
            parse_id(&args[4], PLAIN)
                .map(|p| p.id)
                .ok_or_else(invalid_id)?,
        )
    };
    ctx.db()
        .xgroup_setid(&args[2], &args[3], start, entries_read)?;
    ctx.notify(STREAM, "xgroup-setid", &args[2]);
    Ok(Reply::OK)
}

/// XGROUP DESTROY key group
pub fn xgroup_destroy(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let destroyed = ctx.db().xgroup_destroy(&args[2], &args[3])?;
    if destroyed {
        ctx.notify(STREAM, "xgroup-destroy", &args[2]);
    }
    Ok(Reply::Integer(destroyed as i64))
}

/// XGROUP CREATECONSUMER key group consumer
pub fn xgroup_createconsumer(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let created = ctx
        .db()
        .xgroup_createconsumer(&args[2], &args[3], &args[4])?;
    if created {
        ctx.notify(STREAM, "xgroup-createconsumer", &args[2]);
    }
    Ok(Reply::Integer(created as i64))
}

/// XGROUP DELCONSUMER key group consumer
pub fn xgroup_delconsumer(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let pending = ctx.db().xgroup_delconsumer(&args[2], &args[3], &args[4])?;
    if pending.is_some() {
        ctx.notify(STREAM, "xgroup-delconsumer", &args[2]);
    }
    Ok(Reply::Integer(pending.unwrap_or(0) as i64))
}

pub fn xgroup_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
    ]))
}

/// XACK key group id [id ...]
pub fn xack(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    // A missing key or group answers 0 before the IDs are read.
    if !ctx.db().stream_has_group(&args[1], &args[2])? {
        return Ok(Reply::Integer(0));
    }
    let ids = args[3..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Reply::Integer(ctx.db().xack(&args[1], &args[2], &ids)?))
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    if args.len() != 3 && !(6..=9).contains(&args.len()) {
        return Err(Error::Syntax);
    }
    if args.len() == 3 {
        ctx.db().check_stream_type(&args[1])?;
        // The check above was the command's lookup, as Redis counts it.
        let summary = ctx.db().uncounted().xpending_summary(&args[1], &args[2])?;
        let Some((first, last, owners)) = summary.range else {
            return Ok(Reply::Array(vec![
                Reply::Integer(0),
                Reply::Null,
                Reply::Null,
                Reply::NullArray,
            ]));
        };
        return Ok(Reply::Array(vec![
            Reply::Integer(summary.count as i64),
            id_reply(first),
            id_reply(last),
            Reply::Array(
                owners
                    .into_iter()
                    .map(|(name, n)| {
                        Reply::Array(vec![Reply::Bulk(name), Reply::bulk(n.to_string())])
                    })
                    .collect(),
            ),
        ]));
    }
    let mut at = 3;
    let mut min_idle = 0;
    if is(&args[3], "idle") {
        min_idle = int(&args[4])?;
        if args.len() < 8 {
            return Err(Error::Syntax);
        }
        at += 2;
    }
    let count = int(&args[at + 2])?.max(0) as u64;
    let start = range_start(&args[at])?;
    let end = range_end(&args[at + 1])?;
    let consumer = args.get(at + 3).map(|c| c.as_ref());
    ctx.db().check_stream_type(&args[1])?;
    let filter = PendingFilter {
        start,
        end,
        count,
        min_idle,
        consumer,
    };
    // The check above was the command's lookup, as Redis counts it.
    let entries = ctx.db().uncounted().xpending(&args[1], &args[2], &filter)?;
    Ok(Reply::Array(
        entries
            .into_iter()
            .map(|e| {
                Reply::Array(vec![
                    id_reply(e.id),
                    Reply::Bulk(e.consumer),
                    Reply::Integer(e.idle),
                    Reply::Integer(e.deliveries as i64),
                ])
            })
            .collect(),
    ))
}

fn claimed_reply(claimed: Claimed, just_id: bool) -> Reply {
    if just_id {
        Reply::Array(claimed.ids.into_iter().map(id_reply).collect())
    } else {
        entries_reply(claimed.entries)
    }
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
pub fn xclaim(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    ctx.db().check_stream_type(&args[1])?;
    if !ctx.db().stream_has_group(&args[1], &args[2])? {
        return Err(no_such_key_or_group(&args[1], &args[2]));
    }
    let min_idle = int(&args[4])
        .map_err(|_| Error::msg("Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut j = 5;
    let mut ids = Vec::new();
    while j < args.len() {
        match parse_id(&args[j], STRICT) {
            Some(id) => ids.push(id.id),
            None => break,
        }
        j += 1;
    }
    let now = now_ms() as i64;
    let mut options = ClaimOptions {
        min_idle,
        delivered_ms: None,
        retry_count: None,
        force: false,
        just_id: false,
        last_id: StreamId::MIN,
    };
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j];
        let number = |arg: &[u8], option: &'static str| {
            int(arg).map_err(|_| Error::msg(format!("Invalid {option} option argument for XCLAIM")))
        };
        if is(opt, "force") {
            options.force = true;
        } else if is(opt, "justid") {
            options.just_id = true;
        } else if is(opt, "idle") && more > 0 {
            j += 1;
            options.delivered_ms = Some(now.saturating_sub(number(&args[j], "IDLE")?));
        } else if is(opt, "time") && more > 0 {
            j += 1;
            options.delivered_ms = Some(number(&args[j], "TIME")?);
        } else if is(opt, "retrycount") && more > 0 {
            j += 1;
            let n = number(&args[j], "RETRYCOUNT")?;
            options.retry_count = (n >= 0).then_some(n);
        } else if is(opt, "lastid") && more > 0 {
            j += 1;
            options.last_id = strict_id(&args[j])?;
        } else {
            return Err(Error::msg(format!(
                "Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 1;
    }
    let just_id = options.just_id;
    let claimed = ctx
        .db()
        .xclaim(&args[1], &args[2], &args[3], &ids, &options)?;
    if claimed.created_consumer {
        ctx.notify(STREAM, "xgroup-createconsumer", &args[1]);
    }
    Ok(claimed_reply(claimed, just_id))
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub fn xautoclaim(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let min_idle = int(&args[4])
        .map_err(|_| Error::msg("Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = range_start(&args[5])?;
    let (mut count, mut just_id) = (100u64, false);
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "count") && more > 0 {
            let max = i64::MAX / 16;
            count = int(&args[j + 1])
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| Error::msg("COUNT must be > 0"))? as u64;
            j += 1;
        } else if is(&args[j], "justid") {
            just_id = true;
        } else {
            return Err(Error::Syntax);
        }
        j += 1;
    }
    ctx.db().check_stream_type(&args[1])?;
    let claimed = ctx.db().xautoclaim(
        &args[1], &args[2], &args[3], min_idle, start, count, just_id,
    )?;
    if claimed.created_consumer {
        ctx.notify(STREAM, "xgroup-createconsumer", &args[1]);
    }
    let next = claimed.next;
    let deleted = claimed.deleted.clone();
    Ok(Reply::Array(vec![
        id_reply(next),
        claimed_reply(claimed, just_id),
        Reply::Array(deleted.into_iter().map(id_reply).collect()),
    ]))
}

fn bulk(text: &'static str) -> Reply {
    Reply::Bulk(Bytes::from_static(text.as_bytes()))
}

fn optional_integer(value: Option<i64>) -> Reply {
    value.map_or(Reply::Null, Reply::Integer)
}

/// XINFO STREAM key [FULL [COUNT count]]
pub fn xinfo_stream(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    // The key comes before the options, as in Redis.
    if !ctx.db().exists_stream(&args[2])? {
        return Err(Error::NoSuchKey);
    }
    let options = &args[3..];
    let full = match options.len() {
        0 => None,
        1 | 3 if is(&options[0], "full") => {
            if options.len() == 3 {
                if !is(&options[1], "count") {
                    return Err(subcommand_syntax(&args[1], "XINFO"));
                }
                let n = int(&options[2])?;
                Some(if n < 0 { 10 } else { n as usize })
            } else {
                Some(10)
            }
        }
        _ => return Err(subcommand_syntax(&args[1], "XINFO")),
    };
    // The check above was the command's lookup, as Redis counts it.
    let db = ctx.db().uncounted();
    let Some(count) = full else {
        let info = db.xinfo_stream(&args[2])?;
        let mut fields = stream_info_fields(&info);
        fields.extend([
            (bulk("groups"), Reply::Integer(info.groups as i64)),
            (
                bulk("first-entry"),
                info.first.map_or(Reply::Null, entry_reply),
            ),
            (
                bulk("last-entry"),
                info.last.map_or(Reply::Null, entry_reply),
            ),
        ]);
        return Ok(Reply::Map(fields));
    };
    let full = db.xinfo_stream_full(&args[2], count)?;
    let info = full.info;
    let groups = full
        .groups
        .into_iter()
        .map(|(group, pending, consumers)| {
            Reply::Map(vec![
                (bulk("name"), Reply::Bulk(group.name)),
                (bulk("last-delivered-id"), id_reply(group.last_delivered)),
                (bulk("entries-read"), optional_integer(group.entries_read)),
                (bulk("lag"), optional_integer(group.lag)),
                (bulk("pel-count"), Reply::Integer(group.pending as i64)),
                (
                    bulk("pending"),
                    Reply::Array(
                        pending
                            .into_iter()
                            .map(|(p, delivered)| {
                                Reply::Array(vec![
                                    id_reply(p.id),
                                    Reply::Bulk(p.consumer),
                                    Reply::Integer(delivered as i64),
                                    Reply::Integer(p.deliveries as i64),
                                ])
                            })
                            .collect(),
                    ),
                ),
                (
                    bulk("consumers"),
                    Reply::Array(
                        consumers
                            .into_iter()
                            .map(|(c, owned)| {
                                Reply::Map(vec![
                                    (bulk("name"), Reply::Bulk(c.name)),
                                    (bulk("seen-time"), Reply::Integer(c.seen_ms as i64)),
                                    (bulk("pel-count"), Reply::Integer(c.pending as i64)),
                                    (
                                        bulk("pending"),
                                        Reply::Array(
                                            owned
                                                .into_iter()
                                                .map(|(id, delivered, deliveries)| {
                                                    Reply::Array(vec![
                                                        id_reply(id),
                                                        Reply::Integer(delivered as i64),
                                                        Reply::Integer(deliveries as i64),
                                                    ])
                                                })
                                                .collect(),
                                        ),
                                    ),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    let mut fields = stream_info_fields(&info);
    fields.extend([
        (bulk("entries"), entries_reply(full.entries)),
        (bulk("groups"), Reply::Array(groups)),
    ]);
    Ok(Reply::Map(fields))
}

/// The fields XINFO STREAM starts with, FULL or not.
fn stream_info_fields(info: &StreamInfo) -> Vec<(Reply, Reply)> {
    vec![
        (bulk("length"), Reply::Integer(info.length as i64)),
        (
            bulk("radix-tree-keys"),
            Reply::Integer(info.radix_keys as i64),
        ),
        (
            bulk("radix-tree-nodes"),
            Reply::Integer(info.radix_nodes as i64),
        ),
        (bulk("last-generated-id"), id_reply(info.last_generated)),
        (bulk("max-deleted-entry-id"), id_reply(info.max_deleted)),
        (
            bulk("entries-added"),
            Reply::Integer(info.entries_added as i64),
        ),
        (
            bulk("recorded-first-entry-id"),
            id_reply(info.recorded_first),
        ),
    ]
}

/// XINFO GROUPS key
pub fn xinfo_groups(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let groups = ctx.db().xinfo_groups(&args[2])?;
    Ok(Reply::Array(
        groups
            .into_iter()
            .map(|g| {
                Reply::Map(vec![
                    (bulk("name"), Reply::Bulk(g.name)),
                    (bulk("consumers"), Reply::Integer(g.consumers as i64)),
                    (bulk("pending"), Reply::Integer(g.pending as i64)),
                    (bulk("last-delivered-id"), id_reply(g.last_delivered)),
                    (bulk("entries-read"), optional_integer(g.entries_read)),
                    (bulk("lag"), optional_integer(g.lag)),
                ])
            })
            .collect(),
    ))
}

/// XINFO CONSUMERS key group
pub fn xinfo_consumers(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let consumers = ctx.db().xinfo_consumers(&args[2], &args[3])?;
    Ok(Reply::Array(
        consumers
            .into_iter()
            .map(|c| {
                Reply::Map(vec![
                    (bulk("name"), Reply::Bulk(c.name)),
                    (bulk("pending"), Reply::Integer(c.pending as i64)),
                    (bulk("idle"), Reply::Integer(c.idle)),
                ])
            })
            .collect(),
    ))
}

pub fn xinfo_help(_ctx: &mut Context<'_>, _args: &[Bytes]) -> Result<Reply, Error> {
    Ok(help_reply(&[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
    ]))
}
