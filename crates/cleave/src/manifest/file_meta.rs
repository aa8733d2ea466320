//! Metadata of one live sstable, shared (through `Arc`) by every Version
//! that names it.
//!
//! An sstable (or value file) may be deleted only when no Version (and so
//! no reader holding one) names it. Reference counting does that for us:
//! when an edit removes a file from the current Version, the VersionSet
//! marks its metadata obsolete; when the last `Arc` goes away, the mark's
//! `Drop` queues the file in the shared [`ObsoleteFiles`] list that the DB
//! drains. A file never marked (every live file at close) is never queued.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::base::filename::FileKind;
use crate::base::{FileNumber, InternalKey, SeqNo};

/// What one sstable references in one logical value file: the manifest's
/// copy of the count and bytes of the table's value-references block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableValueRefs {
    pub logical_file: FileNumber,
    /// Records referenced.
    pub count: u64,
    /// Record bytes referenced (the handles' `len`, summed).
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// Per referenced logical value file, sorted by file number.
    pub value_refs: Vec<TableValueRefs>,
    /// Lifecycle state, not metadata: set when the file leaves the current
    /// Version. Construct with `ObsoleteMark::default()`.
    pub obsolete: ObsoleteMark,
}

impl FileMeta {
    pub(crate) fn smallest_user(&self) -> &[u8] {
        self.smallest.user_key()
    }

    pub(crate) fn largest_user(&self) -> &[u8] {
        self.largest.user_key()
    }

    /// Bytes of value-file records the table references.
    pub(crate) fn value_bytes(&self) -> u64 {
        self.value_refs
            .iter()
            .fold(0u64, |sum, r| sum.saturating_add(r.bytes))
    }

    /// The table's size as if its separated values were inline: what
    /// level sizes and file picking count, so the key tree keeps the shape
    /// it would have without separation.
    pub(crate) fn compensated_size(&self) -> u64 {
        self.size.saturating_add(self.value_bytes())
    }

    /// Whether the file's user-key range contains `user_key`.
    pub(crate) fn contains_user_key(&self, user_key: &[u8]) -> bool {
        self.smallest_user() <= user_key && user_key <= self.largest_user()
    }

    /// Whether the file's user-key range intersects the inclusive range
    /// `[smallest, largest]`; `None` is unbounded.
    pub(crate) fn overlaps(&self, smallest: Option<&[u8]>, largest: Option<&[u8]>) -> bool {
        let after = smallest.is_some_and(|s| self.largest_user() < s);
        let before = largest.is_some_and(|l| self.smallest_user() > l);
        !after && !before
    }

    /// Queues this file for deletion once the last reference to it is gone.
    pub(crate) fn mark_obsolete(&self, sink: &Arc<ObsoleteFiles>) {
        self.obsolete.mark(FileKind::Sstable, self.number, sink);
    }

    #[cfg(test)]
    pub(crate) fn is_marked_obsolete(&self) -> bool {
        self.obsolete.0.get().is_some()
    }
}

/// Set once, when the file is removed from the current Version.
#[derive(Default)]
pub(crate) struct ObsoleteMark(OnceLock<(ObsoleteFile, Arc<ObsoleteFiles>)>);

impl ObsoleteMark {
    pub(crate) fn mark(&self, kind: FileKind, number: FileNumber, sink: &Arc<ObsoleteFiles>) {
        // A second mark (cannot happen: numbers are never reused) is ignored.
        if self
            .0
            .set((ObsoleteFile { kind, number }, sink.clone()))
            .is_ok()
        {
            sink.retained.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for ObsoleteMark {
    fn drop(&mut self) {
        if let Some((file, sink)) = self.0.take() {
            sink.push(file);
        }
    }
}

impl Clone for ObsoleteMark {
    /// A copy of the metadata is a new handle, not the same file's
    /// lifecycle: it starts unmarked, so cloning never schedules deletion.
    fn clone(&self) -> Self {
        ObsoleteMark::default()
    }
}

impl PartialEq for ObsoleteMark {
    /// Metadata equality ignores lifecycle state.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for ObsoleteMark {}

impl fmt::Debug for ObsoleteMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}",
            if self.0.get().is_some() {
                "obsolete"
            } else {
                "live"
            }
        )
    }
}

/// A file no Version names any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObsoleteFile {
    /// `Sstable` or `ValueFile`.
    pub kind: FileKind,
    pub number: FileNumber,
}

/// Files no Version names any more; the DB deletes them.
#[derive(Debug, Default)]
pub(crate) struct ObsoleteFiles {
    files: Mutex<Vec<ObsoleteFile>>,
    /// Files out of the current Version and not deleted yet: named by a
    /// Version a reader or a job still holds, or queued in `files`.
    retained: AtomicUsize,
    /// Whether `files` may be non-empty, readable without the lock: a
    /// reader that drops the last Version naming a file checks it on every
    /// release, so it must cost next to nothing.
    pending: AtomicBool,
}

impl ObsoleteFiles {
    fn push(&self, f: ObsoleteFile) {
        self.files.lock().push(f);
        self.pending.store(true, Ordering::Release);
    }

    pub(crate) fn is_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    pub(crate) fn take(&self) -> Vec<ObsoleteFile> {
        let mut files = self.files.lock();
        self.pending.store(false, Ordering::Release);
        std::mem::take(&mut *files)
    }

    /// How many files have left the current Version but still take
    /// space: space that comes back without any new work.
    pub(crate) fn retained(&self) -> usize {
        self.retained.load(Ordering::Relaxed)
    }

    /// Counts `n` files `take`n from here as gone (deleted, or left to
    /// the next open as orphans).
    pub(crate) fn deleted(&self, n: usize) {
        let before = self.retained.fetch_sub(n, Ordering::Relaxed);
        debug_assert!(before >= n, "{n} files deleted of {before} retained");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ValueKind;

    fn meta(n: u64) -> FileMeta {
        FileMeta {
            number: FileNumber(n),
            size: 10,
            smallest: InternalKey::new(b"a", 1, ValueKind::Value),
            largest: InternalKey::new(b"c", 2, ValueKind::Value),
            ..FileMeta::default()
        }
    }

    fn table(n: u64) -> ObsoleteFile {
        ObsoleteFile {
            kind: FileKind::Sstable,
            number: FileNumber(n),
        }
    }

    #[test]
    fn marked_file_is_queued_only_when_last_reference_drops() {
        let sink = Arc::new(ObsoleteFiles::default());
        let a = Arc::new(meta(7));
        let held = a.clone();
        a.mark_obsolete(&sink);
        drop(a);
        assert!(sink.take().is_empty(), "a reader still holds the file");
        assert_eq!(sink.retained(), 1);
        drop(held);
        assert_eq!(sink.take(), vec![table(7)]);
        assert_eq!(sink.retained(), 1, "queued, not deleted yet");
        sink.deleted(1);
        assert_eq!(sink.retained(), 0);
    }

    #[test]
    fn unmarked_and_cloned_files_are_never_queued() {
        let sink = Arc::new(ObsoleteFiles::default());
        let a = meta(8);
        a.mark_obsolete(&sink);
        let copy = a.clone();
        assert!(!copy.is_marked_obsolete());
        drop(copy);
        drop(meta(9));
        assert!(sink.take().is_empty());
        assert_eq!(sink.retained(), 1, "only the marked file");
        drop(a);
        assert_eq!(sink.take(), vec![table(8)]);
    }

    #[test]
    fn overlap_is_inclusive() {
        let m = meta(1);
        assert!(m.overlaps(Some(b"c"), None));
        assert!(m.overlaps(None, Some(b"a")));
        assert!(!m.overlaps(Some(b"d"), None));
        assert!(!m.overlaps(None, Some(b"0")));
        assert!(m.contains_user_key(b"b"));
        assert!(!m.contains_user_key(b"d"));
    }
}
