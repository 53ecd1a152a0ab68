"""cgroups (v1) around processes. A memory cgroup bounds a process's RSS and the page cache its
I/O fills together, which a process's own settings cannot do; a cpuset cgroup confines it (all
its threads, and those it starts later) to some cores. Root only; without the controller the
process runs unconfined and the caller says so."""

import os
import sys

ROOT = "/sys/fs/cgroup/memory"
CPUSET = "/sys/fs/cgroup/cpuset"


def _make(controller, name, settings, unconfined):
    """Makes cgroup `name` of `controller` with `settings` ([(file, value)]); its path, or None
    (saying `name` `unconfined`) where none can be made."""
    if not os.path.exists(os.path.join(controller, settings[0][0])):
        print(f"no cgroup v1 {os.path.basename(controller)} controller: {name} {unconfined}", file=sys.stderr)
        return None
    path = os.path.join(controller, name)
    try:
        os.makedirs(path, exist_ok=True)
        for key, value in settings:
            with open(os.path.join(path, key), "w") as f:
                f.write(value)
        return path
    except OSError as err:
        print(f"no {os.path.basename(controller)} cgroup ({err}): {name} {unconfined}", file=sys.stderr)
        return None


def _enter(controller, name, pid, settings, unconfined):
    """Makes cgroup `name` of `controller` with `settings` and moves `pid` into it; False where
    none can be made."""
    path = _make(controller, name, settings, unconfined)
    if path is None:
        return False
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        return True
    except OSError as err:
        print(f"can't move {pid} into {path} ({err}): {name} {unconfined}", file=sys.stderr)
        return False


def _remove(controller, name):
    try:
        os.rmdir(os.path.join(controller, name))
    except OSError:
        pass


def confined_from_start(name, limit, argv):
    """`argv` made to start inside memory cgroup `name` of `limit` bytes, so that the limit is
    what it finds when it sizes its caches (a process moved in after it started would have
    sized them by the machine's memory); (argv, whether it will be confined)."""
    path = _make(ROOT, name, [("memory.limit_in_bytes", str(limit))], "runs unconfined")
    if path is None:
        return argv, False
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(path, "cgroup.procs"), *argv], True


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
