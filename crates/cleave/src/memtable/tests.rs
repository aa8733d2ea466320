use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use rand::{Rng, SeedableRng};

use super::*;
use crate::base::key::MAX_SEQ;
use crate::iter::testutil::{check_random_ops, collect_backward, collect_forward};

fn ikey(k: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    InternalKey::new(k, seq, kind).encoded().to_vec()
}

#[test]
fn concurrent_adds_are_all_visible_in_order() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 2000;
    let mem = Arc::new(MemTable::new());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let mem = &mem;
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    // Threads share user keys but never sequence numbers.
                    let seq = i * THREADS + t + 1;
                    let user_key = format!("key{:04}", i % 500);
                    mem.add(
                        seq,
                        ValueKind::Value,
                        user_key.as_bytes(),
                        &seq.to_le_bytes(),
                    );
                }
            });
        }
    });

    let mut model: Vec<(Vec<u8>, Vec<u8>)> = (1..=THREADS * PER_THREAD)
        .map(|seq| {
            let i = (seq - 1) / THREADS;
            let user_key = format!("key{:04}", i % 500);
            (
                ikey(user_key.as_bytes(), seq, ValueKind::Value),
                seq.to_le_bytes().to_vec(),
            )
        })
        .collect();
    model.sort_by(|a, b| key::compare(&a.0, &b.0));

    assert_eq!(mem.len(), model.len());
    // Each node holds its key, value and one to MAX_HEIGHT links.
    let bytes = |height| -> usize {
        model
            .iter()
            .map(|(k, v)| skiplist::node_bytes(height, k.len() + v.len()))
            .sum()
    };
    let used = mem.approximate_memory_usage();
    assert!(
        used > bytes(1) && used < bytes(skiplist::MAX_HEIGHT),
        "{used}"
    );

    let mut it = mem.iter();
    assert_eq!(collect_forward(&mut it), model);
    let mut backward = collect_backward(&mut it);
    backward.reverse();
    assert_eq!(backward, model);
}

#[test]
fn get_honours_snapshots_and_deletions() {
    let mem = MemTable::new();
    assert!(mem.is_empty());
    mem.add(10, ValueKind::Value, b"a", b"a10");
    mem.add(20, ValueKind::Deletion, b"a", b"");
    mem.add(30, ValueKind::Value, b"a", b"a30");
    mem.add(15, ValueKind::Value, b"b", b"b15");
    mem.add(5, ValueKind::Value, b"ab", b"ab5");
    assert!(!mem.is_empty());
    assert_eq!(mem.len(), 5);

    assert_eq!(mem.get(b"a", 9), None);
    assert_eq!(mem.get(b"a", 10), Some((ValueKind::Value, b"a10".to_vec())));
    assert_eq!(mem.get(b"a", 19), Some((ValueKind::Value, b"a10".to_vec())));
    assert_eq!(mem.get(b"a", 20), Some((ValueKind::Deletion, vec![])));
    assert_eq!(mem.get(b"a", 29), Some((ValueKind::Deletion, vec![])));
    assert_eq!(mem.get(b"a", 30), Some((ValueKind::Value, b"a30".to_vec())));
    assert_eq!(
        mem.get(b"a", MAX_SEQ),
        Some((ValueKind::Value, b"a30".to_vec()))
    );
    // A prefix or an extension of a present key is a different key.
    assert_eq!(mem.get(b"", MAX_SEQ), None);
    assert_eq!(mem.get(b"ab", 4), None);
    assert_eq!(mem.get(b"ab", 5), Some((ValueKind::Value, b"ab5".to_vec())));
    assert_eq!(mem.get(b"abc", MAX_SEQ), None);
    assert_eq!(mem.get(b"b", 14), None);
    assert_eq!(mem.get(b"b", 15), Some((ValueKind::Value, b"b15".to_vec())));
    assert_eq!(mem.get(b"c", MAX_SEQ), None);
}

#[test]
fn random_get_matches_model() {
    for seed in 0..5u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mem = MemTable::new();
        let mut entries: Vec<(Vec<u8>, SeqNo, ValueKind, Vec<u8>)> = Vec::new();
        for seq in 1..=400 {
            let k = format!("k{}", rng.gen_range(0..40)).into_bytes();
            let kind = if rng.gen_bool(0.3) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let v = format!("v{seq}").into_bytes();
            mem.add(seq, kind, &k, &v);
            entries.push((k, seq, kind, v));
        }
        for _ in 0..500 {
            let k = format!("k{}", rng.gen_range(0..45)).into_bytes();
            let snap = rng.gen_range(0..=410);
            let expected = entries
                .iter()
                .filter(|e| e.0 == k && e.1 <= snap)
                .max_by_key(|e| e.1)
                .map(|e| (e.2, e.3.clone()));
            assert_eq!(mem.get(&k, snap), expected, "seed {seed}");
        }
    }
}

#[test]
fn iterator_matches_model_under_random_ops() {
    for seed in 0..10u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mem = Arc::new(MemTable::new());
        let mut model = Vec::new();
        let n = rng.gen_range(0..200);
        for seq in 1..=n {
            let k = format!("k{}", rng.gen_range(0..30)).into_bytes();
            let v = format!("v{seq}").into_bytes();
            mem.add(seq, ValueKind::Value, &k, &v);
            model.push((ikey(&k, seq, ValueKind::Value), v));
        }
        model.sort_by(|a, b| key::compare(&a.0, &b.0));
        let targets: BTreeSet<Vec<u8>> = (0..50)
            .map(|_| {
                let k = format!("k{}", rng.gen_range(0..32)).into_bytes();
                InternalKey::for_seek(&k, rng.gen_range(0..=n + 1))
                    .encoded()
                    .to_vec()
            })
            .collect();
        let targets: Vec<_> = targets.into_iter().collect();
        let mut it = mem.iter();
        check_random_ops(&mut it, &model, &targets, &mut rng, 2000);
    }
}

#[test]
fn iterator_keeps_memtable_alive_and_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let mem = Arc::new(MemTable::new());
    mem.add(1, ValueKind::Value, b"k", b"v");
    let mut it = mem.iter();
    drop(mem);
    assert_send(&it);
    it.seek_to_first().unwrap();
    assert!(it.valid());
    assert_eq!(it.value(), b"v");
    let handle = std::thread::spawn(move || {
        it.next().unwrap();
        it.valid()
    });
    assert!(!handle.join().unwrap());
}

#[test]
fn readers_see_a_sorted_subset_while_writers_add() {
    const WRITERS: u64 = 3;
    const PER_WRITER: u64 = 1500;
    let mem = Arc::new(MemTable::new());
    std::thread::scope(|s| {
        for t in 0..WRITERS {
            let mem = &mem;
            s.spawn(move || {
                for i in 0..PER_WRITER {
                    let seq = i * WRITERS + t + 1;
                    let user_key = format!("key{:03}", (i * 7 + t) % 300);
                    mem.add(
                        seq,
                        ValueKind::Value,
                        user_key.as_bytes(),
                        &seq.to_le_bytes(),
                    );
                }
            });
        }
        let mem = &mem;
        s.spawn(move || {
            for _ in 0..20 {
                let mut it = mem.iter();
                let seen = collect_forward(&mut it);
                for pair in seen.windows(2) {
                    assert_eq!(key::compare(&pair[0].0, &pair[1].0), Ordering::Less);
                }
                for (k, v) in &seen {
                    // Every value is the entry's own sequence number.
                    assert_eq!(v.as_slice(), &key::seq(k).to_le_bytes()[..]);
                }
                // Point reads agree with what the scan saw.
                if let Some((k, v)) = seen.last() {
                    let got = mem.get(key::user_key(k), key::seq(k));
                    assert_eq!(got, Some((ValueKind::Value, v.clone())));
                }
            }
        });
    });
    assert_eq!(mem.len() as u64, WRITERS * PER_WRITER);
}

#[test]
fn a_filtered_memtable_rules_out_keys_and_prefixes_it_never_held() {
    let prefix: Arc<dyn PrefixExtractor> = Arc::new(crate::FixedPrefix::new(3));
    let mem = MemTable::with_filter(4 << 10, Some(prefix));
    assert_eq!(mem.approximate_memory_usage(), 0);
    for i in 0..100u64 {
        let k = format!("ab{}-{i}", i % 10);
        mem.add(i + 1, ValueKind::Value, k.as_bytes(), b"v");
    }
    for i in 0..100 {
        let k = format!("ab{}-{i}", i % 10);
        assert!(mem.may_contain_key(k.as_bytes()));
        assert!(mem.may_contain_prefix("cleave.fixed_prefix.3", &k.as_bytes()[..3]));
    }
    let absent = (0..100)
        .filter(|i| mem.may_contain_key(format!("zz{i}").as_bytes()))
        .count();
    assert!(absent < 5, "{absent} false positives");
    assert!(!(0..10)
        .all(|i| mem.may_contain_prefix("cleave.fixed_prefix.3", format!("x{i}y").as_bytes())));
    // Another extractor's prefixes were never added: no answer for them.
    assert!(mem.may_contain_prefix("other", b"zzz"));
    // Without a filter every answer is "maybe".
    let plain = MemTable::new();
    assert!(
        plain.may_contain_key(b"zz") && plain.may_contain_prefix("cleave.fixed_prefix.3", b"zzz")
    );
}
