//! Executing compaction plans, and writing the output sstables shared by
//! flushes and compactions.

use std::sync::Arc;

use super::stats::add;
use super::DbInner;
use crate::base::key;
use crate::base::{filename, FileNumber};
use crate::compaction::picker::CompactionPlan;
use crate::compaction::stream::DropRules;
use crate::error::{Error, Result};
use crate::iter::level::LevelIterator;
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::manifest::edit::VersionEdit;
use crate::manifest::version::Version;
use crate::manifest::FileMeta;
use crate::sstable::{TableBuilder, TableOptions, TableSummary};
use crate::vfs::FileOptions;

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
            ..FileMeta::default()
        }
    }
}

impl DbInner {
    fn table_options(&self) -> TableOptions {
        TableOptions {
            block_size: self.opts.block_size,
            restart_interval: self.opts.block_restart_interval,
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
            compression: self.opts.compression,
        }
    }

    /// Writes the entries of `input` that `rules` keep into sstables of
    /// about `max_file_size` bytes. A user key never straddles two outputs,
    /// so that the outputs' key ranges do not overlap. On failure the
    /// partial outputs are removed.
    pub(super) fn write_outputs(
        &self,
        input: &mut dyn InternalIterator,
        rules: &mut DropRules,
        may_exist_below: &dyn Fn(&[u8]) -> bool,
        max_file_size: u64,
    ) -> Result<Vec<Output>> {
        let mut outputs = Vec::new();
        let result =
            self.write_outputs_into(input, rules, may_exist_below, max_file_size, &mut outputs);
        if let Err(e) = result {
            for o in &outputs {
                let _ = self.fs.remove(&filename::sstable(&self.dir, o.number));
            }
            return Err(e);
        }
        if !outputs.is_empty() {
            self.fs.sync_dir(&self.dir)?;
        }
        Ok(outputs)
    }

    fn write_outputs_into(
        &self,
        input: &mut dyn InternalIterator,
        rules: &mut DropRules,
        may_exist_below: &dyn Fn(&[u8]) -> bool,
        max_file_size: u64,
        outputs: &mut Vec<Output>,
    ) -> Result<()> {
        let mut builder: Option<(FileNumber, TableBuilder)> = None;
        let mut last_user_key: Vec<u8> = Vec::new();
        let file_opts = FileOptions {
            direct: self.opts.use_direct_io_for_flush_and_compaction,
        };
        while input.valid() {
            let ikey = input.key();
            let decision = rules
                .decide(ikey, may_exist_below)
                .map_err(|e| Error::corruption("<compaction input>", 0, e.0))?;
            if !decision.is_keep() {
                input.next()?;
                continue;
            }
            let user_key = key::user_key(ikey);
            let new_user_key = user_key != last_user_key.as_slice();
            if let Some((number, b)) = builder.take() {
                if new_user_key && b.estimated_size() >= max_file_size {
                    outputs.push(Output {
                        number,
                        summary: b.finish()?,
                    });
                } else {
                    builder = Some((number, b));
                }
            }
            if builder.is_none() {
                let number = self.versions.lock().new_file_number();
                // Registered before creation so a failure can remove it.
                let path = filename::sstable(&self.dir, number);
                let file = self.fs.create(&path, file_opts)?;
                builder = Some((number, TableBuilder::new(file, path, self.table_options())));
            }
            if let Some((_, b)) = builder.as_mut() {
                b.add(ikey, input.value())?;
            }
            if new_user_key {
                last_user_key.clear();
                last_user_key.extend_from_slice(user_key);
            }
            input.next()?;
        }
        if let Some((number, b)) = builder {
            outputs.push(Output {
                number,
                summary: b.finish()?,
            });
        }
        let dropped = rules.stats();
        add(
            &self.counters.entries_dropped,
            dropped.shadowed + dropped.obsolete_deletions,
        );
        Ok(())
    }

    /// Runs one compaction plan to completion and installs its result.
    pub(super) fn run_compaction(
        &self,
        plan: &CompactionPlan,
        version: &Arc<Version>,
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
        let outputs =
            self.write_outputs(&mut merged, &mut rules, &below, plan.max_output_file_size)?;

        let mut edit = VersionEdit::default();
        for f in &plan.inputs {
            edit.delete_file(plan.level, f.number);
        }
        for f in &plan.output_level_inputs {
            edit.delete_file(plan.output_level, f.number);
        }
        let mut written = 0;
        for o in &outputs {
            written += o.summary.file_size;
            edit.add_file(plan.output_level, o.meta());
        }
        // On failure the manifest may or may not hold the edit (a failed
        // fsync says nothing about what reached the disk): keep the outputs;
        // the next open removes them if the manifest does not name them.
        self.apply_edit(edit)?;
        let read: u64 = plan
            .inputs
            .iter()
            .chain(&plan.output_level_inputs)
            .map(|f| f.size)
            .sum();
        add(&self.counters.compaction_bytes_read, read);
        add(&self.counters.compaction_bytes_written, written);
        add(&self.counters.compactions, 1);
        Ok(())
    }

    /// Logs `edit` to the manifest and installs the new Version. A failure
    /// poisons the database: the manifest's state on disk is unknown.
    pub(super) fn apply_edit(&self, edit: VersionEdit) -> Result<()> {
        let mut v = self.versions.lock();
        v.set_last_seq(self.last_seq());
        if let Err(e) = v.log_and_apply(edit) {
            drop(v);
            self.set_bg_error(&e);
            return Err(e);
        }
        let current = v.current();
        self.state.lock().current = current;
        Ok(())
    }
}
