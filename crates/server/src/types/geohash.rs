//! Redis's geohash, ported from its `geohash.c` and `geohash_helper.c` operation for operation
//! (same constants, same order of floating-point steps), so scores, distances, search areas and
//! the points a search finds are Redis's to the last bit.
//!
//! A position is a 52-bit score: 26 bits of latitude in -85.05112878..85.05112878 interleaved
//! with 26 bits of longitude in -180..180 (the Web Mercator limits; a pole has no position).

/// Bits of precision per coordinate: 26 × 2 = 52, what a double holds exactly.
const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;

/// Redis's `D_R`: degrees to radians.
const D_R: f64 = std::f64::consts::PI / 180.0;
/// The quadratic mean radius of the WGS-84 ellipsoid, which Redis's distances use.
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

fn deg_rad(angle: f64) -> f64 {
    angle * D_R
}

fn rad_deg(angle: f64) -> f64 {
    angle / D_R
}

/// A cell: the top `2 * step` bits of a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashBits {
    bits: u64,
    step: u8,
}

#[derive(Debug, Clone, Copy)]
struct Range {
    min: f64,
    max: f64,
}

const WGS84_LONG: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
const WGS84_LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// The rectangle of a cell.
#[derive(Debug, Clone, Copy)]
struct Area {
    longitude: Range,
    latitude: Range,
}

/// What a search looks in: a circle or a box around a point, in some unit.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub longitude: f64,
    pub latitude: f64,
    /// Meters per unit of the sizes below.
    pub conversion: f64,
    pub size: ShapeSize,
}

#[derive(Debug, Clone, Copy)]
pub enum ShapeSize {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// The cells a search scans, in the order Redis scans them: the center's cell, then north,
/// south, east, west, north-east, north-west, south-east, south-west; `None` for a neighbor
/// that lies wholly outside the shape's bounding box.
pub struct SearchCells(pub [Option<HashBits>; 9]);

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (xlo as u64, ylo as u64);
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// C's conversion of a double to `uint32_t` as x86-64 code does it (truncation); the offsets
/// converted here lie in 0..2^26.
fn to_u32(value: f64) -> u32 {
    value as u32
}

fn encode(
    long_range: Range,
    lat_range: Range,
    longitude: f64,
    latitude: f64,
    step: u8,
) -> Option<HashBits> {
    if !(1..=32).contains(&step)
        || !(LONG_MIN..=LONG_MAX).contains(&longitude)
        || !(LAT_MIN..=LAT_MAX).contains(&latitude)
        || latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let mut lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (longitude - long_range.min) / (long_range.max - long_range.min);
    lat_offset *= (1u64 << step) as f64;
    long_offset *= (1u64 << step) as f64;
    Some(HashBits {
        bits: interleave64(to_u32(lat_offset), to_u32(long_offset)),
        step,
    })
}

fn decode(long_range: Range, lat_range: Range, hash: HashBits) -> Area {
    let step = hash.step;
    let separated = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = separated as u32;
    let ilono = (separated >> 32) as u32;
    let cells = (1u64 << step) as f64;
    Area {
        latitude: Range {
            min: lat_range.min + (ilato as f64 * 1.0 / cells) * lat_scale,
            // C adds in `uint32_t`: a score out of range wraps.
            max: lat_range.min + (ilato.wrapping_add(1) as f64 * 1.0 / cells) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (ilono as f64 * 1.0 / cells) * long_scale,
            max: long_range.min + (ilono.wrapping_add(1) as f64 * 1.0 / cells) * long_scale,
        },
    }
}

/// The center of a cell, kept within the limits.
fn center(area: &Area) -> (f64, f64) {
    let longitude = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let latitude = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (longitude, latitude)
}

fn align52(hash: HashBits) -> u64 {
    hash.bits << (52 - hash.step as u32 * 2)
}

/// The score of a position (GEOADD), or `None` outside the limits.
pub fn encode_position(longitude: f64, latitude: f64) -> Option<f64> {
    encode(WGS84_LONG, WGS84_LAT, longitude, latitude, STEP_MAX).map(|h| align52(h) as f64)
}

/// Whether a longitude and latitude lie within the limits (GEOADD and FROMLONLAT refuse
/// others).
pub fn valid_position(longitude: f64, latitude: f64) -> bool {
    (LONG_MIN..=LONG_MAX).contains(&longitude) && (LAT_MIN..=LAT_MAX).contains(&latitude)
}

/// C's `(uint64_t)score` as gcc compiles it for x86-64, which Redis decodes any score with:
/// a negative score wraps around, and one at or above 2^64 (or infinite) becomes 0.
fn c_to_u64(score: f64) -> u64 {
    const TWO_63: f64 = 9223372036854775808.0;
    // `cvttsd2si`: the "integer indefinite" value for anything out of range.
    let truncate = |x: f64| {
        if x.is_nan() || !(-TWO_63..TWO_63).contains(&x) {
            i64::MIN
        } else {
            x as i64
        }
    };
    if score < TWO_63 {
        truncate(score) as u64
    } else {
        (truncate(score - TWO_63) as u64) ^ (1 << 63)
    }
}

/// The position a score stands for: the center of its cell (GEOPOS; any score decodes).
pub fn decode_score(score: f64) -> (f64, f64) {
    let hash = HashBits {
        bits: c_to_u64(score),
        step: STEP_MAX,
    };
    center(&decode(WGS84_LONG, WGS84_LAT, hash))
}

/// The standard 11-character geohash of a score's position (GEOHASH): Redis decodes it and
/// encodes it again over latitudes -90..90, as the standard's are.
pub fn standard_geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (longitude, latitude) = decode_score(score);
    let bits = encode(
        WGS84_LONG,
        Range {
            min: -90.0,
            max: 90.0,
        },
        longitude,
        latitude,
        STEP_MAX,
    )
    .map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    // 52 bits make ten characters; the eleventh is a zero, as Redis has always printed it.
    for (i, c) in out.iter_mut().take(10).enumerate() {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

fn latitude_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The great-circle distance in meters (haversine), as Redis computes it.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return latitude_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

impl Shape {
    /// Where the point of a score lies and how far it is from the center, in meters, if it
    /// lies within the shape (Redis's `geoWithinShape`).
    pub fn contains(&self, score: f64) -> Option<(f64, f64, f64)> {
        let (longitude, latitude) = decode_score(score);
        let (x1, y1) = (self.longitude, self.latitude);
        match self.size {
            ShapeSize::Radius(radius) => {
                let d = distance(x1, y1, longitude, latitude);
                (d <= radius * self.conversion).then_some((longitude, latitude, d))
            }
            ShapeSize::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                if latitude_distance(latitude, y1) > height_m / 2.0
                    || distance(longitude, latitude, x1, latitude) > width_m / 2.0
                {
                    return None;
                }
                Some((longitude, latitude, distance(x1, y1, longitude, latitude)))
            }
        }
    }

    /// Min longitude, min latitude, max longitude, max latitude of the area searched.
    fn bounding_box(&self) -> [f64; 4] {
        let (longitude, latitude) = (self.longitude, self.latitude);
        let (height, width) = match self.size {
            ShapeSize::Radius(r) => (self.conversion * r, self.conversion * r),
            ShapeSize::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
        // The box is widest on its side nearer the equator.
        let long_delta = if latitude < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            longitude - long_delta,
            latitude - lat_delta,
            longitude + long_delta,
            latitude + lat_delta,
        ]
    }

    /// The cells whose points a search checks (Redis's `geohashCalculateAreasByShapeWGS84`).
    pub fn search_cells(&self) -> SearchCells {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius_meters = self.conversion
            * match self.size {
                ShapeSize::Radius(r) => r,
                ShapeSize::Box { width, height } => {
                    ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
                }
            };
        let mut steps = estimate_steps(radius_meters, self.latitude);
        let cell_at = |steps| {
            let hash = encode(WGS84_LONG, WGS84_LAT, self.longitude, self.latitude, steps)
                .unwrap_or(HashBits { bits: 0, step: 0 });
            (hash, neighbors(hash), decode(WGS84_LONG, WGS84_LAT, hash))
        };
        let (mut hash, mut around, mut area) = cell_at(steps);
        // A step too fine for the area near its limits takes one coarser.
        let [north, south, east, west, ..] = around.map(|n| decode(WGS84_LONG, WGS84_LAT, n));
        let decrease = north.latitude.max < max_lat
            || south.latitude.min > min_lat
            || east.longitude.max < max_lon
            || west.longitude.min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            (hash, around, area) = cell_at(steps);
        }
        let mut cells = [Some(hash), None, None, None, None, None, None, None, None];
        for (cell, neighbor) in cells[1..].iter_mut().zip(around) {
            *cell = Some(neighbor);
        }
        if steps >= 2 {
            // Indexes into `cells`: 1 north, 2 south, 3 east, 4 west, 5 north-east,
            // 6 north-west, 7 south-east, 8 south-west.
            let mut drop = |sides: [usize; 3]| sides.iter().for_each(|&i| cells[i] = None);
            if area.latitude.min < min_lat {
                drop([2, 8, 7]);
            }
            if area.latitude.max > max_lat {
                drop([1, 5, 6]);
            }
            if area.longitude.min < min_lon {
                drop([4, 8, 6]);
            }
            if area.longitude.max > max_lon {
                drop([3, 7, 5]);
            }
        }
        SearchCells(cells)
    }
}

/// The step whose cells suit a search of this radius (Redis's `geohashEstimateStepsByRadius`).
fn estimate_steps(mut range_meters: f64, latitude: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    // Cells narrow towards the poles.
    if !(-66.0..=66.0).contains(&latitude) {
        step -= 1;
        if !(-80.0..=80.0).contains(&latitude) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> (64 - hash.step as u32 * 2);
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> (64 - hash.step as u32 * 2);
    hash.bits = x | y;
}

/// North, south, east, west, north-east, north-west, south-east, south-west.
fn neighbors(hash: HashBits) -> [HashBits; 8] {
    [
        (0, 1),
        (0, -1),
        (1, 0),
        (-1, 0),
        (1, 1),
        (-1, 1),
        (1, -1),
        (-1, -1),
    ]
    .map(|(dx, dy)| {
        let mut cell = hash;
        if cell.step > 0 {
            move_x(&mut cell, dx);
            move_y(&mut cell, dy);
        }
        cell
    })
}

impl HashBits {
    /// The scores of the points in this cell: from the first (inclusive) to the second
    /// (exclusive).
    pub fn score_range(self) -> (f64, f64) {
        let next = HashBits {
            bits: self.bits + 1,
            step: self.step,
        };
        (align52(self) as f64, align52(next) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_redis_scores() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" 15.087269 37.502669 "Catania" stores
        // these scores in Redis.
        assert_eq!(
            encode_position(13.361389, 38.115556),
            Some(3479099956230698.0)
        );
        assert_eq!(
            encode_position(15.087269, 37.502669),
            Some(3479447370796909.0)
        );
        assert_eq!(encode_position(181.0, 0.0), None);
        assert_eq!(encode_position(0.0, 85.06), None);
    }

    #[test]
    fn positions_decode_to_their_cell_centers() {
        let (lon, lat) = decode_score(3479099956230698.0);
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
    }

    #[test]
    fn distances_and_geohashes_are_redis_ones() {
        let (a, b) = (
            decode_score(3479099956230698.0),
            decode_score(3479447370796909.0),
        );
        assert_eq!(
            format!("{:.4}", distance(a.0, a.1, b.0, b.1)),
            "166274.1516"
        );
        assert_eq!(&standard_geohash(3479099956230698.0), b"sqc8b49rny0");
        assert_eq!(&standard_geohash(3479447370796909.0), b"sqdtr74hyu0");
    }

    #[test]
    fn out_of_range_scores_decode_as_redis_decodes_them() {
        assert_eq!(c_to_u64(-1.0), u64::MAX);
        assert_eq!(c_to_u64(f64::INFINITY), 0);
        assert_eq!(c_to_u64(f64::NEG_INFINITY), 1 << 63);
        let (lon, lat) = decode_score(-1.0);
        assert!(valid_position(lon, lat));
    }

    #[test]
    fn a_wide_search_drops_no_cell_it_needs() {
        let shape = Shape {
            longitude: 15.0,
            latitude: 37.0,
            conversion: 1000.0,
            size: ShapeSize::Radius(200.0),
        };
        let cells = shape.search_cells();
        let palermo = 3479099956230698.0;
        assert!(cells.0.iter().flatten().any(|cell| {
            let (min, max) = cell.score_range();
            (min..max).contains(&palermo)
        }));
        assert!(shape.contains(palermo).is_some());
    }
}
