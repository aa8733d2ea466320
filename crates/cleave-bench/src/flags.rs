//! Command-line flags, named and defaulted as in RocksDB 7.8's `db_bench`, so
//! one command line runs against both tools.
//!
//! `db_bench` parses flags with gflags, which accepts `--name=value`,
//! `-name=value` and, for booleans, a bare `--name`, `--name=1` or
//! `--name=true`. [`normalize_args`] and [`parse_bool`] give clap the same
//! vocabulary.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Parser, ValueEnum};

use crate::distributions::{KeyDistribution, DEFAULT_ZIPF_THETA};
use crate::keys::{KeySizeDistribution, UP2X_KEY_MIN_BYTES};
use crate::merge::{MergeKind, MergeShape};
use crate::value_sizes::ValueSizeDistribution;

/// The block compression to ask the engine for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompressionType {
    None,
    /// `db_bench`'s default. cleave has no snappy codec; engines without
    /// one use lz4, the closest fast codec, and say so in the header.
    Snappy,
    Lz4,
    Zstd,
}

/// Every flag of the driver. Field names are `db_bench`'s flag names.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "cleave-bench",
    about = "A db_bench-compatible benchmark driver for cleave",
    rename_all = "snake_case"
)]
pub struct Flags {
    /// Comma-separated benchmarks to run in order: fillseq, fillrandom,
    /// filluniquerandom, overwrite, updaterandom, readrandom,
    /// readwhilewriting, seekrandom, readrandomwriterandom, mergerandom,
    /// readrandommergerandom, ycsb_load, ycsb_a .. ycsb_f, ycsb_am,
    /// ycsb_bm, ycsb_fm, flush, compact, waitforcompaction, stats.
    #[arg(long, default_value = "fillrandom,readrandom")]
    pub benchmarks: String,

    /// Engines to drive, comma-separated: each runs every benchmark in turn,
    /// on a fresh directory, with the same seeds and so the same operations.
    #[arg(long, default_value = "cleave")]
    pub engine: String,

    /// Number of keys in the key space; also the number of writes and reads
    /// per thread unless --writes or --reads say otherwise.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,

    /// Reads (gets or seeks) per thread; negative means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub reads: i64,

    /// Writes per thread for fillrandom and overwrite; negative means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub writes: i64,

    /// The key size of `--key_size_distribution=fixed`.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,

    /// How key sizes are drawn: fixed (--key_size) or up2x (KDSep's UP2X,
    /// normal around 10.45 B, the same size for a key in every phase).
    #[arg(long, value_enum, default_value = "fixed")]
    pub key_size_distribution: KeySizeDistribution,

    /// The value size of `--value_size_distribution=fixed`.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,

    /// How value sizes are drawn: fixed (--value_size), mixed-8k, pareto-1k,
    /// or uniform (--value_size_min..=--value_size_max).
    #[arg(long, value_enum, default_value = "fixed")]
    pub value_size_distribution: ValueSizeDistribution,

    #[arg(long, default_value_t = 100)]
    pub value_size_min: usize,

    #[arg(long, default_value_t = 1024)]
    pub value_size_max: usize,

    /// Which keys updates pick (overwrite, updaterandom, the writes of
    /// readwhilewriting and readrandomwriterandom). Fills are unaffected;
    /// YCSB's run phases use their workload's own distribution.
    #[arg(long, value_enum, default_value = "uniform")]
    pub key_distribution: KeyDistribution,

    /// Which keys reads and seeks pick; defaults to --key_distribution.
    #[arg(long, value_enum)]
    pub read_key_distribution: Option<KeyDistribution>,

    /// The zipfian constant (YCSB's default 0.99).
    #[arg(long, default_value_t = DEFAULT_ZIPF_THETA)]
    pub zipf_theta: f64,

    /// Run each data benchmark for this many seconds instead of its count
    /// (0: use the counts).
    #[arg(long, default_value_t = 0)]
    pub duration: u64,

    /// readrandomwriterandom: the percentage of operations that are reads.
    #[arg(long, default_value_t = 90)]
    pub readwritepercent: u32,

    /// The merge operator of every engine, for mergerandom and
    /// readrandommergerandom: db_bench's uint64add (8-byte operands), put,
    /// stringappend (`,`) and max, or fieldupdate (an operand replaces one
    /// of --ycsb_field_count fields of --ycsb_field_length bytes).
    #[arg(long, value_enum, default_value_t = MergeKind::None)]
    pub merge_operator: MergeKind,

    /// cleave-bench's own: mergerandom and readrandommergerandom do each
    /// read-modify-write as a get, the operator applied by the client, and
    /// a put, instead of a merge (KDSep's "Get-Put").
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub merge_as_get_put: bool,

    /// readrandommergerandom: the percentage of operations that are
    /// merges (db_bench's name; the rest are gets).
    #[arg(long, default_value_t = 70)]
    pub mergereadpercent: u32,

    /// Distinct keys mergerandom and readrandommergerandom touch; negative
    /// means --num.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub merge_keys: i64,

    /// Seeks per thread for seekrandom; negative means --reads.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub seeks: i64,

    /// YCSB run phases: operations in all (split across threads); 0 means
    /// --num. The record count of ycsb_load is --num.
    #[arg(long, default_value_t = 0)]
    pub ycsb_operation_count: u64,

    /// YCSB record shape: a value is field_count x field_length bytes.
    #[arg(long, default_value_t = 10)]
    pub ycsb_field_count: usize,

    #[arg(long, default_value_t = 100)]
    pub ycsb_field_length: usize,

    /// YCSB E: scan lengths are uniform in 1..=this.
    #[arg(long, default_value_t = 100)]
    pub ycsb_max_scan_length: u64,

    /// db_bench's: the writes of all threads together (fills, overwrite,
    /// readwhilewriting's writer) go in at most this many bytes of keys and
    /// values per second; 0: no limit.
    #[arg(long, default_value_t = 0)]
    pub benchmark_write_rate_limit: u64,

    /// Every put expires this many seconds after it is written (0: never):
    /// cleave's `put_with_ttl`, RocksDB and BlobDB opened through
    /// `DBWithTTL`. The live set then counts only unexpired values, so
    /// space amplification is over what an engine must keep.
    #[arg(long, default_value_t = 0)]
    pub ttl_seconds: u64,

    /// Throttle writers whenever the database directory holds more than
    /// this many times the live logical bytes (0: no limit). The same for
    /// every engine: the papers' fair-comparison mode.
    #[arg(long, default_value_t = 0.0)]
    pub space_limit_ratio: f64,

    /// Give up throttling for the rest of a benchmark once writers have
    /// waited this long in one stretch (an engine that cannot get under the
    /// limit would otherwise hang the run); the record says so.
    #[arg(long, default_value_t = 60)]
    pub space_limit_max_wait: u64,

    /// Values at least this large go to value files: BlobDB's blob files
    /// and cleave's value files (its min_value_size; 0 means 1 for cleave,
    /// which always keeps empty values inline).
    #[arg(long, default_value_t = 512)]
    pub min_blob_size: u64,

    /// cleave only: key-value separation (values of at least
    /// --min_blob_size bytes in value files). false keeps every value in
    /// the sstables, for comparison; the other engines are unaffected.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub value_separation: bool,

    /// cleave only (db_bench's flag): keep the separated values reads fetch
    /// in the --cache_size block cache, sharing its budget (db_bench's
    /// --use_shared_block_and_blob_cache). Off by default, as db_bench runs
    /// BlobDB; the rocksdb 0.20 bindings cannot give BlobDB a blob cache.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub use_blob_cache: bool,

    /// cleave only: background garbage collection of value files. false
    /// leaves every value file's garbage on disk, for comparison; BlobDB's
    /// blob GC is part of its compactions and is unaffected.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub gc: bool,

    /// cleave only: the share of garbage bytes at which a value file is
    /// collected (cleave's gc_garbage_ratio), in (0, 1].
    #[arg(long, default_value_t = 0.2)]
    pub gc_garbage_ratio: f64,

    /// cleave only: bytes of the DropCache, the recently overwritten keys
    /// whose new values flushes write to hot value files (cleave's
    /// drop_cache_capacity); 0 turns hot/cold separation off.
    #[arg(long, default_value_t = 4 << 20)]
    pub drop_cache_size: u64,

    /// cleave only: the disk space cleave aims to stay within
    /// (space_budget_bytes; 0: none). GC grows aggressive above 75% of it
    /// and writes wait above it.
    #[arg(long, default_value_t = 0)]
    pub space_budget_bytes: u64,

    /// cleave only: share the background threads between compaction and
    /// GC by the space pressure of each side (dynamic_gc_threads); false is
    /// a static split with at most half the threads for GC.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub dynamic_gc_threads: bool,

    /// cleave only: GC's bandwidth limiter with foreground feedback
    /// (gc_rate_limiter); false lets GC run at full speed.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub gc_rate_limiter: bool,

    /// cleave only: the device's write bandwidth in bytes/s the rate
    /// limiter compares against (device_write_bandwidth; 0: learned).
    #[arg(long, default_value_t = 0)]
    pub device_write_bandwidth: u64,

    /// cleave only: GC reads runs of live records at once, through gaps
    /// of up to 16 KiB of dead ones (gc_coalesced_reads); false reads each
    /// record alone.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub gc_coalesced_reads: bool,

    /// cleave only: level sizes count the value bytes sstables reference
    /// (compensated_size); false counts sstable bytes only.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub compensated_size: bool,

    /// cleave only: correlated compaction, compactions re-separating the
    /// values of value files referenced beyond --max_value_file_refs or
    /// high in garbage (cleave's correlated_compaction). false: compaction
    /// never rewrites a value, to measure what it brings.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub correlated_compaction: bool,

    /// cleave only (db_bench's flag, a bool here): flushes, compactions and
    /// GC cache the index, filter and record index blocks they write, and
    /// flushes their data blocks (cleave's prepopulate_block_cache). The
    /// rocksdb 0.20 bindings cannot set RocksDB's, which stays off.
    #[arg(long, default_value = "true", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub prepopulate_block_cache: bool,

    /// cleave only: the most value files one sstable a compaction writes
    /// may reference (cleave's max_value_file_refs), at least 1.
    #[arg(long, default_value_t = 256)]
    pub max_value_file_refs: u64,

    /// cleave only: a last-level sstable whose values lie in more logical
    /// value files than this is rewritten, its values in key order, once
    /// writes have paused --range_merge_idle_ms (cleave's
    /// range_merge_sorted_runs; Titan's max_sorted_runs). 0: off.
    #[arg(long, default_value_t = 8)]
    pub range_merge_sorted_runs: u64,

    /// cleave only: milliseconds without a write before range merges start
    /// (cleave's range_merge_idle).
    #[arg(long, default_value_t = 1000)]
    pub range_merge_idle_ms: u64,

    /// logappend: logical logs, spread over the threads (each log has one
    /// writer, its LSNs increasing).
    #[arg(long, default_value_t = 100)]
    pub logs: u32,

    /// logappend: records each log keeps; older ones are trimmed (a range
    /// delete on the key-value engines).
    #[arg(long, default_value_t = 1000)]
    pub log_window: u64,

    /// logappend: a log is trimmed once per this many of its appends.
    #[arg(long, default_value_t = 100)]
    pub log_trim_every: u64,

    /// logstore only: capacity of a physical data log in bytes.
    #[arg(long, default_value_t = 256 << 20)]
    pub log_file_bytes: u64,

    /// logstore only: physical logs are written once before use, so that
    /// synced appends change neither their size nor their allocation.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub log_preallocate: bool,

    /// cleave only: WAL-time separation (BVLSM). A value of at least this
    /// many bytes goes to a value log when written, and the WAL and
    /// memtable carry its handle (cleave's big_value_threshold, whose
    /// default this is). 0: off.
    #[arg(long, default_value_t = 32 << 10)]
    pub big_value_threshold: u64,

    /// cleave only: value logs written at once (cleave's value_log_count).
    #[arg(long, default_value_t = 4)]
    pub value_log_count: u64,

    /// cleave only: bytes of the values just written to value logs that
    /// reads take from memory (cleave's recent_value_cache_bytes).
    #[arg(long, default_value_t = 64 << 20)]
    pub recent_value_cache_size: u64,

    /// cleave only: key-delta separation (KDSep), merge operands kept in
    /// a delta store of buckets instead of the LSM-tree.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub enable_delta_separation: bool,

    /// cleave only: bytes of chunks a delta bucket holds before garbage
    /// collection (KDSep's bucket capacity).
    #[arg(long, default_value_t = 256 << 10)]
    pub delta_bucket_capacity: u64,

    /// cleave only: the most buckets the delta store keeps.
    #[arg(long, default_value_t = 4096)]
    pub delta_max_buckets: u64,

    /// Concurrent benchmark threads. As in db_bench, every thread does the
    /// full --num / --reads / --writes count and the report is the total.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// Keep the database in --db instead of wiping it first.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub use_existing_db: bool,

    /// The database directory (db_bench's default is under /tmp; ours is
    /// ./bench-data, which .gitignore covers).
    #[arg(long, default_value = "./bench-data")]
    pub db: PathBuf,

    #[arg(long, value_enum, default_value = "snappy", ignore_case = true)]
    pub compression_type: CompressionType,

    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: u64,

    #[arg(long, default_value_t = 2)]
    pub max_write_buffer_number: u32,

    #[arg(long, default_value_t = 64 << 20)]
    pub target_file_size_base: u64,

    #[arg(long, default_value_t = 256 << 20)]
    pub max_bytes_for_level_base: u64,

    #[arg(long, default_value_t = 2)]
    pub max_background_jobs: u32,

    #[arg(long, default_value_t = 10.0)]
    pub max_bytes_for_level_multiplier: f64,

    /// db_bench 7.8 defaults to false; pass it explicitly when comparing,
    /// since cleave's own default is true.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub level_compaction_dynamic_level_bytes: bool,

    #[arg(long, default_value_t = 4)]
    pub level0_file_num_compaction_trigger: u32,

    #[arg(long, default_value_t = 20)]
    pub level0_slowdown_writes_trigger: u32,

    #[arg(long, default_value_t = 36)]
    pub level0_stop_writes_trigger: u32,

    /// Uncompressed bytes per sstable data block.
    #[arg(long, default_value_t = 4096)]
    pub block_size: u64,

    /// Block cache capacity in bytes.
    #[arg(long, default_value_t = 8 << 20)]
    pub cache_size: u64,

    /// Bloom filter bits per key; negative means the engine's default and 0
    /// disables the filter. Note that db_bench's default (-1) means no
    /// filter for RocksDB, so pass --bloom_bits=10 when comparing.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub bloom_bits: i32,

    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub sync: bool,

    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub disable_wal: bool,

    /// Obsolete WALs kept to be written over by later ones: cleave's
    /// `recycle_wal`, RocksDB's `recycle_log_file_num` (0: none).
    #[arg(long, default_value_t = 0)]
    pub recycle_wal: usize,

    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub use_direct_reads: bool,

    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub use_direct_io_for_flush_and_compaction: bool,

    /// Print db_bench's latency summary (Count/Min/Percentiles) after each
    /// benchmark.
    #[arg(long, default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_bool)]
    pub histogram: bool,

    /// Seed base for the key generators; 0 derives one from the clock.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Entries per write batch for the fill and overwrite benchmarks, and
    /// keys per `MultiGet` of multireadrandom (as in db_bench).
    #[arg(long, default_value_t = 1)]
    pub batch_size: u64,

    /// cleave-bench's own: keys per `MultiGet` of multireadrandom, so that
    /// one run can batch its reads but not its writes (0: --batch_size).
    #[arg(long, default_value_t = 0)]
    pub multiread_batch_size: u64,

    /// Values shrink to about this fraction of their size when compressed.
    #[arg(long, default_value_t = 0.5)]
    pub compression_ratio: f64,

    /// Iterator Next() calls after each Seek() in seekrandom.
    #[arg(long, default_value_t = 0)]
    pub seek_nexts: u64,

    /// Also write the results as a JSON array to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl Flags {
    /// Parses the process's arguments, db_bench style.
    pub fn from_env() -> Self {
        Self::parse_from(normalize_args(std::env::args()))
    }

    /// Reads per thread, resolved as db_bench does (negative means --num).
    pub fn reads_per_thread(&self) -> u64 {
        u64::try_from(self.reads).unwrap_or(self.num)
    }

    /// Operations per thread of updaterandom, readrandomwriterandom,
    /// mergerandom and readrandommergerandom, as db_bench counts them:
    /// --num when neither --reads nor --writes is given, else the larger.
    pub fn readwrites_per_thread(&self) -> u64 {
        if self.reads < 0 && self.writes < 0 {
            self.num
        } else {
            u64::try_from(self.reads.max(self.writes)).unwrap_or(self.num)
        }
    }

    /// Keys mergerandom and readrandommergerandom touch (negative means
    /// --num).
    pub fn merge_key_space(&self) -> u64 {
        u64::try_from(self.merge_keys).unwrap_or(self.num)
    }

    /// The merge operator and its operands' shape.
    pub fn merge_shape(&self) -> MergeShape {
        MergeShape {
            kind: self.merge_operator,
            fields: self.ycsb_field_count,
            field_len: self.ycsb_field_length,
            get_put: self.merge_as_get_put,
        }
    }

    /// Seeks per thread for seekrandom (negative means --reads).
    pub fn seeks_per_thread(&self) -> u64 {
        u64::try_from(self.seeks).unwrap_or_else(|_| self.reads_per_thread())
    }

    /// YCSB run-phase operations in all.
    pub fn ycsb_operations(&self) -> u64 {
        if self.ycsb_operation_count == 0 {
            self.num
        } else {
            self.ycsb_operation_count
        }
    }

    /// The engines of `--engine`, in order.
    pub fn engine_names(&self) -> Vec<String> {
        split_list(&self.engine)
    }

    /// Writes per thread for the fill and overwrite benchmarks, resolved as
    /// db_bench's `DoWrite` does (zero or negative means --num).
    pub fn writes_per_thread(&self) -> u64 {
        match u64::try_from(self.writes) {
            Ok(writes) if writes > 0 => writes,
            _ => self.num,
        }
    }

    /// Rejects values that would make a benchmark meaningless or divide by
    /// zero, with a message naming the flag.
    pub fn validate(&self) -> Result<()> {
        if self.threads == 0 {
            bail!("--threads must be at least 1");
        }
        if self.log_window == 0 || self.log_trim_every == 0 {
            bail!("--log_window and --log_trim_every must be at least 1");
        }
        if self.num == 0 {
            // Random keys are drawn from [0, num).
            bail!("--num must be at least 1");
        }
        if self.key_size == 0 {
            bail!("--key_size must be at least 1");
        }
        if self.key_size_distribution == KeySizeDistribution::Up2x
            && self.num.max(self.merge_key_space()) > 1 << (8 * UP2X_KEY_MIN_BYTES)
        {
            bail!(
                "--key_size_distribution=up2x makes keys as short as {UP2X_KEY_MIN_BYTES} bytes, \
                 too few for --num or --merge_keys past 2^{}",
                8 * UP2X_KEY_MIN_BYTES
            );
        }
        if self.batch_size == 0 {
            bail!("--batch_size must be at least 1");
        }
        if !(self.compression_ratio > 0.0 && self.compression_ratio <= 1.0) {
            bail!("--compression_ratio must be in (0, 1]");
        }
        if !(self.zipf_theta > 0.0 && self.zipf_theta < 1.0) {
            bail!("--zipf_theta must be in (0, 1)");
        }
        if self.readwritepercent > 100 {
            bail!("--readwritepercent must be at most 100");
        }
        if self.mergereadpercent > 100 {
            bail!("--mergereadpercent must be at most 100");
        }
        if self.ttl_seconds > 0 && self.merge_operator != MergeKind::None {
            // cleave merges an operand onto nothing once its base expired,
            // DBWithTTL stamps each operand: no common meaning to compare.
            bail!("--ttl_seconds applies to puts; run it without --merge_operator");
        }
        if self.merge_as_get_put && self.merge_operator == MergeKind::None {
            bail!("--merge_as_get_put needs a --merge_operator to apply");
        }
        if self.merge_keys == 0 {
            bail!("--merge_keys must be positive (or negative for --num)");
        }
        if self.merge_operator == MergeKind::Fieldupdate
            && (self.ycsb_field_count > 1 << 16
                || self
                    .ycsb_field_count
                    .checked_mul(self.ycsb_field_length)
                    .is_none_or(|bytes| bytes > 1 << 30))
        {
            bail!(
                "--merge_operator=fieldupdate takes at most 65536 fields \
                 (--ycsb_field_count) and 1 GiB of value"
            );
        }
        let limit = self.space_limit_ratio;
        if limit != 0.0 && (limit.is_nan() || limit < 1.0) {
            bail!("--space_limit_ratio must be 0 (off) or at least 1");
        }
        if self.ycsb_field_count == 0 || self.ycsb_field_length == 0 {
            bail!("--ycsb_field_count and --ycsb_field_length must be at least 1");
        }
        if self.ycsb_max_scan_length == 0 {
            bail!("--ycsb_max_scan_length must be at least 1");
        }
        if !self.value_separation && self.use_blob_cache {
            // Without separation cleave has no separated values to cache.
            bail!("--use_blob_cache needs --value_separation=true");
        }
        if !(self.gc_garbage_ratio > 0.0 && self.gc_garbage_ratio <= 1.0) {
            bail!("--gc_garbage_ratio must be in (0, 1]");
        }
        if self.max_value_file_refs == 0 {
            bail!("--max_value_file_refs must be at least 1");
        }
        if self.engine_names().is_empty() {
            bail!("--engine names no engine");
        }
        if self.use_existing_db && self.engine_names().len() > 1 {
            // Each engine would open the files the first one left.
            bail!("--use_existing_db takes one --engine, not a list");
        }
        if self.use_existing_db && self.space_limit_ratio != 0.0 {
            // The limit is relative to the live data, which the harness knows
            // only for a database it wrote itself.
            bail!("--space_limit_ratio needs a database the run creates, not --use_existing_db");
        }
        Ok(())
    }

    /// The benchmark names in order, empty entries skipped (db_bench allows
    /// a trailing comma).
    pub fn benchmark_names(&self) -> Vec<String> {
        split_list(&self.benchmarks)
    }
}

fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// gflags booleans: `1/0`, `true/false`, `yes/no`, `t/f`, `y/n`.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        other => Err(format!(
            "expected a boolean (1/0/true/false), got {other:?}"
        )),
    }
}

/// Turns gflags' single-dash long flags (`-num=10`) into clap's `--num=10`.
/// The program name (first argument) and values after `--` are kept as is.
pub fn normalize_args<I: IntoIterator<Item = String>>(args: I) -> Vec<String> {
    let mut seen_separator = false;
    args.into_iter()
        .enumerate()
        .map(|(index, arg)| {
            if index == 0 || seen_separator {
                return arg;
            }
            if arg == "--" {
                seen_separator = true;
                return arg;
            }
            let single_dash_long = arg.starts_with('-')
                && !arg.starts_with("--")
                && arg.len() > 2
                && arg[1..].starts_with(|c: char| c.is_ascii_alphabetic());
            if single_dash_long {
                format!("-{arg}")
            } else {
                arg
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Flags {
        let args = std::iter::once("cleave-bench")
            .chain(args.iter().copied())
            .map(str::to_owned);
        Flags::try_parse_from(normalize_args(args)).expect("flags parse")
    }

    #[test]
    fn defaults_match_db_bench() {
        let flags = parse(&[]);
        assert_eq!(flags.num, 1_000_000);
        assert_eq!(flags.key_size, 16);
        assert_eq!(flags.value_size, 100);
        assert_eq!(flags.cache_size, 8 * 1024 * 1024);
        assert_eq!(flags.write_buffer_size, 64 * 1024 * 1024);
        assert_eq!(flags.max_bytes_for_level_base, 256 * 1024 * 1024);
        assert_eq!(flags.bloom_bits, -1);
        assert_eq!(flags.compression_type, CompressionType::Snappy);
        assert_eq!(flags.db, PathBuf::from("./bench-data"));
        assert_eq!(flags.reads_per_thread(), 1_000_000);
        assert_eq!(flags.writes_per_thread(), 1_000_000);
        assert!(!flags.histogram);
    }

    #[test]
    fn gflags_spellings_parse() {
        let flags = parse(&[
            "--histogram",
            "-num=20000",
            "--use_existing_db=1",
            "--sync=false",
            "--disable_wal=true",
            "--compression_type=none",
            "--reads=5",
            "--bloom_bits=-1",
            "--value_size=1024",
        ]);
        assert!(flags.histogram);
        assert_eq!(flags.num, 20_000);
        assert!(flags.use_existing_db);
        assert!(!flags.sync);
        assert!(flags.disable_wal);
        assert_eq!(flags.compression_type, CompressionType::None);
        assert_eq!(flags.reads_per_thread(), 5);
        assert_eq!(flags.writes_per_thread(), 20_000);
        assert_eq!(flags.value_size, 1024);
        assert_eq!(parse(&["--writes=0"]).writes_per_thread(), 1_000_000);
        assert_eq!(parse(&["--writes=9"]).writes_per_thread(), 9);
        assert_eq!(parse(&["--reads=0"]).reads_per_thread(), 0);
    }

    #[test]
    fn bare_bool_does_not_swallow_next_flag() {
        let flags = parse(&["--histogram", "--num=7"]);
        assert!(flags.histogram);
        assert_eq!(flags.num, 7);
    }

    #[test]
    fn bad_values_are_errors() {
        let args = ["cleave-bench", "--histogram=maybe"].map(str::to_owned);
        assert!(Flags::try_parse_from(args).is_err());
        let args = ["cleave-bench", "--compression_type=brotli"].map(str::to_owned);
        assert!(Flags::try_parse_from(args).is_err());
        assert!(parse(&["--threads=0"]).validate().is_err());
        assert!(parse(&["--batch_size=0"]).validate().is_err());
    }

    #[test]
    fn benchmark_list_skips_empty_entries() {
        let flags = parse(&["--benchmarks=fillseq,,readrandom,"]);
        assert_eq!(flags.benchmark_names(), vec!["fillseq", "readrandom"]);
    }

    #[test]
    fn workload_flags_parse_and_resolve() {
        let flags = parse(&[
            "--engine=cleave,rocksdb,blobdb",
            "--key_distribution=zipfian",
            "--value_size_distribution=mixed-8k",
            "--reads=7",
            "--ycsb_operation_count=0",
            "--num=50",
        ]);
        assert_eq!(flags.engine_names(), vec!["cleave", "rocksdb", "blobdb"]);
        assert_eq!(flags.key_distribution, KeyDistribution::Zipfian);
        assert_eq!(flags.read_key_distribution, None);
        assert_eq!(
            flags.value_size_distribution,
            ValueSizeDistribution::Mixed8k
        );
        assert_eq!(flags.seeks_per_thread(), 7);
        assert_eq!(parse(&["--seeks=3"]).seeks_per_thread(), 3);
        assert_eq!(flags.readwrites_per_thread(), 7);
        assert_eq!(parse(&[]).readwrites_per_thread(), 1_000_000);
        assert_eq!(parse(&["--writes=9"]).readwrites_per_thread(), 9);
        assert_eq!(
            parse(&["--writes=9", "--reads=4"]).readwrites_per_thread(),
            9
        );
        assert_eq!(flags.ycsb_operations(), 50);
        assert_eq!(flags.zipf_theta, 0.99);
        assert!(flags.validate().is_ok());
        for bad in [
            "--zipf_theta=1.0",
            "--readwritepercent=101",
            "--space_limit_ratio=0.5",
            "--engine=,",
            "--ycsb_field_count=0",
        ] {
            assert!(parse(&[bad]).validate().is_err(), "{bad} accepted");
        }
        for bad in [
            ["--use_existing_db", "--engine=cleave,rocksdb"],
            ["--use_existing_db", "--space_limit_ratio=2"],
        ] {
            assert!(parse(&bad).validate().is_err(), "{bad:?} accepted");
        }
        assert!(parse(&["--space_limit_ratio=1.5"]).validate().is_ok());
    }

    #[test]
    fn up2x_sizes_parse_and_refuse_key_counts_they_cannot_keep_unique() {
        let up2x = [
            "--key_size_distribution=up2x",
            "--value_size_distribution=up2x",
        ];
        let flags = parse(&up2x);
        assert_eq!(flags.key_size_distribution, KeySizeDistribution::Up2x);
        assert_eq!(flags.value_size_distribution, ValueSizeDistribution::Up2x);
        assert!(flags.validate().is_ok());
        let limit = format!("--num={}", 1u64 << (8 * UP2X_KEY_MIN_BYTES));
        assert!(parse(&[up2x[0], &limit]).validate().is_ok());
        let past = format!("--num={}", (1u64 << (8 * UP2X_KEY_MIN_BYTES)) + 1);
        let error = parse(&[up2x[0], &past]).validate().unwrap_err().to_string();
        assert!(error.contains("--key_size_distribution=up2x"), "{error}");
        assert!(parse(&[&past]).validate().is_ok());
    }

    #[test]
    fn value_separation_flags_parse_and_validate() {
        let flags = parse(&[]);
        assert!(flags.value_separation);
        assert!(!flags.use_blob_cache);
        assert_eq!(flags.min_blob_size, 512);
        assert!(flags.validate().is_ok());

        let flags = parse(&[
            "--value_separation=false",
            "--min_blob_size=4096",
            "-use_blob_cache=false",
        ]);
        assert!(!flags.value_separation);
        assert_eq!(flags.min_blob_size, 4096);
        assert!(flags.validate().is_ok());
        assert!(!parse(&["--value_separation=0"]).value_separation);
        // A bare boolean flag is true and leaves the next flag alone.
        let flags = parse(&["--value_separation", "--use_blob_cache"]);
        assert!(flags.value_separation);
        assert!(flags.use_blob_cache);
        assert!(flags.validate().is_ok());

        // A value cache with nothing to cache.
        let error = parse(&["--value_separation=false", "--use_blob_cache=true"])
            .validate()
            .err()
            .map(|e| e.to_string());
        assert!(error.is_some_and(|message| message.contains("--use_blob_cache")));
        for bad in ["--value_separation=maybe", "--use_blob_cache=2"] {
            let args = ["cleave-bench", bad].map(str::to_owned);
            assert!(Flags::try_parse_from(args).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn gc_flags_parse_and_validate() {
        let flags = parse(&[]);
        assert!(flags.gc);
        assert_eq!(flags.gc_garbage_ratio, 0.2);
        assert_eq!(flags.drop_cache_size, 4 << 20);
        assert!(flags.validate().is_ok());
        assert_eq!(parse(&["--drop_cache_size=0"]).drop_cache_size, 0);

        let flags = parse(&["--gc=false", "-gc_garbage_ratio=0.5"]);
        assert!(!flags.gc);
        assert_eq!(flags.gc_garbage_ratio, 0.5);
        assert!(flags.validate().is_ok());
        assert!(!parse(&["--gc=0"]).gc);
        // A bare boolean flag is true and leaves the next flag alone.
        let flags = parse(&["--gc", "--gc_garbage_ratio=1"]);
        assert!(flags.gc);
        assert_eq!(flags.gc_garbage_ratio, 1.0);
        assert!(flags.validate().is_ok());

        for bad in ["0", "-0.1", "1.01", "NaN"] {
            let error = parse(&[&format!("--gc_garbage_ratio={bad}")])
                .validate()
                .err()
                .map(|e| e.to_string());
            assert!(
                error.is_some_and(|message| message.contains("--gc_garbage_ratio")),
                "{bad} accepted"
            );
        }
        for bad in ["--gc=maybe", "--gc_garbage_ratio=lots"] {
            let args = ["cleave-bench", bad].map(str::to_owned);
            assert!(Flags::try_parse_from(args).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn scheduler_flags_parse() {
        let flags = parse(&[]);
        assert_eq!(flags.space_budget_bytes, 0);
        assert_eq!(flags.device_write_bandwidth, 0);
        assert!(flags.dynamic_gc_threads && flags.gc_rate_limiter);
        assert!(flags.gc_coalesced_reads && flags.compensated_size);
        let flags = parse(&[
            "--space_budget_bytes=3000000000",
            "--dynamic_gc_threads=false",
            "--gc_rate_limiter=false",
            "--device_write_bandwidth=500000000",
            "--gc_coalesced_reads=false",
            "--compensated_size=false",
        ]);
        assert_eq!(flags.space_budget_bytes, 3_000_000_000);
        assert_eq!(flags.device_write_bandwidth, 500_000_000);
        assert!(!flags.dynamic_gc_threads && !flags.gc_rate_limiter);
        assert!(!flags.gc_coalesced_reads && !flags.compensated_size);
        let config = crate::engines::EngineConfig::from_flags(&flags);
        assert!(config
            .describe()
            .contains("space_budget_bytes 3000000000 (cleave) | dynamic_gc_threads false"));
    }

    #[test]
    fn correlated_compaction_flags_parse_and_validate() {
        let flags = parse(&[]);
        assert!(flags.correlated_compaction);
        assert_eq!(flags.max_value_file_refs, 256);
        assert!(flags.validate().is_ok());

        assert_eq!(flags.range_merge_sorted_runs, 8);
        assert_eq!(flags.range_merge_idle_ms, 1000);
        let flags = parse(&["--range_merge_sorted_runs=0", "--range_merge_idle_ms=5"]);
        assert_eq!(flags.range_merge_sorted_runs, 0);
        assert_eq!(flags.range_merge_idle_ms, 5);
        assert_eq!(
            flags.big_value_threshold,
            cleave::Options::default().big_value_threshold as u64
        );
        let flags = parse(&[
            "--big_value_threshold=16384",
            "--value_log_count=2",
            "--recent_value_cache_size=0",
        ]);
        assert_eq!(flags.big_value_threshold, 16384);
        assert_eq!(flags.value_log_count, 2);
        assert_eq!(flags.recent_value_cache_size, 0);
        let flags = parse(&["--correlated_compaction=false", "--max_value_file_refs=8"]);
        assert!(!flags.correlated_compaction);
        assert_eq!(flags.max_value_file_refs, 8);
        assert!(flags.validate().is_ok());
        // A bare boolean flag is true and leaves the next flag alone.
        let flags = parse(&["--correlated_compaction", "--max_value_file_refs=1"]);
        assert!(flags.correlated_compaction);
        assert_eq!(flags.max_value_file_refs, 1);
        assert!(flags.validate().is_ok());

        let error = parse(&["--max_value_file_refs=0"])
            .validate()
            .err()
            .map(|e| e.to_string());
        assert!(error.is_some_and(|message| message.contains("--max_value_file_refs")));
        for bad in ["--correlated_compaction=maybe", "--max_value_file_refs=-1"] {
            let args = ["cleave-bench", bad].map(str::to_owned);
            assert!(Flags::try_parse_from(args).is_err(), "{bad} accepted");
        }
    }
}
