//! Fault injection: crashes that drop unsynced data, failing writes and
//! fsyncs, corrupt and missing files, bad arguments. Each ends in a typed
//! error or a clean recovery, never in lost acknowledged data or a panic.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

const DIR: &str = "/db";

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        create_if_missing: true,
        fs,
        write_buffer_size: 16 << 10,
        target_file_size_base: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    }
}

fn k(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn v(i: usize) -> Vec<u8> {
    format!("value{i:06}").repeat(10).into_bytes()
}

fn get(db: &Db, i: usize) -> Option<Vec<u8>> {
    db.get(&ReadOptions::new(), &k(i)).unwrap()
}

const SYNC: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};
const ASYNC: WriteOptions = WriteOptions {
    sync: false,
    disable_wal: false,
};

#[test]
fn crash_keeps_synced_writes_and_drops_only_unsynced_ones() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    for i in 0..500 {
        db.put(&SYNC, &k(i), &v(i)).unwrap();
    }
    for i in 500..1000 {
        db.put(&ASYNC, &k(i), &v(i)).unwrap();
    }
    let crashed = fs.crash_clone();
    drop(db);
    let db = Db::open(DIR, options(Arc::new(crashed))).unwrap();
    for i in 0..500 {
        assert_eq!(get(&db, i), Some(v(i)), "synced key {i} lost");
    }
    // Unsynced writes may be lost, but only as a suffix.
    let survivors: Vec<bool> = (500..1000).map(|i| get(&db, i).is_some()).collect();
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
    for i in 0..50 {
        db.put(&SYNC, &k(i), b"x").unwrap();
    }
    let crashed = fs.crash_clone_keeping(|n| n / 2);
    drop(db);
    // Cut the newest WAL in the middle of its last record.
    let wal = newest(&crashed, "wal");
    let len = crashed.file_len(&wal).unwrap();
    crashed.truncate(&wal, len - 3);
    let db = Db::open(DIR, options(Arc::new(crashed))).unwrap();
    for i in 0..49 {
        assert!(get(&db, i).is_some(), "key {i} lost");
    }
}

fn newest(fs: &MemFs, ext: &str) -> PathBuf {
    let mut names: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(&format!(".{ext}")))
        .collect();
    names.sort();
    Path::new(DIR).join(names.last().unwrap())
}

/// A failed WAL fsync fails the write and poisons the database; a reopen
/// recovers everything acknowledged before.
#[test]
fn failed_wal_sync_poisons_then_reopen_recovers() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    for i in 0..100 {
        db.put(&SYNC, &k(i), &v(i)).unwrap();
    }
    fs.fail(&[FaultOp::Sync], Some(".wal"), 0, ErrorKind::Other, true);
    let err = db.put(&SYNC, &k(100), &v(100)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Io {
                op: "fdatasync",
                ..
            }
        ),
        "{err}"
    );
    let err = db.put(&ASYNC, &k(101), &v(101)).unwrap_err();
    assert!(matches!(err, Error::Poisoned(_)), "{err}");
    assert_eq!(get(&db, 5), Some(v(5)), "reads still work");
    let err = db.close().unwrap_err();
    assert!(
        matches!(err, Error::Poisoned(_)),
        "close must report the poison: {err}"
    );
    fs.heal();
    let db = Db::open(DIR, options(Arc::new(mem.crash_clone()))).unwrap();
    for i in 0..100 {
        assert_eq!(get(&db, i), Some(v(i)));
    }
    assert_eq!(
        get(&db, 101),
        None,
        "a write refused by a poisoned db must not appear"
    );
}

/// Flush failures (sstable write, sstable sync, manifest sync, directory
/// sync) each poison the database; nothing acknowledged is lost on reopen.
#[test]
fn failed_flush_io_poisons_then_reopen_recovers() {
    let cases: &[(&[FaultOp], &str)] = &[
        (&[FaultOp::Append], ".sst"),
        (&[FaultOp::Sync], ".sst"),
        (&[FaultOp::Create], ".sst"),
        (&[FaultOp::Append, FaultOp::Sync], "MANIFEST"),
        (&[FaultOp::SyncDir], ""),
    ];
    for (ops, path) in cases {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        for i in 0..50 {
            db.put(&SYNC, &k(i), &v(i)).unwrap();
        }
        fs.fail(
            ops,
            (!path.is_empty()).then_some(*path),
            0,
            ErrorKind::Other,
            true,
        );
        let err = db.flush().unwrap_err();
        assert!(
            matches!(err, Error::Io { .. } | Error::Poisoned(_)),
            "{ops:?} {path}: {err}"
        );
        assert!(
            matches!(db.put(&SYNC, &k(99), b"x"), Err(Error::Poisoned(_))),
            "{ops:?} {path}"
        );
        assert!(db
            .property("cleave.background-errors")
            .unwrap()
            .starts_with('1'));
        drop(db);
        fs.heal();
        for fs2 in [mem.clone(), mem.crash_clone()] {
            let db = Db::open(DIR, options(Arc::new(fs2))).unwrap();
            for i in 0..50 {
                assert_eq!(get(&db, i), Some(v(i)), "{ops:?} {path}: key {i}");
            }
            db.close().unwrap();
        }
    }
}

#[test]
fn disk_full_is_a_typed_error() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem));
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    fs.fail(&[FaultOp::Append], None, 0, ErrorKind::StorageFull, true);
    match db.put(&SYNC, b"k", b"v") {
        Err(Error::Io { source, path, .. }) => {
            assert_eq!(source.kind(), ErrorKind::StorageFull);
            assert!(
                path.to_string_lossy().ends_with(".wal"),
                "{}",
                path.display()
            );
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

#[test]
fn corrupt_sstable_gives_corruption_not_a_panic() {
    let mem = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    for i in 0..200 {
        db.put(&ASYNC, &k(i), &v(i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let sst = newest(&mem, "sst");
    let len = mem.file_len(&sst).unwrap();
    let mut errors = 0;
    // Flip bytes across the file, one at a time; every read either returns
    // the right value or a Corruption error naming the file.
    for offset in (0..len).step_by(97) {
        mem.corrupt_byte(&sst, offset);
        match Db::open(
            DIR,
            Options {
                paranoid_checks: false,
                ..options(Arc::new(mem.clone()))
            },
        ) {
            Ok(db) => {
                for i in (0..200).step_by(7) {
                    match db.get(&ReadOptions::new(), &k(i)) {
                        Ok(got) => assert_eq!(got, Some(v(i)), "flip at {offset}: wrong value"),
                        Err(e) => {
                            assert!(e.is_corruption() || matches!(e, Error::Io { .. }), "{e}");
                            assert!(
                                e.to_string().contains(".sst"),
                                "error must name the file: {e}"
                            );
                            errors += 1;
                        }
                    }
                }
                db.close().unwrap();
            }
            Err(e) => assert!(
                e.to_string().contains(".sst"),
                "error must name the file: {e}"
            ),
        }
        mem.corrupt_byte(&sst, offset);
    }
    assert!(errors > 0, "no flip was detected");
}

#[test]
fn missing_sstable_fails_open_naming_it() {
    let mem = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    db.put(&SYNC, b"a", b"1").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let sst = newest(&mem, "sst");
    mem.remove(&sst).unwrap();
    let err = Db::open(DIR, options(Arc::new(mem))).unwrap_err();
    let name = sst.file_name().unwrap().to_str().unwrap().to_string();
    assert!(err.to_string().contains(&name), "{err}");
}

#[test]
fn oversized_key_or_value_is_rejected_and_nothing_is_written() {
    let mem = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(mem))).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"small", b"ok");
    b.put(&vec![b'k'; (64 << 10) + 1], b"v");
    assert!(matches!(db.write(&SYNC, b), Err(Error::InvalidArgument(_))));
    assert_eq!(
        db.get(&ReadOptions::new(), b"small").unwrap(),
        None,
        "batch must be all or nothing"
    );
    let big = vec![0u8; (1 << 30) + 1];
    assert!(matches!(
        db.put(&SYNC, b"k", &big),
        Err(Error::InvalidArgument(_))
    ));
    drop(big);
    db.put(&SYNC, &vec![b'k'; 64 << 10], b"max key is fine")
        .unwrap();
    let no_wal_sync = WriteOptions {
        sync: true,
        disable_wal: true,
    };
    let err = db.put(&no_wal_sync, b"k", b"v").unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(_)),
        "sync without a WAL: {err}"
    );
}

#[test]
fn invalid_options_are_rejected_at_open() {
    let bad = [
        Options {
            write_buffer_size: 10,
            ..options(Arc::new(MemFs::new()))
        },
        Options {
            max_write_buffer_number: 1,
            ..options(Arc::new(MemFs::new()))
        },
        Options {
            level0_stop_writes_trigger: 1,
            ..options(Arc::new(MemFs::new()))
        },
        Options {
            max_background_jobs: 0,
            ..options(Arc::new(MemFs::new()))
        },
        Options {
            max_bytes_for_level_multiplier: 1.0,
            ..options(Arc::new(MemFs::new()))
        },
    ];
    for o in bad {
        assert!(matches!(Db::open(DIR, o), Err(Error::InvalidArgument(_))));
    }
    let err = Db::open(
        DIR,
        Options {
            create_if_missing: false,
            ..options(Arc::new(MemFs::new()))
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn second_open_of_a_directory_fails_with_locked() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = || Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = Db::open(tmp.path(), opts()).unwrap();
    let err = Db::open(tmp.path(), opts()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(err.to_string().contains("already open"), "{err}");
    db.close().unwrap();
    Db::open(tmp.path(), opts()).unwrap().close().unwrap();
    let err = Db::open(
        tmp.path(),
        Options {
            error_if_exists: true,
            ..opts()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

/// A damaged WAL record with valid records after it: with paranoid_checks
/// the open fails naming the WAL; without, replay stops at the damage
/// (point-in-time) and nothing after it appears.
#[test]
fn damaged_wal_middle_fails_paranoid_open_or_stops_replay() {
    let mem = MemFs::new();
    let opts = |paranoid| Options {
        paranoid_checks: paranoid,
        write_buffer_size: 1 << 20,
        ..options(Arc::new(mem.clone()))
    };
    let db = Db::open(DIR, opts(false)).unwrap();
    for i in 0..100 {
        db.put(&SYNC, &k(i), &v(i)).unwrap();
    }
    db.close().unwrap();
    let wal = newest(&mem, "wal");
    let len = mem.file_len(&wal).unwrap();
    mem.corrupt_byte(&wal, len / 2);

    let err = Db::open(DIR, opts(true)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains(".wal"), "{err}");

    let db = Db::open(DIR, opts(false)).unwrap();
    let present: Vec<bool> = (0..100).map(|i| get(&db, i).is_some()).collect();
    let first_missing = present
        .iter()
        .position(|p| !p)
        .expect("damage must cut replay");
    assert!(
        first_missing > 10,
        "replay stopped too early: {first_missing}"
    );
    assert!(
        present[first_missing..].iter().all(|p| !p),
        "a write after the damage was replayed"
    );
}
