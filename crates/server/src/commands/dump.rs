//! DUMP and RESTORE, in Redis 7.0's serialization format (see the `shale-rdb` crate).

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is};
use super::Context;
use crate::error::Error;
use crate::keyspace::now_ms;
use crate::types::dump::Restored;

/// DUMP key
pub fn dump(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(match ctx.db().dump_value(&args[1])? {
        Some((value, _)) => Reply::Bulk(Bytes::from(shale_rdb::dump::encode(&value))),
        None => Reply::Null,
    })
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency],
/// checked in Redis's order: options, then an existing key, then the TTL, then the payload.
pub fn restore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let (mut replace, mut absolute, mut idle, mut freq) = (false, false, None, None);
    let mut i = 4;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "absttl") {
            absolute = true;
        } else if is(&args[i], "idletime") && has_value && freq.is_none() {
            let seconds = int(&args[i + 1])?;
            if seconds < 0 {
                return Err(Error::msg("Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(seconds as u64);
            i += 1;
        } else if is(&args[i], "freq") && has_value && idle.is_none() {
            // Accepted as Redis does under its default (LRU) policy, where it changes
            // nothing: Shale keeps no access frequencies.
            let frequency = int(&args[i + 1])?;
            if !(0..=255).contains(&frequency) {
                return Err(Error::msg("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(frequency);
            i += 1;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    let key = &args[1];
    if !replace && ctx.db().exists(std::slice::from_ref(key))? > 0 {
        return Err(Error::BusyKey);
    }
    let ttl = int(&args[2])?;
    if ttl < 0 {
        return Err(Error::msg("Invalid TTL value, must be >= 0"));
    }
    let value = shale_rdb::dump::decode(&args[3])?;
    let expire_at = match ttl {
        0 => 0,
        ttl if absolute => ttl as u64,
        ttl => now_ms().saturating_add(ttl as u64),
    };
    if ctx.db().restore(key, value, expire_at, replace)? == Restored::Created {
        let db = ctx.db().index() as u8;
        ctx.keyspace.access.set_idle(db, key, idle.unwrap_or(0));
    }
    Ok(Reply::OK)
}
