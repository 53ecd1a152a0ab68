//! Glob-style matching with the rules of Redis's `stringmatchlen` (KEYS, SCAN MATCH, CONFIG GET).

/// Whether `text` matches `pattern` (`*`, `?`, `[...]` with ranges and `^`, `\` escapes).
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, text index it stands for).
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    backtrack = Some((p, t));
                    continue;
                }
                b'?' => Some(p + 1),
                b'[' => match_class(pattern, p, text[t], nocase),
                b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], text[t]).then_some(p + 2),
                c => eq(c, text[t]).then_some(p + 1),
            }
        } else {
            None
        };
        match step {
            Some(next) => {
                p = next;
                t += 1;
            }
            None => match backtrack {
                Some((bp, bt)) => {
                    p = bp;
                    t = bt + 1;
                    backtrack = Some((bp, bt + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches one character against the class starting at `pattern[start] == b'['`; returns the
/// index after the class on a match.
fn match_class(pattern: &[u8], start: usize, c: u8, nocase: bool) -> Option<usize> {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = fold(c);
    let mut i = start + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    while i < pattern.len() && pattern[i] != b']' {
        if pattern[i] == b'\\' && i + 1 < pattern.len() {
            matched |= fold(pattern[i + 1]) == c;
            i += 2;
        } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']' {
            let (mut lo, mut hi) = (fold(pattern[i]), fold(pattern[i + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            matched |= (lo..=hi).contains(&c);
            i += 3;
        } else {
            matched |= fold(pattern[i]) == c;
            i += 1;
        }
    }
    // An unterminated class ends the pattern, as in Redis.
    (matched != negate).then_some(i.min(pattern.len() - 1) + 1)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    fn m(p: &str, t: &str) -> bool {
        glob_match(p.as_bytes(), t.as_bytes(), false)
    }

    #[test]
    fn redis_glob_rules() {
        assert!(m("*", "anything"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("user:*:name", "user:42:name"));
        assert!(!m("user:*:name", "user:42:age"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("*a*b*", "xxaxxbxx"));
        assert!(m("", ""));
        assert!(!m("", "a"));
        assert!(glob_match(b"HELLO", b"hello", true));
    }
}
