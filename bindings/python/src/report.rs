//! The engine's reports as Python dicts: every public field by its name,
//! nested structs as dicts, lists of them as lists, durations as float
//! seconds, errors as their messages. The structs are destructured whole,
//! so a field added to one of them fails this build until it is shown.

use std::time::Duration;

use cleave::{
    CacheKindStats, CheckpointInfo, GcStats, LevelSpace, LevelStats, SpaceReport, Stats,
    VerifyReport,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::IntoPyObjectExt;

/// A value of a report field, as Python shows it.
pub(crate) trait Show {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

macro_rules! show_plain {
    ($($t:ty),*) => {$(
        impl Show for $t {
            fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                self.into_bound_py_any(py)
            }
        }
    )*};
}

show_plain!(u64, usize, f64, bool);

impl Show for &str {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.into_bound_py_any(py)
    }
}

impl Show for Duration {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.as_secs_f64().into_bound_py_any(py)
    }
}

impl Show for cleave::WriteState {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_string().into_bound_py_any(py)
    }
}

impl Show for cleave::Error {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_string().into_bound_py_any(py)
    }
}

impl<T: Show> Show for Option<T> {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(v) => v.show(py),
            None => Ok(py.None().into_bound(py)),
        }
    }
}

impl<T: Show> Show for [T] {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let items = self
            .iter()
            .map(|v| v.show(py))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, items)?.into_any())
    }
}

impl<T: Show> Show for Vec<T> {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.as_slice().show(py)
    }
}

impl<T: Show, const N: usize> Show for [T; N] {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.as_slice().show(py)
    }
}

/// `Show` for a struct: a dict of all its fields (listed whole, so that
/// the destructuring fails to compile when the struct grows).
macro_rules! show_struct {
    ($ty:ident { $($field:ident),* $(,)? }) => {
        impl Show for $ty {
            fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(fields(py, self)?.into_any())
            }
        }

        impl Fields for $ty {
            fn fields<'py>(&self, py: Python<'py>, dict: &Bound<'py, PyDict>) -> PyResult<()> {
                let $ty { $($field),* } = self;
                $(dict.set_item(stringify!($field), $field.show(py)?)?;)*
                Ok(())
            }
        }
    };
}

/// A struct's fields into a dict.
pub(crate) trait Fields {
    fn fields<'py>(&self, py: Python<'py>, dict: &Bound<'py, PyDict>) -> PyResult<()>;
}

/// `value`'s fields as a new dict.
pub(crate) fn fields<'py>(py: Python<'py>, value: &impl Fields) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    value.fields(py, &dict)?;
    Ok(dict)
}

show_struct!(GcStats {
    jobs,
    failed_jobs,
    files_in,
    files_out,
    tables_read,
    records_kept,
    records_dropped,
    index_bytes_read,
    value_bytes_read,
    bytes_written,
    bytes_reclaimed,
    bitmap_time,
    index_time,
    value_read_time,
    write_time,
    commit_time,
    throttle_time,
});

show_struct!(LevelStats {
    files,
    bytes,
    value_bytes,
    target_bytes,
    score,
});

show_struct!(CacheKindStats {
    kind,
    hits,
    misses,
    usage,
});

show_struct!(Stats {
    write_state,
    no_space_stops,
    resumes,
    jobs_postponed,
    fs_free_bytes,
    levels,
    user_bytes_written,
    user_writes,
    wal_bytes_written,
    wal_syncs,
    wals_recycled,
    flush_bytes_written,
    flushes,
    value_file_bytes_written,
    value_files_written,
    hot_value_file_bytes_written,
    value_log_bytes_written,
    value_log_records,
    value_logs_created,
    recent_value_cache_usage,
    recent_value_hits,
    drop_cache_usage,
    drop_cache_capacity,
    value_reads,
    value_read_bytes,
    disk_reads,
    disk_read_bytes,
    gets,
    get_disk_reads,
    gets_by_disk_reads,
    multi_gets,
    multi_get_keys,
    multi_get_disk_reads,
    prefix_filter_checked,
    prefix_filter_useful,
    compaction_bytes_read,
    compaction_bytes_written,
    compaction_value_bytes_written,
    compaction_values_reseparated,
    compactions,
    range_merges,
    trivial_moves,
    entries_dropped,
    merges_full,
    merge_operands_combined,
    merges_failed,
    expired_entries,
    expired_value_bytes,
    compaction_filter_calls,
    compaction_filter_removed,
    compaction_filter_changed,
    compaction_filter_value_reads,
    compaction_filter_value_bytes_read,
    compaction_filter_lookups,
    delta_bytes_written,
    delta_buckets_collected,
    delta_bucket_splits,
    delta_bucket_merges,
    delta_buckets_folded,
    delta_records_dropped,
    delta_reads,
    delta_reads_overlapped,
    stall_micros,
    slowdown_writes,
    stopped_writes,
    memtable_stall_micros,
    budget_stall_micros,
    budget_slowdown_writes,
    budget_stopped_writes,
    budget_impossible,
    space_usage_bytes,
    space_budget_bytes,
    space_reclaim_rate,
    gc_max_jobs,
    gc_rate_limit,
    immutable_memtables,
    memtable_bytes,
    block_cache_usage,
    block_cache_hits,
    block_cache_misses,
    block_cache_capacity,
    delta_memory_bytes,
    block_cache_kinds,
    gc,
    last_gc,
});

/// A level's space, with its compensated bytes (sstable plus referenced
/// value bytes), which the engine computes rather than stores.
impl Show for LevelSpace {
    fn show<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let LevelSpace {
            sstable_bytes,
            value_bytes,
        } = self;
        let dict = PyDict::new(py);
        dict.set_item("sstable_bytes", sstable_bytes)?;
        dict.set_item("value_bytes", value_bytes)?;
        dict.set_item("compensated_bytes", self.compensated_bytes())?;
        Ok(dict.into_any())
    }
}

show_struct!(SpaceReport {
    levels,
    sstable_bytes,
    value_files,
    value_file_bytes,
    referenced_value_bytes,
    exposed_garbage_bytes,
    delta_files,
    delta_file_bytes,
    delta_bucket_bytes,
    delta_garbage_bytes,
    delta_buckets,
    s_index,
    exposed_garbage_ratio,
    hidden_garbage_bytes,
    index_pressure,
    value_pressure,
    gc_max_jobs,
    pool_threads,
    gc_rate_limit,
    budget_usage_bytes,
    budget_bytes,
    wal_bytes,
    manifest_bytes,
    other_bytes,
    on_disk_bytes,
    gc,
});

show_struct!(CheckpointInfo {
    files_linked,
    files_copied,
    bytes_copied,
    last_sequence,
});

show_struct!(VerifyReport {
    sstables,
    entries,
    value_handles,
    value_files,
    value_records,
    referenced_value_bytes,
    garbage_bytes,
    delta_files,
    delta_buckets,
    delta_records,
    problems,
});

/// `Db.verify()`'s dict: the report's fields and `ok`.
pub(crate) fn verify<'py>(py: Python<'py>, report: &VerifyReport) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("ok", report.is_ok())?;
    report.fields(py, &dict)?;
    Ok(dict)
}
