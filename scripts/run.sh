#!/usr/bin/env bash
# Builds shale-server (installing what the build needs) and starts it; arguments go to the
# server, e.g. ./scripts/run.sh --port 7000 --appendfsync always
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
exec cargo run --release --bin shale-server -- "$@"
