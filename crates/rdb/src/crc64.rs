//! CRC-64/Jones as Redis computes it (`crc64.c`): polynomial 0xad93d23594c935a9, reflected,
//! initial value 0, no final XOR. It checks DUMP payloads and RDB files.

const POLY: u64 = 0x95ac_9329_ac4b_c9b5; // 0xad93d23594c935a9 with its bits reversed

const TABLE: [u64; 256] = table();

const fn table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// Continues `crc` over `data`; start from 0.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    for &byte in data {
        crc = TABLE[((crc ^ byte as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_check_value() {
        // crc64.c's own test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn continues_across_pieces() {
        let whole = crc64(0, b"hello world");
        assert_eq!(crc64(crc64(0, b"hello "), b"world"), whole);
    }
}
