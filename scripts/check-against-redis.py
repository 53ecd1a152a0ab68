#!/usr/bin/env python3
"""The differential part of the test suite: Shale and Redis get the same commands.

Usage: scripts/check-against-redis.py SHALE_BINARY [--seeds 3] [--commands 4000]

Starts the given shale-server and Debian's Redis on free ports, each in a fresh temporary
directory, then runs the fixed cases of scripts/compare/*.txt (compare-with-redis.py) and the
random commands of fuzz-against-redis.py for seeds 1..N. Debian's redis-tools package ships the
server as redis-check-rdb, which runs as a server when called by the name redis-server; that
package starts no service, so installing it leaves port 6379 free. Exits 1 if a reply or a
key's state differed, or if a server could not be started.
"""

import argparse
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_binary(scratch):
    found = shutil.which("redis-server")
    if found:
        return found
    check_rdb = shutil.which("redis-check-rdb")
    if not check_rdb:
        sys.exit("no redis-server or redis-check-rdb on PATH (apt-get install redis-tools)")
    link = os.path.join(scratch, "redis-server")
    os.symlink(check_rdb, link)
    return link


def start(argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{argv[0]} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    sys.exit(f"{argv[0]} did not answer PING on port {port}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("shale_binary")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--commands", type=int, default=4000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shale-vs-redis-") as scratch:
        redis_port, shale_port = free_port(), free_port()
        servers = []
        try:
            servers.append(start([redis_binary(scratch), "--port", str(redis_port), "--dir",
                                  scratch, "--save", "", "--appendonly", "no",
                                  "--enable-debug-command", "yes"], redis_port))
            shale_dir = os.path.join(scratch, "shale")
            servers.append(start([options.shale_binary, "--port", str(shale_port), "--dir",
                                  shale_dir, "--loglevel", "warning"], shale_port))
            ports = [str(redis_port), str(shale_port)]
            runs = [[os.path.join(HERE, "compare-with-redis.py"), *ports,
                     *sorted(glob.glob(os.path.join(HERE, "compare", "*.txt")))]]
            runs += [[os.path.join(HERE, "fuzz-against-redis.py"), *ports, "--seed", str(seed),
                      "--commands", str(options.commands)]
                     for seed in range(1, options.seeds + 1)]
            failed = 0
            for run in runs:
                failed += subprocess.run([sys.executable, *run]).returncode != 0
        finally:
            for proc in servers:
                proc.terminate()
                proc.wait()
    print(f"against Redis: {len(runs)} runs, {failed} with differences")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
