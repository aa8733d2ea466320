//! Write faults: a full disk (ENOSPC) or a failed fsync in the WAL, a
//! flush, a compaction, a GC job, a manifest write or rotation, the
//! directory, and the flush of a recovery. A failure whose effect on disk
//! is unknown poisons the database: writes are refused with an error
//! naming the file, reads go on, and a reopen (of the live files or of
//! what a power loss leaves) recovers every acknowledged write. A full
//! disk in a write, a flush or a manifest write makes it read-only
//! instead (`Error::NoSpace`), until `Db::resume` (or the free space it
//! watches) takes writes again; one in a compaction or GC job postpones
//! the job. A GC job that fails before its commit changed nothing and
//! does not poison. More on full disks: `tests/no_space.rs`.

#[path = "common/faults.rs"]
mod setup;

use std::io::ErrorKind;
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, MemFs};
use cleave::{Db, Error, Options, ReadOptions};

use setup::*;
use FaultOp::{Append, Create, Rename, Sync, SyncDir};

fn get(db: &Db, i: usize) -> Option<Vec<u8>> {
    db.get(&ReadOptions::new(), &k(i)).unwrap()
}

/// Asserts `err` is the failure on a `name` file, or the poison it caused
/// (a flush runs in the background and the caller learns of it so), and
/// names the file.
fn assert_failed_on(err: &Error, name: &str, ctx: &str) {
    assert!(
        matches!(
            err,
            Error::Io { .. } | Error::Poisoned(_) | Error::NoSpace { .. }
        ),
        "{ctx}: {err:?}"
    );
    assert!(err.to_string().contains(name), "{ctx}: {err}");
}

/// Reopens both what the process left (a crash of the process) and what
/// a power loss leaves, and checks each.
fn reopen_and_check(mem: &MemFs, oracle: &Oracle, ctx: &str) {
    for (fs, what) in [
        (Arc::new(mem.clone()) as _, "live"),
        (crashed(mem), "crash"),
    ] {
        let db = Db::open(DIR, options(fs)).unwrap();
        let ctx = format!("{ctx}, reopened ({what})");
        check(&db, oracle, &ctx);
        assert_no_orphans(&db, &ctx);
        db.close().unwrap();
    }
}

/// Puts keys `range` with synced writes until one fails, recording each
/// as acknowledged, and the failed one as maybe written; its error.
fn put_until_failure(db: &Db, oracle: &mut Oracle, range: std::ops::Range<usize>) -> Option<Error> {
    for i in range {
        match db.put(&SYNC, &k(i), &v(i, 0)) {
            Ok(()) => oracle.ack(i, 0),
            Err(e) => {
                oracle.maybe(i, 0);
                return Some(e);
            }
        }
    }
    None
}

/// A full disk under a WAL append fails that write, which is not
/// acknowledged, and makes the database read-only (the WAL may hold part
/// of it). Whole and torn: a short write leaves half a record. Resuming
/// starts a new WAL; the failed write never appears, before or after a
/// reopen, and every acknowledged write survives a power loss.
#[test]
fn enospc_on_a_wal_append_fails_the_write_until_resumed() {
    let mut total = 0;
    for torn in [false, true] {
        let ctx = format!("torn {torn}");
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = Oracle::default();
        oracle.put(&db, 0..100, 0, &SYNC);
        let rule = if torn {
            FaultFs::fail_torn
        } else {
            FaultFs::fail
        };
        rule(
            &fs,
            &[FaultOp::Append],
            Some(".wal"),
            0,
            ErrorKind::StorageFull,
            true,
        );
        let err = db.put(&SYNC, &k(100), &v(100, 0)).unwrap_err();
        assert_io(&err, ".wal", ErrorKind::StorageFull, &ctx);
        assert_read_only(&db, ".wal", &ctx);
        assert_eq!(db.get(&ReadOptions::new(), &k(5)).unwrap(), Some(v(5, 0)));
        assert_eq!(db.get(&ReadOptions::new(), &k(100)).unwrap(), None);
        // Still full: resuming fails and changes nothing.
        assert_io(
            &db.resume().unwrap_err(),
            ".wal",
            ErrorKind::StorageFull,
            &ctx,
        );
        total += fs.injected();
        fs.heal();
        db.resume().unwrap();
        assert_eq!(db.get(&ReadOptions::new(), &k(100)).unwrap(), None);
        oracle.put(&db, 100..120, 1, &SYNC);
        oracle.put(&db, 120..130, 1, &ASYNC);
        db.close().unwrap();
        reopen_and_check(&mem, &oracle, &ctx);
        let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
        assert_eq!(
            db.get(&ReadOptions::new(), &k(100)).unwrap(),
            Some(v(100, 1))
        );
        drop(db);
    }
    eprintln!("faults injected by enospc_on_a_wal_append_fails_the_write_until_resumed: {total}");
}

/// A failed WAL fsync fails the write and poisons the database; a reopen
/// recovers everything acknowledged before, and nothing refused after.
#[test]
fn failed_wal_sync_poisons_then_reopen_recovers() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..100, 0, &SYNC);
    fs.fail(&[FaultOp::Sync], Some(".wal"), 0, ErrorKind::Other, true);
    let err = db.put(&SYNC, &k(100), &v(100, 0)).unwrap_err();
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
    assert_io(&err, ".wal", ErrorKind::Other, "sync");
    // Appended but not synced: a crash may or may not keep it.
    oracle.maybe(100, 0);
    let err = db.put(&ASYNC, &k(101), &v(101, 0)).unwrap_err();
    assert_poisoned(&err, ".wal", "async write after the failed sync");
    assert_refuses_writes(&db, ".wal", "after the failed sync");
    assert_eq!(get(&db, 5), Some(v(5, 0)), "reads still work");
    let err = db.close().unwrap_err();
    assert_poisoned(&err, ".wal", "close must report the poison");
    fs.heal();
    reopen_and_check(&mem, &oracle, "failed WAL sync");
    let db = Db::open(DIR, options(crashed(&mem))).unwrap();
    assert_eq!(
        get(&db, 101),
        None,
        "a write refused by a poisoned db must not appear"
    );
    injected(&fs, "failed_wal_sync_poisons_then_reopen_recovers");
}

/// A synced write after a memtable switch syncs the directory entry of the
/// new WAL; when that fsync fails, the write fails and the database is
/// poisoned (if a background flush's own directory sync failed first, the
/// write learns of that poison instead).
#[test]
fn failed_directory_sync_for_a_new_wal_poisons_then_reopen_recovers() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..20, 0, &SYNC);
    fs.fail(&[FaultOp::SyncDir], None, 0, ErrorKind::Other, true);
    let err = put_until_failure(&db, &mut oracle, 20..2000)
        .expect("a memtable switch must sync the directory");
    assert_failed_on(&err, DIR, "directory sync");
    assert_refuses_writes(&db, DIR, "after the failed directory sync");
    drop(db);
    fs.heal();
    reopen_and_check(&mem, &oracle, "failed directory sync");
    injected(
        &fs,
        "failed_directory_sync_for_a_new_wal_poisons_then_reopen_recovers",
    );
}

/// One way a flush can fail: the operations and the file that fail, the
/// error kind, and whether a failing append lands half its bytes.
struct Case {
    ops: &'static [FaultOp],
    name: &'static str,
    kind: ErrorKind,
    torn: bool,
}

const fn case(ops: &'static [FaultOp], name: &'static str, kind: ErrorKind, torn: bool) -> Case {
    Case {
        ops,
        name,
        kind,
        torn,
    }
}

impl Case {
    /// A full disk under a write: the database turns read-only rather
    /// than poisoned (a failed fsync poisons, whatever its error).
    fn full_disk(&self) -> bool {
        self.kind == ErrorKind::StorageFull && !self.ops.contains(&Sync)
    }

    /// Asserts `db` refuses writes as this fault makes it: read-only after
    /// a full disk, else poisoned.
    fn assert_stopped(&self, db: &Db, ctx: &str) {
        if self.full_disk() {
            assert_read_only(db, self.name, ctx);
        } else {
            assert_refuses_writes(db, self.name, ctx);
        }
    }

    /// After the fault healed: a read-only database resumes and takes
    /// writes of keys `range` (acknowledged in `oracle`); a poisoned one
    /// stays so.
    fn resume(&self, db: &Db, oracle: &mut Oracle, range: std::ops::Range<usize>, ctx: &str) {
        if self.full_disk() {
            // A background job that met the full disk before it healed
            // may record its failure after, failing the first resume; the
            // next one (or the flush thread's own poll) goes through.
            let mut tries = 0;
            while let Err(e) = db.resume() {
                tries += 1;
                assert!(
                    tries < 100 && matches!(e, cleave::Error::NoSpace { .. }),
                    "{ctx}: {e}"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            oracle.put(db, range, 7, &SYNC);
            db.flush().unwrap();
            check(db, oracle, ctx);
        } else {
            assert_failed_on(&db.resume().unwrap_err(), self.name, ctx);
        }
    }

    fn inject(&self, fs: &FaultFs, skip: u64) {
        let path = (self.name != DIR).then_some(self.name);
        if self.torn {
            fs.fail_torn(self.ops, path, skip, self.kind, true);
        } else {
            fs.fail(self.ops, path, skip, self.kind, true);
        }
    }
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} on {} ({:?}{})",
            self.ops,
            self.name,
            self.kind,
            if self.torn { ", torn" } else { "" }
        )
    }
}

/// A full disk, a failed create or a failed fsync of a flush's sstable,
/// value file, manifest record or directory: the flush fails, the
/// database is read-only (a full disk) or poisoned, and nothing
/// acknowledged is lost on reopen; the flush's files are removed then.
#[test]
fn failed_flush_io_stops_writes_then_recovers() {
    let cases = [
        case(&[Append], ".sst", ErrorKind::StorageFull, false),
        case(&[Append], ".sst", ErrorKind::StorageFull, true),
        case(&[Append], ".vf", ErrorKind::StorageFull, false),
        case(&[Append], ".vf", ErrorKind::StorageFull, true),
        case(&[Create], ".sst", ErrorKind::StorageFull, false),
        case(&[Create], ".vf", ErrorKind::StorageFull, false),
        case(&[Sync], ".sst", ErrorKind::Other, false),
        case(&[Sync], ".vf", ErrorKind::Other, false),
        case(&[Append], "MANIFEST", ErrorKind::StorageFull, false),
        case(&[Append], "MANIFEST", ErrorKind::StorageFull, true),
        case(&[Sync], "MANIFEST", ErrorKind::Other, false),
        case(&[SyncDir], DIR, ErrorKind::Other, false),
    ];
    let mut total = 0;
    for c in &cases {
        let ctx = c.to_string();
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = Oracle::default();
        oracle.put(&db, 0..40, 0, &SYNC);
        c.inject(&fs, 0);
        let err = db.flush().unwrap_err();
        assert_failed_on(&err, c.name, &ctx);
        c.assert_stopped(&db, &ctx);
        check(&db, &oracle, &ctx);
        total += fs.injected();
        assert!(fs.injected() > 0, "{ctx}");
        fs.heal();
        c.resume(&db, &mut oracle, 40..60, &ctx);
        drop(db);
        reopen_and_check(&mem, &oracle, &ctx);
    }
    eprintln!("faults injected by failed_flush_io_stops_writes_then_recovers: {total}");
}

/// The manifest is rewritten as a snapshot once it grows past
/// `max_manifest_file_size`: a new manifest, a temporary CURRENT synced and
/// renamed over the old one, and the directory synced. A failure at any of
/// those steps poisons (or, a full disk, makes the database read-only); the
/// reopen finds CURRENT naming a complete manifest (old or new) and
/// removes the other.
#[test]
fn failed_manifest_rotation_stops_writes_then_recovers() {
    let cases = [
        case(&[Create], "MANIFEST", ErrorKind::StorageFull, false),
        case(&[Create], ".tmp", ErrorKind::StorageFull, false),
        case(&[Append], ".tmp", ErrorKind::StorageFull, true),
        case(&[Sync], ".tmp", ErrorKind::Other, false),
        case(&[Rename], ".tmp", ErrorKind::Other, false),
    ];
    let mut total = 0;
    for c in &cases {
        let ctx = c.to_string();
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let opts = Options {
            max_manifest_file_size: 1 << 10,
            ..options(Arc::new(fs.clone()))
        };
        let db = Db::open(DIR, opts).unwrap();
        let mut oracle = Oracle::default();
        c.inject(&fs, 0);
        // The rotation may come in a flush or in a background compaction;
        // after it, writes are refused (and not written).
        let mut err = None;
        'rounds: for round in 0..100 {
            for i in round * 10..round * 10 + 10 {
                match db.put(&SYNC, &k(i), &v(i, round)) {
                    Ok(()) => oracle.ack(i, round),
                    Err(e) => {
                        err = Some(e);
                        break 'rounds;
                    }
                }
            }
            if let Err(e) = db.flush() {
                err = Some(e);
                break;
            }
        }
        let err = err.expect("the manifest must rotate");
        assert_failed_on(&err, c.name, &ctx);
        c.assert_stopped(&db, &ctx);
        total += fs.injected();
        fs.heal();
        c.resume(&db, &mut oracle, 5000..5020, &ctx);
        drop(db);
        reopen_and_check(&mem, &oracle, &ctx);
        let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
        assert_eq!(files(&mem, "MANIFEST").len(), 1, "{ctx}");
        db.close().unwrap();
    }
    eprintln!("faults injected by failed_manifest_rotation_stops_writes_then_recovers: {total}");
}

/// A compaction that cannot write its output (full disk, failed fsync)
/// or log its edit fails with that error, typed; its outputs are removed
/// (or, once the edit may be logged, left for the reopen to remove if the
/// manifest does not name them). A full disk under its output postpones
/// it, and the database goes on taking writes; under its manifest record
/// it makes the database read-only; anything else poisons.
#[test]
fn failed_compaction_io_stops_it_then_reopen_recovers() {
    let cases = [
        case(&[Append], ".sst", ErrorKind::StorageFull, false),
        case(&[Append], ".sst", ErrorKind::StorageFull, true),
        case(&[Sync], ".sst", ErrorKind::Other, false),
        case(&[Append], "MANIFEST", ErrorKind::StorageFull, true),
        case(&[Sync], "MANIFEST", ErrorKind::Other, false),
    ];
    let mut total = 0;
    for c in &cases {
        let ctx = c.to_string();
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, uncached_options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = Oracle::default();
        for round in 0..3 {
            oracle.put(&db, round * 50..round * 50 + 100, round, &SYNC);
            db.flush().unwrap();
        }
        let tables = files(&mem, "sst");
        c.inject(&fs, 0);
        let err = db.compact_range(None, None).unwrap_err();
        assert_io(&err, c.name, c.kind, &ctx);
        if c.full_disk() && c.name == ".sst" {
            assert_eq!(db.write_state(), cleave::WriteState::ReadWrite, "{ctx}");
            assert_eq!(db.stats().jobs_postponed, 1, "{ctx}");
        } else {
            c.assert_stopped(&db, &ctx);
        }
        if c.name == ".sst" {
            assert_eq!(files(&mem, "sst"), tables, "{ctx}: outputs left behind");
        }
        check(&db, &oracle, &ctx);
        total += fs.injected();
        fs.heal();
        if c.full_disk() {
            db.resume().unwrap();
            db.compact_range(None, None).unwrap();
            check(&db, &oracle, &ctx);
        }
        drop(db);
        reopen_and_check(&mem, &oracle, &ctx);
        let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
        db.compact_range(None, None).unwrap();
        check(&db, &oracle, &ctx);
        db.close().unwrap();
    }
    eprintln!("faults injected by failed_compaction_io_stops_it_then_reopen_recovers: {total}");
}

/// A GC job that cannot write its output (full disk, failed create or
/// fsync) fails before its commit: it returns the error, removes its
/// outputs, changes nothing and does not poison (a full disk postpones it
/// rather than count it failed). Once healed, GC collects.
#[test]
fn failed_gc_output_fails_the_job_without_poisoning() {
    let cases = [
        case(&[Append], ".vf", ErrorKind::StorageFull, false),
        case(&[Append], ".vf", ErrorKind::StorageFull, true),
        case(&[Create], ".vf", ErrorKind::StorageFull, false),
        case(&[Sync], ".vf", ErrorKind::Other, false),
    ];
    let mut total = 0;
    for c in &cases {
        let ctx = c.to_string();
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = with_garbage(&db);
        let garbage = db.space_report().unwrap().exposed_garbage_bytes;
        assert!(garbage > 0);
        let value_files = files(&mem, "vf");
        c.inject(&fs, 0);
        let err = db.gc_with_ratio(0.01).unwrap_err();
        assert_io(&err, c.name, c.kind, &ctx);
        fs.heal();
        assert_eq!(files(&mem, "vf"), value_files, "{ctx}: outputs left behind");
        let report = db.space_report().unwrap();
        assert_eq!(report.exposed_garbage_bytes, garbage, "{ctx}");
        let stats = db.stats();
        let failed = if c.full_disk() {
            stats.jobs_postponed
        } else {
            stats.gc.failed_jobs
        };
        assert_eq!(failed, 1, "{ctx}");
        assert_eq!(stats.write_state, cleave::WriteState::ReadWrite, "{ctx}");
        oracle.put(&db, 200..210, 2, &SYNC);
        check(&db, &oracle, &ctx);
        assert!(db.gc_with_ratio(0.01).unwrap().jobs > 0, "{ctx}");
        assert_eq!(db.space_report().unwrap().exposed_garbage_bytes, 0);
        check(&db, &oracle, &ctx);
        db.close().unwrap();
        total += fs.injected();
        reopen_and_check(&mem, &oracle, &ctx);
    }
    eprintln!("faults injected by failed_gc_output_fails_the_job_without_poisoning: {total}");
}

/// A GC job whose commit cannot be logged poisons (the manifest may or may
/// not hold the edit), or after a full disk, makes the database read-only;
/// the reopen finds the job applied or not, every value readable, and no
/// file left over.
#[test]
fn failed_gc_commit_stops_writes_then_reopen_recovers() {
    let cases = [
        case(&[Append], "MANIFEST", ErrorKind::StorageFull, false),
        case(&[Append], "MANIFEST", ErrorKind::StorageFull, true),
        case(&[Sync], "MANIFEST", ErrorKind::Other, false),
    ];
    let mut total = 0;
    for c in &cases {
        let ctx = c.to_string();
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        let mut oracle = with_garbage(&db);
        c.inject(&fs, 0);
        let err = db.gc_with_ratio(0.01).unwrap_err();
        assert_io(&err, c.name, c.kind, &ctx);
        c.assert_stopped(&db, &ctx);
        check(&db, &oracle, &ctx);
        total += fs.injected();
        fs.heal();
        c.resume(&db, &mut oracle, 300..310, &ctx);
        drop(db);
        reopen_and_check(&mem, &oracle, &ctx);
    }
    eprintln!("faults injected by failed_gc_commit_stops_writes_then_reopen_recovers: {total}");
}

/// Open replays the WAL into L0 sstables, starts a new WAL and manifest,
/// and points CURRENT at it. When the disk fills at any of those steps,
/// the open keeps what the WALs hold in memory instead (RocksDB's
/// `avoid_flush_during_recovery`), removes what it wrote, and serves
/// reads; writes fail with the full disk until the database resumes,
/// which flushes, and then every write is there across a reopen and a
/// power loss.
#[test]
fn enospc_while_opening_opens_read_only_then_resumes() {
    let cases = [
        (case(&[Append], ".sst", ErrorKind::StorageFull, true), 4),
        (case(&[Create], ".wal", ErrorKind::StorageFull, false), 0),
        (
            case(&[Create], "MANIFEST", ErrorKind::StorageFull, false),
            0,
        ),
        (case(&[Append], "MANIFEST", ErrorKind::StorageFull, true), 0),
        (case(&[Append], ".tmp", ErrorKind::StorageFull, true), 0),
    ];
    let mut total = 0;
    for (c, skip) in &cases {
        let ctx = c.to_string();
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let big = Options {
            write_buffer_size: 4 << 20,
            ..options(Arc::new(fs.clone()))
        };
        let db = Db::open(DIR, big).unwrap();
        let mut oracle = Oracle::default();
        oracle.put(&db, 0..400, 0, &SYNC);
        db.close().unwrap();
        assert!(
            files(&mem, "sst").is_empty(),
            "the writes must be in the WAL only"
        );
        // Open with small memtables: replay writes several sstables.
        c.inject(&fs, *skip);
        let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
        assert!(fs.injected() > 0, "{ctx}");
        check(&db, &oracle, &ctx);
        assert_read_only(&db, c.name, &ctx);
        assert!(
            files(&mem, "sst").is_empty(),
            "{ctx}: the failed flushes' files left"
        );
        total += fs.injected();
        fs.heal();
        db.resume().unwrap();
        oracle.put(&db, 400..420, 1, &SYNC);
        check(&db, &oracle, &ctx);
        assert_no_orphans(&db, &ctx);
        db.close().unwrap();
        reopen_and_check(&mem, &oracle, &ctx);
    }
    eprintln!("faults injected by enospc_while_opening_opens_read_only_then_resumes: {total}");
}

/// A memtable switch creates the next WAL; when the disk is full, the
/// write that needed the room fails naming the WAL, the database turns
/// read-only, and takes writes again once resumed.
#[test]
fn enospc_creating_the_next_wal_stops_writes_until_resumed() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..10, 0, &SYNC);
    fs.fail(&[Create], Some(".wal"), 0, ErrorKind::StorageFull, true);
    let mut failed = None;
    for i in 10..2000 {
        match db.put(&SYNC, &k(i), &v(i, 0)) {
            Ok(()) => oracle.ack(i, 0),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let err = failed.expect("the memtable must fill");
    assert_io(&err, ".wal", ErrorKind::StorageFull, "switch");
    assert_read_only(&db, ".wal", "after the failed switch");
    check(&db, &oracle, "read-only");
    fs.heal();
    db.resume().unwrap();
    oracle.put(&db, 2000..2100, 1, &SYNC);
    drop(db);
    reopen_and_check(&mem, &oracle, "failed WAL create");
    injected(
        &fs,
        "enospc_creating_the_next_wal_stops_writes_until_resumed",
    );
}

/// The first merge logs the merge operator's name to the manifest before
/// any operand reaches a WAL. When that manifest write fails the merge is
/// refused with the error naming the manifest, nothing of it is applied,
/// and the database is poisoned (read-only after a full disk); a reopen
/// keeps every acknowledged write, and merges work again.
#[test]
fn a_failed_manifest_write_for_the_first_merge_refuses_it() {
    let merging = |fs: Arc<dyn cleave::vfs::Fs>| Options {
        merge_operator: Some(Arc::new(cleave::U64Add)),
        ..options(fs)
    };
    for (op, kind) in [(Append, ErrorKind::StorageFull), (Sync, ErrorKind::Other)] {
        let ctx = format!("{op:?}");
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let db = Db::open(DIR, merging(Arc::new(fs.clone()))).unwrap();
        let mut oracle = Oracle::default();
        oracle.put(&db, 0..50, 0, &SYNC);
        fs.fail(&[op], Some("MANIFEST"), 0, kind, true);
        let err = db
            .merge(&SYNC, b"counter", &1u64.to_le_bytes())
            .unwrap_err();
        assert_io(&err, "MANIFEST", kind, &ctx);
        let full = kind == ErrorKind::StorageFull;
        if full {
            assert_read_only(&db, "MANIFEST", &ctx);
        } else {
            assert_refuses_writes(&db, "MANIFEST", &ctx);
        }
        // A second first merge writes no manifest on a stopped database.
        let err = db
            .merge(&SYNC, b"counter", &1u64.to_le_bytes())
            .unwrap_err();
        if full {
            assert_io(&err, "MANIFEST", kind, &ctx);
        } else {
            assert_poisoned(&err, "MANIFEST", &ctx);
        }
        assert_eq!(db.get(&ReadOptions::new(), b"counter").unwrap(), None);
        injected(
            &fs,
            "a_failed_manifest_write_for_the_first_merge_refuses_it",
        );
        drop(db);
        for (fs, what) in [
            (Arc::new(mem.clone()) as Arc<dyn cleave::vfs::Fs>, "live"),
            (crashed(&mem), "crash"),
        ] {
            let ctx = format!("{ctx}, reopened ({what})");
            let db = Db::open(DIR, merging(fs)).unwrap();
            check(&db, &oracle, &ctx);
            assert_eq!(
                db.get(&ReadOptions::new(), b"counter").unwrap(),
                None,
                "{ctx}"
            );
            db.merge(&SYNC, b"counter", &2u64.to_le_bytes()).unwrap();
            db.merge(&SYNC, b"counter", &3u64.to_le_bytes()).unwrap();
            assert_eq!(
                db.get(&ReadOptions::new(), b"counter").unwrap(),
                Some(5u64.to_le_bytes().to_vec()),
                "{ctx}"
            );
            db.close().unwrap();
        }
    }
}

/// A full disk, a failed create or a failed fsync of a flush's delta file
/// (key-delta separation): the flush fails, the database is poisoned (or
/// read-only, a full disk), and a reopen keeps every acknowledged put and
/// every counter's sum, the flush's delta file removed as an orphan.
#[test]
fn failed_delta_file_io_stops_writes_then_reopen_recovers() {
    let separating = |fs: Arc<dyn cleave::vfs::Fs>| Options {
        merge_operator: Some(Arc::new(cleave::U64Add)),
        enable_delta_separation: true,
        delta_bucket_capacity: 4 << 10,
        ..options(fs)
    };
    let counter = |db: &Db, c: usize| {
        db.get(&ReadOptions::new(), format!("counter{c}").as_bytes())
            .unwrap()
            .map(|v| u64::from_le_bytes(v.try_into().unwrap()))
    };
    // The counters are not in the oracle: its full-scan check would take
    // them for values never written.
    let check_puts = |db: &Db, ctx: &str| {
        for i in 0..40 {
            assert_eq!(get(db, i), Some(v(i, 0)), "{ctx}: key {i}");
        }
    };
    let cases = [
        case(&[Append], ".kd", ErrorKind::StorageFull, false),
        case(&[Append], ".kd", ErrorKind::StorageFull, true),
        case(&[Create], ".kd", ErrorKind::StorageFull, false),
        case(&[Sync], ".kd", ErrorKind::Other, false),
    ];
    let mut total = 0;
    for c in &cases {
        for skip in [0, 1] {
            let ctx = format!("{c}, after {skip} delta files");
            let mem = MemFs::new();
            let fs = FaultFs::new(Arc::new(mem.clone()));
            let db = Db::open(DIR, separating(Arc::new(fs.clone()))).unwrap();
            let mut oracle = Oracle::default();
            oracle.put(&db, 0..40, 0, &SYNC);
            let mut sums = [0u64; 20];
            let mut add = |db: &Db, rounds: u64| {
                for round in 0..rounds {
                    for (c, sum) in sums.iter_mut().enumerate() {
                        let n = round + c as u64;
                        db.merge(&SYNC, format!("counter{c}").as_bytes(), &n.to_le_bytes())
                            .unwrap();
                        *sum += n;
                    }
                }
            };
            add(&db, 5);
            if skip == 1 {
                db.flush().unwrap();
                add(&db, 5);
            }
            c.inject(&fs, 0);
            let err = db.flush().unwrap_err();
            assert_failed_on(&err, c.name, &ctx);
            c.assert_stopped(&db, &ctx);
            check_puts(&db, &ctx);
            drop(db);
            total += fs.injected();
            fs.heal();
            for (fs, what) in [
                (Arc::new(mem.clone()) as Arc<dyn cleave::vfs::Fs>, "live"),
                (crashed(&mem), "crash"),
            ] {
                let ctx = format!("{ctx}, reopened ({what})");
                let db = Db::open(DIR, separating(fs)).unwrap();
                check_puts(&db, &ctx);
                for (c, sum) in sums.iter().enumerate() {
                    assert_eq!(counter(&db, c), Some(*sum), "{ctx}: counter {c}");
                }
                assert_no_orphans(&db, &ctx);
                assert!(db.stats().delta_bytes_written > 0, "{ctx}");
                db.close().unwrap();
            }
        }
    }
    eprintln!("faults injected by failed_delta_file_io_stops_writes_then_reopen_recovers: {total}");
}

/// Recycling an obsolete WAL renames it to the new WAL's number and
/// reopens it to write over it: a failed rename or reopen fails the write
/// that switched the memtable and poisons the database, and a reopen
/// (without recycling: it must still read recyclable WALs) recovers every
/// acknowledged write.
#[test]
fn failed_wal_recycling_poisons_then_reopen_recovers() {
    for op in [Rename, Create] {
        let ctx = format!("recycling, {op:?} fails");
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let opts = Options {
            recycle_wal: 2,
            ..options(Arc::new(fs.clone()))
        };
        let db = Db::open(DIR, opts).unwrap();
        let mut oracle = Oracle::default();
        let mut i = 0;
        while db.stats().wals_recycled == 0 {
            assert!(i < 20_000, "{ctx}: no WAL was recycled");
            oracle.put(&db, i..i + 10, 0, &SYNC);
            i += 10;
        }
        fs.fail(&[op], Some(".wal"), 0, ErrorKind::Other, true);
        let recycled = db.stats().wals_recycled;
        let err = put_until_failure(&db, &mut oracle, i..i + 20_000)
            .unwrap_or_else(|| panic!("{ctx}: no memtable switch failed"));
        assert_failed_on(&err, ".wal", &ctx);
        assert_eq!(db.stats().wals_recycled, recycled, "{ctx}");
        assert_refuses_writes(&db, ".wal", &ctx);
        drop(db);
        fs.heal();
        reopen_and_check(&mem, &oracle, &ctx);
        injected(&fs, &ctx);
    }
}
