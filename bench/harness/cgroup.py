"""cgroups (v1) around processes. A memory cgroup bounds a process's RSS and the page cache its
I/O fills together, which a process's own settings cannot do; a cpuset cgroup confines it (all
its threads, and those it starts later) to some cores. Root only; without the controller the
process runs unconfined and the caller says so."""

import os
import sys

ROOT = "/sys/fs/cgroup/memory"
CPUSET = "/sys/fs/cgroup/cpuset"


def _enter(controller, name, pid, settings, unconfined):
    """Makes cgroup `name` of `controller` with `settings` ([(file, value)]) and moves `pid`
    into it; False (saying `name` `unconfined`) where none can be made."""
    if not os.path.exists(os.path.join(controller, settings[0][0])):
        print(f"no cgroup v1 {os.path.basename(controller)} controller: {name} {unconfined}", file=sys.stderr)
        return False
    path = os.path.join(controller, name)
    try:
        os.makedirs(path, exist_ok=True)
        for key, value in [*settings, ("cgroup.procs", str(pid))]:
            with open(os.path.join(path, key), "w") as f:
                f.write(value)
        return True
    except OSError as err:
        print(f"no {os.path.basename(controller)} cgroup ({err}): {name} {unconfined}", file=sys.stderr)
        return False


def _remove(controller, name):
    try:
        os.rmdir(os.path.join(controller, name))
    except OSError:
        pass


def confine(name, pid, limit):
    """Puts process `pid` in memory cgroup `name` of `limit` bytes; False where none can be made."""
    return _enter(ROOT, name, pid, [("memory.limit_in_bytes", str(limit))], "runs unconfined")


def release(name):
    """Removes memory cgroup `name` once its processes are gone."""
    _remove(ROOT, name)


def pin(name, pid, cpus):
    """Puts process `pid` in cpuset cgroup `name` of CPUs `cpus` ("0", "0-1"); False where none
    can be made."""
    try:
        with open(os.path.join(CPUSET, "cpuset.mems")) as f:
            mems = f.read().strip()
    except OSError:
        mems = "0"
    return _enter(CPUSET, name, pid, [("cpuset.mems", mems), ("cpuset.cpus", cpus)], "runs on every core")


def unpin(name):
    """Removes cpuset cgroup `name` once its processes are gone."""
    _remove(CPUSET, name)
