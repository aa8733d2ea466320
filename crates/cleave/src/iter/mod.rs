//! Iterators that combine sources (merging, level) and the user-facing
//! [`DbIterator`]. The trait they implement, `InternalIterator`, lives in
//! `base` so that the memtable and sstables below can implement it.

pub(crate) mod db_iter;
pub(crate) mod expiry;
pub(crate) mod level;
pub(crate) mod merging;
#[cfg(test)]
pub(crate) mod testutil;
pub(crate) mod value_source;

pub(crate) use crate::base::InternalIterator;
pub use db_iter::DbIterator;
pub(crate) use value_source::ValueSource;
