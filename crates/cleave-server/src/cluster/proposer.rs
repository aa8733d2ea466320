//! Write commands into log entries: one entry per group of commands that
//! reached the leader while the entries before it were on their way.
//!
//! openraft 0.9's leader appends one entry at a time and waits for each to
//! be durable before the next, so an entry per command would allow one
//! command per disk sync. Instead every connection hands its writes to
//! this one task, which proposes what has queued up as one entry whenever
//! fewer than [`MAX_IN_FLIGHT`] of its entries are unanswered: the busier
//! the leader, the larger the entries (a group commit, as a WAL's). Each
//! command is answered with its own reply once its entry is applied.
//! Commands keep the order they were handed over in, so a connection's
//! pipeline is applied in its order.

use std::sync::Arc;

use openraft::error::ClientWriteError;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::types::{Command, NodeId, Proposal, Raft};

/// Entries proposed and not yet applied, at most: one being made durable
/// and replicated while the next fills.
const MAX_IN_FLIGHT: usize = 2;
/// Most commands in one entry: the state machine gives each command of an
/// entry its own range of collection versions.
pub const MAX_COMMANDS_PER_ENTRY: usize = 4096;
/// An entry takes further commands while its arguments are below this.
const MAX_ENTRY_BYTES: usize = 1 << 20;

/// Why a command was not applied, or may not have been.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// This member does not lead (any more); the leader it knows of. The
    /// command may yet be applied if its entry had reached others.
    NotLeader(Option<NodeId>),
    /// Raft stopped, or the entry failed; the outcome is unknown.
    Failed(String),
}

pub type Answer = Result<Vec<u8>, Refusal>;

struct Pending {
    command: Command,
    answer: oneshot::Sender<Answer>,
}

/// The proposing task's queue.
pub struct Proposer {
    queue: mpsc::UnboundedSender<Pending>,
}

impl Proposer {
    /// Starts the task proposing to `raft`.
    pub fn start(raft: Raft) -> Proposer {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, rx));
        Proposer { queue }
    }

    /// Queues `command`; the receiver gets its reply once it is applied.
    pub fn propose(&self, command: Command) -> oneshot::Receiver<Answer> {
        let (answer, rx) = oneshot::channel();
        // The task ends only with the runtime: a failed send drops the
        // sender, which the receiver reports as an unknown outcome.
        let _ = self.queue.send(Pending { command, answer });
        rx
    }
}

fn size(c: &Command) -> usize {
    c.args.iter().map(Vec::len).sum()
}

async fn run(raft: Raft, mut queue: mpsc::UnboundedReceiver<Pending>) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(first) = queue.recv().await {
        // Waiting for a slot is what lets the next entry fill.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut bytes = size(&first.command);
        let mut batch = vec![first];
        while batch.len() < MAX_COMMANDS_PER_ENTRY && bytes < MAX_ENTRY_BYTES {
            match queue.try_recv() {
                Ok(p) => {
                    bytes += size(&p.command);
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        let (commands, answers): (Vec<Command>, Vec<oneshot::Sender<Answer>>) =
            batch.into_iter().map(|p| (p.command, p.answer)).unzip();
        match raft.client_write_ff(Proposal { commands }).await {
            Ok(rx) => {
                tokio::spawn(async move {
                    let outcome = rx.await;
                    drop(slot);
                    deliver(outcome, answers);
                });
            }
            Err(fatal) => deliver_all(answers, &Refusal::Failed(format!("Raft stopped: {fatal}"))),
        }
    }
}

type WriteOutcome = Result<
    openraft::raft::ClientWriteResult<super::types::ServerConfig>,
    tokio::sync::oneshot::error::RecvError,
>;

fn deliver(outcome: WriteOutcome, answers: Vec<oneshot::Sender<Answer>>) {
    match outcome {
        Ok(Ok(response)) if response.data.0.len() == answers.len() => {
            for (answer, reply) in answers.into_iter().zip(response.data.0) {
                let _ = answer.send(Ok(reply));
            }
        }
        Ok(Ok(response)) => deliver_all(
            answers,
            &Refusal::Failed(format!(
                "{} replies to an entry of other commands",
                response.data.0.len()
            )),
        ),
        Ok(Err(ClientWriteError::ForwardToLeader(f))) => {
            deliver_all(answers, &Refusal::NotLeader(f.leader_id))
        }
        Ok(Err(e)) => deliver_all(answers, &Refusal::Failed(e.to_string())),
        Err(_) => deliver_all(answers, &Refusal::Failed("Raft stopped".into())),
    }
}

fn deliver_all(answers: Vec<oneshot::Sender<Answer>>, refusal: &Refusal) {
    for answer in answers {
        let _ = answer.send(Err(refusal.clone()));
    }
}
