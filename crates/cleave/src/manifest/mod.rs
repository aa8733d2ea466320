//! The manifest: VersionEdits, immutable Versions and the VersionSet that
//! logs and installs them. Format: `docs/format/manifest.md`.

pub(crate) mod delta_meta;
pub(crate) mod edit;
pub(crate) mod file_meta;
pub(crate) mod value_file_meta;
pub(crate) mod version;
pub(crate) mod version_set;

pub(crate) use delta_meta::{BucketMeta, ChunkRef, DeltaFileMeta};
pub(crate) use edit::{VersionEdit, FORMAT_VERSION};
pub(crate) use file_meta::{FileMeta, ObsoleteFiles, TableExpiry, TableValueRefs};
pub(crate) use value_file_meta::{HostedLogical, ValueFileMeta};
pub(crate) use version::Version;

#[cfg(test)]
pub(crate) mod testutil {
    use super::FileMeta;
    use crate::base::{FileNumber, InternalKey, SeqNo, ValueKind};

    /// A file holding user keys `lo..=hi`, written at seqs `seq..=seq+1`.
    pub(crate) fn meta(n: u64, lo: &str, hi: &str, seq: SeqNo, size: u64) -> FileMeta {
        FileMeta {
            number: FileNumber(n),
            size,
            smallest: InternalKey::new(lo.as_bytes(), seq + 1, ValueKind::Value),
            largest: InternalKey::new(hi.as_bytes(), seq, ValueKind::Deletion),
            smallest_seq: seq,
            largest_seq: seq + 1,
            num_entries: 2,
            num_deletions: 1,
            ..FileMeta::default()
        }
    }
}
