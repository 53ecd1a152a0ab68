#!/usr/bin/env python3
"""Sends the same commands to Redis and to Shale and prints every reply that differs.

Usage: scripts/compare-with-redis.py REDIS_PORT SHALE_PORT COMMAND_FILE...

Each line of a command file is one command, split on spaces; "..." or '...' groups words
that contain spaces (or nothing: "" is an empty argument), and backslashes are literal. Both
servers are flushed first. Exits 1 if any reply differs.
"""

import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from wire import Server  # noqa: E402


def split(line):
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    lexer.commenters = ""
    return list(lexer)


def main():
    redis_port, shale_port, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    servers = [Server(redis_port), Server(shale_port)]
    for server in servers:
        server.call([b"FLUSHALL"])
    checked = differ = 0
    for path in files:
        for line in open(path):
            parts = [p.encode() for p in split(line)]
            if not parts:
                continue
            replies = [server.call(parts) for server in servers]
            checked += 1
            if replies[0] != replies[1]:
                differ += 1
                print(f"DIFF {line.strip()}\n  redis: {replies[0]!r}\n  shale: {replies[1]!r}")
    print(f"{checked} commands, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
