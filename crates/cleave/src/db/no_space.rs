//! A full disk is a state, not a crash (RocksDB's background error
//! handling with its auto-recovery from out-of-space errors):
//!
//! - A flush, a WAL or value-log append, or a manifest write that finds
//!   the file system full (`Error::NoSpace`) makes the database read-only:
//!   reads, iterators, snapshots and the reports go on, every write fails
//!   at once with that error, and the flush thread looks at the free space
//!   every `no_space_poll_interval`. Once the pending flushes fit, or on
//!   `Db::resume`, it resumes: after a failed append a new WAL first (the
//!   old one may end in part of a record), then every memtable is flushed
//!   (installing the value logs they point into, a cut log through a copy
//!   of its whole records), and only then are writes taken again. Nothing
//!   acknowledged is lost; a write that failed was never acknowledged.
//! - A compaction or GC job that finds no room is postponed, not fatal: the
//!   database goes on taking writes, and while the disk stays short the
//!   pool runs only jobs whose output fits in the free space, GC first
//!   (its jobs free what they do not copy), at a lowered garbage ratio.
//!
//! Other I/O errors, a failed fsync among them (the bytes it was to make
//! durable may be gone), still poison the database.

use std::time::{Duration, Instant};

use super::stats::{add, WriteState};
use super::write::Writer;
use super::{DbInner, State};
use crate::error::{Error, Result};
use crate::manifest::edit::VersionEdit;

/// Room kept free beyond a job's or a resumption's estimate: manifest
/// records, WAL headers, a few blocks of file-system metadata. Small: on a
/// disk that just filled, a GC job that copies a few blocks to free a
/// file's worth must still fit.
pub(super) const MARGIN_BYTES: u64 = 16 << 10;

/// Room for writes a resumption waits for beyond the flushes it runs (a
/// memtable's, if smaller).
const RESUME_HEADROOM_BYTES: u64 = 1 << 20;

/// While the disk is short, GC collects files with at least this share of
/// garbage: every job frees space, and the more garbage the less it copies
/// for it.
pub(super) const SHORT_GC_RATIO: f64 = 0.1;

/// The read-only state a full disk puts the database in.
pub(super) struct NoSpace {
    /// The failure, which refused writes are answered with.
    pub cause: Error,
    /// A WAL or value-log append failed: resuming starts a new WAL and
    /// flushes every memtable before any write is taken.
    pub write_path: bool,
    pub since: Instant,
}

/// A compaction or GC job found no room: jobs whose output does not fit in
/// the free space wait until `needed` bytes are free.
pub(super) struct Postponed {
    pub needed: u64,
}

impl DbInner {
    /// Records a background failure: a full disk makes the database
    /// read-only, anything else poisons it.
    pub(super) fn set_bg_error(&self, e: &Error) {
        self.record_failure(e, false);
    }

    /// As [`Self::set_bg_error`], for a failed WAL or value-log append or
    /// memtable switch.
    pub(super) fn set_write_error(&self, e: &Error) {
        self.record_failure(e, true);
    }

    fn record_failure(&self, e: &Error, write_path: bool) {
        let mut st = self.state.lock();
        if st.bg_error.is_some() {
            return;
        }
        if !e.is_device_full() {
            st.bg_error = Some(e.duplicate());
        } else if let Some(n) = st.no_space.as_mut() {
            n.write_path |= write_path;
        } else {
            log::warn!("{}: read-only until there is room: {e}", self.dir.display());
            add(&self.counters.no_space_stops, 1);
            st.no_space = Some(NoSpace {
                cause: e.duplicate(),
                write_path,
                since: Instant::now(),
            });
        }
        drop(st);
        self.bg_cv.notify_all();
    }

    /// Refuses writes to a poisoned database, or to one a full disk made
    /// read-only (with the failure, `Error::NoSpace`).
    pub(super) fn check_bg_error(st: &State) -> Result<()> {
        Self::check_poisoned(st)?;
        match &st.no_space {
            Some(n) => Err(n.cause.duplicate()),
            None => Ok(()),
        }
    }

    /// What `Stats::write_state` reports.
    pub(super) fn write_state(st: &State) -> WriteState {
        if let Some(e) = &st.bg_error {
            return WriteState::Poisoned {
                cause: e.to_string(),
            };
        }
        match &st.no_space {
            Some(n) => WriteState::NoSpace {
                cause: n.cause.to_string(),
                since: n.since.elapsed(),
            },
            None => WriteState::ReadWrite,
        }
    }

    pub(super) fn check_poisoned(st: &State) -> Result<()> {
        match &st.bg_error {
            Some(e) => Err(Error::Poisoned(e.to_string())),
            None => Ok(()),
        }
    }

    /// A compaction or GC job that would write `output` bytes found the
    /// disk full.
    pub(super) fn postpone(&self, e: &Error, output: u64) {
        debug_assert!(e.is_device_full());
        log::info!(
            "{}: a background job postponed until {output} bytes are free: {e}",
            self.dir.display()
        );
        add(&self.counters.jobs_postponed, 1);
        let needed = output.saturating_add(MARGIN_BYTES);
        let mut st = self.state.lock();
        let before = st.postponed.as_ref().map_or(0, |p| p.needed);
        st.postponed = Some(Postponed {
            needed: needed.max(before),
        });
    }

    /// The free bytes of the file system while the disk is short (the
    /// database is read-only or a job was postponed), `None` otherwise.
    pub(super) fn device_room(&self, st: &State) -> Option<u64> {
        if st.no_space.is_none() && st.postponed.is_none() {
            return None;
        }
        // An error reading it counts as no room: the jobs wait for the
        // next look rather than fail again.
        Some(self.fs.free_space(&self.dir).unwrap_or(0))
    }

    /// Lifts a postponement once its room is free.
    pub(super) fn lift_postponement(&self, st: &mut State) {
        let Some(p) = &st.postponed else {
            return;
        };
        if self.fs.free_space(&self.dir).unwrap_or(0) >= p.needed {
            st.postponed = None;
        }
    }

    /// Free bytes resuming needs: the flushes of the memtables waiting
    /// (each writes about its size; their WALs go only after the last),
    /// a margin, and room for the writes after, so that the first of them
    /// does not fill the disk again at once. Value logs cut by the full
    /// disk are sealed in place, which takes a record index's room.
    fn resume_needs(&self, st: &State, write_path: bool) -> u64 {
        let mut memtables: u64 = st
            .imm
            .iter()
            .map(|i| i.mem.approximate_memory_usage() as u64)
            .sum();
        if write_path {
            memtables += st.mem.approximate_memory_usage() as u64;
        }
        let headroom = (self.opts.write_buffer_size as u64).min(RESUME_HEADROOM_BYTES);
        memtables
            .saturating_add(MARGIN_BYTES)
            .saturating_add(headroom)
    }

    /// The flush thread's turn while the database is read-only: every
    /// `no_space_poll_interval`, resumes if the free space allows.
    pub(super) fn poll_no_space<'a>(
        &'a self,
        mut st: parking_lot::MutexGuard<'a, State>,
        next_look: &mut Instant,
    ) -> parking_lot::MutexGuard<'a, State> {
        let Some(since) = st.no_space.as_ref().map(|n| n.since) else {
            return st;
        };
        // The first look comes an interval after the failure.
        *next_look = (*next_look).max(since + self.opts.no_space_poll_interval);
        let wait = next_look.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            self.bg_cv.wait_for(&mut st, wait);
            return st;
        }
        *next_look = Instant::now() + self.opts.no_space_poll_interval;
        let Some(write_path) = st.no_space.as_ref().map(|n| n.write_path) else {
            return st;
        };
        let needed = self.resume_needs(&st, write_path);
        drop(st);
        let free = self.fs.free_space(&self.dir).unwrap_or(0);
        if free >= needed {
            // A failure leaves the database read-only, or poisons it; the
            // next look tries again.
            let _ = self.resume();
        }
        self.state.lock()
    }

    /// See `Db::resume`.
    pub(super) fn resume(&self) -> Result<()> {
        let _one = self.resuming.lock();
        let write_path = {
            let st = self.state.lock();
            Self::check_poisoned(&st)?;
            match &st.no_space {
                None => return Ok(()),
                Some(n) => n.write_path,
            }
        };
        if write_path {
            // Through the write queue, so that no write group is between
            // its check and its append.
            self.enqueue(Writer::resume())?;
            if let Some(n) = self.state.lock().no_space.as_mut() {
                n.write_path = false;
            }
        }
        {
            let mut st = self.state.lock();
            while st.flush_running {
                self.bg_cv.wait(&mut st);
            }
            st.flush_running = true;
        }
        let flushed = (|| {
            while !self.state.lock().imm.is_empty() {
                self.flush_oldest()?;
            }
            // A manifest write that failed is retried with a new manifest,
            // which must be written before writes are taken.
            if self.versions.lock().rotates_next() {
                self.apply_edit(VersionEdit::default())?;
            }
            Ok(())
        })();
        let mut st = self.state.lock();
        st.flush_running = false;
        let result = match flushed {
            Ok(()) => {
                let since = st.no_space.take().map(|n| n.since.elapsed());
                add(&self.counters.resumes, 1);
                log::info!(
                    "{}: writes resumed after {:.1} s read-only",
                    self.dir.display(),
                    since.unwrap_or(Duration::ZERO).as_secs_f64()
                );
                Ok(())
            }
            Err(e) => {
                // Its memtable counts whole again in the budget.
                if let Some(i) = st.imm.front_mut() {
                    i.flushing = false;
                }
                drop(st);
                self.set_bg_error(&e);
                st = self.state.lock();
                Err(e)
            }
        };
        drop(st);
        self.bg_cv.notify_all();
        result
    }
}
