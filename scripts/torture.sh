#!/usr/bin/env bash
# The long crash torture: writers of every type while the server is killed (SIGKILL) at random
# moments and restarted, CYCLES times under each appendfsync policy (default 100); prints the
# writes checked and lost. The test suite runs 4 cycles of the same test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
SHALE_TORTURE_CYCLES="${1:-100}" cargo test --release -p shale-server --test torture -- --nocapture
