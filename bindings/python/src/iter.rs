//! `Db.keys()`, `values()` and `items()`: Python iterators over an engine
//! iterator, which holds the view (the sequence number, memtables and
//! files) of the moment it was made. Entries are fetched in batches, with
//! the GIL released, that grow from one entry to `MAX_BATCH_ENTRIES` (or
//! `MAX_BATCH_BYTES`): a loop that stops early reads little ahead, a long
//! scan pays one GIL release per batch.

use std::collections::VecDeque;
use std::sync::Arc;

use cleave::DbIterator;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::bytes::extract_optional;
use crate::db::PyDb;
use crate::error::to_py;

const MAX_BATCH_ENTRIES: usize = 256;
const MAX_BATCH_BYTES: usize = 1 << 20;

/// What an iterator yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Keys,
    Values,
    Items,
}

/// The keys an iterator walks: `[lower, upper)`, ascending or descending.
#[derive(Clone, Debug, Default)]
pub(crate) struct Range {
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
    pub reverse: bool,
}

impl Range {
    /// `start` inclusive, `stop` exclusive, and with `prefix` only the keys
    /// that start with it (the intersection, when both are given).
    pub(crate) fn new(
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Range> {
        let mut lower = extract_optional(start, "start")?;
        let mut upper = extract_optional(stop, "stop")?;
        if let Some(p) = extract_optional(prefix, "prefix")? {
            if let Some(end) = successor(&p) {
                upper = Some(match upper {
                    Some(u) if u < end => u,
                    _ => end,
                });
            }
            lower = Some(match lower {
                Some(l) if l > p => l,
                _ => p,
            });
        }
        Ok(Range {
            lower,
            upper,
            reverse,
        })
    }

    /// True if no key can be in the range.
    pub(crate) fn is_empty(&self) -> bool {
        matches!((&self.lower, &self.upper), (Some(l), Some(u)) if l >= u)
    }
}

/// The first key after every key that starts with `prefix`: the prefix
/// with its trailing 0xff bytes dropped and its last byte incremented, or
/// none when it is all 0xff (or empty), whose keys run to the end.
pub(crate) fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

type Entry = (Vec<u8>, Vec<u8>);

/// An iterator's engine iterator and what it has fetched. Locked after the
/// database's lock, never before, and never held while waiting for the
/// GIL.
pub(crate) struct IterState {
    /// `None` once exhausted, failed or released (the database closed).
    it: Option<DbIterator>,
    mode: Mode,
    reverse: bool,
    started: bool,
    fetched: VecDeque<Entry>,
    /// An error met after the entries in `fetched`, raised after them.
    error: Option<cleave::Error>,
    next_batch: usize,
}

impl IterState {
    pub(crate) fn new(it: Option<DbIterator>, mode: Mode, reverse: bool) -> Self {
        IterState {
            it,
            mode,
            reverse,
            started: false,
            fetched: VecDeque::new(),
            error: None,
            next_batch: 1,
        }
    }

    /// Drops the engine iterator (and the files and memtables it pins).
    pub(crate) fn release(&mut self) {
        self.it = None;
        self.fetched.clear();
    }

    fn finished(&self) -> bool {
        self.it.is_none() && self.fetched.is_empty() && self.error.is_none()
    }

    /// The next entry: fetched already, or fetched now with a batch after
    /// it. Blocks on I/O: call it detached.
    fn next_entry(&mut self) -> cleave::Result<Option<Entry>> {
        if self.fetched.is_empty() && self.error.is_none() {
            self.fetch();
        }
        if let Some(entry) = self.fetched.pop_front() {
            return Ok(Some(entry));
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// Fetches the next batch; an error is kept for after the entries
    /// fetched before it, and ends the iteration.
    fn fetch(&mut self) {
        let Some(it) = self.it.as_mut() else {
            return;
        };
        let batch = self.next_batch;
        self.next_batch = (batch * 2).min(MAX_BATCH_ENTRIES);
        let fetched = fetch_batch(
            it,
            &mut self.fetched,
            FetchPlan {
                first: !self.started,
                reverse: self.reverse,
                values: self.mode != Mode::Keys,
                entries: batch,
            },
        );
        self.started = true;
        match fetched {
            Ok(true) => {}
            Ok(false) => self.it = None,
            Err(e) => {
                self.error = Some(e);
                self.it = None;
            }
        }
    }
}

struct FetchPlan {
    first: bool,
    reverse: bool,
    values: bool,
    entries: usize,
}

/// Appends up to `plan.entries` entries (or `MAX_BATCH_BYTES`) to `out`,
/// and moves past them; false once the iterator is exhausted.
fn fetch_batch(
    it: &mut DbIterator,
    out: &mut VecDeque<Entry>,
    plan: FetchPlan,
) -> cleave::Result<bool> {
    if plan.first {
        if plan.reverse {
            it.seek_to_last()?;
        } else {
            it.seek_to_first()?;
        }
    }
    let (mut entries, mut bytes) = (0, 0);
    while it.valid() && entries < plan.entries && bytes < MAX_BATCH_BYTES {
        let key = it.key().to_vec();
        let value = if plan.values {
            it.value()?.to_vec()
        } else {
            Vec::new()
        };
        entries += 1;
        bytes += key.len() + value.len();
        out.push_back((key, value));
        if plan.reverse {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    if it.valid() {
        return Ok(true);
    }
    it.status()?;
    Ok(false)
}

/// An iterator over a database's keys, values or `(key, value)` items, in
/// key order (or reverse order), as of the moment it was made: writes made
/// after that are not seen. Made by `Db.keys()`, `Db.values()`,
/// `Db.items()` (and a `Snapshot`'s). Entries are read lazily, a growing
/// batch at a time with the GIL released. Raises `cleave.ClosedError` once
/// its database is closed, and the engine's error (for example
/// `cleave.CorruptionError`) if a read fails, after the entries before it.
#[pyclass(name = "Iterator", module = "cleave", frozen)]
pub(crate) struct PyIter {
    db: Py<PyDb>,
    state: Arc<Mutex<IterState>>,
}

impl PyIter {
    pub(crate) fn new(db: Py<PyDb>, state: Arc<Mutex<IterState>>) -> Self {
        PyIter { db, state }
    }

    fn entry<'py>(py: Python<'py>, mode: Mode, entry: Entry) -> PyResult<Bound<'py, PyAny>> {
        let (key, value) = entry;
        Ok(match mode {
            Mode::Keys => PyBytes::new(py, &key).into_any(),
            Mode::Values => PyBytes::new(py, &value).into_any(),
            Mode::Items => {
                PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])?.into_any()
            }
        })
    }
}

#[pymethods]
impl PyIter {
    /// The iterator itself.
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The next key, value or item: one fetched already (no I/O, the GIL
    /// kept), or the first of a new batch read with the GIL released.
    /// Raises `StopIteration` at the end, `cleave.ClosedError` once the
    /// database is closed, the engine's error on a failed read.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let db = self.db.get();
        if db.is_closed() {
            // Close released it, unless it was made after.
            if let Some(mut st) = self.state.try_lock() {
                st.release();
            }
            return Err(to_py(py, cleave::Error::Closed));
        }
        // Without waiting: an entry fetched already, or the end.
        if let Some(mut st) = self.state.try_lock() {
            let mode = st.mode;
            if let Some(entry) = st.fetched.pop_front() {
                drop(st);
                return Self::entry(py, mode, entry).map(Some);
            }
            if st.finished() {
                return Ok(None);
            }
        }
        let state = &self.state;
        let next = py.detach(|| {
            db.with_open(|_| {
                let mut st = state.lock();
                let mode = st.mode;
                st.next_entry().map(|e| e.map(|e| (mode, e)))
            })
        });
        match next {
            Ok(Some((mode, entry))) => Self::entry(py, mode, entry).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(to_py(py, e)),
        }
    }
}
