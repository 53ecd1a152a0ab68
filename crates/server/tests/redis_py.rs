//! A second client language: redis-py's transactional pipeline, Lock, pub/sub and scripts.
//!
//! `scripts/test.sh` installs redis-py into a virtualenv and names its interpreter in
//! `SHALE_PYTHON`; without it, a `python3` that can import redis is used.

mod common;

use std::process::Command;

use common::{python, TestServer};

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
