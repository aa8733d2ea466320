//! A key range whose values are scattered over many logical value files
//! (many small flushes of interleaved keys), for the tests of what gathers
//! them again: correlated compaction and range merges.

use std::sync::Arc;

use cleave::vfs::MemFs;
use cleave::{Db, Options, ReadOptions, WriteOptions};

/// Every value of [`v`] is at least this long plus 100 bytes: separated.
pub const MIN_VALUE_SIZE: usize = 512;

pub fn k(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Every value separated; the bytes name the round that wrote them.
pub fn v(i: usize, round: usize) -> Vec<u8> {
    let mut out = format!("r{round}-i{i}-").into_bytes();
    out.resize(MIN_VALUE_SIZE + 100 + i % 300, b'a' + (i % 26) as u8);
    out
}

/// Options for scattering a range: no compaction until the test asks (the
/// flushes pile up in L0), small sstables, every value separated and read
/// from a file (so reads can be counted), no GC.
pub fn options(fs: &MemFs) -> Options {
    Options {
        create_if_missing: true,
        fs: Arc::new(fs.clone()),
        write_buffer_size: 4 << 20,
        level0_file_num_compaction_trigger: 1000,
        level0_slowdown_writes_trigger: 1000,
        level0_stop_writes_trigger: 1000,
        target_file_size_base: 256 << 10,
        min_value_size: MIN_VALUE_SIZE,
        cache_values: false,
        enable_gc: false,
        ..Options::default()
    }
}

/// Writes keys `0..keys` in `rounds` flushes, each writing every
/// `rounds`-th key: one logical value file per flush, each spread over the
/// whole key range.
pub fn scatter(db: &Db, rounds: usize, keys: usize) {
    for round in 0..rounds {
        for i in (round..keys).step_by(rounds) {
            db.put(&WriteOptions::default(), &k(i), &v(i, 0)).unwrap();
        }
        db.flush().unwrap();
    }
}

/// The most logical value files one live sstable references.
pub fn max_refs(db: &Db) -> usize {
    db.property("cleave.max-value-file-refs")
        .unwrap()
        .parse()
        .unwrap()
}

/// Checks keys `0..keys` by gets (every seventh) and by a full scan, and
/// runs `verify`; returns the value reads the scan took.
pub fn check(db: &Db, keys: usize, round_of: impl Fn(usize) -> usize, ctx: &str) -> u64 {
    for i in (0..keys).step_by(7) {
        let got = db.get(&ReadOptions::new(), &k(i)).unwrap();
        assert_eq!(got, Some(v(i, round_of(i))), "{ctx}: key {i}");
    }
    let before = db.stats().value_reads;
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    let mut i = 0;
    while it.valid() {
        assert_eq!(it.key(), k(i).as_slice(), "{ctx}: scan");
        assert_eq!(it.value().unwrap(), v(i, round_of(i)), "{ctx}: scan {i}");
        i += 1;
        it.next().unwrap();
    }
    it.status().unwrap();
    assert_eq!(i, keys, "{ctx}: scan length");
    let reads = db.stats().value_reads - before;
    let report = db.verify();
    assert!(report.is_ok(), "{ctx}: {report}");
    reads
}
