//! One bloom filter over the user keys of a whole table.
//!
//! Layout: `bit array | u8 probes`. Probe positions come from double hashing
//! one 32-bit hash: `h, h + δ, h + 2δ, …` with `δ = h.rotate_right(17)`.

use crate::base::coding::DecodeError;

/// Largest number of probes; more cost time and buy nothing at sane
/// bits-per-key.
const MAX_PROBES: u32 = 30;

/// Small filters have a high false-positive rate; never go below this.
const MIN_BITS: usize = 64;

/// The 32-bit hash of LevelDB (a Murmur variant); its values are stored
/// implicitly in every filter, so it must never change.
pub(crate) fn bloom_hash(data: &[u8]) -> u32 {
    const SEED: u32 = 0xbc9f_1d34;
    const M: u32 = 0xc6a4_a793;
    let mut h = SEED ^ (data.len() as u32).wrapping_mul(M);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        h = h.wrapping_add(w).wrapping_mul(M);
        h ^= h >> 16;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h = h.wrapping_add(u32::from(b) << (8 * i));
        }
        h = h.wrapping_mul(M);
        h ^= h >> 24;
    }
    h
}

/// Probes for `bits_per_key`: `bits_per_key × ln 2`, clamped to 1..=30.
pub(crate) fn num_probes(bits_per_key: u32) -> u32 {
    ((f64::from(bits_per_key) * std::f64::consts::LN_2) as u32).clamp(1, MAX_PROBES)
}

/// Collects key hashes while a table is written.
#[derive(Debug)]
pub(crate) struct BloomBuilder {
    bits_per_key: u32,
    hashes: Vec<u32>,
}

impl BloomBuilder {
    /// REQUIRES: `bits_per_key > 0` (0 means "no filter" and no builder).
    pub(crate) fn new(bits_per_key: u32) -> Self {
        assert!(bits_per_key > 0);
        BloomBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    pub(crate) fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(bloom_hash(user_key));
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        let k = num_probes(self.bits_per_key);
        let bits = (self.hashes.len() * self.bits_per_key as usize).max(MIN_BITS);
        let bytes = bits.div_ceil(8);
        let bits = bytes * 8;
        let mut out = vec![0u8; bytes + 1];
        for h in self.hashes {
            for pos in probes(h, k, bits) {
                out[pos / 8] |= 1 << (pos % 8);
            }
        }
        out[bytes] = k as u8;
        out
    }
}

fn probes(mut h: u32, k: u32, bits: usize) -> impl Iterator<Item = usize> {
    let delta = h.rotate_right(17);
    (0..k).map(move |_| {
        let pos = (h as usize) % bits;
        h = h.wrapping_add(delta);
        pos
    })
}

/// A decoded filter.
#[derive(Debug)]
pub(crate) struct BloomFilter {
    bits: Vec<u8>,
    probes: u32,
}

impl BloomFilter {
    pub(crate) fn new(mut data: Vec<u8>) -> Result<BloomFilter, DecodeError> {
        let k = data.pop().ok_or(DecodeError("empty filter block"))?;
        if data.is_empty() {
            return Err(DecodeError("filter has no bits"));
        }
        if k == 0 || u32::from(k) > MAX_PROBES {
            return Err(DecodeError("filter probe count out of range"));
        }
        Ok(BloomFilter {
            bits: data,
            probes: u32::from(k),
        })
    }

    pub(crate) fn charge(&self) -> usize {
        self.bits.len() + 1
    }

    /// False means the key is certainly absent.
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        let bits = self.bits.len() * 8;
        probes(bloom_hash(user_key), self.probes, bits).all(|pos| {
            self.bits
                .get(pos / 8)
                .is_some_and(|b| b & (1 << (pos % 8)) != 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_follow_bits_per_key() {
        assert_eq!(num_probes(1), 1);
        assert_eq!(num_probes(10), 6);
        assert_eq!(num_probes(64), 30);
    }

    #[test]
    fn hash_is_stable() {
        // Pinned: filters already on disk depend on these values.
        assert_eq!(bloom_hash(b""), 0xbc9f_1d34);
        assert_eq!(bloom_hash(&[0x62]), 0xef13_45c4);
        assert_eq!(bloom_hash(&[0xc3, 0x97]), 0x5b66_3814);
        assert_eq!(bloom_hash(&[0xe2, 0x99, 0xa5]), 0x323c_078f);
        assert_eq!(bloom_hash(&[0xe1, 0x80, 0xb9, 0x32]), 0xed21_633a);
    }

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let n = 10_000;
        let mut b = BloomBuilder::new(10);
        for i in 0..n {
            b.add_key(format!("key{i}").as_bytes());
        }
        let f = BloomFilter::new(b.finish()).unwrap();
        for i in 0..n {
            assert!(f.may_contain(format!("key{i}").as_bytes()));
        }
        let fp = (0..n)
            .filter(|i| f.may_contain(format!("absent{i}").as_bytes()))
            .count();
        let rate = fp as f64 / f64::from(n);
        // Theory for 10 bits/key and 6 probes: ~0.84%.
        assert!(rate < 0.02, "false-positive rate {rate}");
        assert!(rate > 0.001, "false-positive rate {rate} suspiciously low");
    }

    #[test]
    fn bad_filters_are_rejected() {
        assert!(BloomFilter::new(vec![]).is_err());
        assert!(BloomFilter::new(vec![6]).is_err());
        assert!(BloomFilter::new(vec![0xff, 0]).is_err());
        assert!(BloomFilter::new(vec![0xff, 31]).is_err());
        assert!(BloomFilter::new(vec![0xff, 6]).unwrap().may_contain(b"x"));
    }
}
