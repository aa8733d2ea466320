//! What GC did: per job, and summed over jobs.

use std::ops::AddAssign;
use std::time::Duration;

/// Work and time of one or more GC jobs. [`crate::Stats::gc`] sums every
/// job since open; [`crate::Stats::last_gc`] and [`crate::Db::gc_now`]
/// report single jobs (or a manual run's jobs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Jobs that committed, and jobs that failed before their commit
    /// (which change nothing; a failed commit poisons the database).
    pub jobs: u64,
    pub failed_jobs: u64,
    /// Physical value files collected, and written.
    pub files_in: u64,
    pub files_out: u64,
    /// Sstables whose value-references blocks were read.
    pub tables_read: u64,
    /// Records copied, and records left behind as garbage.
    pub records_kept: u64,
    pub records_dropped: u64,
    /// Bytes of record index read, and of records read: the live ones and
    /// the dead ones a read took in between them.
    pub index_bytes_read: u64,
    pub value_bytes_read: u64,
    /// Bytes of the output files.
    pub bytes_written: u64,
    /// Bytes of the input files minus those of the outputs: what the disk
    /// gets back once no reader holds the inputs.
    pub bytes_reclaimed: u64,
    /// Time per phase: union of the liveness bitmaps, reading the record
    /// indexes, waiting for live records (reads overlap writing: this is
    /// the part that did not), writing and syncing the outputs, and
    /// logging the edit.
    pub bitmap_time: Duration,
    pub index_time: Duration,
    pub value_read_time: Duration,
    pub write_time: Duration,
    pub commit_time: Duration,
    /// Time GC waited for its rate limiter, reading or writing.
    pub throttle_time: Duration,
}

impl AddAssign<&GcStats> for GcStats {
    fn add_assign(&mut self, o: &GcStats) {
        self.jobs += o.jobs;
        self.failed_jobs += o.failed_jobs;
        self.files_in += o.files_in;
        self.files_out += o.files_out;
        self.tables_read += o.tables_read;
        self.records_kept += o.records_kept;
        self.records_dropped += o.records_dropped;
        self.index_bytes_read += o.index_bytes_read;
        self.value_bytes_read += o.value_bytes_read;
        self.bytes_written += o.bytes_written;
        self.bytes_reclaimed += o.bytes_reclaimed;
        self.bitmap_time += o.bitmap_time;
        self.index_time += o.index_time;
        self.value_read_time += o.value_read_time;
        self.write_time += o.write_time;
        self.commit_time += o.commit_time;
        self.throttle_time += o.throttle_time;
    }
}

/// One line, as in the `cleave.stats` text.
impl std::fmt::Display for GcStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mb = |b: u64| b as f64 / (1 << 20) as f64;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "gc: {} jobs ({} failed), {} files in, {} out, {} tables' bitmaps; {} records kept, {} dropped; \
             read {:.1} MB index + {:.1} MB values, wrote {:.1} MB, reclaimed {:.1} MB; \
             ms: bitmaps {:.0}, index {:.0}, values {:.0}, write {:.0}, commit {:.0}, throttled {:.0}",
            self.jobs,
            self.failed_jobs,
            self.files_in,
            self.files_out,
            self.tables_read,
            self.records_kept,
            self.records_dropped,
            mb(self.index_bytes_read),
            mb(self.value_bytes_read),
            mb(self.bytes_written),
            mb(self.bytes_reclaimed),
            ms(self.bitmap_time),
            ms(self.index_time),
            ms(self.value_read_time),
            ms(self.write_time),
            ms(self.commit_time),
            ms(self.throttle_time),
        )
    }
}
