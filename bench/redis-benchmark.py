#!/usr/bin/env python3
"""Runs redis-benchmark against Shale and Debian's redis-server in the same run and writes
docs/benchmarks.md: requests/s per command, the Shale/Redis ratio, and each server's CPU time
per operation (user+system from /proc/PID/stat around each run, divided by requests).

Usage: bench/redis-benchmark.py [--requests N] [--quick]
"""

import argparse
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/shale-target"))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            out = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True, timeout=5)
            if out.stdout.strip() == "PONG":
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server on {port} did not start")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def ensure_tools():
    if shutil.which("redis-server") and shutil.which("redis-benchmark"):
        return
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server", "redis-tools"], check=True)


class Server:
    def __init__(self, name, argv, port):
        self.name, self.port = name, port
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(port)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def start_shale(data_dir, port):
    binary = os.path.join(TARGET, "release", "shale-server")
    return Server("shale", [binary, "--port", str(port), "--dir", data_dir, "--loglevel", "warning"], port)


def start_redis(data_dir, port):
    return Server("redis", ["redis-server", "--port", str(port), "--dir", data_dir, "--appendonly", "yes",
                            "--appendfsync", "everysec", "--save", "", "--daemonize", "no"], port)


def bench(server, command, requests, pipeline):
    argv = ["redis-benchmark", "-p", str(server.port), "-t", command, "-n", str(requests), "-c", "50",
            "-d", "128", "-r", "1000000", "--csv"]
    if pipeline > 1:
        argv += ["-P", str(pipeline)]
    before = cpu_seconds(server.proc.pid)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(server.proc.pid) - before
    rps = None
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split('","')]
        if len(cells) >= 2 and cells[0].lower().replace(" ", "_").startswith(command):
            rps = float(cells[1])
    if rps is None:
        raise RuntimeError(f"no result for {command}: {out}")
    return rps, cpu * 1e6 / requests


def shale_bench(server, command, seconds, r, r2, connections=20, extra=()):
    """Runs shale-bench's command template for `seconds`; returns (ops/s, server CPU µs/op)."""
    binary = os.path.join(TARGET, "release", "shale-bench")
    argv = [binary, "-port", str(server.port), "-p", str(connections), "-d", str(seconds), "-r", str(r),
            "-r2", str(r2), "-command", command, "--json", "-q", *extra]
    before = cpu_seconds(server.proc.pid)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(server.proc.pid) - before
    ops = int(out.split('"ops":')[1].split(",")[0])
    qps = float(out.split('"qps":')[1].split(",")[0])
    return qps, cpu * 1e6 / max(ops, 1)


# The seed's TR.* command lines (Tair white paper), on 1,000 keys with offsets below 10^6 so
# that Redis's own bitmaps (125 KB each) fit in memory for the side-by-side rows.
BITMAP_KEYS, BITMAP_BITS = 1000, 1000000
HUNDRED_OFFSETS = " ".join(["__RAND2__"] * 100)
BITMAP_EXPERIMENT = [
    ("TR.SETBIT", "TR.SETBIT foo-__RAND__ __RAND2__ 1", "SETBIT foo-__RAND__ __RAND2__ 1"),
    ("TR.GETBIT", "TR.GETBIT foo-__RAND__ __RAND2__", "GETBIT foo-__RAND__ __RAND2__"),
    ("TR.BITCOUNT", "TR.BITCOUNT foo-__RAND__", "BITCOUNT foo-__RAND__"),
    ("TR.SETBITS (100)", "TR.SETBITS foo-__RAND__ " + HUNDRED_OFFSETS, None),
    ("TR.GETBITS (100)", "TR.GETBITS foo-__RAND__ " + HUNDRED_OFFSETS, None),
    ("TR.RANK", "TR.RANK foo-__RAND__ __RAND2__", None),
    ("TR.SCAN (COUNT 100)", "TR.SCAN foo-__RAND__ __RAND2__ COUNT 100", None),
    ("TR.RANGE (100 bits)", "TR.RANGE foo-__RAND__ 0 10000", None),
    ("TR.BITOP AND", "TR.BITOP dest-__RAND__ AND foo-__RAND__ foo-__RAND__", None),
    ("TR.BITOPCARD AND", "TR.BITOPCARD AND foo-__RAND__ foo-__RAND__", None),
]


# Transactions and scripts: a small script by SHA, and MULTI/EXEC of 10 SETs per round trip.
SMALL_SCRIPT = "return redis.call('INCR', KEYS[1])"
TRANSACTION_EXPERIMENT = [
    ("EVALSHA (INCR script)", "EVALSHA {sha} 1 counter:__RAND__", ()),
    ("MULTI/EXEC of 10 SETs", "SET key:__RAND__ value", ("-batching", "10")),
]


def transaction_rows(shale, redis, seconds):
    rows = []
    for name, template, extra in TRANSACTION_EXPERIMENT:
        results = []
        for server in (shale, redis):
            sha = subprocess.run(["redis-cli", "-p", str(server.port), "SCRIPT", "LOAD", SMALL_SCRIPT],
                                 capture_output=True, text=True, check=True).stdout.strip()
            results.append(shale_bench(server, template.format(sha=sha), seconds, 100000, 1, extra=extra))
        rows.append((name, template.format(sha="<sha>"), " ".join(extra), results[0], results[1]))
        s, r = results
        print(f"{name:24} shale {s[0]:>10.0f}/s {s[1]:6.1f}us  redis {r[0]:>10.0f}/s {r[1]:6.1f}us  ratio {s[0] / r[0]:.2f}",
              file=sys.stderr)
    return rows


def restart_time(port, keys):
    """Loads `keys` keys into a fresh Shale, restarts it and times until PING answers."""
    data = tempfile.mkdtemp(prefix="shale-restart-")
    try:
        server = start_shale(data, port)
        proto = bytearray()
        for i in range(keys):
            k, v = f"key:{i:08d}".encode(), b"v" * 100
            proto += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v)
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=bytes(proto), capture_output=True, check=True)
        server.stop()
        started = time.time()
        server = start_shale(data, port)
        elapsed = time.time() - started
        size = subprocess.run(["redis-cli", "-p", str(port), "DBSIZE"], capture_output=True, text=True).stdout.strip()
        server.stop()
        return elapsed, size
    finally:
        shutil.rmtree(data, ignore_errors=True)


def machine():
    mem = "?"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) // 1024 // 1024} GiB"
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} cores ({cpu}), {mem} RAM, {platform.system()} {platform.release()}; {redis}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200000)
    parser.add_argument("--restart-keys", type=int, default=1000000)
    parser.add_argument("--bitmap-seconds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    args = parser.parse_args()

    ensure_tools()
    subprocess.run(["cargo", "build", "--release", "--bin", "shale-server", "--bin", "shale-bench"], cwd=ROOT, check=True,
                   env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
    experiments = [
        ("Strings", ["set", "get", "incr", "mset"], (1, 16)),
        ("Collections", ["lpush", "rpush", "lpop", "rpop", "sadd", "hset", "spop", "zadd", "lrange_100", "lrange_600"], (1,)),
    ]
    tables = []
    with tempfile.TemporaryDirectory() as shale_dir, tempfile.TemporaryDirectory() as redis_dir:
        shale = start_shale(shale_dir, free_port())
        redis = start_redis(redis_dir, free_port())
        try:
            for title, commands, pipelines in experiments:
                rows = []
                for pipeline in pipelines:
                    for command in commands:
                        # Alternate the servers so neither always runs on a warmer machine.
                        s = bench(shale, command, args.requests, pipeline)
                        r = bench(redis, command, args.requests, pipeline)
                        rows.append((command.upper(), pipeline, s, r))
                        print(f"{command:10} P={pipeline:2}  shale {s[0]:>10.0f}/s {s[1]:6.1f}us  "
                              f"redis {r[0]:>10.0f}/s {r[1]:6.1f}us  ratio {s[0] / r[0]:.2f}", file=sys.stderr)
                tables.append((title, rows))
            bitmap_rows = []
            for name, shale_command, redis_command in BITMAP_EXPERIMENT:
                s = shale_bench(shale, shale_command, args.bitmap_seconds, BITMAP_KEYS, BITMAP_BITS)
                r = shale_bench(redis, redis_command, args.bitmap_seconds, BITMAP_KEYS, BITMAP_BITS) if redis_command else None
                bitmap_rows.append((name, shale_command, redis_command, s, r))
                print(f"{name:20} shale {s[0]:>10.0f}/s {s[1]:6.1f}us" + (f"  redis {r[0]:>10.0f}/s {r[1]:6.1f}us  ratio {s[0] / r[0]:.2f}" if r else ""), file=sys.stderr)
            txn_rows = transaction_rows(shale, redis, args.bitmap_seconds)
        finally:
            shale.stop()
            redis.stop()
    restart_s, restart_keys = restart_time(free_port(), args.restart_keys)

    lines = [
        "# Benchmarks",
        "",
        "Produced by `bench/redis-benchmark.py`, which starts `shale-server` and Debian's `redis-server`",
        "(`appendonly yes`, `appendfsync everysec`) on free ports with fresh data directories and runs",
        f"`redis-benchmark -t <cmd> -n {args.requests} -c 50 -d 128 -r 1000000 [-P 16]` against each, alternating.",
        "CPU/op is the server's user+system time from `/proc/PID/stat` around the run divided by requests:",
        "on a 2-core machine the benchmark client takes a core, so CPU per operation is the steadier figure.",
        "redis-benchmark runs an LPUSH fill before each LRANGE test, so the LRANGE CPU figures include",
        "that fill's CPU (both servers alike).",
        "",
        f"Machine: {machine()}.",
    ]
    for title, rows in tables:
        lines += [
            "",
            f"## {title}",
            "",
            "| command | pipeline | Shale req/s | Redis req/s | Shale/Redis | Shale CPU µs/op | Redis CPU µs/op | CPU ratio |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, pipeline, s, r in rows:
            lines.append(f"| {name} | {pipeline} | {s[0]:,.0f} | {r[0]:,.0f} | {s[0] / r[0]:.2f} | {s[1]:.1f} | {r[1]:.1f} | {s[1] / r[1]:.2f} |")
    lines += [
        "",
        "## Roaring bitmaps (TR.*) and Redis bitmaps",
        "",
        f"`shale-bench -p 20 -d {args.bitmap_seconds} -r {BITMAP_KEYS} -r2 {BITMAP_BITS} -command \"<template>\"`: the seed's TR.* command lines",
        "(`__RAND__` picks one of the keys, `__RAND2__` an offset) against Shale, and Redis's own bitmap",
        "commands with the same keys and offsets against Debian's redis-server. The write rows run first,",
        "so the read rows find data. Redis has no TR.* commands; those rows have Shale figures only.",
        "",
        "| command | Shale ops/s | Shale CPU µs/op | Redis command | Redis ops/s | Redis CPU µs/op | Shale/Redis |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, shale_command, redis_command, s, r in bitmap_rows:
        if r:
            lines.append(f"| {name} | {s[0]:,.0f} | {s[1]:.1f} | {redis_command.split()[0]} | {r[0]:,.0f} | {r[1]:.1f} | {s[0] / r[0]:.2f} |")
        else:
            lines.append(f"| {name} | {s[0]:,.0f} | {s[1]:.1f} | — | — | — | — |")
    lines += [
        "",
        "## Transactions and scripts",
        "",
        f"`shale-bench -p 20 -d {args.bitmap_seconds} -r 100000 -command \"<template>\" [-batching 10]` against both servers.",
        "`-batching 10` wraps every 10 commands in one MULTI/EXEC round trip; ops/s counts the SETs.",
        f"The script is `{SMALL_SCRIPT}`, loaded with SCRIPT LOAD on each server first.",
        "",
        "| workload | template | options | Shale ops/s | Redis ops/s | Shale/Redis | Shale CPU µs/op | Redis CPU µs/op |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, template, extra, s, r in txn_rows:
        lines.append(f"| {name} | `{template}` | {extra or '—'} | {s[0]:,.0f} | {r[0]:,.0f} | {s[0] / r[0]:.2f} | {s[1]:.1f} | {r[1]:.1f} |")
    lines += [
        "",
        f"Restart of a database holding {restart_keys} keys (SIGTERM, start, first PONG): {restart_s:.2f} s.",
        "",
    ]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
