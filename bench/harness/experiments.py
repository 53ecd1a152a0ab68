"""The experiments: each runs one load against every server in turn (alternating, so neither
always gets the warmer machine) and returns rows of `Result`s keyed by server name."""

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field

from . import setup


@dataclass
class Result:
    qps: float
    # Server CPU (user+system) per operation in µs; None for servers not started here.
    cpu_us: float = None
    # Latencies in ms: avg, p50, p90, p99, p999 and max, as far as the tool reports them.
    latency: dict = field(default_factory=dict)
    per_second: list = field(default_factory=list)
    # Bytes of values sent (shale-bench's `__VALUE__`).
    value_bytes: int = 0


@dataclass
class Row:
    name: str
    detail: str
    results: dict


_rows_run = 0


def _row(name, detail, servers, one):
    """Runs `one(server)` on every server, in reversed order on every other row so that neither
    always runs first (on a cooler machine, or right after the other's load). A server for which
    `one` returns None (it has no such command) is left out of the row. Each run starts once the
    server has finished compacting what earlier rows wrote, so that it is charged for its own load
    only: Redis's background work (AOF rewrites) runs in a child process and is not charged either."""
    global _rows_run
    _rows_run += 1
    in_turn = servers if _rows_run % 2 else list(reversed(servers))
    ran = {}
    for s in in_turn:
        waited = settle_compactions(s, limit=60)
        if waited >= 60:
            print(f"{s.name}: compactions still running after 60 s; {name} starts anyway",
                  file=sys.stderr, flush=True)
        ran[s.name] = one(s)
    row = Row(name, detail, {s.name: ran[s.name] for s in servers if ran[s.name] is not None})
    _log(row)
    return row


def _measured(server, run):
    """Runs `run()` -> (ops, Result) and adds the server's CPU time per operation."""
    before = server.cpu_seconds()
    ops, result = run()
    if before is not None and ops:
        result.cpu_us = (server.cpu_seconds() - before) * 1e6 / ops
    return result


def _log(row):
    cells = "  ".join(f"{name} {r.qps:>10,.0f}/s" + (f" {r.cpu_us:6.1f}us" if r.cpu_us is not None else "")
                      for name, r in row.results.items())
    print(f"{row.name:28} {row.detail[:40]:40} {cells}", file=sys.stderr, flush=True)


def redis_benchmark(servers, test, requests, size=128, pipeline=1, clients=50, command=None):
    """One redis-benchmark test (`-t test`), or with `command` that command line, named `test`."""
    def one(server):
        argv = ["redis-benchmark", "-h", server.host, "-p", str(server.port), "-n", str(requests),
                "-c", str(clients), "-d", str(size), "-r", "1000000", "-P", str(pipeline), "--csv"]
        argv += command if command else ["-t", test]

        def run():
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                cells = [c.strip('"') for c in line.split('","')]
                if len(cells) >= 8 and cells[0].lower().replace(" ", "_").startswith(test):
                    latency = dict(avg=float(cells[2]), p50=float(cells[4]), p99=float(cells[6]), max=float(cells[7]))
                    return requests, Result(float(cells[1]), latency=latency)
            raise RuntimeError(f"redis-benchmark printed no {test} line: {out}")

        return _measured(server, run)

    detail = f"-n {requests} -d {size} -P {pipeline}" + (f" {' '.join(command)}" if command else "")
    return _row(test.upper(), detail, servers, one)


def shale_bench_once(server, args):
    argv = [setup.binary("shale-bench"), "-h", server.host, "-port", str(server.port), "--json", "-q", *args]

    def run():
        out = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        latency = {k: out["latency_ms"][k] for k in ("avg", "p50", "p90", "p99", "p999", "max")}
        result = Result(out["qps"], latency=latency, per_second=out["per_second"], value_bytes=out["value_bytes"])
        return out["ops"], result

    return _measured(server, run)


def write_keys_and_hashes(server, keys, value_size):
    """Writes `SET key:N` over `keys` keys and `HSET hash:N` of 100 fields over `keys` / 100
    hashes, each once in order, pipelined: the data set bench/sustained and bench/overwrites
    then write over."""
    hashes = keys // 100
    fields = " ".join(f"field:{i} __VALUE__" for i in range(100))
    for argv in (["-command", "SET key:__RAND__ __VALUE__", "-r", str(keys), "-c", str(keys)],
                 ["-command", f"HSET hash:__RAND__ {fields}", "-r", str(hashes), "-c", str(hashes)]):
        subprocess.run([setup.binary("shale-bench"), "-h", server.host, "-port", str(server.port), "--dist",
                        "sequential", "-p", "8", "-P", "16", "--value-size", str(value_size), "-q", *argv],
                       check=True, stdout=subprocess.DEVNULL)


def shale_bench(servers, name, args_for):
    """`args_for(server)` gives shale-bench's arguments, or None when that server has no such
    command (Redis has no TR.*)."""
    def one(server):
        args = args_for(server)
        return None if args is None else shale_bench_once(server, args)

    return _row(name, _abbreviated(args_for(servers[0]) or []), servers, one)


def _abbreviated(args):
    """The arguments as one line, with a run of one repeated word written `word ×n`."""
    words = " ".join(args).split(" ")
    out = []
    for word in words:
        if out and out[-1][0] == word:
            out[-1][1] += 1
        else:
            out.append([word, 1])
    return " ".join(w if n == 1 else f"{w} ×{n}" for w, n in out)


YCSB_LINE = re.compile(r"^\[(\w+)\], ([^,]+), ([0-9.eE+-]+)$")


def ycsb(servers, phase, workload, group, records, threads, fields):
    """One YCSB phase (`load` or `run`) of a core workload for a command group."""
    def one(server):
        argv = [setup.YCSB, phase, "-P", os.path.join(setup.ROOT, "bench", "ycsb", "workloads", f"workload{workload}"),
                "-p", f"redis.host={server.host}", "-p", f"redis.port={server.port}",
                "-p", f"redis.command_group={group}", "-p", f"recordcount={records}",
                "-p", f"operationcount={records}", "-threads", str(threads), *fields]

        def run():
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            stats = {}
            for line in out.splitlines():
                m = YCSB_LINE.match(line.strip())
                if m:
                    stats[(m.group(1), m.group(2))] = float(m.group(3))
            failed = {k: v for k, v in stats.items() if k[1].startswith("Return=") and k[1] != "Return=OK"}
            if failed:
                raise RuntimeError(f"YCSB {phase} {workload} {group} on {server.name}: {failed}")
            latency = {}
            for op in ("INSERT", "READ", "UPDATE"):
                if (op, "AverageLatency(us)") in stats:
                    latency[op] = dict(avg=stats[(op, "AverageLatency(us)")] / 1000,
                                       p99=stats[(op, "99thPercentileLatency(us)")] / 1000)
            ops = sum(v for (op, k), v in stats.items() if k == "Operations" and op in ("INSERT", "READ", "UPDATE"))
            return ops, Result(stats[("OVERALL", "Throughput(ops/sec)")], latency=latency)

        return _measured(server, run)

    name = "load" if phase == "load" else f"workload {workload.upper()}"
    return _row(f"{group} {name}", f"{records} records", servers, one)


def restart_time(start, keys):
    """Loads `keys` keys with redis-cli --pipe, stops the server, starts it again and times
    until it answers PING. `start()` returns a fresh server on the same data directory."""
    proto = bytearray()
    for i in range(keys):
        k, v = f"key:{i:08d}".encode(), b"v" * 100
        proto += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v)
    server = start()
    try:
        subprocess.run(["redis-cli", "-p", str(server.port), "--pipe"], input=bytes(proto), capture_output=True,
                       check=True)
    finally:
        server.stop()
    started = time.time()
    server = start()
    try:
        elapsed = time.time() - started
        size = int(server.cli("DBSIZE"))
    finally:
        server.stop()
    return elapsed, size


def settle_compactions(server, limit=120):
    """Waits until a server that reports RocksDB figures in INFO has no compaction running or
    pending, so the reads that follow measure reads; returns the seconds waited."""
    started = time.time()
    while time.time() - started < limit:
        info = dict(line.split(":", 1) for line in server.cli("INFO", "rocksdb").splitlines() if ":" in line)
        busy = sum(int(info.get(k, 0)) for k in ("num_running_compactions", "estimate_pending_compaction_bytes",
                                                 "num_running_flushes"))
        if not busy:
            break
        time.sleep(1)
    return time.time() - started
