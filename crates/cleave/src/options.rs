//! Options for opening a database, reading and writing. Names and defaults
//! follow RocksDB where RocksDB has the same knob.

use std::sync::Arc;
use std::time::Duration;

use crate::base::expiry::{Clock, SystemClock};
use crate::compaction_filter::CompactionFilter;
use crate::error::{Error, Result};
use crate::merge::{MergeOperator, MAX_NAME_LEN};
use crate::prefix::{PrefixExtractor, MAX_NAME_LEN as MAX_PREFIX_NAME_LEN};
use crate::vfs::{Fs, OsFs};
use crate::Snapshot;

/// Per-block compression of sstables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Lz4,
    Zstd,
}

/// Options fixed when a database is opened.
#[derive(Clone, Debug)]
pub struct Options {
    pub create_if_missing: bool,
    pub error_if_exists: bool,
    /// Check more at open: read the footer, properties and metaindex of
    /// every live sstable, and fail on a damaged WAL record that is not the
    /// torn tail of a crash (otherwise replay stops there, as RocksDB's
    /// default point-in-time recovery does). Off by default, unlike RocksDB,
    /// because the WAL part would make a power loss under async writes
    /// fail the open. Block checksums are verified on every read regardless.
    pub paranoid_checks: bool,
    /// Obsolete WALs kept to be written over by later WALs (RocksDB's
    /// `recycle_log_file_num`); 0 deletes them. A recycled WAL's synced
    /// writes land inside its size, so `fdatasync` writes data and no file
    /// metadata (see `docs/format/wal.md`). Kept WALs count in the disk
    /// usage and the space budget (a memtable's worth each). While set,
    /// WALs are written with recyclable records, which builds before WAL
    /// format 4 cannot read.
    pub recycle_wal: usize,
    /// Writes that do not sync leave their WAL records in the process's
    /// buffer until [`crate::Db::flush_wal`] (or a synced write, a memtable
    /// switch, `sync_wal`, close) hands them to the OS, as RocksDB's
    /// `manual_wal_flush`: one `write` for many batches. Until then a
    /// killed process loses them though readers already see them, so a
    /// server calls `flush_wal` before it answers anyone (what Redis does
    /// with its AOF buffer before it replies).
    pub manual_wal_flush: bool,
    /// Bytes a memtable holds before it is switched out and flushed.
    pub write_buffer_size: usize,
    /// Memtables (active plus waiting for flush) before writes stop.
    pub max_write_buffer_number: usize,
    pub level0_file_num_compaction_trigger: usize,
    pub level0_slowdown_writes_trigger: usize,
    pub level0_stop_writes_trigger: usize,
    pub target_file_size_base: u64,
    pub max_bytes_for_level_base: u64,
    pub max_bytes_for_level_multiplier: f64,
    /// Size levels from the last level up (RocksDB's
    /// level_compaction_dynamic_level_bytes).
    pub level_compaction_dynamic_level_bytes: bool,
    /// Background threads: one for flushes, the rest (at least one) a
    /// pool that compaction and GC share, as RocksDB splits its
    /// `max_background_jobs` between its flush and compaction pools.
    pub max_background_jobs: usize,
    /// Target uncompressed size of an sstable data block.
    pub block_size: usize,
    /// Entries between restart points in a data block.
    pub block_restart_interval: usize,
    /// Bytes of the engine's one cache, shared by sstable blocks (data,
    /// index, filter), value files' record index blocks and, with
    /// `cache_values`, separated values. Index, filter and record index
    /// blocks have a high-priority pool (half) that data blocks and values
    /// cannot evict.
    pub block_cache_capacity: usize,
    /// Bloom filter bits per key; 0 disables filters.
    pub bloom_bits_per_key: u32,
    pub compression: Compression,
    /// Key-value separation: flushes write values of at least
    /// `min_value_size` bytes to value files and keep a small handle in the
    /// sstable, so compaction rewrites them only where correlated
    /// compaction re-separates them.
    pub enable_value_separation: bool,
    /// Smallest value (bytes) that is separated; RocksDB's `min_blob_size`.
    pub min_value_size: usize,
    /// Target bytes of one value file written by a flush; a larger flush
    /// writes several. Also where a value log is sealed. Under a space
    /// budget, smaller (see `space_budget_bytes`).
    pub value_file_size: u64,
    /// WAL-time separation (BVLSM): a value of at least this many bytes is
    /// appended, in the writer's thread and before its WAL record, to a
    /// value log, and the WAL and memtable carry only its handle, so it is
    /// written to disk once and memtables fill with handles. Smaller values
    /// from `min_value_size` up keep flush-time separation. 0 turns it off,
    /// as `enable_value_separation: false` does; a threshold below
    /// `min_value_size` acts as `min_value_size`.
    ///
    /// 32 KiB by default: measured (docs/benchmarks.md, issue 16) it fills
    /// 1.5-2.5x faster than flush-time separation from 4 KiB up with an
    /// async WAL or none, but a synced write then pays two fsyncs (the
    /// log's and the WAL's), which costs more than it saves below 32 KiB.
    /// Under a tight `space_budget_bytes` with unsynced writes and
    /// uniform overwrites, a lower threshold pays: 8 KiB values through
    /// value logs overwrote 1.4x faster under a 1.25x budget than with
    /// flush-time separation. With skewed overwrites it costs: memtables
    /// absorb hot keys' overwrites before a value file sees them, and
    /// zipfian Mixed-8K ran 0.66x (docs/benchmarks.md, issue 28). A
    /// memtable points to at most a 32nd of a budget in value logs.
    pub big_value_threshold: usize,
    /// Value logs written at once: each writer thread appends to its own
    /// when it is free, so concurrent writers rarely wait for one another.
    pub value_log_count: usize,
    /// Bytes of the values just written to value logs that reads are
    /// served from without a disk read (a read right after a write); 0
    /// turns the cache off.
    pub recent_value_cache_bytes: usize,
    /// Flushes, compactions and GC put the index and filter blocks of the
    /// sstables they write, and GC the record index blocks of the value
    /// files it writes (a record read through a handle needs its file's
    /// index only once GC has moved it), into the block cache (high
    /// priority), and flushes their sstables'
    /// data blocks too (RocksDB's `prepopulate_block_cache = kFlushOnly`),
    /// so that the first gets after a flush, compaction or GC need no read
    /// for them. Compaction's data blocks are left out: a compaction
    /// rewrites far more than reads will touch soon.
    pub prepopulate_block_cache: bool,
    /// Whether separated values that reads fetch are kept in the block
    /// cache (RocksDB's blob cache sharing the block cache), at low
    /// priority beside data blocks.
    pub cache_values: bool,
    /// Compression of each separated value; a value the codec does not
    /// shrink by 1/8 is stored raw.
    pub value_compression: Compression,
    /// Bytes of the DropCache: user keys flushes and compactions recently
    /// found overwritten or deleted. A flush writes the values of those
    /// keys to a separate, *hot* value file, which gathers garbage fast
    /// and is collected cheaply. 0 turns hot/cold separation off.
    pub drop_cache_capacity: usize,
    /// Background garbage collection of value files. Off, files are
    /// collected only by [`crate::Db::gc_now`].
    pub enable_gc: bool,
    /// Smallest exact garbage ratio (garbage record bytes over all record
    /// bytes, 0..=1) that makes a value file worth collecting.
    pub gc_garbage_ratio: f64,
    /// Disk space the database aims to stay within, in bytes of every file
    /// in its directory as `du` counts them (WALs, value logs, sstables,
    /// value files, files waiting for deletion, the manifest; see
    /// `Db::space`), plus what running flushes and GC jobs will write
    /// before their inputs go; 0 means no budget. From 75% of it
    /// compaction pushes recent writes down to expose the garbage they
    /// hide, and neither merges ranges nor re-separates values; from 90%
    /// GC takes every compaction and GC thread and collects any file
    /// holding the share of garbage the budget leaves value files on
    /// average, best cost-benefit first, if its copy fits below 127/128 of
    /// the budget.
    /// Writers are paced, from 90%, at the rate background work frees
    /// space plus the room left over a second (RocksDB's delayed write
    /// rate, following space instead of compaction debt) towards 63/64 of
    /// it, lower by the room GC's jobs copy into; from 127/128 they wait.
    /// Value files are then at most 1/128 of the budget, or 4 MiB if more,
    /// but no more than 1/64 of it, so that GC's room holds them. Writes
    /// never wait
    /// on work that cannot free space: when nothing is left to collect or
    /// compact, or the budget cannot hold the live data (reported once,
    /// `Stats::budget_impossible`), they go on, each write group delayed
    /// 1 ms (or fail, with `space_budget_fail_writes`). Stalls count in
    /// `Stats::budget_stall_micros`.
    pub space_budget_bytes: u64,
    /// Fail a write with `Error::NoSpace` (its cause `NoSpaceCause::Budget`)
    /// instead of stopping
    /// or delaying it when usage has reached 127/128 of the budget, or the
    /// records the write appends to value logs would take it there;
    /// RocksDB's `SstFileManager` max-allowed-space behaves this way.
    pub space_budget_fail_writes: bool,
    /// Share the background threads between compaction and GC by the space
    /// pressure of each side (Scavenger+ eq. 4–6). Off, GC may use at most
    /// half of them, compaction first, as a static split does.
    pub dynamic_gc_threads: bool,
    /// Limit GC's reads and writes with token buckets whose rate steps down
    /// by 20% whenever foreground writes slow by more than 20% while the
    /// disk is near its write bandwidth, and back up when they recover
    /// (Scavenger+ §III-D2). Off, GC runs at full speed.
    pub gc_rate_limiter: bool,
    /// The device's write bandwidth in bytes per second, which the GC rate
    /// limiter compares background writes against; 0 learns it as the
    /// highest write bandwidth the database has reached.
    pub device_write_bandwidth: u64,
    /// GC reads runs of live records with one read each (sized by the
    /// run), a run taking in gaps of up to 16 KiB of dead records between
    /// live ones. Off, every live record is read on its own: the ablation
    /// of Scavenger+'s adaptive readahead.
    pub gc_coalesced_reads: bool,
    /// Level sizes and the choice of file to compact count the value bytes
    /// an sstable references (compensated size, Scavenger+ §III-C). Off,
    /// only sstable bytes count, as if the tree held nothing but handles.
    pub compensated_size: bool,
    /// Correlated compaction: a compaction whose inputs reference too many
    /// logical value files, or high-garbage ones it holds most references
    /// of, reads those values and writes them, in key order, into a new
    /// value file with new handles. It bounds how many value files one
    /// sstable references (the reverse lookups of GC, the manifest's
    /// per-table counts) and puts the values of a key range together for
    /// scans, at the price of rewriting those values; off, compaction never
    /// rewrites a value (an ablation switch, to measure what it brings).
    /// Nor does it while a space budget is short (see
    /// `space_budget_bytes`): the bound then lapses until space is back.
    pub correlated_compaction: bool,
    /// Most logical value files one sstable written by a compaction may
    /// reference, at least 1. A compaction whose inputs reference more
    /// rewrites the values of those it holds the fewest bytes of. The
    /// default, 256, is far above the fan-out of key-value separation under
    /// overwrites until the oldest files hold a tiny fraction of their
    /// records, so the rewrites stay rare and small (the arithmetic is in
    /// `compaction/correlated.rs`).
    pub max_value_file_refs: usize,
    /// Smallest garbage ratio (0..=1] of a logical value file that makes a
    /// compaction holding at least half of its live references rewrite
    /// them, so that GC finds the file all or mostly garbage. Above
    /// `gc_garbage_ratio`, the rewrite copies only values GC would copy
    /// anyway.
    pub correlated_garbage_ratio: f64,
    /// Range merge (Titan's `max_sorted_runs`): once writes pause, a
    /// last-level sstable whose entries reference more logical value files
    /// than this, none of which holds more than half of its value bytes, is
    /// rewritten with its values read and written, in key order, into one
    /// new value file, so that a scan of its keys reads their values in a
    /// few large reads rather than one small read per value. Before that,
    /// the files of upper levels move down to the last level where the
    /// values they reference outweigh the sstable bytes the move rewrites.
    /// 0 disables both. Under overwrites the values of neighbouring keys
    /// come from every flush since they were last merged; a merge rewrites
    /// at most twice the bytes that arrived since, and their old files lose
    /// those references, so they die whole instead of being copied by GC.
    pub range_merge_sorted_runs: usize,
    /// How long no write may have arrived before range merges start, so
    /// that they use the disk only while writes leave it idle. A write
    /// does not stop a merge already running (one sstable's values, about
    /// `target_file_size_base` compensated bytes, or up to eight times that
    /// and at most an eighth of `space_budget_bytes` for a table written while
    /// space was short).
    pub range_merge_idle: Duration,
    /// How often a database that found its disk full (`Error::NoSpace`)
    /// looks at the file system's free space, to resume writes, and to
    /// retry the compactions and GC jobs it postponed, once there is room:
    /// the longest a write waits after space is freed. RocksDB's
    /// `SstFileManager` polls the same way.
    pub no_space_poll_interval: Duration,
    /// `O_DIRECT` for sstable and value-file reads.
    pub use_direct_reads: bool,
    /// `O_DIRECT` for flush and compaction writes (sstables and value
    /// files).
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Files kept open for reads: three quarters for sstables, a quarter
    /// for value files.
    pub max_open_files: usize,
    /// Bytes of manifest after which it is rewritten as a snapshot; with
    /// a space budget, at most 1/64 of the budget (64 KiB at least).
    pub max_manifest_file_size: u64,
    /// Combines merge operands with values (`Db::merge`); `None` refuses
    /// merges. Its name is stored with the first merge written, and a
    /// database holding merges opens only with an operator of that name.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// The time that expiry (`WriteBatch::put_with_expiry`,
    /// `Db::put_with_ttl`) is measured against; the system's clock by
    /// default. An entry is hidden from the millisecond it expires, and a
    /// clock set back shows again entries that expired but that no
    /// compaction has dropped yet.
    pub clock: Arc<dyn Clock>,
    /// Asked, in compactions, about each value entry newer than every live
    /// snapshot: keep it, remove it, or change its value
    /// ([`CompactionFilter`]).
    /// With one, `Db::compact_range` also rewrites the last level.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// Adds each key's prefix to its table's bloom filter, so that an
    /// iterator whose bounds confine it to one prefix (the lower bound has
    /// prefix P, the upper bound starts with P or is the first key past
    /// P's keys) skips the tables without P. Costs about one more filter
    /// entry per distinct prefix. Tables written with another extractor,
    /// or none, are read as before.
    pub prefix_extractor: Option<Arc<dyn PrefixExtractor>>,
    /// Share of `write_buffer_size` given to each memtable's bloom filter
    /// of its user keys and (with a prefix extractor) their prefixes: a
    /// get of a key a memtable lacks, or an iterator confined to a prefix
    /// it lacks, then skips its skiplist (RocksDB's
    /// `memtable_prefix_bloom_size_ratio` with
    /// `memtable_whole_key_filtering`). 0 (the default) is none; at most
    /// 0.25. The filters' memory is on top of the write buffers'.
    pub memtable_bloom_size_ratio: f64,
    /// Key-delta separation (KDSep): flushes move merge operands out of
    /// the LSM-tree into a delta store of buckets by key range, so that a
    /// read finds a key's deltas in one bucket. Once the store holds
    /// deltas, flushes keep routing operands there even with this off,
    /// so that deltas of one key never straddle the two.
    pub enable_delta_separation: bool,
    /// Bytes of chunks a delta bucket holds before garbage collection
    /// rewrites it (KDSep's bucket capacity).
    pub delta_bucket_capacity: u64,
    /// Share of `delta_bucket_capacity` past which garbage collection
    /// splits a bucket in two (KDSep's split threshold).
    pub delta_split_ratio: f64,
    /// Most buckets the delta store keeps; with no room to split, the
    /// smallest adjacent pair is merged.
    pub delta_max_buckets: usize,
    /// The file system; tests pass an in-memory or fault-injecting one.
    /// The default, `OsFs::new()`, reads batches of independent reads
    /// through io_uring where the kernel allows it; `OsFs::with_pread()`
    /// never uses it.
    pub fs: Arc<dyn Fs>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: false,
            error_if_exists: false,
            paranoid_checks: false,
            recycle_wal: 0,
            manual_wal_flush: false,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            target_file_size_base: 64 << 20,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10.0,
            level_compaction_dynamic_level_bytes: true,
            max_background_jobs: 2,
            block_size: 4 << 10,
            block_restart_interval: 16,
            block_cache_capacity: 32 << 20,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            enable_value_separation: true,
            min_value_size: 512,
            value_file_size: 256 << 20,
            big_value_threshold: 32 << 10,
            value_log_count: 4,
            recent_value_cache_bytes: 64 << 20,
            prepopulate_block_cache: true,
            cache_values: true,
            value_compression: Compression::None,
            drop_cache_capacity: 4 << 20,
            enable_gc: true,
            gc_garbage_ratio: 0.2,
            space_budget_bytes: 0,
            space_budget_fail_writes: false,
            dynamic_gc_threads: true,
            gc_rate_limiter: true,
            device_write_bandwidth: 0,
            gc_coalesced_reads: true,
            compensated_size: true,
            correlated_compaction: true,
            max_value_file_refs: 256,
            correlated_garbage_ratio: 0.5,
            range_merge_sorted_runs: 8,
            range_merge_idle: Duration::from_secs(1),
            no_space_poll_interval: Duration::from_secs(1),
            use_direct_reads: false,
            use_direct_io_for_flush_and_compaction: false,
            max_open_files: 1000,
            max_manifest_file_size: 64 << 20,
            merge_operator: None,
            clock: Arc::new(SystemClock),
            compaction_filter: None,
            prefix_extractor: None,
            memtable_bloom_size_ratio: 0.0,
            enable_delta_separation: false,
            delta_bucket_capacity: 256 << 10,
            delta_split_ratio: 0.8,
            delta_max_buckets: 4096,
            fs: Arc::new(OsFs::new()),
        }
    }
}

/// Bounds of `delta_bucket_capacity`: a bucket is read whole into
/// memory, and at least a page.
const MIN_DELTA_BUCKET_BYTES: u64 = 4 << 10;
const MAX_DELTA_BUCKET_BYTES: u64 = 64 << 20;

/// A space budget holds a manifest of at most this many times fewer bytes.
const BUDGET_PER_MANIFEST_BYTE: u64 = 64;
/// Nor smaller than this: each new manifest starts with a snapshot of the
/// whole Version.
const MIN_BUDGET_MANIFEST_BYTES: u64 = 64 << 10;
/// A space budget holds value files of at most this many times fewer
/// bytes: GC copies a file's live records before it deletes the file, so
/// the budget keeps room for that copy (`db::budget`), and a file larger
/// than that room could be collected only once mostly garbage.
const BUDGET_PER_VALUE_FILE_BYTE: u64 = 128;
/// Nor smaller than this, while the budget allows: each GC job syncs its
/// output and commits an edit, which a smaller file pays for more often.
const MIN_BUDGET_VALUE_FILE_BYTES: u64 = 4 << 20;
/// Nor larger than this share of the budget, for small budgets.
const MAX_BUDGET_SHARE_PER_VALUE_FILE: u64 = 64;
/// The smallest value file `validate` accepts.
const MIN_VALUE_FILE_BYTES: u64 = 4 << 10;

impl Options {
    /// The threads compaction and GC share: all background jobs but the
    /// flush thread, and at least one.
    pub(crate) fn pool_threads(&self) -> usize {
        self.max_background_jobs.saturating_sub(1).max(1)
    }

    /// A new memtable, with the filter these options ask for.
    pub(crate) fn new_memtable(&self) -> crate::memtable::MemTable {
        let bytes = (self.write_buffer_size as f64 * self.memtable_bloom_size_ratio) as usize;
        crate::memtable::MemTable::with_filter(bytes, self.prefix_extractor.clone())
    }

    /// The smallest value a value log takes; 0 when logs are off.
    pub(crate) fn effective_big_value_threshold(&self) -> usize {
        if !self.enable_value_separation || self.big_value_threshold == 0 {
            return 0;
        }
        self.big_value_threshold.max(self.min_value_size)
    }

    /// The manifest size that starts a new manifest: under a space budget
    /// at most 1/64 of it (the manifest counts in it, and grows by an edit
    /// per flush, compaction and GC job), but not below 64 KiB.
    pub(crate) fn effective_max_manifest_file_size(&self) -> u64 {
        if self.space_budget_bytes == 0 {
            return self.max_manifest_file_size;
        }
        let share =
            (self.space_budget_bytes / BUDGET_PER_MANIFEST_BYTE).max(MIN_BUDGET_MANIFEST_BYTES);
        self.max_manifest_file_size.min(share)
    }

    /// The size at which flushes, compactions, GC and value logs start a
    /// new value file: under a space budget at most 1/128 of it (at least
    /// 4 MiB, and at most 1/64 of a small budget), so that GC can collect
    /// any file within the room the budget keeps for it.
    pub(crate) fn effective_value_file_size(&self) -> u64 {
        if self.space_budget_bytes == 0 {
            return self.value_file_size;
        }
        let share = (self.space_budget_bytes / BUDGET_PER_VALUE_FILE_BYTE)
            .max(MIN_BUDGET_VALUE_FILE_BYTES)
            .min(self.space_budget_bytes / MAX_BUDGET_SHARE_PER_VALUE_FILE)
            .max(MIN_VALUE_FILE_BYTES);
        self.value_file_size.min(share)
    }

    /// Rejects combinations that cannot work, naming the option.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::InvalidArgument(what.to_string()));
        if self.write_buffer_size < 4 << 10 {
            return bad("write_buffer_size must be at least 4 KiB");
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2");
        }
        if self.level0_file_num_compaction_trigger == 0 {
            return bad("level0_file_num_compaction_trigger must be positive");
        }
        if self.level0_slowdown_writes_trigger < self.level0_file_num_compaction_trigger {
            return bad(
                "level0_slowdown_writes_trigger must be >= level0_file_num_compaction_trigger",
            );
        }
        if self.level0_stop_writes_trigger < self.level0_slowdown_writes_trigger {
            return bad("level0_stop_writes_trigger must be >= level0_slowdown_writes_trigger");
        }
        if self.target_file_size_base == 0 || self.max_bytes_for_level_base == 0 {
            return bad("target_file_size_base and max_bytes_for_level_base must be positive");
        }
        if !(self.max_bytes_for_level_multiplier >= 2.0
            && self.max_bytes_for_level_multiplier <= 100.0)
        {
            return bad("max_bytes_for_level_multiplier must be in [2, 100]");
        }
        if self.no_space_poll_interval.is_zero() {
            return bad("no_space_poll_interval must be positive");
        }
        if self.max_background_jobs == 0 || self.max_background_jobs > 64 {
            return bad("max_background_jobs must be in [1, 64]");
        }
        if self.block_size < 256 || self.block_size > 64 << 20 {
            return bad("block_size must be in [256 B, 64 MiB]");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval must be positive");
        }
        if self.bloom_bits_per_key > 64 {
            return bad("bloom_bits_per_key must be at most 64");
        }
        if self.min_value_size == 0 {
            return bad("min_value_size must be positive");
        }
        // NaN fails too.
        if !(self.gc_garbage_ratio > 0.0 && self.gc_garbage_ratio <= 1.0) {
            return bad("gc_garbage_ratio must be in (0, 1]");
        }
        // One slot is the new file re-separated values go to.
        if self.max_value_file_refs == 0 {
            return bad("max_value_file_refs must be at least 1");
        }
        if !(self.correlated_garbage_ratio > 0.0 && self.correlated_garbage_ratio <= 1.0) {
            return bad("correlated_garbage_ratio must be in (0, 1]");
        }
        // Ordinals of a logical file fit a u32 in the value-references
        // bitmaps: 32 GiB of records of at least 14 bytes stays below 2^32.
        if self.value_file_size < MIN_VALUE_FILE_BYTES || self.value_file_size > 32 << 30 {
            return bad("value_file_size must be in [4 KiB, 32 GiB]");
        }
        if self.effective_big_value_threshold() > 0 && !(1..=64).contains(&self.value_log_count) {
            return bad("value_log_count must be in [1, 64]");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        if self.max_manifest_file_size < 1 << 10 {
            return bad("max_manifest_file_size must be at least 1 KiB");
        }
        if let Some(op) = &self.merge_operator {
            if op.name().is_empty() || op.name().len() > MAX_NAME_LEN {
                return bad("merge_operator's name must be 1 to 128 bytes");
            }
        }
        if let Some(p) = &self.prefix_extractor {
            if p.name().is_empty() || p.name().len() > MAX_PREFIX_NAME_LEN {
                return bad("prefix_extractor's name must be 1 to 128 bytes");
            }
        }
        if !(0.0..=0.25).contains(&self.memtable_bloom_size_ratio) {
            return bad("memtable_bloom_size_ratio must be in [0, 0.25]");
        }
        if !(MIN_DELTA_BUCKET_BYTES..=MAX_DELTA_BUCKET_BYTES).contains(&self.delta_bucket_capacity)
        {
            return bad("delta_bucket_capacity must be in [4 KiB, 64 MiB]");
        }
        if !(self.delta_split_ratio > 0.0 && self.delta_split_ratio <= 1.0) {
            return bad("delta_split_ratio must be in (0, 1]");
        }
        if self.delta_max_buckets < 4 {
            return bad("delta_max_buckets must be at least 4");
        }
        Ok(())
    }
}

/// Options for one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// fsync the WAL before acknowledging.
    pub sync: bool,
    /// Skip the WAL: the write is lost by a crash before the next flush.
    pub disable_wal: bool,
}

/// Options for one read or iterator.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions<'a> {
    /// Read as of this snapshot instead of the latest state.
    pub snapshot: Option<&'a Snapshot>,
    /// Iterators start at or after this user key.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators stop before this user key.
    pub upper_bound: Option<Vec<u8>>,
}

impl ReadOptions<'_> {
    /// Reads of the latest state, unbounded. Every block read is verified
    /// against its checksum; there is no option to skip that.
    pub fn new() -> Self {
        Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_space_budget_bounds_value_files() {
        let mut o = Options {
            value_file_size: 64 << 20,
            ..Options::default()
        };
        assert_eq!(o.effective_value_file_size(), 64 << 20);
        // 1/128 of a 4 GiB budget.
        o.space_budget_bytes = 4 << 30;
        assert_eq!(o.effective_value_file_size(), 32 << 20);
        // Never below 4 MiB while the budget holds 64 of them...
        o.space_budget_bytes = 300 << 20;
        assert_eq!(o.effective_value_file_size(), 4 << 20);
        // ... and a sixty-fourth of a smaller one, but at least 4 KiB.
        o.space_budget_bytes = 2 << 20;
        assert_eq!(o.effective_value_file_size(), 32 << 10);
        o.space_budget_bytes = 100 << 10;
        assert_eq!(o.effective_value_file_size(), 4 << 10);
        // Never above the configured size.
        o.space_budget_bytes = 1 << 40;
        assert_eq!(o.effective_value_file_size(), 64 << 20);
    }
}
