//! Linearizable reads, many per read-index check. A read may be served
//! once the leader has confirmed, after the read arrived, that it still
//! leads (a heartbeat round to a majority) and has applied what was
//! committed then (openraft's `ensure_linearizable`). One check serves
//! every read that arrived before it began: this task runs one check at a
//! time for all the reads waiting, from every connection, so that the
//! cost of a round is shared rather than paid per read.

use openraft::error::{CheckIsLeaderError, RaftError};
use tokio::sync::{mpsc, oneshot};

use super::types::{NodeId, Raft};

/// Why reads may not be served here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// This member does not lead; the leader it knows of.
    NotLeader(Option<NodeId>),
    /// The leader cannot reach a majority.
    NoQuorum,
    Stopped(String),
}

pub struct ReadIndex {
    queue: mpsc::UnboundedSender<oneshot::Sender<Result<(), Refusal>>>,
}

impl ReadIndex {
    pub fn start(raft: Raft) -> ReadIndex {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, rx));
        ReadIndex { queue }
    }

    /// Waits until reads that arrived before this call may be served.
    pub async fn wait(&self) -> Result<(), Refusal> {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(tx).is_err() {
            return Err(Refusal::Stopped("the read-index task ended".into()));
        }
        rx.await
            .unwrap_or_else(|_| Err(Refusal::Stopped("the read-index task ended".into())))
    }
}

async fn run(raft: Raft, mut queue: mpsc::UnboundedReceiver<oneshot::Sender<Result<(), Refusal>>>) {
    while let Some(first) = queue.recv().await {
        let mut waiting = vec![first];
        while let Ok(w) = queue.try_recv() {
            waiting.push(w);
        }
        // Begins after every waiting read arrived.
        let result = match raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(Refusal::NotLeader(f.leader_id))
            }
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_))) => {
                Err(Refusal::NoQuorum)
            }
            Err(RaftError::Fatal(f)) => Err(Refusal::Stopped(f.to_string())),
        };
        for w in waiting {
            let _ = w.send(result.clone());
        }
    }
}
