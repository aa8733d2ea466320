//! Flushing the oldest immutable memtable to an L0 sstable.

use std::sync::Arc;

use super::compact::Job;
use super::gc::Reservation;
use super::stats::add;
use super::DbInner;
use crate::base::SeqNo;
use crate::compaction::stream::DropRules;
use crate::delta::iter::SpilledIterator;
use crate::delta::write::WithoutOperands;
use crate::delta::{DeltaOutput, Routed};
use crate::error::Result;
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::manifest::edit::VersionEdit;
use crate::manifest::version::Version;
use crate::memtable::MemTable;
use crate::value_file::ValueClass;

use super::compact::{value_file_meta, Outputs};

impl DbInner {
    /// Writes `mem` as L0 sstables, its separable values into new value
    /// files, as a flush and recovery's replay both do. Shadowed versions
    /// no snapshot in `snapshots` needs are dropped already here;
    /// deletions stay, since older versions may live in the levels.
    ///
    /// With key-delta separation (on, or deltas already in the store over
    /// `version`) its merge operands go to the delta store instead, with
    /// anchors for its puts and deletes; the caller logs both outputs in
    /// one edit.
    pub(super) fn write_memtable(
        &self,
        mem: &Arc<MemTable>,
        version: &Version,
        snapshots: Vec<SeqNo>,
        written: &dyn Fn(u64),
    ) -> Result<(Outputs, DeltaOutput)> {
        // With no bucket yet, a memtable without operands has nothing to
        // route: the flush is the plain one.
        let routes =
            version.has_buckets() || (self.opts.enable_delta_separation && mem.has_merges());
        let mut deltas = DeltaOutput::default();
        if routes {
            let routed = Routed::from_memtable(&mut mem.iter(), version.has_buckets())?;
            let new_number = || self.versions.lock().new_file_number();
            deltas = self.deltas.write_flush(
                version,
                routed,
                &snapshots,
                self.opts.merge_operator.as_ref(),
                &new_number,
            )?;
            written(deltas.bytes_written());
        }
        let mut rules = DropRules::new(snapshots, false);
        let outputs = if routes {
            // Deltas a full store folded go to the sstable with the rest.
            let spilled = std::mem::take(&mut deltas.spilled);
            let own = WithoutOperands::new(mem.iter());
            let mut it: Box<dyn InternalIterator> = if spilled.is_empty() {
                Box::new(own)
            } else {
                Box::new(MergingIterator::new(vec![
                    Box::new(own),
                    Box::new(SpilledIterator::new(spilled)),
                ]))
            };
            it.seek_to_first()?;
            self.write_memtable_outputs(it.as_mut(), &mut rules, written)?
        } else {
            let mut it = mem.iter();
            it.seek_to_first()?;
            self.write_memtable_outputs(&mut it, &mut rules, written)?
        };
        Ok((outputs, deltas))
    }

    fn write_memtable_outputs(
        &self,
        it: &mut dyn InternalIterator,
        rules: &mut DropRules,
        written: &dyn Fn(u64),
    ) -> Result<Outputs> {
        self.write_outputs(
            it,
            rules,
            &|_| true,
            u64::MAX,
            Job::Flush,
            None,
            None,
            written,
        )
    }

    /// Counts what a flush wrote to the delta store.
    pub(super) fn count_delta_output(&self, out: &DeltaOutput) {
        let c = &self.counters;
        add(&c.delta_bytes_written, out.bytes_written());
        add(&c.delta_buckets_collected, out.collected);
        add(&c.delta_bucket_splits, out.splits);
        add(&c.delta_bucket_merges, out.merged_pairs);
        add(&c.delta_buckets_folded, out.folded);
        add(&c.delta_records_dropped, out.dropped);
        add(&c.merge_operands_combined, out.partial_merges);
    }

    /// Writes the oldest immutable memtable to L0 and retires its WAL.
    /// REQUIRES: the caller set `flush_running`, so flushes stay in order.
    pub(super) fn flush_oldest(&self) -> Result<()> {
        // Its output takes the space its WAL holds until the edit: counted
        // as it is written, not twice (the memtable's size on top of the
        // output written so far), which had writers stop for space in most
        // of each flush of the 300 MB overwrite under a 1.25x budget.
        let Some((mem, log_refs, version, reservation)) = ({
            let mut st = self.state.lock();
            let current = st.current.clone();
            st.imm.front_mut().map(|i| {
                i.flushing = true;
                let bytes = i.mem.approximate_memory_usage() as u64;
                let reservation = Reservation::new(&self.flush_left, None, bytes);
                (i.mem.clone(), i.log_refs.clone(), current, reservation)
            })
        }) else {
            return Ok(());
        };
        // The value logs its entries point into join the Version with its
        // sstable, sealed first; those an earlier flush installed are
        // there already. Only flushes install logs, one at a time, so the
        // Version cannot gain them meanwhile.
        let installs = self.logs.seal_for_install(
            log_refs
                .keys()
                .copied()
                .filter(|&n| version.physical_file(n).is_none()),
            self.opts.use_direct_io_for_flush_and_compaction,
        )?;
        // Only flushes change the delta store, one at a time: `version`'s
        // buckets are the current ones until this flush's edit.
        let (outputs, deltas) =
            self.write_memtable(&mem, &version, self.snapshots.sequence_numbers(), &|b| {
                reservation.written(b)
            })?;
        drop(version);
        self.count_delta_output(&deltas);
        let deltas_touched = deltas.file.is_some();

        // The sstable and the value files its handles point into become
        // live in one edit: a crash before it leaves only orphans, which
        // the next open removes.
        let mut edit = VersionEdit::default();
        outputs.add_to(&mut edit, 0);
        deltas.add_to(&mut edit);
        for log in &installs {
            edit.add_value_file(value_file_meta(log));
        }
        {
            let mut v = self.versions.lock();
            let mut st = self.state.lock();
            // Writes of every memtable after this one live in later WALs.
            let next_wal = st.imm.get(1).map_or(st.mem_wal, |i| i.wal);
            drop(st);
            edit.log_number = Some(next_wal);
            v.set_last_seq(self.last_seq());
            if let Err(e) = v.log_and_apply(edit) {
                drop(v);
                self.set_bg_error(&e);
                if e.is_device_full() {
                    // Not in the manifest: a full disk fails a write whole
                    // or leaves a torn record, never a complete one. The
                    // retry writes them again.
                    outputs.remove(self.fs.as_ref(), &self.dir);
                }
                return Err(e);
            }
            st = self.state.lock();
            st.current = v.current();
            // Readers taking their view from here on find the logs in
            // the Version.
            let installed: Vec<_> = installs.iter().map(|s| s.number).collect();
            self.logs.installed(&installed);
            st.imm.pop_front();
        }
        // All of its output is on disk now, beside its WAL until that goes.
        drop(reservation);
        // The flushed sstable now references what the entries pointed at.
        self.logs.unpin(log_refs);
        add(&self.counters.flush_bytes_written, outputs.bytes());
        add(
            &self.counters.value_file_bytes_written,
            outputs.value_file_bytes(),
        );
        add(
            &self.counters.value_files_written,
            outputs.value_files.len() as u64,
        );
        let hot: u64 = outputs
            .value_files
            .iter()
            .filter(|f| f.properties.class == ValueClass::Hot)
            .map(|f| f.file_size)
            .sum();
        add(&self.counters.hot_value_file_bytes_written, hot);
        add(&self.counters.flushes, 1);
        if deltas_touched {
            let buckets = self.state.lock().current.buckets().count();
            self.deltas.charge_memory(buckets);
        }
        self.delete_obsolete_files();
        Ok(())
    }
}
