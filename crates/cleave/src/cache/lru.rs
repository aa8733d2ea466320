//! A sharded LRU cache charged in bytes, with a high-priority pool.
//!
//! Each shard keeps two LRU lists. High-priority entries (index and filter
//! blocks) live in the high list until it exceeds its share of the shard's
//! capacity, when its oldest entries are demoted to the low list. Eviction
//! takes the oldest low entry first and touches the high list only when the
//! low list is empty, so a scan of low-priority entries cannot push out the
//! high-priority ones that fit in their pool.
//!
//! Entries fall into classes (the block cache's kinds: data, index,
//! filter, values, ...) that a function of the key gives; the cache
//! counts hits, misses and the bytes held per class.

use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};

use lru::LruCache;
use parking_lot::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Priority {
    High,
    Low,
}

/// Classes a cache tells apart in its counters.
pub(crate) const MAX_CLASSES: usize = 8;

#[derive(Debug)]
struct Entry<V> {
    value: V,
    charge: usize,
    priority: Priority,
    class: usize,
}

#[derive(Debug)]
struct Shard<K: Hash + Eq, V> {
    high: LruCache<K, Entry<V>>,
    low: LruCache<K, Entry<V>>,
    high_usage: usize,
    low_usage: usize,
    capacity: usize,
    high_capacity: usize,
    /// Bytes of the capacity that memory outside the cache takes.
    reserved: usize,
    class_usage: [usize; MAX_CLASSES],
}

impl<K: Hash + Eq, V: Clone> Shard<K, V> {
    fn new(capacity: usize, high_capacity: usize) -> Self {
        Shard {
            high: LruCache::unbounded(),
            low: LruCache::unbounded(),
            high_usage: 0,
            low_usage: 0,
            capacity,
            high_capacity,
            reserved: 0,
            class_usage: [0; MAX_CLASSES],
        }
    }

    /// What entries may take: the capacity less the reservation.
    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.reserved)
    }

    fn reserve(&mut self, bytes: usize) {
        self.reserved = bytes;
        self.evict_to_room();
    }

    fn evict_to_room(&mut self) {
        while self.usage() > self.room() {
            if let Some((_, e)) = self.low.pop_lru() {
                self.low_usage -= e.charge;
                self.class_usage[e.class] -= e.charge;
            } else if let Some((_, e)) = self.high.pop_lru() {
                self.high_usage -= e.charge;
                self.class_usage[e.class] -= e.charge;
            } else {
                break;
            }
        }
    }

    fn usage(&self) -> usize {
        self.high_usage + self.low_usage
    }

    fn contains<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.high.contains(key) || self.low.contains(key)
    }

    fn get(&mut self, key: &K) -> Option<V> {
        if let Some(e) = self.high.get(key) {
            return Some(e.value.clone());
        }
        let e = self.low.peek(key)?;
        if e.priority == Priority::Low {
            return self.low.get(key).map(|e| e.value.clone());
        }
        // A demoted high-priority entry that is used again returns to its
        // pool.
        let (k, e) = self.low.pop_entry(key)?;
        self.low_usage -= e.charge;
        let value = e.value.clone();
        self.push_high(k, e);
        Some(value)
    }

    fn insert(&mut self, key: K, value: V, charge: usize, priority: Priority, class: usize) {
        self.erase(&key);
        // An entry larger than the shard would evict everything and then
        // itself; do not cache it.
        if charge > self.room() {
            return;
        }
        let e = Entry {
            value,
            charge,
            priority,
            class,
        };
        self.class_usage[class] += charge;
        match priority {
            Priority::High => self.push_high(key, e),
            Priority::Low => {
                self.low_usage += charge;
                self.low.push(key, e);
            }
        }
        self.evict_to_room();
    }

    fn push_high(&mut self, key: K, e: Entry<V>) {
        self.high_usage += e.charge;
        self.high.push(key, e);
        while self.high_usage > self.high_capacity {
            let Some((k, e)) = self.high.pop_lru() else {
                break;
            };
            self.high_usage -= e.charge;
            self.low_usage += e.charge;
            self.low.push(k, e);
        }
    }

    fn erase(&mut self, key: &K) -> bool {
        let e = if let Some(e) = self.high.pop(key) {
            self.high_usage -= e.charge;
            e
        } else if let Some(e) = self.low.pop(key) {
            self.low_usage -= e.charge;
            e
        } else {
            return false;
        };
        self.class_usage[e.class] -= e.charge;
        true
    }
}

/// A cache of `V` (cheap to clone, e.g. an `Arc`) charged in caller-defined
/// units (bytes for blocks, 1 per open table for the table cache).
#[derive(Debug)]
pub(crate) struct ShardedCache<K: Hash + Eq, V> {
    shards: Box<[Mutex<Shard<K, V>>]>,
    hasher: RandomState,
    capacity: usize,
    /// The class of an entry, below `MAX_CLASSES`.
    classify: fn(&K) -> usize,
    hits: [AtomicU64; MAX_CLASSES],
    misses: [AtomicU64; MAX_CLASSES],
}

/// What a cache did for one class of entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ClassStats {
    pub hits: u64,
    pub misses: u64,
    /// Charge of the entries held now.
    pub usage: usize,
}

impl<K: Hash + Eq, V: Clone> ShardedCache<K, V> {
    /// `2^shard_bits` shards share `capacity`; `high_pri_ratio` (0..=1) of
    /// each shard is reserved for high-priority entries.
    pub(crate) fn new(capacity: usize, shard_bits: u32, high_pri_ratio: f64) -> Self {
        Self::with_classes(capacity, shard_bits, high_pri_ratio, |_| 0)
    }

    /// As [`Self::new`], counting entries per `classify(key)`.
    pub(crate) fn with_classes(
        capacity: usize,
        shard_bits: u32,
        high_pri_ratio: f64,
        classify: fn(&K) -> usize,
    ) -> Self {
        assert!(shard_bits <= 16, "at most 65536 shards");
        assert!((0.0..=1.0).contains(&high_pri_ratio));
        let n = 1usize << shard_bits;
        let per_shard = capacity.div_ceil(n);
        let high = (per_shard as f64 * high_pri_ratio) as usize;
        ShardedCache {
            shards: (0..n)
                .map(|_| Mutex::new(Shard::new(per_shard, high)))
                .collect(),
            hasher: RandomState::new(),
            capacity,
            classify,
            hits: Default::default(),
            misses: Default::default(),
        }
    }

    /// `K: Borrow<Q>` promises that a key and its borrowed form hash
    /// alike, so both find the same shard.
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> &Mutex<Shard<K, V>> {
        let i = (self.hasher.hash_one(key) as usize) & (self.shards.len() - 1);
        &self.shards[i]
    }

    fn class(&self, key: &K) -> usize {
        let class = (self.classify)(key);
        assert!(class < MAX_CLASSES, "cache class {class} out of range");
        class
    }

    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let v = self.shard(key).lock().get(key);
        let counters = if v.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counters[self.class(key)].fetch_add(1, Ordering::Relaxed);
        v
    }

    /// Whether `key` is cached, without counting a hit or a miss or
    /// touching its recency. Takes a borrowed key, so a lookup by slice
    /// allocates nothing.
    pub(crate) fn contains<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.shard(key).lock().contains(key)
    }

    /// Inserts or replaces `key`. Entries larger than a shard are not kept.
    pub(crate) fn insert(&self, key: K, value: V, charge: usize, priority: Priority) {
        let class = self.class(&key);
        self.shard(&key)
            .lock()
            .insert(key, value, charge, priority, class);
    }

    pub(crate) fn erase(&self, key: &K) -> bool {
        self.shard(key).lock().erase(key)
    }

    /// Total charge of the entries held.
    pub(crate) fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage()).sum()
    }

    /// Charge of the entries in the high-priority pools.
    #[cfg(test)]
    pub(crate) fn high_pri_usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().high_usage).sum()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Charges `bytes` of memory held outside the cache to its capacity,
    /// replacing the previous reservation: entries get what is left, and
    /// those past it are evicted now. One budget then bounds both.
    pub(crate) fn reserve(&self, bytes: usize) {
        let per_shard = bytes.div_ceil(self.shards.len());
        for shard in self.shards.iter() {
            shard.lock().reserve(per_shard);
        }
    }

    pub(crate) fn hits(&self) -> u64 {
        self.hits.iter().map(|h| h.load(Ordering::Relaxed)).sum()
    }

    pub(crate) fn misses(&self) -> u64 {
        self.misses.iter().map(|m| m.load(Ordering::Relaxed)).sum()
    }

    /// Hits, misses and bytes held of entries of `class`.
    pub(crate) fn class_stats(&self, class: usize) -> ClassStats {
        let usage = self
            .shards
            .iter()
            .map(|s| s.lock().class_usage.get(class).copied().unwrap_or(0))
            .sum();
        let count =
            |c: &[AtomicU64; MAX_CLASSES]| c.get(class).map_or(0, |c| c.load(Ordering::Relaxed));
        ClassStats {
            hits: count(&self.hits),
            misses: count(&self.misses),
            usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_takes_room_from_the_entries() {
        let cache: ShardedCache<u32, u32> = ShardedCache::new(100, 0, 0.0);
        for k in 0..10 {
            cache.insert(k, k, 10, Priority::Low);
        }
        assert_eq!(cache.usage(), 100);
        cache.reserve(45);
        assert_eq!(cache.usage(), 50);
        assert!(cache.get(&9).is_some() && cache.get(&0).is_none());
        cache.insert(10, 10, 10, Priority::Low);
        assert_eq!(cache.usage(), 50);
        // Larger than the room left: not cached.
        cache.insert(11, 11, 60, Priority::Low);
        assert!(cache.get(&11).is_none());
        cache.reserve(0);
        cache.insert(11, 11, 60, Priority::Low);
        assert!(cache.get(&11).is_some());
        assert_eq!(cache.capacity(), 100);
    }

    #[test]
    fn evicts_least_recently_used_within_capacity() {
        let c: ShardedCache<u32, u32> = ShardedCache::new(100, 0, 0.0);
        for i in 0..10 {
            c.insert(i, i * 10, 10, Priority::Low);
        }
        assert_eq!(c.usage(), 100);
        assert_eq!(c.get(&0), Some(0)); // 0 becomes most recent
        c.insert(10, 100, 10, Priority::Low);
        assert_eq!(c.usage(), 100);
        assert_eq!(c.get(&1), None, "least recently used must go first");
        assert_eq!(c.get(&0), Some(0));
        assert_eq!(c.get(&10), Some(100));
        assert_eq!((c.hits(), c.misses()), (3, 1));
        // Replacing a key changes its charge.
        c.insert(10, 7, 30, Priority::Low);
        assert_eq!(c.get(&10), Some(7));
        assert!(c.usage() <= 100);
        assert!(c.erase(&10));
        assert!(!c.erase(&10));
        assert_eq!(c.get(&10), None);
        // Too large to ever fit: not cached, and nothing else is evicted.
        let before = c.usage();
        c.insert(99, 1, 101, Priority::Low);
        assert_eq!(c.get(&99), None);
        assert_eq!(c.usage(), before);
    }

    #[test]
    fn low_priority_scan_cannot_evict_the_high_pool() {
        let c: ShardedCache<u32, u32> = ShardedCache::new(1000, 0, 0.5);
        for i in 0..4 {
            c.insert(i, i, 100, Priority::High);
        }
        for i in 100..200 {
            c.insert(i, i, 10, Priority::Low);
        }
        for i in 0..4 {
            assert_eq!(
                c.get(&i),
                Some(i),
                "high-priority entry {i} evicted by a scan"
            );
        }
        assert_eq!(c.high_pri_usage(), 400);
        assert!(c.usage() <= 1000);
        // Beyond its pool, the oldest high-priority entries are demoted and
        // then evicted like low-priority ones.
        for i in 4..8 {
            c.insert(i, i, 100, Priority::High);
        }
        assert!(c.high_pri_usage() <= 500);
        for i in 200..300 {
            c.insert(i, i, 10, Priority::Low);
        }
        assert!(c.usage() <= 1000);
        assert_eq!(c.get(&0), None, "demoted entry should have been evicted");
        for i in 3..8 {
            assert_eq!(c.get(&i), Some(i), "entry {i} of the high pool evicted");
        }
    }

    #[test]
    fn demoted_high_entry_returns_to_its_pool_when_used() {
        let c: ShardedCache<u32, u32> = ShardedCache::new(300, 0, 0.34);
        c.insert(1, 1, 100, Priority::High);
        c.insert(2, 2, 100, Priority::High); // demotes 1
        assert_eq!(c.high_pri_usage(), 100);
        assert_eq!(c.get(&1), Some(1)); // promotes 1, demotes 2
        assert_eq!(c.high_pri_usage(), 100);
        c.insert(3, 3, 100, Priority::Low);
        c.insert(4, 4, 100, Priority::Low); // evicts 2, the oldest low entry
        assert_eq!(c.get(&2), None);
        assert_eq!(c.get(&1), Some(1));
    }

    #[test]
    fn classes_count_hits_misses_and_bytes_through_eviction() {
        let c: ShardedCache<u32, u32> =
            ShardedCache::with_classes(100, 0, 0.5, |k| (k % 2) as usize);
        c.insert(1, 1, 30, Priority::High);
        c.insert(2, 2, 40, Priority::Low);
        c.insert(4, 4, 20, Priority::Low);
        assert_eq!(c.get(&1), Some(1));
        assert_eq!(c.get(&3), None);
        assert_eq!(c.get(&2), Some(2));
        let odd = c.class_stats(1);
        let even = c.class_stats(0);
        assert_eq!((odd.hits, odd.misses, odd.usage), (1, 1, 30));
        assert_eq!((even.hits, even.misses, even.usage), (1, 0, 60));
        // Evicting 4 (the oldest low entry) and replacing 1 keep the bytes
        // per class exact.
        c.insert(6, 6, 30, Priority::Low);
        c.insert(1, 1, 10, Priority::High);
        assert_eq!(c.class_stats(0).usage, 70);
        assert_eq!(c.class_stats(1).usage, 10);
        assert!(c.erase(&6));
        assert_eq!(c.class_stats(0).usage, 40);
        assert_eq!(c.class_stats(1).usage + c.class_stats(0).usage, c.usage());
    }

    #[test]
    fn shards_split_capacity() {
        let c: ShardedCache<u64, u64> = ShardedCache::new(1 << 12, 4, 0.5);
        assert_eq!(c.capacity(), 1 << 12);
        for i in 0..10_000 {
            c.insert(
                i,
                i,
                8,
                if i % 2 == 0 {
                    Priority::High
                } else {
                    Priority::Low
                },
            );
        }
        // Each of the 16 shards holds at most its 256 units.
        assert!(c.usage() <= 1 << 12);
        assert!(c.usage() > 1 << 11, "shards should be mostly full");
    }
}
