//! An immutable snapshot of the live sstables, level by level, and of the
//! live value files. Readers and compactions hold an `Arc<Version>`, so the
//! files they use cannot be deleted under them.
//!
//! The Version also knows, exactly and without I/O, how many bytes of each
//! logical value file the live sstables reference (the manifest keeps each
//! table's count and bytes per logical file), hence every physical value
//! file's garbage.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use crate::base::key;
use crate::base::limits::NUM_LEVELS;
use crate::base::FileNumber;

use super::{BucketMeta, DeltaFileMeta, FileMeta, ValueFileMeta, VersionEdit};

/// Records and bytes of one logical value file that live sstables reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Referenced {
    pub count: u64,
    pub bytes: u64,
}

#[derive(Default, Clone)]
pub(crate) struct Version {
    /// L0 newest first (by file number, descending: flush order); L1+ sorted
    /// by smallest key and non-overlapping.
    levels: [Vec<Arc<FileMeta>>; NUM_LEVELS],
    /// Physical value files by number.
    value_files: BTreeMap<FileNumber, Arc<ValueFileMeta>>,
    /// Derived: each logical value file's physical file.
    logical: BTreeMap<FileNumber, FileNumber>,
    /// Derived: what live sstables reference, per logical value file;
    /// absent means nothing.
    referenced: BTreeMap<FileNumber, Referenced>,
    /// The delta store's files by number.
    delta_files: DeltaFiles,
    /// The delta store's buckets by smallest key; empty, or covering the
    /// whole key space.
    buckets: Buckets,
}

impl Version {
    pub(crate) fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        &self.levels[level]
    }

    pub(crate) fn num_files(&self, level: usize) -> usize {
        self.levels[level].len()
    }

    /// Saturating, as the other sums: sizes come from the manifest.
    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level]
            .iter()
            .fold(0u64, |sum, f| sum.saturating_add(f.size))
    }

    /// Sstable bytes plus the value bytes they reference.
    pub(crate) fn level_compensated_bytes(&self, level: usize) -> u64 {
        self.levels[level]
            .iter()
            .fold(0u64, |sum, f| sum.saturating_add(f.compensated_size()))
    }

    /// Value bytes the sstables of `level` reference.
    pub(crate) fn level_value_bytes(&self, level: usize) -> u64 {
        self.levels[level]
            .iter()
            .fold(0u64, |sum, f| sum.saturating_add(f.value_bytes()))
    }

    pub(crate) fn value_files(&self) -> impl Iterator<Item = &Arc<ValueFileMeta>> {
        self.value_files.values()
    }

    /// Physical value file `number`, if this Version names it.
    pub(crate) fn value_file(&self, number: FileNumber) -> Option<&Arc<ValueFileMeta>> {
        self.value_files.get(&number)
    }

    /// The physical file hosting `logical_file` now.
    pub(crate) fn physical_file(&self, logical_file: FileNumber) -> Option<FileNumber> {
        self.logical.get(&logical_file).copied()
    }

    /// What live sstables reference in `logical_file`.
    pub(crate) fn referenced(&self, logical_file: FileNumber) -> Referenced {
        self.referenced
            .get(&logical_file)
            .copied()
            .unwrap_or_default()
    }

    /// Record bytes of `file` that no live sstable references: exact
    /// garbage, reclaimable by GC (or by deleting the file when all of it
    /// is garbage).
    pub(crate) fn garbage_bytes(&self, file: &ValueFileMeta) -> u64 {
        let live = file.hosted.iter().fold(0u64, |sum, h| {
            sum.saturating_add(self.referenced(h.logical_file).bytes)
        });
        file.record_bytes().saturating_sub(live)
    }

    /// For each logical value file that live sstables reference only from
    /// tables whose every entry expires, when the last of those entries
    /// will have expired (`FileMeta::all_expired_by`). A logical file
    /// missing from the map is referenced by an entry that may live for
    /// ever, or by none.
    pub(crate) fn logical_expiries(&self) -> HashMap<FileNumber, u64> {
        let mut by: HashMap<FileNumber, Option<u64>> = HashMap::new();
        for (_, f) in self.all_files() {
            let until = f.all_expired_by();
            for r in &f.value_refs {
                by.entry(r.logical_file)
                    .and_modify(|at| *at = at.zip(until).map(|(a, b)| a.max(b)))
                    .or_insert(until);
            }
        }
        by.into_iter()
            .filter_map(|(logical, at)| Some((logical, at?)))
            .collect()
    }

    /// Whether any live sstable holds an entry with an expiry.
    pub(crate) fn has_expiring_entries(&self) -> bool {
        self.all_files().any(|(_, f)| f.expiry.is_some())
    }

    /// Physical value files none of whose records any sstable references.
    pub(crate) fn unreferenced_value_files(&self) -> Vec<FileNumber> {
        self.value_files
            .values()
            .filter(|f| {
                f.hosted
                    .iter()
                    .all(|h| self.referenced(h.logical_file).count == 0)
            })
            .map(|f| f.number)
            .collect()
    }

    pub(crate) fn delta_files(&self) -> impl Iterator<Item = &Arc<DeltaFileMeta>> {
        self.delta_files.values()
    }

    pub(crate) fn delta_file(&self, number: FileNumber) -> Option<&Arc<DeltaFileMeta>> {
        self.delta_files.get(&number)
    }

    /// The delta store's buckets in key order.
    pub(crate) fn buckets(&self) -> impl DoubleEndedIterator<Item = &Arc<BucketMeta>> {
        self.buckets.values()
    }

    pub(crate) fn has_buckets(&self) -> bool {
        !self.buckets.is_empty()
    }

    /// The bucket whose range holds `user_key`, if the store has any.
    pub(crate) fn bucket_for(&self, user_key: &[u8]) -> Option<&Arc<BucketMeta>> {
        self.buckets
            .range::<[u8], _>((
                std::ops::Bound::Unbounded,
                std::ops::Bound::Included(user_key),
            ))
            .next_back()
            .map(|(_, b)| b)
    }

    /// The same sstables (level by level), value files and delta store,
    /// with the same metadata.
    pub(crate) fn same_files(&self, other: &Version) -> bool {
        self.levels == other.levels
            && self.value_files == other.value_files
            && self.delta_files == other.delta_files
            && self.buckets == other.buckets
    }

    pub(crate) fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(level, files)| files.iter().map(move |f| (level, f)))
    }

    pub(crate) fn contains_file(&self, number: FileNumber) -> bool {
        self.all_files().any(|(_, f)| f.number == number)
    }

    /// Files of `level` whose user-key range intersects the inclusive range
    /// `[smallest, largest]` (`None` is unbounded), in the level's order.
    pub(crate) fn overlapping_files(
        &self,
        level: usize,
        smallest: Option<&[u8]>,
        largest: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        let files = &self.levels[level];
        if level == 0 {
            return files
                .iter()
                .filter(|f| f.overlaps(smallest, largest))
                .cloned()
                .collect();
        }
        let start = match smallest {
            Some(s) => files.partition_point(|f| f.largest_user() < s),
            None => 0,
        };
        files[start..]
            .iter()
            .take_while(|f| largest.is_none_or(|l| f.smallest_user() <= l))
            .cloned()
            .collect()
    }

    /// The files a point lookup of `user_key` must consult, in search order:
    /// L0 files containing it newest first, then per level the files
    /// containing it (one, or a few when entries of one user key straddle
    /// adjacent files, newest entries first).
    pub(crate) fn files_for_get(&self, user_key: &[u8]) -> Vec<Arc<FileMeta>> {
        let mut out: Vec<_> = self.levels[0]
            .iter()
            .filter(|f| f.contains_user_key(user_key))
            .cloned()
            .collect();
        for level in 1..NUM_LEVELS {
            out.extend(self.overlapping_files(level, Some(user_key), Some(user_key)));
        }
        out
    }

    /// Whether any level below `level` has a file whose range contains
    /// `user_key`; compaction may drop a tombstone only when none does.
    pub(crate) fn key_may_exist_below(&self, level: usize, user_key: &[u8]) -> bool {
        (level + 1..NUM_LEVELS).any(|l| {
            let files = &self.levels[l];
            if l == 0 {
                return files.iter().any(|f| f.contains_user_key(user_key));
            }
            let i = files.partition_point(|f| f.largest_user() < user_key);
            files.get(i).is_some_and(|f| f.smallest_user() <= user_key)
        })
    }

    /// The Version after `edit`. Errors describe an edit that cannot apply
    /// (a deleted file that is absent, a duplicate file, overlap in L1+):
    /// corruption when replaying a manifest, a bug when logging. The new
    /// Version holds the edit's own metadata, so callers can mark exactly
    /// the `Arc`s that Versions share.
    pub(crate) fn apply(&self, mut edit: VersionEdit) -> Result<Version, &'static str> {
        let edit_delta = DeltaEdit {
            new_files: std::mem::take(&mut edit.new_delta_files),
            deleted_files: std::mem::take(&mut edit.deleted_delta_files),
            deleted_buckets: std::mem::take(&mut edit.deleted_buckets),
            new_buckets: std::mem::take(&mut edit.new_buckets),
            appended_chunks: std::mem::take(&mut edit.appended_chunks),
        };
        let mut value_files = self.value_files.clone();
        for number in &edit.deleted_value_files {
            value_files
                .remove(number)
                .ok_or("edit deletes a value file that is not in the version")?;
        }
        for meta in edit.new_value_files {
            if meta.hosted.is_empty() {
                return Err("value file hosts no logical file");
            }
            if value_files.insert(meta.number, Arc::new(meta)).is_some() {
                return Err("value file number appears twice in a version");
            }
        }
        let mut levels = self.levels.clone();
        let mut removed = Vec::new();
        for &(level, number) in &edit.deleted_files {
            let files = levels.get_mut(level).ok_or("level out of range")?;
            let at = files
                .iter()
                .position(|f| f.number == number)
                .ok_or("edit deletes a file that is not in its level")?;
            removed.push(files.remove(at));
        }
        for (level, meta) in edit.new_files {
            let files = levels.get_mut(level).ok_or("level out of range")?;
            // A file moved between levels keeps its one `Arc`: deletion
            // waits for the last holder of the file, whichever level it was
            // read from.
            let moved = removed.iter().find(|f| f.number == meta.number);
            files.push(moved.map_or_else(|| Arc::new(meta), Arc::clone));
        }
        let (delta_files, buckets) = self.apply_delta(&edit_delta)?;
        let mut v = Version {
            levels,
            value_files,
            delta_files,
            buckets,
            ..Version::default()
        };
        v.sort();
        v.derive_value_maps()?;
        v.check()?;
        Ok(v)
    }

    /// The delta store after `edit`: buckets leave, join and grow, and
    /// every chunk must lie inside a live delta file.
    fn apply_delta(&self, edit: &DeltaEdit) -> Result<(DeltaFiles, Buckets), &'static str> {
        let mut files = self.delta_files.clone();
        for number in &edit.deleted_files {
            files
                .remove(number)
                .ok_or("edit deletes a delta file that is not in the version")?;
        }
        for f in &edit.new_files {
            if files.insert(f.number, Arc::new(f.clone())).is_some() {
                return Err("delta file number appears twice in a version");
            }
        }
        let mut buckets = self.buckets.clone();
        let mut by_id: BTreeMap<u64, Vec<u8>> = buckets
            .values()
            .map(|b| (b.id, b.smallest.clone()))
            .collect();
        for id in &edit.deleted_buckets {
            let smallest = by_id
                .remove(id)
                .ok_or("edit deletes a bucket that is not in the version")?;
            buckets.remove(&smallest);
        }
        for b in &edit.new_buckets {
            if b.chunks.is_empty() {
                return Err("bucket without chunks");
            }
            if by_id.insert(b.id, b.smallest.clone()).is_some() {
                return Err("bucket id appears twice in a version");
            }
            if buckets
                .insert(b.smallest.clone(), Arc::new(b.clone()))
                .is_some()
            {
                return Err("two buckets start at the same key");
            }
        }
        for (id, chunk) in &edit.appended_chunks {
            let smallest = by_id.get(id).ok_or("chunk appended to an unknown bucket")?;
            let b = buckets
                .get_mut(smallest)
                .ok_or("bucket index out of step")?;
            let mut grown = (**b).clone();
            grown.chunks.push(*chunk);
            *b = Arc::new(grown);
        }
        if buckets.keys().next().is_some_and(|k| !k.is_empty()) {
            return Err("the first bucket does not start at the empty key");
        }
        for b in buckets.values() {
            for c in &b.chunks {
                let f = files
                    .get(&c.file)
                    .ok_or("bucket chunk in a delta file the version does not hold")?;
                if c.offset.saturating_add(c.len) > f.size {
                    return Err("bucket chunk past the end of its delta file");
                }
            }
        }
        Ok((files, buckets))
    }

    /// Fills `logical` and `referenced` from the files, checking that each
    /// logical file lives in one physical file and that no table references
    /// a logical file that is absent or more of one than it holds.
    fn derive_value_maps(&mut self) -> Result<(), &'static str> {
        for (&number, f) in &self.value_files {
            for h in &f.hosted {
                if self.logical.insert(h.logical_file, number).is_some() {
                    return Err("logical value file hosted by two physical files");
                }
            }
        }
        let mut referenced: BTreeMap<FileNumber, Referenced> = BTreeMap::new();
        for (_, f) in self.all_files() {
            for r in &f.value_refs {
                let e = referenced.entry(r.logical_file).or_default();
                e.count = e.count.saturating_add(r.count);
                e.bytes = e.bytes.saturating_add(r.bytes);
            }
        }
        self.referenced = referenced;
        for (logical, r) in &self.referenced {
            let hosted = self
                .logical
                .get(logical)
                .and_then(|p| self.value_files.get(p))
                .and_then(|f| f.hosted.iter().find(|h| h.logical_file == *logical))
                .ok_or("sstable references a logical value file the version does not hold")?;
            if r.count > hosted.records || r.bytes > hosted.bytes {
                return Err("sstables reference more of a logical value file than it holds");
            }
        }
        Ok(())
    }

    /// Builds a Version from files per level, for tests and tools.
    #[cfg(test)]
    pub(crate) fn from_files(files: Vec<(usize, FileMeta)>) -> Result<Version, &'static str> {
        Version::default().apply(VersionEdit {
            new_files: files,
            ..VersionEdit::default()
        })
    }

    fn check(&self) -> Result<(), &'static str> {
        let mut seen = std::collections::HashSet::new();
        if !self.all_files().all(|(_, f)| seen.insert(f.number)) {
            return Err("file number appears twice in a version");
        }
        if !self.value_files.keys().all(|n| seen.insert(*n)) {
            return Err("value file has the number of an sstable");
        }
        if !self.delta_files.keys().all(|n| seen.insert(*n)) {
            return Err("delta file has the number of another file");
        }
        for files in self.levels.iter().skip(1) {
            let sorted = files.windows(2).all(|pair| match pair {
                [a, b] => key::compare(a.largest.encoded(), b.smallest.encoded()) == Ordering::Less,
                _ => true,
            });
            if !sorted {
                return Err("files overlap in a level below L0");
            }
        }
        Ok(())
    }

    fn sort(&mut self) {
        // Flush order: a flush that folds a full delta bucket writes
        // operands older than its memtable, but newer than any entry of
        // their keys in older files, so a file's largest sequence number
        // would misplace it.
        self.levels[0].sort_by_key(|f| std::cmp::Reverse(f.number));
        for files in self.levels.iter_mut().skip(1) {
            files.sort_by(|a, b| key::compare(a.smallest.encoded(), b.smallest.encoded()));
        }
    }
}

type DeltaFiles = BTreeMap<FileNumber, Arc<DeltaFileMeta>>;
type Buckets = BTreeMap<Vec<u8>, Arc<BucketMeta>>;

/// The delta store's part of a VersionEdit.
struct DeltaEdit {
    new_files: Vec<DeltaFileMeta>,
    deleted_files: Vec<FileNumber>,
    deleted_buckets: Vec<u64>,
    new_buckets: Vec<BucketMeta>,
    appended_chunks: Vec<(u64, super::ChunkRef)>,
}

impl fmt::Debug for Version {
    /// One line per non-empty level: `L1: 7[a..c] 9[d..f]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (level, files) in self.levels.iter().enumerate() {
            if files.is_empty() {
                continue;
            }
            write!(f, "L{level}:")?;
            for m in files {
                write!(
                    f,
                    " {}[{}..{}]",
                    m.number.0,
                    String::from_utf8_lossy(m.smallest_user()),
                    String::from_utf8_lossy(m.largest_user())
                )?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::testutil::meta;

    fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
        files.iter().map(|f| f.number.0).collect()
    }

    fn sample() -> Version {
        Version::from_files(vec![
            (0, meta(10, "a", "k", 100, 10)),
            (0, meta(12, "f", "z", 200, 10)),
            (0, meta(11, "m", "p", 150, 10)),
            (1, meta(5, "j", "m", 50, 20)),
            (1, meta(4, "a", "c", 50, 20)),
            (1, meta(6, "q", "t", 50, 20)),
            (3, meta(2, "b", "h", 10, 40)),
        ])
        .unwrap()
    }

    /// Regression: a trivial move once gave the moved file a second `Arc`,
    /// and a reader holding the old one could see the file deleted.
    #[test]
    fn moved_file_keeps_its_arc() {
        let v = sample();
        let mut e = VersionEdit::default();
        e.delete_file(1, FileNumber(6));
        e.add_file(2, meta(6, "q", "t", 50, 20));
        let moved = v.apply(e).unwrap();
        let old = v.files(1).iter().find(|f| f.number.0 == 6).unwrap();
        let new = moved.files(2).iter().find(|f| f.number.0 == 6).unwrap();
        assert!(Arc::ptr_eq(old, new));
    }

    /// Found through the version_edit fuzz target: two files whose sizes,
    /// as a manifest states them, sum past `u64::MAX` made `level_bytes`
    /// overflow (a panic with overflow checks, a wrong size without).
    #[test]
    fn level_sizes_saturate() {
        let mut edit = VersionEdit::default();
        edit.add_file(0, meta(11, "a", "b", 10, u64::MAX));
        edit.add_file(0, meta(12, "a", "b", 20, u64::MAX));
        let mut bytes = Vec::new();
        edit.encode(&mut bytes);
        let v = Version::default()
            .apply(VersionEdit::decode(&bytes).unwrap())
            .unwrap();
        assert_eq!(v.num_files(0), 2);
        assert_eq!(v.level_bytes(0), u64::MAX);
        assert_eq!(v.level_compensated_bytes(0), u64::MAX);
    }

    /// A flush that folds a full delta bucket writes operands older than
    /// the previous flush's entries: still the newest of their keys, so
    /// its file is searched first.
    #[test]
    fn level_0_is_in_flush_order_whatever_its_sequence_numbers() {
        let v = Version::from_files(vec![
            (0, meta(10, "a", "z", 50, 100)),
            (0, meta(20, "a", "z", 5, 100)),
        ])
        .unwrap();
        assert_eq!(numbers(v.files(0)), vec![20, 10]);
    }

    #[test]
    fn levels_are_ordered() {
        let v = sample();
        assert_eq!(numbers(v.files(0)), vec![12, 11, 10]);
        assert_eq!(numbers(v.files(1)), vec![4, 5, 6]);
        assert_eq!(v.num_files(1), 3);
        assert_eq!(v.level_bytes(1), 60);
        assert_eq!(v.all_files().count(), 7);
    }

    #[test]
    fn overlapping_files_inclusive_and_unbounded() {
        let v = sample();
        let o = |l, a: Option<&str>, b: Option<&str>| {
            numbers(&v.overlapping_files(l, a.map(str::as_bytes), b.map(str::as_bytes)))
        };
        assert_eq!(o(1, Some("c"), Some("j")), vec![4, 5]);
        assert_eq!(o(1, Some("d"), Some("i")), Vec::<u64>::new());
        assert_eq!(o(1, None, Some("a")), vec![4]);
        assert_eq!(o(1, Some("n"), None), vec![6]);
        assert_eq!(o(1, None, None), vec![4, 5, 6]);
        assert_eq!(o(0, Some("l"), Some("l")), vec![12]);
        assert_eq!(o(0, Some("n"), Some("n")), vec![12, 11]);
    }

    #[test]
    fn files_for_get_in_search_order() {
        let v = sample();
        assert_eq!(numbers(&v.files_for_get(b"g")), vec![12, 10, 2]);
        assert_eq!(numbers(&v.files_for_get(b"m")), vec![12, 11, 5]);
        assert_eq!(numbers(&v.files_for_get(b"0")), Vec::<u64>::new());
    }

    #[test]
    fn key_may_exist_below() {
        let v = sample();
        assert!(v.key_may_exist_below(1, b"c"));
        assert!(!v.key_may_exist_below(1, b"k"));
        assert!(!v.key_may_exist_below(3, b"c"));
        assert!(v.key_may_exist_below(0, b"k"));
    }

    #[test]
    fn bad_edits_are_rejected() {
        let v = sample();
        let mut e = VersionEdit::default();
        e.delete_file(2, FileNumber(4));
        assert!(v.apply(e).is_err(), "file 4 is in L1, not L2");
        let mut e = VersionEdit::default();
        e.add_file(1, meta(20, "b", "d", 1, 1));
        assert!(v.apply(e).is_err(), "overlaps file 4 in L1");
        let mut e = VersionEdit::default();
        e.add_file(5, meta(4, "x", "y", 1, 1));
        assert!(v.apply(e).is_err(), "duplicate number");
        let mut e = VersionEdit::default();
        e.delete_file(1, FileNumber(4));
        e.add_file(2, meta(4, "a", "c", 50, 20));
        let moved = v.apply(e).unwrap();
        assert_eq!(numbers(moved.files(2)), vec![4]);
        assert_eq!(numbers(moved.files(1)), vec![5, 6]);
    }

    fn value_file(n: u64, hosted: &[(u64, u64, u64)]) -> ValueFileMeta {
        ValueFileMeta {
            number: FileNumber(n),
            size: hosted.iter().map(|h| h.2).sum::<u64>() + 100,
            hosted: hosted
                .iter()
                .map(|&(l, records, bytes)| crate::manifest::HostedLogical {
                    logical_file: FileNumber(l),
                    records,
                    bytes,
                })
                .collect(),
            ..ValueFileMeta::default()
        }
    }

    fn refs(table: FileMeta, refs: &[(u64, u64, u64)]) -> FileMeta {
        FileMeta {
            value_refs: refs
                .iter()
                .map(|&(l, count, bytes)| crate::manifest::TableValueRefs {
                    logical_file: FileNumber(l),
                    count,
                    bytes,
                })
                .collect(),
            ..table
        }
    }

    #[test]
    fn referenced_bytes_garbage_and_compensated_sizes() {
        let mut e = VersionEdit::default();
        e.add_value_file(value_file(30, &[(30, 10, 1000)]));
        e.add_value_file(value_file(31, &[(31, 4, 400)]));
        e.add_file(1, refs(meta(1, "a", "c", 1, 50), &[(30, 3, 300)]));
        e.add_file(
            2,
            refs(meta(2, "a", "z", 1, 70), &[(30, 5, 500), (31, 4, 400)]),
        );
        let v = Version::default().apply(e).unwrap();
        assert_eq!(v.referenced(FileNumber(30)).count, 8);
        assert_eq!(v.referenced(FileNumber(30)).bytes, 800);
        assert_eq!(v.physical_file(FileNumber(31)), Some(FileNumber(31)));
        let f30 = v.value_files().find(|f| f.number.0 == 30).unwrap();
        assert_eq!(v.garbage_bytes(f30), 200);
        assert_eq!(v.level_compensated_bytes(1), 350);
        assert_eq!(v.level_value_bytes(2), 900);
        assert!(v.unreferenced_value_files().is_empty());

        // Dropping the only table that references file 31 leaves it dead.
        let mut e = VersionEdit::default();
        e.delete_file(2, FileNumber(2));
        let v = v.apply(e).unwrap();
        assert_eq!(v.unreferenced_value_files(), vec![FileNumber(31)]);
        assert_eq!(v.referenced(FileNumber(30)).bytes, 300);
    }

    #[test]
    fn value_file_edits_that_cannot_apply_are_rejected() {
        let base = {
            let mut e = VersionEdit::default();
            e.add_value_file(value_file(30, &[(30, 10, 1000)]));
            Version::default().apply(e).unwrap()
        };
        let cases: Vec<(&str, VersionEdit)> = vec![
            ("dangling reference", {
                let mut e = VersionEdit::default();
                e.add_file(1, refs(meta(1, "a", "c", 1, 50), &[(29, 1, 10)]));
                e
            }),
            ("more than the file holds", {
                let mut e = VersionEdit::default();
                e.add_file(1, refs(meta(1, "a", "c", 1, 50), &[(30, 11, 1000)]));
                e
            }),
            ("logical file hosted twice", {
                let mut e = VersionEdit::default();
                e.add_value_file(value_file(32, &[(30, 1, 10)]));
                e
            }),
            ("duplicate value file", {
                let mut e = VersionEdit::default();
                e.add_value_file(value_file(30, &[(33, 1, 10)]));
                e
            }),
            ("number of an sstable", {
                let mut e = VersionEdit::default();
                e.add_file(1, meta(34, "a", "c", 1, 50));
                e.add_value_file(value_file(34, &[(34, 1, 10)]));
                e
            }),
            ("deleting an absent value file", {
                let mut e = VersionEdit::default();
                e.delete_value_file(FileNumber(35));
                e
            }),
        ];
        for (what, e) in cases {
            assert!(base.apply(e).is_err(), "{what}");
        }
    }

    #[test]
    fn shared_user_key_at_boundary_is_found_in_both_files() {
        use crate::base::{InternalKey, ValueKind};
        let mut a = meta(1, "a", "k", 10, 1);
        a.largest = InternalKey::new(b"k", 9, ValueKind::Value);
        let mut b = meta(2, "k", "p", 1, 1);
        b.smallest = InternalKey::new(b"k", 3, ValueKind::Value);
        let v = Version::from_files(vec![(1, a), (1, b)]).unwrap();
        assert_eq!(numbers(&v.files_for_get(b"k")), vec![1, 2]);
    }
}
