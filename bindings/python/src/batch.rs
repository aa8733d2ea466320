//! `cleave.WriteBatch`: updates applied together, atomically.

use cleave::{Clock, SystemClock, WriteBatch};
use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::bytes::extract;
use crate::db::PyDb;
use crate::options;

/// Puts, deletes and merges applied atomically: all of them or none.
///
/// From `Db.write_batch()`, use it in a `with` block: the batch is written
/// when the block exits cleanly and discarded if it raises. Or make one
/// with `cleave.WriteBatch()` and apply it with `Db.write(batch)`. Adding
/// to it copies the bytes and does no I/O; a batch is emptied once
/// written.
#[pyclass(name = "WriteBatch", module = "cleave", frozen)]
pub(crate) struct PyWriteBatch {
    /// The database a `with` block writes to.
    db: Option<Py<PyDb>>,
    sync: Option<bool>,
    /// Locked only with the arguments extracted: nothing holding it waits
    /// for the GIL.
    batch: Mutex<WriteBatch>,
}

impl PyWriteBatch {
    pub(crate) fn for_db(db: Py<PyDb>, sync: Option<bool>) -> Self {
        PyWriteBatch {
            db: Some(db),
            sync,
            batch: Mutex::new(WriteBatch::new()),
        }
    }

    /// The updates, leaving the batch empty.
    pub(crate) fn take(&self) -> WriteBatch {
        std::mem::take(&mut *self.batch.lock())
    }
}

#[pymethods]
impl PyWriteBatch {
    /// An empty batch, for `Db.write(batch)`.
    #[new]
    fn py_new() -> Self {
        PyWriteBatch {
            db: None,
            sync: None,
            batch: Mutex::new(WriteBatch::new()),
        }
    }

    /// Adds: set `key` to `value` (copied now; no I/O), with `ttl` (as
    /// `Db.put`'s, counted from this call) if given. Raises `TypeError` for
    /// a key or value that is not bytes-like.
    #[pyo3(signature = (key, value, ttl=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let key = extract(key, "key")?;
        let value = extract(value, "value")?;
        match ttl {
            Some(t) => {
                let at = SystemClock.expiry_after(options::ttl(py, t)?);
                self.batch.lock().put_with_expiry(&key, &value, at);
            }
            None => self.batch.lock().put(&key, &value),
        }
        Ok(())
    }

    /// Adds: remove `key` (no I/O). Raises `TypeError` for a key that is
    /// not bytes-like.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = extract(key, "key")?;
        self.batch.lock().delete(&key);
        Ok(())
    }

    /// Adds: a merge operand for `key` (see `Db.merge`; no I/O). The
    /// database refuses the whole batch when it is written if it has no
    /// merge operator (`cleave.InvalidArgumentError`).
    fn merge(&self, key: &Bound<'_, PyAny>, operand: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = extract(key, "key")?;
        let operand = extract(operand, "operand")?;
        self.batch.lock().merge(&key, &operand);
        Ok(())
    }

    /// `batch[key] = value`: `put`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None)
    }

    /// `del batch[key]`: `delete`.
    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(key)
    }

    /// The number of updates in the batch.
    fn __len__(&self) -> usize {
        self.batch.lock().len()
    }

    /// Removes every update from the batch.
    fn clear(&self) {
        self.batch.lock().clear();
    }

    /// Starts a `with` block: returns the batch. Raises `TypeError` for a
    /// batch made by `cleave.WriteBatch()`, which has no database to write
    /// to at the block's end.
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        if slf.get().db.is_none() {
            return Err(PyTypeError::new_err(
                "this WriteBatch belongs to no database: use `with db.write_batch() as batch:`, \
                 or pass it to Db.write",
            ));
        }
        Ok(slf)
    }

    /// Writes the batch atomically when the `with` block exits cleanly;
    /// discards it when the block raised (the exception is not
    /// suppressed). Raises what `Db.write` raises.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let batch = self.take();
        if !exc_type.is_none() {
            return Ok(false);
        }
        if let Some(db) = &self.db {
            db.get().write_batch_now(py, batch, self.sync)?;
        }
        Ok(false)
    }
}
