"""redis-py's cluster client against a Shale cluster: it learns the slots from one node
(CLUSTER SLOTS), follows them to every master, pipelines across them, and reads from
replicas after READONLY.

Usage: cluster_check.py PORT (any node of the cluster). Exits non-zero on the first failure.
"""

import sys
import time

from redis.cluster import RedisCluster


def main():
    port = int(sys.argv[1])
    cluster = RedisCluster(host="127.0.0.1", port=port)
    masters = cluster.get_primaries()
    assert len(masters) == 3, masters
    assert len(cluster.get_replicas()) == 1

    for i in range(600):
        cluster.set(f"key:{i}", i)
    assert [int(cluster.get(f"key:{i}")) for i in range(600)] == list(range(600))

    # A cluster pipeline splits its commands by node and puts the replies back in order.
    pipe = cluster.pipeline()
    for i in range(600):
        pipe.incr(f"key:{i}")
    assert pipe.execute() == [i + 1 for i in range(600)]

    # Keys of one hash tag may be used together; others may not.
    cluster.mset_nonatomic({"{user:1}:name": "ada", "{user:1}:lang": "en"})
    assert cluster.mget("{user:1}:name", "{user:1}:lang") == [b"ada", b"en"]
    try:
        cluster.execute_command("MSET", "a", "1", "b", "2")
        raise AssertionError("MSET across slots succeeded")
    except Exception as err:  # redis-py checks slots itself before sending
        assert "slot" in str(err).lower(), err

    # Reads through the replica of the first master (redis-py sends READONLY to it).
    # Replication is asynchronous: each read is retried for a while.
    reader = RedisCluster(host="127.0.0.1", port=port, read_from_replicas=True)
    for i in range(600):
        deadline = time.monotonic() + 5
        while reader.get(f"key:{i}") != str(i + 1).encode():
            assert time.monotonic() < deadline, f"key:{i} never reached its replica"
            time.sleep(0.01)

    print("cluster checks passed")


if __name__ == "__main__":
    main()
