//! `cleave.Snapshot`: reads as of one moment.

use cleave::{Db, ReadOptions, Snapshot};
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::bytes::{extract, value_or_default, value_or_key_error};
use crate::db::PyDb;
use crate::error::{new_error, to_py, Kind};
use crate::iter::{Mode, PyIter, Range};

/// A consistent view of a database as of `Db.snapshot()`: its reads see
/// exactly the writes made before it, whatever is written after. Has the
/// read methods of `Db` (`get`, `[]`, `in`, `keys`, `values`, `items`).
/// Released by `close()`, at the end of a `with` block, or when garbage
/// collected; until then compaction keeps every version it can see.
/// Reads after its release raise `cleave.ClosedError`, as do reads after
/// its database is closed.
#[pyclass(name = "Snapshot", module = "cleave", frozen)]
pub(crate) struct PySnapshot {
    db: Py<PyDb>,
    /// Locked before the database's lock, never after.
    snapshot: RwLock<Option<Snapshot>>,
}

impl PySnapshot {
    pub(crate) fn new(db: Py<PyDb>, snapshot: Snapshot) -> Self {
        PySnapshot {
            db,
            snapshot: RwLock::new(Some(snapshot)),
        }
    }

    /// Runs `f` with the GIL released on the open database and this
    /// snapshot; `cleave.ClosedError` once either is gone.
    pub(crate) fn read<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Db, &Snapshot) -> cleave::Result<T> + Send,
    ) -> PyResult<T> {
        let db = self.db.get();
        let result = py.detach(|| {
            let guard = self.snapshot.read();
            let snapshot = guard.as_ref()?;
            Some(db.with_open(|engine| f(engine, snapshot)))
        });
        match result {
            Some(r) => r.map_err(|e| to_py(py, e)),
            None => Err(new_error(py, Kind::Closed, "snapshot has been released")),
        }
    }

    fn value_of(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let key = extract(key, "key")?;
        self.read(py, |db, snapshot| {
            let ro = ReadOptions {
                snapshot: Some(snapshot),
                ..ReadOptions::new()
            };
            db.get(&ro, &key)
        })
    }

    fn iterator(
        slf: &Bound<'_, Self>,
        mode: Mode,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIter> {
        let range = Range::new(start, stop, prefix, reverse)?;
        let snapshot = slf.get();
        PyDb::iterator(snapshot.db.bind(slf.py()), Some(snapshot), mode, range)
    }
}

#[pymethods]
impl PySnapshot {
    /// The sequence number of the last write the snapshot sees; `None`
    /// once released.
    #[getter]
    fn sequence_number(&self) -> Option<u64> {
        self.snapshot.read().as_ref().map(Snapshot::sequence_number)
    }

    /// The value of `key` as of the snapshot, or `default`. Costs what
    /// `Db.get` does.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(value_or_default(py, self.value_of(py, key)?, default))
    }

    /// `snapshot[key]`: the value as of the snapshot; `KeyError` if none.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        value_or_key_error(py, self.value_of(py, key)?, key)
    }

    /// `key in snapshot`: whether `key` had a value as of the snapshot.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = extract(key, "key")?;
        self.read(py, |db, snapshot| {
            let ro = ReadOptions {
                snapshot: Some(snapshot),
                ..ReadOptions::new()
            };
            db.contains(&ro, &key)
        })
    }

    /// `iter(snapshot)`: its keys in order.
    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<PyIter> {
        PySnapshot::iterator(slf, Mode::Keys, None, None, false, None)
    }

    /// The keys as of the snapshot; the arguments are `Db.keys`'s.
    #[pyo3(signature = (start=None, stop=None, reverse=false, prefix=None))]
    fn keys(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIter> {
        PySnapshot::iterator(slf, Mode::Keys, start, stop, reverse, prefix)
    }

    /// The values as of the snapshot; the arguments are `Db.keys`'s.
    #[pyo3(signature = (start=None, stop=None, reverse=false, prefix=None))]
    fn values(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIter> {
        PySnapshot::iterator(slf, Mode::Values, start, stop, reverse, prefix)
    }

    /// `(key, value)` pairs as of the snapshot; the arguments are
    /// `Db.keys`'s.
    #[pyo3(signature = (start=None, stop=None, reverse=false, prefix=None))]
    fn items(
        slf: &Bound<'_, Self>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyIter> {
        PySnapshot::iterator(slf, Mode::Items, start, stop, reverse, prefix)
    }

    /// Releases the snapshot, so that compaction may drop what only it
    /// could see. Idempotent. Iterators made from it keep their own view.
    fn close(&self, py: Python<'_>) {
        let released = py.detach(|| self.snapshot.write().take());
        drop(released);
    }

    /// Starts a `with` block: returns the snapshot, released at its end.
    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Releases the snapshot at the end of a `with` block; an exception
    /// from the block is not suppressed.
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> bool {
        self.close(py);
        false
    }
}
