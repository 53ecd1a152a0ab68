//! Intsets (`intset.c`), the encoding of small sets of integers: the width of every value
//! (u32: 2, 4 or 8 bytes), the count (u32), then the values in ascending order, little-endian.

use crate::RdbError;

fn corrupt(what: &'static str) -> RdbError {
    RdbError::Corrupt(what)
}

/// The values of an intset, checked to be in strictly ascending order.
pub fn decode(set: &[u8]) -> Result<Vec<i64>, RdbError> {
    let header = set
        .get(..8)
        .ok_or(corrupt("intset shorter than its header"))?;
    let width = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let count = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    if ![2, 4, 8].contains(&width) {
        return Err(corrupt("intset with an unknown width"));
    }
    let body = &set[8..];
    if count.checked_mul(width) != Some(body.len()) {
        return Err(corrupt("intset length differs from its count"));
    }
    let values: Vec<i64> = body
        .chunks_exact(width)
        .map(|raw| match width {
            2 => i16::from_le_bytes([raw[0], raw[1]]) as i64,
            4 => i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as i64,
            _ => i64::from_le_bytes(raw.try_into().unwrap_or_default()),
        })
        .collect();
    if values.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(corrupt("intset out of order or with duplicates"));
    }
    Ok(values)
}

/// An intset of `values` (distinct), in the narrowest width that holds them all.
pub fn encode(values: &[i64]) -> Vec<u8> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let width: usize = if sorted.iter().all(|v| i16::try_from(*v).is_ok()) {
        2
    } else if sorted.iter().all(|v| i32::try_from(*v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * sorted.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_width_round_trips() {
        for values in [vec![3, -5, 7], vec![70000, -1], vec![i64::MIN, 0, i64::MAX]] {
            let mut sorted = values.clone();
            sorted.sort_unstable();
            assert_eq!(decode(&encode(&values)).unwrap(), sorted);
        }
        assert_eq!(encode(&[1, 2])[..4], [2, 0, 0, 0]);
        assert_eq!(encode(&[1, 1 << 20])[..4], [4, 0, 0, 0]);
    }

    #[test]
    fn damage_is_refused() {
        let set = encode(&[1, 2, 3]);
        for cut in 0..set.len() {
            assert!(decode(&set[..cut]).is_err(), "cut at {cut}");
        }
        let mut unsorted = set.clone();
        unsorted[8] = 9;
        assert!(decode(&unsorted).is_err());
        let mut bad_width = set.clone();
        bad_width[0] = 3;
        assert!(decode(&bad_width).is_err());
    }
}
