"""Finds the master through the sentinels with redis-py's Sentinel client and reads from it.

Usage: sentinel_check.py <master name> <sentinel port>...
Prints "master <host> <port> after-failover <value>".
"""

import sys

from redis.sentinel import Sentinel

name = sys.argv[1]
sentinel = Sentinel([("127.0.0.1", int(port)) for port in sys.argv[2:]], socket_timeout=2)
host, port = sentinel.discover_master(name)
master = sentinel.master_for(name, socket_timeout=2, decode_responses=True)
print(f"master {host} {port} after-failover {master.get('after-failover')}")
