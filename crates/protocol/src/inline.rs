//! Splitting of inline commands, with the quoting rules of Redis's `sdssplitargs`.

/// Splits one line into arguments with redis-cli's quoting rules (also used for config files);
/// `None` means unbalanced quotes.
pub fn split_inline_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        match line[i] {
            b'"' => i = read_double_quoted(line, i + 1, &mut current)?,
            b'\'' => i = read_single_quoted(line, i + 1, &mut current)?,
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    current.push(line[i]);
                    i += 1;
                }
            }
        }
        args.push(current);
    }
}

/// Reads up to the closing quote, which must be followed by a space or the end of the line.
fn read_double_quoted(line: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    while i < line.len() {
        match line[i] {
            b'\\'
                if i + 3 < line.len()
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit() =>
            {
                out.push(hex_value(line[i + 2]) * 16 + hex_value(line[i + 3]));
                i += 4;
            }
            b'\\' if i + 1 < line.len() => {
                out.push(match line[i + 1] {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 8,
                    b'a' => 7,
                    other => other,
                });
                i += 2;
            }
            b'"' => return closing_quote_end(line, i),
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

fn read_single_quoted(line: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    while i < line.len() {
        match line[i] {
            b'\\' if i + 1 < line.len() && line[i + 1] == b'\'' => {
                out.push(b'\'');
                i += 2;
            }
            b'\'' => return closing_quote_end(line, i),
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    None
}

fn closing_quote_end(line: &[u8], quote: usize) -> Option<usize> {
    match line.get(quote + 1) {
        None => Some(quote + 1),
        Some(c) if c.is_ascii_whitespace() => Some(quote + 1),
        Some(_) => None,
    }
}

fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Option<Vec<String>> {
        split_inline_args(s.as_bytes()).map(|args| {
            args.into_iter()
                .map(|a| String::from_utf8_lossy(&a).into_owned())
                .collect()
        })
    }

    #[test]
    fn quoting_rules_match_sdssplitargs() {
        assert_eq!(split("  set  a b ").unwrap(), ["set", "a", "b"]);
        assert_eq!(
            split("set \"x\\x41\\ty\" 'it\\'s'").unwrap(),
            ["set", "xA\ty", "it's"]
        );
        assert_eq!(split("\"\"").unwrap(), [""]);
        assert_eq!(split("\"abc\"def"), None);
        assert_eq!(split("'abc"), None);
        assert_eq!(split("").unwrap(), Vec::<String>::new());
    }
}
