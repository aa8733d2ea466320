//! The two-level LSN index (LavaLog's L0 and L1). Each log keeps its
//! recent mappings in memory (L0); a flush writes them to the metalog as
//! groups, sorted runs of `(lsn, location)`, and memory keeps one entry
//! per group (L1): its LSN range and where its body lies. A lookup below
//! L0 reads one group body. Groups of a log never overlap: a flush merges
//! L0 entries that fall inside a group's range into a new copy of it.

use crate::base::checksum;
use crate::base::coding::{put_fixed32, put_varint64, DecodeError, Decoder};

/// Where a record lies: its put operation's bytes in a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) generation: u64,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

/// Where a group's body lies in a metalog file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct MetaLoc {
    pub(crate) generation: u64,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

/// An L1 entry: a group of one log's mappings, `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) count: u32,
    pub(crate) at: MetaLoc,
}

/// Encodes a group body: `varint log | varint count | per entry: varint
/// lsn delta, varint generation, varint offset, varint len | fixed32 crc`,
/// the CRC over the bytes before it, so that a body read alone checks.
/// `entries` are sorted by LSN and not empty.
pub(crate) fn encode_group(out: &mut Vec<u8>, log: u32, entries: &[(u64, Loc)]) {
    debug_assert!(!entries.is_empty());
    debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
    let start = out.len();
    put_varint64(out, u64::from(log));
    put_varint64(out, entries.len() as u64);
    let mut prev = 0;
    for &(lsn, loc) in entries {
        put_varint64(out, lsn - prev);
        put_varint64(out, loc.generation);
        put_varint64(out, loc.offset);
        put_varint64(out, u64::from(loc.len));
        prev = lsn;
    }
    let crc = checksum::mask(checksum::crc32c(&out[start..]));
    put_fixed32(out, crc);
}

/// The log a body names and its entries, checked.
pub(crate) fn decode_group(body: &[u8]) -> Result<(u32, Vec<(u64, Loc)>), DecodeError> {
    let split = body
        .len()
        .checked_sub(4)
        .ok_or(DecodeError("group body too short"))?;
    let (content, crc) = body.split_at(split);
    let mut d = Decoder::new(crc);
    if !checksum::matches(checksum::crc32c(content), d.fixed32()?) {
        return Err(DecodeError("group checksum mismatch"));
    }
    let mut d = Decoder::new(content);
    let log = d.varint32()?;
    let count = d.varint_usize()?;
    // Each entry takes 4 bytes at least: a count past that is damage.
    if count > d.remaining() / 4 {
        return Err(DecodeError("group count past its body"));
    }
    let mut entries = Vec::with_capacity(count);
    let mut lsn = 0u64;
    for i in 0..count {
        let delta = d.varint64()?;
        if i > 0 && delta == 0 {
            return Err(DecodeError("group LSNs not increasing"));
        }
        lsn = lsn
            .checked_add(delta)
            .ok_or(DecodeError("group LSN overflows"))?;
        let loc = Loc {
            generation: d.varint64()?,
            offset: d.varint64()?,
            len: d.varint32()?,
        };
        entries.push((lsn, loc));
    }
    if !d.is_empty() {
        return Err(DecodeError("bytes after a group's entries"));
    }
    Ok((log, entries))
}

/// The location of `lsn` in a decoded group.
pub(crate) fn find(entries: &[(u64, Loc)], lsn: u64) -> Option<Loc> {
    entries
        .binary_search_by_key(&lsn, |e| e.0)
        .ok()
        .map(|i| entries[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(n: u64) -> Loc {
        Loc {
            generation: n / 100,
            offset: n * 4131,
            len: 4131,
        }
    }

    #[test]
    fn a_group_round_trips_and_checks() {
        let entries: Vec<(u64, Loc)> = [3u64, 4, 9, 1 << 40].iter().map(|&l| (l, loc(l))).collect();
        let mut body = Vec::new();
        encode_group(&mut body, 7, &entries);
        assert_eq!(decode_group(&body).unwrap(), (7, entries.clone()));
        assert_eq!(find(&entries, 9), Some(loc(9)));
        assert_eq!(find(&entries, 5), None);
        for i in 0..body.len() {
            let mut bad = body.clone();
            bad[i] ^= 0x10;
            assert!(decode_group(&bad).is_err(), "flip at {i}");
        }
        assert!(decode_group(&body[..3]).is_err());
    }
}
