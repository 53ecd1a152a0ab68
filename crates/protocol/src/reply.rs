//! Replies and their RESP2/RESP3 encodings.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

/// One reply, in RESP3 terms; [`Reply::encode`] lowers it to RESP2 where the client asked for it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(Cow<'static, str>),
    /// The whole error line without the leading `-`, prefix included (`ERR ...`, `WRONGTYPE ...`).
    Error(Cow<'static, str>),
    Integer(i64),
    Bulk(Bytes),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Null,
    /// A missing aggregate: `*-1` in RESP2, `_` in RESP3.
    NullArray,
    Array(Vec<Reply>),
    /// An array of bulk strings that share one buffer (a range read's values).
    Bulks(Bulks),
    /// Bulk strings that share one buffer, taken as key-value pairs: a map in RESP3, a flat
    /// array in RESP2 (HGETALL).
    BulkMap(Bulks),
    /// Key-value pairs; a flat array in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// An unordered collection; an array in RESP2.
    Set(Vec<Reply>),
    /// A double; a bulk string with 17 significant digits in RESP2, as Redis 7.0 prints it.
    Double(f64),
    /// A double its command printed itself (GEOPOS's coordinates, in Redis's `%.17Lf`): a
    /// double line in RESP3, a bulk string in RESP2.
    PrintedDouble(String),
    /// A boolean; the integer 1 or 0 in RESP2.
    Bool(bool),
    /// Text meant for humans (INFO, CLIENT LIST); a plain bulk string in RESP2.
    Verbatim(Bytes),
    /// An out-of-band message (pub/sub); an array in RESP2.
    Push(Vec<Reply>),
    /// Several replies in a row, for commands that answer more than once (SUBSCRIBE with
    /// several channels).
    Sequence(Vec<Reply>),
}

impl Reply {
    pub const OK: Reply = Reply::Status(Cow::Borrowed("OK"));

    pub fn status(text: &'static str) -> Reply {
        Reply::Status(Cow::Borrowed(text))
    }

    pub fn bulk(value: impl Into<Bytes>) -> Reply {
        Reply::Bulk(value.into())
    }

    pub fn bulk_or_null(value: Option<impl Into<Bytes>>) -> Reply {
        value.map_or(Reply::Null, |v| Reply::Bulk(v.into()))
    }

    /// Bytes of text and strings the reply holds, its nested replies' included: what it keeps
    /// in memory while it waits to be sent, short of bookkeeping.
    pub fn payload_len(&self) -> usize {
        match self {
            Reply::Status(text) | Reply::Error(text) => text.len(),
            Reply::Bulk(bytes) | Reply::Verbatim(bytes) => bytes.len(),
            Reply::PrintedDouble(text) => text.len(),
            Reply::Integer(_) | Reply::Double(_) => 8,
            Reply::Null | Reply::NullArray | Reply::Bool(_) => 1,
            Reply::Bulks(bulks) | Reply::BulkMap(bulks) => bulks.bytes.len(),
            Reply::Array(items)
            | Reply::Set(items)
            | Reply::Push(items)
            | Reply::Sequence(items) => items.iter().map(Reply::payload_len).sum(),
            Reply::Map(pairs) => pairs
                .iter()
                .map(|(key, value)| key.payload_len() + value.payload_len())
                .sum(),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the encoding of this reply to `out`.
    pub fn encode(&self, out: &mut BytesMut, resp3: bool) {
        match self {
            Reply::Status(text) => line(out, b'+', text.as_bytes()),
            Reply::Error(text) => line(out, b'-', text.as_bytes()),
            Reply::Integer(n) => int_line(out, b':', *n),
            Reply::Bulk(data) => bulk(out, b'$', data),
            Reply::Null if resp3 => out.put_slice(b"_\r\n"),
            Reply::Null => out.put_slice(b"$-1\r\n"),
            Reply::NullArray if resp3 => out.put_slice(b"_\r\n"),
            Reply::NullArray => out.put_slice(b"*-1\r\n"),
            Reply::Array(items) => aggregate(out, b'*', items, resp3),
            Reply::Bulks(bulks) => {
                int_line(out, b'*', bulks.len() as i64);
                bulks.encode_items(out);
            }
            Reply::BulkMap(bulks) if resp3 => {
                int_line(out, b'%', (bulks.len() / 2) as i64);
                bulks.encode_items(out);
            }
            Reply::BulkMap(bulks) => {
                int_line(out, b'*', bulks.len() as i64);
                bulks.encode_items(out);
            }
            Reply::Set(items) => aggregate(out, if resp3 { b'~' } else { b'*' }, items, resp3),
            Reply::Push(items) => aggregate(out, if resp3 { b'>' } else { b'*' }, items, resp3),
            Reply::Map(pairs) => {
                if resp3 {
                    int_line(out, b'%', pairs.len() as i64);
                } else {
                    int_line(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(out, resp3);
                    v.encode(out, resp3);
                }
            }
            Reply::Double(d) if resp3 => line(out, b',', format_double(*d).as_bytes()),
            Reply::Double(d) => bulk(out, b'$', format_double(*d).as_bytes()),
            Reply::PrintedDouble(text) if resp3 => line(out, b',', text.as_bytes()),
            Reply::PrintedDouble(text) => bulk(out, b'$', text.as_bytes()),
            Reply::Bool(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => int_line(out, b':', *b as i64),
            Reply::Verbatim(text) if resp3 => {
                int_line(out, b'=', text.len() as i64 + 4);
                out.put_slice(b"txt:");
                out.put_slice(text);
                out.put_slice(b"\r\n");
            }
            Reply::Verbatim(text) => bulk(out, b'$', text),
            Reply::Sequence(replies) => {
                for reply in replies {
                    reply.encode(out, resp3);
                }
            }
        }
    }
}

/// Byte strings kept in one buffer with the offset where each ends: a range read copies its
/// values into one allocation and its reply is encoded from there, with no reply, and no
/// reference count, per value (LRANGE 0 99 sends 100).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bulks {
    bytes: Bytes,
    ends: Vec<usize>,
}

impl Bulks {
    /// The strings `bytes[0..ends[0]]`, `bytes[ends[0]..ends[1]]`, ...; `None` unless the ends
    /// ascend within `bytes`.
    pub fn new(bytes: Bytes, ends: Vec<usize>) -> Option<Bulks> {
        let ascending = ends.windows(2).all(|w| w[0] <= w[1]);
        let within = ends.last().is_none_or(|&end| end <= bytes.len());
        (ascending && within).then_some(Bulks { bytes, ends })
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.spans().map(|span| &self.bytes[span])
    }

    /// Where each string lies in the buffer.
    fn spans(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| start..end)
    }

    fn encode_items(&self, out: &mut BytesMut) {
        out.reserve(self.bytes.len() + 8 * self.len());
        for item in self.iter() {
            bulk(out, b'$', item);
        }
    }

    /// Each string as `Bytes` of its own, sharing the buffer.
    pub fn to_items(&self) -> Vec<Bytes> {
        self.spans().map(|span| self.bytes.slice(span)).collect()
    }
}

impl From<i64> for Reply {
    fn from(n: i64) -> Self {
        Reply::Integer(n)
    }
}

/// A status or error line. A CR or LF inside would end the line early and corrupt the
/// stream, so they become spaces, as Redis does.
fn line(out: &mut BytesMut, prefix: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(prefix);
    let start = out.len();
    out.put_slice(text);
    for byte in &mut out[start..] {
        if *byte == b'\r' || *byte == b'\n' {
            *byte = b' ';
        }
    }
    out.put_slice(b"\r\n");
}

/// A line of a number: digits need none of [`line`]'s care.
fn int_line(out: &mut BytesMut, prefix: u8, n: i64) {
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(n).as_bytes();
    out.reserve(digits.len() + 3);
    out.put_u8(prefix);
    out.put_slice(digits);
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, prefix: u8, data: &[u8]) {
    let mut buffer = itoa::Buffer::new();
    let digits = buffer.format(data.len()).as_bytes();
    out.reserve(digits.len() + data.len() + 5);
    out.put_u8(prefix);
    out.put_slice(digits);
    out.put_slice(b"\r\n");
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

fn aggregate(out: &mut BytesMut, prefix: u8, items: &[Reply], resp3: bool) {
    int_line(out, prefix, items.len() as i64);
    for item in items {
        item.encode(out, resp3);
    }
}

/// Formats a double like C's `%.17g`, which Redis 7.0 uses for scores and RESP3 doubles.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Most scores are whole numbers, which `%.17g` prints as integers below 10^17 (and below
    // 2^53 each is exact). Rust's exact float formatting takes its big-number fallback for
    // them, which was a sixth of the CPU of a ZRANGE WITHSCORES.
    if d.fract() == 0.0 && d.abs() < 9_007_199_254_740_992.0 {
        return itoa::Buffer::new().format(d as i64).to_string();
    }
    if let Some(positional) = format_fraction(d) {
        return positional;
    }
    format_with_float_formatting(d)
}

/// Powers of ten that fit in a `u128`, for [`format_fraction`].
const POWERS_OF_TEN: [u128; 21] = {
    let mut powers = [1u128; 21];
    let mut i = 1;
    while i < powers.len() {
        powers[i] = powers[i - 1] * 10;
        i += 1;
    }
    powers
};

/// `%.17g` of a number with a fraction between 10^-4 and 10^16 (printed positionally), in
/// integer arithmetic: the value is `m / 2^s` exactly, so its 17 significant digits are
/// `m · 10^k / 2^s` rounded half to even, which fits a `u128` in that range. `None` outside
/// it. Rust's exact formatting of the same digits cost about 200 ns a number.
fn format_fraction(d: f64) -> Option<String> {
    let bits = d.abs().to_bits();
    let biased = (bits >> 52) as i32;
    if biased == 0 {
        return None;
    }
    let mantissa = u128::from(bits & ((1 << 52) - 1) | (1 << 52));
    let shift = 1075 - biased;
    if !(1..=100).contains(&shift) {
        return None;
    }
    let mut exponent = d.abs().log10().floor() as i32;
    let digits = loop {
        let scale = usize::try_from(16 - exponent).ok()?;
        let scaled = mantissa * POWERS_OF_TEN.get(scale)?;
        let (mut digits, rest) = (scaled >> shift, scaled & ((1 << shift) - 1));
        let half = 1u128 << (shift - 1);
        if rest > half || (rest == half && digits % 2 == 1) {
            digits += 1;
        }
        if digits >= POWERS_OF_TEN[17] {
            exponent += 1;
        } else if digits < POWERS_OF_TEN[16] {
            exponent -= 1;
        } else {
            break digits;
        }
    };
    if !(-4..17).contains(&exponent) {
        return None;
    }
    let digits = itoa::Buffer::new().format(digits).to_string();
    let sign = if d < 0.0 { "-" } else { "" };
    let positional = if exponent >= 0 {
        let (whole, fraction) = digits.split_at(exponent as usize + 1);
        format!("{sign}{whole}.{fraction}")
    } else {
        let zeros = "0".repeat((-exponent - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    };
    Some(trim_fraction_zeros(&positional).to_string())
}

/// `%.17g` through Rust's exact float formatting, for what the fast paths leave.
fn format_with_float_formatting(d: f64) -> String {
    let sci = format!("{:.16e}", d);
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..17).contains(&exponent) {
        let mantissa = trim_fraction_zeros(mantissa);
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        let decimals = (16 - exponent).max(0) as usize;
        trim_fraction_zeros(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn trim_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn encode(reply: &Reply, resp3: bool) -> String {
        let mut out = BytesMut::new();
        reply.encode(&mut out, resp3);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn resp2_and_resp3_encodings() {
        assert_eq!(encode(&Reply::OK, false), "+OK\r\n");
        assert_eq!(
            encode(&Reply::Error("ERR two\nlines\r".into()), false),
            "-ERR two lines \r\n"
        );
        assert_eq!(encode(&Reply::Integer(-12), false), ":-12\r\n");
        assert_eq!(encode(&Reply::bulk("ab"), false), "$2\r\nab\r\n");
        assert_eq!(encode(&Reply::Null, false), "$-1\r\n");
        assert_eq!(encode(&Reply::Null, true), "_\r\n");
        assert_eq!(encode(&Reply::NullArray, false), "*-1\r\n");
        let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Integer(1))]);
        assert_eq!(encode(&map, false), "*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(encode(&map, true), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(encode(&Reply::Double(1.5), false), "$3\r\n1.5\r\n");
        assert_eq!(encode(&Reply::Double(1.5), true), ",1.5\r\n");
        let printed = Reply::PrintedDouble("13.36138933897018433".into());
        assert_eq!(encode(&printed, false), "$20\r\n13.36138933897018433\r\n");
        assert_eq!(encode(&printed, true), ",13.36138933897018433\r\n");
        assert_eq!(encode(&Reply::Bool(true), true), "#t\r\n");
        assert_eq!(
            encode(&Reply::Verbatim(Bytes::from("x")), true),
            "=5\r\ntxt:x\r\n"
        );
        assert_eq!(
            encode(&Reply::Set(vec![Reply::Integer(1)]), true),
            "~1\r\n:1\r\n"
        );
        assert_eq!(encode(&Reply::Error("ERR x".into()), false), "-ERR x\r\n");
        let bulks = Bulks::new(Bytes::from("abcd"), vec![1, 1, 4]).unwrap();
        assert_eq!(bulks.to_items(), vec!["a", "", "bcd"]);
        assert_eq!(
            encode(&Reply::Bulks(bulks), true),
            "*3\r\n$1\r\na\r\n$0\r\n\r\n$3\r\nbcd\r\n"
        );
        assert_eq!(encode(&Reply::Bulks(Bulks::default()), false), "*0\r\n");
        let pairs = Reply::BulkMap(Bulks::new(Bytes::from("fv"), vec![1, 2]).unwrap());
        assert_eq!(encode(&pairs, false), "*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
        assert_eq!(encode(&pairs, true), "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
        assert_eq!(Bulks::new(Bytes::from("ab"), vec![2, 1]), None);
        assert_eq!(Bulks::new(Bytes::from("ab"), vec![3]), None);
        let push = Reply::Push(vec![Reply::bulk("message"), Reply::bulk("c")]);
        assert_eq!(encode(&push, true), ">2\r\n$7\r\nmessage\r\n$1\r\nc\r\n");
        assert_eq!(encode(&push, false), "*2\r\n$7\r\nmessage\r\n$1\r\nc\r\n");
        let two = Reply::Sequence(vec![Reply::Integer(1), Reply::Integer(2)]);
        assert_eq!(encode(&two, false), ":1\r\n:2\r\n");
    }

    /// The next number of a xorshift sequence, for sampling doubles.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn whole_numbers_print_as_the_float_formatting_does() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut samples = vec![1.0, -1.0, 1e16, 9007199254740991.0, -9007199254740991.0];
        for _ in 0..100_000 {
            let state = xorshift(&mut state);
            let magnitude =
                (state >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((state % 17) as i32);
            samples.push(magnitude.trunc().max(1.0) * if state & 1 == 0 { 1.0 } else { -1.0 });
        }
        for d in samples {
            assert_eq!(format_double(d), format_with_float_formatting(d), "{d}");
        }
        // Past 2^53 whole numbers take the float path, which gives their 17 digits.
        assert_eq!(format_double(9007199254740992.0), "9007199254740992");
        assert_eq!(
            format_double(123456789012345678.0),
            "1.2345678901234568e+17"
        );
    }

    #[test]
    fn fractions_print_as_the_float_formatting_does() {
        let mut state = 0x853c_49e6_748f_ea9bu64;
        let mut samples = vec![
            0.1,
            -0.1,
            1.1,
            1e-4,
            9.99999999999999e-5,
            0.5,
            2.5,
            1e16 + 0.5,
            9999999999999998.5,
            0.30000000000000004,
            1.0 / 3.0,
            123.456,
            -3.14243905e-3,
        ];
        for _ in 0..300_000 {
            let state = xorshift(&mut state);
            // Any bit pattern, and numbers spread over the positional range and its edges.
            samples.push(f64::from_bits(state));
            let scale = 10f64.powi((state % 24) as i32 - 6);
            samples.push((state >> 11) as f64 / (1u64 << 53) as f64 * scale);
            samples.push(-((state >> 30) as f64 + 0.5) * scale);
        }
        samples.retain(|d| d.is_finite() && d.fract() != 0.0);
        let fast = samples.iter().filter(|d| format_fraction(**d).is_some());
        assert!(
            fast.count() > samples.len() / 2,
            "the integer path took too few"
        );
        for d in samples {
            assert_eq!(format_double(d), format_with_float_formatting(d), "{d:e}");
        }
    }

    #[test]
    fn doubles_print_like_percent_17g() {
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(-3.14243905e8), "-314243905");
        assert_eq!(format_double(1e17), "1e+17");
        assert_eq!(format_double(1.5e-5), "1.5e-05");
        assert_eq!(
            format_double(2.0f64.sqrt() * 1e-7),
            "1.4142135623730952e-07"
        );
        assert_eq!(format_double(123456.5), "123456.5");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
    }
}
