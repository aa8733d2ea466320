//! Crashes: torn last writes (WAL, manifest, value file), loss of unsynced
//! data (async WAL, writes without the WAL), and power losses in the middle
//! of flushes, compactions and GC, at every I/O step and while background
//! jobs run. The reopened database holds every acknowledged write with
//! its value, no value never written, and no leftover file.

#[path = "common/faults.rs"]
mod setup;

use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::{Db, ManualClock, Options, ReadOptions};

use setup::*;

#[test]
fn crash_keeps_synced_writes_and_drops_only_unsynced_ones() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..500, 0, &SYNC);
    for i in 500..1000 {
        db.put(&ASYNC, &k(i), &v(i, 0)).unwrap();
        oracle.maybe(i, 0);
    }
    let crashed = fs.crash_clone();
    drop(db);
    let db = Db::open(DIR, options(Arc::new(crashed))).unwrap();
    check(&db, &oracle, "after the crash");
    // Unsynced writes may be lost, but only as a suffix.
    let survivors: Vec<bool> = (500..1000)
        .map(|i| db.get(&ReadOptions::new(), &k(i)).unwrap().is_some())
        .collect();
    let first_lost = survivors.iter().position(|s| !s).unwrap_or(survivors.len());
    assert!(
        survivors[first_lost..].iter().all(|s| !s),
        "a gap in the recovered writes"
    );
}

#[test]
fn torn_wal_tail_recovers_the_prefix() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..49, 0, &SYNC);
    db.put(&SYNC, &k(49), &v(49, 0)).unwrap();
    let crashed = fs.crash_clone_keeping(|n| n / 2);
    drop(db);
    // Cut the newest WAL in the middle of its last record.
    let wal = newest(&crashed, "wal");
    let len = crashed.file_len(&wal).unwrap();
    crashed.truncate(&wal, len - 3);
    let db = Db::open(DIR, options(Arc::new(crashed))).unwrap();
    check(&db, &oracle, "torn WAL");
    assert_eq!(db.get(&ReadOptions::new(), &k(49)).unwrap(), None);
}

/// The files a flush would write that `before` does not hold.
fn new_files(mem: &MemFs, before: &[PathBuf], ext: &str) -> Vec<PathBuf> {
    files(mem, ext)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect()
}

/// A manifest append that lands in part (a short write), then a crash
/// that keeps any part of it: the reopen drops the torn edit, falls back
/// to the one before, removes the files only the torn edit named, and
/// replays the WAL it did not retire.
#[test]
fn torn_manifest_tail_falls_back_to_the_previous_edit() {
    let mut total = 0;
    for keep in [0, 3, 2, 1] {
        let ctx = format!("keeping 1/{keep} of the unsynced bytes");
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = Oracle::default();
        oracle.put(&db, 0..40, 0, &SYNC);
        db.flush().unwrap();
        oracle.put(&db, 40..80, 0, &SYNC);
        let (tables, values) = (files(&mem, "sst"), files(&mem, "vf"));
        let manifest = newest(&mem, "MANIFEST");
        let manifest_len = mem.file_len(&manifest).unwrap();
        fs.fail_torn(
            &[FaultOp::Append],
            Some("MANIFEST"),
            0,
            ErrorKind::Other,
            true,
        );
        assert_poisoned(&db.flush().unwrap_err(), "MANIFEST", &ctx);
        assert!(mem.file_len(&manifest).unwrap() > manifest_len, "{ctx}");
        let orphans = [
            new_files(&mem, &tables, "sst"),
            new_files(&mem, &values, "vf"),
        ]
        .concat();
        assert!(!orphans.is_empty(), "{ctx}");
        let crashed = if keep == 0 {
            mem.crash_clone_keeping(|_| 0)
        } else {
            mem.crash_clone_keeping(|n| n / keep)
        };
        drop(db);
        total += fs.injected();
        let db = Db::open(DIR, options(Arc::new(crashed.clone()))).unwrap();
        check(&db, &oracle, &ctx);
        assert_no_orphans(&db, &ctx);
        for f in &orphans {
            assert!(!crashed.exists(f).unwrap(), "{ctx}: {f:?} left");
        }
        assert!(
            !crashed.exists(&manifest).unwrap(),
            "{ctx}: torn manifest kept"
        );
        // The recovered database writes and recovers again.
        oracle.put(&db, 80..100, 1, &SYNC);
        db.flush().unwrap();
        drop(db);
        let db = Db::open(DIR, options(Arc::new(crashed.crash_clone()))).unwrap();
        check(&db, &oracle, &ctx);
    }
    eprintln!("faults injected by torn_manifest_tail_falls_back_to_the_previous_edit: {total}");
}

/// A value file torn by a short write in a flush, which the flush cannot
/// remove either: the flush fails (the database turns read-only: the disk
/// is full), and the reopen removes the torn file and recovers its values
/// from the WAL.
#[test]
fn torn_value_file_in_a_flush_is_removed_on_reopen() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..40, 0, &SYNC);
    let values = files(&mem, "vf");
    fs.fail_torn(
        &[FaultOp::Append, FaultOp::Remove],
        Some(".vf"),
        0,
        ErrorKind::StorageFull,
        true,
    );
    assert_io(
        &db.flush().unwrap_err(),
        ".vf",
        ErrorKind::StorageFull,
        "flush",
    );
    let torn = new_files(&mem, &values, "vf");
    assert_eq!(torn.len(), 1, "{torn:?}");
    drop(db);
    fs.heal();
    for (fs, what) in [
        (Arc::new(mem.clone()) as Arc<dyn Fs>, "live"),
        (crashed(&mem), "crash"),
    ] {
        let db = Db::open(DIR, options(fs.clone())).unwrap();
        check(&db, &oracle, what);
        assert_no_orphans(&db, what);
        assert!(!fs.exists(&torn[0]).unwrap(), "{what}: torn file left");
        db.close().unwrap();
    }
    injected(&fs, "torn_value_file_in_a_flush_is_removed_on_reopen");
}

/// Writes without the WAL live in the memtable until a flush: a crash may
/// lose those since the last flush, never those a completed `flush()`
/// covered, nor synced writes made after them; `close()` flushes them.
#[test]
fn crash_loses_only_unlogged_writes_since_the_last_flush() {
    let mem = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..100, 0, &NO_WAL);
    db.flush().unwrap();
    for i in (0..20).chain(100..150) {
        db.put(&NO_WAL, &k(i), &v(i, 1)).unwrap();
        oracle.maybe(i, 1);
    }
    oracle.put(&db, 150..160, 1, &SYNC);
    let db2 = Db::open(DIR, options(crashed(&mem))).unwrap();
    check(&db2, &oracle, "after a crash");
    db2.close().unwrap();

    // A clean close flushes them.
    db.close().unwrap();
    for i in (0..20).chain(100..150) {
        oracle.ack(i, 1);
    }
    let db = Db::open(DIR, options(crashed(&mem))).unwrap();
    check(&db, &oracle, "after close and a crash");
}

/// Opens each crash image (a power loss, one that keeps part of the
/// unsynced bytes, the files as the dead process left them) and checks it.
fn check_images(images: [MemFs; 3], oracle: &Oracle, ctx: &str) {
    for (image, what) in images
        .into_iter()
        .zip(["power loss", "torn", "process crash"])
    {
        let ctx = format!("{ctx}, {what}");
        let db = Db::open(DIR, uncached_options(Arc::new(image))).unwrap();
        check(&db, oracle, &ctx);
        db.verify_checksums().unwrap();
        assert_no_orphans(&db, &ctx);
    }
}

/// The end of step `n` of a crash test, whose job returned `result` on
/// the database `db` kept open meanwhile: an error is one the injected
/// faults explain, and the three crash images of `mem` (taken before `db`
/// closes) each hold exactly the oracle. Returns the faults injected; if
/// none, the job ran whole and the test has its last step.
fn step_recovers(
    name: &str,
    n: u64,
    fs: &FaultFs,
    mem: &MemFs,
    result: cleave::Result<()>,
    db: impl Sized,
    oracle: &Oracle,
) -> u64 {
    let injected = fs.injected();
    if let Err(e) = &result {
        assert!(
            injected > 0 && matches!(e, cleave::Error::Io { .. } | cleave::Error::Poisoned(_)),
            "{name} step {n}: {e:?}"
        );
    }
    let power_loss = mem.crash_clone();
    let torn = mem.crash_clone_keeping(|n| n / 2);
    drop(db);
    check_images(
        [power_loss, torn, mem.clone()],
        oracle,
        &format!("{name} step {n}"),
    );
    injected
}

/// Runs `step` for n = 0, 1, … until a step injects no fault (its job ran
/// whole); `step` returns the faults it injected. Returns their sum.
fn every_step(name: &str, mut step: impl FnMut(u64) -> u64) -> u64 {
    let mut total = 0;
    for n in 0.. {
        let injected = step(n);
        if injected == 0 {
            assert!(n >= 5, "{name}: only {n} I/O steps");
            break;
        }
        total += injected;
    }
    eprintln!("faults injected by {name}: {total}");
    total
}

/// Fails every file operation from the `n`-th on (a device going away; a
/// failing append lands half its bytes) while `job` runs, for each `n`
/// until the job completes untouched, and crashes: by a power loss, by a
/// power loss that keeps part of the unsynced bytes, and by the process
/// dying (every written byte stays). Each reopened database holds exactly
/// the oracle and no leftover. Returns the faults injected.
fn crash_at_every_step(
    name: &str,
    opts: fn(Arc<dyn Fs>) -> Options,
    prepare: impl Fn(&Db) -> Oracle,
    job: impl Fn(&Db) -> cleave::Result<()>,
) -> u64 {
    every_step(name, |n| {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, opts(Arc::new(fs.clone()))).unwrap();
        let oracle = prepare(&db);
        fs.fail_torn(&FaultOp::ALL, None, n, ErrorKind::Other, true);
        let result = job(&db);
        step_recovers(name, n, &fs, &mem, result, db, &oracle)
    })
}

#[test]
fn crash_at_every_io_step_of_a_flush() {
    crash_at_every_step(
        "crash_at_every_io_step_of_a_flush",
        uncached_options,
        |db| {
            let mut oracle = Oracle::default();
            oracle.put(db, 0..60, 0, &SYNC);
            oracle
        },
        Db::flush,
    );
}

/// The compaction also re-separates values (correlated compaction): with
/// at most two value files per output sstable, it rewrites the values of
/// all but the file it holds most of into a new value file, which a crash
/// at any step must leave either installed or removed.
#[test]
fn crash_at_every_io_step_of_a_compaction() {
    crash_at_every_step(
        "crash_at_every_io_step_of_a_compaction",
        |fs| Options {
            max_value_file_refs: 2,
            ..uncached_options(fs)
        },
        |db| {
            let mut oracle = Oracle::default();
            for round in 0..3 {
                oracle.put(db, round * 30..round * 30 + 60, round, &SYNC);
                db.flush().unwrap();
            }
            oracle
        },
        |db| {
            db.compact_range(None, None)?;
            let reseparated = db.stats().compaction_values_reseparated;
            assert!(reseparated > 0, "the compaction re-separated no value");
            Ok(())
        },
    );
}

thread_local! {
    /// The clock of `expiring_options`: each test thread's own.
    static CLOCK: Arc<ManualClock> = Arc::new(ManualClock::new(EXPIRY_T0));
}

/// Long past by the system clock, which the crash images are opened with.
const EXPIRY_T0: u64 = 1_000_000_000_000;

fn expiring_options(fs: Arc<dyn Fs>) -> Options {
    Options {
        clock: CLOCK.with(|c| c.clone()),
        ..uncached_options(fs)
    }
}

/// A compaction that drops expired entries over older versions in the
/// last level, their values unread: a crash at any step leaves the keys
/// absent, whether it installed the compaction or not.
#[test]
fn crash_at_every_io_step_of_a_compaction_that_expires() {
    crash_at_every_step(
        "crash_at_every_io_step_of_a_compaction_that_expires",
        expiring_options,
        |db| {
            CLOCK.with(|c| c.set(EXPIRY_T0));
            let mut oracle = Oracle::default();
            oracle.put(db, 0..90, 0, &SYNC);
            db.flush().unwrap();
            db.compact_range(None, None).unwrap();
            for i in 0..90 {
                let at = if i < 60 { EXPIRY_T0 + 1000 } else { u64::MAX };
                db.put_with_expiry(&SYNC, &k(i), &v(i, 1), at).unwrap();
                if i < 60 {
                    oracle.forget(i);
                } else {
                    oracle.ack(i, 1);
                }
            }
            db.flush().unwrap();
            db.wait_for_compactions().unwrap();
            CLOCK.with(|c| c.set(EXPIRY_T0 + 1000));
            oracle
        },
        |db| {
            let before = db.stats().value_reads;
            db.compact_range(None, None)?;
            let s = db.stats();
            assert!(s.expired_entries >= 60, "{} expired", s.expired_entries);
            assert_eq!(s.value_reads, before, "values read to expire them");
            Ok(())
        },
    );
}

/// A range merge, and the push-down before it, run by the background
/// thread of a reopened database once writes pause (at once here): a
/// crash at any I/O step of the open, the push-down or the merges leaves
/// every acknowledged write readable and no orphan. The data set is
/// scattered first with merges off: three overlapping rounds compacted
/// into the last level (three runs per table), then an L0 file.
#[test]
fn crash_at_every_io_step_of_a_range_merge() {
    let name = "crash_at_every_io_step_of_a_range_merge";
    let base = MemFs::new();
    let db = Db::open(DIR, uncached_options(Arc::new(base.clone()))).unwrap();
    let mut oracle = Oracle::default();
    for round in 0..3 {
        oracle.put(&db, round * 30..round * 30 + 60, round, &SYNC);
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    oracle.put(&db, 40..100, 3, &SYNC);
    db.flush().unwrap();
    db.close().unwrap();
    let merging = |fs: FaultFs| Options {
        range_merge_sorted_runs: 1,
        range_merge_idle: Duration::ZERO,
        // One pool thread (and the flush thread, idle here): the same I/O
        // steps in every run.
        max_background_jobs: 1,
        ..uncached_options(Arc::new(fs))
    };
    every_step(name, |n| {
        let mem = base.crash_clone();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.fail_torn(&FaultOp::ALL, None, n, ErrorKind::Other, true);
        let (db, result) = match Db::open(DIR, merging(fs.clone())).and_then(|db| {
            db.wait_for_compactions()?;
            Ok(db)
        }) {
            Ok(db) => (Some(db), Ok(())),
            Err(e) => (None, Err(e)),
        };
        if let Some(db) = db.as_ref().filter(|_| fs.injected() == 0) {
            assert!(db.stats().range_merges > 0, "{name}: no range merge ran");
            assert_eq!(
                db.property("cleave.num-files-at-level0").unwrap(),
                "0",
                "{name}: the L0 file was not moved down"
            );
        }
        step_recovers(name, n, &fs, &mem, result, db, &oracle)
    });
}

/// GC's own crash test (tests/gc.rs) fails whole operations; here its
/// appends tear too, and the process-crash image keeps the torn bytes.
#[test]
fn crash_at_every_io_step_of_a_gc_job() {
    crash_at_every_step(
        "crash_at_every_io_step_of_a_gc_job",
        uncached_options,
        with_garbage,
        |db| db.gc_with_ratio(0.01).map(drop),
    );
}

/// The same for an open: it replays the WAL into L0 sstables, starts a new
/// WAL and manifest, points CURRENT at it and removes what the old state
/// no longer needs. A power loss at any of those steps leaves a database
/// the next open recovers whole.
#[test]
fn crash_at_every_io_step_of_an_open() {
    let base = MemFs::new();
    let db = Db::open(DIR, uncached_options(Arc::new(base.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..100, 0, &SYNC);
    db.flush().unwrap();
    oracle.put(&db, 50..250, 1, &SYNC);
    // The last writes are in the WAL only.
    let image = base.crash_clone();
    drop(db);
    let mut total = 0;
    for n in 0.. {
        let mem = image.crash_clone();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        fs.fail_torn(&FaultOp::ALL, None, n, ErrorKind::Other, true);
        let opened = Db::open(DIR, uncached_options(Arc::new(fs.clone())));
        let injected = fs.injected() > 0;
        if let Err(e) = &opened {
            assert!(
                injected && matches!(e, cleave::Error::Io { .. }),
                "step {n}: {e:?}"
            );
        }
        let power_loss = mem.crash_clone();
        let torn = mem.crash_clone_keeping(|n| n / 2);
        drop(opened);
        total += fs.injected();
        check_images([power_loss, torn, mem], &oracle, &format!("open step {n}"));
        if !injected {
            assert!(n >= 10, "only {n} I/O steps");
            break;
        }
    }
    eprintln!("faults injected by crash_at_every_io_step_of_an_open: {total}");
}

/// Power losses while flushes, compactions (re-separating values, with no
/// budget) and GC run in the background: each crash image holds every write up to the
/// last synced one and maybe some later ones, whatever the jobs were
/// doing.
#[test]
fn crash_while_background_jobs_run() {
    crash_while_jobs_run(0);
}

/// The same under a space budget near the live data (about 80 KB of it):
/// compactions pushing writes down to expose garbage, GC jobs collecting
/// what the budget needs, and writers paced and stopped for space.
#[test]
fn crash_while_budget_driven_jobs_run() {
    crash_while_jobs_run(224 << 10);
}

fn crash_while_jobs_run(budget: u64) {
    let mem = MemFs::new();
    let opts = |fs: Arc<dyn Fs>| Options {
        enable_gc: true,
        gc_garbage_ratio: 0.1,
        max_background_jobs: 4,
        max_value_file_refs: 3,
        space_budget_bytes: budget,
        ..options(fs)
    };
    let db = Db::open(DIR, opts(Arc::new(mem.clone()))).unwrap();
    let mut oracle = Oracle::default();
    // Writes since the last synced one: a crash may lose them.
    let mut pending: Vec<(usize, usize)> = Vec::new();
    let mut images = Vec::new();
    for n in 0..4000usize {
        let (i, round) = ((n * 7919) % 300, n / 300);
        let sync = n % 10 == 9;
        db.put(if sync { &SYNC } else { &ASYNC }, &k(i), &v(i, round))
            .unwrap();
        pending.push((i, round));
        if sync {
            for (i, round) in pending.drain(..) {
                oracle.ack(i, round);
            }
        }
        if n % 250 == 124 {
            let mut expected = oracle.clone();
            for &(i, round) in &pending {
                expected.maybe(i, round);
            }
            images.push((mem.crash_clone(), expected, n));
        }
    }
    db.wait_for_compactions().unwrap();
    let stats = db.stats();
    assert!(
        stats.flushes > 10 && stats.compactions > 0,
        "{}",
        stats.to_text()
    );
    assert!(stats.gc.jobs > 0, "{}", stats.to_text());
    // While space is short compactions leave values to GC.
    if budget == 0 {
        assert!(
            stats.compaction_values_reseparated > 0,
            "{}",
            stats.to_text()
        );
    } else {
        assert!(stats.budget_stall_micros > 0, "{}", stats.to_text());
        assert_eq!(stats.budget_impossible, 0, "{}", stats.to_text());
    }
    drop(db);
    for (image, expected, n) in images {
        let db = Db::open(DIR, opts(Arc::new(image.clone()))).unwrap();
        let ctx = format!("crash after write {n}");
        check(&db, &expected, &ctx);
        db.verify_checksums().unwrap();
        assert_no_orphans_in(&db, &image, &ctx);
    }
}
