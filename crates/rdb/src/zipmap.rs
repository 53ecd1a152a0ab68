//! Zipmaps (`zipmap.c`), the small-hash encoding of Redis 2.x files (type 9): a count byte,
//! then `len key len free value padding` per pair (a length is one byte below 254, or 254
//! and a u32), and 0xFF.

use bytes::Bytes;

use crate::RdbError;

fn corrupt(what: &'static str) -> RdbError {
    RdbError::Corrupt(what)
}

/// The field and value of each pair.
pub fn decode(map: &[u8]) -> Result<Vec<(Bytes, Bytes)>, RdbError> {
    let mut at = 1;
    let mut pairs = Vec::new();
    let short = || corrupt("zipmap entry past the end");
    let length = |at: &mut usize| -> Result<Option<usize>, RdbError> {
        match *map.get(*at).ok_or_else(short)? {
            255 => Ok(None),
            254 => {
                let raw = map.get(*at + 1..*at + 5).ok_or_else(short)?;
                *at += 5;
                Ok(Some(
                    u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize
                ))
            }
            len => {
                *at += 1;
                Ok(Some(len as usize))
            }
        }
    };
    let take = |at: &mut usize, len: usize| -> Result<Bytes, RdbError> {
        let data = map.get(*at..*at + len).ok_or_else(short)?;
        *at += len;
        Ok(Bytes::copy_from_slice(data))
    };
    while let Some(len) = length(&mut at)? {
        let field = take(&mut at, len)?;
        let len = length(&mut at)?.ok_or(corrupt("zipmap field without a value"))?;
        let free = *map.get(at).ok_or_else(short)? as usize;
        at += 1;
        let value = take(&mut at, len)?;
        take(&mut at, free)?;
        pairs.push((field, value));
    }
    if at + 1 != map.len() {
        return Err(corrupt("zipmap with bytes after its end"));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_read_and_damage_refused() {
        // zipmap.c's layout: count, "name"->"redis" with one free byte, "n"->"1".
        let map = [
            &[2u8, 4][..],
            b"name",
            &[5, 1],
            b"redis",
            &[0],
            &[1],
            b"n",
            &[1, 0],
            b"1",
            &[255],
        ]
        .concat();
        let pairs = decode(&map).unwrap();
        assert_eq!(
            pairs,
            vec![
                (Bytes::from("name"), Bytes::from("redis")),
                (Bytes::from("n"), Bytes::from("1"))
            ]
        );
        for cut in 0..map.len() {
            assert!(decode(&map[..cut]).is_err(), "cut at {cut}");
        }
    }
}
