//! Argument parsing shared by command families.

use bytes::Bytes;

use crate::error::Error;
use crate::types::string::{parse_strict_f64, parse_strict_i64};

pub fn int(arg: &[u8]) -> Result<i64, Error> {
    parse_strict_i64(arg).ok_or(Error::NotInteger)
}

/// A non-negative integer that fits a `usize`.
pub fn count(arg: &[u8]) -> Result<usize, Error> {
    usize::try_from(int(arg)?).map_err(|_| Error::NotInteger)
}

pub fn float(arg: &[u8]) -> Result<f64, Error> {
    parse_strict_f64(arg).ok_or(Error::NotFloat)
}

/// Case-insensitive comparison with an option name.
pub fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

pub fn text(arg: &Bytes) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// A database index for SELECT, MOVE and COPY ... DB.
pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, Error> {
    let index = int(arg)?;
    usize::try_from(index)
        .ok()
        .filter(|&i| i < databases)
        .ok_or_else(|| Error::msg("DB index is out of range"))
}
