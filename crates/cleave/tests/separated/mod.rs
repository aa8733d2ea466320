//! Keys and values of the value-separation tests (value_files, gc).

pub fn k(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Large for even `i` (separated), small for odd `i` (inline); the bytes
/// name the round that wrote them.
pub fn v(i: usize, round: usize) -> Vec<u8> {
    let len = if i.is_multiple_of(2) {
        1000 + i % 300
    } else {
        40
    };
    let mut out = format!("r{round}-i{i}-").into_bytes();
    out.resize(len, b'a' + (i % 26) as u8);
    out
}

/// Bytes of the record a value file stores for `key` and an uncompressed
/// `value` (docs/format/value_file.md): crc32c, two varint lengths, the
/// 8-byte tag, key and value.
pub fn record_len(key: &[u8], value: &[u8]) -> u64 {
    let varint = |n: usize| (usize::BITS - n.max(1).leading_zeros()).div_ceil(7) as u64;
    4 + varint(key.len()) + varint(value.len()) + 8 + (key.len() + value.len()) as u64
}
