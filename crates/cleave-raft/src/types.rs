//! The Raft type configuration and the application data the state machine
//! applies.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

/// A node's id in the cluster.
pub type NodeId = u64;

/// What every storage call of this crate returns on failure.
pub type StorageError = openraft::StorageError<NodeId>;

/// A log entry of this configuration.
pub type Entry = openraft::Entry<TypeConfig>;

/// A log id of this configuration.
pub type LogId = openraft::LogId<NodeId>;

/// A vote of this configuration.
pub type Vote = openraft::Vote<NodeId>;

/// Snapshot metadata of this configuration.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;

/// The last membership the state machine applied.
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;

openraft::declare_raft_types!(
    /// The openraft types of a cleave-backed node: `u64` node ids, `BasicNode`
    /// addresses, snapshots held in memory.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A client's write, carried by a log entry and applied to the state
/// machine's user keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Sets `key` to `value`.
    Set { key: Vec<u8>, value: Vec<u8> },
    /// Removes `key`; removing an absent key is not an error.
    Delete { key: Vec<u8> },
}

/// What applying one entry answers: for a [`Request`], the key's value
/// before it (so a client can tell an insert from an overwrite, or what a
/// delete removed); for a blank or membership entry, `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub value: Option<Vec<u8>>,
}
