//! Opening a database: lock, manifest recovery, WAL replay, orphan removal.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::budget::{Budget, Pacer};
use super::compact::value_file_meta;
use super::snapshot::SnapshotList;
use super::stats::Counters;
use super::{DbInner, Immutable, LogRefs, State, WalState};
use crate::base::expiry;
use crate::base::filename::{self, FileKind};
use crate::base::FileNumber;
use crate::batch::WriteBatch;
use crate::compaction::picker::PickerOptions;
use crate::delta::{DeltaOptions, DeltaStore};
use crate::error::{Error, Result};
use crate::gc::drop_cache::DropCache;
use crate::gc::rate_limiter::GcLimiter;
use crate::manifest::edit::VersionEdit;
use crate::manifest::version_set::VersionSet;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sstable::{new_block_cache, TableCache};
use crate::value_file::ValueHandle;
use crate::value_file::ValueStore;
use crate::value_log::{LogOptions, RecoveredLog, RecoveredLogs, ValueLogs};
use crate::vfs::{CountingFs, Fs, UsageFs};
use crate::wal::{self, WalWriter};

/// Opens the database in `dir`; with `read_only`, writing nothing to it
/// (see `Db::open_read_only`).
pub(super) fn open(dir: &Path, opts: Options, read_only: bool) -> Result<DbInner> {
    opts.validate()?;
    // Every read the engine issues is counted, so that gets can report
    // what they read (Stats::get_disk_reads).
    if !opts.fs.exists(dir)? {
        if !opts.create_if_missing || read_only {
            return Err(Error::InvalidArgument(format!(
                "{} does not exist and create_if_missing is false",
                dir.display()
            )));
        }
        opts.fs.create_dir_all(dir)?;
    }
    // Every file the engine writes is counted as it grows, so that the
    // space budget sees what `du` sees.
    let disk = Arc::new(UsageFs::new(opts.fs.clone(), dir)?);
    let reads = Arc::new(CountingFs::new(disk.clone()));
    let fs: Arc<dyn Fs> = reads.clone();
    // A read-only open takes no lock: it writes nothing, and works beside
    // a process that holds the database open.
    let lock = if read_only {
        None
    } else {
        Some(fs.lock(&filename::lock(dir))?)
    };
    let versions = if fs.exists(&filename::current(dir))? {
        if opts.error_if_exists && !read_only {
            return Err(Error::InvalidArgument(format!(
                "{} already holds a database and error_if_exists is true",
                dir.display()
            )));
        }
        VersionSet::recover(fs.clone(), dir, &opts)?
    } else {
        refuse_lost_current(fs.as_ref(), dir)?;
        if !opts.create_if_missing || read_only {
            return Err(Error::InvalidArgument(format!(
                "{} holds no database (no CURRENT) and create_if_missing is false",
                dir.display()
            )));
        }
        VersionSet::create(fs.clone(), dir, &opts)?
    };
    let block_cache = Arc::new(new_block_cache(opts.block_cache_capacity));
    // One budget of open files: three quarters for sstables, a quarter for
    // value files (fewer, larger files, a few per flush).
    let value_files_open = (opts.max_open_files / 4).max(8);
    let table_cache = Arc::new(TableCache::new(
        fs.clone(),
        dir.to_path_buf(),
        opts.max_open_files - value_files_open,
        block_cache.clone(),
        opts.use_direct_reads,
    ));
    let values = Arc::new(ValueStore::new(
        fs.clone(),
        dir.to_path_buf(),
        value_files_open,
        opts.cache_values,
        opts.use_direct_reads,
        block_cache.clone(),
    ));
    let deltas = Arc::new(DeltaStore::new(
        fs.clone(),
        dir,
        opts.use_direct_reads,
        block_cache.clone(),
        DeltaOptions {
            bucket_capacity: opts.delta_bucket_capacity,
            split_bytes: (opts.delta_bucket_capacity as f64 * opts.delta_split_ratio) as u64,
            max_buckets: opts.delta_max_buckets,
        },
    ));
    // Bucket filters are not stored: every read and flush needs them.
    deltas.fill_filters(versions.current().buckets());
    deltas.charge_memory(versions.current().buckets().count());
    let purger = Arc::new(super::purge::Purger::new(
        fs.clone(),
        dir.to_path_buf(),
        versions.obsolete_files(),
        table_cache.clone(),
        values.clone(),
        deltas.clone(),
    ));
    let logs = Arc::new(ValueLogs::new(
        fs.clone(),
        dir,
        LogOptions {
            threshold: opts.effective_big_value_threshold(),
            count: opts.value_log_count,
            file_size: opts.effective_value_file_size(),
            compression: opts.value_compression,
            recent_bytes: opts.recent_value_cache_bytes,
        },
    ));
    check_merge_operator(&versions, &opts, dir)?;
    let merge_logged = AtomicBool::new(versions.merge_operator().is_some());
    let mut versions = versions;
    let pins = logs.clone();
    versions.keep_value_files(Box::new(move |n| pins.is_pinned(n)));
    let last_seq = versions.last_seq();
    let current = versions.current();
    let log_number = versions.log_number();
    let drop_cache = DropCache::new(opts.drop_cache_capacity);
    let inner = DbInner {
        dir: dir.to_path_buf(),
        picker_opts: PickerOptions::from(&opts),
        fs,
        reads,
        disk,
        state: Mutex::new(State {
            mem: Arc::new(opts.new_memtable()),
            mem_wal: log_number,
            mem_has_unlogged: false,
            mem_log_refs: HashMap::new(),
            mem_log_bytes: 0,
            imm: VecDeque::new(),
            current,
            flush_running: false,
            compactions: Vec::new(),
            gc_jobs: 0,
            gc_busy: HashSet::new(),
            gc_skip: HashSet::new(),
            bg_error: None,
            no_space: None,
            postponed: None,
            shutting_down: false,
            live_wals: Vec::new(),
            last_write: Instant::now(),
        }),
        bg_cv: Condvar::new(),
        merge_logged,
        versions: Mutex::new(versions),
        writers: Mutex::default(),
        writers_cv: Condvar::new(),
        wal: Mutex::default(),
        visible_seq: AtomicU64::new(last_seq),
        wal_buffered: AtomicBool::new(false),
        block_cache,
        table_cache,
        values,
        delta_reader: crate::delta::reader::DeltaReader::new(deltas.clone()),
        deltas,
        logs,
        purger,
        snapshots: Arc::new(SnapshotList::default()),
        counters: Counters::default(),
        gc_totals: Default::default(),
        gc_limiter: GcLimiter::new(opts.gc_rate_limiter, opts.device_write_bandwidth),
        budget: Budget::new(
            opts.space_budget_bytes,
            opts.pool_threads(),
            opts.effective_value_file_size(),
        ),
        pacer: Mutex::new(Pacer::new(Instant::now())),
        budget_impossible: AtomicBool::new(false),
        reserved: AtomicU64::new(0),
        flush_left: AtomicU64::new(0),
        gc_planned: AtomicU64::new(0),
        gc_max_jobs: AtomicUsize::new(0),
        drop_cache,
        next_job_id: AtomicU64::new(0),
        resuming: Mutex::new(()),
        read_only,
        opts,
        _lock: lock,
    };
    inner.recover()?;
    // Recovery's flushes may have grown the store.
    inner
        .deltas
        .charge_memory(inner.state.lock().current.buckets().count());
    // A budget below the data it is opened over is reported now.
    inner.schedule(&inner.state.lock());
    Ok(inner)
}

/// What WAL replay does with each memtable it fills.
enum Replay<'a> {
    /// Writes it to L0 (added to the edit), as an open normally does.
    Flush(&'a mut VersionEdit),
    /// Keeps it in memory, its WALs live (RocksDB's
    /// `avoid_flush_during_recovery`): an open on a full disk, and a
    /// read-only open, which writes nothing.
    Keep(&'a mut Vec<Kept>),
}

/// A replayed memtable kept in memory.
struct Kept {
    mem: Arc<MemTable>,
    /// The first WAL holding its writes.
    wal: FileNumber,
    log_refs: LogRefs,
}

impl Replay<'_> {
    fn memtable(
        &mut self,
        db: &DbInner,
        mem: Arc<MemTable>,
        wal: FileNumber,
        log_refs: LogRefs,
        logs: &mut RecoveredLogs,
    ) -> Result<()> {
        match self {
            Replay::Flush(edit) => db.flush_recovered(&mem, &log_refs, logs, edit),
            Replay::Keep(kept) => {
                kept.push(Kept { mem, wal, log_refs });
                Ok(())
            }
        }
    }
}

/// A directory without CURRENT but with WALs, sstables or value files holds
/// a database whose CURRENT was lost: creating a new one there would remove
/// them all as orphans. (Manifests alone are what a crash while creating a
/// database leaves: it writes its first WAL only after CURRENT.)
fn refuse_lost_current(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let mut names = fs.list(dir)?;
    names.sort();
    let found = names.into_iter().find(|name| {
        filename::parse(name).is_some_and(|(kind, _)| {
            matches!(
                kind,
                FileKind::Wal | FileKind::Sstable | FileKind::ValueFile | FileKind::DeltaFile
            )
        })
    });
    match found {
        Some(name) => Err(Error::corruption(
            filename::current(dir),
            0,
            format!(
                "CURRENT is missing, but the directory holds database files ({name}): \
                 refusing to create a new database over them"
            ),
        )),
        None => Ok(()),
    }
}

/// Refuses to open a database whose merges need another merge operator
/// than `opts` gives: reads would merge them wrongly, or not at all.
fn check_merge_operator(versions: &VersionSet, opts: &Options, dir: &Path) -> Result<()> {
    let Some(logged) = versions.merge_operator() else {
        return Ok(());
    };
    match &opts.merge_operator {
        Some(op) if op.name() == logged => Ok(()),
        Some(op) => Err(Error::InvalidArgument(format!(
            "{} holds merges for merge operator {logged:?}, not {:?} (Options::merge_operator)",
            dir.display(),
            op.name()
        ))),
        None => Err(Error::InvalidArgument(format!(
            "{} holds merges for merge operator {logged:?}: open it with that operator (Options::merge_operator)",
            dir.display()
        ))),
    }
}

impl DbInner {
    /// Replays the WALs the manifest does not cover into L0, starts a new
    /// WAL, and removes files nothing names.
    fn recover(&self) -> Result<()> {
        let names = self.fs.list(&self.dir)?;
        let parsed: Vec<(FileKind, FileNumber)> =
            names.iter().filter_map(|n| filename::parse(n)).collect();
        self.check_live_files(&parsed)?;
        {
            // WALs created after the last manifest edit are not covered by
            // its next_file_number: never reuse (and truncate) one.
            let mut v = self.versions.lock();
            for &(_, n) in &parsed {
                v.mark_file_number_used(n);
            }
        }

        let log_number = self.versions.lock().log_number();
        let mut wals: Vec<FileNumber> = parsed
            .iter()
            .filter(|(k, n)| *k == FileKind::Wal && *n >= log_number)
            .map(|&(_, n)| n)
            .collect();
        wals.sort();
        if self.read_only {
            let mut kept = Vec::new();
            self.replay_wals(log_number, &wals, Replay::Keep(&mut kept))?;
            self.keep_replayed(kept, &wals, log_number);
            return Ok(());
        }
        let first_new = self.versions.lock().next_file_number();
        let mut edit = VersionEdit::default();
        let flushed = self
            .replay_wals(log_number, &wals, Replay::Flush(&mut edit))
            .and_then(|()| self.start_wal(edit));
        match flushed {
            Ok(()) => self.remove_orphans(&BTreeSet::new()),
            Err(e) if e.is_device_full() => {
                log::warn!(
                    "{}: no room to flush what the WALs hold; kept in memory, read-only until \
                     there is room: {e}",
                    self.dir.display()
                );
                // Nothing names what the attempt wrote.
                self.remove_from(first_new)?;
                *self.wal.lock() = WalState::default();
                let mut kept = Vec::new();
                self.replay_wals(log_number, &wals, Replay::Keep(&mut kept))?;
                let adopted = self.keep_replayed(kept, &wals, log_number);
                // No WAL to write to: resuming starts one.
                self.set_write_error(&e);
                // What a crash left behind frees room too.
                self.remove_orphans(&adopted)
            }
            Err(e) => Err(e),
        }
    }

    /// Starts a new WAL and logs `edit` (the flushes of the replayed WALs)
    /// with it as the oldest WAL to replay.
    fn start_wal(&self, mut edit: VersionEdit) -> Result<()> {
        let number = self.versions.lock().new_file_number();
        let recyclable = self.opts.recycle_wal > 0;
        let writer = WalWriter::create(self.fs.as_ref(), &self.dir, number, recyclable)?;
        self.fs.sync_dir(&self.dir)?;
        *self.wal.lock() = WalState {
            current: Some(writer),
            unsynced: Vec::new(),
            dir_synced: true,
            recyclable: Default::default(),
        };
        {
            let mut st = self.state.lock();
            st.mem_wal = number;
            st.live_wals = vec![number];
        }
        edit.log_number = Some(number);
        self.apply_edit(edit)
    }

    /// Removes the files numbered `first` or later: those a recovery that
    /// found the disk full wrote, which no manifest names (a full disk
    /// fails a manifest write before CURRENT changes).
    fn remove_from(&self, first: FileNumber) -> Result<()> {
        for name in self.fs.list(&self.dir)? {
            if filename::parse(&name).is_some_and(|(_, n)| n >= first) {
                self.fs.remove(&self.dir.join(&name))?;
            }
        }
        Ok(())
    }

    /// Makes the memtables a replay kept in memory the immutable ones,
    /// with `wals` (the WALs replayed, all of them live) holding their
    /// writes; returns the value logs they point into.
    fn keep_replayed(
        &self,
        kept: Vec<Kept>,
        wals: &[FileNumber],
        log_number: FileNumber,
    ) -> BTreeSet<FileNumber> {
        let mut adopted = BTreeSet::new();
        let mut st = self.state.lock();
        for k in kept {
            adopted.extend(k.log_refs.keys().copied());
            st.imm.push_back(Immutable {
                mem: k.mem,
                wal: k.wal,
                log_refs: k.log_refs,
                flushing: false,
            });
        }
        // The mutable memtable is empty; the WAL named with it exists (or
        // is the manifest's), so a flush logging it as the oldest to replay
        // never names a missing one.
        st.mem_wal = wals.last().copied().unwrap_or(log_number);
        st.live_wals = wals.to_vec();
        adopted
    }

    /// Every sstable and value file the manifest names must exist; with
    /// `paranoid_checks` its footer and metadata must also read back. A
    /// read-only open opens them all now, into the table and value-file
    /// caches: a writer deleting one later takes nothing from its view
    /// (up to `max_open_files`).
    fn check_live_files(&self, present: &[(FileKind, FileNumber)]) -> Result<()> {
        let present: HashSet<(FileKind, FileNumber)> = present.iter().copied().collect();
        let current = self.versions.lock().current();
        let open_all = self.opts.paranoid_checks || self.read_only;
        for (_, file) in current.all_files() {
            if !present.contains(&(FileKind::Sstable, file.number)) {
                return Err(self.missing(filename::sstable(&self.dir, file.number), "sstable"));
            }
            if open_all {
                self.table_cache.get(file.number)?;
            }
        }
        for file in current.value_files() {
            if !present.contains(&(FileKind::ValueFile, file.number)) {
                let path = filename::value_file(&self.dir, file.number);
                return Err(self.missing(path, "value file"));
            }
            if open_all {
                self.values.file(file.number)?;
            }
        }
        for file in current.delta_files() {
            if !present.contains(&(FileKind::DeltaFile, file.number)) {
                let path = filename::delta_file(&self.dir, file.number);
                return Err(self.missing(path, "delta file"));
            }
        }
        Ok(())
    }

    /// A `what` the manifest names is not there: a lost file, corruption;
    /// to a read-only open, most likely deleted by the process writing
    /// the database since the manifest was read.
    fn missing(&self, path: std::path::PathBuf, what: &str) -> Error {
        if self.read_only {
            let why = format!("{what} named by the manifest is gone (deleted by a writer?)");
            return Error::io(path, "open", std::io::Error::new(ErrorKind::NotFound, why));
        }
        Error::corruption(path, 0, format!("{what} named by the manifest is missing"))
    }

    /// Replays `wals` in order into memtables flushed to L0 (added to
    /// `edit`). Stops at the first damaged record: later records (in this or
    /// later WALs) would not form a state that ever existed. With
    /// `paranoid_checks`, damage other than a torn final record is an error.
    ///
    /// A WAL missing from the chain (the manifest's `log_number`, or one a
    /// later WAL's header names as its predecessor) is corruption naming
    /// it, whatever `paranoid_checks` says: a crash never leaves such a gap
    /// (every directory sync covers all WALs created before), so a file was
    /// lost, and going on would either replay later writes over a hole or
    /// retire the later WALs for good.
    fn replay_wals(
        &self,
        log_number: FileNumber,
        wals: &[FileNumber],
        mut replay: Replay<'_>,
    ) -> Result<()> {
        let mut mem = Arc::new(MemTable::new());
        // Value logs the replayed handles point into, and the handles the
        // memtable being rebuilt holds into each.
        let mut logs = RecoveredLogs::default();
        let mut mem_logs = LogRefs::new();
        // The first WAL the memtable being rebuilt holds writes of.
        let mut mem_wal = None;
        let mut max_seq = self.visible_seq.load(Ordering::Acquire);
        // Databases that never logged a WAL number have none to miss.
        if log_number.0 > 0 && wals.first() != Some(&log_number) {
            let path = filename::wal(&self.dir, log_number);
            if self.read_only {
                return Err(self.missing(path, "oldest WAL to replay"));
            }
            return Err(Error::corruption(
                path,
                0,
                "WAL missing: the manifest names it as the oldest WAL to replay",
            ));
        }
        let mut previous: Option<(FileNumber, u64)> = None;
        // The next WAL, when deciding on this one's damage read it already.
        let mut read_ahead: Option<wal::WalContents> = None;
        'wals: for (i, &number) in wals.iter().enumerate() {
            let contents = match read_ahead.take() {
                Some(c) => c,
                None => wal::read(self.fs.as_ref(), &self.dir, number)?,
            };
            self.check_wal_chain(previous.map(|p| p.0), number, contents.previous)?;
            // The previous WAL ended early without a damaged record to show
            // for it: a crash lost its unsynced tail, and the bytes after
            // what survived were a recycled file's stale records. What
            // this WAL holds came later and would replay over the hole.
            if let (Some((_, end)), Some(len)) = (previous, contents.previous_len) {
                if end < len {
                    break 'wals;
                }
            }
            previous = Some((number, contents.end));
            for (seq, batch) in &contents.batches {
                // A batch pointing at a value a crash lost from its log
                // ends replay, as a torn record does: it and every later
                // write never reached a state a reader could have seen.
                let Some(points_into) = self.values_present(batch, &mut logs)? else {
                    break 'wals;
                };
                for log in points_into {
                    *mem_logs.entry(log).or_default() += 1;
                }
                mem_wal.get_or_insert(number);
                let mut s = *seq;
                let mut splice = mem.splice();
                for e in batch.entries() {
                    let e = e?;
                    mem.add_with(s, e.kind, e.key, e.value, &mut splice);
                    s += 1;
                }
                max_seq = max_seq.max(s.saturating_sub(1));
                // Kept memtables are cut at WAL boundaries only: the
                // flush of each retires its WAL whole. One that straddled
                // two WALs would leave its flushed part in a WAL a crash
                // replays again, pointing at values GC may have collected
                // since, which would end that replay early.
                let keeps = matches!(replay, Replay::Keep(_));
                if !keeps && mem.approximate_memory_usage() >= self.opts.write_buffer_size {
                    let full = std::mem::replace(&mut mem, Arc::new(MemTable::new()));
                    let refs = std::mem::take(&mut mem_logs);
                    let wal = mem_wal.take().unwrap_or(number);
                    replay.memtable(self, full, wal, refs, &mut logs)?;
                }
            }
            if matches!(replay, Replay::Keep(_)) && !mem.is_empty() {
                let full = std::mem::replace(&mut mem, Arc::new(MemTable::new()));
                let refs = std::mem::take(&mut mem_logs);
                replay.memtable(self, full, number, refs, &mut logs)?;
                mem_wal = None;
            }
            if let Some(damage) = contents.damage {
                // A recyclable WAL's read reports damage when a valid record
                // of its own number lies past where reading stopped; in its
                // stale tail, a value may hold such bytes. The next WAL's
                // header says how long this one was: reading stopped right
                // there, so nothing of it was lost.
                if let Some(&next) = wals.get(i + 1) {
                    let after = wal::read(self.fs.as_ref(), &self.dir, next)?;
                    let whole =
                        after.previous == Some(number) && after.previous_len == Some(damage.offset);
                    read_ahead = Some(after);
                    if whole {
                        continue;
                    }
                }
                if !damage.torn_tail && self.opts.paranoid_checks {
                    return Err(Error::corruption(
                        contents.path,
                        damage.offset,
                        damage.reason,
                    ));
                }
                break 'wals;
            }
        }
        if !mem.is_empty() {
            let wal = mem_wal.unwrap_or(log_number);
            replay.memtable(self, mem, wal, mem_logs, &mut logs)?;
        }
        if let Replay::Keep(kept) = &replay {
            // Every log the kept memtables point into stays pinned until their flushes (GC must not
            // collect a record only they reference); those outside the
            // Version (found whole by the replay) are adopted, readable
            // until those flushes install them.
            let mut adopted = BTreeSet::new();
            for k in kept.iter() {
                adopted.extend(
                    k.log_refs
                        .keys()
                        .filter(|n| logs.0.get(n).is_some_and(|l| l.records() > 0)),
                );
                self.logs
                    .pin(&k.log_refs.iter().map(|(&n, &c)| (n, c)).collect::<Vec<_>>());
            }
            for n in adopted {
                let records = logs.0.get(&n).map_or(0, |l| l.records() as u64);
                self.logs.adopt_cut(n, records)?;
            }
        }
        self.visible_seq.store(max_seq, Ordering::Release);
        Ok(())
    }

    /// The value logs the handles of `batch` point into, one per handle, if
    /// every record they name outside the Version is intact in its log;
    /// `None` if one is missing or damaged.
    fn values_present(
        &self,
        batch: &WriteBatch,
        logs: &mut RecoveredLogs,
    ) -> Result<Option<Vec<FileNumber>>> {
        let version = self.versions.lock().current();
        let mut points_into = Vec::new();
        for e in batch.entries() {
            let e = e?;
            if !e.kind.is_ref() {
                continue;
            }
            // The batch decoded, so its handles do.
            let raw = expiry::split(e.kind, e.value)
                .map_err(|d| Error::corruption("<replayed batch>", 0, d.0))?
                .value;
            let h = ValueHandle::decode(raw).map_err(|d| {
                Error::corruption("<replayed batch>", 0, format!("value handle: {}", d.0))
            })?;
            points_into.push(h.logical_file);
            if version.physical_file(h.logical_file).is_some() {
                continue;
            }
            let log = match logs.0.entry(h.logical_file) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => v.insert(RecoveredLog::open(
                    self.fs.as_ref(),
                    &self.dir,
                    h.logical_file,
                )?),
            };
            if !log.holds(&h) {
                return Ok(None);
            }
        }
        Ok(Some(points_into))
    }

    /// WAL `number`, replayed after `previous`, whose header names `named`
    /// as the WAL before it: the two must agree.
    fn check_wal_chain(
        &self,
        previous: Option<FileNumber>,
        number: FileNumber,
        named: Option<FileNumber>,
    ) -> Result<()> {
        let (Some(previous), Some(named)) = (previous, named) else {
            return Ok(());
        };
        if named > previous {
            return Err(Error::corruption(
                filename::wal(&self.dir, named),
                0,
                format!("WAL missing: {number}.wal names it as the WAL before it"),
            ));
        }
        if named < previous {
            return Err(Error::corruption(
                filename::wal(&self.dir, number),
                0,
                format!("header names {named}.wal as the WAL before it, but {previous}.wal is"),
            ));
        }
        Ok(())
    }

    /// Writes a replayed memtable to L0, and installs the value logs it
    /// points into that no earlier replayed memtable installed.
    fn flush_recovered(
        &self,
        mem: &Arc<MemTable>,
        mem_logs: &LogRefs,
        logs: &mut RecoveredLogs,
        edit: &mut VersionEdit,
    ) -> Result<()> {
        for n in mem_logs.keys() {
            let Some(log) = logs.0.get_mut(n) else {
                continue;
            };
            let direct = self.opts.use_direct_io_for_flush_and_compaction;
            if let Some(summary) = log.install(self.fs.as_ref(), direct)? {
                edit.add_value_file(value_file_meta(&summary));
            }
        }
        // What earlier replayed memtables wrote is in `edit`, not applied
        // yet: this one's deltas go to the buckets as that edit leaves them.
        let version = self
            .versions
            .lock()
            .current()
            .apply(edit.clone())
            .map_err(|reason| Error::corruption(&self.dir, 0, reason))?;
        let (outputs, deltas) = self.write_memtable(mem, &version, Vec::new(), &|_| {})?;
        self.count_delta_output(&deltas);
        outputs.add_to(edit, 0);
        deltas.add_to(edit);
        Ok(())
    }

    /// Removes files of ours that no live state names but those in `keep`
    /// (value logs memtables kept in memory point into): leftovers of a
    /// crash in the middle of a flush, compaction or manifest rotation.
    fn remove_orphans(&self, keep: &BTreeSet<FileNumber>) -> Result<()> {
        let (live, log_number, manifest) = {
            let v = self.versions.lock();
            (v.live_file_numbers(), v.log_number(), v.manifest_number())
        };
        for name in self.fs.list(&self.dir)? {
            let Some((kind, number)) = filename::parse(&name) else {
                continue;
            };
            let orphan = match kind {
                FileKind::Sstable | FileKind::ValueFile | FileKind::DeltaFile => {
                    !live.contains(&number) && !keep.contains(&number)
                }
                FileKind::Wal => number < log_number,
                FileKind::Manifest => number != manifest,
                FileKind::Temp => true,
                FileKind::Current | FileKind::Lock => false,
            };
            if orphan {
                self.fs.remove(&self.dir.join(&name))?;
            }
        }
        Ok(())
    }
}
