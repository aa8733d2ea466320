//! Sorted string tables: immutable files of internal keys and values.
//! The format is specified in `docs/format/sstable.md`.

mod block;
mod bloom;
mod builder;
mod format;
mod properties;
mod reader;
mod table_cache;
pub(crate) mod value_refs;

use crate::base::{InternalKey, SeqNo};
use crate::Compression;

pub(crate) use block::Block;
pub(crate) use bloom::BloomFilter;
pub(crate) use builder::TableBuilder;
pub(crate) use reader::Table;
pub(crate) use table_cache::TableCache;

use crate::base::FileNumber;
use crate::cache::ShardedCache;

/// Blocks of all sstables, keyed by (file number, block offset). File
/// numbers are never reused, so entries of deleted files are never served
/// again and simply age out.
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

/// Metaindex names. Written to disk: never change.
const META_FILTER: &[u8] = b"filter.bloom";
const META_PROPERTIES: &[u8] = b"properties";

/// How tables are written.
#[derive(Debug, Clone)]
pub(crate) struct TableOptions {
    /// Target uncompressed size of a data block.
    pub block_size: usize,
    /// Entries between restart points in data blocks.
    pub restart_interval: usize,
    /// 0 writes no filter.
    pub bloom_bits_per_key: u32,
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4 << 10,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
        }
    }
}

impl From<&crate::Options> for TableOptions {
    fn from(o: &crate::Options) -> Self {
        TableOptions {
            block_size: o.block_size,
            restart_interval: o.block_restart_interval,
            bloom_bits_per_key: o.bloom_bits_per_key,
            compression: o.compression,
        }
    }
}

/// What a finished table holds: the manifest's `FileMeta` is made of this.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TableSummary {
    pub file_size: u64,
    pub num_entries: u64,
    pub num_deletions: u64,
    pub smallest: InternalKey,
    pub largest: InternalKey,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    pub value_refs: value_refs::ValueRefs,
}

/// What the shared block cache holds for sstables.
#[derive(Debug, Clone)]
pub(crate) enum CachedBlock {
    /// A data or index block.
    Block(std::sync::Arc<Block>),
    Filter(std::sync::Arc<BloomFilter>),
}

#[cfg(test)]
mod tests;
