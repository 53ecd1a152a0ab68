#!/usr/bin/env bash
# Build prerequisites: librocksdb-sys runs bindgen, which needs libclang. Sourced by run.sh and
# test.sh; also sets the shared cargo target dir so RocksDB's C++ is compiled once.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/shale-target}"

if ! ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then
    echo "installing libclang-dev (needed by librocksdb-sys's bindgen)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq libclang-dev >/dev/null
fi

