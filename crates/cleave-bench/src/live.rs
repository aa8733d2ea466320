//! The live logical data set: which keys exist and how large their values
//! are, as the harness wrote them. Space amplification is the engine's
//! directory size over this, so it must be exact, not estimated from the
//! engine's own view.
//!
//! With `--ttl_seconds` a value lives only that long after its write: the
//! set then counts the keys whose last write is younger than the TTL, which
//! is what an engine that honours the TTL must keep.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    ttl: Option<Ttl>,
}

/// When each key's value expires.
struct Ttl {
    ttl_ms: u64,
    start: Instant,
    /// Milliseconds since `start` at which each key's last value expires.
    expires_ms: Vec<AtomicU64>,
}

impl Ttl {
    fn ms_since_start(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.start).as_millis()).unwrap_or(u64::MAX)
    }
}

impl LiveSet {
    /// Room for key numbers `0..capacity`.
    pub fn new(keys: KeyFormat, capacity: u64) -> Self {
        Self {
            format: keys,
            sizes: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
            bytes: AtomicU64::new(0),
            keys: AtomicU64::new(0),
            ttl: None,
        }
    }

    /// A set whose values live for `ttl` after each write.
    pub fn with_ttl(keys: KeyFormat, capacity: u64, ttl: Duration) -> Self {
        Self {
            ttl: Some(Ttl {
                ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
                start: Instant::now(),
                expires_ms: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            }),
            ..Self::new(keys, capacity)
        }
    }

    /// Records that key `index` now holds a `value_len`-byte value. Safe to
    /// call from many writers at once: the swap makes each write's delta
    /// exact whatever the interleaving.
    pub fn put(&self, index: u64, value_len: usize) {
        self.put_at(index, value_len, Instant::now());
    }

    /// [`put`](Self::put) at time `at`, which starts a TTL's clock.
    fn put_at(&self, index: u64, value_len: usize, at: Instant) {
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
        if let Some(ttl) = &self.ttl {
            // Where `sizes` has a slot, `expires_ms` has one.
            if let Some(expires) = ttl.expires_ms.get(index as usize) {
                let expires_ms = ttl.ms_since_start(at).saturating_add(ttl.ttl_ms);
                expires.store(expires_ms, Ordering::Relaxed);
            }
        }
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

    /// Key plus value bytes of all live keys (with a TTL, of those not
    /// expired now).
    pub fn bytes(&self) -> u64 {
        self.counts_at(Instant::now()).1
    }

    pub fn keys(&self) -> u64 {
        self.counts_at(Instant::now()).0
    }

    /// Live keys and their bytes at `now`. Without a TTL, the running
    /// totals; with one, a walk of every key (a few milliseconds for a
    /// million keys, done at most ten times a second by the monitor).
    fn counts_at(&self, now: Instant) -> (u64, u64) {
        let Some(ttl) = &self.ttl else {
            return (
                self.keys.load(Ordering::Relaxed),
                self.bytes.load(Ordering::Relaxed),
            );
        };
        let now_ms = ttl.ms_since_start(now);
        let mut counts = (0, 0);
        for (index, (size, expires)) in self.sizes.iter().zip(&ttl.expires_ms).enumerate() {
            let encoded = size.load(Ordering::Relaxed);
            if encoded > 0 && expires.load(Ordering::Relaxed) > now_ms {
                counts.0 += 1;
                counts.1 += self.format.size(index as u64) as u64 + u64::from(encoded - 1);
            }
        }
        counts
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
    fn with_a_ttl_only_values_younger_than_it_are_live() {
        let live = LiveSet::with_ttl(KeyFormat::new(10), 8, Duration::from_secs(10));
        let start = live.ttl.as_ref().map(|ttl| ttl.start).expect("a ttl");
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        live.put_at(1, 90, at(0));
        live.put_at(2, 190, at(5));
        assert_eq!(live.counts_at(at(4)), (2, 100 + 200));
        // Key 1 expires at 10 s; key 2, rewritten at 12 s, lives to 22 s.
        assert_eq!(live.counts_at(at(10)), (1, 200));
        live.put_at(2, 40, at(12));
        assert_eq!(live.counts_at(at(21)), (1, 50));
        assert_eq!(live.counts_at(at(22)), (0, 0));
        // A key written again after it expired is live again.
        live.put_at(1, 0, at(30));
        assert_eq!(live.counts_at(at(31)), (1, 10));
    }

    #[test]
    #[should_panic(expected = "beyond the live set")]
    fn a_key_beyond_capacity_is_a_bug() {
        LiveSet::new(KeyFormat::new(8), 4).put(4, 1);
    }
}
