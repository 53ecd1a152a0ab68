"""Servers under test: ones the harness starts (Shale, Redis), whose CPU time and memory it can
read from /proc, and `--target` servers somebody else runs, which it can only talk to."""

import os
import signal
import socket
import subprocess
import time

from . import cgroup

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, host, port, proc=None, data_dir=None, confined=False):
        self.name, self.host, self.port = name, host, port
        self.proc, self.data_dir = proc, data_dir
        # Whether it runs in the memory cgroup it was started in.
        self.confined = confined

    @property
    def started_here(self):
        return self.proc is not None

    def cli(self, *args):
        out = subprocess.run(["redis-cli", "-h", self.host, "-p", str(self.port), *map(str, args)],
                             capture_output=True, text=True, timeout=600)
        return out.stdout.strip()

    def wait_ready(self, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                if self.cli("PING") == "PONG":
                    return
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} on {self.host}:{self.port} did not answer PING")

    def cpu_seconds(self):
        """User+system CPU time of a server started here, with that of its finished children
        (Redis's AOF rewrites); None for targets."""
        if self.proc is None:
            return None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / CLK_TCK

    def system_seconds(self):
        """The system (kernel) part of cpu_seconds(); None for targets."""
        if self.proc is None:
            return None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[12]) + int(fields[14])) / CLK_TCK

    def memory(self):
        """(resident bytes, peak resident bytes) of a server started here; None for targets."""
        if self.proc is None:
            return None
        values = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values[key] = int(rest.split()[0]) * 1024
        return values.get("VmRSS", 0), values.get("VmHWM", 0)

    def disk_bytes(self):
        """Bytes under the data directory of a server started here."""
        if self.data_dir is None:
            return None
        total = 0
        for root, _, files in os.walk(self.data_dir):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
        return total

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _start(name, argv, port, data_dir, confined=False):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server(name, "127.0.0.1", port, proc, data_dir, confined)
    try:
        server.wait_ready()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return server


def start_shale(binary, data_dir, extra=(), memory=None):
    """With `memory` (a cgroup's name, a limit in bytes), in that memory cgroup from its start,
    where it sizes its caches and memtables to the limit."""
    os.makedirs(data_dir, exist_ok=True)
    port = free_port()
    argv = [binary, "--port", str(port), "--dir", data_dir, "--loglevel", "warning", *extra]
    confined = False
    if memory:
        argv, confined = cgroup.confined_from_start(*memory, argv)
    return _start("Shale", argv, port, data_dir, confined)


def start_redis(data_dir, extra=()):
    os.makedirs(data_dir, exist_ok=True)
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--dir", data_dir, "--appendonly", "yes",
            "--appendfsync", "everysec", "--save", "", "--daemonize", "no", *extra]
    return _start("Redis", argv, port, data_dir)


def target(spec):
    """`host:port` or `name=host:port`."""
    name, _, address = spec.rpartition("=")
    host, _, port = address.rpartition(":")
    server = Server(name or address, host or "127.0.0.1", int(port))
    server.wait_ready(timeout=10)
    return server
