//! A bucket's key filter: a bloom filter that only grows, shared by every
//! Version naming the bucket. A flush adds the keys of a chunk before the
//! Version holding the chunk is installed, so a filter may know keys its
//! reader's Version does not hold yet (a false positive, harmless) but
//! never misses one the Version holds.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::sstable::bloom::bloom_hash;

/// Bits per bucket filter (4 KiB): about 16 per key in a full bucket of
/// 256 KiB holding deltas of 100 bytes, under 0.1% false positives.
pub(crate) const FILTER_BITS: usize = 32 << 10;
const PROBES: u32 = 6;

pub(crate) struct KeyFilter {
    words: Box<[AtomicU64]>,
}

impl KeyFilter {
    pub(crate) fn new() -> KeyFilter {
        KeyFilter {
            words: (0..FILTER_BITS / 64).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn probes(key: &[u8]) -> impl Iterator<Item = usize> {
        let mut h = bloom_hash(key);
        let delta = h.rotate_right(17);
        (0..PROBES).map(move |_| {
            let bit = h as usize % FILTER_BITS;
            h = h.wrapping_add(delta);
            bit
        })
    }

    pub(crate) fn add(&self, key: &[u8]) {
        for bit in Self::probes(key) {
            self.words[bit / 64].fetch_or(1 << (bit % 64), Ordering::Release);
        }
    }

    /// Makes the filter answer "may contain" for every key: for a bucket
    /// whose chunks cannot be read, so that flushes still anchor its keys
    /// and reads go to it (and report the damage).
    pub(crate) fn saturate(&self) {
        for w in self.words.iter() {
            w.store(u64::MAX, Ordering::Release);
        }
    }

    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        Self::probes(key)
            .all(|bit| self.words[bit / 64].load(Ordering::Acquire) & (1 << (bit % 64)) != 0)
    }
}

impl std::fmt::Debug for KeyFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyFilter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_keys_are_found_and_most_others_are_not() {
        let f = KeyFilter::new();
        for i in 0..2000u32 {
            f.add(format!("key{i}").as_bytes());
        }
        assert!((0..2000u32).all(|i| f.may_contain(format!("key{i}").as_bytes())));
        let false_positives = (0..10_000u32)
            .filter(|i| f.may_contain(format!("other{i}").as_bytes()))
            .count();
        assert!(false_positives < 100, "{false_positives} false positives");
    }
}
