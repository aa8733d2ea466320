//! The memtable's skiplist: entries (an internal key and its value) in
//! one allocation with their tower of next pointers, inserted by many
//! threads at once without locks, read without locks or reference counts,
//! and freed together when the list is dropped (RocksDB's InlineSkipList).
//!
//! A general-purpose concurrent map pays for removal: crossbeam's skiplist
//! pins an epoch for every search and counts references on every step,
//! and keeps keys behind a second pointer. A memtable never removes an
//! entry, so a node here is immutable once linked and lives as long as the
//! list: a search is loads and comparisons over nodes holding their key.
//!
//! Insertion links a node level by level from the bottom with one
//! compare-and-swap each (release), and readers load links with acquire:
//! a reader that reaches a node sees its bytes and the links it was given.
//! A node is in the list once linked at level 0; higher levels only speed
//! searches, so a search that meets a half-linked node is still correct.
//!
//! A write's keys often land next to each other (a batch is in key order,
//! a list's pushes take adjacent indexes): a `Splice` keeps where the last
//! insert went, and the next one searches from the lowest level whose
//! neighbours still bracket its key instead of from the top (RocksDB's
//! splices in InlineSkipList).

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};

use crate::base::key;

/// Levels of the tallest tower. With a quarter of nodes reaching each
/// next level, 12 levels keep searches logarithmic to 4^12 (16 million)
/// entries, far more than a memtable holds.
pub(super) const MAX_HEIGHT: usize = 12;
/// One node in this many reaches the next level.
const BRANCHING: u64 = 4;

/// A node's fixed part; `height` links, then the key and the value,
/// follow it in the same allocation.
#[repr(C)]
struct Node {
    key_len: u32,
    value_len: u32,
    height: u32,
}

/// Bytes from a node's start to its first link: the header rounded up to
/// the links' alignment.
const LINKS_OFFSET: usize = size_of::<Node>().next_multiple_of(align_of::<AtomicPtr<Node>>());
const LINK_BYTES: usize = size_of::<AtomicPtr<Node>>();

fn layout(height: usize, data_len: usize) -> Layout {
    let size = LINKS_OFFSET + height * LINK_BYTES + data_len;
    // Keys and values are bounded (base::limits) far below isize::MAX.
    Layout::from_size_align(size, align_of::<AtomicPtr<Node>>())
        .unwrap_or_else(|_| panic!("memtable entry of {size} bytes"))
}

/// The `level`-th link of `node`.
///
/// SAFETY (callers): `node` points to a live node of height > `level`.
unsafe fn link<'a>(node: NonNull<Node>, level: usize) -> &'a AtomicPtr<Node> {
    unsafe {
        &*node
            .as_ptr()
            .cast::<u8>()
            .add(LINKS_OFFSET + level * LINK_BYTES)
            .cast::<AtomicPtr<Node>>()
    }
}

/// The key and value bytes of `node`.
///
/// SAFETY (callers): `node` points to a live, initialized node.
unsafe fn data<'a>(node: NonNull<Node>) -> (&'a [u8], &'a [u8]) {
    let n = node.as_ptr();
    unsafe {
        let (key_len, value_len, height) = (
            (*n).key_len as usize,
            (*n).value_len as usize,
            (*n).height as usize,
        );
        let start = n.cast::<u8>().add(LINKS_OFFSET + height * LINK_BYTES);
        (
            std::slice::from_raw_parts(start, key_len),
            std::slice::from_raw_parts(start.add(key_len), value_len),
        )
    }
}

/// Allocates a node of `height` holding `key` and `value`, its links null.
fn new_node(height: usize, key: &[u8], value: &[u8]) -> NonNull<Node> {
    // The header's lengths must give back this layout when the node is
    // freed; batches hold keys and values far below 4 GiB (base::limits).
    assert!(
        u32::try_from(key.len()).is_ok() && u32::try_from(value.len()).is_ok(),
        "memtable entry of {} + {} bytes",
        key.len(),
        value.len()
    );
    let layout = layout(height, key.len() + value.len());
    // SAFETY: the layout has a nonzero size (the header); every byte the
    // node's readers touch is written below before the node is shared.
    unsafe {
        let Some(node) = NonNull::new(alloc::alloc(layout).cast::<Node>()) else {
            alloc::handle_alloc_error(layout)
        };
        node.as_ptr().write(Node {
            key_len: key.len() as u32,
            value_len: value.len() as u32,
            height: height as u32,
        });
        for level in 0..height {
            node.as_ptr()
                .cast::<u8>()
                .add(LINKS_OFFSET + level * LINK_BYTES)
                .cast::<AtomicPtr<Node>>()
                .write(AtomicPtr::new(ptr::null_mut()));
        }
        let start = node
            .as_ptr()
            .cast::<u8>()
            .add(LINKS_OFFSET + height * LINK_BYTES);
        ptr::copy_nonoverlapping(key.as_ptr(), start, key.len());
        ptr::copy_nonoverlapping(value.as_ptr(), start.add(key.len()), value.len());
        node
    }
}

/// What the allocator adds to each node, on average: its header, or the
/// rounding up to a size class.
const ALLOCATION_OVERHEAD_BYTES: usize = 16;

/// Memory a node of `height` holding `data_len` bytes takes.
pub(crate) fn node_bytes(height: usize, data_len: usize) -> usize {
    layout(height, data_len).size() + ALLOCATION_OVERHEAD_BYTES
}

thread_local! {
    /// Per-thread generator of tower heights (xorshift64*), seeded apart
    /// by each thread's own address.
    static RNG: Cell<u64> = Cell::new({
        let local = 0u8;
        (ptr::addr_of!(local) as u64) | 1
    });
}

fn random_height() -> usize {
    RNG.with(|rng| {
        let mut x = rng.get();
        let mut height = 1;
        loop {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
            if height == MAX_HEIGHT || (r >> 32) & (BRANCHING - 1) != 0 {
                rng.set(x);
                return height;
            }
            height += 1;
        }
    })
}

/// Entries ordered by internal key (`key::compare`); keys are unique.
pub(crate) struct SkipList {
    /// A node of the greatest height with no key: links only.
    head: NonNull<Node>,
    /// Levels in use: searches start at the top one.
    height: AtomicUsize,
}

// SAFETY: the list owns its nodes; shared access only loads and
// compare-and-swaps the atomic links, and reads node bytes that are never
// written after the node is linked.
unsafe impl Send for SkipList {}
unsafe impl Sync for SkipList {}

/// One entry of a list, valid as long as the list is.
#[derive(Clone, Copy)]
pub(crate) struct Entry<'a> {
    node: NonNull<Node>,
    _list: PhantomData<&'a SkipList>,
}

// SAFETY: as for `SkipList`: an entry is read-only.
unsafe impl Send for Entry<'_> {}
unsafe impl Sync for Entry<'_> {}

impl<'a> Entry<'a> {
    fn new(node: *mut Node) -> Option<Entry<'a>> {
        NonNull::new(node).map(|node| Entry {
            node,
            _list: PhantomData,
        })
    }

    pub(crate) fn key(&self) -> &'a [u8] {
        // SAFETY: entries come from linked nodes of a list that outlives 'a.
        unsafe { data(self.node).0 }
    }

    pub(crate) fn value(&self) -> &'a [u8] {
        // SAFETY: as in `key`.
        unsafe { data(self.node).1 }
    }

    /// The entry after this one.
    pub(crate) fn next(&self) -> Option<Entry<'a>> {
        // SAFETY: every node has level 0.
        Entry::new(unsafe { link(self.node, 0) }.load(AtomicOrdering::Acquire))
    }
}

/// Where an insert into one list went: at each level below `height`, the
/// last node before its key (`prev`, the head if none) and the one after
/// (`next`, null at the end). Nodes are never removed, so the pointers stay
/// valid as long as the list; links added since only make `next` stale,
/// which an insert's compare-and-swap notices.
pub(crate) struct Splice<'a> {
    prev: [NonNull<Node>; MAX_HEIGHT],
    next: [*mut Node; MAX_HEIGHT],
    /// Levels the splice knows; 0 for a new one.
    height: usize,
    list: &'a SkipList,
}

impl SkipList {
    pub(crate) fn new() -> Self {
        SkipList {
            head: new_node(MAX_HEIGHT, &[], &[]),
            height: AtomicUsize::new(1),
        }
    }

    /// Entries, counted by a walk.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        std::iter::successors(self.first(), Entry::next).count()
    }

    /// Whether every level, not only the bottom one, is in key order.
    #[cfg(test)]
    fn levels_in_order(&self) -> bool {
        (0..MAX_HEIGHT).all(|level| {
            let mut node = Self::next_at(self.head, level);
            while let Some(n) = NonNull::new(node) {
                let next = Self::next_at(n, level);
                if let Some(m) = NonNull::new(next) {
                    // SAFETY: linked nodes are live and initialized.
                    if key::compare(unsafe { data(n).0 }, unsafe { data(m).0 }) != Ordering::Less {
                        return false;
                    }
                }
                node = next;
            }
            true
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.first().is_none()
    }

    /// The node after `node` at `level`, or null.
    fn next_at(node: NonNull<Node>, level: usize) -> *mut Node {
        // SAFETY: searches only descend to levels a node has: the head has
        // every level, and a node is reached at `level` only through a
        // link at `level`, which only a node that tall is given.
        unsafe { link(node, level) }.load(AtomicOrdering::Acquire)
    }

    /// Whether `node` (null: the end) sorts before `target`.
    fn before(node: *mut Node, target: &[u8]) -> bool {
        #[cfg(test)]
        tests::COMPARISONS.with(|c| c.set(c.get() + 1));
        match NonNull::new(node) {
            // SAFETY: linked nodes are live and initialized.
            Some(n) => key::compare(unsafe { data(n).0 }, target) == Ordering::Less,
            None => false,
        }
    }

    /// The last node before `target` (the head if none) and the one after
    /// it, at `level`, searching from `start`, which is before `target`.
    fn splice_at(
        &self,
        target: &[u8],
        mut start: NonNull<Node>,
        level: usize,
    ) -> (NonNull<Node>, *mut Node) {
        loop {
            let next = Self::next_at(start, level);
            match NonNull::new(next) {
                Some(n) if Self::before(next, target) => start = n,
                _ => return (start, next),
            }
        }
    }

    /// A splice for a run of inserts into this list.
    pub(crate) fn splice(&self) -> Splice<'_> {
        Splice {
            prev: [self.head; MAX_HEIGHT],
            next: [ptr::null_mut(); MAX_HEIGHT],
            height: 0,
            list: self,
        }
    }

    /// Adds an entry and returns the bytes it took. Safe to call from
    /// many threads at once.
    ///
    /// REQUIRES: no entry of the list has key `ikey`.
    #[cfg(test)]
    pub(crate) fn insert(&self, ikey: &[u8], value: &[u8]) -> usize {
        self.insert_with(ikey, value, &mut self.splice())
    }

    /// `insert`, searching from where `splice`'s last insert went, and
    /// leaving it where this one goes. Safe to call from many threads at
    /// once, each with its own splice.
    ///
    /// REQUIRES: no entry of the list has key `ikey`.
    pub(crate) fn insert_with(&self, ikey: &[u8], value: &[u8], splice: &mut Splice<'_>) -> usize {
        assert!(ptr::eq(splice.list, self), "a splice of another list");
        let height = random_height();
        let node = new_node(height, ikey, value);
        let mut top = self.height.load(AtomicOrdering::Relaxed);
        while height > top {
            match self.height.compare_exchange_weak(
                top,
                height,
                AtomicOrdering::Relaxed,
                AtomicOrdering::Relaxed,
            ) {
                Ok(_) => top = height,
                Err(now) => top = now,
            }
        }
        // The lowest level whose neighbours are still adjacent and bracket
        // the key; those above it bracket it too (a higher level's
        // neighbours are never nearer). Adjacent, not only bracketing:
        // another thread's insert after the splice's may have made a lower
        // level's `next` stale while a higher level's, searched again
        // after a failed link, is not; a stale level could then pass and
        // the levels above it be linked out of order (RocksDB checks the
        // same). A list grown taller since is searched from the top.
        let bracketed = if splice.height < top {
            None
        } else {
            // `next` first: in a sorted run, `prev` is the last insert,
            // before the key, and the level fails on `next`.
            (0..splice.height).find(|&l| {
                // SAFETY: `prev[l]` is the head or a node reached at `l`.
                let adjacent = unsafe { link(splice.prev[l], l) }.load(AtomicOrdering::Acquire)
                    == splice.next[l];
                adjacent
                    && !Self::before(splice.next[l], ikey)
                    && (splice.prev[l] == self.head || Self::before(splice.prev[l].as_ptr(), ikey))
            })
        };
        let (from, mut start) = match bracketed {
            Some(l) => (l, splice.prev[l]),
            None => {
                splice.height = top;
                (top, self.head)
            }
        };
        // Where the node goes at each level below, found top-down.
        for level in (0..from).rev() {
            let (p, n) = self.splice_at(ikey, start, level);
            splice.prev[level] = p;
            splice.next[level] = n;
            start = p;
        }
        let (prev, next) = (&mut splice.prev, &mut splice.next);
        debug_assert!(
            Entry::new(next[0]).is_none_or(|n| n.key() != ikey),
            "a memtable key inserted twice"
        );
        for level in 0..height {
            loop {
                // SAFETY: `node` has `height` levels and is not shared yet
                // at this level; `prev[level]` is the head or a node
                // reached at this level, so it has it.
                let (mine, theirs) = unsafe { (link(node, level), link(prev[level], level)) };
                mine.store(next[level], AtomicOrdering::Relaxed);
                if theirs
                    .compare_exchange(
                        next[level],
                        node.as_ptr(),
                        AtomicOrdering::Release,
                        AtomicOrdering::Relaxed,
                    )
                    .is_ok()
                {
                    break;
                }
                // Another insert linked a node here first: search on from
                // the same predecessor, which still sorts before the key.
                let (p, n) = self.splice_at(ikey, prev[level], level);
                prev[level] = p;
                next[level] = n;
            }
            // The next key of a sorted run goes right after this one.
            prev[level] = node;
        }
        node_bytes(height, ikey.len() + value.len())
    }

    /// The last node before `target` (or the head) and the node after it,
    /// as one load saw it: loading the link again could find a node
    /// inserted since, which may sort before `target`.
    fn last_before(&self, target: &[u8]) -> (NonNull<Node>, *mut Node) {
        let (mut x, mut next) = (self.head, ptr::null_mut());
        for level in (0..self.height.load(AtomicOrdering::Relaxed)).rev() {
            (x, next) = self.splice_at(target, x, level);
        }
        (x, next)
    }

    /// The first entry at or after `target`.
    pub(crate) fn lower_bound(&self, target: &[u8]) -> Option<Entry<'_>> {
        Entry::new(self.last_before(target).1)
    }

    /// The last entry at or before `target`.
    pub(crate) fn upper_bound(&self, target: &[u8]) -> Option<Entry<'_>> {
        let (before, next) = self.last_before(target);
        match Entry::new(next) {
            Some(e) if key::compare(e.key(), target) == Ordering::Equal => Some(e),
            _ => self.entry(before),
        }
    }

    /// The entry before `e`.
    pub(crate) fn prev(&self, e: &Entry<'_>) -> Option<Entry<'_>> {
        self.entry(self.last_before(e.key()).0)
    }

    pub(crate) fn first(&self) -> Option<Entry<'_>> {
        Entry::new(Self::next_at(self.head, 0))
    }

    pub(crate) fn last(&self) -> Option<Entry<'_>> {
        let mut x = self.head;
        for level in (0..self.height.load(AtomicOrdering::Relaxed)).rev() {
            while let Some(n) = NonNull::new(Self::next_at(x, level)) {
                x = n;
            }
        }
        self.entry(x)
    }

    /// `node` as an entry, or `None` for the head.
    fn entry(&self, node: NonNull<Node>) -> Option<Entry<'_>> {
        (node != self.head).then_some(Entry {
            node,
            _list: PhantomData,
        })
    }
}

impl Drop for SkipList {
    fn drop(&mut self) {
        // Every node is linked at level 0 (inserts finished: `&mut self`).
        let mut node = Some(self.head);
        while let Some(n) = node {
            // SAFETY: each node was allocated by `new_node` with this
            // layout and is freed once, after its successor is read.
            unsafe {
                let (key_len, value_len, height) = {
                    let h = n.as_ptr();
                    (
                        (*h).key_len as usize,
                        (*h).value_len as usize,
                        (*h).height as usize,
                    )
                };
                node = NonNull::new(link(n, 0).load(AtomicOrdering::Relaxed));
                alloc::dealloc(n.as_ptr().cast(), layout(height, key_len + value_len));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::key::{InternalKey, ValueKind};
    use std::sync::Arc;

    fn ikey(k: u32, seq: u64) -> Vec<u8> {
        InternalKey::new(format!("key{k:06}").as_bytes(), seq, ValueKind::Value)
            .encoded()
            .to_vec()
    }

    thread_local! {
        /// Key comparisons this thread's searches made.
        pub(super) static COMPARISONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    fn comparisons() -> u64 {
        COMPARISONS.with(std::cell::Cell::get)
    }

    fn keys(list: &SkipList) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut e = list.first();
        while let Some(x) = e {
            out.push(x.key().to_vec());
            e = x.next();
        }
        out
    }

    #[test]
    fn heights_are_geometric() {
        let mut counts = [0usize; MAX_HEIGHT + 1];
        for _ in 0..100_000 {
            counts[random_height()] += 1;
        }
        // About 3/4 at height 1, 3/16 at 2.
        assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
        assert!((16_000..22_000).contains(&counts[2]), "{counts:?}");
        assert_eq!(counts[0], 0);
    }

    #[test]
    fn searches_in_both_directions() {
        let list = SkipList::new();
        assert!(list.is_empty() && list.first().is_none() && list.last().is_none());
        // Odd keys only, inserted out of order.
        for k in (0..1000u32)
            .map(|i| (i * 7919) % 1000)
            .filter(|k| k % 2 == 1)
        {
            list.insert(&ikey(k, 1), format!("v{k}").as_bytes());
        }
        assert_eq!(list.len(), 500);
        let all = keys(&list);
        let mut sorted = all.clone();
        sorted.sort_by(|a, b| key::compare(a, b));
        assert_eq!(all, sorted);
        assert_eq!(list.first().unwrap().key(), &ikey(1, 1)[..]);
        assert_eq!(list.last().unwrap().key(), &ikey(999, 1)[..]);
        for k in 0..1001u32 {
            let target = ikey(k, 1);
            let lb = list.lower_bound(&target).map(|e| e.key().to_vec());
            let ub = list.upper_bound(&target).map(|e| e.key().to_vec());
            let (lo, hi) = if k % 2 == 1 {
                (k, k)
            } else {
                (k + 1, k.wrapping_sub(1))
            };
            assert_eq!(lb, (lo < 1000).then(|| ikey(lo, 1)), "lower_bound {k}");
            assert_eq!(ub, (k > 0).then(|| ikey(hi, 1)), "upper_bound {k}");
            if let Some(e) = list.lower_bound(&target) {
                assert_eq!(
                    list.prev(&e).map(|p| p.key().to_vec()),
                    (lo > 1).then(|| ikey(lo - 2, 1)),
                    "prev {k}"
                );
                assert_eq!(e.value(), format!("v{lo}").as_bytes());
            }
        }
    }

    #[test]
    fn a_splice_inserts_any_order_where_a_search_would() {
        // Runs up, runs down, jumps back, and keys between earlier ones:
        // each insert's neighbours bracket its key at some level or none.
        let mut order: Vec<u32> = (0..3000).map(|i| i * 2).collect();
        order.reverse();
        order.extend((0..3000).map(|i| 10_000 + i * 2));
        order.extend((0..3000).map(|i| (i * 7919) % 3000 * 2 + 1));
        order.extend((0..3000).map(|i| 10_001 + i * 2).rev());
        let with = SkipList::new();
        let mut splice = with.splice();
        let without = SkipList::new();
        for &k in &order {
            with.insert_with(&ikey(k, 1), &k.to_le_bytes(), &mut splice);
            without.insert(&ikey(k, 1), &k.to_le_bytes());
        }
        let all = keys(&with);
        assert_eq!(all.len(), order.len());
        assert_eq!(all, keys(&without));
        assert!(with.levels_in_order());
        assert!(all
            .windows(2)
            .all(|w| key::compare(&w[0], &w[1]) == Ordering::Less));
        for &k in &order {
            let e = with.lower_bound(&ikey(k, 1)).unwrap();
            assert_eq!(
                (e.key(), e.value()),
                (&ikey(k, 1)[..], &k.to_le_bytes()[..])
            );
        }
    }

    #[test]
    fn a_sorted_run_costs_a_few_comparisons_an_insert() {
        // Two blocks of keys four apart, with room between them.
        let list = SkipList::new();
        for k in (0..10_000u32).chain(250_000..260_000) {
            list.insert(&ikey(k * 4, 1), b"");
        }
        // Comparisons an insert of `keys` takes, from one splice or each
        // from the top.
        let cost = |keys: &mut dyn Iterator<Item = u32>, splice: bool| {
            let before = comparisons();
            let mut s = list.splice();
            let mut n = 0;
            for k in keys {
                if splice {
                    list.insert_with(&ikey(k, 1), b"", &mut s);
                } else {
                    list.insert(&ikey(k, 1), b"");
                }
                n += 1;
            }
            (comparisons() - before) / n
        };
        // Keys next to each other, as a batch of a list's pushes is.
        let adjacent = cost(&mut (500_000..501_000), true);
        // A run through existing keys, as a sorted batch into a key space.
        let through = cost(&mut (5_000..6_000).map(|k| k * 4 + 1), true);
        let searching = cost(&mut (5_000..6_000).map(|k| k * 4 + 2), false);
        assert!(adjacent <= 3, "{adjacent} comparisons an adjacent insert");
        assert!(
            through <= 10,
            "{through} comparisons an insert through a run"
        );
        assert!(
            searching >= 20,
            "{searching} comparisons an insert searching"
        );
        assert_eq!(list.len(), 23_000);
        assert!(list.levels_in_order());
    }

    #[test]
    fn concurrent_inserts_all_land_in_order() {
        let list = Arc::new(SkipList::new());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let list = list.clone();
                std::thread::spawn(move || {
                    // Half of the threads insert from a splice that the
                    // others' links make stale.
                    let mut splice = list.splice();
                    for i in 0..5000u32 {
                        // Threads interleave on the same keys, apart by
                        // sequence number.
                        let (k, v) = (ikey(i, t + 1), t.to_le_bytes());
                        if t % 2 == 0 {
                            list.insert_with(&k, &v, &mut splice);
                        } else {
                            list.insert(&k, &v);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(list.len(), 20_000);
        assert!(list.levels_in_order());
        let all = keys(&list);
        assert_eq!(all.len(), 20_000);
        assert!(all
            .windows(2)
            .all(|w| key::compare(&w[0], &w[1]) == Ordering::Less));
    }

    #[test]
    fn searches_racing_inserts_never_land_before_their_target() {
        // Newer versions of a key sort before older ones: a search for an
        // old version must not return one inserted while it ran.
        let list = Arc::new(SkipList::new());
        for k in 0..64 {
            list.insert(&ikey(k, 1), b"");
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (list, stop) = (list.clone(), stop.clone());
            std::thread::spawn(move || {
                for seq in 2..10_000u64 {
                    for k in 0..64 {
                        list.insert(&ikey(k, seq), b"");
                    }
                }
                stop.store(true, AtomicOrdering::Relaxed);
            })
        };
        let mut searches = 0u64;
        while !stop.load(AtomicOrdering::Relaxed) || searches == 0 {
            for k in 0..64 {
                let target = ikey(k, 1);
                let found = list.lower_bound(&target).unwrap();
                assert_eq!(found.key(), &target[..], "search {searches}");
                let at = list.upper_bound(&target).unwrap();
                assert_eq!(at.key(), &target[..], "search {searches}");
                searches += 1;
            }
        }
        writer.join().unwrap();
    }
}
