#!/usr/bin/env bash
# The whole test suite: installs what the build needs, then format, lint and tests.
# One cargo profile (release) serves tests, benchmarks and the server, so RocksDB's C++ is
# compiled once; the target dir lives outside the clone so later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/setup.sh

# redis-py, for the second-client-language test: a virtualenv outside the clone.
SHALE_VENV="${SHALE_VENV:-$HOME/.cache/shale-venv}"
if ! "$SHALE_VENV/bin/python" -c 'import redis' 2>/dev/null; then
    echo "installing redis-py into $SHALE_VENV" >&2
    if ! python3 -m venv "$SHALE_VENV" 2>/dev/null; then
        SUDO=""
        if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
        $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
        $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3-venv >/dev/null
        python3 -m venv "$SHALE_VENV"
    fi
    "$SHALE_VENV/bin/pip" install -q redis
fi
export SHALE_PYTHON="$SHALE_VENV/bin/python"

# Redis, for the differential checks: redis-tools ships the server (as redis-check-rdb) and,
# unlike the redis-server package, starts no service on port 6379.
if ! command -v redis-server >/dev/null && ! command -v redis-check-rdb >/dev/null; then
    echo "installing redis-tools (Redis, for the checks against it)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq redis-tools >/dev/null
fi
# Redis runs as the server when the name it is started by is not a checker's: without the
# redis-server package, a link of that name in a directory of our own.
if ! command -v redis-server >/dev/null; then
    SHALE_BIN="$HOME/.cache/shale-bin"
    mkdir -p "$SHALE_BIN"
    ln -sf "$(command -v redis-check-rdb)" "$SHALE_BIN/redis-server"
    export PATH="$SHALE_BIN:$PATH"
fi

# Redis Sentinel, which the failover test runs against Shale unchanged.
if ! command -v redis-sentinel >/dev/null; then
    echo "installing redis-sentinel (for the failover test)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq redis-sentinel >/dev/null
fi

# Apache Kvrocks Controller, the control plane the cluster test runs against, built from
# third_party/, and go-redis's cluster client, the test's second client library: their
# dependencies come from the Go module proxy (Debian's Go, if none is installed, fetches the
# toolchain a go.mod asks for from the proxy too).
if ! command -v go >/dev/null; then
    echo "installing golang-go (to build Apache Kvrocks Controller for the cluster test)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq golang-go >/dev/null
fi
export SHALE_KVCTL="$CARGO_TARGET_DIR/kvrocks-controller/kvctl-server"
(cd third_party/kvrocks-controller && GOTOOLCHAIN=auto go build -o "$SHALE_KVCTL" ./cmd/server)
export SHALE_GO_CLUSTER="$CARGO_TARGET_DIR/go-cluster-clients"
(cd crates/server/tests/go/cluster_clients && GOTOOLCHAIN=auto go build -o "$SHALE_GO_CLUSTER" .)

cargo fmt --all --check
cargo clippy --release --all-targets -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --release --workspace 2>&1 | tee "$log"
# The same commands against Redis: every reply and every key's state must match.
python3 scripts/check-against-redis.py "$CARGO_TARGET_DIR/release/shale-server"
# One closing line for the Rust tests.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "%d passed, %d failed\n", passed, failed }' "$log"
