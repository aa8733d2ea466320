//! The delta store as an internal iterator over one view: each bucket's
//! deltas the view sees (newer than the key's newest anchor it sees) as
//! merge operands, so that a scan merges them with the LSM-tree's entries
//! like operands of its own. Buckets are read one at a time, as the
//! iterator reaches them.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{of_key, visible, DeltaStore};
use crate::base::key::{self, InternalKey, ValueKind};
use crate::base::{InternalIterator, SeqNo};
use crate::error::Result;
use crate::manifest::BucketMeta;

/// Internal keys with their operands, in order: what both iterators here
/// walk.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn operand_entry(key: &[u8], seq: SeqNo, operand: Vec<u8>) -> (Vec<u8>, Vec<u8>) {
    let ikey = InternalKey::new(key, seq, ValueKind::Merge);
    (ikey.encoded().to_vec(), operand)
}

/// The position of the first entry at or after internal key `target`.
fn first_at_or_after(entries: &Entries, target: &[u8]) -> usize {
    entries.partition_point(|(k, _)| key::compare(k, target) == Ordering::Less)
}

/// The position of the first entry after internal key `target`.
fn first_after(entries: &Entries, target: &[u8]) -> usize {
    entries.partition_point(|(k, _)| key::compare(k, target) != Ordering::Greater)
}

pub(crate) struct DeltaIterator {
    store: Arc<DeltaStore>,
    buckets: Vec<Arc<BucketMeta>>,
    view_seq: SeqNo,
    /// The bucket `entries` come from.
    bucket: usize,
    /// Internal key and operand of each visible delta, in order.
    entries: Entries,
    pos: usize,
}

impl DeltaIterator {
    pub(crate) fn new(
        store: Arc<DeltaStore>,
        buckets: Vec<Arc<BucketMeta>>,
        view_seq: SeqNo,
    ) -> DeltaIterator {
        DeltaIterator {
            store,
            buckets,
            view_seq,
            bucket: 0,
            entries: Vec::new(),
            pos: 0,
        }
    }

    fn load(&mut self, bucket: usize) -> Result<()> {
        self.bucket = bucket;
        self.entries.clear();
        self.pos = 0;
        let records = self.store.records(&self.buckets[bucket])?;
        let mut start = 0;
        while start < records.len() {
            let key = &records[start].key;
            let group = of_key(&records, key);
            for r in visible(group, self.view_seq) {
                self.entries
                    .push(operand_entry(key, r.seq, r.value.clone()));
            }
            start += group.len();
        }
        Ok(())
    }

    /// The bucket whose range holds `user_key`.
    fn bucket_for(&self, user_key: &[u8]) -> usize {
        self.buckets
            .partition_point(|b| b.smallest.as_slice() <= user_key)
            .saturating_sub(1)
    }

    /// From bucket `from` on, the first with a visible delta.
    fn forward_from(&mut self, from: usize) -> Result<()> {
        for b in from..self.buckets.len() {
            self.load(b)?;
            if !self.entries.is_empty() {
                return Ok(());
            }
        }
        self.invalidate();
        Ok(())
    }

    /// From bucket `from` back, the last visible delta.
    fn backward_from(&mut self, from: Option<usize>) -> Result<()> {
        let mut b = from;
        while let Some(i) = b {
            self.load(i)?;
            if let Some(last) = self.entries.len().checked_sub(1) {
                self.pos = last;
                return Ok(());
            }
            b = i.checked_sub(1);
        }
        self.invalidate();
        Ok(())
    }

    fn invalidate(&mut self) {
        self.entries.clear();
        self.pos = 0;
    }
}

impl InternalIterator for DeltaIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.forward_from(0)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.backward_from(self.buckets.len().checked_sub(1))
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if self.buckets.is_empty() {
            return Ok(());
        }
        let b = self.bucket_for(key::user_key(target));
        self.load(b)?;
        self.pos = first_at_or_after(&self.entries, target);
        if self.pos == self.entries.len() {
            self.forward_from(b + 1)?;
        }
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        if self.buckets.is_empty() {
            return Ok(());
        }
        let b = self.bucket_for(key::user_key(target));
        self.load(b)?;
        match first_after(&self.entries, target).checked_sub(1) {
            Some(last) => self.pos = last,
            None => self.backward_from(b.checked_sub(1))?,
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        if self.pos >= self.entries.len() {
            self.forward_from(self.bucket + 1)?;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        match self.pos.checked_sub(1) {
            Some(p) => self.pos = p,
            None => self.backward_from(self.bucket.checked_sub(1))?,
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }

    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}

/// Deltas a flush moves back into the LSM-tree, as merge operands in
/// internal key order: one more input of the flush's sstable.
pub(crate) struct SpilledIterator {
    entries: Entries,
    pos: usize,
}

impl SpilledIterator {
    /// REQUIRES: `records` are deltas in chunk order.
    pub(crate) fn new(records: Vec<super::Record>) -> SpilledIterator {
        let entries: Entries = records
            .into_iter()
            .map(|r| {
                debug_assert_eq!(r.kind, super::RecordKind::Delta);
                operand_entry(&r.key, r.seq, r.value)
            })
            .collect();
        let pos = entries.len();
        SpilledIterator { entries, pos }
    }
}

impl InternalIterator for SpilledIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = first_at_or_after(&self.entries, target);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.pos = first_after(&self.entries, target)
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.pos = self.pos.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }

    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }

    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}
