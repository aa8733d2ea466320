//! The in-memory write buffer: a concurrent skiplist of internal keys.
//!
//! Many threads may `add` and read at once (writers of one group commit
//! insert in parallel; readers never block). Entries are never removed: a
//! memtable is dropped whole once flushed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::base::key::{self, InternalKey, SeqNo, ValueKind};
use crate::base::InternalIterator;

mod filter;
mod skiplist;

use filter::MemFilter;
use skiplist::{Entry, SkipList, Splice};

use crate::prefix::{self, PrefixExtractor};

/// Memory a merged run's map entry costs beyond its key and operand: an
/// estimate, used only to decide when to switch memtables.
const RUN_OVERHEAD_BYTES: usize = 64;

/// One key's newest merge operands in a memtable as a read found them,
/// partially merged into one operand: the next read of the key walks only
/// the operands written since, then takes this one instead of the rest
/// (KDSep's KD cache, for the deltas still in memory). The operands of a
/// hot key otherwise make every read of it walk thousands of entries.
#[derive(Clone)]
pub(crate) struct MergedRun {
    /// Sequence numbers of the run's newest and oldest operands: the key
    /// has no other entry between them in this memtable.
    pub newest: SeqNo,
    pub oldest: SeqNo,
    pub operand: Arc<[u8]>,
}

pub(crate) struct MemTable {
    list: SkipList,
    memory_usage: AtomicUsize,
    runs: Mutex<HashMap<Vec<u8>, MergedRun>>,
    /// Whether any entry is a merge operand: a flush without one has
    /// nothing to route to the delta store.
    has_merges: AtomicBool,
    /// The user keys, and with `prefix` their prefixes, added so far.
    filter: Option<MemFilter>,
    prefix: Option<Arc<dyn PrefixExtractor>>,
}

impl Default for MemTable {
    fn default() -> Self {
        Self::new()
    }
}

impl MemTable {
    pub(crate) fn new() -> Self {
        MemTable {
            list: SkipList::new(),
            memory_usage: AtomicUsize::new(0),
            runs: Mutex::new(HashMap::new()),
            has_merges: AtomicBool::new(false),
            filter: None,
            prefix: None,
        }
    }

    /// A memtable with a bloom filter of about `filter_bytes` over its user
    /// keys and, with `prefix`, their prefixes; none if 0. The filter is
    /// not counted in `approximate_memory_usage`, which measures the
    /// entries that a flush writes and a switch waits for.
    pub(crate) fn with_filter(
        filter_bytes: usize,
        prefix: Option<Arc<dyn PrefixExtractor>>,
    ) -> Self {
        let mut mem = Self::new();
        if filter_bytes > 0 {
            mem.filter = Some(MemFilter::new(filter_bytes));
            mem.prefix = prefix;
        }
        mem
    }

    /// False only if no entry of `user_key` was ever added.
    pub(crate) fn may_contain_key(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// False only if no key with the prefix `prefix` (of the extractor
    /// named `extractor`) was ever added.
    pub(crate) fn may_contain_prefix(&self, extractor: &str, prefix: &[u8]) -> bool {
        match (&self.filter, &self.prefix) {
            (Some(f), Some(p)) if p.name() == extractor => f.may_contain(prefix),
            _ => true,
        }
    }

    /// Adds one entry. Safe to call from many threads at once.
    ///
    /// REQUIRES: `seq` is unique to this write (sequence numbers are never
    /// reused), so no two adds share an internal key.
    #[cfg(test)]
    pub(crate) fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.add_with(seq, kind, user_key, value, &mut self.splice());
    }

    /// Where a run of `add_with`s starts: a write's entries, in key order
    /// within each batch, then cost a few comparisons each, not a search.
    pub(crate) fn splice(&self) -> Splice<'_> {
        self.list.splice()
    }

    /// Readies the memtable for adding `user_key` soon: a write adds each
    /// entry having prefetched the next.
    pub(crate) fn prefetch(&self, user_key: &[u8]) {
        if let Some(f) = &self.filter {
            f.prefetch(user_key);
        }
    }

    /// `add`, after the entry `splice` last added. Safe to call from many
    /// threads at once, each with its own splice.
    pub(crate) fn add_with(
        &self,
        seq: SeqNo,
        kind: ValueKind,
        user_key: &[u8],
        value: &[u8],
        splice: &mut Splice<'_>,
    ) {
        // Before the entry: a reader that can see it sees its bits.
        if let Some(f) = &self.filter {
            f.add(user_key);
            if let Some(p) = self
                .prefix
                .as_deref()
                .and_then(|p| prefix::prefix_of(p, user_key))
            {
                f.add(p);
            }
        }
        let ikey = InternalKey::new(user_key, seq, kind);
        let bytes = self.list.insert_with(ikey.encoded(), value, splice);
        self.memory_usage.fetch_add(bytes, AtomicOrdering::Relaxed);
        if kind == ValueKind::Merge {
            self.has_merges.store(true, AtomicOrdering::Relaxed);
        }
    }

    /// Whether any entry added so far is a merge operand. Read by a flush,
    /// after every add (the memtable is immutable by then).
    pub(crate) fn has_merges(&self) -> bool {
        self.has_merges.load(AtomicOrdering::Relaxed)
    }

    /// The newest entry for `user_key` with sequence ≤ `seq`, or `None` if
    /// the memtable holds no such entry (older tables must be consulted).
    #[cfg(test)]
    pub(crate) fn get(&self, user_key: &[u8], seq: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
        let mut found = None;
        self.get_versions(user_key, seq, &mut |kind, value, _| {
            found = Some((kind, value.to_vec()));
            false
        });
        found
    }

    /// The merged run of `user_key`'s newest operands a read left, if any.
    pub(crate) fn merged_run(&self, user_key: &[u8]) -> Option<MergedRun> {
        self.runs.lock().get(user_key).cloned()
    }

    /// Keeps `run` for `user_key` unless a newer one is kept already. Its
    /// bytes count in the memtable's size, so that the runs' memory is
    /// bounded by the write buffer's.
    pub(crate) fn set_merged_run(&self, user_key: &[u8], run: MergedRun) {
        let mut runs = self.runs.lock();
        let grown = match runs.get(user_key) {
            Some(old) if old.newest >= run.newest => return,
            Some(old) => run.operand.len().saturating_sub(old.operand.len()),
            None => user_key.len() + run.operand.len() + RUN_OVERHEAD_BYTES,
        };
        runs.insert(user_key.to_vec(), run);
        self.memory_usage.fetch_add(grown, AtomicOrdering::Relaxed);
    }

    /// Calls `f` with the entries of `user_key` of sequence ≤ `seq`,
    /// newest first, with their sequence numbers, while it returns true (a
    /// merge walks its operands this way).
    pub(crate) fn get_versions(
        &self,
        user_key: &[u8],
        seq: SeqNo,
        f: &mut dyn FnMut(ValueKind, &[u8], SeqNo) -> bool,
    ) {
        let probe = InternalKey::for_seek(user_key, seq);
        let mut entry = self.list.lower_bound(probe.encoded());
        while let Some(e) = entry {
            // Keys here were built by `add` from a `ValueKind`, so they parse.
            let Some(parsed) = key::parse(e.key()) else {
                return;
            };
            if parsed.user_key != user_key || !f(parsed.kind, e.value(), parsed.seq) {
                return;
            }
            entry = e.next();
        }
    }

    /// A bidirectional iterator that keeps this memtable alive. It sees
    /// entries added after its creation if it reaches them.
    pub(crate) fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            current: None,
            mem: Arc::clone(self),
        }
    }

    /// Bytes of the skiplist's nodes (keys, values and links), and of the
    /// merged runs with an estimate of their overhead.
    pub(crate) fn approximate_memory_usage(&self) -> usize {
        self.memory_usage.load(AtomicOrdering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Iterator over a memtable. Stepping follows the skiplist's links, so
/// `next` is O(1); `prev` and seeks search from the head.
pub(crate) struct MemTableIter {
    // The entry points into the skiplist that `mem` owns.
    current: Option<Entry<'static>>,
    mem: Arc<MemTable>,
}

impl MemTableIter {
    /// Stores an entry of `self.mem`'s skiplist, lifting its lifetime.
    fn set(&mut self, entry: Option<Entry<'_>>) {
        // SAFETY: the entry points into `self.mem.list`, which lives on the
        // heap behind the `Arc` held in `self.mem` and frees its nodes only
        // when dropped. `self.mem` is never reassigned, so the entry stays
        // valid as long as `self`. The 'static lifetime never escapes: `key`
        // and `value` reborrow through `&self`.
        self.current =
            entry.map(|e| unsafe { std::mem::transmute::<Entry<'_>, Entry<'static>>(e) });
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> crate::Result<()> {
        let mem = Arc::clone(&self.mem);
        self.set(mem.list.first());
        Ok(())
    }

    fn seek_to_last(&mut self) -> crate::Result<()> {
        let mem = Arc::clone(&self.mem);
        self.set(mem.list.last());
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> crate::Result<()> {
        let mem = Arc::clone(&self.mem);
        self.set(mem.list.lower_bound(target));
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> crate::Result<()> {
        let mem = Arc::clone(&self.mem);
        self.set(mem.list.upper_bound(target));
        Ok(())
    }

    fn next(&mut self) -> crate::Result<()> {
        self.current = self.current.and_then(|e| e.next());
        Ok(())
    }

    fn prev(&mut self) -> crate::Result<()> {
        if let Some(cur) = self.current {
            let mem = Arc::clone(&self.mem);
            self.set(mem.list.prev(&cur));
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |e| e.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |e| e.value())
    }
}

#[cfg(test)]
mod tests;
