"""A three-member cleave-server group through redis-py's RedisCluster, a
cluster client nobody here wrote: it learns the group from CLUSTER SLOTS,
sends every command to the leader, follows -MOVED when a member that is
not the leader is asked, and, with read_from_replicas, reads from followers
after READONLY (its replica load balancing).

Run by scripts/redis-clients.sh, which starts the group and sets
CLEAVE_CLUSTER_PORTS (the members' Redis ports, comma-separated).
"""

import os
import time

import pytest
import redis
from redis.cluster import ClusterNode, LoadBalancingStrategy, RedisCluster

PORTS = [int(p) for p in os.environ["CLEAVE_CLUSTER_PORTS"].split(",")]


def leader_port():
    for port in PORTS:
        info = redis.Redis(port=port).cluster("info")
        if isinstance(info, dict) and info.get("raft_state") == "leader":
            return port
    raise AssertionError("no member says it leads")


@pytest.fixture
def rc():
    # Started from a follower on purpose: the client must find the leader.
    follower = next(p for p in PORTS if p != leader_port())
    client = RedisCluster(
        startup_nodes=[ClusterNode("127.0.0.1", follower)], decode_responses=True
    )
    yield client
    client.close()


def test_the_group_is_one_shard_led_by_the_raft_leader(rc):
    [shard] = redis.Redis(port=PORTS[0]).cluster("slots")
    first, last, primary, *replicas = shard
    assert (first, last) == (0, 16383)
    assert primary[1] == leader_port()
    assert sorted(r[1] for r in replicas) == sorted(p for p in PORTS if p != leader_port())
    assert rc.keyslot("foo") == 12182
    assert rc.get_node_from_key("foo").port == leader_port()


def test_commands_go_to_the_leader_and_replicate(rc):
    assert rc.set("greeting", "hello") is True
    assert rc.get("greeting") == "hello"
    assert rc.incr("counter") == 1
    assert rc.incrby("counter", 41) == 42
    assert rc.hset("user:1", mapping={"name": "Ada", "born": "1815"}) == 2
    assert rc.hgetall("user:1") == {"born": "1815", "name": "Ada"}
    assert rc.zadd("board", {"a": 1, "b": 2}) == 2
    assert rc.zscore("board", "b") == 2.0
    assert rc.delete("greeting") == 1
    assert rc.get("greeting") is None
    # Every member applies the same commands: each, read locally, agrees.
    for port in PORTS:
        member = redis.Redis(port=port, decode_responses=True)
        # Local reads on this connection (a follower would redirect).
        member.execute_command("READONLY")
        deadline = time.time() + 10
        while member.get("counter") != "42":
            assert time.time() < deadline, f"member on {port} never applied the writes"
            time.sleep(0.05)
        assert member.hget("user:1", "name") == "Ada"
        member.close()


def test_a_follower_redirects_with_moved():
    follower = next(p for p in PORTS if p != leader_port())
    plain = redis.Redis(port=follower)
    # redis-py reads the "MOVED" prefix into the exception's class.
    with pytest.raises(redis.exceptions.MovedError, match=r"^\d+ 127\.0\.0\.1:\d+$") as moved:
        plain.set("k", "v")
    assert moved.value.port == leader_port()
    plain.close()


def test_pipelines_keep_their_order(rc):
    pipe = rc.pipeline()
    for i in range(50):
        pipe.set(f"p{i}", i)
        pipe.incr("pcount")
    results = pipe.execute()
    assert results[1::2] == list(range(1, 51))
    assert rc.get("p49") == "49"


def test_reads_from_replicas():
    follower = next(p for p in PORTS if p != leader_port())
    client = RedisCluster(
        startup_nodes=[ClusterNode("127.0.0.1", follower)],
        decode_responses=True,
        load_balancing_strategy=LoadBalancingStrategy.ROUND_ROBIN_REPLICAS,
    )
    assert client.set("replicated", "yes") is True
    deadline = time.time() + 10
    while client.get("replicated") != "yes":
        assert time.time() < deadline
        time.sleep(0.05)
    client.close()
