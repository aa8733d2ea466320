//! The cleave adapter: maps db_bench's flags to `cleave::Options` and the
//! engine trait to the public API.

use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use cleave::{
    Clock, Compression, Db, GcStats, Options, ReadOptions, SystemClock, WriteBatch, WriteOptions,
};

use super::{Engine, EngineConfig, EngineCounters, GcBreakdown, ScanOutcome, SpaceBreakdown};
use crate::flags::CompressionType;

/// cleave's smallest value file size (`Options::value_file_size`).
const MIN_VALUE_FILE_SIZE: u64 = 4 << 10;

pub struct CleaveEngine {
    db: Db,
    // `WriteOptions` is rebuilt per call from these, so the adapter assumes
    // nothing about whether it is `Clone` or `Sync`.
    sync: bool,
    disable_wal: bool,
    /// Every put's time to live (`--ttl_seconds`).
    ttl: Option<Duration>,
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

impl From<&GcStats> for GcBreakdown {
    fn from(gc: &GcStats) -> Self {
        Self {
            jobs: gc.jobs,
            files_in: gc.files_in,
            files_out: gc.files_out,
            tables_read: gc.tables_read,
            records_kept: gc.records_kept,
            records_dropped: gc.records_dropped,
            index_bytes_read: gc.index_bytes_read,
            value_bytes_read: gc.value_bytes_read,
            bytes_written: gc.bytes_written,
            bytes_reclaimed: gc.bytes_reclaimed,
            bitmap_time: gc.bitmap_time,
            index_time: gc.index_time,
            value_read_time: gc.value_read_time,
            write_time: gc.write_time,
            commit_time: gc.commit_time,
            throttle_time: gc.throttle_time,
        }
    }
}

impl CleaveEngine {
    pub fn open(config: &EngineConfig) -> Result<Self> {
        let mut notes = Vec::new();
        let compression = match config.compression {
            CompressionType::None => Compression::None,
            CompressionType::Lz4 => Compression::Lz4,
            CompressionType::Zstd => Compression::Zstd,
            CompressionType::Snappy => {
                notes
                    .push("cleave has no snappy codec; using lz4 (sstables and values)".to_owned());
                Compression::Lz4
            }
        };
        // As BlobDB's: the threshold of --min_blob_size, value files of
        // target_file_size_base bytes, values compressed with the sstables'
        // codec. cleave needs a threshold of at least 1 byte and value
        // files of at least 4 KiB.
        let min_value_size = config.min_blob_size.max(1);
        let value_file_size = config.target_file_size_base.max(MIN_VALUE_FILE_SIZE);
        if config.value_separation {
            let taken = |value: u64, flag: u64| if value == flag { "=" } else { "raised from" };
            let cache = if config.use_blob_cache {
                "in the block cache (--use_blob_cache)"
            } else {
                "not cached, as BlobDB's blobs in db_bench"
            };
            let gc = if config.gc {
                format!("on at garbage ratio {}", config.gc_garbage_ratio)
            } else {
                "off (--gc=false)".to_owned()
            };
            let correlated = if config.correlated_compaction {
                format!(
                    "on at {} value files per sstable",
                    config.max_value_file_refs
                )
            } else {
                "off (--correlated_compaction=false)".to_owned()
            };
            let range_merge = if config.range_merge_sorted_runs > 0 {
                format!(
                    "range merges above {} value files per last-level sstable after {} ms \
                     without writes",
                    config.range_merge_sorted_runs, config.range_merge_idle_ms
                )
            } else {
                "range merges off".to_owned()
            };
            notes.push(format!(
                "cleave: value separation on, min_value_size {min_value_size} ({} min_blob_size), \
                 value_file_size {value_file_size} ({} target_file_size_base), \
                 value compression {compression:?}, value cache {cache}, \
                 correlated compaction {correlated}, {range_merge}, GC {gc}",
                taken(min_value_size, config.min_blob_size),
                taken(value_file_size, config.target_file_size_base),
            ));
        } else {
            notes.push("cleave: value separation off (--value_separation=false)".to_owned());
        }
        if config.delta_separation {
            notes.push(format!(
                "cleave: key-delta separation on, buckets of {} bytes, at most {}",
                config.delta_bucket_capacity, config.delta_max_buckets
            ));
        }
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
            enable_value_separation: config.value_separation,
            min_value_size: option_value(min_value_size, "min_blob_size")?,
            value_file_size,
            cache_values: config.use_blob_cache,
            value_compression: compression,
            enable_gc: config.gc,
            gc_garbage_ratio: config.gc_garbage_ratio,
            drop_cache_capacity: option_value(config.drop_cache_size, "drop_cache_size")?,
            space_budget_bytes: config.space_budget_bytes,
            dynamic_gc_threads: config.dynamic_gc_threads,
            gc_rate_limiter: config.gc_rate_limiter,
            device_write_bandwidth: config.device_write_bandwidth,
            gc_coalesced_reads: config.gc_coalesced_reads,
            compensated_size: config.compensated_size,
            correlated_compaction: config.correlated_compaction,
            prepopulate_block_cache: config.prepopulate_block_cache,
            max_value_file_refs: option_value(config.max_value_file_refs, "max_value_file_refs")?,
            range_merge_sorted_runs: option_value(
                config.range_merge_sorted_runs,
                "range_merge_sorted_runs",
            )?,
            range_merge_idle: Duration::from_millis(config.range_merge_idle_ms),
            big_value_threshold: option_value(config.big_value_threshold, "big_value_threshold")?,
            value_log_count: option_value(config.value_log_count, "value_log_count")?,
            recent_value_cache_bytes: option_value(
                config.recent_value_cache_size,
                "recent_value_cache_size",
            )?,
            use_direct_reads: config.use_direct_reads,
            use_direct_io_for_flush_and_compaction: config.use_direct_io_for_flush_and_compaction,
            recycle_wal: config.recycle_wal,
            merge_operator: config.merge.operator(),
            enable_delta_separation: config.delta_separation,
            delta_bucket_capacity: config.delta_bucket_capacity,
            delta_max_buckets: option_value(config.delta_max_buckets, "delta_max_buckets")?,
            ..defaults
        };
        let db = Db::open(&config.path, options)
            .with_context(|| format!("opening cleave at {}", config.path.display()))?;
        Ok(Self {
            db,
            sync: config.sync,
            disable_wal: config.disable_wal,
            ttl: config.ttl,
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
        match self.ttl {
            Some(ttl) => self
                .db
                .put_with_ttl(&self.write_options(), key, value, ttl)?,
            None => self.db.put(&self.write_options(), key, value)?,
        }
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(&ReadOptions::new(), key)?)
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let values = self.db.multi_get(&ReadOptions::new(), keys);
        Ok(values.into_iter().collect::<cleave::Result<_>>()?)
    }

    fn write_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<()> {
        let mut batch = WriteBatch::new();
        // By the clock `Db::put_with_ttl` reads: the adapter leaves
        // `Options::clock` at its default.
        let expires_at_ms = self.ttl.map(|ttl| SystemClock.expiry_after(ttl));
        for (key, value) in entries {
            match expires_at_ms {
                Some(at) => batch.put_with_expiry(key, value, at),
                None => batch.put(key, value),
            }
        }
        self.db.write(&self.write_options(), batch)?;
        Ok(())
    }

    /// cleave's `Db` has no range delete: one batch of point deletes.
    fn log_trim(&self, log: u32, from: u64, before: u64) -> Result<()> {
        let mut batch = WriteBatch::new();
        for lsn in from..before {
            batch.delete(&super::log_key(log, lsn));
        }
        self.db.write(&self.write_options(), batch)?;
        Ok(())
    }

    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        self.db.merge(&self.write_options(), key, operand)?;
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
            // Part of flush_bytes_written (cleave's flushes count the value
            // files they write; compactions write none), so the write
            // amplification does not add it again.
            value_file_bytes_written: counter(stats.value_file_bytes_written),
            // cleave counts GC apart from flushes and compactions, so the
            // write amplification adds these rather than double counting.
            gc_bytes_read: stats.gc.index_bytes_read + stats.gc.value_bytes_read,
            gc_bytes_written: stats.gc.bytes_written,
            value_log_bytes_written: stats.value_log_bytes_written,
            stall_micros: counter(stats.stall_micros),
            flush_stall_micros: Some(counter(stats.memtable_stall_micros)),
            // A compaction reads a separated value only for a compaction
            // filter that asks for it; expiry is decided from the entry.
            compaction_value_bytes_read: Some(stats.compaction_filter_value_bytes_read),
            expired_value_bytes: Some(stats.expired_value_bytes),
        })
    }

    fn gc_breakdown(&self) -> Option<GcBreakdown> {
        Some(GcBreakdown::from(&self.db.stats().gc))
    }

    fn space_breakdown(&self) -> Result<Option<SpaceBreakdown>> {
        let report = self.db.space_report().context("cleave space report")?;
        Ok(Some(SpaceBreakdown {
            sstable_bytes: report.sstable_bytes,
            value_file_bytes: report.value_file_bytes,
            exposed_garbage_bytes: report.exposed_garbage_bytes,
            s_index: report.s_index,
            hidden_garbage_bytes: report.hidden_garbage_bytes,
            gc_max_jobs: counter(report.gc_max_jobs),
            gc_rate_limit: report.gc_rate_limit,
        }))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::{bytes_with_suffix, small_test_config};

    fn key(index: u32) -> Vec<u8> {
        format!("key{index:08}").into_bytes()
    }

    fn uncompressed_config(path: std::path::PathBuf) -> EngineConfig {
        EngineConfig {
            // So that value files hold at least the values' bytes.
            compression: CompressionType::None,
            ..small_test_config(path)
        }
    }

    #[test]
    fn value_files_are_counted_once_and_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig {
            // So that the garbage stays to be reported.
            gc: false,
            correlated_compaction: false,
            ..uncompressed_config(dir.path().join("db"))
        };
        std::fs::create_dir_all(&config.path).expect("mkdir");
        let engine = CleaveEngine::open(&config).expect("open");
        assert!(engine.config_notes().iter().any(|note| note
            .contains("value separation on, min_value_size 512 (=")
            && note.contains("correlated compaction off (--correlated_compaction=false)")
            && note.ends_with("GC off (--gc=false)")));
        let value = vec![b'v'; 4096];
        for index in 0..200 {
            engine.put(&key(index), &value).expect("put");
        }
        engine.flush().expect("flush");
        let counters = engine.counters().expect("counters");
        let value_file_bytes = bytes_with_suffix(&config.path, ".vf");
        let sstable_bytes = bytes_with_suffix(&config.path, ".sst");
        assert!(value_file_bytes > 200 * 4096);
        assert_eq!(counters.value_file_bytes_written, value_file_bytes);
        // The flush counter holds the value files already: the engine's
        // write amplification must not add them a second time.
        assert_eq!(
            counters.flush_bytes_written,
            value_file_bytes + sstable_bytes
        );
        let written = counters.wal_bytes_written
            + counters.flush_bytes_written
            + counters.compaction_bytes_written;
        assert_eq!(
            counters.write_amplification(),
            Some(written as f64 / counters.user_bytes_written as f64)
        );
        let space = engine
            .space_breakdown()
            .expect("space report")
            .expect("cleave has a breakdown");
        assert_eq!(space.value_file_bytes, value_file_bytes);
        assert_eq!(space.sstable_bytes, sstable_bytes);
        assert_eq!(space.exposed_garbage_bytes, 0);
        assert_eq!(space.s_index, 1.0);

        // Overwriting half the keys and compacting the old versions away
        // leaves half of the first value file unreferenced.
        for index in 0..100 {
            engine.put(&key(index), &value).expect("overwrite");
        }
        engine.flush().expect("flush");
        engine.compact_all().expect("compact");
        engine.wait_for_compactions().expect("wait");
        let space = engine
            .space_breakdown()
            .expect("space report")
            .expect("cleave has a breakdown");
        assert!(space.exposed_garbage_bytes >= 100 * 4096, "{space:?}");
        assert!(space.exposed_garbage_bytes < space.value_file_bytes);
        assert_eq!(
            space.value_file_bytes,
            bytes_with_suffix(&config.path, ".vf")
        );
        assert_eq!(engine.get(&key(150)).expect("get"), Some(value));
        assert_eq!(engine.counters().expect("counters").gc_bytes_written, 0);
        assert_eq!(engine.gc_breakdown(), Some(GcBreakdown::default()));
        Box::new(engine).close().expect("close");
    }

    #[test]
    fn a_ttl_expires_puts_and_batches_without_reading_their_values() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig {
            ttl: Some(Duration::from_millis(300)),
            gc: false,
            ..uncompressed_config(dir.path().join("db"))
        };
        std::fs::create_dir_all(&config.path).expect("mkdir");
        let engine = CleaveEngine::open(&config).expect("open");
        let value = vec![b't'; 4096];
        for index in 0..100 {
            engine.put(&key(index), &value).expect("put");
        }
        let batch_keys: Vec<Vec<u8>> = (100..200).map(key).collect();
        let entries: Vec<(&[u8], &[u8])> = batch_keys
            .iter()
            .map(|key| (key.as_slice(), value.as_slice()))
            .collect();
        engine.write_batch(&entries).expect("batch");
        engine.flush().expect("flush");
        let before = engine.counters().expect("counters");
        std::thread::sleep(Duration::from_millis(400));
        // Gone for reads before any compaction has run.
        assert_eq!(engine.get(&key(7)).expect("get"), None);
        assert_eq!(engine.get(&key(107)).expect("get"), None);
        engine.compact_all().expect("compact");
        let counters = engine.counters().expect("counters").since(&before);
        // The value records' bytes in their value files: the values and
        // each record's own header.
        let expired = counters.expired_value_bytes.expect("cleave counts them");
        assert!(
            (200 * 4096..200 * (4096 + 64)).contains(&expired),
            "{expired}"
        );
        assert_eq!(counters.compaction_value_bytes_read, Some(0));
        let space = engine
            .space_breakdown()
            .expect("space report")
            .expect("cleave has a breakdown");
        // Every record of the value file expired: the file went with the
        // compaction that dropped them, GC off as it is.
        assert_eq!(
            (space.value_file_bytes, space.sstable_bytes),
            (0, 0),
            "{space:?}"
        );
        assert_eq!(bytes_with_suffix(&config.path, ".vf"), 0);
        Box::new(engine).close().expect("close");
    }

    #[test]
    fn gc_reclaims_garbage_and_its_bytes_count_in_write_amp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = uncompressed_config(dir.path().join("db"));
        std::fs::create_dir_all(&config.path).expect("mkdir");
        let engine = CleaveEngine::open(&config).expect("open");
        assert!(engine.config_notes().iter().any(|note| note
            .contains("correlated compaction on at 256 value files per sstable")
            && note.ends_with("GC on at garbage ratio 0.2")));
        let value = vec![b'v'; 4096];
        for index in 0..200 {
            engine.put(&key(index), &value).expect("put");
        }
        engine.flush().expect("flush");
        let before = engine.gc_breakdown().expect("cleave has GC stats");
        assert_eq!(before, GcBreakdown::default());

        // Half of the first value file becomes garbage, over the 0.2
        // threshold: background GC copies the other half out.
        for index in 0..100 {
            engine.put(&key(index), &value).expect("overwrite");
        }
        engine.flush().expect("flush");
        engine.compact_all().expect("compact");
        engine.wait_for_compactions().expect("wait");
        let gc = engine
            .gc_breakdown()
            .expect("cleave has GC stats")
            .since(&before);
        assert!(gc.jobs >= 1, "{gc:?}");
        assert_eq!((gc.records_kept, gc.records_dropped), (100, 100), "{gc:?}");
        assert!(gc.value_bytes_read >= 100 * 4096, "{gc:?}");
        assert!(gc.bytes_written >= 100 * 4096, "{gc:?}");
        assert!(gc.bytes_reclaimed >= 100 * 4096, "{gc:?}");

        let counters = engine.counters().expect("counters");
        assert_eq!(counters.gc_bytes_written, gc.bytes_written);
        assert_eq!(
            counters.gc_bytes_read,
            gc.index_bytes_read + gc.value_bytes_read
        );
        // The flushes' value files are what is on disk plus what GC gave
        // back: GC's outputs are not in the flush counters, and write
        // amplification adds them.
        assert_eq!(
            counters.value_file_bytes_written,
            bytes_with_suffix(&config.path, ".vf") + gc.bytes_reclaimed
        );
        let written = counters.wal_bytes_written
            + counters.flush_bytes_written
            + counters.compaction_bytes_written
            + gc.bytes_written;
        assert_eq!(
            counters.write_amplification(),
            Some(written as f64 / counters.user_bytes_written as f64)
        );
        let space = engine
            .space_breakdown()
            .expect("space report")
            .expect("cleave has a breakdown");
        assert_eq!(space.exposed_garbage_bytes, 0, "{space:?}");
        assert_eq!(
            space.value_file_bytes,
            bytes_with_suffix(&config.path, ".vf")
        );
        // A value GC moved.
        assert_eq!(engine.get(&key(150)).expect("get"), Some(value));
        Box::new(engine).close().expect("close");
    }

    #[test]
    fn value_separation_off_keeps_values_in_sstables() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig {
            value_separation: false,
            ..uncompressed_config(dir.path().join("db"))
        };
        std::fs::create_dir_all(&config.path).expect("mkdir");
        let engine = CleaveEngine::open(&config).expect("open");
        assert!(engine
            .config_notes()
            .iter()
            .any(|note| note.contains("value separation off")));
        let value = vec![b'v'; 4096];
        for index in 0..200 {
            engine.put(&key(index), &value).expect("put");
        }
        engine.flush().expect("flush");
        assert_eq!(bytes_with_suffix(&config.path, ".vf"), 0);
        let counters = engine.counters().expect("counters");
        assert_eq!(counters.value_file_bytes_written, 0);
        assert!(counters.flush_bytes_written > 200 * 4096);
        let space = engine
            .space_breakdown()
            .expect("space report")
            .expect("cleave has a breakdown");
        assert_eq!(space.value_file_bytes, 0);
        assert!(space.sstable_bytes > 200 * 4096);
        Box::new(engine).close().expect("close");
    }

    #[test]
    fn zero_min_blob_size_separates_every_nonempty_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig {
            min_blob_size: 0,
            use_blob_cache: true,
            ..uncompressed_config(dir.path().join("db"))
        };
        std::fs::create_dir_all(&config.path).expect("mkdir");
        let engine = CleaveEngine::open(&config).expect("open");
        assert!(engine
            .config_notes()
            .iter()
            .any(|note| note.contains("min_value_size 1 (raised from min_blob_size)")));
        engine.put(b"small", b"x").expect("put");
        engine.flush().expect("flush");
        assert!(bytes_with_suffix(&config.path, ".vf") > 0);
        assert_eq!(engine.get(b"small").expect("get"), Some(b"x".to_vec()));
        Box::new(engine).close().expect("close");
    }

    #[test]
    fn delta_separation_keeps_merge_operands_in_delta_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig {
            delta_separation: true,
            ..uncompressed_config(dir.path().join("db"))
        };
        std::fs::create_dir_all(&config.path).expect("mkdir");
        let engine = CleaveEngine::open(&config).expect("open");
        assert!(engine
            .config_notes()
            .iter()
            .any(|note| note.contains("key-delta separation on")));
        for round in 0..50u64 {
            for index in 0..100 {
                engine
                    .merge(&key(index), &round.to_le_bytes())
                    .expect("merge");
            }
        }
        engine.flush().expect("flush");
        assert!(bytes_with_suffix(&config.path, ".kd") > 0);
        let sum: u64 = (0..50).sum();
        assert_eq!(
            engine.get(&key(7)).expect("get"),
            Some(sum.to_le_bytes().to_vec())
        );
        let space = engine
            .space_breakdown()
            .expect("space report")
            .expect("cleave has a breakdown");
        assert_eq!(space.sstable_bytes, 0, "{space:?}");
        Box::new(engine).close().expect("close");
    }
}
