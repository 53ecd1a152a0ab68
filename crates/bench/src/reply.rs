//! Just enough RESP2/RESP3 to find where a reply ends and whether it is an error.

/// The end of the reply starting at `pos`, and whether it is an error; `None` if incomplete.
pub fn reply_end(buf: &[u8], pos: usize) -> Option<(usize, bool)> {
    let kind = *buf.get(pos)?;
    let line_end = pos + buf[pos..].windows(2).position(|w| w == b"\r\n")?;
    let header = std::str::from_utf8(&buf[pos + 1..line_end]).ok()?;
    let after = line_end + 2;
    match kind {
        b'+' | b':' | b'_' | b',' | b'#' | b'(' => Some((after, false)),
        b'-' => Some((after, true)),
        b'$' | b'=' | b'!' => {
            let len: i64 = header.parse().ok()?;
            if len < 0 {
                return Some((after, false));
            }
            let end = after + len as usize + 2;
            (buf.len() >= end).then_some((end, kind == b'!'))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count: i64 = header.parse().ok()?;
            let items = if matches!(kind, b'%' | b'|') {
                count * 2
            } else {
                count
            };
            let mut at = after;
            for _ in 0..items.max(0) {
                at = reply_end(buf, at)?.0;
            }
            Some((at, false))
        }
        _ => Some((after, true)),
    }
}

#[cfg(test)]
mod tests {
    use super::reply_end;

    #[test]
    fn finds_reply_ends() {
        assert_eq!(reply_end(b"+OK\r\n", 0), Some((5, false)));
        assert_eq!(reply_end(b"-ERR x\r\n", 0), Some((8, true)));
        assert_eq!(reply_end(b"$3\r\nabc\r\n:1\r\n", 0), Some((9, false)));
        assert_eq!(reply_end(b"$3\r\nab", 0), None);
        assert_eq!(reply_end(b"$-1\r\n", 0), Some((5, false)));
        assert_eq!(reply_end(b"*2\r\n:1\r\n$1\r\na\r\n", 0), Some((15, false)));
        assert_eq!(reply_end(b"*2\r\n:1\r\n", 0), None);
        assert_eq!(reply_end(b"%1\r\n+a\r\n:1\r\n", 0), Some((12, false)));
        assert_eq!(reply_end(b"*-1\r\n", 0), Some((5, false)));
    }
}
