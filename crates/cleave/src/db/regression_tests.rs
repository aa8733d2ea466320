//! Regression tests for bugs found in review of the `db` layer.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use super::{open, Db};
use crate::base::filename;
use crate::batch::WriteBatch;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::vfs::{FaultFs, FaultOp, Fs, MemFs};

const DIR: &str = "/db";

const SYNC: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        create_if_missing: true,
        fs,
        write_buffer_size: 16 << 10,
        target_file_size_base: 16 << 10,
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 200,
        level0_stop_writes_trigger: 300,
        max_write_buffer_number: 8,
        ..Options::default()
    }
}

fn put(key: &[u8], value: &[u8]) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(key, value);
    b
}

/// Recovery hands out file numbers from the manifest's `next_file_number`,
/// which does not cover WALs created after the last manifest edit. With two
/// such WALs, the WAL recovery creates for itself gets the number of one it
/// has just replayed, and `WalWriter::create` truncates it before the
/// manifest records the flushed replay. A failure (or crash) in that window
/// loses synced, acknowledged writes.
#[test]
fn recovery_does_not_truncate_a_replayed_wal() {
    let mem = MemFs::new();
    {
        // No background threads: memtables are switched but never flushed,
        // as when flushes fall behind the writers.
        let inner = open::open(Path::new(DIR), options(Arc::new(mem.clone())), false).unwrap();
        // Unlogged bulk writes fill each memtable, so each logged write
        // switches it first; the WALs hold only the small logged writes.
        let big = vec![b'x'; 20 << 10];
        let unlogged = WriteOptions {
            sync: false,
            disable_wal: true,
        };
        inner.write(&SYNC, put(b"a", b"1")).unwrap(); // WAL 2
        inner.write(&unlogged, put(b"bulk1", &big)).unwrap();
        inner.write(&SYNC, put(b"b", b"2")).unwrap(); // WAL 3, not in the manifest
        inner.write(&unlogged, put(b"bulk2", &big)).unwrap();
        inner.write(&SYNC, put(b"c", b"3")).unwrap(); // WAL 4, not in the manifest
    }
    let crashed = mem.crash_clone();

    // Recovery fails when it logs its edit (a full disk, an EIO, or a crash
    // at this point).
    let fault = FaultFs::new(Arc::new(crashed.clone()));
    fault.fail(
        &[FaultOp::Create],
        Some("MANIFEST"),
        0,
        ErrorKind::Other,
        true,
    );
    assert!(Db::open(DIR, options(Arc::new(fault))).is_err());

    let db = Db::open(DIR, options(Arc::new(crashed))).unwrap();
    let r = ReadOptions::new();
    assert_eq!(db.get(&r, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(&r, b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(
        db.get(&r, b"c").unwrap().as_deref(),
        Some(&b"3"[..]),
        "synced write lost: recovery truncated the WAL holding it"
    );
}

/// A failed manifest sync leaves the edit's state on disk unknown: the
/// record may well be there. `run_compaction` nevertheless removes its
/// outputs, so when the record did land the manifest names missing files
/// and the database cannot be opened again (its inputs were deleted as
/// orphans by nobody yet, but the manifest no longer names them either).
#[test]
fn failed_manifest_sync_in_compaction_keeps_outputs() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    for round in 0..3u32 {
        for i in 0..200u32 {
            let k = format!("key{i:05}");
            let v = format!("value{round}-{i}");
            db.put(&SYNC, k.as_bytes(), v.as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    // The next manifest fsync fails (EIO); the appended record stays in the
    // file, as it does in the page cache of a real file system.
    fault.fail(
        &[FaultOp::Sync],
        Some("MANIFEST"),
        0,
        ErrorKind::Other,
        false,
    );
    assert!(db.compact_range(None, None).is_err());
    drop(db);
    fault.heal();

    let db = Db::open(DIR, options(Arc::new(mem.clone())))
        .expect("reopen after a failed manifest fsync during compaction");
    for i in 0..200u32 {
        let k = format!("key{i:05}");
        assert_eq!(
            db.get(&ReadOptions::new(), k.as_bytes()).unwrap(),
            Some(format!("value2-{i}").into_bytes())
        );
    }
}

/// Manifest rotation (every open, and whenever the manifest outgrows its
/// bound) renames the temp file over CURRENT and then syncs the directory.
/// If only that directory sync fails, `write_manifest` removes the new
/// manifest, which the renamed CURRENT already names: the database no
/// longer opens.
#[test]
fn failed_dir_sync_after_current_rename_keeps_the_manifest() {
    let mem = MemFs::new();
    {
        let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
        db.put(&SYNC, b"k", b"v").unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    // Open: the replay is empty, so the first directory sync is the new
    // WAL's and the second is CURRENT's, inside the manifest rotation.
    let fault = FaultFs::new(Arc::new(mem.clone()));
    fault.fail(&[FaultOp::SyncDir], None, 1, ErrorKind::Other, false);
    let r = Db::open(DIR, options(Arc::new(fault.clone())));
    assert_eq!(fault.injected(), 1);
    assert!(r.is_err());
    drop(r);

    let db = Db::open(DIR, options(Arc::new(mem.clone())))
        .expect("reopen after a failed directory sync in manifest rotation");
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}

/// With CURRENT lost, open took the directory for an empty one: it created
/// a new database and removed every sstable, value file and WAL as an
/// orphan. It now fails naming CURRENT and leaves the files alone.
#[test]
fn a_missing_current_fails_the_open_and_keeps_the_files() {
    let mem = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    db.put(&SYNC, b"k", b"v").unwrap();
    db.flush().unwrap();
    db.put(&SYNC, b"k2", b"v2").unwrap();
    db.close().unwrap();
    let current = Path::new(DIR).join("CURRENT");
    mem.remove(&current).unwrap();
    let before = mem.list(Path::new(DIR)).unwrap();
    for create_if_missing in [true, false] {
        let opts = Options {
            create_if_missing,
            ..options(Arc::new(mem.clone()))
        };
        let err = Db::open(DIR, opts).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("CURRENT"), "{err}");
        let mut after = mem.list(Path::new(DIR)).unwrap();
        after.sort();
        let mut expected = before.clone();
        expected.sort();
        assert_eq!(after, expected, "the failed open changed files");
    }
}

/// Replay took whatever WALs the directory listed: with WALs 1, 2 and 3
/// live and 2 lost, open replayed 1 and 3, applying 3's writes over the
/// hole 2 left (a state that never existed), and with the manifest's
/// oldest live WAL lost it replayed the rest as if nothing were missing;
/// either way silently, and the open then retired the WALs for good. Each
/// WAL now names the one before it, and a gap fails the open naming the
/// missing WAL. (The newest WAL has no successor to name it: its loss
/// leaves a consistent prefix, as in RocksDB without WAL tracking.)
#[test]
fn a_missing_wal_fails_the_open_naming_it() {
    let mem = MemFs::new();
    {
        // No background threads: the memtables stay unflushed, so all
        // three WALs stay live.
        let inner = open::open(Path::new(DIR), options(Arc::new(mem.clone())), false).unwrap();
        let big = vec![b'x'; 20 << 10];
        let unlogged = WriteOptions {
            sync: false,
            disable_wal: true,
        };
        inner.write(&SYNC, put(b"a", b"1")).unwrap();
        inner.write(&unlogged, put(b"bulk1", &big)).unwrap();
        inner.write(&SYNC, put(b"a", b"2")).unwrap(); // the next WAL
        inner.write(&unlogged, put(b"bulk2", &big)).unwrap();
        inner.write(&SYNC, put(b"b", b"3")).unwrap(); // the one after
    }
    let crashed = mem.crash_clone();
    let mut wals: Vec<String> = crashed
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .collect();
    wals.sort();
    assert_eq!(wals.len(), 3, "{wals:?}");
    for paranoid_checks in [false, true] {
        for lost in &wals[..2] {
            let fs = crashed.crash_clone();
            fs.remove(&Path::new(DIR).join(lost)).unwrap();
            let opts = Options {
                paranoid_checks,
                ..options(Arc::new(fs))
            };
            let err = Db::open(DIR, opts).unwrap_err();
            assert!(err.is_corruption(), "{lost}: {err}");
            assert!(err.to_string().contains(lost), "{lost}: {err}");
        }
    }
    let fs = crashed.crash_clone();
    fs.remove(&Path::new(DIR).join(&wals[2])).unwrap();
    let db = Db::open(DIR, options(Arc::new(fs))).unwrap();
    let r = ReadOptions::new();
    assert_eq!(db.get(&r, b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(&r, b"b").unwrap(), None);
    drop(db);
    let db = Db::open(DIR, options(Arc::new(crashed))).unwrap();
    assert_eq!(db.get(&r, b"b").unwrap().as_deref(), Some(&b"3"[..]));
}

/// A value log joins the Version at the first flush whose entries point
/// into it, but a writer that appended to it just before may commit its
/// entry into a later memtable (a straggler). Until that memtable is
/// flushed, the log must neither be dropped as unreferenced nor collected
/// by GC, or the straggler's handle would dangle. Modelled here by pinning
/// the log as a straggler's append does.
#[test]
fn a_pinned_value_log_is_neither_dropped_nor_collected() {
    let mem = MemFs::new();
    let opts = Options {
        big_value_threshold: 1 << 10,
        min_value_size: 1 << 10,
        enable_gc: false,
        ..options(Arc::new(mem.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    let w = WriteOptions::default();
    let big = |c: u8| vec![c; 8 << 10];
    db.put(&w, b"a", &big(b'a')).unwrap();
    db.put(&w, b"b", &big(b'b')).unwrap();
    db.flush().unwrap();
    let inner = db.inner.clone();
    let log = {
        let st = inner.state.lock();
        let logs: Vec<_> = st.current.value_files().map(|f| f.number).collect();
        assert_eq!(logs.len(), 1, "{logs:?}");
        logs[0]
    };
    let hosted_by = |n| inner.state.lock().current.physical_file(n);
    inner.logs.pin(&[(log, 1)]);
    // Half of the log becomes garbage: GC would collect it at once.
    db.delete(&w, b"a").unwrap();
    db.compact_range(None, None).unwrap();
    db.gc_with_ratio(0.01).unwrap();
    assert_eq!(hosted_by(log), Some(log), "GC collected a pinned log");
    // All of it becomes garbage: an edit would drop it.
    db.delete(&w, b"b").unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(hosted_by(log), Some(log), "a pinned log was dropped");
    assert!(mem
        .file_len(&filename::value_file(Path::new(DIR), log))
        .is_some());
    // Once the straggler's memtable is flushed, the next edit drops it.
    inner.logs.unpin([(log, 1)]);
    db.put(&w, b"c", b"small").unwrap();
    db.flush().unwrap();
    assert_eq!(hosted_by(log), None);
}

/// With recyclable records, a WAL whose unsynced tail a crash lost shows
/// no damaged record: the bytes after what survived are stale or missing.
/// The next WAL, whose header gives the previous one's length, holds later
/// writes, and replaying them over the hole would make a state that never
/// existed.
#[test]
fn replay_stops_before_a_wal_that_follows_a_lost_tail() {
    let mem = MemFs::new();
    {
        // No background threads: the memtable switch keeps both WALs.
        let inner = open::open(Path::new(DIR), recycling(mem.clone()), false).unwrap();
        let nosync = WriteOptions::default();
        let unlogged = WriteOptions {
            sync: false,
            disable_wal: true,
        };
        inner.write(&SYNC, put(b"a", b"1")).unwrap();
        inner.write(&nosync, put(b"b", &[b'2'; 300])).unwrap();
        inner.write(&nosync, put(b"c", &[b'3'; 300])).unwrap();
        // Fills the memtable: the next write switches to a new WAL.
        inner
            .write(&unlogged, put(b"bulk", &[b'x'; 20 << 10]))
            .unwrap();
        inner.write(&nosync, put(b"d", b"4")).unwrap();
        let wals = mem.list(Path::new(DIR)).unwrap();
        assert_eq!(wals.iter().filter(|n| n.ends_with(".wal")).count(), 2);
        // Both WALs' names are durable, none of their unsynced bytes.
        mem.sync_dir(Path::new(DIR)).unwrap();
    }
    // The old WAL keeps its unsynced bytes (over 600) but the last 100;
    // the new one (header and `d`, under 200 bytes) keeps all of its own.
    let crashed = mem.crash_clone_keeping(|n| if n > 600 { n - 100 } else { n });
    let db = Db::open(DIR, recycling(crashed)).unwrap();
    let r = ReadOptions::new();
    assert_eq!(db.get(&r, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(&r, b"b").unwrap().as_deref(), Some(&[b'2'; 300][..]));
    assert_eq!(db.get(&r, b"c").unwrap(), None, "the torn write");
    assert_eq!(
        db.get(&r, b"d").unwrap(),
        None,
        "a write after the lost one was replayed over the hole"
    );
}

fn recycling(fs: MemFs) -> Options {
    Options {
        recycle_wal: 1,
        ..options(Arc::new(fs))
    }
}

/// In a recycled WAL's stale tail, a value can hold the bytes of a valid
/// record carrying the WAL's own number; the reader then reports damage
/// where the WAL's records end. The next WAL's header gives the length of
/// this one, which says nothing was lost: replay must go on to it rather
/// than drop the writes it holds.
#[test]
fn a_look_alike_record_in_a_stale_tail_does_not_stop_replay() {
    use crate::base::FileNumber;
    use crate::wal::{Previous, WalWriter};
    let mem = MemFs::new();
    Db::open(DIR, recycling(mem.clone()))
        .unwrap()
        .close()
        .unwrap();
    let dir = Path::new(DIR);
    let wal = mem
        .list(dir)
        .unwrap()
        .iter()
        .find_map(|n| match filename::parse(n) {
            Some((filename::FileKind::Wal, number)) => Some(number),
            _ => None,
        })
        .unwrap();
    let write = |number: FileNumber, previous: Option<Previous>, seq: u64, b: &mut WriteBatch| {
        let mut w = WalWriter::create_after(&mem, dir, number, previous, true).unwrap();
        w.append(&[b.encode_with_seq(seq)], true).unwrap();
        w.sync().unwrap();
    };
    write(wal, None, 1, &mut put(b"a", b"1"));
    let path = filename::wal(dir, wal);
    let mut bytes = crate::vfs::read_all(&mem, &path).unwrap();
    let len = bytes.len() as u64;
    // What a previous use left: a byte that starts no record, then a
    // value's bytes that form a record of this WAL's number.
    bytes.push(0xff);
    crate::record::encode_recyclable(&mut bytes, wal.0, b"a value that looks like a record");
    let mut f = mem.create(&path, Default::default()).unwrap();
    f.append(&bytes).unwrap();
    f.sync().unwrap();
    drop(f);
    let next = FileNumber(wal.0 + 1);
    let previous = Previous { number: wal, len };
    write(next, Some(previous), 2, &mut put(b"b", b"2"));
    for paranoid_checks in [false, true] {
        let opts = Options {
            paranoid_checks,
            ..recycling(mem.process_crash_clone())
        };
        let db = Db::open(DIR, opts).unwrap();
        let r = ReadOptions::new();
        assert_eq!(db.get(&r, b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(
            db.get(&r, b"b").unwrap().as_deref(),
            Some(&b"2"[..]),
            "paranoid {paranoid_checks}: the next WAL's writes were dropped"
        );
    }
}
