//! Damaged records and snapshots give errors, never panics or wrong data.

mod common;

use std::path::Path;

use cleave::log_store::LogStore;
use cleave_raft::{LogStorage, StateMachine, ENTRIES_LOG, STATE_LOG};
use common::{db_options, entry, log_options};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{RaftLogReader, RaftSnapshotBuilder, Vote};

/// Replaces record `lsn` of the logical log `name` behind the storage's
/// back.
fn overwrite(dir: &Path, name: &str, lsn: u64, data: &[u8]) {
    let store = LogStore::open(dir, log_options()).unwrap();
    let log = store.open_log(name).unwrap();
    store.append(log, lsn, data).unwrap();
}

#[tokio::test]
async fn a_damaged_entry_or_vote_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    {
        let mut log: LogStorage = LogStorage::open(&dir, log_options()).unwrap();
        log.blocking_append((1..=4).map(|i| entry(1, i)))
            .await
            .unwrap();
        log.save_vote(&Vote::new(1, 1)).await.unwrap();
    }
    overwrite(&dir, ENTRIES_LOG, 2, b"{\"log_id\": not json");
    // A well-formed entry in the wrong place is damage too.
    let entry_4 = serde_json::to_vec(&entry(1, 4)).unwrap();
    overwrite(&dir, ENTRIES_LOG, 3, &entry_4);
    overwrite(&dir, STATE_LOG, 1, b"\x00\x01");

    let mut log: LogStorage = LogStorage::open(&dir, log_options()).unwrap();
    let first = log.try_get_log_entries(1..2).await.unwrap();
    assert_eq!(first, vec![entry(1, 1)]);
    for range in [1..5, 2..3, 3..4] {
        assert!(
            log.try_get_log_entries(range.clone()).await.is_err(),
            "range {range:?}"
        );
    }
    let mut reader = log.get_log_reader().await;
    assert!(reader.try_get_log_entries(0..).await.is_err());
    // The last entry is intact: the log state still reads.
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(common::log_id(1, 4)));
    assert!(log.read_vote().await.is_err());
}

#[tokio::test]
async fn a_damaged_snapshot_is_refused_at_open_and_install() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sm");
    let (meta, bytes) = {
        let mut sm = StateMachine::open(&dir, db_options()).unwrap();
        sm.apply((1..=10).map(|i| entry(1, i))).await.unwrap();
        let snap = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        (snap.meta, snap.snapshot.into_inner())
    };

    let mut damaged = bytes.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x01;

    // On a follower: refused, and its state is untouched.
    let mut follower = StateMachine::open(tmp.path().join("follower"), db_options()).unwrap();
    follower.apply([entry(1, 1)]).await.unwrap();
    let before = follower.pairs().unwrap();
    let mut data = follower.begin_receiving_snapshot().await.unwrap();
    data.get_mut().extend_from_slice(&damaged);
    assert!(follower.install_snapshot(&meta, data).await.is_err());
    assert_eq!(follower.pairs().unwrap(), before);
    assert!(follower.get_current_snapshot().await.unwrap().is_none());

    // Intact data under another snapshot's meta: refused too.
    let mut other_meta = meta.clone();
    other_meta.snapshot_id.push_str("-other");
    let mut data = follower.begin_receiving_snapshot().await.unwrap();
    data.get_mut().extend_from_slice(&bytes);
    assert!(follower.install_snapshot(&other_meta, data).await.is_err());
    assert_eq!(follower.pairs().unwrap(), before);

    // At rest: the state machine does not open on a damaged current
    // snapshot rather than serve it.
    std::fs::write(dir.join("snapshot"), &damaged).unwrap();
    assert!(StateMachine::open(&dir, db_options()).is_err());
    std::fs::write(dir.join("snapshot"), &bytes).unwrap();
    let mut sm = StateMachine::open(&dir, db_options()).unwrap();
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, meta);
}
