//! The `cleave` Python package's extension module, `cleave._cleave`:
//! cleave's `Db` as a dict of bytes, its iterators, write batches and
//! snapshots, with the GIL released during every engine call. The
//! exception classes and the package's re-exports are in `python/cleave/`.
#![deny(clippy::unwrap_used, clippy::expect_used)]

mod batch;
mod bytes;
mod db;
mod error;
mod iter;
mod options;
mod report;
mod snapshot;

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Opens (by default creating) the cleave database in directory `path`.
///
/// `options` are the fields of the engine's `cleave::Options` by name (see
/// `cleave.default_options()` for all of them and their defaults), with
/// `create_if_missing` True by default, `compression` and
/// `value_compression` by name ("none", "lz4", "zstd"), `merge_operator`
/// a built-in operator's name ("uint64add", "put", "max", "stringappend",
/// "append:SEP", "fieldupdate:FIELDSxLEN"), `prefix_extractor` a fixed
/// prefix length and `range_merge_idle` in seconds; and the default write
/// options of every write: `sync` (fsync the WAL before a write returns,
/// False by default) and `disable_wal`. `read_only=True` opens without
/// writing anything to the directory (no lock: beside a process that has
/// it open, on a full disk or a read-only mount); writes then raise
/// `cleave.ReadOnlyError`. An unknown option, a wrong type or
/// a value the engine refuses raises `cleave.InvalidArgumentError` naming
/// it; a directory another process (or `Db`) holds raises
/// `cleave.LockedError`. Recovery replays the WAL: it costs a read of it.
#[pyfunction]
#[pyo3(signature = (path, **options))]
fn open(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<db::PyDb> {
    db::PyDb::open(py, path, options)
}

/// Every option `cleave.open` takes, with its default, as a dict.
#[pyfunction]
fn default_options(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    options::defaults(py)
}

#[pymodule]
#[pyo3(name = "_cleave")]
fn cleave_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<db::PyDb>()?;
    m.add_class::<iter::PyIter>()?;
    m.add_class::<batch::PyWriteBatch>()?;
    m.add_class::<snapshot::PySnapshot>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(default_options, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
