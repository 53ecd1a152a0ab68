"""Offloaded compaction on one machine: the stand-in for Todis's small database node and its
pool of compaction workers. The node is confined to one core (a cpuset cgroup) and a
`shale-compactor` to the other; beside it, the same confined node compacting itself, and Shale
unconfined on both cores. The memory cgroup of the run applies to the node in every setup; the
worker, a machine of its own in production, has none."""

import os
import signal
import subprocess
import sys
from dataclasses import dataclass

from . import cgroup, servers, setup


@dataclass
class Setup:
    name: str
    # The node's cores, or None for all of them.
    node_cpus: str = None
    # The worker's cores, or None for no worker.
    worker_cpus: str = None


SETUPS = [
    Setup("Shale, one core", node_cpus="0"),
    Setup("Shale, one core + worker", node_cpus="0", worker_cpus="1"),
    Setup("Shale, both cores"),
]

NODE_CGROUP = "shale-offload-node"
WORKER_CGROUP = "shale-offload-worker"


def io_written(pid):
    """Bytes process `pid` (its threads included) caused to be written to storage."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("write_bytes:"))
    except (OSError, StopIteration):
        return 0


class Running:
    """One setup's node (and worker), started fresh in `work`; stops them on exit."""

    def __init__(self, chosen, work, memory_limit, memory_cgroup, extra=()):
        self.setup, self.worker = chosen, None
        extra = list(extra)
        if chosen.worker_cpus is not None:
            self.worker = start_worker()
            extra += ["--compaction-workers", self.worker.url]
        memory = (memory_cgroup, memory_limit) if memory_limit else None
        self.server = servers.start_shale(setup.binary("shale-server"), os.path.join(work, chosen.name), extra,
                                          memory=memory)
        self.server.name = chosen.name
        self.memory_cgroup = memory_cgroup
        self.confined = self.server.confined
        self.pinned = True
        if chosen.node_cpus is not None:
            self.pinned &= cgroup.pin(NODE_CGROUP, self.server.proc.pid, chosen.node_cpus)
        if self.worker:
            self.pinned &= cgroup.pin(WORKER_CGROUP, self.worker.pid, chosen.worker_cpus)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        """Stops the node and its worker and removes their cgroups."""
        self.server.stop()
        if self.worker:
            self.worker.send_signal(signal.SIGTERM)
            self.worker.wait()
        cgroup.release(self.memory_cgroup)
        cgroup.unpin(NODE_CGROUP)
        cgroup.unpin(WORKER_CGROUP)

    def written(self):
        """What the node and its worker wrote to storage so far."""
        return io_written(self.server.proc.pid) + (io_written(self.worker.pid) if self.worker else 0)

    def worker_cpu_seconds(self):
        if not self.worker:
            return 0.0
        with open(f"/proc/{self.worker.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / servers.CLK_TCK

    def remote_jobs(self):
        info = dict(line.split(":", 1) for line in self.server.cli("INFO", "rocksdb").splitlines() if ":" in line)
        return int(info.get("remote_compactions_done", 0)), int(info.get("remote_compaction_fallbacks", 0))


def start_worker():
    """A shale-compactor on a free port, two jobs at once."""
    port = servers.free_port()
    proc = subprocess.Popen([setup.binary("shale-compactor"), "--port", str(port), "--jobs", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line.startswith("shale-compactor ready on "):
        proc.kill()
        raise RuntimeError(f"shale-compactor did not start: {line!r}")
    proc.url = line.split()[3].rstrip(",")
    return proc


def describe(pinned):
    """How the setups were confined (`pinned`: whether every cpuset was made), for a section's
    text."""
    where = ("each in a cpuset cgroup of its own core" if pinned
             else "unpinned (no cgroup v1 cpuset controller), so these figures do not show offloading")
    return (f"*one core*: the node confined to core 0; *one core + worker*: the node on core 0 and "
            f"`shale-compactor --jobs 2` on core 1, {where}; *both cores*: the node unconfined. This is a "
            "single-machine stand-in for a small database node and a compaction pool on other machines: "
            "the worker reads the node's files and writes its output through the same disk, and the load "
            "generator, unconfined, shares the two cores with both.")


def log(message):
    print(message, file=sys.stderr, flush=True)
