//! Geo indexes: sorted sets whose scores are 52-bit geohashes (`geohash`). A search scans the
//! score index cell by cell, in Redis's order, so unsorted replies list the same points in the
//! same order as Redis's, and it orders and cuts them as Redis does (its partial quicksort
//! for COUNT included, which decides the order of points at equal distances).

use std::cmp::Ordering;

use bytes::Bytes;
use shale_storage::keys::score_bytes;
use shale_storage::{Cf, ScanDirection};

use super::geohash::Shape;
use super::zset::{floor_of, scored_from_index, ScoredMember};
use crate::error::Error;
use crate::keyspace::Db;

/// A point a search found.
#[derive(Debug, Clone)]
pub struct GeoPoint {
    pub member: Bytes,
    pub score: f64,
    pub longitude: f64,
    pub latitude: f64,
    /// From the search's center, in meters.
    pub distance: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Unsorted,
    Nearest,
    Farthest,
}

/// What GEOSEARCH and GEORADIUS ask for.
#[derive(Debug, Clone, Copy)]
pub struct GeoSearch {
    pub shape: Shape,
    pub order: Order,
    /// At most this many points (0: all), the nearest unless `any`.
    pub count: u64,
    /// Stop at the first `count` points found, wherever they are.
    pub any: bool,
}

impl GeoSearch {
    /// The order Redis applies: COUNT without ASC, DESC or ANY means the nearest.
    fn effective_order(&self) -> Order {
        if self.count != 0 && self.order == Order::Unsorted && !self.any {
            Order::Nearest
        } else {
            self.order
        }
    }
}

impl<'a> Db<'a> {
    /// The points of the sorted set at `key` that lie in the search's shape, ordered and
    /// counted as the search asks; `None` if there is no such key.
    pub fn geo_search(
        &self,
        key: &[u8],
        search: &GeoSearch,
    ) -> Result<Option<Vec<GeoPoint>>, Error> {
        let Some(zset) = self.zset_of(key)? else {
            return Ok(None);
        };
        let limit = if search.any { search.count } else { 0 };
        let mut found: Vec<GeoPoint> = Vec::new();
        let cells = search.shape.search_cells().0;
        let mut last = None;
        for cell in cells.into_iter().flatten() {
            // A huge radius makes neighbors coincide; Redis skips a cell equal to the last.
            if last == Some(cell) {
                continue;
            }
            if limit != 0 && found.len() as u64 >= limit {
                break;
            }
            last = Some(cell);
            let (min, max) = cell.score_range();
            let lower = score_bytes(min).max(floor_of(&zset.extra));
            let upper = score_bytes(max);
            self.scan_elements(
                Cf::Score,
                key,
                &zset,
                (&lower, Some(&upper)),
                ScanDirection::Forward,
                &mut |sub, _| {
                    let (member, score) = scored_from_index(sub);
                    if let Some((longitude, latitude, distance)) = search.shape.contains(score) {
                        found.push(GeoPoint {
                            member,
                            score,
                            longitude,
                            latitude,
                            distance,
                        });
                    }
                    limit == 0 || (found.len() as u64) < limit
                },
            )?;
        }
        let returned = match search.count {
            0 => found.len(),
            n => found.len().min(usize::try_from(n).unwrap_or(usize::MAX)),
        };
        let by_distance = |a: &GeoPoint, b: &GeoPoint| {
            a.distance
                .partial_cmp(&b.distance)
                .unwrap_or(Ordering::Equal)
        };
        match search.effective_order() {
            Order::Unsorted => {}
            order => {
                let compare = |a: &GeoPoint, b: &GeoPoint| match order {
                    Order::Farthest => by_distance(b, a),
                    _ => by_distance(a, b),
                };
                if returned == found.len() {
                    // glibc's qsort, which Redis calls, is a merge sort: stable.
                    found.sort_by(compare);
                } else if returned > 0 {
                    partial_sort(&mut found, &compare, 0, returned - 1);
                }
            }
        }
        found.truncate(returned);
        Ok(Some(found))
    }

    /// GEORADIUS ... STORE/STOREDIST and GEOSEARCHSTORE: stores the points found at `dst` as a
    /// sorted set, scored by position or (`by_distance`) by distance in the search's unit, and
    /// returns how many; a search that finds none deletes `dst`. `None` if `src` does not exist
    /// (`dst` is deleted then too).
    pub fn geo_search_store(
        &self,
        dst: &'a [u8],
        src: &[u8],
        search: &GeoSearch,
        by_distance: bool,
    ) -> Result<i64, Error> {
        let _guard = self.lock(&[src, dst])?;
        let points = self.geo_search(src, search)?.unwrap_or_default();
        let mut members: Vec<ScoredMember> = Vec::with_capacity(points.len());
        let mut seen = std::collections::HashSet::with_capacity(points.len());
        for point in points {
            let score = if by_distance {
                point.distance / search.shape.conversion
            } else {
                point.score
            };
            if seen.insert(point.member.clone()) {
                members.push((point.member, score));
            }
        }
        self.zstore(dst, &members, 0)
    }
}

/// Redis's `pqsort`: the quicksort of NetBSD's libc, which sorts only the partitions that
/// overlap positions `left..=right`. Ported step for step, since it decides where points at
/// equal distances end up.
fn partial_sort<T>(
    items: &mut [T],
    compare: &dyn Fn(&T, &T) -> Ordering,
    left: usize,
    right: usize,
) {
    let len = items.len();
    sort_partition(items, compare, 0, len, left, right);
}

/// `pqsort` of `items[start..start + len]`; `left` and `right` index `items`.
fn sort_partition<T>(
    items: &mut [T],
    compare: &dyn Fn(&T, &T) -> Ordering,
    start: usize,
    len: usize,
    left: usize,
    right: usize,
) {
    let lt = |items: &[T], a: usize, b: usize| compare(&items[a], &items[b]);
    let med3 = |items: &[T], a: usize, b: usize, c: usize| {
        if lt(items, a, b) == Ordering::Less {
            if lt(items, b, c) == Ordering::Less {
                b
            } else if lt(items, a, c) == Ordering::Less {
                c
            } else {
                a
            }
        } else if lt(items, b, c) == Ordering::Greater {
            b
        } else if lt(items, a, c) == Ordering::Less {
            a
        } else {
            c
        }
    };
    let vecswap = |items: &mut [T], a: usize, b: usize, n: usize| {
        for i in 0..n {
            items.swap(a + i, b + i);
        }
    };
    // Whether the partition `start..start + len` holds any position between left and right.
    let wanted = |start: usize, len: usize| {
        !((left < start && right < start) || (left >= start + len && right >= start + len))
    };
    let (mut a, mut n) = (start, len);
    loop {
        if n < 7 {
            for m in a + 1..a + n {
                let mut l = m;
                while l > a && lt(items, l - 1, l) == Ordering::Greater {
                    items.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let mut m = a + n / 2;
        if n > 7 {
            let mut l = a;
            let mut last = a + n - 1;
            if n > 40 {
                let d = n / 8;
                l = med3(items, l, l + d, l + 2 * d);
                m = med3(items, m - d, m, m + d);
                last = med3(items, last - 2 * d, last - d, last);
            }
            m = med3(items, l, m, last);
        }
        items.swap(a, m);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = lt(items, pb, a);
                if c == Ordering::Greater {
                    break;
                }
                if c == Ordering::Equal {
                    items.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = lt(items, pc, a);
                if c == Ordering::Less {
                    break;
                }
                if c == Ordering::Equal {
                    items.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            items.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let end = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(items, a, pb - r, r);
        let r = (pd - pc).min(end - pd - 1);
        vecswap(items, pb, end - r, r);
        let r = pb - pa;
        if r > 1 && wanted(a, r) {
            sort_partition(items, compare, a, r, left, right);
        }
        let r = pd - pc;
        if r > 1 {
            a = end - r;
            n = r;
            if wanted(a, n) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partial_sort_orders_the_wanted_positions() {
        for n in [0usize, 1, 6, 7, 8, 40, 41, 100, 1000] {
            for seed in 0..5u64 {
                let mut state = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(n as u64);
                let mut items: Vec<u64> = (0..n)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        (state >> 33) % 50
                    })
                    .collect();
                let mut sorted = items.clone();
                sorted.sort();
                let count = n / 3;
                if count == 0 {
                    continue;
                }
                partial_sort(&mut items, &|a: &u64, b: &u64| a.cmp(b), 0, count - 1);
                assert_eq!(items[..count], sorted[..count], "n {n} seed {seed}");
            }
        }
    }
}
