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


def pairs(reply):
    """Member-score pairs as tuples: redis-py gives lists in RESP3."""
    return [tuple(p) for p in reply]


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
    assert pairs(r.zpopmin("z", 5)) == [("b", 2.0), ("c", 3.0)]
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


def test_strings_and_bitmaps(r):
    assert r.setnx("k", "v1") is True
    assert r.setnx("k", "v2") is False
    assert r.getset("k", "v3") == "v1"
    assert r.get("k") == "v3"
    r.set("f", "10.50")
    assert r.incrbyfloat("f", 0.1) == 10.6
    assert r.incrbyfloat("f", -5) == 5.6
    with pytest.raises(redis.ResponseError, match="not a valid float"):
        r.incrbyfloat("k", 1)
    assert r.setbit("bm", 7, 1) == 0
    assert r.setbit("bm", 7, 0) == 1
    assert r.setbit("bm", 100, 1) == 0
    assert r.getbit("bm", 100) == 1
    assert r.getbit("bm", 101) == 0
    assert r.strlen("bm") == 13
    r.set("bc", "foobar")
    assert r.bitcount("bc") == 26
    assert r.bitcount("bc", 1, 1) == 6
    assert r.bitcount("bc", 5, 30, mode="BIT") == 17
    r.set("bp", b"\x00\xff\xf0")
    assert r.bitpos("bp", 1) == 8
    assert r.bitpos("bp", 0, 1) == 20
    assert r.bitpos("bp", 1, 7, 15, mode="BIT") == 8
    r.set("ba", "abc")
    r.set("bb", "ABCDEF")
    assert r.bitop("AND", "dest", "ba", "bb") == 6
    assert r.get("dest") == "ABC\x00\x00\x00"
    assert r.bitop("NOT", "dest", "ba") == 3
    r.set("key1", "ohmytext")
    r.set("key2", "mynewtext")
    assert r.lcs("key1", "key2") == "mytext"
    assert r.lcs("key1", "key2", len=True) == 6


def test_hashes_rest(r):
    r.hset("h", mapping={"a": "1", "b": "x", "c": "2.5"})
    assert r.hsetnx("h", "a", "9") == 0
    assert r.hsetnx("h", "d", "4") == 1
    assert r.hincrby("h", "a", 10) == 11
    with pytest.raises(redis.ResponseError, match="hash value is not an integer"):
        r.hincrby("h", "b", 1)
    assert r.hincrbyfloat("h", "c", 0.25) == 2.75
    assert r.hkeys("h") == ["a", "b", "c", "d"]
    assert r.hvals("h") == ["11", "x", "2.75", "4"]
    assert r.hstrlen("h", "c") == 4
    assert r.hrandfield("h") in {"a", "b", "c", "d"}
    assert sorted(r.hrandfield("h", 10)) == ["a", "b", "c", "d"]
    pairs = r.hrandfield("h", -6, withvalues=True)
    assert len(pairs) in (6, 12)
    assert dict(r.hscan_iter("h", match="[ab]")) == {"a": "11", "b": "x"}
    assert r.hrandfield("none") is None


def test_sorted_sets_rest(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zincrby("z", 2.5, "a") == 3.5
    assert r.zrange("z", 0, -1) == ["b", "c", "a", "d", "e"]
    assert pairs(r.zrange("z", 0, 1, desc=True, withscores=True)) == [("e", 5.0), ("d", 4.0)]
    assert r.zrange("z", 2, 4, byscore=True) == ["b", "c", "a", "d"]
    assert r.zrange("z", "(2", 4, byscore=True, offset=1, num=2) == ["a", "d"]
    assert r.zrange("z", 4, "(2", byscore=True, desc=True) == ["d", "a", "c"]
    assert r.zrevrangebyscore("z", "+inf", 4) == ["e", "d"]
    assert r.zrevrange("z", 0, 0) == ["e"]
    assert r.zcount("z", "(2", 4) == 3
    assert r.zrank("z", "a") == 2
    assert r.zrevrank("z", "a") == 2
    assert r.zrank("z", "nope") is None
    assert r.zmscore("z", ["a", "nope"]) == [3.5, None]
    assert r.zremrangebyscore("z", "-inf", 2) == 1
    assert r.zremrangebyrank("z", -1, -1) == 1
    assert r.zrange("z", 0, -1) == ["c", "a", "d"]
    r.zadd("lz", {m: 0 for m in "abcdef"})
    assert r.zlexcount("lz", "[b", "(e") == 3
    assert r.zrangebylex("lz", "[b", "(e") == ["b", "c", "d"]
    assert r.zrevrangebylex("lz", "+", "[e") == ["f", "e"]
    assert r.zremrangebylex("lz", "[e", "+") == 2
    assert dict(r.zscan_iter("lz")) == {m: 0.0 for m in "abcd"}


def test_keys_rest(r):
    r.set("s1", "hello", ex=1000)
    assert r.rename("s1", "s2") is True
    assert r.get("s2") == "hello" and 990 <= r.ttl("s2") <= 1000
    with pytest.raises(redis.ResponseError, match="no such key"):
        r.rename("nope", "x")
    r.rpush("l", "a", "b")
    assert r.renamenx("l", "s2") is False
    assert r.renamenx("l", "l2") is True
    assert r.lrange("l2", 0, -1) == ["a", "b"]
    r.zadd("z", {"a": 1})
    assert r.copy("z", "z2") is True
    assert r.copy("z", "z2") is False
    assert r.copy("z", "z2", replace=True) is True
    assert pairs(r.zrange("z2", 0, -1, withscores=True)) == [("a", 1.0)]
    assert r.copy("l2", "l2", destination_db=3) is True
    assert r.touch("z", "z2", "nope") == 2
    assert r.unlink("z2", "nope") == 1
    assert r.object("encoding", "l2") == "quicklist"
    assert sorted(r.keys("*2")) == ["l2", "s2"]
    assert r.randomkey() in {"s2", "l2", "z"}
    other = redis.Redis(port=PORT, db=3, decode_responses=True)
    assert other.lrange("l2", 0, -1) == ["a", "b"]
    assert other.dbsize() == 1
    other.close()
    info = r.info("keyspace")
    assert info["db0"]["keys"] == 3 and info["db3"]["keys"] == 1
    assert r.flushall() is True
    assert r.dbsize() == 0 and r.info("keyspace") == {}


def test_transactions(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1).incr("a").lpush("l", "x", "y").get("a").lrange("l", 0, -1)
    assert p.execute() == [True, 2, 2, "2", ["y", "x"]]
    # A command refused while queueing aborts the whole transaction.
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        p = r.pipeline(transaction=True)
        p.set("a", 5).execute_command("GET")
        p.execute()
    assert r.get("a") == "2"
    # A command failing at run time fails alone.
    r.set("s", "str")
    p = r.pipeline(transaction=True)
    p.incr("s").set("b", "1")
    out = p.execute(raise_on_error=False)
    assert isinstance(out[0], redis.ResponseError) and out[1] is True
    # A blocking pop inside a transaction does not wait.
    p = r.pipeline(transaction=True)
    p.blpop(["nothing"], timeout=5).set("c", "1")
    start = time.monotonic()
    assert p.execute() == [None, True]
    assert time.monotonic() - start < 2


def test_watch(r):
    other = other_client(r)
    r.set("k", "1")
    with r.pipeline() as p:
        p.watch("k")
        assert p.get("k") == "1"
        other.set("k", "2")
        p.multi()
        p.set("k", "mine")
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.get("k") == "2"

    def increment(client):
        with client.pipeline() as p:
            while True:
                try:
                    p.watch("cas")
                    n = int(p.get("cas") or 0)
                    p.multi()
                    p.set("cas", n + 1)
                    p.execute()
                    return
                except redis.WatchError:
                    continue

    clients = [other_client(r) for _ in range(4)]
    threads = [threading.Thread(target=lambda c=c: [increment(c) for _ in range(25)])
               for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.get("cas") == "100"
    for c in clients + [other]:
        c.close()


def test_pubsub(r):
    sub = other_client(r).pubsub()
    sub.subscribe("news", "sport")
    sub.psubscribe("n*")
    confirms = [sub.get_message(timeout=1) for _ in range(3)]
    assert [m["type"] for m in confirms] == ["subscribe", "subscribe", "psubscribe"]
    assert r.publish("news", "hello") == 2
    got = [sub.get_message(timeout=1) for _ in range(2)]
    kinds = sorted((m["type"], m["channel"], m["data"]) for m in got)
    assert kinds == [("message", "news", "hello"), ("pmessage", "news", "hello")]
    assert sorted(r.pubsub_channels()) == ["news", "sport"]
    assert r.pubsub_numsub("news", "none") == [("news", 1), ("none", 0)]
    assert r.pubsub_numpat() == 1
    sub.unsubscribe("news")
    assert sub.get_message(timeout=1)["type"] == "unsubscribe"
    assert r.publish("news", "again") == 1
    assert sub.get_message(timeout=1)["type"] == "pmessage"
    sub.punsubscribe()
    sub.unsubscribe()
    for _ in range(2):
        sub.get_message(timeout=1)
    assert r.publish("sport", "nobody") == 0
    sub.close()


def test_pubsub_in_a_thread(r):
    received = []
    done = threading.Event()
    sub = other_client(r).pubsub()

    def handler(message):
        received.append(message["data"])
        if len(received) == 100:
            done.set()

    sub.subscribe(**{"events": handler})
    worker = sub.run_in_thread(sleep_time=0.01)
    deadline = time.monotonic() + 5
    while r.pubsub_numsub("events")[0][1] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(100):
        r.publish("events", str(i))
    assert done.wait(5)
    assert received == [str(i) for i in range(100)]
    worker.stop()
    worker.join(timeout=5)
