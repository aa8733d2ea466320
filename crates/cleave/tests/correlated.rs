//! Correlated compaction end to end: a key range whose values are
//! scattered over many logical value files (many small flushes of
//! interleaved keys) is compacted with the switch on and off. On, every
//! output sstable references at most `max_value_file_refs` logical files
//! and a full scan reads the values in fewer reads; off, the fan-out is
//! the number of flushes. A file mostly garbage whose live references one
//! compaction holds moves out whole, and the file goes with the edit.
//! Either way every value reads back, `verify` finds nothing wrong, also
//! after a reopen and after GC.

#[path = "common/scattered.rs"]
mod scattered;

use cleave::vfs::MemFs;
use cleave::{Db, Options, ReadOptions, Stats, WriteOptions};
use scattered::{check, k, max_refs, scatter, v};

const DIR: &str = "/db";
/// Flushes, each writing every `ROUNDS`-th key: one logical value file
/// per flush, each spread over the whole key range.
const ROUNDS: usize = 150;
const KEYS: usize = 3000;
const MAX_REFS: usize = 16;

fn options(fs: &MemFs, correlated: bool) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        // Small, so that the re-separated values fill several files.
        value_file_size: 64 << 10,
        correlated_compaction: correlated,
        max_value_file_refs: MAX_REFS,
        ..scattered::options(fs)
    }
}

/// Writes the scattered key range and compacts it into one level.
fn build(fs: &MemFs, correlated: bool) -> Db {
    let db = Db::open(DIR, options(fs, correlated)).unwrap();
    scatter(&db, ROUNDS, KEYS);
    db.compact_range(None, None).unwrap();
    db
}

struct Outcome {
    fan_out: usize,
    scan_reads: u64,
    stats: Stats,
}

fn compact_scattered(correlated: bool) -> Outcome {
    let fs = MemFs::new();
    let db = build(&fs, correlated);
    let fan_out = max_refs(&db);
    let scan_reads = check(&db, KEYS, |_| 0, "after compaction");
    let stats = db.stats();
    eprintln!(
        "correlated {correlated}: fan-out {fan_out}, {scan_reads} value reads in a scan, \
         {} values ({} bytes) re-separated, write amplification {:.2}",
        stats.compaction_values_reseparated,
        stats.compaction_value_bytes_written,
        stats.write_amplification()
    );
    Outcome {
        fan_out,
        scan_reads,
        stats,
    }
}

#[test]
fn correlated_compaction_bounds_fan_out_and_scan_reads() {
    let off = compact_scattered(false);
    let on = compact_scattered(true);

    // Off, every output references about every flush's file.
    assert!(off.fan_out > MAX_REFS, "off: fan-out {}", off.fan_out);
    assert_eq!(off.stats.compaction_values_reseparated, 0);
    assert_eq!(off.stats.compaction_value_bytes_written, 0);
    // On, every output within the bound.
    assert!(on.fan_out <= MAX_REFS, "on: fan-out {}", on.fan_out);
    // Each flush's file holds KEYS / ROUNDS values; all but the
    // MAX_REFS − 1 kept files (the last slot is the new file) were
    // rewritten.
    assert_eq!(
        on.stats.compaction_values_reseparated,
        ((ROUNDS - (MAX_REFS - 1)) * (KEYS / ROUNDS)) as u64
    );
    // The rewritten values are compaction writes, and write amplification
    // counts them.
    let extra = on.stats.compaction_bytes_written - off.stats.compaction_bytes_written;
    assert!(on.stats.compaction_value_bytes_written > 0);
    assert!(
        extra >= on.stats.compaction_value_bytes_written * 9 / 10,
        "{extra} more compaction bytes for {} value bytes",
        on.stats.compaction_value_bytes_written
    );
    assert!(on.stats.write_amplification() > off.stats.write_amplification());
    // A scan reads the values, now mostly in key order, in fewer reads.
    assert!(
        on.scan_reads * 2 < off.scan_reads,
        "value reads in a scan: {} on, {} off",
        on.scan_reads,
        off.scan_reads
    );
}

/// The re-separated state survives a reopen, overwrites, further
/// compaction and GC of the files compaction wrote.
#[test]
fn reseparated_values_survive_reopen_overwrites_and_gc() {
    let fs = MemFs::new();
    let db = build(&fs, true);
    assert!(db.stats().compaction_values_reseparated > 0);
    db.close().unwrap();

    let db = Db::open(DIR, options(&fs, true)).unwrap();
    check(&db, KEYS, |_| 0, "after reopen");
    // Overwrite every third key: the files compaction wrote gather garbage.
    for i in (0..KEYS).step_by(3) {
        db.put(&WriteOptions::default(), &k(i), &v(i, 1)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let round_of = |i: usize| usize::from(i.is_multiple_of(3));
    check(&db, KEYS, round_of, "after overwrites");
    assert!(max_refs(&db) <= MAX_REFS);
    let gc = db.gc_with_ratio(0.01).unwrap();
    assert!(gc.jobs > 0, "{gc:?}");
    check(&db, KEYS, round_of, "after GC");
    db.close().unwrap();

    let db = Db::open(DIR, options(&fs, true)).unwrap();
    check(&db, KEYS, round_of, "after GC and reopen");
    let r = db.space_report().unwrap();
    assert!(r.other_bytes < 64, "leftover files: {r:?}");
}

/// The garbage rule: a logical file with most of its records dead and all
/// of its live references in one compaction moves out whole, so the edit
/// drops the file and no garbage is left for GC; off, the garbage stays.
fn compact_into_a_mostly_dead_file(correlated: bool) -> (u64, u64) {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs, correlated)).unwrap();
    let put = |i: usize, round: usize| {
        db.put(&WriteOptions::default(), &k(i), &v(i, round))
            .unwrap()
    };
    // One value file (60 values fit in value_file_size), one last-level
    // table.
    (0..60).for_each(|i| put(i, 0));
    db.compact_range(None, None).unwrap();
    // Two thirds overwritten: this compaction exposes that garbage.
    (0..40).for_each(|i| put(i, 1));
    db.compact_range(None, None).unwrap();
    // A new key inside the range, inline: the next compaction rewrites the
    // table holding every live reference into the first file.
    db.put(&WriteOptions::default(), b"key000010x", b"small")
        .unwrap();
    db.compact_range(None, None).unwrap();
    let round_of = |i: usize| usize::from(i < 40);
    for i in 0..60 {
        let got = db.get(&ReadOptions::new(), &k(i)).unwrap();
        assert_eq!(got, Some(v(i, round_of(i))), "key {i}");
    }
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    let garbage = db.space_report().unwrap().exposed_garbage_bytes;
    (db.stats().compaction_values_reseparated, garbage)
}

#[test]
fn a_mostly_dead_file_held_by_one_compaction_moves_out_whole() {
    let (off_moved, off_garbage) = compact_into_a_mostly_dead_file(false);
    assert_eq!(off_moved, 0);
    assert!(off_garbage > 0);
    let (on_moved, on_garbage) = compact_into_a_mostly_dead_file(true);
    assert_eq!(on_moved, 20, "the first file's live values");
    assert_eq!(on_garbage, 0);
}
