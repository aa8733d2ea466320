//! `CLUSTER` in cluster mode: Redis Cluster's read-only subcommands
//! (INFO, MYID, NODES, SLOTS, KEYSLOT), which present the group as one
//! shard led by the Raft leader, and the group's administration (INIT,
//! ADD-LEARNER, PROMOTE, REMOVE, and the test hooks).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{ChangeMembers, ServerState};

use super::router::{no_leader, slot, SLOTS};
use super::types::{Member, NodeId};
use super::Cluster;
use crate::commands::parse_i64;
use crate::resp::Reply;
use crate::state::Shared;

/// A node id as Redis Cluster clients expect one: 40 hex digits.
pub fn redis_node_id(id: NodeId) -> String {
    format!("{id:040x}")
}

/// `host:port` split; port 0 if there is none.
pub fn host_port(addr: &str) -> (String, i64) {
    match addr.rsplit_once(':') {
        Some((host, port)) => (host.to_string(), port.parse().unwrap_or(0)),
        None => (addr.to_string(), 0),
    }
}

fn node_id_arg(arg: &[u8]) -> Result<NodeId, Reply> {
    parse_i64(arg)
        .and_then(|i| NodeId::try_from(i).ok())
        .ok_or_else(|| Reply::Error(format!("ERR Invalid node id '{}'", arg.escape_ascii())))
}

/// Node id arguments; the error reply for the first that is not one.
fn node_ids(args: &[Vec<u8>]) -> Result<BTreeSet<NodeId>, Reply> {
    args.iter().map(|a| node_id_arg(a)).collect()
}

fn membership_error(
    cluster: &Cluster,
    e: RaftError<NodeId, ClientWriteError<NodeId, Member>>,
) -> Reply {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            match f.leader_node.or_else(|| cluster.leader().map(|l| l.1)) {
                Some(m) => Reply::Error(format!("MOVED 0 {}", m.redis)),
                None => no_leader(),
            }
        }
        other => Reply::Error(format!("ERR {other}")),
    }
}

pub async fn execute(_shared: &Arc<Shared>, cluster: &Cluster, args: &[Vec<u8>]) -> Reply {
    let Some(sub) = args.get(1) else {
        return Reply::error("ERR wrong number of arguments for 'cluster' command");
    };
    let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
    let rest = &args[2..];
    match (sub.as_str(), rest) {
        ("info", []) => Reply::Verbatim(info(cluster)),
        ("myid", []) => Reply::bulk(redis_node_id(cluster.id())),
        ("nodes", []) => Reply::Verbatim(nodes(cluster)),
        ("slots", []) => slots(cluster),
        ("keyslot", [key]) => Reply::Int(i64::from(slot(key))),
        ("init", []) => init(cluster).await,
        ("add-learner", [id, raft, redis]) => {
            let id = match node_id_arg(id) {
                Ok(id) => id,
                Err(r) => return r,
            };
            let member = Member {
                raft: String::from_utf8_lossy(raft).into_owned(),
                redis: String::from_utf8_lossy(redis).into_owned(),
            };
            // Answers once the learner has caught up with the log.
            match cluster.raft.add_learner(id, member, true).await {
                Ok(_) => Reply::ok(),
                Err(e) => membership_error(cluster, e),
            }
        }
        ("promote", ids) if !ids.is_empty() => {
            let ids = match node_ids(ids) {
                Ok(ids) => ids,
                Err(r) => return r,
            };
            match cluster
                .raft
                .change_membership(ChangeMembers::AddVoterIds(ids), false)
                .await
            {
                Ok(_) => Reply::ok(),
                Err(e) => membership_error(cluster, e),
            }
        }
        ("remove", ids) if !ids.is_empty() => match node_ids(ids) {
            Ok(ids) => remove(cluster, ids).await,
            Err(r) => r,
        },
        ("test-partition", ids) if cluster.settings.test_hooks && !ids.is_empty() => {
            match node_ids(ids) {
                Ok(ids) => {
                    cluster.hooks.cut_off(ids);
                    Reply::ok()
                }
                Err(r) => r,
            }
        }
        ("test-heal", []) if cluster.settings.test_hooks => {
            cluster.hooks.heal();
            Reply::ok()
        }
        ("help", []) => Reply::Array(
            [
                "CLUSTER INFO: the group's state, Redis Cluster's fields and Raft's.",
                "CLUSTER MYID: this member's id (40 hex digits; the --node-id in hex).",
                "CLUSTER NODES: the members, the leader as the one master.",
                "CLUSTER SLOTS: one range, 0-16383, served by the leader.",
                "CLUSTER KEYSLOT <key>",
                "CLUSTER INIT: form the group of this member and its --peer list.",
                "CLUSTER ADD-LEARNER <id> <raft-host:port> <redis-host:port>",
                "CLUSTER PROMOTE <id> [<id> ...]: learners become voters.",
                "CLUSTER REMOVE <id> [<id> ...]",
            ]
            .iter()
            .map(|l| Reply::bulk(l.as_bytes()))
            .collect(),
        ),
        _ => Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

async fn init(cluster: &Cluster) -> Reply {
    let s = &cluster.settings;
    let mut members: BTreeMap<NodeId, Member> = s.peers.iter().cloned().collect();
    members.insert(s.id, s.me.clone());
    match cluster.raft.initialize(members).await {
        Ok(()) => Reply::ok(),
        Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
            Reply::error("ERR the group is formed already")
        }
        Err(e) => Reply::Error(format!("ERR {e}")),
    }
}

async fn remove(cluster: &Cluster, ids: BTreeSet<NodeId>) -> Reply {
    let (voters, learners): (BTreeSet<NodeId>, BTreeSet<NodeId>) = {
        let metrics = cluster.raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        if let Some(unknown) = ids.iter().find(|id| membership.get_node(id).is_none()) {
            return Reply::Error(format!("ERR node {unknown} is not a member"));
        }
        ids.iter().partition(|id| voters.contains(id))
    };
    if !voters.is_empty() {
        // Without `retain`, removed voters leave the group entirely.
        if let Err(e) = cluster
            .raft
            .change_membership(ChangeMembers::RemoveVoters(voters), false)
            .await
        {
            return membership_error(cluster, e);
        }
    }
    if !learners.is_empty() {
        if let Err(e) = cluster
            .raft
            .change_membership(ChangeMembers::RemoveNodes(learners), false)
            .await
        {
            return membership_error(cluster, e);
        }
    }
    Reply::ok()
}

/// CLUSTER INFO: Redis Cluster's fields, then Raft's.
pub fn info(cluster: &Cluster) -> String {
    let mut out = String::new();
    for (k, v) in fields(cluster) {
        let _ = write!(out, "{k}:{v}\r\n");
    }
    out
}

/// The fields of CLUSTER INFO; INFO's cluster section shows the `raft_`
/// ones.
pub fn fields(cluster: &Cluster) -> Vec<(&'static str, String)> {
    let metrics = cluster.raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    let ids = |it: &mut dyn Iterator<Item = NodeId>| {
        it.map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    };
    let index = |l: Option<u64>| l.map_or("0".to_string(), |i| i.to_string());
    let ok = m.current_leader.is_some();
    let assigned = if ok { SLOTS } else { 0 };
    let fields = vec![
        ("cluster_state", if ok { "ok" } else { "fail" }.into()),
        ("cluster_slots_assigned", assigned.to_string()),
        ("cluster_slots_ok", assigned.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        (
            "cluster_known_nodes",
            membership.nodes().count().to_string(),
        ),
        ("cluster_size", "1".into()),
        ("cluster_current_epoch", m.current_term.to_string()),
        ("cluster_my_epoch", m.current_term.to_string()),
        ("raft_node_id", m.id.to_string()),
        ("raft_state", format!("{:?}", m.state).to_ascii_lowercase()),
        (
            "raft_leader_id",
            m.current_leader.map_or(String::new(), |l| l.to_string()),
        ),
        ("raft_term", m.current_term.to_string()),
        ("raft_last_log_index", index(m.last_log_index)),
        (
            "raft_last_applied_index",
            index(m.last_applied.map(|l| l.index)),
        ),
        ("raft_snapshot_index", index(m.snapshot.map(|l| l.index))),
        ("raft_purged_index", index(m.purged.map(|l| l.index))),
        ("raft_voters", ids(&mut membership.voter_ids())),
        ("raft_learners", ids(&mut membership.learner_ids())),
        (
            "raft_millis_since_quorum_ack",
            m.millis_since_quorum_ack
                .map_or(String::new(), |ms| ms.to_string()),
        ),
        (
            "raft_partitioned_from",
            ids(&mut cluster.hooks.cut_peers().into_iter()),
        ),
    ];
    fields
}

/// CLUSTER NODES, in Redis Cluster's format: the leader is the master
/// owning every slot, the other voters its replicas, learners replicas
/// that never fail over.
fn nodes(cluster: &Cluster) -> String {
    let metrics = cluster.raft.metrics();
    let m = metrics.borrow();
    let membership = m.membership_config.membership();
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    let leader = m.current_leader;
    let mut out = String::new();
    for (id, member) in membership.nodes() {
        let (host, port) = host_port(&member.redis);
        let (_, raft_port) = host_port(&member.raft);
        let mut flags = Vec::new();
        if *id == cluster.id() {
            flags.push("myself");
        }
        let is_leader = Some(*id) == leader;
        flags.push(if is_leader { "master" } else { "slave" });
        if !voters.contains(id) {
            flags.push("nofailover");
        }
        let master = match (is_leader, leader) {
            (false, Some(l)) => redis_node_id(l),
            _ => "-".into(),
        };
        let link = if cluster.hooks.is_cut(*id) {
            "disconnected"
        } else {
            "connected"
        };
        let slots = if is_leader {
            format!(" 0-{}", SLOTS - 1)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{} {host}:{port}@{raft_port} {} {master} 0 0 {} {link}{slots}",
            redis_node_id(*id),
            flags.join(","),
            m.current_term,
        );
    }
    out
}

/// CLUSTER SLOTS: one range, the leader first, then the other members.
fn slots(cluster: &Cluster) -> Reply {
    let metrics = cluster.raft.metrics();
    let m = metrics.borrow();
    let Some(leader) = m.current_leader else {
        return Reply::Array(Vec::new());
    };
    let membership = m.membership_config.membership();
    let node = |id: NodeId, member: &Member| {
        let (host, port) = host_port(&member.redis);
        Reply::Array(vec![
            Reply::bulk(host),
            Reply::Int(port),
            Reply::bulk(redis_node_id(id)),
        ])
    };
    let mut range = vec![Reply::Int(0), Reply::Int(i64::from(SLOTS - 1))];
    if let Some(member) = membership.get_node(&leader) {
        range.push(node(leader, member));
    }
    for (id, member) in membership.nodes() {
        if *id != leader {
            range.push(node(*id, member));
        }
    }
    Reply::Array(vec![Reply::Array(range)])
}

/// The role INFO's replication section reports.
pub fn role(cluster: &Cluster) -> &'static str {
    match cluster.raft.metrics().borrow().state {
        ServerState::Leader => "master",
        _ => "slave",
    }
}
