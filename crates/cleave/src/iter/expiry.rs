//! Expiry as readers and compactions see it. Over an iterator of internal
//! keys, an expiring entry appears as what it is at one moment: a deletion
//! once it has expired, and before that, to readers, a plain value or
//! value handle (so that the user iterator and its merging of operands
//! never meet an expiring kind); to compactions, itself, expiry and all.
//!
//! A compaction thus drops an expired entry as it would drop a deletion
//! (where nothing older of its key can be below), or writes a deletion in
//! its place; either way no output references its value any more, which
//! is then garbage in its value file's liveness bitmap. The value is
//! never read: the expiry and the handle's length are in the entry.

use crate::base::expiry::{self, EXPIRY_LEN};
use crate::base::key::{self, ValueKind, TAG_LEN};
use crate::base::InternalIterator;
use crate::error::{Error, Result};
use crate::value_file::ValueHandle;

/// The current entry rewritten, when it is an expiring one.
struct Seen {
    /// The internal key with its kind byte replaced.
    key: Vec<u8>,
    /// Whether it has expired: a deletion, with no value.
    expired: bool,
}

/// Expired entries a compaction turned into deletions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Expired {
    pub entries: u64,
    /// The bytes of their values: inline, or the value-file records their
    /// handles name (none of them read).
    pub value_bytes: u64,
}

pub(crate) struct ExpiryView<I> {
    inner: I,
    now: u64,
    /// Readers: a live expiring entry appears without its expiry.
    strip: bool,
    seen: Option<Seen>,
    /// Kept for the next rewritten key.
    spare: Vec<u8>,
    expired: Expired,
}

impl<I: InternalIterator> ExpiryView<I> {
    /// `inner`'s entries as a reader at `now` (milliseconds since the Unix
    /// epoch) sees them.
    pub(crate) fn new(inner: I, now: u64) -> Self {
        ExpiryView {
            inner,
            now,
            strip: true,
            seen: None,
            spare: Vec::new(),
            expired: Expired::default(),
        }
    }

    /// `inner`'s entries as a compaction at `now` writes them: expired
    /// ones as deletions, the others as they are. `inner` is positioned,
    /// and so is the view.
    pub(crate) fn for_compaction(inner: I, now: u64) -> Result<Self> {
        let mut view = ExpiryView {
            strip: false,
            ..Self::new(inner, now)
        };
        view.settle()?;
        Ok(view)
    }

    /// The expired entries passed so far (a compaction's view).
    pub(crate) fn expired(&self) -> Expired {
        self.expired
    }

    /// Rewrites the current entry if it is an expiring one. A key too
    /// short for its tag is left to the reader above, which reports it.
    fn settle(&mut self) -> Result<()> {
        if let Some(s) = self.seen.take() {
            self.spare = s.key;
        }
        if !self.inner.valid() {
            return Ok(());
        }
        let ikey = self.inner.key();
        if ikey.len() < TAG_LEN {
            return Ok(());
        }
        let Some(kind) = ValueKind::from_u8(key::tag(ikey) as u8).filter(|k| k.is_expiring())
        else {
            return Ok(());
        };
        let damaged = |reason: &str| {
            Error::corruption(
                "<expiring entry>",
                0,
                format!(
                    "key {:?}: {reason}",
                    key::user_key(ikey).escape_ascii().to_string()
                ),
            )
        };
        let split = expiry::split(kind, self.inner.value()).map_err(|e| damaged(e.0))?;
        let expired = split
            .expires_at
            .is_some_and(|at| expiry::expired(at, self.now));
        if !expired && !self.strip {
            return Ok(());
        }
        if expired && !self.strip {
            let bytes = match split.kind {
                ValueKind::ValueRef => u64::from(
                    ValueHandle::decode(split.value)
                        .map_err(|e| damaged(e.0))?
                        .len,
                ),
                _ => split.value.len() as u64,
            };
            self.expired.entries += 1;
            self.expired.value_bytes += bytes;
        }
        let seen = if expired {
            ValueKind::Deletion
        } else {
            split.kind
        };
        let mut rewritten = std::mem::take(&mut self.spare);
        rewritten.clear();
        rewritten.extend_from_slice(ikey);
        let at = rewritten.len() - TAG_LEN;
        rewritten[at] = seen as u8;
        self.seen = Some(Seen {
            key: rewritten,
            expired: seen == ValueKind::Deletion,
        });
        Ok(())
    }
}

impl<I: InternalIterator> InternalIterator for ExpiryView<I> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()?;
        self.settle()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()?;
        self.settle()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)?;
        self.settle()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek_for_prev(target)?;
        self.settle()
    }

    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.settle()
    }

    fn prev(&mut self) -> Result<()> {
        self.inner.prev()?;
        self.settle()
    }

    fn key(&self) -> &[u8] {
        match &self.seen {
            Some(s) => &s.key,
            None => self.inner.key(),
        }
    }

    fn value(&self) -> &[u8] {
        match &self.seen {
            Some(s) if s.expired => &[],
            Some(_) => &self.inner.value()[EXPIRY_LEN..],
            None => self.inner.value(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::testutil::VecIter;

    fn expiring(at: u64, v: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        expiry::join(&mut out, at, v);
        out
    }

    #[test]
    fn expired_entries_are_deletions_and_live_ones_plain() {
        let live = expiring(200, b"live");
        let dead = expiring(100, b"dead");
        let inner = VecIter::from_parts(&[
            (b"a", 3, ValueKind::ExpiringValue, &live),
            (b"b", 2, ValueKind::ExpiringValue, &dead),
            (b"c", 1, ValueKind::Value, b"plain"),
        ]);
        let mut it = ExpiryView::new(Box::new(inner) as Box<dyn InternalIterator>, 150);
        let mut got = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            let p = key::parse(it.key()).unwrap();
            got.push((p.user_key.to_vec(), p.seq, p.kind, it.value().to_vec()));
            it.next().unwrap();
        }
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), 3, ValueKind::Value, b"live".to_vec()),
                (b"b".to_vec(), 2, ValueKind::Deletion, vec![]),
                (b"c".to_vec(), 1, ValueKind::Value, b"plain".to_vec()),
            ]
        );
        it.seek_to_last().unwrap();
        it.prev().unwrap();
        assert_eq!(key::parse(it.key()).unwrap().kind, ValueKind::Deletion);
    }

    #[test]
    fn a_short_expiring_value_is_corruption() {
        let inner = VecIter::from_parts(&[(b"a", 3, ValueKind::ExpiringValueRef, b"xy")]);
        let mut it = ExpiryView::new(Box::new(inner) as Box<dyn InternalIterator>, 0);
        assert!(matches!(it.seek_to_first(), Err(Error::Corruption { .. })));
    }

    #[test]
    fn a_compaction_sees_expired_entries_as_deletions_and_counts_them() {
        let handle = ValueHandle {
            logical_file: crate::base::FileNumber(7),
            ordinal: 3,
            offset: 100,
            len: 8192,
        };
        let mut raw = Vec::new();
        handle.encode(&mut raw);
        let dead_ref = expiring(100, &raw);
        let live = expiring(300, b"live");
        let dead = expiring(100, b"dead!");
        let mut inner = VecIter::from_parts(&[
            (b"a", 3, ValueKind::ExpiringValueRef, &dead_ref),
            (b"b", 2, ValueKind::ExpiringValue, &live),
            (b"c", 1, ValueKind::ExpiringValue, &dead),
        ]);
        inner.seek_to_first().unwrap();
        let mut it =
            ExpiryView::for_compaction(&mut inner as &mut dyn InternalIterator, 200).unwrap();
        let mut got = Vec::new();
        while it.valid() {
            let p = key::parse(it.key()).unwrap();
            got.push((p.kind, it.value().to_vec()));
            it.next().unwrap();
        }
        assert_eq!(
            got,
            vec![
                (ValueKind::Deletion, vec![]),
                (ValueKind::ExpiringValue, live.clone()),
                (ValueKind::Deletion, vec![]),
            ]
        );
        assert_eq!(
            it.expired(),
            Expired {
                entries: 2,
                value_bytes: 8192 + 5
            }
        );
    }
}
