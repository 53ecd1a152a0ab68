//! LCS: the longest common subsequence of two strings.
//!
//! Redis fills the whole dynamic-programming table and walks it back from the end; where two
//! subsequences are equally long, the walk's tie-breaking decides which one it reports and
//! which runs of matched bytes IDX lists. This module follows the same table and the same walk,
//! so its answers are Redis's byte for byte, not merely as long.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

use crate::error::Error;
use crate::keyspace::Db;

/// A run of consecutive matched bytes: inclusive `[start, end]` in each string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcsRun {
    pub a: (u32, u32),
    pub b: (u32, u32),
}

impl LcsRun {
    /// How many bytes the run matches (WITHMATCHLEN).
    pub fn matched(&self) -> u32 {
        self.a.1 - self.a.0 + 1
    }
}

/// What LCS found.
#[derive(Debug, PartialEq, Eq)]
pub struct Lcs {
    /// The length of the longest common subsequence.
    pub len: u32,
    /// The subsequence and its runs, last run first as Redis lists them; `None` when only the
    /// length was asked for.
    pub walk: Option<(Vec<u8>, Vec<LcsRun>)>,
}

/// The longest common subsequence of `a` and `b`. `table` holds a zeroed table of
/// `(a.len() + 1) * (b.len() + 1)` cells; `walk` asks for the subsequence and its runs besides
/// the length.
fn lcs_in(a: &[u8], b: &[u8], table: &mut [u32], walk: bool) -> Lcs {
    let width = b.len() + 1;
    let at = |i: usize, j: usize| i * width + j;
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[at(i, j)] = if a[i - 1] == b[j - 1] {
                table[at(i - 1, j - 1)] + 1
            } else {
                table[at(i - 1, j)].max(table[at(i, j - 1)])
            };
        }
    }
    let len = table[at(a.len(), b.len())];
    if !walk {
        return Lcs { len, walk: None };
    }

    let mut subsequence = vec![0u8; len as usize];
    let mut runs = Vec::new();
    let mut run: Option<LcsRun> = None;
    let (mut i, mut j, mut left) = (a.len(), b.len(), len as usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            subsequence[left - 1] = a[i - 1];
            let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
            match &mut run {
                None => {
                    run = Some(LcsRun {
                        a: (ai, ai),
                        b: (bj, bj),
                    })
                }
                // The match extends the run backwards when it sits right before it.
                Some(current) if current.a.0 == ai + 1 && current.b.0 == bj + 1 => {
                    current.a.0 = ai;
                    current.b.0 = bj;
                }
                Some(_) => emit = true,
            }
            if run.is_some_and(|r| r.a.0 == 0 || r.b.0 == 0) {
                emit = true;
            }
            left -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[at(i - 1, j)] > table[at(i, j - 1)] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit |= run.is_some();
        }
        if emit {
            runs.extend(run.take());
        }
    }
    Lcs {
        len,
        walk: Some((subsequence, runs)),
    }
}

/// The bytes of the table LCS needs for `a` and `b`, if they are countable.
fn table_bytes(a: &[u8], b: &[u8]) -> Option<usize> {
    (a.len() + 1)
        .checked_mul(b.len() + 1)?
        .checked_mul(std::mem::size_of::<u32>())
}

/// Table bytes reserved against the keyspace's budget until dropped.
struct Reservation<'k> {
    held: &'k AtomicUsize,
    bytes: usize,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl Db<'_> {
    /// LCS of `a` and `b`. Redis bounds one command's table by proto-max-bulk-len
    /// (`table_limit`) and runs one command at a time; here commands run on every worker at
    /// once, so the same bound holds for all tables together.
    pub fn lcs(&self, a: &[u8], b: &[u8], table_limit: usize, walk: bool) -> Result<Lcs, Error> {
        if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
            return Err(Error::msg("String too long for LCS"));
        }
        let bytes = table_bytes(a, b)
            .filter(|&bytes| bytes <= table_limit)
            .ok_or_else(|| {
                Error::msg(
                    "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
                )
            })?;
        let no_memory =
            || Error::msg("Insufficient memory, failed allocating transient memory for LCS");
        let held = &self.ks.lcs_tables;
        held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |total| {
            total
                .checked_add(bytes)
                .filter(|&total| total <= table_limit)
        })
        .map_err(|_| no_memory())?;
        let _reservation = Reservation { held, bytes };
        let cells = bytes / std::mem::size_of::<u32>();
        let mut table: Vec<u32> = Vec::new();
        table.try_reserve_exact(cells).map_err(|_| no_memory())?;
        table.resize(cells, 0);
        Ok(lcs_in(a, b, &mut table, walk))
    }

    /// The two strings LCS compares, a missing key reading as empty; `None` if either key
    /// holds another type (LCS has its own error for that, not WRONGTYPE).
    pub fn lcs_operands(&self, a: &[u8], b: &[u8]) -> Result<Option<(Bytes, Bytes)>, Error> {
        let read = |key: &[u8]| match self.get(key) {
            Ok(value) => Ok(Some(value.unwrap_or_default())),
            Err(Error::WrongType) => Ok(None),
            Err(err) => Err(err),
        };
        Ok(read(a)?.zip(read(b)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(a: &str, b: &str) -> (String, Vec<LcsRun>, u32) {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        let mut table = vec![0; (a.len() + 1) * (b.len() + 1)];
        let found = lcs_in(a, b, &mut table, true);
        let (subsequence, runs) = found.walk.unwrap();
        (String::from_utf8(subsequence).unwrap(), runs, found.len)
    }

    #[test]
    fn finds_redis_documented_example() {
        let (subsequence, runs, len) = full("ohmytext", "mynewtext");
        assert_eq!((subsequence.as_str(), len), ("mytext", 6));
        assert_eq!(
            runs,
            vec![
                LcsRun {
                    a: (4, 7),
                    b: (5, 8)
                },
                LcsRun {
                    a: (2, 3),
                    b: (0, 1)
                },
            ]
        );
    }

    #[test]
    fn empty_and_disjoint_strings_have_no_runs() {
        assert_eq!(full("", "abc"), (String::new(), vec![], 0));
        assert_eq!(full("abc", "xyz"), (String::new(), vec![], 0));
    }

    #[test]
    fn length_alone_skips_the_walk() {
        let mut table = vec![0; 9 * 10];
        let found = lcs_in(b"ohmytext", b"mynewtext", &mut table, false);
        assert_eq!(found, Lcs { len: 6, walk: None });
    }

    #[test]
    fn tables_are_sized_in_bytes() {
        assert_eq!(table_bytes(b"ab", b"ab"), Some(36));
        assert_eq!(table_bytes(b"", b""), Some(4));
    }
}
