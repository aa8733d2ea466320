//! `Db::space_report()`: where the database's disk space goes.
//!
//! Sstable and value-file figures come from the current Version, exactly
//! and without I/O (the manifest keeps every table's referenced bytes per
//! logical value file). The on-disk total is measured: the sizes of the
//! files in the directory, so the report can be checked against `du`.

use std::io::ErrorKind;
use std::sync::atomic::Ordering;

use super::DbInner;
use crate::base::filename::{self, FileKind};
use crate::base::limits::NUM_LEVELS;
use crate::error::{Error, Result};
use crate::gc::pressure;
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
    /// The delta store (key-delta separation): its files and their bytes
    /// on disk, the chunk bytes of its live buckets, and the rest (chunks
    /// no bucket names any more, in files other buckets still use).
    pub delta_files: usize,
    pub delta_file_bytes: u64,
    pub delta_bucket_bytes: u64,
    pub delta_garbage_bytes: u64,
    pub delta_buckets: usize,
    /// Space amplification of the key tree (Scavenger+'s S_index): the
    /// compensated bytes of all levels over those of the last non-empty
    /// level; 1.0 when the tree is empty or has one level.
    pub s_index: f64,
    /// Exposed garbage over referenced value bytes (Scavenger+'s G_E/D).
    pub exposed_garbage_ratio: f64,
    /// Estimated value bytes referenced by entries that newer entries in
    /// upper levels shadow (hidden garbage, G_H): what compaction will
    /// expose. The value bytes upper levels reference, times the share of
    /// upper-level entries compactions have found shadowing an older one.
    pub hidden_garbage_bytes: u64,
    /// The space pressure of the key tree and of the value files
    /// (Scavenger+ eq. 4 and 5), which share the threads between
    /// compaction and GC.
    pub index_pressure: f64,
    pub value_pressure: f64,
    /// GC jobs the scheduler allows at once now, of the `pool_threads`
    /// compaction and GC share.
    pub gc_max_jobs: usize,
    pub pool_threads: usize,
    /// GC's bandwidth limit now, bytes per second; `None` when unlimited.
    pub gc_rate_limit: Option<u64>,
    /// What the space budget counts (sstables, value files, memtables'
    /// WALs), and the budget; 0 when there is none.
    pub budget_usage_bytes: u64,
    pub budget_bytes: u64,
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
        for f in version.delta_files() {
            r.delta_files += 1;
            r.delta_file_bytes += f.size;
        }
        for b in version.buckets() {
            r.delta_buckets += 1;
            r.delta_bucket_bytes += b.bytes();
        }
        r.delta_garbage_bytes = r.delta_file_bytes.saturating_sub(r.delta_bucket_bytes);
        let compensated: Vec<u64> = r.levels.iter().map(LevelSpace::compensated_bytes).collect();
        r.s_index = pressure::s_index(&compensated);
        if r.referenced_value_bytes > 0 {
            r.exposed_garbage_ratio =
                r.exposed_garbage_bytes as f64 / r.referenced_value_bytes as f64;
        }
        let upper_values: u64 = match r.levels.iter().rposition(|l| l.compensated_bytes() > 0) {
            Some(last) => r.levels[..last].iter().map(|l| l.value_bytes).sum(),
            None => 0,
        };
        let upper_entries = self
            .counters
            .compaction_upper_entries
            .load(Ordering::Relaxed);
        let shadowed = self.counters.compaction_shadowed.load(Ordering::Relaxed);
        let shadowing = if upper_entries == 0 {
            0.0
        } else {
            (shadowed as f64 / upper_entries as f64).min(1.0)
        };
        r.hidden_garbage_bytes = (upper_values as f64 * shadowing) as u64;
        {
            let st = self.state.lock();
            let sched = self.schedule(&st);
            r.index_pressure = sched.pressure.p_index;
            r.value_pressure = sched.pressure.p_value;
            r.gc_max_jobs = sched.max_gc;
            r.budget_usage_bytes = sched.usage;
        }
        r.pool_threads = self.opts.pool_threads();
        r.gc_rate_limit = self.gc_limiter.rate();
        r.budget_bytes = self.budget.bytes;
        // The copy may have been the last to name a compacted file: delete
        // it before measuring.
        drop(version);
        self.purger.purge_settled();
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
        r.other_bytes = r.on_disk_bytes.saturating_sub(
            r.sstable_bytes
                + r.value_file_bytes
                + r.delta_file_bytes
                + r.wal_bytes
                + r.manifest_bytes,
        );
        Ok(r)
    }
}
