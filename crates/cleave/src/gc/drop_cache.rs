//! The DropCache: user keys that flushes and compactions recently found
//! overwritten or deleted, in a bounded LRU charged in bytes.
//!
//! A key that was overwritten lately is likely to be overwritten again
//! (skewed workloads update a small hot set), so a flush writes the values
//! of keys found here into a *hot* logical file and the rest into a *cold*
//! one. Hot files gather garbage fast and, kept apart from cold ones by GC
//! too, are collected having copied little; cold records are not copied
//! again and again alongside them. (Scavenger+'s hot/cold separation.)

use crate::cache::{Priority, ShardedCache};
use crate::value_file::ValueClass;

/// Bookkeeping charged per key on top of its bytes: the LRU node, the
/// hash-table slot and the key's allocation.
const ENTRY_OVERHEAD: usize = 64;

/// Few shards: inserts come from background jobs only, lookups from
/// flushes only. A small cache gets one, so that its bound holds for the
/// whole rather than per shard.
const SHARD_BITS: u32 = 2;
const MIN_SHARDED_CAPACITY: usize = 1 << 20;

pub(crate) struct DropCache {
    /// `None` when hot/cold separation is off.
    keys: Option<ShardedCache<Vec<u8>, ()>>,
}

impl DropCache {
    /// A cache of at most `capacity` bytes; 0 turns hot/cold separation
    /// off (every value is cold).
    pub(crate) fn new(capacity: usize) -> DropCache {
        DropCache {
            keys: (capacity > 0).then(|| {
                let bits = if capacity >= MIN_SHARDED_CAPACITY {
                    SHARD_BITS
                } else {
                    0
                };
                ShardedCache::new(capacity, bits, 0.0)
            }),
        }
    }

    /// Notes that a job found an older version of `user_key` shadowed, or
    /// the key deleted.
    pub(crate) fn record(&self, user_key: &[u8]) {
        if let Some(keys) = &self.keys {
            keys.insert(
                user_key.to_vec(),
                (),
                user_key.len() + ENTRY_OVERHEAD,
                Priority::Low,
            );
        }
    }

    /// The class a new value of `user_key` goes to.
    pub(crate) fn class_of(&self, user_key: &[u8]) -> ValueClass {
        match &self.keys {
            Some(keys) if keys.contains(user_key) => ValueClass::Hot,
            _ => ValueClass::Cold,
        }
    }

    /// Bytes charged now.
    pub(crate) fn usage(&self) -> usize {
        self.keys.as_ref().map_or(0, ShardedCache::usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_keys_are_hot_until_evicted() {
        let c = DropCache::new(10 * (ENTRY_OVERHEAD + 4));
        assert_eq!(c.class_of(b"k000"), ValueClass::Cold);
        for i in 0..10 {
            c.record(format!("k{i:03}").as_bytes());
        }
        assert_eq!(c.class_of(b"k000"), ValueClass::Hot);
        assert!(c.usage() <= 10 * (ENTRY_OVERHEAD + 4));
        // Ten more keys push the first ones out: memory stays bounded.
        for i in 10..20 {
            c.record(format!("k{i:03}").as_bytes());
        }
        assert_eq!(c.class_of(b"k019"), ValueClass::Hot);
        assert!((0..10).any(|i| c.class_of(format!("k{i:03}").as_bytes()) == ValueClass::Cold));
        assert!(c.usage() <= 10 * (ENTRY_OVERHEAD + 4));
    }

    #[test]
    fn zero_capacity_turns_it_off() {
        let c = DropCache::new(0);
        c.record(b"k");
        assert_eq!(c.class_of(b"k"), ValueClass::Cold);
        assert_eq!(c.usage(), 0);
    }
}
