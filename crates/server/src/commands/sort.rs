//! SORT and SORT_RO.

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is};
use super::Context;
use crate::error::Error;
use crate::types::sort::SortOptions;

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC | DESC] [ALPHA]
/// [STORE destination]
pub fn sort(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    run(ctx, args, true)
}

/// SORT_RO: SORT without STORE.
pub fn sort_ro(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    run(ctx, args, false)
}

/// As in Redis, every option is read before the key is looked up.
fn run(ctx: &mut Context<'_>, args: &[Bytes], may_store: bool) -> Result<Reply, Error> {
    let patterns = super::acl::reads_every_key(ctx, args);
    let (mut options, store) = parse(args, may_store, patterns)?;
    // As in Redis, a set that must come out the same everywhere (stored, or in a script) is
    // sorted even when BY asks for no sorting.
    options.deterministic = store.is_some() || ctx.in_script;
    let db = ctx.db();
    match store {
        Some(dst) => Ok(Reply::Integer(db.sort_store(&args[1], &options, dst)?)),
        None => Ok(Reply::Array(
            db.sort(&args[1], &options)?
                .into_iter()
                .map(Reply::bulk_or_null)
                .collect(),
        )),
    }
}

/// The options of SORT (`may_store`) or SORT_RO, and STORE's destination. BY and GET
/// patterns name keys of their own, so they need a user who may read every key (`patterns`).
pub(super) fn parse(
    args: &[Bytes],
    may_store: bool,
    patterns: bool,
) -> Result<(SortOptions, Option<&Bytes>), Error> {
    let mut options = SortOptions::default();
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        match &args[i] {
            a if is(a, "asc") => options.desc = false,
            a if is(a, "desc") => options.desc = true,
            a if is(a, "alpha") => options.alpha = true,
            a if is(a, "limit") && left >= 2 => {
                options.limit = Some((int(&args[i + 1])?, int(&args[i + 2])?));
                i += 2;
            }
            a if is(a, "store") && may_store && left >= 1 => {
                store = Some(&args[i + 1]);
                i += 1;
            }
            a if is(a, "by") && left >= 1 => {
                let pattern = &args[i + 1];
                if pattern.contains(&b'*') && !patterns {
                    return Err(Error::msg(
                        "BY option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                // A BY without `*` turns sorting off for good, whatever BY follows.
                options.keep_order |= !pattern.contains(&b'*');
                options.by = Some(pattern.clone());
                i += 1;
            }
            a if is(a, "get") && left >= 1 => {
                if !patterns {
                    return Err(Error::msg(
                        "GET option of SORT denied due to insufficient ACL permissions.",
                    ));
                }
                options.gets.push(args[i + 1].clone());
                i += 1;
            }
            _ => return Err(Error::Syntax),
        }
        i += 1;
    }
    Ok((options, store))
}
