//! The state machine across reopens: applied state, data, the current
//! snapshot, installing it elsewhere, and an install a crash interrupted.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cleave_raft::{Entry, Request, Response, SnapshotMeta, StateMachine, StoredMembership};
use common::{db_options, entry, log_id};
use openraft::storage::RaftStateMachine;
use openraft::{BasicNode, EntryPayload, Membership, RaftSnapshotBuilder};

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn membership() -> Membership<u64, BasicNode> {
    let nodes: BTreeMap<u64, BasicNode> = (1..=3)
        .map(|id| (id, BasicNode::new(format!("127.0.0.1:{}", 9000 + id))))
        .collect();
    Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes)
}

fn membership_entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Membership(membership()),
    }
}

fn open(dir: &Path) -> StateMachine {
    StateMachine::open(dir, db_options()).unwrap()
}

/// The user keys as applying `entries` in order leaves them, and the
/// response each entry should get.
fn expected(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, entries: &[Entry]) -> Vec<Response> {
    entries
        .iter()
        .map(|e| match &e.payload {
            EntryPayload::Normal(Request::Set { key, value }) => Response {
                value: model.insert(key.clone(), value.clone()),
            },
            EntryPayload::Normal(Request::Delete { key }) => Response {
                value: model.remove(key),
            },
            _ => Response::default(),
        })
        .collect()
}

fn pairs(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> Pairs {
    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

async fn install(sm: &mut StateMachine, meta: &SnapshotMeta, bytes: &[u8]) {
    let mut data = sm.begin_receiving_snapshot().await.unwrap();
    data.get_mut().extend_from_slice(bytes);
    sm.install_snapshot(meta, data).await.unwrap();
}

#[tokio::test]
async fn applied_state_and_snapshots_survive_reopen_and_install() {
    let tmp = tempfile::tempdir().unwrap();
    let leader_dir = tmp.path().join("leader");
    let mut model = BTreeMap::new();
    let stored_membership = StoredMembership::new(Some(log_id(1, 1)), membership());

    // Applied in calls of several entries, some of which set and delete
    // the same key within one call: responses must see earlier entries of
    // their own call.
    let mut sm = open(&leader_dir);
    let mut first: Vec<Entry> = vec![membership_entry(1, 1)];
    first.extend((2..=40).map(|i| entry(1, i)));
    let mut previous_values = 0;
    for chunk in first.chunks(7) {
        let want = expected(&mut model, chunk);
        previous_values += want.iter().filter(|r| r.value.is_some()).count();
        assert_eq!(sm.apply(chunk.to_vec()).await.unwrap(), want);
    }
    // Otherwise the responses checked above were all `None`.
    assert!(previous_values > 5, "entries overwrite and delete set keys");
    assert!(model.len() > 10, "the entries leave a state worth checking");
    let at_snapshot = pairs(&model);
    assert_eq!(
        sm.applied_state().await.unwrap(),
        (Some(log_id(1, 40)), stored_membership.clone())
    );

    // A builder shares the Db: it is dropped before the reopen below.
    let built = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(built.meta.last_log_id, Some(log_id(1, 40)));
    assert_eq!(built.meta.last_membership, stored_membership);
    let snapshot_bytes = built.snapshot.into_inner();

    // Past the snapshot, so the reopened state and the snapshot differ;
    // one call sets, overwrites, deletes and sets again the same key.
    let mut later: Vec<Entry> = (41..=50).map(|i| entry(2, i)).collect();
    let same_key = |index, request| Entry {
        log_id: log_id(2, index),
        payload: EntryPayload::Normal(request),
    };
    let set = |value: &[u8]| Request::Set {
        key: b"same".to_vec(),
        value: value.to_vec(),
    };
    later.push(same_key(51, set(b"one")));
    later.push(same_key(52, set(b"two")));
    later.push(same_key(
        53,
        Request::Delete {
            key: b"same".to_vec(),
        },
    ));
    later.push(same_key(54, set(b"three")));
    let want = expected(&mut model, &later);
    let some = |v: &[u8]| Response {
        value: Some(v.to_vec()),
    };
    assert_eq!(
        want[10..],
        [
            Response::default(),
            some(b"one"),
            some(b"two"),
            Response::default()
        ]
    );
    assert_eq!(sm.apply(later).await.unwrap(), want);
    let at_end = pairs(&model);
    assert_ne!(at_end, at_snapshot);
    drop(sm);

    let mut sm = open(&leader_dir);
    assert_eq!(
        sm.applied_state().await.unwrap(),
        (Some(log_id(2, 54)), stored_membership.clone())
    );
    assert_eq!(sm.pairs().unwrap(), at_end);
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, built.meta);
    assert_eq!(current.snapshot.into_inner(), snapshot_bytes);
    drop(sm);

    // A fresh follower takes the snapshot, and keeps it across a reopen.
    let follower_dir = tmp.path().join("follower");
    let mut follower = open(&follower_dir);
    assert!(follower.get_current_snapshot().await.unwrap().is_none());
    install(&mut follower, &built.meta, &snapshot_bytes).await;
    for round in 0..2 {
        assert_eq!(
            follower.applied_state().await.unwrap(),
            (Some(log_id(1, 40)), stored_membership.clone()),
            "round {round}"
        );
        assert_eq!(follower.pairs().unwrap(), at_snapshot, "round {round}");
        let current = follower.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, built.meta, "round {round}");
        drop(follower);
        follower = open(&follower_dir);
    }

    // A follower with state of its own: the install replaces all of it,
    // keys the snapshot lacks included.
    let diverged_dir = tmp.path().join("diverged");
    let mut diverged = open(&diverged_dir);
    let own: Vec<Entry> = (1..=30)
        .map(|i| Entry {
            log_id: log_id(1, i),
            payload: EntryPayload::Normal(Request::Set {
                key: format!("own{i}").into_bytes(),
                value: b"x".to_vec(),
            }),
        })
        .collect();
    diverged.apply(own).await.unwrap();
    install(&mut diverged, &built.meta, &snapshot_bytes).await;
    assert_eq!(diverged.pairs().unwrap(), at_snapshot);
    assert_eq!(diverged.get(b"own1").unwrap(), None);
    assert_eq!(
        diverged.applied_state().await.unwrap(),
        (Some(log_id(1, 40)), stored_membership.clone())
    );

    // A crash after an install's snapshot file was renamed into place but
    // before its Db write: the next open completes the install.
    let interrupted_dir = tmp.path().join("interrupted");
    drop(open(&interrupted_dir));
    std::fs::copy(
        leader_dir.join("snapshot"),
        interrupted_dir.join("snapshot"),
    )
    .unwrap();
    let mut interrupted = open(&interrupted_dir);
    assert_eq!(
        interrupted.applied_state().await.unwrap(),
        (Some(log_id(1, 40)), stored_membership)
    );
    assert_eq!(interrupted.pairs().unwrap(), at_snapshot);
    let current = interrupted.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, built.meta);
}
