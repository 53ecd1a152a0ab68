//! DEBUG DIGEST, DIGEST-VALUE, OBJECT and SLEEP: what operators, tools and tests use of
//! Redis's DEBUG. Its other subcommands poke at Redis's memory and are not provided.

use std::time::Duration;

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{is, text};
use super::{help_reply, Context};
use crate::error::Error;
use crate::keyspace::now_ms;
use crate::types::digest::hex;
use crate::types::numbers::parse_double;

/// Redis's LRU clock: seconds, in 24 bits.
const LRU_CLOCK_MAX: u64 = (1 << 24) - 1;

pub fn debug(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let sub = &args[1];
    match args.len() {
        2 if is(sub, "digest") => Ok(Reply::Status(hex(&ctx.keyspace.dataset_digest()?).into())),
        _ if is(sub, "digest-value") => {
            let db = ctx.db();
            let digests = args[2..]
                .iter()
                .map(|key| Ok(Reply::Status(hex(&db.value_digest(key)?).into())))
                .collect::<Result<Vec<_>, Error>>()?;
            Ok(Reply::Array(digests))
        }
        3 if is(sub, "object") => object(ctx, &args[2]),
        3 if is(sub, "sleep") => {
            // As Redis reads it: fractional seconds, and text that is no number as 0.
            let seconds = parse_double(&args[2]).filter(|s| *s > 0.0).unwrap_or(0.0);
            let pause = Duration::from_secs_f64(seconds.min(1e9));
            ctx.services
                .pause
                .until(now_ms() + pause.as_millis() as u64);
            tokio::task::block_in_place(|| std::thread::sleep(pause));
            Ok(Reply::OK)
        }
        2 if is(sub, "help") => Ok(help_reply(&[
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "OBJECT <key>",
            "    Show low level info about the key and associated value.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ])),
        // Redis's words for a subcommand it lacks or got the wrong number of arguments of.
        _ => Err(Error::msg(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            text(sub)
        ))),
    }
}

/// DEBUG OBJECT key, in Redis's words; a Shale value has no address in memory, and its
/// serialized length is what MEMORY USAGE estimates.
fn object(ctx: &mut Context<'_>, key: &[u8]) -> Result<Reply, Error> {
    let db = ctx.db();
    let Some(encoding) = db.encoding(key)? else {
        return Err(Error::NoSuchKey);
    };
    let idle = db.idle_secs(key)?.unwrap_or(0);
    let length = db.memory_usage(key, Some(5))?.unwrap_or(0);
    let lru = (now_ms() / 1000).saturating_sub(idle) & LRU_CLOCK_MAX;
    Ok(Reply::Status(
        format!(
            "Value at:(nil) refcount:1 encoding:{encoding} serializedlength:{length} lru:{lru} lru_seconds_idle:{idle}"
        )
        .into(),
    ))
}
