//! Keys in `db_bench`'s format, so both tools write byte-identical keys.
//!
//! db_bench's `GenerateKeyFromInt` (with no prefix) writes the low
//! `min(key_size, 8)` bytes of the integer big-endian, so keys sort in
//! numeric order, then pads the rest of the key with ASCII `'0'` bytes.
//!
//! `--key_size_distribution=up2x` gives each key number its own size, drawn
//! once from KDSep's UP2X statistics (a normal distribution) by hashing the
//! number, so a key is the same bytes in every phase and on every thread.

use crate::value_sizes::normal;

/// The byte db_bench pads keys with: the character `'0'`, not a zero byte.
const PAD_BYTE: u8 = b'0';

/// UP2X's key sizes (KDSep Exp#2, after Cao et al., FAST '20): normal with
/// mean 10.45 B and standard deviation 1.4 B.
const UP2X_KEY_MEAN_BYTES: f64 = 10.45;
const UP2X_KEY_SD_BYTES: f64 = 1.4;
/// The clamp, about 3σ either side. The floor keeps keys unique: a key
/// holds the low `min(size, 8)` bytes of its number, so numbers below
/// 2^(8 · 6) never collide whatever sizes they draw.
pub const UP2X_KEY_MIN_BYTES: usize = 6;
const UP2X_KEY_MAX_BYTES: usize = 15;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeySizeDistribution {
    /// Every key `--key_size` bytes, as db_bench.
    Fixed,
    /// KDSep's UP2X-like workload: about 10 B, varying per key.
    Up2x,
}

/// Encodes integers as db_bench keys of a fixed or per-key size.
#[derive(Clone, Copy, Debug)]
pub struct KeyFormat {
    sizes: KeySizeDistribution,
    key_size: usize,
}

impl KeyFormat {
    #[cfg(test)]
    pub fn new(key_size: usize) -> Self {
        Self::with_sizes(KeySizeDistribution::Fixed, key_size)
    }

    /// `key_size` is used by `fixed` only.
    pub fn with_sizes(sizes: KeySizeDistribution, key_size: usize) -> Self {
        Self { sizes, key_size }
    }

    /// The size of key `index` in bytes.
    pub fn size(&self, index: u64) -> usize {
        match self.sizes {
            KeySizeDistribution::Fixed => self.key_size,
            KeySizeDistribution::Up2x => {
                let bits = splitmix64(index);
                // Two uniforms in (0, 1] from the hash's halves.
                let u1 = ((bits >> 32) as f64 + 1.0) / 4_294_967_296.0;
                let u2 = ((bits & 0xffff_ffff) as f64 + 1.0) / 4_294_967_296.0;
                let size = normal(u1, u2, UP2X_KEY_MEAN_BYTES, UP2X_KEY_SD_BYTES);
                (size.round() as usize).clamp(UP2X_KEY_MIN_BYTES, UP2X_KEY_MAX_BYTES)
            }
        }
    }

    /// The mean key size, for the header's and the live set's estimates.
    pub fn mean(&self) -> f64 {
        match self.sizes {
            KeySizeDistribution::Fixed => self.key_size as f64,
            KeySizeDistribution::Up2x => UP2X_KEY_MEAN_BYTES,
        }
    }

    /// The largest key, to size buffers.
    pub fn max(&self) -> usize {
        match self.sizes {
            KeySizeDistribution::Fixed => self.key_size,
            KeySizeDistribution::Up2x => UP2X_KEY_MAX_BYTES,
        }
    }

    /// Writes the key for `index` into `key`, resizing it to its size.
    pub fn encode_into(&self, index: u64, key: &mut Vec<u8>) {
        let key_size = self.size(index);
        let integer_bytes = key_size.min(8);
        let big_endian = index.to_be_bytes();
        key.clear();
        // Keys shorter than 8 bytes keep the low bytes, as db_bench does.
        key.extend_from_slice(&big_endian[8 - integer_bytes..]);
        key.resize(key_size, PAD_BYTE);
    }

    pub fn encode(&self, index: u64) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.max());
        self.encode_into(index, &mut key);
        key
    }
}

/// SplitMix64's finalizer: a bijective mix, so neighbouring key numbers
/// draw unrelated sizes.
fn splitmix64(index: u64) -> u64 {
    let mut z = index.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_byte_key_is_big_endian_then_ascii_zeros() {
        let key = KeyFormat::new(16).encode(0x0102_0304_0506_0708);
        assert_eq!(&key[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&key[8..], b"00000000");
    }

    #[test]
    fn short_keys_keep_the_low_bytes() {
        assert_eq!(KeyFormat::new(2).encode(0x0102_0304), vec![3, 4]);
        assert_eq!(KeyFormat::new(8).encode(1), vec![0, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn keys_sort_in_numeric_order() {
        let format = KeyFormat::new(24);
        let keys: Vec<Vec<u8>> = [0u64, 1, 255, 256, 65_536, 1 << 40]
            .iter()
            .map(|&index| format.encode(index))
            .collect();
        assert!(keys.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(keys.iter().all(|key| key.len() == 24));
    }

    #[test]
    fn up2x_sizes_are_stable_per_key_and_normal_around_ten_bytes() {
        let format = KeyFormat::with_sizes(KeySizeDistribution::Up2x, 24);
        let sizes: Vec<usize> = (0..200_000u64).map(|index| format.size(index)).collect();
        assert!(sizes
            .iter()
            .all(|size| (UP2X_KEY_MIN_BYTES..=UP2X_KEY_MAX_BYTES).contains(size)));
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!((mean - UP2X_KEY_MEAN_BYTES).abs() < 0.1, "mean {mean}");
        let variance = sizes
            .iter()
            .map(|&size| (size as f64 - mean).powi(2))
            .sum::<f64>()
            / sizes.len() as f64;
        // Rounding to whole bytes adds 1/12 B² to the variance.
        let expected = UP2X_KEY_SD_BYTES.powi(2) + 1.0 / 12.0;
        assert!((variance - expected).abs() < 0.1, "variance {variance}");
        for index in [0u64, 7, 123_456, 1 << 40] {
            let key = format.encode(index);
            assert_eq!(key.len(), format.size(index));
            assert_eq!(key, format.encode(index), "key {index} changed");
        }
    }

    #[test]
    fn up2x_keys_are_unique() {
        let format = KeyFormat::with_sizes(KeySizeDistribution::Up2x, 24);
        let mut keys: Vec<Vec<u8>> = (0..100_000u64).map(|index| format.encode(index)).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 100_000);
    }

    #[test]
    fn encode_into_reuses_the_buffer() {
        let format = KeyFormat::new(16);
        let mut key = vec![9; 40];
        format.encode_into(5, &mut key);
        assert_eq!(key, format.encode(5));
    }
}
