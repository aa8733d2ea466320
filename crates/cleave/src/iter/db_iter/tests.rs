use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};

use super::*;
use crate::base::key::TAG_LEN;
use crate::iter::merging::MergingIterator;
use crate::iter::testutil::VecIter;
use crate::memtable::MemTable;

type Part<'a> = (&'a [u8], SeqNo, ValueKind, &'a [u8]);

fn db_iter(parts: &[Part<'_>], seq: SeqNo) -> DbIterator {
    bounded(parts, seq, None, None)
}

fn bounded(
    parts: &[Part<'_>],
    seq: SeqNo,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> DbIterator {
    DbIterator::new(
        Box::new(VecIter::from_parts(parts)),
        seq,
        0,
        lower.map(<[u8]>::to_vec),
        upper.map(<[u8]>::to_vec),
        ValueSource::for_tests(),
        None,
        Box::new(()),
    )
}

fn forward(it: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().unwrap().to_vec()));
        it.next().unwrap();
    }
    out
}

fn backward(it: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().unwrap().to_vec()));
        it.prev().unwrap();
    }
    out.reverse();
    out
}

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

const D: ValueKind = ValueKind::Deletion;
const V: ValueKind = ValueKind::Value;

#[test]
fn newest_visible_version_wins_and_deletions_hide() {
    let parts: &[Part<'_>] = &[
        (b"a", 1, V, b"a1"),
        (b"a", 3, V, b"a3"),
        (b"b", 2, V, b"b2"),
        (b"b", 4, D, b""),
        (b"c", 5, V, b"c5"),
    ];
    let mut it = db_iter(parts, MAX_SEQ);
    let all = vec![kv("a", "a3"), kv("c", "c5")];
    assert_eq!(forward(&mut it), all);
    assert_eq!(backward(&mut it), all);

    let mut it = db_iter(parts, 3);
    let at3 = vec![kv("a", "a3"), kv("b", "b2")];
    assert_eq!(forward(&mut it), at3);
    assert_eq!(backward(&mut it), at3);

    let mut it = db_iter(parts, 0);
    assert!(forward(&mut it).is_empty());
    assert!(backward(&mut it).is_empty());
    it.status().unwrap();
}

#[test]
fn direction_changes_mid_stream() {
    let parts: &[Part<'_>] = &[
        (b"a", 1, V, b"a1"),
        (b"b", 2, V, b"b2"),
        (b"b", 3, V, b"b3"),
        (b"c", 4, D, b""),
        (b"d", 5, V, b"d5"),
    ];
    let mut it = db_iter(parts, MAX_SEQ);
    it.seek(b"b").unwrap();
    assert_eq!((it.key(), it.value().unwrap()), (&b"b"[..], &b"b3"[..]));
    it.next().unwrap();
    assert_eq!(it.key(), b"d");
    it.prev().unwrap();
    assert_eq!((it.key(), it.value().unwrap()), (&b"b"[..], &b"b3"[..]));
    it.prev().unwrap();
    assert_eq!(it.key(), b"a");
    it.next().unwrap();
    assert_eq!(it.key(), b"b");
    it.prev().unwrap();
    it.prev().unwrap();
    assert!(!it.valid());
    // Movement on an invalid iterator does nothing.
    it.next().unwrap();
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
    it.seek_for_prev(b"c").unwrap();
    assert_eq!(it.key(), b"b");
    it.next().unwrap();
    assert_eq!(it.key(), b"d");
}

#[test]
fn bounds_clamp_seeks_in_both_directions() {
    let parts: &[Part<'_>] = &[
        (b"a", 1, V, b"a"),
        (b"b", 2, V, b"b"),
        (b"c", 3, V, b"c"),
        (b"d", 4, V, b"d"),
    ];
    let mut it = bounded(parts, MAX_SEQ, Some(b"b"), Some(b"d"));
    let inside = vec![kv("b", "b"), kv("c", "c")];
    assert_eq!(forward(&mut it), inside);
    assert_eq!(backward(&mut it), inside);
    it.seek(b"a").unwrap();
    assert_eq!(it.key(), b"b");
    it.seek(b"d").unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"z").unwrap();
    assert_eq!(it.key(), b"c");
    it.seek_for_prev(b"a").unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"b").unwrap();
    assert_eq!(it.key(), b"b");
    it.prev().unwrap();
    assert!(!it.valid());

    let mut empty = bounded(parts, MAX_SEQ, Some(b"c"), Some(b"b"));
    assert!(forward(&mut empty).is_empty());
    assert!(backward(&mut empty).is_empty());
}

/// Counts how far the inner iterator moves, to show that bounds stop scans.
struct Counting {
    inner: VecIter,
    steps: Arc<std::sync::atomic::AtomicUsize>,
}

impl InternalIterator for Counting {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target)
    }
    fn next(&mut self) -> Result<()> {
        self.steps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.next()
    }
    fn prev(&mut self) -> Result<()> {
        self.steps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

#[test]
fn bounds_stop_scans_early() {
    // Many tombstones past the upper bound and before the lower bound.
    let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i:03}").into_bytes()).collect();
    let parts: Vec<Part<'_>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let kind = if (40..60).contains(&i) { V } else { D };
            (k.as_slice(), i as u64 + 1, kind, &b"v"[..])
        })
        .collect();
    let steps = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut it = DbIterator::new(
        Box::new(Counting {
            inner: VecIter::from_parts(&parts),
            steps: Arc::clone(&steps),
        }),
        MAX_SEQ,
        0,
        Some(b"k040".to_vec()),
        Some(b"k060".to_vec()),
        ValueSource::for_tests(),
        None,
        Box::new(()),
    );
    assert_eq!(forward(&mut it).len(), 20);
    assert!(steps.load(std::sync::atomic::Ordering::Relaxed) <= 21);
    steps.store(0, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(backward(&mut it).len(), 20);
    assert!(steps.load(std::sync::atomic::Ordering::Relaxed) <= 21);
}

/// A merge operand the iterator has no operator for fails it, naming
/// the key, in both directions, and leaves it failed.
#[test]
fn a_merge_operand_without_an_operator_fails_the_iterator() {
    let parts: &[Part<'_>] = &[
        (b"a", 1, V, b"a1"),
        (b"b", 2, ValueKind::Merge, b"h"),
        (b"c", 3, V, b"c3"),
    ];
    let merge_failed = |e: &Error| matches!(e, Error::MergeFailed { key, .. } if key == "b");
    let mut it = db_iter(parts, MAX_SEQ);
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), b"a");
    let err = it.next().unwrap_err();
    assert!(merge_failed(&err), "{err}");
    assert!(!it.valid());
    assert!(it.status().is_err());
    // The iterator stays failed.
    assert!(it.seek_to_first().is_err());
    assert!(!it.valid());

    let mut it = db_iter(parts, MAX_SEQ);
    it.seek_to_last().unwrap();
    assert_eq!(it.key(), b"c");
    assert!(merge_failed(&it.prev().unwrap_err()));
    assert!(it.status().is_err());

    // With an operator, both directions merge it.
    let op: Arc<dyn crate::merge::MergeOperator> = Arc::new(crate::merge::Append::default());
    let mut it = db_iter(parts, MAX_SEQ).with_merge_operator(Some(op));
    let want = vec![
        (b"a".to_vec(), b"a1".to_vec()),
        (b"b".to_vec(), b"h".to_vec()),
        (b"c".to_vec(), b"c3".to_vec()),
    ];
    assert_eq!(forward(&mut it), want);
    assert_eq!(backward(&mut it), want);
}

/// A handle is resolved only by `value()`: a damaged one fails there, in
/// both directions, and leaves the iterator failed.
#[test]
fn a_bad_value_handle_fails_value_not_movement() {
    let parts: &[Part<'_>] = &[
        (b"a", 1, V, b"a1"),
        (b"b", 2, ValueKind::ValueRef, b"\xff"),
        (b"c", 3, V, b"c3"),
    ];
    let mut it = db_iter(parts, MAX_SEQ);
    it.seek(b"b").unwrap();
    assert_eq!(it.key(), b"b");
    let err = it.value().unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains("\"b\""),
        "{err}"
    );
    assert!(!it.valid());
    assert!(it.status().is_err());
    assert!(it.value().is_err(), "the failure is sticky");
    assert!(it.next().is_err() && it.seek_to_first().is_err());

    let mut it = db_iter(parts, MAX_SEQ);
    it.seek_to_last().unwrap();
    it.prev().unwrap();
    assert_eq!(it.key(), b"b", "moving past an unread handle costs nothing");
    assert!(it.value().unwrap_err().is_corruption());
    let mut it = db_iter(parts, MAX_SEQ);
    it.seek_to_first().unwrap();
    it.next().unwrap();
    it.next().unwrap();
    assert_eq!((it.key(), it.value().unwrap()), (&b"c"[..], &b"c3"[..]));
}

/// Entries a reader never needs are never resolved: a damaged handle
/// hidden by a newer value, a merge operand above the snapshot (with no
/// operator to merge it).
#[test]
fn a_key_with_many_versions_is_passed_over_by_a_seek() {
    // 1,000 versions of "a" between "0" and "b": a scan as of seq 2000 shows
    // the newest and seeks past the rest; one as of seq 0 (before them all)
    // seeks past the too-new ones. Either way in a few dozen movements.
    let values: Vec<String> = (0..1000).map(|i| format!("a{i}")).collect();
    let mut parts: Vec<Part<'_>> = vec![(b"0", 0, V, b"zero"), (b"b", 0, V, b"b")];
    for (i, v) in values.iter().enumerate() {
        parts.push((b"a", i as SeqNo + 1, V, v.as_bytes()));
    }
    for (seq, want) in [
        (2000, vec![kv("0", "zero"), kv("a", "a999"), kv("b", "b")]),
        (0, vec![kv("0", "zero"), kv("b", "b")]),
    ] {
        let inner = VecIter::from_parts(&parts).fail_after(40);
        let mut it = DbIterator::new(
            Box::new(inner),
            seq,
            0,
            None,
            None,
            ValueSource::for_tests(),
            None,
            Box::new(()),
        );
        assert_eq!(forward(&mut it), want, "as of {seq}");
        it.status().unwrap();
    }
}

#[test]
fn shadowed_or_invisible_entries_are_not_resolved() {
    let parts: &[Part<'_>] = &[
        (b"a", 1, ValueKind::ValueRef, b"h"),
        (b"a", 2, V, b"a2"),
        (b"b", 9, ValueKind::Merge, b"m"),
        (b"b", 3, V, b"b3"),
    ];
    let mut it = db_iter(parts, 5);
    let expected = vec![kv("a", "a2"), kv("b", "b3")];
    assert_eq!(forward(&mut it), expected);
    assert_eq!(backward(&mut it), expected);
    it.status().unwrap();
}

#[test]
fn malformed_keys_are_corruption() {
    let good = InternalKey::new(b"a", 1, V).encoded().to_vec();
    let mut bad_kind = InternalKey::new(b"b", 2, V).encoded().to_vec();
    let n = bad_kind.len();
    bad_kind[n - TAG_LEN] = 0x77;
    for bad in [b"short".to_vec(), bad_kind] {
        let inner = VecIter::raw(vec![(good.clone(), b"v".to_vec()), (bad, b"x".to_vec())]);
        let mut it = DbIterator::new(
            Box::new(inner),
            MAX_SEQ,
            0,
            None,
            None,
            ValueSource::for_tests(),
            None,
            Box::new(()),
        );
        let mut r = it.seek_to_first();
        while r.is_ok() && it.valid() {
            r = it.next();
        }
        let err = r.unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("malformed internal key"), "{err}");
        assert!(it.status().unwrap_err().is_corruption());
    }
}

#[test]
fn inner_errors_are_returned_and_recorded() {
    let inner = VecIter::from_parts(&[(b"a", 1, V, b"1"), (b"b", 2, V, b"2"), (b"c", 3, V, b"3")])
        .fail_after(2);
    let mut it = DbIterator::new(
        Box::new(inner),
        MAX_SEQ,
        0,
        None,
        None,
        ValueSource::for_tests(),
        None,
        Box::new(()),
    );
    it.seek_to_first().unwrap();
    it.next().unwrap();
    assert_eq!(it.key(), b"b");
    assert!(it.next().is_err());
    assert!(!it.valid());
    assert!(it.status().unwrap_err().is_corruption());
}

#[test]
fn is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<DbIterator>();
}

/// One write: sequence, kind, value.
type Version = (SeqNo, ValueKind, Vec<u8>);

/// Model: every version of every key.
struct Model {
    versions: BTreeMap<Vec<u8>, Vec<Version>>,
}

impl Model {
    fn visible(
        &self,
        seq: SeqNo,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.versions
            .iter()
            .filter(|(k, _)| {
                lower.is_none_or(|l| k.as_slice() >= l) && upper.is_none_or(|u| k.as_slice() < u)
            })
            .filter_map(|(k, vs)| {
                let newest = vs.iter().filter(|v| v.0 <= seq).max_by_key(|v| v.0)?;
                (newest.1 == V).then(|| (k.clone(), newest.2.clone()))
            })
            .collect()
    }
}

fn random_key(rng: &mut impl Rng) -> Vec<u8> {
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1 => format!("k{:02}x", rng.gen_range(0..30)).into_bytes(),
        _ => format!("k{:02}", rng.gen_range(0..30)).into_bytes(),
    }
}

/// Sources as the database would have them: a memtable and a few
/// overlapping sorted runs, merged.
fn build_sources(rng: &mut impl Rng, model: &mut Model) -> (Box<dyn InternalIterator>, SeqNo) {
    let mem = Arc::new(MemTable::new());
    let n_runs = rng.gen_range(1..4);
    let mut runs: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); n_runs];
    let n = rng.gen_range(0..400);
    for seq in 1..=n {
        let k = format!("k{:02}", rng.gen_range(0..30)).into_bytes();
        let kind = if rng.gen_bool(0.3) { D } else { V };
        let v = if kind == D {
            Vec::new()
        } else {
            format!("v{seq}").into_bytes()
        };
        // Newer writes tend to live in the memtable, as they would.
        if seq > n * 3 / 4 && rng.gen_bool(0.8) {
            mem.add(seq, kind, &k, &v);
        } else {
            let run = rng.gen_range(0..n_runs);
            runs[run].push((
                InternalKey::new(&k, seq, kind).encoded().to_vec(),
                v.clone(),
            ));
        }
        model.versions.entry(k).or_default().push((seq, kind, v));
    }
    let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(mem.iter())];
    children.extend(
        runs.into_iter()
            .map(|r| Box::new(VecIter::new(r)) as Box<dyn InternalIterator>),
    );
    (Box::new(MergingIterator::new(children)), n)
}

#[test]
fn random_ops_match_model() {
    for seed in 0..80u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut model = Model {
            versions: BTreeMap::new(),
        };
        let (inner, n) = build_sources(&mut rng, &mut model);
        let seq = if rng.gen_bool(0.3) {
            MAX_SEQ
        } else {
            rng.gen_range(0..=n + 1)
        };
        let lower = rng.gen_bool(0.4).then(|| random_key(&mut rng));
        let upper = rng.gen_bool(0.4).then(|| random_key(&mut rng));
        let visible = model.visible(seq, lower.as_deref(), upper.as_deref());
        let mut it = DbIterator::new(
            inner,
            seq,
            0,
            lower.clone(),
            upper.clone(),
            ValueSource::for_tests(),
            None,
            Box::new(()),
        );
        let ctx = format!("seed {seed} seq {seq} lower {lower:?} upper {upper:?}");

        let mut pos: Option<usize> = None;
        for step in 0..1000 {
            let op = rng.gen_range(0..8);
            match op {
                0 => {
                    it.seek_to_first().unwrap();
                    pos = (!visible.is_empty()).then_some(0);
                }
                1 => {
                    it.seek_to_last().unwrap();
                    pos = visible.len().checked_sub(1);
                }
                2 => {
                    let k = random_key(&mut rng);
                    it.seek(&k).unwrap();
                    let i = visible.partition_point(|e| e.0 < k);
                    pos = (i < visible.len()).then_some(i);
                }
                3 => {
                    let k = random_key(&mut rng);
                    it.seek_for_prev(&k).unwrap();
                    pos = visible.partition_point(|e| e.0 <= k).checked_sub(1);
                }
                4 | 5 if pos.is_some() => {
                    it.next().unwrap();
                    pos = pos.and_then(|p| (p + 1 < visible.len()).then_some(p + 1));
                }
                6 | 7 if pos.is_some() => {
                    it.prev().unwrap();
                    pos = pos.and_then(|p| p.checked_sub(1));
                }
                _ => continue,
            }
            assert_eq!(it.valid(), pos.is_some(), "{ctx} step {step} op {op}");
            if let Some(p) = pos {
                assert_eq!(it.key(), &visible[p].0[..], "{ctx} step {step} op {op}");
                assert_eq!(
                    it.value().unwrap(),
                    &visible[p].1[..],
                    "{ctx} step {step} op {op}"
                );
            }
        }
        it.status().unwrap();
    }
}
