#!/usr/bin/env python3
"""Sends the same commands to Redis and to Shale and prints every reply that differs.

Usage: scripts/compare-with-redis.py REDIS_PORT SHALE_PORT COMMAND_FILE...

Each line of a command file is one command, split on spaces (no quoting). Both servers are
flushed first. Exits 1 if any reply differs.
"""

import socket
import sys


def encode(parts):
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


def read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in b"+-:":
        return (kind + rest).decode()
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    return line


def main():
    redis_port, shale_port, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    servers = []
    for port in (redis_port, shale_port):
        s = socket.create_connection(("127.0.0.1", port))
        servers.append((s, s.makefile("rb")))
    for s, f in servers:
        s.sendall(encode([b"FLUSHALL"]))
        read_reply(f)
    checked = differ = 0
    for path in files:
        for line in open(path):
            parts = [p.encode() for p in line.split()]
            if not parts:
                continue
            replies = []
            for s, f in servers:
                s.sendall(encode(parts))
                replies.append(read_reply(f))
            checked += 1
            if replies[0] != replies[1]:
                differ += 1
                print(f"DIFF {line.strip()}\n  redis: {replies[0]!r}\n  shale: {replies[1]!r}")
    print(f"{checked} commands, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
