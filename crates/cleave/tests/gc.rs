//! Value-file GC end to end: it copies only the records live sstables
//! reference, keeps handles valid (a moved value still costs one disk
//! read), leaves the collected files to readers that still hold them,
//! respects snapshots, runs by itself in the background, and a crash at
//! any I/O step of a job leaves the database as before or after it.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::{Db, Options, ReadOptions, WriteOptions};

mod separated;
use separated::{k, record_len, v};

const DIR: &str = "/db";

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        create_if_missing: true,
        fs,
        // One memtable holds a whole round, so each round is one flush.
        write_buffer_size: 4 << 20,
        min_value_size: 512,
        cache_values: false,
        enable_gc: false,
        ..Options::default()
    }
}

fn fill(db: &Db, range: std::ops::Range<usize>, round: usize, model: &mut BTreeMap<usize, usize>) {
    for i in range {
        db.put(&WriteOptions::default(), &k(i), &v(i, round))
            .unwrap();
        model.insert(i, round);
    }
}

fn check(db: &Db, model: &BTreeMap<usize, usize>, ctx: &str) {
    for (&i, &round) in model {
        assert_eq!(
            db.get(&ReadOptions::new(), &k(i)).unwrap(),
            Some(v(i, round)),
            "{ctx}: key {i}"
        );
    }
}

fn value_files(fs: &dyn Fs) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".vf"))
        .collect();
    v.sort();
    v
}

/// 1,000 keys (500 separated values) in one flush, then the first 500 keys
/// overwritten in a second flush and everything compacted: the first value
/// file keeps 250 live records of 500.
fn half_garbage(db: &Db) -> BTreeMap<usize, usize> {
    let mut model = BTreeMap::new();
    fill(db, 0..1000, 0, &mut model);
    db.flush().unwrap();
    fill(db, 0..500, 1, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    model
}

#[test]
fn gc_copies_only_live_records_and_reads_are_unchanged() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let model = half_garbage(&db);
    let before = db.space_report().unwrap();
    assert!(before.exposed_garbage_bytes > 0);
    let files_before = value_files(&fs);
    assert_eq!(files_before.len(), 2);

    let g = db.gc_now().unwrap();
    assert_eq!((g.jobs, g.files_in, g.files_out), (1, 1, 1));
    assert_eq!((g.records_kept, g.records_dropped), (250, 250));
    assert!(g.tables_read >= 1);
    assert!(g.index_bytes_read > 0);
    // Exactly the live records are read, and copied byte for byte.
    let records = |range: std::ops::Range<usize>| -> u64 {
        range
            .filter(|i| i.is_multiple_of(2))
            .map(|i| record_len(&k(i), &v(i, 0)))
            .sum()
    };
    assert_eq!(before.exposed_garbage_bytes, records(0..500));
    assert_eq!(g.value_bytes_read, records(500..1000));
    assert!(g.bytes_written > g.value_bytes_read);
    let after = db.space_report().unwrap();
    assert_eq!(after.exposed_garbage_bytes, 0);
    assert_eq!(after.referenced_value_bytes, before.referenced_value_bytes);
    assert_eq!(after.gc, g);
    assert_eq!(db.stats().gc, g);
    assert_eq!(db.stats().last_gc, Some(g.clone()));
    assert!(db.stats().to_text().contains("gc: 1 jobs"));
    // The collected file is gone; the output took its place.
    let files_after = value_files(&fs);
    assert_eq!(files_after.len(), 2);
    assert!(!files_after.contains(&files_before[0]));
    assert_eq!(
        before.value_file_bytes - after.value_file_bytes,
        g.bytes_reclaimed
    );
    check(&db, &model, "after GC");
    // Nothing more to collect.
    assert_eq!(db.gc_with_ratio(0.000_001).unwrap().jobs, 0);
    db.close().unwrap();

    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    check(&db, &model, "after reopen");
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    assert_eq!(db.space_report().unwrap().exposed_garbage_bytes, 0);
}

/// A handle whose logical file GC moved is resolved through the new file's
/// record index, which the block cache keeps: one disk read per value, as
/// before GC.
#[test]
fn a_moved_value_costs_one_disk_read() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    let model = half_garbage(&db);
    assert_eq!(db.gc_now().unwrap().records_kept, 250);
    let moved: Vec<usize> = (500..1000usize).filter(|i| i.is_multiple_of(2)).collect();
    // Warm the caches: sstable blocks, filters, and record index blocks.
    check(&db, &model, "warm-up");
    let reads = fault.count(FaultOp::Read);
    for &i in &moved {
        assert_eq!(db.get(&ReadOptions::new(), &k(i)).unwrap(), Some(v(i, 0)));
    }
    assert_eq!(fault.count(FaultOp::Read) - reads, moved.len() as u64);
}

#[test]
fn readers_keep_collected_files_until_they_let_go() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let model = half_garbage(&db);
    let collected = value_files(&fs)[0].clone();
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    assert_eq!(db.gc_now().unwrap().files_in, 1);
    // The iterator's Version still names the collected file.
    assert!(value_files(&fs).contains(&collected));
    let mut seen = 0;
    while it.valid() {
        let i: usize = std::str::from_utf8(&it.key()[3..])
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(it.value().unwrap(), v(i, model[&i]).as_slice());
        seen += 1;
        it.next().unwrap();
    }
    assert_eq!(seen, model.len());
    drop(it);
    assert!(!value_files(&fs).contains(&collected));
}

#[test]
fn values_a_snapshot_sees_are_not_garbage() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut model = BTreeMap::new();
    fill(&db, 0..1000, 0, &mut model);
    db.flush().unwrap();
    let old = model.clone();
    let snap = db.snapshot();
    fill(&db, 0..500, 1, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // Compaction kept the overwritten entries for the snapshot, so their
    // records are still referenced: nothing to collect.
    assert_eq!(db.space_report().unwrap().exposed_garbage_bytes, 0);
    assert_eq!(db.gc_with_ratio(0.000_001).unwrap().jobs, 0);
    let mut ro = ReadOptions::new();
    ro.snapshot = Some(&snap);
    for (&i, &round) in &old {
        assert_eq!(db.get(&ro, &k(i)).unwrap(), Some(v(i, round)));
    }
    drop(ro);
    drop(snap);
    // The next compaction through the keys drops the entries only the
    // snapshot needed (compact_range does not rewrite the last level by
    // itself; a flush into it does).
    fill(&db, 0..1, 2, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let g = db.gc_with_ratio(0.4).unwrap();
    assert_eq!((g.records_kept, g.records_dropped), (250, 250));
    check(&db, &model, "after GC");
}

#[test]
fn background_gc_keeps_garbage_below_the_threshold() {
    let fs = MemFs::new();
    let opts = Options {
        enable_gc: true,
        write_buffer_size: 256 << 10,
        value_file_size: 128 << 10,
        target_file_size_base: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    let mut model = BTreeMap::new();
    fill(&db, 0..1000, 0, &mut model);
    db.flush().unwrap();
    // Overlapping partial overwrites: every file keeps some live records,
    // so only GC (not the deletion of dead files) can reclaim the rest.
    for round in 1..6 {
        fill(&db, round * 150..round * 150 + 300, round, &mut model);
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(s.gc.jobs > 0, "{}", s.to_text());
    let r = db.space_report().unwrap();
    let records = r.referenced_value_bytes + r.exposed_garbage_bytes;
    // Every file is below the threshold once GC is idle, so the whole is.
    assert!(
        (r.exposed_garbage_bytes as f64) < 0.2 * records as f64,
        "{r:?}"
    );
    check(&db, &model, "after background GC");
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
}

/// Keys compaction found overwritten go to hot value files at the next
/// flush, the rest to cold ones; GC copies hot and cold records into
/// separate outputs.
#[test]
fn hot_and_cold_values_go_to_separate_files() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut model = BTreeMap::new();
    let records = |range: std::ops::Range<usize>, round: usize| -> u64 {
        range
            .filter(|i| i.is_multiple_of(2))
            .map(|i| record_len(&k(i), &v(i, round)))
            .sum()
    };
    fill(&db, 0..1000, 0, &mut model);
    db.flush().unwrap();
    fill(&db, 0..100, 1, &mut model);
    db.flush().unwrap();
    assert_eq!(db.stats().hot_value_file_bytes_written, 0);
    // Compaction drops the first versions of keys 0..100: they are hot.
    db.compact_range(None, None).unwrap();
    assert!(db.stats().drop_cache_usage > 0);
    let files = value_files(&fs).len();
    fill(&db, 0..200, 2, &mut model);
    db.flush().unwrap();
    assert_eq!(value_files(&fs).len(), files + 2, "one hot, one cold file");
    let hot = db.stats().hot_value_file_bytes_written;
    let expected = records(0..100, 2);
    // Records, plus the record index, properties and footer.
    assert!(
        hot > expected && hot < expected + (4 << 10),
        "{hot} {expected}"
    );
    db.compact_range(None, None).unwrap();
    fill(&db, 0..50, 3, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // Garbage in the first flush's (cold) file and in the hot file.
    let g = db.gc_with_ratio(0.01).unwrap();
    assert_eq!((g.jobs, g.files_in, g.files_out), (1, 2, 2), "{g:?}");
    check(&db, &model, "after GC");
    db.close().unwrap();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    check(&db, &model, "after reopen");
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
}

/// A GC job that fails before its commit (here: value files cannot be
/// read) changes nothing and does not stop writes: `gc_now` reports the
/// error, background GC leaves the file alone instead of retrying it for
/// ever, and once the fault is gone the file is collected.
#[test]
fn a_failed_gc_job_changes_nothing_and_does_not_poison() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    let mut model = half_garbage(&db);
    let garbage = db.space_report().unwrap().exposed_garbage_bytes;
    fault.fail(&[FaultOp::Read], Some(".vf"), 0, ErrorKind::Other, true);
    assert!(matches!(db.gc_now(), Err(cleave::Error::Io { .. })));
    assert_eq!(db.stats().gc.failed_jobs, 1);
    assert_eq!(db.stats().gc.jobs, 0);
    assert_eq!(db.space_report().unwrap().exposed_garbage_bytes, garbage);
    fill(&db, 1000..1010, 5, &mut model);
    db.close().unwrap();

    // In the background: the job fails once, and the file is then skipped.
    let opts = Options {
        enable_gc: true,
        ..options(Arc::new(fault.clone()))
    };
    let db = Db::open(DIR, opts.clone()).unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().gc.failed_jobs, 1);
    fill(&db, 1010..1020, 5, &mut model);
    fault.heal();
    check(&db, &model, "after the failed jobs");
    assert_eq!(db.gc_now().unwrap().jobs, 1);
    assert_eq!(db.space_report().unwrap().exposed_garbage_bytes, 0);
    db.close().unwrap();
    let db = Db::open(DIR, opts).unwrap();
    check(&db, &model, "after reopen");
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
}

/// Fails the database's `n`-th file operation from the start of a GC job
/// on, and every later one (a device going away), then crashes: the
/// reopened database must hold exactly the model, with the job either
/// applied whole or not at all, and no file left over.
#[test]
fn crash_at_every_io_step_of_a_gc_job() {
    let base = MemFs::new();
    let model = {
        let db = Db::open(DIR, options(Arc::new(base.clone()))).unwrap();
        let model = half_garbage(&db);
        db.close().unwrap();
        model
    };
    let mut steps = 0;
    for n in 0.. {
        let mem = base.crash_clone();
        let fault = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
        let garbage_before = db.space_report().unwrap().exposed_garbage_bytes;
        fault.fail(&FaultOp::ALL, None, n, ErrorKind::Other, true);
        let result = db.gc_now();
        let injected = fault.injected() > 0;
        let crashed = mem.crash_clone();
        assert!(
            injected || result.is_ok(),
            "step {n}: {result:?} without a fault"
        );
        // The crash happens here; the old instance's shutdown fails on
        // the dead device and changes nothing the clone holds.
        drop(db);

        let db = Db::open(DIR, options(Arc::new(crashed.clone()))).unwrap();
        check(&db, &model, &format!("step {n}"));
        let report = db.verify();
        assert!(report.is_ok(), "{report}");
        let r = db.space_report().unwrap();
        assert!(
            r.exposed_garbage_bytes == garbage_before || r.exposed_garbage_bytes == 0,
            "step {n}: neither before nor after the job: {r:?}"
        );
        // Orphan outputs of an unlogged job are removed by the open.
        db.gc_now().unwrap();
        let r = db.space_report().unwrap();
        assert!(r.other_bytes < 64, "step {n}: leftovers {r:?}");
        assert_eq!(r.exposed_garbage_bytes, 0);
        check(&db, &model, &format!("step {n}, collected after reopen"));
        if !injected {
            steps = n;
            break;
        }
    }
    // A job reads bitmaps, index and records, creates, writes and syncs
    // its output and the directory, logs the edit and removes its input.
    eprintln!("a GC job took {steps} I/O steps");
    assert!(steps >= 8, "only {steps} I/O steps");
}
