//! The block cache: the one byte-charged LRU of the engine, shared by the
//! blocks of every sstable (data, index, filter, value references), the
//! record index blocks of every value file, separated values and the
//! delta store's buckets, keyed by
//! (kind, file number, offset or ordinal). File numbers are never reused,
//! across kinds, so entries of deleted files are never served again and
//! simply age out. A value is keyed by its logical file and ordinal, which
//! GC never changes, so a cached value stays valid when its file moves.
//!
//! Index, filter and record index blocks go to the high-priority pool,
//! which data blocks and values cannot evict (`lru.rs`): with them cached,
//! a get costs at most one read for its data block or value.

use std::sync::Arc;

use super::ShardedCache;
use crate::base::FileNumber;
use crate::sstable::value_refs::ValueRefs;
use crate::sstable::{Block, BloomFilter};

/// What a block cache entry is, for its key and the per-kind counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum CacheKind {
    /// An sstable's data block.
    Data = 0,
    /// An sstable's index block.
    Index = 1,
    Filter = 2,
    /// An sstable's value-references block.
    ValueRefs = 3,
    /// A value file's record index block.
    RecordIndex = 4,
    /// A separated value, keyed by (logical file, ordinal).
    Value = 5,
    /// A block of a delta store chunk, keyed by (delta file, offset): the
    /// KD cache, inside the block cache's budget.
    Deltas = 6,
}

impl CacheKind {
    pub(crate) const ALL: [CacheKind; 7] = [
        CacheKind::Data,
        CacheKind::Index,
        CacheKind::Filter,
        CacheKind::ValueRefs,
        CacheKind::RecordIndex,
        CacheKind::Value,
        CacheKind::Deltas,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            CacheKind::Data => "data",
            CacheKind::Index => "index",
            CacheKind::Filter => "filter",
            CacheKind::ValueRefs => "value-refs",
            CacheKind::RecordIndex => "record-index",
            CacheKind::Value => "value",
            CacheKind::Deltas => "deltas",
        }
    }
}

/// (kind, file, offset of a block or ordinal of a value).
type BlockKey = (CacheKind, FileNumber, u64);

/// The block cache.
pub(crate) type BlockCache = ShardedCache<BlockKey, CachedBlock>;

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
    ShardedCache::with_classes(
        capacity,
        block_cache_shard_bits(capacity),
        BLOCK_CACHE_HIGH_PRI_RATIO,
        |key| key.0 as usize,
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
    /// A value file's record index block, checked but still encoded (it is
    /// searched in place): a read of a logical file GC moved needs it
    /// before the record.
    ValueIndex(Arc<[u8]>),
    /// A separated value, decompressed and checked.
    Value(Arc<Vec<u8>>),
    /// A delta store block's records, decoded and in order.
    Deltas(crate::delta::Block),
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
