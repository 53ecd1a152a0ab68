//! Script flags: what a function (`redis.register_function{flags = ...}`) or a script with a
//! shebang (`#!lua flags=no-writes`) declares about itself, as Redis 7.0 names them.

/// A set of script flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScriptFlags(u8);

impl ScriptFlags {
    pub const NO_WRITES: ScriptFlags = ScriptFlags(1);
    /// Shale has no `maxmemory`, so no script is ever refused for memory.
    pub const ALLOW_OOM: ScriptFlags = ScriptFlags(1 << 1);
    /// A Shale replica always serves stale data (`replica-serve-stale-data yes`).
    pub const ALLOW_STALE: ScriptFlags = ScriptFlags(1 << 2);
    pub const NO_CLUSTER: ScriptFlags = ScriptFlags(1 << 3);
    pub const ALLOW_CROSS_SLOT: ScriptFlags = ScriptFlags(1 << 4);

    /// In Redis's order (`scripts_flags_def`), which FUNCTION LIST follows.
    pub const NAMES: [(ScriptFlags, &'static str); 5] = [
        (ScriptFlags::NO_WRITES, "no-writes"),
        (ScriptFlags::ALLOW_OOM, "allow-oom"),
        (ScriptFlags::ALLOW_STALE, "allow-stale"),
        (ScriptFlags::NO_CLUSTER, "no-cluster"),
        (ScriptFlags::ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];

    /// The flag `name` names exactly (a shebang's `flags=`).
    pub fn named(name: &[u8]) -> Option<ScriptFlags> {
        Self::NAMES
            .iter()
            .find(|(_, n)| n.as_bytes() == name)
            .map(|(flag, _)| *flag)
    }

    pub fn with(self, other: ScriptFlags) -> ScriptFlags {
        ScriptFlags(self.0 | other.0)
    }

    pub fn contains(self, other: ScriptFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .filter(move |(flag, _)| self.contains(*flag))
            .map(|(_, name)| name)
    }
}

/// What an EVAL script's first line declares. Without a shebang a script runs in Redis's
/// compatibility mode: it may write, and only its commands say whether it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shebang {
    pub flags: ScriptFlags,
    /// Bytes of the first line, without its newline: the script's code starts there, so that
    /// line numbers stay those of the text the client sent.
    pub len: usize,
}

/// Reads an EVAL script's shebang (`#!lua [flags=f1,f2]`), as Redis's
/// `evalExtractShebangFlags` does; `Ok(None)` for a script without one.
pub fn eval_shebang(source: &[u8]) -> Result<Option<Shebang>, String> {
    if !source.starts_with(b"#!") {
        return Ok(None);
    }
    let Some(len) = source.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let parts = match shale_protocol::split_args(&source[..len]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err("Invalid engine in script shebang".into()),
    };
    if parts[0] != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(&parts[0])
        ));
    }
    let mut flags = ScriptFlags::default();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        // `flags=` alone declares none (`sdssplitlen` of an empty string).
        for name in list.split(|&b| b == b',').filter(|_| !list.is_empty()) {
            let flag = ScriptFlags::named(name).ok_or_else(|| {
                format!(
                    "Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(name)
                )
            })?;
            flags = flags.with(flag);
        }
    }
    Ok(Some(Shebang { flags, len }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_parse_as_redis_parses_them() {
        assert_eq!(eval_shebang(b"return 1").unwrap(), None);
        let read = eval_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert_eq!(
            read,
            Some(Shebang {
                flags: ScriptFlags::NO_WRITES.with(ScriptFlags::ALLOW_OOM),
                len: 31
            })
        );
        assert_eq!(
            eval_shebang(b"#!lua\nreturn 1").unwrap().map(|s| s.flags),
            Some(ScriptFlags::default())
        );
        assert_eq!(
            eval_shebang(b"#!lua").unwrap_err(),
            "Invalid script shebang"
        );
        assert_eq!(
            eval_shebang(b"#!python\n").unwrap_err(),
            "Unexpected engine in script shebang: #!python"
        );
        assert_eq!(
            eval_shebang(b"#!lua name=x\n").unwrap_err(),
            "Unknown lua shebang option: name=x"
        );
        assert_eq!(
            eval_shebang(b"#!lua flags=no-writes,NO-CLUSTER\n").unwrap_err(),
            "Unexpected flag in script shebang: NO-CLUSTER"
        );
        assert_eq!(
            eval_shebang(b"#!lua flags=\n").unwrap().map(|s| s.flags),
            Some(ScriptFlags::default())
        );
        assert_eq!(
            eval_shebang(b"#!lua flags=no-writes,\n").unwrap_err(),
            "Unexpected flag in script shebang: "
        );
    }
}
