//! Metadata of the delta store (key-delta separation) as the manifest
//! records it: the live delta files, and the buckets, each a key range
//! from its smallest key to the next bucket's, made of chunks in delta
//! files. Buckets cover the whole key space: the first starts at the
//! empty key.

use std::sync::Arc;

use super::file_meta::{ObsoleteFiles, ObsoleteMark};
use crate::base::filename::FileKind;
use crate::base::FileNumber;
use crate::delta::filter::KeyFilter;

/// Where one chunk of a bucket lies: `len` bytes, its frame included, at
/// `offset` of delta file `file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkRef {
    pub file: FileNumber,
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct BucketMeta {
    /// Unique for the database's life (drawn from the file numbers): a
    /// bucket garbage collection rewrites gets a new one.
    pub id: u64,
    pub smallest: Vec<u8>,
    /// Oldest first.
    pub chunks: Vec<ChunkRef>,
    /// The keys of every chunk; not stored (open rebuilds it), shared by
    /// the Versions naming the bucket.
    pub filter: Arc<KeyFilter>,
}

impl BucketMeta {
    pub(crate) fn new(id: u64, smallest: Vec<u8>, chunks: Vec<ChunkRef>) -> BucketMeta {
        BucketMeta {
            id,
            smallest,
            chunks,
            filter: Arc::new(KeyFilter::new()),
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.chunks
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.len))
    }
}

impl PartialEq for BucketMeta {
    /// The filter is derived from the chunks.
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.smallest == other.smallest && self.chunks == other.chunks
    }
}

impl Eq for BucketMeta {}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DeltaFileMeta {
    /// `<number>.kd`.
    pub number: FileNumber,
    pub size: u64,
    pub obsolete: ObsoleteMark,
}

impl DeltaFileMeta {
    pub(crate) fn mark_obsolete(&self, sink: &Arc<ObsoleteFiles>) {
        self.obsolete.mark(FileKind::DeltaFile, self.number, sink);
    }
}
