//! The merge operator end to end: operands in memtables, sstables and
//! compaction, gets and iterators both ways, snapshots, the operator's
//! name in the manifest, refused operands and failed merges.

use std::path::Path;
use std::sync::Arc;

use cleave::vfs::MemFs;
use cleave::{
    Append, Db, Error, FieldUpdate, MergeOperator, Options, ReadOptions, U64Add, WriteBatch,
    WriteOptions,
};

fn options(fs: &MemFs, op: Option<Arc<dyn MergeOperator>>) -> Options {
    Options {
        create_if_missing: true,
        fs: Arc::new(fs.clone()),
        write_buffer_size: 16 << 10,
        min_value_size: 512,
        merge_operator: op,
        ..Options::default()
    }
}

fn counter(db: &Db, ro: &ReadOptions<'_>, key: &[u8]) -> Option<u64> {
    db.get(ro, key)
        .unwrap()
        .map(|v| u64::from_le_bytes(v.try_into().unwrap()))
}

fn add(db: &Db, key: &[u8], n: u64) {
    db.merge(&WriteOptions::default(), key, &n.to_le_bytes())
        .unwrap();
}

fn scan(db: &Db, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(&ReadOptions::new());
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last().unwrap();
    } else {
        it.seek_to_first().unwrap();
    }
    while it.valid() {
        out.push((it.key().to_vec(), it.value().unwrap().to_vec()));
        if reverse {
            it.prev().unwrap();
        } else {
            it.next().unwrap();
        }
    }
    it.status().unwrap();
    if reverse {
        out.reverse();
    }
    out
}

/// Counters keep their sums through memtables, flushes and compactions,
/// and a snapshot keeps seeing the sum of its time.
#[test]
fn counters_through_flush_and_compaction_with_snapshots() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, Some(Arc::new(U64Add)))).unwrap();
    let ro = ReadOptions::new();
    for round in 0..5u64 {
        for k in 0..50u64 {
            add(&db, format!("c{k:03}").as_bytes(), k + round);
        }
        if round == 2 {
            db.flush().unwrap();
        }
    }
    let snap = db.snapshot();
    for k in 0..50u64 {
        add(&db, format!("c{k:03}").as_bytes(), 1000);
    }
    let expect = |k: u64| 5 * k + 10;
    let check = |db: &Db| {
        let mut at_snap = ReadOptions::new();
        at_snap.snapshot = Some(&snap);
        for k in 0..50u64 {
            let key = format!("c{k:03}");
            assert_eq!(counter(db, &ro, key.as_bytes()), Some(expect(k) + 1000));
            assert_eq!(counter(db, &at_snap, key.as_bytes()), Some(expect(k)));
        }
        assert_eq!(counter(db, &ro, b"absent"), None);
    };
    check(&db);
    db.flush().unwrap();
    check(&db);
    db.compact_range(None, None).unwrap();
    check(&db);
    let s = db.stats();
    assert!(
        s.merge_operands_combined > 0,
        "the snapshot's stripe keeps operands: {}",
        s.merge_operands_combined
    );
    drop(snap);
    db.compact_range(None, None).unwrap();
    let s = db.stats();
    assert!(
        s.merges_full >= 50,
        "merged at the bottom: {}",
        s.merges_full
    );
    for k in 0..50u64 {
        let key = format!("c{k:03}");
        assert_eq!(counter(&db, &ro, key.as_bytes()), Some(expect(k) + 1000));
    }
    let got = db.multi_get(&ro, &[b"c007".to_vec(), b"nope".to_vec(), b"c049".to_vec()]);
    let got: Vec<Option<Vec<u8>>> = got.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(got[0], Some((expect(7) + 1000).to_le_bytes().to_vec()));
    assert_eq!(got[1], None);
    assert_eq!(got[2], Some((expect(49) + 1000).to_le_bytes().to_vec()));
}

/// A put or delete ends a chain: operands above it merge onto it (or onto
/// nothing); those below it are gone. Iterators agree with gets both ways,
/// wherever the entries lie.
#[test]
fn puts_and_deletes_end_chains_in_every_layer_and_direction() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, Some(Arc::new(Append::default())))).unwrap();
    let wo = WriteOptions::default();
    let ro = ReadOptions::new();
    db.put(&wo, b"a", b"1").unwrap();
    db.merge(&wo, b"a", b"2").unwrap();
    db.merge(&wo, b"b", b"x").unwrap();
    db.put(&wo, b"c", b"plain").unwrap();
    db.flush().unwrap();
    db.merge(&wo, b"a", b"3").unwrap();
    db.delete(&wo, b"b").unwrap();
    db.merge(&wo, b"b", b"y").unwrap();
    let mut batch = WriteBatch::new();
    batch.merge(b"d", b"p");
    batch.merge(b"d", b"q");
    batch.put(b"e", b"old");
    batch.merge(b"e", b"new");
    db.write(&wo, batch).unwrap();
    db.flush().unwrap();
    db.merge(&wo, b"a", b"4").unwrap();
    db.put(&wo, b"f", b"reset").unwrap();
    let expected: Vec<(Vec<u8>, Vec<u8>)> = [
        ("a", "1,2,3,4"),
        ("b", "y"),
        ("c", "plain"),
        ("d", "p,q"),
        ("e", "old,new"),
        ("f", "reset"),
    ]
    .iter()
    .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect();
    for stage in ["memtable and L0", "compacted"] {
        for (k, v) in &expected {
            assert_eq!(db.get(&ro, k).unwrap().as_ref(), Some(v), "{stage}: {k:?}");
        }
        assert_eq!(scan(&db, false), expected, "{stage}: forward");
        assert_eq!(scan(&db, true), expected, "{stage}: reverse");
        // Direction changes on merged keys.
        let mut it = db.iter(&ro);
        it.seek(b"b").unwrap();
        assert_eq!(it.value().unwrap(), b"y");
        it.prev().unwrap();
        assert_eq!(
            (it.key(), it.value().unwrap()),
            (&b"a"[..], &b"1,2,3,4"[..])
        );
        it.next().unwrap();
        it.next().unwrap();
        assert_eq!(it.key(), b"c");
        it.prev().unwrap();
        assert_eq!(it.key(), b"b");
        it.seek_for_prev(b"d").unwrap();
        assert_eq!((it.key(), it.value().unwrap()), (&b"d"[..], &b"p,q"[..]));
        it.next().unwrap();
        it.prev().unwrap();
        assert_eq!(it.key(), b"d");
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
    }
    // Bounds cut through merged keys as through others.
    let mut bounded = ReadOptions::new();
    bounded.lower_bound = Some(b"b".to_vec());
    bounded.upper_bound = Some(b"e".to_vec());
    let mut it = db.iter(&bounded);
    it.seek_to_last().unwrap();
    assert_eq!(it.key(), b"d");
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), b"b");
}

/// A base value separated into a value file is read through its handle,
/// and the value compaction merges of at least `min_value_size` bytes goes
/// to a value file again.
#[test]
fn separated_bases_are_merged_and_large_results_separated() {
    let fs = MemFs::new();
    let op = FieldUpdate::new(10, 100);
    let opts = Options {
        // Only merges write value files in compactions here.
        correlated_compaction: false,
        ..options(&fs, Some(Arc::new(op.clone())))
    };
    let db = Db::open("/db", opts).unwrap();
    let wo = WriteOptions::default();
    let ro = ReadOptions::new();
    let mut expected = Vec::new();
    for k in 0..40u8 {
        let base: Vec<u8> = (0..1000).map(|i| k.wrapping_add((i / 100) as u8)).collect();
        db.put(&wo, &[b'r', k], &base).unwrap();
        expected.push(base);
    }
    db.flush().unwrap();
    assert!(db.stats().value_files_written > 0, "bases are separated");
    for k in 0..40u8 {
        let field = usize::from(k % 10);
        let bytes = [b'#' + k % 10; 100];
        db.merge(&wo, &[b'r', k], &op.operand(field, &bytes))
            .unwrap();
        expected[usize::from(k)][field * 100..field * 100 + 100].copy_from_slice(&bytes);
    }
    for k in 0..40u8 {
        assert_eq!(
            db.get(&ro, &[b'r', k]).unwrap().as_ref(),
            Some(&expected[usize::from(k)])
        );
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let s = db.stats();
    assert!(s.merges_full >= 40, "{}", s.merges_full);
    assert_eq!(s.compaction_values_reseparated, 0);
    assert!(
        s.compaction_value_bytes_written >= 40 * 1000,
        "merged values go to new value files: {}",
        s.compaction_value_bytes_written
    );
    let scanned: Vec<Vec<u8>> = scan(&db, false).into_iter().map(|(_, v)| v).collect();
    assert_eq!(scanned, expected);
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    // GC finds the replaced bases dead and the merged values live.
    db.gc_with_ratio(0.01).unwrap();
    assert_eq!(
        scan(&db, true)
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>(),
        expected
    );
}

/// The first merge logs the operator's name: the database then opens only
/// with an operator of that name. Merges need an operator, and operands
/// it refuses are refused whole.
#[test]
fn the_operator_is_named_in_the_manifest_and_checked() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    let wo = WriteOptions::default();
    {
        let db = Db::open(dir, options(&fs, None)).unwrap();
        db.put(&wo, b"k", b"v").unwrap();
        assert!(matches!(
            db.merge(&wo, b"k", b"+"),
            Err(Error::InvalidArgument(_))
        ));
    }
    // No merge yet: any operator opens it.
    {
        let db = Db::open(dir, options(&fs, Some(Arc::new(Append::default())))).unwrap();
        db.put(&wo, b"x", b"1").unwrap();
    }
    {
        let db = Db::open(dir, options(&fs, Some(Arc::new(U64Add)))).unwrap();
        let mut batch = WriteBatch::new();
        batch.put(b"n", b"untouched");
        batch.merge(b"c", &[1, 2, 3]);
        let err = db.write(&wo, batch).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("\"c\"") && m.contains("8-byte")),
            "{err}"
        );
        assert_eq!(
            db.get(&ReadOptions::new(), b"n").unwrap(),
            None,
            "nothing applied"
        );
        add(&db, b"c", 5);
    }
    for other in [
        None,
        Some(Arc::new(Append::default()) as Arc<dyn MergeOperator>),
    ] {
        let err = Db::open(dir, options(&fs, other)).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("uint64add")),
            "{err}"
        );
    }
    // The name outlives manifest rotations and reopens.
    for _ in 0..3 {
        let db = Db::open(
            dir,
            Options {
                max_manifest_file_size: 1 << 10,
                ..options(&fs, Some(Arc::new(U64Add)))
            },
        )
        .unwrap();
        for i in 0..20u8 {
            db.put(&wo, &[b'p', i], b"v").unwrap();
            db.flush().unwrap();
        }
        db.compact_range(None, None).unwrap();
    }
    assert!(Db::open(dir, options(&fs, None)).is_err());
    let db = Db::open(dir, options(&fs, Some(Arc::new(U64Add)))).unwrap();
    assert_eq!(counter(&db, &ReadOptions::new(), b"c"), Some(5));
}

/// Operands the operator cannot merge onto their base fail the reads of
/// that key alone, with the key in the error; compaction keeps them
/// unmerged and goes on.
#[test]
fn a_merge_the_operator_refuses_fails_its_key_only() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, Some(Arc::new(U64Add)))).unwrap();
    let wo = WriteOptions::default();
    let ro = ReadOptions::new();
    db.put(&wo, b"bad", b"not a number").unwrap();
    add(&db, b"bad", 1);
    add(&db, b"good", 2);
    let failed = |r: cleave::Result<Option<Vec<u8>>>| matches!(r, Err(Error::MergeFailed { key, operator, .. }) if key == "bad" && operator == "uint64add");
    assert!(failed(db.get(&ro, b"bad")));
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(db.stats().merges_failed >= 1);
    assert!(failed(db.get(&ro, b"bad")));
    assert_eq!(counter(&db, &ro, b"good"), Some(2));
    let mut it = db.iter(&ro);
    it.seek_to_first().unwrap_err();
    assert!(!it.valid());
    let mut it = db.iter(&ro);
    it.seek(b"c").unwrap();
    assert_eq!(it.key(), b"good");
    // A put replaces the bad history.
    db.put(&wo, b"bad", &7u64.to_le_bytes()).unwrap();
    add(&db, b"bad", 1);
    assert_eq!(counter(&db, &ro, b"bad"), Some(8));
}

/// Reads of a hot counter keep its merged run in the memtable and walk
/// only the operands written since: through puts and deletes that reset
/// it, reads at snapshots older than the run, and either operator kind
/// (one that combines operands and one that declines), every read agrees
/// with the model.
#[test]
fn reads_of_a_hot_key_agree_through_its_merged_runs() {
    /// Appends, and declines every partial merge.
    #[derive(Debug)]
    struct Unpaired;
    impl MergeOperator for Unpaired {
        fn name(&self) -> &str {
            "unpaired"
        }
        fn full_merge(
            &self,
            _: &[u8],
            base: Option<&[u8]>,
            operands: &[&[u8]],
        ) -> Result<Vec<u8>, String> {
            let mut out = base.unwrap_or_default().to_vec();
            for o in operands {
                out.extend_from_slice(o);
            }
            Ok(out)
        }
    }
    for op in [
        Arc::new(U64Add) as Arc<dyn MergeOperator>,
        Arc::new(Append::new(b",")),
        Arc::new(Unpaired),
    ] {
        let fs = MemFs::new();
        let opts = Options {
            write_buffer_size: 64 << 20,
            ..options(&fs, Some(op.clone()))
        };
        let db = Db::open(Path::new("/db"), opts).unwrap();
        let wo = WriteOptions::default();
        let ro = ReadOptions::new();
        let operand = |i: u64| -> Vec<u8> {
            if op.name() == "uint64add" {
                i.to_le_bytes().to_vec()
            } else {
                i.to_string().into_bytes()
            }
        };
        let apply = |model: &Option<Vec<u8>>, i: u64| -> Vec<u8> {
            op.full_merge(b"k", model.as_deref(), &[&operand(i)])
                .unwrap()
        };
        let mut model: Option<Vec<u8>> = None;
        let mut snaps = Vec::new();
        for i in 1..3000u64 {
            match i % 97 {
                0 => {
                    db.put(&wo, b"k", &operand(i)).unwrap();
                    model = Some(operand(i));
                }
                50 => {
                    db.delete(&wo, b"k").unwrap();
                    model = None;
                }
                _ => {
                    db.merge(&wo, b"k", &operand(i)).unwrap();
                    model = Some(apply(&model, i));
                }
            }
            if i % 5 == 0 {
                assert_eq!(db.get(&ro, b"k").unwrap(), model, "{} at {i}", op.name());
            }
            if i % 301 == 0 {
                snaps.push((db.snapshot(), model.clone()));
            }
        }
        for (snap, then) in &snaps {
            let mut at = ReadOptions::new();
            at.snapshot = Some(snap);
            assert_eq!(db.get(&at, b"k").unwrap(), *then, "{}", op.name());
        }
        assert_eq!(db.get(&ro, b"k").unwrap(), model);
        db.flush().unwrap();
        assert_eq!(db.get(&ro, b"k").unwrap(), model);
    }
}
