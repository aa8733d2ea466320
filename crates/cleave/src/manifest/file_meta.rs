//! Metadata of one live sstable, shared (through `Arc`) by every Version
//! that names it.

use crate::base::{FileNumber, InternalKey, SeqNo};

#[derive(Debug)]
pub(crate) struct FileMeta {
    pub number: FileNumber,
    /// Bytes of the file on disk.
    pub size: u64,
    /// Smallest and largest internal keys in the file.
    pub smallest: InternalKey,
    pub largest: InternalKey,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    pub num_entries: u64,
    pub num_deletions: u64,
}
