//! Lists: elements at consecutive positions `key|version|position:u64`, between a head and a
//! tail kept in the metadata. Pushes and pops at either end touch one element and the
//! metadata: O(1) whatever the length; LINDEX and LSET are point reads and writes; LRANGE
//! reads only the positions it returns. A small list keeps the same position-keyed elements
//! packed in its metadata after the head and tail (`packed_elements`).

use bytes::Bytes;
use shale_storage::keys::list_suffix;
use shale_storage::metadata::KeyKind;
use shale_storage::{Cf, ScanDirection};

use super::collection::{Collection, CollectionWrite, ScanBuffer};
use super::{index_window as window, Db};
use crate::error::Error;

/// Where a new list starts, so it can grow a long way in both directions.
const MIDDLE: u64 = 1 << 63;
/// An LRANGE reserves room for at most this many elements up front.
const RESERVED_ITEMS: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// LPOS options.
#[derive(Debug, Clone, Copy)]
pub struct PosOptions {
    /// 1-based match to start from; negative searches from the tail.
    pub rank: i64,
    /// Matches to return; 0 means all.
    pub count: u64,
    /// Elements to compare at most; 0 means all.
    pub maxlen: u64,
}

fn bounds(extra: &[u8]) -> (u64, u64) {
    let read = |range: std::ops::Range<usize>| {
        extra
            .get(range)
            .and_then(|b| b.try_into().ok())
            .map_or(MIDDLE, u64::from_be_bytes)
    };
    (read(0..8), read(8..16))
}

fn encode_bounds(head: u64, tail: u64) -> Bytes {
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(&head.to_be_bytes());
    out.extend_from_slice(&tail.to_be_bytes());
    Bytes::from(out)
}

/// A list opened for writing: its collection plus head and tail.
struct ListWrite<'a> {
    inner: CollectionWrite<'a>,
    head: u64,
    tail: u64,
}

impl<'a> ListWrite<'a> {
    fn push(&mut self, end: End, value: &[u8]) {
        let position = match end {
            End::Left => {
                self.head -= 1;
                self.head
            }
            End::Right => {
                self.tail += 1;
                self.tail - 1
            }
        };
        self.inner
            .put(Cf::Data, &list_suffix(position), value.to_vec());
    }

    /// Removes up to `count` elements from one end, reading them first.
    fn pop(&mut self, end: End, count: u64) -> Result<Vec<Bytes>, Error> {
        let count = count.min(self.tail - self.head);
        if count == 0 {
            return Ok(Vec::new());
        }
        let (from, to) = match end {
            End::Left => (self.head, self.head + count),
            End::Right => (self.tail - count, self.tail),
        };
        // Positions between head and tail all hold elements: point reads, no iterator.
        let positions: Vec<[u8; 8]> = match end {
            End::Left => (from..to).map(list_suffix).collect(),
            End::Right => (from..to).rev().map(list_suffix).collect(),
        };
        let subs: Vec<&[u8]> = positions.iter().map(|p| p.as_slice()).collect();
        let values: Vec<Bytes> = self
            .inner
            .get_many(Cf::Data, &subs)?
            .into_iter()
            .map(|v| Bytes::from(v.unwrap_or_default()))
            .collect();
        for position in from..to {
            self.inner.delete(Cf::Data, &list_suffix(position));
        }
        match end {
            End::Left => self.head += count,
            End::Right => self.tail -= count,
        }
        Ok(values)
    }

    fn finish(mut self) -> CollectionWrite<'a> {
        self.inner.size = self.tail - self.head;
        self.inner.extra = encode_bounds(self.head, self.tail);
        self.inner
    }
}

impl<'a> Db<'a> {
    /// Replaces whatever `dst` holds with a list of `items` (SORT ... STORE); no items delete
    /// it. The caller holds the key's lock.
    pub(crate) fn store_list(&self, dst: &'a [u8], items: &[Bytes]) -> Result<(), Error> {
        self.replace_with_collection(dst, KeyKind::List, |write| {
            for (position, item) in (MIDDLE..).zip(items) {
                write.put(Cf::Data, &list_suffix(position), item.to_vec());
            }
            write.size = items.len() as u64;
            write.extra = encode_bounds(MIDDLE, MIDDLE + items.len() as u64);
        })
    }

    fn list_of(&self, key: &[u8]) -> Result<Option<Collection>, Error> {
        self.collection(key, KeyKind::List)
    }

    fn open_list(&self, key: &'a [u8]) -> Result<ListWrite<'a>, Error> {
        let inner = self.open_for_write(key, KeyKind::List)?;
        let (head, tail) = if inner.existed {
            bounds(&inner.extra)
        } else {
            (MIDDLE, MIDDLE)
        };
        Ok(ListWrite { inner, head, tail })
    }

    /// LPUSH/RPUSH (and the X forms with `only_if_exists`): returns the new length.
    pub fn push(
        &self,
        key: &'a [u8],
        end: End,
        values: &[Bytes],
        only_if_exists: bool,
    ) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key)?;
        if only_if_exists && !list.inner.existed {
            return Ok(0);
        }
        for value in values {
            list.push(end, value);
        }
        let len = (list.tail - list.head) as i64;
        list.finish().commit()?;
        Ok(len)
    }

    /// LPOP/RPOP: removes up to `count` elements from one end.
    pub fn pop(&self, key: &'a [u8], end: End, count: u64) -> Result<Option<Vec<Bytes>>, Error> {
        let _guard = self.lock(&[key])?;
        self.pop_locked(key, end, count)
    }

    /// LMPOP: pops from the first of `keys` that holds a list.
    pub fn lmpop(
        &self,
        keys: &'a [Bytes],
        end: End,
        count: u64,
    ) -> Result<Option<(Bytes, Vec<Bytes>)>, Error> {
        let _guard = self.lock(keys)?;
        for key in keys {
            if let Some(values) = self.pop_locked(key, end, count)? {
                return Ok(Some((key.clone(), values)));
            }
        }
        Ok(None)
    }

    fn pop_locked(&self, key: &'a [u8], end: End, count: u64) -> Result<Option<Vec<Bytes>>, Error> {
        let mut list = self.open_list(key)?;
        if !list.inner.existed {
            return Ok(None);
        }
        let values = list.pop(end, count)?;
        list.finish().commit()?;
        Ok(Some(values))
    }

    pub fn llen(&self, key: &[u8]) -> Result<i64, Error> {
        Ok(self.list_of(key)?.map_or(0, |l| l.size as i64))
    }

    pub(crate) fn lrange(&self, key: &[u8], start: i64, stop: i64) -> Result<ScanBuffer, Error> {
        let Some(list) = self.list_of(key)? else {
            return Ok(ScanBuffer::default());
        };
        let Some((first, last)) = window(start, stop, list.size) else {
            return Ok(ScanBuffer::default());
        };
        let (head, _) = bounds(&list.extra);
        let mut read = ScanBuffer::for_items((last - first + 1).min(RESERVED_ITEMS) as usize);
        let (from, to) = (list_suffix(head + first), list_suffix(head + last + 1));
        self.scan_elements(
            Cf::Data,
            key,
            &list,
            (&from, Some(&to)),
            ScanDirection::Forward,
            &mut |_, v| {
                read.push(v);
                true
            },
        )?;
        Ok(read)
    }

    pub fn lindex(&self, key: &[u8], index: i64) -> Result<Option<Bytes>, Error> {
        let Some(list) = self.list_of(key)? else {
            return Ok(None);
        };
        let Some((position, _)) = window(index, index, list.size) else {
            return Ok(None);
        };
        let (head, _) = bounds(&list.extra);
        Ok(self
            .get_element(Cf::Data, key, &list, &list_suffix(head + position))?
            .map(Bytes::from))
    }

    pub fn lset(&self, key: &'a [u8], index: i64, value: &[u8]) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key)?;
        if !list.inner.existed {
            return Err(Error::NoSuchKey);
        }
        let Some((position, _)) = window(index, index, list.tail - list.head) else {
            return Err(Error::msg("index out of range"));
        };
        let at = list.head + position;
        list.inner.put(Cf::Data, &list_suffix(at), value.to_vec());
        list.finish().commit()
    }

    /// All elements with their positions.
    fn list_elements(&self, key: &[u8], list: &Collection) -> Result<Vec<(u64, Bytes)>, Error> {
        Ok(self
            .all_elements(Cf::Data, key, list)?
            .into_iter()
            .map(|(sub, v)| (sub.as_ref().try_into().map_or(0, u64::from_be_bytes), v))
            .collect())
    }

    /// Rewrites positions `[from, tail)` of `list` with `values`, so the list becomes
    /// `[head, from) ++ values`.
    fn rewrite_tail(list: &mut ListWrite<'_>, from: u64, values: &[Bytes]) {
        for position in from..list.tail {
            list.inner.delete(Cf::Data, &list_suffix(position));
        }
        list.tail = from;
        for value in values {
            list.push(End::Right, value);
        }
    }

    /// LINSERT: returns the new length, -1 if the pivot is missing, 0 if the key is.
    pub fn linsert(
        &self,
        key: &'a [u8],
        before: bool,
        pivot: &[u8],
        value: &Bytes,
    ) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key)?;
        if !list.inner.existed {
            return Ok(0);
        }
        let elements = self.list_elements(key, &list.inner.collection())?;
        let Some(index) = elements.iter().position(|(_, v)| v.as_ref() == pivot) else {
            return Ok(-1);
        };
        let at = if before { index } else { index + 1 };
        let mut rest: Vec<Bytes> = vec![value.clone()];
        rest.extend(elements[at..].iter().map(|(_, v)| v.clone()));
        let from = list.head + at as u64;
        Self::rewrite_tail(&mut list, from, &rest);
        let len = (list.tail - list.head) as i64;
        list.finish().commit()?;
        Ok(len)
    }

    /// LREM: removes up to |count| occurrences (all if 0; from the tail if negative).
    pub fn lrem(&self, key: &'a [u8], count: i64, value: &[u8]) -> Result<i64, Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key)?;
        if !list.inner.existed {
            return Ok(0);
        }
        let elements = self.list_elements(key, &list.inner.collection())?;
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs() as usize
        };
        let mut doomed = vec![false; elements.len()];
        let mut removed = 0;
        let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
            Box::new((0..elements.len()).rev())
        } else {
            Box::new(0..elements.len())
        };
        for i in order {
            if removed == limit {
                break;
            }
            if elements[i].1.as_ref() == value {
                doomed[i] = true;
                removed += 1;
            }
        }
        let Some(first) = doomed.iter().position(|&d| d) else {
            return Ok(0);
        };
        let rest: Vec<Bytes> = elements[first..]
            .iter()
            .zip(&doomed[first..])
            .filter(|(_, &d)| !d)
            .map(|((_, v), _)| v.clone())
            .collect();
        let from = list.head + first as u64;
        Self::rewrite_tail(&mut list, from, &rest);
        list.finish().commit()?;
        Ok(removed as i64)
    }

    /// LTRIM: keeps `[start, stop]`; the rest goes with range deletes.
    pub fn ltrim(&self, key: &'a [u8], start: i64, stop: i64) -> Result<(), Error> {
        let _guard = self.lock(&[key])?;
        let mut list = self.open_list(key)?;
        if !list.inner.existed {
            return Ok(());
        }
        let (head, tail) = (list.head, list.tail);
        let (new_head, new_tail) = match window(start, stop, tail - head) {
            Some((first, last)) => (head + first, head + last + 1),
            None => (head, head),
        };
        if new_head > head {
            list.inner
                .delete_range(Cf::Data, &list_suffix(head), &list_suffix(new_head));
        }
        if tail > new_tail {
            list.inner.delete_range(
                Cf::Data,
                &list_suffix(new_tail.max(new_head)),
                &list_suffix(tail),
            );
        }
        list.head = new_head;
        list.tail = new_tail.max(new_head);
        list.finish().commit()
    }

    /// LPOS: the indexes of matching elements.
    pub fn lpos(&self, key: &[u8], element: &[u8], options: PosOptions) -> Result<Vec<i64>, Error> {
        let Some(list) = self.list_of(key)? else {
            return Ok(Vec::new());
        };
        let (head, _) = bounds(&list.extra);
        let direction = if options.rank < 0 {
            ScanDirection::Reverse
        } else {
            ScanDirection::Forward
        };
        let mut skip = options.rank.unsigned_abs() - 1;
        let want = if options.count == 0 {
            u64::MAX
        } else {
            options.count
        };
        let budget = if options.maxlen == 0 {
            u64::MAX
        } else {
            options.maxlen
        };
        let (mut seen, mut out) = (0u64, Vec::new());
        self.scan_elements(
            Cf::Data,
            key,
            &list,
            (&[], None),
            direction,
            &mut |sub, value| {
                if seen == budget {
                    return false;
                }
                seen += 1;
                if value == element {
                    if skip > 0 {
                        skip -= 1;
                    } else {
                        let position = sub.try_into().map_or(0, u64::from_be_bytes);
                        out.push((position - head) as i64);
                        if out.len() as u64 == want {
                            return false;
                        }
                    }
                }
                true
            },
        )?;
        Ok(out)
    }

    /// LMOVE/RPOPLPUSH: pops from `src` and pushes to `dst` in one batch.
    pub fn lmove(
        &self,
        src: &'a [u8],
        dst: &'a [u8],
        from: End,
        to: End,
    ) -> Result<Option<Bytes>, Error> {
        let _guard = self.lock(&[src, dst])?;
        let mut source = self.open_list(src)?;
        if !source.inner.existed {
            return Ok(None);
        }
        // A wrong-typed destination must fail before anything moves.
        let target = if src == dst {
            None
        } else {
            Some(self.open_list(dst)?)
        };
        let Some(value) = source.pop(from, 1)?.pop() else {
            return Ok(None);
        };
        match target {
            None => {
                source.push(to, &value);
                source.finish().commit()?;
            }
            Some(mut target) => {
                let mut change = source.finish().stage()?;
                target.push(to, &value);
                change.append(target.finish().stage()?);
                self.write(change)?;
            }
        }
        Ok(Some(value))
    }
}
