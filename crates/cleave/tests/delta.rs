//! Key-delta separation end to end: flushes move merge operands to the
//! delta store's buckets, reads and scans (both ways) merge them with the
//! LSM-tree's values, anchors of puts and deletes retire older deltas even
//! after compaction drops the tombstone, snapshots keep what they see
//! through the buckets' garbage collection, splits and merges, and all of
//! it survives a reopen and a power cut.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cleave::vfs::MemFs;
use cleave::{Db, Options, ReadOptions, U64Add, WriteOptions};

fn options(fs: &MemFs) -> Options {
    Options {
        create_if_missing: true,
        fs: Arc::new(fs.clone()),
        write_buffer_size: 32 << 10,
        merge_operator: Some(Arc::new(U64Add)),
        enable_delta_separation: true,
        delta_bucket_capacity: 4 << 10,
        delta_split_ratio: 0.3,
        delta_max_buckets: 24,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn counter(v: Option<Vec<u8>>) -> Option<u64> {
    v.map(|v| u64::from_le_bytes(v.try_into().unwrap()))
}

fn scan(db: &Db, ro: &ReadOptions<'_>, reverse: bool) -> BTreeMap<Vec<u8>, u64> {
    let mut it = db.iter(ro);
    let mut out = BTreeMap::new();
    if reverse {
        it.seek_to_last().unwrap();
    } else {
        it.seek_to_first().unwrap();
    }
    while it.valid() {
        let v = u64::from_le_bytes(it.value().unwrap().try_into().unwrap());
        assert!(out.insert(it.key().to_vec(), v).is_none());
        if reverse {
            it.prev().unwrap();
        } else {
            it.next().unwrap();
        }
    }
    it.status().unwrap();
    out
}

fn check(db: &Db, ro: &ReadOptions<'_>, model: &BTreeMap<Vec<u8>, u64>, ctx: &str) {
    for i in 0..KEYS {
        assert_eq!(
            counter(db.get(ro, &key(i)).unwrap()),
            model.get(&key(i)).copied(),
            "{ctx}: key {i}"
        );
    }
    assert_eq!(&scan(db, ro, false), model, "{ctx}: forward scan");
    assert_eq!(&scan(db, ro, true), model, "{ctx}: reverse scan");
}

const KEYS: u64 = 1000;

/// A deterministic workload of adds, puts and deletes: over all keys for
/// an even `seed`, over a tenth of them (a hot range) for an odd one.
fn run(db: &Db, model: &mut BTreeMap<Vec<u8>, u64>, rounds: u64, seed: u64) {
    let wo = WriteOptions::default();
    let mut x = seed;
    let (lo, span) = if seed.is_multiple_of(2) {
        (0, KEYS)
    } else {
        ((seed * 100) % KEYS, KEYS / 10)
    };
    for _ in 0..rounds {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = lo + (x >> 33) % span;
        let n = (x >> 20) % 100;
        match (x >> 8) % 10 {
            0 => {
                db.put(&wo, &key(i), &n.to_le_bytes()).unwrap();
                model.insert(key(i), n);
            }
            1 => {
                db.delete(&wo, &key(i)).unwrap();
                model.remove(&key(i));
            }
            _ => {
                db.merge(&wo, &key(i), &n.to_le_bytes()).unwrap();
                *model.entry(key(i)).or_insert(0) += n;
            }
        }
    }
}

#[test]
fn deltas_live_in_buckets_and_reads_merge_them() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    let ro = ReadOptions::new();
    for round in 0..12 {
        run(&db, &mut model, 3000, round);
        check(&db, &ro, &model, &format!("round {round}"));
        db.flush().unwrap();
        check(&db, &ro, &model, &format!("round {round}, flushed"));
    }
    db.compact_range(None, None).unwrap();
    check(&db, &ro, &model, "compacted");
    let stats = db.stats();
    assert!(stats.delta_bytes_written > 0, "{stats:?}");
    assert!(stats.delta_buckets_collected > 0, "{stats:?}");
    assert!(stats.delta_bucket_splits > 0, "{stats:?}");
    assert!(stats.delta_bucket_merges > 0, "{stats:?}");
    assert!(stats.delta_records_dropped > 0, "{stats:?}");
    // The buckets' filters and indexes are charged to the block cache.
    assert!(stats.delta_memory_bytes >= 4096, "{stats:?}");
    assert!(
        stats.block_cache_usage + stats.delta_memory_bytes <= stats.block_cache_capacity,
        "{stats:?}"
    );
    // Operands reach an sstable only as deltas a full store folded.
    assert!(
        stats.merges_full == 0 || stats.delta_buckets_folded > 0,
        "{stats:?}"
    );
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    assert!(
        report.delta_buckets > 1 && report.delta_records > 0,
        "{report}"
    );
    db.close().unwrap();

    let db = Db::open(dir, options(&fs)).unwrap();
    check(&db, &ro, &model, "reopened");
    // Turned off, flushes still route operands to the store that holds
    // deltas, so a key's deltas never straddle the store and the levels.
    db.close().unwrap();
    let off = Options {
        enable_delta_separation: false,
        ..options(&fs)
    };
    let db = Db::open(dir, off).unwrap();
    run(&db, &mut model, 2000, 99);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    check(&db, &ro, &model, "separation off");
    assert!(db.stats().delta_bytes_written > 0);
}

/// A flush whose delta file is larger than the buffer it is written
/// through (1 MiB): chunks past the first write keep their offsets, read
/// back before and after a reopen, and `verify` finds every record.
#[test]
fn a_delta_file_written_in_several_appends_reads_back() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let opts = || Options {
        write_buffer_size: 64 << 20,
        delta_bucket_capacity: 256 << 10,
        delta_max_buckets: 4096,
        ..options(&fs)
    };
    let db = Db::open(dir, opts()).unwrap();
    let wo = WriteOptions::default();
    // One delta each: a flush merges a key's deltas into one.
    const WIDE_KEYS: u64 = 150_000;
    for i in 0..WIDE_KEYS {
        db.merge(&wo, &key(i), &i.to_le_bytes()).unwrap();
    }
    db.flush().unwrap();
    let expect = Some;
    let ro = ReadOptions::new();
    let stats = db.stats();
    assert!(stats.delta_bytes_written > 2 << 20, "{stats:?}");
    for i in 0..WIDE_KEYS {
        assert_eq!(counter(db.get(&ro, &key(i)).unwrap()), expect(i), "key {i}");
    }
    db.close().unwrap();
    let db = Db::open(dir, opts()).unwrap();
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.delta_records, WIDE_KEYS, "{report}");
    for i in (0..WIDE_KEYS).rev() {
        assert_eq!(counter(db.get(&ro, &key(i)).unwrap()), expect(i), "key {i}");
    }
}

/// Six flushes of the workload, then the database reopened with a block
/// cache too small to keep the buckets' blocks, and every put's value
/// separated (so a get reads a value while its deltas are read).
fn reopened_with_a_small_cache(fs: &MemFs) -> (Db, BTreeMap<Vec<u8>, u64>) {
    let dir = Path::new("/db");
    let opts = || Options {
        block_cache_capacity: 16 << 10,
        min_value_size: 1,
        ..options(fs)
    };
    let db = Db::open(dir, opts()).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..6 {
        run(&db, &mut model, 3000, round);
        db.flush().unwrap();
    }
    db.close().unwrap();
    (Db::open(dir, opts()).unwrap(), model)
}

/// With a block cache too small to keep the buckets' blocks, a get hands
/// its delta read to a reader thread and reads the tree and the separated
/// value beneath meanwhile; the answers are the same, from one thread or
/// from several at once (more than there are readers, so some read their
/// deltas themselves).
#[test]
fn gets_overlap_uncached_delta_reads_with_the_tree() {
    let fs = MemFs::new();
    let (db, model) = reopened_with_a_small_cache(&fs);
    let db = Arc::new(db);
    let ro = ReadOptions::new();
    check(&db, &ro, &model, "one reader");
    let stats = db.stats();
    assert!(stats.delta_reads_overlapped > 0, "{stats:?}");
    assert!(stats.value_reads > 0, "{stats:?}");
    let model = Arc::new(model);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (db, model) = (db.clone(), model.clone());
            std::thread::spawn(move || {
                let ro = ReadOptions::new();
                for i in (0..KEYS).map(|i| (i * 7 + t * 250) % KEYS) {
                    assert_eq!(
                        counter(db.get(&ro, &key(i)).unwrap()),
                        model.get(&key(i)).copied(),
                        "thread {t}: key {i}"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Damage found by a reader thread reaches the get as corruption naming
/// the delta file; damage to the value read while a delta read is on a
/// reader names the value file. Every other key still reads right.
#[test]
fn damage_found_during_an_overlapped_get_names_its_file() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let (db, model) = reopened_with_a_small_cache(&fs);
    // Damaged once open has indexed every chunk: only a read sees it.
    let names = cleave::vfs::Fs::list(&fs, dir).unwrap();
    for name in &names {
        let path = dir.join(name);
        let len = cleave::vfs::Fs::open(&fs, &path, Default::default())
            .unwrap()
            .len() as usize;
        if name.ends_with(".kd") {
            // Inside the first block of the file's first chunk.
            assert!(fs.corrupt_byte(&path, 40));
        } else if name.ends_with(".vf") {
            assert!(fs.corrupt_byte(&path, len / 2));
        }
    }
    let ro = ReadOptions::new();
    let (mut delta_errors, mut value_errors) = (0, 0);
    for i in 0..KEYS {
        match db.get(&ro, &key(i)) {
            Ok(v) => assert_eq!(counter(v), model.get(&key(i)).copied(), "key {i}"),
            Err(e) => {
                assert!(e.is_corruption(), "key {i}: {e:?}");
                let text = e.to_string();
                let name = names.iter().find(|n| text.contains(n.as_str()));
                match name.map(|n| n.rsplit('.').next()) {
                    Some(Some("kd")) => delta_errors += 1,
                    Some(Some("vf")) => value_errors += 1,
                    _ => panic!("key {i}: {text} names no damaged file"),
                }
            }
        }
    }
    assert!(
        delta_errors > 0 && value_errors > 0,
        "{delta_errors} {value_errors}"
    );
    assert!(db.stats().delta_reads_overlapped > 0);
}

/// An anchor keeps older deltas dead after compaction drops the tombstone
/// (or the value) that left it.
#[test]
fn a_dropped_tombstone_does_not_revive_older_deltas() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), options(&fs)).unwrap();
    let wo = WriteOptions::default();
    let ro = ReadOptions::new();
    db.merge(&wo, b"k", &5u64.to_le_bytes()).unwrap();
    db.merge(&wo, b"j", &1u64.to_le_bytes()).unwrap();
    db.flush().unwrap();
    db.delete(&wo, b"k").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&ro, b"k").unwrap(), None);
    db.merge(&wo, b"k", &2u64.to_le_bytes()).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(counter(db.get(&ro, b"k").unwrap()), Some(2));
    assert_eq!(counter(db.get(&ro, b"j").unwrap()), Some(1));
    let all = scan(&db, &ro, false);
    assert_eq!(all.get(b"k".as_slice()), Some(&2));
}

#[test]
fn snapshots_see_their_time_through_bucket_garbage_collection() {
    let fs = MemFs::new();
    let db = Db::open(Path::new("/db"), options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    run(&db, &mut model, 3000, 1);
    db.flush().unwrap();
    run(&db, &mut model, 1000, 2);
    let snap = db.snapshot();
    let then = model.clone();
    for round in 0..5 {
        run(&db, &mut model, 3000, 10 + round);
        db.flush().unwrap();
    }
    assert!(db.stats().delta_buckets_collected > 0);
    let mut at = ReadOptions::new();
    at.snapshot = Some(&snap);
    check(&db, &at, &then, "snapshot");
    check(&db, &ReadOptions::new(), &model, "now");
}

#[test]
fn flushed_deltas_survive_a_power_cut() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..4 {
        run(&db, &mut model, 2000, round);
        db.flush().unwrap();
    }
    let crashed = fs.crash_clone();
    drop(db);
    let db = Db::open(dir, options(&crashed)).unwrap();
    check(&db, &ReadOptions::new(), &model, "after the power cut");
    assert!(db.verify().is_ok());
}

/// Unflushed merges come back from the WAL and go to the store when the
/// replayed memtable is written.
#[test]
fn replayed_merges_reach_the_store() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let db = Db::open(dir, options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    run(&db, &mut model, 2000, 5);
    db.flush().unwrap();
    run(&db, &mut model, 500, 6);
    let wo = WriteOptions {
        sync: true,
        ..WriteOptions::default()
    };
    db.merge(&wo, &key(0), &1u64.to_le_bytes()).unwrap();
    *model.entry(key(0)).or_insert(0) += 1;
    let crashed = fs.process_crash_clone();
    drop(db);
    let db = Db::open(dir, options(&crashed)).unwrap();
    check(&db, &ReadOptions::new(), &model, "replayed");
    assert!(db.stats().delta_bytes_written > 0);
}

/// A damaged chunk does not keep the database from opening: reads of keys
/// in its bucket fail with `Corruption` naming the delta file, the rest
/// read on, and `verify` reports it.
#[test]
fn a_damaged_chunk_fails_the_reads_of_its_bucket_naming_the_file() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    // One flush: one delta file, its first chunk the first bucket's.
    let opts = || Options {
        write_buffer_size: 4 << 20,
        ..options(&fs)
    };
    let db = Db::open(dir, opts()).unwrap();
    let mut model = BTreeMap::new();
    run(&db, &mut model, 3000, 0);
    db.flush().unwrap();
    db.close().unwrap();
    let name = cleave::vfs::Fs::list(&fs, dir)
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".kd"))
        .unwrap();
    let path = dir.join(&name);
    // A byte inside the first chunk's records: its bucket holds the
    // smallest keys.
    assert!(fs.corrupt_byte(&path, 40));
    let db = Db::open(dir, opts()).unwrap();
    let ro = ReadOptions::new();
    let first = model.keys().next().unwrap().clone();
    let err = db.get(&ro, &first).unwrap_err();
    assert!(err.is_corruption(), "{err:?}");
    assert!(err.to_string().contains(&name), "{err}");
    let last = model.keys().next_back().unwrap().clone();
    assert_eq!(
        counter(db.get(&ro, &last).unwrap()),
        model.get(&last).copied()
    );
    let report = db.verify();
    assert!(!report.is_ok());
    assert!(report.to_string().contains(&name), "{report}");
}

/// With no room for another bucket, a full bucket's deltas go back to the
/// LSM-tree with the flush (folded), where compaction merges them onto
/// their values; reads agree throughout, and after a reopen.
#[test]
fn a_full_store_folds_deltas_back_into_the_tree() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let opts = || Options {
        delta_max_buckets: 4,
        ..options(&fs)
    };
    let db = Db::open(dir, opts()).unwrap();
    let mut model = BTreeMap::new();
    let ro = ReadOptions::new();
    for round in 0..8 {
        run(&db, &mut model, 3000, round * 2);
        db.flush().unwrap();
        check(&db, &ro, &model, &format!("round {round}"));
    }
    let stats = db.stats();
    assert!(stats.delta_buckets_folded > 0, "{}", stats.to_text());
    db.compact_range(None, None).unwrap();
    check(&db, &ro, &model, "compacted");
    assert!(db.stats().merges_full > 0, "{}", db.stats().to_text());
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    db.close().unwrap();
    let db = Db::open(dir, opts()).unwrap();
    check(&db, &ro, &model, "reopened");
}
