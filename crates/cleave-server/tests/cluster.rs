//! cleave-server's cluster mode, three members on loopback: replication,
//! redirects, failures (a killed leader, a restarted follower, a
//! partition), membership changes with a snapshot, and a linearizability
//! check of what the clients saw.

mod common;
#[path = "common/group.rs"]
mod group;
#[path = "common/linearizability.rs"]
mod linearizability;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Value;
use group::{load, Group, Recorder, PATIENCE};

/// One group at a time: three or four servers each, on two cores, and
/// election timeouts of half a second.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keys the load spreads over: each is a register the checker searches
/// alone, so more keys mean shorter searches.
const KEYS: usize = 200;

/// How long a new leader may take after the old one is killed.
const FAILOVER_LIMIT: Duration = Duration::from_secs(5);

fn moved_port(v: &Value) -> u16 {
    let Value::Error(e) = v else {
        panic!("expected MOVED, got {v:?}")
    };
    assert!(e.starts_with("MOVED "), "{e}");
    e.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn writes_replicate_and_followers_redirect_to_the_leader() {
    let _alone = alone();
    let group = Group::start(3, &[]);
    let leader = group.wait_for_leader(&[]);
    let lead = group.member(leader);
    let mut c = lead.client();
    assert_eq!(c.cmd("SET greeting hello"), Value::status("OK"));
    assert_eq!(c.cmd("HSET h f1 v1 f2 v2"), Value::Int(2));
    assert_eq!(c.cmd("INCR n"), Value::Int(1));
    assert_eq!(c.cmd("GET greeting"), Value::bulk("hello"));
    // A pipeline: its writes commit together, its read sees them.
    c.send(&[b"SET".as_slice(), b"p", b"1"]);
    c.send(&[b"INCR".as_slice(), b"n"]);
    c.send(&[b"GET".as_slice(), b"p"]);
    assert_eq!(
        [c.read(), c.read(), c.read()],
        [Value::status("OK"), Value::Int(2), Value::bulk("1")]
    );
    let Value::Int(applied) = c.cmd("CLUSTER KEYSLOT foo") else {
        panic!()
    };
    assert_eq!(applied, 12182);

    for follower in group.members.iter().filter(|m| m.addrs.id != leader) {
        let mut f = follower.client();
        // Reads and writes on a follower go to the leader, with the key's
        // slot as Redis Cluster computes it.
        let moved = f.cmd("GET foo");
        assert_eq!(
            moved,
            Value::err(&format!("MOVED 12182 127.0.0.1:{}", lead.addrs.port))
        );
        assert_eq!(moved_port(&f.cmd("SET x 1")), lead.addrs.port);
        // PING, INFO and CLUSTER are the member's own.
        assert_eq!(f.cmd("PING"), Value::status("PONG"));
        let Value::Bulk(info) = f.cmd("INFO replication") else {
            panic!()
        };
        let info = String::from_utf8(info).unwrap();
        assert!(info.contains("role:slave"), "{info}");
        assert!(
            info.contains(&format!("master_port:{}", lead.addrs.port)),
            "{info}"
        );
        // READONLY: the follower answers from its own state, which catches
        // up with the leader's.
        assert_eq!(f.cmd("READONLY"), Value::status("OK"));
        let deadline = Instant::now() + PATIENCE;
        while f.cmd("GET p") != Value::bulk("1") {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(f.cmd("HGET h f2"), Value::bulk("v2"));
        assert_eq!(f.cmd("GET n"), Value::bulk("2"));
        assert_eq!(moved_port(&f.cmd("SET x 1")), lead.addrs.port);
        assert_eq!(f.cmd("READWRITE"), Value::status("OK"));
        assert_eq!(moved_port(&f.cmd("GET p")), lead.addrs.port);
    }

    // Redis Cluster's view: one shard, all slots, the leader first.
    let Value::Array(slots) = c.cmd("CLUSTER SLOTS") else {
        panic!()
    };
    let Value::Array(range) = &slots[0] else {
        panic!()
    };
    assert_eq!(range[0], Value::Int(0));
    assert_eq!(range[1], Value::Int(16383));
    assert_eq!(range.len(), 2 + 3);
    let Value::Array(first) = &range[2] else {
        panic!()
    };
    assert_eq!(first[1], Value::Int(i64::from(lead.addrs.port)));
    let Value::Bulk(nodes) = c.cmd("CLUSTER NODES") else {
        panic!()
    };
    let nodes = String::from_utf8(nodes).unwrap();
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    assert!(nodes
        .lines()
        .any(|l| l.contains("myself,master") && l.ends_with("0-16383")));
    assert_eq!(
        c.cmd("CLUSTER INIT"),
        Value::err("ERR the group is formed already")
    );
    // Without --cluster-test-hooks nothing would answer this; with them,
    // it is a member's own.
    assert!(matches!(c.cmd("CLUSTER NOPE"), Value::Error(e) if e.contains("CLUSTER HELP")));

    // Every member holds the same data.
    assert_eq!(group.all_agree().len(), 4);
}

/// kill -9 the leader while clients write and read: a new leader within
/// the limit, no acknowledged write lost, and a linearizable history.
#[test]
fn a_killed_leader_is_replaced_and_loses_nothing() {
    let _alone = alone();
    let mut group = Group::start(3, &[]);
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(group.ports(), 4, KEYS, stop.clone(), start, 100_000);
    std::thread::sleep(Duration::from_millis(1500));
    let old = group.wait_for_leader(&[]);
    let killed_at = Instant::now();
    group.member_mut(old).kill();
    let new = group.wait_for_leader(&[old]);
    let failover = killed_at.elapsed();
    assert_ne!(new, old);
    assert!(failover < FAILOVER_LIMIT, "a new leader took {failover:?}");
    std::thread::sleep(Duration::from_millis(1500));
    // The old leader comes back as a follower and catches up.
    group.member_mut(old).start();
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    // A final read of every key, after everything, must see the last
    // acknowledged write (or a later one whose outcome was unknown).
    check_history(&group, clients.join().unwrap(), start);
    group.all_agree();
}

/// Kill a follower while clients write and read, write more, restart it:
/// it catches up, and the clients' history is linearizable.
#[test]
fn a_restarted_follower_catches_up() {
    let _alone = alone();
    let mut group = Group::start(3, &[]);
    let leader = group.wait_for_leader(&[]);
    let follower = group
        .members
        .iter()
        .map(|m| m.addrs.id)
        .find(|&id| id != leader)
        .unwrap();
    // Clients write and read throughout; their history is checked last.
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(group.ports(), 2, KEYS, stop.clone(), start, 100_000);
    group.member_mut(follower).kill();
    let mut c = group.member(leader).client();
    for i in 0..500 {
        let key = format!("key{i}");
        assert_eq!(
            c.call(&[b"SET".as_slice(), key.as_bytes(), &[b'v'; 700]]),
            Value::status("OK")
        );
    }
    group.member_mut(follower).start();
    group.wait_applied(follower, group.applied(leader));
    stop.store(true, Ordering::Relaxed);
    check_history(&group, clients.join().unwrap(), start);
    let contents = group.all_agree();
    let written = contents
        .iter()
        .filter(|(k, _)| k.starts_with(b"key"))
        .count();
    assert_eq!(written, 500);
}

/// Checks the clients' history, with a final read of every key after it,
/// for linearizability, and that enough writes were acknowledged for the
/// check to mean something.
fn check_history(
    group: &Group,
    (mut history, acked): (Vec<linearizability::Op>, usize),
    start: Instant,
) {
    assert!(acked > 20, "only {acked} writes were acknowledged");
    let mut r = Recorder::new(group.ports(), start);
    for k in 0..KEYS {
        let key = format!("k{k}");
        while r.read(key.as_bytes()).is_none() {}
    }
    history.extend(r.history);
    linearizability::check(&history).unwrap();
}

/// Cut the leader off while clients write and read: the majority elects
/// another and goes on, the old leader refuses writes, once healed all
/// three agree, and the clients' history is linearizable.
#[test]
fn a_partitioned_minority_refuses_writes_and_heals() {
    let _alone = alone();
    let group = Group::start(3, &[]);
    let old = group.wait_for_leader(&[]);
    let others: Vec<u64> = group
        .members
        .iter()
        .map(|m| m.addrs.id)
        .filter(|&id| id != old)
        .collect();
    let mut c = group.member(old).client();
    assert_eq!(c.cmd("SET before 1"), Value::status("OK"));
    // Clients write and read throughout, on whichever member answers them;
    // their history is checked last.
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let clients = load(group.ports(), 3, KEYS, stop.clone(), start, 100_000);
    std::thread::sleep(Duration::from_millis(500));
    let cut = format!("CLUSTER TEST-PARTITION {} {}", others[0], others[1]);
    assert_eq!(c.cmd(&cut), Value::status("OK"));
    // The majority elects a leader among itself.
    let deadline = Instant::now() + PATIENCE;
    let new = loop {
        let named: Vec<Option<String>> = others
            .iter()
            .map(|&id| group.member(id).field("raft_leader_id"))
            .collect();
        if let Some(Some(l)) = named.first() {
            let agreed = named.iter().all(|n| n.as_ref() == Some(l));
            if agreed && !l.is_empty() && *l != old.to_string() {
                break l.parse::<u64>().unwrap();
            }
        }
        assert!(Instant::now() < deadline, "the majority elected no leader");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut m = group.member(new).client();
    assert_eq!(m.cmd("SET during majority"), Value::status("OK"));
    // The minority refuses: it is not the leader any more, or it cannot
    // reach a majority; it never acknowledges.
    let refused = c.cmd("SET during minority");
    assert!(
        matches!(&refused, Value::Error(e) if e.starts_with("CLUSTERDOWN") || e.starts_with("MOVED") || e.starts_with("TRYAGAIN")),
        "{refused:?}"
    );
    // A linearizable read there is refused too.
    let read = c.cmd("GET before");
    assert!(matches!(&read, Value::Error(_)), "{read:?}");
    assert_eq!(c.cmd("CLUSTER TEST-HEAL"), Value::status("OK"));
    let leader = group.wait_for_leader(&[]);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    check_history(&group, clients.join().unwrap(), start);
    let leader = group.agreed_leader(&[]).unwrap_or(leader);
    let mut l = group.member(leader).client();
    assert_eq!(l.cmd("SET after 1"), Value::status("OK"));
    let want = group.all_agree();
    assert!(
        want.iter()
            .any(|(k, v)| k == b"during" && *v == Value::bulk("majority")),
        "{want:?}"
    );
}

/// A new member joins as a learner, catches up from a snapshot (the log
/// before it was purged) plus the log's tail, is promoted, and an old
/// member is removed.
#[test]
fn members_join_from_a_snapshot_are_promoted_and_removed() {
    let _alone = alone();
    let flags = ["--raft-snapshot-bytes", "65536"];
    let mut group = Group::start(3, &flags);
    let leader = group.wait_for_leader(&[]);
    let mut c = group.member(leader).client();
    for i in 0..1000 {
        let key = format!("key{i}");
        let value = format!("value{i}-{}", "x".repeat(600));
        assert_eq!(
            c.call(&[b"SET".as_slice(), key.as_bytes(), value.as_bytes()]),
            Value::status("OK")
        );
    }
    assert_eq!(c.cmd("HSET h a 1"), Value::Int(1));
    let deadline = Instant::now() + PATIENCE;
    while group
        .member(leader)
        .field("raft_purged_index")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        == 0
    {
        assert!(Instant::now() < deadline, "the leader never purged its log");
        std::thread::sleep(Duration::from_millis(50));
    }
    let new = group.add_member(4, &flags);
    let (raft, redis) = (new.addrs.raft_port, new.addrs.port);
    let add = format!("CLUSTER ADD-LEARNER 4 127.0.0.1:{raft} 127.0.0.1:{redis}");
    assert_eq!(c.cmd(&add), Value::status("OK"));
    let purged: u64 = group
        .member(leader)
        .field("raft_purged_index")
        .unwrap()
        .parse()
        .unwrap();
    // Its metrics may lag its answer to the leader by a moment.
    group.wait_applied(4, purged);
    let info = group.member(4).info().unwrap();
    let snapshot: u64 = info
        .iter()
        .find(|(k, _)| k == "raft_snapshot_index")
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert!(
        snapshot > 0,
        "the learner caught up without a snapshot: {info:?}"
    );
    let Value::Bulk(learners) = c.cmd("INFO cluster") else {
        panic!()
    };
    assert!(String::from_utf8(learners)
        .unwrap()
        .contains("raft_learners:4"));
    assert_eq!(c.cmd("CLUSTER PROMOTE 4"), Value::status("OK"));
    let removed = group
        .members
        .iter()
        .map(|m| m.addrs.id)
        .find(|&id| id != leader && id != 4)
        .unwrap();
    assert_eq!(
        c.cmd(&format!("CLUSTER REMOVE {removed}")),
        Value::status("OK")
    );
    let voters = group.member(leader).field("raft_voters").unwrap();
    let mut want: Vec<u64> = vec![1, 2, 3, 4];
    want.retain(|&id| id != removed);
    assert_eq!(
        voters,
        want.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(c.cmd("SET last 1"), Value::status("OK"));
    // The removed member hears nothing more: the others must agree.
    group.member_mut(removed).kill();
    let contents = group.all_agree();
    assert_eq!(contents.len(), 1002);
    let mut n = group.member(4).client();
    assert_eq!(n.cmd("READONLY"), Value::status("OK"));
    assert_eq!(n.cmd("HGET h a"), Value::bulk("1"));
}
