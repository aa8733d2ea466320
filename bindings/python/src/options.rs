//! `cleave.open`'s keyword arguments: the fields of `cleave::Options` by
//! name, and the default write options. Every value is type-checked here
//! and range-checked by the engine (`Options::validate`); an unknown name
//! or a wrong type raises `cleave.InvalidArgumentError` naming the option.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use cleave::{Compression, FixedPrefix, MergeOperator, Options, PrefixExtractor, WriteOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use pyo3::IntoPyObjectExt;

use crate::error::invalid_argument;

/// What `cleave.open` opens with.
pub(crate) struct OpenOptions {
    pub engine: Options,
    /// The default of every write's `sync` (and `disable_wal`).
    pub write: WriteOptions,
    /// `Db::open_read_only`: writes nothing to the directory.
    pub read_only: bool,
}

/// How one kind of option is read from Python and shown to it.
trait OptionKind {
    type Value;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self::Value>;
    fn show<'py>(py: Python<'py>, value: &Self::Value) -> PyResult<Bound<'py, PyAny>>;
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

fn wrong_type(py: Python<'_>, name: &str, expected: &str, value: &Bound<'_, PyAny>) -> PyErr {
    invalid_argument(
        py,
        format!("option {name} must be {expected}, not {}", type_name(value)),
    )
}

/// A non-negative integer of type `T`; `bool` is refused, as is a float.
fn integer<T: TryFrom<u64>>(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<T> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(wrong_type(py, name, "an int", value));
    }
    let fits = value
        .extract::<u64>()
        .ok()
        .and_then(|v| T::try_from(v).ok());
    fits.ok_or_else(|| {
        invalid_argument(
            py,
            format!("option {name} must be a non-negative integer that fits, not {value}"),
        )
    })
}

struct Flag;
impl OptionKind for Flag {
    type Value = bool;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        match value.cast::<PyBool>() {
            Ok(b) => Ok(b.is_true()),
            Err(_) => Err(wrong_type(py, name, "a bool", value)),
        }
    }
    fn show<'py>(py: Python<'py>, value: &bool) -> PyResult<Bound<'py, PyAny>> {
        value.into_bound_py_any(py)
    }
}

/// A non-negative integer of the option's type.
struct Int<T>(PhantomData<T>);
impl<T> OptionKind for Int<T>
where
    T: Copy + TryFrom<u64> + for<'py> IntoPyObject<'py>,
{
    type Value = T;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<T> {
        integer(py, name, value)
    }
    fn show<'py>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
        (*value).into_bound_py_any(py)
    }
}

type Count = Int<usize>;
type Size64 = Int<u64>;
type Bits = Int<u32>;

/// A float; an int is taken as one.
struct Real;
impl OptionKind for Real {
    type Value = f64;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
        let number = value.is_instance_of::<PyFloat>() || value.is_instance_of::<PyInt>();
        if value.is_instance_of::<PyBool>() || !number {
            return Err(wrong_type(py, name, "a float", value));
        }
        value
            .extract::<f64>()
            .map_err(|e| invalid_argument(py, format!("option {name}: {e}")))
    }
    fn show<'py>(py: Python<'py>, value: &f64) -> PyResult<Bound<'py, PyAny>> {
        value.into_bound_py_any(py)
    }
}

/// A duration in seconds, as a float or an int.
struct Seconds;
impl OptionKind for Seconds {
    type Value = Duration;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
        let seconds = Real::extract(py, name, value)?;
        Duration::try_from_secs_f64(seconds).map_err(|_| {
            invalid_argument(
                py,
                format!("option {name} must be a non-negative number of seconds, not {seconds}"),
            )
        })
    }
    fn show<'py>(py: Python<'py>, value: &Duration) -> PyResult<Bound<'py, PyAny>> {
        value.as_secs_f64().into_bound_py_any(py)
    }
}

/// A time to live given to `put`: seconds, as an int or a float, or a
/// `datetime.timedelta`; more than 0.
pub(crate) fn ttl(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let seconds = match value.call_method0("total_seconds") {
        Ok(s) => s.extract::<f64>()?,
        Err(_) => Real::extract(py, "ttl", value)?,
    };
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            invalid_argument(
                py,
                format!("ttl must be a positive number of seconds, not {seconds}"),
            )
        })
}

/// `"none"`, `"lz4"` or `"zstd"`.
struct Codec;
impl OptionKind for Codec {
    type Value = Compression;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Compression> {
        let Ok(s) = value.cast::<PyString>() else {
            return Err(wrong_type(py, name, "a str", value));
        };
        match &*s.to_cow()? {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            other => Err(invalid_argument(
                py,
                format!("option {name} must be \"none\", \"lz4\" or \"zstd\", not {other:?}"),
            )),
        }
    }
    fn show<'py>(py: Python<'py>, value: &Compression) -> PyResult<Bound<'py, PyAny>> {
        let name = match value {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        };
        name.into_bound_py_any(py)
    }
}

/// A built-in merge operator by name (`cleave::builtin_merge_operator`),
/// or `None`.
struct MergeByName;
impl OptionKind for MergeByName {
    type Value = Option<Arc<dyn MergeOperator>>;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self::Value> {
        if value.is_none() {
            return Ok(None);
        }
        let Ok(s) = value.cast::<PyString>() else {
            return Err(wrong_type(py, name, "a str or None", value));
        };
        let operator = &*s.to_cow()?;
        match cleave::builtin_merge_operator(operator) {
            Some(op) => Ok(Some(op)),
            None => Err(invalid_argument(
                py,
                format!(
                    "option {name}: no built-in merge operator {operator:?} (there are \
                     uint64add, put, max, stringappend, append:SEP and fieldupdate:FIELDSxLEN)"
                ),
            )),
        }
    }
    fn show<'py>(py: Python<'py>, value: &Self::Value) -> PyResult<Bound<'py, PyAny>> {
        value
            .as_ref()
            .map(|op| op.name().to_string())
            .into_bound_py_any(py)
    }
}

/// The length of a fixed key prefix (`cleave::FixedPrefix`), or `None`.
struct PrefixLength;
impl OptionKind for PrefixLength {
    type Value = Option<Arc<dyn PrefixExtractor>>;
    fn extract(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Self::Value> {
        if value.is_none() {
            return Ok(None);
        }
        let len: usize = integer(py, name, value)?;
        if len == 0 {
            return Err(invalid_argument(
                py,
                format!("option {name} is a prefix length, at least 1"),
            ));
        }
        Ok(Some(Arc::new(FixedPrefix::new(len))))
    }
    fn show<'py>(py: Python<'py>, value: &Self::Value) -> PyResult<Bound<'py, PyAny>> {
        value
            .as_ref()
            .map(|p| p.name().to_string())
            .into_bound_py_any(py)
    }
}

/// Generates the setter and the listing of the engine options, from one
/// list, so that the two agree.
macro_rules! engine_options {
    ($($field:ident: $kind:ident),* $(,)?) => {
        /// Sets option `name` on `opts`; false if no engine option has that name.
        fn set_engine_option(
            py: Python<'_>,
            opts: &mut Options,
            name: &str,
            value: &Bound<'_, PyAny>,
        ) -> PyResult<bool> {
            match name {
                $(stringify!($field) => opts.$field = $kind::extract(py, name, value)?,)*
                _ => return Ok(false),
            }
            Ok(true)
        }

        /// Every engine option of `opts`, by name, into `dict`.
        fn show_engine_options(
            py: Python<'_>,
            opts: &Options,
            dict: &Bound<'_, PyDict>,
        ) -> PyResult<()> {
            $(dict.set_item(stringify!($field), $kind::show(py, &opts.$field)?)?;)*
            Ok(())
        }
    };
}

// Every field of `cleave::Options` but `fs`, which Python has no use for.
engine_options! {
    create_if_missing: Flag,
    error_if_exists: Flag,
    paranoid_checks: Flag,
    recycle_wal: Count,
    write_buffer_size: Count,
    max_write_buffer_number: Count,
    level0_file_num_compaction_trigger: Count,
    level0_slowdown_writes_trigger: Count,
    level0_stop_writes_trigger: Count,
    target_file_size_base: Size64,
    max_bytes_for_level_base: Size64,
    max_bytes_for_level_multiplier: Real,
    level_compaction_dynamic_level_bytes: Flag,
    max_background_jobs: Count,
    block_size: Count,
    block_restart_interval: Count,
    block_cache_capacity: Count,
    bloom_bits_per_key: Bits,
    compression: Codec,
    enable_value_separation: Flag,
    min_value_size: Count,
    value_file_size: Size64,
    big_value_threshold: Count,
    value_log_count: Count,
    recent_value_cache_bytes: Count,
    prepopulate_block_cache: Flag,
    cache_values: Flag,
    value_compression: Codec,
    drop_cache_capacity: Count,
    enable_gc: Flag,
    gc_garbage_ratio: Real,
    space_budget_bytes: Size64,
    space_budget_fail_writes: Flag,
    dynamic_gc_threads: Flag,
    gc_rate_limiter: Flag,
    device_write_bandwidth: Size64,
    gc_coalesced_reads: Flag,
    compensated_size: Flag,
    correlated_compaction: Flag,
    max_value_file_refs: Count,
    correlated_garbage_ratio: Real,
    range_merge_sorted_runs: Count,
    range_merge_idle: Seconds,
    no_space_poll_interval: Seconds,
    use_direct_reads: Flag,
    use_direct_io_for_flush_and_compaction: Flag,
    max_open_files: Count,
    max_manifest_file_size: Size64,
    merge_operator: MergeByName,
    prefix_extractor: PrefixLength,
    memtable_bloom_size_ratio: Real,
    enable_delta_separation: Flag,
    delta_bucket_capacity: Size64,
    delta_split_ratio: Real,
    delta_max_buckets: Count,
}

/// The engine's defaults, but for `create_if_missing`: Python users expect
/// a store to be created where there is none (as rocksdict does).
fn python_defaults() -> OpenOptions {
    OpenOptions {
        engine: Options {
            create_if_missing: true,
            ..Options::default()
        },
        write: WriteOptions::default(),
        read_only: false,
    }
}

/// The options `kwargs` name, over the defaults.
pub(crate) fn parse(py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<OpenOptions> {
    let mut opts = python_defaults();
    let Some(kwargs) = kwargs else {
        return Ok(opts);
    };
    for (key, value) in kwargs.iter() {
        let name: String = key.extract()?;
        match name.as_str() {
            "sync" => opts.write.sync = Flag::extract(py, &name, &value)?,
            "disable_wal" => opts.write.disable_wal = Flag::extract(py, &name, &value)?,
            "read_only" => opts.read_only = Flag::extract(py, &name, &value)?,
            _ => {
                if !set_engine_option(py, &mut opts.engine, &name, &value)? {
                    return Err(invalid_argument(py, format!("unknown option {name:?}")));
                }
            }
        }
    }
    Ok(opts)
}

/// Every option `cleave.open` takes, with its default.
pub(crate) fn defaults<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let opts = python_defaults();
    let dict = PyDict::new(py);
    show_engine_options(py, &opts.engine, &dict)?;
    dict.set_item("sync", opts.write.sync)?;
    dict.set_item("disable_wal", opts.write.disable_wal)?;
    dict.set_item("read_only", opts.read_only)?;
    Ok(dict)
}
