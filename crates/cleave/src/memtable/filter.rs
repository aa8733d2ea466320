//! A memtable's bloom filter of the user keys (and, with a prefix
//! extractor, the prefixes) written to it, so that a read of a key it does
//! not hold skips its skiplist search: with 64 MiB memtables that search is
//! a few dozen cache misses, and most reads of a large key space miss the
//! memtables (RocksDB's `memtable_prefix_bloom_size_ratio` with
//! `memtable_whole_key_filtering`).
//!
//! Each key sets `PROBES` bits within one 64-byte cache line, so a lookup
//! costs one miss. Writers set bits with atomic ORs before the entry is
//! inserted, so a reader whose sequence number covers the entry sees them.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::sstable::bloom::bloom_hash;

/// Bits set per key; at the sizes used (tens of bits per key) more would
/// buy little.
const PROBES: u32 = 6;
/// Bits in a cache line.
const LINE_BITS: u64 = 512;
const WORDS_PER_LINE: usize = (LINE_BITS / 64) as usize;

/// One cache line of bits, aligned as one, so that a key's probes touch
/// one line and a prefetch loads all of them.
#[repr(C, align(64))]
struct Line([AtomicU64; WORDS_PER_LINE]);

const _: () = assert!(std::mem::size_of::<Line>() as u64 * 8 == LINE_BITS);

pub(crate) struct MemFilter {
    lines: Box<[Line]>,
}

impl MemFilter {
    /// A filter of about `bytes` (at least one cache line).
    pub(crate) fn new(bytes: usize) -> MemFilter {
        let lines = (bytes / (LINE_BITS as usize / 8)).max(1);
        MemFilter {
            lines: (0..lines)
                .map(|_| Line(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lines.len() * std::mem::size_of::<Line>()
    }

    /// `h`'s line, and the step between its probes.
    fn line(&self, h: u32) -> (&Line, u32) {
        // A second hash from the first for the line, so that the line and
        // the probes within it do not use the same bits.
        let line = (u64::from(h.wrapping_mul(0x9e37_79b9)) * self.lines.len() as u64) >> 32;
        (&self.lines[line as usize], h.rotate_right(17) | 1)
    }

    fn bits(h: u32, delta: u32) -> impl Iterator<Item = (usize, u64)> {
        (0..PROBES).map(move |i| {
            let bit = h.wrapping_add(i.wrapping_mul(delta)) % LINE_BITS as u32;
            ((bit / 64) as usize, 1u64 << (bit % 64))
        })
    }

    pub(crate) fn add(&self, key: &[u8]) {
        let h = bloom_hash(key);
        let (line, delta) = self.line(h);
        let mut masks = [0u64; WORDS_PER_LINE];
        for (word, mask) in Self::bits(h, delta) {
            masks[word] |= mask;
        }
        for (w, mask) in line.0.iter().zip(masks) {
            // A key added before (a list's prefix, pushed to again and
            // again) finds its bits set: a load, not a locked OR. Bits are
            // never cleared, and a reader that sees this entry sees what
            // this load saw (read-read coherence), so it needs no write.
            if w.load(Ordering::Relaxed) & mask != mask {
                w.fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    /// Starts loading the line `add(key)` sets, so that an add a little
    /// later does not stall on it: a large filter's lines are rarely in
    /// the cache, and the skiplist insert in between hides the load.
    pub(crate) fn prefetch(&self, key: &[u8]) {
        let (line, _) = self.line(bloom_hash(key));
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint that never faults, of a line of
        // this filter.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(line).cast::<i8>());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = line;
    }

    /// False only if `key` was never added.
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        let h = bloom_hash(key);
        let (line, delta) = self.line(h);
        Self::bits(h, delta).all(|(word, mask)| line.0[word].load(Ordering::Relaxed) & mask != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let f = MemFilter::new(64 << 10);
        for i in 0..20_000 {
            f.add(format!("key{i}").as_bytes());
        }
        assert!((0..20_000).all(|i| f.may_contain(format!("key{i}").as_bytes())));
        let false_positives = (0..20_000)
            .filter(|i| f.may_contain(format!("other{i}").as_bytes()))
            .count();
        // 26 bits a key: well under 1%.
        assert!(false_positives < 200, "{false_positives}");
    }

    #[test]
    fn a_keys_probes_are_in_one_cache_line() {
        let f = MemFilter::new(1 << 20);
        assert_eq!(f.lines.as_ptr() as usize % 64, 0);
        for i in 0..1000 {
            let h = bloom_hash(format!("key{i}").as_bytes());
            let (_, delta) = f.line(h);
            assert!(MemFilter::bits(h, delta).all(|(word, _)| word < WORDS_PER_LINE));
        }
    }

    #[test]
    fn a_tiny_filter_still_works() {
        let f = MemFilter::new(0);
        assert_eq!(f.bytes(), 64);
        f.add(b"a");
        assert!(f.may_contain(b"a"));
    }
}
