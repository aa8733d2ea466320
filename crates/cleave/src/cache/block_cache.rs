//! The block cache: one byte-charged LRU shared by the blocks of every
//! sstable and the record index blocks of every value file, keyed by (file
//! number, block offset). File numbers are never reused, across kinds, so
//! one number space serves both, and entries of deleted files are never
//! served again and simply age out.

use std::sync::Arc;

use super::ShardedCache;
use crate::base::FileNumber;
use crate::sstable::value_refs::ValueRefs;
use crate::sstable::{Block, BloomFilter};

/// The block cache.
pub(crate) type BlockCache = ShardedCache<(FileNumber, u64), CachedBlock>;

/// At most this many shard bits: 16 shards keep lock contention low on a
/// many-core machine.
const BLOCK_CACHE_MAX_SHARD_BITS: u32 = 4;

/// The smallest shard of the block cache. A shard caches no block larger
/// than itself, and an index or filter block of a 64 MiB table is several
/// hundred KiB, so small shards would re-read it on every lookup (an 8 MiB
/// cache in 16 shards made point reads ten times slower).
const BLOCK_CACHE_MIN_SHARD_BYTES: usize = 4 << 20;

/// Share of the block cache reserved for index and filter blocks.
const BLOCK_CACHE_HIGH_PRI_RATIO: f64 = 0.5;

/// Shard bits for a block cache of `capacity` bytes: as many shards as
/// keep each at least `BLOCK_CACHE_MIN_SHARD_BYTES`, up to the maximum.
fn block_cache_shard_bits(capacity: usize) -> u32 {
    let shards = (capacity / BLOCK_CACHE_MIN_SHARD_BYTES).max(1);
    shards.ilog2().min(BLOCK_CACHE_MAX_SHARD_BITS)
}

/// A block cache of `capacity` bytes with the default shards and pool.
pub(crate) fn new_block_cache(capacity: usize) -> BlockCache {
    ShardedCache::new(
        capacity,
        block_cache_shard_bits(capacity),
        BLOCK_CACHE_HIGH_PRI_RATIO,
    )
}

/// What the block cache holds.
#[derive(Debug, Clone)]
pub(crate) enum CachedBlock {
    /// A data or index block of an sstable.
    Block(Arc<Block>),
    Filter(Arc<BloomFilter>),
    /// An sstable's value-references block, decoded (GC reads it).
    ValueRefs(Arc<ValueRefs>),
    /// A value file's record index block, checked but still encoded: a
    /// read of a logical file GC moved needs it before the record.
    ValueIndex(Arc<[u8]>),
}

#[cfg(test)]
mod tests {
    #[test]
    fn small_block_caches_use_few_shards() {
        assert_eq!(super::block_cache_shard_bits(1 << 20), 0);
        assert_eq!(super::block_cache_shard_bits(8 << 20), 1);
        assert_eq!(super::block_cache_shard_bits(20 << 20), 2);
        assert_eq!(super::block_cache_shard_bits(512 << 20), 4);
    }
}
