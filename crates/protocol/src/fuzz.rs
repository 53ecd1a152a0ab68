//! Fuzzing of the request parser with bytes no test author wrote: random bytes, and requests
//! mutated (bytes flipped, inserted, cut, lengths replaced by extreme numbers). Each input is
//! parsed whole and again in random pieces, as it may arrive from a socket; both must give the
//! same requests and the same error, take no request out of nothing, and never panic.
//!
//! The suite runs [`ITERATIONS`] inputs; `SHALE_FUZZ_ITERATIONS=N` runs more (minutes' worth:
//! `SHALE_FUZZ_ITERATIONS=20000000 cargo test --release -p shale-protocol fuzz`).

use bytes::{Bytes, BytesMut};

use crate::request::{ProtocolError, RequestLimits, RequestParser};

const ITERATIONS: u64 = 200_000;

/// Requests to mutate: multibulk and inline, quoting, empty and odd forms.
const SEEDS: &[&[u8]] = &[
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n",
    b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    b"*0\r\n*-1\r\n",
    b"*2\r\n$0\r\n\r\n$3\r\na\r\nb\r\n",
    b"PING\r\n",
    b"SET k \"a b\\x41\\n\" 'single'\r\n",
    b"\r\n\n  \r\nECHO \"unterminated\r\n",
    b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$-1\r\n",
    b"*2147483648\r\n",
    b"*1\r\n$9223372036854775807\r\n",
];

/// xorshift64*: the same inputs on every run, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn input(rng: &mut Rng) -> Vec<u8> {
    if rng.below(4) == 0 {
        return (0..rng.below(64)).map(|_| rng.next() as u8).collect();
    }
    let mut bytes = SEEDS[rng.below(SEEDS.len())].to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(6) {
            0 if at < bytes.len() => bytes[at] = rng.next() as u8,
            1 => bytes.insert(at, b"*$\r\n0-9 \"'\\"[rng.below(11)]),
            2 => bytes.truncate(at),
            3 => {
                let number: &[u8] = [
                    &b"-1"[..],
                    b"0",
                    b"99999999999999999999",
                    b"2147483647",
                    b"-9223372036854775808",
                    b"1048576",
                ][rng.below(6)];
                bytes.splice(at..at, number.iter().copied());
            }
            4 => {
                let copy = bytes.clone();
                bytes.extend_from_slice(&copy);
            }
            _ if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => {}
        }
    }
    bytes
}

/// What parsing `pieces` in turn gives: every request, then the error if any.
fn parse(pieces: &[&[u8]], limits: &RequestLimits) -> (Vec<Vec<Bytes>>, Option<ProtocolError>) {
    let mut parser = RequestParser::default();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match parser.parse(&mut buf, limits) {
                Ok(Some(args)) => {
                    assert!(buf.len() < before, "a request taken out of nothing");
                    requests.push(args);
                }
                Ok(None) => break,
                Err(err) => return (requests, Some(err)),
            }
        }
    }
    (requests, None)
}

#[test]
fn mutated_and_random_requests_parse_alike_whole_and_in_pieces() {
    let iterations = std::env::var("SHALE_FUZZ_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(ITERATIONS);
    let limits = RequestLimits {
        max_bulk_len: 1 << 20,
        max_multibulk_len: 1 << 16,
    };
    let mut rng = Rng(0x5eed_5a1e);
    let (mut requests, mut errors) = (0, 0);
    for _ in 0..iterations {
        let bytes = input(&mut rng);
        let whole = parse(&[&bytes], &limits);
        let mut pieces = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let (piece, after) = rest.split_at(1 + rng.below(rest.len().min(8)));
            pieces.push(piece);
            rest = after;
        }
        let split = parse(&pieces, &limits);
        assert_eq!(whole, split, "input {bytes:?}");
        let taken: usize = whole.0.iter().flatten().map(|a| a.len()).sum();
        assert!(taken <= bytes.len(), "more argument bytes than input");
        requests += whole.0.len();
        errors += whole.1.is_some() as usize;
    }
    // The mutations must reach both outcomes, or they test little.
    assert!(
        requests > 0 && errors > 0,
        "{requests} requests, {errors} errors"
    );
}
