//! A generic sharded LRU cache with a high-priority pool, charged in bytes.
//! The block cache (`sstable::BlockCache`) is built on it.

mod lru;

pub(crate) use self::lru::{Priority, ShardedCache};
