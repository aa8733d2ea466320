//! The database behind the commands: the key-space encoding's reads and
//! writes, the locks that make each command atomic, collection versions,
//! and the write mode `appendfsync` chose.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::{ArcSwap, Guard};
use cleave::{
    Append, Db, Options, PrefixExtractor, ReadOptions, Snapshot, WriteBatch, WriteOptions,
};
use parking_lot::lock_api::{RawMutex as _, RawRwLock as _};
use parking_lot::{Mutex, RawMutex, RawRwLock};

use crate::error::CmdError;
use crate::keyspace::{self, Meta, Type};
use crate::subkey_filter::{StaleSubkeys, SubkeyStats};
use crate::txn::{Pending, StoreIter};

mod batch;
pub use batch::{BatchGuard, Suspended};

/// Key locks, striped: two keys share a lock one time in this many.
const KEY_LOCK_STRIPES: usize = 1024;

/// Writes the server itself makes durable at once (the format, the
/// versions' floor).
const SYNC: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};

/// Versions handed out per persisted floor: the floor is written (synced)
/// once per this many new hashes or sorted sets.
const VERSION_BLOCK: u64 = 1 << 20;

/// What each write waits for, as Redis's `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[repr(u8)]
pub enum FsyncMode {
    /// Each write is synced before it is acknowledged.
    Always,
    /// Writes are synced once a second, in the background.
    Everysec,
    /// Writes reach the WAL (the OS's cache) and are never synced by the
    /// server; the OS writes them back when it likes.
    No,
}

impl FsyncMode {
    pub fn name(self) -> &'static str {
        match self {
            FsyncMode::Always => "always",
            FsyncMode::Everysec => "everysec",
            FsyncMode::No => "no",
        }
    }

    /// The mode named `s`, in any case (CONFIG SET), as the flag reads it.
    pub fn parse(s: &str) -> Option<FsyncMode> {
        clap::ValueEnum::from_str(s, true).ok()
    }

    fn from_u8(b: u8) -> FsyncMode {
        [FsyncMode::Always, FsyncMode::Everysec, FsyncMode::No]
            .into_iter()
            .find(|m| *m as u8 == b)
            .unwrap_or(FsyncMode::Always)
    }
}

/// Next collection version and the floor persisted for it.
struct Versions {
    next: u64,
    floor: u64,
}

pub struct Store {
    /// Drops the subkeys of ended collections in compactions.
    subkeys: Arc<StaleSubkeys>,
    /// Replaced whole only when a Raft follower installs a snapshot
    /// ([`Store::replace_db`]), under the exclusive lock.
    db: ArcSwap<Db>,
    /// What the Db was opened with, for a replacement.
    options: Options,
    /// Set while a Raft log entry is applied (cluster mode).
    applying: Mutex<Option<Applying>>,
    /// Key locks, by stripe: raw, since a batch keeps some from one
    /// command to the next (batch.rs).
    locks: Vec<RawMutex>,
    /// Signalled when a stripe is released: a connection whose batch found
    /// it taken awaits it rather than hold its thread.
    released: Vec<tokio::sync::Notify>,
    /// Every command holds it shared; FLUSHDB and shutdown hold it alone.
    commands: RawRwLock,
    versions: Mutex<Versions>,
    /// The `FsyncMode`, read by every write.
    fsync: AtomicU8,
    /// A write since the last background sync (`everysec`).
    unsynced: AtomicBool,
}

/// A subkey's or score entry's prefix is its collection's (`tag db len
/// key version`): reading a hash's fields or a sorted set's range then
/// reads only the tables holding that collection.
#[derive(Debug)]
struct CollectionPrefix;

impl PrefixExtractor for CollectionPrefix {
    fn name(&self) -> &str {
        "cleave-server.collection.1"
    }

    fn prefix_len(&self, key: &[u8]) -> Option<usize> {
        keyspace::collection_prefix_len(key)
    }
}

/// What the writes of the command a Raft log entry holds carry, while the
/// state machine applies it.
struct Applying {
    /// The applied state, written with every batch at
    /// [`keyspace::raft_applied_key`], so that the entry's effects and its
    /// being applied are durable together.
    marker: Option<Vec<u8>>,
    /// The next version for a new collection: every node must pick the
    /// same, so it comes from the entry's index and the command's place in
    /// it, not the clock.
    next_version: u64,
    /// Batches written so far.
    batches: u32,
}

/// Versions one command of a log entry may hand out.
pub const VERSIONS_PER_COMMAND: u64 = 1 << 12;

/// Locks of the keys a command changes, released on drop (inside a batch,
/// the batch holds them, and this holds nothing).
pub struct KeyGuard<'a> {
    store: &'a Store,
    stripes: Vec<usize>,
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        for &s in &self.stripes {
            // SAFETY: `Store::lock_in` locked each stripe listed, once.
            unsafe { self.store.unlock_stripe(s) };
        }
    }
}

/// The commands lock held shared, released on drop (inside a batch, the
/// batch holds it, and this holds nothing).
pub struct SharedGuard<'a>(Option<&'a Store>);

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        if let Some(store) = self.0 {
            // SAFETY: `Store::shared` took it shared for this guard.
            unsafe { store.commands.unlock_shared() };
        }
    }
}

/// The commands lock held alone, released on drop.
pub struct ExclusiveGuard<'a>(&'a Store);

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `Store::exclusive` took it for this guard.
        unsafe { self.0.commands.unlock_exclusive() };
    }
}

impl Store {
    /// Opens (or creates) the data directory `dir` with the engine options
    /// `opts`, which gain the server's merge operator and prefix extractor.
    pub fn open(dir: &Path, mut opts: Options, fsync: FsyncMode) -> Result<Store, String> {
        opts.create_if_missing = true;
        // APPEND's operand is the appended bytes: concatenated to the
        // metadata value, whose header comes first (keyspace.rs).
        opts.merge_operator = Some(Arc::new(Append::new(b"")));
        opts.prefix_extractor = Some(Arc::new(CollectionPrefix));
        let subkeys = Arc::new(StaleSubkeys::default());
        opts.compaction_filter = Some(subkeys.clone());
        // A pipeline's writes reach the OS in one `write`, before any
        // reply (`Store::flush_wal`), as Redis writes its AOF buffer
        // before it answers.
        opts.manual_wal_flush = true;
        let options = opts.clone();
        let db = Db::open(dir, opts).map_err(|e| format!("opening {}: {e}", dir.display()))?;
        let fail = |what: &str, e: cleave::Error| format!("{what} in {}: {e}", dir.display());
        let r = ReadOptions::new();
        match db
            .get(&r, &keyspace::format_key())
            .map_err(|e| fail("reading the format", e))?
        {
            Some(v) => {
                let version = parse_u64(&v).ok_or_else(|| {
                    format!(
                        "{}: unreadable key-space format {:?}",
                        dir.display(),
                        v.escape_ascii().to_string()
                    )
                })?;
                if version > keyspace::FORMAT_VERSION {
                    return Err(format!(
                        "{}: key-space format {version} is newer than this build's {}",
                        dir.display(),
                        keyspace::FORMAT_VERSION
                    ));
                }
                if version < keyspace::FORMAT_VERSION {
                    // Each format holds the one before it: only the number
                    // changes, so that an older build, which could not read
                    // what this one may write, refuses the directory.
                    let format = keyspace::FORMAT_VERSION.to_string();
                    db.put(&SYNC, &keyspace::format_key(), format.as_bytes())
                        .map_err(|e| fail("writing the format", e))?;
                }
            }
            None => {
                let mut it = db.iter(&r);
                it.seek_to_first().map_err(|e| fail("reading", e))?;
                if it.valid() {
                    return Err(format!(
                        "{} holds a cleave database that cleave-server did not write",
                        dir.display()
                    ));
                }
                let format = keyspace::FORMAT_VERSION.to_string();
                db.put(&SYNC, &keyspace::format_key(), format.as_bytes())
                    .map_err(|e| fail("writing the format", e))?;
            }
        }
        let floor = match db.get(&r, &keyspace::version_floor_key()) {
            Ok(Some(v)) => v
                .as_slice()
                .try_into()
                .map(u64::from_be_bytes)
                .map_err(|_| format!("{}: unreadable version floor", dir.display()))?,
            Ok(None) => 0,
            Err(e) => return Err(fail("reading the version floor", e)),
        };
        let next = floor.max(now_micros());
        let floor = next + VERSION_BLOCK;
        db.put(&SYNC, &keyspace::version_floor_key(), &floor.to_be_bytes())
            .map_err(|e| fail("writing the version floor", e))?;
        Ok(Store {
            subkeys,
            db: ArcSwap::from_pointee(db),
            options,
            applying: Mutex::new(None),
            locks: (0..KEY_LOCK_STRIPES).map(|_| RawMutex::INIT).collect(),
            released: (0..KEY_LOCK_STRIPES)
                .map(|_| tokio::sync::Notify::new())
                .collect(),
            commands: RawRwLock::INIT,
            versions: Mutex::new(Versions { next, floor }),
            fsync: AtomicU8::new(fsync as u8),
            unsynced: AtomicBool::new(false),
        })
    }

    /// Records, after a write that deleted or replaced the key holding
    /// `meta`, that a collection's version ended: compactions then drop its
    /// subkeys without looking its metadata up.
    pub fn ended(&self, db: u8, key: &[u8], meta: &Meta) {
        let Some(version) = meta.version() else {
            return;
        };
        // A batch not yet written ends nothing.
        if self
            .with_batch(|b| b.overlay.ended(db, key, version))
            .is_none()
        {
            self.subkeys.ended(db, key, version);
        }
    }

    /// What the stale-subkey filter did.
    pub fn subkey_stats(&self) -> &SubkeyStats {
        &self.subkeys.stats
    }

    /// The database. A Raft follower may replace it (a snapshot install):
    /// hold what this returns for one command at most.
    pub fn db(&self) -> Guard<Arc<Db>> {
        self.db.load()
    }

    /// Opens the database in `dir` with the options this store's was
    /// opened with (a snapshot installed in cluster mode).
    pub fn open_db(&self, dir: &Path) -> Result<Db, cleave::Error> {
        Db::open(dir, self.options.clone())
    }

    /// Makes `db` the database from now on and returns the one it
    /// replaces. The caller holds [`Store::exclusive`], so that no command
    /// sees two databases.
    pub fn replace_db(&self, db: Db) -> Arc<Db> {
        self.db.swap(Arc::new(db))
    }

    /// Closes the database: its background work stops and what is in its
    /// memtables is made durable. If something still holds it (a snapshot
    /// build), its WAL is synced instead.
    pub fn close(self) -> Result<(), cleave::Error> {
        match Arc::try_unwrap(self.db.into_inner()) {
            Ok(db) => db.close(),
            Err(db) => db.sync_wal(),
        }
    }

    /// From now until [`Store::end_apply`], every write carries `marker`
    /// (if any) at [`keyspace::raft_applied_key`], and new collections get
    /// versions from `first_version` up, [`VERSIONS_PER_COMMAND`] at most
    /// (the state machine gives each command of each entry its range).
    pub fn begin_apply(&self, marker: Option<Vec<u8>>, first_version: u64) {
        let mut applying = self.applying.lock();
        debug_assert!(applying.is_none(), "one command is applied at a time");
        debug_assert_eq!(first_version % VERSIONS_PER_COMMAND, 0);
        *applying = Some(Applying {
            marker,
            next_version: first_version,
            batches: 0,
        });
    }

    /// Ends what [`Store::begin_apply`] began; returns the batches written.
    pub fn end_apply(&self) -> u32 {
        self.applying.lock().take().map_or(0, |a| a.batches)
    }

    pub fn fsync_mode(&self) -> FsyncMode {
        FsyncMode::from_u8(self.fsync.load(Ordering::Acquire))
    }

    pub fn set_fsync_mode(&self, mode: FsyncMode) -> Result<(), cleave::Error> {
        if mode == FsyncMode::Always && self.fsync_mode() != FsyncMode::Always {
            // From now on each write is durable when acknowledged: so must
            // every write before.
            self.db.load().sync_wal()?;
        }
        self.fsync.store(mode as u8, Ordering::Release);
        Ok(())
    }

    /// Hands the WAL records of the writes so far to the OS: called before
    /// any reply goes out, so that no client sees what a killed process
    /// would lose (`Options::manual_wal_flush`).
    pub fn flush_wal(&self) -> Result<(), cleave::Error> {
        self.db.load().flush_wal()
    }

    /// Syncs the WAL if a write came since the last sync (`everysec`).
    pub fn sync_if_written(&self) -> Result<(), cleave::Error> {
        if self.unsynced.swap(false, Ordering::AcqRel) {
            self.db.load().sync_wal()?;
        }
        Ok(())
    }

    /// Held by every command but those that need the database alone.
    pub fn shared(&self) -> SharedGuard<'_> {
        if self.batch_shared() {
            return SharedGuard(None);
        }
        self.commands.lock_shared();
        SharedGuard(Some(self))
    }

    /// Waits for running commands to finish and keeps others out.
    pub fn exclusive(&self) -> ExclusiveGuard<'_> {
        debug_assert!(!self.in_batch(), "a batch is suspended first");
        self.commands.lock_exclusive();
        ExclusiveGuard(self)
    }

    /// Releases stripe `s` and wakes one connection awaiting it.
    ///
    /// # Safety
    /// The caller holds `s`, taken once.
    unsafe fn unlock_stripe(&self, s: usize) {
        // SAFETY: as the caller promises.
        unsafe { self.locks[s].unlock() };
        // After the unlock: a waiter that looked before it is woken (or
        // finds the permit this leaves), one that looks after finds it
        // free.
        self.released[s].notify_one();
    }

    /// Returns once stripe `s` is free (it may be taken again before the
    /// caller gets to it: the caller tries again).
    pub async fn stripe_released(&self, s: usize) {
        let notified = self.released[s].notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.locks[s].is_locked() {
            notified.await;
        }
    }

    /// Locks the keys `(db, key)` for a read-modify-write: stripes in
    /// order, each once, so two commands never wait on each other. Inside
    /// a batch, `Contended` if a batch already holding locks would wait
    /// (batch.rs): the command must stop there, before it reads.
    pub fn lock<'a>(&'a self, db: u8, keys: &[&[u8]]) -> Result<KeyGuard<'a>, CmdError> {
        let keys: Vec<(u8, &[u8])> = keys.iter().map(|k| (db, *k)).collect();
        self.lock_in(&keys)
    }

    /// As [`Store::lock`], for keys of several databases (COPY … DB).
    pub fn lock_in<'a>(&'a self, keys: &[(u8, &[u8])]) -> Result<KeyGuard<'a>, CmdError> {
        let mut stripes: Vec<usize> = keys.iter().map(|(db, k)| stripe(*db, k)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        if let Some(locked) = self.batch_lock(&stripes) {
            locked?;
            stripes.clear();
        } else {
            for &s in &stripes {
                self.locks[s].lock();
            }
        }
        Ok(KeyGuard {
            store: self,
            stripes,
        })
    }

    /// Writes `batch`; inside a batch of commands, adds it to theirs.
    pub fn write(&self, batch: WriteBatch) -> Result<(), CmdError> {
        if self.with_batch(|b| b.overlay.add(&batch)).is_some() {
            return Ok(());
        }
        self.write_now(batch)
    }

    fn write_now(&self, mut batch: WriteBatch) -> Result<(), CmdError> {
        if let Some(applying) = self.applying.lock().as_mut() {
            if let Some(marker) = &applying.marker {
                batch.put(&keyspace::raft_applied_key(), marker);
            }
            applying.batches += 1;
        }
        let sync = self.fsync_mode() == FsyncMode::Always;
        let opts = WriteOptions {
            sync,
            disable_wal: false,
        };
        self.db.load().write(&opts, batch)?;
        if !sync {
            self.unsynced.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// A version for a new hash or sorted set, larger than every version
    /// handed out before, in this process or an earlier one.
    pub fn new_version(&self) -> Result<u64, CmdError> {
        if let Some(applying) = self.applying.lock().as_mut() {
            let version = applying.next_version;
            if version % VERSIONS_PER_COMMAND == VERSIONS_PER_COMMAND - 1 {
                // The same on every member: a reply, not a failure.
                return Err(CmdError::err(format!(
                    "a command creates more than {} collections",
                    VERSIONS_PER_COMMAND - 1
                )));
            }
            applying.next_version += 1;
            return Ok(version);
        }
        let mut v = self.versions.lock();
        let version = v.next.max(now_micros());
        if version >= v.floor {
            let floor = version + VERSION_BLOCK;
            self.db
                .load()
                .put(&SYNC, &keyspace::version_floor_key(), &floor.to_be_bytes())?;
            v.floor = floor;
        }
        v.next = version + 1;
        Ok(version)
    }

    pub fn snapshot(&self) -> Snapshot {
        self.db.load().snapshot()
    }

    /// Reads as of `snapshot`: a command reading several keys, or a key
    /// and its subkeys, sees one state.
    pub fn read_at(snapshot: &Snapshot) -> ReadOptions<'_> {
        ReadOptions {
            snapshot: Some(snapshot),
            ..ReadOptions::new()
        }
    }

    /// The metadata of `key`, read as `r` says.
    pub fn meta(&self, r: &ReadOptions<'_>, db: u8, key: &[u8]) -> Result<Option<Meta>, CmdError> {
        Ok(self.meta_with_expire(r, db, key)?.map(|(m, _)| m))
    }

    /// The metadata of `key` and its expiry (milliseconds since the epoch,
    /// 0 for none). A key whose expiry has passed is absent: the engine
    /// hides its metadata entry from that millisecond on.
    pub fn meta_with_expire(
        &self,
        r: &ReadOptions<'_>,
        db: u8,
        key: &[u8],
    ) -> Result<Option<(Meta, u64)>, CmdError> {
        match self.get(r, &keyspace::meta_key(db, key))? {
            None => Ok(None),
            Some(v) => Meta::decode_with_expire(v)
                .map(Some)
                .map_err(|why| CmdError::corrupt(key, &why)),
        }
    }

    /// The string at `key`: `WRONGTYPE` if it holds another type.
    pub fn string(
        &self,
        r: &ReadOptions<'_>,
        db: u8,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, CmdError> {
        Ok(self.string_with_expire(r, db, key)?.map(|(v, _)| v))
    }

    /// The string at `key` and its expiry: `WRONGTYPE` if it holds another
    /// type.
    pub fn string_with_expire(
        &self,
        r: &ReadOptions<'_>,
        db: u8,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u64)>, CmdError> {
        match self.meta_with_expire(r, db, key)? {
            None => Ok(None),
            Some((Meta::String(v), expire)) => Ok(Some((v, expire))),
            Some(_) => Err(CmdError::WrongType),
        }
    }

    /// The version, size and expiry of the `kind` collection at `key`.
    pub fn collection(
        &self,
        r: &ReadOptions<'_>,
        db: u8,
        key: &[u8],
        kind: Type,
    ) -> Result<Option<(u64, u64, u64)>, CmdError> {
        match self.meta_with_expire(r, db, key)? {
            None => Ok(None),
            Some((
                Meta::Collection {
                    kind: k,
                    version,
                    size,
                },
                expire,
            )) if k == kind => Ok(Some((version, size, expire))),
            Some(_) => Err(CmdError::WrongType),
        }
    }

    /// The list at `key`: its version, head index, size and expiry.
    pub fn list(
        &self,
        r: &ReadOptions<'_>,
        db: u8,
        key: &[u8],
    ) -> Result<Option<ListMeta>, CmdError> {
        match self.meta_with_expire(r, db, key)? {
            None => Ok(None),
            Some((
                Meta::List {
                    version,
                    head,
                    size,
                },
                expire,
            )) => Ok(Some(ListMeta {
                version,
                head,
                size,
                expire,
            })),
            Some(_) => Err(CmdError::WrongType),
        }
    }

    /// A seed for a command that picks at random (SPOP, SRANDMEMBER): in
    /// cluster mode the same on every member applying the command, so
    /// that they pick alike.
    pub fn random_seed(&self) -> u64 {
        match self.applying.lock().as_ref() {
            Some(a) => a.next_version,
            None => rand::random(),
        }
    }

    /// The value of `key`, read as `r` says, with a running transaction's
    /// writes over it.
    pub fn get(&self, r: &ReadOptions<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
        match self.batch_knows(key, r.snapshot.is_some()) {
            None => Ok(self.db.load().get(r, key)?),
            Some(batch::Known::Value(v)) => Ok(v),
            // Appended operands need the stored value under them.
            Some(batch::Known::Appended(ops)) => {
                let base = self.db.load().get(r, key)?;
                Ok(Pending::Appended(ops).resolve(base.as_deref(), 0))
            }
            Some(batch::Known::Unknown { cache }) => {
                let v = self.db.load().get(r, key)?;
                if cache {
                    self.batch_read(key, &v);
                }
                Ok(v)
            }
        }
    }

    /// An iterator over `[begin, end)` as of `snapshot`, with a running
    /// transaction's writes over it.
    pub fn iter(
        &self,
        snapshot: Option<&Snapshot>,
        begin: Vec<u8>,
        end: Option<Vec<u8>>,
    ) -> StoreIter {
        let pending = self
            .with_batch(|b| b.overlay.range(&begin, end.as_deref()))
            .filter(|p| !p.is_empty());
        let r = ReadOptions {
            snapshot,
            lower_bound: Some(begin),
            upper_bound: end,
        };
        let it = self.db.load().iter(&r);
        match pending {
            None => StoreIter::Plain(it),
            Some(pending) => StoreIter::merged(it, pending),
        }
    }
}

/// A list's metadata: its elements are at indexes `head..head + size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListMeta {
    pub version: u64,
    pub head: u64,
    pub size: u64,
    /// Milliseconds since the epoch, 0 for none.
    pub expire: u64,
}

/// Adds to `b` the metadata of the list `l` at `key`; an emptied one is
/// deleted, as Redis deletes an empty list.
pub fn put_list(b: &mut WriteBatch, db: u8, key: &[u8], l: &ListMeta) {
    if l.size == 0 {
        b.delete(&keyspace::meta_key(db, key));
    } else {
        let meta = Meta::List {
            version: l.version,
            head: l.head,
            size: l.size,
        };
        put_meta(b, db, key, &meta, l.expire);
    }
}

/// Adds to `b` the metadata of the `kind` collection at `key` holding
/// `size` fields or members, expiring at `expire` (0: never); an emptied
/// one is deleted, as Redis deletes an empty hash or sorted set.
pub fn put_collection(
    b: &mut WriteBatch,
    db: u8,
    key: &[u8],
    kind: Type,
    version: u64,
    size: u64,
    expire: u64,
) {
    if size == 0 {
        b.delete(&keyspace::meta_key(db, key));
    } else {
        let meta = Meta::Collection {
            kind,
            version,
            size,
        };
        put_meta(b, db, key, &meta, expire);
    }
}

/// Adds to `b` the metadata `meta` of `key`, expiring at `expire` (0:
/// never). The expiry is the engine's too: from that millisecond on no
/// read finds the key, and compaction drops the entry, its value unread.
pub fn put_meta(b: &mut WriteBatch, db: u8, key: &[u8], meta: &Meta, expire: u64) {
    let value = meta.encode(expire);
    let meta_key = keyspace::meta_key(db, key);
    if expire == 0 {
        b.put(&meta_key, &value);
    } else {
        b.put_with_expiry(&meta_key, &value, expire);
    }
}

/// Adds to `b` the string `value` at `key`, expiring at `expire` (0:
/// never).
pub fn put_string(b: &mut WriteBatch, db: u8, key: &[u8], value: &[u8], expire: u64) {
    let meta_key = keyspace::meta_key(db, key);
    let meta = keyspace::string_meta(value, expire);
    if expire == 0 {
        b.put(&meta_key, &meta);
    } else {
        b.put_with_expiry(&meta_key, &meta, expire);
    }
}

/// Milliseconds since the epoch, as expiry is measured (the engine's clock
/// is the system's too).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The key-lock stripe of the Redis key `key` of database `db`.
fn stripe(db: u8, key: &[u8]) -> usize {
    // FNV-1a: keys are the clients' to choose, but a collision costs only
    // some lock sharing.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in std::iter::once(&db).chain(key) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % KEY_LOCK_STRIPES as u64) as usize
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            fs: Arc::new(cleave::vfs::MemFs::new()),
            ..Options::default()
        }
    }

    #[test]
    fn versions_grow_across_reopens_even_if_the_clock_goes_back() {
        let fs = Arc::new(cleave::vfs::MemFs::new());
        let opts = || Options {
            fs: fs.clone(),
            ..Options::default()
        };
        let store = Store::open(Path::new("/d"), opts(), FsyncMode::Always).unwrap();
        let a = store.new_version().unwrap();
        // A floor far in the future, as a clock that later went back
        // would have left.
        let future = now_micros() + (1 << 40);
        store
            .db()
            .put(
                &WriteOptions::default(),
                &keyspace::version_floor_key(),
                &future.to_be_bytes(),
            )
            .unwrap();
        store.close().unwrap();
        let store = Store::open(Path::new("/d"), opts(), FsyncMode::Always).unwrap();
        let b = store.new_version().unwrap();
        assert!(b > a && b >= future, "{a} {b} {future}");
        assert!(store.new_version().unwrap() > b);
    }

    #[test]
    fn a_database_the_server_did_not_write_is_refused() {
        let opts = options();
        let db = Db::open(
            "/d",
            Options {
                create_if_missing: true,
                ..opts.clone()
            },
        )
        .unwrap();
        db.put(&WriteOptions::default(), b"user-key", b"v").unwrap();
        db.close().unwrap();
        let err = Store::open(Path::new("/d"), opts, FsyncMode::No)
            .err()
            .unwrap();
        assert!(err.contains("did not write"), "{err}");
    }

    #[test]
    fn an_earlier_format_is_taken_and_marked_current() {
        let opts = options();
        let store = Store::open(Path::new("/d"), opts.clone(), FsyncMode::No).unwrap();
        store
            .db()
            .put(&WriteOptions::default(), &keyspace::format_key(), b"1")
            .unwrap();
        store.close().unwrap();
        let store = Store::open(Path::new("/d"), opts, FsyncMode::No).unwrap();
        let format = store
            .get(&ReadOptions::new(), &keyspace::format_key())
            .unwrap();
        assert_eq!(
            format,
            Some(keyspace::FORMAT_VERSION.to_string().into_bytes())
        );
        const { assert!(keyspace::FORMAT_VERSION >= 2) };
    }

    #[test]
    fn a_later_format_is_refused() {
        let opts = options();
        let store = Store::open(Path::new("/d"), opts.clone(), FsyncMode::No).unwrap();
        store
            .db()
            .put(&WriteOptions::default(), &keyspace::format_key(), b"99")
            .unwrap();
        store.close().unwrap();
        let err = Store::open(Path::new("/d"), opts, FsyncMode::No)
            .err()
            .unwrap();
        assert!(err.contains("newer"), "{err}");
    }

    #[test]
    fn stripes_are_taken_once_each() {
        let store = Store::open(Path::new("/d"), options(), FsyncMode::No).unwrap();
        // The same key twice, as MSET k a k b sends it: one lock, no deadlock.
        let _g = store.lock(0, &[b"k", b"k", b"j"]);
    }

    /// What each mode leaves after a power loss, with the crash modelled
    /// by the in-memory file system dropping everything not synced.
    #[test]
    fn each_fsync_mode_survives_a_crash_as_promised() {
        let present_after_crash = |fs: &cleave::vfs::MemFs| {
            let crashed = Arc::new(fs.crash_clone());
            let store = Store::open(
                Path::new("/d"),
                Options {
                    fs: crashed,
                    ..Options::default()
                },
                FsyncMode::No,
            )
            .unwrap();
            let found = store.get(&ReadOptions::new(), b"k").unwrap().is_some();
            store.close().unwrap();
            found
        };
        for mode in [FsyncMode::Always, FsyncMode::Everysec, FsyncMode::No] {
            let fs = Arc::new(cleave::vfs::MemFs::new());
            let opts = Options {
                fs: fs.clone(),
                ..Options::default()
            };
            let store = Store::open(Path::new("/d"), opts, mode).unwrap();
            let mut b = WriteBatch::new();
            b.put(b"k", b"v");
            store.write(b).unwrap();
            assert_eq!(
                present_after_crash(&fs),
                mode == FsyncMode::Always,
                "{mode:?}"
            );
            // What the server's once-a-second thread does in everysec.
            store.sync_if_written().unwrap();
            assert!(present_after_crash(&fs), "{mode:?}");
            // Nothing new to sync: no second sync.
            let syncs = store.db().stats().wal_syncs;
            store.sync_if_written().unwrap();
            assert_eq!(store.db().stats().wal_syncs, syncs);
        }
    }
}
