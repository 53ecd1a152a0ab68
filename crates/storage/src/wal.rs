//! RocksDB's write batches read back as [`WriteBatch`]es: what a replica applies of the batches
//! its master's write-ahead log holds.
//!
//! A replica applies a batch through [`crate::Engine::write`] like any other, so its record
//! caches and the keyspace's in-process state follow; it needs the ops, not RocksDB's bytes.
//! The crate's `WriteBatch::iterate_cf` reports neither range deletes nor log data, so the
//! bytes are parsed here (RocksDB's `db/write_batch.cc` format).

use crate::engine::{Cf, Op, StorageError, WriteBatch};

/// A batch as its WAL record holds it: a 12-byte header (sequence, count), then the entries.
const HEADER: usize = 12;

// Entry tags (RocksDB's `ValueType`) that Shale's batches hold.
const TAG_LOG_DATA: u8 = 0x3;
const TAG_CF_DELETION: u8 = 0x4;
const TAG_CF_VALUE: u8 = 0x5;
const TAG_CF_MERGE: u8 = 0x6;
const TAG_CF_SINGLE_DELETION: u8 = 0x8;
const TAG_NOOP: u8 = 0xD;
const TAG_CF_RANGE_DELETION: u8 = 0xE;

/// The column family ids of one database, indexed by [`Cf`]; RocksDB numbers families in the
/// order they were created, and a checkpoint keeps the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyIds(pub(crate) [u32; 4]);

impl FamilyIds {
    fn family(&self, id: u32) -> Result<Cf, StorageError> {
        Cf::ALL
            .into_iter()
            .find(|cf| self.0[cf.index()] == id)
            .ok_or(StorageError::Corrupt(
                "write batch names an unknown column family",
            ))
    }
}

/// The first sequence number of a batch and the number of sequence numbers it takes.
pub fn batch_span(data: &[u8]) -> Result<(u64, u64), StorageError> {
    let header = data
        .get(..HEADER)
        .ok_or(StorageError::Corrupt("write batch shorter than its header"))?;
    let seq = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
    let count = u32::from_le_bytes(header[8..].try_into().unwrap_or_default());
    Ok((seq, u64::from(count)))
}

/// The column family id of a batch's first entry.
pub(crate) fn first_family_id(data: &[u8]) -> Result<u32, StorageError> {
    let mut input = Reader(data.get(HEADER..).unwrap_or_default());
    match input.byte()? {
        TAG_CF_VALUE => input.varint32(),
        _ => Ok(0),
    }
}

/// The ops of a batch in RocksDB's encoding, in order. Every entry takes one sequence number,
/// so the ops are exactly as many as the header counts, or the batch is refused.
pub fn decode_batch(data: &[u8], ids: &FamilyIds) -> Result<WriteBatch, StorageError> {
    let (_, count) = batch_span(data)?;
    let mut input = Reader(&data[HEADER..]);
    let mut batch = WriteBatch::new();
    while !input.0.is_empty() {
        let tag = input.byte()?;
        let op = match tag {
            TAG_LOG_DATA => {
                input.slice()?;
                continue;
            }
            TAG_NOOP => continue,
            TAG_CF_VALUE
            | TAG_CF_DELETION
            | TAG_CF_SINGLE_DELETION
            | TAG_CF_MERGE
            | TAG_CF_RANGE_DELETION => {
                let cf = ids.family(input.varint32()?)?;
                let key = input.slice()?.to_vec();
                match tag {
                    TAG_CF_VALUE => Op::Put {
                        cf,
                        key,
                        value: input.slice()?.to_vec(),
                    },
                    TAG_CF_DELETION | TAG_CF_SINGLE_DELETION => Op::Delete { cf, key },
                    TAG_CF_RANGE_DELETION => Op::DeleteRange {
                        cf,
                        start: key,
                        end: input.slice()?.to_vec(),
                        unreachable: false,
                    },
                    _ => merge_op(cf, key, input.slice()?)?,
                }
            }
            _ => {
                return Err(StorageError::Corrupt(
                    "write batch entry of an unexpected kind",
                ))
            }
        };
        batch.ops.push(op);
    }
    if batch.ops.len() as u64 != count {
        return Err(StorageError::Corrupt(
            "write batch count differs from its entries",
        ));
    }
    Ok(batch)
}

/// A merge is a counter addition in the metadata family and a byte patch in the data family.
fn merge_op(cf: Cf, key: Vec<u8>, operand: &[u8]) -> Result<Op, StorageError> {
    match cf {
        Cf::Data => Ok(Op::Patch {
            key,
            patch: operand.to_vec(),
        }),
        Cf::Meta => {
            let delta = <[u8; 8]>::try_from(operand)
                .map(i64::from_be_bytes)
                .map_err(|_| StorageError::Corrupt("counter addition of the wrong size"))?;
            Ok(Op::AddCounter { cf, key, delta })
        }
        _ => Err(StorageError::Corrupt("merge in a family without merges")),
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, StorageError> {
        let (&first, rest) = self
            .0
            .split_first()
            .ok_or(StorageError::Corrupt("write batch ends inside an entry"))?;
        self.0 = rest;
        Ok(first)
    }

    fn varint32(&mut self) -> Result<u32, StorageError> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.byte()?;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(StorageError::Corrupt("varint longer than 32 bits"))
    }

    fn slice(&mut self) -> Result<&'a [u8], StorageError> {
        let len = self.varint32()? as usize;
        if len > self.0.len() {
            return Err(StorageError::Corrupt("write batch ends inside an entry"));
        }
        let (slice, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(slice)
    }
}
