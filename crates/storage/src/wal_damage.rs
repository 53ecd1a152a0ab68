//! Finds a damaged record in the WAL files a database would replay, and whether intact
//! writes follow it.
//!
//! RocksDB's point-in-time recovery stops replaying at the first damaged record and says so
//! only in its info LOG: damage in the middle of a WAL would lose every write after it
//! without a word. So the database opens tolerating only an incomplete last record (what a
//! process killed mid-write leaves), and when that open reports corruption, this scan says
//! where: damage with nothing intact after it is a torn tail (a write cut short by a power
//! loss) and the database opens to the point before it; damage followed by intact records is
//! reported with the file's name and left for `shale-server repair`.
//!
//! The format is RocksDB's `db/log_format.h`: 32 KB blocks of records, each a 7-byte header
//! (masked CRC32C of the type and payload, length, type; 11 bytes with a log number for
//! recyclable types) and its payload; a block's last bytes too short for a header are zeros.

use std::path::{Path, PathBuf};

const BLOCK: usize = 32 << 10;
const HEADER: usize = 7;
const RECYCLABLE_HEADER: usize = 11;

/// The first damaged record of the WAL files of a database directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalDamage {
    pub file: PathBuf,
    /// Where the damaged record starts.
    pub offset: u64,
    /// Bytes of the WAL from the damage on: of this file and the WAL files after it.
    pub bytes_after: u64,
    /// Whether an intact record follows the damage (in a later block of the file or a later
    /// WAL file): replay stopping at the damage would lose writes.
    pub intact_after: bool,
}

/// The WAL files of `dir` (`<number>.log`), oldest first.
fn wal_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let number = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(number) = number {
            files.push((number, path));
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, path)| path).collect())
}

/// The first damaged record of `dir`'s WAL files, if any.
pub(crate) fn find(dir: &Path) -> std::io::Result<Option<WalDamage>> {
    let files = wal_files(dir)?;
    for (i, path) in files.iter().enumerate() {
        let bytes = std::fs::read(path)?;
        let Some(damage) = first_damage(&bytes) else {
            continue;
        };
        let mut intact_after = damage
            .resume
            .is_some_and(|at| writes_begin_from(&bytes, at))
            || writes_begin_from(&bytes, (damage.at / BLOCK + 1) * BLOCK);
        let mut bytes_after = (bytes.len() - damage.at) as u64;
        for later in &files[i + 1..] {
            let later_bytes = std::fs::read(later)?;
            bytes_after += later_bytes.len() as u64;
            intact_after = intact_after || writes_begin_from(&later_bytes, 0);
        }
        return Ok(Some(WalDamage {
            file: path.clone(),
            offset: damage.at as u64,
            bytes_after,
            intact_after,
        }));
    }
    Ok(None)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A whole record with a matching checksum.
    Intact,
    /// The file ends inside the record: a write cut short, not damage.
    Incomplete,
    /// Zeros where a header would be: the block's unwritten rest (preallocated space).
    Zeros,
    /// A checksum that does not match, or a length past the block's end.
    Damaged,
}

/// One record as its header describes it.
#[derive(Debug, Clone, Copy)]
struct Record {
    state: State,
    kind: u8,
    /// Header and payload, when the header's length fits the block.
    len: Option<usize>,
}

impl Record {
    /// Whether the record starts a write (a whole one, or its first fragment).
    fn begins_write(&self) -> bool {
        matches!(self.kind, 1 | 2 | 5 | 6)
    }

    fn ends_write(&self) -> bool {
        matches!(self.kind, 1 | 4 | 5 | 8)
    }
}

/// Reads the record at `at` (not in a block's trailer).
fn record_at(bytes: &[u8], at: usize) -> Record {
    let Some(header) = bytes.get(at..at + HEADER) else {
        return Record {
            state: State::Incomplete,
            kind: 0,
            len: None,
        };
    };
    let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
    let kind = header[6];
    let record = |state, len| Record { state, kind, len };
    if kind == 0 && length == 0 {
        return record(State::Zeros, None);
    }
    let header_len = if (5..=8).contains(&kind) || (kind >= 10 && kind & 1 == 1) {
        RECYCLABLE_HEADER
    } else {
        HEADER
    };
    if header_len + length > BLOCK - at % BLOCK {
        return record(State::Damaged, None);
    }
    let len = Some(header_len + length);
    match bytes.get(at + HEADER - 1..at + header_len + length) {
        None => record(State::Incomplete, len),
        Some(checked) if masked(crc32c(checked)) == stored => record(State::Intact, len),
        Some(_) => record(State::Damaged, len),
    }
}

/// The first damage of a WAL file: where it starts, and where the next record would start
/// if the damaged one's length can be believed.
struct Damage {
    at: usize,
    resume: Option<usize>,
}

/// The first damaged record of a WAL file, if one is. A write's fragments broken off by zeros
/// or by another write's start are damage too, at the write's first fragment, as RocksDB
/// reports them ("error in middle of record"); a file that ends inside a write is not.
fn first_damage(bytes: &[u8]) -> Option<Damage> {
    let mut at = 0;
    let mut open_write: Option<usize> = None;
    while at < bytes.len() {
        let left_in_block = BLOCK - at % BLOCK;
        if left_in_block < HEADER {
            at += left_in_block;
            continue;
        }
        let record = record_at(bytes, at);
        match record.state {
            State::Incomplete => return None,
            State::Damaged => {
                return Some(Damage {
                    at: open_write.unwrap_or(at),
                    resume: record.len.map(|len| at + len),
                })
            }
            State::Zeros => {
                if let Some(start) = open_write {
                    return Some(Damage {
                        at: start,
                        resume: None,
                    });
                }
                at += left_in_block;
            }
            State::Intact => {
                if record.begins_write() {
                    if let Some(start) = open_write {
                        return Some(Damage {
                            at: start,
                            resume: Some(at),
                        });
                    }
                    open_write = Some(at);
                }
                if record.ends_write() {
                    open_write = None;
                }
                at += record.len.unwrap_or(left_in_block);
            }
        }
    }
    None
}

/// Whether an intact record that starts a write lies at or after `from`: walked record by
/// record from `from`, and from the start of every later block.
fn writes_begin_from(bytes: &[u8], from: usize) -> bool {
    let walk = |mut at: usize| {
        let block_end = (at / BLOCK + 1) * BLOCK;
        while block_end - at >= HEADER {
            let record = record_at(bytes, at);
            if record.state != State::Intact {
                return false;
            }
            if record.begins_write() {
                return true;
            }
            match record.len {
                Some(len) => at += len,
                None => return false,
            }
        }
        false
    };
    walk(from)
        || (from / BLOCK + 1..)
            .map(|block| block * BLOCK)
            .take_while(|&start| start < bytes.len())
            .any(walk)
}

/// RocksDB stores a record's CRC rotated and offset, so that a CRC over bytes holding CRCs
/// does not degrade (`util/crc32c.h`).
fn masked(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// CRC-32C (Castagnoli), bytewise: this runs only after an open found corruption.
fn crc32c(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u32;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0x82f6_3b78
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    !bytes.iter().fold(!0u32, |crc, &b| {
        TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as RocksDB's log writer emits it (legacy format).
    fn record(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut checked = vec![kind];
        checked.extend_from_slice(payload);
        let mut out = masked(crc32c(&checked)).to_le_bytes().to_vec();
        out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        out.push(kind);
        out.extend_from_slice(payload);
        out
    }

    /// A log of full records of `size` bytes, padded at block ends as the writer pads them.
    fn log(records: usize, size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..records {
            let left = BLOCK - out.len() % BLOCK;
            if left < HEADER + size {
                out.resize(out.len() + left, 0);
            }
            out.extend(record(1, &vec![b'a' + (i % 26) as u8; size]));
        }
        out
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    fn damage_in(bytes: &[u8]) -> Option<(usize, bool)> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("000001.log"), bytes).unwrap();
        find(dir.path())
            .unwrap()
            .map(|d| (d.offset as usize, d.intact_after))
    }

    #[test]
    fn an_intact_log_and_an_incomplete_tail_are_not_damage() {
        let whole = log(100, 1000);
        assert!(first_damage(&whole).is_none());
        assert!(first_damage(&whole[..whole.len() - 10]).is_none());
        let mut preallocated = log(3, 100);
        preallocated.resize(BLOCK * 2, 0);
        assert!(first_damage(&preallocated).is_none());
        // A write whose last fragments never reached the file.
        let mut fragments = log(2, 100);
        fragments.extend(record(2, &[b'x'; 100]));
        fragments.extend(record(3, &[b'y'; 100]));
        assert!(first_damage(&fragments).is_none());
    }

    #[test]
    fn damage_is_found_and_told_apart_from_a_torn_tail() {
        let mut middle = log(100, 1000);
        middle[5000] ^= 0x40;
        let (at, intact_after) = damage_in(&middle).expect("damage found");
        assert!(at <= 5000 && 5000 < at + 1007, "{at}");
        assert!(intact_after);

        // Damage in the last block with whole writes after it in that block.
        let mut last_block = log(100, 1000);
        let at = last_block.len() - 3 * 1007 + 20;
        last_block[at] ^= 0x40;
        assert!(damage_in(&last_block).is_some_and(|(_, intact_after)| intact_after));

        let mut tail = log(100, 1000);
        let last = tail.len() - 3;
        tail[last] ^= 0x40;
        assert!(damage_in(&tail).is_some_and(|(_, intact_after)| !intact_after));
    }

    #[test]
    fn a_write_broken_off_by_zeros_is_damage_at_its_first_fragment() {
        let mut broken = log(2, 100);
        let first = broken.len();
        broken.extend(record(2, &[b'x'; 100]));
        broken.resize(BLOCK, 0);
        let (at, intact_after) = damage_in(&broken).expect("damage found");
        assert_eq!(at, first);
        assert!(!intact_after);
    }

    #[test]
    fn a_later_wal_file_with_records_makes_damage_intact_after() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = log(10, 100);
        let last = first.len() - 50;
        first[last] ^= 1;
        std::fs::write(dir.path().join("000007.log"), &first).unwrap();
        std::fs::write(dir.path().join("000009.log"), log(2, 100)).unwrap();
        std::fs::write(dir.path().join("000010.sst"), b"not a log").unwrap();
        let damage = find(dir.path()).unwrap().expect("damage found");
        assert_eq!(damage.file, dir.path().join("000007.log"));
        assert_eq!(damage.offset, 9 * 107);
        assert!(damage.intact_after);

        std::fs::remove_file(dir.path().join("000009.log")).unwrap();
        let damage = find(dir.path()).unwrap().expect("damage found");
        assert!(!damage.intact_after);
        assert_eq!(damage.bytes_after, 107);
    }
}
