//! `Options::manual_wal_flush`: writes that do not sync leave their WAL
//! records in the process until `Db::flush_wal`, a synced write or a
//! close hands them to the OS; reads see them at once; a memtable switch
//! hands the old WAL's records over before the new WAL takes any.

use std::path::Path;

use cleave::{Db, Options, ReadOptions, WriteOptions};

/// Bytes of the WAL files in `dir` as the OS has them.
fn wal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "wal"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn open(dir: &Path, manual: bool) -> Db {
    Db::open(
        dir,
        Options {
            create_if_missing: true,
            manual_wal_flush: manual,
            ..Options::default()
        },
    )
    .unwrap()
}

const NO_SYNC: WriteOptions = WriteOptions {
    sync: false,
    disable_wal: false,
};

#[test]
fn writes_wait_in_the_process_until_flush_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), true);
    let empty = wal_bytes(dir.path());
    for i in 0..100u32 {
        db.put(&NO_SYNC, &i.to_be_bytes(), b"value").unwrap();
    }
    // Read back at once, though no byte of them is in the file yet.
    assert_eq!(
        db.get(&ReadOptions::new(), &7u32.to_be_bytes()).unwrap(),
        Some(b"value".to_vec())
    );
    assert_eq!(wal_bytes(dir.path()), empty, "records reached the OS early");
    db.flush_wal().unwrap();
    let flushed = wal_bytes(dir.path());
    assert!(flushed > empty + 100 * 9, "{flushed} after {empty}");
    // Nothing new: a second flush writes nothing.
    db.flush_wal().unwrap();
    assert_eq!(wal_bytes(dir.path()), flushed);
    // A synced write takes the buffered ones with it.
    db.put(&NO_SYNC, b"buffered", b"v").unwrap();
    assert_eq!(wal_bytes(dir.path()), flushed);
    db.put(
        &WriteOptions {
            sync: true,
            disable_wal: false,
        },
        b"synced",
        b"v",
    )
    .unwrap();
    assert!(wal_bytes(dir.path()) > flushed);
    db.put(&NO_SYNC, b"at-close", b"v").unwrap();
    db.close().unwrap();
    // Everything, the last write included, is there after the close.
    let db = open(dir.path(), true);
    for key in [
        &b"buffered"[..],
        b"synced",
        b"at-close",
        &99u32.to_be_bytes(),
    ] {
        assert!(db.get(&ReadOptions::new(), key).unwrap().is_some());
    }
}

#[test]
fn without_it_each_write_reaches_the_os() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), false);
    let empty = wal_bytes(dir.path());
    db.put(&NO_SYNC, b"k", b"v").unwrap();
    assert!(wal_bytes(dir.path()) > empty);
}

/// Memtable switches under buffered writes: each WAL reaches the OS whole
/// before the next one takes records. A copy of the directory as the OS
/// has it while the database runs (what a killed process leaves) opens
/// with no damage and holds a prefix of the writes, all but the last
/// memtable's at least.
#[test]
fn a_memtable_switch_hands_the_old_wal_over_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            create_if_missing: true,
            manual_wal_flush: true,
            write_buffer_size: 16 << 10,
            ..Options::default()
        },
    )
    .unwrap();
    const WRITES: u32 = 5000;
    for i in 0..WRITES {
        db.put(&NO_SYNC, &i.to_be_bytes(), &[b'x'; 40]).unwrap();
    }
    db.wait_for_compactions().unwrap();
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() && e.file_name() != "LOCK" {
            std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
        }
    }
    let killed = open(copy.path(), true);
    let present: Vec<bool> = (0..WRITES)
        .map(|i| {
            killed
                .get(&ReadOptions::new(), &i.to_be_bytes())
                .unwrap()
                .is_some()
        })
        .collect();
    let prefix = present.iter().take_while(|&&p| p).count();
    assert!(
        present[prefix..].iter().all(|&p| !p),
        "a hole after {prefix}"
    );
    // A 16 KiB memtable holds a few hundred of these writes.
    assert!(
        prefix as u32 >= WRITES - 1000,
        "only {prefix} writes survived"
    );
    db.close().unwrap();
    let db = open(dir.path(), true);
    for i in 0..WRITES {
        assert!(
            db.get(&ReadOptions::new(), &i.to_be_bytes())
                .unwrap()
                .is_some(),
            "{i}"
        );
    }
}
