//! `Db::checkpoint`: a copy that opens as a database of its own, holds
//! every write acknowledged before the call and a prefix of the writes
//! racing it, shares files by hard links on a real file system, outlives
//! the source's GC and compactions, and, when a fault strikes, leaves no
//! database behind and the source unharmed.

#[path = "common/faults.rs"]
mod setup;

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs, OsFs};
use cleave::{Db, Error, ReadOptions, WriteOptions};

use setup::*;

const KEYS: usize = 600;

fn everything(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().unwrap().to_vec());
        it.next().unwrap();
    }
    it.status().unwrap();
    out
}

/// Writes keys `0..KEYS` (half of them separated), flushing along the
/// way, and deletes every tenth: what the checkpoints below must hold.
fn fill(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        db.put(&ASYNC, &k(i), &v(i, 0)).unwrap();
        model.insert(k(i), v(i, 0));
        if i % 200 == 199 {
            db.flush().unwrap();
        }
    }
    for i in (0..KEYS).step_by(10) {
        db.delete(&ASYNC, &k(i)).unwrap();
        model.remove(&k(i));
    }
    model
}

#[test]
fn checkpoint_on_disk_shares_files_and_outlives_the_source_rewriting_them() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("db");
    let cp = tmp.path().join("checkpoint");
    let db = Db::open(&src, options(Arc::new(OsFs::new()))).unwrap();
    let model = fill(&db);
    let info = db.checkpoint(&cp).unwrap();
    assert!(info.files_linked > 0, "{info:?}");
    assert_eq!((info.files_copied, info.bytes_copied), (0, 0), "{info:?}");
    assert!(info.last_sequence >= KEYS as u64, "{info:?}");
    // The source rewrites every file the checkpoint shares: new values,
    // a full compaction, GC of every value file with garbage.
    for i in 0..KEYS {
        db.put(&ASYNC, &k(i), &v(i, 1)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.gc_with_ratio(0.01).unwrap();
    db.close().unwrap();
    let names = |dir: &Path| -> Vec<String> { OsFs::new().list(dir).unwrap() };
    let gone = names(&cp)
        .into_iter()
        .filter(|n| n.ends_with(".sst") || n.ends_with(".vf"))
        .filter(|n| !src.join(n).exists())
        .count();
    assert!(gone > 0, "the source deleted none of the shared files");

    let copy = Db::open(&cp, options(Arc::new(OsFs::new()))).unwrap();
    assert_eq!(everything(&copy), model);
    let report = copy.verify();
    assert!(report.is_ok(), "{report}");
    // The copy is a database of its own: it takes writes, and the source
    // does not see them.
    copy.put(&SYNC, b"only-in-the-copy", b"x").unwrap();
    copy.compact_range(None, None).unwrap();
    copy.close().unwrap();
    let db = Db::open(&src, options(Arc::new(OsFs::new()))).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"only-in-the-copy").unwrap(),
        None
    );
    assert_eq!(
        db.get(&ReadOptions::new(), &k(2)).unwrap(),
        Some(v(2, 1)),
        "the source keeps its own writes"
    );
    assert!(db.verify().is_ok());
}

#[test]
fn a_checkpoint_racing_a_writer_holds_a_prefix_of_its_writes() {
    let mem = MemFs::new();
    let db = Arc::new(Db::open(DIR, options(Arc::new(mem.clone()))).unwrap());
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) && i < 200_000 {
                db.put(&WriteOptions::default(), &k(i), &v(i, 0)).unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    let mut checked = 0;
    for round in 0..6 {
        while acked.load(Ordering::Acquire) < 300 * (round + 1) {
            std::thread::yield_now();
        }
        let before = acked.load(Ordering::Acquire);
        let target = format!("/checkpoint-{round}");
        db.checkpoint(&target).unwrap();
        let copy = Db::open(&target, options(Arc::new(mem.crash_clone()))).unwrap();
        let held = everything(&copy);
        let n = held.len();
        assert!(
            n >= before,
            "round {round}: {n} keys, {before} acknowledged before"
        );
        for i in 0..n {
            assert_eq!(
                held.get(&k(i)),
                Some(&v(i, 0)),
                "round {round}: not a prefix"
            );
        }
        checked += 1;
        copy.close().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(checked, 6);
}

#[test]
fn a_checkpoint_into_a_directory_with_files_is_refused() {
    let mem = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    db.put(&SYNC, b"a", b"1").unwrap();
    let target = Path::new("/taken");
    mem.create_dir_all(target).unwrap();
    mem.create(&target.join("precious"), Default::default())
        .unwrap();
    match db.checkpoint(target) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("/taken"), "{msg}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // Into itself, too.
    assert!(matches!(db.checkpoint(DIR), Err(Error::InvalidArgument(_))));
    // An empty directory is fine.
    mem.remove(&target.join("precious")).unwrap();
    db.checkpoint(target).unwrap();
}

#[test]
fn refused_hard_links_are_copies() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    let model = fill(&db);
    fault.fail(&[FaultOp::Link], None, 0, ErrorKind::CrossesDevices, true);
    let info = db.checkpoint("/copy").unwrap();
    fault.heal();
    assert_eq!(info.files_linked, 0, "{info:?}");
    assert!(info.files_copied > 0 && info.bytes_copied > 0, "{info:?}");
    let copy = Db::open("/copy", options(Arc::new(mem.crash_clone()))).unwrap();
    assert_eq!(everything(&copy), model);
    assert!(copy.verify().is_ok());
}

/// A link that fails for another reason than a refusal (here an I/O
/// error) fails the checkpoint rather than being answered with a copy.
#[test]
fn a_link_that_fails_for_another_reason_fails_the_checkpoint() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    let model = fill(&db);
    fault.fail(&[FaultOp::Link], None, 2, ErrorKind::Other, false);
    let e = db.checkpoint("/cp").unwrap_err();
    fault.heal();
    assert!(matches!(e, Error::Io { op: "link", .. }), "{e}");
    assert!(Fs::list(&mem, Path::new("/cp")).unwrap().is_empty());
    let info = db.checkpoint("/cp").unwrap();
    assert_eq!(info.files_copied, 0);
    let copy = Db::open("/cp", options(Arc::new(mem.crash_clone()))).unwrap();
    assert_eq!(everything(&copy), model);
}

/// Each operation of a checkpoint fails in turn (writes of the copy's
/// files, reads of the source's): the call returns the error naming the
/// file, no database is left in the directory, the source is unharmed,
/// and a second try succeeds.
#[test]
fn a_failed_checkpoint_leaves_no_database_and_the_source_unharmed() {
    let mut failed = 0;
    for op in [
        FaultOp::Create,
        FaultOp::Append,
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::SyncDir,
        FaultOp::Read,
    ] {
        for skip in [0, 1, 3] {
            let ctx = format!("{op:?} after {skip}");
            let mem = MemFs::new();
            let fault = FaultFs::new(Arc::new(mem.clone()));
            // Links refused, so that file contents are copied too.
            let no_links = FaultFs::new(Arc::new(fault.clone()));
            no_links.fail(&[FaultOp::Link], None, 0, ErrorKind::Unsupported, true);
            let db = Db::open(DIR, options(Arc::new(no_links))).unwrap();
            let model = fill(&db);
            db.flush().unwrap();
            db.wait_for_compactions().unwrap();
            let target = "/cp";
            let (file, kind) = if op == FaultOp::Read {
                (DIR, ErrorKind::InvalidData)
            } else {
                (target, ErrorKind::Other)
            };
            fault.fail(&[op], Some(file), skip, kind, false);
            let result = db.checkpoint(target);
            let struck = fault.injected() > 0;
            fault.heal();
            match result {
                Ok(_) => assert!(!struck, "{ctx}: fault swallowed"),
                Err(e) => {
                    failed += 1;
                    assert!(struck, "{ctx}: {e}");
                    assert!(matches!(e, Error::Io { .. }), "{ctx}: {e}");
                    assert!(e.to_string().contains(file), "{ctx}: {e}");
                    assert!(
                        Fs::list(&mem, Path::new(target)).unwrap().is_empty(),
                        "{ctx}"
                    );
                    db.put(&SYNC, b"after", b"fault").unwrap();
                    db.delete(&SYNC, b"after").unwrap();
                    db.checkpoint(target).unwrap();
                }
            }
            assert_eq!(everything(&db), model, "{ctx}: the source");
            let copy = Db::open(target, options(Arc::new(mem.crash_clone()))).unwrap();
            assert_eq!(everything(&copy), model, "{ctx}: the checkpoint");
            assert!(copy.verify().is_ok(), "{ctx}");
            db.close().unwrap();
        }
    }
    assert!(failed >= 12, "only {failed} checkpoints failed");
}
