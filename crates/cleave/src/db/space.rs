//! `Db::space_report()`: where the database's disk space goes.
//!
//! Sstable and value-file figures come from the current Version, exactly
//! and without I/O (the manifest keeps every table's referenced bytes per
//! logical value file). The on-disk total is measured: the sizes of the
//! files in the directory, so the report can be checked against `du`.

use std::io::ErrorKind;

use super::DbInner;
use crate::base::filename::{self, FileKind};
use crate::base::limits::NUM_LEVELS;
use crate::error::{Error, Result};
use crate::gc::GcStats;
use crate::vfs::FileOptions;

/// Space of one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelSpace {
    pub sstable_bytes: u64,
    /// Value-file record bytes the level's sstables reference.
    pub value_bytes: u64,
}

impl LevelSpace {
    /// Sstable bytes plus referenced value bytes: the level's size as if
    /// its values were inline, which compaction scores use.
    pub fn compensated_bytes(&self) -> u64 {
        self.sstable_bytes + self.value_bytes
    }
}

/// Where the disk space goes (DESIGN.md, "Space report").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpaceReport {
    pub levels: Vec<LevelSpace>,
    /// Bytes of live sstables.
    pub sstable_bytes: u64,
    /// Live physical value files and their bytes on disk (records, record
    /// index, properties, footer).
    pub value_files: usize,
    pub value_file_bytes: u64,
    /// Record bytes of value files that live sstables reference.
    pub referenced_value_bytes: u64,
    /// Record bytes of live value files that no live sstable references:
    /// exact garbage, which GC can reclaim.
    pub exposed_garbage_bytes: u64,
    /// Space amplification of the key tree (Scavenger+'s S_index): the
    /// compensated bytes of all levels over those of the last non-empty
    /// level; 1.0 when the tree is empty or has one level.
    pub s_index: f64,
    /// Measured from the directory: WAL files, manifests, and everything
    /// else (CURRENT, LOCK, files no Version names that are still held by
    /// a reader or being written by a background job).
    pub wal_bytes: u64,
    pub manifest_bytes: u64,
    pub other_bytes: u64,
    /// The sizes of all files in the database directory, summed.
    pub on_disk_bytes: u64,
    /// What GC has written and reclaimed since open, with the rest of
    /// its work.
    pub gc: GcStats,
}

impl DbInner {
    pub(super) fn space_report(&self) -> Result<SpaceReport> {
        let version = self.state.lock().current.clone();
        let mut r = SpaceReport {
            levels: (0..NUM_LEVELS)
                .map(|l| LevelSpace {
                    sstable_bytes: version.level_bytes(l),
                    value_bytes: version.level_value_bytes(l),
                })
                .collect(),
            gc: self.gc_totals.lock().total.clone(),
            ..SpaceReport::default()
        };
        r.sstable_bytes = r.levels.iter().map(|l| l.sstable_bytes).sum();
        for f in version.value_files() {
            r.value_files += 1;
            r.value_file_bytes += f.size;
            let garbage = version.garbage_bytes(f);
            r.exposed_garbage_bytes += garbage;
            r.referenced_value_bytes += f.record_bytes() - garbage;
        }
        let total: u64 = r.levels.iter().map(LevelSpace::compensated_bytes).sum();
        let last = r
            .levels
            .iter()
            .rev()
            .map(LevelSpace::compensated_bytes)
            .find(|&b| b > 0)
            .unwrap_or(0);
        r.s_index = if last == 0 {
            1.0
        } else {
            total as f64 / last as f64
        };
        // The copy may have been the last to name a compacted file: delete
        // it before measuring.
        drop(version);
        self.purger.purge();
        for name in self.fs.list(&self.dir)? {
            let path = self.dir.join(&name);
            let size = match self.fs.open(&path, FileOptions::default()) {
                Ok(f) => f.len(),
                // Deleted between the listing and the open.
                Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            r.on_disk_bytes += size;
            match filename::parse(&name) {
                Some((FileKind::Wal, _)) => r.wal_bytes += size,
                Some((FileKind::Manifest, _)) => r.manifest_bytes += size,
                _ => {}
            }
        }
        r.other_bytes = r
            .on_disk_bytes
            .saturating_sub(r.sstable_bytes + r.value_file_bytes + r.wal_bytes + r.manifest_bytes);
        Ok(r)
    }
}
