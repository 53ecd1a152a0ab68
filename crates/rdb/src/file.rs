//! RDB files: `REDIS` and a 4-digit version, then records (aux fields, database selections,
//! keys with their expiry, idle time and frequency, functions, module data), the EOF opcode
//! and a CRC-64 of everything before it. [`FileReader`] streams the records of any `Read` one
//! at a time, so a file larger than memory loads with one value in memory at once;
//! [`FileWriter`] writes a file Redis 7.0 loads.

use std::io::{Read, Write};

use bytes::Bytes;

use crate::crc64::crc64;
use crate::read::Decoder;
use crate::{write, RdbError, Value, RDB_VERSION};

/// Record opcodes (`rdb.h`).
pub(crate) mod opcode {
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// Opcodes inside a module value saved with annotations (type 7, module aux data).
mod module_opcode {
    pub const EOF: u64 = 0;
    pub const SINT: u64 = 1;
    pub const UINT: u64 = 2;
    pub const FLOAT: u64 = 3;
    pub const DOUBLE: u64 = 4;
    pub const STRING: u64 = 5;
}

/// One key of the file, with what the records before it said of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub db: u64,
    pub key: Bytes,
    pub value: Value,
    /// Unix milliseconds, if the key expires.
    pub expire_at: Option<u64>,
    /// Seconds since its last access (an LRU idle time).
    pub idle: Option<u64>,
    /// Its LFU frequency.
    pub freq: Option<u8>,
}

/// What a record of the file was.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// An aux field (`redis-ver`, `ctime`, `used-mem`, `repl-id`, ...).
    Aux(Bytes, Bytes),
    /// The keys and keys with an expiry of the database selected next (a sizing hint).
    ResizeDb {
        keys: u64,
        expires: u64,
    },
    Key(Entry),
    /// A key whose value this reader cannot hold, read past: a module type (named), or an
    /// empty collection (which Redis also skips).
    SkippedKey {
        db: u64,
        key: Bytes,
        reason: String,
    },
    /// A function library's code (FUNCTION2; rc versions' FUNCTION is translated to it).
    Function(Bytes),
    /// Auxiliary data of a module, read past.
    ModuleAux(String),
    /// The end; whether the checksum was there to check (it was right if present: a wrong
    /// one is an error).
    End {
        checksummed: bool,
    },
}

/// A reader that computes the CRC-64 of what it passes on.
struct Checksummed<R> {
    inner: R,
    crc: u64,
}

impl<R: Read> Read for Checksummed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc = crc64(self.crc, &buf[..n]);
        Ok(n)
    }
}

pub struct FileReader<R> {
    decoder: Decoder<Checksummed<R>>,
    version: u16,
    db: u64,
    ended: bool,
}

impl<R: Read> FileReader<R> {
    /// Reads the header; refuses files that are not RDB or newer than version 10.
    pub fn new(input: R) -> Result<FileReader<R>, RdbError> {
        let mut decoder = Decoder::new(Checksummed {
            inner: input,
            crc: 0,
        });
        let mut header = [0u8; 9];
        decoder.fill(&mut header)?;
        if &header[..5] != b"REDIS" {
            return Err(RdbError::Corrupt("not an RDB file (no REDIS signature)"));
        }
        let version = std::str::from_utf8(&header[5..])
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .filter(|v| (1..=RDB_VERSION).contains(v))
            .ok_or(RdbError::Corrupt("an RDB version this server cannot read"))?;
        Ok(FileReader {
            decoder,
            version,
            db: 0,
            ended: false,
        })
    }

    pub fn version(&self) -> u16 {
        self.version
    }

    /// The next record; after `End`, always `End` again.
    pub fn next_record(&mut self) -> Result<Record, RdbError> {
        if self.ended {
            return Ok(Record::End { checksummed: true });
        }
        let (mut expire_at, mut idle, mut freq) = (None, None, None);
        loop {
            let code = self.decoder.byte()?;
            match code {
                opcode::EXPIRETIME => expire_at = Some(self.decoder.u32_le()? as u64 * 1000),
                opcode::EXPIRETIME_MS => expire_at = Some(self.decoder.u64_le()?),
                opcode::IDLE => idle = Some(self.decoder.length()?),
                opcode::FREQ => freq = Some(self.decoder.byte()?),
                opcode::SELECTDB => self.db = self.decoder.length()?,
                opcode::RESIZEDB => {
                    let keys = self.decoder.length()?;
                    let expires = self.decoder.length()?;
                    return Ok(Record::ResizeDb { keys, expires });
                }
                opcode::AUX => {
                    let key = self.decoder.string()?;
                    let value = self.decoder.string()?;
                    return Ok(Record::Aux(key, value));
                }
                opcode::MODULE_AUX => {
                    let id = self.decoder.length()?;
                    let _when_opcode = self.decoder.length()?;
                    let _when = self.decoder.length()?;
                    self.skip_module_value()?;
                    return Ok(Record::ModuleAux(module_name(id)));
                }
                opcode::FUNCTION2 => return Ok(Record::Function(self.decoder.string()?)),
                opcode::FUNCTION => return Ok(Record::Function(old_function(&mut self.decoder)?)),
                opcode::EOF => return self.end(),
                kind => {
                    let key = self.decoder.string()?;
                    let db = self.db;
                    if kind == crate::kind::MODULE_2 {
                        let id = self.decoder.length()?;
                        self.skip_module_value()?;
                        let reason = format!("a value of module type {}", module_name(id));
                        return Ok(Record::SkippedKey { db, key, reason });
                    }
                    return match self.decoder.value(kind) {
                        Ok(value) => Ok(Record::Key(Entry {
                            db,
                            key,
                            value,
                            expire_at,
                            idle,
                            freq,
                        })),
                        Err(RdbError::EmptyKey) => Ok(Record::SkippedKey {
                            db,
                            key,
                            reason: "an empty collection".into(),
                        }),
                        Err(err) => Err(err),
                    };
                }
            }
        }
    }

    /// The checksum after EOF (from version 5 on): zero means saved without one.
    fn end(&mut self) -> Result<Record, RdbError> {
        self.ended = true;
        if self.version < 5 {
            return Ok(Record::End { checksummed: false });
        }
        // Every byte before the footer has passed through the CRC.
        let expected = self.decoder.get_mut().crc;
        let stored = self.decoder.u64_le()?;
        match stored {
            0 => Ok(Record::End { checksummed: false }),
            crc if crc == expected => Ok(Record::End { checksummed: true }),
            _ => Err(RdbError::Corrupt("wrong RDB checksum")),
        }
    }

    /// Reads past a module value saved with annotations: opcodes up to their EOF.
    fn skip_module_value(&mut self) -> Result<(), RdbError> {
        loop {
            match self.decoder.length()? {
                module_opcode::EOF => return Ok(()),
                module_opcode::SINT | module_opcode::UINT => {
                    self.decoder.length()?;
                }
                module_opcode::FLOAT => {
                    self.decoder.u32_le()?;
                }
                module_opcode::DOUBLE => {
                    self.decoder.u64_le()?;
                }
                module_opcode::STRING => {
                    self.decoder.string()?;
                }
                _ => return Err(RdbError::Corrupt("unknown opcode in a module value")),
            }
        }
    }
}

/// A library in Redis 7.0 rc1/rc2's format (FUNCTION), turned into the later one's code.
pub(crate) fn old_function<R: std::io::Read>(decoder: &mut Decoder<R>) -> Result<Bytes, RdbError> {
    let name = decoder.string()?;
    let engine = decoder.string()?;
    if decoder.length()? != 0 {
        decoder.string()?;
    }
    let code = decoder.string()?;
    let mut out = format!(
        "#!{} name={}\n",
        String::from_utf8_lossy(&engine),
        String::from_utf8_lossy(&name)
    )
    .into_bytes();
    out.extend_from_slice(&code);
    Ok(Bytes::from(out))
}

/// A module type's 9-character name, from the top 54 bits of its ID (`moduleTypeNameByID`).
pub fn module_name(id: u64) -> String {
    const CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = id >> 10;
    let mut name = [0u8; 9];
    for slot in name.iter_mut().rev() {
        *slot = CHARSET[(id & 63) as usize];
        id >>= 6;
    }
    String::from_utf8_lossy(&name).into_owned()
}

/// Bytes gathered before they go to the output.
const WRITE_BUFFER: usize = 1 << 20;

/// Writes an RDB file of version 10, as Redis 7.0 does.
pub struct FileWriter<W: Write> {
    out: W,
    buffer: Vec<u8>,
    crc: u64,
}

impl<W: Write> FileWriter<W> {
    /// Writes the header and `aux` fields.
    pub fn new(out: W, aux: &[(&str, &str)]) -> std::io::Result<FileWriter<W>> {
        let mut writer = FileWriter {
            out,
            buffer: Vec::with_capacity(WRITE_BUFFER),
            crc: 0,
        };
        writer
            .buffer
            .extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        for (key, value) in aux {
            writer.buffer.push(opcode::AUX);
            write::string(&mut writer.buffer, key.as_bytes());
            write::string(&mut writer.buffer, value.as_bytes());
        }
        Ok(writer)
    }

    /// Starts database `db`, which has `keys` keys, `expires` of them with an expiry.
    pub fn select_db(&mut self, db: u64, keys: u64, expires: u64) -> std::io::Result<()> {
        self.buffer.push(opcode::SELECTDB);
        write::length(&mut self.buffer, db);
        self.buffer.push(opcode::RESIZEDB);
        write::length(&mut self.buffer, keys);
        write::length(&mut self.buffer, expires);
        self.spill()
    }

    /// A key, its value and its expiry (Unix ms, 0 for none).
    pub fn key(&mut self, key: &[u8], value: &Value, expire_at: u64) -> std::io::Result<()> {
        if expire_at != 0 {
            self.buffer.push(opcode::EXPIRETIME_MS);
            self.buffer.extend_from_slice(&expire_at.to_le_bytes());
        }
        write::keyed_object(&mut self.buffer, key, value);
        self.spill()
    }

    /// A function library's code; Redis writes them after the aux fields, before the keys.
    pub fn function(&mut self, code: &[u8]) -> std::io::Result<()> {
        self.buffer.push(opcode::FUNCTION2);
        write::string(&mut self.buffer, code);
        self.spill()
    }

    /// Writes EOF and the checksum, flushes, and hands the output back.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.buffer.push(opcode::EOF);
        self.crc = crc64(self.crc, &self.buffer);
        let crc = self.crc.to_le_bytes();
        self.buffer.extend_from_slice(&crc);
        self.out.write_all(&self.buffer)?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn spill(&mut self) -> std::io::Result<()> {
        if self.buffer.len() >= WRITE_BUFFER {
            self.crc = crc64(self.crc, &self.buffer);
            self.out.write_all(&self.buffer)?;
            self.buffer.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(file: &[u8]) -> Result<Vec<Record>, RdbError> {
        let mut reader = FileReader::new(file)?;
        let mut out = Vec::new();
        loop {
            let record = reader.next_record()?;
            let end = matches!(record, Record::End { .. });
            out.push(record);
            if end {
                return Ok(out);
            }
        }
    }

    fn sample() -> Vec<u8> {
        let mut writer = FileWriter::new(Vec::new(), &[("redis-ver", "7.0.15")]).unwrap();
        writer.select_db(0, 2, 1).unwrap();
        writer
            .key(b"s", &Value::String(Bytes::from("v")), 0)
            .unwrap();
        writer
            .key(
                b"l",
                &Value::List(vec![Bytes::from("a")]),
                1_900_000_000_000,
            )
            .unwrap();
        writer.select_db(3, 1, 0).unwrap();
        writer
            .key(
                b"h",
                &Value::Hash(vec![(Bytes::from("f"), Bytes::from("1"))]),
                0,
            )
            .unwrap();
        writer.finish().unwrap()
    }

    #[test]
    fn a_written_file_reads_back() {
        let read = records(&sample()).unwrap();
        let keys: Vec<(u64, &[u8], Option<u64>)> = read
            .iter()
            .filter_map(|r| match r {
                Record::Key(e) => Some((e.db, e.key.as_ref(), e.expire_at)),
                _ => None,
            })
            .collect();
        assert_eq!(
            keys,
            vec![
                (0, &b"s"[..], None),
                (0, b"l", Some(1_900_000_000_000)),
                (3, b"h", None)
            ]
        );
        assert_eq!(read[0], Record::Aux("redis-ver".into(), "7.0.15".into()));
        assert_eq!(read.last(), Some(&Record::End { checksummed: true }));
    }

    #[test]
    fn a_wrong_checksum_or_a_cut_file_is_an_error() {
        let file = sample();
        let mut flipped = file.clone();
        let at = file.len() - 12;
        flipped[at] ^= 0x20;
        assert!(records(&flipped).is_err());
        for cut in 0..file.len() {
            assert!(records(&file[..cut]).is_err(), "cut at {cut}");
        }
        let mut no_checksum = file.clone();
        let len = no_checksum.len();
        no_checksum[len - 8..].fill(0);
        assert_eq!(
            records(&no_checksum).unwrap().last(),
            Some(&Record::End { checksummed: false })
        );
    }

    #[test]
    fn newer_versions_and_other_files_are_refused() {
        let mut newer = sample();
        newer[5..9].copy_from_slice(b"0011");
        assert!(FileReader::new(&newer[..]).is_err());
        assert!(FileReader::new(&b"PNG\r\n0010"[..]).is_err());
    }

    #[test]
    fn a_version_9_file_of_redis_6_encodings_reads() {
        let zl = crate::ziplist::tests::build;
        let mut file = b"REDIS0009".to_vec();
        file.extend_from_slice(&[opcode::SELECTDB, 1, opcode::EXPIRETIME, 0x10, 0, 0, 0]);
        let mut keyed = |code: u8, key: &[u8], body: &[u8]| {
            file.push(code);
            write::string(&mut file, key);
            file.extend_from_slice(body);
        };
        let mut body = Vec::new();
        write::string(&mut body, &zl(&[b"f", b"v", b"n", b"1"]));
        keyed(crate::kind::HASH_ZIPLIST, b"h", &body);
        let mut body = Vec::new();
        write::string(&mut body, &zl(&[b"a", b"1.5", b"b", b"-2"]));
        keyed(crate::kind::ZSET_ZIPLIST, b"z", &body);
        let mut body = Vec::new();
        write::length(&mut body, 2);
        write::string(&mut body, &zl(&[b"x", b"7"]));
        write::string(&mut body, &zl(&[b"y"]));
        keyed(crate::kind::LIST_QUICKLIST, b"l", &body);
        file.push(opcode::EOF);
        let crc = crc64(0, &file);
        file.extend_from_slice(&crc.to_le_bytes());
        let read = records(&file).unwrap();
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let entry = |key: &str, value: Value, expire_at: Option<u64>| {
            Record::Key(Entry {
                db: 1,
                key: b(key),
                value,
                expire_at,
                idle: None,
                freq: None,
            })
        };
        assert_eq!(
            read,
            vec![
                entry(
                    "h",
                    Value::Hash(vec![(b("f"), b("v")), (b("n"), b("1"))]),
                    Some(16_000)
                ),
                entry(
                    "z",
                    Value::SortedSet(vec![(b("a"), 1.5), (b("b"), -2.0)]),
                    None
                ),
                entry("l", Value::List(vec![b("x"), b("7"), b("y")]), None),
                Record::End { checksummed: true },
            ]
        );
    }

    #[test]
    fn module_values_are_skipped_by_name() {
        // A module type named "exampletp" (encoding version 3) with an annotated value.
        let charset = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let id = b"exampletp".iter().fold(0u64, |id, c| {
            id << 6 | charset.iter().position(|x| x == c).unwrap() as u64
        }) << 10
            | 3;
        assert_eq!(module_name(id), "exampletp");
        let mut file = b"REDIS0010".to_vec();
        file.push(crate::kind::MODULE_2);
        write::string(&mut file, b"mk");
        write::length(&mut file, id);
        for (op, arg) in [(module_opcode::UINT, 7u64), (module_opcode::SINT, 1)] {
            write::length(&mut file, op);
            write::length(&mut file, arg);
        }
        write::length(&mut file, module_opcode::STRING);
        write::string(&mut file, b"payload");
        write::length(&mut file, module_opcode::DOUBLE);
        file.extend_from_slice(&1.5f64.to_le_bytes());
        write::length(&mut file, module_opcode::EOF);
        file.push(opcode::EOF);
        let crc = crc64(0, &file);
        file.extend_from_slice(&crc.to_le_bytes());
        let read = records(&file).unwrap();
        assert_eq!(
            read[0],
            Record::SkippedKey {
                db: 0,
                key: Bytes::from("mk"),
                reason: "a value of module type exampletp".into()
            }
        );
    }
}
