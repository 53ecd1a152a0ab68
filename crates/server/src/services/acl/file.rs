//! The ACL file (`aclfile`): one `user <name> <rules>` line per user, read by ACL LOAD and at
//! start, written by ACL SAVE.

use std::io::Write;
use std::path::Path;

use bytes::Bytes;

use super::Acl;

/// The file's non-blank lines with their numbers, split on single spaces as Redis splits
/// them (no quoting: rules are written without spaces).
pub fn read(path: &Path) -> Result<Vec<(usize, Vec<Bytes>)>, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{}': {}",
            path.display(),
            io_reason(&e)
        )
    })?;
    Ok(text
        .split(|&b| b == b'\n')
        .enumerate()
        .filter_map(|(i, line)| {
            let line = trim(line);
            (!line.is_empty()).then(|| {
                let args = line
                    .split(|&b| b == b' ')
                    .map(Bytes::copy_from_slice)
                    .collect();
                (i + 1, args)
            })
        })
        .collect())
}

/// Writes every user to `path`, through a temporary file renamed over it.
pub fn save(acl: &Acl, path: &Path) -> std::io::Result<()> {
    let mut text = Vec::new();
    for user in acl.users() {
        text.extend_from_slice(&acl.describe(&user));
        text.push(b'\n');
    }
    let temporary = path.with_file_name(format!(
        "{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(&text)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

/// The part of an I/O error Redis prints (`strerror`), without Rust's `(os error N)`.
fn io_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let keep = |b: &u8| !b" \t\r\n".contains(b);
    let start = line.iter().position(keep).unwrap_or(line.len());
    let end = line.iter().rposition(keep).map_or(start, |i| i + 1);
    &line[start..end]
}
