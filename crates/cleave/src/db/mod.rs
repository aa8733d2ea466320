//! The database: open and recovery, the write path with group commit, the
//! read path, and the background flushes and compactions.

mod background;
mod budget;
mod checkpoint;
mod compact;
mod estimate;
mod flush;
mod gc;
mod no_space;
mod open;
mod purge;
mod read;
#[cfg(test)]
mod regression_tests;
mod snapshot;
mod space;
mod stats;
mod verify;
mod write;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::base::limits::NUM_LEVELS;
use crate::base::{filename, FileNumber, SeqNo};
use crate::batch::WriteBatch;
use crate::cache::CacheKind;
use crate::compaction::picker::{self, PickerOptions};
use crate::error::{Error, Result};
use crate::gc::drop_cache::DropCache;
use crate::gc::rate_limiter::GcLimiter;
use crate::gc::GcStats;
use crate::iter::db_iter::DbIterator;
use crate::manifest::version::Version;
use crate::manifest::version_set::VersionSet;
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::sstable::{BlockCache, TableCache};
use crate::value_file::ValueStore;
use crate::value_log::ValueLogs;
use crate::vfs::{CountingFs, FileLock, Fs, UsageFs};
use crate::wal::WalWriter;

pub use checkpoint::CheckpointInfo;
pub use snapshot::Snapshot;
pub use space::{LevelSpace, SpaceReport};
pub use stats::{CacheKindStats, LevelStats, Stats, WriteState, GET_READS_BUCKETS};
pub use verify::VerifyReport;

use background::RunningCompaction;
use budget::Budget;
use snapshot::SnapshotList;
use write::WriteQueue;

/// The WAL being written, and earlier ones not yet known to be durable.
///
/// A memtable switch does not sync the old WAL (that would stall writers
/// for the fsync of a whole memtable's worth of bytes). Instead the first
/// synced write after it syncs the old WALs first, in order, and the new
/// WAL's directory entry: replay stops at the first damaged WAL, so a
/// synced write must never sit behind an unsynced one.
#[derive(Default)]
struct WalState {
    current: Option<WalWriter>,
    unsynced: Vec<WalWriter>,
    dir_synced: bool,
    /// Obsolete WALs, durable and written with recyclable records, that
    /// the next memtable switches write over (`Options::recycle_wal`),
    /// oldest first.
    recyclable: VecDeque<FileNumber>,
}

impl WalState {
    /// Makes everything written to every WAL durable.
    fn sync(&mut self, fs: &dyn Fs, dir: &Path) -> Result<()> {
        for old in &mut self.unsynced {
            old.sync()?;
        }
        self.unsynced.clear();
        if !self.dir_synced {
            fs.sync_dir(dir)?;
            self.dir_synced = true;
        }
        match self.current.as_mut() {
            Some(w) => w.sync(),
            None => Ok(()),
        }
    }
}

/// Entries of a memtable pointing into each value log: what its flush
/// installs, and the pins it then releases.
type LogRefs = HashMap<FileNumber, u64>;

/// A memtable waiting to be flushed, with the WAL that holds its writes.
struct Immutable {
    mem: Arc<MemTable>,
    wal: FileNumber,
    log_refs: LogRefs,
    /// Being flushed: the budget counts what its flush has still to write
    /// as a reservation, not its whole size (`DbInner::space_usage`).
    flushing: bool,
}

/// State shared by foreground and background threads, behind `DbInner::state`.
struct State {
    mem: Arc<MemTable>,
    /// The WAL holding `mem`'s writes.
    mem_wal: FileNumber,
    /// Set when `mem` holds writes made with `disable_wal`, which only a
    /// flush makes durable.
    mem_has_unlogged: bool,
    /// `mem`'s entries pointing into value logs.
    mem_log_refs: LogRefs,
    /// Bytes of the value-log records `mem`'s entries point to.
    mem_log_bytes: u64,
    /// Oldest first.
    imm: VecDeque<Immutable>,
    current: Arc<Version>,
    flush_running: bool,
    compactions: Vec<RunningCompaction>,
    /// GC jobs running (background or `gc_now`), and their input files,
    /// which no other job may pick.
    gc_jobs: usize,
    gc_busy: HashSet<FileNumber>,
    /// Files a GC job failed on, which background GC leaves alone until the
    /// next open (`gc_now` still tries them, and reports the error).
    gc_skip: HashSet<FileNumber>,
    /// The first background or WAL failure other than a full disk; once
    /// set, writes are refused until the database is reopened.
    bg_error: Option<Error>,
    /// Set while a full disk keeps the database read-only (`no_space`).
    no_space: Option<no_space::NoSpace>,
    /// Set while compactions and GC jobs wait for room (`no_space`).
    postponed: Option<no_space::Postponed>,
    shutting_down: bool,
    /// WAL files not yet obsolete, oldest first.
    live_wals: Vec<FileNumber>,
    /// When the last write reached the memtable (or the database opened):
    /// range merges wait for `range_merge_idle` past it.
    last_write: Instant,
}

pub(crate) struct DbInner {
    dir: PathBuf,
    opts: Options,
    fs: Arc<dyn Fs>,
    /// `fs` itself, counting its reads.
    reads: Arc<CountingFs>,
    /// Under `reads`: the bytes of every file in `dir`, as `du` sees them.
    disk: Arc<UsageFs>,
    picker_opts: PickerOptions,
    /// Lock order: `writers` → `wal` → `versions` → `state`.
    state: Mutex<State>,
    /// Signalled whenever background work finishes, fails or appears.
    bg_cv: Condvar,
    /// Whether the manifest names the merge operator, as it must before
    /// the first merge is written.
    merge_logged: AtomicBool,
    versions: Mutex<VersionSet>,
    writers: Mutex<WriteQueue>,
    writers_cv: Condvar,
    /// Touched only by the write leader, and by open and close.
    wal: Mutex<WalState>,
    /// Sequence number of the last write visible to readers.
    visible_seq: AtomicU64,
    /// A write left WAL records in the process (`manual_wal_flush`) since
    /// the last `flush_wal`: set before the write is visible, so that a
    /// reader's `flush_wal` after it never skips them.
    wal_buffered: AtomicBool,
    block_cache: Arc<BlockCache>,
    table_cache: Arc<TableCache>,
    values: Arc<ValueStore>,
    /// Key-delta separation: the buckets flushes move operands to.
    deltas: Arc<crate::delta::DeltaStore>,
    /// Reads of the delta store a get overlaps with its LSM lookup.
    delta_reader: crate::delta::reader::DeltaReader,
    /// WAL-time separation: the value logs big values are appended to.
    logs: Arc<ValueLogs>,
    purger: Arc<purge::Purger>,
    snapshots: Arc<SnapshotList>,
    counters: stats::Counters,
    gc_totals: Mutex<gc::GcTotals>,
    gc_limiter: GcLimiter,
    budget: Budget,
    /// Writers' rate under the budget.
    pacer: Mutex<budget::Pacer>,
    /// Whether the budget was last found impossible to meet.
    budget_impossible: AtomicBool,
    /// Output bytes running GC jobs and compactions have still to write.
    reserved: AtomicU64,
    /// Output bytes the running flush has still to write.
    flush_left: AtomicU64,
    /// Output bytes of running GC jobs, written or not.
    gc_planned: AtomicU64,
    /// GC jobs the scheduler allows at once, as it last decided.
    gc_max_jobs: AtomicUsize,
    drop_cache: DropCache,
    next_job_id: AtomicU64,
    /// One resumption from the read-only state at a time.
    resuming: Mutex<()>,
    /// Opened with `Db::open_read_only`: writes nothing.
    read_only: bool,
    /// `None` for a read-only open.
    _lock: Option<Box<dyn FileLock>>,
}

/// Opens a read-only open makes before it gives up: a writer's compaction,
/// flush or manifest rotation can delete a file between the open's reading
/// of the manifest and of the file.
const READ_ONLY_OPEN_ATTEMPTS: usize = 10;
/// The pause between them.
const READ_ONLY_OPEN_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// An open database. `Send + Sync`: share it between threads by reference
/// or in an `Arc`.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

impl Db {
    /// Opens (or with `create_if_missing`, creates) the database in `path`,
    /// recovering from the manifest and the WALs.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let inner = Arc::new(open::open(path.as_ref(), opts, false)?);
        let db = Db {
            inner,
            threads: Mutex::new(Vec::new()),
        };
        let pool = (0..db.inner.opts.pool_threads())
            .map(|i| (format!("cleave-bg-{i}"), background::run as fn(&DbInner)));
        let flusher = (
            "cleave-flush".to_string(),
            background::run_flushes as fn(&DbInner),
        );
        for (name, body) in std::iter::once(flusher).chain(pool) {
            let worker = db.inner.clone();
            let spawned = std::thread::Builder::new()
                .name(name)
                .spawn(move || body(&worker))
                .map_err(|e| Error::io(&db.inner.dir, "spawn background thread", e));
            match spawned {
                Ok(t) => db.threads.lock().push(t),
                Err(e) => {
                    // Stops and joins the threads already started.
                    let _ = db.shutdown();
                    return Err(e);
                }
            }
        }
        db.inner.bg_cv.notify_all();
        Ok(db)
    }

    /// Opens the database in `path` to read it, writing nothing there: no
    /// lock, no manifest, WAL or value-file change, no removal of files
    /// (RocksDB's `OpenForReadOnly`). What the WALs hold is replayed into
    /// memory. It works beside a process that has the database open for
    /// writing, and on a full disk or a read-only mount; it shows the
    /// database as of the open (later writes by another process are not
    /// seen). Files the writer deletes after the open (compacted, or
    /// collected by GC) make reads that need them fail with an I/O error
    /// naming the file, never with a wrong answer; an open that finds a
    /// file gone in between retries, and fails with the last error after
    /// a few tries. Writes, flushes, compactions and GC fail with
    /// `Error::ReadOnly`; no background thread runs.
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let mut attempt = 0;
        let inner = loop {
            match open::open(path.as_ref(), opts.clone(), true) {
                Ok(inner) => break inner,
                Err(e) if attempt + 1 < READ_ONLY_OPEN_ATTEMPTS && !e.is_no_space() => {
                    attempt += 1;
                    std::thread::sleep(READ_ONLY_OPEN_RETRY);
                }
                Err(e) => return Err(e),
            }
        };
        Ok(Db {
            inner: Arc::new(inner),
            threads: Mutex::new(Vec::new()),
        })
    }

    /// Sets `key` to `value`.
    pub fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(opts, b)
    }

    /// Sets `key` to `value` for `ttl`, measured from now by
    /// `Options::clock`: from then on reads find nothing for `key`, and
    /// compaction drops the entry without reading its value, whose bytes
    /// become garbage in the space report. A merge operand written over
    /// the value outlives its expiry and then merges onto nothing.
    pub fn put_with_ttl(
        &self,
        opts: &WriteOptions,
        key: &[u8],
        value: &[u8],
        ttl: std::time::Duration,
    ) -> Result<()> {
        let expires_at_ms = self.inner.opts.clock.expiry_after(ttl);
        self.put_with_expiry(opts, key, value, expires_at_ms)
    }

    /// Sets `key` to `value` until `expires_at_ms`, milliseconds since the
    /// Unix epoch (see [`WriteBatch::put_with_expiry`]).
    pub fn put_with_expiry(
        &self,
        opts: &WriteOptions,
        key: &[u8],
        value: &[u8],
        expires_at_ms: u64,
    ) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_with_expiry(key, value, expires_at_ms);
        self.write(opts, b)
    }

    /// Writes a merge operand for `key`, which `Options::merge_operator`
    /// combines with the key's value when it is read or compacted.
    pub fn merge(&self, opts: &WriteOptions, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.merge(key, operand);
        self.write(opts, b)
    }

    /// Removes `key`.
    pub fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(opts, b)
    }

    /// Applies `batch` atomically.
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner.refuse_if_read_only("write")?;
        self.inner.write(opts, batch)
    }

    /// The value of `key`, as of `opts.snapshot` or now.
    pub fn get(&self, opts: &ReadOptions<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(opts, key)
    }

    /// Whether `key` has a value, as of `opts.snapshot` or now: a `get`
    /// that stops at the key's newest entry, so it never reads a separated
    /// value from its value file (the lookups in the memtables and
    /// sstables cost what a get's do). A key holding merge operands has a
    /// value, even one its operator would refuse when it is read.
    pub fn contains(&self, opts: &ReadOptions<'_>, key: &[u8]) -> Result<bool> {
        self.inner.contains(opts, key)
    }

    /// The values of `keys` as of one point in time (`opts.snapshot` or
    /// now), one result per key in the order given, as RocksDB's
    /// `MultiGet`: the keys are looked up in key order, and the separated
    /// values they lead to are read from the value files in one batch
    /// (submitted together through io_uring where available), so that
    /// reads of many values cost about one device latency rather than one
    /// each. A key whose lookup or value read fails gets its own error;
    /// the others are answered.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions<'_>,
        keys: &[K],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.inner.multi_get(opts, &keys)
    }

    /// An iterator over the database as of `opts.snapshot` or now, within
    /// `opts`' bounds. It starts unpositioned: call a seek first.
    pub fn iter(&self, opts: &ReadOptions<'_>) -> DbIterator {
        self.inner.iter(opts)
    }

    /// A snapshot of the current state; released when dropped.
    pub fn snapshot(&self) -> Snapshot {
        // Under the state lock, so the sequence number and the structures
        // a later read captures agree (see `read::capture`).
        let _st = self.inner.state.lock();
        self.inner
            .snapshots
            .acquire(self.inner.visible_seq.load(Ordering::Acquire))
    }

    /// Hands the WAL records of writes that did not sync to the OS (with
    /// `Options::manual_wal_flush`, they wait in the process until then),
    /// as RocksDB's `FlushWAL(false)`: from its return, a killed process
    /// loses none of the writes made before the call; a power loss may, as
    /// until `sync_wal`. Without `manual_wal_flush` there is nothing to do.
    /// Tried also on a read-only or poisoned database. A failed write
    /// makes the database read-only (a full disk) or poisons it, as a
    /// failed append does, and fails every later call until a resumption
    /// replaces the WAL (its records then reach the disk through the flush
    /// of their memtable).
    pub fn flush_wal(&self) -> Result<()> {
        self.inner.flush_wal()
    }

    /// Makes every write acknowledged so far durable, as RocksDB's
    /// `SyncWAL`: the value logs, then every WAL. For a writer that does
    /// not sync each write but bounds what a crash may lose (a server's
    /// "sync every second"). Blocks while a write group appends; a failed
    /// sync poisons the database, as a failed synced write does.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.refuse_if_read_only("sync_wal")?;
        self.inner.sync_wal()
    }

    /// An estimate of the live keys in `[begin, end)`, as RocksDB's
    /// `rocksdb.estimate-num-keys` for a range: each sstable inside the
    /// range counts its entries less twice its deletions (a deletion
    /// hides one older entry), one that straddles a bound counts half of
    /// that. Each memtable counts its keys in the range once each, less one
    /// for a key it holds only a deletion of. Keys overwritten in
    /// different files or memtables count more than once. Reads no file;
    /// walks the memtables' part of the range.
    pub fn estimate_num_keys(&self, begin: &[u8], end: &[u8]) -> u64 {
        self.inner.estimate_num_keys(begin, end)
    }

    /// An estimate of the keys in `[begin, end)` whose value has an expiry
    /// still to come (Redis's `expires` in `INFO keyspace`): each sstable
    /// counts its entries with an expiry by its expiry summary, less those
    /// expired by now to the eighth, half of that for one straddling a
    /// bound; each memtable counts its keys whose newest entry expires
    /// later. An entry overwritten later still counts until compacted.
    /// Reads no file; walks the memtables' part of the range.
    pub fn estimate_num_expiring(&self, begin: &[u8], end: &[u8]) -> u64 {
        self.inner.estimate_num_expiring(begin, end)
    }

    /// Writes the memtable to an sstable and waits until it is durable.
    pub fn flush(&self) -> Result<()> {
        self.inner.refuse_if_read_only("flush")?;
        self.inner.flush()
    }

    /// Makes a consistent copy of the database in `dir`, which must not
    /// exist or be empty, and which then opens as a database of its own:
    /// every write acknowledged before the call, and no write that came
    /// after a write it lacks. Flushes the memtables first (so the copy
    /// needs no WAL), then hard-links the sstables, value files and delta
    /// files into `dir`, copying each where the file system refuses a
    /// link (another device), and writes `dir`'s own manifest and CURRENT,
    /// synced. Writes go on meanwhile; files the database drops during the
    /// copy stay on disk until it ends. On failure the files it made are
    /// removed and `dir` holds no database.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointInfo> {
        self.inner.refuse_if_read_only("checkpoint")?;
        self.inner.checkpoint(dir.as_ref())
    }

    /// Compacts every level overlapping `[begin, end]` (user keys, inclusive;
    /// `None` is unbounded) down to the last level with data.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.refuse_if_read_only("compact_range")?;
        self.inner.compact_range(begin, end)
    }

    /// Waits until no flush, compaction or (with `enable_gc`) GC job is
    /// pending or running, range merges and the push-downs before them
    /// included (`Options::range_merge_sorted_runs`): those start only once
    /// no write has arrived for `range_merge_idle`, so this waits at least
    /// that long after the last write when one is due.
    pub fn wait_for_compactions(&self) -> Result<()> {
        self.inner.wait_for_background_idle()
    }

    /// Runs value-file GC now, whether or not `enable_gc` is set: every
    /// value file whose exact garbage ratio reaches `gc_garbage_ratio` is
    /// collected (files written meanwhile are left for later). Waits for a
    /// running background GC job first. Returns what the jobs did.
    pub fn gc_now(&self) -> Result<GcStats> {
        self.inner.refuse_if_read_only("gc")?;
        self.inner.gc_now(self.inner.opts.gc_garbage_ratio)
    }

    /// As [`Self::gc_now`] with another threshold, in (0, 1]: a tool
    /// reclaiming space, or a test collecting files with any garbage.
    pub fn gc_with_ratio(&self, garbage_ratio: f64) -> Result<GcStats> {
        self.inner.refuse_if_read_only("gc")?;
        self.inner.gc_now(garbage_ratio)
    }

    /// Reads every block of every live sstable and every record of every
    /// live value file and checks its checksum, as RocksDB's
    /// `VerifyChecksum`; returns the first error, naming the file.
    pub fn verify_checksums(&self) -> Result<()> {
        let version = self.inner.state.lock().current.clone();
        let verified = self.inner.verify_version(&version);
        // The copy may have been the last to name a compacted file.
        drop(version);
        self.inner.purger.purge();
        verified
    }

    /// Checks the whole database, more deeply than
    /// [`Self::verify_checksums`]: every checksum, that the manifest on disk
    /// describes the open files, the key order of the levels, the size of
    /// every file, that every value handle resolves to a record holding its
    /// entry's key and sequence number, and that the garbage counters equal
    /// a recount from the value-references bitmaps. Returns every problem
    /// found, each naming its file; `cleave verify` prints the report.
    pub fn verify(&self) -> VerifyReport {
        self.inner.verify()
    }

    /// Where the disk space goes: sstables and value files per the current
    /// Version (exact, with value-file garbage), and the measured size of
    /// every file in the directory.
    pub fn space_report(&self) -> Result<SpaceReport> {
        self.inner.space_report()
    }

    /// Bytes of every file in the database directory, as `du --apparent-size`
    /// sees them (bytes still in a writer's buffer included): WALs, value
    /// logs, sstables, value files, files waiting for deletion, the
    /// manifest. Kept as files grow and go, without a directory walk; the
    /// space budget works from it.
    pub fn space(&self) -> u64 {
        self.inner.disk.bytes()
    }

    /// Statistics as a struct.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// A named property, as RocksDB's `GetProperty`: `cleave.stats`,
    /// `cleave.levelstats`, `cleave.num-files-at-level<N>`,
    /// `cleave.total-sst-files-size`, `cleave.num-immutable-mem-table`,
    /// `cleave.cur-size-active-mem-table`, `cleave.background-errors`,
    /// `cleave.max-value-file-refs` (the most logical value files one live
    /// sstable references: the fan-out correlated compaction bounds),
    /// `cleave.batch-reads` (how batches of independent reads, a scan's
    /// value prefetch and GC's live runs, reach the disk: `io_uring`, or
    /// `pread` one after another where io_uring is unavailable or turned
    /// off), `cleave.record-index-size` (bytes of the live value files'
    /// record indexes, which the block cache holds when reads need them,
    /// per record).
    pub fn property(&self, name: &str) -> Option<String> {
        self.inner.property(name)
    }

    /// Takes writes again after a full disk made the database read-only
    /// (`Error::NoSpace`), as RocksDB's `DB::Resume`: after a failed WAL
    /// or value-log append, switches to a new WAL; then flushes every
    /// memtable, and returns once writes are taken. The database does
    /// this by itself once the file system has room for it (looking every
    /// `no_space_poll_interval`); call this after freeing space to resume
    /// at once. Blocks for the flushes. Returns at once if the database is
    /// not read-only; `Error::NoSpace` if there is still no room (it stays
    /// read-only), `Error::Poisoned` if an earlier failure other than a
    /// full disk stopped it.
    pub fn resume(&self) -> Result<()> {
        self.inner.refuse_if_read_only("resume")?;
        self.inner.resume()
    }

    /// Whether the database takes writes now, and if not, why (also in
    /// [`Stats::write_state`]). Takes the state lock; reads nothing.
    pub fn write_state(&self) -> WriteState {
        if self.inner.read_only {
            return WriteState::OpenedReadOnly;
        }
        DbInner::write_state(&self.inner.state.lock())
    }

    /// Waits for background work, makes unlogged writes durable, and closes.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.read_only {
            // It wrote nothing, and runs no thread.
            self.inner.state.lock().shutting_down = true;
            return Ok(());
        }
        let result = self.inner.prepare_close();
        {
            let mut st = self.inner.state.lock();
            st.shutting_down = true;
        }
        self.inner.bg_cv.notify_all();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // A poisoned database may hold writes that never reached an sstable
        // or a synced WAL: say so instead of closing quietly. One a full
        // disk made read-only syncs what it wrote, but has no room to seal
        // its value logs (the next open scans them); after a failed
        // append it leaves the WAL that may end in part of a record.
        let (poisoned, no_space) = {
            let st = self.inner.state.lock();
            (
                DbInner::check_poisoned(&st),
                st.no_space
                    .as_ref()
                    .map(|n| (n.write_path, n.cause.duplicate())),
            )
        };
        let sync = match (&poisoned, no_space) {
            (Err(_), _) => Ok(()),
            // Sealed, the value logs open whole next time, without a scan;
            // the sync makes them durable (with their directory entries)
            // before the WAL.
            (Ok(()), None) => self
                .inner
                .logs
                .seal_all()
                .and_then(|()| self.inner.sync_wal()),
            (Ok(()), Some((false, _))) => self.inner.sync_logs_and_wals(),
            (Ok(()), Some((true, cause))) => Err(cause),
        };
        self.inner.delete_obsolete_files();
        poisoned.and(result).and(sync)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.threads.lock().is_empty() {
            let _ = self.shutdown();
        }
    }
}

impl DbInner {
    /// Refuses `op`, which writes, on a database opened read-only.
    fn refuse_if_read_only(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                dir: self.dir.clone(),
                op,
            });
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        let mut s = Stats::from_counters(&self.counters);
        s.fs_free_bytes = self
            .fs
            .free_space(&self.dir)
            .ok()
            .filter(|&b| b != u64::MAX);
        let st = self.state.lock();
        s.write_state = if self.read_only {
            WriteState::OpenedReadOnly
        } else {
            Self::write_state(&st)
        };
        let targets = picker::level_targets(&st.current, &self.picker_opts).bytes;
        let scores = picker::scores(&st.current, &self.picker_opts);
        s.levels = (0..NUM_LEVELS)
            .map(|l| LevelStats {
                files: st.current.num_files(l),
                bytes: st.current.level_bytes(l),
                value_bytes: st.current.level_value_bytes(l),
                // Levels never compacted by size have no target.
                target_bytes: if targets[l] == u64::MAX {
                    0
                } else {
                    targets[l]
                },
                score: scores[l],
            })
            .collect();
        s.immutable_memtables = st.imm.len();
        s.memtable_bytes = st.mem.approximate_memory_usage() as u64
            + st.imm
                .iter()
                .map(|i| i.mem.approximate_memory_usage() as u64)
                .sum::<u64>();
        s.block_cache_usage = self.block_cache.usage() as u64;
        s.block_cache_hits = self.block_cache.hits();
        s.block_cache_misses = self.block_cache.misses();
        s.block_cache_capacity = self.block_cache.capacity() as u64;
        s.delta_memory_bytes = self.deltas.memory(st.current.buckets().count()) as u64;
        s.block_cache_kinds = CacheKind::ALL
            .iter()
            .map(|&kind| {
                let c = self.block_cache.class_stats(kind as usize);
                CacheKindStats {
                    kind: kind.name(),
                    hits: c.hits,
                    misses: c.misses,
                    usage: c.usage as u64,
                }
            })
            .collect();
        let logs = self.logs.counters();
        s.value_log_bytes_written = logs.bytes_written.load(Ordering::Relaxed);
        s.value_log_records = logs.records.load(Ordering::Relaxed);
        s.value_logs_created = logs.files.load(Ordering::Relaxed);
        s.recent_value_hits = logs.recent_hits.load(Ordering::Relaxed);
        s.recent_value_cache_usage = self.logs.recent_usage() as u64;
        s.drop_cache_usage = self.drop_cache.usage() as u64;
        s.drop_cache_capacity = self.opts.drop_cache_capacity as u64;
        s.space_usage_bytes = self.space_usage(&st);
        s.space_budget_bytes = self.budget.bytes;
        s.space_reclaim_rate = self.pacer.lock().reclaim_rate() as u64;
        s.gc_max_jobs = self.gc_max_jobs.load(Ordering::Relaxed);
        s.gc_rate_limit = self.gc_limiter.rate();
        let gc = self.gc_totals.lock();
        s.gc = gc.total.clone();
        s.last_gc = gc.last.clone();
        (s.disk_reads, s.disk_read_bytes) = self.reads.reads();
        let reads = self.values.counters();
        s.value_reads = reads.reads.load(Ordering::Relaxed);
        s.value_read_bytes = reads.bytes.load(Ordering::Relaxed);
        s
    }

    fn property(&self, name: &str) -> Option<String> {
        let name = name
            .strip_prefix("cleave.")
            .or_else(|| name.strip_prefix("rocksdb."))?;
        if let Some(level) = name.strip_prefix("num-files-at-level") {
            let level: usize = level.parse().ok()?;
            let st = self.state.lock();
            return (level < NUM_LEVELS).then(|| st.current.num_files(level).to_string());
        }
        match name {
            "stats" => Some(format!(
                "{}batched reads: {}\n",
                self.stats().to_text(),
                self.fs.read_batch_mode().name()
            )),
            "levelstats" => {
                let s = self.stats();
                let mut out = String::from("Level Files Size(MB)\n");
                for (i, l) in s.levels.iter().enumerate() {
                    out.push_str(&format!(
                        "{i:>5} {:>5} {:>8.1}\n",
                        l.files,
                        l.bytes as f64 / 1048576.0
                    ));
                }
                Some(out)
            }
            "total-sst-files-size" => Some(self.stats().sstable_bytes().to_string()),
            "max-value-file-refs" => {
                let st = self.state.lock();
                let max = st
                    .current
                    .all_files()
                    .map(|(_, f)| f.value_refs.len())
                    .max();
                Some(max.unwrap_or(0).to_string())
            }
            "batch-reads" => Some(self.fs.read_batch_mode().name().to_string()),
            "record-index-size" => {
                let version = self.state.lock().current.clone();
                let (mut bytes, mut records) = (0u64, 0u64);
                for meta in version.value_files() {
                    let file = self.values.file(meta.number).ok()?;
                    bytes += file.properties().index_size;
                    records += file.properties().num_records;
                }
                let per_record = bytes as f64 / records.max(1) as f64;
                Some(format!(
                    "{bytes} bytes for {records} records: {per_record:.2} bytes per record"
                ))
            }
            "num-immutable-mem-table" => Some(self.state.lock().imm.len().to_string()),
            "cur-size-active-mem-table" => {
                Some(self.state.lock().mem.approximate_memory_usage().to_string())
            }
            "background-errors" => {
                let st = self.state.lock();
                let error = st
                    .bg_error
                    .as_ref()
                    .or(st.no_space.as_ref().map(|n| &n.cause));
                Some(error.map_or_else(|| "0".to_string(), |e| format!("1: {e}")))
            }
            _ => None,
        }
    }

    /// Checks every file of `version`; see `Db::verify_checksums`.
    fn verify_version(&self, version: &Version) -> Result<()> {
        for (_, file) in version.all_files() {
            self.table_cache.get(file.number)?.verify()?;
        }
        for meta in version.value_files() {
            let file = self.values.file(meta.number)?;
            file.verify()?;
            let hosted: Vec<_> = file
                .properties()
                .hosted
                .iter()
                .map(|h| (h.logical_file, h.num_records, h.record_bytes))
                .collect();
            let named: Vec<_> = meta
                .hosted
                .iter()
                .map(|h| (h.logical_file, h.records, h.bytes))
                .collect();
            if hosted != named {
                return Err(Error::corruption(
                    file.path(),
                    0,
                    "value file hosts other records than the manifest says",
                ));
            }
        }
        Ok(())
    }

    /// Deletes sstables and value files no Version names anymore and WALs
    /// older than the manifest's log number.
    fn delete_obsolete_files(&self) {
        self.purger.purge();
        let log_number = self.versions.lock().log_number();
        let wals: Vec<FileNumber> = {
            let mut st = self.state.lock();
            let (old, keep): (Vec<_>, Vec<_>) = st.live_wals.iter().partition(|&&w| w < log_number);
            st.live_wals = keep;
            old
        };
        // A flushed WAL is never replayed, so it no longer needs a sync,
        // unless it is to be recycled: recycling writes over a file whose
        // every byte is durable. Only the writers of `wals` are taken: a
        // concurrent call owns the others, and syncs them if it keeps them.
        let (mut unsynced, spare) = {
            let mut wal = self.wal.lock();
            let (old, keep): (Vec<WalWriter>, _) = std::mem::take(&mut wal.unsynced)
                .into_iter()
                .partition(|w| wals.contains(&w.number()));
            wal.unsynced = keep;
            let spare = self.opts.recycle_wal.saturating_sub(wal.recyclable.len());
            (old, spare)
        };
        let mut recycled = Vec::new();
        for w in wals {
            let writer = unsynced.iter().position(|u| u.number() == w);
            let writer = writer.map(|i| unsynced.swap_remove(i));
            // Every WAL in `live_wals` was created by this process, with
            // recyclable records when recycling is on (an earlier process's
            // WALs are removed at open): stale records of another framing
            // could pass as the new use's.
            debug_assert!(writer.as_ref().is_none_or(WalWriter::recyclable) || spare == 0);
            if recycled.len() < spare {
                let synced = match writer {
                    Some(mut u) => u.sync().is_ok(),
                    None => true,
                };
                if synced {
                    recycled.push(w);
                    continue;
                }
            }
            let _ = self.fs.remove(&filename::wal(&self.dir, w));
        }
        if recycled.is_empty() {
            return;
        }
        // Concurrent calls each counted the same spare places.
        let extra = {
            let mut wal = self.wal.lock();
            wal.recyclable.extend(recycled);
            let keep = self.opts.recycle_wal.min(wal.recyclable.len());
            wal.recyclable.split_off(keep)
        };
        for w in extra {
            let _ = self.fs.remove(&filename::wal(&self.dir, w));
        }
    }

    fn last_seq(&self) -> SeqNo {
        self.visible_seq.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemFs;
    use crate::ReadOptions;

    /// A synced write after a memtable switch must make the older,
    /// unsynced WAL and the new WAL's directory entry durable too, or a
    /// crash could tear the old WAL and replay would stop before the
    /// synced write.
    #[test]
    fn sync_covers_older_wals_and_the_new_directory_entry() {
        let fs = MemFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let mut old = WalWriter::create(&fs, dir, FileNumber(1), false).unwrap();
        fs.sync_dir(dir).unwrap();
        let mut b = WriteBatch::new();
        b.put(b"k", b"async");
        old.append(&[b.encode_with_seq(1)], true).unwrap();
        let new = WalWriter::create(&fs, dir, FileNumber(2), false).unwrap();
        let mut wal = WalState {
            current: Some(new),
            unsynced: vec![old],
            dir_synced: false,
            recyclable: Default::default(),
        };
        let crashed = fs.crash_clone();
        assert!(!crashed.exists(&filename::wal(dir, FileNumber(2))).unwrap());
        assert_eq!(
            crate::wal::read(&crashed, dir, FileNumber(1))
                .unwrap()
                .batches
                .len(),
            0
        );

        wal.sync(&fs, dir).unwrap();
        let crashed = fs.crash_clone();
        assert!(crashed.exists(&filename::wal(dir, FileNumber(2))).unwrap());
        assert_eq!(
            crate::wal::read(&crashed, dir, FileNumber(1))
                .unwrap()
                .batches
                .len(),
            1
        );
        assert!(wal.unsynced.is_empty() && wal.dir_synced);
    }

    fn sync_options(fs: Arc<MemFs>) -> Options {
        Options {
            create_if_missing: true,
            fs,
            big_value_threshold: 1 << 10,
            ..Options::default()
        }
    }

    /// Unsynced writes, values in value logs among them, survive a crash
    /// once `sync_wal` returns, and are lost without it.
    #[test]
    fn sync_wal_makes_unsynced_writes_durable() {
        let fs = Arc::new(MemFs::new());
        let db = Db::open("/db", sync_options(fs.clone())).unwrap();
        let w = WriteOptions::default();
        let big = vec![7u8; 4 << 10];
        db.put(&w, b"small", b"v").unwrap();
        db.put(&w, b"big", &big).unwrap();
        let before = Db::open("/db", sync_options(Arc::new(fs.crash_clone()))).unwrap();
        assert_eq!(before.get(&ReadOptions::new(), b"small").unwrap(), None);
        drop(before);

        db.sync_wal().unwrap();
        let crashed = Arc::new(fs.crash_clone());
        let after = Db::open(Path::new("/db"), sync_options(crashed)).unwrap();
        let r = ReadOptions::new();
        assert_eq!(after.get(&r, b"small").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(after.get(&r, b"big").unwrap(), Some(big));
        assert!(after.verify().is_ok());
    }
}
