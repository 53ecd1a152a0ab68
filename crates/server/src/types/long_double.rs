//! INCRBYFLOAT and HINCRBYFLOAT arithmetic as Redis does it: in C's `long double`, printed
//! with `%.17Lf` and trailing zeros trimmed. So `0.1 + 0.2` reads back as `0.3` but
//! `12345.678` as `12345.67799999999999994`, and `1e400` is a float. Rust has no `long double`,
//! so the arithmetic is a small C file (`long_double.c`) built with the crate.

use std::os::raw::{c_char, c_int, c_long};

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
}

/// Room for the longest sum (`%.17Lf` of the largest `long double`), as Redis's
/// `MAX_LONG_DOUBLE_CHARS`.
const OUT_LIMIT: usize = 5 * 1024;

/// What a text is as a Redis `long double` (`string2ld`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Float {
    Invalid,
    Finite,
    Infinite,
}

pub fn classify(text: &[u8]) -> Float {
    // SAFETY: the pointer and length describe `text`, which the call only reads.
    match unsafe { shale_ld_classify(text.as_ptr().cast(), text.len()) } {
        1 => Float::Finite,
        2 => Float::Infinite,
        _ => Float::Invalid,
    }
}

/// Why an addition failed.
#[derive(Debug, PartialEq, Eq)]
pub enum FloatError {
    CurrentNotFloat,
    IncrementNotFloat,
    NotFinite,
}

/// `current + increment` (a missing `current` is 0) as Redis stores and replies it.
pub fn add(current: Option<&[u8]>, increment: &[u8]) -> Result<String, FloatError> {
    let mut out = vec![0u8; OUT_LIMIT];
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
        len if len < 0 => Err(FloatError::NotFinite),
        len => {
            out.truncate(len as usize);
            // printf wrote digits, a sign and a point only.
            Ok(String::from_utf8_lossy(&out).into_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(current: &str, increment: &str) -> Result<String, FloatError> {
        add(Some(current.as_bytes()), increment.as_bytes())
    }

    #[test]
    fn sums_read_as_redis_prints_them() {
        assert_eq!(sum("0.1", "0.2").as_deref(), Ok("0.3"));
        assert_eq!(sum("10.50", "0.1").as_deref(), Ok("10.6"));
        assert_eq!(sum("5.0e3", "2.0e2").as_deref(), Ok("5200"));
        assert_eq!(sum("3", "-3").as_deref(), Ok("0"));
        assert_eq!(sum("0", "-0.0000001").as_deref(), Ok("-0.0000001"));
        assert_eq!(
            add(None, b"12345.678").as_deref(),
            Ok("12345.67799999999999994")
        );
        assert_eq!(sum("0", "5e-18").as_deref(), Ok("0"));
        assert_eq!(sum("0x10", "1").as_deref(), Ok("17"), "strtold reads hex");
        assert!(sum("1e300", "1").is_ok_and(|s| s.len() == 301));
    }

    #[test]
    fn bad_texts_and_infinite_sums_fail() {
        assert_eq!(sum("abc", "1"), Err(FloatError::CurrentNotFloat));
        assert_eq!(sum("1", " 1"), Err(FloatError::IncrementNotFloat));
        assert_eq!(sum("1", "1e-5000"), Err(FloatError::IncrementNotFloat));
        assert_eq!(sum("1", "inf"), Err(FloatError::NotFinite));
        assert_eq!(sum("1e4932", "1e4932"), Err(FloatError::NotFinite));
        assert_eq!(classify(b"1e400"), Float::Finite);
        assert_eq!(classify(b"-Infinity"), Float::Infinite);
        assert_eq!(classify(b"nan"), Float::Invalid);
        assert_eq!(classify(b""), Float::Invalid);
        assert_eq!(
            classify(b"1\0"),
            Float::Invalid,
            "all of it must be the number"
        );
        assert_eq!(classify(b"\0"), Float::Invalid);
    }
}
