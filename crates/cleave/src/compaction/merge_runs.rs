//! Merge operands as a flush or compaction streams them. A run of one
//! key's operands within a snapshot stripe is full-merged onto the entry
//! beneath it in the same stripe (a value, or a deletion: nothing), or onto
//! nothing when no older entry of the key can exist; otherwise partial
//! merges shorten it. The result is one value entry carrying the newest
//! operand's sequence number, which hides the older entries of its stripe
//! as a put would.
//!
//! A run the operator refuses to merge passes unchanged, so that one bad
//! key fails its reads (`Error::MergeFailed`) but not the background work.

use std::collections::VecDeque;
use std::sync::Arc;

use super::stream::stripe;
use crate::base::key::{self, InternalKey, SeqNo, ValueKind};
use crate::base::InternalIterator;
use crate::error::Result;
use crate::merge::MergeOperator;

/// Reads the value a handle names, for a separated value beneath a run:
/// `(user key, seq, handle)`.
pub(crate) type ReadBase<'a> = &'a dyn Fn(&[u8], SeqNo, &[u8]) -> Result<Vec<u8>>;

/// Merge work done, for statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MergeStats {
    /// Runs full-merged into a value.
    pub full: u64,
    /// Operands removed by partial merges.
    pub partial: u64,
    /// Runs the operator refused, passed on unmerged.
    pub failed: u64,
}

/// An entry a run produced.
struct Produced {
    ikey: Vec<u8>,
    value: Vec<u8>,
    merged: bool,
}

/// What ended a run of operands.
enum End {
    /// The key's entries in the input ended.
    Key,
    /// An older stripe begins.
    Stripe,
    /// An entry that is not an operand, in the same stripe.
    Base { ikey: Vec<u8>, value: Vec<u8> },
}

/// The input of a flush or compaction with its merge operands merged.
pub(crate) struct MergeRuns<'a> {
    input: &'a mut dyn InternalIterator,
    op: Option<Arc<dyn MergeOperator>>,
    /// Live snapshots, ascending.
    snapshots: &'a [SeqNo],
    /// Whether no older entry of a key can exist outside the input.
    nothing_below: &'a dyn Fn(&[u8]) -> bool,
    /// None: a separated value beneath a run stays, unmerged (a flush,
    /// whose handles point into value logs).
    read_base: Option<ReadBase<'a>>,
    /// Entries a run produced, the current one first.
    out: VecDeque<Produced>,
    /// The entry passed before the current one: its user key, stripe, and
    /// whether it hides older entries of its stripe.
    prev: Option<(Vec<u8>, usize, bool)>,
    stats: MergeStats,
}

impl<'a> MergeRuns<'a> {
    /// Positions at the first entry of `input`, which must be positioned.
    pub(crate) fn new(
        input: &'a mut dyn InternalIterator,
        op: Option<Arc<dyn MergeOperator>>,
        snapshots: &'a [SeqNo],
        nothing_below: &'a dyn Fn(&[u8]) -> bool,
        read_base: Option<ReadBase<'a>>,
    ) -> Result<Self> {
        debug_assert!(snapshots.windows(2).all(|w| w[0] < w[1]));
        let mut runs = MergeRuns {
            input,
            op,
            snapshots,
            nothing_below,
            read_base,
            out: VecDeque::new(),
            prev: None,
            stats: MergeStats::default(),
        };
        runs.settle()?;
        Ok(runs)
    }

    pub(crate) fn valid(&self) -> bool {
        !self.out.is_empty() || self.input.valid()
    }

    pub(crate) fn key(&self) -> &[u8] {
        self.out
            .front()
            .map_or_else(|| self.input.key(), |p| &p.ikey)
    }

    pub(crate) fn value(&self) -> &[u8] {
        self.out
            .front()
            .map_or_else(|| self.input.value(), |p| &p.value)
    }

    /// Whether the current entry is the value a full merge made.
    pub(crate) fn merged(&self) -> bool {
        self.out.front().is_some_and(|p| p.merged)
    }

    pub(crate) fn stats(&self) -> MergeStats {
        self.stats
    }

    pub(crate) fn next(&mut self) -> Result<()> {
        if self.op.is_some() {
            self.note_current();
        }
        if self.out.pop_front().is_none() {
            self.input.next()?;
        }
        self.settle()
    }

    /// Remembers the current entry as `prev`, for the next to know
    /// whether it is hidden: by a value or deletion before it in its
    /// stripe, as the drop rules see it.
    fn note_current(&mut self) {
        let Some(parsed) = key::parse(self.key()) else {
            return;
        };
        let s = stripe(self.snapshots, parsed.seq);
        let hides = parsed.kind != ValueKind::Merge;
        let same_key = self
            .prev
            .as_ref()
            .is_some_and(|(k, _, _)| k.as_slice() == parsed.user_key);
        let new_key = (!same_key).then(|| parsed.user_key.to_vec());
        match (new_key, &mut self.prev) {
            (None, Some(prev)) => {
                // A run hidden by a newer entry stays hidden to the
                // stripe's end.
                prev.2 = hides || (prev.2 && prev.1 == s);
                prev.1 = s;
            }
            (new_key, prev) => *prev = new_key.map(|k| (k, s, hides)),
        }
    }

    /// Collapses the run the input is at, unless entries a run produced
    /// are still to pass, or the run is hidden anyway.
    fn settle(&mut self) -> Result<()> {
        if !self.out.is_empty() || !self.input.valid() {
            return Ok(());
        }
        let Some(op) = self.op.clone() else {
            return Ok(());
        };
        let Some(parsed) = key::parse(self.input.key()) else {
            // Damaged input: the drop rules report it.
            return Ok(());
        };
        if parsed.kind != ValueKind::Merge {
            return Ok(());
        }
        let run_stripe = stripe(self.snapshots, parsed.seq);
        let hidden = self.prev.as_ref().is_some_and(|(k, s, hides)| {
            *hides && *s == run_stripe && k.as_slice() == parsed.user_key
        });
        if hidden {
            return Ok(());
        }
        let user_key = parsed.user_key.to_vec();
        // Newest first, as the input holds them.
        let mut run: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let end = loop {
            run.push((self.input.key().to_vec(), self.input.value().to_vec()));
            self.input.next()?;
            if !self.input.valid() {
                break End::Key;
            }
            let ikey = self.input.key();
            let Some(p) = key::parse(ikey) else {
                break End::Key;
            };
            if p.user_key != user_key.as_slice() {
                break End::Key;
            }
            if stripe(self.snapshots, p.seq) != run_stripe {
                break End::Stripe;
            }
            if p.kind != ValueKind::Merge {
                let base = End::Base {
                    ikey: ikey.to_vec(),
                    value: self.input.value().to_vec(),
                };
                self.input.next()?;
                break base;
            }
        };
        let newest_seq = key::seq(&run[0].0);
        // What the run merges onto, if it can be merged whole.
        let base: Option<Option<Vec<u8>>> = match &end {
            End::Base { ikey, value } => match key::tag(ikey) as u8 {
                t if t == ValueKind::Value as u8 => Some(Some(value.clone())),
                t if t == ValueKind::Deletion as u8 => Some(None),
                // The operands outlive the value's expiry (a read after it
                // merges them onto nothing): a merged value could carry
                // neither the expiry nor none.
                t if t == ValueKind::ExpiringValue as u8
                    || t == ValueKind::ExpiringValueRef as u8 =>
                {
                    None
                }
                _ => match self.read_base {
                    Some(read) => Some(Some(read(&user_key, key::seq(ikey), value)?)),
                    None => None,
                },
            },
            End::Key if (self.nothing_below)(&user_key) => Some(None),
            End::Key | End::Stripe => None,
        };
        if let Some(base) = base {
            let operands: Vec<&[u8]> = run.iter().rev().map(|(_, v)| v.as_slice()).collect();
            match op.full_merge(&user_key, base.as_deref(), &operands) {
                Ok(value) => {
                    self.stats.full += 1;
                    self.out.push_back(Produced {
                        ikey: InternalKey::new(&user_key, newest_seq, ValueKind::Value)
                            .encoded()
                            .to_vec(),
                        value,
                        merged: true,
                    });
                    return Ok(());
                }
                Err(_) => self.stats.failed += 1,
            }
        } else {
            run = self.partial_merge(op.as_ref(), &user_key, run);
        }
        for (ikey, value) in run {
            self.out.push_back(Produced {
                ikey,
                value,
                merged: false,
            });
        }
        if let End::Base { ikey, value } = end {
            self.out.push_back(Produced {
                ikey,
                value,
                merged: false,
            });
        }
        Ok(())
    }

    /// `run` (newest first) with adjacent operands the operator combines
    /// made one, each carrying the newest sequence number it covers.
    fn partial_merge(
        &mut self,
        op: &dyn MergeOperator,
        user_key: &[u8],
        run: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let before = run.len();
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(before);
        // Oldest first, folding each newer operand into the one before.
        for (ikey, value) in run.into_iter().rev() {
            if let Some(last) = out.last_mut() {
                if let Some(combined) = op.partial_merge(user_key, &last.1, &value) {
                    *last = (ikey, combined);
                    continue;
                }
            }
            out.push((ikey, value));
        }
        self.stats.partial += (before - out.len()) as u64;
        out.reverse();
        out
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::base::key::MAX_SEQ;
    use crate::compaction::stream::DropRules;
    use crate::iter::testutil::VecIter;
    use crate::merge::{full_merge, Append};

    type Entry = (Vec<u8>, SeqNo, ValueKind, Vec<u8>);

    /// What a reader at `snap` gets for `key` from `entries`: the newest
    /// entries of seq <= snap merged onto the first that is not an operand.
    fn read(entries: &[Entry], key: &[u8], snap: SeqNo) -> Option<Vec<u8>> {
        let mut mine: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.0 == key && e.1 <= snap)
            .collect();
        mine.sort_by_key(|e| std::cmp::Reverse(e.1));
        let mut operands: Vec<&[u8]> = Vec::new();
        let mut base = None;
        for e in mine {
            match e.2 {
                ValueKind::Merge => operands.push(&e.3),
                ValueKind::Deletion => break,
                _ => {
                    base = Some(e.3.as_slice());
                    break;
                }
            }
        }
        if operands.is_empty() {
            return base.map(<[u8]>::to_vec);
        }
        operands.reverse();
        let op: Arc<dyn MergeOperator> = Arc::new(Append::default());
        Some(full_merge(Some(&op), key, base, &operands).unwrap())
    }

    /// Merging runs, then the drop rules, change no snapshot's view, for
    /// any history, snapshots and entries below the output level.
    #[test]
    fn merged_runs_preserve_every_snapshot_view() {
        let mut rng = StdRng::seed_from_u64(11);
        let op: Arc<dyn MergeOperator> = Arc::new(Append::default());
        let mut totals = MergeStats::default();
        for round in 0..4000 {
            let keys: Vec<Vec<u8>> = (0..3).map(|i| vec![b'a' + i]).collect();
            let kind = |rng: &mut StdRng| match rng.gen_range(0..10) {
                0..=1 => ValueKind::Deletion,
                2..=4 => ValueKind::Value,
                _ => ValueKind::Merge,
            };
            let mut below: Vec<Entry> = Vec::new();
            for k in &keys {
                for s in 1..=rng.gen_range(0..3) {
                    if rng.gen_bool(0.5) {
                        below.push((
                            k.clone(),
                            s * 3,
                            kind(&mut rng),
                            format!("b{s}").into_bytes(),
                        ));
                    }
                }
            }
            let mut seqs: Vec<SeqNo> = (11..40).collect();
            let mut input: Vec<Entry> = Vec::new();
            for _ in 0..rng.gen_range(0..14) {
                let seq = seqs.swap_remove(rng.gen_range(0..seqs.len()));
                let k = keys[rng.gen_range(0..keys.len())].clone();
                input.push((k, seq, kind(&mut rng), format!("v{seq}").into_bytes()));
            }
            let snapshots: Vec<SeqNo> = {
                let mut s: Vec<SeqNo> = (0..rng.gen_range(0..4))
                    .map(|_| rng.gen_range(5..42))
                    .collect();
                s.sort_unstable();
                s.dedup();
                s
            };
            let bottommost = below.is_empty() && rng.gen_bool(0.5);
            let mut it = VecIter::new(
                input
                    .iter()
                    .map(|(k, s, kind, v)| {
                        (InternalKey::new(k, *s, *kind).encoded().to_vec(), v.clone())
                    })
                    .collect(),
            );
            it.seek_to_first().unwrap();
            let nothing_below = |k: &[u8]| bottommost || !below.iter().any(|b| b.0 == k);
            let mut runs =
                MergeRuns::new(&mut it, Some(op.clone()), &snapshots, &nothing_below, None)
                    .unwrap();
            let mut rules = DropRules::new(snapshots.clone(), bottommost);
            let mut kept: Vec<Entry> = Vec::new();
            while runs.valid() {
                let decision = rules
                    .decide(runs.key(), |k| below.iter().any(|b| b.0 == k))
                    .unwrap();
                if decision.is_keep() {
                    let p = key::parse(runs.key()).unwrap();
                    kept.push((p.user_key.to_vec(), p.seq, p.kind, runs.value().to_vec()));
                }
                runs.next().unwrap();
            }
            let s = runs.stats();
            totals.full += s.full;
            totals.partial += s.partial;
            let before: Vec<Entry> = input.iter().chain(&below).cloned().collect();
            let after: Vec<Entry> = kept.iter().chain(&below).cloned().collect();
            for snap in snapshots.iter().copied().chain([MAX_SEQ]) {
                for k in &keys {
                    assert_eq!(
                        read(&before, k, snap),
                        read(&after, k, snap),
                        "round {round} key {k:?} at {snap}: input {input:?} below {below:?} snapshots {snapshots:?} bottommost {bottommost} kept {kept:?}"
                    );
                }
            }
        }
        assert!(totals.full > 500 && totals.partial > 500, "{totals:?}");
    }

    /// Operands a newer value hides are not merged: their separated base
    /// is never read (a dead value, whose read could only fail the job).
    #[test]
    fn hidden_runs_read_no_base() {
        let op: Arc<dyn MergeOperator> = Arc::new(Append::default());
        let parts: [(&[u8], SeqNo, ValueKind, &[u8]); 5] = [
            (b"k", 10, ValueKind::Value, b"new"),
            (b"k", 9, ValueKind::Merge, b"a"),
            (b"k", 8, ValueKind::Merge, b"b"),
            (b"k", 7, ValueKind::Merge, b"c"),
            (b"k", 6, ValueKind::ValueRef, b"handle"),
        ];
        for snapshots in [vec![], vec![8]] {
            let mut it = VecIter::from_parts(&parts);
            it.seek_to_first().unwrap();
            let reads = std::cell::Cell::new(0);
            let read = |_: &[u8], _: SeqNo, _: &[u8]| -> Result<Vec<u8>> {
                reads.set(reads.get() + 1);
                Ok(b"base".to_vec())
            };
            let nothing_below = |_: &[u8]| true;
            let mut runs = MergeRuns::new(
                &mut it,
                Some(op.clone()),
                &snapshots,
                &nothing_below,
                Some(&read),
            )
            .unwrap();
            let mut out = Vec::new();
            while runs.valid() {
                let p = key::parse(runs.key()).unwrap();
                out.push((p.seq, p.kind, runs.value().to_vec()));
                runs.next().unwrap();
            }
            if snapshots.is_empty() {
                assert_eq!(reads.get(), 0, "every operand is hidden by @10");
                assert_eq!(runs.stats(), MergeStats::default());
                assert_eq!(out.len(), 5);
            } else {
                // A snapshot at 8 sees @8 and @7 over the base: merged;
                // @9, hidden, passes for the drop rules to drop.
                assert_eq!(reads.get(), 1);
                assert_eq!(out[1], (9, ValueKind::Merge, b"a".to_vec()));
                assert_eq!(out[2..], [(8, ValueKind::Value, b"base,c,b".to_vec())]);
            }
        }
    }

    /// A run the operator refuses passes unchanged, its base included.
    #[test]
    fn a_refused_run_passes_unchanged() {
        let op: Arc<dyn MergeOperator> = Arc::new(crate::merge::U64Add);
        let one = 1u64.to_le_bytes();
        let parts: [(&[u8], SeqNo, ValueKind, &[u8]); 3] = [
            (b"k", 9, ValueKind::Merge, &one),
            (b"k", 8, ValueKind::Merge, &one),
            (b"k", 7, ValueKind::Value, b"abc"),
        ];
        let mut it = VecIter::from_parts(&parts);
        it.seek_to_first().unwrap();
        let nothing_below = |_: &[u8]| true;
        let mut runs = MergeRuns::new(&mut it, Some(op), &[], &nothing_below, None).unwrap();
        let mut seen = Vec::new();
        while runs.valid() {
            let p = key::parse(runs.key()).unwrap();
            seen.push((p.seq, p.kind, runs.value().to_vec(), runs.merged()));
            runs.next().unwrap();
        }
        assert_eq!(
            seen,
            vec![
                (9, ValueKind::Merge, one.to_vec(), false),
                (8, ValueKind::Merge, one.to_vec(), false),
                (7, ValueKind::Value, b"abc".to_vec(), false),
            ]
        );
        assert_eq!(runs.stats().failed, 1);
    }
}
