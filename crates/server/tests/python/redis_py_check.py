"""redis-py against a running shale-server: a transactional pipeline, a Lock, pub/sub.

Usage: redis_py_check.py PORT. Exits non-zero (with a traceback) on the first failure.
"""

import sys
import threading
import time

import redis


def transactional_pipeline(r):
    r.delete("counter", "log")
    with r.pipeline() as pipe:  # transaction=True by default: MULTI ... EXEC
        pipe.incr("counter").incr("counter").rpush("log", "a", "b").lrange("log", 0, -1)
        assert pipe.execute() == [1, 2, 2, [b"a", b"b"]]

    # WATCH-based optimistic update, retried when another client interferes.
    other = redis.Redis(port=r.connection_pool.connection_kwargs["port"])
    interfered = False
    while True:
        with r.pipeline() as pipe:
            try:
                pipe.watch("counter")
                value = int(pipe.get("counter"))
                if not interfered:
                    other.incr("counter")
                    interfered = True
                pipe.multi()
                pipe.set("counter", value * 10)
                pipe.execute()
                break
            except redis.WatchError:
                continue
    assert r.get("counter") == b"30", r.get("counter")


def lock(r):
    first = r.lock("resource", timeout=5, blocking_timeout=0.1)
    assert first.acquire()
    second = r.lock("resource", timeout=5, blocking_timeout=0.2)
    assert not second.acquire(), "a held lock must not be acquired twice"
    first.extend(5)
    first.release()
    assert second.acquire()
    second.release()
    assert r.get("resource") is None


def pubsub(r):
    p = r.pubsub()
    p.subscribe("news")
    p.psubscribe("n*")
    for _ in range(2):
        assert p.get_message(timeout=2)["type"] in ("subscribe", "psubscribe")
    received = []

    def listen():
        for message in p.listen():
            if message["type"] in ("message", "pmessage"):
                received.append((message["type"], message["data"]))
                if len(received) == 2:
                    return

    listener = threading.Thread(target=listen)
    listener.start()
    time.sleep(0.1)
    assert r.publish("news", "hello") == 2
    listener.join(5)
    assert sorted(received) == [("message", b"hello"), ("pmessage", b"hello")], received
    p.close()


def scripts(r):
    incr_by = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    r.delete("scripted")
    assert incr_by(keys=["scripted"], args=[5]) == 5
    r.script_flush()
    assert incr_by(keys=["scripted"], args=[5]) == 10  # NOSCRIPT, then EVAL


def main():
    r = redis.Redis(port=int(sys.argv[1]))
    assert r.ping()
    transactional_pipeline(r)
    lock(r)
    pubsub(r)
    scripts(r)
    print("redis-py checks passed")


if __name__ == "__main__":
    main()
