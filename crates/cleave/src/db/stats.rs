//! Counters kept by the engine, and their public snapshot [`Stats`].

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::base::limits::NUM_LEVELS;
use crate::gc::GcStats;

/// Whether a database takes writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteState {
    /// It does.
    #[default]
    ReadWrite,
    /// The disk was full: reads go on, writes fail with `Error::NoSpace`
    /// (`cause`, the failure) until there is room, for `since` so far.
    NoSpace { cause: String, since: Duration },
    /// Opened with `Db::open_read_only`.
    OpenedReadOnly,
    /// An earlier failure (`cause`) stops writes until a reopen.
    Poisoned { cause: String },
}

impl std::fmt::Display for WriteState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteState::ReadWrite => write!(f, "read-write"),
            WriteState::NoSpace { cause, since } => write!(
                f,
                "read-only for {:.1} s, until there is room: {cause}",
                since.as_secs_f64()
            ),
            WriteState::OpenedReadOnly => write!(f, "read-only (opened read-only)"),
            WriteState::Poisoned { cause } => {
                write!(f, "poisoned, refusing writes until reopened: {cause}")
            }
        }
    }
}

/// Monotonic counters, updated without locks.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub user_bytes_written: AtomicU64,
    pub user_writes: AtomicU64,
    pub wal_bytes_written: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub wals_recycled: AtomicU64,
    pub flush_bytes_written: AtomicU64,
    pub flushes: AtomicU64,
    pub value_file_bytes_written: AtomicU64,
    pub value_files_written: AtomicU64,
    pub hot_value_file_bytes_written: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub compaction_value_bytes_written: AtomicU64,
    pub compaction_values_reseparated: AtomicU64,
    pub compactions: AtomicU64,
    pub range_merges: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub entries_dropped: AtomicU64,
    pub merges_full: AtomicU64,
    pub merge_operands_combined: AtomicU64,
    pub merges_failed: AtomicU64,
    pub expired_entries: AtomicU64,
    pub expired_value_bytes: AtomicU64,
    pub compaction_filter_calls: AtomicU64,
    pub compaction_filter_removed: AtomicU64,
    pub compaction_filter_changed: AtomicU64,
    pub compaction_filter_value_reads: AtomicU64,
    pub compaction_filter_value_bytes_read: AtomicU64,
    pub compaction_filter_lookups: AtomicU64,
    pub delta_bytes_written: AtomicU64,
    pub delta_buckets_collected: AtomicU64,
    pub delta_bucket_splits: AtomicU64,
    pub delta_bucket_merges: AtomicU64,
    pub delta_buckets_folded: AtomicU64,
    pub delta_records_dropped: AtomicU64,
    pub delta_reads: AtomicU64,
    pub delta_reads_overlapped: AtomicU64,
    pub stall_micros: AtomicU64,
    pub slowdown_writes: AtomicU64,
    pub stopped_writes: AtomicU64,
    pub memtable_stall_micros: AtomicU64,
    pub budget_stall_micros: AtomicU64,
    pub budget_slowdown_writes: AtomicU64,
    pub budget_stopped_writes: AtomicU64,
    pub budget_impossible: AtomicU64,
    pub no_space_stops: AtomicU64,
    pub resumes: AtomicU64,
    pub jobs_postponed: AtomicU64,
    /// Entries compactions read from their upper (non-output) level, and
    /// entries they dropped as shadowed: how much of what sits in upper
    /// levels hides an older version (the hidden-garbage estimate).
    pub compaction_upper_entries: AtomicU64,
    /// Record bytes GC jobs copied, counted as they go (for the rate
    /// limiter; `GcStats` counts whole output files per job).
    pub gc_bytes_written: AtomicU64,
    pub compaction_shadowed: AtomicU64,
    /// Gets, and how many read 0, 1, 2, and 3 or more times from the file
    /// system.
    pub gets: AtomicU64,
    pub get_disk_reads: AtomicU64,
    pub gets_by_disk_reads: [AtomicU64; GET_READS_BUCKETS],
    pub multi_gets: AtomicU64,
    pub multi_get_keys: AtomicU64,
    pub multi_get_disk_reads: AtomicU64,
    pub prefix_filter_checked: AtomicU64,
    pub prefix_filter_useful: AtomicU64,
}

/// Buckets of `Stats::gets_by_disk_reads`: 0, 1, 2, 3 or more reads.
pub const GET_READS_BUCKETS: usize = 4;

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// What the block cache did for one kind of entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheKindStats {
    /// `data`, `index`, `filter`, `value-refs`, `record-index` or `value`.
    pub kind: &'static str,
    pub hits: u64,
    pub misses: u64,
    /// Bytes the cache holds of this kind now.
    pub usage: u64,
}

/// Files and bytes in one level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LevelStats {
    pub files: usize,
    /// Sstable bytes.
    pub bytes: u64,
    /// Value-file bytes the level's sstables reference.
    pub value_bytes: u64,
    /// Compensated bytes (`bytes + value_bytes`) the level should hold; 0
    /// for L0 and unused levels.
    pub target_bytes: u64,
    /// Compaction score (≥ 1 means the level wants compaction).
    pub score: f64,
}

/// A point-in-time copy of the engine's statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Whether the database takes writes, and if not, why.
    pub write_state: WriteState,
    /// Times a full disk made the database read-only, times it resumed,
    /// and compactions and GC jobs a full disk postponed.
    pub no_space_stops: u64,
    pub resumes: u64,
    pub jobs_postponed: u64,
    /// Bytes the file system holding the database has free (`None` where
    /// it has no such limit, or did not say).
    pub fs_free_bytes: Option<u64>,
    pub levels: Vec<LevelStats>,
    /// Bytes of keys and values passed to writes.
    pub user_bytes_written: u64,
    pub user_writes: u64,
    pub wal_bytes_written: u64,
    pub wal_syncs: u64,
    /// WALs written over an obsolete WAL's blocks (`Options::recycle_wal`).
    pub wals_recycled: u64,
    /// Bytes of sstables and value files written by flushes.
    pub flush_bytes_written: u64,
    pub flushes: u64,
    /// Bytes of value files written (part of `flush_bytes_written`).
    pub value_file_bytes_written: u64,
    pub value_files_written: u64,
    /// The part of `value_file_bytes_written` that went to hot value files
    /// (values of keys in the DropCache).
    pub hot_value_file_bytes_written: u64,
    /// WAL-time separation: record bytes appended to value logs, the
    /// records, and the logs created; bytes and values the recent-value
    /// cache holds, and reads it answered.
    pub value_log_bytes_written: u64,
    pub value_log_records: u64,
    pub value_logs_created: u64,
    pub recent_value_cache_usage: u64,
    pub recent_value_hits: u64,
    /// Bytes the DropCache holds, and may hold.
    pub drop_cache_usage: u64,
    pub drop_cache_capacity: u64,
    /// Reads of value records that reached a file (a readahead window
    /// counts once), and their bytes.
    pub value_reads: u64,
    pub value_read_bytes: u64,
    /// Reads of every file the engine issued through its `Fs` (a batch
    /// counts each request), foreground and background, and their bytes.
    pub disk_reads: u64,
    pub disk_read_bytes: u64,
    /// Gets, the reads they issued, and how many gets read 0, 1, 2, and 3
    /// or more times (with index and filter blocks cached, a get of a
    /// separated value reads once: its value).
    pub gets: u64,
    pub get_disk_reads: u64,
    pub gets_by_disk_reads: [u64; GET_READS_BUCKETS],
    /// `multi_get` calls, the keys they asked for and the reads they
    /// issued.
    pub multi_gets: u64,
    pub multi_get_keys: u64,
    pub multi_get_disk_reads: u64,
    /// Tables whose prefix filter an iterator confined to one prefix
    /// consulted, and those it then left out (RocksDB's
    /// `bloom.filter.prefix.checked` and `.useful`).
    pub prefix_filter_checked: u64,
    pub prefix_filter_useful: u64,
    /// Sstable bytes compactions read, and the value records they read to
    /// re-separate them (correlated compaction).
    pub compaction_bytes_read: u64,
    /// Sstables and value files compactions wrote.
    pub compaction_bytes_written: u64,
    /// The part of `compaction_bytes_written` that went to value files:
    /// values correlated compaction re-separated (and how many), and
    /// values merges made of at least `min_value_size` bytes.
    pub compaction_value_bytes_written: u64,
    pub compaction_values_reseparated: u64,
    pub compactions: u64,
    /// The part of `compactions` that were range merges
    /// (`Options::range_merge_sorted_runs`).
    pub range_merges: u64,
    pub trivial_moves: u64,
    /// Entries compaction and flush dropped as shadowed or deleted.
    pub entries_dropped: u64,
    /// Runs of merge operands flushes and compactions merged into a
    /// value; operands they combined by partial merges; runs the merge
    /// operator refused, kept unmerged (their reads fail).
    pub merges_full: u64,
    pub merge_operands_combined: u64,
    pub merges_failed: u64,
    /// Expired entries flushes and compactions dropped or turned into
    /// deletions, and the bytes of their values (inline, or the
    /// value-file records their handles name: garbage from then on, and
    /// never read to expire).
    pub expired_entries: u64,
    pub expired_value_bytes: u64,
    /// The compaction filter (`Options::compaction_filter`): entries it was
    /// asked about, removed and changed; separated values it asked to
    /// read, and their record bytes; keys it looked up.
    pub compaction_filter_calls: u64,
    pub compaction_filter_removed: u64,
    pub compaction_filter_changed: u64,
    pub compaction_filter_value_reads: u64,
    pub compaction_filter_value_bytes_read: u64,
    pub compaction_filter_lookups: u64,
    /// The delta store (key-delta separation): bytes flushes wrote to it
    /// (garbage collection included); buckets garbage collected, split,
    /// merged pairwise, and folded (the store full, their deltas moved
    /// back to the LSM-tree); deltas and anchors garbage collection dropped
    /// (partial merges count in `merge_operands_combined`); reads that
    /// consulted a bucket (its filter said it may hold the key).
    pub delta_bytes_written: u64,
    pub delta_buckets_collected: u64,
    pub delta_bucket_splits: u64,
    pub delta_bucket_merges: u64,
    pub delta_buckets_folded: u64,
    pub delta_records_dropped: u64,
    pub delta_reads: u64,
    /// Of `delta_reads`, those a reader thread did while the get read the
    /// LSM-tree and the value.
    pub delta_reads_overlapped: u64,
    /// Time writers spent slowed down or stopped.
    pub stall_micros: u64,
    pub slowdown_writes: u64,
    pub stopped_writes: u64,
    /// Time writers waited because every memtable was full, waiting for a
    /// flush (part of `stall_micros`; the rest is L0's slowdown and stop
    /// triggers, and the space budget).
    pub memtable_stall_micros: u64,
    /// Time writers spent delayed or stopped because usage was past
    /// `space_budget_bytes` (part of `stall_micros`), and how many writes
    /// were delayed or stopped for it.
    pub budget_stall_micros: u64,
    pub budget_slowdown_writes: u64,
    pub budget_stopped_writes: u64,
    /// How many times the budget was found impossible to meet (live data,
    /// memtables, the least garbage cleaning needs and the room GC's
    /// jobs copy into do not fit in it),
    /// at open or as the data grew; each time is also logged (`log::warn!`).
    pub budget_impossible: u64,
    /// What the space budget is compared with: the bytes of every file in
    /// the directory (`Db::space`), plus what running flushes and GC jobs
    /// will still write before their inputs go; and the budget (0: none).
    pub space_usage_bytes: u64,
    pub space_budget_bytes: u64,
    /// Net bytes per second that background work has lately freed, which
    /// writes near the budget are paced by.
    pub space_reclaim_rate: u64,
    /// GC jobs the scheduler allows at once now, of the threads compaction
    /// and GC share (`max_background_jobs` but the flush thread).
    pub gc_max_jobs: usize,
    /// GC's bandwidth limit now, bytes per second; `None` when unlimited.
    pub gc_rate_limit: Option<u64>,
    /// Memtables waiting for flush.
    pub immutable_memtables: usize,
    pub memtable_bytes: u64,
    pub block_cache_usage: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    pub block_cache_capacity: u64,
    /// Of that capacity, what the delta store's bucket filters and block
    /// indexes take (charged to the cache's budget).
    pub delta_memory_bytes: u64,
    /// Hits, misses and bytes held per kind of entry: data, index, filter,
    /// value-refs, record-index and value.
    pub block_cache_kinds: Vec<CacheKindStats>,
    /// Every GC job since open, summed.
    pub gc: GcStats,
    /// The most recent GC job.
    pub last_gc: Option<GcStats>,
}

impl Stats {
    pub(crate) fn from_counters(c: &Counters) -> Stats {
        Stats {
            user_bytes_written: get(&c.user_bytes_written),
            user_writes: get(&c.user_writes),
            wal_bytes_written: get(&c.wal_bytes_written),
            wal_syncs: get(&c.wal_syncs),
            wals_recycled: get(&c.wals_recycled),
            flush_bytes_written: get(&c.flush_bytes_written),
            flushes: get(&c.flushes),
            value_file_bytes_written: get(&c.value_file_bytes_written),
            value_files_written: get(&c.value_files_written),
            hot_value_file_bytes_written: get(&c.hot_value_file_bytes_written),
            compaction_bytes_read: get(&c.compaction_bytes_read),
            compaction_bytes_written: get(&c.compaction_bytes_written),
            compaction_value_bytes_written: get(&c.compaction_value_bytes_written),
            compaction_values_reseparated: get(&c.compaction_values_reseparated),
            compactions: get(&c.compactions),
            range_merges: get(&c.range_merges),
            trivial_moves: get(&c.trivial_moves),
            entries_dropped: get(&c.entries_dropped),
            merges_full: get(&c.merges_full),
            merge_operands_combined: get(&c.merge_operands_combined),
            merges_failed: get(&c.merges_failed),
            expired_entries: get(&c.expired_entries),
            expired_value_bytes: get(&c.expired_value_bytes),
            compaction_filter_calls: get(&c.compaction_filter_calls),
            compaction_filter_removed: get(&c.compaction_filter_removed),
            compaction_filter_changed: get(&c.compaction_filter_changed),
            compaction_filter_value_reads: get(&c.compaction_filter_value_reads),
            compaction_filter_value_bytes_read: get(&c.compaction_filter_value_bytes_read),
            compaction_filter_lookups: get(&c.compaction_filter_lookups),
            delta_bytes_written: get(&c.delta_bytes_written),
            delta_buckets_collected: get(&c.delta_buckets_collected),
            delta_bucket_splits: get(&c.delta_bucket_splits),
            delta_bucket_merges: get(&c.delta_bucket_merges),
            delta_buckets_folded: get(&c.delta_buckets_folded),
            delta_records_dropped: get(&c.delta_records_dropped),
            delta_reads: get(&c.delta_reads),
            delta_reads_overlapped: get(&c.delta_reads_overlapped),
            stall_micros: get(&c.stall_micros),
            slowdown_writes: get(&c.slowdown_writes),
            stopped_writes: get(&c.stopped_writes),
            memtable_stall_micros: get(&c.memtable_stall_micros),
            budget_stall_micros: get(&c.budget_stall_micros),
            budget_slowdown_writes: get(&c.budget_slowdown_writes),
            budget_stopped_writes: get(&c.budget_stopped_writes),
            budget_impossible: get(&c.budget_impossible),
            no_space_stops: get(&c.no_space_stops),
            resumes: get(&c.resumes),
            jobs_postponed: get(&c.jobs_postponed),
            gets: get(&c.gets),
            get_disk_reads: get(&c.get_disk_reads),
            gets_by_disk_reads: c.gets_by_disk_reads.each_ref().map(get),
            multi_gets: get(&c.multi_gets),
            multi_get_keys: get(&c.multi_get_keys),
            multi_get_disk_reads: get(&c.multi_get_disk_reads),
            prefix_filter_checked: get(&c.prefix_filter_checked),
            prefix_filter_useful: get(&c.prefix_filter_useful),
            ..Stats::default()
        }
    }

    /// Bytes written by flushes, compactions and GC per user byte, WAL
    /// excluded (as BENCHMARKS.md reports RocksDB's).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        self.background_bytes_written() as f64 / self.user_bytes_written as f64
    }

    /// Everything but the WAL: a value a value log took is written there
    /// and nowhere else until GC.
    fn background_bytes_written(&self) -> u64 {
        self.flush_bytes_written
            + self.compaction_bytes_written
            + self.gc.bytes_written
            + self.value_log_bytes_written
    }

    /// Like [`write_amplification`](Self::write_amplification), WAL included.
    pub fn write_amplification_with_wal(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.wal_bytes_written + self.background_bytes_written()) as f64
            / self.user_bytes_written as f64
    }

    /// Bytes in all sstables.
    pub fn sstable_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }

    /// The `cleave.stats` property: a human-readable table.
    pub fn to_text(&self) -> String {
        let mb = |b: u64| b as f64 / (1 << 20) as f64;
        let ratio = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        let mut s = String::new();
        let free = self
            .fs_free_bytes
            .map_or_else(|| "unknown".to_string(), |b| format!("{:.1} MB", mb(b)));
        let _ = writeln!(
            s,
            "state: {}; file system {free} free; {} full-disk stops, {} resumes, {} jobs postponed",
            self.write_state, self.no_space_stops, self.resumes, self.jobs_postponed
        );
        let _ = writeln!(s, "Level  Files    Size(MB)  Values(MB)  Target(MB)  Score");
        for (i, l) in self.levels.iter().enumerate().take(NUM_LEVELS) {
            let _ = writeln!(
                s,
                "L{i:<5} {:>5} {:>11.1} {:>11.1} {:>11.1} {:>6.2}",
                l.files,
                mb(l.bytes),
                mb(l.value_bytes),
                mb(l.target_bytes),
                l.score
            );
        }
        let _ = writeln!(
            s,
            "user writes: {} ({:.1} MB); WAL: {:.1} MB, {} syncs, {} files recycled",
            self.user_writes,
            mb(self.user_bytes_written),
            mb(self.wal_bytes_written),
            self.wal_syncs,
            self.wals_recycled
        );
        let _ = writeln!(
            s,
            "flush: {} ({:.1} MB written); compaction: {} ({} range merges) + {} trivial moves ({:.1} MB read, {:.1} MB written, {:.1} MB of it {} re-separated values); dropped entries: {}; merges: {} full, {} operands combined, {} refused",
            self.flushes,
            mb(self.flush_bytes_written),
            self.compactions,
            self.range_merges,
            self.trivial_moves,
            mb(self.compaction_bytes_read),
            mb(self.compaction_bytes_written),
            mb(self.compaction_value_bytes_written),
            self.compaction_values_reseparated,
            self.entries_dropped,
            self.merges_full,
            self.merge_operands_combined,
            self.merges_failed
        );
        if self.expired_entries > 0 {
            let _ = writeln!(
                s,
                "expiry: {} entries expired, {:.1} MB of values freed without reading them",
                self.expired_entries,
                mb(self.expired_value_bytes)
            );
        }
        if self.compaction_filter_calls > 0 {
            let _ = writeln!(
                s,
                "compaction filter: {} entries asked, {} removed, {} changed; {} values read ({:.1} MB), {} keys looked up",
                self.compaction_filter_calls,
                self.compaction_filter_removed,
                self.compaction_filter_changed,
                self.compaction_filter_value_reads,
                mb(self.compaction_filter_value_bytes_read),
                self.compaction_filter_lookups
            );
        }
        if self.delta_bytes_written > 0 || self.delta_reads > 0 {
            let _ = writeln!(
                s,
                "delta store: {:.1} MB written; {} buckets collected ({} split, {} merged pairs, {} folded), {} records dropped; {} bucket reads ({} overlapped with the tree's); filters and indexes {:.1} MB of the block cache's budget",
                mb(self.delta_bytes_written),
                self.delta_buckets_collected,
                self.delta_bucket_splits,
                self.delta_bucket_merges,
                self.delta_buckets_folded,
                self.delta_records_dropped,
                self.delta_reads,
                self.delta_reads_overlapped,
                mb(self.delta_memory_bytes)
            );
        }
        let _ = writeln!(
            s,
            "value files: {} written ({:.1} MB, {:.1} MB hot; drop cache {:.1}/{:.1} MB); {} value reads ({:.1} MB)",
            self.value_files_written,
            mb(self.value_file_bytes_written),
            mb(self.hot_value_file_bytes_written),
            mb(self.drop_cache_usage),
            mb(self.drop_cache_capacity),
            self.value_reads,
            mb(self.value_read_bytes),
        );
        let b = &self.gets_by_disk_reads;
        let _ = writeln!(
            s,
            "reads: {} from files ({:.1} MB); {} gets, {:.3} reads per get (0/1/2/3+ reads: {}/{}/{}/{}); {} multi_gets of {} keys, {:.3} reads per key; prefix filters {} checked, {} useful",
            self.disk_reads,
            mb(self.disk_read_bytes),
            self.gets,
            ratio(self.get_disk_reads, self.gets),
            b[0],
            b[1],
            b[2],
            b[3],
            self.multi_gets,
            self.multi_get_keys,
            ratio(self.multi_get_disk_reads, self.multi_get_keys),
            self.prefix_filter_checked,
            self.prefix_filter_useful,
        );
        let _ = writeln!(s, "{}", self.gc);
        if self.value_logs_created > 0 {
            let _ = writeln!(
                s,
                "value logs: {} created, {} records, {:.1} MB written; recent values {:.1} MB, {} hits",
                self.value_logs_created,
                self.value_log_records,
                mb(self.value_log_bytes_written),
                mb(self.recent_value_cache_usage),
                self.recent_value_hits
            );
        }
        let _ = writeln!(
            s,
            "write amplification: {:.2} (with WAL {:.2})",
            self.write_amplification(),
            self.write_amplification_with_wal()
        );
        let _ = writeln!(
            s,
            "stalls: {:.3} s ({:.3} s for a flush; {} slowed, {} stopped writes); memtables: {:.1} MB active+{} immutable; block cache {:.1}/{:.1} MB, {} hits, {} misses",
            self.stall_micros as f64 / 1e6,
            self.memtable_stall_micros as f64 / 1e6,
            self.slowdown_writes,
            self.stopped_writes,
            mb(self.memtable_bytes),
            self.immutable_memtables,
            mb(self.block_cache_usage),
            mb(self.block_cache_capacity),
            self.block_cache_hits,
            self.block_cache_misses
        );
        let kinds: Vec<String> = self
            .block_cache_kinds
            .iter()
            .map(|k| format!("{} {:.1} MB {}/{}", k.kind, mb(k.usage), k.hits, k.misses))
            .collect();
        let _ = writeln!(
            s,
            "block cache by kind (held, hits/misses): {}",
            kinds.join(", ")
        );
        let rate = self
            .gc_rate_limit
            .map_or_else(|| "none".to_string(), |r| format!("{:.1} MB/s", mb(r)));
        let _ = writeln!(
            s,
            "space: {:.1} MB of a {:.1} MB budget{}, reclaimed at {:.1} MB/s, budget stalls {:.3} s ({} slowed, {} stopped writes); GC: up to {} jobs, rate limit {rate}",
            mb(self.space_usage_bytes),
            mb(self.space_budget_bytes),
            if self.budget_impossible > 0 {
                format!(" (found impossible {} times)", self.budget_impossible)
            } else {
                String::new()
            },
            mb(self.space_reclaim_rate),
            self.budget_stall_micros as f64 / 1e6,
            self.budget_slowdown_writes,
            self.budget_stopped_writes,
            self.gc_max_jobs,
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_amplification_from_counters() {
        let c = Counters::default();
        add(&c.user_bytes_written, 100);
        add(&c.flush_bytes_written, 100);
        add(&c.compaction_bytes_written, 150);
        add(&c.wal_bytes_written, 110);
        let mut s = Stats::from_counters(&c);
        assert!((s.write_amplification() - 2.5).abs() < 1e-9);
        assert!((s.write_amplification_with_wal() - 3.6).abs() < 1e-9);
        assert!(s.to_text().contains("write amplification: 2.50"));
        s.gc.bytes_written = 50;
        assert!((s.write_amplification() - 3.0).abs() < 1e-9);
        assert!(s.to_text().contains("wrote 0.0 MB"));
    }
}
