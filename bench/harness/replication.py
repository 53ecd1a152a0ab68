"""What bench/replication and bench/migration share: INFO fields, offsets sampled on both
servers of a master and its replica, the lag they show, and a section of docs/benchmarks.md
replaced in place."""

import re
import socket
import time


def info(server, section="replication"):
    text = server.cli("INFO", section)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))


def offsets(master, replica):
    return int(info(master)["master_repl_offset"]), int(info(replica).get("slave_repl_offset", "0"))


def wait_synced(master, replica, timeout=3600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m, r = offsets(master, replica)
        if info(replica).get("master_link_status") == "up" and r >= m:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{replica.name} never caught up")


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


class InfoReader:
    """INFO replication over one connection kept open, so a sample costs a round trip only."""

    def __init__(self, server):
        self.sock = socket.create_connection((server.host, server.port))
        self.buf = b""

    def send(self):
        self.sock.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n")

    def receive(self, field):
        while b"\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        header, self.buf = self.buf.split(b"\r\n", 1)
        length = int(header[1:])
        while len(self.buf) < length + 2:
            self.buf += self.sock.recv(65536)
        text, self.buf = self.buf[:length].decode(), self.buf[length + 2:]
        return int(re.search(rf"^{field}:(\d+)", text, re.M).group(1))


def sample_offsets(master, replica, stop, samples):
    """Asks both at once every 5 ms: (time, master offset, replica offset)."""
    master, replica = InfoReader(master), InfoReader(replica)
    while not stop.is_set():
        now = time.time()
        master.send()
        replica.send()
        samples.append((now, master.receive("master_repl_offset"), replica.receive("slave_repl_offset")))
        time.sleep(0.005)


def lag_seconds(samples):
    """For each master offset sampled, the time until a replica sample reached it."""
    lags = []
    for i, (t, m, _) in enumerate(samples):
        for t2, _, r in samples[i:]:
            if r >= m:
                lags.append(t2 - t)
                break
    return lags


def replace_section(path, heading, text):
    """Puts `text` in place of the section of `path` that starts with `heading` (up to the next
    `## ` heading), or at the end if there is none."""
    with open(path) as f:
        old = f.read()
    if heading in old:
        before, rest = old.split(heading, 1)
        after = rest.split("\n## ", 1)[1] if "\n## " in rest else None
        new = before.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n" + ("\n## " + after if after else "")
    else:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    with open(path, "w") as f:
        f.write(new)
