//! Helpers shared by the randomized integration tests.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cleave::vfs::MemFs;
use cleave::{Compression, Db, Options, ReadOptions};
use rand::rngs::StdRng;
use rand::Rng;

/// What the database should hold: the oracle of the randomized tests.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A number from the environment, so that CI runs small and a developer can
/// run long: e.g. `CLEAVE_MODEL_OPS=1000000`.
pub fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Options drawn at random, all small so that every background job (flush,
/// compaction, manifest rotation) runs often.
pub fn random_options(fs: &MemFs, rng: &mut StdRng) -> Options {
    Options {
        create_if_missing: true,
        fs: Arc::new(fs.clone()),
        write_buffer_size: rng.gen_range(4 << 10..32 << 10),
        max_write_buffer_number: rng.gen_range(2..5),
        target_file_size_base: rng.gen_range(4 << 10..64 << 10),
        max_bytes_for_level_base: rng.gen_range(16 << 10..256 << 10),
        level0_file_num_compaction_trigger: 2,
        level0_slowdown_writes_trigger: 8,
        level0_stop_writes_trigger: 12,
        block_size: rng.gen_range(256..4096),
        bloom_bits_per_key: if rng.gen_bool(0.8) { 10 } else { 0 },
        block_cache_capacity: rng.gen_range(0..1 << 20),
        // Up to four: a flush thread and a pool where two compactions run at once.
        max_background_jobs: rng.gen_range(1..5),
        level_compaction_dynamic_level_bytes: rng.gen_bool(0.6),
        max_manifest_file_size: rng.gen_range(1 << 10..64 << 10),
        compression: codec(rng),
        // Separation on most of the time, with a threshold that puts the
        // tests' values on both sides of it; files small so a flush writes
        // several.
        enable_value_separation: rng.gen_bool(0.85),
        min_value_size: rng.gen_range(16..2048),
        value_file_size: rng.gen_range(4 << 10..64 << 10),
        cache_values: rng.gen_bool(0.5),
        value_compression: codec(rng),
        // Background GC most of the time, at thresholds from eager to lazy.
        enable_gc: rng.gen_bool(0.7),
        drop_cache_capacity: if rng.gen_bool(0.3) {
            0
        } else {
            rng.gen_range(1..64 << 10)
        },
        gc_garbage_ratio: rng.gen_range(0.05..0.8),
        // Sometimes a space budget the data outgrows, so that GC turns
        // aggressive and writes wait for space; the ablation switches of
        // the scheduler both ways; and a rate limiter that finds the
        // device busy at a few MiB/s.
        space_budget_bytes: if rng.gen_bool(0.3) {
            rng.gen_range(64 << 10..2 << 20)
        } else {
            0
        },
        dynamic_gc_threads: rng.gen_bool(0.7),
        gc_rate_limiter: rng.gen_bool(0.7),
        device_write_bandwidth: if rng.gen_bool(0.5) { 4 << 20 } else { 0 },
        gc_coalesced_reads: rng.gen_bool(0.8),
        compensated_size: rng.gen_bool(0.8),
        // Correlated compaction most of the time, with limits so small that
        // compactions re-separate values often.
        correlated_compaction: rng.gen_bool(0.7),
        max_value_file_refs: rng.gen_range(1..8),
        correlated_garbage_ratio: rng.gen_range(0.05..0.8),
        // Range merges most of the time, at limits that make them frequent,
        // half the time without waiting for writes to pause, so that they
        // race with writes, flushes, compactions and GC.
        range_merge_sorted_runs: if rng.gen_bool(0.3) {
            0
        } else {
            rng.gen_range(1..6)
        },
        range_merge_idle: Duration::from_millis(if rng.gen_bool(0.5) { 0 } else { 20 }),
        // Prefix filters half the time, of a length that groups the
        // tests' keys (`k` and digits) by tens to ten thousands.
        memtable_bloom_size_ratio: if rng.gen_bool(0.5) { 0.1 } else { 0.0 },
        prefix_extractor: rng.gen_bool(0.5).then(|| {
            Arc::new(cleave::FixedPrefix::new(rng.gen_range(2..6)))
                as Arc<dyn cleave::PrefixExtractor>
        }),
        // WAL-time separation half the time, its threshold inside the
        // tests' value sizes so that values fall on both sides of it, with
        // one log or several, and a recent-value cache or none.
        big_value_threshold: if rng.gen_bool(0.5) {
            rng.gen_range(64..1500)
        } else {
            0
        },
        value_log_count: rng.gen_range(1..4),
        recent_value_cache_bytes: if rng.gen_bool(0.5) {
            rng.gen_range(1..64 << 10)
        } else {
            0
        },
        // Merges append, so that the model sees their order; half the time
        // flushes move them to a delta store of tiny buckets, so that
        // garbage collection splits and merges buckets all the time.
        merge_operator: Some(Arc::new(cleave::Append::default())),
        enable_delta_separation: rng.gen_bool(0.5),
        delta_bucket_capacity: rng.gen_range(4 << 10..32 << 10),
        delta_split_ratio: rng.gen_range(0.3..1.0),
        delta_max_buckets: rng.gen_range(4..16),
        // Obsolete WALs written over by later ones half the time.
        recycle_wal: if rng.gen_bool(0.5) {
            rng.gen_range(1..3)
        } else {
            0
        },
        ..Options::default()
    }
}

/// Applies a merge of `operand` to `key` as `Append::default()` does.
pub fn merge_append(model: &mut Model, key: Vec<u8>, operand: &[u8]) {
    match model.get_mut(&key) {
        Some(value) => {
            value.push(b',');
            value.extend_from_slice(operand);
        }
        None => {
            model.insert(key, operand.to_vec());
        }
    }
}

fn codec(rng: &mut StdRng) -> Compression {
    match rng.gen_range(0..3) {
        0 => Compression::None,
        1 => Compression::Lz4,
        _ => Compression::Zstd,
    }
}

/// Everything the database holds now, read with a full forward scan.
pub fn contents(db: &Db) -> Model {
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    let mut got = Model::new();
    while it.valid() {
        got.insert(it.key().to_vec(), it.value().unwrap().to_vec());
        it.next().unwrap();
    }
    it.status().unwrap();
    got
}
