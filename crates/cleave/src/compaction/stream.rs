//! Which entries a compaction may drop, decided one internal key at a time
//! as the merged input streams past in sorted order.
//!
//! Snapshots split each user key's history into stripes: entries `older`
//! and `newer` share a stripe when no live snapshot `s` has `older.seq <= s
//! < newer.seq`, so no reader can see `older` without also seeing `newer`.
//! Hence:
//! 1. An entry is dropped when the previous (newer) entry of its user key is
//!    in the same stripe and hides it (a value or a deletion; a merge
//!    operand does not hide what it merges with).
//! 2. A deletion is dropped when every snapshot sees it (`seq <=` the oldest
//!    snapshot, or there are none) and no older entry of its key can exist
//!    below the output level. Older entries in this compaction are then
//!    dropped by rule 1.

use std::cmp::Ordering;

use crate::base::coding::DecodeError;
use crate::base::key::{self, ValueKind};
use crate::base::SeqNo;

/// The stripe of an entry of sequence `seq` among live `snapshots`
/// (ascending): 0 for those every snapshot sees.
pub(crate) fn stripe(snapshots: &[SeqNo], seq: SeqNo) -> usize {
    snapshots.partition_point(|&s| s < seq)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Keep,
    /// Hidden by a newer entry of the same key in the same stripe.
    Shadowed,
    /// A deletion no reader needs: nothing older survives for it to hide.
    ObsoleteDeletion,
}

impl Decision {
    pub(crate) fn is_keep(self) -> bool {
        self == Decision::Keep
    }
}

/// Dropped entries by reason, for statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DropStats {
    pub kept: u64,
    pub shadowed: u64,
    pub obsolete_deletions: u64,
}

pub(crate) struct DropRules {
    /// Live snapshot seqs, ascending.
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    /// The previous entry: user key, seq, its stripe and whether it hides
    /// older entries of its key.
    prev: Option<(Vec<u8>, SeqNo, usize, bool)>,
    stats: DropStats,
}

impl DropRules {
    /// `snapshots` need not be sorted or unique.
    pub(crate) fn new(mut snapshots: Vec<SeqNo>, bottommost: bool) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        DropRules {
            snapshots,
            bottommost,
            prev: None,
            stats: DropStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> DropStats {
        self.stats
    }

    /// Live snapshots, ascending.
    pub(crate) fn snapshots(&self) -> &[SeqNo] {
        &self.snapshots
    }

    pub(crate) fn bottommost(&self) -> bool {
        self.bottommost
    }

    /// Decides the fate of `ikey`, the next internal key in sorted order.
    /// `key_may_exist_below(user_key)` is asked only for deletions that are
    /// otherwise droppable (and never when `bottommost`). Malformed or
    /// out-of-order keys (damaged input) are an error.
    pub(crate) fn decide(
        &mut self,
        ikey: &[u8],
        key_may_exist_below: impl FnOnce(&[u8]) -> bool,
    ) -> Result<Decision, DecodeError> {
        let parsed = key::parse(ikey).ok_or(DecodeError("malformed internal key"))?;
        let stripe = stripe(&self.snapshots, parsed.seq);
        let same_key = match &self.prev {
            Some((user_key, seq, _, _)) => match parsed.user_key.cmp(user_key) {
                Ordering::Less => return Err(DecodeError("internal keys out of order")),
                Ordering::Equal if parsed.seq >= *seq => {
                    return Err(DecodeError("internal keys out of order"))
                }
                Ordering::Equal => true,
                Ordering::Greater => false,
            },
            None => false,
        };
        let shadowed = same_key
            && self
                .prev
                .as_ref()
                .is_some_and(|&(_, _, prev_stripe, hides)| hides && prev_stripe == stripe);
        let hides = parsed.kind != ValueKind::Merge;
        match &mut self.prev {
            Some(p) if same_key => {
                p.1 = parsed.seq;
                p.2 = stripe;
                // A run hidden by a newer entry stays hidden to the stripe's end.
                p.3 = hides || shadowed;
            }
            _ => self.prev = Some((parsed.user_key.to_vec(), parsed.seq, stripe, hides)),
        }
        let decision = if shadowed {
            Decision::Shadowed
        } else if parsed.kind == ValueKind::Deletion
            && stripe == 0
            && (self.bottommost || !key_may_exist_below(parsed.user_key))
        {
            Decision::ObsoleteDeletion
        } else {
            Decision::Keep
        };
        match decision {
            Decision::Keep => self.stats.kept += 1,
            Decision::Shadowed => self.stats.shadowed += 1,
            Decision::ObsoleteDeletion => self.stats.obsolete_deletions += 1,
        }
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::base::key::MAX_SEQ;
    use crate::base::InternalKey;

    /// What a reader at `snap` sees for `key`: the newest entry with seq <=
    /// snap among `entries` (sorted by internal key), `None` if a deletion
    /// or nothing.
    fn visible(entries: &[(Vec<u8>, SeqNo, ValueKind)], key: &[u8], snap: SeqNo) -> Option<SeqNo> {
        let e = entries
            .iter()
            .filter(|(k, s, _)| k == key && *s <= snap)
            .max_by_key(|(_, s, _)| *s)?;
        (e.2 != ValueKind::Deletion).then_some(e.1)
    }

    #[test]
    fn drop_rules_preserve_every_snapshot_view() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut dropped = DropStats::default();
        for _ in 0..3000 {
            let keys: Vec<Vec<u8>> = (0..3).map(|i| vec![b'a' + i]).collect();
            // Below the output level: old entries (seqs 1..=10) for some keys.
            let mut below = Vec::new();
            for k in &keys {
                if rng.gen_bool(0.4) {
                    let kind = if rng.gen_bool(0.3) {
                        ValueKind::Deletion
                    } else {
                        ValueKind::Value
                    };
                    below.push((k.clone(), rng.gen_range(1..=10), kind));
                }
            }
            // The compaction's input: unique seqs above 10.
            let mut seqs: Vec<SeqNo> = (11..40).collect();
            let n = rng.gen_range(0..12);
            let mut input = Vec::new();
            for _ in 0..n {
                let i = rng.gen_range(0..seqs.len());
                let seq = seqs.swap_remove(i);
                let k = keys[rng.gen_range(0..keys.len())].clone();
                let kind = if rng.gen_bool(0.4) {
                    ValueKind::Deletion
                } else {
                    ValueKind::Value
                };
                input.push((k, seq, kind));
            }
            input.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            let snapshots: Vec<SeqNo> = (0..rng.gen_range(0..4))
                .map(|_| rng.gen_range(5..42))
                .collect();
            let bottommost = below.is_empty() && rng.gen_bool(0.5);
            let mut rules = DropRules::new(snapshots.clone(), bottommost);
            let mut kept = Vec::new();
            for e in &input {
                let ikey = InternalKey::new(&e.0, e.1, e.2);
                let d = rules
                    .decide(ikey.encoded(), |k| below.iter().any(|b| b.0 == k))
                    .unwrap();
                if d.is_keep() {
                    kept.push(e.clone());
                }
            }
            let before: Vec<_> = input.iter().chain(&below).cloned().collect();
            let after: Vec<_> = kept.iter().chain(&below).cloned().collect();
            for snap in snapshots.iter().copied().chain([MAX_SEQ]) {
                for k in &keys {
                    assert_eq!(
                        visible(&before, k, snap),
                        visible(&after, k, snap),
                        "key {k:?} at {snap}: input {input:?} below {below:?} snapshots {snapshots:?} kept {kept:?}"
                    );
                }
            }
            let s = rules.stats();
            assert_eq!(
                s.kept + s.shadowed + s.obsolete_deletions,
                input.len() as u64
            );
            dropped.shadowed += s.shadowed;
            dropped.obsolete_deletions += s.obsolete_deletions;
        }
        assert!(
            dropped.shadowed > 100 && dropped.obsolete_deletions > 100,
            "{dropped:?}"
        );
    }

    #[test]
    fn stripes_and_tombstones_by_example() {
        let run = |entries: &[(&str, SeqNo, ValueKind)], snaps: Vec<SeqNo>, bottom: bool| {
            let mut r = DropRules::new(snaps, bottom);
            entries
                .iter()
                .map(|(k, s, kind)| {
                    let ik = InternalKey::new(k.as_bytes(), *s, *kind);
                    r.decide(ik.encoded(), |_| true).unwrap()
                })
                .collect::<Vec<_>>()
        };
        use Decision::*;
        use ValueKind::{Deletion as D, Merge as M, Value as V};
        // No snapshots: only the newest survives.
        assert_eq!(
            run(&[("a", 9, V), ("a", 5, V)], vec![], false),
            [Keep, Shadowed]
        );
        // A snapshot at 5 still sees a@5.
        assert_eq!(
            run(&[("a", 9, V), ("a", 5, V)], vec![5], false),
            [Keep, Keep]
        );
        assert_eq!(
            run(&[("a", 9, V), ("a", 5, V)], vec![4], false),
            [Keep, Shadowed]
        );
        // A deletion is kept while data may exist below, dropped at the bottom.
        assert_eq!(
            run(&[("a", 9, D), ("a", 5, V)], vec![], false),
            [Keep, Shadowed]
        );
        assert_eq!(
            run(&[("a", 9, D), ("a", 5, V)], vec![], true),
            [ObsoleteDeletion, Shadowed]
        );
        // ... but not while a snapshot older than it exists.
        assert_eq!(run(&[("a", 9, D)], vec![7], true), [Keep]);
        // A merge operand does not hide what it merges with.
        assert_eq!(
            run(&[("a", 9, M), ("a", 5, V), ("a", 3, V)], vec![], false),
            [Keep, Keep, Shadowed]
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut r = DropRules::new(vec![], false);
        assert!(r.decide(b"short", |_| false).is_err());
        let b = InternalKey::new(b"b", 5, ValueKind::Value);
        let a = InternalKey::new(b"a", 5, ValueKind::Value);
        assert!(r.decide(b.encoded(), |_| false).is_ok());
        assert!(r.decide(a.encoded(), |_| false).is_err());
        assert!(r.decide(b.encoded(), |_| false).is_err(), "same seq twice");
    }
}
