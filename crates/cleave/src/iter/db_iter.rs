//! The user-facing iterator: turns a merged stream of internal keys into the
//! user keys and values visible at one snapshot, as LevelDB's DBIter.
//!
//! Forward, the inner iterator sits on the entry that supplies the current
//! key and value, which are read from it without copying. Reverse, the inner
//! iterator sits before every entry of the current key (the scan must see
//! all of a key's entries to know the newest visible one), so the current
//! key and value are copies in `saved_key` and `saved_value`.
//!
//! A separated value is resolved only when `value()` is called. In a
//! forward scan, a lookahead iterator over the same view learns the next
//! entries' handles and their records are read in one batch, submitted
//! together (a key range's values lie in as many value files as flushes
//! wrote it, so they are many small random reads); records adjacent to
//! earlier ones come from the per-iterator readahead windows.

use std::any::Any;
use std::cell::{Cell, OnceCell, RefCell};
use std::fmt;
use std::sync::Arc;

use crate::base::key::{self, InternalKey, ParsedKey, SeqNo, ValueKind, MAX_SEQ};
use crate::iter::expiry::ExpiryView;
use crate::iter::{InternalIterator, ValueSource};
use crate::merge::{self, MergeOperator, Operands};
use crate::value_file::Readahead;
use crate::{Error, Result};

/// Builds another merged iterator over the same view as the one a
/// `DbIterator` runs on: its lookahead.
pub(crate) type InnerSource = Arc<dyn Fn() -> Box<dyn InternalIterator> + Send + Sync>;

/// Entries of one key a forward step passes over one by one before it
/// seeks past the rest (RocksDB's `max_sequential_skip_in_iterations`): a
/// key rewritten thousands of times since the last flush would otherwise
/// cost every scan crossing it thousands of steps.
const MAX_SEQUENTIAL_SKIPS: usize = 8;

/// Entries the first prefetch of a scan covers; each next one doubles, up
/// to `MAX_PREFETCH_ENTRIES`, so a short scan reads little ahead. When most
/// of a batch's records went unused (the caller reads few values), the
/// next batch is a quarter and stops growing, and below
/// `MIN_PREFETCH_ENTRIES` prefetch stops until the next seek.
const FIRST_PREFETCH_ENTRIES: usize = 16;
const MAX_PREFETCH_ENTRIES: usize = 64;
const MIN_PREFETCH_ENTRIES: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Direction {
    Forward,
    Reverse,
}

/// An iterator over the user keys and values of a database as of one
/// snapshot, optionally limited to `[lower_bound, upper_bound)`.
///
/// Movement methods return an error and also record it: after the first
/// error the iterator stays invalid, every movement returns that error
/// again, and [`DbIterator::status`] reports it.
pub struct DbIterator {
    /// Sees expiring entries as plain ones, or as deletions once expired.
    inner: ExpiryView<Box<dyn InternalIterator>>,
    seq: SeqNo,
    /// The time expiry is measured against, fixed for the iterator's life
    /// as its sequence number is.
    now: u64,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Reverse: the current user key. Forward: the user key whose older
    /// entries are being skipped.
    saved_key: Vec<u8>,
    /// Forward: the user key of the entries too new for `seq` being
    /// passed over.
    skip_key: Vec<u8>,
    /// Reverse: the current value as stored (inline, or a handle), with
    /// the kind and seq of its entry. Either direction, when `merged`: the
    /// value the current key's merge operands made.
    saved_value: Vec<u8>,
    saved_kind: ValueKind,
    saved_seq: SeqNo,
    /// The current key's newest visible entry is a merge operand: its key
    /// and merged value are in `saved_key` and `saved_value`, and, moving
    /// forward, `inner` is past its operands.
    merged: bool,
    merge: Option<Arc<dyn MergeOperator>>,
    status: Option<Error>,
    values: ValueSource,
    /// The resolved separated value of the current entry, once asked for.
    resolved: OnceCell<Arc<Vec<u8>>>,
    /// Set when resolving a value failed: the iterator is then invalid and
    /// every movement returns this error.
    value_error: OnceCell<Error>,
    readahead: RefCell<Readahead>,
    /// Moved by `next`/`prev` since the last seek: values are likely read
    /// in a run, so readahead may start at a file's first read.
    scanning: bool,
    /// Where a lookahead iterator comes from (none: no prefetch).
    lookahead_source: Option<InnerSource>,
    /// A second iterator that runs ahead of this one in a forward scan to
    /// learn the next entries' handles, whose records are then read in one
    /// batch.
    lookahead: RefCell<Option<Box<DbIterator>>>,
    /// The last user key the last prefetch covered.
    prefetched_until: RefCell<Option<Vec<u8>>>,
    /// Entries the next prefetch covers.
    prefetch_entries: Cell<usize>,
    // Declared last so that it is dropped after `inner`, which may read
    // memory the pinned memtables and versions keep alive.
    _pins: Box<dyn Any + Send>,
}

impl fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbIterator")
            .field("seq", &self.seq)
            .field("valid", &self.valid)
            .field("direction", &self.direction)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

fn corruption(reason: String) -> Error {
    Error::corruption("<iterator>", 0, reason)
}

fn parse_entry(ikey: &[u8]) -> Result<ParsedKey<'_>> {
    key::parse(ikey).ok_or_else(|| {
        corruption(format!(
            "malformed internal key {:?} ({} bytes)",
            ikey.escape_ascii().to_string(),
            ikey.len()
        ))
    })
}

/// An expiring kind past the `ExpiryView`, which rewrites every one.
fn unseen_expiry(user_key: &[u8]) -> Error {
    debug_assert!(false, "the expiry view passed an expiring entry");
    corruption(format!(
        "expiring entry of key {:?} not seen through its expiry",
        user_key.escape_ascii().to_string()
    ))
}

fn set(dst: &mut Vec<u8>, src: &[u8]) {
    dst.clear();
    dst.extend_from_slice(src);
}

impl DbIterator {
    /// `inner` merges every source; entries with a sequence number above
    /// `seq` are invisible, and so are those expired at `now`
    /// (milliseconds since the Unix epoch). Bounds are user keys, lower inclusive and upper
    /// exclusive. `pins` keeps alive whatever `inner` reads; `values`
    /// resolves separated values; `lookahead_source`, if given, builds
    /// another iterator like `inner` for prefetching in scans.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        inner: Box<dyn InternalIterator>,
        seq: SeqNo,
        now: u64,
        lower_bound: Option<Vec<u8>>,
        upper_bound: Option<Vec<u8>>,
        values: ValueSource,
        lookahead_source: Option<InnerSource>,
        pins: Box<dyn Any + Send>,
    ) -> Self {
        DbIterator {
            inner: ExpiryView::new(inner, now),
            seq,
            now,
            lower_bound,
            upper_bound,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            skip_key: Vec::new(),
            saved_value: Vec::new(),
            saved_kind: ValueKind::Value,
            saved_seq: 0,
            merged: false,
            merge: None,
            status: None,
            values,
            resolved: OnceCell::new(),
            value_error: OnceCell::new(),
            readahead: RefCell::new(Readahead::default()),
            scanning: false,
            lookahead_source,
            lookahead: RefCell::new(None),
            prefetched_until: RefCell::new(None),
            prefetch_entries: Cell::new(FIRST_PREFETCH_ENTRIES),
            _pins: pins,
        }
    }

    /// Merges operands with `merge` (none: a merge operand is an error).
    pub(crate) fn with_merge_operator(mut self, merge: Option<Arc<dyn MergeOperator>>) -> Self {
        self.merge = merge;
        self
    }

    /// True if the iterator is at an entry.
    pub fn valid(&self) -> bool {
        self.valid && self.value_error.get().is_none()
    }

    /// Moves to the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.run(Self::seek_to_first_inner)
    }

    /// Moves to the last key (before the upper bound).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.run(Self::seek_to_last_inner)
    }

    /// Moves to the first key ≥ `key`, or ≥ the lower bound if that is
    /// larger.
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.run(|it| it.seek_inner(key))
    }

    /// Moves to the last key ≤ `key`, or below the upper bound if `key` is
    /// not.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.run(|it| it.seek_for_prev_inner(key))
    }

    /// Moves to the next key. Does nothing if the iterator is not valid.
    #[allow(
        clippy::should_implement_trait,
        reason = "RocksDB-style cursor: next() moves and returns Result"
    )]
    pub fn next(&mut self) -> Result<()> {
        self.run(Self::next_inner)
    }

    /// Moves to the previous key. Does nothing if the iterator is not valid.
    pub fn prev(&mut self) -> Result<()> {
        self.run(Self::prev_inner)
    }

    /// The current key; empty if the iterator is not valid.
    pub fn key(&self) -> &[u8] {
        match (self.valid(), self.direction) {
            (false, _) => &[],
            (true, Direction::Forward) if self.merged => &self.saved_key,
            // The entry was parsed when the iterator stopped on it, so it
            // holds a whole tag.
            (true, Direction::Forward) => key::user_key(self.inner.key()),
            (true, Direction::Reverse) => &self.saved_key,
        }
    }

    /// The current value; empty if the iterator is not valid. A separated
    /// value is read here, on the first call at each position (so a scan
    /// that needs only keys reads no values); in a forward scan that call
    /// may also prefetch the records of the next entries. A failed read is
    /// returned, leaves the iterator invalid and is reported by every later
    /// call.
    pub fn value(&self) -> Result<&[u8]> {
        if let Some(e) = self.value_error.get() {
            return Err(e.duplicate());
        }
        if !self.valid() {
            return Ok(&[]);
        }
        if self.merged {
            return Ok(&self.saved_value);
        }
        let (user_key, seq, kind, raw) = match self.direction {
            Direction::Forward => {
                let ikey = self.inner.key();
                let tag = key::tag(ikey);
                let kind = ValueKind::from_u8(tag as u8).unwrap_or(ValueKind::Value);
                (key::user_key(ikey), tag >> 8, kind, self.inner.value())
            }
            Direction::Reverse => (
                self.saved_key.as_slice(),
                self.saved_seq,
                self.saved_kind,
                self.saved_value.as_slice(),
            ),
        };
        if kind != ValueKind::ValueRef {
            return Ok(raw);
        }
        if let Some(v) = self.resolved.get() {
            return Ok(v.as_slice());
        }
        let mut readahead = self.readahead.borrow_mut();
        let scanning_forward = self.scanning && self.direction == Direction::Forward;
        if scanning_forward
            && self
                .prefetched_until
                .borrow()
                .as_deref()
                .is_none_or(|last| user_key > last)
        {
            self.prefetch_from(user_key, &mut readahead);
        }
        let resolved = self.values.resolve(
            kind,
            raw,
            user_key,
            seq,
            // Readahead runs forward: a reverse scan reads record by record.
            Some((&mut readahead, scanning_forward)),
        );
        match resolved {
            Ok(v) => Ok(self.resolved.get_or_init(|| v).as_slice()),
            Err(e) => {
                let _ = self.value_error.set(e.duplicate());
                Err(e)
            }
        }
    }

    /// Prefetches the records of the separated values of the entries from
    /// `user_key` on (the current one first), through the lookahead
    /// iterator. Best effort: a failure here only means the values are read
    /// one by one, and reported when asked for.
    fn prefetch_from(&self, user_key: &[u8], readahead: &mut Readahead) {
        let Some(source) = &self.lookahead_source else {
            return;
        };
        let mut entries = self.prefetch_entries.get();
        let next = if readahead.last_batch_mostly_unused() {
            entries /= 4;
            entries
        } else {
            (entries * 2).min(MAX_PREFETCH_ENTRIES)
        };
        if entries < MIN_PREFETCH_ENTRIES {
            self.prefetch_entries.set(0);
            return;
        }
        self.prefetch_entries.set(next);
        let mut slot = self.lookahead.borrow_mut();
        let it = slot.get_or_insert_with(|| {
            Box::new(
                DbIterator::new(
                    source(),
                    self.seq,
                    self.now,
                    self.lower_bound.clone(),
                    self.upper_bound.clone(),
                    self.values.clone(),
                    None,
                    Box::new(()),
                )
                .with_merge_operator(self.merge.clone()),
            )
        });
        let mut handles: Vec<Vec<u8>> = Vec::new();
        let mut last = None;
        let mut walk = || -> Result<()> {
            it.seek(user_key)?;
            for _ in 0..entries {
                let Some((kind, raw)) = it.forward_entry() else {
                    break;
                };
                if kind == ValueKind::ValueRef {
                    handles.push(raw.to_vec());
                }
                last = Some(it.key().to_vec());
                it.next()?;
            }
            Ok(())
        };
        if walk().is_err() {
            // A failed iterator stays failed: drop it, and read one by one
            // until the next seek.
            *slot = None;
            self.prefetch_entries.set(0);
        }
        if last.is_some() {
            *self.prefetched_until.borrow_mut() = last;
            self.values
                .prefetch(handles.iter().map(Vec::as_slice), readahead);
        }
    }

    /// The kind and stored value of the current entry, moving forward.
    fn forward_entry(&self) -> Option<(ValueKind, &[u8])> {
        if !self.valid() || self.direction != Direction::Forward {
            return None;
        }
        if self.merged {
            return Some((ValueKind::Value, &self.saved_value));
        }
        let kind = ValueKind::from_u8(key::tag(self.inner.key()) as u8)?;
        Some((kind, self.inner.value()))
    }

    /// The first error this iterator met, if any.
    pub fn status(&self) -> Result<()> {
        match self.status.as_ref().or(self.value_error.get()) {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    /// Runs one movement, unless an earlier one failed, and records its
    /// failure.
    fn run(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if let Some(e) = self.status.as_ref().or(self.value_error.get()) {
            return Err(e.duplicate());
        }
        self.resolved.take();
        let r = f(self);
        if let Err(e) = &r {
            self.valid = false;
            self.status = Some(e.duplicate());
        }
        r
    }

    fn reset(&mut self, direction: Direction) {
        self.direction = direction;
        self.valid = false;
        self.merged = false;
        self.scanning = false;
        self.prefetched_until.get_mut().take();
        self.prefetch_entries.set(FIRST_PREFETCH_ENTRIES);
        self.readahead.get_mut().clear_spans();
        self.saved_key.clear();
        self.saved_value.clear();
    }

    fn seek_to_first_inner(&mut self) -> Result<()> {
        self.reset(Direction::Forward);
        match &self.lower_bound {
            Some(lower) => {
                let target = InternalKey::for_seek(lower, self.seq);
                self.inner.seek(target.encoded())?;
            }
            None => self.inner.seek_to_first()?,
        }
        self.find_next_user_entry(false)
    }

    fn seek_to_last_inner(&mut self) -> Result<()> {
        self.reset(Direction::Reverse);
        match &self.upper_bound {
            Some(upper) => {
                // Sorts before every entry of `upper`: lands on the last
                // entry of a smaller user key.
                let target = InternalKey::for_seek(upper, MAX_SEQ);
                self.inner.seek_for_prev(target.encoded())?;
            }
            None => self.inner.seek_to_last()?,
        }
        self.find_prev_user_entry()
    }

    fn seek_inner(&mut self, key: &[u8]) -> Result<()> {
        self.reset(Direction::Forward);
        let target = match &self.lower_bound {
            Some(lower) if key < lower.as_slice() => lower.as_slice(),
            _ => key,
        };
        if self.upper_bound.as_deref().is_some_and(|u| target >= u) {
            return Ok(());
        }
        let target = InternalKey::for_seek(target, self.seq);
        self.inner.seek(target.encoded())?;
        self.find_next_user_entry(false)
    }

    fn seek_for_prev_inner(&mut self, key: &[u8]) -> Result<()> {
        if self.upper_bound.as_deref().is_some_and(|u| key >= u) {
            return self.seek_to_last_inner();
        }
        self.reset(Direction::Reverse);
        if self.lower_bound.as_deref().is_some_and(|l| key < l) {
            return Ok(());
        }
        // Tag 0 sorts after every entry of `key`: lands on its oldest entry.
        let target = InternalKey::new(key, 0, ValueKind::Deletion);
        self.inner.seek_for_prev(target.encoded())?;
        self.find_prev_user_entry()
    }

    fn next_inner(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.scanning = true;
        match self.direction {
            Direction::Reverse => {
                // `inner` is before the current key's entries; step into
                // them and let the skipping below pass over them.
                self.direction = Direction::Forward;
                if self.inner.valid() {
                    self.inner.next()?;
                } else {
                    let target = InternalKey::for_seek(&self.saved_key, MAX_SEQ);
                    self.inner.seek(target.encoded())?;
                }
            }
            // Past the merged key's operands already, `saved_key` its key.
            Direction::Forward if self.merged => {}
            Direction::Forward => {
                set(&mut self.saved_key, key::user_key(self.inner.key()));
                self.inner.next()?;
            }
        }
        self.find_next_user_entry(true)
    }

    fn prev_inner(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        self.scanning = true;
        if self.direction == Direction::Forward && self.merged {
            // `inner` is past the merged key: land on the last entry
            // before it.
            let target = InternalKey::for_seek(&self.saved_key, MAX_SEQ);
            self.inner.seek_for_prev(target.encoded())?;
            if !self.inner.valid() {
                self.reset(Direction::Forward);
                return Ok(());
            }
            self.direction = Direction::Reverse;
        } else if self.direction == Direction::Forward {
            // Back up to before every entry of the current key, so that the
            // reverse scan starts from the previous key.
            set(&mut self.saved_key, key::user_key(self.inner.key()));
            loop {
                self.inner.prev()?;
                if !self.inner.valid() {
                    self.reset(Direction::Forward);
                    return Ok(());
                }
                let parsed = parse_entry(self.inner.key())?;
                if parsed.user_key < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry()
    }

    /// Moves forward from the inner position to the first visible, live
    /// entry. With `skipping`, entries of user keys ≤ `saved_key` are
    /// passed over: they are older versions of keys already shown or
    /// deleted.
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        self.valid = false;
        self.merged = false;
        // Entries passed over in a row, shadowed or too new: past
        // MAX_SEQUENTIAL_SKIPS the iterator seeks over the rest of them.
        let (mut shadowed_run, mut invisible_run) = (0usize, 0usize);
        while self.inner.valid() {
            let parsed = parse_entry(self.inner.key())?;
            if self
                .upper_bound
                .as_deref()
                .is_some_and(|u| parsed.user_key >= u)
            {
                return Ok(());
            }
            let target = if parsed.seq <= self.seq {
                invisible_run = 0;
                let shadowed = skipping && parsed.user_key <= self.saved_key.as_slice();
                match parsed.kind {
                    ValueKind::Deletion => {
                        set(&mut self.saved_key, parsed.user_key);
                        skipping = true;
                    }
                    ValueKind::Value | ValueKind::ValueRef if !shadowed => {
                        self.valid = true;
                        self.saved_key.clear();
                        return Ok(());
                    }
                    ValueKind::Merge if !shadowed => {
                        set(&mut self.saved_key, parsed.user_key);
                        self.saved_seq = parsed.seq;
                        return self.merge_forward();
                    }
                    ValueKind::Value | ValueKind::ValueRef | ValueKind::Merge => {}
                    ValueKind::ExpiringValue | ValueKind::ExpiringValueRef => {
                        return Err(unseen_expiry(parsed.user_key))
                    }
                }
                shadowed_run = if shadowed { shadowed_run + 1 } else { 0 };
                // Moving forward, a shadowed entry's key is `saved_key`:
                // every older entry of it is shadowed too.
                (shadowed_run > MAX_SEQUENTIAL_SKIPS)
                    .then(|| InternalKey::new(parsed.user_key, 0, ValueKind::Deletion))
            } else {
                // Counted per key: a seek helps only past one key's run.
                if invisible_run > 0 && self.skip_key.as_slice() == parsed.user_key {
                    invisible_run += 1;
                } else {
                    set(&mut self.skip_key, parsed.user_key);
                    invisible_run = 1;
                }
                (invisible_run > MAX_SEQUENTIAL_SKIPS)
                    .then(|| InternalKey::for_seek(parsed.user_key, self.seq))
            };
            match target {
                // Sorts after the current entry: the seek moves forward.
                Some(target) => {
                    (shadowed_run, invisible_run) = (0, 0);
                    self.inner.seek(target.encoded())?;
                }
                None => self.inner.next()?,
            }
        }
        Ok(())
    }

    /// Merges the operands from the inner position on (the newest visible
    /// entry of `saved_key`, a merge operand) with what lies beneath them,
    /// leaving `inner` at that entry or past the key.
    fn merge_forward(&mut self) -> Result<()> {
        let mut operands = Operands::default();
        operands.push(self.inner.value());
        let mut base = None;
        loop {
            self.inner.next()?;
            if !self.inner.valid() {
                break;
            }
            // Older than the first visible entry, so visible too.
            let parsed = parse_entry(self.inner.key())?;
            if parsed.user_key != self.saved_key.as_slice() {
                break;
            }
            match parsed.kind {
                ValueKind::Merge => operands.push(self.inner.value()),
                ValueKind::Value => {
                    base = Some(self.inner.value().to_vec());
                    break;
                }
                ValueKind::ValueRef => {
                    let v = self.values.resolve(
                        parsed.kind,
                        self.inner.value(),
                        parsed.user_key,
                        parsed.seq,
                        None,
                    )?;
                    base = Some(v.to_vec());
                    break;
                }
                ValueKind::Deletion => break,
                ValueKind::ExpiringValue | ValueKind::ExpiringValueRef => {
                    return Err(unseen_expiry(parsed.user_key))
                }
            }
        }
        self.saved_value = merge::full_merge(
            self.merge.as_ref(),
            &self.saved_key,
            base.as_deref(),
            &operands.oldest_first(),
        )?;
        self.merged = true;
        self.valid = true;
        Ok(())
    }

    /// Moves backward from the inner position over every entry of the
    /// previous user key that has a live visible version, and keeps a copy
    /// of it (merged, if its newest entries are merge operands), leaving
    /// `inner` before its entries.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        self.valid = false;
        self.merged = false;
        // Seq of the newest visible entry of `saved_key` so far; kind and
        // seq of the value beneath its merge operands (in `saved_value`),
        // if any; those operands, oldest first.
        let mut found: Option<SeqNo> = None;
        let mut base: Option<(ValueKind, SeqNo)> = None;
        let mut operands: Vec<Vec<u8>> = Vec::new();
        while self.inner.valid() {
            let parsed = parse_entry(self.inner.key())?;
            if self
                .lower_bound
                .as_deref()
                .is_some_and(|l| parsed.user_key < l)
            {
                break;
            }
            if parsed.seq <= self.seq {
                if found.is_some() && parsed.user_key < self.saved_key.as_slice() {
                    break;
                }
                match parsed.kind {
                    ValueKind::Deletion => {
                        found = None;
                        base = None;
                        operands.clear();
                        self.saved_key.clear();
                        self.saved_value.clear();
                    }
                    ValueKind::Value | ValueKind::ValueRef => {
                        found = Some(parsed.seq);
                        base = Some((parsed.kind, parsed.seq));
                        operands.clear();
                        set(&mut self.saved_key, parsed.user_key);
                        set(&mut self.saved_value, self.inner.value());
                    }
                    ValueKind::Merge => {
                        found = Some(parsed.seq);
                        operands.push(self.inner.value().to_vec());
                        set(&mut self.saved_key, parsed.user_key);
                    }
                    ValueKind::ExpiringValue | ValueKind::ExpiringValueRef => {
                        return Err(unseen_expiry(parsed.user_key))
                    }
                }
            }
            self.inner.prev()?;
        }
        let Some(seq) = found else {
            self.reset(Direction::Forward);
            return Ok(());
        };
        if operands.is_empty() {
            let (kind, seq) = base.unwrap_or((ValueKind::Value, seq));
            self.saved_kind = kind;
            self.saved_seq = seq;
        } else {
            let resolved;
            let base = match base {
                None => None,
                Some((ValueKind::ValueRef, base_seq)) => {
                    resolved = self.values.resolve(
                        ValueKind::ValueRef,
                        &self.saved_value,
                        &self.saved_key,
                        base_seq,
                        None,
                    )?;
                    Some(resolved.as_slice())
                }
                Some(_) => Some(self.saved_value.as_slice()),
            };
            let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            let value = merge::full_merge(self.merge.as_ref(), &self.saved_key, base, &refs)?;
            self.saved_value = value;
            self.saved_kind = ValueKind::Value;
            self.saved_seq = seq;
            self.merged = true;
        }
        self.valid = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
