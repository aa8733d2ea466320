//! Snapshots: a sequence number registered so that compaction keeps what it
//! can see.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::base::SeqNo;

/// The sequence numbers of live snapshots, with reference counts.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    seqs: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    pub(crate) fn acquire(self: &Arc<Self>, seq: SeqNo) -> Snapshot {
        *self.seqs.lock().entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            list: self.clone(),
        }
    }

    /// Live snapshot sequence numbers, ascending.
    pub(crate) fn sequence_numbers(&self) -> Vec<SeqNo> {
        self.seqs.lock().keys().copied().collect()
    }

    fn release(&self, seq: SeqNo) {
        let mut seqs = self.seqs.lock();
        if let Some(n) = seqs.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                seqs.remove(&seq);
            }
        }
    }
}

/// A consistent view of the database as of its creation. Reads through
/// [`crate::ReadOptions::snapshot`] see exactly the writes acknowledged
/// before it was taken. Released on drop.
#[derive(Debug)]
pub struct Snapshot {
    seq: SeqNo,
    list: Arc<SnapshotList>,
}

impl Snapshot {
    /// The sequence number of the last write the snapshot sees.
    pub fn sequence_number(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_on_drop_with_refcounts() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(5);
        let b = list.acquire(5);
        let c = list.acquire(9);
        assert_eq!(list.sequence_numbers(), vec![5, 9]);
        drop(a);
        assert_eq!(list.sequence_numbers(), vec![5, 9]);
        drop(b);
        drop(c);
        assert!(list.sequence_numbers().is_empty());
    }
}
