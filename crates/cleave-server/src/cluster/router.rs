//! Where each request of a cluster member's client goes: a write into the
//! Raft log (on the leader; elsewhere a redirect), a read to the local
//! database after the read-index check, anything else (PING, INFO, CLIENT,
//! CONFIG) to the member itself.
//!
//! A follower answers a command it may not serve with Redis Cluster's
//! redirect, `-MOVED <slot> <host>:<port>` naming the leader, rather than
//! forwarding it: cluster-aware clients (redis-cli -c, redis-py's
//! RedisCluster, Jedis) follow it and then talk to the leader directly,
//! with no second hop, and a forwarded write whose reply was lost on the
//! way back would leave the client unsure twice over. The group presents
//! itself to such clients as one shard owning all 16384 slots, led by the
//! Raft leader (CLUSTER SLOTS).

use std::sync::Arc;

use tokio::sync::oneshot;

use super::proposer::{Answer, Refusal};
use super::reads::Refusal as ReadRefusal;
use super::types::{Command, NodeId};
use super::{Cluster, ReadMode};
use crate::commands::{self, Ctx};
use crate::resp::Reply;
use crate::state::{Client, Shared};

/// Redis Cluster's slot count.
pub const SLOTS: u16 = 16384;

/// The slot of `key`, as Redis Cluster computes it: CRC-16/XMODEM of the
/// key, or of its hash tag (the bytes between the first `{` and the next
/// `}`, if not empty), modulo 16384.
pub fn slot(key: &[u8]) -> u16 {
    const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    CRC16.checksum(tagged.unwrap_or(key)) % SLOTS
}

enum Route {
    Write,
    Read,
    Admin,
    Local,
}

fn route(args: &[Vec<u8>]) -> Route {
    match commands::lookup(&args[0]) {
        Some(c) if c.name == "cluster" => Route::Admin,
        Some(c) if !c.arity_matches(args) => Route::Local,
        Some(c) if c.is_write() => Route::Write,
        Some(c) if c.is_read() => Route::Read,
        _ => Route::Local,
    }
}

/// The redirect for a command this member may not serve: to the leader,
/// or, with none known, Redis Cluster's error for a cluster that cannot
/// serve.
fn redirect(cluster: &Cluster, args: &[Vec<u8>], leader: Option<NodeId>) -> Reply {
    let leader = leader
        .and_then(|id| cluster.member(id))
        .or_else(|| cluster.leader().map(|l| l.1));
    match leader {
        Some(member) => {
            let key = commands::lookup(&args[0]).and_then(|c| c.first_key(args));
            Reply::Error(format!("MOVED {} {}", key.map_or(0, slot), member.redis))
        }
        None => no_leader(),
    }
}

/// Redis Cluster's error for a cluster that cannot serve, when no leader
/// is known.
pub fn no_leader() -> Reply {
    Reply::error("CLUSTERDOWN The cluster is down: no leader is elected")
}

/// A leader that has not heard from a majority lately.
fn no_quorum() -> Reply {
    Reply::error("CLUSTERDOWN The leader cannot reach a majority of the group")
}

type WriteReceiver = oneshot::Receiver<Answer>;

/// Runs a client's batch of requests in order; returns the client and the
/// encoded replies.
pub async fn execute(
    shared: &Arc<Shared>,
    cluster: &Cluster,
    mut client: Client,
    requests: Vec<Vec<Vec<u8>>>,
) -> (Client, Vec<u8>) {
    let mut out = Vec::new();
    // Writes proposed and not yet answered, in order: a pipeline's writes
    // go into the log together and commit in one round.
    let mut pending: Vec<(Vec<Vec<u8>>, WriteReceiver)> = Vec::new();
    // One read-index check serves every read of the batch: all of them
    // arrived before it.
    let mut read_index_checked = false;
    for args in requests {
        let reply = match route(&args) {
            Route::Write => match cluster.leads_a_majority() {
                Some(true) => {
                    let command = Command {
                        db: client.db,
                        proto: client.proto,
                        // Every member applies the same expiry.
                        args: crate::commands::expiry::absolute(args.clone()),
                    };
                    pending.push((args, cluster.proposer.propose(command)));
                    continue;
                }
                Some(false) => no_quorum(),
                None => redirect(cluster, &args, None),
            },
            Route::Read => {
                finish_writes(cluster, &mut pending, client.proto, &mut out).await;
                let local = client.readonly || cluster.settings.reads == ReadMode::Local;
                if local || read_index_checked {
                    run_local(shared, &mut client, &args)
                } else {
                    match cluster.read_index.wait().await {
                        Ok(()) => {
                            read_index_checked = true;
                            run_local(shared, &mut client, &args)
                        }
                        Err(e) => read_refused(cluster, &args, e),
                    }
                }
            }
            Route::Admin => {
                finish_writes(cluster, &mut pending, client.proto, &mut out).await;
                super::admin(shared, cluster, &args).await
            }
            Route::Local => {
                finish_writes(cluster, &mut pending, client.proto, &mut out).await;
                run_local(shared, &mut client, &args)
            }
        };
        finish_writes(cluster, &mut pending, client.proto, &mut out).await;
        if client.silent {
            break;
        }
        reply.write_to(client.proto, &mut out);
        if client.close {
            break;
        }
    }
    finish_writes(cluster, &mut pending, client.proto, &mut out).await;
    (client, out)
}

fn run_local(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Reply {
    let slow = commands::lookup(&args[0]).is_some_and(|c| c.slow);
    let mut run = || commands::execute(&mut Ctx { shared, client }, args);
    if slow {
        tokio::task::block_in_place(run)
    } else {
        run()
    }
}

fn read_refused(cluster: &Cluster, args: &[Vec<u8>], e: ReadRefusal) -> Reply {
    match e {
        ReadRefusal::NotLeader(leader) => redirect(cluster, args, leader),
        ReadRefusal::NoQuorum => no_quorum(),
        ReadRefusal::Stopped(why) => Reply::Error(format!("ERR Raft stopped: {why}")),
    }
}

/// Waits for the pending writes' replies, in order, and appends them.
async fn finish_writes(
    cluster: &Cluster,
    pending: &mut Vec<(Vec<Vec<u8>>, WriteReceiver)>,
    proto: u8,
    out: &mut Vec<u8>,
) {
    let limit = cluster.settings.write_timeout;
    for (args, rx) in pending.drain(..) {
        let reply = match tokio::time::timeout(limit, rx).await {
            Ok(Ok(Ok(reply))) => {
                out.extend_from_slice(&reply);
                continue;
            }
            Ok(Ok(Err(Refusal::NotLeader(leader)))) => {
                // Leadership moved while the write was on its way: it may
                // yet be committed by the new leader, or not.
                redirect(cluster, &args, leader)
            }
            Ok(Ok(Err(Refusal::Failed(why)))) => {
                Reply::Error(format!("TRYAGAIN The write's outcome is unknown: {why}"))
            }
            Ok(Err(_)) => Reply::error("TRYAGAIN The write's outcome is unknown: Raft stopped"),
            Err(_) => {
                Reply::error("TRYAGAIN The write did not commit in time; it may still be applied")
            }
        };
        reply.write_to(proto, out);
    }
}

#[cfg(test)]
mod tests {
    use super::slot;

    /// Slots from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    #[test]
    fn slots_are_redis_clusters() {
        // CRC-16/XMODEM's check value, below 16384.
        assert_eq!(slot(b"123456789"), 0x31c3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_ne!(slot(b"foo{}{bar}"), slot(b"bar"));
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b""), 0);
    }
}
