//! The read path's promises, counted through the file system: a get of a
//! separated value reads once when the sstable and record index blocks it
//! needs are cached, also after GC moved its file; `multi_get` answers as
//! gets do, from one view, with its value reads in one batch, and a read
//! that fails fails only its own key.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::{Db, Error, Options, ReadOptions, Stats, WriteOptions};

mod separated;
use separated::{k, record_len, v};

const DIR: &str = "/db";
const KEYS: usize = 2000;

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        create_if_missing: true,
        fs,
        write_buffer_size: 1 << 20,
        min_value_size: 512,
        // Every get of a separated value reaches its file.
        cache_values: false,
        block_cache_capacity: 32 << 20,
        enable_gc: false,
        ..Options::default()
    }
}

fn fill(
    db: &Db,
    keys: impl Iterator<Item = usize>,
    round: usize,
    model: &mut BTreeMap<usize, usize>,
) {
    for i in keys {
        db.put(&WriteOptions::default(), &k(i), &v(i, round))
            .unwrap();
        model.insert(i, round);
    }
}

fn kind(s: &Stats, name: &str) -> cleave::CacheKindStats {
    let found = s.block_cache_kinds.iter().find(|k| k.kind == name);
    found
        .cloned()
        .unwrap_or_else(|| panic!("no cache kind {name}"))
}

/// A database whose live values all sit in GC outputs: two rounds of
/// writes, the second overwriting most keys, compacted, then every file
/// with garbage collected.
fn moved_database(fs: Arc<dyn Fs>, prepopulate: bool) -> (Db, BTreeMap<usize, usize>) {
    let opts = Options {
        prepopulate_block_cache: prepopulate,
        ..options(fs)
    };
    let db = Db::open(DIR, opts).unwrap();
    let mut model = BTreeMap::new();
    fill(&db, 0..KEYS, 0, &mut model);
    db.flush().unwrap();
    fill(&db, (0..KEYS).filter(|i| i % 3 != 0), 1, &mut model);
    db.flush().unwrap();
    for i in (0..KEYS).filter(|i| i % 3 == 1) {
        db.delete(&WriteOptions::default(), &k(i)).unwrap();
        model.remove(&i);
    }
    db.compact_range(None, None).unwrap();
    let gc = db.gc_with_ratio(0.01).unwrap();
    assert!(gc.files_in > 0 && gc.files_out > 0, "{gc:?}");
    (db, model)
}

fn get(db: &Db, i: usize) -> Option<Vec<u8>> {
    db.get(&ReadOptions::new(), &k(i)).unwrap()
}

#[test]
fn a_get_of_a_moved_value_reads_once_once_its_blocks_are_cached() {
    let (db, model) = moved_database(Arc::new(MemFs::new()), true);
    let separated: Vec<usize> = model.keys().copied().filter(|i| i % 2 == 0).collect();
    // GC warmed the record index blocks of its outputs: lookups through
    // them never missed.
    let before = kind(&db.stats(), "record-index");
    for &i in &separated {
        assert_eq!(get(&db, i), Some(v(i, model[&i])));
    }
    let after = kind(&db.stats(), "record-index");
    assert_eq!(after.misses, before.misses);
    assert_eq!(after.hits - before.hits, separated.len() as u64);
    // With the sstables' blocks cached by that pass, each get reads its
    // value and nothing else.
    let before = db.stats();
    for &i in &separated {
        assert_eq!(get(&db, i), Some(v(i, model[&i])));
    }
    let after = db.stats();
    let n = separated.len() as u64;
    assert_eq!(after.gets - before.gets, n);
    assert_eq!(after.get_disk_reads - before.get_disk_reads, n);
    assert_eq!(
        after.gets_by_disk_reads[1] - before.gets_by_disk_reads[1],
        n
    );
    // That one read is the record, nothing more.
    let records: u64 = separated
        .iter()
        .map(|&i| record_len(&k(i), &v(i, model[&i])))
        .sum();
    assert_eq!(after.disk_read_bytes - before.disk_read_bytes, records);
    // Inline values read nothing at all.
    let before = db.stats();
    for i in model.keys().copied().filter(|i| i % 2 == 1) {
        assert_eq!(get(&db, i), Some(v(i, model[&i])));
    }
    let after = db.stats();
    assert_eq!(after.get_disk_reads, before.get_disk_reads);
    // The record indexes searched take a few bytes per record.
    let size = db.property("cleave.record-index-size").unwrap();
    let per_record: f64 = size
        .rsplit(": ")
        .next()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(per_record > 1.0 && per_record < 4.0, "{size}");
}

/// Without warming, the first get of a moved value also reads its record
/// index block (and the sstable blocks); the cache then takes over.
#[test]
fn without_prepopulation_a_moved_value_first_reads_its_index() {
    let (db, model) = moved_database(Arc::new(MemFs::new()), false);
    let i = *model.keys().find(|i| *i % 2 == 0).unwrap();
    let before = db.stats();
    assert_eq!(get(&db, i), Some(v(i, model[&i])));
    let after = db.stats();
    assert!(after.get_disk_reads - before.get_disk_reads >= 2);
    let misses = |s: &Stats| kind(s, "record-index").misses;
    assert_eq!(misses(&after) - misses(&before), 1);
    let before = db.stats();
    assert_eq!(get(&db, i), Some(v(i, model[&i])));
    assert_eq!(db.stats().get_disk_reads - before.get_disk_reads, 1);
}

#[test]
fn multi_get_answers_as_gets_do_from_one_view() {
    let (db, mut model) = moved_database(Arc::new(MemFs::new()), true);
    for i in (0..KEYS).step_by(7) {
        db.delete(&WriteOptions::default(), &k(i)).unwrap();
        model.remove(&i);
    }
    // Some values in the memtable, some in sstables, some deleted, some
    // never written, one asked twice, in no particular order.
    fill(&db, (0..KEYS).step_by(11), 2, &mut model);
    let snap = db.snapshot();
    let mut asked: Vec<usize> = (0..KEYS + 50).rev().step_by(3).collect();
    asked.push(asked[4]);
    let keys: Vec<Vec<u8>> = asked.iter().map(|&i| k(i)).collect();
    // Writes after the snapshot are not seen through it.
    fill(&db, (0..KEYS).step_by(5), 3, &mut model.clone());
    let mut ro = ReadOptions::new();
    ro.snapshot = Some(&snap);
    let got = db.multi_get(&ro, &keys);
    assert_eq!(got.len(), asked.len());
    for (&i, r) in asked.iter().zip(got) {
        let want = model.get(&i).map(|&round| v(i, round));
        assert_eq!(r.unwrap(), want, "key {i}");
        assert_eq!(db.get(&ro, &k(i)).unwrap(), model.get(&i).map(|&r| v(i, r)));
    }
    let s = db.stats();
    assert_eq!(s.multi_gets, 1);
    assert_eq!(s.multi_get_keys, asked.len() as u64);
    assert!(db.multi_get::<&[u8]>(&ro, &[]).is_empty());
}

/// With the sstables' blocks cached, a multi_get of separated values
/// reads each value once, in one batch.
#[test]
fn multi_get_reads_each_value_once() {
    let (db, model) = moved_database(Arc::new(MemFs::new()), true);
    let separated: Vec<usize> = model.keys().copied().filter(|i| i % 2 == 0).collect();
    for &i in &separated {
        get(&db, i);
    }
    let keys: Vec<Vec<u8>> = separated.iter().map(|&i| k(i)).collect();
    let before = db.stats();
    let got = db.multi_get(&ReadOptions::new(), &keys);
    for (&i, r) in separated.iter().zip(got) {
        assert_eq!(r.unwrap(), Some(v(i, model[&i])));
    }
    let after = db.stats();
    assert_eq!(
        after.multi_get_disk_reads - before.multi_get_disk_reads,
        separated.len() as u64
    );
}

/// A read fault in one value file fails the keys whose values live there
/// and no others.
#[test]
fn a_failed_value_read_fails_only_its_keys() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let fs: Arc<dyn Fs> = Arc::new(fault.clone());
    let db = Db::open(DIR, options(fs.clone())).unwrap();
    let mut model = BTreeMap::new();
    // Two flushes: two value files.
    fill(&db, 0..KEYS / 2, 0, &mut model);
    db.flush().unwrap();
    fill(&db, KEYS / 2..KEYS, 0, &mut model);
    db.flush().unwrap();
    let mut files: Vec<String> = fs
        .list(std::path::Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".vf"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    let keys: Vec<Vec<u8>> = (0..KEYS).map(k).collect();
    // Load the sstables' blocks, so that only value reads remain.
    for r in db.multi_get(&ReadOptions::new(), &keys) {
        r.unwrap();
    }
    fault.fail(&[FaultOp::Read], Some(&files[1]), 0, ErrorKind::Other, true);
    let got = db.multi_get(&ReadOptions::new(), &keys);
    fault.heal();
    let mut failed = 0;
    for (i, r) in got.into_iter().enumerate() {
        match r {
            Ok(value) => assert_eq!(value, Some(v(i, 0)), "key {i}"),
            Err(Error::Io { path: ref file, .. }) => {
                assert!(i % 2 == 0 && i >= KEYS / 2, "key {i} failed: {file:?}");
                assert!(file.to_string_lossy().ends_with(&files[1]));
                failed += 1;
            }
            Err(e) => panic!("key {i}: {e}"),
        }
    }
    assert_eq!(failed, KEYS / 4);
    // Healed, every key reads again.
    for (i, r) in db
        .multi_get(&ReadOptions::new(), &keys)
        .into_iter()
        .enumerate()
    {
        assert_eq!(r.unwrap(), Some(v(i, 0)));
    }
}

/// `contains` answers as `get` does, at the latest state and under a
/// snapshot, without reading a single separated value.
#[test]
fn contains_answers_as_get_without_reading_values() {
    let mem = MemFs::new();
    let db = Db::open(
        DIR,
        Options {
            merge_operator: Some(Arc::new(cleave::Append::new(b","))),
            ..options(Arc::new(mem.clone()))
        },
    )
    .unwrap();
    let mut model = BTreeMap::new();
    fill(&db, 0..KEYS, 0, &mut model);
    let wo = WriteOptions::default();
    for i in (0..KEYS).step_by(3) {
        db.delete(&wo, &k(i)).unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    for i in (1..KEYS).step_by(3) {
        db.delete(&wo, &k(i)).unwrap();
    }
    db.merge(&wo, b"operands only", b"x").unwrap();
    let ro = ReadOptions::new();
    let mut at_snapshot = ReadOptions::new();
    at_snapshot.snapshot = Some(&snap);
    let before = db.stats().value_reads;
    for i in 0..KEYS + 10 {
        let expect = i < KEYS && i % 3 == 2;
        assert_eq!(db.contains(&ro, &k(i)).unwrap(), expect, "key {i}");
        let then = i < KEYS && i % 3 != 0;
        assert_eq!(
            db.contains(&at_snapshot, &k(i)).unwrap(),
            then,
            "key {i} at the snapshot"
        );
    }
    assert!(db.contains(&ro, b"operands only").unwrap());
    assert_eq!(db.stats().value_reads, before, "contains read a value");
    // The gets it stands for do read them.
    assert_eq!(db.get(&ro, &k(2)).unwrap(), Some(v(2, 0)));
    assert!(db.stats().value_reads > before);
}

/// Flushes and compactions leave their value files' record indexes out
/// of the cache: a handle finds its record in the file it was written to
/// without one, and warmed they took room the sstables' blocks then
/// missed. GC's outputs, which reads reach through their indexes, are
/// warmed (the test above).
#[test]
fn record_indexes_of_files_records_were_written_to_stay_out_of_the_cache() {
    let db = Db::open(DIR, options(Arc::new(MemFs::new()))).unwrap();
    let mut model = BTreeMap::new();
    fill(&db, 0..KEYS, 0, &mut model);
    db.flush().unwrap();
    fill(&db, 0..KEYS / 2, 1, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(db.stats().value_files_written >= 2);
    assert_eq!(kind(&db.stats(), "record-index").usage, 0);
    let before = db.stats();
    for (&i, &round) in &model {
        assert_eq!(get(&db, i), Some(v(i, round)));
    }
    let after = db.stats();
    let record_index = kind(&after, "record-index");
    assert_eq!(
        (record_index.hits, record_index.misses, record_index.usage),
        (0, 0, 0)
    );
    assert!(after.value_reads > before.value_reads);
}
