//! The write path: group commit into the WAL, then the memtable; memtable
//! switches; write slowdowns and stops.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use super::budget;
use super::gc::Reservation;
use super::stats::add;
use super::{DbInner, Immutable, State};
use crate::base::{filename, FileNumber, ValueKind};
use crate::batch::WriteBatch;
use crate::compaction::picker::{self, PushDownFor};
use crate::error::{Error, Result};
use crate::manifest::edit::VersionEdit;
use crate::options::WriteOptions;
use crate::wal::WalWriter;

/// A group stops growing at this many bytes, so that one leader's latency
/// stays bounded.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// A small leading batch limits its group further, so small writes are not
/// delayed behind much bigger ones.
const SMALL_BATCH_BYTES: usize = 128 << 10;
/// How long one write is delayed when L0 reaches the slowdown trigger.
const SLOWDOWN_DELAY: Duration = Duration::from_millis(1);
/// How often a writer stopped by the space budget looks at usage again.
const BUDGET_RECHECK: Duration = Duration::from_millis(10);

/// Value-log bytes a memtable may point to, per byte of all memtables.
const MEM_LOG_BYTES_PER_BUFFER_BYTE: u64 = 4;

/// One pending write (or memtable switch) in the queue.
pub(super) struct Writer {
    batch: Mutex<Option<WriteBatch>>,
    opts: WriteOptions,
    /// A request to switch the memtable (from `flush`), not a write.
    force_switch: bool,
    /// A switch that resumes writes after a full disk: it leaves the
    /// current WAL, which may end in part of a record, unsynced and
    /// unnamed as the next one's predecessor length (`Db::resume`).
    resume: bool,
    /// Records the batch's handles point to, per value log.
    appended: Vec<(FileNumber, u64)>,
    /// Bytes of those records.
    log_bytes: u64,
    /// Bytes of the keys and values the caller's batch holds.
    user_bytes: u64,
    done: Mutex<Option<Result<()>>>,
}

impl Writer {
    fn switch(resume: bool) -> Writer {
        Writer {
            batch: Mutex::new(None),
            opts: WriteOptions::default(),
            force_switch: true,
            resume,
            appended: Vec::new(),
            log_bytes: 0,
            user_bytes: 0,
            done: Mutex::new(None),
        }
    }

    /// The memtable switch that resumes writes after a full disk.
    pub(super) fn resume() -> Writer {
        Self::switch(true)
    }
}

#[derive(Default)]
pub(crate) struct WriteQueue {
    queue: VecDeque<Arc<Writer>>,
}

impl DbInner {
    pub(super) fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        if opts.sync && opts.disable_wal {
            // Nothing would be synced: refuse rather than pretend.
            return Err(Error::InvalidArgument(
                "sync and disable_wal cannot both be set".to_string(),
            ));
        }
        let (user_bytes, merges) = batch.validate()?;
        if batch.is_empty() {
            return Ok(());
        }
        if merges {
            self.check_merges(&batch)?;
        }
        // Big values go to a value log now, in this thread, so writers
        // append in parallel and the group commit carries only handles.
        let separated = if self.logs.takes_any(&batch)? {
            // A write the group commit would refuse must not append first:
            // its values would take space no flush ever installs. Counted
            // in usage until its records are on disk.
            let _appending = self.check_writable(&batch)?;
            let new_number = || self.versions.lock().new_file_number();
            match self.logs.separate(&batch, &new_number) {
                Ok(s) => s,
                Err(e) => {
                    // Earlier records of the failed log may be what
                    // committed writes point to, and it can no longer be
                    // sealed: as after a failed WAL write, stop writing
                    // (until there is room, after a full disk).
                    self.set_write_error(&e);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let (batch, appended, log_bytes) = match separated {
            Some(s) => (s.batch, s.appended, s.bytes),
            None => (batch, Vec::new(), 0),
        };
        let r = self.enqueue(Writer {
            batch: Mutex::new(Some(batch)),
            opts: *opts,
            force_switch: false,
            resume: false,
            appended: appended.clone(),
            log_bytes,
            user_bytes,
            done: Mutex::new(None),
        });
        if r.is_err() {
            // A failed group reached no memtable: its records are garbage
            // nothing will point at.
            self.logs.unpin(appended);
        }
        r
    }

    /// Refuses the merges of `batch` without an operator or with operands
    /// it refuses, and logs the operator's name before the first merge
    /// reaches a WAL, so that no database holds merges an open could read
    /// with another operator.
    fn check_merges(&self, batch: &WriteBatch) -> Result<()> {
        let Some(op) = &self.opts.merge_operator else {
            return Err(Error::InvalidArgument(
                "merge needs a merge operator (Options::merge_operator)".to_string(),
            ));
        };
        for e in batch.entries() {
            let e = e?;
            if e.kind != ValueKind::Merge {
                continue;
            }
            op.check_operand(e.value).map_err(|reason| {
                Error::InvalidArgument(format!(
                    "merge operand for key \"{}\": {reason}",
                    e.key.escape_ascii()
                ))
            })?;
        }
        if !self.merge_logged.load(Ordering::Acquire) {
            // A poisoned database writes no manifest.
            Self::check_bg_error(&self.state.lock())?;
            let edit = VersionEdit {
                merge_operator: Some(op.name().to_string()),
                ..VersionEdit::default()
            };
            self.apply_edit(edit)?;
            self.merge_logged.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Whether `batch`, whose big values go to value logs, may proceed as
    /// far as the refusals that need no waiting go: a poisoned or closing
    /// database, and a space budget that fails writes past its stop level.
    /// The bytes it appends count (at most `ValueLogs::append_bound`), and
    /// under such a budget stay counted (the reservation returned) until
    /// the caller has appended them: the group commit looks at usage after the
    /// append, and a write just below the stop level passed here,
    /// appended, and was refused there, leaving its records behind (1 in
    /// 170 runs of `value_logs::a_write_the_budget_refuses_takes_no_space`),
    /// as would two writers that each passed here with room for one.
    /// What still can: another group's WAL and memtable bytes landing in
    /// between, and the index and footer of a log an append fills.
    fn check_writable(&self, batch: &WriteBatch) -> Result<Option<Reservation<'_>>> {
        let st = self.state.lock();
        Self::check_bg_error(&st)?;
        if st.shutting_down {
            return Err(Error::Closed);
        }
        if self.opts.space_budget_fail_writes && self.budget.bytes > 0 {
            // Only here: the bound walks the whole batch, where the write
            // path stops at its first big value.
            let appends = self.logs.append_bound(batch)?;
            let usage = self.space_usage(&st);
            if self.budget.fill(usage.saturating_add(appends)) >= budget::STOP_AT {
                return Err(Error::over_budget(&self.dir, usage, self.budget.bytes));
            }
            // Taken under the state lock, as every writer's check is.
            return Ok(Some(Reservation::new(&self.reserved, None, appends)));
        }
        Ok(None)
    }

    /// Waits in the queue; the writer at the front leads a group.
    pub(super) fn enqueue(&self, w: Writer) -> Result<()> {
        let w = Arc::new(w);
        let mut q = self.writers.lock();
        q.queue.push_back(w.clone());
        loop {
            if let Some(r) = w.done.lock().take() {
                return r;
            }
            if q.queue.front().is_some_and(|f| Arc::ptr_eq(f, &w)) {
                break;
            }
            self.writers_cv.wait(&mut q);
        }
        let group = Self::take_group(&q.queue);
        drop(q);

        let result = self.write_group(&group);

        let mut q = self.writers.lock();
        for member in &group {
            let front = q.queue.pop_front();
            debug_assert!(front.is_some_and(|f| Arc::ptr_eq(&f, member)));
            if !Arc::ptr_eq(member, &w) {
                *member.done.lock() = Some(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                });
            }
        }
        drop(q);
        self.writers_cv.notify_all();
        result
    }

    /// The leader and the compatible writers behind it.
    fn take_group(queue: &VecDeque<Arc<Writer>>) -> Vec<Arc<Writer>> {
        let mut group = Vec::new();
        let Some(leader) = queue.front() else {
            return group;
        };
        group.push(leader.clone());
        if leader.force_switch {
            return group;
        }
        let size = |w: &Writer| w.batch.lock().as_ref().map_or(0, |b| b.approximate_size());
        let mut bytes = size(leader);
        let limit = if bytes <= SMALL_BATCH_BYTES {
            bytes + SMALL_BATCH_BYTES
        } else {
            MAX_GROUP_BYTES
        };
        for w in queue.iter().skip(1) {
            // A non-sync leader takes no sync writers, so that it is not
            // slowed by an fsync it did not ask for; writes without the WAL
            // form groups of their own.
            if w.force_switch
                || (w.opts.sync && !leader.opts.sync)
                || w.opts.disable_wal != leader.opts.disable_wal
            {
                break;
            }
            bytes += size(w);
            if bytes > limit {
                break;
            }
            group.push(w.clone());
        }
        group
    }

    fn write_group(&self, group: &[Arc<Writer>]) -> Result<()> {
        let Some(leader) = group.first() else {
            return Ok(());
        };
        if leader.force_switch {
            return self.make_room_for_write(true, 0, leader.resume);
        }
        let bytes = group.iter().map(|w| w.user_bytes).sum();
        self.make_room_for_write(false, bytes, false)?;
        let mut batches: Vec<WriteBatch> =
            group.iter().filter_map(|w| w.batch.lock().take()).collect();
        let mut wal = self.wal.lock();
        let first_seq = self.visible_seq.load(Ordering::Acquire) + 1;
        let mut seq = first_seq;
        let mut payloads: Vec<&[u8]> = Vec::with_capacity(batches.len());
        for b in &mut batches {
            let n = b.len() as u64;
            payloads.push(b.encode_with_seq(seq));
            seq += n;
        }
        let last_seq = seq - 1;
        let disable_wal = leader.opts.disable_wal;
        let sync = group.iter().any(|w| w.opts.sync);
        if sync && self.logs.enabled() {
            // The values the WAL records point to are durable first.
            if let Err(e) = self.logs.sync() {
                self.set_bg_error(&e);
                return Err(e);
            }
        }
        if !disable_wal {
            let current = wal
                .current
                .as_mut()
                .ok_or_else(|| Error::Poisoned("no WAL is open".to_string()))?;
            let flush = sync || !self.opts.manual_wal_flush;
            if !flush {
                self.wal_buffered.store(true, Ordering::Release);
            }
            let logged = current.append(&payloads, flush).and_then(|n| {
                add(&self.counters.wal_bytes_written, n);
                if sync {
                    add(&self.counters.wal_syncs, 1);
                    wal.sync(self.fs.as_ref(), &self.dir)
                } else {
                    Ok(())
                }
            });
            if let Err(e) = logged {
                // The WAL may now hold part of the group: refuse all
                // further writes rather than guess what is durable (after
                // a full disk, until a new WAL replaces it).
                self.set_write_error(&e);
                return Err(e);
            }
        }
        // Groups are one at a time (the queue's front leads), so the
        // memtable inserts need no WAL lock: `flush_wal` before a server's
        // reply, which hands the OS what this group buffered, need not wait
        // for them.
        drop(wal);
        let mem = {
            let mut st = self.state.lock();
            if disable_wal {
                st.mem_has_unlogged = true;
            }
            for w in group {
                for &(log, records) in &w.appended {
                    *st.mem_log_refs.entry(log).or_default() += records;
                }
                st.mem_log_bytes += w.log_bytes;
            }
            st.last_write = Instant::now();
            st.mem.clone()
        };
        let mut seq = first_seq;
        let mut splice = mem.splice();
        for b in &batches {
            let mut entries = b.entries().peekable();
            while let Some(e) = entries.next() {
                let e = e?;
                if let Some(Ok(next)) = entries.peek() {
                    mem.prefetch(next.key);
                }
                mem.add_with(seq, e.kind, e.key, e.value, &mut splice);
                seq += 1;
            }
        }
        // Counted from the batches as written: a value log's value is in
        // them as a handle.
        let user_bytes: u64 = group.iter().map(|w| w.user_bytes).sum();
        debug_assert_eq!(seq - 1, last_seq);
        self.visible_seq.store(last_seq, Ordering::Release);
        add(&self.counters.user_bytes_written, user_bytes);
        add(&self.counters.user_writes, last_seq + 1 - first_seq);
        Ok(())
    }

    /// See `Db::flush_wal`.
    pub(super) fn flush_wal(&self) -> Result<()> {
        // Every call before a server's reply: no lock when nothing waits.
        if !self.wal_buffered.load(Ordering::Acquire) {
            return Ok(());
        }
        // Tried whatever the database's state: records readers already see
        // reach the OS if they can.
        let mut wal = self.wal.lock();
        let Some(current) = wal.current.as_mut() else {
            return Ok(());
        };
        let flushed = current.flush();
        if flushed.is_ok() {
            self.wal_buffered.store(false, Ordering::Release);
        }
        if let Err(e) = &flushed {
            // Part of a record may have reached the file, as after a
            // failed append.
            self.set_write_error(e);
        }
        flushed
    }

    /// See `Db::sync_wal`; also the last step of a clean close. Under the
    /// WAL lock, which every write group holds while it appends, so each
    /// write acknowledged before the call is in a WAL this syncs.
    pub(super) fn sync_wal(&self) -> Result<()> {
        Self::check_bg_error(&self.state.lock())?;
        self.sync_logs_and_wals()
    }

    /// `sync_wal` without its check: also a read-only database's last
    /// step at close, when a full disk failed no append.
    pub(super) fn sync_logs_and_wals(&self) -> Result<()> {
        let mut wal = self.wal.lock();
        // The values the WAL records point to are durable first.
        let synced = self.logs.sync().and_then(|()| {
            add(&self.counters.wal_syncs, 1);
            wal.sync(self.fs.as_ref(), &self.dir)
        });
        if let Err(e) = &synced {
            self.set_bg_error(e);
        }
        synced
    }

    /// Makes sure the memtable has room, switching it (and the WAL) when it
    /// is full or `force` is set, and slowing or stopping the writer while
    /// background work is behind or the space budget asks it to: a group
    /// of `bytes` is paced at the rate the budget allows. With `resume`,
    /// switches at once, while the database is read-only after a full disk
    /// (see `Writer::resume`).
    /// REQUIRES: called by the write leader only.
    fn make_room_for_write(&self, mut force: bool, bytes: u64, resume: bool) -> Result<()> {
        let mut allow_delay = !force;
        // A flush request (`force`) makes no room for data: the budget
        // never holds it back, also after its switch.
        let mut budgeted = !force && self.budget.bytes > 0;
        let mut budget_stopped = false;
        let mut st = self.state.lock();
        if resume {
            Self::check_poisoned(&st)?;
            drop(self.switch_memtable(st, true)?);
            return Ok(());
        }
        loop {
            Self::check_bg_error(&st)?;
            if st.shutting_down && !force {
                return Err(Error::Closed);
            }
            let l0 = st.current.num_files(0);
            if allow_delay && l0 >= self.opts.level0_slowdown_writes_trigger {
                // Spread the delay over many writes instead of stopping one
                // for a long time once the stop trigger is hit.
                drop(st);
                let start = Instant::now();
                std::thread::sleep(SLOWDOWN_DELAY);
                add(
                    &self.counters.stall_micros,
                    start.elapsed().as_micros() as u64,
                );
                add(&self.counters.slowdown_writes, 1);
                allow_delay = false;
                st = self.state.lock();
                continue;
            }
            if budgeted {
                let usage = self.space_usage(&st);
                let now = Instant::now();
                let pace = {
                    let mut pacer = self.pacer.lock();
                    pacer.sample(
                        now,
                        self.disk.bytes(),
                        self.counters.user_bytes_written.load(Ordering::Relaxed),
                    );
                    pacer.pace(
                        &self.budget,
                        usage,
                        self.gc_planned.load(Ordering::Relaxed),
                        bytes,
                        now,
                    )
                };
                let delay = match pace {
                    budget::Pace::Go => None,
                    // Nothing running and nothing to run: waiting would
                    // free nothing. Past the budget the stop below delays
                    // the writes steadily instead.
                    budget::Pace::Wait(_) if self.nothing_reclaims(&st) => {
                        self.pacer.lock().forgive(now);
                        None
                    }
                    budget::Pace::Wait(d) => Some(d),
                    budget::Pace::Stop => {
                        // Writers wait only for work that can free space;
                        // with none, or a budget that cannot be met, they
                        // fail if asked to, or go on at a steady delay.
                        let hopeless = self.nothing_reclaims(&st);
                        let past_stop = self.budget.fill(usage) >= budget::STOP_AT;
                        if self.opts.space_budget_fail_writes && past_stop {
                            return Err(Error::over_budget(&self.dir, usage, self.budget.bytes));
                        }
                        if !hopeless {
                            if !budget_stopped {
                                budget_stopped = true;
                                add(&self.counters.budget_stopped_writes, 1);
                            }
                            self.bg_cv.notify_all();
                            // Files deleted by a reader letting go of a
                            // Version signal nothing, and the reclaim rate
                            // is learnt as time passes: look again now and
                            // then.
                            self.bg_cv.wait_for(&mut st, BUDGET_RECHECK);
                            self.count_budget_stall(now);
                            continue;
                        }
                        Some(budget::IMPOSSIBLE_DELAY)
                    }
                };
                budgeted = false;
                if let Some(d) = delay {
                    drop(st);
                    std::thread::sleep(d);
                    self.count_budget_stall(now);
                    add(&self.counters.budget_slowdown_writes, 1);
                    st = self.state.lock();
                    continue;
                }
            }
            // A memtable of handles fills slowly; the values they point
            // to are neither GC candidates nor off replay's path until it
            // is flushed, so their bytes bound it too.
            let full = st.mem.approximate_memory_usage() >= self.opts.write_buffer_size
                || st.mem_log_bytes >= self.max_mem_log_bytes();
            // At the L0 stop trigger every write waits, not only the one
            // that fills the memtable; a flush request still goes through.
            let l0_stop = !force && l0 >= self.opts.level0_stop_writes_trigger;
            if !force && !full && !l0_stop {
                return Ok(());
            }
            if force && st.mem.is_empty() {
                return Ok(());
            }
            if l0_stop || st.imm.len() + 1 >= self.opts.max_write_buffer_number {
                let start = Instant::now();
                add(&self.counters.stopped_writes, 1);
                self.bg_cv.notify_all();
                self.bg_cv.wait(&mut st);
                let micros = start.elapsed().as_micros() as u64;
                add(&self.counters.stall_micros, micros);
                if !l0_stop {
                    add(&self.counters.memtable_stall_micros, micros);
                }
                continue;
            }
            st = self.switch_memtable(st, false)?;
            force = false;
        }
    }

    /// Bytes of value-log records one memtable may point to before it is
    /// switched: as RocksDB bounds its WALs (`max_total_wal_size`, by
    /// default four times the memtables' bytes), so that overwritten big
    /// values become garbage GC can reclaim, and a reopen scans a bounded
    /// amount of log; under a space budget, a share of it.
    fn max_mem_log_bytes(&self) -> u64 {
        self.budget.mem_log_bytes(
            MEM_LOG_BYTES_PER_BUFFER_BYTE
                .saturating_mul(self.opts.write_buffer_size as u64)
                .saturating_mul(self.opts.max_write_buffer_number as u64),
        )
    }

    fn count_budget_stall(&self, start: Instant) {
        let micros = start.elapsed().as_micros() as u64;
        add(&self.counters.stall_micros, micros);
        add(&self.counters.budget_stall_micros, micros);
    }

    /// Whether waiting for space is pointless: the budget cannot be met,
    /// or no background work runs or is pending that may free space.
    fn nothing_reclaims(&self, st: &State) -> bool {
        if self.budget_impossible.load(Ordering::Relaxed) {
            return true;
        }
        let running = st.flush_running || !st.compactions.is_empty() || st.gc_jobs > 0;
        !running && !self.can_reclaim(st)
    }

    /// Whether background work pending or running may free space.
    fn can_reclaim(&self, st: &State) -> bool {
        !st.imm.is_empty()
            || st.flush_running
            || !st.compactions.is_empty()
            || st.gc_jobs > 0
            || (st.bg_error.is_none()
                && (picker::pick(&st.current, &self.picker_opts, &Default::default()).is_some()
                    || picker::pick_push_down(
                        &st.current,
                        &self.picker_opts,
                        &Default::default(),
                        PushDownFor::Space,
                    )
                    .is_some()
                    || self.pick_gc(st, &self.schedule(st)).is_some()))
    }

    /// Seals the memtable and starts a new one with a new WAL. With
    /// `leave_current`, the WAL written so far is closed without a sync:
    /// a failed append may have left part of a record in it, and its
    /// memtables are flushed before any write goes to the new one.
    fn switch_memtable<'a>(
        &'a self,
        st: MutexGuard<'a, State>,
        leave_current: bool,
    ) -> Result<MutexGuard<'a, State>> {
        drop(st);
        let number = self.versions.lock().new_file_number();
        let switched = (|| {
            let mut wal = self.wal.lock();
            // Its buffered records (`manual_wal_flush`) reach the OS before
            // any of the next WAL's: replay would take a tail the new
            // header counts and the file lacks for damage.
            // Not one a resumption leaves: a failed append may have left
            // it ending in part of a record, and its memtables are flushed.
            if let Some(current) = wal.current.as_mut().filter(|_| !leave_current) {
                current.flush()?;
            }
            // Named in the new WAL's header, so replay notices if it goes
            // missing or loses its tail.
            let previous = wal.current.as_ref().map(WalWriter::as_previous);
            let fs = self.fs.as_ref();
            let new = match wal.recyclable.pop_front() {
                Some(old) => {
                    let w = WalWriter::recycle(fs, &self.dir, old, number, previous)?;
                    add(&self.counters.wals_recycled, 1);
                    w
                }
                None => {
                    let recyclable = self.opts.recycle_wal > 0;
                    WalWriter::create_after(fs, &self.dir, number, previous, recyclable)?
                }
            };
            // Synced by the next synced write (see `WalState`).
            let old = wal.current.replace(new);
            if let Some(old) = old.filter(|_| !leave_current) {
                wal.unsynced.push(old);
            }
            wal.dir_synced = false;
            Ok::<(), Error>(())
        })();
        if let Err(e) = switched {
            // A WAL cut short after its creation would stop replay before
            // the WALs that follow it.
            let _ = self.fs.remove(&filename::wal(&self.dir, number));
            self.set_write_error(&e);
            return Err(e);
        }
        // Made before the lock that every read takes: its filter may be
        // megabytes to zero.
        let fresh = Arc::new(self.opts.new_memtable());
        let mut st = self.state.lock();
        let old = std::mem::replace(&mut st.mem, fresh);
        let old_wal = std::mem::replace(&mut st.mem_wal, number);
        let log_refs = std::mem::take(&mut st.mem_log_refs);
        st.mem_log_bytes = 0;
        st.imm.push_back(Immutable {
            mem: old,
            wal: old_wal,
            log_refs,
            flushing: false,
        });
        st.live_wals.push(number);
        st.mem_has_unlogged = false;
        self.bg_cv.notify_all();
        Ok(st)
    }

    /// Switches the memtable and waits until everything written before the
    /// call is in sstables.
    pub(super) fn flush(&self) -> Result<()> {
        let target = self.state.lock().mem_wal;
        self.enqueue(Writer::switch(false))?;
        let mut st = self.state.lock();
        loop {
            Self::check_bg_error(&st)?;
            if st.imm.front().is_none_or(|i| i.wal > target) {
                return Ok(());
            }
            self.bg_cv.wait(&mut st);
        }
    }

    /// Before close: writes made without the WAL survive only in sstables.
    pub(super) fn prepare_close(&self) -> Result<()> {
        let unlogged = {
            let st = self.state.lock();
            st.mem_has_unlogged && st.bg_error.is_none() && st.no_space.is_none()
        };
        if unlogged {
            self.flush()
        } else {
            Ok(())
        }
    }
}
