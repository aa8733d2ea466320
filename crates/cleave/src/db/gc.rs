//! Running GC jobs: picking from the current Version, copying with the
//! state lock released, and committing one VersionEdit that swaps the
//! input physical files for the outputs.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::budget;
use super::compact::value_file_meta;
use super::no_space;
use super::{DbInner, State};
use crate::base::limits::NUM_LEVELS;
use crate::base::{filename, FileNumber};
use crate::error::{Error, Result};
use crate::gc::job::{self, GcContext, GcWriteOptions};
use crate::gc::picker::{self, GcPickerOptions, GcPlan};
use crate::gc::pressure::{self, Pressure};
use crate::gc::rate_limiter::{Direction, Sample};
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

/// The part of a running job's output not written yet, counted in the
/// space budget's usage: the output takes space before the inputs go.
/// A GC job's whole output also counts in `planned` until the job is
/// done, the room it takes of the budget's headroom.
pub(super) struct Reservation<'a> {
    total: &'a AtomicU64,
    planned: Option<&'a AtomicU64>,
    bytes: u64,
    left: AtomicU64,
}

impl<'a> Reservation<'a> {
    pub(super) fn new(total: &'a AtomicU64, planned: Option<&'a AtomicU64>, bytes: u64) -> Self {
        total.fetch_add(bytes, Ordering::Relaxed);
        if let Some(p) = planned {
            p.fetch_add(bytes, Ordering::Relaxed);
        }
        Reservation {
            total,
            planned,
            bytes,
            left: AtomicU64::new(bytes),
        }
    }

    /// `bytes` of the output were written: they count on disk now.
    pub(super) fn written(&self, bytes: u64) {
        let mut taken = 0;
        let _ = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                taken = left.min(bytes);
                Some(left - taken)
            });
        self.total.fetch_sub(taken, Ordering::Release);
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.total
            .fetch_sub(*self.left.get_mut(), Ordering::Relaxed);
        if let Some(p) = self.planned {
            p.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// GC leaves a value file whose live records all expire within this long:
/// compactions drop their references when they expire, reading no value,
/// and the file then goes whole. Collecting it would copy records about to
/// become garbage, and copy them again as they expire in the output. The
/// garbage waits that long at most, unless space is short. Range merges
/// leave such values where they are too.
pub(super) const EXPIRY_WAIT: Duration = Duration::from_secs(300);

/// How compaction and GC share the background threads now.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedule {
    /// GC's garbage threshold, lowered when space is short.
    pub gc_ratio: f64,
    /// The most live bytes one GC job may copy now: the room below the
    /// budget's stop level, or unbounded.
    pub gc_room: u64,
    /// GC jobs allowed at once.
    pub max_gc: usize,
    /// GC goes before compaction for a free thread.
    pub gc_first: bool,
    /// GC may also use the last free pool thread, which compactions leave.
    pub gc_may_borrow: bool,
    pub pressure: Pressure,
    /// What the space budget counts.
    pub usage: u64,
    /// Space is short (`Budget::short`): compaction pushes recent writes
    /// down to expose the garbage they hide, and no range merges, whose
    /// outputs take space before the files they empty are deleted.
    pub short: bool,
    /// The file system's free bytes while the disk is short (`no_space`):
    /// GC goes first, at `SHORT_GC_RATIO` at most, with jobs that fit, and
    /// compactions run only if theirs fit.
    pub device_room: Option<u64>,
}

/// GC totals since open, and the last job.
#[derive(Debug, Default)]
pub(super) struct GcTotals {
    pub total: GcStats,
    pub last: Option<GcStats>,
}

impl DbInner {
    /// `leave_expiring` leaves alone the files whose live records all
    /// expire within `EXPIRY_WAIT`.
    fn gc_picker_options(
        &self,
        garbage_ratio: f64,
        room: u64,
        leave_expiring: bool,
    ) -> GcPickerOptions {
        let leave_expiring_until = if leave_expiring {
            self.opts.clock.expiry_after(EXPIRY_WAIT)
        } else {
            0
        };
        GcPickerOptions {
            garbage_ratio,
            value_file_size: self.opts.effective_value_file_size(),
            max_live_bytes: room,
            leave_expiring_until,
        }
    }

    /// The next GC job over `st`'s Version at `sched`, avoiding `avoid`.
    /// A job must fit in the room below the budget's stop level, unless
    /// nothing else will make room: no other job runs, usage has reached
    /// the writers' target (writers add no room), and every file out of
    /// the current Version is deleted. A file larger than the room
    /// (written before the budget, or holding one large value) would wait
    /// for ever, so the best file then goes even if its copy takes usage
    /// past the budget for a while. While a compaction's or a reader's
    /// Version still names the files GC emptied, GC's jobs free nothing:
    /// taking those jobs for stuck, GC copied file after file past the
    /// room, and the directory reached 1.2x its budget.
    fn pick_gc_avoiding(
        &self,
        st: &State,
        sched: &Schedule,
        avoid: &HashSet<FileNumber>,
    ) -> Option<GcPlan> {
        // Short of space, every byte GC can free now counts.
        let leave_expiring = !sched.short && sched.device_room.is_none();
        let opts = self.gc_picker_options(sched.gc_ratio, sched.gc_room, leave_expiring);
        picker::pick(&st.current, &opts, avoid).or_else(|| {
            let stuck = self.budget.bytes > 0
                && sched.device_room.is_none()
                && st.gc_jobs == 0
                && sched.usage >= self.budget.target_bytes()
                && self.purger.retained() == 0;
            stuck.then(|| {
                let unbounded = self.gc_picker_options(sched.gc_ratio, u64::MAX, false);
                picker::pick(&st.current, &unbounded, avoid)
            })?
        })
    }

    /// The next background GC job, if GC is on and some file reaches the
    /// schedule's garbage ratio that no running job collects and no job
    /// failed on.
    pub(super) fn pick_gc(&self, st: &State, sched: &Schedule) -> Option<GcPlan> {
        if !self.opts.enable_gc {
            return None;
        }
        let mut avoid = self.logs.pinned();
        avoid.extend(st.gc_busy.union(&st.gc_skip));
        self.pick_gc_avoiding(st, sched, &avoid)
    }

    /// Whether GC is behind at threshold `garbage_ratio`. A GC that keeps
    /// up collects each file as it reaches the threshold, so files hold
    /// from none to a threshold's worth of garbage, half of it on
    /// average: more than half the threshold over all value files means
    /// files reach it faster than GC collects them.
    fn gc_behind(p: &Pressure, garbage_ratio: f64) -> bool {
        let records = p.referenced.saturating_add(p.exposed_garbage);
        records > 0 && p.exposed_garbage as f64 >= 0.5 * garbage_ratio * records as f64
    }

    /// What the space budget counts (see `budget`): the bytes of every
    /// file in the directory, plus what work will write before it
    /// deletes: the rest of each running GC job's output, of each running
    /// compaction's inputs' bytes the part its outputs have not yet
    /// taken, and the memtables' flushes, whose WALs go only once their
    /// outputs are written (of the one being flushed, the part of its
    /// output not yet written). Memtables flush one at a time, oldest
    /// first, and each flush deletes a WAL about as large as its output,
    /// so the peak is the largest flush to come, not their sum (writes
    /// with `disable_wal` break this a little: their flushes delete no
    /// WAL).
    /// The mutable one counts too: counted only at its switch, its flush
    /// made usage jump past the budget, and the driver stopped the
    /// 0.28 GiB overwrite under a 1.5x limit for 0.2 s.
    pub(super) fn space_usage(&self, st: &State) -> u64 {
        // Read before the disk: a job adds its output to the disk before
        // it takes it from what is left (`Reservation::written`), so this
        // order may count a report twice, never miss one.
        let reserved = self.reserved.load(Ordering::Acquire);
        let flush_left = self.flush_left.load(Ordering::Acquire);
        let flush = st
            .imm
            .iter()
            .filter(|i| !i.flushing)
            .map(|i| i.mem.approximate_memory_usage() as u64)
            .fold(st.mem.approximate_memory_usage() as u64, u64::max)
            .max(flush_left);
        self.disk
            .bytes()
            .saturating_add(flush)
            .saturating_add(reserved)
    }

    /// Value bytes of the current Version: in value files, and of those
    /// referenced by live sstables.
    fn value_totals(v: &Version) -> (u64, u64) {
        v.value_files().fold((0u64, 0u64), |(files, live), f| {
            let garbage = v.garbage_bytes(f);
            (
                files.saturating_add(f.size),
                live.saturating_add(f.record_bytes().saturating_sub(garbage)),
            )
        })
    }

    /// Whether the budget can hold the database: its live values at the
    /// utilization cleaning can sustain, its sstables, full memtables
    /// with their WALs, and the room GC's jobs copy into. Reported once
    /// each time it stops fitting.
    fn check_budget_fits(&self, st: &State, live_values: u64) {
        if self.budget.bytes == 0 {
            return;
        }
        let v = &st.current;
        let tables = (0..NUM_LEVELS).fold(0u64, |s, l| s.saturating_add(v.level_bytes(l)));
        let memtables = (self.opts.write_buffer_size as u64)
            .saturating_mul(self.opts.max_write_buffer_number as u64);
        let needed = budget::least_needed(
            live_values,
            tables
                .saturating_add(memtables)
                .saturating_add(self.budget.headroom),
        );
        let fits = self.budget.fits(needed);
        if !fits && !self.budget_impossible.swap(true, Ordering::Relaxed) {
            self.counters
                .budget_impossible
                .fetch_add(1, Ordering::Relaxed);
            log::warn!(
                "{}: space budget of {} bytes cannot be met: {} bytes of live values need {} \
                 at the {:.0}% utilization value-file cleaning sustains, sstables take {}, \
                 memtables and their WALs up to {}, GC's outputs up to {}; writes past the \
                 budget are {}",
                self.dir.display(),
                self.budget.bytes,
                live_values,
                (live_values as f64 / budget::MAX_UTILIZATION) as u64,
                budget::MAX_UTILIZATION * 100.0,
                tables,
                memtables,
                self.budget.headroom,
                if self.opts.space_budget_fail_writes {
                    "refused"
                } else {
                    "delayed"
                },
            );
        } else if fits {
            self.budget_impossible.store(false, Ordering::Relaxed);
        }
    }

    /// How compaction and GC share the background threads now, from the
    /// space pressure of each side and the space budget.
    pub(super) fn schedule(&self, st: &State) -> Schedule {
        let usage = self.space_usage(st);
        let (value_bytes, live_values) = Self::value_totals(&st.current);
        self.check_budget_fits(st, live_values);
        let device_room = self.device_room(st);
        let mut gc_ratio =
            self.budget
                .gc_ratio(self.opts.gc_garbage_ratio, usage, value_bytes, live_values);
        let mut gc_room = self.budget.job_room(usage);
        if let Some(room) = device_room {
            gc_ratio = gc_ratio.min(no_space::SHORT_GC_RATIO);
            gc_room = gc_room.min(room.saturating_sub(no_space::MARGIN_BYTES));
        }
        let pressure = pressure::measure(
            &st.current,
            self.opts.max_bytes_for_level_multiplier,
            gc_ratio,
        );
        let threads = self.opts.pool_threads();
        let short = self.budget.short(usage) || device_room.is_some();
        let mut sched = Schedule {
            gc_ratio,
            gc_room,
            max_gc: 0,
            gc_first: device_room.is_some()
                || (self.opts.dynamic_gc_threads && pressure.p_value > pressure.p_index),
            gc_may_borrow: short || Self::gc_behind(&pressure, gc_ratio),
            pressure,
            usage,
            short,
            device_room,
        };
        let gc_has_work = self.opts.enable_gc && {
            let mut avoid = self.logs.pinned();
            avoid.extend(&st.gc_skip);
            self.pick_gc_avoiding(st, &sched, &avoid).is_some()
        };
        let mut max_gc = if self.opts.dynamic_gc_threads {
            pressure::max_gc_jobs(threads, &sched.pressure, gc_has_work)
        } else if gc_has_work {
            // The static split: at most half of the threads.
            (threads / 2).max(1)
        } else {
            0
        };
        if gc_has_work {
            max_gc = max_gc.max(self.budget.gc_threads(threads, usage));
            if device_room.is_some() {
                // GC is what frees space.
                max_gc = threads;
            }
        }
        self.gc_limiter.set_suspended(short);
        self.gc_max_jobs.store(max_gc, Ordering::Relaxed);
        sched.max_gc = max_gc;
        sched
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
        // Undone even if the job panics, or the inputs would stay busy and
        // the job counted for the life of the database.
        let mut registered = Registered {
            db: self,
            inputs,
            failed: true,
        };
        // Reserved before the lock goes, so that the next pick sees the
        // room this job takes; released (first, on a panic) once its
        // inputs are deleted.
        let live_bytes = plan.live_bytes;
        let reservation = Reservation::new(&self.reserved, Some(&self.gc_planned), live_bytes);
        drop(st);
        let r = self.run_gc(&plan, &version, &reservation);
        // As for compactions: the job's Version may be the last to name
        // the inputs.
        drop(plan);
        drop(version);
        self.delete_obsolete_files();
        drop(reservation);
        match &r {
            // Its outputs are removed and its inputs untouched: it runs
            // again once there is room.
            Err(e) if e.is_device_full() => {
                registered.failed = false;
                self.postpone(e, live_bytes);
            }
            Err(_) => {
                registered.failed = true;
                self.gc_totals.lock().total.failed_jobs += 1;
            }
            Ok(_) => registered.failed = false,
        }
        drop(registered);
        (self.state.lock(), r)
    }

    /// Runs `plan` over `version` to completion: copies, then commits.
    /// On failure before the commit the outputs are removed; a failed
    /// commit poisons the database (the manifest's state is unknown).
    fn run_gc(
        &self,
        plan: &GcPlan,
        version: &Arc<Version>,
        reservation: &Reservation<'_>,
    ) -> Result<GcStats> {
        let cx = GcContext {
            fs: self.fs.as_ref(),
            dir: &self.dir,
            tables: &self.table_cache,
            values: &self.values,
            write: GcWriteOptions {
                compression: self.opts.value_compression,
                direct_writes: self.opts.use_direct_io_for_flush_and_compaction,
                value_file_size: self.opts.effective_value_file_size(),
            },
            coalesce_reads: self.opts.gc_coalesced_reads,
            reads_in_flight: if self.budget.short(self.disk.bytes()) {
                job::SHORT_READS_IN_FLIGHT
            } else {
                job::READS_IN_FLIGHT
            },

            warm: self
                .opts
                .prepopulate_block_cache
                .then(|| self.block_cache.clone()),
            pace: &|direction, bytes| {
                let c = &self.counters;
                let sample = Sample {
                    foreground: c.user_bytes_written.load(Ordering::Relaxed),
                    disk: [
                        &c.wal_bytes_written,
                        &c.flush_bytes_written,
                        &c.compaction_bytes_written,
                        &c.gc_bytes_written,
                    ]
                    .iter()
                    .map(|n| n.load(Ordering::Relaxed))
                    .sum(),
                    gc: c.gc_bytes_written.load(Ordering::Relaxed),
                };
                if direction == Direction::Write {
                    // Counted as it goes, so the loop sees GC's bandwidth
                    // while the job runs.
                    c.gc_bytes_written.fetch_add(bytes, Ordering::Relaxed);
                }
                self.gc_limiter.pace(direction, bytes, sample)
            },
            // What the outputs hold counts on disk now, not as reserved.
            written: &|bytes| reservation.written(bytes),
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
        // Asked for: not bounded by the budget's room.
        let opts = self.gc_picker_options(garbage_ratio, u64::MAX, false);
        let mut done = GcStats::default();
        let mut st = self.state.lock();
        let eligible: HashSet<FileNumber> = st.current.value_files().map(|f| f.number).collect();
        loop {
            Self::check_bg_error(&st)?;
            // A value log unflushed entries point into is never collected.
            let pinned = self.logs.pinned();
            let skip: HashSet<FileNumber> = st
                .current
                .value_files()
                .map(|f| f.number)
                .filter(|n| !eligible.contains(n) || st.gc_busy.contains(n) || pinned.contains(n))
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
