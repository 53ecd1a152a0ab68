//! The memory the engine's caches and memtables may take together, and how it is split.
//!
//! Data is never evicted, so the budget refuses no write: it only sizes what RocksDB and the
//! record caches hold in memory. Unset, it follows what the process may use (its memory
//! cgroup's limit, else the machine's memory), so that a server started with the defaults in
//! a small container is never killed for its caches.

use std::path::Path;

/// Where a budget came from, as INFO memory names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSource {
    /// `memory-budget` was set.
    Configured,
    /// The lowest memory limit of the process's cgroup and its ancestors.
    Cgroup,
    /// The machine's memory (`MemTotal`).
    Machine,
}

impl BudgetSource {
    pub fn name(self) -> &'static str {
        match self {
            BudgetSource::Configured => "config",
            BudgetSource::Cgroup => "cgroup",
            BudgetSource::Machine => "machine",
        }
    }
}

/// What the caches and memtables may take together, and where that figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    pub bytes: usize,
    pub source: BudgetSource,
}

/// The founding benchmark's memory cgroup, where the split was measured (bench/hot).
const MEASURED_AT: usize = 1 << 30;
/// Memtables beyond this were never measured to help, and make the WAL a restart replays longer.
const MEMTABLES_MAX: usize = 256 << 20;
/// What the rest of the process takes (code, threads, buffers: about 50 MB), kept out of the
/// split.
const PROCESS: usize = 64 << 20;
const WRITE_BUFFER_MAX: usize = 64 << 20;

impl MemoryBudget {
    /// The budget of `memory-budget` if it is set (not 0), else what the process may use.
    pub fn resolve(configured: usize) -> MemoryBudget {
        if configured > 0 {
            return MemoryBudget {
                bytes: configured,
                source: BudgetSource::Configured,
            };
        }
        let machine = machine_memory().unwrap_or(MEASURED_AT);
        let limit = std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|own| {
                cgroup_limit(
                    &own,
                    Path::new("/sys/fs/cgroup/memory"),
                    Path::new("/sys/fs/cgroup"),
                )
            });
        match limit {
            Some(bytes) if bytes < machine => MemoryBudget {
                bytes,
                source: BudgetSource::Cgroup,
            },
            _ => MemoryBudget {
                bytes: machine,
                source: BudgetSource::Machine,
            },
        }
    }

    /// How the budget is split among the caches and memtables, once the process's own share
    /// is set aside: most of it to the metadata record cache, which holds strings whole
    /// (compressed once it is a quarter full), so a hot key costs its record and not a block
    /// of its neighbours; a sixteenth to the block cache, which holds the tables' index and
    /// filter blocks; a quarter to memtables. Three sixteenths are left for the page cache.
    pub fn split(&self) -> MemorySplit {
        let shared = self.bytes.saturating_sub(PROCESS).max(self.bytes / 2);
        let sixteenth = shared / 16;
        let memtables = (shared / 4).min(MEMTABLES_MAX);
        MemorySplit {
            block_cache: sixteenth,
            meta_cache: sixteenth * 7,
            data_cache: sixteenth,
            memtables,
            write_buffer: MemoryBudget::write_buffer_for(memtables),
        }
    }

    /// One memtable of `memtables` in all: a quarter, at most 64 MiB.
    pub fn write_buffer_for(memtables: usize) -> usize {
        (memtables / 4).min(WRITE_BUFFER_MAX)
    }
}

/// The sizes a budget gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySplit {
    pub block_cache: usize,
    pub meta_cache: usize,
    pub data_cache: usize,
    /// All memtables together.
    pub memtables: usize,
    /// One memtable.
    pub write_buffer: usize,
}

impl Default for MemorySplit {
    fn default() -> Self {
        MemoryBudget {
            bytes: MEASURED_AT,
            source: BudgetSource::Configured,
        }
        .split()
    }
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn machine_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The lowest memory limit along the cgroup path of `own` (the text of /proc/self/cgroup):
/// cgroup v1's `memory.limit_in_bytes` under `v1_root` where the memory controller is on v1,
/// else v2's `memory.max` under `v2_root`. Every directory from the process's own up to the
/// root counts, since a parent's limit bounds its children; in a cgroup namespace the path
/// is not under the mount, and the mount's root (the container's cgroup) is read alone.
fn cgroup_limit(own: &str, v1_root: &Path, v2_root: &Path) -> Option<usize> {
    let mut v1 = None;
    let mut v2 = None;
    for line in own.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path);
        } else if controllers.is_empty() {
            v2 = Some(path);
        }
    }
    match (v1, v2) {
        (Some(path), _) => lowest_limit(v1_root, path, "memory.limit_in_bytes"),
        (None, Some(path)) => lowest_limit(v2_root, path, "memory.max"),
        (None, None) => None,
    }
}

fn lowest_limit(root: &Path, path: &str, file: &str) -> Option<usize> {
    let mut dir = root.join(path.trim_start_matches('/'));
    if !dir.is_dir() {
        dir = root.to_path_buf();
    }
    let mut lowest: Option<usize> = None;
    loop {
        let limit = std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok());
        if let Some(limit) = limit {
            lowest = Some(lowest.map_or(limit, |l| l.min(limit)));
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            return lowest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, dir: &str, file: &str, value: &str) {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), value).unwrap();
    }

    #[test]
    fn one_gib_gives_the_measured_sizes() {
        let split = MemorySplit::default();
        assert_eq!(split.block_cache, 60 << 20);
        assert_eq!(split.meta_cache, 420 << 20);
        assert_eq!(split.data_cache, 60 << 20);
        assert_eq!(split.memtables, 240 << 20);
        assert_eq!(split.write_buffer, 60 << 20);
    }

    #[test]
    fn the_split_scales_with_the_budget_and_memtables_stop_at_256_mib() {
        let half = MemoryBudget {
            bytes: 512 << 20,
            source: BudgetSource::Cgroup,
        }
        .split();
        assert_eq!(
            (half.block_cache, half.meta_cache, half.memtables),
            (28 << 20, 196 << 20, 112 << 20)
        );
        assert_eq!(half.write_buffer, 28 << 20);
        let large = MemoryBudget {
            bytes: 16 << 30,
            source: BudgetSource::Machine,
        }
        .split();
        assert_eq!(
            (large.block_cache, large.meta_cache, large.memtables),
            (1020 << 20, 7140 << 20, 256 << 20)
        );
        let tiny = MemoryBudget {
            bytes: 64 << 20,
            source: BudgetSource::Cgroup,
        }
        .split();
        assert_eq!(tiny.block_cache, 2 << 20, "half of a tiny budget is shared");
    }

    #[test]
    fn a_configured_budget_wins() {
        assert_eq!(
            MemoryBudget::resolve(3 << 30),
            MemoryBudget {
                bytes: 3 << 30,
                source: BudgetSource::Configured
            }
        );
        assert!(MemoryBudget::resolve(0).bytes > 0);
    }

    #[test]
    fn cgroup_v1_takes_the_lowest_limit_on_the_path() {
        let root = tempfile::tempdir().unwrap();
        let v1 = root.path().join("memory");
        write(&v1, "", "memory.limit_in_bytes", "9223372036854771712\n");
        write(&v1, "pods", "memory.limit_in_bytes", "1073741824\n");
        write(
            &v1,
            "pods/one",
            "memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        let own = "9:name=systemd:/\n4:memory:/pods/one\n3:cpuset:/\n0::/\n";
        assert_eq!(
            cgroup_limit(own, &v1, root.path()),
            Some(1 << 30),
            "the parent's limit bounds the child"
        );
        let combined = "4:cpu,memory:/pods/one\n";
        assert_eq!(cgroup_limit(combined, &v1, root.path()), Some(1 << 30));
    }

    #[test]
    fn cgroup_v2_reads_memory_max_and_skips_max() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "", "cgroup.controllers", "memory\n");
        write(root.path(), "app", "memory.max", "536870912\n");
        write(root.path(), "app/server", "memory.max", "max\n");
        let missing = root.path().join("no-v1");
        assert_eq!(
            cgroup_limit("0::/app/server\n", &missing, root.path()),
            Some(512 << 20)
        );
        assert_eq!(cgroup_limit("0::/\n", &missing, root.path()), None);
    }

    #[test]
    fn a_namespaced_path_reads_the_mount_root() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "", "memory.max", "268435456\n");
        let missing = root.path().join("no-v1");
        assert_eq!(
            cgroup_limit("0::/kubepods/burstable/pod1/abc\n", &missing, root.path()),
            Some(256 << 20)
        );
    }

    #[test]
    fn no_cgroup_file_is_no_limit() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(cgroup_limit("", root.path(), root.path()), None);
        assert_eq!(
            cgroup_limit("4:memory:/x\n", root.path(), root.path()),
            None
        );
    }
}
