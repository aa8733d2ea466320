//! The delta file: a header, then chunks. A chunk holds one bucket's
//! records from one flush or one garbage collection, sorted by key and,
//! within a key, newest first; it is framed as `fixed32 payload_len |
//! fixed32 masked_crc32c(payload) | payload`. A record is `u8 kind |
//! varint64 seq | length-prefixed key`, and a delta adds its
//! length-prefixed operand. See `docs/format/delta-file.md`.

use std::cmp::Ordering;
use std::path::Path;

use crate::base::checksum;
use crate::base::coding::{decode_fixed32, put_fixed32, put_length_prefixed, put_varint64};
use crate::base::limits::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::base::{Decoder, SeqNo};
use crate::error::{Error, Result};

/// Written to disk: never change.
pub(crate) const MAGIC: &[u8; 8] = b"cleaveKD";
/// The delta file format this build writes and the newest it reads.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// Magic, version and the header's own checksum.
pub(crate) const HEADER_LEN: usize = 16;
/// Length and checksum before each chunk's payload.
pub(crate) const CHUNK_HEADER_LEN: usize = 8;
/// A chunk's payload never exceeds this; bounds what a damaged length
/// makes a reader allocate.
pub(crate) const MAX_CHUNK_PAYLOAD: usize = 1 << 30;

const KIND_DELTA: u8 = 1;
const KIND_ANCHOR: u8 = 2;

/// A merge operand, or an anchor: the mark a put or delete of the key
/// leaves, after which older deltas of the key no longer count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordKind {
    Delta,
    Anchor,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub key: Vec<u8>,
    pub seq: SeqNo,
    pub kind: RecordKind,
    /// The operand; empty for an anchor.
    pub value: Vec<u8>,
}

impl Record {
    pub(crate) fn delta(key: &[u8], seq: SeqNo, value: &[u8]) -> Record {
        Record {
            key: key.to_vec(),
            seq,
            kind: RecordKind::Delta,
            value: value.to_vec(),
        }
    }

    pub(crate) fn anchor(key: &[u8], seq: SeqNo) -> Record {
        Record {
            key: key.to_vec(),
            seq,
            kind: RecordKind::Anchor,
            value: Vec::new(),
        }
    }

    /// Bytes the record takes in a chunk, near enough for sizing buckets.
    pub(crate) fn encoded_len(&self) -> usize {
        1 + 10 + 5 + self.key.len() + 5 + self.value.len()
    }
}

/// Chunk order: by key, then newest first.
pub(crate) fn order(a: &Record, b: &Record) -> Ordering {
    a.key.cmp(&b.key).then(b.seq.cmp(&a.seq))
}

pub(crate) fn encode_header(dst: &mut Vec<u8>) {
    dst.extend_from_slice(MAGIC);
    put_fixed32(dst, FORMAT_VERSION);
    let crc = checksum::mask(checksum::crc32c(&dst[dst.len() - 12..]));
    put_fixed32(dst, crc);
}

/// Checks a delta file's first [`HEADER_LEN`] bytes.
pub(crate) fn check_header(path: &Path, header: &[u8]) -> Result<()> {
    if header.len() < HEADER_LEN || &header[..8] != MAGIC {
        return Err(Error::corruption(path, 0, "not a delta file (bad magic)"));
    }
    if !checksum::matches(
        checksum::crc32c(&header[..12]),
        decode_fixed32(&header[12..16]),
    ) {
        return Err(Error::corruption(
            path,
            0,
            "delta file header checksum mismatch",
        ));
    }
    let version = decode_fixed32(&header[8..12]);
    if version == 0 || version > FORMAT_VERSION {
        return Err(Error::UnsupportedFormatVersion {
            file: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    Ok(())
}

/// Appends `records` (in chunk order) as one framed chunk.
pub(crate) fn encode_chunk(dst: &mut Vec<u8>, records: &[Record]) {
    debug_assert!(records
        .windows(2)
        .all(|w| order(&w[0], &w[1]) == Ordering::Less));
    let start = dst.len();
    put_fixed32(dst, 0);
    put_fixed32(dst, 0);
    for r in records {
        match r.kind {
            RecordKind::Delta => dst.push(KIND_DELTA),
            RecordKind::Anchor => dst.push(KIND_ANCHOR),
        }
        put_varint64(dst, r.seq);
        put_length_prefixed(dst, &r.key);
        if r.kind == RecordKind::Delta {
            put_length_prefixed(dst, &r.value);
        }
    }
    let payload_len = dst.len() - start - CHUNK_HEADER_LEN;
    assert!(payload_len <= MAX_CHUNK_PAYLOAD, "delta chunk too large");
    let crc = checksum::mask(checksum::crc32c(&dst[start + CHUNK_HEADER_LEN..]));
    dst[start..start + 4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    dst[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes one whole framed chunk read from `path` at `offset`, checking
/// its checksum and its order.
pub(crate) fn decode_chunk(path: &Path, offset: u64, chunk: &[u8]) -> Result<Vec<Record>> {
    let bad = |reason: &str| Error::corruption(path, offset, reason.to_string());
    if chunk.len() < CHUNK_HEADER_LEN {
        return Err(bad("delta chunk shorter than its header"));
    }
    let len = decode_fixed32(&chunk[..4]) as usize;
    if len != chunk.len() - CHUNK_HEADER_LEN {
        return Err(bad("delta chunk length does not match its reference"));
    }
    let payload = &chunk[CHUNK_HEADER_LEN..];
    if !checksum::matches(checksum::crc32c(payload), decode_fixed32(&chunk[4..8])) {
        return Err(bad("delta chunk checksum mismatch"));
    }
    let mut d = Decoder::new(payload);
    let mut records: Vec<Record> = Vec::new();
    while !d.is_empty() {
        let r = decode_record(&mut d).map_err(|e| bad(e.0))?;
        if records
            .last()
            .is_some_and(|p| order(p, &r) != Ordering::Less)
        {
            return Err(bad("delta chunk records out of order"));
        }
        records.push(r);
    }
    // Empty is fine: a bucket all of whose deltas were garbage.
    Ok(records)
}

fn decode_record(
    d: &mut Decoder<'_>,
) -> std::result::Result<Record, crate::base::coding::DecodeError> {
    use crate::base::coding::DecodeError;
    let kind = match d.u8()? {
        KIND_DELTA => RecordKind::Delta,
        KIND_ANCHOR => RecordKind::Anchor,
        _ => return Err(DecodeError("unknown delta record kind")),
    };
    let seq = d.varint64()?;
    let key = d.length_prefixed()?;
    if key.len() > MAX_KEY_SIZE {
        return Err(DecodeError("delta record key too long"));
    }
    let value = match kind {
        RecordKind::Delta => {
            let v = d.length_prefixed()?;
            if v.len() > MAX_VALUE_SIZE {
                return Err(DecodeError("delta record operand too long"));
            }
            v.to_vec()
        }
        RecordKind::Anchor => Vec::new(),
    };
    Ok(Record {
        key: key.to_vec(),
        seq,
        kind,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        vec![
            Record::delta(b"a", 9, b"x"),
            Record::anchor(b"a", 7),
            Record::delta(b"a", 3, b"yy"),
            Record::delta(b"b", 1, b""),
        ]
    }

    #[test]
    fn a_chunk_round_trips() {
        let mut buf = Vec::new();
        encode_chunk(&mut buf, &sample());
        assert_eq!(decode_chunk(Path::new("f"), 0, &buf).unwrap(), sample());
    }

    #[test]
    fn a_damaged_chunk_is_corruption_naming_the_file() {
        let mut buf = Vec::new();
        encode_chunk(&mut buf, &sample());
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            let err = decode_chunk(Path::new("d.kd"), 16, &bad).unwrap_err();
            assert!(err.is_corruption(), "byte {i}: {err}");
            assert!(err.to_string().contains("d.kd"), "{err}");
        }
        let err = decode_chunk(Path::new("d.kd"), 16, &buf[..buf.len() - 1]).unwrap_err();
        assert!(err.is_corruption());
    }

    #[test]
    fn the_header_checks_magic_checksum_and_version() {
        let mut h = Vec::new();
        encode_header(&mut h);
        assert_eq!(h.len(), HEADER_LEN);
        check_header(Path::new("f"), &h).unwrap();
        let mut bad = h.clone();
        bad[0] ^= 1;
        assert!(check_header(Path::new("f"), &bad)
            .unwrap_err()
            .is_corruption());
        let mut newer = MAGIC.to_vec();
        put_fixed32(&mut newer, FORMAT_VERSION + 1);
        let crc = checksum::mask(checksum::crc32c(&newer));
        put_fixed32(&mut newer, crc);
        assert!(matches!(
            check_header(Path::new("f"), &newer),
            Err(Error::UnsupportedFormatVersion { .. })
        ));
    }
}
