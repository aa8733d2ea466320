//! Keys in `db_bench`'s format, so both tools write byte-identical keys.
//!
//! db_bench's `GenerateKeyFromInt` (with no prefix) writes the low
//! `min(key_size, 8)` bytes of the integer big-endian, so keys sort in
//! numeric order, then pads the rest of the key with ASCII `'0'` bytes.

/// The byte db_bench pads keys with: the character `'0'`, not a zero byte.
const PAD_BYTE: u8 = b'0';

/// Encodes integers as `key_size`-byte db_bench keys.
#[derive(Clone, Copy, Debug)]
pub struct KeyFormat {
    key_size: usize,
}

impl KeyFormat {
    pub fn new(key_size: usize) -> Self {
        Self { key_size }
    }

    /// Writes the key for `index` into `key`, resizing it to `key_size`.
    pub fn encode_into(&self, index: u64, key: &mut Vec<u8>) {
        let integer_bytes = self.key_size.min(8);
        let big_endian = index.to_be_bytes();
        key.clear();
        // Keys shorter than 8 bytes keep the low bytes, as db_bench does.
        key.extend_from_slice(&big_endian[8 - integer_bytes..]);
        key.resize(self.key_size, PAD_BYTE);
    }

    pub fn encode(&self, index: u64) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.key_size);
        self.encode_into(index, &mut key);
        key
    }
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
    fn encode_into_reuses_the_buffer() {
        let format = KeyFormat::new(16);
        let mut key = vec![9; 40];
        format.encode_into(5, &mut key);
        assert_eq!(key, format.encode(5));
    }
}
