//! Concatenates the sorted, non-overlapping files of one level (L1 and
//! deeper), opening each file only when the iteration reaches it.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::base::key;
use crate::iter::InternalIterator;
use crate::manifest::file_meta::FileMeta;

/// Opens an iterator over one file; supplied by the caller so that this
/// module needs no table cache.
pub(crate) type TableOpener =
    Arc<dyn Fn(&FileMeta) -> crate::Result<Box<dyn InternalIterator>> + Send + Sync>;

pub(crate) struct LevelIterator {
    /// Sorted by key range; ranges do not overlap.
    files: Vec<Arc<FileMeta>>,
    open: TableOpener,
    /// Index in `files` of the file `iter` reads.
    index: usize,
    /// `None` before the first seek, after a seek outside every file, and
    /// after an error.
    iter: Option<Box<dyn InternalIterator>>,
}

impl LevelIterator {
    /// REQUIRES: `files` sorted by `smallest`, with non-overlapping ranges.
    pub(crate) fn new(files: Vec<Arc<FileMeta>>, open: TableOpener) -> Self {
        debug_assert!(files
            .windows(2)
            .all(
                |w| key::compare(w[0].largest.encoded(), w[1].smallest.encoded()) == Ordering::Less
            ));
        LevelIterator {
            files,
            open,
            index: 0,
            iter: None,
        }
    }

    /// Makes `iter` read file `index`, reusing it if it already does.
    /// Returns `Ok(None)` if there is no such file.
    fn open_file(&mut self, index: usize) -> crate::Result<Option<&mut dyn InternalIterator>> {
        if self.iter.is_none() || self.index != index {
            self.iter = None;
            let Some(file) = self.files.get(index) else {
                return Ok(None);
            };
            self.iter = Some((self.open)(file)?);
            self.index = index;
        }
        Ok(match self.iter.as_mut() {
            Some(it) => Some(it.as_mut()),
            None => None,
        })
    }

    /// Moves forward over files until an entry is found or files run out.
    fn skip_empty_forward(&mut self) -> crate::Result<()> {
        while self.iter.as_ref().is_some_and(|it| !it.valid()) {
            let next = self.index + 1;
            if next >= self.files.len() {
                return Ok(());
            }
            if let Some(it) = self.open_file(next)? {
                it.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves backward over files until an entry is found or files run out.
    fn skip_empty_backward(&mut self) -> crate::Result<()> {
        while self.iter.as_ref().is_some_and(|it| !it.valid()) {
            let Some(prev) = self.index.checked_sub(1) else {
                return Ok(());
            };
            if let Some(it) = self.open_file(prev)? {
                it.seek_to_last()?;
            }
        }
        Ok(())
    }

    fn seek_to_first_inner(&mut self) -> crate::Result<()> {
        if let Some(it) = self.open_file(0)? {
            it.seek_to_first()?;
        }
        self.skip_empty_forward()
    }

    fn seek_to_last_inner(&mut self) -> crate::Result<()> {
        let Some(last) = self.files.len().checked_sub(1) else {
            self.iter = None;
            return Ok(());
        };
        if let Some(it) = self.open_file(last)? {
            it.seek_to_last()?;
        }
        self.skip_empty_backward()
    }

    fn seek_inner(&mut self, target: &[u8]) -> crate::Result<()> {
        // The first file whose largest key is ≥ target is the only one that
        // can hold the first entry ≥ target.
        let index = self
            .files
            .partition_point(|f| key::compare(f.largest.encoded(), target) == Ordering::Less);
        match self.open_file(index)? {
            Some(it) => it.seek(target)?,
            None => self.iter = None,
        }
        self.skip_empty_forward()
    }

    fn seek_for_prev_inner(&mut self, target: &[u8]) -> crate::Result<()> {
        // The last file whose smallest key is ≤ target.
        let after = self
            .files
            .partition_point(|f| key::compare(f.smallest.encoded(), target) != Ordering::Greater);
        let Some(index) = after.checked_sub(1) else {
            self.iter = None;
            return Ok(());
        };
        if let Some(it) = self.open_file(index)? {
            it.seek_for_prev(target)?;
        }
        self.skip_empty_backward()
    }

    fn next_inner(&mut self) -> crate::Result<()> {
        if let Some(it) = self.iter.as_mut() {
            it.next()?;
        }
        self.skip_empty_forward()
    }

    fn prev_inner(&mut self) -> crate::Result<()> {
        if let Some(it) = self.iter.as_mut() {
            it.prev()?;
        }
        self.skip_empty_backward()
    }

    /// Drops the file iterator after a failure: its position is unknown.
    fn guard(&mut self, r: crate::Result<()>) -> crate::Result<()> {
        if r.is_err() {
            self.iter = None;
        }
        r
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.iter.as_ref().is_some_and(|it| it.valid())
    }

    fn seek_to_first(&mut self) -> crate::Result<()> {
        let r = self.seek_to_first_inner();
        self.guard(r)
    }

    fn seek_to_last(&mut self) -> crate::Result<()> {
        let r = self.seek_to_last_inner();
        self.guard(r)
    }

    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        let r = self.seek_inner(target);
        self.guard(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> crate::Result<()> {
        let r = self.seek_for_prev_inner(target);
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
        self.iter.as_ref().map_or(&[], |it| it.key())
    }

    fn value(&self) -> &[u8] {
        self.iter.as_ref().map_or(&[], |it| it.value())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::base::key::{InternalKey, ValueKind};
    use crate::base::FileNumber;
    use crate::iter::testutil::{check_random_ops, collect_backward, collect_forward, VecIter};

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    fn meta(number: u64, entries: &Entries) -> Arc<FileMeta> {
        let first = entries.first().map(|e| e.0.clone()).unwrap();
        let last = entries.last().map(|e| e.0.clone()).unwrap();
        Arc::new(FileMeta {
            number: FileNumber(number),
            size: 0,
            smallest: InternalKey::from_encoded(first),
            largest: InternalKey::from_encoded(last),
            smallest_seq: 0,
            largest_seq: 0,
            num_entries: entries.len() as u64,
            ..FileMeta::default()
        })
    }

    /// Files over `model` cut at random points, with an opener that serves
    /// them from memory and counts opens.
    fn level(
        model: &Entries,
        rng: &mut impl Rng,
        fail_file: Option<u64>,
    ) -> (LevelIterator, Arc<AtomicUsize>) {
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < model.len() {
            let len = rng.gen_range(1..=8).min(model.len() - start);
            chunks.push(model[start..start + len].to_vec());
            start += len;
        }
        level_from_chunks(chunks, fail_file)
    }

    fn level_from_chunks(
        chunks: Vec<Entries>,
        fail_file: Option<u64>,
    ) -> (LevelIterator, Arc<AtomicUsize>) {
        let mut files = Vec::new();
        let mut contents: HashMap<u64, Entries> = HashMap::new();
        for chunk in chunks {
            let number = files.len() as u64 + 1;
            files.push(meta(number, &chunk));
            contents.insert(number, chunk);
        }
        let opens = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&opens);
        let open: TableOpener = Arc::new(move |f: &FileMeta| {
            counter.fetch_add(1, AtomicOrdering::Relaxed);
            if Some(f.number.0) == fail_file {
                return Err(crate::Error::corruption("<test>", 0, "cannot open"));
            }
            let entries = contents.get(&f.number.0).cloned().unwrap_or_default();
            Ok(Box::new(VecIter::new(entries)) as Box<dyn InternalIterator>)
        });
        (LevelIterator::new(files, open), opens)
    }

    fn random_model(rng: &mut impl Rng) -> Entries {
        let n = rng.gen_range(0..150);
        let mut model: Entries = (1..=n)
            .map(|seq| {
                let k = format!("k{:03}", rng.gen_range(0..100)).into_bytes();
                (
                    InternalKey::new(&k, seq, ValueKind::Value)
                        .encoded()
                        .to_vec(),
                    format!("v{seq}").into_bytes(),
                )
            })
            .collect();
        model.sort_by(|a, b| key::compare(&a.0, &b.0));
        model
    }

    #[test]
    fn scans_and_random_ops_match_model() {
        for seed in 0..60u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let model = random_model(&mut rng);
            let (mut it, _) = level(&model, &mut rng, None);
            assert_eq!(collect_forward(&mut it), model, "seed {seed}");
            let mut back = collect_backward(&mut it);
            back.reverse();
            assert_eq!(back, model, "seed {seed}");

            let targets: BTreeSet<Vec<u8>> = (0..60)
                .map(|_| {
                    let k = format!("k{:03}", rng.gen_range(0..102)).into_bytes();
                    InternalKey::for_seek(&k, rng.gen_range(0..160))
                        .encoded()
                        .to_vec()
                })
                .chain(model.iter().take(5).map(|e| e.0.clone()))
                .collect();
            let targets: Vec<_> = targets.into_iter().collect();
            check_random_ops(&mut it, &model, &targets, &mut rng, 1500);
        }
    }

    #[test]
    fn files_open_lazily() {
        let entry = |k: &str, s: u64| {
            (
                InternalKey::new(k.as_bytes(), s, ValueKind::Value)
                    .encoded()
                    .to_vec(),
                vec![],
            )
        };
        let chunks = vec![
            vec![entry("a", 1), entry("b", 2)],
            vec![entry("c", 3)],
            vec![entry("d", 4), entry("e", 5)],
        ];
        let (mut it, opens) = level_from_chunks(chunks, None);
        assert_eq!(opens.load(AtomicOrdering::Relaxed), 0);
        it.seek_to_first().unwrap();
        assert_eq!(opens.load(AtomicOrdering::Relaxed), 1);
        // Stepping within the first file opens nothing more.
        it.next().unwrap();
        assert_eq!(opens.load(AtomicOrdering::Relaxed), 1);
        it.seek_to_last().unwrap();
        assert_eq!(opens.load(AtomicOrdering::Relaxed), 2);
    }

    #[test]
    fn open_errors_propagate() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut model = random_model(&mut rng);
        while model.len() < 40 {
            model = random_model(&mut rng);
        }
        let (mut it, _) = level(&model, &mut rng, Some(2));
        it.seek_to_first().unwrap();
        let mut result = Ok(());
        let mut seen = 0;
        while it.valid() {
            seen += 1;
            result = it.next();
        }
        let err = result.unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!((1..=8).contains(&seen), "stopped after {seen} entries");
        assert!(!it.valid());
        // Seeking into the bad file fails too; other files still work.
        assert!(it.seek_to_first().is_ok());
        assert!(it.valid());
    }

    #[test]
    fn child_errors_propagate() {
        let entries: Entries = (1..=3u64)
            .map(|s| {
                (
                    InternalKey::new(format!("k{s}").as_bytes(), s, ValueKind::Value)
                        .encoded()
                        .to_vec(),
                    vec![],
                )
            })
            .collect();
        let files = vec![meta(1, &entries)];
        let open: TableOpener = Arc::new(move |_: &FileMeta| {
            Ok(Box::new(VecIter::new(entries.clone()).fail_after(1)) as Box<dyn InternalIterator>)
        });
        let mut it = LevelIterator::new(files, open);
        it.seek_to_first().unwrap();
        assert!(it.valid());
        assert!(it.next().is_err());
        assert!(!it.valid());
    }

    #[test]
    fn empty_level_is_never_valid() {
        let open: TableOpener = Arc::new(|_: &FileMeta| unreachable!("no files to open"));
        let mut it = LevelIterator::new(Vec::new(), open);
        it.seek_to_first().unwrap();
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        assert!(!it.valid());
        it.seek(InternalKey::for_seek(b"a", 1).encoded()).unwrap();
        assert!(!it.valid());
        it.seek_for_prev(InternalKey::for_seek(b"a", 1).encoded())
            .unwrap();
        assert!(!it.valid());
    }
}
