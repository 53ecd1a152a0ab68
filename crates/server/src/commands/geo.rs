//! Geo commands, over sorted sets scored by geohash, with Redis's argument handling (its
//! `georadiusGeneric`, for the order in which errors are found) and its number printing.

use bytes::Bytes;
use shale_protocol::Reply;

use super::args::{int, is};
use super::Context;
use crate::error::Error;
use crate::types::geo::{GeoPoint, GeoSearch, Order};
use crate::types::geohash::{self, Shape, ShapeSize};
use crate::types::numbers::{format_f, format_human, parse_double};
use crate::types::zset::ZaddOptions;

/// A double as Redis's `getDoubleFromObjectOrReply` reads one, with its error.
fn double(arg: &[u8], error: Option<&'static str>) -> Result<f64, Error> {
    parse_double(arg).ok_or_else(|| error.map_or(Error::NotFloat, Error::msg))
}

/// A longitude and a latitude, within Redis's limits.
fn position(args: &[Bytes]) -> Result<(f64, f64), Error> {
    let longitude = double(&args[0], None)?;
    let latitude = double(&args[1], None)?;
    if !geohash::valid_position(longitude, latitude) {
        return Err(Error::msg(format!(
            "invalid longitude,latitude pair {},{}",
            format_f(longitude),
            format_f(latitude)
        )));
    }
    Ok((longitude, latitude))
}

/// Meters per unit.
fn unit(arg: &[u8]) -> Result<f64, Error> {
    match arg.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(Error::msg(
            "unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

/// `radius unit`: the radius and meters per unit.
fn radius(args: &[Bytes]) -> Result<(f64, f64), Error> {
    let radius = double(&args[0], Some("need numeric radius"))?;
    if radius < 0.0 {
        return Err(Error::msg("radius cannot be negative"));
    }
    Ok((radius, unit(&args[1])?))
}

/// `width height unit`.
fn box_size(args: &[Bytes]) -> Result<(f64, f64, f64), Error> {
    let width = double(&args[0], Some("need numeric width"))?;
    let height = double(&args[1], Some("need numeric height"))?;
    if height < 0.0 || width < 0.0 {
        return Err(Error::msg("height or width cannot be negative"));
    }
    Ok((width, height, unit(&args[2])?))
}

/// A distance as Redis prints one (`fixedpoint_d2string` with 4 decimals): rounded to the
/// nearest ten-thousandth, ties to even, as `llrint` does.
fn distance_text(value: f64) -> String {
    if value == 0.0 {
        return "0.0000".to_string();
    }
    let scaled = (value * 10000.0).round_ties_even();
    // `llrint` of a value out of `long long`'s range: never for a distance on Earth.
    let scaled = if scaled.abs() < 9.2e18 {
        scaled as i64
    } else {
        0
    };
    let sign = if scaled < 0 { "-" } else { "" };
    let magnitude = scaled.unsigned_abs();
    format!("{sign}{}.{:04}", magnitude / 10000, magnitude % 10000)
}

/// GEOADD key [NX | XX] [CH] longitude latitude member [longitude latitude member ...]
pub fn geoadd(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let mut options = ZaddOptions::default();
    let mut at = 2;
    while at < args.len() {
        let arg = &args[at];
        if is(arg, "nx") {
            options.nx = true;
        } else if is(arg, "xx") {
            options.xx = true;
        } else if is(arg, "ch") {
            options.ch = true;
        } else {
            break;
        }
        at += 1;
    }
    let rest = &args[at..];
    if !rest.len().is_multiple_of(3) || (options.nx && options.xx) || rest.is_empty() {
        return Err(Error::Syntax);
    }
    let mut pairs = Vec::with_capacity(rest.len() / 3);
    for triple in rest.chunks_exact(3) {
        let (longitude, latitude) = position(&triple[..2])?;
        let score = geohash::encode_position(longitude, latitude).ok_or(Error::Syntax)?;
        pairs.push((score, triple[2].clone()));
    }
    let (count, _) = ctx.db().zadd(&args[1], options, &pairs)?;
    Ok(Reply::Integer(count))
}

/// GEODIST key member1 member2 [M | KM | FT | MI]
pub fn geodist(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(Error::Syntax),
    };
    let scores = ctx.db().zmscore(&args[1], &args[2..4])?;
    let (Some(a), Some(b)) = (scores[0], scores[1]) else {
        return Ok(Reply::Null);
    };
    let (a, b) = (geohash::decode_score(a), geohash::decode_score(b));
    let meters = geohash::distance(a.0, a.1, b.0, b.1);
    Ok(Reply::bulk(distance_text(meters / to_meters)))
}

/// GEOHASH key [member ...]
pub fn geohash(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let scores = ctx.db().zmscore(&args[1], &args[2..])?;
    Ok(Reply::Array(
        scores
            .into_iter()
            .map(|score| {
                score.map_or(Reply::Null, |s| {
                    Reply::bulk(geohash::standard_geohash(s).to_vec())
                })
            })
            .collect(),
    ))
}

/// GEOPOS key [member ...]
pub fn geopos(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    let scores = ctx.db().zmscore(&args[1], &args[2..])?;
    Ok(Reply::Array(
        scores
            .into_iter()
            .map(|score| score.map_or(Reply::NullArray, |s| coordinates(geohash::decode_score(s))))
            .collect(),
    ))
}

fn coordinates((longitude, latitude): (f64, f64)) -> Reply {
    Reply::Array(vec![
        Reply::PrintedDouble(format_human(longitude)),
        Reply::PrintedDouble(format_human(latitude)),
    ])
}

/// Which of the six search commands runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS and GEORADIUS_RO: around a longitude and latitude.
    AroundPosition {
        store: bool,
    },
    /// GEORADIUSBYMEMBER and its `_RO` form.
    AroundMember {
        store: bool,
    },
    Search,
    SearchStore,
}

/// Where a search stores what it finds.
struct Store<'k> {
    key: &'k Bytes,
    by_distance: bool,
}

/// The replies' extra fields.
#[derive(Default)]
struct With {
    distance: bool,
    hash: bool,
    coordinates: bool,
}

pub fn georadius(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    search(ctx, args, Variant::AroundPosition { store: true })
}

pub fn georadius_ro(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    search(ctx, args, Variant::AroundPosition { store: false })
}

pub fn georadiusbymember(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    search(ctx, args, Variant::AroundMember { store: true })
}

pub fn georadiusbymember_ro(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    search(ctx, args, Variant::AroundMember { store: false })
}

pub fn geosearch(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    search(ctx, args, Variant::Search)
}

pub fn geosearchstore(ctx: &mut Context<'_>, args: &[Bytes]) -> Result<Reply, Error> {
    search(ctx, args, Variant::SearchStore)
}

/// The center of a search around a member, or the error Redis gives when it has none. Redis
/// finds it in the set it looked up once; the search's own lookup (its `zcard`) counts.
fn member_position(ctx: &Context<'_>, key: &[u8], member: &Bytes) -> Result<(f64, f64), Error> {
    ctx.db()
        .uncounted()
        .zscore(key, member)?
        .map(geohash::decode_score)
        .ok_or_else(|| Error::msg("could not decode requested zset member"))
}

/// Redis's `georadiusGeneric`: the arguments are checked in its order, so the same mistake
/// gets the same error.
fn search(ctx: &mut Context<'_>, args: &[Bytes], variant: Variant) -> Result<Reply, Error> {
    let src = match variant {
        Variant::SearchStore => &args[2],
        _ => &args[1],
    };
    // WRONGTYPE comes before any argument's error. This is the search's lookup of `src`, as
    // Redis counts it; the reads below do not count again.
    let exists = ctx.db().zcard(src)? > 0;
    let mut center = None;
    let mut size = None;
    let mut conversion = 1.0;
    let mut store = None;
    let options_at = match variant {
        Variant::AroundPosition { .. } => {
            center = Some(position(&args[2..4])?);
            let (r, c) = radius(&args[4..6])?;
            (size, conversion) = (Some(ShapeSize::Radius(r)), c);
            6
        }
        Variant::AroundMember { .. } if !exists => 5,
        Variant::AroundMember { .. } => {
            center = Some(member_position(ctx, src, &args[2])?);
            let (r, c) = radius(&args[3..5])?;
            (size, conversion) = (Some(ShapeSize::Radius(r)), c);
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => {
            store = Some(Store {
                key: &args[1],
                by_distance: false,
            });
            3
        }
    };
    let stores_by_option = matches!(
        variant,
        Variant::AroundPosition { store: true } | Variant::AroundMember { store: true }
    );
    let searches = matches!(variant, Variant::Search | Variant::SearchStore);
    let (mut with, mut order, mut any, mut count) = (With::default(), Order::Unsorted, false, 0);
    let (mut from_member, mut from_position, mut by_radius, mut by_box) =
        (false, false, false, false);
    let options = &args[options_at..];
    let mut i = 0;
    while i < options.len() {
        let arg = &options[i];
        let left = options.len() - i - 1;
        if is(arg, "withdist") {
            with.distance = true;
        } else if is(arg, "withhash") {
            with.hash = true;
        } else if is(arg, "withcoord") {
            with.coordinates = true;
        } else if is(arg, "any") {
            any = true;
        } else if is(arg, "asc") {
            order = Order::Nearest;
        } else if is(arg, "desc") {
            order = Order::Farthest;
        } else if is(arg, "count") && left >= 1 {
            let n = int(&options[i + 1])?;
            if n <= 0 {
                return Err(Error::msg("COUNT must be > 0"));
            }
            count = n as u64;
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && left >= 1 && stores_by_option {
            store = Some(Store {
                key: &options[i + 1],
                by_distance: is(arg, "storedist"),
            });
            i += 1;
        } else if is(arg, "storedist") && variant == Variant::SearchStore {
            if let Some(store) = &mut store {
                store.by_distance = true;
            }
        } else if is(arg, "frommember") && left >= 1 && searches && !from_position {
            if exists {
                center = Some(member_position(ctx, src, &options[i + 1])?);
            }
            from_member = true;
            i += 1;
        } else if is(arg, "fromlonlat") && left >= 2 && searches && !from_member {
            center = Some(position(&options[i + 1..i + 3])?);
            from_position = true;
            i += 2;
        } else if is(arg, "byradius") && left >= 2 && searches && !by_box {
            let (r, c) = radius(&options[i + 1..i + 3])?;
            (size, conversion) = (Some(ShapeSize::Radius(r)), c);
            by_radius = true;
            i += 2;
        } else if is(arg, "bybox") && left >= 3 && searches && !by_radius {
            let (width, height, c) = box_size(&options[i + 1..i + 4])?;
            (size, conversion) = (Some(ShapeSize::Box { width, height }), c);
            by_box = true;
            i += 3;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    if store.is_some() && (with.distance || with.hash || with.coordinates) {
        return Err(Error::msg(format!(
            "{} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if variant == Variant::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    if searches && !(from_member || from_position) {
        return Err(Error::msg(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if searches && !(by_radius || by_box) {
        return Err(Error::msg(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(Error::msg("the ANY argument requires COUNT argument"));
    }
    let (Some((longitude, latitude)), Some(size), true) = (center, size, exists) else {
        // No such key: a store deletes its destination.
        return Ok(match store {
            Some(store) => {
                ctx.db().delete(std::slice::from_ref(store.key))?;
                Reply::Integer(0)
            }
            None => Reply::Array(Vec::new()),
        });
    };
    let search = GeoSearch {
        shape: Shape {
            longitude,
            latitude,
            conversion,
            size,
        },
        order,
        count,
        any,
    };
    if let Some(store) = store {
        let stored =
            ctx.db()
                .uncounted()
                .geo_search_store(store.key, src, &search, store.by_distance)?;
        return Ok(Reply::Integer(stored));
    }
    let points = ctx
        .db()
        .uncounted()
        .geo_search(src, &search)?
        .unwrap_or_default();
    Ok(Reply::Array(
        points
            .into_iter()
            .map(|point| point_reply(point, &with, conversion))
            .collect(),
    ))
}

fn point_reply(point: GeoPoint, with: &With, conversion: f64) -> Reply {
    if !(with.distance || with.hash || with.coordinates) {
        return Reply::Bulk(point.member);
    }
    let mut fields = vec![Reply::Bulk(point.member)];
    if with.distance {
        fields.push(Reply::bulk(distance_text(point.distance / conversion)));
    }
    if with.hash {
        fields.push(Reply::Integer(point.score as i64));
    }
    if with.coordinates {
        fields.push(coordinates((point.longitude, point.latitude)));
    }
    Reply::Array(fields)
}

#[cfg(test)]
mod tests {
    use super::distance_text;

    #[test]
    fn distances_print_as_redis_prints_them() {
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(166274.15156960033), "166274.1516");
        assert_eq!(distance_text(1.23456), "1.2346");
        assert_eq!(distance_text(0.00004), "0.0000");
        assert_eq!(distance_text(0.7750), "0.7750");
        assert_eq!(distance_text(12.0), "12.0000");
    }
}
