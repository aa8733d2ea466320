//! Keys and values of the stress test. A value is a function of its key
//! and a value id, and says which ones: whatever a read returns can be
//! checked for being exactly a value that was written to that key, without
//! storing any value bytes in the expected state.

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

/// Values below this length stay inline in the sstables; the options the
/// stress test runs with separate the rest.
pub const MIN_SEPARATED: usize = 512;

pub fn key(k: u32) -> Vec<u8> {
    format!("k{k:08}").into_bytes()
}

/// The key index of `bytes`, if it is a key the test writes.
pub fn parse_key(bytes: &[u8]) -> Option<u32> {
    let digits = bytes.strip_prefix(b"k")?;
    if digits.len() != 8 {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The key of counter `c`: below every key of [`key`], so that scans
/// over those meet counters only past their first key, going backwards.
pub fn counter_key(c: u32) -> Vec<u8> {
    format!("c{c:04}").into_bytes()
}

/// The counter index of `bytes`, if it is a counter's key.
pub fn parse_counter(bytes: &[u8]) -> Option<u32> {
    let digits = bytes.strip_prefix(b"c")?;
    if digits.len() != 4 {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A counter's total as its value holds it (8 bytes, little endian).
pub fn counter_total(c: u32, bytes: &[u8]) -> anyhow::Result<u64> {
    let b: [u8; 8] = bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("counter {c} holds {} bytes, not 8", bytes.len()))?;
    Ok(u64::from_le_bytes(b))
}

/// How value `id` is written, which its id says, so that a read is judged
/// from ids alone: one id in eight is written already expired, one with a
/// day to live, one as a tomb (reads as absent; the compaction filter
/// removes it); the rest as plain puts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Plain,
    /// With an expiry in the past: it reads as a delete would.
    Expired,
    /// With a day to live: it reads as a plain value, while compactions
    /// carry its expiry.
    Lasting,
    /// A plain put of a value the test counts as deleted.
    Tomb,
}

pub fn write_of(id: u32) -> Write {
    match id % 8 {
        5 => Write::Expired,
        6 => Write::Lasting,
        7 => Write::Tomb,
        _ => Write::Plain,
    }
}

/// The id a reader counts value `id` as: 0 (absent) for one written
/// expired or as a tomb.
pub fn effective(id: u32) -> u32 {
    match write_of(id) {
        Write::Expired | Write::Tomb => 0,
        Write::Plain | Write::Lasting => id,
    }
}

/// Whether `bytes`, a value of this test, is a tomb, by the id in its
/// header (the compaction filter's test).
pub fn is_tomb(bytes: &[u8]) -> bool {
    bytes
        .get(9..17)
        .and_then(|id| std::str::from_utf8(id).ok()?.parse::<u32>().ok())
        .is_some_and(|id| write_of(id) == Write::Tomb)
}

/// Value `id` (≥ 1) of key `k` under `seed`: a header naming both, then
/// seed-derived bytes. Half of the values are small (inline), half large
/// (separated into value files).
pub fn value(seed: u64, k: u32, id: u32) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed ^ (u64::from(k) << 32 | u64::from(id)));
    let len = if rng.gen_bool(0.5) {
        rng.gen_range(24..400)
    } else {
        rng.gen_range(MIN_SEPARATED + 100..6000)
    };
    let mut out = format!("{k:08}:{id:08}:").into_bytes();
    let header = out.len();
    out.resize(len.max(header), 0);
    rng.fill_bytes(&mut out[header..]);
    out
}

/// The id of `bytes` as a value of key `k`, or `None` if they are not
/// exactly a value this test writes for `k`.
pub fn value_id(seed: u64, k: u32, bytes: &[u8]) -> Option<u32> {
    let header = bytes.get(..18)?;
    let text = std::str::from_utf8(header).ok()?;
    let (key_part, rest) = text.split_once(':')?;
    let id_part = rest.strip_suffix(':')?;
    if key_part.parse::<u32>().ok()? != k {
        return None;
    }
    let id: u32 = id_part.parse().ok()?;
    (id > 0 && value(seed, k, id) == bytes).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_key_and_id_and_nothing_else_passes() {
        let v = value(7, 42, 3);
        assert_eq!(value_id(7, 42, &v), Some(3));
        assert_eq!(value_id(7, 43, &v), None, "another key");
        assert_eq!(value_id(8, 42, &v), None, "another seed");
        let mut damaged = v.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert_eq!(value_id(7, 42, &damaged), None);
        assert_eq!(value_id(7, 42, &v[..v.len() - 1]), None, "truncated");
        assert_eq!(value_id(7, 42, b"short"), None);
    }

    #[test]
    fn sizes_cover_inline_and_separated_values() {
        let lens: Vec<usize> = (1..200).map(|id| value(1, 5, id).len()).collect();
        assert!(lens.iter().any(|&l| l < MIN_SEPARATED));
        assert!(lens.iter().any(|&l| l > MIN_SEPARATED));
    }

    #[test]
    fn ids_say_how_a_value_is_written() {
        let kinds: Vec<Write> = (1..=8).map(write_of).collect();
        assert!(kinds.contains(&Write::Expired) && kinds.contains(&Write::Lasting));
        assert!(is_tomb(&value(3, 9, 7)));
        assert!(!is_tomb(&value(3, 9, 6)));
        assert_eq!(effective(5), 0);
        assert_eq!(effective(6), 6);
        assert_eq!(effective(7), 0);
    }

    #[test]
    fn keys_round_trip() {
        assert_eq!(parse_key(&key(12345)), Some(12345));
        assert_eq!(parse_key(b"k123"), None);
        assert_eq!(parse_key(b"x00000001"), None);
    }
}
