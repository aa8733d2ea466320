//! Executing compaction plans, and writing the output sstables shared by
//! flushes and compactions.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use super::budget;
use super::stats::add;
use super::DbInner;
use crate::base::expiry;
use crate::base::filename::FileKind;
use crate::base::key::{self, ValueKind};
use crate::base::{filename, FileNumber, InternalKey, SeqNo};
use crate::compaction::correlated::{self, CorrelatedOptions};
use crate::compaction::merge_runs::{MergeRuns, ReadBase};
use crate::compaction::picker::{self, CompactionPlan};
use crate::compaction::stream::{stripe, DropRules};
use crate::compaction_filter::{CompactionFilter, Decision, FilterContext, FilterValue, Source};
use crate::error::{Error, Result};
use crate::iter::expiry::ExpiryView;
use crate::iter::level::LevelIterator;
use crate::iter::merging::MergingIterator;
use crate::iter::value_source::ValueSource;
use crate::iter::InternalIterator;
use crate::manifest::edit::VersionEdit;
use crate::manifest::version::Version;
use crate::manifest::{FileMeta, HostedLogical, TableValueRefs, ValueFileMeta};
use crate::sstable::{TableBuilder, TableOptions, TableSummary};
use crate::value_file::{
    Origin, Readahead, ValueClass, ValueFileBuilder, ValueFileOptions, ValueFileSummary,
    ValueHandle,
};
use crate::vfs::{FileOptions, Fs};

/// How many times the target file size a last-level table written while
/// space is short may reference at most (see `budget::MAX_OUTPUT_SHARE`).
const MAX_WIDENING: u64 = 8;

/// Entries a flush writes between two reports of its output bytes to the
/// space budget: 512 KiB of 8 KiB values.
const REPORT_EVERY_ENTRIES: u32 = 64;

/// One sstable written by a flush or compaction.
pub(super) struct Output {
    pub number: FileNumber,
    pub summary: TableSummary,
}

impl Output {
    pub(super) fn meta(&self) -> FileMeta {
        let s = &self.summary;
        FileMeta {
            number: self.number,
            size: s.file_size,
            smallest: s.smallest.clone(),
            largest: s.largest.clone(),
            smallest_seq: s.smallest_seq,
            largest_seq: s.largest_seq,
            num_entries: s.num_entries,
            num_deletions: s.num_deletions,
            value_refs: s
                .value_refs
                .per_file()
                .map(|(logical_file, count, bytes)| TableValueRefs {
                    logical_file,
                    count,
                    bytes,
                })
                .collect(),
            expiry: s.expiry,
            ..FileMeta::default()
        }
    }
}

/// The manifest's record of a value file a flush or compaction wrote.
pub(super) fn value_file_meta(s: &ValueFileSummary) -> ValueFileMeta {
    ValueFileMeta {
        number: s.number,
        size: s.file_size,
        hosted: s
            .properties
            .hosted
            .iter()
            .map(|h| HostedLogical {
                logical_file: h.logical_file,
                records: h.num_records,
                bytes: h.record_bytes,
            })
            .collect(),
        ..ValueFileMeta::default()
    }
}

/// What one flush or compaction wrote.
#[derive(Default)]
pub(super) struct Outputs {
    pub tables: Vec<Output>,
    /// Written by flushes, and by compactions that re-separate values
    /// (otherwise compaction carries handles unchanged).
    pub value_files: Vec<ValueFileSummary>,
}

impl Outputs {
    pub(super) fn bytes(&self) -> u64 {
        self.table_bytes() + self.value_file_bytes()
    }

    pub(super) fn table_bytes(&self) -> u64 {
        self.tables.iter().map(|o| o.summary.file_size).sum()
    }

    pub(super) fn value_file_bytes(&self) -> u64 {
        self.value_files.iter().map(|v| v.file_size).sum()
    }

    /// Removes every output: after a manifest write that a full disk
    /// failed, which names none of them.
    pub(super) fn remove(&self, fs: &dyn Fs, dir: &Path) {
        for o in &self.tables {
            let _ = fs.remove(&filename::sstable(dir, o.number));
        }
        for v in &self.value_files {
            let _ = fs.remove(&filename::value_file(dir, v.number));
        }
    }

    /// Adds every output to `edit`, sstables in `level`.
    pub(super) fn add_to(&self, edit: &mut VersionEdit, level: usize) {
        for o in &self.tables {
            edit.add_file(level, o.meta());
        }
        for v in &self.value_files {
            edit.add_value_file(value_file_meta(v));
        }
    }
}

/// What a flush or compaction is, for what it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Job {
    Flush,
    /// A compaction writing into `output_level`.
    Compaction {
        output_level: usize,
    },
}

/// What the user's compaction filter did in one job.
#[derive(Debug, Default)]
struct Filtered {
    calls: u64,
    removed: u64,
    changed: u64,
    /// Separated values it asked to read, and their record bytes.
    value_reads: u64,
    value_bytes_read: u64,
    /// Keys it looked up (`FilterContext::get`).
    lookups: u64,
}

/// The entry `ikey` (stored value `stored`) with the value a compaction
/// filter gave it, keeping its sequence number and expiry.
fn changed_entry(ikey: &[u8], stored: &[u8], value: Vec<u8>) -> Result<(InternalKey, Vec<u8>)> {
    let kind = ValueKind::from_u8(key::tag(ikey) as u8).unwrap_or(ValueKind::Value);
    let split =
        expiry::split(kind, stored).map_err(|e| Error::corruption("<compaction input>", 0, e.0))?;
    let user_key = key::user_key(ikey);
    Ok(match split.expires_at {
        Some(at) => {
            let mut v = Vec::with_capacity(expiry::EXPIRY_LEN + value.len());
            expiry::join(&mut v, at, &value);
            (
                InternalKey::new(user_key, key::seq(ikey), ValueKind::ExpiringValue),
                v,
            )
        }
        None => (
            InternalKey::new(user_key, key::seq(ikey), ValueKind::Value),
            value,
        ),
    })
}

/// Files created so far by one job, so that a failure removes them all.
#[derive(Default)]
struct Created(Vec<(FileKind, FileNumber)>);

/// What a compaction re-separates (correlated compaction): the values its
/// kept entries reference in `files`, read through `source` (the
/// compaction's Version, which maps the logical files to their physical
/// ones and keeps those from being deleted).
pub(super) struct Reseparate {
    files: BTreeSet<FileNumber>,
    source: ValueSource,
    readahead: Readahead,
    /// Records re-separated, and the bytes of the records read for them.
    records: u64,
    bytes_read: u64,
}

impl Reseparate {
    /// Whether the entry `ikey` with stored value `raw` is a handle into
    /// one of `files`; the handle, if so.
    fn handle_of(&self, ikey: &[u8], stored: &[u8]) -> Result<Option<ValueHandle>> {
        let Some(kind) = ValueKind::from_u8(key::tag(ikey) as u8).filter(|k| k.is_ref()) else {
            return Ok(None);
        };
        let handle = expiry::split(kind, stored)
            .map_err(|e| e.0)
            .and_then(|s| ValueHandle::decode(s.value).map_err(|e| e.0))
            .map_err(|e| {
                Error::corruption(
                    "<compaction input>",
                    0,
                    format!(
                        "value handle of key {:?} at seq {}: {e}",
                        key::user_key(ikey).escape_ascii().to_string(),
                        key::seq(ikey),
                    ),
                )
            })?;
        Ok(self.files.contains(&handle.logical_file).then_some(handle))
    }
}

impl DbInner {
    fn table_options(&self) -> TableOptions {
        TableOptions::from(&self.opts)
    }

    fn background_file_options(&self) -> FileOptions {
        FileOptions {
            direct: self.opts.use_direct_io_for_flush_and_compaction,
        }
    }

    /// Writes the entries of `input` that `rules` keep into sstables of
    /// about `max_file_size` compensated bytes (sstable bytes plus the
    /// value bytes they reference). With `flush`, values of at least
    /// `min_value_size` go to new value files (when separation is on) and
    /// the sstables keep handles, and with `prepopulate_block_cache` the
    /// outputs' data blocks are cached as they are written (their index,
    /// filter and record index blocks are, for every job). With `reseparate` (compactions), the kept entries'
    /// values in its files move to new value files, in key order. A user
    /// key never straddles two outputs, so that the outputs' key ranges do
    /// not overlap. Merge operands are merged as `merge_runs` says, a
    /// separated value beneath them read through `bases` (none: such a
    /// value stays, unmerged); a compaction's merged value of at least
    /// `min_value_size` goes to a new value file, with the re-separated
    /// ones, unless space is short. On failure every file the job created
    /// is removed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_outputs(
        &self,
        input: &mut dyn InternalIterator,
        rules: &mut DropRules,
        may_exist_below: &dyn Fn(&[u8]) -> bool,
        max_file_size: u64,
        job: Job,
        reseparate: Option<&mut Reseparate>,
        bases: Option<&ValueSource>,
        written: &dyn Fn(u64),
    ) -> Result<Outputs> {
        let mut outputs = Outputs::default();
        let mut created = Created::default();
        let result = self.write_outputs_into(
            input,
            rules,
            may_exist_below,
            max_file_size,
            job,
            reseparate,
            bases,
            written,
            &mut outputs,
            &mut created,
        );
        if let Err(e) = result {
            for &(kind, number) in &created.0 {
                if let Some(path) = filename::numbered(&self.dir, kind, number) {
                    let _ = self.fs.remove(&path);
                }
            }
            return Err(e);
        }
        if !outputs.tables.is_empty() || !outputs.value_files.is_empty() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(outputs)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_outputs_into(
        &self,
        input: &mut dyn InternalIterator,
        rules: &mut DropRules,
        may_exist_below: &dyn Fn(&[u8]) -> bool,
        max_file_size: u64,
        job: Job,
        mut reseparate: Option<&mut Reseparate>,
        bases: Option<&ValueSource>,
        written: &dyn Fn(u64),
        outputs: &mut Outputs,
        created: &mut Created,
    ) -> Result<()> {
        let flush = job == Job::Flush;
        let filter = match job {
            Job::Compaction { output_level } => self
                .opts
                .compaction_filter
                .as_ref()
                .map(|f| (f.as_ref(), output_level)),
            Job::Flush => None,
        };
        let mut filtered = Filtered::default();
        let snapshots = rules.snapshots().to_vec();
        let bottommost = rules.bottommost();
        let nothing_below = |user_key: &[u8]| bottommost || !may_exist_below(user_key);
        let read_base = |user_key: &[u8], seq: SeqNo, raw: &[u8]| -> Result<Vec<u8>> {
            let source = bases.ok_or_else(|| {
                Error::corruption("<compaction>", 0, "no value source for a merge's base")
            })?;
            Ok(source
                .resolve(ValueKind::ValueRef, raw, user_key, seq, None)?
                .to_vec())
        };
        let mut view = ExpiryView::for_compaction(input, self.opts.clock.now_ms())?;
        let mut input = MergeRuns::new(
            &mut view,
            self.opts.merge_operator.clone(),
            &snapshots,
            &nothing_below,
            bases.map(|_| &read_base as ReadBase<'_>),
        )?;
        let separate = self.opts.enable_value_separation;
        // While space is short a compaction's merged values stay inline:
        // its reservation counts only the sstables it rewrites, as for the
        // re-separation `run_compaction` turns off then.
        let short = !flush && self.budget.short(self.disk.bytes());
        let mut builder: Option<(FileNumber, TableBuilder)> = None;
        // The value file being written per class, hot and cold.
        let mut values: HashMap<ValueClass, ValueFileBuilder> = HashMap::new();
        // The value file re-separated values go to. It is finished only
        // where an output sstable starts, so that each output references
        // at most one such file, which `correlated::select` counts on.
        let mut moved: Option<ValueFileBuilder> = None;
        let mut last_user_key: Vec<u8> = Vec::new();
        let mut handle_buf = Vec::new();
        // Output bytes reported to `written` so far: finished files, and a
        // flush's as they grow, so that the space budget does not count a
        // flush's output both on disk and as still to come. (Compactions
        // report as each file ends: reporting theirs as they grow too ran
        // the 2 GiB uniform overwrite under a 1.25x budget at 11,684 and
        // 12,990 ops/s against 13,846 and 13,953; docs/benchmarks.md,
        // issue 28.)
        let mut reported = 0;
        let mut report = |bytes: u64| {
            if bytes > reported {
                written(bytes - reported);
                reported = bytes;
            }
        };
        let mut kept_since_report = 0;
        while input.valid() {
            let ikey = input.key();
            let decision = rules
                .decide(ikey, may_exist_below)
                .map_err(|e| Error::corruption("<compaction input>", 0, e.0))?;
            let user_key = key::user_key(ikey);
            // A key with an older version dropped, or deleted, was written
            // again lately: its next values are likely hot.
            if !decision.is_keep() || key::tag(ikey) as u8 == ValueKind::Deletion as u8 {
                self.drop_cache.record(user_key);
            }
            if !decision.is_keep() {
                input.next()?;
                continue;
            }
            // The entry as the user's filter leaves it: removed (dropped,
            // or a deletion where an older version may lie below), with a
            // value of its choosing, or as it is.
            let replaced = match filter {
                Some((f, level)) => {
                    let snapshots = rules.snapshots();
                    match self.filter_entry(
                        f,
                        level,
                        ikey,
                        input.value(),
                        snapshots,
                        bases,
                        &mut filtered,
                    )? {
                        // Dropped whole only where nothing older of the
                        // key can survive: none below, and no snapshot
                        // keeping an older entry of this compaction.
                        Some(Decision::Remove)
                            if snapshots.is_empty() && nothing_below(user_key) =>
                        {
                            input.next()?;
                            continue;
                        }
                        Some(Decision::Remove) => Some((
                            InternalKey::new(user_key, key::seq(ikey), ValueKind::Deletion),
                            Vec::new(),
                        )),
                        Some(Decision::ChangeValue(v)) => {
                            Some(changed_entry(ikey, input.value(), v)?)
                        }
                        Some(Decision::Keep) | None => None,
                    }
                }
                None => None,
            };
            let (ikey, value) = match &replaced {
                Some((k, v)) => (k.encoded(), v.as_slice()),
                None => (ikey, input.value()),
            };
            let new_user_key = user_key != last_user_key.as_slice();
            if let Some((number, b)) = builder.take() {
                let values = if self.picker_opts.compensated {
                    b.value_bytes()
                } else {
                    0
                };
                let full = b.estimated_size().saturating_add(values) >= max_file_size;
                if new_user_key && full {
                    outputs.tables.push(Output {
                        number,
                        summary: b.finish()?,
                    });
                } else {
                    builder = Some((number, b));
                }
            }
            if builder.is_none() {
                if moved
                    .as_ref()
                    .is_some_and(|m| m.file_size() >= self.opts.effective_value_file_size())
                {
                    if let Some(full) = moved.take() {
                        outputs.value_files.push(full.finish()?);
                    }
                }
                report(outputs.bytes());
                let number = self.versions.lock().new_file_number();
                // Registered before creation so a failure can remove it.
                created.0.push((FileKind::Sstable, number));
                let path = filename::sstable(&self.dir, number);
                let file = self.fs.create(&path, self.background_file_options())?;
                let mut b = TableBuilder::new(file, path, self.table_options());
                if self.opts.prepopulate_block_cache {
                    b.warm_cache(self.block_cache.clone(), number, flush);
                }
                builder = Some((number, b));
            }
            // `decide` parsed the key.
            let kind = ValueKind::from_u8(key::tag(ikey) as u8).unwrap_or(ValueKind::Value);
            // An expiring entry keeps its expiry in front of whatever it
            // is written with.
            let split = expiry::split(kind, value)
                .map_err(|e| Error::corruption("<compaction input>", 0, e.0))?;
            let separated_key;
            let moved_handle = match reseparate.as_deref_mut() {
                Some(r) => match r.handle_of(ikey, value)? {
                    Some(old) => Some(self.reseparate_value(
                        r,
                        ikey,
                        split.value,
                        &old,
                        &mut moved,
                        created,
                    )?),
                    None => None,
                },
                None => None,
            };
            let (out_key, out_value) = if let Some(handle) = moved_handle {
                // Same key and kind, a handle into the new file.
                handle_buf.clear();
                if let Some(at) = split.expires_at {
                    expiry::join(&mut handle_buf, at, &[]);
                }
                handle.encode(&mut handle_buf);
                (ikey, handle_buf.as_slice())
            } else if separate
                && (flush || ((input.merged() || replaced.is_some()) && !short))
                && split.value.len() >= self.opts.min_value_size
                && split.kind == ValueKind::Value
            {
                let seq = key::seq(ikey);
                let vb = if flush {
                    let class = self.drop_cache.class_of(user_key);
                    self.value_file_builder(&mut values, class, outputs, created)?
                } else {
                    // A merged value goes where re-separated ones go: one
                    // new value file per output, as `correlated` counts.
                    self.moved_file(&mut moved, created)?
                };
                let handle = vb.add(user_key, seq, split.value)?;
                handle_buf.clear();
                let kind = match split.expires_at {
                    Some(at) => {
                        expiry::join(&mut handle_buf, at, &[]);
                        ValueKind::ExpiringValueRef
                    }
                    None => ValueKind::ValueRef,
                };
                handle.encode(&mut handle_buf);
                separated_key = InternalKey::new(user_key, seq, kind);
                (separated_key.encoded(), handle_buf.as_slice())
            } else {
                (ikey, value)
            };
            if let Some((_, b)) = builder.as_mut() {
                b.add(out_key, out_value)?;
            }
            if new_user_key {
                last_user_key.clear();
                last_user_key.extend_from_slice(user_key);
            }
            kept_since_report += 1;
            if flush && kept_since_report == REPORT_EVERY_ENTRIES {
                kept_since_report = 0;
                let growing = builder.as_ref().map_or(0, |(_, b)| b.estimated_size())
                    + values
                        .values()
                        .map(ValueFileBuilder::file_size)
                        .sum::<u64>()
                    + moved.as_ref().map_or(0, ValueFileBuilder::file_size);
                report(outputs.bytes() + growing);
            }
            input.next()?;
        }
        // Cold first, for a stable order of outputs.
        let mut values: Vec<_> = values.into_iter().collect();
        values.sort_by_key(|(class, _)| *class as u8);
        for (_, vb) in values {
            outputs.value_files.push(vb.finish()?);
        }
        if let Some(m) = moved {
            outputs.value_files.push(m.finish()?);
        }
        if let Some((number, b)) = builder {
            outputs.tables.push(Output {
                number,
                summary: b.finish()?,
            });
        }
        report(outputs.bytes());
        let dropped = rules.stats();
        add(
            &self.counters.entries_dropped,
            dropped.shadowed + dropped.obsolete_deletions,
        );
        let merges = input.stats();
        add(&self.counters.merges_full, merges.full);
        add(&self.counters.merge_operands_combined, merges.partial);
        add(&self.counters.merges_failed, merges.failed);
        drop(input);
        let expired = view.expired();
        add(&self.counters.expired_entries, expired.entries);
        add(&self.counters.expired_value_bytes, expired.value_bytes);
        let c = &self.counters;
        add(&c.compaction_filter_calls, filtered.calls);
        add(&c.compaction_filter_removed, filtered.removed);
        add(&c.compaction_filter_changed, filtered.changed);
        add(&c.compaction_filter_value_reads, filtered.value_reads);
        add(
            &c.compaction_filter_value_bytes_read,
            filtered.value_bytes_read,
        );
        Ok(())
    }

    /// Asks `filter` about the entry `ikey` (stored value `stored`) of a
    /// compaction into `level`, if it is a value newer than every live
    /// snapshot;
    /// `None` if it is not asked. A separated value is read through
    /// `bases` only if the filter asks for its bytes.
    #[allow(clippy::too_many_arguments)]
    fn filter_entry(
        &self,
        filter: &dyn CompactionFilter,
        level: usize,
        ikey: &[u8],
        stored: &[u8],
        snapshots: &[SeqNo],
        bases: Option<&ValueSource>,
        filtered: &mut Filtered,
    ) -> Result<Option<Decision>> {
        let kind = ValueKind::from_u8(key::tag(ikey) as u8).unwrap_or(ValueKind::Value);
        let seq = key::seq(ikey);
        // An entry a snapshot sees keeps what that snapshot reads.
        if !matches!(
            kind.without_expiry(),
            ValueKind::Value | ValueKind::ValueRef
        ) || stripe(snapshots, seq) != snapshots.len()
        {
            return Ok(None);
        }
        let split = expiry::split(kind, stored)
            .map_err(|e| Error::corruption("<compaction input>", 0, e.0))?;
        let user_key = key::user_key(ikey);
        let mut read = || -> Result<Vec<u8>> {
            let source = bases.ok_or_else(|| {
                Error::corruption("<compaction>", 0, "no value source for a filter's read")
            })?;
            Ok(source
                .resolve(ValueKind::ValueRef, split.value, user_key, seq, None)?
                .to_vec())
        };
        let source = if split.kind == ValueKind::ValueRef {
            let handle = ValueHandle::decode(split.value)
                .map_err(|e| Error::corruption("<compaction input>", 0, e.0))?;
            Source::Separated {
                record_len: u64::from(handle.len),
                read: &mut read,
            }
        } else {
            Source::Inline(split.value)
        };
        let mut value = FilterValue {
            expires_at_ms: split.expires_at,
            source,
            read: None,
        };
        let lookups = std::cell::Cell::new(0u64);
        let lookup = |key: &[u8]| {
            lookups.set(lookups.get() + 1);
            self.get(&crate::ReadOptions::new(), key)
        };
        let ctx = FilterContext {
            level,
            lookup: &lookup,
        };
        let decision = filter.filter(&ctx, user_key, &mut value);
        filtered.calls += 1;
        filtered.lookups += lookups.get();
        if value.was_read() && value.is_separated() {
            filtered.value_reads += 1;
            filtered.value_bytes_read += value.size();
        }
        if let Some(e) = value.failed_read() {
            return Err(e);
        }
        match decision {
            Decision::Keep => {}
            Decision::Remove => filtered.removed += 1,
            Decision::ChangeValue(_) => filtered.changed += 1,
        }
        Ok(Some(decision))
    }

    /// The value file of `class` being written, after finishing it and
    /// starting another when it has reached `value_file_size`.
    fn value_file_builder<'b>(
        &self,
        current: &'b mut HashMap<ValueClass, ValueFileBuilder>,
        class: ValueClass,
        outputs: &mut Outputs,
        created: &mut Created,
    ) -> Result<&'b mut ValueFileBuilder> {
        if current
            .get(&class)
            .is_some_and(|b| b.file_size() >= self.opts.effective_value_file_size())
        {
            if let Some(full) = current.remove(&class) {
                outputs.value_files.push(full.finish()?);
            }
        }
        match current.entry(class) {
            Entry::Occupied(b) => Ok(b.into_mut()),
            Entry::Vacant(slot) => {
                Ok(slot.insert(self.create_value_file(Origin::Flush, class, created)?))
            }
        }
    }

    /// A new value file, registered in `created` before it exists so that
    /// a failure removes it.
    fn create_value_file(
        &self,
        origin: Origin,
        class: ValueClass,
        created: &mut Created,
    ) -> Result<ValueFileBuilder> {
        let number = self.versions.lock().new_file_number();
        created.0.push((FileKind::ValueFile, number));
        let opts = ValueFileOptions {
            compression: self.opts.value_compression,
            direct_writes: self.opts.use_direct_io_for_flush_and_compaction,
            origin,
            class,
        };
        let path = filename::value_file(&self.dir, number);
        // Its record index is not warmed into the cache: a handle finds
        // its record in the file it was written to without the index, so
        // only GC's outputs, which records move to, have reads that need
        // theirs. Warmed here, it took a quarter of a 32 MiB cache that
        // the sstables' data blocks then missed.
        ValueFileBuilder::create(self.fs.as_ref(), path, number, opts)
    }

    /// The value file a compaction moves values into, started on first use.
    fn moved_file<'m>(
        &self,
        moved: &'m mut Option<ValueFileBuilder>,
        created: &mut Created,
    ) -> Result<&'m mut ValueFileBuilder> {
        Ok(match moved {
            Some(vb) => vb,
            None => moved.insert(self.create_value_file(
                Origin::Compaction,
                ValueClass::Cold,
                created,
            )?),
        })
    }

    /// Reads the value `old` names for the entry `ikey` (checked against
    /// the record's key and seq, as every read is) and appends it to
    /// `moved`, started here if need be. Returns its new handle.
    ///
    /// The new file is cold: its values survived long enough for their
    /// file to gather garbage or fall among the smallest parts of a wide
    /// fan-out, and splitting them by the DropCache would let one output
    /// reference two new files, which `correlated::select` does not count.
    fn reseparate_value(
        &self,
        r: &mut Reseparate,
        ikey: &[u8],
        raw: &[u8],
        old: &ValueHandle,
        moved: &mut Option<ValueFileBuilder>,
        created: &mut Created,
    ) -> Result<ValueHandle> {
        let user_key = key::user_key(ikey);
        let seq = key::seq(ikey);
        let value = r.source.resolve(
            ValueKind::ValueRef,
            raw,
            user_key,
            seq,
            Some((&mut r.readahead, true)),
        )?;
        let handle = self
            .moved_file(moved, created)?
            .add(user_key, seq, &value)?;
        r.records += 1;
        r.bytes_read += u64::from(old.len);
        Ok(handle)
    }

    /// Runs one compaction plan to completion and installs its result.
    pub(super) fn run_compaction(
        &self,
        plan: &CompactionPlan,
        version: &Arc<Version>,
        written: &dyn Fn(u64),
    ) -> Result<()> {
        if plan.trivial_move {
            self.apply_edit(plan.edit_for_trivial_move())?;
            add(&self.counters.trivial_moves, 1);
            return Ok(());
        }
        let opener = self.table_scan_opener();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if plan.level == 0 {
            for f in &plan.inputs {
                children.push(Box::new(LevelIterator::new(
                    vec![f.clone()],
                    opener.clone(),
                )));
            }
        } else {
            children.push(Box::new(LevelIterator::new(
                plan.inputs.clone(),
                opener.clone(),
            )));
        }
        if !plan.output_level_inputs.is_empty() {
            children.push(Box::new(LevelIterator::new(
                plan.output_level_inputs.clone(),
                opener,
            )));
        }
        let mut merged = MergingIterator::new(children);
        merged.seek_to_first()?;
        let mut rules = DropRules::new(self.snapshots.sequence_numbers(), plan.bottommost);
        let output_level = plan.output_level;
        let below = |uk: &[u8]| version.key_may_exist_below(output_level, uk);
        let inputs = plan.inputs.iter().chain(&plan.output_level_inputs);
        let short = self.budget.short(self.disk.bytes());
        // The last level with data (before this compaction lands).
        let last = picker::last_level(version);
        let into_last = plan.bottommost && last.is_none_or(|l| plan.output_level >= l);
        let max_file_size = if short && into_last && self.picker_opts.compensated {
            // While space is short each push-down rewrites the last level
            // to expose the garbage one memtable hid. Cut by the values
            // they reference, its tables are many and tiny (33 of 330 KB
            // at 2 GiB), and each costs a sync, and GC a value-references
            // block to read per job. Larger ones are bounded so that a
            // range merge, which rewrites a table's values whole and runs
            // only below `budget::SHORT_FROM`, still fits in the room left,
            // and takes no longer than eight tables' worth.
            let wide = (self.budget.bytes / budget::MAX_OUTPUT_SHARE)
                .min(plan.max_output_file_size.saturating_mul(MAX_WIDENING));
            plan.max_output_file_size.max(wide)
        } else {
            plan.max_output_file_size
        };
        let files = if plan.range_merge {
            inputs
                .flat_map(|f| f.value_refs.iter().map(|r| r.logical_file))
                .collect()
        } else if short {
            // Values re-separated take space before the files they empty
            // go, which the budget does not foresee; GC, whose outputs it
            // does, frees those files instead. Re-separating to keep
            // tables under `max_value_file_refs` (value files are small
            // under a budget, so tables name many) wrote 1 GB more in the
            // 2 GiB overwrite under a 1.25x budget, and took the directory
            // 45 MB past it.
            BTreeSet::new()
        } else {
            correlated::select(
                inputs.map(|f| &**f),
                version,
                &CorrelatedOptions::from(&self.opts),
            )
        };
        let mut reseparate = (!files.is_empty()).then(|| Reseparate {
            files,
            // Compaction reads only sstables, whose handles all name
            // value files of the Version.
            source: ValueSource {
                store: self.values.clone(),
                version: version.clone(),
                logs: Default::default(),
            },
            readahead: Readahead::for_compaction(),
            records: 0,
            bytes_read: 0,
        });
        let outputs = self.write_outputs(
            &mut merged,
            &mut rules,
            &below,
            max_file_size,
            Job::Compaction {
                output_level: plan.output_level,
            },
            reseparate.as_mut(),
            Some(&ValueSource {
                store: self.values.clone(),
                version: version.clone(),
                logs: Default::default(),
            }),
            written,
        )?;

        let mut edit = VersionEdit::default();
        for f in &plan.inputs {
            edit.delete_file(plan.level, f.number);
        }
        for f in &plan.output_level_inputs {
            edit.delete_file(plan.output_level, f.number);
        }
        let output_bytes = outputs.bytes();
        outputs.add_to(&mut edit, plan.output_level);
        // On failure the manifest may or may not hold the edit (a failed
        // fsync says nothing about what reached the disk): keep the outputs;
        // the next open removes them if the manifest does not name them. A
        // full disk fails the write before the record is whole: it holds
        // no edit, and the outputs go now, to give the space back.
        if let Err(e) = self.apply_edit(edit) {
            if e.is_device_full() {
                outputs.remove(self.fs.as_ref(), &self.dir);
            }
            return Err(e);
        }
        let read: u64 = plan
            .inputs
            .iter()
            .chain(&plan.output_level_inputs)
            .map(|f| f.size)
            .sum();
        let (records, values_read) = reseparate.map_or((0, 0), |r| (r.records, r.bytes_read));
        add(&self.counters.compaction_bytes_read, read + values_read);
        add(&self.counters.compaction_bytes_written, output_bytes);
        add(
            &self.counters.compaction_value_bytes_written,
            outputs.value_file_bytes(),
        );
        add(&self.counters.compaction_values_reseparated, records);
        add(&self.counters.compactions, 1);
        if plan.range_merge {
            add(&self.counters.range_merges, 1);
        }
        let upper: u64 = plan.inputs.iter().map(|f| f.num_entries).sum();
        add(&self.counters.compaction_upper_entries, upper);
        add(&self.counters.compaction_shadowed, rules.stats().shadowed);
        Ok(())
    }

    /// Logs `edit` to the manifest and installs the new Version. A failure
    /// poisons the database: the manifest's state on disk is unknown.
    pub(super) fn apply_edit(&self, edit: VersionEdit) -> Result<()> {
        self.apply_edit_with(|_| edit).map(drop)
    }

    /// As [`Self::apply_edit`], with the edit made from the current
    /// Version under the lock that orders edits, for a job whose inputs
    /// may have changed since it started. Returns the Version the edit
    /// installed.
    pub(super) fn apply_edit_with(
        &self,
        make: impl FnOnce(&Version) -> VersionEdit,
    ) -> Result<Arc<Version>> {
        let mut v = self.versions.lock();
        v.set_last_seq(self.last_seq());
        let edit = make(&v.current());
        if let Err(e) = v.log_and_apply(edit) {
            drop(v);
            self.set_bg_error(&e);
            return Err(e);
        }
        let current = v.current();
        self.state.lock().current = current.clone();
        Ok(current)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::Path;

    use super::*;
    use crate::memtable::MemTable;
    use crate::options::Options;
    use crate::vfs::{Fs, MemFs};
    use crate::Db;

    /// A compaction's space reservation is drawn down by what it has
    /// written: each output is reported once finished, not all at the
    /// end, so that the budget never counts an output both on disk and
    /// as still to come.
    #[test]
    fn outputs_are_reported_as_each_is_finished() {
        let fs = MemFs::new();
        let opts = Options {
            create_if_missing: true,
            fs: Arc::new(fs.clone()),
            ..Options::default()
        };
        let db = Db::open(Path::new("/db"), opts).unwrap();
        let mem = Arc::new(MemTable::new());
        for i in 0..2_000u64 {
            let key = format!("key{i:06}");
            mem.add(i + 1, ValueKind::Value, key.as_bytes(), &[b'v'; 100]);
        }
        let mut it = mem.iter();
        it.seek_to_first().unwrap();
        let mut rules = DropRules::new(Vec::new(), false);
        // Each report, with the sstables in the directory when it came.
        let reports = RefCell::new(Vec::new());
        let tables_on_disk = || {
            fs.list(Path::new("/db"))
                .unwrap()
                .iter()
                .filter(|name| name.ends_with(".sst"))
                .count()
        };
        let outputs = db
            .inner
            .write_outputs(
                &mut it,
                &mut rules,
                &|_| true,
                16 << 10,
                Job::Compaction { output_level: 1 },
                None,
                None,
                &|bytes| reports.borrow_mut().push((bytes, tables_on_disk())),
            )
            .unwrap();
        assert!(outputs.tables.len() > 3, "{} tables", outputs.tables.len());
        let reports: Vec<(u64, usize)> = reports
            .into_inner()
            .into_iter()
            .filter(|&(bytes, _)| bytes > 0)
            .collect();
        // The k-th table is reported while it is the newest on disk: as it
        // is finished, before the next is created.
        let expected: Vec<(u64, usize)> = outputs
            .tables
            .iter()
            .enumerate()
            .map(|(k, o)| (o.summary.file_size, k + 1))
            .collect();
        assert_eq!(reports, expected);
    }
}
