//! The live logical data set: which keys exist and how large their values
//! are, as the harness wrote them. Space amplification is the engine's
//! directory size over this, so it must be exact, not estimated from the
//! engine's own view.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::keys::KeyFormat;

/// The size of every key's current value, indexed by key number, plus the
/// running total of key and value bytes of the keys that exist.
pub struct LiveSet {
    format: KeyFormat,
    /// Value length + 1 of each key; 0 means the key does not exist (an
    /// empty value is still a live key).
    sizes: Vec<AtomicU32>,
    bytes: AtomicU64,
    keys: AtomicU64,
}

impl LiveSet {
    /// Room for key numbers `0..capacity`.
    pub fn new(keys: KeyFormat, capacity: u64) -> Self {
        Self {
            format: keys,
            sizes: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            bytes: AtomicU64::new(0),
            keys: AtomicU64::new(0),
        }
    }

    /// Records that key `index` now holds a `value_len`-byte value. Safe to
    /// call from many writers at once: the swap makes each write's delta
    /// exact whatever the interleaving.
    pub fn put(&self, index: u64, value_len: usize) {
        // The driver sizes the set for every key number a benchmark can
        // write; a miss is a driver bug that would silently skew space amp.
        let slot = usize::try_from(index)
            .ok()
            .and_then(|index| self.sizes.get(index))
            .unwrap_or_else(|| {
                panic!(
                    "key {index} beyond the live set's {} keys",
                    self.sizes.len()
                )
            });
        // Values are at most 1 GiB (the engines' limit), so this fits.
        let encoded = u32::try_from(value_len + 1).unwrap_or(u32::MAX);
        let old = slot.swap(encoded, Ordering::Relaxed);
        if old == 0 {
            self.keys.fetch_add(1, Ordering::Relaxed);
            self.bytes.fetch_add(
                self.format.size(index) as u64 + u64::from(encoded - 1),
                Ordering::Relaxed,
            );
        } else if encoded >= old {
            self.bytes
                .fetch_add(u64::from(encoded - old), Ordering::Relaxed);
        } else {
            self.bytes
                .fetch_sub(u64::from(old - encoded), Ordering::Relaxed);
        }
    }

    /// Key plus value bytes of all live keys.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn keys(&self) -> u64 {
        self.keys.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overwrites_replace_sizes_and_new_keys_add_key_bytes() {
        let live = LiveSet::new(KeyFormat::new(24), 10);
        live.put(3, 100);
        live.put(4, 0);
        assert_eq!((live.keys(), live.bytes()), (2, 24 + 100 + 24));
        live.put(3, 40);
        assert_eq!(live.bytes(), 24 + 40 + 24);
        live.put(3, 1000);
        assert_eq!((live.keys(), live.bytes()), (2, 24 + 1000 + 24));
    }

    #[test]
    fn concurrent_writers_keep_the_total_exact() {
        let live = LiveSet::new(KeyFormat::new(8), 64);
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let live = &live;
                scope.spawn(move || {
                    for round in 0..1000u64 {
                        live.put((round * 7 + thread) % 64, ((round + thread) % 50) as usize);
                    }
                });
            }
        });
        let expected: u64 = live
            .sizes
            .iter()
            .map(|size| size.load(Ordering::Relaxed))
            .filter(|&encoded| encoded > 0)
            .map(|encoded| 8 + u64::from(encoded - 1))
            .sum();
        assert_eq!(live.bytes(), expected);
        assert_eq!(live.keys(), 64);
    }

    #[test]
    #[should_panic(expected = "beyond the live set")]
    fn a_key_beyond_capacity_is_a_bug() {
        LiveSet::new(KeyFormat::new(8), 4).put(4, 1);
    }
}
