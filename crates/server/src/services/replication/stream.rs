//! The frames a master sends its replica after `+FULLRESYNC` or `+CONTINUE`, without I/O.
//!
//! Each frame is a kind byte, a little-endian u32 length and that many bytes. A full sync sends
//! the files of a checkpoint (`File` with its name, then `Chunk`s of its bytes) and
//! `SnapshotEnd`; then, as in a partial sync, every write batch (`Batch`, RocksDB's own bytes,
//! which carry their sequence number), and `Ping` when idle and `GetAck` when the master wants
//! an acknowledgement at once (WAIT).

use bytes::{Buf, BufMut, Bytes, BytesMut};

const FILE: u8 = b'f';
const CHUNK: u8 = b'c';
const SNAPSHOT_END: u8 = b'e';
const BATCH: u8 = b'b';
const PING: u8 = b'p';
const GET_ACK: u8 = b'g';

pub const HEADER: usize = 5;
/// The longest file name a `File` frame may carry.
const MAX_NAME: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    File(String),
    Chunk(Bytes),
    SnapshotEnd,
    Batch(Bytes),
    Ping,
    GetAck,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StreamError {
    #[error("unknown replication frame kind {0}")]
    UnknownKind(u8),
    #[error("replication frame with a file name that is not UTF-8 or too long")]
    BadName,
}

impl Frame {
    pub fn encode(&self, out: &mut BytesMut) {
        let (kind, payload): (u8, &[u8]) = match self {
            Frame::File(name) => (FILE, name.as_bytes()),
            Frame::Chunk(bytes) => (CHUNK, bytes),
            Frame::SnapshotEnd => (SNAPSHOT_END, &[]),
            Frame::Batch(bytes) => (BATCH, bytes),
            Frame::Ping => (PING, &[]),
            Frame::GetAck => (GET_ACK, &[]),
        };
        out.reserve(HEADER + payload.len());
        out.put_slice(&header(kind, payload.len()));
        out.put_slice(payload);
    }

    /// The header of a `Chunk` frame of `len` bytes, for a sender that writes the bytes after
    /// it without copying them into a frame.
    pub fn chunk_header(len: usize) -> [u8; HEADER] {
        header(CHUNK, len)
    }

    /// The next complete frame in `input`, taken off it; `None` until one has fully arrived.
    pub fn decode(input: &mut BytesMut) -> Result<Option<Frame>, StreamError> {
        let Some(header) = input.first_chunk::<HEADER>() else {
            return Ok(None);
        };
        let (kind, len) = parse_header(header)?;
        if input.len() < HEADER + len {
            input.reserve(HEADER + len - input.len());
            return Ok(None);
        }
        input.advance(HEADER);
        let payload = input.split_to(len).freeze();
        Ok(Some(match kind {
            Kind::File => {
                Frame::File(String::from_utf8(payload.to_vec()).map_err(|_| StreamError::BadName)?)
            }
            Kind::Chunk => Frame::Chunk(payload),
            Kind::SnapshotEnd => Frame::SnapshotEnd,
            Kind::Batch => Frame::Batch(payload),
            Kind::Ping => Frame::Ping,
            Kind::GetAck => Frame::GetAck,
        }))
    }
}

/// What a frame is, from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Chunk,
    SnapshotEnd,
    Batch,
    Ping,
    GetAck,
}

/// A frame's kind and payload length, for a reader that takes the payload itself.
pub fn parse_header(header: &[u8; HEADER]) -> Result<(Kind, usize), StreamError> {
    let kind = match header[0] {
        FILE => Kind::File,
        CHUNK => Kind::Chunk,
        SNAPSHOT_END => Kind::SnapshotEnd,
        BATCH => Kind::Batch,
        PING => Kind::Ping,
        GET_ACK => Kind::GetAck,
        other => return Err(StreamError::UnknownKind(other)),
    };
    let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if kind == Kind::File && len > MAX_NAME {
        return Err(StreamError::BadName);
    }
    Ok((kind, len))
}

fn header(kind: u8, len: usize) -> [u8; HEADER] {
    let len = (len as u32).to_le_bytes();
    [kind, len[0], len[1], len[2], len[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_whatever_the_pieces_they_arrive_in() {
        let frames = [
            Frame::File("000012.sst".into()),
            Frame::Chunk(Bytes::from_static(b"table bytes")),
            Frame::SnapshotEnd,
            Frame::Batch(Bytes::from(vec![7; 300])),
            Frame::Ping,
            Frame::GetAck,
        ];
        let mut wire = BytesMut::new();
        frames.iter().for_each(|f| f.encode(&mut wire));
        let mut input = BytesMut::new();
        let mut decoded = Vec::new();
        for byte in wire {
            input.put_u8(byte);
            while let Some(frame) = Frame::decode(&mut input).unwrap() {
                decoded.push(frame);
            }
        }
        assert_eq!(decoded, frames);
        assert!(input.is_empty());
    }

    #[test]
    fn an_unknown_kind_is_refused() {
        let mut input = BytesMut::from(&b"z\x00\x00\x00\x00"[..]);
        assert_eq!(
            Frame::decode(&mut input),
            Err(StreamError::UnknownKind(b'z'))
        );
    }
}
