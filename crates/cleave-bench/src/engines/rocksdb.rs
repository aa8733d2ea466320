//! The RocksDB and BlobDB adapters, through the `rocksdb` crate linked
//! against the system librocksdb (the library Debian's `db_bench` uses).
//!
//! Every `EngineConfig` field is mapped the way db_bench 7.8 maps the flag
//! of the same name, so that a cleave-bench run and a db_bench run with one
//! command line configure the same engine. `scripts/crosscheck_db_bench.sh`
//! checks that, by throughput and by diffing the OPTIONS files the two runs
//! leave in their database directories.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs;
use std::os::raw::c_int;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ::rocksdb::perf::{set_perf_stats, PerfStatsLevel};
use ::rocksdb::{
    BlockBasedOptions, BottommostLevelCompaction, Cache, CompactOptions, DBCompressionType,
    MergeOperands, Options, ReadOptions, WriteBatch, WriteOptions, DB,
};
use anyhow::{anyhow, bail, Context, Result};
use cleave::MergeOperator;

use super::{Engine, EngineConfig, EngineCounters, ScanOutcome};
use crate::flags::CompressionType;

/// BlobDB's garbage-collection settings in the benchmarks we compare with
/// (docs/BENCHMARKS.md): blobs in the oldest quarter of blob files are
/// relocated when compaction meets them.
const BLOB_GARBAGE_COLLECTION_AGE_CUTOFF: f64 = 0.25;

/// db_bench's defaults for flags the driver does not have, where they
/// differ from RocksDB's own defaults (found by diffing the OPTIONS files of
/// a db_bench run and an adapter run).
const DB_BENCH_TABLE_CACHE_NUM_SHARD_BITS: c_int = 4;
const DB_BENCH_HARD_PENDING_COMPACTION_BYTES_LIMIT: usize = 128 << 30;

/// What db_bench sets that RocksDB's C API 7.8 cannot, so every run differs
/// from db_bench there. delayed_write_rate matters only while writes are
/// being slowed down; the others not at all for these benchmarks.
const UNMAPPABLE_DB_BENCH_DEFAULTS: &str = "db_bench sets what the C API cannot: \
     delayed_write_rate 8 MiB/s (16 MiB/s here), \
     index_shortening kShortenSeparatorsAndSuccessor (kShortenSeparators here), \
     LRU high_pri_pool_ratio 0 (0.5 here, unused without cache_index_and_filter_blocks), \
     FIFO compaction options (unused by leveled compaction), its ErrorHandlerListener";

/// The properties db_bench's `waitforcompaction` polls, in its order; all
/// zero means nothing is pending or running.
const BUSY_PROPERTIES: [&str; 4] = [
    "rocksdb.mem-table-flush-pending",
    "rocksdb.num-running-flushes",
    "rocksdb.compaction-pending",
    "rocksdb.num-running-compactions",
];

/// How long `wait_for_compactions` sleeps between polls. db_bench sleeps 10
/// s, which would dominate a short benchmark and the time it reports.
const BUSY_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Statistics tickers behind `EngineCounters`, as named by RocksDB 7.8.
const TICKER_USER_BYTES: &str = "rocksdb.bytes.written";
const TICKER_WAL_BYTES: &str = "rocksdb.wal.bytes";
const TICKER_FLUSH_BYTES: &str = "rocksdb.flush.write.bytes";
const TICKER_COMPACTION_READ_BYTES: &str = "rocksdb.compact.read.bytes";
const TICKER_COMPACTION_WRITE_BYTES: &str = "rocksdb.compact.write.bytes";
/// Integrated BlobDB's `BlobLogWriter` counts its writes here too, under
/// the stacked BlobDB's old name.
const TICKER_BLOB_FILE_BYTES: &str = "rocksdb.blobdb.blob.file.bytes.written";
const TICKER_STALL_MICROS: &str = "rocksdb.stall.micros";
/// Integrated BlobDB's `BlobFileReader` counts every blob it reads here,
/// for gets and for compactions alike.
const TICKER_BLOB_FILE_BYTES_READ: &str = "rocksdb.blobdb.blob.file.bytes.read";

thread_local! {
    /// Whether this thread has turned RocksDB's perf counters off.
    static PERF_COUNTERS_OFF: Cell<bool> = const { Cell::new(false) };
}

/// RocksDB's perf level is per thread and starts at kEnableCount, which
/// bumps a thread-local PerfContext counter on every key comparison (a
/// `__tls_get_addr` call each, from a shared library): 10% of fillrandom's
/// foreground CPU here. db_bench sets its --perf_level default, kDisable, in
/// each benchmark thread; the driver's threads are not ours to set up, so
/// each foreground call does it on its thread's first call.
fn perf_counters_off_on_this_thread() {
    PERF_COUNTERS_OFF.with(|off| {
        if !off.get() {
            set_perf_stats(PerfStatsLevel::Disable);
            off.set(true);
        }
    });
}

/// Which RocksDB configuration to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Plain RocksDB: values stay in the sstables.
    Plain,
    /// Integrated BlobDB: values of at least `min_blob_size` bytes go to
    /// blob files, with garbage collection on.
    Blob,
}

pub struct RocksDbEngine {
    flavor: Flavor,
    db: DB,
    /// Owns the statistics object the database reports to.
    options: Options,
    write_options: WriteOptions,
    /// Shared by every get; iterators take theirs by value, so each scan
    /// builds its own.
    read_options: ReadOptions,
    notes: Vec<String>,
}

/// Converts a flag value to the C `int` RocksDB's C API takes, naming the
/// flag when it does not fit.
fn c_int_value(value: u32, flag: &str) -> Result<c_int> {
    c_int::try_from(value).map_err(|_| anyhow!("--{flag}={value} does not fit RocksDB's int"))
}

fn usize_value(value: u64, flag: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| anyhow!("--{flag}={value} does not fit RocksDB's size_t"))
}

fn compression_type(compression: CompressionType) -> DBCompressionType {
    match compression {
        CompressionType::None => DBCompressionType::None,
        CompressionType::Snappy => DBCompressionType::Snappy,
        CompressionType::Lz4 => DBCompressionType::Lz4,
        CompressionType::Zstd => DBCompressionType::Zstd,
    }
}

/// The table options db_bench builds in `InitializeOptionsFromFlags` and
/// `InitializeOptionsGeneral`.
fn table_options(config: &EngineConfig) -> Result<BlockBasedOptions> {
    let mut table = BlockBasedOptions::default();
    table.set_block_size(usize_value(config.block_size, "block_size")?);
    if config.cache_size > 0 {
        // db_bench's LRU cache differs only in high_pri_pool_ratio (0 there,
        // 0.5 here), which matters only for blocks inserted at high
        // priority: index and filter blocks with
        // cache_index_and_filter_blocks, off in both.
        let cache = Cache::new_lru_cache(usize_value(config.cache_size, "cache_size")?)
            .context("creating the block cache")?;
        table.set_block_cache(&cache);
    } else {
        // db_bench's NewCache returns no cache for a size of 0, and the
        // table then runs with no_block_cache.
        table.disable_cache();
    }
    match config.bloom_bits_per_key {
        // db_bench's -1 keeps BlockBasedTableOptions' default: no filter.
        None | Some(0) => {}
        // NewBloomFilterPolicy(bits), as db_bench without --use_ribbon_filter;
        // `block_based = false` is the full filter it builds.
        Some(bits) => table.set_bloom_filter(f64::from(bits), false),
    }
    // db_bench's --pin_top_level_index_and_filter defaults to false.
    table.set_pin_top_level_index_and_filter(false);
    Ok(table)
}

/// Merges through RocksDB's merge-operator callbacks with cleave's operator
/// of the same name, so that both engines compute alike: a full merge that
/// fails is RocksDB's merge failure (a corruption error on read), and a
/// partial merge of a run succeeds only if every adjacent pair combines.
fn set_merge_operator(options: &mut Options, op: Arc<dyn MergeOperator>) {
    let full = op.clone();
    let partial = op.clone();
    options.set_merge_operator(
        op.name(),
        move |key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands| {
            let operands: Vec<&[u8]> = operands.iter().collect();
            full.full_merge(key, existing, &operands).ok()
        },
        move |key: &[u8], _: Option<&[u8]>, operands: &MergeOperands| {
            let mut operands = operands.iter();
            let first = operands.next()?.to_vec();
            operands.try_fold(first, |older, newer| {
                partial.partial_merge(key, &older, newer)
            })
        },
    );
}

/// The database options db_bench sets from the same-named flags.
fn database_options(config: &EngineConfig, flavor: Flavor) -> Result<Options> {
    let mut options = Options::default();
    // db_bench's InitializeOptionsGeneral sets both unconditionally.
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    options.enable_statistics();
    db_bench_defaults(&mut options);
    if let Some(op) = config.merge.operator() {
        set_merge_operator(&mut options, op);
    }

    options.set_write_buffer_size(usize_value(config.write_buffer_size, "write_buffer_size")?);
    options.set_max_write_buffer_number(c_int_value(
        config.max_write_buffer_number,
        "max_write_buffer_number",
    )?);
    options.set_max_background_jobs(c_int_value(
        config.max_background_jobs,
        "max_background_jobs",
    )?);
    options.set_use_direct_reads(config.use_direct_reads);
    options.set_recycle_log_file_num(config.recycle_wal);
    options
        .set_use_direct_io_for_flush_and_compaction(config.use_direct_io_for_flush_and_compaction);
    options.set_target_file_size_base(config.target_file_size_base);
    options.set_max_bytes_for_level_base(config.max_bytes_for_level_base);
    options.set_level_compaction_dynamic_level_bytes(config.level_compaction_dynamic_level_bytes);
    options.set_max_bytes_for_level_multiplier(config.max_bytes_for_level_multiplier);
    options.set_block_based_table_factory(&table_options(config)?);
    options.set_level_zero_stop_writes_trigger(c_int_value(
        config.level0_stop_writes_trigger,
        "level0_stop_writes_trigger",
    )?);
    options.set_level_zero_file_num_compaction_trigger(c_int_value(
        config.level0_file_num_compaction_trigger,
        "level0_file_num_compaction_trigger",
    )?);
    options.set_level_zero_slowdown_writes_trigger(c_int_value(
        config.level0_slowdown_writes_trigger,
        "level0_slowdown_writes_trigger",
    )?);
    let compression = compression_type(config.compression);
    options.set_compression_type(compression);

    if flavor == Flavor::Blob {
        options.set_enable_blob_files(true);
        options.set_min_blob_size(config.min_blob_size);
        // Not db_bench's 256 MiB default: at the few GiB we run, that makes
        // only a handful of blob files, and the age cutoff's "oldest
        // quarter" one or two of them. A db_bench BlobDB run needs
        // --blob_file_size=<target_file_size_base> to match.
        options.set_blob_file_size(config.target_file_size_base);
        options.set_blob_compression_type(compression);
        options.set_enable_blob_gc(true);
        options.set_blob_gc_age_cutoff(BLOB_GARBAGE_COLLECTION_AGE_CUTOFF);
    }
    Ok(options)
}

/// db_bench's defaults for options the driver has no flag for, where they
/// differ from RocksDB's, so that an adapter run is a db_bench run.
fn db_bench_defaults(options: &mut Options) {
    // --enable_pipelined_write=true: the WAL and memtable writes of
    // successive write groups overlap, which shows in write throughput.
    options.set_enable_pipelined_write(true);
    options.set_table_cache_num_shard_bits(DB_BENCH_TABLE_CACHE_NUM_SHARD_BITS);
    options.set_hard_pending_compaction_bytes_limit(DB_BENCH_HARD_PENDING_COMPACTION_BYTES_LIMIT);
    options.set_dump_malloc_stats(true);
}

/// The `rocksdb_version` line of the newest OPTIONS file in `path`, which
/// the library that opened the database wrote: proof of which librocksdb
/// was loaded at run time, whatever the headers said at build time.
fn library_version(path: &Path) -> Result<String> {
    let newest = fs::read_dir(path)
        .with_context(|| format!("listing {}", path.display()))?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let number = name.strip_prefix("OPTIONS-")?.parse::<u64>().ok()?;
            Some((number, entry.path()))
        })
        .max_by_key(|(number, _)| *number)
        .map(|(_, path)| path)
        .ok_or_else(|| anyhow!("no OPTIONS file in {}", path.display()))?;
    let text =
        fs::read_to_string(&newest).with_context(|| format!("reading {}", newest.display()))?;
    text.lines()
        .find_map(|line| line.trim().strip_prefix("rocksdb_version="))
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no rocksdb_version in {}", newest.display()))
}

/// The tickers of a `Statistics::ToString` text, by name. Ticker lines are
/// `<name> COUNT : <n>`; histogram lines (`<name> P50 : ...`) and anything
/// unparsable are skipped, so a format change loses counters, not the run.
fn parse_tickers(text: &str) -> HashMap<&str, u64> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            if words.next()? != "COUNT" || words.next()? != ":" {
                return None;
            }
            let count = words.next()?.parse::<u64>().ok()?;
            words.next().is_none().then_some((name, count))
        })
        .collect()
}

/// `EngineCounters` from parsed tickers; a missing ticker counts as 0, as
/// RocksDB prints every ticker it has, and one it lacks never moved.
fn counters_from_tickers(tickers: &HashMap<&str, u64>, flavor: Flavor) -> EngineCounters {
    let ticker = |name: &str| tickers.get(name).copied().unwrap_or(0);
    EngineCounters {
        user_bytes_written: ticker(TICKER_USER_BYTES),
        wal_bytes_written: ticker(TICKER_WAL_BYTES),
        flush_bytes_written: ticker(TICKER_FLUSH_BYTES),
        compaction_bytes_read: ticker(TICKER_COMPACTION_READ_BYTES),
        compaction_bytes_written: ticker(TICKER_COMPACTION_WRITE_BYTES),
        value_file_bytes_written: ticker(TICKER_BLOB_FILE_BYTES),
        // BlobDB's blob GC relocates blobs inside compactions: its bytes
        // are in the compaction tickers already.
        gc_bytes_read: 0,
        gc_bytes_written: 0,
        value_log_bytes_written: 0,
        stall_micros: ticker(TICKER_STALL_MICROS),
        flush_stall_micros: None,
        compaction_value_bytes_read: (flavor == Flavor::Blob)
            .then(|| ticker(TICKER_BLOB_FILE_BYTES_READ)),
        expired_value_bytes: None,
    }
}

impl RocksDbEngine {
    pub fn open(config: &EngineConfig, flavor: Flavor) -> Result<Self> {
        let options = database_options(config, flavor)?;
        // DBWithTTL appends the write time to each value and installs a
        // compaction filter that drops values older than the TTL; reads
        // strip the time but do not check it, so an expired value is
        // found until a compaction drops it.
        let db = match config.ttl {
            Some(ttl) => DB::open_with_ttl(&options, &config.path, ttl),
            None => DB::open(&options, &config.path),
        }
        .with_context(|| format!("opening RocksDB at {}", config.path.display()))?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(config.sync);
        write_options.disable_wal(config.disable_wal);
        let version = library_version(&config.path)?;
        let mut notes = vec![
            format!(
                "librocksdb {version} (from the OPTIONS file it wrote); statistics on, \
                 which db_bench has only with --statistics=1"
            ),
            UNMAPPABLE_DB_BENCH_DEFAULTS.to_owned(),
        ];
        if let Some(ttl) = config.ttl {
            notes.push(format!(
                "opened through DBWithTTL with a TTL of {} s: expired values are dropped by \
                 compaction only, and gets find them until then",
                ttl.as_secs()
            ));
        }
        if flavor == Flavor::Blob {
            notes.push(format!(
                "BlobDB: min_blob_size {}, blob_file_size {} (= target_file_size_base), \
                 blob compression {:?}, GC on with age cutoff {BLOB_GARBAGE_COLLECTION_AGE_CUTOFF}",
                config.min_blob_size, config.target_file_size_base, config.compression,
            ));
        }
        Ok(Self {
            flavor,
            db,
            options,
            write_options,
            read_options: ReadOptions::default(),
            notes,
        })
    }

    fn int_property(&self, name: &str) -> Result<u64> {
        self.db
            .property_int_value(name)
            .with_context(|| format!("reading RocksDB property {name}"))?
            .ok_or_else(|| anyhow!("RocksDB has no property {name}"))
    }

    /// Fails once a background flush or compaction has failed: the C API
    /// returns nothing from `CompactRange` and nothing from close, so this
    /// is where such errors surface.
    fn check_background_errors(&self) -> Result<()> {
        let errors = self.int_property("rocksdb.background-errors")?;
        if errors > 0 {
            bail!("RocksDB reports {errors} background errors (see LOG in the database directory)");
        }
        Ok(())
    }

    /// The first of db_bench's busy properties that is non-zero, if any.
    fn busy_property(&self) -> Result<Option<&'static str>> {
        for name in BUSY_PROPERTIES {
            if self.int_property(name)? > 0 {
                return Ok(Some(name));
            }
        }
        Ok(None)
    }
}

impl Engine for RocksDbEngine {
    fn name(&self) -> &'static str {
        match self.flavor {
            Flavor::Plain => "rocksdb",
            Flavor::Blob => "blobdb",
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        perf_counters_off_on_this_thread();
        self.db
            .put_opt(key, value, &self.write_options)
            .context("RocksDB put")
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        perf_counters_off_on_this_thread();
        let value = self
            .db
            .get_pinned_opt(key, &self.read_options)
            .context("RocksDB get")?;
        Ok(value.map(|value| value.to_vec()))
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        perf_counters_off_on_this_thread();
        self.db
            .multi_get_opt(keys, &self.read_options)
            .into_iter()
            .map(|value| value.context("RocksDB multi_get"))
            .collect()
    }

    fn write_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<()> {
        perf_counters_off_on_this_thread();
        let mut batch = WriteBatch::default();
        for (key, value) in entries {
            batch.put(key, value);
        }
        self.db
            .write_opt(batch, &self.write_options)
            .context("RocksDB write batch")
    }

    /// One range delete, synced as the appends are, as a log kept in
    /// RocksDB is trimmed.
    fn log_trim(&self, log: u32, _from: u64, before: u64) -> Result<()> {
        perf_counters_off_on_this_thread();
        let mut batch = WriteBatch::default();
        batch.delete_range(super::log_key(log, 0), super::log_key(log, before));
        self.db
            .write_opt(batch, &self.write_options)
            .context("RocksDB range delete")
    }

    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        perf_counters_off_on_this_thread();
        self.db
            .merge_opt(key, operand, &self.write_options)
            .context("RocksDB merge")
    }

    fn scan(&self, start: &[u8], nexts: u64) -> Result<ScanOutcome> {
        perf_counters_off_on_this_thread();
        // A fresh iterator per seek, as db_bench's seekrandom does by default.
        let mut iterator = self.db.raw_iterator_opt(ReadOptions::default());
        iterator.seek(start);
        let mut outcome = ScanOutcome {
            found_exact: iterator.key() == Some(start),
            ..ScanOutcome::default()
        };
        for _ in 0..nexts {
            let (Some(key), Some(value)) = (iterator.key(), iterator.value()) else {
                break;
            };
            outcome.entries += 1;
            outcome.bytes += (key.len() + value.len()) as u64;
            iterator.next();
        }
        iterator.status().context("RocksDB iterator")?;
        Ok(outcome)
    }

    fn flush(&self) -> Result<()> {
        // FlushOptions' default waits for the flush, as db_bench's does.
        self.db.flush().context("RocksDB flush")?;
        self.check_background_errors()
    }

    fn compact_all(&self) -> Result<()> {
        // db_bench's `compact` rewrites the bottommost level too, skipping
        // files this same compaction just wrote there.
        let mut compact_options = CompactOptions::default();
        compact_options.set_bottommost_level_compaction(BottommostLevelCompaction::ForceOptimized);
        self.db
            .compact_range_opt(None::<&[u8]>, None::<&[u8]>, &compact_options);
        self.check_background_errors()
    }

    fn wait_for_compactions(&self) -> Result<()> {
        // A finishing job may schedule the next one just after the poll
        // sees it gone, so, as db_bench does, quiet must be seen twice.
        let mut quiet_polls = 0;
        loop {
            self.check_background_errors()?;
            if self.busy_property()?.is_some() {
                quiet_polls = 0;
            } else {
                quiet_polls += 1;
                if quiet_polls == 2 {
                    return Ok(());
                }
            }
            thread::sleep(BUSY_POLL_INTERVAL);
        }
    }

    fn stats_text(&self) -> Option<String> {
        self.db.property_value("rocksdb.stats").ok().flatten()
    }

    fn counters(&self) -> Option<EngineCounters> {
        let text = self.options.get_statistics()?;
        Some(counters_from_tickers(&parse_tickers(&text), self.flavor))
    }

    fn config_notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Dropping the DB closes it; RocksDB's C API reports no close
        // error, so a failed background job is the error to look for.
        let background = self.check_background_errors();
        drop(self);
        background
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::{bytes_with_suffix, small_test_config, DEFAULT_MIN_BLOB_SIZE};

    const SAMPLE_STATISTICS: &str = "\
rocksdb.block.cache.miss COUNT : 12
rocksdb.bytes.written COUNT : 1048576
rocksdb.wal.bytes COUNT : 1050000
rocksdb.flush.write.bytes COUNT : 2000000
rocksdb.compact.read.bytes COUNT : 300
rocksdb.compact.write.bytes COUNT : 400
rocksdb.blobdb.blob.file.bytes.written COUNT : 1500000
rocksdb.stall.micros COUNT : 77
rocksdb.blobdb.blob.file.bytes.read COUNT : 9000
rocksdb.db.get.micros P50 : 1.500000 P95 : 3.000000 P99 : 4.000000 P100 : 9.000000 COUNT : 5 SUM : 20
rocksdb.broken.line COUNT : not-a-number
rocksdb.extra.words COUNT : 5 6
";

    #[test]
    fn statistics_text_parses_tickers_only() {
        let tickers = parse_tickers(SAMPLE_STATISTICS);
        assert_eq!(tickers.get("rocksdb.block.cache.miss"), Some(&12));
        assert_eq!(tickers.get("rocksdb.db.get.micros"), None);
        assert_eq!(tickers.get("rocksdb.broken.line"), None);
        assert_eq!(tickers.get("rocksdb.extra.words"), None);
        let counters = counters_from_tickers(&tickers, Flavor::Plain);
        assert_eq!(
            counters,
            EngineCounters {
                user_bytes_written: 1_048_576,
                wal_bytes_written: 1_050_000,
                flush_bytes_written: 2_000_000,
                compaction_bytes_read: 300,
                compaction_bytes_written: 400,
                value_file_bytes_written: 1_500_000,
                gc_bytes_read: 0,
                gc_bytes_written: 0,
                value_log_bytes_written: 0,
                stall_micros: 77,
                flush_stall_micros: None,
                compaction_value_bytes_read: None,
                expired_value_bytes: None,
            }
        );
        // BlobDB's blob reads are its compactions' value reads.
        let blob = counters_from_tickers(&tickers, Flavor::Blob);
        assert_eq!(blob.compaction_value_bytes_read, Some(9000));
        assert_eq!(
            counters_from_tickers(&parse_tickers(""), Flavor::Plain),
            EngineCounters::default()
        );
    }

    fn key(index: u32) -> Vec<u8> {
        format!("key{index:08}").into_bytes()
    }

    fn files_with_suffix(path: &Path, suffix: &str) -> usize {
        fs::read_dir(path)
            .expect("list db dir")
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(suffix))
            .count()
    }

    /// Drives every trait method and returns the directory's .blob count
    /// after the flush.
    fn smoke(flavor: Flavor, name: &str) -> usize {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = small_test_config(dir.path().join("db"));
        let engine = RocksDbEngine::open(&config, flavor).expect("open");
        assert_eq!(engine.name(), name);
        assert!(engine
            .config_notes()
            .first()
            .is_some_and(|note| note.starts_with("librocksdb ")));

        let small = vec![b's'; 100];
        let large = vec![b'l'; 2 * DEFAULT_MIN_BLOB_SIZE as usize];
        for index in 0..1000 {
            engine.put(&key(index), &large).expect("put");
        }
        let batch_keys: Vec<Vec<u8>> = (1000..1010).map(key).collect();
        let entries: Vec<(&[u8], &[u8])> = batch_keys
            .iter()
            .map(|key| (key.as_slice(), small.as_slice()))
            .collect();
        engine.write_batch(&entries).expect("batch");

        assert_eq!(engine.get(&key(5)).expect("get"), Some(large.clone()));
        assert_eq!(engine.get(&key(1005)).expect("get"), Some(small.clone()));
        assert_eq!(engine.get(b"absent").expect("get"), None);

        engine.flush().expect("flush");
        let blob_files = files_with_suffix(&config.path, ".blob");
        assert!(files_with_suffix(&config.path, ".sst") > 0);

        let scan = engine.scan(&key(998), 3).expect("scan");
        assert!(scan.found_exact);
        assert_eq!(scan.entries, 3);
        let expected_bytes = 2 * (key(0).len() + large.len()) + key(0).len() + small.len();
        assert_eq!(scan.bytes, expected_bytes as u64);
        // Between two keys: lands on the next one, not exactly.
        let mut between = key(7);
        between.push(b'x');
        assert!(!engine.scan(&between, 0).expect("scan").found_exact);
        let past_end = engine.scan(b"zzz", 10).expect("scan");
        assert_eq!(past_end, ScanOutcome::default());

        for index in 0..1000 {
            engine.put(&key(index), &small).expect("overwrite");
        }
        engine.flush().expect("flush");
        engine.compact_all().expect("compact");
        engine.wait_for_compactions().expect("wait");
        assert_eq!(engine.get(&key(5)).expect("get"), Some(small.clone()));

        let counters = engine.counters().expect("counters");
        assert!(counters.user_bytes_written > 1000 * large.len() as u64);
        assert!(counters.wal_bytes_written >= counters.user_bytes_written);
        assert!(counters.flush_bytes_written > 0);
        assert!(counters.compaction_bytes_read > 0);
        assert!(counters.compaction_bytes_written > 0);
        assert!(engine
            .stats_text()
            .is_some_and(|text| text.contains("Compaction Stats")));
        Box::new(engine).close().expect("close");
        blob_files
    }

    #[test]
    fn every_codec_the_driver_offers_is_linked() {
        for compression in [
            CompressionType::None,
            CompressionType::Snappy,
            CompressionType::Lz4,
            CompressionType::Zstd,
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let config = EngineConfig {
                compression,
                ..small_test_config(dir.path().join("db"))
            };
            // RocksDB refuses to open with a codec its build lacks.
            let engine = RocksDbEngine::open(&config, Flavor::Blob)
                .unwrap_or_else(|error| panic!("{compression:?}: {error:#}"));
            let value = vec![b'c'; 4096];
            engine.put(b"key", &value).expect("put");
            engine.flush().expect("flush");
            assert_eq!(engine.get(b"key").expect("get"), Some(value));
            Box::new(engine).close().expect("close");
        }
    }

    /// Writes 4 KiB values with a TTL of 1 s, waits past it (DBWithTTL
    /// stamps whole seconds and drops a value once stamp + TTL < now),
    /// compacts, and returns what the compaction read of value files.
    fn expire(flavor: Flavor) -> Option<u64> {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig {
            ttl: Some(Duration::from_secs(1)),
            compression: CompressionType::None,
            ..small_test_config(dir.path().join("db"))
        };
        let engine = RocksDbEngine::open(&config, flavor).expect("open");
        let value = vec![b't'; 4096];
        for index in 0..200 {
            engine.put(&key(index), &value).expect("put");
        }
        engine.flush().expect("flush");
        // Reads strip DBWithTTL's stamp.
        assert_eq!(engine.get(&key(7)).expect("get"), Some(value));
        let before = engine.counters().expect("counters");
        thread::sleep(Duration::from_millis(2500));
        engine.compact_all().expect("compact");
        assert_eq!(engine.get(&key(7)).expect("get"), None);
        let read = engine.counters().expect("counters").since(&before);
        Box::new(engine).close().expect("close");
        read.compaction_value_bytes_read
    }

    #[test]
    fn rocksdb_with_a_ttl_drops_expired_values_in_compaction() {
        assert_eq!(expire(Flavor::Plain), None);
    }

    #[test]
    fn blobdb_reads_every_blob_to_expire_it() {
        // DBWithTTL's filter finds the stamp at the end of the value, so
        // compaction reads each blob before it can drop it.
        let read = expire(Flavor::Blob).expect("BlobDB counts blob reads");
        assert!(read >= 200 * 4096, "{read}");
    }

    #[test]
    fn rocksdb_smoke() {
        assert_eq!(smoke(Flavor::Plain, "rocksdb"), 0);
    }

    #[test]
    fn blobdb_smoke_writes_large_values_to_blob_files() {
        assert!(smoke(Flavor::Blob, "blobdb") > 0);
    }

    #[test]
    fn blobdb_counts_blob_bytes_inside_flush_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig {
            // So that blob file sizes are at least the values' bytes.
            compression: CompressionType::None,
            ..small_test_config(dir.path().join("db"))
        };
        let engine = RocksDbEngine::open(&config, Flavor::Blob).expect("open");
        let value = vec![b'v'; 4096];
        for index in 0..200 {
            engine.put(&key(index), &value).expect("put");
        }
        engine.flush().expect("flush");
        let counters = engine.counters().expect("counters");
        let blob_bytes = bytes_with_suffix(&config.path, ".blob");
        let sstable_bytes = bytes_with_suffix(&config.path, ".sst");
        assert!(blob_bytes > 200 * 4096);
        assert!(sstable_bytes > 0);
        assert_eq!(counters.value_file_bytes_written, blob_bytes);
        // The flush ticker counts every byte the flush thread wrote, the
        // blob file included: adding value-file bytes again would count
        // them twice.
        assert!(counters.flush_bytes_written >= blob_bytes + sstable_bytes);
        Box::new(engine).close().expect("close");
    }
}
