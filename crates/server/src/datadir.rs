//! The data directory's layout: which database directory is current, the copy a full sync or
//! an RDB import is writing beside it, and the replication ID that survives restarts.
//!
//! `CURRENT_DB` names the database directory (`db` when absent, as before replication); a
//! full sync or an import writes into `incoming`, renames it `db-<n>` when complete, and then rewrites
//! `CURRENT_DB` in one rename. A crash before that rename restarts on the old data, after it
//! on the new; either way the directories no longer named are removed at start.

use std::io::Write;
use std::path::{Path, PathBuf};

const CURRENT: &str = "CURRENT_DB";
const DEFAULT_DB: &str = "db";
const INCOMING: &str = "incoming";
const CHECKPOINT_PREFIX: &str = "checkpoint-";
const REPLICATION_ID: &str = "replication-id";
/// SAVE's backup, and the one it is writing.
const BACKUP: &str = "backup";
const BACKUP_STAGING: &str = "backup-incomplete";
const BACKUP_REPLACED: &str = "backup-replaced";

#[derive(Debug, Clone)]
pub struct DataDir {
    root: PathBuf,
}

impl DataDir {
    pub fn new(root: &Path) -> DataDir {
        DataDir {
            root: root.to_path_buf(),
        }
    }

    /// The database directory to open.
    pub fn current(&self) -> PathBuf {
        let name = std::fs::read_to_string(self.root.join(CURRENT))
            .ok()
            .map(|text| text.trim().to_string())
            .filter(|name| !name.is_empty() && !name.contains('/'))
            .unwrap_or_else(|| DEFAULT_DB.to_string());
        self.root.join(name)
    }

    /// Removes what an interrupted full sync or checkpoint left: database directories no
    /// longer current, a partial `incoming`, checkpoints made for replicas.
    pub fn remove_leftovers(&self) {
        // A crash while a backup replaced the previous one: the previous one comes back.
        let (backup, replaced) = (self.backup(), self.root.join(BACKUP_REPLACED));
        if !backup.exists() && replaced.exists() {
            if let Err(err) = std::fs::rename(&replaced, &backup) {
                tracing::warn!("can't restore the backup {}: {err}", replaced.display());
            }
        }
        let current = self.current();
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let stale_db =
                (name == DEFAULT_DB || name.starts_with("db-")) && entry.path() != current;
            // A staged backup, and the `.tmp` RocksDB stages a checkpoint in.
            let stale_backup = name.starts_with(BACKUP_STAGING) || name == BACKUP_REPLACED;
            if stale_db || stale_backup || name == INCOMING || name.starts_with(CHECKPOINT_PREFIX) {
                if let Err(err) = std::fs::remove_dir_all(entry.path()) {
                    tracing::warn!("can't remove {}: {err}", entry.path().display());
                }
            }
        }
    }

    /// An empty directory for a full sync to receive into.
    pub fn fresh_incoming(&self) -> std::io::Result<PathBuf> {
        let path = self.root.join(INCOMING);
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        std::fs::create_dir_all(&path)?;
        Ok(path)
    }

    /// Makes the completely received `incoming` the current database directory; returns its
    /// new path.
    pub fn install_incoming(&self) -> std::io::Result<PathBuf> {
        let number = (1..)
            .find(|n| !self.root.join(format!("db-{n}")).exists())
            .unwrap_or(1);
        let name = format!("db-{number}");
        let target = self.root.join(&name);
        let incoming = self.root.join(INCOMING);
        // The names of the files it holds must last as their bytes do.
        std::fs::File::open(&incoming)?.sync_all()?;
        std::fs::rename(incoming, &target)?;
        write_atomically(&self.root.join(CURRENT), name.as_bytes())?;
        Ok(target)
    }

    /// A path for a checkpoint made for replica `id`; nothing may exist there.
    pub fn checkpoint(&self, id: u64) -> std::io::Result<PathBuf> {
        let path = self.root.join(format!("{CHECKPOINT_PREFIX}{id}"));
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        Ok(path)
    }

    /// The directory of the last backup (SAVE, BGSAVE).
    pub fn backup(&self) -> PathBuf {
        self.root.join(BACKUP)
    }

    /// Where a new backup is written; what an interrupted one left there is removed first.
    pub fn backup_staging(&self) -> std::io::Result<PathBuf> {
        let path = self.root.join(BACKUP_STAGING);
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        Ok(path)
    }

    /// Makes the complete backup in `staged` the backup, and removes the previous one once it
    /// is replaced. A crash in between leaves the new backup or the old one, never a part of
    /// one: the old one, if it was moved aside, is put back at the next start.
    pub fn install_backup(&self, staged: &Path) -> std::io::Result<PathBuf> {
        let target = self.backup();
        let replaced = self.root.join(BACKUP_REPLACED);
        std::fs::File::open(staged)?.sync_all()?;
        if target.exists() {
            if replaced.exists() {
                std::fs::remove_dir_all(&replaced)?;
            }
            std::fs::rename(&target, &replaced)?;
        }
        std::fs::rename(staged, &target)?;
        std::fs::File::open(&self.root)?.sync_all()?;
        if replaced.exists() {
            std::fs::remove_dir_all(&replaced)?;
        }
        Ok(target)
    }

    /// Drops the recorded replication ID: the data is no longer that history's.
    pub fn forget_replication_id(&self) -> std::io::Result<()> {
        match std::fs::remove_file(self.root.join(REPLICATION_ID)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// The replication ID recorded last: on a replica, its master's.
    pub fn replication_id(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.root.join(REPLICATION_ID)).ok()?;
        let id = text.trim();
        (id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
    }

    pub fn record_replication_id(&self, id: &str) -> std::io::Result<()> {
        write_atomically(&self.root.join(REPLICATION_ID), id.as_bytes())
    }
}

/// Writes `path` whole or not at all: a temporary file, synced, renamed over it.
fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_received_copy_becomes_current_and_the_old_data_a_leftover() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = DataDir::new(root.path());
        assert_eq!(dir.current(), root.path().join("db"));
        std::fs::create_dir_all(root.path().join("db")).expect("db");
        let incoming = dir.fresh_incoming().expect("incoming");
        std::fs::write(incoming.join("CURRENT"), b"x").expect("file");
        let installed = dir.install_incoming().expect("install");
        assert_eq!(installed, root.path().join("db-1"));
        assert_eq!(dir.current(), installed);
        dir.remove_leftovers();
        assert!(!root.path().join("db").exists());
        assert!(installed.join("CURRENT").exists());
    }

    #[test]
    fn a_partial_copy_is_removed_and_the_old_data_stays() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = DataDir::new(root.path());
        std::fs::create_dir_all(root.path().join("db")).expect("db");
        dir.fresh_incoming().expect("incoming");
        dir.remove_leftovers();
        assert!(root.path().join("db").exists());
        assert!(!root.path().join("incoming").exists());
    }
}
