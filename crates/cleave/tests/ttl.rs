//! Expiry end to end: an entry written with a time to live is invisible to
//! every read from the millisecond it expires, wherever it lies (memtable,
//! L0, the last level; inline or separated, at flush or at WAL time), and
//! never lets an older version show through; compaction drops it without
//! reading its value, whose bytes are then exact garbage that GC reclaims;
//! merge operands written over it outlive it; snapshots and reopening keep
//! all of that.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cleave::vfs::{Fs, MemFs};
use cleave::{Db, ManualClock, Options, ReadOptions, U64Add, WriteBatch, WriteOptions};

const DIR: &str = "/db";
/// The clock's reading when each test starts (ms since the Unix epoch).
const T0: u64 = 1_800_000_000_000;
const MIN_VALUE_SIZE: usize = 512;

fn options(fs: Arc<dyn Fs>, clock: Arc<ManualClock>) -> Options {
    Options {
        create_if_missing: true,
        fs,
        clock,
        min_value_size: MIN_VALUE_SIZE,
        write_buffer_size: 4 << 20,
        range_merge_sorted_runs: 0,
        enable_gc: false,
        cache_values: false,
        ..Options::default()
    }
}

fn open(fs: &Arc<MemFs>, clock: &Arc<ManualClock>) -> Db {
    Db::open(Path::new(DIR), options(fs.clone(), clock.clone())).unwrap()
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Separated for even `i`, inline for odd.
fn value(i: usize, tag: &str) -> Vec<u8> {
    let len = if i.is_multiple_of(2) { 2000 } else { 50 };
    let mut v = format!("{tag}-{i}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// Everything a forward scan, a reverse scan, gets and multi_get find,
/// each checked against the others.
fn contents(db: &Db, ro: &ReadOptions<'_>, keys: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut forward = Vec::new();
    let mut it = db.iter(ro);
    it.seek_to_first().unwrap();
    while it.valid() {
        forward.push((it.key().to_vec(), it.value().unwrap().to_vec()));
        it.next().unwrap();
    }
    let mut reverse = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        reverse.push((it.key().to_vec(), it.value().unwrap().to_vec()));
        it.prev().unwrap();
    }
    reverse.reverse();
    assert_eq!(forward, reverse, "forward and reverse scans differ");
    let all: Vec<Vec<u8>> = (0..keys).map(key).collect();
    let got = db.multi_get(ro, &all);
    let mut by_get = Vec::new();
    for (k, m) in all.iter().zip(got) {
        let g = db.get(ro, k).unwrap();
        assert_eq!(g, m.unwrap(), "get and multi_get differ on {k:?}");
        assert_eq!(
            db.contains(ro, k).unwrap(),
            g.is_some(),
            "contains on {k:?}"
        );
        if let Some(v) = g {
            by_get.push((k.clone(), v));
        }
    }
    assert_eq!(forward, by_get, "scan and gets differ");
    forward
}

/// Keys 0..40: a plain old version of each; then over those below 30 a
/// newer version expiring at T0 + 1000 × (1 + i % 3).
fn write_generations(db: &Db, clock: &ManualClock) {
    let wo = WriteOptions::default();
    for i in 0..40 {
        db.put(&wo, &key(i), &value(i, "old")).unwrap();
    }
    for i in 0..30 {
        let at = clock_ms(clock) + 1000 * (1 + i as u64 % 3);
        db.put_with_expiry(&wo, &key(i), &value(i, "ttl"), at)
            .unwrap();
    }
}

fn clock_ms(clock: &ManualClock) -> u64 {
    use cleave::Clock;
    clock.now_ms()
}

/// What a reader at `now` should find after `write_generations`.
fn expected(now: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..40)
        .filter_map(|i| {
            if i >= 30 {
                return Some((key(i), value(i, "old")));
            }
            let at = T0 + 1000 * (1 + i as u64 % 3);
            (now < at).then(|| (key(i), value(i, "ttl")))
        })
        .collect()
}

#[test]
fn expired_entries_vanish_from_every_read_wherever_they_lie() {
    // Memtable, then L0 (an older version in the same file), then the last
    // level; each read at every expiry step.
    for stage in ["memtable", "flushed", "compacted", "reopened"] {
        let fs = Arc::new(MemFs::new());
        let clock = Arc::new(ManualClock::new(T0));
        let mut db = open(&fs, &clock);
        write_generations(&db, &clock);
        match stage {
            "flushed" => db.flush().unwrap(),
            "compacted" => {
                db.flush().unwrap();
                db.compact_range(None, None).unwrap();
            }
            "reopened" => {
                drop(db);
                db = open(&fs, &clock);
            }
            _ => {}
        }
        for step in [0, 999, 1000, 1500, 2000, 2999, 3000, 10_000] {
            clock.set(T0 + step);
            let got = contents(&db, &ReadOptions::new(), 40);
            assert_eq!(got, expected(T0 + step), "{stage} at +{step} ms");
        }
    }
}

#[test]
fn compaction_frees_expired_values_without_reading_them() {
    let fs = Arc::new(MemFs::new());
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&fs, &clock);
    let wo = WriteOptions::default();
    // 100 separated values that expire and 100 that do not, interleaved.
    for i in 0..200 {
        let v = value(i * 2, "v");
        if i.is_multiple_of(2) {
            db.put_with_ttl(&wo, &key(i), &v, Duration::from_secs(60))
                .unwrap();
        } else {
            db.put(&wo, &key(i), &v).unwrap();
        }
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let before = db.space_report().unwrap();
    assert_eq!(before.exposed_garbage_bytes, 0);
    let stats = db.stats();
    assert_eq!(stats.expired_entries, 0);

    clock.advance(60_000);
    db.compact_range(None, None).unwrap();
    let after_stats = db.stats();
    assert_eq!(after_stats.expired_entries, 100);
    assert_eq!(
        after_stats.value_reads, stats.value_reads,
        "compaction read values to expire them"
    );
    assert_eq!(after_stats.value_read_bytes, stats.value_read_bytes);
    let after = db.space_report().unwrap();
    // Every expired record is exact garbage, counted the moment
    // compaction dropped its entry.
    assert_eq!(
        after.exposed_garbage_bytes,
        before.referenced_value_bytes - after.referenced_value_bytes
    );
    assert_eq!(after.exposed_garbage_bytes, after_stats.expired_value_bytes);
    assert!(after.exposed_garbage_bytes >= 100 * 2000);

    // GC reclaims them like any garbage.
    db.gc_now().unwrap();
    let collected = db.space_report().unwrap();
    assert_eq!(collected.exposed_garbage_bytes, 0);
    assert!(collected.value_file_bytes < after.value_file_bytes - 100 * 2000 + 4096);
    for i in 0..200 {
        let want = (i % 2 == 1).then(|| value(i * 2, "v"));
        assert_eq!(
            db.get(&ReadOptions::new(), &key(i)).unwrap(),
            want,
            "key {i}"
        );
    }
}

#[test]
fn an_expired_entry_flushed_over_an_older_version_hides_it() {
    let fs = Arc::new(MemFs::new());
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&fs, &clock);
    let wo = WriteOptions::default();
    db.put(&wo, b"k", &value(0, "old")).unwrap();
    db.flush().unwrap();
    db.put_with_ttl(&wo, b"k", &value(0, "new"), Duration::from_millis(10))
        .unwrap();
    clock.advance(10);
    // The flush meets the entry expired, with an older one below: it
    // writes a deletion in its place, never the value.
    let written = db.stats().value_file_bytes_written;
    db.flush().unwrap();
    assert_eq!(db.stats().value_file_bytes_written, written);
    assert_eq!(db.stats().expired_entries, 1);
    assert_eq!(db.get(&ReadOptions::new(), b"k").unwrap(), None);
    drop(db);
    let db = open(&fs, &clock);
    assert_eq!(db.get(&ReadOptions::new(), b"k").unwrap(), None);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&ReadOptions::new(), b"k").unwrap(), None);
    assert_eq!(db.space_report().unwrap().referenced_value_bytes, 0);
}

#[test]
fn a_snapshot_from_before_an_expiring_put_keeps_the_older_version() {
    let fs = Arc::new(MemFs::new());
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&fs, &clock);
    let wo = WriteOptions::default();
    db.put(&wo, b"k", &value(0, "old")).unwrap();
    let snap = db.snapshot();
    db.put_with_ttl(&wo, b"k", &value(0, "new"), Duration::from_secs(1))
        .unwrap();
    clock.advance(1000);
    for step in ["memtable", "flushed", "compacted"] {
        match step {
            "flushed" => db.flush().unwrap(),
            "compacted" => db.compact_range(None, None).unwrap(),
            _ => {}
        }
        let mut ro = ReadOptions::new();
        ro.snapshot = Some(&snap);
        assert_eq!(
            db.get(&ro, b"k").unwrap(),
            Some(value(0, "old")),
            "{step}: the snapshot"
        );
        assert_eq!(db.get(&ReadOptions::new(), b"k").unwrap(), None, "{step}");
    }
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&ReadOptions::new(), b"k").unwrap(), None);
}

#[test]
fn merge_operands_outlive_the_value_they_were_written_over() {
    let fs = Arc::new(MemFs::new());
    let clock = Arc::new(ManualClock::new(T0));
    let db = Db::open(
        Path::new(DIR),
        Options {
            merge_operator: Some(Arc::new(U64Add)),
            ..options(fs.clone(), clock.clone())
        },
    )
    .unwrap();
    let wo = WriteOptions::default();
    let n = |x: u64| x.to_le_bytes().to_vec();
    db.put_with_ttl(&wo, b"c", &n(100), Duration::from_secs(1))
        .unwrap();
    db.merge(&wo, b"c", &n(1)).unwrap();
    db.merge(&wo, b"c", &n(2)).unwrap();
    let read = |ctx: &str, want: u64| {
        assert_eq!(
            db.get(&ReadOptions::new(), b"c").unwrap(),
            Some(n(want)),
            "{ctx}"
        );
        let mut it = db.iter(&ReadOptions::new());
        it.seek_to_first().unwrap();
        assert_eq!(it.value().unwrap(), n(want), "{ctx}: scan");
        it.seek_to_last().unwrap();
        assert_eq!(it.value().unwrap(), n(want), "{ctx}: reverse scan");
    };
    read("memtable", 103);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    read("compacted before expiry", 103);
    clock.advance(1000);
    read("expired", 3);
    db.compact_range(None, None).unwrap();
    read("compacted after expiry", 3);
    db.merge(&wo, b"c", &n(4)).unwrap();
    read("a new operand", 7);
}

#[test]
fn values_a_log_took_at_write_time_expire_too() {
    let fs = Arc::new(MemFs::new());
    let clock = Arc::new(ManualClock::new(T0));
    let opts = Options {
        big_value_threshold: 1024,
        ..options(fs.clone(), clock.clone())
    };
    let db = Db::open(Path::new(DIR), opts.clone()).unwrap();
    let wo = WriteOptions::default();
    let mut b = WriteBatch::new();
    for i in 0..20 {
        b.put_with_expiry(&key(i), &value(0, &i.to_string()), T0 + 500);
    }
    b.put(&key(25), &value(0, "plain"));
    db.write(&wo, b).unwrap();
    assert!(db.stats().value_log_records >= 21);
    assert_eq!(
        db.get(&ReadOptions::new(), &key(3)).unwrap(),
        Some(value(0, "3"))
    );
    // Replayed from the WAL, the handles keep their expiry.
    drop(db);
    let db = Db::open(Path::new(DIR), opts).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), &key(3)).unwrap(),
        Some(value(0, "3"))
    );
    clock.advance(500);
    assert_eq!(db.get(&ReadOptions::new(), &key(3)).unwrap(), None);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let got = contents(&db, &ReadOptions::new(), 30);
    assert_eq!(got, vec![(key(25), value(0, "plain"))]);
    assert_eq!(db.stats().expired_entries, 20);
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn the_pool_compacts_tables_whose_values_expired_in_a_quiet_level() {
    let fs = Arc::new(MemFs::new());
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&fs, &clock);
    let wo = WriteOptions::default();
    // Three tables in the last level: one of values expiring at +10 s, one
    // at +20 s, one of values without an expiry.
    for (round, ttl) in [(0, Some(10_000)), (1, Some(20_000)), (2, None)] {
        for i in 0..50 {
            let k = key(round * 100 + i);
            let v = value(0, &format!("r{round}"));
            match ttl {
                Some(ms) => db.put_with_expiry(&wo, &k, &v, T0 + ms).unwrap(),
                None => db.put(&wo, &k, &v).unwrap(),
            }
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let before = db.space_report().unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().expired_entries, 0, "nothing has expired yet");

    // No write comes: the pool alone notices each table's values expire.
    clock.set(T0 + 10_000);
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().expired_entries, 50);
    clock.set(T0 + 20_000);
    db.wait_for_compactions().unwrap();
    assert_eq!(db.stats().expired_entries, 100);
    let report = db.space_report().unwrap();
    assert_eq!(
        report.referenced_value_bytes * 3,
        before.referenced_value_bytes
    );
    // Each expired table's values filled value files of their own, which
    // died whole and went without GC.
    assert_eq!(report.exposed_garbage_bytes, 0);
    assert!(before.value_file_bytes - report.value_file_bytes >= db.stats().expired_value_bytes);
    let got = contents(&db, &ReadOptions::new(), 300);
    assert_eq!(got.len(), 50);
}
