//! The engines the driver can run, behind one trait, so cleave, RocksDB and
//! BlobDB (the last two through the `rocksdb` crate, with the `rocksdb`
//! feature) run the same workloads in the same process.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Serialize, Serializer};

use crate::flags::{CompressionType, Flags};
use crate::merge::MergeShape;

mod cleave;
mod logstore;
#[cfg(feature = "rocksdb")]
mod rocksdb;

#[cfg(test)]
pub mod memory;

/// What a seek-then-next scan saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// The iterator landed exactly on the seek key (db_bench's "found").
    pub found_exact: bool,
    /// Entries read by the `next` calls.
    pub entries: u64,
    /// Key plus value bytes of those entries.
    pub bytes: u64,
}

/// Byte counters an engine keeps about its own I/O, cumulative since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct EngineCounters {
    pub user_bytes_written: u64,
    pub wal_bytes_written: u64,
    pub flush_bytes_written: u64,
    pub compaction_bytes_read: u64,
    pub compaction_bytes_written: u64,
    /// The part of `flush_bytes_written` and `compaction_bytes_written`
    /// that went to value files (RocksDB's blob files, cleave's value
    /// files). Already counted in those two, so never added to them again:
    /// RocksDB's flush and compaction tickers count every byte the job's
    /// thread writes, blob files included, and cleave's flush counter
    /// counts the value files a flush writes.
    pub value_file_bytes_written: u64,
    /// Bytes a value-file GC of its own read (record indexes and live
    /// records) and wrote (its output files); in none of the counters
    /// above. cleave's only: RocksDB's and BlobDB's blob GC runs inside
    /// compaction, so their GC bytes are in the compaction counters and
    /// these stay 0.
    pub gc_bytes_read: u64,
    pub gc_bytes_written: u64,
    /// Bytes cleave's value logs took when values were written
    /// (WAL-time separation); in none of the counters above.
    pub value_log_bytes_written: u64,
    pub stall_micros: u64,
    /// The part of `stall_micros` writers waited for a flush because every
    /// memtable was full; cleave's only (RocksDB's C API does not split
    /// its stall time by cause).
    pub flush_stall_micros: Option<u64>,
    /// Value-file bytes read to hand values to compaction (cleave: its
    /// compaction filter's value reads; BlobDB: its blob-file read
    /// ticker, which counts gets' reads too, so that in a phase with no
    /// reads it is compaction's: for `DBWithTTL`'s filter, which needs the
    /// value to find its timestamp, and for blob GC's relocations).
    /// `None` for RocksDB, whose values are read with every compaction
    /// input (in `compaction_bytes_read`).
    pub compaction_value_bytes_read: Option<u64>,
    /// Value bytes of the entries compactions dropped because they had
    /// expired (cleave's only; without reading them).
    pub expired_value_bytes: Option<u64>,
}

impl EngineCounters {
    /// Counters accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            user_bytes_written: self
                .user_bytes_written
                .saturating_sub(earlier.user_bytes_written),
            wal_bytes_written: self
                .wal_bytes_written
                .saturating_sub(earlier.wal_bytes_written),
            flush_bytes_written: self
                .flush_bytes_written
                .saturating_sub(earlier.flush_bytes_written),
            compaction_bytes_read: self
                .compaction_bytes_read
                .saturating_sub(earlier.compaction_bytes_read),
            compaction_bytes_written: self
                .compaction_bytes_written
                .saturating_sub(earlier.compaction_bytes_written),
            value_file_bytes_written: self
                .value_file_bytes_written
                .saturating_sub(earlier.value_file_bytes_written),
            gc_bytes_read: self.gc_bytes_read.saturating_sub(earlier.gc_bytes_read),
            gc_bytes_written: self
                .gc_bytes_written
                .saturating_sub(earlier.gc_bytes_written),
            value_log_bytes_written: self
                .value_log_bytes_written
                .saturating_sub(earlier.value_log_bytes_written),
            stall_micros: self.stall_micros.saturating_sub(earlier.stall_micros),
            flush_stall_micros: self
                .flush_stall_micros
                .zip(earlier.flush_stall_micros)
                .map(|(now, then)| now.saturating_sub(then)),
            compaction_value_bytes_read: self
                .compaction_value_bytes_read
                .zip(earlier.compaction_value_bytes_read)
                .map(|(now, then)| now.saturating_sub(then)),
            expired_value_bytes: self
                .expired_value_bytes
                .zip(earlier.expired_value_bytes)
                .map(|(now, then)| now.saturating_sub(then)),
        }
    }

    /// Everything the engine wrote (WAL, flushes, compactions, GC, value
    /// logs; value files are inside the flushes, compactions and GC) per user byte; `None` when no user
    /// bytes were written.
    pub fn write_amplification(&self) -> Option<f64> {
        let written = self.wal_bytes_written
            + self.flush_bytes_written
            + self.compaction_bytes_written
            + self.gc_bytes_written
            + self.value_log_bytes_written;
        (self.user_bytes_written > 0).then(|| written as f64 / self.user_bytes_written as f64)
    }
}

/// Where an engine's disk space goes, as the engine itself accounts it
/// (cleave's `Db::space_report`), beside the harness's own `disk_bytes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SpaceBreakdown {
    /// Bytes of live sstables.
    pub sstable_bytes: u64,
    /// Bytes of live value files on disk.
    pub value_file_bytes: u64,
    /// Value-file record bytes that no live sstable references any more:
    /// garbage a value-file GC could reclaim.
    pub exposed_garbage_bytes: u64,
    /// Space amplification of the key tree (Scavenger+'s S_index): the
    /// compensated bytes of all levels over those of the last level.
    pub s_index: f64,
    /// Estimated value bytes shadowed by newer entries not yet compacted
    /// (Scavenger+'s hidden garbage G_H).
    pub hidden_garbage_bytes: u64,
    /// GC jobs the scheduler allowed at once at the end, and GC's
    /// bandwidth limit then (bytes/s; `None` when unlimited).
    pub gc_max_jobs: u64,
    pub gc_rate_limit: Option<u64>,
}

/// What an engine's value-file GC did, for engines whose GC runs as jobs of
/// its own (cleave's `GcStats`), cumulative since open like the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct GcBreakdown {
    pub jobs: u64,
    /// Value files collected, and written.
    pub files_in: u64,
    pub files_out: u64,
    /// Sstables whose value references were read to find the live records.
    pub tables_read: u64,
    pub records_kept: u64,
    pub records_dropped: u64,
    pub index_bytes_read: u64,
    pub value_bytes_read: u64,
    pub bytes_written: u64,
    /// Input bytes minus output bytes.
    pub bytes_reclaimed: u64,
    /// Time per phase (milliseconds in the JSON): the liveness bitmaps,
    /// the record indexes, the live records, writing the outputs,
    /// committing.
    #[serde(rename = "bitmap_ms", serialize_with = "milliseconds")]
    pub bitmap_time: Duration,
    #[serde(rename = "index_ms", serialize_with = "milliseconds")]
    pub index_time: Duration,
    #[serde(rename = "value_read_ms", serialize_with = "milliseconds")]
    pub value_read_time: Duration,
    #[serde(rename = "write_ms", serialize_with = "milliseconds")]
    pub write_time: Duration,
    #[serde(rename = "commit_ms", serialize_with = "milliseconds")]
    pub commit_time: Duration,
    /// Time GC waited for its rate limiter.
    #[serde(rename = "throttle_ms", serialize_with = "milliseconds")]
    pub throttle_time: Duration,
}

/// From whole nanoseconds, so that the JSON shows 2.951297, not the
/// rounding noise of a float product.
fn milliseconds<S: Serializer>(time: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(time.as_nanos() as f64 / 1e6)
}

impl GcBreakdown {
    /// GC work done between `earlier` and `self`.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            jobs: self.jobs.saturating_sub(earlier.jobs),
            files_in: self.files_in.saturating_sub(earlier.files_in),
            files_out: self.files_out.saturating_sub(earlier.files_out),
            tables_read: self.tables_read.saturating_sub(earlier.tables_read),
            records_kept: self.records_kept.saturating_sub(earlier.records_kept),
            records_dropped: self.records_dropped.saturating_sub(earlier.records_dropped),
            index_bytes_read: self
                .index_bytes_read
                .saturating_sub(earlier.index_bytes_read),
            value_bytes_read: self
                .value_bytes_read
                .saturating_sub(earlier.value_bytes_read),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            bytes_reclaimed: self.bytes_reclaimed.saturating_sub(earlier.bytes_reclaimed),
            bitmap_time: self.bitmap_time.saturating_sub(earlier.bitmap_time),
            index_time: self.index_time.saturating_sub(earlier.index_time),
            value_read_time: self.value_read_time.saturating_sub(earlier.value_read_time),
            write_time: self.write_time.saturating_sub(earlier.write_time),
            commit_time: self.commit_time.saturating_sub(earlier.commit_time),
            throttle_time: self.throttle_time.saturating_sub(earlier.throttle_time),
        }
    }
}

/// A key-value engine under test. Write durability (`sync`, `disable_wal`)
/// is fixed when the engine is opened, as db_bench fixes it per run.
pub trait Engine: Send + Sync {
    /// The `--engine` name.
    fn name(&self) -> &'static str;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// The values of `keys`, in order, in one call where the engine has
    /// one (RocksDB's and cleave's `MultiGet`); the default gets each.
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|key| self.get(key)).collect()
    }
    /// Writes all entries atomically.
    fn write_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<()>;
    /// Merges `operand` into `key` with the configured merge operator.
    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()>;
    /// Seeks a fresh iterator to `start`, then reads up to `nexts` entries
    /// with `next`, as db_bench's seekrandom does.
    fn scan(&self, start: &[u8], nexts: u64) -> Result<ScanOutcome>;
    /// Writes the memtable out.
    fn flush(&self) -> Result<()>;
    /// Compacts the whole key range.
    fn compact_all(&self) -> Result<()>;
    /// Returns once no flush or compaction is pending or running.
    fn wait_for_compactions(&self) -> Result<()>;
    /// The engine's own human-readable statistics, if it has any.
    fn stats_text(&self) -> Option<String>;
    /// The engine's own I/O counters, if it keeps them.
    fn counters(&self) -> Option<EngineCounters>;
    /// The engine's own breakdown of its disk space, for engines that keep
    /// one (`None` for the rest: their records leave the fields out).
    fn space_breakdown(&self) -> Result<Option<SpaceBreakdown>> {
        Ok(None)
    }
    /// The engine's value-file GC totals, for engines whose GC runs as jobs
    /// of its own (`None` for the rest: their records leave the GC fields
    /// out, and their blob GC is in their compaction counters).
    fn gc_breakdown(&self) -> Option<GcBreakdown> {
        None
    }
    /// A note for the run header about options the engine could not honour
    /// exactly (e.g. a codec it lacks).
    fn config_notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Appends record `lsn` of logical log `log` (logappend). An engine
    /// with no log store of its own stores it under the key
    /// [`log_key`]`(log, lsn)`, as a log kept in an LSM-tree is.
    fn log_append(&self, log: u32, lsn: u64, record: &[u8]) -> Result<()> {
        self.put(&log_key(log, lsn), record)
    }
    /// Drops the records of `log` below `before`; those below `from` are
    /// gone already.
    fn log_trim(&self, log: u32, from: u64, before: u64) -> Result<()> {
        let _ = (log, from, before);
        bail!("{} cannot trim a log", self.name())
    }
    /// Closes the engine, reporting errors that dropping would hide.
    fn close(self: Box<Self>) -> Result<()>;
}

/// The key of record `lsn` of log `log` in an engine that keeps logs as
/// keys: big-endian, so that a log's records are adjacent and in order.
pub fn log_key(log: u32, lsn: u64) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..4].copy_from_slice(&log.to_be_bytes());
    key[4..].copy_from_slice(&lsn.to_be_bytes());
    key
}

/// Engine options, from the db_bench flags.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub path: PathBuf,
    pub write_buffer_size: u64,
    pub max_write_buffer_number: u32,
    pub target_file_size_base: u64,
    pub max_bytes_for_level_base: u64,
    pub max_background_jobs: u32,
    pub max_bytes_for_level_multiplier: f64,
    pub level_compaction_dynamic_level_bytes: bool,
    pub level0_file_num_compaction_trigger: u32,
    pub level0_slowdown_writes_trigger: u32,
    pub level0_stop_writes_trigger: u32,
    pub block_size: u64,
    pub cache_size: u64,
    /// `None` leaves the engine's default; `Some(0)` disables the filter.
    pub bloom_bits_per_key: Option<u32>,
    pub compression: CompressionType,
    pub sync: bool,
    pub disable_wal: bool,
    /// Obsolete WALs written over by later ones (`--recycle_wal`).
    pub recycle_wal: usize,
    pub use_direct_reads: bool,
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Values at least this large go to value files (BlobDB's
    /// `min_blob_size`, cleave's `min_value_size`).
    pub min_blob_size: u64,
    /// cleave only: key-value separation on (`--value_separation`).
    pub value_separation: bool,
    /// cleave only: separated values share the block cache
    /// (`--use_blob_cache`).
    pub use_blob_cache: bool,
    /// cleave only: background value-file GC (`--gc`).
    pub gc: bool,
    /// cleave only: the garbage ratio at which GC collects a value file.
    pub gc_garbage_ratio: f64,
    /// cleave only: DropCache bytes (`--drop_cache_size`; 0: no hot/cold).
    pub drop_cache_size: u64,
    /// cleave only: the scheduler's knobs and ablation switches
    /// (`--space_budget_bytes`, `--dynamic_gc_threads`, `--gc_rate_limiter`,
    /// `--device_write_bandwidth`, `--gc_coalesced_reads`,
    /// `--compensated_size`).
    pub space_budget_bytes: u64,
    pub dynamic_gc_threads: bool,
    pub gc_rate_limiter: bool,
    pub device_write_bandwidth: u64,
    pub gc_coalesced_reads: bool,
    pub compensated_size: bool,
    /// cleave only: correlated compaction (`--correlated_compaction`).
    pub correlated_compaction: bool,
    /// cleave only: blocks written are cached (`--prepopulate_block_cache`).
    pub prepopulate_block_cache: bool,
    /// cleave only: the most value files a compaction output may reference.
    pub max_value_file_refs: u64,
    /// cleave only: range merges (`--range_merge_sorted_runs`, 0 off).
    pub range_merge_sorted_runs: u64,
    /// cleave only: WAL-time separation (`--big_value_threshold`, 0 off),
    /// its logs, and the recent-value cache.
    pub big_value_threshold: u64,
    pub value_log_count: u64,
    pub recent_value_cache_size: u64,
    /// cleave only: key-delta separation and its buckets.
    pub delta_separation: bool,
    pub delta_bucket_capacity: u64,
    pub delta_max_buckets: u64,
    /// cleave only: `--range_merge_idle_ms`.
    pub range_merge_idle_ms: u64,
    /// logstore only: `--log_file_bytes`, `--log_preallocate`, and the
    /// logs (`--logs`) it creates when it opens.
    pub log_file_bytes: u64,
    pub logs: u32,
    pub log_preallocate: bool,
    /// Every engine's merge operator (`--merge_operator`).
    pub merge: MergeShape,
    /// Every put's time to live (`--ttl_seconds`; `None`: forever).
    pub ttl: Option<Duration>,
}

/// BlobDB's separation threshold in the benchmarks we compare against
/// (BENCHMARKS.md runs BlobDB with `--min_blob_size=512`); `--min_blob_size`'s
/// default.
#[cfg(test)]
pub const DEFAULT_MIN_BLOB_SIZE: u64 = 512;

/// A small configuration for the adapters' tests: 1 MiB memtables and
/// files, so a few thousand puts flush and compact.
#[cfg(test)]
pub fn small_test_config(path: PathBuf) -> EngineConfig {
    EngineConfig {
        path,
        write_buffer_size: 1 << 20,
        max_write_buffer_number: 2,
        target_file_size_base: 1 << 20,
        max_bytes_for_level_base: 4 << 20,
        max_background_jobs: 2,
        max_bytes_for_level_multiplier: 10.0,
        level_compaction_dynamic_level_bytes: false,
        level0_file_num_compaction_trigger: 4,
        level0_slowdown_writes_trigger: 20,
        level0_stop_writes_trigger: 36,
        block_size: 4096,
        cache_size: 1 << 20,
        bloom_bits_per_key: Some(10),
        compression: CompressionType::Lz4,
        sync: false,
        disable_wal: false,
        recycle_wal: 0,
        use_direct_reads: false,
        use_direct_io_for_flush_and_compaction: false,
        min_blob_size: DEFAULT_MIN_BLOB_SIZE,
        value_separation: true,
        use_blob_cache: false,
        gc: true,
        gc_garbage_ratio: 0.2,
        drop_cache_size: 4 << 20,
        space_budget_bytes: 0,
        dynamic_gc_threads: true,
        gc_rate_limiter: true,
        device_write_bandwidth: 0,
        gc_coalesced_reads: true,
        compensated_size: true,
        correlated_compaction: true,
        prepopulate_block_cache: true,
        max_value_file_refs: 256,
        range_merge_sorted_runs: 8,
        range_merge_idle_ms: 1000,
        log_file_bytes: 256 << 20,
        logs: 100,
        log_preallocate: true,
        big_value_threshold: 0,
        value_log_count: 4,
        recent_value_cache_size: 64 << 20,
        delta_separation: false,
        delta_bucket_capacity: 256 << 10,
        delta_max_buckets: 4096,
        merge: MergeShape {
            kind: crate::merge::MergeKind::Uint64add,
            fields: 10,
            field_len: 100,
            get_put: false,
        },
        ttl: None,
    }
}

impl EngineConfig {
    pub fn from_flags(flags: &Flags) -> Self {
        Self {
            path: flags.db.clone(),
            write_buffer_size: flags.write_buffer_size,
            max_write_buffer_number: flags.max_write_buffer_number,
            target_file_size_base: flags.target_file_size_base,
            max_bytes_for_level_base: flags.max_bytes_for_level_base,
            max_background_jobs: flags.max_background_jobs,
            max_bytes_for_level_multiplier: flags.max_bytes_for_level_multiplier,
            level_compaction_dynamic_level_bytes: flags.level_compaction_dynamic_level_bytes,
            level0_file_num_compaction_trigger: flags.level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: flags.level0_slowdown_writes_trigger,
            level0_stop_writes_trigger: flags.level0_stop_writes_trigger,
            block_size: flags.block_size,
            cache_size: flags.cache_size,
            bloom_bits_per_key: u32::try_from(flags.bloom_bits).ok(),
            compression: flags.compression_type,
            sync: flags.sync,
            disable_wal: flags.disable_wal,
            recycle_wal: flags.recycle_wal,
            use_direct_reads: flags.use_direct_reads,
            use_direct_io_for_flush_and_compaction: flags.use_direct_io_for_flush_and_compaction,
            min_blob_size: flags.min_blob_size,
            value_separation: flags.value_separation,
            use_blob_cache: flags.use_blob_cache,
            gc: flags.gc,
            gc_garbage_ratio: flags.gc_garbage_ratio,
            drop_cache_size: flags.drop_cache_size,
            space_budget_bytes: flags.space_budget_bytes,
            dynamic_gc_threads: flags.dynamic_gc_threads,
            gc_rate_limiter: flags.gc_rate_limiter,
            device_write_bandwidth: flags.device_write_bandwidth,
            gc_coalesced_reads: flags.gc_coalesced_reads,
            compensated_size: flags.compensated_size,
            correlated_compaction: flags.correlated_compaction,
            prepopulate_block_cache: flags.prepopulate_block_cache,
            max_value_file_refs: flags.max_value_file_refs,
            range_merge_sorted_runs: flags.range_merge_sorted_runs,
            range_merge_idle_ms: flags.range_merge_idle_ms,
            log_file_bytes: flags.log_file_bytes,
            logs: flags.logs,
            log_preallocate: flags.log_preallocate,
            big_value_threshold: flags.big_value_threshold,
            value_log_count: flags.value_log_count,
            recent_value_cache_size: flags.recent_value_cache_size,
            delta_separation: flags.enable_delta_separation,
            delta_bucket_capacity: flags.delta_bucket_capacity,
            delta_max_buckets: flags.delta_max_buckets,
            merge: flags.merge_shape(),
            ttl: (flags.ttl_seconds > 0).then(|| Duration::from_secs(flags.ttl_seconds)),
        }
    }

    /// The options as one header line, so a result file says what ran.
    pub fn describe(&self) -> String {
        let bloom = match self.bloom_bits_per_key {
            Some(bits) => bits.to_string(),
            None => "engine default".to_owned(),
        };
        format!(
            "path {} | write_buffer_size {} x {} | target_file_size_base {} | \
             max_bytes_for_level_base {} | max_background_jobs {} | cache_size {} | \
             bloom_bits {} | compression {:?} | sync {} | disable_wal {} | recycle_wal {} | \
             direct reads {} | direct flush/compaction {} | min_blob_size {} | \
             value_separation {} (cleave) | use_blob_cache {} (cleave) | gc {} (cleave) | \
             gc_garbage_ratio {} (cleave) | drop_cache_size {} (cleave) | \
             space_budget_bytes {} (cleave) | dynamic_gc_threads {} (cleave) | \
             gc_rate_limiter {} (cleave) | device_write_bandwidth {} (cleave) | \
             gc_coalesced_reads {} (cleave) | compensated_size {} (cleave) | \
             correlated_compaction {} (cleave) | max_value_file_refs {} (cleave) | \
             prepopulate_block_cache {} (cleave) | range_merge_sorted_runs {} (cleave) | \
             range_merge_idle_ms {} (cleave) | big_value_threshold {} (cleave) | \
             value_log_count {} (cleave) | recent_value_cache_size {} (cleave) | \
             delta separation {} ({} B buckets, at most {}) (cleave) | \
             log files {} B, preallocated {} (logstore) | merge_operator {} | ttl_seconds {}",
            self.path.display(),
            self.write_buffer_size,
            self.max_write_buffer_number,
            self.target_file_size_base,
            self.max_bytes_for_level_base,
            self.max_background_jobs,
            self.cache_size,
            bloom,
            self.compression,
            self.sync,
            self.disable_wal,
            self.recycle_wal,
            self.use_direct_reads,
            self.use_direct_io_for_flush_and_compaction,
            self.min_blob_size,
            self.value_separation,
            self.use_blob_cache,
            self.gc,
            self.gc_garbage_ratio,
            self.drop_cache_size,
            self.space_budget_bytes,
            self.dynamic_gc_threads,
            self.gc_rate_limiter,
            self.device_write_bandwidth,
            self.gc_coalesced_reads,
            self.compensated_size,
            self.correlated_compaction,
            self.max_value_file_refs,
            self.prepopulate_block_cache,
            self.range_merge_sorted_runs,
            self.range_merge_idle_ms,
            self.big_value_threshold,
            self.value_log_count,
            self.recent_value_cache_size,
            self.delta_separation,
            self.delta_bucket_capacity,
            self.delta_max_buckets,
            self.log_file_bytes,
            self.log_preallocate,
            self.merge
                .operator()
                .map_or_else(|| "none".to_owned(), |op| op.name().to_owned()),
            self.ttl.map_or(0, |ttl| ttl.as_secs()),
        )
    }
}

/// The summed sizes of the files in `path` whose names end in `suffix`.
#[cfg(test)]
pub fn bytes_with_suffix(path: &std::path::Path, suffix: &str) -> u64 {
    std::fs::read_dir(path)
        .expect("list db dir")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(suffix))
        .map(|entry| entry.metadata().expect("metadata").len())
        .sum()
}

/// The engine names `open` knows.
#[cfg(feature = "rocksdb")]
pub const ENGINE_NAMES: &[&str] = &["cleave", "logstore", "rocksdb", "blobdb"];
/// The engine names `open` knows.
#[cfg(not(feature = "rocksdb"))]
pub const ENGINE_NAMES: &[&str] = &["cleave", "logstore"];

/// Opens the engine named by `--engine` on `config.path`.
pub fn open(name: &str, config: &EngineConfig) -> Result<Box<dyn Engine>> {
    match name {
        "cleave" => Ok(Box::new(cleave::CleaveEngine::open(config)?)),
        "logstore" => Ok(Box::new(logstore::LogStoreEngine::open(config)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(self::rocksdb::RocksDbEngine::open(
            config,
            self::rocksdb::Flavor::Plain,
        )?)),
        #[cfg(feature = "rocksdb")]
        "blobdb" => Ok(Box::new(self::rocksdb::RocksDbEngine::open(
            config,
            self::rocksdb::Flavor::Blob,
        )?)),
        // The default build links no RocksDB, so that it needs no
        // librocksdb; say how to get one rather than "unknown engine".
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" | "blobdb" => bail!(
            "--engine={name} needs cleave-bench built with the rocksdb feature \
             (and Debian's librocksdb-dev, libclang-dev): \
             cargo build --release -p cleave-bench --features rocksdb"
        ),
        other => bail!("unknown --engine={other:?}; known engines: {ENGINE_NAMES:?}"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn counters_difference_and_write_amp() {
        let before = EngineCounters {
            user_bytes_written: 100,
            wal_bytes_written: 100,
            ..EngineCounters::default()
        };
        let after = EngineCounters {
            user_bytes_written: 300,
            wal_bytes_written: 300,
            flush_bytes_written: 200,
            compaction_bytes_written: 100,
            ..EngineCounters::default()
        };
        let delta = after.since(&before);
        assert_eq!(delta.user_bytes_written, 200);
        assert_eq!(delta.write_amplification(), Some(2.5));
        assert_eq!(EngineCounters::default().write_amplification(), None);

        // GC's bytes are in none of the other counters: they add to it.
        let with_gc = EngineCounters {
            gc_bytes_read: 150,
            gc_bytes_written: 100,
            ..after
        };
        let delta = with_gc.since(&EngineCounters {
            gc_bytes_read: 50,
            ..before
        });
        assert_eq!((delta.gc_bytes_read, delta.gc_bytes_written), (100, 100));
        assert_eq!(delta.write_amplification(), Some(3.0));
    }

    #[test]
    fn gc_breakdown_difference() {
        let before = GcBreakdown {
            jobs: 1,
            bytes_written: 100,
            bitmap_time: Duration::from_millis(2),
            commit_time: Duration::from_micros(1500),
            ..GcBreakdown::default()
        };
        let after = GcBreakdown {
            jobs: 3,
            files_in: 4,
            bytes_written: 400,
            bytes_reclaimed: 1000,
            bitmap_time: Duration::from_millis(5),
            commit_time: Duration::from_micros(1500),
            ..GcBreakdown::default()
        };
        assert_eq!(
            after.since(&before),
            GcBreakdown {
                jobs: 2,
                files_in: 4,
                bytes_written: 300,
                bytes_reclaimed: 1000,
                bitmap_time: Duration::from_millis(3),
                ..GcBreakdown::default()
            }
        );
        // Clamped at zero, as the counters are.
        assert_eq!(before.since(&after), GcBreakdown::default());
    }

    #[test]
    fn unknown_engine_is_an_error() {
        let config = EngineConfig::from_flags(&crate::flags::Flags::parse_from(["x"]));
        let error = open("leveldb", &config).err().map(|e| e.to_string());
        assert!(error.is_some_and(|message| message.contains("unknown --engine")));
    }

    #[cfg(not(feature = "rocksdb"))]
    #[test]
    fn rocksdb_without_the_feature_says_how_to_build_it() {
        let config = EngineConfig::from_flags(&crate::flags::Flags::parse_from(["x"]));
        for name in ["rocksdb", "blobdb"] {
            let error = open(name, &config).err().map(|e| e.to_string());
            assert!(
                error.is_some_and(|message| message.contains("--features rocksdb")),
                "{name}"
            );
        }
    }
}
