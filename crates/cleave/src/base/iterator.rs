//! The iterator trait shared by every layer that yields internal keys.

/// An iterator over encoded internal keys in [`crate::base::key::compare`]
/// order. Every layer (block, sstable, level, memtable, merge) implements
/// it; movement returns `Result` so that I/O errors are never hidden.
///
/// REQUIRES: `key`, `value`, `next` and `prev` only while `valid()`.
pub(crate) trait InternalIterator: Send {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self) -> crate::Result<()>;
    fn seek_to_last(&mut self) -> crate::Result<()>;
    /// Positions at the first entry ≥ `target`.
    fn seek(&mut self, target: &[u8]) -> crate::Result<()>;
    /// Positions at the last entry ≤ `target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> crate::Result<()>;
    fn next(&mut self) -> crate::Result<()>;
    fn prev(&mut self) -> crate::Result<()>;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
}
