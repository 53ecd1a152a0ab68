//! Every key Shale writes, byte by byte. All integers are big-endian so that byte order is
//! numeric order, and every family sorts by database first and cluster slot second, so that a
//! database or a slot is one contiguous range.
//!
//! | family | key |
//! |---|---|
//! | meta | `db:u8 slot:u16 user_key` |
//! | meta (counters) | `0xFF "keys" db:u8`, `0xFF "expires" db:u8` |
//! | meta (versions) | `0xFF "version"` |
//! | meta (database map) | `0xFF "dbmap"` |
//! | meta (function libraries) | `0xFF "library" name` |
//! | meta (slot migration) | `0xFF "migration"` |
//! | data, score | `db:u8 slot:u16 key_len:u32 user_key version:u64 element...` |
//! | expire | `db:u8 expire_at_ms:u64 slot:u16 user_key` |
//!
//! Element suffixes per type: hash `field`, set `member`, list `position:u64`, sorted set
//! `member` (data family, value = score) and `score_bytes member` (score family).

/// Databases are numbered below this; the byte is reserved for internal records.
pub const INTERNAL_PREFIX: u8 = 0xFF;
/// Highest number of databases the key layout allows.
pub const MAX_DATABASES: usize = INTERNAL_PREFIX as usize;
/// Cluster slots, as in Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The cluster slot of a key: CRC16 (XMODEM) of its hash tag, as in Redis Cluster.
pub fn slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The part of the key that decides its slot: the text inside the first non-empty `{...}`.
fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ byte) as usize]
    })
}

/// CRC16 of each byte value, so that every key's slot costs a table lookup per byte rather
/// than eight shifts (every command computes it for each key it touches).
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[byte] = crc;
        byte += 1;
    }
    table
};

pub fn meta_key(db: u8, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(3 + key.len());
    out.push(db);
    out.extend_from_slice(&slot(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The user key inside a metadata key.
pub fn user_key_of_meta(raw: &[u8]) -> &[u8] {
    raw.get(3..).unwrap_or_default()
}

/// The database and user key a record of `cf` belongs to (also for an element prefix, the
/// start of a collection's range delete); `None` for internal records and whole-database
/// ranges.
pub fn owner_of(cf: crate::Cf, raw: &[u8]) -> Option<(u8, &[u8])> {
    let db = *raw.first()?;
    if db == INTERNAL_PREFIX {
        return None;
    }
    match cf {
        crate::Cf::Meta => Some((db, raw.get(3..)?)),
        crate::Cf::Expire => Some((db, decode_expire_key(raw)?.1)),
        crate::Cf::Data | crate::Cf::Score => {
            let len = u32::from_be_bytes(raw.get(3..7)?.try_into().ok()?) as usize;
            Some((db, raw.get(7..7 + len)?))
        }
    }
}

/// `[start, end)` covering one database in the meta, data and score families.
pub fn db_range(db: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![db], vec![db + 1])
}

/// `[start, end)` covering the slots `first..=last` of one database in the meta, data and
/// score families.
pub fn slot_range(db: u8, first: u16, last: u16) -> (Vec<u8>, Vec<u8>) {
    let mut start = vec![db];
    start.extend_from_slice(&first.to_be_bytes());
    let end = match last.checked_add(1).filter(|&next| next < SLOTS) {
        Some(next) => {
            let mut end = vec![db];
            end.extend_from_slice(&next.to_be_bytes());
            end
        }
        None => vec![db + 1],
    };
    (start, end)
}

/// `[start, end)` covering every database (and no internal record).
pub fn all_dbs_range() -> (Vec<u8>, Vec<u8>) {
    (vec![0], vec![INTERNAL_PREFIX])
}

/// The prefix shared by every element of one version of a collection.
pub fn element_prefix(db: u8, key: &[u8], version: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(15 + key.len() + 16);
    out.push(db);
    out.extend_from_slice(&slot(key).to_be_bytes());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

/// How long the [`element_prefix`] a data or score key starts with is; `None` for a key that
/// holds none (an internal record, or a range bound shorter than a prefix).
pub fn element_prefix_len(raw: &[u8]) -> Option<usize> {
    if raw.first() == Some(&INTERNAL_PREFIX) {
        return None;
    }
    let key_len = u32::from_be_bytes(raw.get(3..7)?.try_into().ok()?) as usize;
    let len = key_len.checked_add(15)?;
    (raw.len() >= len).then_some(len)
}

pub fn element_key(db: u8, key: &[u8], version: u64, element: &[u8]) -> Vec<u8> {
    let mut out = element_prefix(db, key, version);
    out.extend_from_slice(element);
    out
}

/// The smallest key greater than every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    vec![INTERNAL_PREFIX; prefix.len() + 1]
}

pub fn expire_key(db: u8, expire_at_ms: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(11 + key.len());
    out.push(db);
    out.extend_from_slice(&expire_at_ms.to_be_bytes());
    out.extend_from_slice(&slot(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The first expiry-index key of `db` at or after `at_ms`.
pub fn expire_bound(db: u8, at_ms: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(db);
    out.extend_from_slice(&at_ms.to_be_bytes());
    out
}

/// Splits an expiry-index key into its expiry time and user key.
pub fn decode_expire_key(raw: &[u8]) -> Option<(u64, &[u8])> {
    let at = u64::from_be_bytes(raw.get(1..9)?.try_into().ok()?);
    Some((at, raw.get(11..)?))
}

/// The record counting the keys of `db` (a counter in the meta family).
pub fn key_count_key(db: u8) -> Vec<u8> {
    counter_key(b"keys", db)
}

/// The record counting the keys of `db` that have an expiry.
pub fn expire_count_key(db: u8) -> Vec<u8> {
    counter_key(b"expires", db)
}

/// The record holding the highest collection version reserved so far.
pub fn version_key() -> Vec<u8> {
    let mut out = vec![INTERNAL_PREFIX];
    out.extend_from_slice(b"version");
    out
}

/// The record mapping each database a client selects to the first byte of its keys, one byte
/// per database; SWAPDB exchanges two of them.
pub fn db_map_key() -> Vec<u8> {
    let mut out = vec![INTERNAL_PREFIX];
    out.extend_from_slice(b"dbmap");
    out
}

/// The record of the last slot migration this node ran as its source (cluster mode): kept
/// with the data so that its replicas have it, and one promoted during a migration knows it.
pub fn migration_key() -> Vec<u8> {
    let mut out = vec![INTERNAL_PREFIX];
    out.extend_from_slice(b"migration");
    out
}

const LIBRARY: &[u8] = b"library";

/// The record holding a function library's code (FUNCTION LOAD), by library name.
pub fn library_key(name: &[u8]) -> Vec<u8> {
    let mut out = vec![INTERNAL_PREFIX];
    out.extend_from_slice(LIBRARY);
    out.extend_from_slice(name);
    out
}

/// `[start, end)` covering every library record.
pub fn library_range() -> (Vec<u8>, Vec<u8>) {
    let start = library_key(b"");
    let end = prefix_end(&start);
    (start, end)
}

pub fn is_library_key(raw: &[u8]) -> bool {
    raw.strip_prefix(&[INTERNAL_PREFIX])
        .is_some_and(|rest| rest.starts_with(LIBRARY))
}

/// Which per-database counter `raw` is, if it is one: its database, and whether it counts the
/// keys with an expiry.
pub fn counter_of(raw: &[u8]) -> Option<(u8, bool)> {
    let (&db, name) = raw.strip_prefix(&[INTERNAL_PREFIX])?.split_last()?;
    match name {
        b"keys" => Some((db, false)),
        b"expires" => Some((db, true)),
        _ => None,
    }
}

fn counter_key(name: &[u8], db: u8) -> Vec<u8> {
    let mut out = vec![INTERNAL_PREFIX];
    out.extend_from_slice(name);
    out.push(db);
    out
}

/// A score as 8 bytes whose byte order is numeric order (sign bit flipped for positives, all
/// bits flipped for negatives); -0 sorts as 0.
pub fn score_bytes(score: f64) -> [u8; 8] {
    let bits = if score == 0.0 { 0 } else { score.to_bits() };
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    };
    ordered.to_be_bytes()
}

/// A sorted-set member's record value: its score's bits, big-endian (-0 stored as 0).
pub fn score_value(score: f64) -> Vec<u8> {
    let score = if score == 0.0 { 0.0 } else { score };
    score.to_bits().to_be_bytes().to_vec()
}

/// The score in a member's record value; 0 for a value that is not 8 bytes.
pub fn score_of_value(raw: &[u8]) -> f64 {
    raw.try_into()
        .map(|b: [u8; 8]| f64::from_bits(u64::from_be_bytes(b)))
        .unwrap_or(0.0)
}

/// The inverse of [`score_bytes`].
pub fn score_from_bytes(raw: &[u8]) -> Option<f64> {
    let ordered = u64::from_be_bytes(raw.get(..8)?.try_into().ok()?);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    Some(f64::from_bits(bits))
}

/// The element suffix of an index entry in the score family: `score_bytes · member`.
pub fn score_suffix(score: f64, member: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + member.len());
    out.extend_from_slice(&score_bytes(score));
    out.extend_from_slice(member);
    out
}

/// List chunk suffix: the big-endian chunk number.
pub fn list_suffix(chunk: u64) -> [u8; 8] {
    chunk.to_be_bytes()
}

/// Suffix of a list element kept apart from its chunk: `0xFF · position`. Chunk numbers stay
/// near 2^63 >> shift (lists start in the middle of the positions), so these sort after every
/// chunk of their list.
pub fn list_spill_suffix(position: u64) -> [u8; 9] {
    let mut out = [0xFF; 9];
    out[1..].copy_from_slice(&position.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_decode_from_every_family() {
        use crate::Cf;
        assert_eq!(owner_of(Cf::Meta, &meta_key(3, b"k")), Some((3, &b"k"[..])));
        assert_eq!(
            owner_of(Cf::Data, &element_key(2, b"key", 9, b"field")),
            Some((2, &b"key"[..]))
        );
        assert_eq!(
            owner_of(Cf::Score, &element_prefix(1, b"z", 4)),
            Some((1, &b"z"[..]))
        );
        assert_eq!(
            owner_of(Cf::Expire, &expire_key(0, 1234, b"e")),
            Some((0, &b"e"[..]))
        );
        assert_eq!(owner_of(Cf::Meta, &key_count_key(0)), None);
        assert_eq!(owner_of(Cf::Meta, &db_range(4).0), None);
    }

    #[test]
    fn slots_match_redis_cluster() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"{}x"), crc16(b"{}x") % SLOTS);
    }

    #[test]
    fn a_slot_range_holds_its_slots_keys_and_no_others() {
        let (start, end) = slot_range(1, 12182, 12182);
        let foo = meta_key(1, b"foo");
        assert!(start <= foo && foo < end);
        let element = element_key(1, b"foo", 7, b"f");
        assert!(start <= element && element < end);
        assert!(meta_key(1, b"bar") < start || meta_key(1, b"bar") >= end);
        let (all_start, all_end) = slot_range(2, 0, SLOTS - 1);
        assert_eq!((all_start, all_end), (vec![2, 0, 0], vec![3]));
    }

    #[test]
    fn golden_bytes() {
        assert_eq!(
            meta_key(1, b"foo"),
            [&[1u8, 0x2F, 0x96][..], b"foo"].concat()
        );
        assert_eq!(
            element_key(0, b"ab", 7, b"f"),
            [
                &[0u8][..],
                &slot(b"ab").to_be_bytes(),
                &[0, 0, 0, 2],
                b"ab",
                &[0, 0, 0, 0, 0, 0, 0, 7],
                b"f"
            ]
            .concat()
        );
        assert_eq!(
            expire_key(2, 0x0102, b"k"),
            [
                &[2u8, 0, 0, 0, 0, 0, 0, 1, 2][..],
                &slot(b"k").to_be_bytes(),
                b"k"
            ]
            .concat()
        );
        assert_eq!(key_count_key(3), b"\xFFkeys\x03");
    }

    #[test]
    fn element_prefixes_do_not_overlap_between_keys() {
        // A key that is a prefix of another must not share element ranges with it.
        let short = element_prefix(0, b"a", 1);
        let long = element_prefix(0, b"ab", 1);
        assert!(!long.starts_with(&short));
        assert!(prefix_end(&short) <= long || long < short);
    }

    #[test]
    fn expiry_keys_sort_by_time() {
        assert!(expire_key(0, 5, b"zzz") < expire_key(0, 6, b"a"));
        assert!(expire_key(0, u64::MAX, b"a") < expire_key(1, 0, b"a"));
        assert_eq!(
            decode_expire_key(&expire_key(0, 42, b"key")),
            Some((42, &b"key"[..]))
        );
    }

    #[test]
    fn scores_sort_numerically() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -1e-300,
            0.0,
            1e-300,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for pair in scores.windows(2) {
            assert!(
                score_bytes(pair[0]) < score_bytes(pair[1]),
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
        for s in scores {
            assert_eq!(score_from_bytes(&score_bytes(s)), Some(s));
        }
        assert_eq!(score_bytes(-0.0), score_bytes(0.0));
        assert_eq!(score_bytes(1.0), [0xBF, 0xF0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(score_value(1.0), [0x3F, 0xF0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(score_value(-0.0), score_value(0.0));
        assert_eq!(score_of_value(&score_value(-2.5)), -2.5);
        assert_eq!(score_of_value(b"short"), 0.0);
    }

    #[test]
    fn element_prefixes_are_found_in_element_keys_only() {
        let prefix = element_prefix(3, b"user:1", 42);
        assert_eq!(element_prefix_len(&prefix), Some(prefix.len()));
        let element = element_key(3, b"user:1", 42, b"field");
        assert_eq!(element_prefix_len(&element), Some(prefix.len()));
        assert_eq!(element_prefix_len(&prefix[..prefix.len() - 1]), None);
        assert_eq!(element_prefix_len(&db_range(3).0), None);
        assert_eq!(element_prefix_len(&version_key()), None);
    }

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end(&[1, 2]), vec![1, 3]);
        assert_eq!(prefix_end(&[1, 0xFF]), vec![2]);
    }
}
