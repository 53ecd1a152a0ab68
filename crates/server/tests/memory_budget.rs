//! `memory-budget`: one figure sizes the caches and memtables; unset, it follows the memory
//! the server may use, so a server started with the defaults in a small memory cgroup is not
//! killed for its caches.

mod common;

use common::{info_text, run, TestServer};

fn memory(con: &mut redis::Connection, field: &str) -> String {
    info_text(con, "memory", field)
}

#[test]
fn a_set_budget_sizes_what_was_not_set_and_rewrite_keeps_it_that_way() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shale.conf");
    std::fs::write(&file, "memory-budget 512mb\nrocksdb.data-cache-size 10mb\n").unwrap();
    let mut server = TestServer::start_with_config(Some(&file), &[]);
    let mut con = server.client();
    assert_eq!(
        memory(&mut con, "memory_budget"),
        (512u64 << 20).to_string()
    );
    assert_eq!(memory(&mut con, "memory_budget_source"), "config");
    assert_eq!(memory(&mut con, "memory_budget_human"), "512.00M");
    assert_eq!(
        memory(&mut con, "block_cache_capacity"),
        (28u64 << 20).to_string()
    );
    assert_eq!(
        memory(&mut con, "meta_cache_capacity"),
        (196u64 << 20).to_string()
    );
    assert_eq!(
        memory(&mut con, "data_cache_capacity"),
        (10u64 << 20).to_string(),
        "a size that was set stays"
    );
    assert_eq!(
        memory(&mut con, "memtables_limit"),
        (112u64 << 20).to_string()
    );
    let got: Vec<String> = run(&mut con, &["CONFIG", "GET", "rocksdb.block-cache-size"]);
    assert_eq!(got[1], (28u64 << 20).to_string());
    assert!(
        common::fails(&mut con, &["CONFIG", "SET", "memory-budget", "1gb"])
            .contains("can't set immutable config")
    );

    // A size the budget gave is not written down, or it would stop following the budget.
    run::<()>(&mut con, &["CONFIG", "REWRITE"]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("memory-budget 536870912"), "{text}");
    assert!(text.contains("rocksdb.data-cache-size 10485760"), "{text}");
    assert!(!text.contains("block-cache-size"), "{text}");
    assert!(!text.contains("memtable-budget"), "{text}");
    server.restart();
    let mut con = server.client();
    assert_eq!(
        memory(&mut con, "block_cache_capacity"),
        (28u64 << 20).to_string()
    );
}

#[test]
fn unset_the_budget_is_the_machines_memory_outside_a_limited_cgroup() {
    let server = TestServer::start();
    let mut con = server.client();
    let budget: u64 = memory(&mut con, "memory_budget").parse().unwrap();
    let system: u64 = memory(&mut con, "total_system_memory").parse().unwrap();
    match memory(&mut con, "memory_budget_source").as_str() {
        "machine" => assert_eq!(budget, system),
        "cgroup" => assert!(budget < system),
        other => panic!("budget from {other}"),
    }
    let block_cache: u64 = memory(&mut con, "block_cache_capacity").parse().unwrap();
    assert_eq!(block_cache, (budget - (64 << 20)) / 16);
}

/// A memory cgroup of `limit` bytes this test may put a process in: its `cgroup.procs`, or
/// None where cgroups can't be made (not root, no memory controller).
struct MemoryCgroup {
    path: std::path::PathBuf,
}

impl MemoryCgroup {
    fn make(name: &str, limit: u64) -> Option<MemoryCgroup> {
        let v1 = std::path::Path::new("/sys/fs/cgroup/memory");
        let (path, file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(name), "memory.limit_in_bytes")
        } else {
            let root = std::path::Path::new("/sys/fs/cgroup");
            let controllers = std::fs::read_to_string(root.join("cgroup.subtree_control")).ok()?;
            if !controllers.split_whitespace().any(|c| c == "memory") {
                return None;
            }
            (root.join(name), "memory.max")
        };
        std::fs::create_dir_all(&path).ok()?;
        let cgroup = MemoryCgroup { path };
        std::fs::write(cgroup.path.join(file), limit.to_string()).ok()?;
        Some(cgroup)
    }

    /// A wrapper that moves the server into the cgroup before it starts.
    fn wrapper(&self) -> Vec<String> {
        let procs = self.path.join("cgroup.procs");
        vec![
            "sh".into(),
            "-c".into(),
            r#"echo $$ > "$0" && exec "$@""#.into(),
            procs.display().to_string(),
        ]
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Values of 1-8 KB that compress about as text does.
fn value(n: u64) -> Vec<u8> {
    let words = [
        "shale", "disk", "redis", "block", "cache", "memory", "page", "table",
    ];
    let mut next = common::numbers(n);
    let len = 1024 + next(7168) as usize;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(words[next(words.len() as u64) as usize].as_bytes());
        out.extend_from_slice(format!(" {} ", next(100_000)).as_bytes());
    }
    out
}

#[test]
fn a_server_in_a_small_memory_cgroup_sizes_its_caches_to_it_and_survives_a_load_past_it() {
    let limit: u64 = 256 << 20;
    let name = format!("shale-test-budget-{}", std::process::id());
    let Some(cgroup) = MemoryCgroup::make(&name, limit) else {
        eprintln!("no memory cgroup can be made here (not root?): skipped");
        return;
    };
    let wrapper = cgroup.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut server = TestServer::start_wrapped(&wrapper, &[]);
    let mut con = server.client();
    assert_eq!(memory(&mut con, "memory_budget_source"), "cgroup");
    assert_eq!(memory(&mut con, "memory_budget"), limit.to_string());
    // 64 MiB are the process's; the caches and memtables share the rest.
    let shared = limit - (64 << 20);
    assert_eq!(
        memory(&mut con, "block_cache_capacity"),
        (shared / 16).to_string()
    );
    assert_eq!(
        memory(&mut con, "memtables_limit"),
        (shared / 4).to_string()
    );

    // About 550 MB of values, twice the limit: with the fixed sizes Shale had before its budget
    // (640 MiB of caches and memtables) the server was killed by the OOM killer 3.4 s in.
    const KEYS: u64 = 120_000;
    for batch in 0..KEYS / 100 {
        let mut pipe = redis::pipe();
        for n in batch * 100..(batch + 1) * 100 {
            pipe.cmd("SET")
                .arg(format!("key:{n}"))
                .arg(value(n))
                .ignore();
        }
        pipe.query::<()>(&mut con).expect("the load is served");
    }
    // Every key read once, in order, fills the record caches; then reads at random.
    for batch in 0..KEYS / 32 {
        let names: Vec<String> = (batch * 32..(batch + 1) * 32)
            .map(|n| format!("key:{n}"))
            .collect();
        let got: Vec<Vec<u8>> = redis::cmd("MGET").arg(&names).query(&mut con).unwrap();
        assert_eq!(got.len(), 32);
    }
    let cached: u64 = memory(&mut con, "meta_cache_used").parse().unwrap();
    assert!(cached > limit / 8, "the metadata cache filled: {cached}");
    let mut next = common::numbers(7);
    for _ in 0..300 {
        let keys: Vec<u64> = (0..32).map(|_| next(KEYS)).collect();
        let names: Vec<String> = keys.iter().map(|n| format!("key:{n}")).collect();
        let got: Vec<Vec<u8>> = redis::cmd("MGET").arg(&names).query(&mut con).unwrap();
        for (n, got) in keys.iter().zip(got) {
            assert!(got == value(*n), "key:{n} reads back");
        }
    }
    let dbsize: u64 = run(&mut con, &["DBSIZE"]);
    assert_eq!(dbsize, KEYS);
    server.stop();
    drop(cgroup);
}

/// Records kept compressed in the metadata cache read back exactly, through GET, MGET and the
/// commands that change part of a string (which take the cached record out and put it back).
#[test]
fn strings_kept_compressed_in_the_record_cache_read_back_exactly() {
    let server = TestServer::start_with(&["--rocksdb.meta-cache-size", "2mb"]);
    let mut con = server.client();
    const KEYS: u64 = 1500;
    for n in 0..KEYS {
        run::<()>(&mut con, &["SET", &format!("s:{n}"), &text(n)]);
    }
    for round in 0..2 {
        for n in 0..KEYS {
            let got: String = run(&mut con, &["GET", &format!("s:{n}")]);
            assert!(got == text(n), "s:{n} in round {round}");
        }
    }
    let names: Vec<String> = (0..KEYS).map(|n| format!("s:{n}")).collect();
    let got: Vec<String> = redis::cmd("MGET").arg(&names).query(&mut con).unwrap();
    assert!(got.iter().enumerate().all(|(n, v)| *v == text(n as u64)));
    let hits = info_text(&mut con, "rocksdb", "meta_cache_hits");
    assert!(
        hits.parse::<u64>().unwrap() > KEYS,
        "the cache answered: {hits}"
    );
    let used: u64 = memory(&mut con, "meta_cache_used").parse().unwrap();
    assert!(used <= 2 << 20);
    for n in (0..KEYS).step_by(7) {
        let key = format!("s:{n}");
        run::<u64>(&mut con, &["APPEND", &key, " appended"]);
        run::<u64>(&mut con, &["SETRANGE", &key, "3", "XYZ"]);
        let mut expected = text(n) + " appended";
        expected.replace_range(3..6, "XYZ");
        let got: String = run(&mut con, &["GET", &key]);
        assert!(got == expected, "{key} after APPEND and SETRANGE");
    }
}

/// Prose-like text of 300-3,000 bytes: words of a small vocabulary.
fn text(n: u64) -> String {
    let words = [
        "record", "cache", "keeps", "hot", "strings", "whole", "on", "disk",
    ];
    let mut next = common::numbers(n + 1);
    let len = 300 + next(2700) as usize;
    let mut out = String::with_capacity(len + 8);
    while out.len() < len {
        out.push_str(words[next(words.len() as u64) as usize]);
        out.push(' ');
    }
    out
}
