//! cleave's errors as Python exceptions. The classes are defined in Python
//! (`python/cleave/_errors.py`), so that `IOError` can also be an
//! `OSError` and `InvalidArgumentError` a `ValueError`; each is imported
//! once, on the first error of its kind.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

const ERRORS_MODULE: &str = "cleave._errors";

/// The exception classes, one per `cleave::Error` variant a caller would
/// catch on its own, and the base class for the rest.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Error,
    Corruption,
    Io,
    InvalidArgument,
    Locked,
    Poisoned,
    NoSpace,
    SpaceBudgetExceeded,
    ReadOnly,
    Merge,
    UnsupportedFormat,
    Closed,
}

const KINDS: usize = 12;

static CLASSES: [PyOnceLock<Py<PyType>>; KINDS] = [const { PyOnceLock::new() }; KINDS];

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Error => "Error",
            Kind::Corruption => "CorruptionError",
            Kind::Io => "IOError",
            Kind::InvalidArgument => "InvalidArgumentError",
            Kind::Locked => "LockedError",
            Kind::Poisoned => "PoisonedError",
            Kind::NoSpace => "NoSpaceError",
            Kind::SpaceBudgetExceeded => "SpaceBudgetExceededError",
            Kind::ReadOnly => "ReadOnlyError",
            Kind::Merge => "MergeError",
            Kind::UnsupportedFormat => "UnsupportedFormatError",
            Kind::Closed => "ClosedError",
        }
    }

    fn class<'py>(self, py: Python<'py>) -> PyResult<&'py Bound<'py, PyType>> {
        CLASSES[self as usize].import(py, ERRORS_MODULE, self.class_name())
    }
}

/// An exception of `kind` with `message`, and the attributes `attrs` sets
/// on it. Should building it fail (the module cannot be imported), that
/// failure is raised instead.
fn build(
    py: Python<'_>,
    kind: Kind,
    message: String,
    attrs: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<()>,
) -> PyErr {
    let built = kind.class(py).and_then(|class| {
        let instance = class.call1((message,))?;
        attrs(&instance)?;
        Ok(PyErr::from_value(instance))
    });
    built.unwrap_or_else(|failure| failure)
}

/// An exception of `kind` with `message` and no attributes.
pub(crate) fn new_error(py: Python<'_>, kind: Kind, message: impl Into<String>) -> PyErr {
    build(py, kind, message.into(), |_| Ok(()))
}

fn path_str(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The Python exception for an engine error: its message is the engine's,
/// which names the file or the argument; the file is also in `path`, an
/// I/O error's OS error number in `errno`.
pub(crate) fn to_py(py: Python<'_>, error: cleave::Error) -> PyErr {
    use cleave::Error as E;
    let message = error.to_string();
    match &error {
        E::Io { path, source, .. } => build(py, Kind::Io, message, |e| {
            if let Some(errno) = source.raw_os_error() {
                e.setattr("errno", errno)?;
            }
            e.setattr("path", path_str(path))
        }),
        E::Corruption { file, offset, .. } => build(py, Kind::Corruption, message, |e| {
            e.setattr("path", path_str(file))?;
            e.setattr("offset", *offset)
        }),
        E::InvalidArgument(_) => new_error(py, Kind::InvalidArgument, message),
        E::UnsupportedFormatVersion { file, .. } => {
            build(py, Kind::UnsupportedFormat, message, |e| {
                e.setattr("path", path_str(file))
            })
        }
        E::Locked { dir, .. } => build(py, Kind::Locked, message, |e| {
            e.setattr("path", path_str(dir))
        }),
        E::Poisoned(_) => new_error(py, Kind::Poisoned, message),
        E::NoSpace { path, cause, .. } => {
            let kind = match cause {
                cleave::NoSpaceCause::Budget { .. } => Kind::SpaceBudgetExceeded,
                _ => Kind::NoSpace,
            };
            build(py, kind, message, |e| {
                if let cleave::NoSpaceCause::Device(source) = cause {
                    if let Some(errno) = source.raw_os_error() {
                        e.setattr("errno", errno)?;
                    }
                }
                e.setattr("path", path_str(path))
            })
        }
        E::ReadOnly { dir, .. } => build(py, Kind::ReadOnly, message, |e| {
            e.setattr("path", path_str(dir))
        }),
        E::MergeFailed { .. } => new_error(py, Kind::Merge, message),
        E::Closed => new_error(py, Kind::Closed, message),
        // `cleave::Error` is non-exhaustive: a variant added later is still
        // a `cleave.Error`.
        _ => new_error(py, Kind::Error, message),
    }
}

/// Raising an engine result's error as its Python exception.
pub(crate) trait OrRaise<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for cleave::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// `cleave.InvalidArgumentError` with `message`.
pub(crate) fn invalid_argument(py: Python<'_>, message: impl Into<String>) -> PyErr {
    new_error(py, Kind::InvalidArgument, message)
}
