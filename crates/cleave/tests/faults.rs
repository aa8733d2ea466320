//! Damaged and missing files, and bad arguments: a corrupt sstable, a
//! missing sstable, value file, manifest, CURRENT or WAL, a damaged WAL
//! record, oversized keys and values, invalid options, a second open. Each
//! ends in a typed error naming the file or the argument, or a clean
//! recovery, never in lost acknowledged data or a panic. (Read faults are
//! in faults_read, write faults in faults_write, crashes in faults_crash.)

#[path = "common/faults.rs"]
mod setup;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cleave::vfs::{FileOptions, Fs, MemFs};
use cleave::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

use setup::*;

fn get(db: &Db, i: usize) -> Option<Vec<u8>> {
    db.get(&ReadOptions::new(), &k(i)).unwrap()
}

#[test]
fn corrupt_sstable_gives_corruption_not_a_panic() {
    let mem = MemFs::new();
    // No compaction, which would read (and replace) the damaged table.
    let db = Db::open(DIR, uncached_options(Arc::new(mem.clone()))).unwrap();
    for i in 0..200 {
        db.put(&ASYNC, &k(i), &v(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let sst = files(&mem, "sst")
        .into_iter()
        .max_by_key(|p| mem.file_len(p))
        .unwrap();
    let len = mem.file_len(&sst).unwrap();
    let mut errors = 0;
    // Flip bytes across the file, one at a time; every read either returns
    // the right value or a Corruption error naming the file.
    for offset in (0..len).step_by(len / 64) {
        mem.corrupt_byte(&sst, offset);
        match Db::open(
            DIR,
            Options {
                paranoid_checks: false,
                ..uncached_options(Arc::new(mem.clone()))
            },
        ) {
            Ok(db) => {
                for i in 0..200 {
                    match db.get(&ReadOptions::new(), &k(i)) {
                        Ok(got) => assert_eq!(got, Some(v(i, 0)), "flip at {offset}: wrong value"),
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

fn read_file(fs: &dyn Fs, path: &Path) -> Vec<u8> {
    let f = fs.open(path, FileOptions::default()).unwrap();
    f.read_at(0, f.len() as usize).unwrap()
}

/// Puts back a file a test removed.
fn restore(fs: &dyn Fs, path: &Path, bytes: &[u8]) {
    let mut f = fs.create(path, FileOptions::default()).unwrap();
    f.append(bytes).unwrap();
    f.sync().unwrap();
    fs.sync_dir(Path::new(DIR)).unwrap();
}

/// Every file's name and size.
fn listing(fs: &MemFs) -> Vec<(PathBuf, Option<usize>)> {
    files(fs, "")
        .into_iter()
        .map(|p| (p.clone(), fs.file_len(&p)))
        .collect()
}

/// A missing sstable, value file, MANIFEST, CURRENT or WAL (the one the
/// manifest names) fails the open with an error naming it, whatever
/// `paranoid_checks` and `create_if_missing` say, and changes no file:
/// as RocksDB with its default `paranoid_checks`, which fails the open
/// when a file the manifest names is missing. The open cannot go on
/// without the data in it, and creating a database anew where CURRENT is
/// missing would remove the rest. Put back, the database opens with every
/// acknowledged write. (A WAL missing between two others: the db module's
/// regression tests.)
#[test]
fn a_missing_file_fails_the_open_naming_it() {
    let mem = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..300, 0, &SYNC);
    db.flush().unwrap();
    oracle.put(&db, 300..320, 0, &SYNC);
    db.close().unwrap();
    let lost = ["sstable", "value file", "manifest", "CURRENT", "WAL"];
    let mut opens = 0;
    for what in lost {
        // Each open rotates the manifest and the WAL: find the file now.
        let path = match what {
            "sstable" => files(&mem, "sst")[0].clone(),
            "value file" => files(&mem, "vf")[0].clone(),
            "manifest" => newest(&mem, "MANIFEST"),
            "CURRENT" => Path::new(DIR).join("CURRENT"),
            _ => newest(&mem, "wal"),
        };
        let path = &path;
        let bytes = read_file(&mem, path);
        mem.remove(path).unwrap();
        let before = listing(&mem);
        let name = path.file_name().unwrap().to_str().unwrap();
        for paranoid_checks in [false, true] {
            for create_if_missing in [true, false] {
                let ctx = format!("{what}, paranoid {paranoid_checks}, create {create_if_missing}");
                let opts = Options {
                    paranoid_checks,
                    create_if_missing,
                    ..options(Arc::new(mem.clone()))
                };
                let err = Db::open(DIR, opts).unwrap_err();
                let typed = match &err {
                    Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
                    e => e.is_corruption(),
                };
                assert!(typed, "{ctx}: {err:?}");
                assert!(err.to_string().contains(name), "{ctx}: {err}");
                assert_eq!(
                    listing(&mem),
                    before,
                    "{ctx}: the failed open changed files"
                );
                opens += 1;
            }
        }
        restore(&mem, path, &bytes);
        let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
        check(&db, &oracle, &format!("{what} put back"));
        db.close().unwrap();
    }
    eprintln!(
        "files removed by a_missing_file_fails_the_open_naming_it: {}, opens refused: {opens}",
        lost.len()
    );
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
        Options {
            max_value_file_refs: 0,
            ..options(Arc::new(MemFs::new()))
        },
        Options {
            correlated_garbage_ratio: f64::NAN,
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
        db.put(&SYNC, &k(i), &v(i, 0)).unwrap();
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
