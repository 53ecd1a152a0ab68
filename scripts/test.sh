#!/usr/bin/env bash
# The whole test suite: installs what the build needs, then format, lint and tests.
# One cargo profile (release) serves tests, benchmarks and the server, so RocksDB's C++ is
# compiled once; the target dir lives outside the clone so later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/setup.sh

cargo fmt --all --check
cargo clippy --release --all-targets -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --release --workspace 2>&1 | tee "$log"
# One closing line for the whole suite.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "%d passed, %d failed\n", passed, failed }' "$log"
