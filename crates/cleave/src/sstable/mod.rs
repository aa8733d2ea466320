//! Sorted string tables: immutable files of internal keys and values.
//! The format is specified in `docs/format/sstable.md`.

mod block;
pub(crate) mod bloom;
mod builder;
mod format;
mod properties;
mod reader;
mod table_cache;
pub(crate) mod value_refs;

use crate::base::{InternalKey, SeqNo};
use std::sync::Arc;

use crate::{Compression, PrefixExtractor};

pub(crate) use block::Block;
pub(crate) use bloom::BloomFilter;
pub(crate) use builder::TableBuilder;
pub(crate) use reader::{Table, TableIter};
pub(crate) use table_cache::TableCache;

pub(crate) use crate::cache::{new_block_cache, BlockCache, CachedBlock};

#[cfg(feature = "fuzzing")]
pub(crate) use {
    block::{BlockBuilder, KeyOrder},
    bloom::BloomBuilder,
    properties::TableProperties,
};

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
    /// Adds key prefixes to the filter too.
    pub prefix_extractor: Option<Arc<dyn PrefixExtractor>>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4 << 10,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            prefix_extractor: None,
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
            prefix_extractor: o.prefix_extractor.clone(),
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
    /// Of the entries with an expiry, if any.
    pub expiry: Option<crate::manifest::TableExpiry>,
}

#[cfg(test)]
mod tests;
