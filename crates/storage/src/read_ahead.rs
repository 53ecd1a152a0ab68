//! Records read in batches ahead of the reads that will ask for them: a pipeline of GETs or
//! HGETs reads its records with one `multi_get` per family (one pass over each table's filters
//! and index, in key order) instead of one point read per command, and each command then
//! finds its records here.
//!
//! What a batch returns is one state of the database, taken before the first of its commands
//! runs; the commands still run one by one. Each record read ahead is handed, without a copy,
//! to the first read that asks for it; any other read goes to the engine below.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::{Cf, Engine, EngineStats, ScanDirection, StorageError, WriteBatch};

pub struct ReadAhead {
    base: Arc<dyn Engine>,
    records: Mutex<[Records; 4]>,
}

/// The records of one family, in the order they were read.
#[derive(Default)]
struct Records {
    read: Vec<Record>,
    /// Where the next read is expected: commands ask in the order their records were read.
    next: usize,
}

/// A key and, until a read takes it, its value.
struct Record {
    key: Vec<u8>,
    value: Option<Option<Vec<u8>>>,
}

impl ReadAhead {
    pub fn new(base: Arc<dyn Engine>) -> ReadAhead {
        ReadAhead {
            base,
            records: Mutex::new(Default::default()),
        }
    }

    /// Reads `keys` of `cf` in one batch and keeps each value that `keep` (shown its index
    /// in `keys` and its value) accepts, for one later read; a key may repeat, for as many
    /// reads. A value not kept is read again by the command that wants it.
    pub fn read(
        &self,
        cf: Cf,
        keys: Vec<Vec<u8>>,
        mut keep: impl FnMut(usize, Option<&[u8]>) -> bool,
    ) -> Result<(), StorageError> {
        let values = self.base.multi_get(cf, &keys)?;
        let records = &mut self.records.lock()[cf.index()];
        records.read.reserve(keys.len());
        for (i, (key, value)) in keys.into_iter().zip(values).enumerate() {
            if keep(i, value.as_deref()) {
                records.read.push(Record {
                    key,
                    value: Some(value),
                });
            }
        }
        Ok(())
    }

    /// The record read ahead for `key`, if no read has taken it yet.
    fn take(&self, cf: Cf, key: &[u8]) -> Option<Option<Vec<u8>>> {
        let records = &mut self.records.lock()[cf.index()];
        let Records { read, next } = records;
        let waiting = |r: &Record| r.key == key && r.value.is_some();
        let at = match read.get(*next) {
            Some(record) if waiting(record) => *next,
            _ => read.iter().position(waiting)?,
        };
        *next = at + 1;
        read[at].value.take()
    }
}

impl Engine for ReadAhead {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        match self.take(cf, key) {
            Some(value) => Ok(value),
            None => self.base.get(cf, key),
        }
    }

    fn multi_get(&self, cf: Cf, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StorageError> {
        let mut values = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match self.take(cf, key) {
                Some(value) => values.push(value),
                None => {
                    values.push(None);
                    missing.push(i);
                }
            }
        }
        if missing.is_empty() {
            return Ok(values);
        }
        let unread: Vec<Vec<u8>> = missing.iter().map(|&i| keys[i].clone()).collect();
        for (i, value) in missing.into_iter().zip(self.base.multi_get(cf, &unread)?) {
            values[i] = value;
        }
        Ok(values)
    }

    fn write(&self, batch: WriteBatch) -> Result<(), StorageError> {
        self.base.write(batch)
    }

    fn sequence(&self) -> u64 {
        self.base.sequence()
    }

    fn scan(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
        direction: ScanDirection,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.base.scan(cf, lower, upper, direction, visit)
    }

    fn flush_wal(&self) -> Result<(), StorageError> {
        self.base.flush_wal()
    }

    fn sync_wal(&self) -> Result<(), StorageError> {
        self.base.sync_wal()
    }

    fn flush_memtables(&self) -> Result<(), StorageError> {
        self.base.flush_memtables()
    }

    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<(), StorageError> {
        self.base.compact_range(cf, start, end)
    }

    fn stats(&self) -> EngineStats {
        self.base.stats()
    }

    fn write_failure(&self) -> Option<Arc<str>> {
        self.base.write_failure()
    }

    fn generation(&self) -> u64 {
        self.base.generation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryEngine;

    fn engine_with(records: &[(&[u8], &[u8])]) -> Arc<dyn Engine> {
        let engine = MemoryEngine::new();
        let mut batch = WriteBatch::new();
        for (key, value) in records {
            batch.put(Cf::Meta, key.to_vec(), value.to_vec());
        }
        engine.write(batch).unwrap();
        Arc::new(engine)
    }

    #[test]
    fn reads_find_the_records_read_ahead_as_they_were() {
        let base = engine_with(&[(b"a", b"1"), (b"b", b"2")]);
        let ahead = ReadAhead::new(base.clone());
        let keys = vec![b"a".to_vec(), b"missing".to_vec(), b"b".to_vec()];
        let mut seen = Vec::new();
        ahead
            .read(Cf::Meta, keys, |i, value| {
                seen.push((i, value.map(<[u8]>::to_vec)));
                true
            })
            .unwrap();
        let values = vec![Some(b"1".to_vec()), None, Some(b"2".to_vec())];
        assert_eq!(seen, values.into_iter().enumerate().collect::<Vec<_>>());
        // Written after the batch was read: the commands of the batch see the batch's state.
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"a".to_vec(), b"changed".to_vec());
        base.write(batch).unwrap();
        assert_eq!(ahead.get(Cf::Meta, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(ahead.get(Cf::Meta, b"missing").unwrap(), None);
        assert_eq!(ahead.get(Cf::Meta, b"b").unwrap(), Some(b"2".to_vec()));
        // Every read ahead was used: the next read of a goes to the engine.
        assert_eq!(
            ahead.get(Cf::Meta, b"a").unwrap(),
            Some(b"changed".to_vec())
        );
    }

    #[test]
    fn a_key_read_ahead_twice_serves_two_reads_in_any_order() {
        let base = engine_with(&[(b"a", b"1"), (b"b", b"2")]);
        let ahead = ReadAhead::new(base.clone());
        let keys = vec![b"a".to_vec(), b"b".to_vec(), b"a".to_vec()];
        ahead.read(Cf::Meta, keys, |_, _| true).unwrap();
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"a".to_vec(), b"changed".to_vec());
        base.write(batch).unwrap();
        assert_eq!(ahead.get(Cf::Meta, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(
            ahead
                .multi_get(Cf::Meta, &[b"a".to_vec(), b"b".to_vec()])
                .unwrap(),
            vec![Some(b"1".to_vec()), Some(b"2".to_vec())]
        );
        // Another family's record of the same key was not read ahead.
        assert_eq!(ahead.get(Cf::Data, b"a").unwrap(), None);
        assert_eq!(
            ahead.get(Cf::Meta, b"a").unwrap(),
            Some(b"changed".to_vec())
        );
    }

    #[test]
    fn a_value_not_kept_is_read_again() {
        let base = engine_with(&[(b"a", b"1"), (b"b", b"2")]);
        let ahead = ReadAhead::new(base.clone());
        let keys = vec![b"a".to_vec(), b"b".to_vec()];
        ahead.read(Cf::Meta, keys, |i, _| i == 1).unwrap();
        let mut batch = WriteBatch::new();
        batch.put(Cf::Meta, b"a".to_vec(), b"changed".to_vec());
        batch.put(Cf::Meta, b"b".to_vec(), b"changed".to_vec());
        base.write(batch).unwrap();
        assert_eq!(
            ahead.get(Cf::Meta, b"a").unwrap(),
            Some(b"changed".to_vec())
        );
        assert_eq!(ahead.get(Cf::Meta, b"b").unwrap(), Some(b"2".to_vec()));
    }
}
