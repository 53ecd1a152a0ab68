"""Memory cgroups (v1) around processes: their RSS and the page cache their I/O fills are
bounded together, which a process's own settings cannot do. Root only; without a v1 memory
controller the process runs unconfined and the caller says so."""

import os
import sys

ROOT = "/sys/fs/cgroup/memory"


def confine(name, pid, limit):
    """Puts process `pid` in cgroup `name` of `limit` bytes; False where none can be made."""
    path = os.path.join(ROOT, name)
    if not os.path.exists(os.path.join(ROOT, "memory.limit_in_bytes")):
        print(f"no cgroup v1 memory controller: {name} runs unconfined", file=sys.stderr)
        return False
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        return True
    except OSError as err:
        print(f"no memory cgroup ({err}): {name} runs unconfined", file=sys.stderr)
        return False


def release(name):
    """Removes cgroup `name` once its processes are gone."""
    try:
        os.rmdir(os.path.join(ROOT, name))
    except OSError:
        pass


CPUSET = "/sys/fs/cgroup/cpuset"


def pin(name, pid, cpus):
    """Puts process `pid` (all its threads, and those it starts later) in cpuset cgroup
    `name` of CPUs `cpus` (as "0" or "0-1"); False where none can be made."""
    path = os.path.join(CPUSET, name)
    if not os.path.exists(os.path.join(CPUSET, "cpuset.cpus")):
        print(f"no cgroup v1 cpuset controller: {name} runs on every core", file=sys.stderr)
        return False
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(CPUSET, "cpuset.mems")) as f:
            mems = f.read().strip()
        for key, value in (("cpuset.mems", mems), ("cpuset.cpus", cpus), ("cgroup.procs", str(pid))):
            with open(os.path.join(path, key), "w") as f:
                f.write(value)
        return True
    except OSError as err:
        print(f"no cpuset cgroup ({err}): {name} runs on every core", file=sys.stderr)
        return False


def unpin(name):
    """Removes cpuset cgroup `name` once its processes are gone."""
    try:
        os.rmdir(os.path.join(CPUSET, name))
    except OSError:
        pass
