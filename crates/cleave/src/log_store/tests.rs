use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::frame::{self, Kind};
use super::ops::{self, Role};
use super::physical;
use super::*;
use crate::error::Error;
use crate::vfs::{FaultFs, FaultOp, MemFs};

fn dir() -> PathBuf {
    PathBuf::from("/logs")
}

fn options(fs: &MemFs) -> LogOptions {
    LogOptions {
        fs: Arc::new(fs.clone()),
        create_if_missing: true,
        data_file_bytes: 64 << 10,
        meta_file_bytes: 8 << 10,
        ..LogOptions::default()
    }
}

fn record(log: u32, lsn: u64) -> Vec<u8> {
    format!("log {log} record {lsn} ")
        .repeat((lsn % 7 + 1) as usize)
        .into_bytes()
}

fn contents(s: &LogStore, log: LogId) -> Vec<(u64, Vec<u8>)> {
    s.scan(log, 0).unwrap().map(|r| r.unwrap()).collect()
}

#[test]
fn appends_read_scan_trim_truncate_and_delete_survive_reopen() {
    let fs = MemFs::new();
    let s = LogStore::open(dir(), options(&fs)).unwrap();
    let a = s.create_log("a").unwrap();
    let b = s.create_log("b").unwrap();
    assert!(s.create_log("a").is_err(), "names are unique");
    for lsn in 1..=200 {
        s.append(a, lsn, &record(0, lsn)).unwrap();
    }
    s.append_batch(b, &[(5, b"five"), (3, b"three"), (9, b"nine")])
        .unwrap();
    s.append(b, 5, b"FIVE").unwrap();
    s.trim(a, 50).unwrap();
    s.truncate(a, 190).unwrap();
    s.append(a, 190, b"again").unwrap();
    assert!(
        matches!(s.append(a, 10, b"x"), Err(Error::InvalidArgument(_))),
        "below the trim point"
    );
    let check = |s: &LogStore| {
        let a = s.open_log("a").unwrap();
        let b = s.open_log("b").unwrap();
        assert_eq!(s.read(a, 49).unwrap(), None);
        assert_eq!(s.read(a, 50).unwrap(), Some(record(0, 50)));
        assert_eq!(s.read(a, 190).unwrap().as_deref(), Some(&b"again"[..]));
        assert_eq!(s.read(a, 191).unwrap(), None);
        assert_eq!(s.first_lsn(a).unwrap(), Some(50));
        assert_eq!(s.last_lsn(a).unwrap(), Some(190));
        assert_eq!(s.trim_point(a).unwrap(), 50);
        let got = contents(s, a);
        assert_eq!(got.len(), 141);
        assert_eq!(got[0], (50, record(0, 50)));
        assert_eq!(
            contents(s, b),
            vec![
                (3, b"three".to_vec()),
                (5, b"FIVE".to_vec()),
                (9, b"nine".to_vec())
            ]
        );
        assert_eq!(
            s.scan(b, 4)
                .unwrap()
                .map(|r| r.unwrap().0)
                .collect::<Vec<_>>(),
            vec![5, 9]
        );
    };
    check(&s);
    drop(s);
    let s = LogStore::open(dir(), options(&fs)).unwrap();
    check(&s);
    let a = s.open_log("a").unwrap();
    s.delete_log(a).unwrap();
    assert!(s.read(a, 60).is_err(), "a deleted log's id names nothing");
    let a2 = s.create_log("a").unwrap();
    assert_ne!(a, a2);
    assert_eq!(s.last_lsn(a2).unwrap(), None);
    drop(s);
    let s = LogStore::open(dir(), options(&fs)).unwrap();
    assert_eq!(s.open_log("a"), Some(a2));
    assert_eq!(s.last_lsn(a2).unwrap(), None);
    assert_eq!(s.logs().len(), 2);
}

/// Full files are sealed, released once trimmed and recycled: the
/// directory stays bounded while records stream through, and what remains
/// reads back, also after a reopen (sealed files through their reverse
/// index).
#[test]
fn trimmed_files_are_released_and_recycled() {
    let fs = MemFs::new();
    let opts = LogOptions {
        data_file_bytes: 16 << 10,
        ..options(&fs)
    };
    let s = LogStore::open(dir(), opts.clone()).unwrap();
    let logs: Vec<LogId> = (0..3)
        .map(|i| s.create_log(&format!("log-{i}")).unwrap())
        .collect();
    let window = 100;
    for lsn in 0..3000u64 {
        let log = logs[(lsn % 3) as usize];
        s.append(log, lsn, &record(log.get(), lsn)).unwrap();
        if lsn >= window {
            s.trim(log, lsn - window).unwrap();
            // Releasing runs in the background too; here, now.
            s.collect_garbage().unwrap();
        }
        let files = fs
            .list(&dir())
            .unwrap()
            .iter()
            .filter(|n| n.ends_with(".dlog") || n.ends_with(".free"))
            .count();
        assert!(files <= 6, "{files} data files at lsn {lsn}");
    }
    let st = s.stats();
    assert!(st.files_released > 10, "{st:?}");
    assert!(st.files_recycled > 10, "{st:?}");
    let check = |s: &LogStore| {
        for &log in &logs {
            for (lsn, v) in contents(s, log) {
                assert!(lsn >= 3000 - window - 3);
                assert_eq!(v, record(log.get(), lsn));
            }
            assert_eq!(
                s.last_lsn(log).unwrap().map(|l| l % 3),
                Some(u64::from(log.get()))
            );
        }
    };
    check(&s);
    drop(s);
    let s = LogStore::open(dir(), opts).unwrap();
    check(&s);
}

/// Power loss at any point: every append made durable (synced with it, or
/// by `sync`) reads back; of the rest, a torn image keeps a prefix at most,
/// each record whole; and the next session appends over the torn tail,
/// across recycled files, and recovers again.
#[test]
fn durable_appends_survive_power_loss_and_torn_writes() {
    let mut fs = MemFs::new();
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut lsn = 0u64;
    for round in 0..16u64 {
        let synced_each = round % 2 == 0;
        let opts = LogOptions {
            sync: synced_each,
            ..options(&fs)
        };
        let s = LogStore::open(dir(), opts).unwrap();
        let log = match s.open_log("l") {
            Some(l) => l,
            None => s.create_log("l").unwrap(),
        };
        // What the last image kept past the durable records: a prefix of
        // the appends that followed them, whole.
        let got = contents(&s, log);
        let durable: Vec<_> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert!(got.len() >= durable.len(), "round {round}: lost records");
        assert_eq!(got[..durable.len()], durable[..], "round {round}");
        let mut next = durable
            .last()
            .map_or(got.first().map_or(1, |g| g.0), |d| d.0 + 1);
        for (k, v) in &got[durable.len()..] {
            assert_eq!(
                (*k, v),
                (next, &record(0, *k)),
                "round {round}: not a prefix"
            );
            next += 1;
        }
        model.extend(got[durable.len()..].iter().cloned());
        lsn = lsn.max(next - 1);
        for _ in 0..150 {
            lsn += 1;
            s.append(log, lsn, &record(0, lsn)).unwrap();
            if synced_each {
                model.insert(lsn, record(0, lsn));
            }
        }
        s.trim(log, lsn - 100).unwrap();
        s.sync().unwrap();
        if !synced_each {
            model.extend((lsn - 149..=lsn).map(|l| (l, record(0, l))));
        }
        model = model.split_off(&(lsn - 100));
        // Not durable: a torn image keeps some of these.
        for _ in 0..20 {
            lsn += 1;
            s.append(log, lsn, &record(0, lsn)).unwrap();
        }
        if synced_each {
            model.extend((lsn - 19..=lsn).map(|l| (l, record(0, l))));
        }
        let keep = (round * 1237) as usize;
        let pause = s.inner.maintaining.lock();
        let image = fs.crash_clone_keeping(|n| keep.min(n));
        drop(pause);
        fs = image;
    }
}

/// A recycled file holds its earlier generation's valid frames, at the
/// same offsets as the new ones when records have the same sizes: none of
/// them is ever taken for a record of the new use.
#[test]
fn a_recycled_file_never_yields_its_old_records() {
    let fs = MemFs::new();
    let s = LogStore::open(dir(), options(&fs)).unwrap();
    let log = s.create_log("l").unwrap();
    let v = vec![7u8; 1000];
    for lsn in 0..300 {
        s.append(log, lsn, &v).unwrap();
    }
    s.trim(log, 300).unwrap();
    s.collect_garbage().unwrap();
    assert!(s.stats().free_files > 0);
    // Same sizes at the same offsets: the next file is a recycled one.
    for lsn in 300..302 {
        s.append(log, lsn, &v).unwrap();
    }
    assert!(s.stats().files_recycled > 0 || s.stats().data_files > 0);
    let pause = s.inner.maintaining.lock();
    let image = fs.crash_clone();
    drop(pause);
    drop(s);
    let s = LogStore::open(dir(), options(&image)).unwrap();
    let log = s.open_log("l").unwrap();
    let got: Vec<u64> = contents(&s, log).into_iter().map(|(l, _)| l).collect();
    assert_eq!(got, vec![300, 301]);
}

/// The physical layer alone: frames past a session's end written by an
/// older session (a crash left them, out of order) or of an older
/// generation end the file.
#[test]
fn stale_frames_end_a_physical_log() {
    let fs = MemFs::new();
    let d = Path::new("/p");
    fs.create_dir_all(d).unwrap();
    let path = physical::data_path(d, 5);
    let mut bytes = Vec::new();
    let mut header = Vec::new();
    ops::encode_file_header(&mut header, Role::Data);
    frame::encode(&mut bytes, 5, 1, Kind::FileHeader, &header);
    let mut put = Vec::new();
    ops::encode_put(&mut put, 0, 1, b"one");
    frame::encode(&mut bytes, 5, 1, Kind::Batch, &put);
    frame::encode(&mut bytes, 5, 2, Kind::Batch, &put);
    let end = bytes.len() as u64;
    frame::encode(&mut bytes, 5, 1, Kind::Batch, &put); // an older session's
    let mut f = fs
        .create(&path, crate::vfs::FileOptions::default())
        .unwrap();
    f.append(&bytes).unwrap();
    f.sync().unwrap();
    let mut batches = 0;
    let scanned = physical::scan(&fs, &path, Role::Data, 5, |_, _, _| {
        batches += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!((scanned.end, batches, scanned.last_epoch), (end, 2, 2));
    let other = physical::scan(&fs, &path, Role::Data, 6, |_, _, _| Ok(())).unwrap();
    assert!(!other.has_header, "another generation's file is empty");
    let wrong = physical::scan(&fs, &path, Role::Meta, 5, |_, _, _| Ok(()));
    assert!(matches!(wrong, Err(e) if e.is_corruption()));
}

/// A failed sync fails the append, and every later write, with an error
/// naming the file; reads go on; reopened, the store has every append
/// acknowledged before the failure.
#[test]
fn a_failed_sync_stops_writes_and_loses_nothing_acknowledged() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let opts = LogOptions {
        fs: Arc::new(fault.clone()),
        ..options(&mem)
    };
    let s = LogStore::open(dir(), opts.clone()).unwrap();
    let log = s.create_log("l").unwrap();
    for lsn in 0..10 {
        s.append(log, lsn, b"ok").unwrap();
    }
    fault.fail(&[FaultOp::Sync], Some(".dlog"), 0, ErrorKind::Other, false);
    let err = s.append(log, 10, b"lost").unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, op: "fdatasync", .. } if path.to_string_lossy().ends_with(".dlog")),
        "{err}"
    );
    assert!(matches!(s.append(log, 11, b"x"), Err(Error::Poisoned(_))));
    assert!(matches!(s.trim(log, 1), Err(Error::Poisoned(_))));
    assert_eq!(s.read(log, 9).unwrap().as_deref(), Some(&b"ok"[..]));
    drop(s);
    let s = LogStore::open(
        dir(),
        LogOptions {
            fs: Arc::new(mem.crash_clone()),
            ..opts
        },
    )
    .unwrap();
    let log = s.open_log("l").unwrap();
    assert_eq!(
        contents(&s, log).len() as u64,
        (0..10).count() as u64 + u64::from(s.read(log, 10).unwrap().is_some())
    );
}

/// A damaged record is corruption naming its file, not a panic, not a
/// wrong value.
#[test]
fn a_damaged_record_is_corruption_naming_its_file() {
    let fs = MemFs::new();
    let s = LogStore::open(dir(), options(&fs)).unwrap();
    let log = s.create_log("l").unwrap();
    s.append(log, 1, b"precious").unwrap();
    let data = fs
        .list(&dir())
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".dlog"))
        .unwrap();
    let path = dir().join(&data);
    let loc = s.inner.state.read().logs[&log.get()].l0[&1];
    assert!(fs.corrupt_byte(&path, (loc.offset + u64::from(loc.len) - 1) as usize));
    let err = s.read(log, 1).unwrap_err();
    assert!(
        matches!(&err, Error::Corruption { file, .. } if file == &path),
        "{err}"
    );
}

/// Appends, trims and scans from several threads while flushes, releases
/// and GC run beside them (a tiny index and small files make them
/// frequent); then every log holds its window, also after a power loss.
#[test]
fn many_threads_and_logs_share_group_commits() {
    let fs = MemFs::new();
    let opts = |fs: &MemFs| LogOptions {
        data_file_bytes: 16 << 10,
        index_memory_bytes: 48 * 30,
        checkpoint_bytes: 1024,
        gc_garbage_ratio: 0.3,
        ..options(fs)
    };
    let s = Arc::new(LogStore::open(dir(), opts(&fs)).unwrap());
    let reader = {
        let s = s.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                for (name, log) in s.logs() {
                    let t: u32 = name[1..].parse().unwrap();
                    let mut prev = None;
                    for r in s.scan(log, 0).unwrap() {
                        let (lsn, v) = r.unwrap();
                        assert!(prev < Some(lsn));
                        assert_eq!(v, record(t, lsn));
                        prev = Some(lsn);
                    }
                }
                s.collect_garbage().unwrap();
            }
        })
    };
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                let log = s.create_log(&format!("t{t}")).unwrap();
                for lsn in 0..300 {
                    s.append(log, lsn, &record(t, lsn)).unwrap();
                    if lsn % 50 == 49 {
                        s.trim(log, lsn - 20).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    reader.join().unwrap();
    assert_eq!(s.stats().maintenance_errors, 0);
    drop(s);
    let image = fs.crash_clone();
    for fs in [fs, image] {
        let s = LogStore::open(dir(), opts(&fs)).unwrap();
        for t in 0..4u32 {
            let log = s.open_log(&format!("t{t}")).unwrap();
            let got = contents(&s, log);
            assert_eq!(got.len(), 300 - 279);
            for (lsn, v) in got {
                assert_eq!(v, record(t, lsn));
            }
        }
    }
}

#[test]
fn oversized_records_and_names_are_refused() {
    let fs = MemFs::new();
    let s = LogStore::open(dir(), options(&fs)).unwrap();
    assert!(matches!(s.create_log(""), Err(Error::InvalidArgument(_))));
    let long = "n".repeat(MAX_LOG_NAME_BYTES + 1);
    assert!(matches!(
        s.create_log(&long),
        Err(Error::InvalidArgument(_))
    ));
    let log = s.create_log("l").unwrap();
    let big = vec![0u8; MAX_RECORD_BYTES + 1];
    assert!(matches!(
        s.append(log, 1, &big),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        LogStore::open(
            "/nowhere",
            LogOptions {
                create_if_missing: false,
                ..options(&fs)
            }
        ),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        LogStore::open(dir(), options(&fs)),
        Err(Error::Locked { .. })
    ));
}

/// A process killed with appends not yet synced, then a power loss after
/// the next session appended: what the next session found and acknowledged
/// is all there (recovery makes what it found durable before writing
/// after it).
#[test]
fn what_recovery_found_survives_a_later_power_loss() {
    let fs = MemFs::new();
    let lazy = LogOptions {
        sync: false,
        ..options(&fs)
    };
    let s = LogStore::open(dir(), lazy).unwrap();
    let log = s.create_log("l").unwrap();
    for lsn in 1..=10 {
        s.append(log, lsn, &record(0, lsn)).unwrap();
    }
    s.sync().unwrap();
    for lsn in 11..=20 {
        s.append(log, lsn, &record(0, lsn)).unwrap();
    }
    let pause = s.inner.maintaining.lock();
    let killed = fs.process_crash_clone();
    drop(pause);
    drop(s);
    let s = LogStore::open(dir(), options(&killed)).unwrap();
    let log = s.open_log("l").unwrap();
    assert_eq!(s.last_lsn(log).unwrap(), Some(20));
    s.append(log, 21, &record(0, 21)).unwrap();
    let pause = s.inner.maintaining.lock();
    let image = killed.crash_clone();
    drop(pause);
    drop(s);
    let s = LogStore::open(dir(), options(&image)).unwrap();
    let log = s.open_log("l").unwrap();
    let got: Vec<u64> = contents(&s, log).into_iter().map(|(l, _)| l).collect();
    assert_eq!(got, (1..=21).collect::<Vec<_>>());
}

/// The store against a model, through random appends (in and out of LSN
/// order), batches, truncations, trims, deletions, index flushes, GC,
/// clean reopens and power losses (torn or not), with an index so small
/// that most reads go through L1 groups, files small enough to be sealed,
/// released, collected and recycled often, and checkpoints as the metalog
/// grows. Every operation is synced, so the model is what must survive.
#[test]
fn the_store_matches_a_model_through_flushes_gc_reopens_and_crashes() {
    use rand::{Rng, SeedableRng};
    let seeds: u64 = std::env::var("CLEAVE_LOGSTORE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    // Over all seeds and sessions: that each mechanism ran.
    let mut seen = LogStats::default();
    let mut add = |st: LogStats| {
        seen.flushes += st.flushes;
        seen.checkpoints += st.checkpoints;
        seen.gc_records_moved += st.gc_records_moved;
        seen.files_released += st.files_released;
        seen.files_recycled += st.files_recycled;
        seen.maintenance_errors += st.maintenance_errors;
    };
    for seed in 0..seeds {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut fs = MemFs::new();
        let opts = |fs: &MemFs| LogOptions {
            data_file_bytes: 16 << 10,
            meta_file_bytes: 8 << 10,
            index_memory_bytes: 48 * 40,
            checkpoint_bytes: 512,
            gc_garbage_ratio: 0.5,
            ..options(fs)
        };
        // name -> (trim point, records)
        let mut model: BTreeMap<String, (u64, BTreeMap<u64, Vec<u8>>)> = BTreeMap::new();
        let mut s = LogStore::open(dir(), opts(&fs)).unwrap();
        let mut next_name = 0;
        for step in 0..1500u64 {
            let ctx = format!("seed {seed} step {step}");
            match rng.gen_range(0..100) {
                0..=1 => {
                    let name = format!("log-{next_name}");
                    next_name += 1;
                    s.create_log(&name).unwrap();
                    model.insert(name, (0, BTreeMap::new()));
                }
                2 if model.len() > 1 => {
                    let name = pick(&mut rng, &model);
                    s.delete_log(s.open_log(&name).unwrap()).unwrap();
                    model.remove(&name);
                }
                3..=59 if !model.is_empty() => {
                    let name = pick(&mut rng, &model);
                    let (trim, recs) = model.get_mut(&name).unwrap();
                    let last = recs.keys().next_back().copied().unwrap_or(*trim);
                    // Mostly the next LSN; sometimes an old one again.
                    let lsn = if rng.gen_bool(0.1) && last > *trim {
                        rng.gen_range(*trim..=last)
                    } else {
                        last.max(*trim) + rng.gen_range(1..3)
                    };
                    let v = format!("{name}/{lsn}/{step}")
                        .repeat(rng.gen_range(1..40))
                        .into_bytes();
                    let log = s.open_log(&name).unwrap();
                    if rng.gen_bool(0.2) {
                        let v2 = b"second".to_vec();
                        s.append_batch(log, &[(lsn, &v), (lsn + 1, &v2)]).unwrap();
                        recs.insert(lsn + 1, v2);
                    } else {
                        s.append(log, lsn, &v).unwrap();
                    }
                    recs.insert(lsn, v);
                }
                60..=62 if !model.is_empty() => {
                    let name = pick(&mut rng, &model);
                    let (trim, recs) = model.get_mut(&name).unwrap();
                    let last = recs.keys().next_back().copied().unwrap_or(*trim);
                    let from = rng.gen_range(*trim..=last + 1);
                    s.truncate(s.open_log(&name).unwrap(), from).unwrap();
                    recs.split_off(&from);
                }
                63..=74 if !model.is_empty() => {
                    let name = pick(&mut rng, &model);
                    let (trim, recs) = model.get_mut(&name).unwrap();
                    let last = recs.keys().next_back().copied().unwrap_or(*trim);
                    let before = rng.gen_range(*trim..=last + 1);
                    s.trim(s.open_log(&name).unwrap(), before).unwrap();
                    *trim = (*trim).max(before);
                    *recs = recs.split_off(&*trim);
                }
                75..=79 => s.flush_index().unwrap(),
                80..=84 => s.collect_garbage().unwrap(),
                85..=86 => {
                    add(s.stats());
                    drop(s);
                    s = LogStore::open(dir(), opts(&fs)).unwrap();
                }
                87..=88 => {
                    let keep = rng.gen_range(0..3000usize);
                    // MemFs copies file by file: a crash image is only one
                    // a power loss could leave while nothing writes.
                    let pause = s.inner.maintaining.lock();
                    let image = fs.crash_clone_keeping(|n| keep.min(n));
                    drop(pause);
                    add(s.stats());
                    drop(s);
                    fs = image;
                    s = LogStore::open(dir(), opts(&fs)).unwrap();
                }
                _ => {}
            }
            if step % 50 == 49 || rng.gen_bool(0.02) {
                check_model(&s, &model, &ctx);
            }
        }
        check_model(&s, &model, &format!("seed {seed} end"));
        let st = s.stats();
        add(st);
        drop(s);
        let s = LogStore::open(dir(), opts(&fs.crash_clone())).unwrap();
        check_model(&s, &model, &format!("seed {seed} after the last crash"));
    }
    assert!(
        seen.flushes > 0
            && seen.checkpoints > 0
            && seen.gc_records_moved > 0
            && seen.files_released > 0
            && seen.files_recycled > 0
            && seen.maintenance_errors == 0,
        "{seen:?}"
    );
}

/// A random log's name.
fn pick<T>(rng: &mut impl rand::Rng, model: &BTreeMap<String, T>) -> String {
    let i = rng.gen_range(0..model.len());
    model.keys().nth(i).cloned().unwrap_or_default()
}

fn check_model(s: &LogStore, model: &BTreeMap<String, (u64, BTreeMap<u64, Vec<u8>>)>, ctx: &str) {
    let names: Vec<String> = s.logs().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, model.keys().cloned().collect::<Vec<_>>(), "{ctx}");
    for (name, (trim, recs)) in model {
        let log = s.open_log(name).unwrap();
        let got: BTreeMap<u64, Vec<u8>> = contents(s, log).into_iter().collect();
        assert_eq!(
            got.len(),
            recs.len(),
            "{ctx}: {name} has {:?}, model {:?}",
            got.keys().collect::<Vec<_>>(),
            recs.keys().collect::<Vec<_>>()
        );
        assert!(&got == recs, "{ctx}: {name} differs");
        for (lsn, v) in recs.iter().step_by(7) {
            assert_eq!(
                s.read(log, *lsn).unwrap().as_ref(),
                Some(v),
                "{ctx}: {name} {lsn}"
            );
        }
        assert!(s.trim_point(log).unwrap() >= *trim, "{ctx}");
        assert_eq!(
            s.last_lsn(log).unwrap(),
            recs.keys().next_back().copied(),
            "{ctx}: {name} last"
        );
        assert_eq!(
            s.first_lsn(log).unwrap(),
            recs.keys().next().copied(),
            "{ctx}: {name} first"
        );
    }
}
