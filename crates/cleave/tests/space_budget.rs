//! The space budget and the space report's scheduling figures: with
//! `space_budget_bytes` GC grows aggressive and writes are paced by the
//! space it frees, so usage stays near the budget where it would otherwise
//! run far past it; writes never wait for work that is not running; with
//! `space_budget_fail_writes` they fail with a typed error instead; a
//! budget that cannot be met is reported once; and the report shows G_E/D,
//! the hidden-garbage estimate and GC's share.

use std::path::Path;
use std::sync::Arc;

use cleave::vfs::MemFs;
use cleave::{Db, Error, NoSpaceCause, Options, ReadOptions, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KEYS: usize = 1000;
const VALUE: usize = 1024;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    value_of(i, round, VALUE)
}

fn value_of(i: usize, round: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(len, b'a' + (round % 26) as u8);
    v
}

fn options(fs: &MemFs) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        create_if_missing: true,
        fs: Arc::new(fs.clone()),
        write_buffer_size: 64 << 10,
        target_file_size_base: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        level0_file_num_compaction_trigger: 2,
        value_file_size: 128 << 10,
        min_value_size: 512,
        max_background_jobs: 2,
        cache_values: false,
        // GC only of files that are all garbage, unless the budget says
        // otherwise: without a budget space runs far past the live data.
        gc_garbage_ratio: 1.0,
        ..Options::default()
    }
}

/// Writes every key once, then `writes` random overwrites, returning the
/// highest usage seen (sampled every 50 writes) and the last value of
/// each key.
fn overwrite(db: &Db, writes: usize) -> (u64, Vec<usize>) {
    overwrite_with(db, writes, VALUE)
}

/// As `overwrite`, with values of `len` bytes.
fn overwrite_with(db: &Db, writes: usize, len: usize) -> (u64, Vec<usize>) {
    let wo = WriteOptions::default();
    let mut rng = StdRng::seed_from_u64(7);
    let mut rounds = vec![0; KEYS];
    let mut peak = 0;
    for i in 0..KEYS {
        db.put(&wo, &key(i), &value_of(i, 0, len)).unwrap();
    }
    for n in 0..writes {
        let i = rng.gen_range(0..KEYS);
        rounds[i] = n + 1;
        db.put(&wo, &key(i), &value_of(i, n + 1, len)).unwrap();
        if n % 50 == 0 {
            peak = peak.max(db.stats().space_usage_bytes);
        }
    }
    (peak, rounds)
}

/// As `overwrite_with`, then waits for background work, returning the
/// most `Db::space()` showed meanwhile, sampled as often as a second
/// thread can.
fn overwrite_watching_peaks(db: &Db, writes: usize, len: usize) -> (u64, Vec<usize>) {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(db.space());
                std::thread::yield_now();
            }
            peak
        });
        let (_, rounds) = overwrite_with(db, writes, len);
        db.wait_for_compactions().unwrap();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (sampler.join().unwrap(), rounds)
    })
}

fn check(db: &Db, rounds: &[usize]) {
    check_with(db, rounds, VALUE)
}

fn check_with(db: &Db, rounds: &[usize], len: usize) {
    for (i, &round) in rounds.iter().enumerate() {
        assert_eq!(
            db.get(&ReadOptions::new(), &key(i)).unwrap(),
            Some(value_of(i, round, len)),
            "key {i}"
        );
    }
}

#[test]
fn a_budget_keeps_usage_near_it_where_lazy_gc_runs_far_past() {
    let live = (KEYS * VALUE) as u64;
    let budget = live * 5 / 2;
    let writes = 30 * KEYS;

    let fs = MemFs::new();
    let db = Db::open("/free", options(&fs)).unwrap();
    let (free_peak, rounds) = overwrite(&db, writes);
    check(&db, &rounds);
    let s = db.stats();
    assert_eq!(s.budget_stall_micros + s.budget_slowdown_writes, 0);
    db.close().unwrap();

    let fs = MemFs::new();
    let db = Db::open(
        "/budget",
        Options {
            space_budget_bytes: budget,
            ..options(&fs)
        },
    )
    .unwrap();
    let (peak, rounds) = overwrite(&db, writes);
    check(&db, &rounds);
    let s = db.stats();
    eprintln!(
        "live {live}, budget {budget}: peak without {free_peak}, with {peak}; {} delayed, {} stopped, {} µs; gc {}",
        s.budget_slowdown_writes, s.budget_stopped_writes, s.budget_stall_micros, s.gc
    );
    assert!(
        free_peak > budget * 3 / 2,
        "lazy GC should run far past the budget: {free_peak}"
    );
    // Usage is checked before each write: past the stop level writers
    // wait, so it ends within the stop margin plus the 50 writes between
    // samples.
    assert!(
        peak <= budget + budget / 32 + 50 * VALUE as u64 * 2,
        "peak {peak} over budget {budget}"
    );
    assert!(
        s.gc.jobs > 0,
        "the budget made GC collect partly live files"
    );
    assert!(s.budget_slowdown_writes + s.budget_stopped_writes > 0);
    assert!(s.budget_stall_micros > 0 && s.stall_micros >= s.budget_stall_micros);
    assert_eq!(s.space_budget_bytes, budget);
    assert!(s.to_text().contains("budget stalls"));
    let problems = db.verify();
    assert!(problems.is_ok(), "{problems}");
    db.close().unwrap();
}

#[test]
fn writes_go_on_when_nothing_can_be_freed() {
    let fs = MemFs::new();
    let budget = 256 << 10;
    let db = Db::open(
        "/db",
        Options {
            space_budget_bytes: budget,
            ..options(&fs)
        },
    )
    .unwrap();
    // Every key new: all data is live, so nothing GC or compaction does
    // brings usage under the budget; writes are delayed, never stuck.
    let wo = WriteOptions::default();
    for i in 0..1500 {
        db.put(&wo, &key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert!(s.space_usage_bytes > budget * 4, "{}", s.space_usage_bytes);
    assert!(s.budget_slowdown_writes > 0);
    for i in 0..1500 {
        assert_eq!(
            db.get(&ReadOptions::new(), &key(i)).unwrap(),
            Some(value(i, 0))
        );
    }
    db.close().unwrap();
}

#[test]
fn past_the_stop_level_writes_fail_when_asked_to() {
    let fs = MemFs::new();
    let budget = 256 << 10;
    let opts = Options {
        space_budget_bytes: budget,
        space_budget_fail_writes: true,
        ..options(&fs)
    };
    let db = Db::open("/db", opts.clone()).unwrap();
    let wo = WriteOptions::default();
    let mut written = 0;
    let err = loop {
        match db.put(&wo, &key(written), &value(written, 0)) {
            Ok(()) => written += 1,
            Err(e) => break e,
        }
        assert!(written < 10_000, "writes never failed");
    };
    match &err {
        Error::NoSpace {
            path: dir,
            op: "write",
            cause:
                NoSpaceCause::Budget {
                    usage_bytes,
                    budget_bytes,
                },
        } => {
            assert_eq!(dir, Path::new("/db"));
            assert_eq!(*budget_bytes, budget);
            // Writers stop at 127/128 of the budget.
            assert!(*usage_bytes >= budget - budget / 128, "{usage_bytes}");
        }
        e => panic!("expected NoSpace (budget), got {e}"),
    }
    assert!(err.to_string().contains("space budget"), "{err}");
    // Nothing of the failed write was applied, everything before it was,
    // and the database is not poisoned: deletes are writes too, so they
    // fail as well, but a reopen with a larger budget takes writes again.
    assert_eq!(db.get(&ReadOptions::new(), &key(written)).unwrap(), None);
    assert!(written > 0);
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open(
        "/db",
        Options {
            space_budget_bytes: budget * 100,
            ..opts
        },
    )
    .unwrap();
    for i in 0..written {
        assert_eq!(
            db.get(&ReadOptions::new(), &key(i)).unwrap(),
            Some(value(i, 0))
        );
    }
    db.put(&wo, &key(written), &value(written, 0)).unwrap();
    db.close().unwrap();
}

#[test]
fn the_report_shows_garbage_ratios_hidden_garbage_and_gc_share() {
    let fs = MemFs::new();
    let db = Db::open(
        "/db",
        Options {
            enable_gc: false,
            gc_garbage_ratio: 0.2,
            write_buffer_size: 8 << 20,
            ..options(&fs)
        },
    )
    .unwrap();
    let wo = WriteOptions::default();
    let round = |r: usize, step: usize| {
        for i in (0..KEYS).step_by(step) {
            db.put(&wo, &key(i), &value(i, r)).unwrap();
        }
        db.flush().unwrap();
    };
    // Every key, moved to the last level (a trivial move, no merge); then
    // every other key, compacted into it: that compaction read 500
    // upper-level entries and found all 500 shadowing an older one, and
    // left each first-round value file half garbage.
    round(0, 1);
    db.compact_range(None, None).unwrap();
    round(1, 2);
    db.compact_range(None, None).unwrap();
    // The same keys again, left in L0: they hide 500 values below.
    round(2, 2);
    let r = db.space_report().unwrap();
    assert!(r.exposed_garbage_bytes > 0);
    assert_eq!(
        r.exposed_garbage_ratio,
        r.exposed_garbage_bytes as f64 / r.referenced_value_bytes as f64
    );
    let upper = r.levels[0].value_bytes;
    assert!(upper > 0);
    assert_eq!(r.hidden_garbage_bytes, upper, "{r:?}");
    assert!(r.s_index > 1.0);
    assert!(r.index_pressure > 0.0, "L0 over L6 is above a settled tree");
    assert!(r.value_pressure > 0.0, "half the values are garbage");
    // GC is off: it gets no thread, and nothing limits it.
    assert_eq!((r.gc_max_jobs, r.pool_threads), (0, 1));
    assert_eq!(r.gc_rate_limit, None);
    assert_eq!(r.budget_bytes, 0);
    assert!(r.budget_usage_bytes >= r.sstable_bytes + r.value_file_bytes);
    // Compaction exposes what was hidden.
    db.compact_range(None, None).unwrap();
    let r = db.space_report().unwrap();
    assert_eq!(r.hidden_garbage_bytes, 0);
    assert_eq!(r.s_index, 1.0);
    assert_eq!(r.index_pressure, 0.0);
    db.close().unwrap();
}

/// GC off: writers at the budget must not wait for space no job frees.
/// They go on, each write group delayed, and the budget counts them. With
/// GC on, the same writes wait for it at times, and it brings usage back.
#[test]
fn a_writer_over_budget_never_waits_for_work_that_is_not_running() {
    let live = (KEYS * VALUE) as u64;
    let budget = live * 2;
    for gc in [false, true] {
        let fs = MemFs::new();
        let db = Db::open(
            "/db",
            Options {
                space_budget_bytes: budget,
                enable_gc: gc,
                gc_garbage_ratio: 0.5,
                ..options(&fs)
            },
        )
        .unwrap();
        let (peak, rounds) = overwrite(&db, 10 * KEYS);
        check(&db, &rounds);
        // Compactions pushing writes down leave nothing pending once idle.
        db.wait_for_compactions().unwrap();
        let s = db.stats();
        eprintln!(
            "gc {gc}: peak {peak} of {budget}; {} delayed, {} stopped, {} µs; gc {}",
            s.budget_slowdown_writes, s.budget_stopped_writes, s.budget_stall_micros, s.gc
        );
        assert!(s.budget_slowdown_writes + s.budget_stopped_writes > 0);
        if gc {
            assert!(s.gc.jobs > 0);
            assert!(
                s.space_usage_bytes <= budget + budget / 32 + 50 * VALUE as u64 * 2,
                "{}",
                s.to_text()
            );
        } else {
            // Every write went on, though no GC ever ran to free space.
            assert_eq!(s.gc.jobs, 0);
        }
        db.close().unwrap();
    }
}

/// A budget below the live data it is opened over is reported at open;
/// one the data outgrows, once as it does. Writes past it fail with the
/// typed error when asked to, and are delayed otherwise.
#[test]
fn an_impossible_budget_is_reported_once_and_fails_writes_when_asked() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let wo = WriteOptions::default();
    for i in 0..KEYS {
        db.put(&wo, &key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().budget_impossible, 0);
    db.close().unwrap();

    let live = (KEYS * VALUE) as u64;
    let small = Options {
        space_budget_bytes: live / 2,
        space_budget_fail_writes: true,
        ..options(&fs)
    };
    let db = Db::open("/db", small.clone()).unwrap();
    assert_eq!(db.stats().budget_impossible, 1, "reported at open");
    match db.put(&wo, &key(0), &value(0, 1)) {
        Err(Error::NoSpace {
            cause: NoSpaceCause::Budget { budget_bytes, .. },
            ..
        }) => {
            assert_eq!(budget_bytes, live / 2)
        }
        r => panic!("expected NoSpace (budget), got {r:?}"),
    }
    // Reads go on.
    check(&db, &[0; KEYS]);
    assert_eq!(db.stats().budget_impossible, 1, "reported once");
    db.close().unwrap();

    // Without failing writes: delayed, not stuck, and reported once more
    // at this open only.
    let db = Db::open(
        "/db",
        Options {
            space_budget_fail_writes: false,
            ..small
        },
    )
    .unwrap();
    for i in 0..100 {
        db.put(&wo, &key(i), &value(i, 1)).unwrap();
    }
    let s = db.stats();
    assert_eq!(s.budget_impossible, 1, "{}", s.to_text());
    assert!(s.budget_slowdown_writes > 0, "{}", s.to_text());
    assert!(
        s.to_text().contains("found impossible 1 times"),
        "{}",
        s.to_text()
    );
    db.close().unwrap();

    // A budget the data outgrows: reported once, when it does.
    let fs = MemFs::new();
    let db = Db::open(
        "/grow",
        Options {
            space_budget_bytes: live / 2,
            ..options(&fs)
        },
    )
    .unwrap();
    assert_eq!(db.stats().budget_impossible, 0);
    for i in 0..KEYS {
        db.put(&wo, &key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().budget_impossible, 1);
    db.close().unwrap();
}

/// What the directory holds stays within the budget, even at its peaks: a
/// GC job copies a file's live records before the file goes, so it starts
/// only if its output fits below the stop level, writers leave room for
/// it, and value files are small enough to fit. Before, jobs of whole
/// 1 MiB files started whenever one qualified, and the directory reached
/// twice this budget.
#[test]
fn gc_outputs_never_take_the_directory_past_the_budget() {
    let live = (KEYS * VALUE) as u64;
    let budget = live * 3 / 2;
    let fs = MemFs::new();
    let db = Db::open(
        "/peaks",
        Options {
            space_budget_bytes: budget,
            // Files this large would need more room than the budget has.
            value_file_size: 1 << 20,
            ..options(&fs)
        },
    )
    .unwrap();
    let (peak, rounds) = overwrite_watching_peaks(&db, 20 * KEYS, VALUE);
    check(&db, &rounds);
    let s = db.stats();
    eprintln!("budget {budget}: directory peak {peak}; gc {}", s.gc);
    assert!(s.gc.jobs > 0);
    // Within a thirty-second: the manifest's rewrites are not foreseen,
    // and here, with 1 KiB values, the tree and the manifest are a few
    // percent of the budget.
    assert!(
        peak <= budget + budget / 32,
        "the directory reached {peak}, budget {budget}"
    );
    db.close().unwrap();
}

/// With WAL-time separation the values a memtable's writes overwrote
/// stay in the value logs, garbage GC cannot see, until the memtable is
/// flushed: under a budget the log bytes one memtable points to are
/// bounded by a share of the budget, not by four times the memtables'
/// bytes (which at 2 GiB and 64 MiB buffers was all the room a 1.25x
/// budget leaves), and the directory stays within the budget. Values of
/// 4 KiB, so that the tree and the manifest (rewritten from 64 KiB) are
/// as small a share of the budget as they are in use.
#[test]
fn value_logs_keep_within_the_budget() {
    const LEN: usize = 4 << 10;
    let live = (KEYS * LEN) as u64;
    let budget = live * 3 / 2;
    let fs = MemFs::new();
    let db = Db::open(
        "/logs",
        Options {
            space_budget_bytes: budget,
            big_value_threshold: LEN,
            // Four times both memtables' bytes, 2 MiB, would hold a third
            // of the budget. (With 1 MiB memtables the budget is found
            // impossible, since its check counts them at their full size,
            // and writes go on past it at a steady delay.)
            write_buffer_size: 256 << 10,
            ..options(&fs)
        },
    )
    .unwrap();
    let (peak, rounds) = overwrite_watching_peaks(&db, 20 * KEYS, LEN);
    check_with(&db, &rounds, LEN);
    let s = db.stats();
    eprintln!(
        "budget {budget}: directory peak {peak}; {} flushes; logs {} created; gc {}",
        s.flushes, s.value_logs_created, s.gc
    );
    assert!(s.value_logs_created > 0);
    // 84 MB of values in memtables pointing to at most a 32nd of the
    // budget each.
    assert!(
        s.flushes as usize >= 21 * KEYS * LEN / (budget as usize / 32) / 2,
        "{} flushes",
        s.flushes
    );
    assert!(
        peak <= budget + budget / 32,
        "the directory reached {peak}, budget {budget}"
    );
    db.close().unwrap();
}

/// While a reader's Version names the files GC emptied, GC's jobs free
/// nothing until it lets go: GC then copies only what fits below the
/// stop level. Before, with no job running and usage at the writers'
/// target, GC took itself for stuck and copied file after file past the
/// room, as it did while a compaction held its input Version.
#[test]
fn gc_copies_only_what_fits_while_a_reader_holds_what_it_emptied() {
    let live = (KEYS * VALUE) as u64;
    let budget = live * 3 / 2;
    let fs = MemFs::new();
    let db = Db::open(
        "/pinned",
        Options {
            space_budget_bytes: budget,
            ..options(&fs)
        },
    )
    .unwrap();
    let wo = WriteOptions::default();
    let (_, mut rounds) = overwrite(&db, 10 * KEYS);
    db.wait_for_compactions().unwrap();
    let pinned_rounds = rounds.clone();
    let it = db.iter(&ReadOptions::new());
    let room = budget.saturating_sub(db.space());
    let copied_before = db.stats().gc.bytes_written;
    let mut rng = StdRng::seed_from_u64(11);
    for n in 0..2 * KEYS {
        let i = rng.gen_range(0..KEYS);
        rounds[i] = 100 * KEYS + n;
        db.put(&wo, &key(i), &value(i, rounds[i])).unwrap();
    }
    db.wait_for_compactions().unwrap();
    let copied = db.stats().gc.bytes_written - copied_before;
    eprintln!(
        "room {room}, copied {copied} while pinned; {}",
        db.stats().gc
    );
    assert!(
        copied <= room,
        "GC copied {copied} bytes while a reader held what it emptied, room {room}"
    );
    // The reader still sees the values of its Version.
    let mut it = it;
    it.seek_to_first().unwrap();
    for (i, &round) in pinned_rounds.iter().enumerate() {
        assert!(it.valid(), "the scan ended before key {i}");
        assert_eq!(it.key(), key(i).as_slice());
        assert_eq!(it.value().unwrap(), value(i, round).as_slice(), "key {i}");
        it.next().unwrap();
    }
    assert!(!it.valid());
    drop(it);
    // Once it lets go, GC brings the directory back within the budget.
    for n in 0..KEYS {
        let i = rng.gen_range(0..KEYS);
        rounds[i] = 200 * KEYS + n;
        db.put(&wo, &key(i), &value(i, rounds[i])).unwrap();
    }
    db.wait_for_compactions().unwrap();
    check(&db, &rounds);
    eprintln!("after: {} of {budget}", db.space());
    assert!(db.space() <= budget, "{} of {budget}", db.space());
    db.close().unwrap();
}

/// While space is short, compactions leave garbage-heavy value files to
/// GC instead of re-separating their values: those copies take space
/// before the files they empty go, which the budget does not foresee.
#[test]
fn compactions_do_not_re_separate_values_while_space_is_short() {
    let live = (KEYS * VALUE) as u64;
    let fs = MemFs::new();
    let db = Db::open(
        "/short",
        Options {
            // Past the live data alone, 77% of the budget: short from the
            // end of the first pass on.
            space_budget_bytes: live * 13 / 10,
            // Tables may name two value files: without a budget, nearly
            // every compaction re-separates.
            max_value_file_refs: 2,
            ..options(&fs)
        },
    )
    .unwrap();
    let wo = WriteOptions::default();
    for i in 0..KEYS {
        db.put(&wo, &key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let before = db.stats();
    let (_, rounds) = overwrite(&db, 5 * KEYS);
    let after = db.stats();
    check(&db, &rounds);
    assert!(after.compactions > before.compactions);
    assert_eq!(
        after.compaction_values_reseparated,
        before.compaction_values_reseparated
    );
    db.close().unwrap();
}

/// While space is short, push-downs rewrite the last level again and
/// again: its tables are cut at an eighth of the budget of referenced
/// values (at most eight times the target file size), not at the target,
/// so they
/// are fewer, each a sync less and a value-references block less for GC
/// to read, and a range merge of one still fits in the room below the
/// short level.
#[test]
fn the_last_level_is_written_in_wider_tables_while_space_is_short() {
    let live = (KEYS * VALUE) as u64;
    let budget = live * 13 / 10;
    let fs = MemFs::new();
    let opts = Options {
        // Past the live data alone, 77% of the budget: short from the
        // end of the first pass on.
        space_budget_bytes: budget,
        // Eight times this is below an eighth of the budget.
        target_file_size_base: 16 << 10,
        ..options(&fs)
    };
    let target = opts.target_file_size_base;
    let db = Db::open("/wide", opts).unwrap();
    let wo = WriteOptions::default();
    for i in 0..KEYS {
        db.put(&wo, &key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let (_, rounds) = overwrite(&db, 5 * KEYS);
    db.wait_for_compactions().unwrap();
    check(&db, &rounds);
    let stats = db.stats();
    let last = stats
        .levels
        .iter()
        .rev()
        .find(|l| l.files > 0)
        .expect("a level with tables");
    let compensated = last.bytes + last.value_bytes;
    let files = last.files as u64;
    // Cut at the target, the tables would average just past it.
    assert!(
        compensated / files > target * 3 / 2,
        "{files} tables of {compensated} bytes in all, target {target}"
    );
    // A table passes its cut by one entry at most.
    let widest = (budget / 8).min(8 * target) + 2 * VALUE as u64;
    assert!(
        files >= compensated.div_ceil(widest),
        "{files} tables of {compensated} bytes in all, none wider than {widest}"
    );
    db.close().unwrap();
}

/// A value file too large for GC's room under the budget (written before
/// the budget, here) is still collected once writers have filled the
/// budget to its target and no other job runs: it would otherwise keep
/// its garbage for ever.
#[test]
fn files_larger_than_gc_room_are_still_collected() {
    use cleave::vfs::Fs;
    let fs = MemFs::new();
    let wo = WriteOptions::default();
    // One value file of all the keys, far above a 1.3 MB budget's room
    // for GC jobs.
    let db = Db::open(
        "/big",
        Options {
            write_buffer_size: 2 << 20,
            value_file_size: 2 << 20,
            ..options(&fs)
        },
    )
    .unwrap();
    for i in 0..KEYS {
        db.put(&wo, &key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let vf = |fs: &MemFs| -> Vec<String> {
        let mut v: Vec<String> = Fs::list(fs, Path::new("/big"))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".vf"))
            .collect();
        v.sort();
        v
    };
    let before = vf(&fs);
    assert_eq!(before.len(), 1);

    let live = (KEYS * VALUE) as u64;
    let db = Db::open(
        "/big",
        Options {
            space_budget_bytes: live * 13 / 10,
            ..options(&fs)
        },
    )
    .unwrap();
    // Half the keys, again and again: the old files keep half their
    // records live, so only GC can free them.
    let mut rounds = vec![0; KEYS];
    for round in 1..=6 {
        for i in (0..KEYS).step_by(2) {
            db.put(&wo, &key(i), &value(i, round)).unwrap();
            rounds[i] = round;
        }
    }
    db.wait_for_compactions().unwrap();
    check(&db, &rounds);
    let after = vf(&fs);
    assert!(
        before.iter().all(|f| !after.contains(f)),
        "before {before:?}, after {after:?}; {}",
        db.stats().gc
    );
    db.close().unwrap();
}
