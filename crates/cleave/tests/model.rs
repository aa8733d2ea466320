//! Randomized model test: random operations against cleave and a BTreeMap
//! oracle must agree. `CLEAVE_MODEL_SEEDS` and `CLEAVE_MODEL_OPS` scale it
//! up (e.g. 50 seeds × 100,000 ops locally).
//!
//! Keys `t…` also get values with a time to live, against a clock the test
//! moves, and values starting `tomb:`, which read as deleted (the test sees
//! every read through that rule) and which a compaction filter, on for half
//! the runs, removes: a filter that dropped a live version, or removed a
//! tomb and let an older value show through, fails the comparison.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use cleave::vfs::{FileOptions, Fs, MemFs};
use cleave::{
    Clock, CompactionDecision, CompactionFilter, Db, FilterFn, FilterValue, ManualClock, Options,
    ReadOptions, Snapshot, WriteBatch, WriteOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{contents, env, merge_append, random_options, Model};

fn key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    format!("k{:05}", rng.gen_range(0..space)).into_bytes()
}

/// A key that may get a time to live or a tomb, never a merge operand.
fn tkey(rng: &mut StdRng, space: u32) -> Vec<u8> {
    format!("t{:05}", rng.gen_range(0..space / 4 + 1)).into_bytes()
}

/// A value that reads as deleted and that `TombFilter` removes.
const TOMB: &[u8] = b"tomb:";

fn is_tomb(v: &[u8]) -> bool {
    v.starts_with(TOMB)
}

/// What a read found, seen through the tomb rule.
fn seen(v: Option<Vec<u8>>) -> Option<Vec<u8>> {
    v.filter(|v| !is_tomb(v))
}

/// Removes tombs in compactions; reads a separated value to tell.
fn tomb_filter() -> Arc<dyn CompactionFilter> {
    Arc::new(FilterFn::new(
        "tomb",
        |_, _, value: &mut FilterValue<'_>| match value.bytes() {
            Ok(v) if is_tomb(v) => CompactionDecision::Remove,
            _ => CompactionDecision::Keep,
        },
    ))
}

/// When the model's keys with a time to live expire.
type Expiries = BTreeMap<Vec<u8>, u64>;

/// Removes from `model` what has expired at `now`.
fn expire(model: &mut Model, expiries: &mut Expiries, now: u64) {
    expiries.retain(|k, at| {
        if *at <= now {
            model.remove(k);
            false
        } else {
            true
        }
    });
}

/// Random options with the run's clock and, maybe, the tomb filter.
fn options(fs: &MemFs, rng: &mut StdRng, clock: &Arc<ManualClock>, filter: bool) -> Options {
    Options {
        clock: clock.clone(),
        compaction_filter: filter.then(tomb_filter),
        ..random_options(fs, rng)
    }
}

/// Everything a scan from the start finds, tombs left out.
fn visible(db: &Db) -> Model {
    let mut m = contents(db);
    m.retain(|_, v| !is_tomb(v));
    m
}

fn value(rng: &mut StdRng, seed: u64, op: usize) -> Vec<u8> {
    let len = if rng.gen_bool(0.05) {
        rng.gen_range(1000..6000)
    } else {
        rng.gen_range(0..120)
    };
    let mut v = format!("{seed}:{op}:").into_bytes();
    v.resize(len.max(v.len()), b'a' + (op % 26) as u8);
    v
}

fn bound(rng: &mut StdRng, space: u32) -> Option<Vec<u8>> {
    rng.gen_bool(0.3).then(|| key(rng, space))
}

/// Checks a scan (both directions, with bounds) against the model.
fn check_scan(db: &Db, ro: &ReadOptions<'_>, model: &Model, rng: &mut StdRng, ctx: &str) {
    let lo = ro.lower_bound.clone();
    let hi = ro.upper_bound.clone();
    let range = (
        lo.clone().map_or(Bound::Unbounded, Bound::Included),
        hi.clone().map_or(Bound::Unbounded, Bound::Excluded),
    );
    let expected: Vec<(Vec<u8>, Vec<u8>)> = if lo.is_some() && hi.is_some() && lo >= hi {
        Vec::new()
    } else {
        model
            .range(range)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut it = db.iter(ro);
    let limit = rng.gen_range(1..200usize);
    if rng.gen_bool(0.5) {
        it.seek_to_first().unwrap();
        let mut got = Vec::new();
        while it.valid() && got.len() < limit {
            let v = it.value().unwrap().to_vec();
            if !is_tomb(&v) {
                got.push((it.key().to_vec(), v));
            }
            it.next().unwrap();
        }
        it.status().unwrap();
        let want: Vec<_> = expected.iter().take(limit).cloned().collect();
        assert_eq!(got, want, "{ctx}: forward scan");
    } else {
        it.seek_to_last().unwrap();
        let mut got = Vec::new();
        while it.valid() && got.len() < limit {
            let v = it.value().unwrap().to_vec();
            if !is_tomb(&v) {
                got.push((it.key().to_vec(), v));
            }
            it.prev().unwrap();
        }
        it.status().unwrap();
        let want: Vec<_> = expected.iter().rev().take(limit).cloned().collect();
        assert_eq!(got, want, "{ctx}: backward scan");
    }
    // A seek, then a random walk with direction changes.
    if expected.is_empty() {
        return;
    }
    let target = expected[rng.gen_range(0..expected.len())].0.clone();
    let mut pos = expected
        .iter()
        .position(|(k, _)| *k == target)
        .map(|p| p as isize);
    it.seek(&target).unwrap();
    for _ in 0..rng.gen_range(0..30) {
        match pos {
            Some(p) if p >= 0 && (p as usize) < expected.len() => {
                assert!(it.valid(), "{ctx}: iterator ended early at {p}");
                assert_eq!(it.key(), expected[p as usize].0.as_slice(), "{ctx}: walk");
                assert_eq!(
                    it.value().unwrap(),
                    expected[p as usize].1.as_slice(),
                    "{ctx}: walk value"
                );
            }
            _ => {
                assert!(!it.valid(), "{ctx}: iterator should be exhausted");
                break;
            }
        }
        let forward = rng.gen_bool(0.5);
        let step = |it: &mut cleave::DbIterator| {
            if forward {
                it.next().unwrap();
            } else {
                it.prev().unwrap();
            }
        };
        step(&mut it);
        // Tombs read as deleted: step over them, the way the walk goes.
        while it.valid() && is_tomb(it.value().unwrap()) {
            step(&mut it);
        }
        pos = pos.map(|p| if forward { p + 1 } else { p - 1 });
    }
    it.status().unwrap();
}

/// The sizes of the files in `dir`, summed, as `du --apparent-size`
/// counts them.
fn walk(fs: &MemFs, dir: &Path) -> u64 {
    let mut bytes = 0;
    for name in Fs::list(fs, dir).unwrap() {
        // A file a background job removed after the listing is not there.
        if let Ok(f) = Fs::open(fs, &dir.join(name), FileOptions::default()) {
            bytes += f.len();
        }
    }
    bytes
}

/// `Db::space` (what the space budget counts) agrees with a directory walk
/// within 1%. Background jobs may change the directory between readings:
/// the walk is taken between two of them, and taken again if they moved.
fn check_space(db: &Db, fs: &MemFs, dir: &Path, ctx: &str) {
    let mut last = (0, 0, 0);
    for _ in 0..1000 {
        let before = db.space();
        let walked = walk(fs, dir);
        let after = db.space();
        let (lo, hi) = (before.min(after) as f64, before.max(after) as f64);
        if walked as f64 >= lo * 0.99 && walked as f64 <= hi * 1.01 {
            return;
        }
        last = (before, walked, after);
        std::thread::yield_now();
    }
    panic!(
        "{ctx}: space() {} and {}, a directory walk {}",
        last.0, last.2, last.1
    );
}

/// Background work a run saw, summed over its reopens.
#[derive(Default)]
struct Seen {
    gc_jobs: u64,
    values_reseparated: u64,
    range_merges: u64,
    /// Runs of merge operands flushes and compactions merged whole, and
    /// operands they combined.
    merges_full: u64,
    operands_combined: u64,
    /// Expired entries flushes and compactions dropped, and tombs the
    /// compaction filter removed.
    expired: u64,
    filtered: u64,
}

fn run(seed: u64, ops: usize) -> Seen {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fs = MemFs::new();
    let dir = Path::new("/model");
    let space = rng.gen_range(50..2000);
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let filter = rng.gen_bool(0.5);
    let mut db = Db::open(dir, options(&fs, &mut rng, &clock, filter)).unwrap();
    let mut model = Model::new();
    let mut expiries = Expiries::new();
    let mut snapshots: Vec<(Snapshot, Model, Expiries)> = Vec::new();
    // Background work seen across reopens, to show the run exercised it.
    let mut work = (0u64, 0u64);
    let mut value_files = 0;
    let mut observed = Seen::default();
    let mut tally = |db: &Db| {
        let s = db.stats();
        work.0 += s.flushes;
        work.1 += s.compactions + s.trivial_moves;
        value_files += s.value_files_written;
        observed.gc_jobs += s.gc.jobs;
        observed.values_reseparated += s.compaction_values_reseparated;
        observed.range_merges += s.range_merges;
        observed.merges_full += s.merges_full;
        observed.operands_combined += s.merge_operands_combined;
        observed.expired += s.expired_entries;
        observed.filtered += s.compaction_filter_removed;
    };
    let wo = WriteOptions::default();
    for op in 0..ops {
        let ctx = format!("seed {seed} op {op}");
        match rng.gen_range(0..100) {
            0..=27 => {
                let k = if rng.gen_bool(0.2) {
                    tkey(&mut rng, space)
                } else {
                    key(&mut rng, space)
                };
                let v = value(&mut rng, seed, op);
                db.put(&wo, &k, &v).unwrap();
                expiries.remove(&k);
                model.insert(k, v);
            }
            28..=30 => {
                let (k, v) = (tkey(&mut rng, space), value(&mut rng, seed, op));
                let at = clock.now_ms() + rng.gen_range(1..4000);
                db.put_with_expiry(&wo, &k, &v, at).unwrap();
                expiries.insert(k.clone(), at);
                model.insert(k, v);
            }
            31 => {
                let k = tkey(&mut rng, space);
                let mut v = TOMB.to_vec();
                v.extend_from_slice(&value(&mut rng, seed, op));
                db.put(&wo, &k, &v).unwrap();
                expiries.remove(&k);
                model.remove(&k);
            }
            32..=33 => {
                clock.advance(rng.gen_range(0..2500));
                let now = clock.now_ms();
                expire(&mut model, &mut expiries, now);
                for (_, old, exp) in &mut snapshots {
                    expire(old, exp, now);
                }
            }
            34..=39 => {
                let k = key(&mut rng, space);
                let operand = format!("{op}").into_bytes();
                db.merge(&wo, &k, &operand).unwrap();
                merge_append(&mut model, k, &operand);
            }
            40..=49 => {
                let k = if rng.gen_bool(0.2) {
                    tkey(&mut rng, space)
                } else {
                    key(&mut rng, space)
                };
                db.delete(&wo, &k).unwrap();
                expiries.remove(&k);
                model.remove(&k);
            }
            50..=54 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = key(&mut rng, space);
                    if rng.gen_bool(0.15) {
                        let operand = format!("{op}.{}", b.len()).into_bytes();
                        b.merge(&k, &operand);
                        merge_append(&mut model, k, &operand);
                    } else if rng.gen_bool(0.7) {
                        let v = value(&mut rng, seed, op);
                        b.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        b.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(&wo, b).unwrap();
            }
            70..=74 => {
                // Keys in random order, some repeated: one view, one
                // answer per key in the order asked.
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(0..40))
                    .map(|_| {
                        if rng.gen_bool(0.2) {
                            tkey(&mut rng, space)
                        } else {
                            key(&mut rng, space)
                        }
                    })
                    .collect();
                let got = db.multi_get(&ReadOptions::new(), &keys);
                assert_eq!(got.len(), keys.len());
                for (k, r) in keys.iter().zip(got) {
                    assert_eq!(
                        seen(r.unwrap()).as_ref(),
                        model.get(k),
                        "{ctx}: multi_get {:?}",
                        String::from_utf8_lossy(k)
                    );
                }
            }
            55..=69 => {
                let k = if rng.gen_bool(0.2) {
                    tkey(&mut rng, space)
                } else {
                    key(&mut rng, space)
                };
                let got = seen(db.get(&ReadOptions::new(), &k).unwrap());
                assert_eq!(
                    got.as_ref(),
                    model.get(&k),
                    "{ctx}: get {:?}",
                    String::from_utf8_lossy(&k)
                );
            }
            75..=81 => {
                let mut ro = ReadOptions::new();
                ro.lower_bound = bound(&mut rng, space);
                ro.upper_bound = bound(&mut rng, space);
                if rng.gen_bool(0.4) {
                    // Confined to one prefix, which a prefix extractor of
                    // the same length or a shorter one lets tables be
                    // left out for.
                    let k = key(&mut rng, space);
                    let n = rng.gen_range(2..k.len());
                    let mut end = k[..n].to_vec();
                    *end.last_mut().unwrap() += 1;
                    ro.lower_bound = Some(if rng.gen_bool(0.5) {
                        k[..n].to_vec()
                    } else {
                        k
                    });
                    ro.upper_bound = Some(end);
                }
                check_scan(&db, &ro, &model, &mut rng, &ctx);
            }
            82..=84 => {
                if snapshots.len() < 4 {
                    snapshots.push((db.snapshot(), model.clone(), expiries.clone()));
                } else {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
            }
            85..=89 => {
                if let Some(i) = (!snapshots.is_empty()).then(|| rng.gen_range(0..snapshots.len()))
                {
                    let (snap, old, _) = &snapshots[i];
                    let mut ro = ReadOptions::new();
                    ro.snapshot = Some(snap);
                    let k = if rng.gen_bool(0.2) {
                        tkey(&mut rng, space)
                    } else {
                        key(&mut rng, space)
                    };
                    assert_eq!(
                        seen(db.get(&ro, &k).unwrap()).as_ref(),
                        old.get(&k),
                        "{ctx}: snapshot get"
                    );
                    let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..20))
                        .map(|_| key(&mut rng, space))
                        .collect();
                    for (k, r) in keys.iter().zip(db.multi_get(&ro, &keys)) {
                        assert_eq!(
                            seen(r.unwrap()).as_ref(),
                            old.get(k),
                            "{ctx}: snapshot multi_get"
                        );
                    }
                    ro.lower_bound = bound(&mut rng, space);
                    check_scan(&db, &ro, old, &mut rng, &format!("{ctx} (snapshot)"));
                }
            }
            90..=92 => db.flush().unwrap(),
            93 => {
                let (a, b) = (bound(&mut rng, space), bound(&mut rng, space));
                db.compact_range(a.as_deref(), b.as_deref()).unwrap();
            }
            94 => {
                // GC under an iterator opened before it (snapshots stay
                // alive across it too): the iterator's Version keeps the
                // collected files readable until it is dropped.
                let ro = ReadOptions::new();
                let mut it = db.iter(&ro);
                it.seek_to_first().unwrap();
                db.gc_with_ratio(rng.gen_range(0.01..0.9)).unwrap();
                let mut found = Model::new();
                while it.valid() {
                    let v = it.value().unwrap().to_vec();
                    if !is_tomb(&v) {
                        found.insert(it.key().to_vec(), v);
                    }
                    it.next().unwrap();
                }
                it.status().unwrap();
                assert_eq!(found, model, "{ctx}: iterator across GC");
            }
            95..=96 => {
                snapshots.clear();
                tally(&db);
                db.close().unwrap();
                db = Db::open(dir, options(&fs, &mut rng, &clock, filter)).unwrap();
                let report = db.verify();
                assert!(report.is_ok(), "{ctx}: after reopen: {report}");
            }
            97 if rng.gen_bool(0.5) => {
                // A read-only open beside the writer, which holds the
                // lock: it replays the WALs (and unsealed value logs) into
                // memory and holds the model whole, writing nothing.
                let reader =
                    Db::open_read_only(dir, options(&fs, &mut rng, &clock, filter)).unwrap();
                assert_eq!(visible(&reader), model, "{ctx}: read-only open");
                let report = reader.verify();
                assert!(report.is_ok(), "{ctx}: read-only open: {report}");
                assert!(reader.put(&wo, b"k", b"v").is_err());
                reader.close().unwrap();
            }
            97 => {
                // A checkpoint holds the model whole, even after a power
                // loss right after it returns, and checks out; the source
                // goes on.
                let target = format!("/checkpoint-{op}");
                let info = db.checkpoint(&target).unwrap();
                assert_eq!(info.files_copied, 0, "{ctx}: MemFs links every file");
                let crashed = fs.crash_clone();
                let cp = Db::open(&target, options(&crashed, &mut rng, &clock, filter)).unwrap();
                assert_eq!(visible(&cp), model, "{ctx}: checkpoint contents");
                let report = cp.verify();
                assert!(report.is_ok(), "{ctx}: checkpoint: {report}");
                cp.close().unwrap();
            }
            _ => {
                // Power loss right after a flush: the flush made every
                // earlier write durable, so the model must survive it whole.
                snapshots.clear();
                db.flush().unwrap();
                let crashed = fs.crash_clone();
                tally(&db);
                db.close().unwrap();
                fs = crashed;
                db = Db::open(dir, options(&fs, &mut rng, &clock, filter)).unwrap();
                let report = db.verify();
                assert!(report.is_ok(), "{ctx}: after a crash: {report}");
            }
        }
        check_space(&db, &fs, dir, &ctx);
    }
    // A full comparison at the end, after a reopen.
    snapshots.clear();
    tally(&db);
    db.close().unwrap();
    assert!(
        work.0 > 0 && work.1 > 0 && value_files > 0,
        "seed {seed}: no flush, compaction or value file: {work:?}, {value_files}"
    );
    let db = Db::open(dir, options(&fs, &mut rng, &clock, filter)).unwrap();
    assert_eq!(visible(&db), model, "seed {seed}: final contents");
    // Every file checks out, and once the background is idle nothing is on
    // disk that no Version names (beyond CURRENT and LOCK).
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    db.wait_for_compactions().unwrap();
    let r = db.space_report().unwrap();
    assert!(
        r.other_bytes < 64,
        "seed {seed}: leaked files: {r:?} in {:?}",
        cleave::vfs::Fs::list(&fs, dir)
    );
    assert!(
        r.value_file_bytes >= r.referenced_value_bytes + r.exposed_garbage_bytes,
        "seed {seed}: {r:?}"
    );
    let s = db.stats();
    observed.gc_jobs += s.gc.jobs;
    observed.values_reseparated += s.compaction_values_reseparated;
    observed.range_merges += s.range_merges;
    observed.merges_full += s.merges_full;
    observed.operands_combined += s.merge_operands_combined;
    observed.expired += s.expired_entries;
    observed.filtered += s.compaction_filter_removed;
    observed
}

#[test]
fn model_random_operations() {
    let seeds = env("CLEAVE_MODEL_SEEDS", 4);
    let ops = env("CLEAVE_MODEL_OPS", 5000) as usize;
    let base = env("CLEAVE_MODEL_SEED", 0xc1ea7e);
    let mut total = Seen::default();
    for s in 0..seeds {
        let seen = run(base + s, ops);
        total.gc_jobs += seen.gc_jobs;
        total.values_reseparated += seen.values_reseparated;
        total.range_merges += seen.range_merges;
        total.merges_full += seen.merges_full;
        total.operands_combined += seen.operands_combined;
        total.expired += seen.expired;
        total.filtered += seen.filtered;
    }
    assert!(total.expired > 0, "no expired entry was dropped");
    assert!(total.filtered > 0, "the compaction filter removed nothing");
    assert!(total.gc_jobs > 0, "no GC job ran");
    assert!(
        total.values_reseparated > 0,
        "no compaction re-separated a value"
    );
    assert!(total.range_merges > 0, "no range merge ran");
    assert!(
        total.merges_full > 0 && total.operands_combined > 0,
        "no merge operands merged in the background: {} full, {} combined",
        total.merges_full,
        total.operands_combined
    );
}
