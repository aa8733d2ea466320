//! Builder → reader round trips, iterator and lookup semantics against a
//! sorted Vec, and corruption of every byte of a small table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::reader::TableIter;
use super::*;
use super::{new_block_cache, BlockCache};
use crate::base::key::{self, MAX_SEQ};
use crate::base::InternalIterator;
use crate::base::{FileNumber, ValueKind};
use crate::vfs::{FileOptions, Fs, MemFs};
use crate::{Compression, Error};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn ikey(user: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    InternalKey::new(user, seq, kind).encoded().to_vec()
}

/// Sorted entries: several versions of some user keys, deletions, empty
/// values and, if asked, a few 64 KiB user keys.
fn model(seed: u64, n: usize, big_keys: bool) -> Entries {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v = Vec::new();
    for i in 0..n {
        let user = format!("user{:06}", i * 2).into_bytes();
        let versions = rng.gen_range(1..=3);
        let base = rng.gen_range(1..1_000_000u64);
        for j in 0..versions {
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let len = if rng.gen_bool(0.2) {
                0
            } else {
                rng.gen_range(1..120)
            };
            let value: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'e')).collect();
            v.push((ikey(&user, base + 7 * j, kind), value));
        }
    }
    if big_keys {
        for c in [b'x', b'y', b'z'] {
            let mut user = vec![c; 64 << 10];
            user[1000] = b'0';
            v.push((ikey(&user, 5, ValueKind::Value), vec![c; 10]));
        }
        // Two big keys sharing 64 KiB - 1 bytes.
        let mut user = vec![b'z'; 64 << 10];
        user[(64 << 10) - 1] = b'a';
        v.push((ikey(&user, 9, ValueKind::Value), Vec::new()));
    }
    v.sort_by(|a, b| key::compare(&a.0, &b.0));
    v
}

fn build(fs: &MemFs, path: &Path, opts: TableOptions, entries: &Entries) -> TableSummary {
    fs.create_dir_all(path.parent().unwrap()).unwrap();
    let file = fs.create(path, FileOptions::default()).unwrap();
    // Compression can shrink the estimate when a block is flushed.
    let monotonic = opts.compression == Compression::None;
    let mut b = TableBuilder::new(file, path.to_path_buf(), opts);
    let mut last_estimate = 0;
    for (k, v) in entries {
        b.add(k, v).unwrap();
        assert!(!monotonic || b.estimated_size() >= last_estimate);
        last_estimate = b.estimated_size();
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    let s = b.finish().unwrap();
    assert!(s.file_size >= last_estimate);
    s
}

fn open(fs: &MemFs, path: &Path, cache: Arc<BlockCache>) -> crate::Result<Arc<Table>> {
    let file = fs.open(path, FileOptions::default())?;
    Ok(Arc::new(Table::open(
        file,
        path.to_path_buf(),
        FileNumber(7),
        cache,
    )?))
}

fn seek_index(entries: &Entries, target: &[u8]) -> usize {
    entries.partition_point(|e| key::compare(&e.0, target).is_lt())
}

fn expected_get(entries: &Entries, user: &[u8], seek: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    entries
        .get(seek_index(entries, seek))
        .filter(|e| key::user_key(&e.0) == user)
        .cloned()
}

fn collect_forward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn collect_backward(it: &mut TableIter) -> crate::Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

/// Seek targets: every key, seek keys for present and absent user keys at
/// several snapshots, and keys before and after everything.
fn targets(entries: &Entries, rng: &mut StdRng) -> Vec<Vec<u8>> {
    let mut t: Vec<Vec<u8>> = entries.iter().map(|e| e.0.clone()).collect();
    for e in entries.iter().step_by(3) {
        let user = key::user_key(&e.0);
        let seq = key::seq(&e.0);
        t.push(InternalKey::for_seek(user, MAX_SEQ).encoded().to_vec());
        t.push(
            InternalKey::for_seek(user, seq.saturating_sub(rng.gen_range(0..10)))
                .encoded()
                .to_vec(),
        );
        t.push(InternalKey::for_seek(user, 0).encoded().to_vec());
        let mut absent = user.to_vec();
        absent.push(b'!');
        t.push(
            InternalKey::for_seek(&absent, rng.gen_range(0..MAX_SEQ))
                .encoded()
                .to_vec(),
        );
    }
    t.push(InternalKey::for_seek(b"", MAX_SEQ).encoded().to_vec());
    t.push(InternalKey::for_seek(b"\xff\xff\xff", 0).encoded().to_vec());
    t
}

fn check_table(table: &Arc<Table>, entries: &Entries, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut it = table.iter();
    assert_eq!(collect_forward(&mut it).unwrap(), *entries);
    assert_eq!(collect_backward(&mut it).unwrap(), *entries);
    for t in targets(entries, &mut rng) {
        let i = seek_index(entries, &t);
        it.seek(&t).unwrap();
        match entries.get(i) {
            Some(e) => {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&e.0[..], &e.1[..]));
                // Step both ways from the sought position.
                if i + 1 < entries.len() {
                    it.next().unwrap();
                    assert_eq!(it.key(), &entries[i + 1].0[..]);
                    it.prev().unwrap();
                }
                it.prev().unwrap();
                match i.checked_sub(1) {
                    Some(p) => assert_eq!(it.key(), &entries[p].0[..]),
                    None => assert!(!it.valid()),
                }
            }
            None => assert!(!it.valid()),
        }
        let j = entries.partition_point(|e| key::compare(&e.0, &t).is_le());
        it.seek_for_prev(&t).unwrap();
        match j.checked_sub(1) {
            Some(p) => assert_eq!(
                (it.key(), it.value()),
                (&entries[p].0[..], &entries[p].1[..])
            ),
            None => assert!(!it.valid()),
        }
        let user = key::user_key(&t);
        assert_eq!(
            table.get(user, &t).unwrap(),
            expected_get(entries, user, &t),
            "get {t:?}"
        );
    }
}

#[test]
fn round_trip_across_block_sizes_compressions_and_restart_intervals() {
    let entries = model(1, 300, true);
    let fs = MemFs::new();
    let mut config = 0;
    for block_size in [256, 1024, 4096, 64 << 10] {
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
            for restart_interval in [1, 16] {
                config += 1;
                let path = PathBuf::from(format!("/db/{config}.sst"));
                let opts = TableOptions {
                    block_size,
                    restart_interval,
                    bloom_bits_per_key: if opts_has_filter(config) { 10 } else { 0 },
                    compression,
                    prefix_extractor: None,
                };
                let s = build(&fs, &path, opts, &entries);
                assert_eq!(s.file_size, fs.file_len(&path).unwrap() as u64);
                assert_eq!(s.num_entries, entries.len() as u64);
                let deletions = entries
                    .iter()
                    .filter(|e| key::parse(&e.0).unwrap().kind == ValueKind::Deletion)
                    .count();
                assert_eq!(s.num_deletions, deletions as u64);
                assert_eq!(s.smallest.encoded(), &entries[0].0[..]);
                assert_eq!(s.largest.encoded(), &entries[entries.len() - 1].0[..]);
                let seqs = entries.iter().map(|e| key::seq(&e.0));
                assert_eq!(s.smallest_seq, seqs.clone().min().unwrap());
                assert_eq!(s.largest_seq, seqs.max().unwrap());

                let table = open(&fs, &path, Arc::new(new_block_cache(1 << 20))).unwrap();
                let p = table.properties();
                assert_eq!(
                    (p.num_entries, p.num_deletions),
                    (s.num_entries, s.num_deletions)
                );
                assert_eq!(p.format_version, 1);
                assert_eq!(
                    p.compression,
                    u64::from(format::compression_byte(compression))
                );
                assert!(p.num_data_blocks >= 1);
                assert_eq!(p.filter_size > 0, opts_has_filter(config));
                let raw_keys: usize = entries.iter().map(|e| e.0.len()).sum();
                assert_eq!(p.raw_key_size, raw_keys as u64);
                if block_size == 256 {
                    // Every 64 KiB key fills a block of its own.
                    assert!(p.num_data_blocks > 4);
                }
                table.verify().unwrap();
                check_table(&table, &entries, u64::from(config));
            }
        }
    }
}

fn opts_has_filter(config: u32) -> bool {
    !config.is_multiple_of(3)
}

#[test]
fn compression_shrinks_compressible_tables() {
    let entries = model(2, 500, false);
    let fs = MemFs::new();
    let mut sizes = Vec::new();
    for (i, compression) in [Compression::None, Compression::Lz4, Compression::Zstd]
        .into_iter()
        .enumerate()
    {
        let path = PathBuf::from(format!("/db/c{i}.sst"));
        let opts = TableOptions {
            compression,
            ..TableOptions::default()
        };
        sizes.push(build(&fs, &path, opts, &entries).file_size);
    }
    assert!(sizes[1] < sizes[0] * 9 / 10, "{sizes:?}");
    assert!(sizes[2] < sizes[0] * 9 / 10, "{sizes:?}");
}

#[test]
fn get_of_present_absent_and_shadowed_keys() {
    let entries: Entries = vec![
        (ikey(b"a", 30, ValueKind::Value), b"a30".to_vec()),
        (ikey(b"a", 20, ValueKind::Deletion), Vec::new()),
        (ikey(b"a", 10, ValueKind::Value), b"a10".to_vec()),
        (ikey(b"b", 5, ValueKind::Value), Vec::new()),
    ];
    let fs = MemFs::new();
    let path = PathBuf::from("/db/g.sst");
    build(
        &fs,
        &path,
        TableOptions {
            block_size: 256,
            restart_interval: 1,
            ..TableOptions::default()
        },
        &entries,
    );
    let t = open(&fs, &path, Arc::new(new_block_cache(1 << 20))).unwrap();
    let get = |user: &[u8], seq| {
        t.get(user, InternalKey::for_seek(user, seq).encoded())
            .unwrap()
            .map(|(k, v)| (key::seq(&k), key::parse(&k).unwrap().kind, v))
    };
    assert_eq!(
        get(b"a", 100),
        Some((30, ValueKind::Value, b"a30".to_vec()))
    );
    assert_eq!(get(b"a", 25), Some((20, ValueKind::Deletion, Vec::new())));
    assert_eq!(get(b"a", 19), Some((10, ValueKind::Value, b"a10".to_vec())));
    assert_eq!(get(b"a", 9), None);
    assert_eq!(get(b"b", 5), Some((5, ValueKind::Value, Vec::new())));
    assert_eq!(get(b"b", 4), None);
    assert_eq!(get(b"ab", 100), None);
    assert_eq!(get(b"c", 100), None);
    assert_eq!(get(b"", 100), None);
}

#[test]
fn bloom_filter_spares_lookups_of_absent_keys() {
    let entries = model(3, 2000, false);
    let fs = MemFs::new();
    let path = PathBuf::from("/db/b.sst");
    build(&fs, &path, TableOptions::default(), &entries);
    let cache = Arc::new(new_block_cache(8 << 20));
    let t = open(&fs, &path, cache.clone()).unwrap();
    let n = 2000u64;
    let mut found = 0;
    for i in 0..n {
        let user = format!("user{:06}", i * 2 + 1).into_bytes();
        found += usize::from(
            t.get(&user, InternalKey::for_seek(&user, MAX_SEQ).encoded())
                .unwrap()
                .is_some(),
        );
    }
    assert_eq!(found, 0);
    // One filter lookup per get, and index and data lookups only for the
    // ~1% false positives.
    let lookups = cache.hits() + cache.misses();
    assert!(lookups >= n, "the filter must be consulted");
    assert!(
        lookups < n + 2 * n / 20,
        "{lookups} cache lookups for {n} absent keys"
    );
    assert!(
        cache.high_pri_usage() > 0,
        "filter and index belong in the high-priority pool"
    );
}

#[test]
fn empty_builder_refuses_to_finish() {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    let path = PathBuf::from("/db/e.sst");
    let file = fs.create(&path, FileOptions::default()).unwrap();
    let b = TableBuilder::new(file, path, TableOptions::default());
    assert!(matches!(b.finish(), Err(Error::InvalidArgument(_))));
}

fn small_table(fs: &MemFs, path: &Path, compression: Compression) -> Entries {
    let entries = model(4, 25, false);
    let opts = TableOptions {
        block_size: 256,
        restart_interval: 4,
        bloom_bits_per_key: 10,
        compression,
        prefix_extractor: None,
    };
    build(fs, path, opts, &entries);
    entries
}

/// Flips every byte of a small table in turn: open, get, iteration in both
/// directions and verify must each give an error or the right answer, and
/// open or verify must notice every flip.
#[test]
fn every_flipped_byte_is_an_error_never_a_wrong_answer() {
    for compression in [Compression::None, Compression::Lz4] {
        let fs = MemFs::new();
        let path = PathBuf::from("/db/f.sst");
        let entries = small_table(&fs, &path, compression);
        let len = fs.file_len(&path).unwrap();
        let absent: Vec<Vec<u8>> = (0..10)
            .map(|i| format!("user{:06}", 2 * i + 1).into_bytes())
            .collect();
        for offset in 0..len {
            assert!(fs.corrupt_byte(&path, offset));
            let cache = Arc::new(new_block_cache(1 << 20));
            let detected = match open(&fs, &path, cache) {
                Err(e) => {
                    assert!(e.is_corruption(), "offset {offset}: {e}");
                    assert!(
                        e.to_string().contains("f.sst"),
                        "error must name the file: {e}"
                    );
                    true
                }
                Ok(t) => {
                    for (k, v) in &entries {
                        let user = key::user_key(k);
                        if let Ok(got) = t.get(user, k) {
                            assert_eq!(got, Some((k.clone(), v.clone())), "offset {offset}");
                        }
                    }
                    for user in &absent {
                        if let Ok(got) = t.get(user, InternalKey::for_seek(user, MAX_SEQ).encoded())
                        {
                            assert_eq!(got, None, "offset {offset}");
                        }
                    }
                    let mut it = t.iter();
                    if let Ok(all) = collect_forward(&mut it) {
                        assert_eq!(all, entries, "offset {offset}");
                    }
                    if let Ok(all) = collect_backward(&mut it) {
                        assert_eq!(all, entries, "offset {offset}");
                    }
                    t.verify().is_err()
                }
            };
            assert!(detected, "flip at offset {offset} of {len} went unnoticed");
            assert!(fs.corrupt_byte(&path, offset)); // restore
        }
        // Restored: all is well again.
        let t = open(&fs, &path, Arc::new(new_block_cache(1 << 20))).unwrap();
        t.verify().unwrap();
    }
}

#[test]
fn truncated_file_is_corruption() {
    let fs = MemFs::new();
    let path = PathBuf::from("/db/t.sst");
    small_table(&fs, &path, Compression::None);
    let len = fs.file_len(&path).unwrap();
    let original = crate::vfs::read_all(&fs, &path).unwrap();
    for cut in (0..len)
        .step_by(7)
        .chain([len - 1, len - format::FOOTER_LEN])
    {
        {
            let mut f = fs.create(&path, FileOptions::default()).unwrap();
            f.append(&original).unwrap();
        }
        fs.truncate(&path, cut);
        let e = open(&fs, &path, Arc::new(new_block_cache(1 << 20))).unwrap_err();
        assert!(matches!(e, Error::Corruption { .. }), "cut at {cut}: {e}");
        assert!(e.to_string().contains("t.sst"));
    }
}

#[test]
fn unknown_version_and_magic_are_refused() {
    let fs = MemFs::new();
    let path = PathBuf::from("/db/v.sst");
    small_table(&fs, &path, Compression::None);
    let len = fs.file_len(&path).unwrap();
    let version_at = len - 16;
    fs.corrupt_byte(&path, version_at);
    let e = open(&fs, &path, Arc::new(new_block_cache(1 << 20))).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedFormatVersion { found, supported: 2, .. } if found == 1 ^ 0x5a),
        "{e}"
    );
    fs.corrupt_byte(&path, version_at);
    fs.corrupt_byte(&path, len - 1);
    let e = open(&fs, &path, Arc::new(new_block_cache(1 << 20))).unwrap_err();
    assert!(e.to_string().contains("magic"), "{e}");
}

#[test]
fn blocks_come_from_the_cache_after_the_first_read() {
    let fs = MemFs::new();
    let path = PathBuf::from("/db/k.sst");
    let entries = small_table(&fs, &path, Compression::None);
    let cache = Arc::new(new_block_cache(1 << 20));
    let t = open(&fs, &path, cache.clone()).unwrap();
    let mut it = t.iter();
    assert_eq!(collect_forward(&mut it).unwrap(), entries);
    let misses = cache.misses();
    assert_eq!(collect_forward(&mut it).unwrap(), entries);
    assert_eq!(collect_backward(&mut t.iter()).unwrap(), entries);
    assert_eq!(
        cache.misses(),
        misses,
        "second scan must be served from the cache"
    );
    assert!(cache.usage() > 0);
    // Corrupting the file now does not affect cached reads, but verify
    // reads from disk and notices.
    fs.corrupt_byte(&path, 3);
    assert_eq!(collect_forward(&mut t.iter()).unwrap(), entries);
    assert!(t.verify().is_err());
}

#[test]
fn tables_and_their_iterators_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Table>();
    send::<TableIter>();
    assert_eq!(
        format::MAGIC,
        0x3130_5453_5376_6c63,
        "the spec names this value"
    );
}

/// Reads issued by a full forward pass over a table of many small blocks.
fn reads_of_full_pass(scan: bool) -> (u64, u64, usize) {
    use crate::vfs::{FaultFs, FaultOp};
    let mem = MemFs::new();
    let path = Path::new("/t/ra.sst");
    let entries = model(11, 4000, false);
    let opts = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    let summary = build(&mem, path, opts, &entries);
    let fs = FaultFs::new(Arc::new(mem));
    let cache = Arc::new(new_block_cache(8 << 20));
    let file = fs.open(path, FileOptions::default()).unwrap();
    let table =
        Arc::new(Table::open(file, path.to_path_buf(), FileNumber(7), cache.clone()).unwrap());
    let before = fs.count(FaultOp::Read);
    let mut it = if scan {
        table.scan_iter(1 << 20)
    } else {
        table.iter()
    };
    assert_eq!(collect_forward(&mut it).unwrap(), entries);
    let blocks = summary.file_size / 256;
    (fs.count(FaultOp::Read) - before, blocks, cache.usage())
}

#[test]
fn sequential_iteration_reads_windows_not_blocks() {
    let (reads, blocks, _) = reads_of_full_pass(false);
    assert!(blocks > 100, "test needs many blocks, has {blocks}");
    assert!(reads * 10 < blocks, "{reads} reads for {blocks} blocks");
    let (reads, _, cached) = reads_of_full_pass(true);
    assert!(reads <= 4, "a scan read {reads} times");
    // Only the index block (read at the first seek) may be cached.
    assert!(
        cached < 64 << 10,
        "a scan filled the block cache: {cached} bytes"
    );
}

/// Review 2: every readahead window size (smaller than, equal to and larger
/// than blocks, and blocks bigger than the window, up to the end of the
/// file) serves the same entries, forward, backward and after seeks, with
/// and without the block cache, and with a cache shared with a plain
/// iterator that interleaves its reads.
#[test]
fn readahead_windows_of_every_size_serve_exact_blocks() {
    let mem = MemFs::new();
    let path = Path::new("/t/w.sst");
    let mut entries = model(21, 600, false);
    // A few big values make blocks larger than small windows.
    for (i, e) in entries.iter_mut().enumerate() {
        if i % 97 == 3 {
            e.1 = vec![b'q'; 3000 + i];
        }
    }
    let opts = TableOptions {
        block_size: 300,
        ..TableOptions::default()
    };
    let summary = build(&mem, path, opts, &entries);
    let mut rng = StdRng::seed_from_u64(5);
    for window in [
        1usize,
        13,
        299,
        300,
        301,
        512,
        4096,
        4097,
        10_000,
        summary.file_size as usize,
        1 << 22,
    ] {
        for cap in [0usize, 1 << 20] {
            let table = open(&mem, path, Arc::new(new_block_cache(cap))).unwrap();
            let mut it = table.scan_iter(window);
            assert_eq!(
                collect_forward(&mut it).unwrap(),
                entries,
                "window {window}"
            );
            assert_eq!(
                collect_backward(&mut it).unwrap(),
                entries,
                "window {window} backward"
            );
            let mut plain = table.iter();
            // Random walks with seeks, interleaving a plain iterator.
            for _ in 0..200 {
                let i = rng.gen_range(0..entries.len());
                let t = &entries[i].0;
                it.seek(t).unwrap();
                plain.seek(t).unwrap();
                let mut p = i as isize;
                for _ in 0..rng.gen_range(0..40) {
                    let fwd = rng.gen_bool(0.6);
                    if fwd {
                        it.next().unwrap();
                        plain.next().unwrap();
                        p += 1;
                    } else {
                        it.prev().unwrap();
                        plain.prev().unwrap();
                        p -= 1;
                    }
                    if p < 0 || p as usize >= entries.len() {
                        assert!(!it.valid() && !plain.valid());
                        break;
                    }
                    assert_eq!(
                        it.key(),
                        entries[p as usize].0.as_slice(),
                        "window {window}"
                    );
                    assert_eq!(it.value(), entries[p as usize].1.as_slice());
                    assert_eq!(plain.key(), entries[p as usize].0.as_slice());
                    assert_eq!(plain.value(), entries[p as usize].1.as_slice());
                }
                let sfp = ikey(key::user_key(t), MAX_SEQ, ValueKind::Value);
                it.seek_for_prev(&sfp).unwrap();
                let want = seek_index(&entries, &sfp).checked_sub(1);
                match want {
                    Some(w)
                        if seek_index(&entries, &sfp) < entries.len()
                            && key::compare(&entries[seek_index(&entries, &sfp)].0, &sfp)
                                .is_eq() =>
                    {
                        assert_eq!(it.key(), entries[w + 1].0.as_slice());
                    }
                    Some(w) => assert_eq!(it.key(), entries[w].0.as_slice()),
                    None => assert!(!it.valid()),
                }
            }
        }
    }
}

/// Regression: an 8 MiB cache used to have sixteen 512 KiB shards, which
/// never kept the ~600 KiB filter of a 64 MiB table, so every lookup read
/// and checked the whole filter again.
#[test]
fn an_eight_mib_cache_keeps_a_large_filter() {
    let mut builder = super::bloom::BloomBuilder::new(10);
    for i in 0..500_000u32 {
        builder.add_key(&i.to_be_bytes());
    }
    let filter = Arc::new(super::bloom::BloomFilter::new(builder.finish()).unwrap());
    let charge = filter.charge();
    assert!(charge > 600 << 10, "{charge} bytes");
    let cache = new_block_cache(8 << 20);
    let key = (crate::cache::CacheKind::Filter, FileNumber(7), 0);
    cache.insert(
        key,
        CachedBlock::Filter(filter),
        charge,
        crate::cache::Priority::High,
    );
    assert!(cache.get(&key).is_some());
}

/// A table whose builder warmed the cache is read without a miss: its
/// index, filter and (when asked) data blocks are there before the first
/// get, under the table's own number; without data blocks, each get
/// misses only its data block.
#[test]
fn warmed_blocks_serve_the_first_reads() {
    use crate::cache::CacheKind;
    let fs = MemFs::new();
    let entries = model(21, 300, false);
    for (compression, data) in [(Compression::None, true), (Compression::Lz4, false)] {
        let path = PathBuf::from(format!("/t/{compression:?}{data}.sst"));
        let cache = Arc::new(new_block_cache(8 << 20));
        fs.create_dir_all(Path::new("/t")).unwrap();
        let file = fs.create(&path, FileOptions::default()).unwrap();
        let opts = TableOptions {
            compression,
            block_size: 512,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::new(file, path.clone(), opts);
        b.warm_cache(cache.clone(), FileNumber(7), data);
        for (k, v) in &entries {
            b.add(k, v).unwrap();
        }
        b.finish().unwrap();
        let table = open(&fs, &path, cache.clone()).unwrap();
        let mut gets = 0;
        for (k, v) in entries.iter().step_by(7) {
            let user = key::user_key(k);
            let seek = ikey(user, MAX_SEQ, ValueKind::Value);
            let got = table.get(user, &seek).unwrap().unwrap();
            assert_eq!(got, expected_get(&entries, user, &seek).unwrap());
            assert!(!got.1.is_empty() || v.is_empty() || got.0 != *k);
            gets += 1;
        }
        let misses = |kind: CacheKind| cache.class_stats(kind as usize).misses;
        assert_eq!(misses(CacheKind::Index), 0);
        assert_eq!(misses(CacheKind::Filter), 0);
        if data {
            assert_eq!(misses(CacheKind::Data), 0);
        } else {
            assert!(misses(CacheKind::Data) > 0 && misses(CacheKind::Data) <= gets);
        }
    }
}
