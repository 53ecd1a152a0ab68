//! Exact decimal addition for INCRBYFLOAT and HINCRBYFLOAT.
//!
//! Redis adds in `long double` and prints with `%.17Lf`, trimming zeros, so `0.1 + 0.2` reads
//! back as `0.3`. Doubles cannot do that (`0.30000000000000004`); adding the decimal texts
//! exactly and rounding to 17 decimals gives Redis's answer for every input that fits. Inputs
//! that do not (huge exponents) fall back to doubles.

/// `mantissa × 10^-scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    mantissa: i128,
    scale: u32,
}

/// Digits kept after the point, as Redis's `%.17Lf`.
const DECIMALS: u32 = 17;
const MAX_SCALE: u32 = 40;

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

fn parse(text: &str) -> Option<Decimal> {
    let (number, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (negative, digits) = match number.as_bytes().first()? {
        b'-' => (true, &number[1..]),
        b'+' => (false, &number[1..]),
        _ => (false, number),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut mantissa: i128 = 0;
    for b in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa.checked_mul(10)?.checked_add((b - b'0') as i128)?;
    }
    let mut scale = fraction.len() as i64 - exponent as i64;
    if scale < 0 {
        mantissa = mantissa.checked_mul(pow10(u32::try_from(-scale).ok()?)?)?;
        scale = 0;
    }
    let scale = u32::try_from(scale).ok().filter(|&s| s <= MAX_SCALE)?;
    Some(Decimal {
        mantissa: if negative { -mantissa } else { mantissa },
        scale,
    })
}

fn add(a: Decimal, b: Decimal) -> Option<Decimal> {
    let scale = a.scale.max(b.scale);
    let a = a.mantissa.checked_mul(pow10(scale - a.scale)?)?;
    let b = b.mantissa.checked_mul(pow10(scale - b.scale)?)?;
    Some(Decimal {
        mantissa: a.checked_add(b)?,
        scale,
    })
}

fn format(value: Decimal) -> String {
    let mut mantissa = value.mantissa;
    let mut scale = value.scale;
    if scale > DECIMALS {
        // Round half away from zero to 17 decimals.
        let divisor = 10i128.pow(scale - DECIMALS);
        let (quotient, remainder) = (mantissa / divisor, mantissa % divisor);
        mantissa = quotient + (remainder.abs() * 2 >= divisor) as i128 * mantissa.signum();
        scale = DECIMALS;
    }
    let digits = mantissa.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    let fraction = fraction.trim_end_matches('0');
    let sign = if mantissa < 0 { "-" } else { "" };
    if fraction.is_empty() {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{fraction}")
    }
}

/// `current + increment` as Redis prints it, when both are decimals that fit; `None` to let
/// the caller add doubles instead.
fn add_texts(current: &str, increment: &str) -> Option<String> {
    Some(format(add(parse(current)?, parse(increment)?)?))
}

/// Why INCRBYFLOAT-style addition failed.
#[derive(Debug, PartialEq, Eq)]
pub enum FloatError {
    CurrentNotFloat,
    IncrementNotFloat,
    NotFinite,
}

/// Adds the float text `increment` to the stored float text `current` (missing: 0) the way
/// Redis does, returning the text to store and reply.
pub fn increment(current: Option<&[u8]>, increment: &[u8]) -> Result<String, FloatError> {
    use crate::types::string::parse_strict_f64;
    let current = current.unwrap_or(b"0");
    let old = parse_strict_f64(current).ok_or(FloatError::CurrentNotFloat)?;
    let delta = parse_strict_f64(increment).ok_or(FloatError::IncrementNotFloat)?;
    let sum = old + delta;
    if !sum.is_finite() {
        return Err(FloatError::NotFinite);
    }
    let texts = (std::str::from_utf8(current), std::str::from_utf8(increment));
    if let (Ok(a), Ok(b)) = texts {
        if let Some(exact) = add_texts(a, b) {
            return Ok(exact);
        }
    }
    Ok(format!("{sum}"))
}

#[cfg(test)]
mod tests {
    use super::add_texts;

    #[test]
    fn sums_read_like_redis() {
        assert_eq!(add_texts("0.1", "0.2").as_deref(), Some("0.3"));
        assert_eq!(add_texts("10.50", "0.1").as_deref(), Some("10.6"));
        assert_eq!(add_texts("5.0e3", "2.0e2").as_deref(), Some("5200"));
        assert_eq!(add_texts("3", "-5").as_deref(), Some("-2"));
        assert_eq!(
            add_texts("0", "-0.000000000000000001").as_deref(),
            Some("0")
        );
        assert_eq!(
            add_texts("1", "0.000000000000000005").as_deref(),
            Some("1.00000000000000001")
        );
        assert_eq!(add_texts("-1.5", "1.5").as_deref(), Some("0"));
        assert_eq!(add_texts(".5", "1e-1").as_deref(), Some("0.6"));
        assert_eq!(add_texts("1e300", "1"), None, "falls back to doubles");
        assert_eq!(add_texts("abc", "1"), None);
    }
}
