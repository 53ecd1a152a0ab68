"""redis-py's RedisCluster writing and reading many keys of six types across all slots of a
Shale cluster, in the layout the Go client (tests/go/cluster_clients) uses, so either can
check what the other wrote.

Usage: cluster_clients.py load|verify PORT PREFIX COUNT (PORT of any node). Exits non-zero
on the first difference.
"""

import sys

from redis.cluster import RedisCluster

BATCH = 1000


def write(pipe, key, i):
    """The i-th key: its type is i % 6; every 60th key, a string, has a TTL of an hour."""
    kind = i % 6
    if kind == 0:
        pipe.set(key, f"v{i}", ex=3600 if i % 60 == 0 else None)
    elif kind == 1:
        pipe.hset(key, mapping={"f1": f"a{i}", "f2": f"b{i}", "f3": i})
    elif kind == 2:
        pipe.rpush(key, f"x{i}", f"y{i}", f"z{i}")
    elif kind == 3:
        pipe.sadd(key, f"s{i}", f"t{i}", f"u{i}")
    elif kind == 4:
        pipe.zadd(key, {f"m{i}": i, f"n{i}": i + 1})
    else:
        pipe.xadd(key, {"f": f"v{i}"}, id=f"{i + 1}-1")


def read(pipe, key, i):
    kind = i % 6
    if kind == 0:
        pipe.get(key)
        if i % 60 == 0:
            pipe.ttl(key)
    elif kind == 1:
        pipe.hgetall(key)
    elif kind == 2:
        pipe.lrange(key, 0, -1)
    elif kind == 3:
        pipe.smembers(key)
    elif kind == 4:
        pipe.zrange(key, 0, -1, withscores=True)
    else:
        pipe.xrange(key)


def expected(i):
    """The replies read() gets for the i-th key, TTLs aside."""
    kind = i % 6
    if kind == 0:
        return [f"v{i}".encode()]
    if kind == 1:
        return [{b"f1": f"a{i}".encode(), b"f2": f"b{i}".encode(), b"f3": str(i).encode()}]
    if kind == 2:
        return [[f"x{i}".encode(), f"y{i}".encode(), f"z{i}".encode()]]
    if kind == 3:
        return [{f"s{i}".encode(), f"t{i}".encode(), f"u{i}".encode()}]
    if kind == 4:
        return [[(f"m{i}".encode(), float(i)), (f"n{i}".encode(), float(i + 1))]]
    return [[(f"{i + 1}-1".encode(), {b"f": f"v{i}".encode()})]]


def main():
    mode, port, prefix, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    cluster = RedisCluster(host="127.0.0.1", port=port)
    for start in range(0, count, BATCH):
        indices = range(start, min(start + BATCH, count))
        pipe = cluster.pipeline()
        for i in indices:
            (write if mode == "load" else read)(pipe, f"{prefix}:{i}", i)
        replies = pipe.execute()
        if mode == "load":
            continue
        for i in indices:
            got = [replies.pop(0)]
            if i % 60 == 0:
                ttl = replies.pop(0)
                assert 0 < ttl <= 3600, f"{prefix}:{i} has TTL {ttl}"
            assert got == expected(i), f"{prefix}:{i} is {got}, not {expected(i)}"
    print(f"{mode} of {count} keys passed")


if __name__ == "__main__":
    main()
