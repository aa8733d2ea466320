//! What of a bucket's records survives: KDSep's delta-based garbage
//! collection, with snapshots respected.
//!
//! Of one key's records, newest first: a record is dead when an anchor
//! newer than it lies in its stripe (no reader sees the one without the
//! other); two adjacent deltas of one stripe are partially merged where
//! the operator allows; and an anchor with no older record left cuts off
//! nothing, so it goes too, unless the bucket keeps records this pass
//! does not see (`trailing_anchors`).

use std::sync::Arc;

use super::format::{Record, RecordKind};
use crate::base::SeqNo;
use crate::compaction::stream::stripe;
use crate::merge::MergeOperator;

pub(crate) struct Collector<'a> {
    pub snapshots: &'a [SeqNo],
    pub op: Option<&'a Arc<dyn MergeOperator>>,
    /// Partial merges made.
    pub merged: u64,
    /// Records dropped as dead.
    pub dropped: u64,
}

impl<'a> Collector<'a> {
    pub(crate) fn new(snapshots: &'a [SeqNo], op: Option<&'a Arc<dyn MergeOperator>>) -> Self {
        Collector {
            snapshots,
            op,
            merged: 0,
            dropped: 0,
        }
    }

    /// The live records of `records` (chunk order), in chunk order;
    /// `keep_trailing(key)` says whether a key's oldest anchors stay.
    pub(crate) fn collect(
        &mut self,
        records: Vec<Record>,
        keep_trailing: &dyn Fn(&[u8]) -> bool,
    ) -> Vec<Record> {
        let mut out: Vec<Record> = Vec::with_capacity(records.len());
        let mut key_start = 0;
        let mut cut: Option<usize> = None;
        for r in records {
            let new_key = out.get(key_start).is_none_or(|k| k.key != r.key);
            if new_key {
                self.end_key(&mut out, key_start, keep_trailing);
                key_start = out.len();
                cut = None;
            }
            let s = stripe(self.snapshots, r.seq);
            if cut == Some(s) {
                self.dropped += 1;
                continue;
            }
            if r.kind == RecordKind::Anchor {
                cut = Some(s);
                out.push(r);
                continue;
            }
            if let Some(newer) = out[key_start..].last_mut() {
                let same_stripe = stripe(self.snapshots, newer.seq) == s;
                if newer.kind == RecordKind::Delta && same_stripe {
                    if let Some(m) = self
                        .op
                        .and_then(|op| op.partial_merge(&r.key, &r.value, &newer.value))
                    {
                        newer.value = m;
                        self.merged += 1;
                        continue;
                    }
                }
            }
            out.push(r);
        }
        self.end_key(&mut out, key_start, keep_trailing);
        out
    }

    fn end_key(
        &mut self,
        out: &mut Vec<Record>,
        start: usize,
        keep_trailing: &dyn Fn(&[u8]) -> bool,
    ) {
        if out.len() == start || keep_trailing(&out[start].key) {
            return;
        }
        while out.len() > start && out.last().is_some_and(|r| r.kind == RecordKind::Anchor) {
            out.pop();
            self.dropped += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::U64Add;

    fn add(key: &[u8], seq: SeqNo, n: u64) -> Record {
        Record::delta(key, seq, &n.to_le_bytes())
    }

    fn collect(records: Vec<Record>, snapshots: &[SeqNo], keep: bool) -> Vec<Record> {
        let op: Arc<dyn MergeOperator> = Arc::new(U64Add);
        Collector::new(snapshots, Some(&op)).collect(records, &|_| keep)
    }

    #[test]
    fn deltas_older_than_an_anchor_go_and_the_rest_merge() {
        let got = collect(
            vec![
                add(b"a", 9, 1),
                add(b"a", 8, 2),
                Record::anchor(b"a", 7),
                add(b"a", 5, 4),
                add(b"b", 3, 1),
            ],
            &[],
            false,
        );
        // The anchor cut off everything older, so it goes too.
        assert_eq!(got, vec![add(b"a", 9, 3), add(b"b", 3, 1)]);
    }

    #[test]
    fn a_snapshot_keeps_what_it_sees() {
        // Snapshot 6 sees the delta at 5 and not the anchor at 7.
        let records = vec![
            add(b"a", 9, 1),
            Record::anchor(b"a", 7),
            add(b"a", 5, 4),
            add(b"a", 4, 1),
        ];
        let got = collect(records, &[6], false);
        assert_eq!(
            got,
            vec![add(b"a", 9, 1), Record::anchor(b"a", 7), add(b"a", 5, 5)]
        );
    }

    #[test]
    fn trailing_anchors_stay_when_asked() {
        let records = vec![add(b"a", 9, 1), Record::anchor(b"a", 7)];
        assert_eq!(collect(records.clone(), &[], true), records);
        assert_eq!(collect(records, &[], false), vec![add(b"a", 9, 1)]);
    }
}
