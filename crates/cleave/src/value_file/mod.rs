//! Value files: the separated values of key-value separation.
//!
//! A *physical* value file is bytes on disk: self-checked records, then a
//! record index `(logical_file, ordinal) → (offset, len)`, properties and a
//! footer. It hosts one or more *logical* value files, the units handles
//! name: a flush (or value log, or re-separating compaction) writes a new
//! logical file into a physical file of the same number, and GC later moves
//! the live records of logical files into other physical files without
//! changing their ids, so a [`ValueHandle`] stays valid for ever.
//!
//! Reading a handle whose logical file still lives where it was born is one
//! `pread` of exactly the record; otherwise the record index gives the new
//! place. Every read checks the record's checksum and that its key and
//! sequence number are the ones looked up, so damage or a stale handle is
//! `Error::Corruption`, never a wrong value.
//!
//! The format is specified in `docs/format/value_file.md`.

mod builder;
mod format;
mod handle;
mod reader;
mod record_index;
mod store;

pub(crate) use builder::ValueFileBuilder;
pub(crate) use format::{
    record_len, record_ok, Origin, ValueClass, ValueFileProperties, MAX_RECORD_HEADER_LEN,
};
pub(crate) use handle::ValueHandle;
pub(crate) use reader::{check_record, record_from_raw, ValueFile, ValueRecord};
pub(crate) use record_index::IndexEntry;
pub(crate) use store::{Readahead, ValueStore, ValueWanted};

#[cfg(feature = "fuzzing")]
pub(crate) use format::decode_record;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use format::record_header;
#[cfg(feature = "fuzzing")]
pub(crate) use record_index::{decode_index_block, decode_v1_index_block, find, IndexBlockEncoder};

use crate::base::FileNumber;
use crate::Compression;

/// How a value file is written.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ValueFileOptions {
    /// Codec tried on every value; a value it does not shrink by 12.5% is
    /// stored raw.
    pub compression: Compression,
    /// `O_DIRECT` appends, as sstables written by flush and compaction.
    pub direct_writes: bool,
    pub origin: Origin,
    pub class: ValueClass,
}

/// What a finished value file holds: the manifest's value-file metadata is
/// made of this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValueFileSummary {
    pub number: FileNumber,
    pub file_size: u64,
    pub properties: ValueFileProperties,
}

#[cfg(test)]
mod tests;
