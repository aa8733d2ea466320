//! The cleave adapter: maps db_bench's flags to `cleave::Options` and the
//! engine trait to the public API.

use anyhow::{anyhow, Result};
use cleave::{Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

use super::{Engine, EngineConfig, EngineCounters, ScanOutcome};
use crate::flags::CompressionType;

pub struct CleaveEngine {
    db: Db,
    // `WriteOptions` is rebuilt per call from these, so the adapter assumes
    // nothing about whether it is `Clone` or `Sync`.
    sync: bool,
    disable_wal: bool,
    notes: Vec<String>,
}

/// Converts a flag value to whatever integer type the option uses, naming
/// the flag when it does not fit. Generic so the adapter does not depend on
/// whether cleave chose `usize`, `u64` or `u32` for a field.
fn option_value<T: TryFrom<u64>>(value: u64, flag: &str) -> Result<T> {
    T::try_from(value).map_err(|_| anyhow!("--{flag}={value} does not fit cleave's option"))
}

/// Widens an engine counter to `u64` whatever its integer type.
fn counter<T: TryInto<u64>>(value: T) -> u64 {
    value.try_into().unwrap_or(u64::MAX)
}

impl CleaveEngine {
    pub fn open(config: &EngineConfig) -> Result<Self> {
        let mut notes = Vec::new();
        let compression = match config.compression {
            CompressionType::None => Compression::None,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
            CompressionType::Snappy => {
                notes.push("cleave has no snappy codec; using lz4".to_owned());
                Compression::Lz4
            }
        };
        let defaults = Options::default();
        let bloom_bits_per_key = config
            .bloom_bits_per_key
            .unwrap_or(defaults.bloom_bits_per_key);
        let options = Options {
            create_if_missing: true,
            write_buffer_size: option_value(config.write_buffer_size, "write_buffer_size")?,
            max_write_buffer_number: option_value(
                u64::from(config.max_write_buffer_number),
                "max_write_buffer_number",
            )?,
            target_file_size_base: option_value(
                config.target_file_size_base,
                "target_file_size_base",
            )?,
            max_bytes_for_level_base: option_value(
                config.max_bytes_for_level_base,
                "max_bytes_for_level_base",
            )?,
            max_background_jobs: option_value(
                u64::from(config.max_background_jobs),
                "max_background_jobs",
            )?,
            max_bytes_for_level_multiplier: config.max_bytes_for_level_multiplier,
            level_compaction_dynamic_level_bytes: config.level_compaction_dynamic_level_bytes,
            level0_file_num_compaction_trigger: option_value(
                u64::from(config.level0_file_num_compaction_trigger),
                "level0_file_num_compaction_trigger",
            )?,
            level0_slowdown_writes_trigger: option_value(
                u64::from(config.level0_slowdown_writes_trigger),
                "level0_slowdown_writes_trigger",
            )?,
            level0_stop_writes_trigger: option_value(
                u64::from(config.level0_stop_writes_trigger),
                "level0_stop_writes_trigger",
            )?,
            block_size: option_value(config.block_size, "block_size")?,
            block_cache_capacity: option_value(config.cache_size, "cache_size")?,
            bloom_bits_per_key,
            compression,
            use_direct_reads: config.use_direct_reads,
            use_direct_io_for_flush_and_compaction: config.use_direct_io_for_flush_and_compaction,
            ..defaults
        };
        let db = Db::open(&config.path, options)?;
        Ok(Self {
            db,
            sync: config.sync,
            disable_wal: config.disable_wal,
            notes,
        })
    }

    fn write_options(&self) -> WriteOptions {
        WriteOptions {
            sync: self.sync,
            disable_wal: self.disable_wal,
        }
    }
}

impl Engine for CleaveEngine {
    fn name(&self) -> &'static str {
        "cleave"
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put(&self.write_options(), key, value)?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(&ReadOptions::new(), key)?)
    }

    fn write_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<()> {
        let mut batch = WriteBatch::new();
        for (key, value) in entries {
            batch.put(key, value);
        }
        self.db.write(&self.write_options(), batch)?;
        Ok(())
    }

    fn scan(&self, start: &[u8], nexts: u64) -> Result<ScanOutcome> {
        // A fresh iterator per seek, as db_bench's seekrandom does by default.
        let mut iterator = self.db.iter(&ReadOptions::new());
        iterator.seek(start)?;
        let mut outcome = ScanOutcome {
            found_exact: iterator.valid() && iterator.key() == start,
            ..ScanOutcome::default()
        };
        for _ in 0..nexts {
            if !iterator.valid() {
                break;
            }
            outcome.entries += 1;
            outcome.bytes += (iterator.key().len() + iterator.value()?.len()) as u64;
            iterator.next()?;
        }
        iterator.status()?;
        Ok(outcome)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    fn compact_all(&self) -> Result<()> {
        self.db.compact_range(None, None)?;
        Ok(())
    }

    fn wait_for_compactions(&self) -> Result<()> {
        self.db.wait_for_compactions()?;
        Ok(())
    }

    fn stats_text(&self) -> Option<String> {
        self.db.property("cleave.stats")
    }

    fn counters(&self) -> Option<EngineCounters> {
        let stats = self.db.stats();
        Some(EngineCounters {
            user_bytes_written: counter(stats.user_bytes_written),
            wal_bytes_written: counter(stats.wal_bytes_written),
            flush_bytes_written: counter(stats.flush_bytes_written),
            compaction_bytes_read: counter(stats.compaction_bytes_read),
            compaction_bytes_written: counter(stats.compaction_bytes_written),
            // cleave writes no value files yet.
            value_file_bytes_written: 0,
            stall_micros: counter(stats.stall_micros),
        })
    }

    fn config_notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn close(self: Box<Self>) -> Result<()> {
        let engine = *self;
        engine.db.close()?;
        Ok(())
    }
}
