//! The engines the driver can run, behind one trait, so cleave, RocksDB and
//! BlobDB (the last two through the `rocksdb` crate, with the `rocksdb`
//! feature) run the same workloads in the same process.

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::flags::{CompressionType, Flags};

mod cleave;
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
    pub stall_micros: u64,
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
            stall_micros: self.stall_micros.saturating_sub(earlier.stall_micros),
        }
    }

    /// Everything the engine wrote (WAL, flushes, compactions; value files
    /// are inside the last two) per user byte; `None` when no user bytes
    /// were written.
    pub fn write_amplification(&self) -> Option<f64> {
        let written =
            self.wal_bytes_written + self.flush_bytes_written + self.compaction_bytes_written;
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
}

/// A key-value engine under test. Write durability (`sync`, `disable_wal`)
/// is fixed when the engine is opened, as db_bench fixes it per run.
pub trait Engine: Send + Sync {
    /// The `--engine` name.
    fn name(&self) -> &'static str;
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Writes all entries atomically.
    fn write_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<()>;
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
    /// A note for the run header about options the engine could not honour
    /// exactly (e.g. a codec it lacks).
    fn config_notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Closes the engine, reporting errors that dropping would hide.
    fn close(self: Box<Self>) -> Result<()>;
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
    pub use_direct_reads: bool,
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Values at least this large go to value files (BlobDB's
    /// `min_blob_size`, cleave's `min_value_size`).
    pub min_blob_size: u64,
    /// cleave only: key-value separation on (`--value_separation`).
    pub value_separation: bool,
    /// cleave only: bytes of the cache of separated values
    /// (`--value_cache_size`; 0 disables it).
    pub value_cache_size: u64,
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
        use_direct_reads: false,
        use_direct_io_for_flush_and_compaction: false,
        min_blob_size: DEFAULT_MIN_BLOB_SIZE,
        value_separation: true,
        value_cache_size: 0,
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
            use_direct_reads: flags.use_direct_reads,
            use_direct_io_for_flush_and_compaction: flags.use_direct_io_for_flush_and_compaction,
            min_blob_size: flags.min_blob_size,
            value_separation: flags.value_separation,
            value_cache_size: flags.value_cache_size,
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
             bloom_bits {} | compression {:?} | sync {} | disable_wal {} | \
             direct reads {} | direct flush/compaction {} | min_blob_size {} | \
             value_separation {} (cleave) | value_cache_size {} (cleave)",
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
            self.use_direct_reads,
            self.use_direct_io_for_flush_and_compaction,
            self.min_blob_size,
            self.value_separation,
            self.value_cache_size,
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
pub const ENGINE_NAMES: &[&str] = &["cleave", "rocksdb", "blobdb"];
/// The engine names `open` knows.
#[cfg(not(feature = "rocksdb"))]
pub const ENGINE_NAMES: &[&str] = &["cleave"];

/// Opens the engine named by `--engine` on `config.path`.
pub fn open(name: &str, config: &EngineConfig) -> Result<Box<dyn Engine>> {
    match name {
        "cleave" => Ok(Box::new(cleave::CleaveEngine::open(config)?)),
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
