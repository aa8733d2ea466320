//! A key range whose values are scattered over many logical value files
//! (many small flushes of interleaved keys), for the tests of what gathers
//! them again: correlated compaction and range merges.

use cleave::{Db, ReadOptions};

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
