//! Caches: a generic sharded LRU with a high-priority pool, the block cache
//! built on it, and the cache of open sstables.

mod lru;
mod table_cache;

pub(crate) use self::lru::{Priority, ShardedCache};
pub(crate) use table_cache::TableCache;

use crate::base::FileNumber;
use crate::sstable::CachedBlock;

/// Blocks of all sstables, keyed by (file number, block offset). File
/// numbers are never reused, so entries of deleted files are never served
/// again and simply age out.
pub(crate) type BlockCache = ShardedCache<(FileNumber, u64), CachedBlock>;

/// Shards of the block cache: enough to keep lock contention low on a
/// many-core machine.
pub(crate) const BLOCK_CACHE_SHARD_BITS: u32 = 4;

/// Share of the block cache reserved for index and filter blocks.
pub(crate) const BLOCK_CACHE_HIGH_PRI_RATIO: f64 = 0.5;

/// A block cache of `capacity` bytes with the default shards and pool.
pub(crate) fn new_block_cache(capacity: usize) -> BlockCache {
    ShardedCache::new(capacity, BLOCK_CACHE_SHARD_BITS, BLOCK_CACHE_HIGH_PRI_RATIO)
}
