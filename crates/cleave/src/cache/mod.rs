//! A generic sharded LRU cache with a high-priority pool, charged in bytes.
//! The block cache is built on it.

mod block_cache;
mod lru;

pub(crate) use self::block_cache::{new_block_cache, BlockCache, CacheKind, CachedBlock};
pub(crate) use self::lru::{Priority, ShardedCache};
