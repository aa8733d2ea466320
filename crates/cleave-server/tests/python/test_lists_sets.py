"""Lists, sets and sorted-set pops through redis-py (issue 25): every
command, blocking pops woken by other clients and timing out, pipelines,
in RESP2 and RESP3.

Run by scripts/redis-clients.sh, which starts the server and sets
CLEAVE_SERVER_PORT.
"""

import os
import threading
import time

import pytest
import redis

PORT = int(os.environ["CLEAVE_SERVER_PORT"])


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(request):
    client = redis.Redis(port=PORT, protocol=request.param, decode_responses=True)
    client.flushdb()
    yield client
    client.close()


def other_client(r):
    return redis.Redis(port=PORT, protocol=r.get_connection_kwargs()["protocol"],
                       decode_responses=True)


def test_push_pop_range(r):
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.lpush("l", "z", "y") == 5
    assert r.lrange("l", 0, -1) == ["y", "z", "a", "b", "c"]
    assert r.llen("l") == 5
    assert r.lindex("l", 0) == "y"
    assert r.lindex("l", -1) == "c"
    assert r.lindex("l", 10) is None
    assert r.lrange("l", -2, 100) == ["b", "c"]
    assert r.lrange("l", 3, 1) == []
    assert r.lpushx("none", "x") == 0
    assert r.rpushx("l", "d") == 6
    assert r.lpop("l") == "y"
    assert r.rpop("l") == "d"
    assert r.lpop("l", 2) == ["z", "a"]
    assert r.rpop("l", 10) == ["c", "b"]
    assert r.exists("l") == 0
    assert r.lpop("l") is None
    assert r.lpop("l", 2) is None
    assert r.llen("l") == 0
    assert r.lrange("l", 0, -1) == []


def test_middle_of_a_list(r):
    r.rpush("l", "a", "b", "a", "c", "a", "d")
    assert r.lrem("l", 2, "a") == 2
    assert r.lrange("l", 0, -1) == ["b", "c", "a", "d"]
    r.rpush("l", "a")
    assert r.lrem("l", -1, "a") == 1
    assert r.lrange("l", 0, -1) == ["b", "c", "a", "d"]
    assert r.lrem("l", 0, "nope") == 0
    assert r.lset("l", 0, "first") is True
    with pytest.raises(redis.ResponseError, match="index out of range"):
        r.lset("l", 99, "x")
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.lset("none", 0, "x")
    assert r.linsert("l", "before", "c", "before-c") == 5
    assert r.linsert("l", "after", "d", "after-d") == 6
    assert r.linsert("l", "after", "nope", "x") == -1
    assert r.linsert("none", "after", "a", "x") == 0
    assert r.lrange("l", 0, -1) == ["first", "before-c", "c", "a", "d", "after-d"]
    assert r.ltrim("l", 1, -2) is True
    assert r.lrange("l", 0, -1) == ["before-c", "c", "a", "d"]
    assert r.ltrim("l", 5, 1) is True
    assert r.exists("l") == 0
    r.rpush("p", "a", "b", "c", "1", "2", "3", "c", "c")
    assert r.lpos("p", "c") == 2
    assert r.lpos("p", "c", rank=2) == 6
    assert r.lpos("p", "c", rank=-1) == 7
    assert r.lpos("p", "c", count=2) == [2, 6]
    assert r.lpos("p", "c", count=0) == [2, 6, 7]
    assert r.lpos("p", "c", rank=-2, count=0) == [6, 2]
    assert r.lpos("p", "c", maxlen=1) is None
    assert r.lpos("p", "nope") is None


def test_moves(r):
    r.rpush("src", "1", "2", "3")
    assert r.lmove("src", "dst", "LEFT", "RIGHT") == "1"
    assert r.lmove("src", "dst", "RIGHT", "LEFT") == "3"
    assert r.lrange("src", 0, -1) == ["2"]
    assert r.lrange("dst", 0, -1) == ["3", "1"]
    assert r.lmove("dst", "dst", "LEFT", "RIGHT") == "3"
    assert r.lrange("dst", 0, -1) == ["1", "3"]
    assert r.rpoplpush("src", "dst") == "2"
    assert r.rpoplpush("src", "dst") is None
    assert r.exists("src") == 0
    assert r.lrange("dst", 0, -1) == ["2", "1", "3"]
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.lmove("dst", "str", "LEFT", "LEFT")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.lpush("str", "a")
    assert r.lrange("dst", 0, -1) == ["2", "1", "3"]
    assert r.type("dst") == "list"


def test_blocking_pops_time_out(r):
    start = time.monotonic()
    assert r.blpop(["e1", "e2"], timeout=0.2) is None
    assert time.monotonic() - start >= 0.19
    assert r.brpop(["e1"], timeout=0.1) is None
    assert r.blmove("e1", "e2", 0.1, "LEFT", "LEFT") is None
    assert r.brpoplpush("e1", "e2", 0.1) is None
    r.rpush("full", "a", "b")
    assert tuple(r.blpop(["e1", "full"], timeout=1)) == ("full", "a")
    with pytest.raises(redis.ResponseError, match="timeout is negative"):
        r.blpop(["e1"], timeout=-1)


def test_blocking_pops_are_woken_by_pushes(r):
    popped = {}

    def wait(name, call):
        c = other_client(r)
        popped[name] = call(c)
        c.close()

    waiters = [
        threading.Thread(target=wait, args=("blpop", lambda c: c.blpop(["q1", "q2"], timeout=10))),
        threading.Thread(target=wait, args=("brpop", lambda c: c.brpop(["q3"], timeout=0))),
        threading.Thread(target=wait,
                         args=("blmove", lambda c: c.blmove("q4", "moved", 10, "RIGHT", "LEFT"))),
    ]
    for t in waiters:
        t.start()
    # Every waiter blocked before the pushes (CLIENT LIST counts them).
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(r.client_list()) < 4:
        time.sleep(0.01)
    time.sleep(0.2)
    assert popped == {}
    r.rpush("q2", "two")
    r.rpush("q3", "three")
    r.lpush("q4", "four")
    for t in waiters:
        t.join(timeout=10)
        assert not t.is_alive()
    assert tuple(popped["blpop"]) == ("q2", "two")
    assert tuple(popped["brpop"]) == ("q3", "three")
    assert popped["blmove"] == "four"
    assert r.lrange("moved", 0, -1) == ["four"]
    assert r.exists("q2", "q3", "q4") == 0


def test_one_push_wakes_one_waiter_per_element(r):
    results = []
    lock = threading.Lock()

    def wait():
        c = other_client(r)
        got = c.blpop(["jobs"], timeout=3)
        with lock:
            results.append(got)
        c.close()

    waiters = [threading.Thread(target=wait) for _ in range(3)]
    for t in waiters:
        t.start()
    time.sleep(0.3)
    r.rpush("jobs", "j1", "j2")
    for t in waiters:
        t.join(timeout=10)
    popped = sorted(tuple(x)[1] for x in results if x is not None)
    assert popped == ["j1", "j2"]
    assert results.count(None) == 1


def test_a_blocked_pop_holds_the_pipeline_behind_it(r):
    c = other_client(r)
    p = c.pipeline(transaction=False)
    p.blpop(["later"], timeout=5)
    p.get("after")
    done = []
    t = threading.Thread(target=lambda: done.append(p.execute()))
    t.start()
    time.sleep(0.3)
    r.set("after", "set-before-the-push")
    r.rpush("later", "x")
    t.join(timeout=10)
    assert not t.is_alive()
    got = done[0]
    assert tuple(got[0]) == ("later", "x")
    # The GET ran after the pop, so it sees what was set before the push.
    assert got[1] == "set-before-the-push"
    c.close()


def test_sets(r):
    assert r.sadd("s", "a", "b", "c", "a") == 3
    assert r.sadd("s", "c", "d") == 1
    assert r.scard("s") == 4
    assert bool(r.sismember("s", "a"))
    assert not r.sismember("s", "zz")
    assert [bool(x) for x in r.smismember("s", ["a", "zz", "d"])] == [True, False, True]
    assert r.srem("s", "a", "zz") == 1
    assert r.smembers("s") == {"b", "c", "d"}
    r.sadd("t", "c", "d", "e")
    assert r.sinter("s", "t") == {"c", "d"}
    assert r.sunion("s", "t") == {"b", "c", "d", "e"}
    assert r.sdiff("s", "t") == {"b"}
    assert r.sinter("s", "none") == set()
    assert r.sinterstore("dest", ["s", "t"]) == 2
    assert r.smembers("dest") == {"c", "d"}
    assert r.sunionstore("dest", ["s", "t"]) == 4
    assert r.sdiffstore("dest", ["s", "s"]) == 0
    assert r.exists("dest") == 0
    assert r.sintercard(2, ["s", "t"]) == 2
    assert r.sintercard(2, ["s", "t"], limit=1) == 1
    assert bool(r.smove("s", "t", "b"))
    assert not r.smove("s", "t", "zz")
    assert r.smembers("t") == {"b", "c", "d", "e"}
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.sadd("str", "a")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.sunion("s", "str")
    assert r.type("t") == "set"


def test_random_members(r):
    members = {f"m{i}" for i in range(2000)}
    r.sadd("big", *members)
    assert r.srandmember("big") in members
    picked = r.srandmember("big", 50)
    assert len(picked) == 50 and len(set(picked)) == 50 and set(picked) <= members
    repeats = r.srandmember("big", -3000)
    assert len(repeats) == 3000 and set(repeats) <= members
    # Picks spread over the set, not only its first members.
    assert len({m for m in repeats}) > 500
    popped = r.spop("big", 100)
    assert len(popped) == 100 and set(popped) <= members
    assert r.scard("big") == 1900
    assert not any(r.smismember("big", list(popped)))
    one = r.spop("big")
    assert one in members and not r.sismember("big", one)
    assert r.srandmember("none") is None
    assert r.srandmember("none", 3) == []
    assert r.spop("none") is None
    r.sadd("small", "x", "y")
    assert sorted(r.srandmember("small", 5)) == ["x", "y"]
    assert set(r.srandmember("small", -5)) <= {"x", "y"}
    assert set(r.spop("small", 5)) == {"x", "y"}
    assert r.exists("small") == 0


def test_sscan(r):
    members = {f"m{i}" for i in range(250)}
    r.sadd("s", *members)
    assert set(r.sscan_iter("s", count=7)) == members
    assert set(r.sscan_iter("s", match="m1*")) == {m for m in members if m.startswith("m1")}
    assert list(r.sscan_iter("none")) == []


def test_zpop(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    # Without a count Redis 7 answers one flat pair in RESP3 too, which
    # redis-py passes through as it is.
    resp3 = r.get_connection_kwargs()["protocol"] == 3
    assert r.zpopmin("z") == (["a", 1.0] if resp3 else [("a", 1.0)])
    assert r.zpopmax("z") == (["d", 4.0] if resp3 else [("d", 4.0)])
    assert [tuple(x) for x in r.zpopmin("z", 5)] == [("b", 2.0), ("c", 3.0)]
    assert r.exists("z") == 0
    assert r.zpopmin("z") == []


def test_pipelined_lists_and_sets(r):
    p = r.pipeline(transaction=False)
    for i in range(100):
        p.rpush("pl", i)
        p.sadd("ps", i % 10)
    p.llen("pl")
    p.scard("ps")
    p.lrange("pl", 0, 4)
    out = p.execute()
    assert out[-3:] == [100, 10, ["0", "1", "2", "3", "4"]]


def test_many_clients_push_and_pop(r):
    def work(n):
        c = other_client(r)
        for i in range(200):
            c.rpush("shared", f"{n}:{i}")
        c.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.llen("shared") == 1600
    items = r.lrange("shared", 0, -1)
    assert len(set(items)) == 1600
    # Each client's pushes keep their order.
    for n in range(8):
        mine = [int(x.split(":")[1]) for x in items if x.startswith(f"{n}:")]
        assert mine == list(range(200))
