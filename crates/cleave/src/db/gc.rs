//! Running GC jobs: picking from the current Version, copying with the
//! state lock released, and committing one VersionEdit that swaps the
//! input physical files for the outputs.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::compact::value_file_meta;
use super::{DbInner, State};
use crate::base::{filename, FileNumber};
use crate::error::{Error, Result};
use crate::gc::job::{self, GcContext, GcWriteOptions};
use crate::gc::picker::{self, GcPickerOptions, GcPlan};
use crate::gc::GcStats;
use crate::manifest::edit::VersionEdit;
use crate::manifest::version::Version;

/// Undoes a running job's registration when dropped, and skips the inputs
/// of a failed (or panicking) job, under the same lock: a waiter woken here
/// must never see them free to pick again.
struct Registered<'a> {
    db: &'a DbInner,
    inputs: Vec<FileNumber>,
    failed: bool,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut st = self.db.state.lock();
        st.gc_jobs -= 1;
        for n in &self.inputs {
            st.gc_busy.remove(n);
        }
        if self.failed {
            st.gc_skip.extend(&self.inputs);
        }
        self.db.bg_cv.notify_all();
    }
}

/// GC totals since open, and the last job.
#[derive(Debug, Default)]
pub(super) struct GcTotals {
    pub total: GcStats,
    pub last: Option<GcStats>,
}

impl DbInner {
    fn gc_picker_options(&self, garbage_ratio: f64) -> GcPickerOptions {
        GcPickerOptions {
            garbage_ratio,
            value_file_size: self.opts.value_file_size,
        }
    }

    /// The next background GC job, if GC is on and some file reaches the
    /// threshold that no running job collects and no job failed on.
    pub(super) fn pick_gc(&self, st: &State) -> Option<GcPlan> {
        if !self.opts.enable_gc {
            return None;
        }
        let opts = self.gc_picker_options(self.opts.gc_garbage_ratio);
        let avoid: HashSet<FileNumber> = st.gc_busy.union(&st.gc_skip).copied().collect();
        picker::pick(&st.current, &opts, &avoid)
    }

    /// Whether GC is behind. A GC that keeps up collects each file as it
    /// reaches the threshold, so files hold from none to a threshold's
    /// worth of garbage, half of it on average: more than half the
    /// threshold over all value files means files reach it faster than
    /// GC collects them.
    pub(super) fn gc_behind(&self, v: &Version) -> bool {
        let (garbage, records) = v.value_files().fold((0u64, 0u64), |(g, r), f| {
            (
                g.saturating_add(v.garbage_bytes(f)),
                r.saturating_add(f.record_bytes()),
            )
        });
        records > 0 && garbage as f64 >= 0.5 * self.opts.gc_garbage_ratio * records as f64
    }

    /// Runs `plan` with the state lock released, its inputs marked busy,
    /// and deletes what it freed. Returns the lock again. A job that fails
    /// before its commit changed nothing and does not poison the database
    /// (a failed commit has poisoned it already); background GC then
    /// leaves its inputs alone until the next open, so that a damaged file
    /// is not retried for ever.
    pub(super) fn run_gc_registered<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        plan: GcPlan,
    ) -> (MutexGuard<'a, State>, Result<GcStats>) {
        let version = st.current.clone();
        let inputs: Vec<FileNumber> = plan.inputs.iter().map(|f| f.number).collect();
        st.gc_jobs += 1;
        st.gc_busy.extend(&inputs);
        drop(st);
        // Undone even if the job panics, or the inputs would stay busy and
        // the job counted for the life of the database.
        let mut registered = Registered {
            db: self,
            inputs,
            failed: true,
        };
        let r = self.run_gc(&plan, &version);
        // As for compactions: the job's Version may be the last to name
        // the inputs.
        drop(plan);
        drop(version);
        self.delete_obsolete_files();
        registered.failed = r.is_err();
        if r.is_err() {
            self.gc_totals.lock().total.failed_jobs += 1;
        }
        drop(registered);
        (self.state.lock(), r)
    }

    /// Runs `plan` over `version` to completion: copies, then commits.
    /// On failure before the commit the outputs are removed; a failed
    /// commit poisons the database (the manifest's state is unknown).
    pub(super) fn run_gc(&self, plan: &GcPlan, version: &Arc<Version>) -> Result<GcStats> {
        let cx = GcContext {
            fs: self.fs.as_ref(),
            dir: &self.dir,
            tables: &self.table_cache,
            values: &self.values,
            write: GcWriteOptions {
                compression: self.opts.value_compression,
                direct_writes: self.opts.use_direct_io_for_flush_and_compaction,
                value_file_size: self.opts.value_file_size,
            },
        };
        let mut created = Vec::new();
        let mut new_number = || self.versions.lock().new_file_number();
        let copied = job::run(&cx, version, plan, &mut new_number, &mut created);
        let mut out = match copied {
            Ok(out) => out,
            Err(e) => {
                self.remove_value_files(&created);
                return Err(e);
            }
        };
        let start = Instant::now();
        let installed = self.apply_edit_with(|current| {
            let mut edit = VersionEdit::default();
            for f in &plan.inputs {
                // An input whose every record lost its last reference while
                // the job ran has already left, in the edit that did it.
                if current.value_file(f.number).is_some() {
                    edit.delete_value_file(f.number);
                }
            }
            for s in &out.files {
                edit.add_value_file(value_file_meta(s));
            }
            edit
        })?;
        // An output whose logical files all died meanwhile was left out of
        // the edit: nothing will ever name it. (Checked in the Version the
        // edit installed: a later edit may remove an output some reader's
        // Version still names, and that one the purge deletes.)
        let unnamed: Vec<FileNumber> = out
            .files
            .iter()
            .map(|f| f.number)
            .filter(|&n| installed.value_file(n).is_none())
            .collect();
        self.remove_value_files(&unnamed);
        out.stats.commit_time = start.elapsed();
        let mut totals = self.gc_totals.lock();
        totals.total += &out.stats;
        totals.last = Some(out.stats.clone());
        Ok(out.stats)
    }

    fn remove_value_files(&self, numbers: &[FileNumber]) {
        for &n in numbers {
            let _ = self.fs.remove(&filename::value_file(&self.dir, n));
        }
    }

    /// Collects, now, every value file whose garbage ratio is at least
    /// `garbage_ratio`, or waits for the background job collecting it.
    /// Files that appear while it runs are left alone, so it ends under any
    /// write load. Returns the work of the jobs it ran.
    pub(super) fn gc_now(&self, garbage_ratio: f64) -> Result<GcStats> {
        if !(garbage_ratio > 0.0 && garbage_ratio <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "garbage_ratio {garbage_ratio} is not in (0, 1]"
            )));
        }
        let opts = self.gc_picker_options(garbage_ratio);
        let mut done = GcStats::default();
        let mut st = self.state.lock();
        let eligible: HashSet<FileNumber> = st.current.value_files().map(|f| f.number).collect();
        loop {
            Self::check_bg_error(&st)?;
            let skip: HashSet<FileNumber> = st
                .current
                .value_files()
                .map(|f| f.number)
                .filter(|n| !eligible.contains(n) || st.gc_busy.contains(n))
                .collect();
            let Some(plan) = picker::pick(&st.current, &opts, &skip) else {
                // Files that other jobs collect count as collected once
                // those jobs are done.
                if st.gc_busy.iter().any(|n| eligible.contains(n)) {
                    self.bg_cv.wait(&mut st);
                    continue;
                }
                return Ok(done);
            };
            let (guard, r) = self.run_gc_registered(st, plan);
            st = guard;
            match r {
                Ok(stats) => done += &stats,
                Err(e) => return Err(e),
            }
        }
    }
}
