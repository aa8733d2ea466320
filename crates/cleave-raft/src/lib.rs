//! openraft (0.9, `storage-v2`) storage on cleave: the Raft log in a log
//! store, the state machine in a `Db`.
//!
//! # Layout
//!
//! [`open`] puts both under one directory:
//!
//! - `log/`: a [`cleave::log_store::LogStore`] with two logical logs.
//!   [`ENTRIES_LOG`] holds one record per entry, its LSN the entry's Raft
//!   index, its bytes the entry as JSON. [`STATE_LOG`] holds the hard
//!   state, each item a JSON record at a fixed LSN that every save replaces:
//!   the vote (LSN 1), the committed log id (LSN 2), the last purged log
//!   id (LSN 3). A truncation is the store's `truncate`, a purge its `trim`.
//! - `state_machine/db/`: a [`cleave::Db`]. A user key `k` is stored as
//!   `b"d" + k`; the last applied log id and last membership are one JSON
//!   value at [`APPLIED_KEY`] (`b"m/applied"`), outside the user keys.
//! - `state_machine/snapshot`: the current snapshot, in the format of
//!   module `snapshot` (meta, then every pair, then a CRC-32C).
//!
//! # Durability
//!
//! - Every log-side write but `save_committed` is durable when it returns:
//!   the store syncs each call (`LogOptions::sync`, or an explicit
//!   [`LogStore::sync`] when that is off), and `append` reports its entries
//!   flushed only after that. An append of several entries is split into
//!   batches in index order, so a crash keeps a prefix of them, never a
//!   hole. With `sync` off the committed log id is written but not synced:
//!   openraft saves it at every advance, it names entries durable already,
//!   and one lost to a crash is only older, which openraft commits past
//!   again.
//! - The newest entries (64 MiB of them) are also kept decoded in memory:
//!   openraft reads each entry back soon after appending it, to replicate
//!   and to apply it.
//! - `purge` saves the purged id durably before it trims; a crash between
//!   the two leaves entries that the next [`LogStorage::open`] trims.
//! - Each `apply` writes the entries' effects and the new applied state in
//!   one synced `WriteBatch`: after a crash they agree.
//! - A new current snapshot is written to a temporary file, synced and
//!   renamed, the directory synced. `install_snapshot` writes that file
//!   first, then replaces the Db's state in one synced batch; a crash in
//!   between is completed by [`StateMachine::open`], which installs a
//!   current snapshot newer than the applied state again.
//!
//! [`LogStore::sync`]: cleave::log_store::LogStore::sync
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![allow(
    clippy::result_large_err,
    reason = "openraft's traits fix the error type, StorageError, at 224 bytes"
)]

mod log;
mod snapshot;
mod state_machine;
mod types;

use std::path::Path;

pub use log::{LogConfig, LogReader, LogStorage, ENTRIES_LOG, STATE_LOG};
pub use snapshot::FormatError;
pub use state_machine::{KeyValue, SnapshotBuilder, StateMachine, APPLIED_KEY, DATA_PREFIX};
pub use types::{
    Entry, LogId, NodeId, Request, Response, SnapshotMeta, StorageError, StoredMembership,
    TypeConfig, Vote,
};

/// The log store's subdirectory of [`open`]'s directory.
pub const LOG_DIR: &str = "log";
/// The state machine's subdirectory of [`open`]'s directory.
pub const STATE_MACHINE_DIR: &str = "state_machine";

/// Opens (or, with the options' `create_if_missing`, creates) a node's log
/// storage in `dir/log` and its state machine in `dir/state_machine`.
pub fn open(
    dir: impl AsRef<Path>,
    log_options: cleave::log_store::LogOptions,
    db_options: cleave::Options,
) -> Result<(LogStorage, StateMachine), StorageError> {
    let dir = dir.as_ref();
    let log = LogStorage::open(dir.join(LOG_DIR), log_options)?;
    let state_machine = StateMachine::open(dir.join(STATE_MACHINE_DIR), db_options)?;
    Ok((log, state_machine))
}
