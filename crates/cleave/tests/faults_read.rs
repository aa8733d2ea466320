//! Read faults: EIO on an sstable block (point read, iterator, compaction),
//! on a value-file record (point read, iterator value), and on CURRENT,
//! the manifest and a WAL at open. A foreground read fails with an I/O
//! error naming the file and leaves the database writable; a compaction
//! that cannot read its input poisons it (as RocksDB's default
//! `paranoid_checks` does); an open that cannot read fails and changes
//! nothing. After the fault heals, or after a reopen, every acknowledged
//! write reads back.

#[path = "common/faults.rs"]
mod setup;

use std::io::ErrorKind;
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::{Db, Options, ReadOptions};

use setup::*;

/// 400 keys in sstables and value files, 20 more in the memtable.
fn populated(fs: Arc<dyn Fs>) -> (Db, Oracle) {
    let db = Db::open(DIR, uncached_options(fs)).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..400, 0, &SYNC);
    db.flush().unwrap();
    oracle.put(&db, 400..420, 0, &SYNC);
    (db, oracle)
}

#[test]
fn eio_on_an_sstable_block_fails_the_get_naming_the_file() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let (db, mut oracle) = populated(Arc::new(fs.clone()));

    // One transient failure: that get fails, the next one reads again.
    fs.fail(&[FaultOp::Read], Some(".sst"), 0, ErrorKind::Other, false);
    let err = db.get(&ReadOptions::new(), &k(1)).unwrap_err();
    assert_io(&err, ".sst", ErrorKind::Other, "transient");
    assert_eq!(db.get(&ReadOptions::new(), &k(1)).unwrap(), Some(v(1, 0)));

    // A lasting failure: every key in an sstable fails, the memtable
    // still answers, and writes go on.
    fs.fail(&[FaultOp::Read], Some(".sst"), 0, ErrorKind::Other, true);
    for i in (0..400).step_by(37) {
        let err = db.get(&ReadOptions::new(), &k(i)).unwrap_err();
        assert_io(&err, ".sst", ErrorKind::Other, &format!("key {i}"));
    }
    assert_eq!(
        db.get(&ReadOptions::new(), &k(410)).unwrap(),
        Some(v(410, 0))
    );
    oracle.put(&db, 420..430, 0, &SYNC);
    fs.heal();
    check(&db, &oracle, "healed");
    db.close().unwrap();
    let db = Db::open(DIR, uncached_options(Arc::new(mem.crash_clone()))).unwrap();
    check(&db, &oracle, "reopened");
    injected(&fs, "eio_on_an_sstable_block_fails_the_get_naming_the_file");
}

/// An iterator that meets a read error returns it, stays invalid and keeps
/// returning it; the entries before it were right; a new iterator after
/// the fault sees everything. Forward and backward.
#[test]
fn eio_on_an_sstable_block_fails_the_iterator_naming_the_file() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let (db, oracle) = populated(Arc::new(fs.clone()));
    let mut total = 0;
    for backward in [false, true] {
        for skip in [0, 2, 5] {
            let ctx = format!("backward {backward}, skip {skip}");
            fs.fail(
                &[FaultOp::Read],
                Some(".sst"),
                skip,
                ErrorKind::Other,
                false,
            );
            let mut it = db.iter(&ReadOptions::new());
            let mut r = if backward {
                it.seek_to_last()
            } else {
                it.seek_to_first()
            };
            let mut seen = 0;
            while r.is_ok() && it.valid() {
                let i = if backward { 419 - seen } else { seen };
                assert_eq!(it.key(), k(i), "{ctx}");
                assert_eq!(it.value().unwrap(), v(i, 0), "{ctx}");
                seen += 1;
                r = if backward { it.prev() } else { it.next() };
            }
            let err = r.expect_err("the scan must meet the fault");
            assert_io(&err, ".sst", ErrorKind::Other, &ctx);
            assert!(seen < 420, "{ctx}");
            assert!(!it.valid(), "{ctx}");
            assert_io(&it.next().unwrap_err(), ".sst", ErrorKind::Other, &ctx);
            assert_io(&it.status().unwrap_err(), ".sst", ErrorKind::Other, &ctx);
            assert_eq!(fs.injected(), total + 1, "{ctx}");
            total += 1;
            drop(it);
            check(&db, &oracle, &ctx);
        }
    }
    db.close().unwrap();
    injected(
        &fs,
        "eio_on_an_sstable_block_fails_the_iterator_naming_the_file",
    );
}

/// A compaction that cannot read an input fails, removes what it wrote
/// and poisons the database, as RocksDB does with its default
/// `paranoid_checks`: retrying at once would spin on a lasting fault while
/// L0 grows. Nothing is lost: the inputs are untouched, reads go on, and
/// a reopen compacts them.
#[test]
fn eio_in_a_compaction_poisons_and_loses_nothing() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, uncached_options(Arc::new(fs.clone()))).unwrap();
    let mut oracle = Oracle::default();
    for round in 0..3 {
        oracle.put(&db, round * 100..round * 100 + 200, round, &SYNC);
        db.flush().unwrap();
    }
    let tables = files(&mem, "sst");
    fs.fail(&[FaultOp::Read], Some(".sst"), 3, ErrorKind::Other, true);
    let err = db.compact_range(None, None).unwrap_err();
    assert_io(&err, ".sst", ErrorKind::Other, "compact_range");
    assert_refuses_writes(&db, ".sst", "after the failed compaction");
    assert_eq!(files(&mem, "sst"), tables, "outputs removed, inputs kept");
    fs.heal();
    check(&db, &oracle, "poisoned");
    assert_poisoned(&db.close().unwrap_err(), ".sst", "close");

    let db = Db::open(DIR, uncached_options(Arc::new(fs.clone()))).unwrap();
    check(&db, &oracle, "reopened");
    db.compact_range(None, None).unwrap();
    check(&db, &oracle, "compacted");
    assert_no_orphans(&db, "compacted");
    db.close().unwrap();
    injected(&fs, "eio_in_a_compaction_poisons_and_loses_nothing");
}

/// The same in a background compaction: the writer learns of it as a
/// poisoned database, and a reopen from the synced state recovers.
#[test]
fn eio_in_a_background_compaction_poisons_and_loses_nothing() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let opts = || Options {
        block_cache_capacity: 0,
        // The first flush's file stays in L0 for the second to join it
        // (no push-down before range merges moves it down meanwhile).
        range_merge_sorted_runs: 0,
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts()).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..100, 0, &SYNC);
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    fs.fail(&[FaultOp::Read], Some(".sst"), 0, ErrorKind::Other, true);
    // A second L0 file triggers a compaction, which fails (maybe before
    // the flush returns).
    oracle.put(&db, 50..80, 1, &SYNC);
    let err = db
        .flush()
        .and_then(|()| db.wait_for_compactions())
        .unwrap_err();
    assert_poisoned(&err, ".sst", "wait_for_compactions");
    assert_refuses_writes(&db, ".sst", "after the background failure");
    fs.heal();
    check(&db, &oracle, "poisoned");
    drop(db);
    let db = Db::open(DIR, opts()).unwrap();
    db.wait_for_compactions().unwrap();
    check(&db, &oracle, "reopened");
    assert_no_orphans(&db, "reopened");
    drop(db);
    let db = Db::open(DIR, options(crashed(&mem))).unwrap();
    check(&db, &oracle, "after a crash");
    injected(
        &fs,
        "eio_in_a_background_compaction_poisons_and_loses_nothing",
    );
}

#[test]
fn eio_on_a_value_file_record_fails_the_get_naming_the_file() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let (db, mut oracle) = populated(Arc::new(fs.clone()));
    fs.fail(&[FaultOp::Read], Some(".vf"), 0, ErrorKind::Other, true);
    for i in (0..400).step_by(10) {
        let err = db.get(&ReadOptions::new(), &k(i)).unwrap_err();
        assert_io(&err, ".vf", ErrorKind::Other, &format!("key {i}"));
        // Inline values need no value file.
        assert_eq!(
            db.get(&ReadOptions::new(), &k(i + 1)).unwrap(),
            Some(v(i + 1, 0))
        );
    }
    oracle.put(&db, 420..440, 0, &SYNC);
    db.flush().unwrap();
    fs.heal();
    check(&db, &oracle, "healed");
    db.close().unwrap();
    let db = Db::open(DIR, uncached_options(Arc::new(mem.crash_clone()))).unwrap();
    check(&db, &oracle, "reopened");
    injected(
        &fs,
        "eio_on_a_value_file_record_fails_the_get_naming_the_file",
    );
}

/// A scan reads separated values through readahead and prefetch; a failed
/// record read is returned by `value()`, after which the iterator is
/// invalid and reports the error. Prefetch failures are not errors of
/// their own: the value is read again when asked for.
#[test]
fn eio_on_a_value_file_record_fails_the_iterator_value() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let (db, oracle) = populated(Arc::new(fs.clone()));
    for skip in [0, 1, 3, 8] {
        let ctx = format!("skip {skip}");
        fs.fail(&[FaultOp::Read], Some(".vf"), skip, ErrorKind::Other, true);
        let mut it = db.iter(&ReadOptions::new());
        it.seek_to_first().unwrap();
        let mut seen = 0;
        let err = loop {
            assert!(it.valid(), "{ctx}: the scan must meet the fault");
            assert_eq!(it.key(), k(seen), "{ctx}");
            match it.value() {
                Ok(value) => assert_eq!(value, v(seen, 0), "{ctx}"),
                Err(e) => break e,
            }
            seen += 1;
            it.next().unwrap();
        };
        assert_io(&err, ".vf", ErrorKind::Other, &ctx);
        assert!(!it.valid(), "{ctx}");
        assert_io(&it.value().unwrap_err(), ".vf", ErrorKind::Other, &ctx);
        assert_io(&it.next().unwrap_err(), ".vf", ErrorKind::Other, &ctx);
        assert_io(&it.status().unwrap_err(), ".vf", ErrorKind::Other, &ctx);
        drop(it);
        fs.heal();
        check(&db, &oracle, &ctx);
    }
    db.close().unwrap();
    injected(&fs, "eio_on_a_value_file_record_fails_the_iterator_value");
}

/// A GC job reads the value-reference bitmaps of the sstables that name
/// its input, then the input's live records: EIO on either fails the job
/// without poisoning (it changed nothing), and once healed GC collects.
#[test]
fn eio_in_a_gc_job_fails_it_without_poisoning() {
    let mut total = 0;
    for name in [".sst", ".vf"] {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, uncached_options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = with_garbage(&db);
        let garbage = db.space_report().unwrap().exposed_garbage_bytes;
        fs.fail(&[FaultOp::Read], Some(name), 0, ErrorKind::Other, true);
        let err = db.gc_with_ratio(0.01).unwrap_err();
        assert_io(&err, name, ErrorKind::Other, name);
        total += fs.injected();
        fs.heal();
        assert_eq!(db.space_report().unwrap().exposed_garbage_bytes, garbage);
        oracle.put(&db, 200..220, 2, &SYNC);
        check(&db, &oracle, name);
        assert!(db.gc_with_ratio(0.01).unwrap().jobs > 0, "{name}");
        assert_eq!(db.space_report().unwrap().exposed_garbage_bytes, 0);
        check(&db, &oracle, name);
        db.close().unwrap();
        let db = Db::open(DIR, uncached_options(crashed(&mem))).unwrap();
        check(&db, &oracle, name);
    }
    eprintln!("faults injected by eio_in_a_gc_job_fails_it_without_poisoning: {total}");
}

/// EIO reading CURRENT, the manifest or a WAL at open (and, with
/// `paranoid_checks`, an sstable or value file, whose footers it reads)
/// fails the open with an error naming the file and changes nothing on
/// disk; once healed, the open recovers everything, the WAL's unflushed
/// writes included.
#[test]
fn eio_reading_a_file_at_open_fails_the_open_then_heals() {
    let mut total = 0;
    for name in ["CURRENT", "MANIFEST", ".wal", ".sst", ".vf"] {
        let paranoid = |fs: FaultFs| Options {
            paranoid_checks: true,
            ..uncached_options(Arc::new(fs))
        };
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let (db, oracle) = populated(Arc::new(fs.clone()));
        db.close().unwrap();
        let before: Vec<_> = files(&mem, "")
            .into_iter()
            .map(|p| (p.clone(), mem.file_len(&p)))
            .collect();
        fs.fail(&[FaultOp::Read], Some(name), 0, ErrorKind::Other, true);
        let err = Db::open(DIR, paranoid(fs.clone())).unwrap_err();
        assert_io(&err, name, ErrorKind::Other, name);
        let after: Vec<_> = files(&mem, "")
            .into_iter()
            .map(|p| (p.clone(), mem.file_len(&p)))
            .collect();
        assert_eq!(before, after, "{name}: a failed open changed files");
        fs.heal();
        let db = Db::open(DIR, paranoid(fs.clone())).unwrap();
        check(&db, &oracle, name);
        assert_eq!(oracle.acked_len(), 420);
        db.close().unwrap();
        total += fs.injected();
        assert!(fs.injected() >= 1, "{name}");
    }
    eprintln!("faults injected by eio_reading_a_file_at_open_fails_the_open_then_heals: {total}");
}
