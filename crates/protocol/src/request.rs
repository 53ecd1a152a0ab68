//! Request parsing: RESP multibulk arrays and inline commands, with Redis's limits and errors.

use bytes::{Buf, Bytes, BytesMut};

use crate::inline::split_inline_args;

/// Longest line (inline command, `*` or `$` header) Redis accepts before it gives up.
const MAX_INLINE_LEN: usize = 64 * 1024;

/// Limits that protect the server from a client's lengths.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Largest bulk string accepted (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Largest argument count of one multibulk request.
    pub max_multibulk_len: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
        }
    }
}

/// A request the server cannot make sense of; Redis replies `-ERR Protocol error: ...` and
/// closes the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    ExpectedDollar(u8),
    TooBigInline,
    TooBigMultibulkCount,
    TooBigBulkCount,
    UnbalancedQuotes,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Protocol error: ")?;
        match self {
            ProtocolError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ProtocolError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ProtocolError::ExpectedDollar(got) => write!(f, "expected '$', got '{}'", *got as char),
            ProtocolError::TooBigInline => f.write_str("too big inline request"),
            ProtocolError::TooBigMultibulkCount => f.write_str("too big mbulk count string"),
            ProtocolError::TooBigBulkCount => f.write_str("too big bulk count string"),
            ProtocolError::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Takes requests off the front of a connection's input buffer. It remembers how far it got
/// into a multibulk request that has not fully arrived: a request of many small arguments
/// arriving in pieces is then read once, not again from its start at every piece (a 1 GB
/// query of one-byte arguments would have cost hours of CPU).
#[derive(Debug, Default)]
pub struct RequestParser {
    partial: Option<Partial>,
}

/// The arguments of an incomplete multibulk request found so far.
#[derive(Debug)]
struct Partial {
    count: usize,
    /// Where the next argument's `$` header starts.
    pos: usize,
    /// Where each argument found so far starts, and its length.
    spans: Vec<(usize, usize)>,
}

impl RequestParser {
    /// Takes the next complete request off the front of `buf`.
    ///
    /// Returns `Ok(None)` when more bytes are needed; nothing is consumed in that case, and
    /// until a request is taken the caller may only append to `buf`, reading more and calling
    /// again. A request with no arguments (an empty inline line or `*0`) is consumed and
    /// reported as an empty vector, which the caller skips, as Redis does.
    pub fn parse(
        &mut self,
        buf: &mut BytesMut,
        limits: &RequestLimits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        if buf.is_empty() {
            return Ok(None);
        }
        if buf[0] == b'*' {
            parse_multibulk(buf, limits, &mut self.partial)
        } else {
            parse_inline(buf)
        }
    }
}

fn parse_inline(buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(newline) = memchr(b'\n', buf) else {
        if buf.len() > MAX_INLINE_LEN {
            return Err(ProtocolError::TooBigInline);
        }
        return Ok(None);
    };
    let mut line_end = newline;
    if line_end > 0 && buf[line_end - 1] == b'\r' {
        line_end -= 1;
    }
    let args = split_inline_args(&buf[..line_end]).ok_or(ProtocolError::UnbalancedQuotes)?;
    buf.advance(newline + 1);
    Ok(Some(args.into_iter().map(Bytes::from).collect()))
}

/// Takes a multibulk request once all of it is here, resuming at `partial`, and leaves in
/// `partial` what it found of one that is not. Arguments are only located until the last
/// byte arrives, then sliced out of the buffer without copying.
fn parse_multibulk(
    buf: &mut BytesMut,
    limits: &RequestLimits,
    partial: &mut Option<Partial>,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let mut found = match partial.take() {
        Some(found) => found,
        None => {
            let Some((count, next)) = read_header(buf, 0, ProtocolError::TooBigMultibulkCount)?
            else {
                return Ok(None);
            };
            if count > limits.max_multibulk_len as i64 {
                return Err(ProtocolError::InvalidMultibulkLength);
            }
            if count <= 0 {
                buf.advance(next);
                return Ok(Some(Vec::new()));
            }
            Partial {
                count: count as usize,
                pos: next,
                spans: Vec::with_capacity((count as usize).min(1024)),
            }
        }
    };
    while found.spans.len() < found.count {
        let pos = found.pos;
        if pos >= buf.len() {
            *partial = Some(found);
            return Ok(None);
        }
        if buf[pos] != b'$' {
            return Err(ProtocolError::ExpectedDollar(buf[pos]));
        }
        let Some((len, next)) = read_header(buf, pos, ProtocolError::TooBigBulkCount)? else {
            *partial = Some(found);
            return Ok(None);
        };
        if len < 0 || len as u64 > limits.max_bulk_len as u64 {
            return Err(ProtocolError::InvalidBulkLength);
        }
        let len = len as usize;
        if buf.len() < next + len + 2 {
            *partial = Some(found);
            return Ok(None);
        }
        found.spans.push((next, len));
        found.pos = next + len + 2;
    }
    let frozen = buf.split_to(found.pos).freeze();
    Ok(Some(
        found
            .spans
            .into_iter()
            .map(|(start, len)| frozen.slice(start..start + len))
            .collect(),
    ))
}

/// Reads a `*<n>\r\n` or `$<n>\r\n` header at `pos`; returns the number and where the payload
/// starts, or `None` if the line is not complete yet.
fn read_header(
    buf: &[u8],
    pos: usize,
    too_long: ProtocolError,
) -> Result<Option<(i64, usize)>, ProtocolError> {
    let rest = &buf[pos + 1..];
    let Some(cr) = memchr(b'\r', rest) else {
        if rest.len() > MAX_INLINE_LEN {
            return Err(too_long);
        }
        return Ok(None);
    };
    if cr + 1 >= rest.len() {
        return Ok(None);
    }
    let bad_len = if buf[pos] == b'*' {
        ProtocolError::InvalidMultibulkLength
    } else {
        ProtocolError::InvalidBulkLength
    };
    let n = parse_i64(&rest[..cr]).ok_or(bad_len)?;
    Ok(Some((n, pos + 1 + cr + 2)))
}

fn parse_i64(digits: &[u8]) -> Option<i64> {
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

/// Appends `args` as a request: a RESP array of bulk strings, as a client (a replica, MIGRATE)
/// sends a command to another server.
pub fn encode_request<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_request_parses_back() {
        let mut out = Vec::new();
        encode_request(&mut out, &[&b"SET"[..], b"k", b"a\r\nb"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n");
        let mut input = BytesMut::from(&out[..]);
        let args = RequestParser::default()
            .parse(&mut input, &RequestLimits::default())
            .unwrap()
            .unwrap();
        assert_eq!(
            args,
            vec![Bytes::from("SET"), Bytes::from("k"), Bytes::from("a\r\nb")]
        );
    }

    /// One request, by a parser that has seen nothing before.
    fn parse_request(
        buf: &mut BytesMut,
        limits: &RequestLimits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        RequestParser::default().parse(buf, limits)
    }

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(req) = parse_request(&mut buf, &RequestLimits::default())? {
            out.push(req);
        }
        Ok(out)
    }

    #[test]
    fn parses_pipelined_multibulk() {
        let reqs = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(
            reqs,
            vec![
                vec![Bytes::from("GET"), Bytes::from("k")],
                vec![Bytes::from("PING")]
            ]
        );
    }

    #[test]
    fn waits_for_every_missing_byte() {
        let full = b"*2\r\n$3\r\nSET\r\n$5\r\nhello\r\n";
        for cut in 0..full.len() {
            let mut buf = BytesMut::from(&full[..cut]);
            assert_eq!(
                parse_request(&mut buf, &RequestLimits::default()),
                Ok(None),
                "cut {cut}"
            );
            assert_eq!(buf.len(), cut, "nothing consumed at cut {cut}");
        }
        assert_eq!(parse_all(full).unwrap().len(), 1);
    }

    #[test]
    fn a_parser_fed_byte_by_byte_resumes_where_it_stopped() {
        let stream = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
        let mut parser = RequestParser::default();
        let mut buf = BytesMut::new();
        let mut requests = Vec::new();
        for &byte in stream {
            buf.extend_from_slice(&[byte]);
            while let Some(request) = parser.parse(&mut buf, &RequestLimits::default()).unwrap() {
                requests.push(request);
            }
        }
        assert_eq!(requests, parse_all(stream).unwrap());
        assert_eq!(requests.len(), 3);
        assert!(buf.is_empty());
        // A bad header after arguments already found is still refused.
        let mut buf = BytesMut::from(&b"*2\r\n$1\r\na\r\n"[..]);
        assert_eq!(parser.parse(&mut buf, &RequestLimits::default()), Ok(None));
        buf.extend_from_slice(b"x");
        assert_eq!(
            parser.parse(&mut buf, &RequestLimits::default()),
            Err(ProtocolError::ExpectedDollar(b'x'))
        );
    }

    #[test]
    fn binary_payloads_survive() {
        let reqs = parse_all(b"*1\r\n$4\r\n\r\n\x00\xff\r\n").unwrap();
        assert_eq!(reqs[0][0].as_ref(), b"\r\n\x00\xff");
    }

    #[test]
    fn inline_commands_split_on_spaces_and_quotes() {
        let reqs = parse_all(b"SET k \"a b\\n\"\r\nPING\n\r\n").unwrap();
        assert_eq!(
            reqs[0],
            vec![Bytes::from("SET"), Bytes::from("k"), Bytes::from("a b\n")]
        );
        assert_eq!(reqs[1], vec![Bytes::from("PING")]);
        assert!(reqs[2].is_empty());
    }

    #[test]
    fn redis_protocol_errors() {
        let cases: &[(&[u8], &str)] = &[
            (b"*abc\r\n", "Protocol error: invalid multibulk length"),
            (
                b"*3000000000\r\n",
                "Protocol error: invalid multibulk length",
            ),
            (b"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"),
            (b"*1\r\n$x\r\n", "Protocol error: invalid bulk length"),
            (b"*1\r\n+OK\r\n", "Protocol error: expected '$', got '+'"),
            (
                b"SET k \"abc\r\n",
                "Protocol error: unbalanced quotes in request",
            ),
        ];
        for (input, message) in cases {
            let err = parse_all(input).unwrap_err();
            assert_eq!(
                err.to_string(),
                *message,
                "input {:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn oversized_lengths_are_rejected_before_buffering() {
        let limits = RequestLimits {
            max_bulk_len: 1024,
            ..RequestLimits::default()
        };
        let mut buf = BytesMut::from(&b"*1\r\n$1025\r\n"[..]);
        assert_eq!(
            parse_request(&mut buf, &limits),
            Err(ProtocolError::InvalidBulkLength)
        );
        let mut long_inline = BytesMut::from(&vec![b'a'; MAX_INLINE_LEN + 1][..]);
        assert_eq!(
            parse_request(&mut long_inline, &limits),
            Err(ProtocolError::TooBigInline)
        );
        let mut long_header = BytesMut::from(&b"*1\r\n$"[..]);
        long_header.extend_from_slice(&vec![b'9'; MAX_INLINE_LEN + 1]);
        assert_eq!(
            parse_request(&mut long_header, &limits),
            Err(ProtocolError::TooBigBulkCount)
        );
    }

    #[test]
    fn empty_multibulk_is_skipped() {
        assert_eq!(
            parse_all(b"*0\r\n*-1\r\n").unwrap(),
            vec![Vec::<Bytes>::new(), Vec::new()]
        );
    }
}
