//! HyperLogLog on strings, byte for byte Redis's: the same header, the same sparse and dense
//! encodings, the same hash and estimator, so PFCOUNT gives Redis's numbers and a value copied
//! between the two servers with GET and SET keeps working.
//!
//! The value is `"HYLL" · encoding · 3 unused · cached cardinality (8 bytes LE, top bit set
//! when stale) · registers`. 16,384 registers of 6 bits: dense, 12,288 bytes; sparse, a run
//! length code of ZERO (`00xxxxxx`), XZERO (`01xxxxxx xxxxxxxx`) and VAL (`1vvvvvxx`) opcodes,
//! changed in place by the same steps as Redis's, so both produce the same bytes. A dense HLL is
//! longer than the inline limit and lives in fragments; PFADD rewrites only the bytes it
//! changes, which become patches of one fragment.

use bytes::Bytes;
use shale_storage::metadata::KeyKind;

use super::fragments::StringWrite;
use super::string::string_len;
use crate::error::Error;
use crate::keyspace::Db;

const REGISTERS: usize = 1 << 14;
const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTER_MAX: u8 = 63;
const HEADER: usize = 16;
const DENSE_SIZE: usize = HEADER + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;

const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;

/// An empty HLL, as PFADD creates it: sparse, one XZERO over every register.
fn empty() -> Vec<u8> {
    let mut hll = vec![0u8; HEADER + 2];
    hll[..4].copy_from_slice(b"HYLL");
    hll[4] = SPARSE;
    hll[HEADER..].copy_from_slice(&xzero(REGISTERS));
    hll
}

/// The longest valid sparse HLL: every opcode covers at least one of the 16,384 registers.
const SPARSE_LIMIT: usize = HEADER + 2 * REGISTERS;

/// Whether a string of `len` bytes starting with `header` is an HLL Redis would accept. It
/// reads no more than the header, so a 512 MB string is refused without being read; a sparse
/// one too long to be valid is corrupt.
fn check_header(header: &[u8], len: usize) -> Result<(), Error> {
    let valid = len >= HEADER
        && header.len() >= 5
        && &header[..4] == b"HYLL"
        && header[4] <= SPARSE
        && (header[4] == SPARSE || len == DENSE_SIZE);
    if !valid {
        return Err(Error::NotHyperLogLog);
    }
    if len > SPARSE_LIMIT {
        return Err(Error::CorruptHyperLogLog);
    }
    Ok(())
}

fn cached(hll: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(hll[8..16].try_into().ok()?);
    (card >> 63 == 0).then_some(card)
}

fn set_cache(hll: &mut [u8], card: u64) {
    hll[8..16].copy_from_slice(&card.to_le_bytes());
}

fn invalidate_cache(hll: &mut [u8]) {
    hll[15] |= 0x80;
}

/// Redis's MurmurHash64A, seed 0xadc83b19.
fn murmur64a(data: &[u8]) -> u64 {
    const M: u64 = 0xc6a4a7935bd1e995;
    const R: u32 = 47;
    let mut h: u64 = 0xadc83b19u64 ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut k = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= (byte as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in, and the length of its hash's run of zeros plus one.
fn register_of(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(registers: &[u8], index: usize) -> u8 {
    let byte = index * 6 / 8;
    let shift = index * 6 % 8;
    let b0 = registers[byte] as u16;
    let b1 = registers.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> shift) | (b1 << (8 - shift))) & REGISTER_MAX as u16) as u8
}

fn dense_set(registers: &mut [u8], index: usize, value: u8) {
    let byte = index * 6 / 8;
    let shift = index * 6 % 8;
    let value = value as u16;
    registers[byte] &= !((REGISTER_MAX as u16) << shift) as u8;
    registers[byte] |= (value << shift) as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next &= !((REGISTER_MAX as u16) >> (8 - shift)) as u8;
        *next |= (value >> (8 - shift)) as u8;
    }
}

/// Raises register `index` of a dense HLL to `count`; whether it changed.
fn dense_raise(hll: &mut [u8], index: usize, count: u8) -> bool {
    let registers = &mut hll[HEADER..];
    if dense_get(registers, index) >= count {
        return false;
    }
    dense_set(registers, index, count);
    true
}

/// A sparse opcode: its length in bytes, the registers it covers and their value.
#[derive(Clone, Copy)]
struct Op {
    bytes: usize,
    span: usize,
    value: u8,
}

fn op_at(sparse: &[u8], at: usize) -> Option<Op> {
    let first = *sparse.get(at)?;
    Some(match first & 0xc0 {
        0x00 => Op {
            bytes: 1,
            span: (first & 0x3f) as usize + 1,
            value: 0,
        },
        0x40 => Op {
            bytes: 2,
            span: ((((first & 0x3f) as usize) << 8) | *sparse.get(at + 1)? as usize) + 1,
            value: 0,
        },
        _ => Op {
            bytes: 1,
            span: (first & 0x3) as usize + 1,
            value: ((first >> 2) & 0x1f) + 1,
        },
    })
}

fn is_val(byte: u8) -> bool {
    byte & 0x80 != 0
}

fn val(value: u8, len: usize) -> u8 {
    ((value - 1) << 2) | (len as u8 - 1) | 0x80
}

fn xzero(len: usize) -> [u8; 2] {
    let l = len - 1;
    [(l >> 8) as u8 | 0x40, (l & 0xff) as u8]
}

/// A run of `len` zero registers, as the shortest opcode.
fn zeros(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        out.extend_from_slice(&xzero(len));
    } else {
        out.push(len as u8 - 1);
    }
}

/// Calls `visit(first register, span, value)` for each opcode; `None` if the opcodes do not
/// cover exactly the 16,384 registers.
fn sparse_runs(hll: &[u8], mut visit: impl FnMut(usize, usize, u8)) -> Option<()> {
    let sparse = &hll[HEADER..];
    let (mut at, mut index) = (0, 0);
    while at < sparse.len() {
        let op = op_at(sparse, at)?;
        if index + op.span > REGISTERS {
            return None;
        }
        visit(index, op.span, op.value);
        index += op.span;
        at += op.bytes;
    }
    (index == REGISTERS).then_some(())
}

/// The dense form of a sparse HLL (its header and cached cardinality kept).
fn to_dense(hll: &mut Vec<u8>) -> Result<(), Error> {
    if hll[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HEADER].copy_from_slice(&hll[..HEADER]);
    dense[4] = DENSE;
    sparse_runs(hll, |first, span, value| {
        if value > 0 {
            for index in first..first + span {
                dense_set(&mut dense[HEADER..], index, value);
            }
        }
    })
    .ok_or(Error::CorruptHyperLogLog)?;
    *hll = dense;
    Ok(())
}

/// Raises register `index` to `count`, as Redis's `hllSparseSet`: the opcode holding it is
/// split in place, equal neighbouring VALs are merged, and the HLL turns dense when a value
/// does not fit a VAL or the value would grow past `sparse_max` bytes. Whether it changed.
fn sparse_raise(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, Error> {
    if count > VAL_MAX_VALUE {
        return promote(hll, index, count);
    }
    // Find the opcode covering `index`.
    let (mut at, mut first, mut prev) = (HEADER, 0, None);
    let op = loop {
        let op = op_at(hll, at).ok_or(Error::CorruptHyperLogLog)?;
        if index < first + op.span {
            break op;
        }
        prev = Some(at);
        at += op.bytes;
        first += op.span;
    };
    let replacement = if op.value > 0 {
        if op.value >= count {
            return Ok(false);
        }
        if op.span == 1 {
            Some(vec![val(count, 1)])
        } else {
            None
        }
    } else if op.bytes == 1 && op.span == 1 {
        Some(vec![val(count, 1)])
    } else {
        None
    };
    let sequence = replacement.unwrap_or_else(|| {
        let last = first + op.span - 1;
        let mut seq = Vec::with_capacity(5);
        if op.value == 0 {
            if index != first {
                zeros(&mut seq, index - first);
            }
            seq.push(val(count, 1));
            if index != last {
                zeros(&mut seq, last - index);
            }
        } else {
            if index != first {
                seq.push(val(op.value, index - first));
            }
            seq.push(val(count, 1));
            if index != last {
                seq.push(val(op.value, last - index));
            }
        }
        seq
    });
    if sequence.len() > op.bytes && hll.len() + sequence.len() - op.bytes > sparse_max {
        return promote(hll, index, count);
    }
    hll.splice(at..at + op.bytes, sequence);
    merge_vals(hll, prev.unwrap_or(HEADER));
    Ok(true)
}

/// Merges adjacent VAL opcodes of equal value, scanning five opcodes from `at`, as Redis does
/// after each change.
fn merge_vals(hll: &mut Vec<u8>, mut at: usize) {
    let mut scan = 5;
    while at < hll.len() && scan > 0 {
        scan -= 1;
        let byte = hll[at];
        if !is_val(byte) {
            at += if byte & 0xc0 == 0x40 { 2 } else { 1 };
            continue;
        }
        if let Some(&next) = hll.get(at + 1) {
            if is_val(next) {
                let (a, b) = (op_at(hll, at), op_at(hll, at + 1));
                if let (Some(a), Some(b)) = (a, b) {
                    if a.value == b.value && a.span + b.span <= VAL_MAX_LEN {
                        hll[at + 1] = val(a.value, a.span + b.span);
                        hll.remove(at);
                        continue;
                    }
                }
            }
        }
        at += 1;
    }
}

fn promote(hll: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Error> {
    to_dense(hll)?;
    Ok(dense_raise(hll, index, count))
}

/// Raises register `index` to `count` in either encoding; whether it changed.
fn raise(hll: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Error> {
    if hll[4] == DENSE {
        Ok(dense_raise(hll, index, count))
    } else {
        sparse_raise(hll, index, count, sparse_max)
    }
}

/// Takes the maximum of each register of `hll` into `max`.
fn merge_into(max: &mut [u8; REGISTERS], hll: &[u8]) -> Result<(), Error> {
    if hll[4] == DENSE {
        for (index, slot) in max.iter_mut().enumerate() {
            *slot = (*slot).max(dense_get(&hll[HEADER..], index));
        }
        return Ok(());
    }
    sparse_runs(hll, |first, span, value| {
        for slot in &mut max[first..first + span] {
            *slot = (*slot).max(value);
        }
    })
    .ok_or(Error::CorruptHyperLogLog)
}

/// The cardinality estimate from a register histogram (Ertl's improved estimator, as Redis).
fn estimate(histogram: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histogram[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    // Redis's HLL_ALPHA_INF, 0.5 / ln 2.
    (0.721_347_520_444_481_7 * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

fn count(hll: &[u8]) -> Result<u64, Error> {
    let mut histogram = [0u32; 64];
    if hll[4] == DENSE {
        for index in 0..REGISTERS {
            histogram[dense_get(&hll[HEADER..], index) as usize] += 1;
        }
    } else {
        sparse_runs(hll, |_, span, value| {
            histogram[value as usize] += span as u32
        })
        .ok_or(Error::CorruptHyperLogLog)?;
    }
    Ok(estimate(&histogram))
}

fn count_registers(max: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &value in max.iter() {
        histogram[value as usize] += 1;
    }
    estimate(&histogram)
}

/// The HLL a string opened for writing holds, read whole only once its header shows it can be
/// one.
fn read_hll(string: &mut StringWrite<'_>) -> Result<Vec<u8>, Error> {
    let len = string.len();
    check_header(&string.read(0, len.min(HEADER as u64))?, len as usize)?;
    string.read(0, len)
}

impl<'a> Db<'a> {
    /// The HLL at `key` (the caller holds its lock), `None` if the key is missing.
    fn hll_value(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let Some(meta) = self.typed_meta(key, KeyKind::String)? else {
            return Ok(None);
        };
        let len = string_len(&meta) as usize;
        check_header(&self.string_range(key, &meta, 0, HEADER as u64)?, len)?;
        Ok(Some(self.string_range(key, &meta, 0, len as u64)?))
    }

    /// PFADD: whether any register changed (or the key was created).
    pub fn pfadd(
        &self,
        key: &'a [u8],
        elements: &[Bytes],
        sparse_max: usize,
    ) -> Result<bool, Error> {
        let _guard = self.lock(&[key])?;
        let mut string = self.open_string(key)?;
        let (mut hll, mut updated) = if string.existed {
            (read_hll(&mut string)?, false)
        } else {
            (empty(), true)
        };
        for element in elements {
            let (index, count) = register_of(element);
            updated |= raise(&mut hll, index, count, sparse_max)?;
        }
        if updated {
            invalidate_cache(&mut hll);
            string.replace(&hll)?;
            string.commit()?;
        }
        Ok(updated)
    }

    /// Opens `key` for writing as a lookup that counts as a hit or miss: a key of another
    /// type is found, as Redis counts it, before WRONGTYPE.
    fn open_counted(&self, key: &'a [u8]) -> Result<StringWrite<'a>, Error> {
        let opened = self.open_string(key);
        match &opened {
            Ok(string) => self.record_lookup(string.existed),
            Err(Error::WrongType) => self.record_lookup(true),
            Err(_) => {}
        }
        opened
    }

    /// PFCOUNT: one key's count is cached in the value (and so written when stale); several
    /// keys are counted as their union, nothing written.
    pub fn pfcount(&self, keys: &'a [Bytes]) -> Result<u64, Error> {
        let key_refs: Vec<&[u8]> = keys.iter().map(|k| k.as_ref()).collect();
        let _guard = self.lock(&key_refs)?;
        if let [key] = keys {
            let mut string = self.open_counted(key)?;
            if !string.existed {
                return Ok(0);
            }
            let mut hll = read_hll(&mut string)?;
            if let Some(card) = cached(&hll) {
                return Ok(card);
            }
            let card = count(&hll)?;
            // A replica counts without caching: its data changes only as its master's does.
            if !self.ks.is_replica() {
                set_cache(&mut hll, card);
                string.replace(&hll)?;
                string.commit()?;
            }
            return Ok(card);
        }
        let mut max = [0u8; REGISTERS];
        for key in keys {
            if let Some(hll) = self.hll_value(key)? {
                merge_into(&mut max, &hll)?;
            }
        }
        Ok(count_registers(&max))
    }

    /// PFMERGE: `dest` gets the maximum of each register over itself and `sources`; dense if
    /// any of them is.
    pub fn pfmerge(
        &self,
        dest: &'a [u8],
        sources: &[Bytes],
        sparse_max: usize,
    ) -> Result<(), Error> {
        let mut locked: Vec<&[u8]> = vec![dest];
        locked.extend(sources.iter().map(|k| k.as_ref()));
        let _guard = self.lock(&locked)?;
        // `dest` is read once, as the first source (an empty HLL if missing adds nothing).
        // Redis reads `dest` as a source, and counts its lookup so.
        let mut string = self.open_counted(dest)?;
        let mut hll = if string.existed {
            read_hll(&mut string)?
        } else {
            empty()
        };
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, &hll)?;
        let mut use_dense = hll[4] == DENSE;
        for key in sources {
            if let Some(source) = self.hll_value(key)? {
                use_dense |= source[4] == DENSE;
                merge_into(&mut max, &source)?;
            }
        }
        if use_dense {
            to_dense(&mut hll)?;
        }
        for (index, &value) in max.iter().enumerate() {
            if value > 0 {
                raise(&mut hll, index, value, sparse_max)?;
            }
        }
        invalidate_cache(&mut hll);
        string.replace(&hll)?;
        string.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_registers_round_trip_at_every_bit_offset() {
        let mut registers = vec![0u8; DENSE_SIZE - HEADER];
        for index in 0..REGISTERS {
            dense_set(&mut registers, index, (index % 64) as u8);
        }
        for index in 0..REGISTERS {
            assert_eq!(dense_get(&registers, index), (index % 64) as u8);
        }
    }

    #[test]
    fn sparse_changes_split_and_merge_opcodes() {
        let mut hll = empty();
        assert!(raise(&mut hll, 100, 3, 3000).unwrap());
        // XZERO(100) · VAL(3,1) · XZERO(16283)
        assert_eq!(&hll[HEADER..], &[0x40, 99, val(3, 1), 0x40 | 0x3f, 0x9a]);
        assert!(!raise(&mut hll, 100, 2, 3000).unwrap());
        assert!(raise(&mut hll, 101, 3, 3000).unwrap());
        // The new VAL(3,1) merges with its left neighbour into VAL(3,2).
        assert_eq!(&hll[HEADER..HEADER + 3], &[0x40, 99, val(3, 2)]);
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, &hll).unwrap();
        assert_eq!((max[100], max[101], max[102]), (3, 3, 0));
    }

    #[test]
    fn a_large_sparse_hll_turns_dense_with_the_same_registers() {
        let mut hll = empty();
        let mut expected = [0u8; REGISTERS];
        for i in 0..5000u32 {
            let (index, count) = register_of(i.to_string().as_bytes());
            raise(&mut hll, index, count, 3000).unwrap();
            expected[index] = expected[index].max(count);
        }
        assert_eq!(hll[4], DENSE);
        assert_eq!(hll.len(), DENSE_SIZE);
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, &hll).unwrap();
        assert_eq!(max, expected);
        let estimate = count(&hll).unwrap();
        assert!((4800..5200).contains(&estimate), "{estimate}");
    }

    #[test]
    fn runs_past_the_last_register_are_corrupt_not_a_panic() {
        let mut hll = empty();
        hll.push(0x00);
        let mut max = [0u8; REGISTERS];
        assert!(merge_into(&mut max, &hll).is_err());
        assert!(count(&hll).is_err());
        assert!(to_dense(&mut hll).is_err());
    }

    #[test]
    fn malformed_values_are_refused() {
        assert!(check_header(b"HYLL", 4).is_err());
        let mut dense = vec![0u8; DENSE_SIZE - 1];
        dense[..4].copy_from_slice(b"HYLL");
        assert!(check_header(&dense, dense.len()).is_err());
        assert!(check_header(&empty(), 18).is_ok());
        // A sparse value longer than any valid one is corrupt, whatever its length.
        let not_hll = Error::NotHyperLogLog.to_reply();
        let corrupt = Error::CorruptHyperLogLog.to_reply();
        assert_eq!(
            check_header(&empty(), SPARSE_LIMIT + 1)
                .unwrap_err()
                .to_reply(),
            corrupt
        );
        assert_eq!(
            check_header(b"HYLX\x01", 1 << 29).unwrap_err().to_reply(),
            not_hll
        );
        let mut short = empty();
        short.truncate(HEADER + 1);
        short.push(0x00);
        assert!(count(&short).is_err());
    }
}
