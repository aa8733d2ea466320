//! Merges several sorted iterators into one sorted stream, as LevelDB's
//! MergingIterator: the current entry is the smallest (forward) or largest
//! (reverse) among the children's current entries, and a change of
//! direction re-positions every other child around the current key.

use std::cmp::Ordering;

use crate::base::key;
use crate::iter::InternalIterator;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    Forward,
    Reverse,
}

/// A linear scan picks the current child: the number of children (memtables,
/// level-0 files, one per deeper level) stays small, and a scan is cheaper
/// than keeping a heap ordered for so few.
pub(crate) struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Index into `children`; `None` when the iterator is not valid.
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
        }
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            best = match best {
                Some(b) if key::compare(child.key(), self.children[b].key()) != Ordering::Less => {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate().rev() {
            if !child.valid() {
                continue;
            }
            best = match best {
                Some(b)
                    if key::compare(child.key(), self.children[b].key()) != Ordering::Greater =>
                {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }

    /// Leaves the iterator invalid after a failure, so that no caller reads
    /// a half-positioned merge.
    fn guard(&mut self, r: crate::Result<()>) -> crate::Result<()> {
        if r.is_err() {
            self.current = None;
        }
        r
    }

    fn seek_all(
        &mut self,
        direction: Direction,
        mut f: impl FnMut(&mut dyn InternalIterator) -> crate::Result<()>,
    ) -> crate::Result<()> {
        self.current = None;
        for child in &mut self.children {
            f(child.as_mut())?;
        }
        self.direction = direction;
        match direction {
            Direction::Forward => self.find_smallest(),
            Direction::Reverse => self.find_largest(),
        }
        Ok(())
    }

    fn next_inner(&mut self) -> crate::Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction != Direction::Forward {
            // Every other child sits before the current key; move each to
            // the first entry after it.
            let target = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&target)?;
                if child.valid() && key::compare(child.key(), &target) == Ordering::Equal {
                    child.next()?;
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next()?;
        self.find_smallest();
        Ok(())
    }

    fn prev_inner(&mut self) -> crate::Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction != Direction::Reverse {
            // Every other child sits after the current key; move each to
            // the last entry before it.
            let target = self.children[cur].key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek_for_prev(&target)?;
                if child.valid() && key::compare(child.key(), &target) == Ordering::Equal {
                    child.prev()?;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev()?;
        self.find_largest();
        Ok(())
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> crate::Result<()> {
        let r = self.seek_all(Direction::Forward, |c| c.seek_to_first());
        self.guard(r)
    }

    fn seek_to_last(&mut self) -> crate::Result<()> {
        let r = self.seek_all(Direction::Reverse, |c| c.seek_to_last());
        self.guard(r)
    }

    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        let r = self.seek_all(Direction::Forward, |c| c.seek(target));
        self.guard(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> crate::Result<()> {
        let r = self.seek_all(Direction::Reverse, |c| c.seek_for_prev(target));
        self.guard(r)
    }

    fn next(&mut self) -> crate::Result<()> {
        let r = self.next_inner();
        self.guard(r)
    }

    fn prev(&mut self) -> crate::Result<()> {
        let r = self.prev_inner();
        self.guard(r)
    }

    fn key(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].key())
    }

    fn value(&self) -> &[u8] {
        self.current.map_or(&[], |c| self.children[c].value())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::base::key::{InternalKey, ValueKind};
    use crate::iter::testutil::{check_random_ops, collect_backward, collect_forward, VecIter};

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// Children, the sorted union of their entries, and seek targets.
    fn random_case(rng: &mut impl Rng) -> (Vec<Box<dyn InternalIterator>>, Entries, Vec<Vec<u8>>) {
        let n_children = rng.gen_range(0..6);
        let mut parts: Vec<Entries> = vec![Vec::new(); n_children];
        let mut model = Vec::new();
        let n = rng.gen_range(0..300);
        if n_children > 0 {
            for seq in 1..=n {
                let k = format!("k{}", rng.gen_range(0..40)).into_bytes();
                let kind = if rng.gen_bool(0.2) {
                    ValueKind::Deletion
                } else {
                    ValueKind::Value
                };
                let e = (
                    InternalKey::new(&k, seq, kind).encoded().to_vec(),
                    format!("v{seq}").into_bytes(),
                );
                parts[rng.gen_range(0..n_children)].push(e.clone());
                model.push(e);
            }
        }
        model.sort_by(|a, b| key::compare(&a.0, &b.0));
        let children = parts
            .into_iter()
            .map(|p| Box::new(VecIter::new(p)) as Box<dyn InternalIterator>)
            .collect();
        let targets: BTreeSet<Vec<u8>> = (0..60)
            .map(|_| {
                let k = format!("k{}", rng.gen_range(0..42)).into_bytes();
                let seq = rng.gen_range(0..=n + 1);
                if rng.gen_bool(0.5) {
                    InternalKey::for_seek(&k, seq).encoded().to_vec()
                } else {
                    InternalKey::new(&k, seq, ValueKind::Value)
                        .encoded()
                        .to_vec()
                }
            })
            .collect();
        (children, model, targets.into_iter().collect())
    }

    #[test]
    fn full_scans_match_model() {
        for seed in 0..30u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let (children, model, _) = random_case(&mut rng);
            let mut it = MergingIterator::new(children);
            assert_eq!(collect_forward(&mut it), model, "seed {seed}");
            let mut back = collect_backward(&mut it);
            back.reverse();
            assert_eq!(back, model, "seed {seed}");
        }
    }

    #[test]
    fn random_ops_with_direction_changes_match_model() {
        for seed in 0..60u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let (children, model, targets) = random_case(&mut rng);
            let mut it = MergingIterator::new(children);
            check_random_ops(&mut it, &model, &targets, &mut rng, 1000);
        }
    }

    #[test]
    fn child_errors_are_returned_and_invalidate() {
        let ok = VecIter::from_parts(&[(b"a", 1, ValueKind::Value, b"1")]);
        // The failing child allows its seek_to_first and one next.
        let failing = VecIter::from_parts(&[
            (b"b", 2, ValueKind::Value, b"2"),
            (b"c", 3, ValueKind::Value, b"3"),
            (b"d", 4, ValueKind::Value, b"4"),
        ])
        .fail_after(2);
        let mut it = MergingIterator::new(vec![Box::new(ok), Box::new(failing)]);
        it.seek_to_first().unwrap();
        assert_eq!(key::user_key(it.key()), b"a");
        it.next().unwrap();
        assert_eq!(key::user_key(it.key()), b"b");
        it.next().unwrap();
        assert_eq!(key::user_key(it.key()), b"c");
        let err = it.next().unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(!it.valid());
        assert!(it.seek(InternalKey::for_seek(b"a", 9).encoded()).is_err());
        assert!(!it.valid());
    }
}
