//! A full disk on a real file system: each test mounts a small ext4 image
//! of its own through a loop device (CI runs as root), fills it, and checks
//! that the database turns read-only, serves reads, resumes by itself once
//! a ballast file is deleted, and loses no acknowledged write; that a
//! database opens on a full disk; and that `Db::open_read_only` reads a
//! database on a read-only mount. Where the test cannot mount (not root,
//! no loop device), it says so and passes: `tests/no_space.rs` runs the
//! same scenarios on the fault-injecting `Fs`'s disk of a fixed size.

#[path = "common/mount.rs"]
mod mount;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use cleave::{Db, Error, NoSpaceCause, Options, ReadOptions, WriteOptions, WriteState};
use mount::Mounted;

/// A file written before the database, deleted to free space.
const BALLAST_BYTES: usize = 12 << 20;
/// The ballast of a database that fills the disk with its WAL: a flush
/// takes room for what it writes before the WAL it retires goes, so
/// freeing the ballast must give room for all of it.
const WAL_BALLAST_BYTES: usize = 36 << 20;
/// Long enough for anything these databases do.
const PATIENCE: Duration = Duration::from_secs(120);

fn options() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 1 << 20,
        target_file_size_base: 1 << 20,
        max_bytes_for_level_base: 4 << 20,
        value_file_size: 2 << 20,
        enable_gc: true,
        no_space_poll_interval: Duration::from_millis(20),
        use_direct_reads: true,
        use_direct_io_for_flush_and_compaction: true,
        ..Options::default()
    }
}

fn key(t: usize, i: usize) -> Vec<u8> {
    format!("t{t}-{i:08}").into_bytes()
}

/// 8 KiB (separated) for most keys, 100 bytes for every fifth; the bytes
/// name the write.
fn value(t: usize, i: usize, round: usize) -> Vec<u8> {
    let len = if i.is_multiple_of(5) { 100 } else { 8 << 10 };
    let mut v = format!("t{t}-i{i}-r{round}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// What each key may hold: its acknowledged value, or a failed write's.
#[derive(Default)]
struct Oracle {
    acked: BTreeMap<Vec<u8>, Vec<u8>>,
    maybe: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Oracle {
    fn check(&self, db: &Db, ctx: &str) {
        let r = ReadOptions::new();
        for (k, v) in &self.acked {
            let got = db.get(&r, k).unwrap();
            let ok = got.as_ref() == Some(v) || got == self.maybe.get(k).cloned();
            assert!(ok, "{ctx}: {} lost or wrong", String::from_utf8_lossy(k));
        }
        let mut it = db.iter(&r);
        it.seek_to_first().unwrap();
        let mut n = 0;
        while it.valid() {
            let k = it.key();
            assert!(
                self.acked.contains_key(k) || self.maybe.contains_key(k),
                "{ctx}: {} never written",
                String::from_utf8_lossy(k)
            );
            n += 1;
            it.next().unwrap();
        }
        it.status().unwrap();
        assert!(n >= self.acked.len(), "{ctx}: the scan missed keys");
    }
}

fn assert_full(err: &Error, db_dir: &Path, ctx: &str) {
    match err {
        Error::NoSpace {
            path,
            cause: NoSpaceCause::Device(_),
            ..
        } => assert!(path.starts_with(db_dir), "{ctx}: {err}"),
        _ => panic!("{ctx}: expected a full disk, got {err:?}"),
    }
}

fn wait_until_writable(db: &Db, ctx: &str) -> Duration {
    let start = Instant::now();
    while db.write_state() != WriteState::ReadWrite {
        assert!(start.elapsed() < PATIENCE, "{ctx}: {}", db.write_state());
        std::thread::sleep(Duration::from_millis(2));
    }
    start.elapsed()
}

/// Four writers, synced and not, fill the file system with new keys and
/// overwrites while flushes, compactions and GC run. The database turns
/// read-only, answers every read, and takes writes again by itself once
/// the ballast goes; after a reopen every acknowledged write is there.
#[test]
fn writers_fill_a_real_file_system_then_it_resumes() {
    for sync in [false, true] {
        let ctx = format!("sync {sync}");
        let Some(disk) = Mounted::ext4("writers_fill_a_real_file_system_then_it_resumes") else {
            return;
        };
        disk.ballast(BALLAST_BYTES);
        let db = Db::open(disk.db(), options()).unwrap();
        let wo = WriteOptions {
            sync,
            disable_wal: false,
        };
        let oracles: Vec<Oracle> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let (db, dir) = (&db, disk.db());
                    s.spawn(move || {
                        let mut o = Oracle::default();
                        for n in 0.. {
                            // Every fourth write overwrites an older key:
                            // garbage for GC.
                            let i = if n % 4 == 3 { n / 2 } else { n };
                            let v = value(t, i, n);
                            match db.put(&wo, &key(t, i), &v) {
                                Ok(()) => {
                                    o.acked.insert(key(t, i), v);
                                }
                                Err(e) => {
                                    assert_full(&e, &dir, "a writer");
                                    o.maybe.insert(key(t, i), v);
                                    return o;
                                }
                            }
                        }
                        unreachable!()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut oracle = Oracle::default();
        for o in oracles {
            oracle.acked.extend(o.acked);
            oracle.maybe.extend(o.maybe);
        }
        // Read-only now, unless GC has already made room.
        if let WriteState::NoSpace { .. } = db.write_state() {
            assert!(db.stats().to_text().contains("read-only"));
        }
        oracle.check(&db, &format!("{ctx}, full"));
        assert!(db.verify().is_ok(), "{ctx}");
        db.space_report().unwrap();
        disk.free_ballast();
        wait_until_writable(&db, &ctx);
        for i in 0..100 {
            let v = value(9, i, 0);
            db.put(&wo, &key(9, i), &v).unwrap();
            oracle.acked.insert(key(9, i), v);
        }
        db.close().unwrap();
        let db = Db::open(disk.db(), options()).unwrap();
        oracle.check(&db, &format!("{ctx}, reopened"));
        assert!(db.verify().is_ok(), "{ctx}");
        db.close().unwrap();
    }
}

/// A database whose WAL holds what the full disk has no room to flush
/// opens read-only (the WAL's writes kept in memtables), answers every
/// read, and resumes once the ballast goes.
#[test]
fn a_database_opens_on_a_full_file_system() {
    let Some(disk) = Mounted::ext4("a_database_opens_on_a_full_file_system") else {
        return;
    };
    disk.ballast(WAL_BALLAST_BYTES);
    // Large memtables: the writes stay in the WAL until the disk fills.
    let opts = || Options {
        write_buffer_size: 64 << 20,
        ..options()
    };
    let db = Db::open(disk.db(), opts()).unwrap();
    let mut oracle = Oracle::default();
    for i in 0.. {
        let v = value(0, i, 0);
        match db.put(&WriteOptions::default(), &key(0, i), &v) {
            Ok(()) => drop(oracle.acked.insert(key(0, i), v)),
            Err(e) => {
                assert_full(&e, &disk.db(), "filling");
                oracle.maybe.insert(key(0, i), v);
                break;
            }
        }
    }
    drop(db);
    // Small memtables: replay must flush, and cannot.
    let db = Db::open(disk.db(), options()).unwrap();
    assert!(
        matches!(db.write_state(), WriteState::NoSpace { .. }),
        "{}",
        db.write_state()
    );
    oracle.check(&db, "opened on a full disk");
    assert_full(
        &db.put(&WriteOptions::default(), b"k", b"v").unwrap_err(),
        &disk.db(),
        "a write",
    );
    disk.free_ballast();
    wait_until_writable(&db, "after the ballast went");
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    oracle.acked.insert(b"k".to_vec(), b"v".to_vec());
    db.close().unwrap();
    let db = Db::open(disk.db(), options()).unwrap();
    oracle.check(&db, "reopened");
}

/// On a read-only mount a read-only open reads everything; a read-write
/// open fails with a typed error naming what it could not write.
#[test]
fn a_read_only_open_reads_a_read_only_mount() {
    let Some(disk) = Mounted::ext4("a_read_only_open_reads_a_read_only_mount") else {
        return;
    };
    let db = Db::open(disk.db(), options()).unwrap();
    let mut oracle = Oracle::default();
    for i in 0..2000 {
        let v = value(0, i, 0);
        db.put(&WriteOptions::default(), &key(0, i), &v).unwrap();
        oracle.acked.insert(key(0, i), v);
        if i == 1000 {
            db.flush().unwrap();
        }
    }
    // Half in sstables, half in the WAL only (a close flushes nothing).
    db.close().unwrap();
    disk.remount("ro");
    let db = Db::open_read_only(disk.db(), options()).unwrap();
    oracle.check(&db, "read-only mount");
    assert!(db.verify().is_ok());
    drop(db);
    let err = Db::open(disk.db(), options()).unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, .. } if path.starts_with(disk.db())),
        "{err:?}"
    );
    disk.remount("rw");
}
