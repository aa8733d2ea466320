//! The merge operator: read-modify-writes written as operands and combined
//! with a key's value when it is read, flushed or compacted (RocksDB's
//! `MergeOperator`; KDSep's "Merge" approach).

mod operators;

pub use operators::{Append, FieldUpdate, Max, Put, U64Add};

use std::fmt;
use std::sync::Arc;

use crate::base::limits::MAX_VALUE_SIZE;
use crate::error::{Error, Result};

/// Longest merge operator name, in bytes: it is written to the manifest.
pub(crate) const MAX_NAME_LEN: usize = 128;

/// Combines a key's merge operands with its base value.
///
/// A key's history is a base (a value, or none after a deletion or before
/// any write) followed by operands, oldest first. Reads, flushes and
/// compactions call [`full_merge`](MergeOperator::full_merge) to turn that
/// history into a value, and flushes and compactions call
/// [`partial_merge`](MergeOperator::partial_merge) to shorten runs of
/// operands whose base lies in an older file.
///
/// The [`name`](MergeOperator::name) is stored in the manifest with the
/// first merge written: a database holding merges opens only with an
/// operator of the same name. Two operators of one name must merge alike.
pub trait MergeOperator: Send + Sync + fmt::Debug {
    /// Identifies the operator and its parameters (at most 128 bytes).
    fn name(&self) -> &str;

    /// Refuses an operand before it is written: the reason becomes an
    /// `InvalidArgument` error and nothing of the write is applied. The
    /// default accepts every operand.
    fn check_operand(&self, operand: &[u8]) -> std::result::Result<(), String> {
        let _ = operand;
        Ok(())
    }

    /// The value of `key` after applying `operands` (oldest first, never
    /// empty) to `base` (`None`: the key had no value). An `Err` gives the
    /// reason: a read of the key then fails with `Error::MergeFailed`, and
    /// flushes and compactions keep the key's entries unmerged.
    fn full_merge(
        &self,
        key: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String>;

    /// One operand equal in effect to `older` followed by `newer`, or
    /// `None` to keep both. The default keeps both.
    fn partial_merge(&self, key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let _ = (key, older, newer);
        None
    }
}

/// A key's merge operands as a read gathers them, newest first, in one
/// buffer: a read of a hot key may gather thousands.
#[derive(Default)]
pub(crate) struct Operands {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Operands {
    pub(crate) fn push(&mut self, operand: &[u8]) {
        self.bytes.extend_from_slice(operand);
        self.ends.push(self.bytes.len());
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// Operand `i`, newest first.
    pub(crate) fn get(&self, i: usize) -> &[u8] {
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p]);
        &self.bytes[start..self.ends[i]]
    }

    /// Pushes `older`'s operands after these, all older than them.
    pub(crate) fn append(&mut self, older: &Operands) {
        let base = self.bytes.len();
        self.bytes.extend_from_slice(&older.bytes);
        self.ends.extend(older.ends.iter().map(|e| e + base));
    }

    /// The operands oldest first, as [`full_merge`] takes them.
    pub(crate) fn oldest_first(&self) -> Vec<&[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let mut out: Vec<&[u8]> = starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.bytes[start..end])
            .collect();
        out.reverse();
        out
    }
}

/// The value `operands` (oldest first) make of `base` for `key`, as a read
/// returns it: a database without an operator, or an operator refusing the
/// history, gives `Error::MergeFailed` naming the key.
pub(crate) fn full_merge(
    op: Option<&Arc<dyn MergeOperator>>,
    key: &[u8],
    base: Option<&[u8]>,
    operands: &[&[u8]],
) -> Result<Vec<u8>> {
    debug_assert!(!operands.is_empty());
    let failed = |operator: &str, reason: String| Error::MergeFailed {
        key: key.escape_ascii().to_string(),
        operator: operator.to_string(),
        reason,
    };
    let op = op.ok_or_else(|| failed("none", "the database has no merge operator".into()))?;
    op.full_merge(key, base, operands)
        .map_err(|reason| failed(op.name(), reason))
}

/// The built-in operator named `name`, as [`MergeOperator::name`] gives
/// it: `uint64add`, `put`, `max`, `append:SEP` (`SEP` escaped as
/// `escape_ascii` does; `stringappend`, db_bench's name, is `append:,`) and
/// `fieldupdate:FIELDSxLEN`. For tools that open a database whose manifest
/// names its operator.
pub fn builtin(name: &str) -> Option<Arc<dyn MergeOperator>> {
    let op: Arc<dyn MergeOperator> = match name {
        "uint64add" => Arc::new(U64Add),
        "put" => Arc::new(Put),
        "max" => Arc::new(Max),
        "stringappend" => Arc::new(Append::default()),
        _ => {
            if let Some(sep) = name.strip_prefix("append:") {
                Arc::new(Append::new(&unescape(sep)?))
            } else {
                let (fields, len) = name.strip_prefix("fieldupdate:")?.split_once('x')?;
                let (fields, len): (usize, usize) = (fields.parse().ok()?, len.parse().ok()?);
                let value_len = fields.checked_mul(len)?;
                if !(1..=1 << 16).contains(&fields) || len == 0 || value_len > MAX_VALUE_SIZE {
                    return None;
                }
                Arc::new(FieldUpdate::new(fields, len))
            }
        }
    };
    Some(op)
}

/// The bytes `escape_ascii` wrote as `s`.
fn unescape(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        out.push(match bytes.next()? {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'x' => {
                let hex = [bytes.next()?, bytes.next()?];
                u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?
            }
            c @ (b'\\' | b'\'' | b'"') => c,
            _ => return None,
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_come_back_oldest_first() {
        let mut ops = Operands::default();
        assert!(ops.is_empty());
        for o in [&b"newest"[..], b"", b"old"] {
            ops.push(o);
        }
        assert_eq!(ops.oldest_first(), vec![&b"old"[..], b"", b"newest"]);
    }

    #[test]
    fn builtins_are_found_by_their_names() {
        let ops: Vec<Box<dyn MergeOperator>> = vec![
            Box::new(U64Add),
            Box::new(Put),
            Box::new(Max),
            Box::new(Append::default()),
            Box::new(Append::new(b"\n\t\\'\"\x00\xff |")),
            Box::new(FieldUpdate::new(10, 100)),
        ];
        for op in ops {
            let found = builtin(op.name()).unwrap_or_else(|| panic!("{}", op.name()));
            assert_eq!(found.name(), op.name());
        }
        assert_eq!(builtin("stringappend").unwrap().name(), "append:,");
        for bad in [
            "",
            "uint64",
            "append:\\q",
            "fieldupdate:0x5",
            "fieldupdate:3x",
            "fieldupdate:axb",
        ] {
            assert!(builtin(bad).is_none(), "{bad}");
        }
    }
}
