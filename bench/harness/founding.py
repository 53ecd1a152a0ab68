"""The founding workload, measured honestly: values with the Wikipedia set's length (1-8 KB of
text, 2.8 KB on average) loaded with MSETs of 32 and read back with MGETs of 32, sequentially
and at random, in two rounds each, over a data set several times the memory the server may
use, page cache included (a memory cgroup), after the OS page cache is dropped. Beside the
server's figures: the disk's own limits (fio) and the engine's (`shale-bench --engine`: the same
batches on Shale's storage engine without a server, confined alike)."""

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from . import cgroup, offload, plots, servers, setup
from .experiments import settle_compactions

HEADING = "## Larger than memory: the founding workload"

# The Wikipedia articles' lengths: 1-8 KB, 2.8 KB on average.
VALUES = "1024-8192:2867"
MEAN_VALUE = 2867
# How long a load's flushes and compactions may take after it (shale-bench --engine's is
# the same).
SETTLE_LIMIT = 600
# Values from this size on go to blob files in the run with them: most of the text values.
BLOB_THRESHOLD = "2kb"
# shale-bench's threads for the engine's reads: the server's worker threads (one per core),
# which are what run its MultiGets.
ENGINE_READERS = os.cpu_count() or 2


@dataclass
class Run:
    """One server's (or the engine's) figures."""
    name: str
    keys: int = 0
    load_seconds: float = 0.0
    value_bytes: int = 0
    # Bytes the server wrote to storage during the load and the compactions after it.
    written: int = 0
    disk_bytes: int = 0
    # Seconds the flushes and compactions the load left took after it.
    settled: float = 0.0
    # (label, keys/s, per-second MGETs) of each read round.
    rounds: list = field(default_factory=list)
    confined: bool = False

    @property
    def load_mb_s(self):
        return self.value_bytes / 2**20 / self.load_seconds if self.load_seconds else 0.0

    @property
    def settled_mb_s(self):
        """Load MB/s with the compactions it left counted in."""
        seconds = self.load_seconds + self.settled
        return self.value_bytes / 2**20 / seconds if seconds else 0.0


@dataclass
class Disk:
    seq_write_mb_s: float
    # 4 KB random reads per second, one at a time on each of `threads` threads, and the
    # device's peak with 32 in flight.
    rand_read_iops: float
    threads: int
    peak_iops: float


def install_fio():
    if subprocess.run(["which", "fio"], capture_output=True).returncode == 0:
        return
    subprocess.run(["apt-get", "install", "-y", "-qq", "fio"], check=True)


def _fio(work, args):
    out = subprocess.run(["fio", "--output-format=json", f"--filename={os.path.join(work, 'fio.data')}",
                          "--size=2G", "--direct=1", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["jobs"][0]


def disk_limits(work, threads):
    """The disk under `work`, past the page cache: sequential writes of 1 MB, and random 4 KB
    reads at the server's concurrency and at 32 in flight."""
    install_fio()
    write = _fio(work, ["--name=seqwrite", "--rw=write", "--bs=1M", "--ioengine=psync", "--end_fsync=1"])
    common = ["--rw=randread", "--bs=4k", "--runtime=15", "--time_based", "--group_reporting"]
    reads = _fio(work, ["--name=randread", "--ioengine=psync", f"--numjobs={threads}", *common])
    peak = _fio(work, ["--name=randpeak", "--ioengine=libaio", "--iodepth=32", *common])
    os.remove(os.path.join(work, "fio.data"))
    return Disk(write["write"]["bw"] / 1024, reads["read"]["iops"], threads, peak["read"]["iops"])


def drop_page_cache():
    """As the report did before reading; root only."""
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as err:
        print(f"can't drop the page cache: {err}", file=sys.stderr)


def disk_reads():
    """Read requests completed by the machine's disks (whole disks: a partition's count again)."""
    disks = {name for name in os.listdir("/sys/block") if not name.startswith(("loop", "ram"))}
    with open("/proc/diskstats") as f:
        return sum(int(fields[3]) for fields in map(str.split, f) if fields[2] in disks)


def written_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("write_bytes:"))


def run_bench(target, args, confined_as=None, limit=None):
    """shale-bench with `target` (its leading arguments); its JSON report. With `confined_as`,
    the shale-bench process itself (the engine's runs) starts in that memory cgroup."""
    argv = [setup.binary("shale-bench"), *target, "--json", "-q", *args]
    if confined_as:
        argv, _ = cgroup.confined_from_start(confined_as, limit, argv)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"shale-bench {' '.join(args)} failed")
    return json.loads(out)


def load_args(keys):
    return ["--mset", "32", "--dist", "sequential", "-r", str(keys), "-c", str(keys // 32), "-p", "8",
            "--value-size", VALUES, "--text"]


def _read_rounds(run, target, keys, connections, round_seconds, confined_as=None, limit=None):
    for dist in ("sequential", "uniform"):
        drop_page_cache()
        for n in (1, 2):
            out = run_bench(target, ["--mget", "32", "--dist", dist, "-r", str(keys), "-p", str(connections),
                                  "-d", str(round_seconds)], confined_as, limit)
            label = f"{'sequential' if dist == 'sequential' else 'random'} {n}"
            run.rounds.append((label, out["ops"] * 32 / out["seconds"], out["per_second"]))
            print(f"{run.name}: {label} at {run.rounds[-1][1]:,.0f} keys/s", file=sys.stderr, flush=True)


def server_run(server, keys, round_seconds):
    """Loads and reads `server`."""
    run = Run(server.name, keys, confined=server.confined)
    target = ["-h", server.host, "-port", str(server.port)]
    before = written_bytes(server.proc.pid)
    out = run_bench(target, load_args(keys))
    run.load_seconds, run.value_bytes = out["seconds"], out["value_bytes"]
    print(f"{run.name}: loaded {keys:,} keys at {run.load_mb_s:.0f} MB/s", file=sys.stderr, flush=True)
    run.settled = settle_compactions(server, limit=SETTLE_LIMIT)
    run.written = written_bytes(server.proc.pid) - before
    run.disk_bytes = server.disk_bytes() or 0
    _read_rounds(run, target, keys, 50, round_seconds)
    return run


def engine_run(work, keys, round_seconds, memory_limit):
    """The same batches on Shale's storage engine, in shale-bench processes confined alike:
    the load from 8 threads, the reads from as many as the server has workers."""
    directory = os.path.join(work, "engine")
    os.makedirs(directory, exist_ok=True)
    run = Run("engine", keys)
    name = "shale-founding-engine"
    target = ["--engine", directory]
    run.confined = os.path.exists(os.path.join(cgroup.ROOT, "memory.limit_in_bytes"))
    started = time.time()
    out = run_bench(target, load_args(keys), name, memory_limit)
    # shale-bench --engine waits for the compactions its load left before it exits.
    run.load_seconds, run.value_bytes = out["seconds"], out["value_bytes"]
    run.settled = max(time.time() - started - out["seconds"], 0.0)
    print(f"engine: loaded {keys:,} keys at {run.load_mb_s:.0f} MB/s", file=sys.stderr, flush=True)
    # Archived WAL files are kept for replicas until a server trims them; the engine has none.
    run.disk_bytes = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(directory)
                         for f in files if "archive" not in root.split(os.sep))
    _read_rounds(run, target, keys, ENGINE_READERS, round_seconds, name, memory_limit)
    cgroup.release(name)
    return run


def confined_shale_run(work, directory, extra, name, keys, round_seconds, limit):
    """A fresh shale-server (with `extra` arguments) in `work/directory`, named `name`, loaded
    and read in a memory cgroup of `limit` bytes."""
    shale = servers.start_shale(setup.binary("shale-server"), os.path.join(work, directory), extra,
                                memory=("shale-founding", limit))
    shale.name = name
    try:
        return server_run(shale, keys, round_seconds)
    finally:
        shale.stop()
        cgroup.release("shale-founding")


def measure(work, args):
    """Every figure of the section, in one run."""
    keys = max(int(args.gib * 2**30 / MEAN_VALUE) // 32 * 32, 320)
    limit = int(args.memory_limit * 2**30)
    disk = disk_limits(work, ENGINE_READERS)
    print(f"disk: {disk}", file=sys.stderr, flush=True)
    engine = engine_run(work, keys, args.round_seconds, limit) if getattr(args, "engine", True) else None
    shale_run = confined_shale_run(work, "shale", getattr(args, "shale_args", []), "Shale", keys,
                                   args.round_seconds, limit)
    runs = [run for run in (engine, shale_run) if run]
    if engine:
        # Blob files, off by default: what they do to the same load and reads.
        runs.append(confined_shale_run(work, "shale-blob", ["--rocksdb.min-blob-size", BLOB_THRESHOLD],
                                       f"Shale, blob files from {BLOB_THRESHOLD}", keys, args.round_seconds,
                                       limit))
    if args.redis:
        redis = servers.start_redis(os.path.join(work, "redis"))
        try:
            runs.append(server_run(redis, keys, args.round_seconds))
        finally:
            redis.stop()
    return keys, limit, disk, runs


def section(args, keys, limit, disk, runs, image, minutes):
    gib = 2**30
    engine, shale = runs[0], runs[1]
    random_2 = dict((r.name, dict((label, rate) for label, rate, _ in r.rounds)) for r in runs)
    confined = "in a memory cgroup" if shale.confined else "unconfined (no cgroup v1 memory controller)"
    lines = [
        HEADING,
        "",
        f"Produced by `bench/founding` in {minutes:.0f} minutes. {keys:,} keys of 1-8 KB of text, 2.8 KB on average",
        f"(`--value-size {VALUES} --text`), {shale.value_bytes / gib:.1f} GiB of values, loaded with",
        "`shale-bench --mset 32 --dist sequential -p 8`; then, after the OS page cache is dropped, MGETs of 32",
        f"keys from 50 connections, sequential (`--dist sequential`) then random, two rounds of {args.round_seconds} s each,",
        f"as the Todis report reads. Shale runs {confined} of {limit / gib:g} GiB, its RSS and page cache",
        f"together, so the values are {shale.value_bytes / limit:.1f} times its memory; its configuration is the default.",
        "The engine is `shale-bench --engine`: the same batches on Shale's storage engine (RocksDB with",
        "Shale's options, its record caches included) without a server, in a cgroup of the same size, loading",
        f"from 8 threads and reading from {ENGINE_READERS} (the server's worker threads). Redis holds the set in RAM,",
        "unconfined. Write amplification is what the server wrote to storage during the load and the",
        f"compactions after it (`/proc/PID/io`), over the bytes of values; compactions are waited for up to {SETTLE_LIMIT} s.",
        "",
        f"The disk, past the page cache (fio, 2 GiB file, `--direct=1`): sequential writes of 1 MB at",
        f"{disk.seq_write_mb_s:,.0f} MB/s; random 4 KB reads at {disk.rand_read_iops:,.0f}/s one at a time on",
        f"{disk.threads} threads (the server's worker threads), {disk.peak_iops:,.0f}/s with 32 in flight.",
        "",
        "| | load MB/s | load keys/s | compactions after it | MB/s with them | written / values | bytes on disk | "
        "sequential 1 | sequential 2 | random 1 | random 2 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        amp = f"{run.written / run.value_bytes:.2f}" if run.written else "-"
        rounds = " | ".join(f"{rate:,.0f}" for _, rate, _ in run.rounds)
        lines.append(f"| {run.name} | {run.load_mb_s:,.0f} | {run.keys / run.load_seconds:,.0f} | "
                     f"{run.settled:.0f} s | {run.settled_mb_s:,.0f} | {amp} | {run.disk_bytes / gib:.2f} GiB | "
                     f"{rounds} |")
    shale_random = random_2["Shale"]["random 2"]
    blob = next((run for run in runs if run.name.startswith("Shale, blob")), None)
    lines += [
        "",
        "Read rounds in keys/s. Against the limits, in this run:",
        "",
        f"- Shale's load: **{shale.load_mb_s / engine.load_mb_s:.2f}** of the engine's MB/s with the same batches "
        f"(goal: 0.8); **{shale.settled_mb_s / engine.settled_mb_s:.2f}** counting the compactions each load left "
        "(the engine, with no server to share the cores with, loads faster than it compacts).",
        f"- Shale's second random round: **{shale_random / disk.rand_read_iops:.2f}** of the disk's random reads at "
        f"{disk.threads} threads, its worker threads, one read per key (goal: 0.7), and "
        f"**{shale_random / disk.peak_iops:.2f}** of them with 32 in flight: reads that wait for the disk run off the "
        f"workers, many at once. **{shale_random / random_2['engine']['random 2']:.2f}** of the engine's, which reads "
        f"from {ENGINE_READERS} threads.",
    ]
    if blob:
        lines += [
            f"- With blob files (`rocksdb.min-blob-size {BLOB_THRESHOLD}`, off by default): load "
            f"**{blob.load_mb_s / engine.load_mb_s:.2f}** of the engine's MB/s, writing "
            f"{blob.written / blob.value_bytes:.2f} bytes per byte of values instead of "
            f"{shale.written / shale.value_bytes:.2f}; second random round "
            f"**{random_2[blob.name]['random 2'] / disk.rand_read_iops:.2f}** of the disk's random reads.",
        ]
    lines += [
        "",
        f"![MGETs of 32 over time]({image})",
    ]
    return "\n".join(lines)


def report(args):
    """Measures and returns the section's text, its plot drawn beside `args.out`; only prints
    the figures of a run without the engine (an experiment). `args`: memory_limit (GiB), gib
    (of values; default 5 times the limit), round_seconds, redis, out, and optionally engine
    and shale_args."""
    if getattr(args, "gib", None) is None:
        args.gib = 5 * args.memory_limit
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="shale-founding-", dir=os.path.expanduser("~")) as work:
        keys, limit, disk, runs = measure(work, args)
    for run in runs:
        print(f"{run.name}: load {run.load_mb_s:.0f} MB/s, written/values "
              f"{run.written / max(run.value_bytes, 1):.2f}, disk {run.disk_bytes / 2**30:.2f} GiB, rounds "
              f"{[round(rate) for _, rate, _ in run.rounds]}", file=sys.stderr, flush=True)
    if runs[0].name != "engine":
        return None
    img_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "img")
    os.makedirs(img_dir, exist_ok=True)
    image = plots.image_path(img_dir, "throughput-founding-reads.png")
    labels = [label for label, _, _ in runs[0].rounds]
    plots.throughput_over_time([(label, {run.name: run.rounds[i][2] for run in runs}) for i, label in enumerate(labels)],
                               image, "MGETs of 32 per second; the page cache dropped before each first round",
                               unit="MGET/s")
    rel = os.path.relpath(image, os.path.dirname(os.path.abspath(args.out)))
    return section(args, keys, limit, disk, runs, rel, (time.time() - started) / 60)


OFFLOAD_HEADING = "## Offloaded compaction"


@dataclass
class OffloadRun(Run):
    """One setup's load of the founding workload, and the compactions after it (no reads)."""
    node_cpu: float = 0.0
    worker_cpu: float = 0.0
    # MSETs of 32 each second of the load.
    per_second: list = field(default_factory=list)
    remote_jobs: int = 0
    fallbacks: int = 0
    pinned: bool = False

    def per_gib(self, seconds):
        return seconds / (self.value_bytes / 2**30)


def offload_run(chosen, work, keys, limit):
    """The founding load on one setup, fresh, and the compactions it leaves."""
    run = OffloadRun(chosen.name, keys)
    with offload.Running(chosen, work, limit, "shale-founding") as running:
        server = running.server
        target = ["-h", server.host, "-port", str(server.port)]
        cpu, written = server.cpu_seconds(), running.written()
        out = run_bench(target, load_args(keys))
        run.load_seconds, run.value_bytes, run.per_second = out["seconds"], out["value_bytes"], out["per_second"]
        offload.log(f"{run.name}: loaded at {run.load_mb_s:.0f} MB/s")
        run.settled = settle_compactions(server, limit=SETTLE_LIMIT)
        run.node_cpu = server.cpu_seconds() - cpu
        run.worker_cpu = running.worker_cpu_seconds()
        run.written = running.written() - written
        run.remote_jobs, run.fallbacks = running.remote_jobs()
        run.pinned = running.pinned
    return run


def offload_report(args):
    """The founding load on the three setups of `offload`, in one run: the section's text, its
    plot drawn beside `args.out`."""
    if getattr(args, "gib", None) is None:
        args.gib = 5 * args.memory_limit
    keys = max(int(args.gib * 2**30 / MEAN_VALUE) // 32 * 32, 320)
    limit = int(args.memory_limit * 2**30)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="shale-offload-", dir=os.path.expanduser("~")) as work:
        install_fio()
        seq_write = _fio(work, ["--name=seqwrite", "--rw=write", "--bs=1M", "--ioengine=psync",
                                "--end_fsync=1"])["write"]["bw"] / 1024
        os.remove(os.path.join(work, "fio.data"))
        # The setup with the worker runs between the other two, so neither gets the warmer machine.
        runs = {chosen.name: offload_run(chosen, work, keys, limit) for chosen in offload.SETUPS}
    minutes = (time.time() - started) / 60
    one, worker, both = (runs[chosen.name] for chosen in offload.SETUPS)
    img_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "img")
    os.makedirs(img_dir, exist_ok=True)
    image = plots.image_path(img_dir, "throughput-offloaded-compaction.png")
    plots.throughput_over_time(
        [("the founding load", {name: [n * 32 * MEAN_VALUE / 2**20 for n in run.per_second]
                                for name, run in runs.items()})],
        image, "Founding load, MB/s of values each second", unit="MB/s")
    rel = os.path.relpath(image, os.path.dirname(os.path.abspath(args.out)))
    gib = 2**30
    lines = [
        OFFLOAD_HEADING,
        "",
        f"Produced by `bench/founding --offload` in {minutes:.0f} minutes: the founding load above "
        f"({keys:,} keys, {one.value_bytes / gib:.1f} GiB of values, MSETs of 32 from 8 connections), on a fresh "
        f"server in a memory cgroup of {limit / gib:g} GiB in each of three setups, and the compactions it "
        f"leaves (waited for up to {SETTLE_LIMIT} s). " + offload.describe(all(r.pinned for r in runs.values())),
        "CPU is user+system time of the node (and of the worker) over the load and its compactions, per GiB of "
        "values; written is what the node and the worker wrote to storage (`/proc/PID/io`) over the bytes of values. "
        f"The disk, past the page cache (fio, `--direct=1`), takes sequential writes of 1 MB at {seq_write:,.0f} MB/s.",
        "",
        "| setup | load MB/s | compactions after it | MB/s with them | node CPU per GiB | worker CPU per GiB "
        "| written / values | remote jobs (fallbacks) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, run in runs.items():
        lines.append(f"| {name} | {run.load_mb_s:,.0f} | {run.settled:.0f} s | {run.settled_mb_s:,.0f} | "
                     f"{run.per_gib(run.node_cpu):.1f} s | {run.per_gib(run.worker_cpu):.1f} s | "
                     f"{run.written / run.value_bytes:.2f} | {run.remote_jobs} ({run.fallbacks}) |")
    node_cpu_ratio = (worker.node_cpu / worker.value_bytes) / (one.node_cpu / one.value_bytes)
    amplification = (worker.written / worker.value_bytes) / (one.written / one.value_bytes)
    lines += [
        "",
        "Against the goals, in this run:",
        "",
        f"- The one-core node with a worker loads at **{worker.load_mb_s / one.load_mb_s:.2f}** times the MB/s of "
        f"the one-core node compacting itself (goal: 1.8), **{worker.settled_mb_s / one.settled_mb_s:.2f}** "
        "counting the compactions each load left;",
        f"- and at **{worker.load_mb_s / both.load_mb_s:.2f}** times Shale's on both cores (goal: 1.0), "
        f"**{worker.settled_mb_s / both.settled_mb_s:.2f}** counting the compactions.",
        f"- The node's own CPU per byte loaded: **{node_cpu_ratio:.2f}** of what compacting itself costs it "
        "(goal: at most 0.55).",
        f"- Bytes written per byte of values: **{amplification:.2f}** times local compaction's (goal: within 10%).",
        "",
        f"![Founding load, each second]({rel})",
    ]
    return "\n".join(lines)
