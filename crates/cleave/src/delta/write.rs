//! What a flush writes to the delta store: the memtable's operands and
//! anchors, appended per bucket or, where a bucket is full, garbage
//! collected with it; all in one new delta file, written as each bucket's
//! chunk is made, so that a flush holds one bucket's records at a time.

use std::collections::HashSet;
use std::sync::Arc;

use super::format::{self, Record, RecordKind};
use super::gc::Collector;
use super::{DeltaStore, MAX_CHUNKS};
use crate::base::key::{self, ValueKind};
use crate::base::{FileNumber, InternalIterator, SeqNo};
use crate::error::{Error, Result};
use crate::manifest::{BucketMeta, ChunkRef, DeltaFileMeta, Version, VersionEdit};
use crate::merge::MergeOperator;
use crate::vfs::{FileOptions, WritableFile};

/// A memtable's entries as the delta store takes them: each merge operand
/// a delta, each put or delete an anchor candidate, in chunk order.
#[derive(Default)]
pub(crate) struct Routed {
    pub records: Vec<Record>,
}

impl Routed {
    /// Reads the whole of `it` (a memtable's iterator). Puts and deletes
    /// of keys without an operand here are taken only if `all_anchors`
    /// (the store has buckets, which may hold older deltas of them).
    pub(crate) fn from_memtable(
        it: &mut dyn InternalIterator,
        all_anchors: bool,
    ) -> Result<Routed> {
        let mut records = Vec::new();
        let mut group: Vec<Record> = Vec::new();
        let mut group_has_delta = false;
        it.seek_to_first()?;
        while it.valid() {
            let parsed = key::parse(it.key())
                .ok_or_else(|| Error::InvalidArgument("malformed key in a memtable".into()))?;
            if group.first().is_some_and(|r| r.key != parsed.user_key) {
                if group_has_delta || all_anchors {
                    records.append(&mut group);
                }
                group.clear();
                group_has_delta = false;
            }
            group.push(match parsed.kind {
                ValueKind::Merge => {
                    group_has_delta = true;
                    Record::delta(parsed.user_key, parsed.seq, it.value())
                }
                _ => Record::anchor(parsed.user_key, parsed.seq),
            });
            it.next()?;
        }
        if group_has_delta || all_anchors {
            records.append(&mut group);
        }
        Ok(Routed { records })
    }
}

/// What one flush did to the delta store, for its manifest edit.
#[derive(Debug, Default)]
pub(crate) struct DeltaOutput {
    pub file: Option<DeltaFileMeta>,
    pub deleted_buckets: Vec<u64>,
    pub new_buckets: Vec<BucketMeta>,
    pub appended: Vec<(u64, ChunkRef)>,
    pub deleted_files: Vec<FileNumber>,
    /// Buckets garbage collected, and how many of them were split.
    pub collected: u64,
    pub splits: u64,
    /// Pairs of small adjacent buckets merged into one.
    pub merged_pairs: u64,
    /// Buckets whose deltas went back to the LSM-tree, the store being
    /// full, and those deltas (chunk order), for the flush's sstable.
    pub folded: u64,
    pub spilled: Vec<Record>,
    /// Deltas partially merged and records dropped, in the flush and in
    /// garbage collection.
    pub partial_merges: u64,
    pub dropped: u64,
}

impl DeltaOutput {
    pub(crate) fn bytes_written(&self) -> u64 {
        self.file.as_ref().map_or(0, |f| f.size)
    }

    /// Adds this output to `edit`, which may hold earlier outputs of the
    /// same recovery (replayed memtables share one edit): a bucket or a
    /// file the edit adds and this output removes never joins.
    pub(crate) fn add_to(self, edit: &mut VersionEdit) {
        for id in self.deleted_buckets {
            // Chunks an earlier output appended to it go with it.
            edit.appended_chunks.retain(|(bucket, _)| *bucket != id);
            match edit.new_buckets.iter().position(|b| b.id == id) {
                Some(i) => {
                    edit.new_buckets.remove(i);
                }
                None => edit.deleted_buckets.push(id),
            }
        }
        edit.new_buckets.extend(self.new_buckets);
        for (id, chunk) in self.appended {
            match edit.new_buckets.iter_mut().find(|b| b.id == id) {
                Some(b) => b.chunks.push(chunk),
                None => edit.appended_chunks.push((id, chunk)),
            }
        }
        for number in self.deleted_files {
            match edit.new_delta_files.iter().position(|f| f.number == number) {
                Some(i) => {
                    edit.new_delta_files.remove(i);
                }
                None => edit.deleted_delta_files.push(number),
            }
        }
        edit.new_delta_files.extend(self.file);
    }
}

/// Where a chunk goes: appended to a bucket, or a new bucket's first.
enum Target {
    Append(Arc<BucketMeta>),
    New { smallest: Vec<u8> },
}

/// Bytes of chunks a flush gathers before appending them to its delta
/// file.
const SINK_BUFFER_BYTES: usize = 1 << 20;

/// A flush's new delta file, written chunk by chunk as the buckets are
/// planned; created with the first chunk.
struct Sink<'a> {
    store: &'a DeltaStore,
    number: FileNumber,
    file: Option<Box<dyn WritableFile>>,
    /// Bytes not yet appended, and the bytes appended before them.
    pending: Vec<u8>,
    flushed: u64,
    /// Buckets this flush appends a chunk to.
    appended_to: HashSet<u64>,
}

impl<'a> Sink<'a> {
    fn new(store: &'a DeltaStore, number: FileNumber) -> Self {
        let mut pending = Vec::new();
        format::encode_header(&mut pending);
        Sink {
            store,
            number,
            file: None,
            pending,
            flushed: 0,
            appended_to: HashSet::new(),
        }
    }

    /// Writes `records` as a chunk for `target`, and notes in `out` the
    /// bucket it joins or makes.
    fn add(
        &mut self,
        target: Target,
        records: &[Record],
        new_number: &dyn Fn() -> FileNumber,
        out: &mut DeltaOutput,
    ) -> Result<()> {
        let start = self.pending.len();
        let mut index = format::encode_chunk(&mut self.pending, records)?;
        // encode_chunk places blocks in `pending`; the file holds
        // `flushed` bytes before it.
        for b in &mut index {
            b.offset += self.flushed;
        }
        let offset = self.flushed + start as u64;
        self.store.add_index(self.number, offset, index);
        let chunk = ChunkRef {
            file: self.number,
            offset,
            len: (self.pending.len() - start) as u64,
        };
        // Keys join the shared filter before any Version holds the chunk:
        // a filter may be ahead of a reader, never behind.
        match target {
            Target::Append(b) => {
                for r in records {
                    b.filter.add(&r.key);
                }
                self.appended_to.insert(b.id);
                out.appended.push((b.id, chunk));
            }
            Target::New { smallest } => {
                let b = BucketMeta::new(new_number().0, smallest, vec![chunk]);
                for r in records {
                    b.filter.add(&r.key);
                }
                out.new_buckets.push(b);
            }
        }
        if self.pending.len() >= SINK_BUFFER_BYTES {
            self.write_pending()?;
        }
        Ok(())
    }

    fn write_pending(&mut self) -> Result<()> {
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(
                self.store
                    .fs
                    .create(&self.store.path(self.number), FileOptions::default())?,
            ),
        };
        file.append(&self.pending)?;
        self.flushed += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Appends what is left, syncs the file and its directory, and gives
    /// the file's size.
    fn finish(mut self) -> Result<u64> {
        self.write_pending()?;
        if let Some(mut f) = self.file.take() {
            f.sync()?;
        }
        self.store.fs.sync_dir(&self.store.dir)?;
        Ok(self.flushed)
    }
}

fn bytes(records: &[Record]) -> u64 {
    records.iter().map(|r| r.encoded_len() as u64).sum::<u64>() + format::BLOCK_HEADER_LEN as u64
}

/// Splits a bucket's live records (chunk order) into those that stay (the
/// keys with an anchor) and the deltas of every other key.
fn fold(live: Vec<Record>) -> (Vec<Record>, Vec<Record>) {
    let anchored: HashSet<Vec<u8>> = live
        .iter()
        .filter(|r| r.kind == RecordKind::Anchor)
        .map(|r| r.key.clone())
        .collect();
    live.into_iter().partition(|r| anchored.contains(&r.key))
}

/// Splits `records` (chunk order) into runs of about `target` bytes, at
/// key boundaries; at least one run, possibly empty.
fn partition(records: Vec<Record>, target: u64) -> Vec<Vec<Record>> {
    let mut runs = Vec::new();
    let mut run: Vec<Record> = Vec::new();
    let mut run_bytes = 0u64;
    for r in records {
        let boundary = run.last().is_some_and(|p| p.key != r.key);
        if boundary && run_bytes >= target {
            runs.push(std::mem::take(&mut run));
            run_bytes = 0;
        }
        run_bytes += r.encoded_len() as u64;
        run.push(r);
    }
    runs.push(run);
    runs
}

impl DeltaStore {
    /// Writes `routed` (a memtable's operands and anchor candidates) to the
    /// delta store over `version`, collecting full buckets, as one new
    /// delta file; the caller logs the output in the flush's edit.
    pub(crate) fn write_flush(
        &self,
        version: &Version,
        routed: Routed,
        snapshots: &[SeqNo],
        op: Option<&Arc<dyn MergeOperator>>,
        new_number: &dyn Fn() -> FileNumber,
    ) -> Result<DeltaOutput> {
        let mut collector = Collector::new(snapshots, op);
        // An anchor counts only where the bucket may hold older deltas of
        // its key (or this flush keeps one, for a snapshot).
        let may_hold = |key: &[u8]| {
            version
                .bucket_for(key)
                .is_some_and(|b| b.filter.may_contain(key))
        };
        let records = collector.collect(routed.records, &may_hold);
        let mut out = DeltaOutput::default();
        if records.is_empty() {
            return Ok(out);
        }
        let number = new_number();
        let mut sink = Sink::new(self, number);
        let written = self
            .plan(
                version,
                records,
                &mut collector,
                &mut sink,
                new_number,
                &mut out,
            )
            .and_then(|()| sink.finish());
        let size = match written {
            Ok(size) => size,
            Err(e) => {
                // The file is an orphan, which the next open removes.
                self.forget(number);
                return Err(e);
            }
        };
        out.partial_merges = collector.merged;
        out.dropped = collector.dropped;
        out.file = Some(DeltaFileMeta {
            number,
            size,
            ..DeltaFileMeta::default()
        });
        let gone: HashSet<u64> = out.deleted_buckets.iter().copied().collect();
        let still_used: HashSet<FileNumber> = version
            .buckets()
            .filter(|b| !gone.contains(&b.id))
            .flat_map(|b| b.chunks.iter().map(|c| c.file))
            .collect();
        out.deleted_files = version
            .delta_files()
            .map(|f| f.number)
            .filter(|n| !still_used.contains(n))
            .collect();
        Ok(out)
    }

    /// Places `records` (chunk order) in buckets over `version`: appended
    /// where they fit, else with the bucket garbage collected, split,
    /// folded, or a small pair merged, each chunk written to `sink`.
    fn plan(
        &self,
        version: &Version,
        records: Vec<Record>,
        collector: &mut Collector<'_>,
        sink: &mut Sink<'_>,
        new_number: &dyn Fn() -> FileNumber,
        out: &mut DeltaOutput,
    ) -> Result<()> {
        let opts = self.opts;
        let mut count = version.buckets().count();
        if count == 0 {
            // KDSep's initial buckets: filled only partly, so that most of
            // their capacity is left for the appends to come.
            let target =
                (opts.bucket_capacity / 4).max(bytes(&records) / opts.max_buckets as u64 + 1);
            let runs = partition(records, target);
            for (i, run) in runs.into_iter().enumerate() {
                let smallest = if i == 0 {
                    Vec::new()
                } else {
                    run[0].key.clone()
                };
                sink.add(Target::New { smallest }, &run, new_number, out)?;
            }
            return Ok(());
        }
        let buckets: Vec<Arc<BucketMeta>> = version.buckets().cloned().collect();
        let mut rest = records.into_iter().peekable();
        for (i, b) in buckets.iter().enumerate() {
            let next = buckets.get(i + 1).map(|n| n.smallest.as_slice());
            let mut mine = Vec::new();
            while let Some(r) = rest.next_if(|r| next.is_none_or(|n| r.key.as_slice() < n)) {
                mine.push(r);
            }
            if mine.is_empty() {
                continue;
            }
            let fits =
                b.bytes() + bytes(&mine) <= opts.bucket_capacity && b.chunks.len() < MAX_CHUNKS;
            if fits {
                sink.add(Target::Append(b.clone()), &mine, new_number, out)?;
                continue;
            }
            // Garbage collection of the full bucket, with the new records:
            // it is rewritten sorted, or split in two.
            let mut all = self.records(b)?;
            all.extend(mine);
            all.sort_by(format::order);
            let live = collector.collect(all, &|_| false);
            out.deleted_buckets.push(b.id);
            out.collected += 1;
            let here = || Target::New {
                smallest: b.smallest.clone(),
            };
            if bytes(&live) > opts.split_bytes && count < opts.max_buckets {
                let half = bytes(&live) / 2;
                let mut runs = partition(live, half).into_iter();
                let left = runs.next().unwrap_or_default();
                let right: Vec<Record> = runs.flatten().collect();
                sink.add(here(), &left, new_number, out)?;
                if !right.is_empty() {
                    let smallest = right[0].key.clone();
                    sink.add(Target::New { smallest }, &right, new_number, out)?;
                    count += 1;
                    out.splits += 1;
                }
            } else if bytes(&live) > opts.split_bytes {
                // The store is full: KDSep folds the bucket's deltas into
                // their values. Here they go back to the LSM-tree with this
                // flush, as merge operands that compaction merges onto the
                // values beneath them; a key with an anchor (a snapshot
                // keeps deltas below it) stays.
                let (kept, spilled) = fold(live);
                out.spilled.extend(spilled);
                out.folded += 1;
                sink.add(here(), &kept, new_number, out)?;
            } else {
                sink.add(here(), &live, new_number, out)?;
            }
        }
        debug_assert!(rest.next().is_none());
        // KDSep's step 5: with no room left to split, the smallest pair of
        // adjacent buckets becomes one, so that hot ranges can split.
        if count + 2 > opts.max_buckets {
            self.merge_smallest_pair(&buckets, collector, sink, new_number, out)?;
        }
        Ok(())
    }

    /// Merges the adjacent pair of buckets this flush leaves alone whose
    /// chunks take the fewest bytes, if those fit one bucket.
    fn merge_smallest_pair(
        &self,
        buckets: &[Arc<BucketMeta>],
        collector: &mut Collector<'_>,
        sink: &mut Sink<'_>,
        new_number: &dyn Fn() -> FileNumber,
        out: &mut DeltaOutput,
    ) -> Result<()> {
        let touched = |id: u64| sink.appended_to.contains(&id) || out.deleted_buckets.contains(&id);
        let pair = buckets
            .windows(2)
            .filter(|w| !touched(w[0].id) && !touched(w[1].id))
            .map(|w| (w[0].bytes() + w[1].bytes(), &w[0], &w[1]))
            .filter(|(total, _, _)| *total <= self.opts.bucket_capacity)
            .min_by_key(|(total, _, _)| *total);
        let Some((_, left, right)) = pair else {
            return Ok(());
        };
        let mut all = self.records(left)?;
        all.extend(self.records(right)?);
        all.sort_by(format::order);
        let live = collector.collect(all, &|_| false);
        out.deleted_buckets.extend([left.id, right.id]);
        out.merged_pairs += 1;
        let smallest = left.smallest.clone();
        sink.add(Target::New { smallest }, &live, new_number, out)
    }
}

/// The entries of a memtable iterator other than merge operands, which
/// the delta store takes: what a flush with delta separation writes to
/// its sstable.
pub(crate) struct WithoutOperands<I> {
    inner: I,
}

impl<I: InternalIterator> WithoutOperands<I> {
    pub(crate) fn new(inner: I) -> Self {
        WithoutOperands { inner }
    }

    fn is_operand(&self) -> bool {
        self.inner.valid()
            && key::parse(self.inner.key()).is_some_and(|p| p.kind == ValueKind::Merge)
    }

    fn skip_forward(&mut self) -> Result<()> {
        while self.is_operand() {
            self.inner.next()?;
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while self.is_operand() {
            self.inner.prev()?;
        }
        Ok(())
    }
}

impl<I: InternalIterator> InternalIterator for WithoutOperands<I> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.skip_forward()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.skip_backward()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)?;
        self.skip_forward()
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target)?;
        self.skip_backward()
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.skip_forward()
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()?;
        self.skip_backward()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_keeps_only_keys_with_an_anchor() {
        let live = vec![
            Record::delta(b"a", 9, b"1"),
            Record::delta(b"b", 8, b"2"),
            Record::anchor(b"b", 6),
            Record::delta(b"b", 3, b"3"),
            Record::delta(b"c", 7, b"4"),
        ];
        let (kept, spilled) = fold(live.clone());
        assert_eq!(kept, live[1..4].to_vec());
        assert_eq!(spilled, vec![live[0].clone(), live[4].clone()]);
    }

    #[test]
    fn partition_cuts_only_between_keys() {
        let records: Vec<Record> = (0..10)
            .flat_map(|k: u8| (0..3).map(move |s| Record::delta(&[k], 10 - s, &[0; 20])))
            .collect();
        let runs = partition(records.clone(), 100);
        assert!(runs.len() > 2);
        for w in runs.windows(2) {
            assert_ne!(w[0].last().unwrap().key, w[1][0].key);
        }
        assert_eq!(runs.concat(), records);
        assert_eq!(partition(Vec::new(), 100), vec![Vec::<Record>::new()]);
    }
}
