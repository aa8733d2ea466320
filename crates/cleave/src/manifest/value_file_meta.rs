//! Metadata of one live physical value file, shared (through `Arc`) by
//! every Version that names it, as `FileMeta` is for sstables.

use std::sync::Arc;

use super::file_meta::{ObsoleteFiles, ObsoleteMark};
use crate::base::filename::FileKind;
use crate::base::FileNumber;

/// One logical value file hosted by a physical file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostedLogical {
    pub logical_file: FileNumber,
    /// Records of the logical file stored here.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ValueFileMeta {
    /// The physical file's number (`<number>.vf`).
    pub number: FileNumber,
    /// Bytes of the file on disk: records, record index, properties, footer.
    pub size: u64,
    /// Sorted by logical file number, each at most once; never empty.
    pub hosted: Vec<HostedLogical>,
    /// Lifecycle state, as in `FileMeta`.
    pub obsolete: ObsoleteMark,
}

impl ValueFileMeta {
    /// Bytes of all records, the part of the file garbage is counted in.
    pub(crate) fn record_bytes(&self) -> u64 {
        // Saturating: the manifest decoder refuses overflowing sums, this
        // keeps any other path from panicking.
        self.hosted
            .iter()
            .fold(0u64, |sum, h| sum.saturating_add(h.bytes))
    }

    pub(crate) fn mark_obsolete(&self, sink: &Arc<ObsoleteFiles>) {
        self.obsolete.mark(FileKind::ValueFile, self.number, sink);
    }
}
