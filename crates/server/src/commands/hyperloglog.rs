//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE.

use bytes::Bytes;
use shale_protocol::Reply;

use super::Context;
use crate::error::Error;

pub fn pfadd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let sparse_max = ctx.services.hll_sparse_max_bytes();
    let updated = ctx.db().pfadd(&args[1], &args[2..], sparse_max)?;
    Ok(Reply::Integer(updated as i64))
}

pub fn pfcount(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    Ok(Reply::Integer(ctx.db().pfcount(&args[1..])? as i64))
}

pub fn pfmerge(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let sparse_max = ctx.services.hll_sparse_max_bytes();
    ctx.db().pfmerge(&args[1], &args[2..], sparse_max)?;
    Ok(Reply::OK)
}
