//! Flushing the oldest immutable memtable to an L0 sstable.

use super::stats::add;
use super::DbInner;
use crate::compaction::stream::DropRules;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::manifest::edit::VersionEdit;
use crate::value_file::ValueClass;

impl DbInner {
    /// Writes the oldest immutable memtable to L0 and retires its WAL.
    /// REQUIRES: the caller set `flush_running`, so flushes stay in order.
    pub(super) fn flush_oldest(&self) -> Result<()> {
        let Some(mem) = self.state.lock().imm.front().map(|i| i.mem.clone()) else {
            return Ok(());
        };
        let mut it = mem.iter();
        it.seek_to_first()?;
        // Shadowed versions no snapshot needs are dropped already here;
        // deletions stay, since older versions may live in the levels.
        let mut rules = DropRules::new(self.snapshots.sequence_numbers(), false);
        let outputs = self.write_outputs(&mut it, &mut rules, &|_| true, u64::MAX, true, None)?;

        // The sstable and the value files its handles point into become
        // live in one edit: a crash before it leaves only orphans, which
        // the next open removes.
        let mut edit = VersionEdit::default();
        outputs.add_to(&mut edit, 0);
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
                return Err(e);
            }
            st = self.state.lock();
            st.current = v.current();
            st.imm.pop_front();
        }
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
        self.delete_obsolete_files();
        Ok(())
    }
}
