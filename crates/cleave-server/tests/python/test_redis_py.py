"""cleave-server through redis-py, a client nobody here wrote: every command
of issue 19, pipelines and error replies, in RESP2 and RESP3.

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


def test_strings(r):
    assert r.get("missing") is None
    assert r.set("k", "v1") is True
    assert r.get("k") == "v1"
    assert r.set("k", "v2", nx=True) is None
    assert r.set("k", "v2", xx=True) is True
    assert r.set("k", "v3", get=True) == "v2"
    assert r.getdel("k") == "v3"
    assert r.getdel("k") is None
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "nope", "b") == ["1", None, "2"]
    assert r.msetnx({"a": "9", "c": "9"}) is False
    assert r.msetnx({"c": "3", "d": "4"}) is True
    assert r.strlen("c") == 1
    assert r.append("s", "Hello") == 5
    assert r.append("s", " World") == 11
    assert r.getrange("s", 0, 4) == "Hello"
    assert r.getrange("s", -5, -1) == "World"
    assert r.setrange("s", 6, "Redis") == 11
    assert r.get("s") == "Hello Redis"
    assert r.incr("n") == 1
    assert r.incrby("n", 10) == 11
    assert r.decr("n") == 10
    assert r.decrby("n", 20) == -10
    assert r.exists("a", "b", "nope") == 2
    assert r.delete("a", "b", "nope") == 2


def test_string_errors(r):
    r.set("s", "text")
    with pytest.raises(redis.ResponseError, match="not an integer or out of range"):
        r.incr("s")
    r.set("max", str(2**63 - 1))
    with pytest.raises(redis.ResponseError, match="increment or decrement would overflow"):
        r.incr("max")
    r.hset("h", "f", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.get("h")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'get' command"):
        r.execute_command("GET")
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("SET", "k", "v", "NX", "XX")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        r.execute_command("NOSUCH")


def test_expiry(r):
    """redis-py's expiry API: set(ex=, px=, exat=, pxat=, keepttl=),
    setex, psetex, getex, expire with its flags, ttl, pttl, expiretime,
    persist; waits outlast the TTLs, no timing is asserted."""
    assert r.set("k", "v", ex=100) is True
    assert 99 <= r.ttl("k") <= 100
    assert 99_000 <= r.pttl("k") <= 100_000
    assert r.set("k", "v2", keepttl=True) is True
    assert r.ttl("k") >= 99
    assert r.set("k", "v3") is True
    assert r.ttl("k") == -1
    assert r.ttl("missing") == -2
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 50, gt=True) is False
    assert r.expire("k", 200, gt=True) is True
    assert r.pexpire("k", 150_000, lt=True) is True
    assert r.expireat("k", 4_102_444_800) is True
    assert r.expiretime("k") == 4_102_444_800
    assert r.pexpireat("k", 4_102_444_800_123) is True
    assert r.pexpiretime("k") == 4_102_444_800_123
    assert r.persist("k") is True
    assert r.persist("k") is False
    assert r.setex("s", 100, "v") is True
    assert r.psetex("p", 100_000, "v") is True
    assert r.ttl("s") >= 99 and r.ttl("p") >= 99
    assert r.getex("s", persist=True) == "v"
    assert r.ttl("s") == -1
    assert r.getex("s", px=100) == "v"
    r.set("gone", "v", px=100)
    r.hset("h", mapping={"f": "1", "g": "2"})
    assert r.pexpire("h", 100) is True
    r.zadd("z", {"m": 1})
    assert r.expire("z", 100) is True
    r.set("past", "v", pxat=1)
    assert r.exists("past") == 0
    with pytest.raises(redis.ResponseError, match="invalid expire time in 'set' command"):
        r.set("x", "v", ex=0)
    with pytest.raises(redis.ResponseError, match="not compatible"):
        r.expire("z", 10, nx=True, xx=True)
    time.sleep(0.4)
    assert r.exists("gone", "h", "s") == 0
    assert r.hgetall("h") == {}
    assert r.ttl("h") == -2
    assert r.zscore("z", "m") == 1.0


def test_expiry_in_a_pipeline(r):
    with r.pipeline(transaction=False) as p:
        p.set("a", "1", ex=100).ttl("a").persist("a").ttl("a").expire("nope", 5)
        assert p.execute() == [True, 100, True, -1, False]


def test_binary_values():
    raw = redis.Redis(port=PORT)
    value = bytes(range(256)) * 400
    assert raw.set(b"bin\x00\xff", value)
    assert raw.get(b"bin\x00\xff") == value
    raw.close()


def test_hashes(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", "a", "10") == 0
    assert r.execute_command("HMSET", "h", "c", "3") in (True, "OK")
    assert r.hget("h", "a") == "10"
    assert r.hget("h", "nope") is None
    assert r.hmget("h", "a", "nope", "c") == ["10", None, "3"]
    assert r.hgetall("h") == {"a": "10", "b": "2", "c": "3"}
    assert r.hexists("h", "b") is True
    assert r.hexists("h", "z") is False
    assert r.hlen("h") == 3
    assert r.hdel("h", "a", "nope") == 1
    assert r.hlen("h") == 2
    assert r.hdel("h", "b", "c") == 2
    assert r.exists("h") == 0
    assert r.hgetall("h") == {}
    r.set("s", "v")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        r.hset("s", "f", "v")


def test_sorted_sets(r):
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 5}, xx=True, ch=True) == 1
    assert r.zadd("z", {"d": 4}, nx=True) == 1
    assert r.zadd("z", {"a": 1}, gt=True) == 0
    assert r.zadd("z", {"b": 1.5}, lt=True, ch=True) == 1
    assert r.zadd("z", {"c": 0.25}, incr=True) == 3.25
    assert r.zscore("z", "a") == 5.0
    assert r.zscore("z", "nope") is None
    assert r.zcard("z") == 4
    assert r.zrangebyscore("z", "-inf", "+inf") == ["b", "c", "d", "a"]
    # redis-py gives pairs as tuples in RESP2 and lists in RESP3, with
    # redis-server as with cleave-server.
    pairs = r.zrangebyscore("z", "(1.5", 4, withscores=True)
    assert [tuple(p) for p in pairs] == [("c", 3.25), ("d", 4.0)]
    assert r.zrangebyscore("z", "-inf", "+inf", start=1, num=2) == ["c", "d"]
    assert r.zrem("z", "a", "nope") == 1
    assert r.zadd("lex", {"apple": 0, "banana": 0, "cherry": 0, "date": 0}) == 4
    assert r.zrangebylex("lex", "[b", "(d") == ["banana", "cherry"]
    assert r.zrangebylex("lex", "-", "+", start=1, num=2) == ["banana", "cherry"]
    with pytest.raises(redis.ResponseError, match="not valid string range item"):
        r.zrangebylex("lex", "b", "+")
    with pytest.raises(redis.ResponseError, match="min or max is not a float"):
        r.zrangebyscore("z", "x", 1)
    with pytest.raises(redis.ResponseError, match="not a valid float"):
        r.execute_command("ZADD", "z", "x", "m")


def test_keys(r):
    for i in range(120):
        r.set(f"key:{i}", i)
    r.hset("hash", "f", "v")
    r.zadd("zset", {"m": 1})
    assert r.type("key:1") == "string"
    assert r.type("hash") == "hash"
    assert r.type("zset") == "zset"
    assert r.type("nope") == "none"
    assert sorted(r.scan_iter(match="key:1?", count=7)) == sorted(f"key:{i}" for i in range(10, 20))
    assert len(list(r.scan_iter(count=5))) == 122
    assert list(r.scan_iter(_type="hash")) == ["hash"]
    assert r.dbsize() == 122
    assert r.flushdb() is True
    assert r.dbsize() == 0
    assert r.get("key:1") is None


def test_server(r):
    assert r.ping() is True
    assert r.echo("hi") == "hi"
    assert r.execute_command("SELECT", 0) in (True, "OK")
    # Databases 0 to 15, as Redis's default.
    assert r.execute_command("SELECT", 15) in (True, "OK")
    assert r.execute_command("SELECT", 0) in (True, "OK")
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", 16)
    assert r.client_setname("py") is True
    assert r.client_getname() == "py"
    info = r.info()
    assert info["redis_version"] == "7.0.0"
    assert "connected_clients" in info
    assert "sstable_bytes" in r.info("cleave")
    assert r.config_get("appendfsync") == {"appendfsync": "everysec"}
    assert r.config_set("maxclients", 5000) is True
    assert r.config_get("maxclients") == {"maxclients": "5000"}
    with pytest.raises(redis.ResponseError, match="can't set immutable config"):
        r.config_set("port", 1)
    assert r.command_count() > 40
    assert "get" in r.command()


def test_pipelines(r):
    with r.pipeline(transaction=False) as p:
        for i in range(500):
            p.set(f"p:{i}", i)
            p.incr("pcount")
            p.hset("ph", f"f{i}", i)
        p.get("p:499")
        p.incr("p:0x")
        p.hlen("ph")
        results = p.execute(raise_on_error=False)
    assert results[:3] == [True, 1, 1]
    assert results[-3] == "499"
    assert results[-2] == 1
    assert results[-1] == 500
    # An error in the middle of a pipeline answers that command only.
    r.set("text", "abc")
    with r.pipeline(transaction=False) as p:
        p.incr("text")
        p.set("after", "1")
        results = p.execute(raise_on_error=False)
    assert isinstance(results[0], redis.ResponseError)
    assert results[1] is True


def test_many_threads():
    def worker(t):
        c = redis.Redis(port=PORT, decode_responses=True)
        for i in range(200):
            c.incr("threads:counter")
            c.hset(f"threads:h{t % 2}", f"{t}-{i}", i)
        c.close()

    r = redis.Redis(port=PORT, decode_responses=True)
    r.delete("threads:counter", "threads:h0", "threads:h1")
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.get("threads:counter") == "1600"
    assert r.hlen("threads:h0") == 800
    r.close()
