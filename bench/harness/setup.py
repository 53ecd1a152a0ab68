"""What the harness needs before it measures: Redis's tools from Debian, a release build of
Shale, the YCSB binding, and a description of the machine for the report's header."""

import os
import platform
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/shale-target"))
YCSB = os.path.join(ROOT, "bench", "ycsb", "ycsb")


def binary(name):
    return os.path.join(TARGET, "release", name)


def install_redis():
    if shutil.which("redis-server") and shutil.which("redis-benchmark"):
        return
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server", "redis-tools"], check=True)


def install_java():
    if shutil.which("mvn") and shutil.which("java"):
        return
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", "maven", "default-jdk-headless"], check=True)


def build():
    subprocess.run(["cargo", "build", "--release", "--bin", "shale-server", "--bin", "shale-bench",
                    "--bin", "shale-compactor"], cwd=ROOT,
                   check=True, env=dict(os.environ, CARGO_TARGET_DIR=TARGET))
    subprocess.run(["mvn", "-q", "-B", "-f", os.path.join(ROOT, "bench", "ycsb", "pom.xml"), "package"], check=True)


def _first_line(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        return "not found"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


def _disk(path):
    """The device under `path`, its size and free space, and whether it spins."""
    usage = shutil.disk_usage(path)
    device = subprocess.run(["df", "--output=source", path], capture_output=True, text=True).stdout.split()[-1]
    kind = "?"
    block = os.path.basename(device).rstrip("0123456789")
    rotational = f"/sys/block/{block}/queue/rotational"
    if os.path.exists(rotational):
        with open(rotational) as f:
            kind = f"the kernel's rotational flag is {f.read().strip()} (virtual disks often say 1)"
    return f"{device}, {usage.total / 2**30:.0f} GiB ({usage.free / 2**30:.0f} GiB free), {kind}"


def machine(work_dir):
    """Lines for the report's header."""
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = next(int(line.split()[1]) for line in f if line.startswith("MemTotal")) * 1024
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    return [
        f"- CPU: {os.cpu_count()} cores, {cpu}",
        f"- Memory: {mem / 2**30:.1f} GiB",
        f"- Disk (data directories): {_disk(work_dir)}",
        f"- OS: {platform.system()} {platform.release()}",
        f"- Shale: commit {commit}, {_first_line(['rustc', '--version'])}",
        f"- Redis: {_first_line(['redis-server', '--version'])}",
        f"- redis-benchmark: {_first_line(['redis-benchmark', '--version'])}",
        f"- YCSB: site.ycsb:core 0.17.0 with Jedis 5.2.0 (bench/ycsb), {_first_line(['java', '-version'])}",
    ]
