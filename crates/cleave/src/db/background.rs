//! The background threads: a flush thread, and a pool that runs
//! compactions of disjoint key ranges in parallel, then GC; also manual
//! compaction and waiting for idleness.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::gc::{Reservation, Schedule};
use super::no_space;
use super::{DbInner, State};
use crate::base::limits::NUM_LEVELS;
use crate::compaction::picker::{self, Busy, CompactionPlan, PushDownFor};
use crate::error::{Error, Result};
use crate::manifest::version::Version;

/// A compaction in progress: the files and output range the picker must
/// avoid. It holds no `FileMeta`, so that it never delays file deletion.
pub(super) struct RunningCompaction {
    id: u64,
    busy: Busy,
    /// A range merge or a push-down before one, which GC waits for.
    tidy: bool,
}

impl State {
    fn busy(&self) -> Busy {
        let mut busy = Busy::default();
        for c in &self.compactions {
            busy.extend(&c.busy);
        }
        busy
    }
}

/// The body of the flush thread. Flushes have a thread of their own, as
/// in RocksDB's high-priority pool: a flush waiting behind a GC job or a
/// compaction stops writes once the memtables fill, however much room the
/// budget has.
pub(super) fn run_flushes(db: &DbInner) {
    let mut st = db.state.lock();
    let mut next_look = Instant::now();
    loop {
        if st.no_space.is_some() && st.bg_error.is_none() && !st.shutting_down {
            st = db.poll_no_space(st, &mut next_look);
            continue;
        }
        if st.bg_error.is_none() && st.no_space.is_none() && !st.imm.is_empty() {
            debug_assert!(!st.flush_running, "one thread flushes");
            st.flush_running = true;
            drop(st);
            let r = db.flush_oldest();
            if let Err(e) = &r {
                db.set_bg_error(e);
            }
            st = db.state.lock();
            st.flush_running = false;
            // A failed flush left its memtable: the budget counts it whole
            // again.
            if r.is_err() {
                if let Some(i) = st.imm.front_mut() {
                    i.flushing = false;
                }
            }
            db.bg_cv.notify_all();
            continue;
        }
        // Memtables left at shutdown were flushed above: their WALs would
        // replay them, but a clean close leaves none to replay.
        if st.shutting_down {
            return;
        }
        db.bg_cv.wait(&mut st);
    }
}

/// The body of each thread of the pool, which compaction and GC share.
pub(super) fn run(db: &DbInner) {
    let mut st = db.state.lock();
    'outer: loop {
        if st.shutting_down {
            return;
        }
        if st.bg_error.is_some() {
            db.bg_cv.wait(&mut st);
            continue;
        }
        db.lift_postponement(&mut st);
        let sched = db.schedule(&st);
        let mut idle_wait = None;
        let jobs = st.compactions.len() + st.gc_jobs;
        // A compaction may start whenever a compaction slot and a pool
        // thread are free. With one pool thread (the default two
        // background jobs, as RocksDB's one flush and one compaction
        // thread) compactions and GC jobs take turns.
        let compaction_slot =
            st.compactions.len() < db.max_compactions() && jobs < db.opts.pool_threads();
        // GC runs, within its share, in the threads compactions may not
        // take; while it falls behind or space is short, also in the last
        // free one.
        let gc_slot = st.gc_jobs < sched.max_gc
            && (jobs < db.max_compactions()
                || (jobs < db.opts.pool_threads() && sched.gc_may_borrow));
        // Range merges (and the push-downs before them) go before GC once
        // writes have paused, unless space is short: each empties value
        // files of references, which then die whole, where GC would copy
        // their live records part by part, only for the merges to copy
        // them again. So GC also waits while they are due or running.
        // The state cannot change while the lock is held: one pick serves
        // both this check and the compaction turn below.
        let mut compaction = db
            .pick_compaction(&st, &sched)
            .filter(|plan| fits(plan, sched.device_room));
        let merge = if compaction.is_none() {
            db.range_merge(&st, &sched)
        } else {
            RangeMerge::Nothing
        };
        let tidying = matches!(merge, RangeMerge::Run(_)) || st.compactions.iter().any(|c| c.tidy);
        let gc_slot = gc_slot && !tidying;
        match merge {
            RangeMerge::Run(plan) if compaction_slot => {
                let version = st.current.clone();
                st = run_registered(db, st, plan, version, true).0;
                continue 'outer;
            }
            RangeMerge::After(wait) => idle_wait = Some(wait),
            _ => {}
        }
        // Compaction first unless the value files' pressure is the higher:
        // it is cheap with values separated (the tree is small), and it is
        // what exposes garbage, so a file whose records all die is deleted
        // without GC copying anything.
        for gc_turn in [sched.gc_first, !sched.gc_first] {
            if gc_turn && gc_slot {
                if let Some(gc) = db.pick_gc(&st, &sched) {
                    // An unused pick must not pin files for the job's length.
                    compaction = None;
                    // A failure is counted in the stats; see run_gc_registered.
                    st = db.run_gc_registered(st, gc).0;
                    continue 'outer;
                }
            } else if !gc_turn && compaction_slot {
                if let Some(plan) = compaction.take() {
                    let version = st.current.clone();
                    // A failure has poisoned the database; see run_registered.
                    st = run_registered(db, st, plan, version, false).0;
                    continue 'outer;
                }
            }
        }
        // The unused pick may have held the last reference to files that
        // left the Version meanwhile: delete them before sleeping, or they
        // would take disk space until the next job.
        drop(compaction);
        if db.purger.has_pending() {
            drop(st);
            db.purger.purge();
            st = db.state.lock();
            continue;
        }
        // Tables whose values expire are looked at again when they may
        // have expired enough.
        let now = db.opts.clock.now_ms();
        if let Some(at) = picker::next_expiry_check(&st.current, now, EXPIRY_RECHECK_MS) {
            let wait = Duration::from_millis(at.saturating_sub(now).clamp(1, EXPIRY_RECHECK_MS));
            idle_wait = Some(idle_wait.map_or(wait, |w: Duration| w.min(wait)));
        }
        // Postponed jobs look at the free space again after a while.
        if sched.device_room.is_some() {
            let poll = db.opts.no_space_poll_interval;
            idle_wait = Some(idle_wait.map_or(poll, |w: Duration| w.min(poll)));
        }
        match idle_wait {
            Some(wait) => {
                db.bg_cv.wait_for(&mut st, wait);
            }
            None => db.bg_cv.wait(&mut st),
        }
    }
}

/// Bytes a compaction may write before its inputs go: up to theirs
/// (values re-separated aside), none for a move.
fn compaction_output(plan: &CompactionPlan) -> u64 {
    if plan.trivial_move {
        return 0;
    }
    plan.inputs
        .iter()
        .chain(&plan.output_level_inputs)
        .fold(0u64, |sum, f| sum.saturating_add(f.size))
}

/// Whether `plan` may run with `room` free bytes on the device (`None`:
/// the disk is not short).
fn fits(plan: &CompactionPlan, room: Option<u64>) -> bool {
    room.is_none_or(|room| compaction_output(plan).saturating_add(no_space::MARGIN_BYTES) <= room)
}

/// How often the pool looks again at tables whose values have begun to
/// expire but not enough for a compaction (`picker::pick_expired`): 1 s.
const EXPIRY_RECHECK_MS: u64 = 1000;

/// What range merging has to do now.
enum RangeMerge {
    Run(CompactionPlan),
    /// A merge is due once writes have paused this much longer.
    After(Duration),
    Nothing,
}

/// Runs `plan` with the state lock released, registered as running.
/// Returns the lock again, and the job's result. A full disk postpones it
/// (`no_space`); any other failure poisons the database, a read error
/// included: RocksDB (with its default
/// `paranoid_checks`) stops writes on any compaction error too, and
/// picking the same inputs again at once would spin on a lasting fault
/// while L0 grows. The inputs are untouched and the outputs removed, so
/// nothing is lost; a reopen compacts again.
fn run_registered<'a>(
    db: &'a DbInner,
    mut st: parking_lot::MutexGuard<'a, State>,
    plan: CompactionPlan,
    version: Arc<Version>,
    tidy: bool,
) -> (parking_lot::MutexGuard<'a, State>, Result<()>) {
    let id = db.next_job_id.fetch_add(1, Ordering::Relaxed);
    let mut busy = Busy::default();
    busy.add(&plan);
    st.compactions.push(RunningCompaction { id, busy, tidy });
    // Its outputs take space before its inputs go, up to their bytes
    // (values re-separated aside: range merges, which re-separate most,
    // do not run while space is short): counted in the budget's usage
    // until written, so that writers leave room for them as for GC's.
    // Counted also once written, outputs and reservation together held
    // usage past the stop level for each push-down's length: GC could
    // start no job then, and ran none for a tenth of the 2 GiB
    // overwrite under a 1.25x budget.
    let outputs = compaction_output(&plan);
    let reservation = Reservation::new(&db.reserved, None, outputs);
    drop(st);
    let r = db.run_compaction(&plan, &version, &|bytes| reservation.written(bytes));
    match &r {
        // Its outputs are removed and its inputs untouched: it runs again
        // once there is room for it.
        Err(e) if e.is_device_full() => db.postpone(e, outputs),
        Err(e) => db.set_bg_error(e),
        Ok(()) => {}
    }
    // The plan and its Version are the last holders of the inputs: release
    // them so that the inputs are deleted before the job counts as done.
    drop(plan);
    drop(version);
    db.delete_obsolete_files();
    drop(reservation);
    let mut st = db.state.lock();
    st.compactions.retain(|c| c.id != id);
    db.bg_cv.notify_all();
    (st, r)
}

impl DbInner {
    /// Background compactions allowed at once: all of the pool's threads
    /// but one, which GC may then count on (it frees the space writes
    /// take, and long compactions must not hold it back); one with a pool
    /// of one.
    fn max_compactions(&self) -> usize {
        self.opts.pool_threads().saturating_sub(1).max(1)
    }

    /// The compaction the pool would run next: the picker's, or while space
    /// is short a push-down of recent writes to meet what they overwrote,
    /// exposing the garbage they hide to GC (with values separated the
    /// tree is small, and this costs little). The pool and
    /// `wait_for_background_idle` share this rule: the idle check once
    /// missed the push-downs, one started after it returned, and a test
    /// found the manifest grown past a measurement.
    fn pick_compaction(&self, st: &State, sched: &Schedule) -> Option<CompactionPlan> {
        let busy = st.busy();
        let plan = picker::pick(&st.current, &self.picker_opts, &busy).or_else(|| {
            let now = self.opts.clock.now_ms();
            picker::pick_expired(&st.current, &self.picker_opts, now, &busy)
        });
        if plan.is_some() || !sched.short {
            return plan;
        }
        picker::pick_push_down(&st.current, &self.picker_opts, &busy, PushDownFor::Space)
    }

    /// The range merge to run now (or first the compaction moving recent
    /// writes down to the last level, `picker::pick_push_down`), if one is
    /// due and writes have paused for `range_merge_idle`.
    fn range_merge(&self, st: &State, sched: &Schedule) -> RangeMerge {
        let runs = self.opts.range_merge_sorted_runs;
        if runs == 0 || sched.short || st.bg_error.is_some() {
            return RangeMerge::Nothing;
        }
        let busy = st.busy();
        let Some(plan) = picker::pick_push_down(
            &st.current,
            &self.picker_opts,
            &busy,
            PushDownFor::RangeMerge,
        )
        .or_else(|| {
            let until = self.opts.clock.expiry_after(super::gc::EXPIRY_WAIT);
            picker::pick_range_merge(&st.current, &self.picker_opts, runs, until, &busy)
        }) else {
            return RangeMerge::Nothing;
        };
        match self
            .opts
            .range_merge_idle
            .checked_sub(st.last_write.elapsed())
        {
            Some(wait) if !wait.is_zero() => RangeMerge::After(wait),
            _ => RangeMerge::Run(plan),
        }
    }

    /// Compacts `[begin, end]` level by level down to the last level with
    /// data, waiting for conflicting background compactions.
    pub(super) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.flush()?;
        'levels: for level in 0..NUM_LEVELS - 1 {
            loop {
                let mut st = self.state.lock();
                Self::check_bg_error(&st)?;
                let last = (0..NUM_LEVELS).rev().find(|&l| st.current.num_files(l) > 0);
                // L0 files overlap each other, so L0 is compacted even when
                // it alone holds data; the last level is rewritten only
                // where entries have expired.
                if last.is_none_or(|last| level > 0 && level >= last) {
                    break 'levels;
                }
                if st.current.overlapping_files(level, begin, end).is_empty() {
                    break;
                }
                let busy = st.busy();
                match picker::pick_manual(&st.current, &self.picker_opts, level, begin, end, &busy)
                {
                    Some(plan) => {
                        let version = st.current.clone();
                        // This job's own error, with its kind (a full disk,
                        // say), rather than the poison it caused.
                        let (st, r) = run_registered(self, st, plan, version, false);
                        r?;
                        Self::check_bg_error(&st)?;
                    }
                    // Nothing conflicts, so the picker has nothing to do here.
                    None if st.compactions.is_empty() => break,
                    // Files in the range are being compacted: wait for them.
                    None => self.bg_cv.wait(&mut st),
                }
            }
        }
        // Then each last-level table in the range that holds an expired
        // entry (every one, with a compaction filter), as it is now: not
        // the tables those rewrites make.
        let now = self.opts.clock.now_ms();
        let every = self.opts.compaction_filter.is_some();
        let targets: std::collections::HashSet<crate::base::FileNumber> = {
            let st = self.state.lock();
            picker::last_level(&st.current).map_or_else(Default::default, |last| {
                st.current
                    .files(last)
                    .iter()
                    .filter(|f| {
                        f.overlaps(begin, end)
                            && (every || f.expiry.is_some_and(|x| x.earliest() <= now))
                    })
                    .map(|f| f.number)
                    .collect()
            })
        };
        loop {
            let mut st = self.state.lock();
            Self::check_bg_error(&st)?;
            let busy = st.busy();
            match picker::pick_last_level_rewrite(
                &st.current,
                &self.picker_opts,
                begin,
                end,
                &|f| targets.contains(&f.number),
                &busy,
            ) {
                Some(plan) => {
                    let version = st.current.clone();
                    let (st, r) = run_registered(self, st, plan, version, false);
                    r?;
                    Self::check_bg_error(&st)?;
                }
                None if st.compactions.is_empty() => return Ok(()),
                None => self.bg_cv.wait(&mut st),
            }
        }
    }

    /// Waits until no flush, compaction, GC or range merge is pending or
    /// running (a range merge waits for `range_merge_idle` without writes).
    pub(super) fn wait_for_background_idle(&self) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            Self::check_bg_error(&st)?;
            let sched = self.schedule(&st);
            if sched.device_room.is_some() {
                // A job waiting for room no waiting here makes.
                let running = st.flush_running || !st.compactions.is_empty() || st.gc_jobs > 0;
                let stuck = self
                    .pick_compaction(&st, &sched)
                    .is_some_and(|plan| !fits(&plan, sched.device_room));
                if !running && stuck {
                    return Err(Error::io(
                        &self.dir,
                        "compaction",
                        std::io::Error::from(std::io::ErrorKind::StorageFull),
                    ));
                }
            }
            let idle = st.imm.is_empty()
                && !st.flush_running
                && st.compactions.is_empty()
                && st.gc_jobs == 0
                && self.pick_compaction(&st, &sched).is_none()
                && self.pick_gc(&st, &sched).is_none()
                && matches!(self.range_merge(&st, &sched), RangeMerge::Nothing);
            if idle {
                return Ok(());
            }
            self.bg_cv.notify_all();
            self.bg_cv.wait(&mut st);
        }
    }
}
