//! Iterators read only the tables that can hold their range: files whose
//! key range misses the bounds are left out, and with a prefix extractor
//! so are files whose filter excludes the one prefix the bounds confine
//! the iterator to. Leaving them out never changes what an iterator
//! returns, in either direction, whatever extractor wrote the tables.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::io::ErrorKind;

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::{
    Db, DbIterator, FixedPrefix, Options, PrefixExtractor, ReadOptions, Stats, WriteOptions,
};

const DIR: &str = "/db";

fn options(fs: Arc<dyn Fs>, extractor: Option<Arc<dyn PrefixExtractor>>) -> Options {
    Options {
        create_if_missing: true,
        fs,
        write_buffer_size: 1 << 20,
        // Every flushed file stays in L0, where each is a sorted run.
        level0_file_num_compaction_trigger: 1000,
        level0_slowdown_writes_trigger: 1000,
        level0_stop_writes_trigger: 1000,
        range_merge_sorted_runs: 0,
        block_cache_capacity: 8 << 20,
        prefix_extractor: extractor,
        memtable_bloom_size_ratio: 0.1,
        ..Options::default()
    }
}

fn put(db: &Db, key: &[u8], value: &[u8]) {
    db.put(&WriteOptions::default(), key, value).unwrap();
}

fn bounded(db: &Db, lower: &[u8], upper: &[u8]) -> DbIterator {
    db.iter(&ReadOptions {
        lower_bound: Some(lower.to_vec()),
        upper_bound: Some(upper.to_vec()),
        ..ReadOptions::new()
    })
}

fn forward(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().unwrap().to_vec()));
        it.next().unwrap();
    }
    it.status().unwrap();
    out
}

fn backward(mut it: DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().unwrap().to_vec()));
        it.prev().unwrap();
    }
    it.status().unwrap();
    out.reverse();
    out
}

fn data_block_lookups(s: &Stats) -> u64 {
    let k = s
        .block_cache_kinds
        .iter()
        .find(|k| k.kind == "data")
        .unwrap();
    k.hits + k.misses
}

/// Eight L0 files, each spanning `a…` to `z…` and holding one prefix of
/// its own: a seek for one prefix would read a block of every file.
fn spanning_files(db: &Db) {
    for f in 0..8u8 {
        put(db, format!("a{f}").as_bytes(), b"low");
        for i in 0..10 {
            put(
                db,
                format!("p{f:03}{i}").as_bytes(),
                format!("v{f}.{i}").as_bytes(),
            );
        }
        put(db, format!("z{f}").as_bytes(), b"high");
        db.flush().unwrap();
    }
}

#[test]
fn a_prefix_iterator_reads_only_the_tables_holding_its_prefix() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open(DIR, options(fs, Some(Arc::new(FixedPrefix::new(4))))).unwrap();
    spanning_files(&db);
    assert_eq!(db.stats().levels[0].files, 8);

    let before = db.stats();
    let got = forward(bounded(&db, b"p003", b"p004"));
    let after = db.stats();
    let want: Vec<_> = (0..10)
        .map(|i| {
            (
                format!("p003{i}").into_bytes(),
                format!("v3.{i}").into_bytes(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        after.prefix_filter_checked - before.prefix_filter_checked,
        8
    );
    // Ten bits a key: a false positive among the seven is possible, two
    // are not for these keys.
    let useful = after.prefix_filter_useful - before.prefix_filter_useful;
    assert!(useful >= 6, "{useful} of 7 tables left out");
    let blocks = data_block_lookups(&after) - data_block_lookups(&before);
    assert!(blocks <= 2, "{blocks} data blocks looked up");

    // An upper bound inside the prefix confines it too; bounds that do
    // not confine it to one prefix consult no filter.
    assert_eq!(
        forward(bounded(&db, b"p0035", b"p0037")),
        want[5..7].to_vec()
    );
    assert_eq!(backward(bounded(&db, b"p003", b"p004")), want);
    let before = db.stats();
    let wide = forward(bounded(&db, b"p003", b"p005"));
    assert_eq!(wide.len(), 20);
    assert_eq!(
        db.stats().prefix_filter_checked,
        before.prefix_filter_checked
    );
}

#[test]
fn a_bounded_iterator_skips_files_outside_its_range() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open(DIR, options(fs, None)).unwrap();
    for f in 0..8u8 {
        for i in 0..50 {
            put(&db, format!("k{f}-{i:02}").as_bytes(), &[f; 100]);
        }
        db.flush().unwrap();
    }
    let before = db.stats();
    let got = forward(bounded(&db, b"k0-10", b"k0-20"));
    assert_eq!(got.len(), 10);
    let blocks = data_block_lookups(&db.stats()) - data_block_lookups(&before);
    // The seven files above the range would each give a block.
    assert!(blocks <= 2, "{blocks} data blocks looked up");
    assert_eq!(db.stats().prefix_filter_checked, 0);
}

#[test]
fn tables_of_another_extractor_are_read_whole() {
    let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
    let db = Db::open(
        DIR,
        options(fs.clone(), Some(Arc::new(FixedPrefix::new(4)))),
    )
    .unwrap();
    spanning_files(&db);
    db.close().unwrap();
    let want: Vec<_> = (0..10)
        .map(|i| {
            (
                format!("p005{i}").into_bytes(),
                format!("v5.{i}").into_bytes(),
            )
        })
        .collect();
    // A 3-byte prefix: the tables' filters hold 4-byte ones, which must
    // not be asked for "p00"; nor may no extractor at all change results.
    let extractors: [Option<Arc<dyn PrefixExtractor>>; 2] =
        [Some(Arc::new(FixedPrefix::new(3))), None];
    for extractor in extractors {
        let db = Db::open(DIR, options(fs.clone(), extractor)).unwrap();
        let got = forward(bounded(&db, b"p00", b"p01"));
        assert_eq!(got.len(), 80);
        assert_eq!(forward(bounded(&db, b"p005", b"p006")), want);
        assert_eq!(db.stats().prefix_filter_useful, 0);
        db.close().unwrap();
    }
}

#[test]
fn a_table_whose_filter_cannot_be_read_fails_the_iterator() {
    let mem: Arc<dyn Fs> = Arc::new(MemFs::new());
    let fs = Arc::new(FaultFs::new(mem));
    let extractor = || Some(Arc::new(FixedPrefix::new(4)) as Arc<dyn PrefixExtractor>);
    let db = Db::open(DIR, options(fs.clone(), extractor())).unwrap();
    spanning_files(&db);
    db.close().unwrap();
    // Reopened with no cache, every table read goes to the file system.
    let db = Db::open(
        DIR,
        Options {
            block_cache_capacity: 0,
            ..options(fs.clone(), extractor())
        },
    )
    .unwrap();
    fs.fail(&[FaultOp::Read], Some(".sst"), 0, ErrorKind::Other, true);
    let mut it = bounded(&db, b"p003", b"p004");
    let r = it.seek_to_first().and_then(|()| it.status());
    assert!(
        r.is_err(),
        "a prefix scan over unreadable tables returned {r:?}"
    );
    fs.heal();
    assert_eq!(forward(bounded(&db, b"p003", b"p004")).len(), 10);
}

/// A small deterministic generator: the test needs no crate for it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn prefix_iterators_agree_with_a_model() {
    let fs = Arc::new(MemFs::new());
    let db = Db::open(DIR, options(fs, Some(Arc::new(FixedPrefix::new(2))))).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let key = |rng: &mut Rng| {
        let len = 1 + rng.below(4) as usize;
        (0..len)
            .map(|_| b"abcde\xff"[rng.below(6) as usize])
            .collect::<Vec<u8>>()
    };
    for round in 0..400 {
        let k = key(&mut rng);
        if rng.below(4) == 0 {
            db.delete(&WriteOptions::default(), &k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("{round}").into_bytes();
            put(&db, &k, &v);
            model.insert(k, v);
        }
        if round % 10 == 9 {
            db.flush().unwrap();
        }
        if round % 20 == 19 {
            let lower = key(&mut rng);
            // Upper bounds of every kind: inside the prefix, its end, past it.
            let mut upper = lower.clone();
            match rng.below(3) {
                0 => upper.push(b"abcde\xff"[rng.below(6) as usize]),
                1 => {
                    while upper.last() == Some(&0xff) {
                        upper.pop();
                    }
                    if let Some(last) = upper.last_mut() {
                        *last += 1;
                    }
                }
                _ => upper = key(&mut rng),
            }
            let want: Vec<_> = model
                .range(lower.clone()..)
                .take_while(|(k, _)| k.as_slice() < upper.as_slice())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(
                forward(bounded(&db, &lower, &upper)),
                want,
                "{lower:?}..{upper:?}"
            );
            assert_eq!(
                backward(bounded(&db, &lower, &upper)),
                want,
                "{lower:?}..{upper:?}"
            );
        }
    }
    assert!(db.stats().prefix_filter_useful > 0);
}
