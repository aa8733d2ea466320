//! The state machine in a cleave [`Db`], and its snapshots.
//!
//! Keys: a user key `k` is stored as `b"d" + k`; the applied state (last
//! applied log id and last membership, JSON) is the one key
//! [`APPLIED_KEY`], under `b"m"`, which no stored user key can equal since
//! those all begin with `b"d"`. Each `apply` call writes its entries'
//! effects and the new applied state in one synced `WriteBatch`, so after a
//! crash the data and the applied log id agree.
//!
//! Engine calls block and are made directly inside the async functions:
//! openraft runs one state machine command at a time, and an apply's one
//! synced write is what it waits for anyway.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use cleave::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, StorageIOError,
};
use serde::{Deserialize, Serialize};

use crate::snapshot;
use crate::types::{
    Entry, LogId, Request, Response, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

/// Prefix of every stored user key.
pub const DATA_PREFIX: u8 = b'd';
/// The applied state's key; begins with `b"m"`, outside the user keys.
pub const APPLIED_KEY: &[u8] = b"m/applied";
/// A user key and its value.
pub type KeyValue = (Vec<u8>, Vec<u8>);
/// The Db's subdirectory of the state machine's directory.
const DB_DIR: &str = "db";

/// Every write is synced, so that what a client read from the state
/// machine, or was answered by `apply`, does not go back after a crash.
const SYNC: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};

/// The applied state, stored at [`APPLIED_KEY`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Applied {
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
}

/// What the state machine and its snapshot builders share.
struct Shared {
    db: Db,
    dir: PathBuf,
    fs: Arc<dyn cleave::vfs::Fs>,
    /// The current snapshot's meta; held while the snapshot file is read or
    /// replaced. A build replaces the file only with a snapshot at least as
    /// new, so one that started before an install cannot undo it.
    current: Mutex<Option<SnapshotMeta>>,
}

/// openraft's [`RaftStateMachine`] on a cleave [`Db`] in `dir/db`, with
/// the current snapshot in the file `dir/snapshot`.
pub struct StateMachine {
    shared: Arc<Shared>,
    /// The applied state as the Db holds it; only `apply` and
    /// `install_snapshot` change it, and they take `&mut self`.
    applied: Applied,
}

/// Builds snapshots from a consistent view of the Db, concurrently with
/// the state machine.
pub struct SnapshotBuilder {
    shared: Arc<Shared>,
}

impl StateMachine {
    /// Opens the state machine in `dir`: the Db in `dir/db` with `opts`
    /// (set `create_if_missing` for a new one), the snapshot file through
    /// `opts.fs`. Completes an install a crash interrupted: a current
    /// snapshot newer than the Db's applied state is installed again.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<StateMachine, StorageError> {
        let dir = dir.as_ref().to_path_buf();
        let fs = opts.fs.clone();
        fs.create_dir_all(&dir)
            .map_err(|e| StorageIOError::write_state_machine(&e))?;
        let db =
            Db::open(dir.join(DB_DIR), opts).map_err(|e| StorageIOError::read_state_machine(&e))?;
        let applied = read_applied(&db, None)?;
        let current = snapshot::read_file(fs.as_ref(), &dir)
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        let shared = Arc::new(Shared {
            db,
            dir,
            fs,
            current: Mutex::new(None),
        });
        let mut sm = StateMachine { shared, applied };
        if let Some(bytes) = current {
            let decoded = decode_snapshot(&sm.shared.dir, &bytes)?;
            if decoded.meta.last_log_id > sm.applied.last_applied {
                sm.replace_state(&decoded.meta, &decoded.pairs)?;
            }
            *sm.shared.lock_current() = Some(decoded.meta);
        }
        Ok(sm)
    }

    /// The Db, for reads of the user keys (stored under [`DATA_PREFIX`]).
    pub fn db(&self) -> &Db {
        &self.shared.db
    }

    /// A user key's value as the state machine last applied it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.shared
            .db
            .get(&ReadOptions::new(), &data_key(key))
            .map_err(|e| StorageIOError::read_state_machine(&e).into())
    }

    /// Every user key and value, in key order.
    pub fn pairs(&self) -> Result<Vec<KeyValue>, StorageError> {
        let mut out = Vec::new();
        for_each_pair(&self.shared.db, None, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            Ok(())
        })?;
        Ok(out)
    }

    /// The value `key` has before the entry being applied: a write earlier
    /// in the same call, or the Db.
    fn previous(
        &self,
        pending: &HashMap<Vec<u8>, Option<Vec<u8>>>,
        key: &[u8],
        log_id: LogId,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        if let Some(value) = pending.get(key) {
            return Ok(value.clone());
        }
        self.shared
            .db
            .get(&ReadOptions::new(), &data_key(key))
            .map_err(|e| StorageIOError::apply(log_id, &e).into())
    }

    /// Makes the Db hold exactly `pairs` and `meta`'s applied state, in one
    /// synced write. The batch holds every pair: bounded by memory, fine
    /// for the state machines this crate is tested with; a large one would
    /// need a staged install (ingest into a fresh Db, then switch).
    fn replace_state(
        &mut self,
        meta: &SnapshotMeta,
        pairs: &[(&[u8], &[u8])],
    ) -> Result<(), StorageError> {
        let signature = || Some(meta.signature());
        let keep: HashSet<&[u8]> = pairs.iter().map(|(k, _)| *k).collect();
        let mut batch = WriteBatch::new();
        for_each_pair(&self.shared.db, None, |key, _| {
            if !keep.contains(key) {
                batch.delete(&data_key(key));
            }
            Ok(())
        })?;
        for (key, value) in pairs {
            batch.put(&data_key(key), value);
        }
        let applied = Applied {
            last_applied: meta.last_log_id,
            last_membership: meta.last_membership.clone(),
        };
        let encoded = serde_json::to_vec(&applied)
            .map_err(|e| StorageIOError::write_snapshot(signature(), &e))?;
        batch.put(APPLIED_KEY, &encoded);
        self.shared
            .db
            .write(&SYNC, batch)
            .map_err(|e| StorageIOError::write_snapshot(signature(), &e))?;
        self.applied = applied;
        Ok(())
    }
}

impl Shared {
    fn lock_current(&self) -> std::sync::MutexGuard<'_, Option<SnapshotMeta>> {
        // The guarded value is replaced whole, never left half-written, so
        // a panic elsewhere while it was held does not make it wrong.
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Builds a snapshot of the Db as of one point in time and makes it the
    /// current one unless a newer one (an install) got there first.
    fn build(&self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let view = self.db.snapshot();
        let applied = read_applied(&self.db, Some(&view))?;
        let meta = SnapshotMeta {
            last_log_id: applied.last_applied,
            last_membership: applied.last_membership,
            snapshot_id: snapshot_id(applied.last_applied),
        };
        let signature = || Some(meta.signature());
        let mut writer = snapshot::Writer::new(&meta)
            .map_err(|e| StorageIOError::write_snapshot(signature(), &e))?;
        for_each_pair(&self.db, Some(&view), |key, value| {
            writer
                .add(key, value)
                .map_err(|e| StorageIOError::write_snapshot(signature(), &e).into())
        })?;
        drop(view);
        let bytes = writer.finish();
        let mut current = self.lock_current();
        let newer = match &*current {
            Some(cur) => meta.last_log_id >= cur.last_log_id,
            None => true,
        };
        if newer {
            snapshot::write_file(self.fs.as_ref(), &self.dir, &bytes)
                .map_err(|e| StorageIOError::write_snapshot(signature(), &e))?;
            *current = Some(meta.clone());
        }
        Ok(Snapshot {
            meta,
            snapshot: Box::new(std::io::Cursor::new(bytes)),
        })
    }
}

fn data_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(DATA_PREFIX);
    k.extend_from_slice(key);
    k
}

fn read_applied(db: &Db, view: Option<&cleave::Snapshot>) -> Result<Applied, StorageError> {
    let opts = ReadOptions {
        snapshot: view,
        ..ReadOptions::default()
    };
    match db
        .get(&opts, APPLIED_KEY)
        .map_err(|e| StorageIOError::read_state_machine(&e))?
    {
        Some(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| StorageIOError::read_state_machine(&e).into()),
        None => Ok(Applied::default()),
    }
}

/// Calls `f` with every user key (prefix stripped) and value, in key order,
/// as of `view` or now.
fn for_each_pair(
    db: &Db,
    view: Option<&cleave::Snapshot>,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let read_error = |e: cleave::Error| StorageError::from(StorageIOError::read_state_machine(&e));
    let opts = ReadOptions {
        snapshot: view,
        lower_bound: Some(vec![DATA_PREFIX]),
        upper_bound: Some(vec![DATA_PREFIX + 1]),
    };
    let mut it = db.iter(&opts);
    it.seek_to_first().map_err(read_error)?;
    while it.valid() {
        let key = it.key();
        let Some(user_key) = key.strip_prefix(&[DATA_PREFIX]) else {
            return Err(StorageIOError::read_state_machine(AnyError::error(format!(
                "iterator over the user keys returned {:?}",
                key.escape_ascii().to_string()
            )))
            .into());
        };
        let value = it.value().map_err(read_error)?;
        f(user_key, value)?;
        it.next().map_err(read_error)?;
    }
    it.status().map_err(read_error)
}

/// Decodes the current snapshot's bytes, read back from its file in `dir`
/// (which the error names).
fn decode_snapshot<'a>(dir: &Path, bytes: &'a [u8]) -> Result<snapshot::Decoded<'a>, StorageError> {
    snapshot::decode(bytes).map_err(|e| {
        let path = dir.join(snapshot::FILE_NAME);
        StorageIOError::read_snapshot(None, AnyError::error(format!("{}: {e}", path.display())))
            .into()
    })
}

/// Unique per build even for the same log id (openraft tells snapshots
/// apart by id), and readable: term, index, then the build time.
fn snapshot_id(last: Option<LogId>) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    match last {
        Some(id) => format!("{}-{}-{nanos:x}", id.leader_id.term, id.index),
        None => format!("none-{nanos:x}"),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        self.shared.build()
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((
            self.applied.last_applied,
            self.applied.last_membership.clone(),
        ))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::new();
        let mut pending: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        let mut applied = self.applied.clone();
        let mut responses = Vec::new();
        for entry in entries {
            let log_id = entry.log_id;
            let response = match entry.payload {
                EntryPayload::Blank => Response::default(),
                EntryPayload::Normal(Request::Set { key, value }) => {
                    let previous = self.previous(&pending, &key, log_id)?;
                    batch.put(&data_key(&key), &value);
                    pending.insert(key, Some(value));
                    Response { value: previous }
                }
                EntryPayload::Normal(Request::Delete { key }) => {
                    let previous = self.previous(&pending, &key, log_id)?;
                    batch.delete(&data_key(&key));
                    pending.insert(key, None);
                    Response { value: previous }
                }
                EntryPayload::Membership(membership) => {
                    applied.last_membership = StoredMembership::new(Some(log_id), membership);
                    Response::default()
                }
            };
            applied.last_applied = Some(log_id);
            responses.push(response);
        }
        // No entries, nothing to write; otherwise `last_applied` is the
        // last entry's id.
        let Some(last) = applied.last_applied.filter(|_| !responses.is_empty()) else {
            return Ok(responses);
        };
        let encoded = serde_json::to_vec(&applied).map_err(|e| StorageIOError::apply(last, &e))?;
        batch.put(APPLIED_KEY, &encoded);
        self.shared
            .db
            .write(&SYNC, batch)
            .map_err(|e| StorageIOError::apply(last, &e))?;
        self.applied = applied;
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            shared: self.shared.clone(),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<std::io::Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(std::io::Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<std::io::Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let signature = || Some(meta.signature());
        let bytes = snapshot.into_inner();
        let decoded =
            snapshot::decode(&bytes).map_err(|e| StorageIOError::read_snapshot(signature(), &e))?;
        if decoded.meta != *meta {
            return Err(StorageIOError::read_snapshot(
                signature(),
                AnyError::error(format!(
                    "the snapshot's data holds meta {}, installed as {meta}",
                    decoded.meta
                )),
            )
            .into());
        }
        let shared = self.shared.clone();
        let mut current = shared.lock_current();
        // The file is the commit point: once it is renamed, a crash before
        // the Db write is completed by `open`, which installs a snapshot
        // newer than the applied state again.
        snapshot::write_file(shared.fs.as_ref(), &shared.dir, &bytes)
            .map_err(|e| StorageIOError::write_snapshot(signature(), &e))?;
        *current = Some(meta.clone());
        self.replace_state(meta, &decoded.pairs)
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let current = self.shared.lock_current();
        let Some(expected) = current.as_ref() else {
            return Ok(None);
        };
        let signature = || Some(expected.signature());
        let bytes = snapshot::read_file(self.shared.fs.as_ref(), &self.shared.dir)
            .map_err(|e| StorageIOError::read_snapshot(signature(), &e))?
            .ok_or_else(|| {
                StorageIOError::read_snapshot(
                    signature(),
                    AnyError::error("the current snapshot's file is gone"),
                )
            })?;
        let meta = decode_snapshot(&self.shared.dir, &bytes)?.meta;
        if meta != *expected {
            return Err(StorageIOError::read_snapshot(
                signature(),
                AnyError::error(format!("the snapshot file holds {meta}")),
            )
            .into());
        }
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(std::io::Cursor::new(bytes)),
        }))
    }
}
