//! `cleave.Db`: an open database that behaves like a dict of bytes.
//!
//! Every engine call runs with the GIL released (`Python::detach`), under
//! a read lock of the slot holding the engine's `Db`; `close` takes the
//! write lock, so it waits for the calls in flight and every later call
//! finds the slot empty (`cleave.ClosedError`). Locks are only taken
//! detached, or briefly where nothing that holds them waits for the GIL.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use cleave::{Db, ReadOptions, WriteOptions};
use parking_lot::{Mutex, RwLock};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::batch::PyWriteBatch;
use crate::bytes::{extract, extract_optional, value_or_default, value_or_key_error};
use crate::error::{invalid_argument, OrRaise};
use crate::iter::{IterState, Mode, PyIter, Range};
use crate::options::{self, OpenOptions};
use crate::report;
use crate::snapshot::PySnapshot;

/// A key above every key a write accepts (the engine refuses keys over
/// 64 KiB): the end of "the whole range" for `estimate_num_keys`, which
/// takes no unbounded end.
static PAST_LAST_KEY: LazyLock<Vec<u8>> = LazyLock::new(|| vec![0xff; (64 << 10) + 1]);

/// An open cleave database: a persistent, sorted dict of bytes to bytes.
///
/// Made by `cleave.open(path, **options)` (or `cleave.Db(path, **options)`).
/// Keys and values are bytes; `bytearray`, `memoryview` and other buffers
/// are accepted (copied), `str` raises `TypeError`. Safe to share between
/// threads: every engine call releases the GIL. Close it with `close()` or
/// a `with` block; a database dropped unclosed is closed by the garbage
/// collector, with the GIL held.
#[pyclass(name = "Db", module = "cleave", frozen)]
pub(crate) struct PyDb {
    db: RwLock<Option<Db>>,
    closed: AtomicBool,
    path: PathBuf,
    write: WriteOptions,
    /// The states of the iterators made, released at close.
    iterators: Mutex<Vec<Weak<Mutex<IterState>>>>,
}

impl PyDb {
    pub(crate) fn open(
        py: Python<'_>,
        path: PathBuf,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyDb> {
        let OpenOptions {
            engine,
            write,
            read_only,
        } = options::parse(py, kwargs)?;
        let opened = py.detach(|| {
            if read_only {
                Db::open_read_only(&path, engine)
            } else {
                Db::open(&path, engine)
            }
        });
        let db = opened.or_raise(py)?;
        Ok(PyDb {
            db: RwLock::new(Some(db)),
            closed: AtomicBool::new(false),
            path,
            write,
            iterators: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Runs `f` on the open database; `Error::Closed` once closed. Blocks
    /// while `close` runs: call it detached.
    pub(crate) fn with_open<T>(
        &self,
        f: impl FnOnce(&Db) -> cleave::Result<T>,
    ) -> cleave::Result<T> {
        let guard = self.db.read();
        match guard.as_ref() {
            Some(db) => f(db),
            None => Err(cleave::Error::Closed),
        }
    }

    /// Runs `f` on the open database with the GIL released.
    pub(crate) fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Db) -> cleave::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| self.with_open(f)).or_raise(py)
    }

    /// The write options of a call: the database's, with `sync` if given.
    pub(crate) fn write_options(&self, sync: Option<bool>) -> WriteOptions {
        WriteOptions {
            sync: sync.unwrap_or(self.write.sync),
            ..self.write
        }
    }

    /// Applies `batch` (nothing, if it is empty).
    pub(crate) fn write_batch_now(
        &self,
        py: Python<'_>,
        batch: cleave::WriteBatch,
        sync: Option<bool>,
    ) -> PyResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let wo = self.write_options(sync);
        self.run(py, move |db| db.write(&wo, batch))
    }

    /// An iterator over `range` in `mode`, as of `snapshot` or now.
    pub(crate) fn iterator(
        slf: &Bound<'_, PyDb>,
        snapshot: Option<&PySnapshot>,
        mode: Mode,
        range: Range,
    ) -> PyResult<PyIter> {
        let py = slf.py();
        let db = slf.get();
        // An empty range needs no engine iterator, but is still refused
        // once the database (or the snapshot) is closed, as every call is.
        let make = |engine: &Db, snap: Option<&cleave::Snapshot>| {
            if range.is_empty() {
                return Ok(None);
            }
            let ro = ReadOptions {
                snapshot: snap,
                lower_bound: range.lower.clone(),
                upper_bound: range.upper.clone(),
            };
            Ok::<_, cleave::Error>(Some(engine.iter(&ro)))
        };
        let it = match snapshot {
            Some(s) => s.read(py, |engine, snap| make(engine, Some(snap)))?,
            None => db.run(py, |engine| make(engine, None))?,
        };
        let state = Arc::new(Mutex::new(IterState::new(it, mode, range.reverse)));
        {
            let mut registry = db.iterators.lock();
            registry.retain(|w| w.strong_count() > 0);
            registry.push(Arc::downgrade(&state));
        }
        Ok(PyIter::new(slf.clone().unbind(), state))
    }

    fn value_of(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let key = extract(key, "key")?;
        self.run(py, |db| db.get(&ReadOptions::new(), &key))
    }
}

#[pymethods]
impl PyDb {
    /// Opens (by default creating) the database in directory `path`; the
    /// same as `cleave.open(path, **options)`.
    #[new]
    #[pyo3(signature = (path, **options))]
    fn py_new(
        py: Python<'_>,
        path: PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyDb> {
        PyDb::open(py, path, options)
    }

    /// The database's directory.
    #[getter]
    fn path(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// True once `close()` has been called.
    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// `<cleave.Db "path" open>` (or closed).
    fn __repr__(&self) -> String {
        let state = if self.is_closed() { "closed" } else { "open" };
        format!("<cleave.Db {:?} {state}>", self.path)
    }

    /// The value of `key`, or `default` when it has none. Costs a lookup in
    /// the memtables and the sstables that may hold the key (bloom filters
    /// skip most), and a read of the value file for a separated value.
    /// Raises `TypeError` for a key that is not bytes-like, and the
    /// engine's error (for example `cleave.CorruptionError`) on a failed read.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(value_or_default(py, self.value_of(py, key)?, default))
    }

    /// `db[key]`: the value of `key`; raises `KeyError` when it has none.
    /// Costs what `get` does.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        value_or_key_error(py, self.value_of(py, key)?, key)
    }

    /// `key in db`: whether `key` has a value (`Db::contains`): the
    /// lookups of a get, stopping at the key's entry, so a separated value
    /// is never read.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = extract(key, "key")?;
        self.run(py, |db| db.contains(&ReadOptions::new(), &key))
    }

    /// `db[key] = value`: `put` with the database's default `sync`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None, None)
    }

    /// `del db[key]`: `delete` with the database's default `sync`. Unlike a
    /// dict, raises no `KeyError` for an absent key: a delete is written
    /// blind, without a read.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, None)
    }

    /// `len(db)`: an ESTIMATE of the number of keys, as RocksDB's
    /// `rocksdb.estimate-num-keys`, not a count. Each sstable counts its
    /// entries less twice its deletions, each memtable its keys; a key
    /// overwritten in several files counts more than once until compaction
    /// merges them, so the estimate is high after overwrites and may be
    /// low after deletes. Reads no file, but walks the memtables. For an
    /// exact count, `sum(1 for _ in db)`.
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let n = self.run(py, |db| Ok(db.estimate_num_keys(&[], &PAST_LAST_KEY)))?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// `bool(db)`: whether the database holds any key, exactly (one seek,
    /// unlike `len`).
    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        self.run(py, |db| {
            let mut it = db.iter(&ReadOptions::new());
            it.seek_to_first()?;
            Ok(it.valid())
        })
    }

    /// `iter(db)`: the keys in order, as `keys()`.
    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<PyIter> {
        PyDb::iterator(slf, None, Mode::Keys, Range::default())
    }

    /// The keys in `[start, stop)` (and starting with `prefix`, if given),
    /// ascending, or descending with `reverse=True`, as of now: an
    /// iterator that reads lazily, releasing the GIL for each batch, and
    /// sees none of the writes made after this call. Reads no value.
    /// Raises `TypeError` for bounds that are not bytes-like.
    #[pyo3(signature = (start=None, stop=None, reverse=false, prefix=None))]
    fn keys(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIter> {
        let range = Range::new(start, stop, prefix, reverse)?;
        PyDb::iterator(slf, None, Mode::Keys, range)
    }

    /// The values of the keys `keys()` would give, in the same order;
    /// reads each separated value from its value file (a forward scan
    /// prefetches them in batches).
    #[pyo3(signature = (start=None, stop=None, reverse=false, prefix=None))]
    fn values(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIter> {
        let range = Range::new(start, stop, prefix, reverse)?;
        PyDb::iterator(slf, None, Mode::Values, range)
    }

    /// `(key, value)` pairs of the keys `keys()` would give, in the same
    /// order (see `keys` for the arguments and `values` for the cost).
    #[pyo3(signature = (start=None, stop=None, reverse=false, prefix=None))]
    fn items(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIter> {
        let range = Range::new(start, stop, prefix, reverse)?;
        PyDb::iterator(slf, None, Mode::Items, range)
    }

    /// Sets `key` to `value`. Appends to the WAL (synced with `sync=True`,
    /// or the database's default) and the memtable; waits only when
    /// writes stall (memtables full, too many L0 files, the space budget).
    /// Raises `cleave.InvalidArgumentError` for a key over 64 KiB or a value
    /// over 1 GiB, `cleave.SpaceBudgetExceededError` with
    /// `space_budget_fail_writes`, `cleave.PoisonedError` after an earlier
    /// failed write. With `ttl` (seconds, or a `datetime.timedelta`), the
    /// key reads as absent once that much time has passed, and compaction
    /// frees the value without reading it; a `ttl` that is not a positive
    /// number raises `cleave.InvalidArgumentError`.
    #[pyo3(signature = (key, value, sync=None, ttl=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: Option<bool>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let key = extract(key, "key")?;
        let value = extract(value, "value")?;
        let ttl = ttl.map(|t| options::ttl(py, t)).transpose()?;
        let wo = self.write_options(sync);
        self.run(py, |db| match ttl {
            Some(ttl) => db.put_with_ttl(&wo, &key, &value, ttl),
            None => db.put(&wo, &key, &value),
        })
    }

    /// Removes `key` (written blind: no error if it has no value). Costs a
    /// write, as `put`.
    #[pyo3(signature = (key, sync=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: Option<bool>) -> PyResult<()> {
        let key = extract(key, "key")?;
        let wo = self.write_options(sync);
        self.run(py, |db| db.delete(&wo, &key))
    }

    /// Writes a merge operand for `key`, which the database's merge
    /// operator (option `merge_operator`, for example "uint64add")
    /// combines with the key's value when it is read or compacted; no read
    /// now. Raises `cleave.InvalidArgumentError` when the database has no
    /// merge operator or the operator refuses the operand.
    #[pyo3(signature = (key, operand, sync=None))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let key = extract(key, "key")?;
        let operand = extract(operand, "operand")?;
        let wo = self.write_options(sync);
        self.run(py, |db| db.merge(&wo, &key, &operand))
    }

    /// A write batch of this database, to use in a `with` block: its puts,
    /// deletes and merges are applied atomically when the block exits
    /// cleanly (with `sync`, or the database's default), and discarded if
    /// it raises.
    #[pyo3(signature = (sync=None))]
    fn write_batch(slf: &Bound<'_, Self>, sync: Option<bool>) -> PyWriteBatch {
        PyWriteBatch::for_db(slf.clone().unbind(), sync)
    }

    /// Applies `batch` atomically, and empties it (whether or not the
    /// write succeeds). Costs one WAL append for the whole batch.
    #[pyo3(signature = (batch, sync=None))]
    fn write(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyWriteBatch>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let batch = batch.get().take();
        self.write_batch_now(py, batch, sync)
    }

    /// A snapshot of the database as of now: reads through it see exactly
    /// the writes made before it. Released by `close()`, at the end of a
    /// `with` block, or when garbage collected; until then compaction
    /// keeps the versions it can see (space).
    fn snapshot(slf: &Bound<'_, Self>) -> PyResult<PySnapshot> {
        let py = slf.py();
        let snapshot = slf.get().run(py, |db| Ok(db.snapshot()))?;
        Ok(PySnapshot::new(slf.clone().unbind(), snapshot))
    }

    /// Writes the memtable to an sstable (and its large values to value
    /// files) and waits until that is durable. Costs a write of the
    /// memtable's bytes and an fsync.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Db::flush)
    }

    /// Compacts every level overlapping `[start, stop]` (`None`: unbounded;
    /// the engine takes `stop` inclusive) down to the last level with data,
    /// and waits for it. Costs reading and rewriting those sstables (not
    /// the separated values, except where correlated compaction moves
    /// them): seconds to minutes on a large database.
    #[pyo3(signature = (start=None, stop=None))]
    fn compact(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let start = extract_optional(start, "start")?;
        let stop = extract_optional(stop, "stop")?;
        self.run(py, |db| db.compact_range(start.as_deref(), stop.as_deref()))
    }

    /// Runs value-file garbage collection now: every value file whose
    /// garbage ratio reaches `ratio` (default: option `gc_garbage_ratio`),
    /// in (0, 1], is rewritten without its dead values. Returns what the
    /// jobs did (a dict of the engine's GcStats, times in seconds). Costs
    /// reading those files' live values and writing them again.
    #[pyo3(signature = (ratio=None))]
    fn gc<'py>(&self, py: Python<'py>, ratio: Option<f64>) -> PyResult<Bound<'py, PyDict>> {
        if let Some(r) = ratio {
            if !(r > 0.0 && r <= 1.0) {
                return Err(invalid_argument(
                    py,
                    format!("gc ratio must be in (0, 1], not {r}"),
                ));
            }
        }
        let stats = self.run(py, |db| match ratio {
            Some(r) => db.gc_with_ratio(r),
            None => db.gc_now(),
        })?;
        report::fields(py, &stats)
    }

    /// The engine's statistics as a dict (every field of `cleave::Stats`;
    /// `levels` a list of seven dicts, `gc` and `last_gc` dicts). Cheap:
    /// counters, no I/O.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.run(py, |db| Ok(db.stats()))?;
        report::fields(py, &stats)
    }

    /// Where the disk space goes, as a dict (every field of
    /// `cleave::SpaceReport`; `levels` a list of dicts). Lists the
    /// directory and measures each file.
    fn space_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let space = self.run(py, Db::space_report)?;
        report::fields(py, &space)
    }

    /// Checks the whole database: every checksum, that the manifest
    /// describes the files, key order, file sizes, that every value handle
    /// resolves, and the garbage counters. Returns a dict with `ok` (no
    /// problem found), what was checked, and `problems` (a list of
    /// messages, each naming its file); raises nothing for problems
    /// found. Costs a read of every file.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let verified = self.run(py, |db| Ok(db.verify()))?;
        report::verify(py, &verified)
    }

    /// Reads every block of every live sstable and every record of every
    /// live value file and checks its checksum; raises the first error
    /// (`cleave.CorruptionError`, naming the file). Costs a read of every
    /// file.
    fn verify_checksums(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Db::verify_checksums)
    }

    /// Makes a consistent copy of the database in directory `path` (which
    /// must not exist, or be empty), which opens as a database of its own.
    /// Flushes the memtables, then hard-links the files (copies them across
    /// file systems). Returns a dict of the engine's CheckpointInfo.
    /// Raises `cleave.InvalidArgumentError` for a non-empty directory.
    fn checkpoint<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let info = self.run(py, |db| db.checkpoint(&path))?;
        report::fields(py, &info)
    }

    /// A named property, as RocksDB's GetProperty ("cleave.stats",
    /// "cleave.levelstats", "cleave.num-files-at-level<N>", ...; the
    /// "rocksdb." prefix works too), or `None` for an unknown name.
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        self.run(py, |db| Ok(db.property(name)))
    }

    /// Makes every write acknowledged so far durable (the value logs, then
    /// the WAL): a writer that does not sync each write bounds what a crash
    /// may lose. Costs an fsync.
    fn sync_wal(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Db::sync_wal)
    }

    /// Takes writes again after a full disk made the database read-only
    /// (`cleave.NoSpaceError`), at once rather than at its next look at
    /// the free space: flushes what is pending. Raises `NoSpaceError` if
    /// there is still no room.
    fn resume(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Db::resume)
    }

    /// Whether the database takes writes: "read-write", or why not.
    #[getter]
    fn write_state(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |db| Ok(db.write_state().to_string()))
    }

    /// Waits until no flush, compaction or GC job is pending or running.
    fn wait_for_compactions(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Db::wait_for_compactions)
    }

    /// Closes the database: waits for the calls in flight and background
    /// work, makes unlogged writes durable, and releases the directory's
    /// lock and every iterator. Idempotent; every later call (of the
    /// database, its iterators and snapshots) raises `cleave.ClosedError`.
    /// Raises the engine's error if closing finds one (the database is
    /// closed all the same).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        py.detach(|| {
            let db = self.db.write().take();
            let states: Vec<_> = self.iterators.lock().drain(..).collect();
            for state in states.iter().filter_map(Weak::upgrade) {
                state.lock().release();
            }
            match db {
                Some(db) => db.close(),
                None => Ok(()),
            }
        })
        .or_raise(py)
    }

    /// Starts a `with` block: returns the database, closed at its end.
    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Closes the database at the end of a `with` block; an exception from
    /// the block is not suppressed.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}
