//! What a stress run varies: the WAL mode, and the engine options, chosen
//! small so that every background job (flush, compaction, GC, manifest
//! rotation) runs many times a second.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use cleave::{CompactionDecision, Compression, FilterFn, FilterValue, Options, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::values::MIN_SEPARATED;

/// How writes reach the disk, and so what a crash may lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every write is synced before it is acknowledged.
    Sync,
    /// Writes are handed to the OS, unsynced: a killed process loses none.
    Async,
    /// No WAL: a crash may lose writes since the last completed flush,
    /// which the writer calls periodically.
    NoWal,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Sync, Mode::Async, Mode::NoWal];

    pub fn write_options(self) -> WriteOptions {
        WriteOptions {
            sync: self == Mode::Sync,
            disable_wal: self == Mode::NoWal,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Sync => "sync",
            Mode::Async => "async",
            Mode::NoWal => "nowal",
        })
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.to_string() == s)
            .ok_or_else(|| format!("unknown mode {s:?}: sync, async or nowal"))
    }
}

/// Bytes of a key's prefix in the runs with a prefix extractor: `k` and
/// six of its eight digits, a hundred keys each.
pub const PREFIX_LEN: usize = 7;

/// Engine options for a run; `variant` varies compression and caches
/// between runs on one database, as an operator changing options would.
pub fn options(variant: u64) -> Options {
    let mut rng = StdRng::seed_from_u64(variant);
    let codecs = [Compression::None, Compression::Lz4, Compression::Zstd];
    Options {
        create_if_missing: true,
        write_buffer_size: 128 << 10,
        max_write_buffer_number: 3,
        target_file_size_base: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        level0_file_num_compaction_trigger: 2,
        max_background_jobs: 4,
        block_cache_capacity: rng.gen_range(0..4) << 18,
        compression: codecs[rng.gen_range(0..3)],
        min_value_size: MIN_SEPARATED,
        value_file_size: 256 << 10,
        cache_values: rng.gen_bool(0.5),
        value_compression: codecs[rng.gen_range(0..3)],
        drop_cache_capacity: rng.gen_range(0..2) << 16,
        enable_gc: true,
        gc_garbage_ratio: rng.gen_range(0.05..0.3),
        max_manifest_file_size: 64 << 10,
        // Range merges often, and sometimes while writes go on, so that a
        // kill lands inside one.
        range_merge_sorted_runs: rng.gen_range(0..5),
        range_merge_idle: Duration::from_millis(rng.gen_range(0..3) * 50),
        // WAL-time separation in two runs of three, its threshold among the
        // separated values' sizes, so that values of one run reach the
        // disk by all three ways: inline, at flush, and through a value log.
        // Counters are merges of 8-byte increments.
        merge_operator: Some(std::sync::Arc::new(cleave::U64Add)),
        // Tombs (`values::is_tomb`) go in compactions, which read separated
        // values to tell (counters are merged values, never tombs).
        compaction_filter: Some(std::sync::Arc::new(FilterFn::new(
            "cleave-stress.tomb",
            |_, _, value: &mut FilterValue<'_>| match value.bytes() {
                Ok(v) if crate::values::is_tomb(v) => CompactionDecision::Remove,
                _ => CompactionDecision::Keep,
            },
        ))),
        // Prefix filters in half the runs: a reopen with or without them
        // reads tables written either way.
        // Memtable filters in half the runs.
        memtable_bloom_size_ratio: if rng.gen_bool(0.5) { 0.05 } else { 0.0 },
        prefix_extractor: rng.gen_bool(0.5).then(|| {
            std::sync::Arc::new(cleave::FixedPrefix::new(PREFIX_LEN))
                as std::sync::Arc<dyn cleave::PrefixExtractor>
        }),
        big_value_threshold: if rng.gen_range(0..3) == 0 {
            0
        } else {
            rng.gen_range(MIN_SEPARATED + 100..6000)
        },
        value_log_count: rng.gen_range(1..5),
        // A space budget in one run of three, about twice the default
        // run's live data (5,000 keys, about 9 MB), so that a kill lands in
        // compactions exposing garbage, GC collecting what the budget
        // needs, and writers paced for space.
        space_budget_bytes: if rng.gen_range(0..3) == 0 {
            rng.gen_range(14..24) << 20
        } else {
            0
        },
        recent_value_cache_bytes: rng.gen_range(0..2) << 20,
        // Key-delta separation in half the runs (the counters' merges go
        // to the delta store), with small buckets, so that a kill lands in
        // a bucket's garbage collection, split or merge.
        enable_delta_separation: rng.gen_bool(0.5),
        delta_bucket_capacity: rng.gen_range(8..64) << 10,
        delta_max_buckets: rng.gen_range(8..64),
        // Recycled WALs in two runs of three, so that a kill lands while a
        // WAL is written over an older one's records, and a run without
        // recycling replays the WALs one with it left.
        recycle_wal: rng.gen_range(0..3),
        ..Options::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for m in Mode::ALL {
            assert_eq!(m.to_string().parse::<Mode>(), Ok(m));
        }
        assert!("fsync".parse::<Mode>().is_err());
    }
}
