//! I/O faults under the Raft storage, through cleave's fault-injecting
//! `Fs`: a failed sync or a full disk fails the call that met it with an
//! error (an append's callback is told of the failure, never of success),
//! and a reopen holds every entry, vote and applied state acknowledged
//! before it.

mod common;

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use cleave::log_store::LogOptions;
use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave_raft::{LogStorage, StateMachine};
use common::{db_options, entry, log_id, log_options};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{RaftLogReader, Vote};

const LOG_DIR: &str = "/raft/log";
const SM_DIR: &str = "/raft/sm";

fn log_opts(fs: Arc<dyn Fs>) -> LogOptions {
    LogOptions {
        fs,
        ..log_options()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

#[test]
fn failed_log_writes_are_never_acknowledged_and_reopen_keeps_the_rest() {
    runtime().block_on(async {
        for (op, kind) in [
            (FaultOp::Sync, ErrorKind::Other),
            (FaultOp::Append, ErrorKind::StorageFull),
        ] {
            let ctx = format!("{op:?} fails");
            let mem = MemFs::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            let mut log: LogStorage =
                LogStorage::open(LOG_DIR, log_opts(Arc::new(fault.clone()))).unwrap();
            log.blocking_append((1..=20).map(|i| entry(1, i)))
                .await
                .unwrap();
            let vote = Vote::new(1, 1);
            log.save_vote(&vote).await.unwrap();
            fault.fail(&[op], Some(LOG_DIR), 0, kind, true);
            let err = log.blocking_append((21..=30).map(|i| entry(1, i))).await;
            assert!(err.is_err(), "{ctx}: the append was acknowledged");
            assert!(
                log.save_vote(&Vote::new(2, 1)).await.is_err(),
                "{ctx}: vote"
            );
            assert!(fault.injected() > 0, "{ctx}");
            drop(log);
            fault.heal();
            for (fs, what) in [
                (Arc::new(mem.clone()) as Arc<dyn Fs>, "process crash"),
                (Arc::new(mem.crash_clone()) as Arc<dyn Fs>, "power loss"),
            ] {
                let mut log: LogStorage = LogStorage::open(LOG_DIR, log_opts(fs)).unwrap();
                let got = log.try_get_log_entries(1..=20).await.unwrap();
                let want: Vec<_> = (1..=20).map(|i| entry(1, i)).collect();
                assert_eq!(got, want, "{ctx}, {what}");
                let state = log.get_log_state().await.unwrap();
                assert!(state.last_log_id >= Some(log_id(1, 20)), "{ctx}, {what}");
                let read = log.read_vote().await.unwrap();
                assert!(
                    read == Some(vote) || read == Some(Vote::new(2, 1)),
                    "{ctx}, {what}"
                );
                // Whatever the failed append left is a suffix that Raft
                // may keep or overwrite; the log goes on after it.
                let next = state.last_log_id.map_or(1, |id| id.index + 1);
                log.blocking_append([entry(2, next)]).await.unwrap();
                assert_eq!(
                    log.try_get_log_entries(next..).await.unwrap(),
                    vec![entry(2, next)]
                );
            }
        }
    });
}

#[test]
fn a_failed_apply_changes_no_state_and_reopen_keeps_the_applied_entries() {
    runtime().block_on(async {
        let mem = MemFs::new();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let opts = || cleave::Options {
            fs: Arc::new(fault.clone()),
            ..db_options()
        };
        let mut sm = StateMachine::open(SM_DIR, opts()).unwrap();
        sm.apply((1..=10).map(|i| entry(1, i))).await.unwrap();
        let before = sm.pairs().unwrap();
        fault.fail(&[FaultOp::Sync], Some(SM_DIR), 0, ErrorKind::Other, true);
        assert!(sm.apply((11..=12).map(|i| entry(1, i))).await.is_err());
        assert_eq!(sm.applied_state().await.unwrap().0, Some(log_id(1, 10)));
        drop(sm);
        fault.heal();
        let crashed = mem.crash_clone();
        let mut sm = StateMachine::open(
            Path::new(SM_DIR),
            cleave::Options {
                fs: Arc::new(crashed),
                ..db_options()
            },
        )
        .unwrap();
        assert_eq!(sm.applied_state().await.unwrap().0, Some(log_id(1, 10)));
        assert_eq!(sm.pairs().unwrap(), before);
    });
}
