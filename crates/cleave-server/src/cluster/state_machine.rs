//! The state machine: the server's own database, to which every member
//! applies the committed write commands in log order, running each through
//! the same command table a standalone server uses.
//!
//! An entry holds several commands (module `proposer`). Each command's
//! batch carries the applied state at `raft_applied_key`: the last entry
//! applied whole, the membership, and how many commands of the entry being
//! applied are done; so after a crash a database's effects and its applied
//! state agree, and openraft applies the entries after the last whole one
//! again from the log, skipping the commands done. Writes are not synced:
//! the Raft log is, and it holds every entry the database may have lost.
//! A command that writes several batches (FLUSHDB) carries the count
//! without itself, and counts once it returns: applied again after a
//! crash, it ends the same.
//!
//! Each command of an entry creates collections with versions from its
//! own range, `index << 24 | command << 12`, so a command applied again
//! never reuses a version one before it in the same entry took.
#![allow(
    clippy::result_large_err,
    reason = "openraft's traits fix the error type, StorageError, at 224 bytes"
)]

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use cleave::{ReadOptions, WriteBatch, WriteOptions};
use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, StorageIOError,
};
use serde::{Deserialize, Serialize};

use super::layout::{self, Layout};
use super::snapshot;
use super::types::{
    LogId, Outcome, ServerConfig, SnapshotDir, SnapshotMeta, StorageError, StoredMembership,
};
use crate::commands::{self, Ctx};
use crate::keyspace;
use crate::state::{Client, Shared};

/// The applied state, stored at [`keyspace::raft_applied_key`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The last entry applied whole.
    pub last_applied: Option<LogId>,
    pub last_membership: StoredMembership,
    /// The entry after it, and how many of its commands are applied.
    #[serde(default)]
    pub partial: Option<(LogId, usize)>,
}

/// Bits of a collection version below the entry's index: the command's
/// place in the entry, then the command's own count.
const VERSION_ENTRY_SHIFT: u32 = 24;
const VERSION_COMMAND_SHIFT: u32 = 12;
const _: () = assert!(
    (super::proposer::MAX_COMMANDS_PER_ENTRY as u64) << VERSION_COMMAND_SHIFT
        <= 1 << VERSION_ENTRY_SHIFT
);
const _: () = assert!(crate::store::VERSIONS_PER_COMMAND == 1 << VERSION_COMMAND_SHIFT);

/// State machine writes: not synced, the log is.
const UNSYNCED: WriteOptions = WriteOptions {
    sync: false,
    disable_wal: false,
};

/// openraft's [`RaftStateMachine`] on the server's [`crate::store::Store`].
pub struct StateMachine {
    shared: Weak<Shared>,
    layout: Layout,
    /// The live database's directory.
    live: PathBuf,
    /// What has been applied, whole entries only (`partial` is `None`).
    applied: Applied,
    /// An entry a crash interrupted, and how many of its commands the
    /// database holds: applied again, it skips those.
    resume: Option<(LogId, usize)>,
    /// The database's applied state is behind `applied`.
    dirty: bool,
    /// Bytes of commands applied since the last snapshot was asked for,
    /// and how many call for the next.
    since_snapshot: u64,
    snapshot_bytes: u64,
    /// Held by a snapshot build and by an install: an install must not
    /// retire the database a build is copying.
    snapshot_lock: Arc<std::sync::Mutex<()>>,
}

/// Builds a snapshot (a checkpoint) of the live database.
pub struct SnapshotBuilder {
    shared: Weak<Shared>,
    layout: Layout,
    snapshot_lock: Arc<std::sync::Mutex<()>>,
}

fn sm_error(e: impl std::fmt::Display) -> AnyError {
    AnyError::error(e.to_string())
}

fn gone() -> StorageError {
    StorageIOError::read_state_machine(AnyError::error("the server is shutting down")).into()
}

/// The applied state `db` holds.
pub fn read_applied(db: &cleave::Db) -> Result<Applied, String> {
    match db
        .get(&ReadOptions::new(), &keyspace::raft_applied_key())
        .map_err(|e| e.to_string())?
    {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("applied state: {e}")),
        None => Ok(Applied::default()),
    }
}

impl StateMachine {
    /// The state machine of `shared`'s store, whose database lives in
    /// `live` of `layout`.
    pub fn new(
        shared: &Arc<Shared>,
        layout: Layout,
        live: PathBuf,
        snapshot_bytes: u64,
    ) -> Result<Self, String> {
        let mut applied = read_applied(&shared.store.db())?;
        Ok(StateMachine {
            shared: Arc::downgrade(shared),
            layout,
            live,
            resume: applied.partial.take(),
            applied,
            dirty: false,
            since_snapshot: 0,
            snapshot_bytes,
            snapshot_lock: Arc::new(std::sync::Mutex::new(())),
        })
    }

    fn shared(&self) -> Result<Arc<Shared>, StorageError> {
        self.shared.upgrade().ok_or_else(gone)
    }

    fn encode_applied(applied: &Applied, at: LogId) -> Result<Vec<u8>, StorageError> {
        serde_json::to_vec(applied).map_err(|e| StorageIOError::apply(at, &e).into())
    }

    /// Runs command `k` of entry `at` and returns its encoded reply;
    /// `before` is the applied state before the entry.
    fn apply_command(
        &mut self,
        shared: &Shared,
        at: LogId,
        k: usize,
        command: super::types::Command,
        before: &Applied,
    ) -> Result<Vec<u8>, StorageError> {
        let one_batch = commands::lookup(&command.args[0]).is_none_or(|c| c.writes_one_batch());
        let marker = Applied {
            partial: Some((at, if one_batch { k + 1 } else { k })),
            ..before.clone()
        };
        let marker = Self::encode_applied(&marker, at)?;
        let first_version =
            (at.index << VERSION_ENTRY_SHIFT) | ((k as u64) << VERSION_COMMAND_SHIFT);
        let store = &shared.store;
        store.begin_apply(Some(marker), first_version);
        let mut client = Client::replaying(command.db, command.proto);
        let reply = commands::try_execute(
            &mut Ctx {
                shared,
                client: &mut client,
            },
            &command.args,
        );
        let batches = store.end_apply();
        let reply = reply.map_err(|e| StorageIOError::apply(at, &e))?;
        debug_assert!(!one_batch || batches <= 1, "{batches} batches");
        let mut out = Vec::new();
        reply.write_to(command.proto, &mut out);
        Ok(out)
    }

    /// Writes the applied state if the database is behind it.
    fn persist_applied(&mut self, shared: &Shared) -> Result<(), StorageError> {
        let Some(at) = self.applied.last_applied.filter(|_| self.dirty) else {
            return Ok(());
        };
        let mut batch = WriteBatch::new();
        batch.put(
            &keyspace::raft_applied_key(),
            &Self::encode_applied(&self.applied, at)?,
        );
        shared
            .store
            .db()
            .write(&UNSYNCED, batch)
            .map_err(|e| StorageIOError::apply(at, &e))?;
        self.dirty = false;
        Ok(())
    }

    /// Makes the database in `dir/db` (a received snapshot) the live one.
    fn install(&mut self, meta: &SnapshotMeta, dir: &std::path::Path) -> Result<(), String> {
        let received = snapshot::read_meta(dir)?;
        if received.last_log_id != meta.last_log_id || received.snapshot_id != meta.snapshot_id {
            return Err(format!(
                "{} holds snapshot {}, installed as {}",
                dir.display(),
                received.snapshot_id,
                meta.snapshot_id
            ));
        }
        let shared = self.shared.upgrade().ok_or("the server is shutting down")?;
        let _building = self.snapshot_lock.lock().unwrap_or_else(|e| e.into_inner());
        let next = self.layout.next_db(&self.live)?;
        layout::remove_tree(&next)?;
        std::fs::rename(dir.join(snapshot::DB_DIR), &next)
            .map_err(|e| format!("moving the received database to {}: {e}", next.display()))?;
        layout::sync_dir(&self.layout.dir)?;
        let db = shared
            .store
            .open_db(&next)
            .map_err(|e| format!("opening the received database: {e}"))?;
        let mut applied = read_applied(&db)?;
        if applied.last_applied != meta.last_log_id {
            return Err(format!(
                "the received database has applied {:?}, its snapshot says {:?}",
                applied.last_applied, meta.last_log_id
            ));
        }
        let name = next
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or("a database directory without a name")?;
        // The commit point: from here a restart opens the new database.
        self.layout.point_to(&name)?;
        let old = {
            let _alone = shared.store.exclusive();
            shared.store.replace_db(db)
        };
        drop(old);
        layout::remove_tree(&self.live)?;
        self.live = next;
        // The snapshot may hold part of the entry after it.
        self.resume = applied.partial.take();
        self.applied = applied;
        self.dirty = false;
        // The installed snapshot is this node's current one too, for a
        // member that needs it next.
        let tmp = self
            .layout
            .snapshots
            .join(format!("{}.tmp", meta.snapshot_id));
        layout::remove_tree(&tmp)?;
        shared
            .store
            .db()
            .checkpoint(tmp.join(snapshot::DB_DIR))
            .map_err(|e| format!("keeping the installed snapshot: {e}"))?;
        snapshot::write_meta(&tmp, meta)?;
        snapshot::publish(&self.layout.snapshots, &tmp, meta)?;
        layout::remove_tree(dir)
    }
}

impl SnapshotBuilder {
    /// Checkpoints the live database, reads the applied state the copy
    /// holds (the checkpoint is a cut between batches, each of which
    /// carries its applied state), and publishes it.
    fn build(&self) -> Result<Snapshot<ServerConfig>, String> {
        let shared = self.shared.upgrade().ok_or("the server is shutting down")?;
        let _building = self.snapshot_lock.lock().unwrap_or_else(|e| e.into_inner());
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tmp = self.layout.snapshots.join(format!("build-{nanos:x}.tmp"));
        layout::remove_tree(&tmp)?;
        let db = Arc::clone(&*shared.store.db());
        db.checkpoint(tmp.join(snapshot::DB_DIR))
            .map_err(|e| format!("checkpointing for a snapshot: {e}"))?;
        drop(db);
        let copy = shared
            .store
            .open_db(&tmp.join(snapshot::DB_DIR))
            .map_err(|e| format!("opening the snapshot's checkpoint: {e}"))?;
        let applied = read_applied(&copy)?;
        copy.close()
            .map_err(|e| format!("closing the snapshot's checkpoint: {e}"))?;
        let snapshot_id = match applied.last_applied {
            Some(id) => format!("{}-{}-{nanos:x}", id.leader_id.term, id.index),
            None => format!("0-0-{nanos:x}"),
        };
        let meta = SnapshotMeta {
            last_log_id: applied.last_applied,
            last_membership: applied.last_membership,
            snapshot_id,
        };
        snapshot::write_meta(&tmp, &meta)?;
        let path = snapshot::publish(&self.layout.snapshots, &tmp, &meta)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(SnapshotDir { path }),
        })
    }
}

impl RaftSnapshotBuilder<ServerConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<ServerConfig>, StorageError> {
        let builder = SnapshotBuilder {
            shared: self.shared.clone(),
            layout: self.layout.clone(),
            snapshot_lock: self.snapshot_lock.clone(),
        };
        // A flush and a file per sstable: off the runtime's threads.
        let built = tokio::task::spawn_blocking(move || builder.build())
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, sm_error(e)))?;
        built.map_err(|e| StorageIOError::write_snapshot(None, sm_error(e)).into())
    }
}

impl RaftStateMachine<ServerConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((
            self.applied.last_applied,
            self.applied.last_membership.clone(),
        ))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError>
    where
        I: IntoIterator<Item = openraft::Entry<ServerConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let shared = self.shared()?;
        let mut outcomes = Vec::new();
        for entry in entries {
            let at = entry.log_id;
            let before = self.applied.clone();
            let outcome = match entry.payload {
                EntryPayload::Blank => Outcome::default(),
                EntryPayload::Membership(m) => {
                    self.applied.last_membership = StoredMembership::new(Some(at), m);
                    Outcome::default()
                }
                EntryPayload::Normal(proposal) => {
                    let done = match self.resume.take() {
                        Some((id, done)) if id == at => done,
                        _ => 0,
                    };
                    let mut replies = Vec::with_capacity(proposal.commands.len());
                    for (k, command) in proposal.commands.into_iter().enumerate() {
                        self.since_snapshot +=
                            command.args.iter().map(|a| a.len() as u64).sum::<u64>();
                        if k < done {
                            // Applied before a restart; its client is gone.
                            replies.push(Vec::new());
                            continue;
                        }
                        replies.push(self.apply_command(&shared, at, k, command, &before)?);
                    }
                    Outcome(replies)
                }
            };
            self.applied.last_applied = Some(at);
            self.dirty = true;
            outcomes.push(outcome);
        }
        self.persist_applied(&shared)?;
        if self.since_snapshot >= self.snapshot_bytes {
            // Once the member runs (not while it replays its log at start).
            if let Some(cluster) = shared.cluster.get() {
                self.since_snapshot = 0;
                // Only queues the request: the build runs beside applies.
                if let Err(e) = cluster.raft.trigger().snapshot().await {
                    log::warn!("asking for a snapshot: {e}");
                }
            }
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
            layout: self.layout.clone(),
            snapshot_lock: self.snapshot_lock.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotDir>, StorageError> {
        // The transport receives into a directory of its own
        // (`network::receive_snapshot`); this one is for a caller that
        // does not.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = self.layout.incoming.join(format!("{nanos:x}"));
        std::fs::create_dir_all(&path).map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        Ok(Box::new(SnapshotDir { path }))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotDir>,
    ) -> Result<(), StorageError> {
        let dir = snapshot.path;
        // Opening a database and checkpointing it block: off the runtime.
        let result = tokio::task::block_in_place(|| self.install(meta, &dir));
        result
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), sm_error(e)).into())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<ServerConfig>>, StorageError> {
        let mut all = snapshot::list(&self.layout.snapshots)
            .map_err(|e| StorageIOError::read_snapshot(None, sm_error(e)))?;
        if all.is_empty() {
            return Ok(None);
        }
        let (meta, path) = all.swap_remove(0);
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(SnapshotDir { path }),
        }))
    }
}
