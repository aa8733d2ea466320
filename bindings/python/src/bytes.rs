//! Keys and values from Python: `bytes`, `bytearray`, `memoryview` or any
//! other object with the buffer protocol; never `str`, whose encoding
//! would be a guess.

use std::ops::Deref;

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

/// Bytes that can cross into a detached (GIL-released) engine call: an
/// immutable `bytes` object shared as it is, anything else copied, since
/// another thread could change it meanwhile.
pub(crate) enum Bytes {
    Shared(PyBackedBytes),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Shared(b) => b,
            Bytes::Owned(v) => v,
        }
    }
}

/// `obj` as bytes; `what` names the argument in the `TypeError` raised for
/// anything else.
pub(crate) fn extract(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Bytes> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Bytes::Shared(PyBackedBytes::from(b.clone())));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Bytes::Owned(b.to_vec()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes, not str: encode it first (for example with .encode())"
        )));
    }
    // memoryview, array.array, mmap, numpy arrays: their bytes, copied.
    match PyMemoryView::from(obj) {
        Ok(view) => {
            let copy = view.call_method0("tobytes")?;
            let copy = copy.cast::<PyBytes>()?;
            Ok(Bytes::Owned(copy.as_bytes().to_vec()))
        }
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be bytes, bytearray or memoryview, not {}",
            obj.get_type().name()?
        ))),
    }
}

/// An optional bound (`None` is unbounded).
pub(crate) fn extract_optional(
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<Vec<u8>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(extract(o, what)?.to_vec())),
        _ => Ok(None),
    }
}

/// A value read for `get`: the bytes, or `default` (None) when absent.
pub(crate) fn value_or_default<'py>(
    py: Python<'py>,
    value: Option<Vec<u8>>,
    default: Option<Bound<'py, PyAny>>,
) -> Bound<'py, PyAny> {
    match value {
        Some(v) => PyBytes::new(py, &v).into_any(),
        None => default.unwrap_or_else(|| py.None().into_bound(py)),
    }
}

/// A value read for `[key]`: the bytes, or `KeyError(key)` when absent.
pub(crate) fn value_or_key_error<'py>(
    py: Python<'py>,
    value: Option<Vec<u8>>,
    key: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    match value {
        Some(v) => Ok(PyBytes::new(py, &v)),
        None => Err(PyKeyError::new_err(key.clone().unbind())),
    }
}
