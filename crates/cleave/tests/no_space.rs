//! A full disk is a state, not a crash: on a disk of a fixed size
//! (`FaultFs::set_capacity`, which fails appends past it with ENOSPC after
//! writing what fits), the database turns read-only when a WAL append, a
//! value-log append, a flush or a manifest write finds no room; reads,
//! scans, snapshots and the reports go on; every write fails at once with
//! `Error::NoSpace`; and once there is room again the database takes
//! writes by itself (or on `Db::resume`), losing nothing acknowledged. A
//! compaction or GC job that finds no room is postponed, and GC, which
//! frees space, goes first while the disk is short. The same on a real
//! file system: `tests/full_disk.rs`.

#[path = "common/faults.rs"]
mod setup;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cleave::vfs::{FaultFs, Fs, MemFs};
use cleave::{Db, Error, NoSpaceCause, Options, ReadOptions, WriteOptions, WriteState};

use setup::*;

/// Long enough for any background work of these small databases to end.
const PATIENCE: Duration = Duration::from_secs(10);

fn full_disk_options(fs: Arc<dyn Fs>) -> Options {
    Options {
        no_space_poll_interval: Duration::from_millis(10),
        ..options(fs)
    }
}

/// Waits (bounded) until `db` takes writes again.
fn wait_until_writable(db: &Db, ctx: &str) {
    let start = Instant::now();
    while db.write_state() != WriteState::ReadWrite {
        assert!(
            start.elapsed() < PATIENCE,
            "{ctx}: still {} after {PATIENCE:?}\n{}",
            db.write_state(),
            db.stats().to_text()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Asserts `err` is a full disk naming a file of the database.
fn assert_device_full(err: &Error, ctx: &str) {
    match err {
        Error::NoSpace {
            path,
            cause: NoSpaceCause::Device(source),
            ..
        } => {
            assert!(path.starts_with(DIR), "{ctx}: {err}");
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{ctx}");
            assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
        }
        _ => panic!("{ctx}: expected a full disk, got {err:?}"),
    }
}

/// A disk holding what `DIR` holds now and `spare` bytes more.
fn fill_disk_to(fs: &FaultFs, spare: u64) {
    let used: u64 = fs
        .list(Path::new(DIR))
        .unwrap()
        .iter()
        .map(|n| {
            fs.open(&Path::new(DIR).join(n), Default::default())
                .map_or(0, |f| f.len())
        })
        .sum();
    fs.set_capacity(Path::new(DIR), Some(used + spare)).unwrap();
}

/// Writes round `round` of keys `0..n` (cycling) with `opts` until one
/// fails; records what was acknowledged, and the failed write as maybe.
fn write_until_full(
    db: &Db,
    oracle: &mut Oracle,
    n: usize,
    round: usize,
    opts: &WriteOptions,
) -> Error {
    for j in 0..1_000_000 {
        let i = j % n;
        let r = round + j / n;
        match db.put(opts, &k(i), &v(i, r)) {
            Ok(()) => oracle.ack(i, r),
            Err(e) => {
                oracle.maybe(i, r);
                return e;
            }
        }
    }
    panic!("the disk never filled");
}

/// Everything that reads works on a read-only database, and every write
/// fails at once with the full disk.
fn check_read_only(db: &Db, oracle: &Oracle, ctx: &str) {
    assert!(
        matches!(db.write_state(), WriteState::NoSpace { .. }),
        "{ctx}: {}",
        db.write_state()
    );
    check(db, oracle, ctx);
    let snapshot = db.snapshot();
    let mut r = ReadOptions::new();
    r.snapshot = Some(&snapshot);
    assert_eq!(
        db.get(&r, &k(1)).unwrap(),
        db.get(&ReadOptions::new(), &k(1)).unwrap()
    );
    drop(snapshot);
    let stats = db.stats();
    assert!(stats.to_text().contains("read-only"), "{ctx}");
    assert!(stats.no_space_stops >= 1, "{ctx}");
    db.space_report().unwrap();
    let report = db.verify();
    assert!(report.is_ok(), "{ctx}: {:?}", report.problems);
    for opts in [SYNC, ASYNC, NO_WAL] {
        let err = db.put(&opts, b"refused", b"x").unwrap_err();
        assert_device_full(&err, ctx);
    }
    assert_device_full(&db.delete(&SYNC, &k(0)).unwrap_err(), ctx);
    assert_device_full(&db.flush().unwrap_err(), ctx);
}

/// The disk fills under each kind of write: synced and not, separated
/// values and inline ones. The database turns read-only, serves reads,
/// takes writes again by itself once the disk grows, and holds every
/// acknowledged write across a reopen and a power loss.
#[test]
fn a_full_disk_makes_the_database_read_only_until_there_is_room() {
    for (opts, what) in [(SYNC, "sync"), (ASYNC, "no sync")] {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, full_disk_options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = Oracle::default();
        oracle.put(&db, 0..100, 0, &SYNC);
        fill_disk_to(&fs, 256 << 10);
        let err = write_until_full(&db, &mut oracle, 300, 1, &opts);
        assert_device_full(&err, what);
        // Not a byte left: nothing resumes during the checks.
        fs.fill();
        check_read_only(&db, &oracle, what);

        // Freeing space ends it, with no call.
        fs.set_capacity(Path::new(DIR), None).unwrap();
        wait_until_writable(&db, what);
        assert_eq!(db.stats().resumes, 1);
        oracle.put(&db, 0..50, 1000, &opts);
        db.flush().unwrap();
        check(&db, &oracle, what);
        db.close().unwrap();
        for (fs, how) in [
            (Arc::new(mem.clone()) as Arc<dyn Fs>, "reopened"),
            (crashed(&mem), "after a power loss"),
        ] {
            let db = Db::open(DIR, options(fs)).unwrap();
            check(&db, &oracle, &format!("{what}, {how}"));
            let report = db.verify();
            assert!(report.is_ok(), "{:?}", report.problems);
        }
    }
}

/// `Db::resume` takes writes again at once, without waiting for the next
/// look at the free space; with no room it fails and the database stays
/// read-only.
#[test]
fn resume_takes_writes_again_once_there_is_room() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let opts = Options {
        // No look at the free space during the test.
        no_space_poll_interval: Duration::from_secs(3600),
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..50, 0, &SYNC);
    fill_disk_to(&fs, 128 << 10);
    let err = write_until_full(&db, &mut oracle, 200, 1, &SYNC);
    assert_device_full(&err, "filled");
    fs.fill();
    assert_device_full(&db.resume().unwrap_err(), "resume with no room");
    check_read_only(&db, &oracle, "after a failed resume");
    fs.set_capacity(Path::new(DIR), None).unwrap();
    db.resume().unwrap();
    assert_eq!(db.write_state(), WriteState::ReadWrite);
    db.resume().unwrap();
    oracle.put(&db, 0..50, 500, &SYNC);
    check(&db, &oracle, "resumed");
    db.close().unwrap();
    let db = Db::open(DIR, options(crashed(&mem))).unwrap();
    check(&db, &oracle, "after a power loss");
}

/// Concurrent writers, synced and not, fill the disk while flushes,
/// compactions and GC run. Every write either is acknowledged or fails
/// with the full disk; after the disk grows the database resumes, and
/// every acknowledged write is there, after a reopen and a power loss too.
#[test]
fn concurrent_writers_fill_the_disk_then_resume() {
    const THREADS: usize = 4;
    const KEYS_PER_THREAD: usize = 150;
    for sync in [true, false] {
        let ctx = format!("sync {sync}");
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let opts = Options {
            enable_gc: true,
            gc_garbage_ratio: 0.3,
            ..full_disk_options(Arc::new(fs.clone()))
        };
        let db = Db::open(DIR, opts).unwrap();
        let wo = WriteOptions {
            sync,
            disable_wal: false,
        };
        fill_disk_to(&fs, 1 << 20);
        let oracles: Vec<Oracle> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let db = &db;
                    s.spawn(move || {
                        let mut oracle = Oracle::default();
                        let keys = t * KEYS_PER_THREAD..(t + 1) * KEYS_PER_THREAD;
                        let mut round = 0;
                        loop {
                            for i in keys.clone() {
                                match db.put(&wo, &k(i), &v(i, round)) {
                                    Ok(()) => oracle.ack(i, round),
                                    Err(e) => {
                                        assert_device_full(&e, "a writer");
                                        oracle.maybe(i, round);
                                        return oracle;
                                    }
                                }
                            }
                            round += 1;
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut oracle = Oracle::default();
        for o in &oracles {
            oracle.merge(o);
        }
        assert!(oracle.acked_len() > 0, "{ctx}");
        // Not a byte left: GC frees none, nothing resumes during the checks.
        fs.fill();
        db.wait_for_compactions().unwrap_err();
        check_read_only(&db, &oracle, &ctx);
        fs.set_capacity(Path::new(DIR), None).unwrap();
        wait_until_writable(&db, &ctx);
        oracle.put(&db, 0..20, 900, &wo);
        db.wait_for_compactions().unwrap();
        check(&db, &oracle, &ctx);
        db.close().unwrap();
        for fs in [Arc::new(mem.clone()) as Arc<dyn Fs>, crashed(&mem)] {
            let db = Db::open(DIR, options(fs)).unwrap();
            check(&db, &oracle, &format!("{ctx}, reopened"));
            assert_no_orphans(&db, &ctx);
            let report = db.verify();
            assert!(report.is_ok(), "{ctx}: {:?}", report.problems);
        }
    }
}

/// A compaction that finds no room for its output is postponed: the
/// database keeps taking writes, `compact_range` says why it could not,
/// and the compaction runs once there is room.
#[test]
fn a_compaction_without_room_is_postponed_not_fatal() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let opts = Options {
        // Only the compactions this test asks for.
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 100,
        range_merge_sorted_runs: 0,
        ..full_disk_options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    let mut oracle = Oracle::default();
    for round in 0..4 {
        oracle.put(&db, 0..200, round, &SYNC);
        db.flush().unwrap();
    }
    // Room for a few writes, not for a copy of the tree.
    fill_disk_to(&fs, 8 << 10);
    let err = db.compact_range(None, None).unwrap_err();
    assert_device_full(&err, "compaction");
    assert_eq!(db.write_state(), WriteState::ReadWrite);
    assert!(db.stats().jobs_postponed >= 1);
    oracle.put(&db, 0..5, 10, &SYNC);
    check(&db, &oracle, "postponed");
    fs.set_capacity(Path::new(DIR), None).unwrap();
    db.compact_range(None, None).unwrap();
    check(&db, &oracle, "compacted");
    assert_no_orphans(&db, "compacted");
    db.close().unwrap();
    let db = Db::open(DIR, options(crashed(&mem))).unwrap();
    check(&db, &oracle, "after a power loss");
}

/// GC frees space, so it runs first while the disk is full, at a lowered
/// garbage ratio, with jobs that fit in the little room left: after an
/// operator frees a few blocks (less than resuming needs), GC's jobs free
/// the rest and the database takes writes again by itself.
#[test]
fn gc_frees_the_room_a_full_disk_needs_to_resume() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let opts = Options {
        enable_gc: true,
        // Half-dead files are left alone while there is room.
        gc_garbage_ratio: 0.9,
        range_merge_sorted_runs: 0,
        ..full_disk_options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..600, 0, &SYNC);
    db.flush().unwrap();
    // Half of the separated values (even keys) die: exact garbage once
    // compacted, half of each value file.
    for i in (0..600).step_by(4) {
        db.put(&SYNC, &k(i), &v(i, 1)).unwrap();
        oracle.ack(i, 1);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let jobs_before = db.stats().gc.jobs;
    fill_disk_to(&fs, 32 << 10);
    let err = write_until_full(&db, &mut oracle, 600, 2, &SYNC);
    assert_device_full(&err, "filled");
    // A little room: less than a resumption needs (a memtable's flush, a
    // memtable's room, a margin), enough for a GC job's copy.
    let free = fs.free_space(Path::new(DIR)).unwrap();
    assert!(free < 16 << 10, "{free} bytes free on a full disk");
    fs.add_capacity(24 << 10);
    wait_until_writable(&db, "GC made room");
    let stats = db.stats();
    assert!(stats.gc.jobs > jobs_before, "{}", stats.to_text());
    oracle.put(&db, 0..10, 50, &SYNC);
    check(&db, &oracle, "resumed");
    db.close().unwrap();
    let db = Db::open(DIR, options(crashed(&mem))).unwrap();
    check(&db, &oracle, "after a power loss");
}
