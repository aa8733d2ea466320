//! Batched reads end to end, on a real directory: a scan's value prefetch
//! and a GC job read their batches through io_uring, or with `pread` when
//! `OsFs::with_pread` forces the fallback, and return the same data,
//! buffered or with `O_DIRECT`; the database reports which way it reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use cleave::vfs::{Fs, OsFs, ReadBatchMode};
use cleave::{Db, Options, ReadOptions, WriteOptions};

mod separated;
use separated::{k, record_len, v};

/// Keys of the scenario; the even ones have separated values.
const KEYS: usize = 2000;
/// Flushes of the first round: flush f holds keys f, f + FILES, …, so
/// neighbouring keys live in different value files, as after random writes
/// (only the flushes of even keys write a value file).
const FILES: usize = 10;

fn options(fs: OsFs, direct: bool) -> Options {
    Options {
        create_if_missing: true,
        fs: Arc::new(fs),
        write_buffer_size: 4 << 20,
        min_value_size: 512,
        cache_values: false,
        enable_gc: false,
        use_direct_reads: direct,
        ..Options::default()
    }
}

/// A directory on a disk: `O_DIRECT` needs one (tmpfs refuses it).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// Every key, forward, with its value; returns the value reads it took.
fn scan(db: &Db, model: &BTreeMap<usize, usize>, ctx: &str) -> u64 {
    let before = db.stats().value_reads;
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    for (&i, &round) in model {
        assert!(it.valid(), "{ctx}: scan ended before key {i}");
        assert_eq!(it.key(), &k(i)[..], "{ctx}");
        assert_eq!(it.value().unwrap(), &v(i, round)[..], "{ctx}: key {i}");
        it.next().unwrap();
    }
    assert!(!it.valid(), "{ctx}");
    db.stats().value_reads - before
}

fn scan_and_gc(fs: OsFs, direct: bool) {
    let tmp = disk_dir();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, options(fs, direct)).unwrap();
    let mut model = BTreeMap::new();
    for f in 0..FILES {
        for i in (f..KEYS).step_by(FILES) {
            db.put(&WriteOptions::default(), &k(i), &v(i, 0)).unwrap();
            model.insert(i, 0);
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let separated = (KEYS / 2) as u64;
    // Prefetch reads the records of one file near each other together.
    let reads = scan(&db, &model, "first round");
    assert!(
        reads < separated / 2,
        "{reads} reads for {separated} values"
    );

    // Half the keys again: half of every first-round file is garbage, and
    // GC reads the other half in batches of live runs.
    for i in 0..KEYS / 2 {
        db.put(&WriteOptions::default(), &k(i), &v(i, 1)).unwrap();
        model.insert(i, 1);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let g = db.gc_with_ratio(0.1).unwrap();
    assert_eq!(g.files_in, FILES as u64 / 2, "{g:?}");
    assert_eq!(g.records_kept, separated / 2, "{g:?}");
    let live: u64 = (KEYS / 2..KEYS)
        .step_by(2)
        .map(|i| record_len(&k(i), &v(i, 0)))
        .sum();
    assert_eq!(g.value_bytes_read, live, "{g:?}");
    scan(&db, &model, "after GC");
    for (&i, &round) in &model {
        assert_eq!(
            db.get(&ReadOptions::new(), &k(i)).unwrap(),
            Some(v(i, round)),
            "key {i}"
        );
    }
    db.close().unwrap();

    let db = Db::open(&dir, options(fs, direct)).unwrap();
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    scan(&db, &model, "after reopen");
}

#[test]
fn scan_and_gc_through_io_uring() {
    scan_and_gc(OsFs::new(), false);
    scan_and_gc(OsFs::new(), true);
}

#[test]
fn scan_and_gc_with_pread_forced() {
    scan_and_gc(OsFs::with_pread(), false);
    scan_and_gc(OsFs::with_pread(), true);
}

/// `cleave.batch-reads` (and a line of `cleave.stats`) say how batches are
/// read: `pread` when forced, else `io_uring` wherever this process can
/// open a ring and `CLEAVE_IO_URING=0` does not turn it off.
#[test]
fn the_database_reports_how_it_reads_batches() {
    let tmp = disk_dir();
    let open = |fs: OsFs, name: &str| {
        let db = Db::open(tmp.path().join(name), options(fs, false)).unwrap();
        let mode = db.property("cleave.batch-reads").unwrap();
        let stats = db.property("cleave.stats").unwrap();
        assert!(
            stats.contains(&format!("batched reads: {mode}\n")),
            "{stats}"
        );
        mode
    };
    assert_eq!(open(OsFs::with_pread(), "pread"), "pread");
    assert_eq!(OsFs::with_pread().read_batch_mode(), ReadBatchMode::Pread);

    let turned_off = std::env::var_os("CLEAVE_IO_URING").is_some_and(|v| v == "0");
    let ring = io_uring::IoUring::new(8).is_ok();
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .is_ok_and(|s| s.trim() == "2");
    let expected = if ring && !turned_off && !disabled {
        "io_uring"
    } else {
        "pread"
    };
    assert_eq!(open(OsFs::new(), "default"), expected);
    assert_eq!(OsFs::new().read_batch_mode().name(), expected);
}
