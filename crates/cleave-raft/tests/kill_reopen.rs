//! Kill-and-reopen test of the log storage: a child process (this test
//! binary, running `kill_child`) appends entries, saves votes and committed
//! ids, purges and truncates, and prints each operation before it starts
//! (`@begin`) and once it returned (`@ack`); the parent kills it with
//! SIGKILL after a number of acknowledgements, reopens the storage and
//! checks, through the storage API, that it holds exactly what was
//! acknowledged, or that plus the one operation in flight.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use cleave_raft::{LogId, LogStorage, Request, Vote};
use common::{entry, log_id, request};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{EntryPayload, RaftLogReader};

const DIR_VAR: &str = "CLEAVE_RAFT_KILL_DIR";
const CYCLES: usize = 20;
/// The child is killed after this many acknowledgements, at least and at
/// most (chosen per cycle).
const ACKS_MIN: u64 = 20;
const ACKS_MAX: u64 = 150;
/// After the last acknowledgement it waits for, the parent waits up to
/// this long before the kill, so the kill lands anywhere in an operation.
const KILL_DELAY_MAX_US: u64 = 3_000;
/// A child that prints nothing for this long is stuck: the test fails
/// rather than waits.
const SILENCE_LIMIT: Duration = Duration::from_secs(20);

/// One storage operation, as the child prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// Entries `first..=last`, all of `term` (payloads from `common`).
    Append {
        term: u64,
        first: u64,
        last: u64,
    },
    Vote {
        term: u64,
        node: u64,
        committed: bool,
    },
    Commit {
        term: u64,
        index: u64,
    },
    Purge {
        term: u64,
        index: u64,
    },
    Truncate {
        index: u64,
    },
}

impl Op {
    fn line(&self) -> String {
        match *self {
            Op::Append { term, first, last } => format!("append {term} {first} {last}"),
            Op::Vote {
                term,
                node,
                committed,
            } => format!("vote {term} {node} {}", u8::from(committed)),
            Op::Commit { term, index } => format!("commit {term} {index}"),
            Op::Purge { term, index } => format!("purge {term} {index}"),
            Op::Truncate { index } => format!("truncate {index}"),
        }
    }

    fn parse(line: &str) -> Op {
        let words: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| -> u64 {
            words
                .get(i)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("bad line {line:?}"))
        };
        match words.first().copied() {
            Some("append") => Op::Append {
                term: n(1),
                first: n(2),
                last: n(3),
            },
            Some("vote") => Op::Vote {
                term: n(1),
                node: n(2),
                committed: n(3) == 1,
            },
            Some("commit") => Op::Commit {
                term: n(1),
                index: n(2),
            },
            Some("purge") => Op::Purge {
                term: n(1),
                index: n(2),
            },
            Some("truncate") => Op::Truncate { index: n(1) },
            _ => panic!("bad line {line:?}"),
        }
    }

    fn vote(term: u64, node: u64, committed: bool) -> Vote {
        if committed {
            Vote::new_committed(term, node)
        } else {
            Vote::new(term, node)
        }
    }
}

/// What the storage should hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Model {
    /// Index to term of every entry present.
    entries: BTreeMap<u64, u64>,
    purged: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
}

/// What the storage API shows: the comparison of a model and a reopened
/// storage.
#[derive(Debug, PartialEq, Eq)]
struct View {
    /// Index, term and request of every entry the reader returns.
    entries: Vec<(u64, u64, Request)>,
    last_purged: Option<LogId>,
    last_log_id: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
}

impl Model {
    fn apply(&mut self, op: Op) {
        match op {
            Op::Append { term, first, last } => {
                for index in first..=last {
                    self.entries.insert(index, term);
                }
            }
            Op::Vote {
                term,
                node,
                committed,
            } => self.vote = Some(Op::vote(term, node, committed)),
            Op::Commit { term, index } => self.committed = Some(log_id(term, index)),
            Op::Purge { term, index } => {
                self.purged = Some(log_id(term, index));
                self.entries = self.entries.split_off(&(index + 1));
            }
            Op::Truncate { index } => {
                self.entries.split_off(&index);
            }
        }
    }

    fn view(&self) -> View {
        let last_entry = self.entries.last_key_value().map(|(&i, &t)| log_id(t, i));
        View {
            entries: self
                .entries
                .iter()
                .map(|(&i, &t)| (i, t, request(i, t)))
                .collect(),
            last_purged: self.purged,
            last_log_id: last_entry.or(self.purged),
            vote: self.vote,
            committed: self.committed,
        }
    }
}

async fn view_of(log: &mut LogStorage) -> View {
    let mut reader = log.get_log_reader().await;
    let entries = reader
        .try_get_log_entries(0..)
        .await
        .unwrap()
        .into_iter()
        .map(|e| match e.payload {
            EntryPayload::Normal(r) => (e.log_id.index, e.log_id.leader_id.term, r),
            other => panic!("entry {} holds {other:?}", e.log_id),
        })
        .collect();
    let state = log.get_log_state().await.unwrap();
    View {
        entries,
        last_purged: state.last_purged_log_id,
        last_log_id: state.last_log_id,
        vote: log.read_vote().await.unwrap(),
        committed: log.read_committed().await.unwrap(),
    }
}

/// The child: runs operations until killed. Only when `DIR_VAR` is set.
#[test]
#[ignore]
fn kill_child() {
    let Ok(dir) = std::env::var(DIR_VAR) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(child(PathBuf::from(dir)));
}

async fn term_of(log: &mut LogStorage, index: u64) -> Option<u64> {
    let found = log.try_get_log_entries(index..=index).await.unwrap();
    found.first().map(|e| e.log_id.leader_id.term)
}

async fn child(dir: PathBuf) {
    let mut log: LogStorage = LogStorage::open(&dir, common::log_options()).unwrap();
    let state = log.get_log_state().await.unwrap();
    let vote = log.read_vote().await.unwrap();
    let mut committed = log.read_committed().await.unwrap();
    let mut purged = state.last_purged_log_id;
    let mut last = state.last_log_id.map_or(0, |id| id.index);
    // A restart stands for a new leader: a term above every one seen.
    let mut term = 1 + vote
        .map_or(0, |v| v.leader_id.term)
        .max(state.last_log_id.map_or(0, |id| id.leader_id.term));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for step in 0u64.. {
        let committed_index = committed.map_or(0, |c| c.index);
        let purged_index = purged.map_or(0, |p| p.index);
        let append = Op::Append {
            term,
            first: last + 1,
            last: last + 1 + step % 4,
        };
        let op = match step % 13 {
            0 => Op::Vote {
                term,
                node: 1 + step % 3,
                committed: step % 2 == 0,
            },
            3 | 8 if last > 1 && last - 1 > committed_index => {
                match term_of(&mut log, last - 1).await {
                    Some(t) => Op::Commit {
                        term: t,
                        index: last - 1,
                    },
                    None => append,
                }
            }
            6 if committed_index > purged_index + 1 => {
                match term_of(&mut log, committed_index - 1).await {
                    Some(t) => Op::Purge {
                        term: t,
                        index: committed_index - 1,
                    },
                    None => append,
                }
            }
            11 if last > 1 && last - 1 > committed_index.max(purged_index) => {
                Op::Truncate { index: last - 1 }
            }
            _ => append,
        };
        writeln!(out, "@begin {}", op.line()).unwrap();
        out.flush().unwrap();
        match op {
            Op::Append { term, first, last } => {
                let entries: Vec<_> = (first..=last).map(|i| entry(term, i)).collect();
                log.blocking_append(entries).await.unwrap();
            }
            Op::Vote {
                term,
                node,
                committed,
            } => log
                .save_vote(&Op::vote(term, node, committed))
                .await
                .unwrap(),
            Op::Commit { term, index } => {
                committed = Some(log_id(term, index));
                log.save_committed(committed).await.unwrap();
            }
            Op::Purge { term, index } => {
                purged = Some(log_id(term, index));
                log.purge(log_id(term, index)).await.unwrap();
            }
            Op::Truncate { index } => {
                log.truncate(log_id(term, index)).await.unwrap();
            }
        }
        match op {
            Op::Append { last: l, .. } => last = l,
            // The entries after a truncation come from a new leader.
            Op::Truncate { index } => {
                last = index - 1;
                term += 1;
            }
            _ => {}
        }
        writeln!(out, "@ack {}", op.line()).unwrap();
        out.flush().unwrap();
    }
}

/// xorshift64*: the kill points, reproducible without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Runs the child until it has acknowledged `acks` operations, kills it,
/// and returns every line it printed.
fn run_child(exe: &Path, dir: &Path, acks: u64, delay: Duration) -> Vec<String> {
    let mut child = Command::new(exe)
        .args([
            "kill_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_VAR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let mut acked = 0;
    while acked < acks {
        let line = match rx.recv_timeout(SILENCE_LIMIT) {
            Ok(line) => line,
            Err(e) => {
                let _ = child.kill();
                panic!("the child went silent after {acked} acknowledgements: {e}");
            }
        };
        acked += u64::from(line.contains("@ack "));
        lines.push(line);
    }
    std::thread::sleep(delay);
    child.kill().unwrap();
    child.wait().unwrap();
    // What it printed before the kill and this side had not read yet.
    lines.extend(rx.iter());
    reader.join().unwrap();
    lines
}

/// Replays the child's lines into `model`; returns the operation that
/// began and was not acknowledged, if any, and how many of each kind were.
fn replay(
    lines: &[String],
    model: &mut Model,
    counts: &mut BTreeMap<&'static str, u64>,
) -> Option<Op> {
    let mut in_flight = None;
    // The test harness prints its own text too, on the line of the first
    // of ours: ours start at '@'.
    for line in lines.iter().filter_map(|l| l.find('@').map(|p| &l[p..])) {
        if let Some(rest) = line.strip_prefix("@begin ") {
            assert_eq!(in_flight, None, "two operations at once");
            in_flight = Some(Op::parse(rest));
        } else if let Some(rest) = line.strip_prefix("@ack ") {
            let op = Op::parse(rest);
            assert_eq!(in_flight, Some(op), "acknowledged what did not begin");
            model.apply(op);
            in_flight = None;
            let kind = match op {
                Op::Append { .. } => "append",
                Op::Vote { .. } => "vote",
                Op::Commit { .. } => "commit",
                Op::Purge { .. } => "purge",
                Op::Truncate { .. } => "truncate",
            };
            *counts.entry(kind).or_default() += 1;
        }
    }
    in_flight
}

#[test]
fn acknowledged_log_operations_survive_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let exe = std::env::current_exe().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut random = 0x5eed_cafe_u64;
    let mut model = Model::default();
    let mut counts = BTreeMap::new();
    let mut in_flight_landed = 0;
    for cycle in 0..CYCLES {
        let acks = ACKS_MIN + next_random(&mut random) % (ACKS_MAX - ACKS_MIN + 1);
        let delay = Duration::from_micros(next_random(&mut random) % KILL_DELAY_MAX_US);
        let lines = run_child(&exe, &dir, acks, delay);
        let in_flight = replay(&lines, &mut model, &mut counts);
        let mut with_in_flight = model.clone();
        if let Some(op) = in_flight {
            with_in_flight.apply(op);
        }
        let got = rt.block_on(async {
            let mut log: LogStorage = LogStorage::open(&dir, common::log_options()).unwrap();
            if let Some(purged) = model.purged {
                // Nothing at or below the acknowledged purge point is back.
                let below = log.try_get_log_entries(0..=purged.index).await.unwrap();
                assert!(
                    below.is_empty(),
                    "cycle {cycle}: purged entries reappeared: {below:?}"
                );
            }
            view_of(&mut log).await
        });
        if got == model.view() {
            continue;
        }
        assert_eq!(
            got,
            with_in_flight.view(),
            "cycle {cycle}: the reopened storage is neither what was acknowledged nor that \
             plus the operation in flight, {in_flight:?}; acknowledged: {:?}",
            model.view()
        );
        model = with_in_flight;
        in_flight_landed += 1;
    }
    // The schedule reaches every kind of operation within ACKS_MIN steps
    // of a start: a cycle count that says otherwise means the child did
    // not run the operations this test is about.
    for kind in ["append", "vote", "commit", "purge", "truncate"] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} was acknowledged: {counts:?}"
        );
    }
    eprintln!(
        "{CYCLES} kills, acknowledged {counts:?}, the operation in flight landed {in_flight_landed} times"
    );
}
