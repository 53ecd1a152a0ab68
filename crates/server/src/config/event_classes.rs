//! The keyspace-event classes of `notify-keyspace-events`, as Redis 7.0 spells them.

/// Event classes, as letters in `notify-keyspace-events`.
pub const KEYSPACE: u32 = 1;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
/// Never fires: Shale never evicts.
pub const EVICTED: u32 = 1 << 9;
/// Streams: `xadd`, `xtrim`, `xgroup-create`, ...
pub const STREAM: u32 = 1 << 10;
/// Module events; Shale has no modules.
pub const MODULE: u32 = 1 << 11;
/// `new`: a key was created.
pub const NEW: u32 = 1 << 12;
/// `keymiss`: a read found no key.
pub const KEY_MISS: u32 = 1 << 13;
/// What `A` stands for; as in Redis, it leaves out `n` and `m`.
const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The type classes and `n` in the order Redis prints them, then the others.
const CLASS_LETTERS: [(char, u32); 11] = [
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('d', MODULE),
    ('n', NEW),
];
const OTHER_LETTERS: [(char, u32); 3] = [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)];

/// Parses `notify-keyspace-events` as Redis 7.0 does; `None` for a letter it does not know.
pub fn parse_classes(text: &str) -> Option<u32> {
    text.chars().try_fold(0, |flags, c| match c {
        'A' => Some(flags | ALL),
        c => CLASS_LETTERS
            .iter()
            .chain(&OTHER_LETTERS)
            .find(|(letter, _)| *letter == c)
            .map(|(_, flag)| flags | flag),
    })
}

/// The spelling of `flags` that CONFIG GET shows, as Redis 7.0 writes it: `A` stands for all
/// of its classes, and then, as in Redis, `n` goes unprinted.
pub fn format_classes(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        let set = CLASS_LETTERS.iter().filter(|(_, flag)| flags & flag != 0);
        out.extend(set.map(|(letter, _)| letter));
    }
    let set = OTHER_LETTERS.iter().filter(|(_, flag)| flags & flag != 0);
    out.extend(set.map(|(letter, _)| letter));
    out
}

/// The error for a class letter Redis does not know, in Redis's words.
pub const INVALID_CLASSES: &str = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_letters_round_trip() {
        assert_eq!(
            parse_classes("KEA").map(format_classes).as_deref(),
            Some("AKE")
        );
        assert_eq!(
            parse_classes("Elg").map(format_classes).as_deref(),
            Some("glE")
        );
        assert_eq!(parse_classes(""), Some(0));
        assert_eq!(parse_classes("Kq"), None);
        // Spellings Redis 7.0's CONFIG GET gives back.
        for (set, get) in [
            ("$lshzxeKE", "$lshzxeKE"),
            ("En", "nE"),
            ("Kt", "tK"),
            ("AKEmn", "AKEm"),
            ("KEg$lshzxetd", "AKE"),
            ("x$", "$x"),
            ("gd", "gd"),
        ] {
            assert_eq!(parse_classes(set).map(format_classes).as_deref(), Some(get));
        }
    }
}
