//! Test helpers: an in-memory `InternalIterator` that can be told to fail,
//! and functions that drain iterators for comparison with a model.

use std::cmp::Ordering;

use crate::base::key::{self, InternalKey, SeqNo, ValueKind};
use crate::iter::InternalIterator;
use crate::Error;

/// A sorted `Vec` of (internal key, value) pairs behind the iterator trait.
pub(crate) struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
    /// Movements left before every movement fails; `None` never fails.
    ops_before_failure: Option<usize>,
}

impl VecIter {
    /// Sorts `entries` by internal key.
    pub(crate) fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        entries.sort_by(|a, b| key::compare(&a.0, &b.0));
        VecIter {
            entries,
            pos: None,
            ops_before_failure: None,
        }
    }

    /// Keeps `entries` in the given order, which may hold keys that are
    /// not well-formed internal keys (and so cannot be sorted).
    pub(crate) fn raw(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        VecIter {
            entries,
            pos: None,
            ops_before_failure: None,
        }
    }

    /// Builds entries from (user key, seq, kind, value).
    pub(crate) fn from_parts(parts: &[(&[u8], SeqNo, ValueKind, &[u8])]) -> Self {
        Self::new(
            parts
                .iter()
                .map(|(k, s, kind, v)| {
                    (
                        InternalKey::new(k, *s, *kind).encoded().to_vec(),
                        v.to_vec(),
                    )
                })
                .collect(),
        )
    }

    /// After `n` successful movements, every movement returns an error and
    /// leaves the iterator invalid.
    pub(crate) fn fail_after(mut self, n: usize) -> Self {
        self.ops_before_failure = Some(n);
        self
    }

    fn step(&mut self) -> crate::Result<()> {
        match self.ops_before_failure {
            Some(0) => {
                self.pos = None;
                Err(Error::corruption("<vec-iter>", 0, "injected failure"))
            }
            Some(n) => {
                self.ops_before_failure = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn at(&self, i: usize) -> Option<usize> {
        (i < self.entries.len()).then_some(i)
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) -> crate::Result<()> {
        self.step()?;
        self.pos = self.at(0);
        Ok(())
    }

    fn seek_to_last(&mut self) -> crate::Result<()> {
        self.step()?;
        self.pos = self.entries.len().checked_sub(1);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        self.step()?;
        let i = self
            .entries
            .partition_point(|e| key::compare(&e.0, target) == Ordering::Less);
        self.pos = self.at(i);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> crate::Result<()> {
        self.step()?;
        let i = self
            .entries
            .partition_point(|e| key::compare(&e.0, target) != Ordering::Greater);
        self.pos = i.checked_sub(1);
        Ok(())
    }

    fn next(&mut self) -> crate::Result<()> {
        self.step()?;
        self.pos = self.pos.and_then(|p| self.at(p + 1));
        Ok(())
    }

    fn prev(&mut self) -> crate::Result<()> {
        self.step()?;
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
        Ok(())
    }

    fn key(&self) -> &[u8] {
        let p = self.pos.expect("key() on invalid VecIter");
        &self.entries[p].0
    }

    fn value(&self) -> &[u8] {
        let p = self.pos.expect("value() on invalid VecIter");
        &self.entries[p].1
    }
}

/// All (key, value) pairs from the first entry forward.
pub(crate) fn collect_forward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

/// All (key, value) pairs from the last entry backward, in reverse order.
pub(crate) fn collect_backward(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    out
}

/// Drives `it` and a sorted model of it through the same random movements
/// and asserts that they agree after every step. Seek targets are internal
/// keys drawn from `targets`.
pub(crate) fn check_random_ops(
    it: &mut dyn InternalIterator,
    model: &[(Vec<u8>, Vec<u8>)],
    targets: &[Vec<u8>],
    rng: &mut impl rand::Rng,
    ops: usize,
) {
    let mut pos: Option<usize> = None;
    for step in 0..ops {
        let op = rng.gen_range(0..6);
        match op {
            0 => {
                it.seek_to_first().unwrap();
                pos = (!model.is_empty()).then_some(0);
            }
            1 => {
                it.seek_to_last().unwrap();
                pos = model.len().checked_sub(1);
            }
            2 | 3 if !targets.is_empty() => {
                let t = &targets[rng.gen_range(0..targets.len())];
                if op == 2 {
                    it.seek(t).unwrap();
                    let i = model.partition_point(|e| key::compare(&e.0, t) == Ordering::Less);
                    pos = (i < model.len()).then_some(i);
                } else {
                    it.seek_for_prev(t).unwrap();
                    let i = model.partition_point(|e| key::compare(&e.0, t) != Ordering::Greater);
                    pos = i.checked_sub(1);
                }
            }
            4 if pos.is_some() => {
                it.next().unwrap();
                pos = pos.and_then(|p| (p + 1 < model.len()).then_some(p + 1));
            }
            5 if pos.is_some() => {
                it.prev().unwrap();
                pos = pos.and_then(|p| p.checked_sub(1));
            }
            _ => continue,
        }
        assert_eq!(it.valid(), pos.is_some(), "step {step} op {op}");
        if let Some(p) = pos {
            assert_eq!(it.key(), &model[p].0[..], "step {step} op {op}");
            assert_eq!(it.value(), &model[p].1[..], "step {step} op {op}");
        }
    }
}
