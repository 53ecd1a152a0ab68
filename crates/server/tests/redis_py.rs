//! A second client language: redis-py's transactional pipeline, Lock, pub/sub and scripts.
//!
//! `scripts/test.sh` installs redis-py into a virtualenv and names its interpreter in
//! `SHALE_PYTHON`; without it, a `python3` that can import redis is used.

mod common;

use std::process::Command;

use common::TestServer;

fn python() -> String {
    if let Ok(python) = std::env::var("SHALE_PYTHON") {
        return python;
    }
    let importable = Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        importable,
        "redis-py is missing: run ./scripts/test.sh, or set SHALE_PYTHON to a python with redis"
    );
    "python3".into()
}

#[test]
fn redis_py_pipeline_lock_pubsub_and_scripts() {
    let server = TestServer::start();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/redis_py_check.py"
    );
    let output = Command::new(python())
        .arg(script)
        .arg(server.port.to_string())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "redis-py checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("redis-py checks passed"));
}
