//! The read path: memtables, then L0 newest first, then one file per level.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::purge::PurgeOnDrop;
use super::stats::{add, GET_READS_BUCKETS};
use super::DbInner;
use crate::base::expiry;
use crate::base::key::{self, InternalKey, ValueKind};
use crate::base::SeqNo;
use crate::delta::reader::Pending;
use crate::delta::{self, iter::DeltaIterator, Record};
use crate::error::{Error, Result};
use crate::iter::db_iter::{DbIterator, InnerSource};
use crate::iter::level::{LevelIterator, TableOpener};
use crate::iter::merging::MergingIterator;
use crate::iter::{InternalIterator, ValueSource};
use crate::manifest::file_meta::FileMeta;
use crate::manifest::version::Version;
use crate::manifest::BucketMeta;
use crate::memtable::{MemTable, MergedRun};
use crate::merge::{self, Operands};
use crate::options::ReadOptions;
use crate::prefix;
use crate::value_log::LogReads;
use crate::vfs::thread_reads;

/// Bytes compaction reads from an input file at a time (RocksDB uses 2 MiB
/// with direct I/O too): one call per window instead of one per block.
const COMPACTION_READAHEAD_BYTES: usize = 2 << 20;

/// What a point lookup found.
enum Lookup {
    /// The value, or none (deleted or never written).
    Done(Option<Vec<u8>>),
    /// A separated value: its handle as stored, and the entry's sequence
    /// number, which the record must carry.
    Separated { raw: Vec<u8>, seq: SeqNo },
    /// Merge operands over what lies beneath them.
    Merge { operands: Operands, base: Base },
}

/// A read of a key's deltas, done or on a reader thread.
enum DeltaRead {
    Ready(Vec<Record>),
    /// With the bucket, to read again if the reader dies.
    Pending {
        pending: Pending,
        bucket: Arc<BucketMeta>,
    },
}

/// What lies beneath a key's merge operands.
enum Base {
    None,
    Inline(Vec<u8>),
    Separated { raw: Vec<u8>, seq: SeqNo },
}

/// A key's entries as a lookup walks them, newest first, until one that
/// is not a merge operand.
struct Walk {
    /// The time expiry is measured against: an entry expired by then is a
    /// deletion.
    now: u64,
    operands: Operands,
    base: Option<Base>,
    /// The sequence number of the entry `base` came from.
    base_seq: SeqNo,
    /// Why an entry could not be read (an expiring entry too short for its
    /// expiry), which ended the walk.
    damaged: Option<&'static str>,
}

impl Walk {
    fn new(now: u64) -> Self {
        Walk {
            now,
            operands: Operands::default(),
            base: None,
            base_seq: 0,
            damaged: None,
        }
    }

    /// Takes the next older entry, of sequence `seq`; false once the walk
    /// has found what the key's value rests on.
    fn take(&mut self, kind: ValueKind, stored: &[u8], seq: SeqNo) -> bool {
        let (kind, value) = match expiry::as_seen(kind, stored, self.now) {
            Ok(seen) => seen,
            Err(e) => {
                self.damaged = Some(e.0);
                self.base = Some(Base::None);
                return false;
            }
        };
        self.base_seq = seq;
        self.base = Some(match kind {
            ValueKind::Merge => {
                self.operands.push(value);
                return true;
            }
            ValueKind::Value => Base::Inline(value.to_vec()),
            ValueKind::Deletion => Base::None,
            ValueKind::ValueRef => Base::Separated {
                raw: value.to_vec(),
                seq,
            },
            // `as_seen` took the expiry off.
            ValueKind::ExpiringValue | ValueKind::ExpiringValueRef => {
                self.damaged = Some("expiring entry not seen through its expiry");
                Base::None
            }
        });
        false
    }

    fn ended(&self) -> bool {
        self.base.is_some()
    }

    fn finish(self, user_key: &[u8]) -> Result<Lookup> {
        if let Some(reason) = self.damaged {
            return Err(Error::corruption(
                "<expiring entry>",
                0,
                format!("key {:?}: {reason}", user_key.escape_ascii().to_string()),
            ));
        }
        let base = self.base.unwrap_or(Base::None);
        if !self.operands.is_empty() {
            return Ok(Lookup::Merge {
                operands: self.operands,
                base,
            });
        }
        Ok(match base {
            Base::None => Lookup::Done(None),
            Base::Inline(v) => Lookup::Done(Some(v)),
            Base::Separated { raw, seq } => Lookup::Separated { raw, seq },
        })
    }
}

/// What a read sees: memtables newest first, a Version, and the value
/// logs its memtables point into that the Version does not hold yet.
pub(super) struct ReadView {
    pub seq: SeqNo,
    /// The time expiry is measured against (`Options::clock`).
    pub now: u64,
    pub mems: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
    pub logs: LogReads,
}

impl DbInner {
    /// Takes the sequence number and the structures holding every write up
    /// to it under one lock, so that a flush or compaction between the two
    /// cannot hide entries the sequence number should see.
    pub(super) fn capture(&self, snapshot: Option<SeqNo>) -> ReadView {
        let st = self.state.lock();
        let seq = snapshot.unwrap_or_else(|| self.visible_seq.load(Ordering::Acquire));
        let mut mems = Vec::with_capacity(st.imm.len() + 1);
        mems.push(st.mem.clone());
        mems.extend(st.imm.iter().rev().map(|i| i.mem.clone()));
        ReadView {
            seq,
            now: self.opts.clock.now_ms(),
            mems,
            version: st.current.clone(),
            // Under the state lock, as a flush installs logs: each log is
            // either in this Version or here.
            logs: self.logs.reads(),
        }
    }

    pub(super) fn get(&self, opts: &ReadOptions<'_>, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        let reads_before = thread_reads();
        let view = self.capture(opts.snapshot.map(|s| s.sequence_number()));
        let found = match self.lookup(&view, user_key, true) {
            Ok(Lookup::Done(v)) => Ok(v),
            Ok(Lookup::Separated { raw, seq }) => self
                .value_source(&view)
                .resolve(ValueKind::ValueRef, &raw, user_key, seq, None)
                .map(|v| Some(Arc::unwrap_or_clone(v))),
            Ok(Lookup::Merge { operands, base }) => self.merge(&view, user_key, &operands, base),
            Err(e) => Err(e),
        };
        // This view may have been the last to name a compacted file.
        drop(view);
        self.purger.purge();
        let reads = thread_reads() - reads_before;
        let c = &self.counters;
        add(&c.gets, 1);
        add(&c.get_disk_reads, reads);
        let bucket = (reads as usize).min(GET_READS_BUCKETS - 1);
        add(&c.gets_by_disk_reads[bucket], 1);
        found
    }

    /// Whether `user_key` has a value: a get that stops at the entry,
    /// never reading a separated value or merging operands.
    pub(super) fn contains(&self, opts: &ReadOptions<'_>, user_key: &[u8]) -> Result<bool> {
        let view = self.capture(opts.snapshot.map(|s| s.sequence_number()));
        let found = match self.lookup(&view, user_key, false) {
            Ok(Lookup::Done(v)) => Ok(v.is_some()),
            Ok(Lookup::Separated { .. } | Lookup::Merge { .. }) => Ok(true),
            Err(e) => Err(e),
        };
        drop(view);
        self.purger.purge();
        found
    }

    /// The values of `keys`, one result each, in order, all as of one
    /// view: each key is looked up in key order, and the separated values
    /// found are read in one batch.
    pub(super) fn multi_get(
        &self,
        opts: &ReadOptions<'_>,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let reads_before = thread_reads();
        let view = self.capture(opts.snapshot.map(|s| s.sequence_number()));
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by_key(|&i| keys[i]);
        let mut done: Vec<Option<Result<Option<Vec<u8>>>>> = keys.iter().map(|_| None).collect();
        let mut separated: Vec<(usize, Vec<u8>, SeqNo)> = Vec::new();
        for i in order {
            match self.lookup(&view, keys[i], false) {
                Ok(Lookup::Done(v)) => done[i] = Some(Ok(v)),
                Ok(Lookup::Separated { raw, seq }) => separated.push((i, raw, seq)),
                Ok(Lookup::Merge { operands, base }) => {
                    done[i] = Some(self.merge(&view, keys[i], &operands, base));
                }
                Err(e) => done[i] = Some(Err(e)),
            }
        }
        let entries: Vec<(&[u8], &[u8], SeqNo)> = separated
            .iter()
            .map(|(i, raw, seq)| (raw.as_slice(), keys[*i], *seq))
            .collect();
        let values = self.value_source(&view).resolve_many(&entries);
        for ((i, _, _), v) in separated.iter().zip(values) {
            done[*i] = Some(v.map(|v| Some(Arc::unwrap_or_clone(v))));
        }
        drop(view);
        self.purger.purge();
        let c = &self.counters;
        add(&c.multi_gets, 1);
        add(&c.multi_get_keys, keys.len() as u64);
        add(&c.multi_get_disk_reads, thread_reads() - reads_before);
        // Every key was answered by its lookup or by the batch.
        done.into_iter().map(|r| r.unwrap_or(Ok(None))).collect()
    }

    /// Where `user_key`'s newest entry visible in `view` leads: a value
    /// or nothing, a handle still to resolve, or merge operands over one
    /// of those. With `overlap`, a read of the key's deltas that must go
    /// to the device runs on a reader thread meanwhile, and a separated
    /// value beneath them is read while it does (multi_get reads its
    /// values in one batch instead).
    fn lookup(&self, view: &ReadView, user_key: &[u8], overlap: bool) -> Result<Lookup> {
        let mut walk = Walk::new(view.now);
        for mem in &view.mems {
            self.walk_memtable(mem, user_key, view.seq, &mut walk);
            if walk.ended() {
                return walk.finish(user_key);
            }
        }
        // The delta store's deltas are older than any memtable entry and
        // newer than any operand in the levels (flushes route every
        // operand there once it holds any): they go between the two.
        let mem_operands = std::mem::take(&mut walk.operands);
        let deltas = self.start_delta_read(view, user_key, overlap)?;
        self.walk_levels(view, user_key, &mut walk)?;
        if let (Some(DeltaRead::Pending { .. }), Some(Base::Separated { raw, seq })) =
            (&deltas, &walk.base)
        {
            let value =
                self.value_source(view)
                    .resolve(ValueKind::ValueRef, raw, user_key, *seq, None)?;
            walk.base = Some(Base::Inline(Arc::unwrap_or_clone(value)));
        }
        let base_seq = if walk.ended() { walk.base_seq } else { 0 };
        let mut operands = mem_operands;
        if let Some(deltas) = deltas {
            let records = self.finish_delta_read(deltas, user_key)?;
            for r in delta::visible(&records, view.seq) {
                if r.seq <= base_seq {
                    break;
                }
                operands.push(&r.value);
            }
        }
        operands.append(&walk.operands);
        walk.operands = operands;
        walk.finish(user_key)
    }

    /// Walks the levels' entries of `user_key` into `walk`, newest first.
    fn walk_levels(&self, view: &ReadView, user_key: &[u8], walk: &mut Walk) -> Result<()> {
        let seek = InternalKey::for_seek(user_key, view.seq);
        for file in view.version.files_for_get(user_key) {
            let table = self.table_cache.get(file.number)?;
            let mut malformed = false;
            table.get_versions(
                user_key,
                seek.encoded(),
                &mut |ikey, value| match key::parse(ikey) {
                    Some(parsed) => walk.take(parsed.kind, value, parsed.seq),
                    None => {
                        malformed = true;
                        false
                    }
                },
            )?;
            if malformed {
                return Err(Error::corruption(
                    crate::base::filename::sstable(&self.dir, file.number),
                    0,
                    "malformed internal key",
                ));
            }
            if walk.ended() {
                break;
            }
        }
        Ok(())
    }

    /// Walks `mem`'s entries of `user_key` that `seq` sees into `walk`:
    /// those newer than the key's merged run, the run as one operand, and
    /// what lies below it; then keeps the operands it walked, merged with
    /// the run, as the key's new run.
    fn walk_memtable(&self, mem: &MemTable, user_key: &[u8], seq: SeqNo, walk: &mut Walk) {
        if !mem.may_contain_key(user_key) {
            return;
        }
        let op = self.opts.merge_operator.as_ref();
        let run = op
            .and_then(|_| mem.merged_run(user_key))
            .filter(|r| r.newest <= seq);
        let first = walk.operands.len();
        let (mut newest, mut oldest) = (None, None);
        // A value log's record carries sequence 0, which any sequence
        // matches: the view's serves.
        mem.get_versions(user_key, seq, &mut |kind, value, s| {
            if run.as_ref().is_some_and(|r| r.newest == s) {
                return false;
            }
            if kind == ValueKind::Merge {
                newest.get_or_insert(s);
                oldest = Some(s);
            }
            walk.take(kind, value, seq)
        });
        let fresh = walk.operands.len() - first;
        // A value or deletion newer than the run ends the walk above it.
        let run = run.filter(|_| !walk.ended());
        if let Some(r) = &run {
            walk.operands.push(&r.operand);
            if let Some(below) = r.oldest.checked_sub(1) {
                mem.get_versions(user_key, below, &mut |kind, value, _| {
                    walk.take(kind, value, seq)
                });
            }
        }
        let Some(op) = op else {
            return;
        };
        if fresh + usize::from(run.is_some()) < 2 {
            return;
        }
        // Oldest first: the run, then the operands newer than it.
        let mut parts = (first..first + fresh).rev().map(|i| walk.operands.get(i));
        let mut merged: Vec<u8> = match &run {
            Some(r) => r.operand.to_vec(),
            None => parts.next().unwrap_or_default().to_vec(),
        };
        for newer in parts {
            match op.partial_merge(user_key, &merged, newer) {
                Some(m) => merged = m,
                None => return,
            }
        }
        let (Some(newest), oldest) = (newest.or(run.as_ref().map(|r| r.newest)), oldest) else {
            return;
        };
        let oldest = run.as_ref().map_or(oldest.unwrap_or(newest), |r| r.oldest);
        mem.set_merged_run(
            user_key,
            MergedRun {
                newest,
                oldest,
                operand: merged.into(),
            },
        );
    }

    /// Starts reading the records the delta store holds of `user_key`
    /// (none if its bucket's filter rules the key out): from the cache at
    /// once, or, with `overlap` and blocks to read from the device, on a
    /// reader thread when one is idle.
    fn start_delta_read(
        &self,
        view: &ReadView,
        user_key: &[u8],
        overlap: bool,
    ) -> Result<Option<DeltaRead>> {
        let Some(bucket) = view.version.bucket_for(user_key) else {
            return Ok(None);
        };
        if !bucket.filter.may_contain(user_key) {
            return Ok(None);
        }
        add(&self.counters.delta_reads, 1);
        let read = self.deltas.plan_read(bucket, user_key)?;
        let read = if overlap && !read.is_cached() {
            match self.delta_reader.start(read, user_key) {
                Ok(pending) => {
                    return Ok(Some(DeltaRead::Pending {
                        pending,
                        bucket: bucket.clone(),
                    }));
                }
                Err(read) => read,
            }
        } else {
            read
        };
        Ok(Some(DeltaRead::Ready(
            self.deltas.finish_read(read, user_key)?,
        )))
    }

    /// The records a delta read found, newest first.
    fn finish_delta_read(&self, read: DeltaRead, user_key: &[u8]) -> Result<Vec<Record>> {
        match read {
            DeltaRead::Ready(records) => Ok(records),
            DeltaRead::Pending { pending, bucket } => match pending.wait() {
                Some(records) => {
                    add(&self.counters.delta_reads_overlapped, 1);
                    records
                }
                None => {
                    log::warn!(
                        "a delta reader thread ended without answering; the get reads its deltas itself"
                    );
                    self.deltas.key_records(&bucket, user_key)
                }
            },
        }
    }

    /// The value a lookup's merge operands make of `base`.
    fn merge(
        &self,
        view: &ReadView,
        user_key: &[u8],
        operands: &Operands,
        base: Base,
    ) -> Result<Option<Vec<u8>>> {
        let separated;
        let base = match base {
            Base::None => None,
            Base::Inline(v) => Some(v),
            Base::Separated { raw, seq } => {
                separated = self.value_source(view).resolve(
                    ValueKind::ValueRef,
                    &raw,
                    user_key,
                    seq,
                    None,
                )?;
                Some(separated.to_vec())
            }
        };
        merge::full_merge(
            self.opts.merge_operator.as_ref(),
            user_key,
            base.as_deref(),
            &operands.oldest_first(),
        )
        .map(Some)
    }

    /// Resolves separated values as `view` sees them.
    pub(super) fn value_source(&self, view: &ReadView) -> ValueSource {
        ValueSource {
            store: self.values.clone(),
            version: view.version.clone(),
            logs: view.logs.clone(),
        }
    }

    pub(super) fn iter(&self, opts: &ReadOptions<'_>) -> DbIterator {
        let view = self.capture(opts.snapshot.map(|s| s.sequence_number()));
        let (lower, upper) = (opts.lower_bound.as_deref(), opts.upper_bound.as_deref());
        let prefix = self.bounded_prefix(lower, upper);
        let runs = self.iter_runs(&view.version, lower, upper, prefix);
        let mems: Vec<_> = view
            .mems
            .iter()
            .filter(|m| prefix.is_none_or(|(name, p)| m.may_contain_prefix(name, p)))
            .cloned()
            .collect();
        let (version, opener) = (view.version.clone(), self.table_opener());
        let (deltas, seq) = (self.deltas.clone(), view.seq);
        // The iterator and its lookahead are built alike, over one view.
        let source: InnerSource = Arc::new(move || {
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            for mem in &mems {
                children.push(Box::new(mem.iter()));
            }
            for run in &runs {
                children.push(Box::new(LevelIterator::new(run.clone(), opener.clone())));
            }
            if version.has_buckets() {
                children.push(Box::new(DeltaIterator::new(
                    deltas.clone(),
                    version.buckets().cloned().collect(),
                    seq,
                )));
            }
            Box::new(MergingIterator::new(children))
        });
        let values = self.value_source(&view);
        DbIterator::new(
            source(),
            view.seq,
            view.now,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
            values,
            Some(source),
            // Dropped in order: the Version, then the purge it may allow.
            Box::new((view.mems, view.version, PurgeOnDrop(self.purger.clone()))),
        )
        .with_merge_operator(self.opts.merge_operator.clone())
    }

    /// The prefix extractor's name and the one prefix of every key in
    /// `[lower, upper)`, if the bounds confine an iterator to one.
    fn bounded_prefix<'a>(
        &'a self,
        lower: Option<&'a [u8]>,
        upper: Option<&[u8]>,
    ) -> Option<(&'a str, &'a [u8])> {
        let p = self.opts.prefix_extractor.as_ref()?;
        prefix::bounded_prefix(p.as_ref(), lower?, upper?).map(|prefix| (p.name(), prefix))
    }

    /// The sorted runs an iterator over `[lower, upper)` reads, newest
    /// first (each L0 file alone, then each level), holding only the files
    /// whose key range meets the bounds and, when the bounds confine the
    /// iterator to one prefix, whose filter may hold that prefix. A table
    /// that fails to open is kept: the iterator reports the error.
    fn iter_runs(
        &self,
        version: &Version,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        prefix: Option<(&str, &[u8])>,
    ) -> Vec<Vec<Arc<FileMeta>>> {
        let c = &self.counters;
        let may_hold = |file: &Arc<FileMeta>| {
            let Some((name, prefix)) = prefix else {
                return true;
            };
            add(&c.prefix_filter_checked, 1);
            let excluded = self
                .table_cache
                .get(file.number)
                .and_then(|t| t.may_contain_prefix(name, prefix))
                .is_ok_and(|may| !may);
            if excluded {
                add(&c.prefix_filter_useful, 1);
            }
            !excluded
        };
        let mut runs = Vec::new();
        // The upper bound is exclusive; as an inclusive one it keeps at
        // most a file that starts at it.
        for file in version.overlapping_files(0, lower, upper) {
            if may_hold(&file) {
                runs.push(vec![file]);
            }
        }
        for level in 1..crate::base::limits::NUM_LEVELS {
            let files: Vec<_> = version
                .overlapping_files(level, lower, upper)
                .into_iter()
                .filter(&may_hold)
                .collect();
            if !files.is_empty() {
                runs.push(files);
            }
        }
        runs
    }

    /// Opens a table's iterator through the table cache.
    pub(super) fn table_opener(&self) -> TableOpener {
        let cache = self.table_cache.clone();
        Arc::new(move |file| {
            let table = cache.get(file.number)?;
            Ok(Box::new(table.iter()) as Box<dyn InternalIterator>)
        })
    }

    /// Opens a table for one sequential pass, as compaction reads it.
    pub(super) fn table_scan_opener(&self) -> TableOpener {
        let cache = self.table_cache.clone();
        Arc::new(move |file| {
            let table = cache.get(file.number)?;
            Ok(Box::new(table.scan_iter(COMPACTION_READAHEAD_BYTES)) as Box<dyn InternalIterator>)
        })
    }
}
