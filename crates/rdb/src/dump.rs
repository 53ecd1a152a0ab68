//! DUMP payloads: an object's type byte and body, then the RDB version (u16, little-endian)
//! and a CRC-64 of everything before it (u64, little-endian).

use bytes::Bytes;

use crate::read::Decoder;
use crate::{crc64::crc64, file, write, RdbError, Value, RDB_VERSION};

const FOOTER: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// Too short for a footer, a version newer than this reads, or a checksum that differs.
    #[error("DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    /// A sound footer around a body that is not a value.
    #[error("Bad data format")]
    BadFormat(#[source] RdbError),
}

/// Why a FUNCTION RESTORE payload was refused, in Redis's words.
#[derive(Debug, thiserror::Error)]
pub enum FunctionsError {
    #[error("DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    #[error("can not read data type")]
    NoType,
    #[error("given type is not a function")]
    NotFunction,
    #[error("Failed loading library payload")]
    BadLibrary,
}

/// FUNCTION DUMP's payload: each library's code as an RDB FUNCTION2 record, then the footer.
pub fn encode_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(file::opcode::FUNCTION2);
        write::string(&mut out, code);
    }
    seal(&mut out);
    out
}

/// The libraries' codes in a FUNCTION DUMP payload (also in Redis 7.0 rc's format).
pub fn decode_functions(payload: &[u8]) -> Result<Vec<Bytes>, FunctionsError> {
    let body = checked_body(payload).ok_or(FunctionsError::VersionOrChecksum)?;
    let mut decoder = Decoder::new(body);
    let mut codes = Vec::new();
    while !decoder.get_mut().is_empty() {
        let code = match decoder.byte().map_err(|_| FunctionsError::NoType)? {
            file::opcode::FUNCTION2 => decoder.string(),
            file::opcode::FUNCTION => file::old_function(&mut decoder),
            _ => return Err(FunctionsError::NotFunction),
        };
        codes.push(code.map_err(|_| FunctionsError::BadLibrary)?);
    }
    Ok(codes)
}

/// The RDB version and checksum that end a payload.
fn seal(out: &mut Vec<u8>) {
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// What a payload holds before its footer, if the footer is sound: a version this reads and
/// the checksum of everything before it.
fn checked_body(payload: &[u8]) -> Option<&[u8]> {
    let body_len = payload.len().checked_sub(FOOTER)?;
    let footer = &payload[body_len..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().ok()?);
    (version <= RDB_VERSION && crc64(0, &payload[..body_len + 2]) == crc)
        .then(|| &payload[..body_len])
}

/// The payload of `value`, as DUMP returns it.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write::object(&mut out, value);
    seal(&mut out);
    out
}

/// The value in a payload, checked as Redis's RESTORE checks it: footer first, then body.
pub fn decode(payload: &[u8]) -> Result<Value, DumpError> {
    let body = checked_body(payload).ok_or(DumpError::VersionOrChecksum)?;
    let mut decoder = Decoder::new(body);
    let code = decoder.byte().map_err(DumpError::BadFormat)?;
    decoder.value(code).map_err(DumpError::BadFormat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_payloads_read_what_redis_writes() {
        // One library: a FUNCTION2 record of its code, then the footer.
        let code = b"#!lua name=mylib\nredis.register_function('f', function() return 1 end)";
        let payload = encode_functions([&code[..]]);
        assert_eq!(payload[0], 245);
        assert_eq!(
            decode_functions(&payload).unwrap(),
            vec![Bytes::from(&code[..])]
        );
        let mut damaged = payload.clone();
        damaged[5] ^= 1;
        assert!(matches!(
            decode_functions(&damaged),
            Err(FunctionsError::VersionOrChecksum)
        ));
        let key = encode(&Value::String(Bytes::from("x")));
        assert!(matches!(
            decode_functions(&key),
            Err(FunctionsError::NotFunction)
        ));
        assert!(decode_functions(&encode_functions([])).unwrap().is_empty());
    }

    #[test]
    fn redis_7_payloads_decode_and_shale_writes_the_same_bytes() {
        // DUMP in Redis 7.0.15 after SET k hello, and after HSET h a 1 b hello.
        let string = b"\x00\x05hello\x0a\x00\x63\x72\xdf\x76\x65\x34\x20\x0a";
        let hash = b"\x10\x16\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\
                     \x06\xff\x0a\x00\xe8\xc5\xfe\x99\xee\x07\x95\x5d";
        let values = [
            (&string[..], Value::String(Bytes::from("hello"))),
            (
                &hash[..],
                Value::Hash(vec![
                    (Bytes::from("a"), Bytes::from("1")),
                    (Bytes::from("b"), Bytes::from("hello")),
                ]),
            ),
        ];
        for (payload, value) in values {
            assert_eq!(decode(payload).unwrap(), value);
            assert_eq!(encode(&value), payload);
        }
    }

    #[test]
    fn encode_then_decode() {
        let value = Value::Hash(vec![(Bytes::from("a"), Bytes::from("1"))]);
        assert_eq!(decode(&encode(&value)).unwrap(), value);
    }

    #[test]
    fn footer_faults_come_before_body_faults() {
        let good = encode(&Value::String(Bytes::from("x")));
        assert!(matches!(
            decode(&good[..9]),
            Err(DumpError::VersionOrChecksum)
        ));
        assert!(matches!(decode(b""), Err(DumpError::VersionOrChecksum)));
        let mut flipped = good.clone();
        flipped[1] ^= 1;
        assert!(matches!(
            decode(&flipped),
            Err(DumpError::VersionOrChecksum)
        ));
        // Version 11 (Redis 7.2), with a checksum that matches.
        let mut newer = good[..good.len() - FOOTER].to_vec();
        newer.extend_from_slice(&11u16.to_le_bytes());
        let crc = crc64(0, &newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode(&newer), Err(DumpError::VersionOrChecksum)));
        // A body that is no value, with a sound footer.
        let mut bad = vec![0x00, 0x05, b'h'];
        bad.extend_from_slice(&10u16.to_le_bytes());
        let crc = crc64(0, &bad);
        bad.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode(&bad), Err(DumpError::BadFormat(_))));
    }
}
