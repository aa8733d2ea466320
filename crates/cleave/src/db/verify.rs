//! `Db::verify()`: everything `verify_checksums` checks, and that the parts
//! agree with each other. The manifest on disk describes the open Version;
//! the levels are ordered; every file has the size the manifest gives;
//! every value handle resolves to a record holding its entry's key and
//! seq; the value-references blocks, the manifest's per-table counts and
//! the entries agree; and the exact garbage the Version derives equals a
//! recount from the bitmaps and the records themselves.
//!
//! Problems are collected, not returned at the first: an operator wants
//! the whole list, and a test wants to know that nothing at all is wrong.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::DbInner;
use crate::base::expiry;
use crate::base::limits::NUM_LEVELS;
use crate::base::{filename, key, FileNumber, InternalIterator, SeqNo, ValueKind};

use crate::delta;
use crate::error::{Error, Result};
use crate::manifest::{FileMeta, Version};
use crate::sstable::Table;
use crate::value_file::ValueHandle;
use crate::vfs::FileOptions;

/// What `Db::verify` checked, and every problem it found; each names the
/// file at fault.
#[derive(Debug, Default)]
pub struct VerifyReport {
    pub sstables: usize,
    /// Entries read from the sstables.
    pub entries: u64,
    /// Separated values read through their handles.
    pub value_handles: u64,
    pub value_files: usize,
    /// Records read from the value files.
    pub value_records: u64,
    /// Recounted from the bitmaps and the records: record bytes that live
    /// sstables reference, and the rest (exact garbage).
    pub referenced_value_bytes: u64,
    pub garbage_bytes: u64,
    /// The delta store: its files and buckets, and the records read from
    /// the buckets' chunks.
    pub delta_files: usize,
    pub delta_buckets: usize,
    pub delta_records: u64,
    pub problems: Vec<Error>,
}

impl VerifyReport {
    /// True if no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "sstables: {} ({} entries, {} value handles resolved)",
            self.sstables, self.entries, self.value_handles
        )?;
        writeln!(
            f,
            "value files: {} ({} records; {} bytes referenced, {} bytes garbage)",
            self.value_files, self.value_records, self.referenced_value_bytes, self.garbage_bytes
        )?;
        if self.delta_files > 0 {
            writeln!(
                f,
                "delta store: {} files, {} buckets ({} records)",
                self.delta_files, self.delta_buckets, self.delta_records
            )?;
        }
        if self.problems.is_empty() {
            return writeln!(f, "ok");
        }
        writeln!(f, "{} problems:", self.problems.len())?;
        for p in &self.problems {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

/// Each record's length, by `(logical file, ordinal)`, as read.
type RecordLens = HashMap<(FileNumber, u64), u32>;

/// Records and bytes referenced per logical file, in file order.
type RefCounts = Vec<(FileNumber, u64, u64)>;

fn show(counts: &RefCounts) -> String {
    let parts: Vec<String> = counts
        .iter()
        .map(|(f, n, b)| format!("{n} records ({b} bytes) of {f}"))
        .collect();
    if parts.is_empty() {
        "nothing".to_string()
    } else {
        parts.join(", ")
    }
}

fn flat(counts: &BTreeMap<FileNumber, (u64, u64)>) -> RefCounts {
    counts.iter().map(|(&f, &(n, b))| (f, n, b)).collect()
}

/// Per logical file: the union of the tables' bitmaps, and the sum of
/// their counts (equal to the union's size unless two tables claim one
/// record).
type Referenced = BTreeMap<FileNumber, (RoaringBitmap, u64)>;

impl DbInner {
    pub(super) fn verify(&self) -> VerifyReport {
        let mut report = VerifyReport::default();
        let version = {
            let vs = self.versions.lock();
            // A read-only open's manifest is the one it read: the process
            // writing the database may have logged edits since.
            if !self.read_only {
                if let Err(e) = vs.check_manifest() {
                    report.problems.push(e);
                }
            }
            vs.current()
        };
        self.check_levels(&version, &mut report);
        let records = self.check_value_files(&version, &mut report);
        let referenced = self.check_tables(&version, &mut report);
        check_garbage(&self.dir, &version, &records, &referenced, &mut report);
        self.check_delta_store(&version, &mut report);
        // The copy may have been the last to name a compacted file.
        drop(version);
        self.purger.purge();
        report
    }

    /// Key order within and across the levels, and the size of every file.
    fn check_levels(&self, version: &Version, report: &mut VerifyReport) {
        for level in 0..NUM_LEVELS {
            let files = version.files(level);
            for f in files {
                let path = filename::sstable(&self.dir, f.number);
                if key::compare(f.smallest.encoded(), f.largest.encoded()).is_gt() {
                    report.problems.push(Error::corruption(
                        &path,
                        0,
                        "manifest gives a smallest key above the largest",
                    ));
                }
                self.check_size(&path, f.size, report);
            }
            if level == 0 {
                continue;
            }
            for pair in files.windows(2) {
                if key::compare(pair[0].largest.encoded(), pair[1].smallest.encoded()).is_ge() {
                    report.problems.push(Error::corruption(
                        filename::sstable(&self.dir, pair[1].number),
                        0,
                        format!("overlaps {} in level {level}", pair[0].number),
                    ));
                }
            }
        }
        for f in version.value_files() {
            self.check_size(&filename::value_file(&self.dir, f.number), f.size, report);
        }
    }

    /// Every delta file's size and header, and every bucket's chunks:
    /// checksums, order, and keys inside the bucket's range.
    fn check_delta_store(&self, version: &Version, report: &mut VerifyReport) {
        for f in version.delta_files() {
            report.delta_files += 1;
            let path = filename::delta_file(&self.dir, f.number);
            self.check_size(&path, f.size, report);
            let header = self
                .fs
                .open(&path, FileOptions::default())
                .and_then(|file| file.read_at(0, delta::format::HEADER_LEN))
                .and_then(|h| delta::format::check_header(&path, &h));
            if let Err(e) = header {
                report.problems.push(e);
            }
        }
        let buckets: Vec<_> = version.buckets().cloned().collect();
        report.delta_buckets = buckets.len();
        match self.deltas.verify(&buckets) {
            Ok(n) => report.delta_records = n,
            Err(e) => report.problems.push(e),
        }
    }

    fn check_size(&self, path: &Path, size: u64, report: &mut VerifyReport) {
        match self.fs.open(path, FileOptions::default()) {
            Ok(file) if file.len() == size => {}
            // A read-only open found it and holds it open; the process
            // writing the database has deleted it since (its contents are
            // checked through the open file).
            Err(Error::Io { source, .. })
                if self.read_only && source.kind() == std::io::ErrorKind::NotFound => {}
            Ok(file) => report.problems.push(Error::corruption(
                path,
                0,
                format!("{} bytes on disk, the manifest says {size}", file.len()),
            )),
            Err(e) => report.problems.push(e),
        }
    }

    /// Reads every record of every value file (checking its checksum) and
    /// checks that each hosts the records the manifest says.
    fn check_value_files(&self, version: &Version, report: &mut VerifyReport) -> RecordLens {
        let mut lens = RecordLens::new();
        for meta in version.value_files() {
            report.value_files += 1;
            let path = filename::value_file(&self.dir, meta.number);
            let file = match self.values.file(meta.number) {
                Ok(f) => f,
                Err(e) => {
                    report.problems.push(e);
                    continue;
                }
            };
            let mut found: BTreeMap<FileNumber, (u64, u64)> = BTreeMap::new();
            let records = match file.iter() {
                Ok(r) => r,
                Err(e) => {
                    report.problems.push(e);
                    continue;
                }
            };
            for r in records {
                let r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        report.problems.push(e);
                        break;
                    }
                };
                report.value_records += 1;
                let len = u32::try_from(r.raw.len()).unwrap_or(u32::MAX);
                let tally = found.entry(r.logical_file).or_default();
                tally.0 += 1;
                tally.1 += u64::from(len);
                if lens.insert((r.logical_file, r.ordinal), len).is_some() {
                    report.problems.push(Error::corruption(
                        &path,
                        0,
                        format!(
                            "record {} of logical file {} is stored twice",
                            r.ordinal, r.logical_file
                        ),
                    ));
                }
            }
            let named: BTreeMap<FileNumber, (u64, u64)> = meta
                .hosted
                .iter()
                .map(|h| (h.logical_file, (h.records, h.bytes)))
                .collect();
            let listed: BTreeMap<FileNumber, (u64, u64)> = file
                .properties()
                .hosted
                .iter()
                .map(|h| (h.logical_file, (h.num_records, h.record_bytes)))
                .collect();
            if found != named || found != listed {
                report.problems.push(Error::corruption(
                    &path,
                    0,
                    format!(
                        "holds {}; the manifest says {}, the properties {}",
                        show(&flat(&found)),
                        show(&flat(&named)),
                        show(&flat(&listed))
                    ),
                ));
            }
        }
        lens
    }

    /// Checks every sstable's blocks and entries, resolves every handle,
    /// and checks its value-references block against its entries and the
    /// manifest. Returns the union of the bitmaps.
    fn check_tables(&self, version: &Version, report: &mut VerifyReport) -> Referenced {
        let mut referenced = Referenced::new();
        for (_, meta) in version.all_files() {
            report.sstables += 1;
            let path = filename::sstable(&self.dir, meta.number);
            let table = match self.table_cache.get(meta.number) {
                Ok(t) => t,
                Err(e) => {
                    report.problems.push(e);
                    continue;
                }
            };
            if let Err(e) = table.verify() {
                report.problems.push(e);
                continue;
            }
            let refs = match table.value_refs() {
                Ok(r) => r,
                Err(e) => {
                    report.problems.push(e);
                    continue;
                }
            };
            let in_block: RefCounts = refs.per_file().collect();
            let in_manifest: RefCounts = meta
                .value_refs
                .iter()
                .map(|r| (r.logical_file, r.count, r.bytes))
                .collect();
            if in_block != in_manifest {
                report.problems.push(Error::corruption(
                    &path,
                    0,
                    format!(
                        "value-references block counts {}; the manifest {}",
                        show(&in_block),
                        show(&in_manifest)
                    ),
                ));
            }
            match self.check_entries(version, &table, meta, report) {
                Ok(in_entries) if in_entries != in_block => {
                    report.problems.push(Error::corruption(
                        &path,
                        0,
                        format!(
                            "entries reference {}; the value-references block counts {}",
                            show(&in_entries),
                            show(&in_block)
                        ),
                    ));
                }
                Ok(_) => {}
                Err(e) => report.problems.push(e),
            }
            for (logical, count, _) in in_block {
                let entry = referenced.entry(logical).or_default();
                if let Some(bitmap) = refs.ordinals(logical) {
                    entry.0 |= bitmap;
                }
                entry.1 += count;
            }
        }
        referenced
    }

    /// Reads the entries of `table` in order, checks its key range against
    /// the manifest and reads the value of each handle; returns the count
    /// and bytes its handles reference per logical file.
    fn check_entries(
        &self,
        version: &Version,
        table: &Arc<Table>,
        meta: &FileMeta,
        report: &mut VerifyReport,
    ) -> Result<RefCounts> {
        let path = filename::sstable(&self.dir, meta.number);
        let mut tally: BTreeMap<FileNumber, (u64, u64)> = BTreeMap::new();
        let mut it = table.iter();
        it.seek_to_first()?;
        let mut first = true;
        let mut last = Vec::new();
        while it.valid() {
            let k = it.key();
            report.entries += 1;
            if first && k != meta.smallest.encoded() {
                return Err(Error::corruption(
                    &path,
                    0,
                    "first entry differs from the manifest's smallest key",
                ));
            }
            first = false;
            last.clear();
            last.extend_from_slice(k);
            let kind = ValueKind::from_u8(key::tag(k) as u8);
            if let Some(kind) = kind.filter(|k| k.is_ref()) {
                let raw = expiry::split(kind, it.value())
                    .map_err(|e| Error::corruption(&path, 0, e.0))?
                    .value;
                let handle =
                    ValueHandle::decode(raw).map_err(|e| Error::corruption(&path, 0, e.0))?;
                let t = tally.entry(handle.logical_file).or_default();
                t.0 += 1;
                t.1 += u64::from(handle.len);
                report.value_handles += 1;
                if let Err(e) = self.resolve(version, &handle, key::user_key(k), key::seq(k)) {
                    report.problems.push(e);
                }
            }
            it.next()?;
        }
        if !first && last != meta.largest.encoded() {
            return Err(Error::corruption(
                &path,
                0,
                "last entry differs from the manifest's largest key",
            ));
        }
        Ok(tally.into_iter().map(|(f, (c, b))| (f, c, b)).collect())
    }

    /// Reads the record `handle` names, bypassing the value cache, and
    /// checks it holds `user_key` at `seq`.
    fn resolve(
        &self,
        version: &Version,
        handle: &ValueHandle,
        user_key: &[u8],
        seq: SeqNo,
    ) -> Result<()> {
        let physical = version.physical_file(handle.logical_file).ok_or_else(|| {
            Error::corruption(
                filename::value_file(&self.dir, handle.logical_file),
                0,
                format!(
                    "no value file hosts logical file {}, which a handle names",
                    handle.logical_file
                ),
            )
        })?;
        let file = self.values.file(physical)?;
        let (offset, len) = file.place(handle)?;
        file.read_placed(offset, len, user_key, seq).map(drop)
    }
}

/// Recounts, from the bitmaps and the records read, what the live sstables
/// reference in each logical file and the garbage of each physical file,
/// and compares both with what the Version derives from the manifest.
fn check_garbage(
    dir: &Path,
    version: &Version,
    lens: &RecordLens,
    referenced: &Referenced,
    report: &mut VerifyReport,
) {
    let mut recount: BTreeMap<FileNumber, (u64, u64)> = BTreeMap::new();
    for (&logical, (bitmap, claimed)) in referenced {
        let path = version.physical_file(logical).map_or_else(
            || filename::value_file(dir, logical),
            |p| filename::value_file(dir, p),
        );
        if bitmap.len() != *claimed {
            report.problems.push(Error::corruption(
                &path,
                0,
                format!(
                    "sstables claim {claimed} records of logical file {logical}, but only {} \
                     distinct ones",
                    bitmap.len()
                ),
            ));
        }
        let mut bytes = 0u64;
        for ordinal in bitmap {
            match lens.get(&(logical, u64::from(ordinal))) {
                Some(&len) => bytes += u64::from(len),
                None => report.problems.push(Error::corruption(
                    &path,
                    0,
                    format!(
                        "record {ordinal} of logical file {logical} is referenced but not stored"
                    ),
                )),
            }
        }
        recount.insert(logical, (bitmap.len(), bytes));
    }
    for meta in version.value_files() {
        let path = filename::value_file(dir, meta.number);
        let mut stored = 0u64;
        let mut live = 0u64;
        for h in &meta.hosted {
            let (count, bytes) = recount.get(&h.logical_file).copied().unwrap_or_default();
            let derived = version.referenced(h.logical_file);
            if (derived.count, derived.bytes) != (count, bytes) {
                report.problems.push(Error::corruption(
                    &path,
                    0,
                    format!(
                        "manifest counts {} records ({} bytes) of logical file {} referenced; \
                         the bitmaps {count} ({bytes} bytes)",
                        derived.count, derived.bytes, h.logical_file
                    ),
                ));
            }
            stored += h.bytes;
            live += bytes;
        }
        let garbage = stored.saturating_sub(live);
        report.referenced_value_bytes += live;
        report.garbage_bytes += garbage;
        if garbage != version.garbage_bytes(meta) {
            report.problems.push(Error::corruption(
                &path,
                0,
                format!(
                    "garbage recounted from the bitmaps is {garbage} bytes; the manifest's \
                     counters give {}",
                    version.garbage_bytes(meta)
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::base::filename;
    use crate::manifest::{TableValueRefs, VersionEdit};
    use crate::options::{Options, ReadOptions, WriteOptions};
    use crate::vfs::{self, FileOptions, MemFs};
    use crate::Db;

    /// A manifest that logs another count than the table's bitmaps hold
    /// (as a bug in compaction's bookkeeping would) is found: the
    /// Version's garbage is derived from the manifest alone, so only a
    /// recount from the bitmaps can catch it.
    #[test]
    fn counters_that_disagree_with_the_bitmaps_are_reported() {
        let fs = MemFs::new();
        let opts = Options {
            create_if_missing: true,
            fs: Arc::new(fs),
            min_value_size: 100,
            enable_gc: false,
            ..Options::default()
        };
        let db = Db::open("/db", opts).unwrap();
        for i in 0..50u32 {
            let value = vec![b'a' + (i % 26) as u8; 300];
            db.put(&WriteOptions::default(), &i.to_be_bytes(), &value)
                .unwrap();
        }
        db.flush().unwrap();
        // An overwrite, compacted away, makes garbage: the counters matter.
        db.put(&WriteOptions::default(), &7u32.to_be_bytes(), &[b'z'; 300])
            .unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let report = db.verify();
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.value_handles, 50);
        assert_eq!(report.value_records, 51);
        assert_eq!(report.garbage_bytes, 319, "{report}");

        // The table is copied under a new number and the edit that swaps
        // them logs one record too few for it.
        let inner = &db.inner;
        let number = inner.versions.lock().new_file_number();
        inner
            .apply_edit_with(|v| {
                let (level, table) = v
                    .all_files()
                    .find(|(_, f)| f.value_refs.first().is_some_and(|r| r.count > 1))
                    .expect("a table referencing values");
                let from = filename::sstable(&inner.dir, table.number);
                let bytes = vfs::read_all(&*inner.fs, &from).unwrap();
                let to = filename::sstable(&inner.dir, number);
                let mut f = inner.fs.create(&to, FileOptions::default()).unwrap();
                f.append(&bytes).unwrap();
                f.sync().unwrap();
                let mut meta = (**table).clone();
                meta.number = number;
                let r = meta.value_refs[0];
                meta.value_refs[0] = TableValueRefs {
                    count: r.count - 1,
                    bytes: r.bytes - 300,
                    ..r
                };
                let mut edit = VersionEdit::default();
                edit.delete_file(level, table.number);
                edit.add_file(level, meta);
                edit
            })
            .unwrap();
        // Reads still work: only the bookkeeping is wrong.
        assert!(db
            .get(&ReadOptions::new(), &3u32.to_be_bytes())
            .unwrap()
            .is_some());
        let report = db.verify();
        let text = report.to_string();
        assert!(
            text.contains("the manifest 48 records (15331 bytes) of 000005"),
            "{text}"
        );
        assert!(text.contains("the bitmaps"), "{text}");
        assert!(text.contains("garbage recounted"), "{text}");
        assert!(text.contains(".sst") && text.contains(".vf"), "{text}");
    }
}
