//! Compaction filters: the user's say over each entry a compaction keeps
//! (RocksDB's `CompactionFilter`), to drop or rewrite what no read should
//! find any more without a write of its own: a cache's stale entries, the
//! fields of a deleted hash. A filter sees the key, the value's size and
//! expiry, and reads a separated value only if it asks for its bytes.

use std::fmt;

use crate::error::{Error, Result};

/// What becomes of an entry a compaction filter looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The entry stays as it is.
    Keep,
    /// The key reads as deleted from now on: the entry goes (or becomes a
    /// deletion, where an older version of the key may lie below), and a
    /// separated value's bytes become garbage, without being read.
    Remove,
    /// The key's value becomes this one, with the entry's expiry if it
    /// had one.
    ChangeValue(Vec<u8>),
}

/// The user's filter over the entries compactions keep
/// (`Options::compaction_filter`).
///
/// It is called, from compaction threads, once for each value entry a
/// compaction keeps that is newer than every live snapshot (an entry a
/// snapshot can read is left alone, as RocksDB does), with the level the
/// compaction writes to. It is not called for deletions or merge operands
/// (a value merged from operands is a value), nor by flushes. Decisions
/// must hold for the entry whenever asked: two compactions may ask of the
/// same entry, and a crash may repeat one.
pub trait CompactionFilter: Send + Sync + fmt::Debug {
    /// Identifies the filter, for logs.
    fn name(&self) -> &str;

    /// Decides the fate of `key`'s value `value` in the compaction `ctx`
    /// describes.
    fn filter(&self, ctx: &FilterContext<'_>, key: &[u8], value: &mut FilterValue<'_>) -> Decision;
}

/// A stateless compaction filter made of a name and a closure, as the
/// `rocksdb` crate's `set_compaction_filter` takes one:
///
/// ```
/// use cleave::{CompactionDecision, FilterFn};
///
/// let drop_sessions = FilterFn::new("drop-sessions", |_, key: &[u8], _: &mut _| {
///     if key.starts_with(b"session:") {
///         CompactionDecision::Remove
///     } else {
///         CompactionDecision::Keep
///     }
/// });
/// let options = cleave::Options {
///     compaction_filter: Some(std::sync::Arc::new(drop_sessions)),
///     ..cleave::Options::default()
/// };
/// # let _ = options;
/// ```
pub struct FilterFn<F> {
    name: String,
    decide: F,
}

impl<F> FilterFn<F>
where
    F: Fn(&FilterContext<'_>, &[u8], &mut FilterValue<'_>) -> Decision + Send + Sync,
{
    pub fn new(name: impl Into<String>, decide: F) -> Self {
        Self {
            name: name.into(),
            decide,
        }
    }
}

impl<F> fmt::Debug for FilterFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilterFn")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<F> CompactionFilter for FilterFn<F>
where
    F: Fn(&FilterContext<'_>, &[u8], &mut FilterValue<'_>) -> Decision + Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn filter(&self, ctx: &FilterContext<'_>, key: &[u8], value: &mut FilterValue<'_>) -> Decision {
        (self.decide)(ctx, key, value)
    }
}

/// The compaction a filter is asked from: the level it writes, and the
/// database's current contents, for a filter whose decision rests on
/// another key (a hash's fields on its metadata, as kvrocks's filters).
pub struct FilterContext<'a> {
    pub(crate) level: usize,
    pub(crate) lookup: &'a Lookup<'a>,
}

/// Reads a key's current value for a filter.
pub(crate) type Lookup<'a> = dyn Fn(&[u8]) -> Result<Option<Vec<u8>>> + 'a;

impl FilterContext<'_> {
    /// The level the compaction writes to.
    pub fn level(&self) -> usize {
        self.level
    }

    /// The value of `key` now, as `Db::get` reads it (memtables, then the
    /// levels; a separated value is read). Each call is a lookup: a filter
    /// should ask only what the entry itself cannot tell it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        (self.lookup)(key)
    }
}

impl fmt::Debug for FilterContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilterContext")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

/// A value a compaction filter looks at: its size and expiry come from
/// the entry; its bytes are read only when asked for (a separated value
/// costs one read, counted in `Stats::compaction_filter_value_reads`).
pub struct FilterValue<'a> {
    pub(crate) expires_at_ms: Option<u64>,
    pub(crate) source: Source<'a>,
    pub(crate) read: Option<Result<Vec<u8>>>,
}

pub(crate) enum Source<'a> {
    Inline(&'a [u8]),
    /// The record's length, and how to read it.
    Separated {
        record_len: u64,
        read: &'a mut dyn FnMut() -> Result<Vec<u8>>,
    },
}

impl fmt::Debug for FilterValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilterValue")
            .field("size", &self.size())
            .field("separated", &self.is_separated())
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

impl FilterValue<'_> {
    /// Bytes of the value as stored, read from the entry: its length when
    /// inline; for a separated value, the length of its value-file record
    /// (the value, compressed if it was, with its key and framing).
    pub fn size(&self) -> u64 {
        match &self.source {
            Source::Inline(v) => v.len() as u64,
            Source::Separated { record_len, .. } => *record_len,
        }
    }

    /// Whether the value lies in a value file, so that `bytes` reads it.
    pub fn is_separated(&self) -> bool {
        matches!(self.source, Source::Separated { .. })
    }

    /// When the entry expires (milliseconds since the Unix epoch), if it
    /// was written with a time to live. An entry the compaction saw expired
    /// never reaches the filter.
    pub fn expires_at_ms(&self) -> Option<u64> {
        self.expires_at_ms
    }

    /// The value's bytes; a separated value is read on the first call. A
    /// failed read fails the compaction too, whatever the filter decides.
    pub fn bytes(&mut self) -> Result<&[u8]> {
        match &mut self.source {
            Source::Inline(v) => Ok(v),
            Source::Separated { read, .. } => {
                let r = self.read.get_or_insert_with(read);
                match r {
                    Ok(v) => Ok(v.as_slice()),
                    Err(e) => Err(e.duplicate()),
                }
            }
        }
    }

    /// The read `bytes` made, if it made one and it failed.
    pub(crate) fn failed_read(&mut self) -> Option<Error> {
        match self.read.take() {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// Whether `bytes` read a separated value.
    pub(crate) fn was_read(&self) -> bool {
        self.read.is_some()
    }
}
