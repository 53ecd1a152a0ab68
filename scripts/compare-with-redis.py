#!/usr/bin/env python3
"""Sends the same commands to Redis and to Shale and prints every reply that differs.

Usage: scripts/compare-with-redis.py REDIS_PORT SHALE_PORT COMMAND_FILE...

Each line of a command file is one command, split on spaces; "..." or '...' groups words
that contain spaces (or nothing: "" is an empty argument), and backslashes are literal. A quoted
argument may run over several lines (the code of a function library). A line may start with @NAME to send the command on another connection of that name (opened
on first use). With @NAME& the command is a blocking one: it is sent, the script waits until
the server lists that connection as blocked, and its reply is read and compared at the next
line @NAME? (which sends nothing), so the lines between decide how its wait ends. A line
that starts with a lone ! is sent to both and its replies are not compared (LATENCY RESET,
whose count depends on the stalls each server happened to record). A connection that has run SUBSCRIBE or PSUBSCRIBE (one channel or pattern per
line) listens from then on: after every command, the messages it received are compared too.
Both servers are flushed first. Exits 1 if any reply or message differs.
"""

import os
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from wire import Server  # noqa: E402


def split(line):
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    lexer.commenters = ""
    return list(lexer)


def send_blocking(control, blocked, parts):
    """Sends a blocking command on `blocked` and waits until the server lists it as blocked."""
    client_id = blocked.call([b"CLIENT", b"ID"])[1:].encode()
    blocked.send(parts)
    deadline = time.time() + 10
    while time.time() < deadline:
        listed = control.call([b"CLIENT", b"LIST", b"ID", client_id])
        flags = next(f for f in listed.split() if f.startswith(b"flags="))
        if b"b" in flags[len(b"flags="):]:
            return
        time.sleep(0.005)
    sys.exit(f"{parts!r} did not block")


def main():
    ports, files = (int(sys.argv[1]), int(sys.argv[2])), sys.argv[3:]
    # Per server, its connections by name.
    connections = [{"main": Server(port)} for port in ports]
    for server in connections:
        server["main"].call([b"FLUSHALL"])
    listening = []
    checked = differ = 0
    for path in files:
        pending = ""
        for line in open(path):
            line = pending + line
            try:
                parts = [p.encode() for p in split(line)]
            except ValueError:  # a quote still open: the argument goes on
                pending = line
                continue
            pending = ""
            if not parts:
                continue
            compared = parts[0] != b"!"
            if not compared:
                parts = parts[1:]
            name = "main"
            if parts[0].startswith(b"@"):
                name, parts = parts[0][1:].decode(), parts[1:]
            blocking, answer = name.endswith("&"), name.endswith("?")
            name = name.rstrip("&?")
            for port, server in zip(ports, connections):
                server.setdefault(name, Server(port))
            if blocking:
                for server in connections:
                    send_blocking(server["main"], server[name], parts)
                continue
            if answer:
                replies = [server[name].reply() for server in connections]
            else:
                replies = [server[name].call(parts) for server in connections]
            if parts and parts[0].lower() in (b"subscribe", b"psubscribe") and name not in listening:
                listening.append(name)
            # Every listener's messages so far, read up to the reply of a PING sent now.
            heard = [[(n, server[n].drain()) for n in listening] for server in connections]
            if not compared:
                continue
            checked += 1
            if replies[0] != replies[1] or heard[0] != heard[1]:
                differ += 1
                print(f"DIFF {line.strip()}\n  redis: {replies[0]!r} {heard[0]!r}\n"
                      f"  shale: {replies[1]!r} {heard[1]!r}")
    print(f"{checked} commands, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
