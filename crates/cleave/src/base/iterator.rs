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

/// An iterator behind a pointer is one, so that adapters can own or borrow
/// the iterator they wrap alike.
macro_rules! forward_internal_iterator {
    ($ptr:ty) => {
        impl<T: InternalIterator + ?Sized> InternalIterator for $ptr {
            fn valid(&self) -> bool {
                (**self).valid()
            }
            fn seek_to_first(&mut self) -> crate::Result<()> {
                (**self).seek_to_first()
            }
            fn seek_to_last(&mut self) -> crate::Result<()> {
                (**self).seek_to_last()
            }
            fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
                (**self).seek(target)
            }
            fn seek_for_prev(&mut self, target: &[u8]) -> crate::Result<()> {
                (**self).seek_for_prev(target)
            }
            fn next(&mut self) -> crate::Result<()> {
                (**self).next()
            }
            fn prev(&mut self) -> crate::Result<()> {
                (**self).prev()
            }
            fn key(&self) -> &[u8] {
                (**self).key()
            }
            fn value(&self) -> &[u8] {
                (**self).value()
            }
        }
    };
}

forward_internal_iterator!(Box<T>);
forward_internal_iterator!(&mut T);
