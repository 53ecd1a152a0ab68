//! SORT and SORT_RO: the elements of a list, set or sorted set, ordered by their own values
//! or by the values of keys their names make (BY), with other keys' values in their place
//! (GET), as Redis 7.0's `sortCommandGeneric` orders and windows them.

use std::cmp::Ordering;

use bytes::Bytes;
use shale_storage::metadata::KeyKind;

use super::numbers::parse_sort_double;
use super::zset::{RangeBy, RangeSpec};
use crate::error::Error;
use crate::keyspace::Db;

/// What SORT was asked for, read from its arguments.
#[derive(Debug, Default, Clone)]
pub struct SortOptions {
    /// The last BY pattern.
    pub by: Option<Bytes>,
    /// A BY without `*` (`nosort`) came: the elements keep their stored order.
    pub keep_order: bool,
    /// LIMIT offset count.
    pub limit: Option<(i64, i64)>,
    /// GET patterns, `#` for the element itself.
    pub gets: Vec<Bytes>,
    pub desc: bool,
    pub alpha: bool,
    /// The result must not depend on a set's internal order (STORE, scripts): a set is
    /// sorted ALPHA even when BY asks for no sorting.
    pub deterministic: bool,
}

/// One element to sort and what it sorts by.
struct Entry {
    element: Bytes,
    /// The numeric value it sorts by (0 when a BY key is missing).
    score: f64,
    /// With ALPHA and BY, the value it sorts by; `None` when the BY key is missing.
    by_value: Option<Bytes>,
}

impl<'a> Db<'a> {
    /// The sorted elements (or, with GET, the looked-up values, `None` where a key is missing),
    /// in reply order.
    pub fn sort(&self, key: &[u8], options: &SortOptions) -> Result<Vec<Option<Bytes>>, Error> {
        let Some(kind) = self.key_type(key)? else {
            return Ok(Vec::new());
        };
        if kind == KeyKind::Set && options.keep_order && options.deterministic {
            let sorted = SortOptions {
                by: None,
                keep_order: false,
                alpha: true,
                ..options.clone()
            };
            return self.sorted(key, kind, &sorted);
        }
        self.sorted(key, kind, options)
    }

    /// SORT ... STORE: replaces `dst` with the reply as a list (missing values as empty
    /// strings); an empty result deletes it. Returns the list's length.
    pub fn sort_store(
        &self,
        key: &[u8],
        options: &SortOptions,
        dst: &'a [u8],
    ) -> Result<i64, Error> {
        let _guard = self.lock(&[key, dst])?;
        let items: Vec<Bytes> = self
            .sort(key, options)?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        self.store_list(dst, &items, 0)?;
        Ok(items.len() as i64)
    }

    fn sorted(
        &self,
        key: &[u8],
        kind: KeyKind,
        options: &SortOptions,
    ) -> Result<Vec<Option<Bytes>>, Error> {
        // The key's own lookup (its type) counted; reading its elements looks it up again.
        let this = self.uncounted();
        let mut elements = match kind {
            KeyKind::List => this.lrange(key, 0, -1)?.into_items().collect(),
            KeyKind::Set => this.smembers(key)?,
            KeyKind::ZSet => {
                let all = RangeSpec {
                    by: RangeBy::Rank(0, -1),
                    rev: false,
                    limit: None,
                };
                this.zrange(key, &all)?
                    .into_iter()
                    .map(|(member, _)| member)
                    .collect()
            }
            _ => return Err(Error::WrongType),
        };
        // Without sorting, lists and sorted sets keep their order, reversed by DESC; a set
        // keeps its own (here the members' byte order).
        if options.keep_order && options.desc && kind != KeyKind::Set {
            elements.reverse();
        }
        let (start, end) = window(options.limit, elements.len());
        let mut entries: Vec<Entry> = elements
            .into_iter()
            .map(|element| Entry {
                element,
                score: 0.0,
                by_value: None,
            })
            .collect();
        if !options.keep_order {
            self.load_sort_values(&mut entries, options)?;
            entries.sort_by(|a, b| compare(a, b, options));
        }
        let chosen = entries.get(start..end).unwrap_or_default();
        if options.gets.is_empty() {
            return Ok(chosen.iter().map(|e| Some(e.element.clone())).collect());
        }
        let mut out = Vec::with_capacity(chosen.len() * options.gets.len());
        for entry in chosen {
            for pattern in &options.gets {
                out.push(self.lookup_by_pattern(pattern, &entry.element)?);
            }
        }
        Ok(out)
    }

    /// What each entry sorts by: its own value, or that of the key BY names.
    fn load_sort_values(&self, entries: &mut [Entry], options: &SortOptions) -> Result<(), Error> {
        let mut unreadable = false;
        for entry in entries.iter_mut() {
            let value = match &options.by {
                Some(pattern) => match self.lookup_by_pattern(pattern, &entry.element)? {
                    Some(value) => value,
                    None => continue,
                },
                None => entry.element.clone(),
            };
            if options.alpha {
                if options.by.is_some() {
                    entry.by_value = Some(value);
                }
            } else {
                match parse_sort_double(&value) {
                    Some(score) => entry.score = score,
                    None => unreadable = true,
                }
            }
        }
        if unreadable {
            return Err(Error::msg(
                "One or more scores can't be converted into double",
            ));
        }
        Ok(())
    }

    /// The value a BY or GET pattern names for `element`: `#` is the element itself; the
    /// first `*` becomes the element, and a `->field` after it reads that field of a hash,
    /// otherwise the key must hold a string. A pattern without `*` names nothing.
    fn lookup_by_pattern(&self, pattern: &[u8], element: &[u8]) -> Result<Option<Bytes>, Error> {
        if pattern == b"#" {
            return Ok(Some(Bytes::copy_from_slice(element)));
        }
        let Some(star) = pattern.iter().position(|&b| b == b'*') else {
            return Ok(None);
        };
        let after = &pattern[star + 1..];
        let (suffix, field) = match after.windows(2).position(|w| w == b"->") {
            Some(arrow) if arrow + 2 < after.len() => (&after[..arrow], Some(&after[arrow + 2..])),
            _ => (after, None),
        };
        let key = [&pattern[..star], element, suffix].concat();
        // One lookup of the pattern's key counts, as Redis's `lookupKeyByPattern` makes one.
        let kind = self.key_type(&key)?;
        match (field, kind) {
            (Some(field), Some(KeyKind::Hash)) => self.uncounted().hget(&key, field),
            (None, Some(KeyKind::String)) => self.uncounted().get(&key),
            _ => Ok(None),
        }
    }
}

/// The entries SORT replies with, `[start, end)` of `len`, as Redis clamps LIMIT.
fn window(limit: Option<(i64, i64)>, len: usize) -> (usize, usize) {
    let len = len as i64;
    let (offset, count) = limit.unwrap_or((0, -1));
    let start = offset.max(0);
    let mut end = if count < 0 {
        len - 1
    } else {
        start.saturating_add(count) - 1
    };
    let start = if start >= len {
        end = len - 2;
        len - 1
    } else {
        start
    };
    end = end.min(len - 1);
    if end < start {
        return (0, 0);
    }
    (start as usize, end as usize + 1)
}

/// Redis's `sortCompare`: numbers, ties broken by the elements' bytes; ALPHA compares the
/// elements' bytes, or the BY values with missing ones first; DESC reverses the whole.
fn compare(a: &Entry, b: &Entry, options: &SortOptions) -> Ordering {
    let ascending = ascending(a, b, options);
    if options.desc {
        ascending.reverse()
    } else {
        ascending
    }
}

fn ascending(a: &Entry, b: &Entry, options: &SortOptions) -> Ordering {
    if !options.alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.element.cmp(&b.element));
    }
    if options.by.is_none() {
        return a.element.cmp(&b.element);
    }
    match (&a.by_value, &b.by_value) {
        (Some(x), Some(y)) => x.cmp(y),
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_windows_clamp_as_redis_does() {
        assert_eq!(window(None, 5), (0, 5));
        assert_eq!(window(Some((1, 2)), 5), (1, 3));
        assert_eq!(window(Some((-3, 2)), 5), (0, 2));
        assert_eq!(window(Some((3, -1)), 5), (3, 5));
        assert_eq!(window(Some((3, 100)), 5), (3, 5));
        assert_eq!(window(Some((7, 2)), 5), (0, 0));
        assert_eq!(window(Some((0, 0)), 5), (0, 0));
        assert_eq!(window(Some((0, i64::MAX)), 5), (0, 5));
        assert_eq!(window(None, 0), (0, 0));
    }
}
