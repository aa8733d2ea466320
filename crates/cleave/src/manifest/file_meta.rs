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

use crate::base::coding::{put_varint64, DecodeError};
use crate::base::filename::FileKind;
use crate::base::Decoder;
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

/// Points of a table's expiry summary: the earliest expiry, then the
/// expiries by which each eighth of its expiring value bytes has expired.
pub(crate) const EXPIRY_POINTS: usize = 9;

/// A table's entries with an expiry, summarized: the table's `cleave.expiry`
/// property, copied to the manifest, which the compaction picker reads to
/// find tables whose values have expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableExpiry {
    /// How many entries have an expiry.
    pub entries: u64,
    /// Bytes of their values: inline, or the records their handles name.
    pub value_bytes: u64,
    /// Milliseconds since the Unix epoch, ascending: `points[0]` the
    /// earliest expiry, `points[i]` the one by which `i/8` of
    /// `value_bytes` has expired (so `points[8]` the latest).
    pub points: [u64; EXPIRY_POINTS],
}

impl TableExpiry {
    /// The summary of entries given as `(expires_at, value bytes)`; none
    /// for none.
    pub(crate) fn summarize(mut entries: Vec<(u64, u64)>) -> Option<TableExpiry> {
        entries.sort_unstable();
        let earliest = entries.first()?.0;
        let entries_len = entries.len() as u64;
        let value_bytes: u64 = entries.iter().map(|e| e.1).sum();
        // Each entry weighs at least 1, so empty values count too.
        let total: u128 = entries.iter().map(|e| u128::from(e.1.max(1))).sum();
        let mut points = [earliest; EXPIRY_POINTS];
        let eighths = (EXPIRY_POINTS - 1) as u128;
        let mut seen = 0u128;
        let mut next = 1;
        for (at, bytes) in entries {
            seen += u128::from(bytes.max(1));
            while next < EXPIRY_POINTS && seen * eighths >= total * next as u128 {
                points[next] = at;
                next += 1;
            }
        }
        Some(TableExpiry {
            entries: entries_len,
            value_bytes,
            points,
        })
    }

    pub(crate) fn earliest(&self) -> u64 {
        self.points[0]
    }

    pub(crate) fn latest(&self) -> u64 {
        self.points[EXPIRY_POINTS - 1]
    }

    /// Eighths of the expiring weight expired at `now`.
    fn eighths_expired(&self, now: u64) -> u128 {
        self.points[1..].iter().filter(|&&p| p <= now).count() as u128
    }

    /// Of `value_bytes`, about how many have expired at `now`: to the
    /// eighth below.
    pub(crate) fn expired_bytes(&self, now: u64) -> u64 {
        let eighths = self.eighths_expired(now);
        (u128::from(self.value_bytes) * eighths / (EXPIRY_POINTS - 1) as u128) as u64
    }

    /// Of `entries`, about how many have not expired at `now`.
    pub(crate) fn unexpired_entries(&self, now: u64) -> u64 {
        let left = (EXPIRY_POINTS - 1) as u128 - self.eighths_expired(now);
        (u128::from(self.entries) * left / (EXPIRY_POINTS - 1) as u128) as u64
    }

    /// `varint entries`, `varint value_bytes`, then the points as varints.
    pub(crate) fn encode(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.entries);
        put_varint64(dst, self.value_bytes);
        for p in self.points {
            put_varint64(dst, p);
        }
    }

    pub(crate) fn decode(d: &mut Decoder<'_>) -> Result<TableExpiry, DecodeError> {
        let entries = d.varint64()?;
        let value_bytes = d.varint64()?;
        let mut points = [0u64; EXPIRY_POINTS];
        for p in &mut points {
            *p = d.varint64()?;
        }
        if points.windows(2).any(|w| w[0] > w[1]) {
            return Err(DecodeError("expiry points out of order"));
        }
        if entries == 0 {
            return Err(DecodeError("expiry summary of no entry"));
        }
        Ok(TableExpiry {
            entries,
            value_bytes,
            points,
        })
    }
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
    /// None if no entry has an expiry.
    pub expiry: Option<TableExpiry>,
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

    /// When every entry of the table will have expired: `None` if some
    /// entry other than a deletion has no expiry (a merge operand
    /// included), so that it may live for ever.
    pub(crate) fn all_expired_by(&self) -> Option<u64> {
        let x = self.expiry?;
        (x.entries.saturating_add(self.num_deletions) >= self.num_entries).then(|| x.latest())
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
    #[test]
    fn expiry_summary_counts_bytes_expired_by_eighths() {
        assert_eq!(TableExpiry::summarize(Vec::new()), None);
        let x = TableExpiry::summarize(vec![(20, 100), (10, 100)]).unwrap();
        assert_eq!(x.value_bytes, 200);
        assert_eq!(x.points, [10, 10, 10, 10, 10, 20, 20, 20, 20]);
        assert_eq!(x.expired_bytes(9), 0);
        assert_eq!(x.expired_bytes(10), 100);
        assert_eq!(x.expired_bytes(20), 200);
        assert_eq!(
            (x.entries, x.unexpired_entries(9), x.unexpired_entries(10)),
            (2, 2, 1)
        );
        let mut enc = Vec::new();
        x.encode(&mut enc);
        assert_eq!(TableExpiry::decode(&mut Decoder::new(&enc)).unwrap(), x);
        let mut bad = Vec::new();
        TableExpiry {
            entries: 1,
            value_bytes: 1,
            points: [5, 4, 4, 4, 4, 4, 4, 4, 4],
        }
        .encode(&mut bad);
        assert!(TableExpiry::decode(&mut Decoder::new(&bad)).is_err());
        // Empty values weigh one each.
        let x = TableExpiry::summarize(vec![(1, 0), (2, 0), (3, 0), (4, 0)]).unwrap();
        assert_eq!(x.points, [1, 1, 1, 2, 2, 3, 3, 4, 4]);
    }

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
