//! Numbers as Redis reads and prints them, through the C library Redis uses (`numbers.c`):
//! scores and weights are read by `strtod` ([`parse_double`], [`parse_range_double`]),
//! timeouts as `long double` seconds ([`parse_timeout_ms`]), and INCRBYFLOAT and HINCRBYFLOAT
//! add in C's `long double`, printed with `%.17Lf` and trailing
//! zeros trimmed, so `0.1 + 0.2` reads back as `0.3` but `12345.678` as
//! `12345.67799999999999994`, and `1e400` is a float. Rust has no `long double`, and its float
//! parser knows no hex floats (`0x1p3`), which `strtod` reads.

use std::os::raw::{c_char, c_int, c_long, c_longlong};

extern "C" {
    fn shale_ld_classify(text: *const c_char, len: usize) -> c_int;
    fn shale_ld_add(
        current: *const c_char,
        current_len: usize,
        increment: *const c_char,
        increment_len: usize,
        out: *mut c_char,
        out_len: usize,
    ) -> c_long;
    fn shale_double(text: *const c_char, len: usize, out: *mut f64) -> c_int;
    fn shale_format_g17(value: f64, out: *mut c_char, cap: usize);
    fn shale_format_human(value: f64, out: *mut c_char, cap: usize);
    fn shale_format_f(value: f64, out: *mut c_char, cap: usize);
    fn shale_timeout_ms(text: *const c_char, len: usize, ms: *mut c_longlong) -> c_int;
    fn shale_range_double(text: *const c_char, len: usize, out: *mut f64) -> c_int;
    fn shale_sort_double(text: *const c_char, len: usize, out: *mut f64) -> c_int;
}

/// A double as Redis's `getDoubleFromObject` reads it (scores, weights): all of the text, no
/// leading space, `inf` allowed, NaN refused, and so is a number `strtod` finds out of range
/// (too large, or so small it reads as zero).
/// `value` as C's `printf("%.17g")` prints it, as Redis's DEBUG DIGEST mixes in a score.
pub fn format_g17(value: f64) -> String {
    formatted(value, shale_format_g17)
}

/// `value` as Redis replies a coordinate (`addReplyHumanLongDouble`): `%.17Lf` of it as a
/// `long double`, trailing zeros trimmed.
pub fn format_human(value: f64) -> String {
    formatted(value, shale_format_human)
}

/// `value` as C's `printf("%f")` prints it.
pub fn format_f(value: f64) -> String {
    formatted(value, shale_format_f)
}

fn formatted(value: f64, format: unsafe extern "C" fn(f64, *mut c_char, usize)) -> String {
    // The longest is `%f` of the largest double: 309 digits, a sign, a point and 6 decimals.
    let mut buf = [0 as c_char; 400];
    // SAFETY: the buffer outlives the call, which writes at most `cap` bytes with the NUL.
    unsafe { format(value, buf.as_mut_ptr(), buf.len()) };
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn parse_double(text: &[u8]) -> Option<f64> {
    let mut value = 0.0;
    // SAFETY: `text` is read within its length, `value` is a live f64 the call writes.
    let ok = unsafe { shale_double(text.as_ptr().cast(), text.len(), &mut value) };
    (ok == 1).then_some(value)
}

/// A score range bound as Redis's `zslParseRange` reads it (after any `(`): `strtod` with only
/// NaN and text after the number refused, so leading spaces are skipped, an empty bound is 0
/// and `1e400` is infinity.
pub fn parse_range_double(text: &[u8]) -> Option<f64> {
    let mut value = 0.0;
    // SAFETY: as in `parse_double`.
    let ok = unsafe { shale_range_double(text.as_ptr().cast(), text.len(), &mut value) };
    (ok == 1).then_some(value)
}

/// A value SORT sorts by, as Redis's `sortCommand` reads it: `strtod` with NaN, text after the
/// number and a number out of range refused, so leading spaces are skipped and an empty value
/// is 0.
pub fn parse_sort_double(text: &[u8]) -> Option<f64> {
    let mut value = 0.0;
    // SAFETY: as in `parse_double`.
    let ok = unsafe { shale_sort_double(text.as_ptr().cast(), text.len(), &mut value) };
    (ok == 1).then_some(value)
}

/// Why a blocking command's timeout is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutError {
    NotFloat,
    OutOfRange,
    Negative,
}

/// A blocking command's timeout in seconds, as Redis's `getTimeoutFromObjectOrReply` reads it:
/// a `long double`, in milliseconds rounded up (so `-0.0001` is 0, no limit).
pub fn parse_timeout_ms(text: &[u8]) -> Result<u64, TimeoutError> {
    let mut ms: c_longlong = 0;
    // SAFETY: `text` is read within its length, `ms` is a live integer the call writes.
    match unsafe { shale_timeout_ms(text.as_ptr().cast(), text.len(), &mut ms) } {
        1 => u64::try_from(ms).map_err(|_| TimeoutError::Negative),
        2 => Err(TimeoutError::OutOfRange),
        3 => Err(TimeoutError::Negative),
        _ => Err(TimeoutError::NotFloat),
    }
}

/// Room for the longest sum (`%.17Lf` of the largest `long double`), as Redis's
/// `MAX_LONG_DOUBLE_CHARS`.
const OUT_LIMIT: usize = 5 * 1024;

/// What a text is as a Redis `long double` (`string2ld`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDouble {
    Invalid,
    Finite,
    Infinite,
}

/// Whether `text` is a `long double` as Redis reads one, and a finite one.
pub fn classify_long_double(text: &[u8]) -> LongDouble {
    // SAFETY: the pointer and length describe `text`, which the call only reads.
    match unsafe { shale_ld_classify(text.as_ptr().cast(), text.len()) } {
        1 => LongDouble::Finite,
        2 => LongDouble::Infinite,
        _ => LongDouble::Invalid,
    }
}

/// Why an addition failed.
#[derive(Debug, PartialEq, Eq)]
pub enum FloatError {
    CurrentNotFloat,
    IncrementNotFloat,
    NotFinite,
}

/// `current + increment` (a missing `current` is 0) in `long double`, as Redis stores and
/// replies it.
pub fn add_long_doubles(current: Option<&[u8]>, increment: &[u8]) -> Result<String, FloatError> {
    let mut out = [0u8; OUT_LIMIT];
    let (current_ptr, current_len) =
        current.map_or((std::ptr::null(), 0), |c| (c.as_ptr(), c.len()));
    // SAFETY: every pointer and length describes a live buffer; the C side reads the inputs
    // and writes at most `out.len()` bytes to `out`.
    let len = unsafe {
        shale_ld_add(
            current_ptr.cast(),
            current_len,
            increment.as_ptr().cast(),
            increment.len(),
            out.as_mut_ptr().cast(),
            out.len(),
        )
    };
    match len {
        -1 => Err(FloatError::CurrentNotFloat),
        -2 => Err(FloatError::IncrementNotFloat),
        -3 => Err(FloatError::NotFinite),
        // printf wrote digits, a sign and a point only.
        len => match usize::try_from(len) {
            Ok(len) => Ok(String::from_utf8_lossy(&out[..len]).into_owned()),
            // Too long for OUT_LIMIT, which holds the longest finite long double: never.
            Err(_) => Err(FloatError::NotFinite),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(current: &str, increment: &str) -> Result<String, FloatError> {
        add_long_doubles(Some(current.as_bytes()), increment.as_bytes())
    }

    #[test]
    fn sums_read_as_redis_prints_them() {
        assert_eq!(sum("0.1", "0.2").as_deref(), Ok("0.3"));
        assert_eq!(sum("10.50", "0.1").as_deref(), Ok("10.6"));
        assert_eq!(sum("5.0e3", "2.0e2").as_deref(), Ok("5200"));
        assert_eq!(sum("3", "-3").as_deref(), Ok("0"));
        assert_eq!(sum("0", "-0.0000001").as_deref(), Ok("-0.0000001"));
        assert_eq!(sum("0", "5e-18").as_deref(), Ok("0"));
        assert_eq!(sum("0x10", "1").as_deref(), Ok("17"), "strtold reads hex");
    }

    /// What x86-64's 80-bit `long double` gives, as Redis does there.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn extended_precision_shows_as_in_redis() {
        assert_eq!(
            add_long_doubles(None, b"12345.678").as_deref(),
            Ok("12345.67799999999999994")
        );
        assert!(sum("1e300", "1").is_ok_and(|s| s.len() == 301));
        assert_eq!(sum("1e4932", "1e4932"), Err(FloatError::NotFinite));
        assert_eq!(classify_long_double(b"1e400"), LongDouble::Finite);
    }

    #[test]
    fn doubles_read_like_get_double_from_object() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"-.5"), Some(-0.5));
        assert_eq!(parse_double(b"0x10"), Some(16.0), "strtod reads hex");
        assert_eq!(parse_double(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"0e-999"), Some(0.0));
        assert!(
            parse_double(b"1e-310").is_some_and(|f| f > 0.0),
            "subnormals stay"
        );
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"1\0",
            b"nan",
            b"1e999",
            b"-1e400",
            b"1e-400",
            b"infx",
            b"abc",
        ] {
            assert_eq!(
                parse_double(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn range_bounds_read_like_zsl_parse_range() {
        assert_eq!(parse_range_double(b""), Some(0.0));
        assert_eq!(parse_range_double(b" 1"), Some(1.0));
        assert_eq!(parse_range_double(b"1e400"), Some(f64::INFINITY));
        assert_eq!(
            parse_range_double(b"2\0x"),
            Some(2.0),
            "strtod stops at the NUL"
        );
        assert_eq!(parse_range_double(b"   "), None);
        assert_eq!(parse_range_double(b"1x"), None);
        assert_eq!(parse_range_double(b"nan"), None);
    }

    #[test]
    fn scores_print_as_c_prints_them_with_17_digits() {
        assert_eq!(format_g17(1.0), "1");
        assert_eq!(format_g17(0.1), "0.10000000000000001");
        assert_eq!(format_g17(1e20), "1e+20");
        assert_eq!(format_g17(f64::INFINITY), "inf");
        assert_eq!(format_g17(-0.0), "-0");
    }

    #[test]
    fn bad_texts_and_infinite_sums_fail() {
        assert_eq!(sum("abc", "1"), Err(FloatError::CurrentNotFloat));
        assert_eq!(sum("1", " 1"), Err(FloatError::IncrementNotFloat));
        assert_eq!(sum("1", "1e-5000"), Err(FloatError::IncrementNotFloat));
        assert_eq!(sum("1", "inf"), Err(FloatError::NotFinite));
        assert_eq!(classify_long_double(b"-Infinity"), LongDouble::Infinite);
        assert_eq!(classify_long_double(b"nan"), LongDouble::Invalid);
        assert_eq!(classify_long_double(b""), LongDouble::Invalid);
        assert_eq!(
            classify_long_double(b"1\0"),
            LongDouble::Invalid,
            "all of it must be the number"
        );
        assert_eq!(classify_long_double(b"\0"), LongDouble::Invalid);
    }
}
