//! Key-value separation end to end: values at or above `min_value_size` go
//! to value files at flush and come back through handles; compaction
//! carries handles without rewriting values; the Version's exact garbage
//! deletes value files no table references; the space report agrees with
//! the directory; reads are lazy and scans read ahead; damaged or missing
//! value files give typed errors naming the file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs, OsFs};
use cleave::{Db, Error, Options, ReadOptions, WriteOptions};

mod separated;
use separated::{k, record_len, v};

const DIR: &str = "/db";
const MIN: usize = 512;

fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        create_if_missing: true,
        fs,
        write_buffer_size: 256 << 10,
        target_file_size_base: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        level0_file_num_compaction_trigger: 4,
        min_value_size: MIN,
        cache_values: false,
        // Garbage is counted here, and collected in tests/gc.rs.
        enable_gc: false,
        ..Options::default()
    }
}

fn names(fs: &dyn Fs, ext: &str) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(ext))
        .collect();
    v.sort();
    v
}

fn fill(db: &Db, range: std::ops::Range<usize>, round: usize) {
    for i in range {
        db.put(&WriteOptions::default(), &k(i), &v(i, round))
            .unwrap();
    }
}

fn get(db: &Db, i: usize) -> Option<Vec<u8>> {
    db.get(&ReadOptions::new(), &k(i)).unwrap()
}

#[test]
fn large_values_are_separated_and_read_back() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    fill(&db, 0..400, 0);
    db.flush().unwrap();
    let s = db.stats();
    assert!(s.value_files_written >= 1);
    assert_eq!(names(&fs, ".vf").len() as u64, s.value_files_written);
    // The sstable holds handles, not the large values.
    let r = db.space_report().unwrap();
    let separated: u64 = (0..400)
        .filter(|i| i & 1 == 0)
        .map(|i| record_len(&k(i), &v(i, 0)))
        .sum();
    assert_eq!(r.referenced_value_bytes, separated);
    assert_eq!(r.exposed_garbage_bytes, 0);
    assert!(r.sstable_bytes < separated / 4, "{r:?}");
    for i in 0..400 {
        assert_eq!(get(&db, i), Some(v(i, 0)), "key {i}");
    }
    // Iterators in both directions.
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_last().unwrap();
    let mut i = 400;
    while it.valid() {
        i -= 1;
        assert_eq!((it.key(), it.value().unwrap()), (&k(i)[..], &v(i, 0)[..]));
        it.prev().unwrap();
    }
    assert_eq!(i, 0);
    drop(it);
    db.verify_checksums().unwrap();
    db.close().unwrap();
    // And after a reopen.
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    for i in 0..400 {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
}

#[test]
fn disabled_separation_writes_no_value_files() {
    let fs = MemFs::new();
    let opts = Options {
        enable_value_separation: false,
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    fill(&db, 0..200, 0);
    db.flush().unwrap();
    assert!(names(&fs, ".vf").is_empty());
    assert_eq!(db.space_report().unwrap().value_files, 0);
    for i in 0..200 {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
    // Inline values stay readable when separation is turned on later.
    db.close().unwrap();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    fill(&db, 200..300, 0);
    db.compact_range(None, None).unwrap();
    for i in 0..300 {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
}

/// Compaction copies handles: no value is rewritten, value files keep
/// their numbers, and the references a table keeps are exact.
#[test]
fn compaction_carries_handles_without_rewriting_values() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    for part in 0..4 {
        fill(&db, part * 300..(part + 1) * 300, 0);
        db.flush().unwrap();
    }
    let before = names(&fs, ".vf");
    assert_eq!(before.len(), 4);
    let written = db.stats().value_file_bytes_written;
    db.compact_range(None, None).unwrap();
    let s = db.stats();
    assert!(s.compactions > 0);
    assert_eq!(s.value_file_bytes_written, written);
    assert_eq!(names(&fs, ".vf"), before);
    // Compaction wrote sstables only: a fraction of the value bytes.
    assert!(s.compaction_bytes_written * 4 < written, "{s:?}");
    let r = db.space_report().unwrap();
    assert_eq!(r.exposed_garbage_bytes, 0);
    assert_eq!(r.levels[0].sstable_bytes, 0);
    for i in 0..1200 {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
    db.verify_checksums().unwrap();
}

/// Overwrites expose garbage exactly when compaction drops the shadowed
/// entries; a value file none of whose records is referenced is deleted,
/// but only after the last reader of a Version naming it is gone.
#[test]
fn exact_garbage_and_deletion_of_unreferenced_value_files() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    fill(&db, 0..300, 0);
    db.flush().unwrap();
    let first = names(&fs, ".vf");
    assert_eq!(first.len(), 1);
    // Overwrite half of the separated keys, then compact everything.
    fill(&db, 0..150, 1);
    db.compact_range(None, None).unwrap();
    let r = db.space_report().unwrap();
    let garbage: u64 = (0..150)
        .filter(|i| i & 1 == 0)
        .map(|i| record_len(&k(i), &v(i, 0)))
        .sum();
    assert_eq!(r.exposed_garbage_bytes, garbage, "{r:?}");
    assert_eq!(r.value_files, 2);

    // Overwrite the rest while an iterator holds the current Version.
    let mut reader = db.iter(&ReadOptions::new());
    fill(&db, 150..300, 1);
    db.compact_range(None, None).unwrap();
    let r = db.space_report().unwrap();
    assert_eq!(r.value_files, 2, "{r:?}");
    assert_eq!(r.exposed_garbage_bytes, 0, "the dead file left the Version");
    assert!(
        names(&fs, ".vf").contains(&first[0]),
        "a reader still holds it"
    );
    assert!(r.other_bytes > 0, "the held file counts as other bytes");
    reader.seek(&k(200)).unwrap();
    assert_eq!(
        reader.value().unwrap(),
        v(200, 0),
        "the reader sees its view"
    );
    // The reader's release deletes the file: its space comes back now.
    drop(reader);
    assert!(!names(&fs, ".vf").contains(&first[0]));
    let r = db.space_report().unwrap();
    assert_eq!(
        r.other_bytes,
        r.on_disk_bytes - r.sstable_bytes - r.value_file_bytes - r.wal_bytes - r.manifest_bytes
    );
    assert!(r.other_bytes < 64, "{r:?}");
    db.close().unwrap();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    for i in 1..300 {
        assert_eq!(get(&db, i), Some(v(i, 1)));
    }
}

/// Snapshots keep old entries, and with them the records they reference.
#[test]
fn snapshots_keep_referenced_values_alive() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    fill(&db, 0..100, 0);
    let snap = db.snapshot();
    fill(&db, 0..100, 1);
    db.compact_range(None, None).unwrap();
    let r = db.space_report().unwrap();
    assert_eq!(
        r.exposed_garbage_bytes, 0,
        "the snapshot needs every record"
    );
    let mut ro = ReadOptions::new();
    ro.snapshot = Some(&snap);
    for i in 0..100 {
        assert_eq!(db.get(&ro, &k(i)).unwrap(), Some(v(i, 0)));
    }
    let both: u64 = (0..100)
        .filter(|i| i & 1 == 0)
        .map(|i| record_len(&k(i), &v(i, 0)) + record_len(&k(i), &v(i, 1)))
        .sum();
    assert_eq!(r.referenced_value_bytes, both, "{r:?}");
}

/// On a real directory: the report's on-disk total equals the sizes of the
/// files in it, and every byte is accounted for once the DB is idle.
#[test]
fn space_report_agrees_with_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = Options {
        fs: Arc::new(OsFs::new()),
        ..options(Arc::new(OsFs::new()))
    };
    let db = Db::open(&dir, opts).unwrap();
    for round in 0..3 {
        fill(&db, 0..600, round);
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let r = db.space_report().unwrap();
    let on_disk: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(r.on_disk_bytes, on_disk);
    let sst: u64 = ext_bytes(&dir, "sst");
    let vf: u64 = ext_bytes(&dir, "vf");
    assert_eq!(r.sstable_bytes, sst);
    assert_eq!(r.value_file_bytes, vf);
    assert_eq!(ext_bytes(&dir, "wal"), r.wal_bytes);
    // Only CURRENT and LOCK are left over: no leaked file.
    let current = std::fs::metadata(dir.join("CURRENT")).unwrap().len();
    let lock = std::fs::metadata(dir.join("LOCK")).unwrap().len();
    assert_eq!(r.other_bytes, current + lock, "{r:?}");
    assert!(r.value_file_bytes >= r.referenced_value_bytes + r.exposed_garbage_bytes);
    assert!(r.s_index >= 1.0, "{r:?}");
    let levels: u64 = r.levels.iter().map(|l| l.sstable_bytes).sum();
    assert_eq!(levels, r.sstable_bytes);
}

fn ext_bytes(dir: &PathBuf, ext: &str) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == ext))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Only `value()` reads a separated value; a key-only scan reads none, and
/// a scan over adjacent records reads them in a few large reads.
#[test]
fn values_are_lazy_and_scans_read_ahead() {
    let fault = FaultFs::new(Arc::new(MemFs::new()));
    let opts = Options {
        write_buffer_size: 4 << 20,
        block_cache_capacity: 8 << 20,
        ..options(Arc::new(fault.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    // Sequential keys, all large: one flush writes adjacent records.
    for i in 0..400 {
        let mut val = format!("{i}-").into_bytes();
        val.resize(1024, b'x');
        db.put(&WriteOptions::default(), &k(i), &val).unwrap();
    }
    db.flush().unwrap();
    // Warm the table's blocks so only value reads remain.
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    while it.valid() {
        it.next().unwrap();
    }
    let before = (db.stats().value_reads, fault.count(FaultOp::Read));
    let mut it = db.iter(&ReadOptions::new());
    it.seek(&k(100)).unwrap();
    let mut keys = 0;
    while it.valid() && keys < 100 {
        keys += 1;
        it.next().unwrap();
    }
    assert_eq!(keys, 100);
    assert_eq!(db.stats().value_reads, before.0, "keys alone read no value");

    let mut it = db.iter(&ReadOptions::new());
    it.seek(&k(100)).unwrap();
    for i in 100..200 {
        assert!(it.valid());
        assert!(it.value().unwrap().starts_with(format!("{i}-").as_bytes()));
        it.next().unwrap();
    }
    let value_reads = db.stats().value_reads - before.0;
    let fs_reads = fault.count(FaultOp::Read) - before.1;
    // 100 KiB of values: the first read, then windows of 32, 64, 128 KiB.
    assert!(value_reads <= 5, "{value_reads} value reads for 100 values");
    assert!(fs_reads <= 8, "{fs_reads} reads from the file system");

    // A point lookup reads exactly one record.
    let before = db.stats().value_read_bytes;
    assert!(get(&db, 300).is_some());
    let read = db.stats().value_read_bytes - before;
    assert!(read < 1200, "{read} bytes for one 1 KiB value");
}

/// A scan whose values are spread over many flushes' value files gets them
/// through prefetch (batches of the next entries' records, submitted
/// together): every value right, in fewer reads than values; a damaged
/// record in a prefetched span is still reported, for its key only.
#[test]
fn scans_prefetch_values_spread_over_many_value_files() {
    let fs = MemFs::new();
    let opts = Options {
        write_buffer_size: 4 << 20,
        block_cache_capacity: 8 << 20,
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts.clone()).unwrap();
    let value = |i: usize| {
        let mut val = format!("{i}-").into_bytes();
        val.resize(2000, b'p');
        val
    };
    // File f holds keys f, f + 20, f + 40, ...: neighbouring keys live in
    // different files, as after random writes.
    for f in 0..20 {
        for i in (f..1000).step_by(20) {
            db.put(&WriteOptions::default(), &k(i), &value(i)).unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let check = |db: &Db| {
        let before = db.stats().value_reads;
        let mut it = db.iter(&ReadOptions::new());
        it.seek(&k(100)).unwrap();
        for i in 100..600 {
            assert_eq!((it.key(), it.value().unwrap()), (&k(i)[..], &value(i)[..]));
            it.next().unwrap();
        }
        db.stats().value_reads - before
    };
    let reads = check(&db);
    assert!(reads < 250, "{reads} reads for 500 values");
    db.close().unwrap();

    // Damage the record of key 300 (in file 0: 300 = 0 + 15 × 20).
    let names = names(&fs, ".vf");
    let path = Path::new(DIR).join(&names[0]);
    let mut data = read(&fs, &path);
    let needle = b"300-";
    let at = data.windows(4).position(|w| w == needle).unwrap();
    data[at + 100] ^= 1;
    write(&fs, &path, &data);
    let db = Db::open(DIR, opts).unwrap();
    let mut it = db.iter(&ReadOptions::new());
    it.seek(&k(250)).unwrap();
    for i in 250..300 {
        assert_eq!(it.value().unwrap(), &value(i)[..]);
        it.next().unwrap();
    }
    assert_eq!(it.key(), &k(300)[..]);
    let err = it.value().unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains(".vf"),
        "{err}"
    );
}

/// A scan that reads few of its values stops prefetching: reads stay in
/// proportion to the values asked for, not to the keys passed.
#[test]
fn a_scan_reading_few_values_stops_prefetching() {
    let fs = MemFs::new();
    let opts = Options {
        write_buffer_size: 4 << 20,
        block_cache_capacity: 8 << 20,
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    for f in 0..20 {
        for i in (f..2000).step_by(20) {
            db.put(&WriteOptions::default(), &k(i), &v(i, 0)).unwrap();
        }
        db.flush().unwrap();
    }
    let before = db.stats().value_reads;
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    let mut asked = 0;
    for i in 0..2000 {
        if i % 50 == 10 {
            assert_eq!(it.value().unwrap(), &v(i, 0)[..]);
            asked += 1;
        }
        it.next().unwrap();
    }
    let reads = db.stats().value_reads - before;
    assert!(reads <= 3 * asked, "{reads} reads for {asked} values");
}

fn kind(s: &cleave::Stats, name: &str) -> cleave::CacheKindStats {
    let found = s.block_cache_kinds.iter().find(|k| k.kind == name);
    found
        .cloned()
        .unwrap_or_else(|| panic!("no cache kind {name}: {s:?}"))
}

/// Values share the block cache's one budget: repeated gets are served
/// from it and counted under their kind, and a flood of values larger than
/// the cache keeps within the budget and cannot push out the index and
/// filter blocks, which later gets need.
#[test]
fn values_share_the_block_cache_budget() {
    let fs = MemFs::new();
    let capacity = 1 << 20;
    let opts = Options {
        cache_values: true,
        block_cache_capacity: capacity,
        ..options(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, opts).unwrap();
    fill(&db, 0..8000, 0);
    // One settled tree, so that no compaction brings new index blocks.
    db.compact_range(None, None).unwrap();
    assert_eq!(get(&db, 10), Some(v(10, 0)));
    let reads = db.stats().value_reads;
    for _ in 0..5 {
        assert_eq!(get(&db, 10), Some(v(10, 0)));
    }
    let s = db.stats();
    assert_eq!(s.value_reads, reads, "repeated gets read the file");
    assert!(
        kind(&s, "value").hits >= 5 && kind(&s, "value").usage > 0,
        "{s:?}"
    );

    // Gets of the small, inline values load every index and filter block.
    for i in (1..8000).step_by(2) {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
    let s = db.stats();
    let pinned = kind(&s, "index").usage + kind(&s, "filter").usage;
    let misses = kind(&s, "index").misses + kind(&s, "filter").misses;
    assert!(pinned > 0, "{s:?}");

    let separated: usize = (0..8000).step_by(2).map(|i| v(i, 0).len()).sum();
    assert!(separated > 2 * capacity, "the flood must exceed the cache");
    for i in (0..8000).step_by(2) {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
    let s = db.stats();
    assert!(s.block_cache_usage <= capacity as u64, "{s:?}");
    assert!(kind(&s, "value").usage > capacity as u64 / 4, "{s:?}");
    let total: u64 = s.block_cache_kinds.iter().map(|k| k.usage).sum();
    assert_eq!(total, s.block_cache_usage);
    // The high-priority pool kept every index and filter block: the flood
    // missed none, and the small values are found again without one.
    assert_eq!(kind(&s, "index").usage + kind(&s, "filter").usage, pinned);
    for i in (1..8000).step_by(2) {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
    let s = db.stats();
    assert_eq!(kind(&s, "index").misses + kind(&s, "filter").misses, misses);
}

fn value_file_path(fs: &dyn Fs) -> PathBuf {
    let names = names(fs, ".vf");
    assert_eq!(names.len(), 1, "{names:?}");
    Path::new(DIR).join(&names[0])
}

#[test]
fn damaged_value_record_is_corruption_naming_the_file() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    fill(&db, 0..50, 0);
    db.flush().unwrap();
    db.close().unwrap();
    let path = value_file_path(&fs);
    // Flip one byte in the first record (key 0's value).
    let mut data = read(&fs, &path);
    data[30] ^= 0x40;
    write(&fs, &path, &data);
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let err = db.get(&ReadOptions::new(), &k(0)).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains(".vf"), "{err}");
    assert_eq!(get(&db, 2), Some(v(2, 0)), "other records are intact");
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    assert!(it.value().unwrap_err().is_corruption());
    assert!(it.status().is_err() && !it.valid());
    assert!(db.verify_checksums().unwrap_err().is_corruption());
}

#[test]
fn missing_value_file_fails_open_and_torn_footer_fails_paranoid_open() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    fill(&db, 0..50, 0);
    db.flush().unwrap();
    db.close().unwrap();
    let path = value_file_path(&fs);
    let data = read(&fs, &path);

    // A truncated file: open checks existence only, unless paranoid.
    write(&fs, &path, &data[..data.len() - 10]);
    let db = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap();
    let err = db.get(&ReadOptions::new(), &k(0)).unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains(".vf"),
        "{err}"
    );
    db.close().unwrap();
    let paranoid = Options {
        paranoid_checks: true,
        ..options(Arc::new(fs.clone()))
    };
    let err = Db::open(DIR, paranoid).unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains(".vf"),
        "{err}"
    );

    fs.remove(&path).unwrap();
    let err = Db::open(DIR, options(Arc::new(fs.clone()))).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(err.to_string().contains(".vf"), "{err}");
}

/// A value file's fsync failing fails the flush and poisons the database;
/// reopening recovers every acknowledged write from the WAL.
#[test]
fn failed_value_file_sync_poisons_and_reopen_recovers() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    fill(&db, 0..100, 0);
    fault.fail(
        &[FaultOp::Sync],
        Some(".vf"),
        0,
        std::io::ErrorKind::Other,
        true,
    );
    let err = db.flush().unwrap_err();
    assert!(err.to_string().contains(".vf"), "{err}");
    assert!(matches!(
        db.put(&WriteOptions::default(), b"x", b"y"),
        Err(Error::Poisoned(_))
    ));
    drop(db);
    fault.heal();
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    for i in 0..100 {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
    db.verify_checksums().unwrap();
}

/// A crash after a flush wrote its value file but before the manifest
/// named it leaves no trace: the file is an orphan, removed at open, and
/// the data comes back from the WAL.
#[test]
fn value_file_of_an_unlogged_flush_is_removed_after_a_crash() {
    let mem = MemFs::new();
    let fault = FaultFs::new(Arc::new(mem.clone()));
    let sync = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    let db = Db::open(DIR, options(Arc::new(fault.clone()))).unwrap();
    for i in 0..100 {
        db.put(&sync, &k(i), &v(i, 0)).unwrap();
    }
    // The manifest append of the flush's edit fails: the value file and
    // sstable are complete and synced, but nothing names them.
    fault.fail(
        &[FaultOp::Append],
        Some("MANIFEST"),
        0,
        std::io::ErrorKind::Other,
        true,
    );
    assert!(db.flush().is_err());
    let crashed = mem.crash_clone();
    drop(db);
    assert_eq!(names(&crashed, ".vf").len(), 1, "written before the edit");
    let db = Db::open(DIR, options(Arc::new(crashed.clone()))).unwrap();
    db.flush().unwrap();
    for i in 0..100 {
        assert_eq!(get(&db, i), Some(v(i, 0)));
    }
    let r = db.space_report().unwrap();
    assert_eq!(r.value_files, names(&crashed, ".vf").len(), "{r:?}");
    assert_eq!(r.exposed_garbage_bytes, 0, "the orphan is gone");
}

/// A crash while a flush's value file is not yet durable: whatever part of
/// it a file system kept is never referenced; open removes it and the WAL
/// brings the data back.
#[test]
fn torn_value_file_after_a_crash_is_never_referenced() {
    let mem = MemFs::new();
    let sync = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    let db = Db::open(DIR, options(Arc::new(mem.clone()))).unwrap();
    for i in 0..100 {
        db.put(&sync, &k(i), &v(i, 0)).unwrap();
    }
    // The state a crash just before the flush leaves ...
    let crashed = mem.crash_clone();
    db.flush().unwrap();
    let path = value_file_path(&mem);
    let written = read(&mem, &path);
    drop(db);
    // ... on a file system that kept the flush's value file entry and half
    // of its data.
    write(&crashed, &path, &written[..written.len() / 2]);
    let db = Db::open(DIR, options(Arc::new(crashed.clone()))).unwrap();
    assert!(!crashed.exists(&path).unwrap(), "the torn file is removed");
    for i in 0..100 {
        assert_eq!(get(&db, i), Some(v(i, 0)), "key {i}");
    }
    db.flush().unwrap();
    db.verify_checksums().unwrap();
}

fn read(fs: &dyn Fs, path: &Path) -> Vec<u8> {
    let f = fs.open(path, Default::default()).unwrap();
    f.read_at(0, f.len() as usize).unwrap()
}

fn write(fs: &dyn Fs, path: &Path, data: &[u8]) {
    let mut f = fs.create(path, Default::default()).unwrap();
    f.append(data).unwrap();
    f.sync().unwrap();
}
