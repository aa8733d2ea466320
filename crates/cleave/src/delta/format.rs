//! The delta file: a header, then chunks. A chunk holds one bucket's
//! records from one flush or one garbage collection, sorted by key and,
//! within a key, newest first, in blocks of about [`BLOCK_BYTES`], so
//! that a read of one key reads one block. A block is framed as
//! `fixed32 payload_len | fixed32 masked_crc32c(payload) | payload`. A
//! record is `u8 kind | varint64 seq | length-prefixed key`, and a delta
//! adds its length-prefixed operand. See `docs/format/delta_file.md`.

use std::cmp::Ordering;
use std::path::Path;

use crate::base::checksum;
use crate::base::coding::{decode_fixed32, put_fixed32, put_length_prefixed, put_varint64};
use crate::base::key::MAX_SEQ;
use crate::base::limits::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::base::{Decoder, SeqNo};
use crate::error::{Error, Result};

/// Written to disk: never change.
pub(crate) const MAGIC: &[u8; 8] = b"cleaveKD";
/// The delta file format this build writes and the newest it reads.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// Magic, version and the header's own checksum.
pub(crate) const HEADER_LEN: usize = 16;
/// Length and checksum before each block's payload.
pub(crate) const BLOCK_HEADER_LEN: usize = 8;
/// A block's payload never exceeds this: the largest record (a key and
/// an operand of the largest sizes writes accept) after nearly a block of
/// smaller ones. Its length is a fixed32.
pub(crate) const MAX_BLOCK_PAYLOAD: usize = MAX_VALUE_SIZE + MAX_KEY_SIZE + 2 * BLOCK_BYTES;
/// A block is cut after the record that takes it past this many bytes:
/// a page, as a read of one key costs one read.
pub(crate) const BLOCK_BYTES: usize = 4 << 10;

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

/// Where a block of a chunk lies, and its first key: one entry of the
/// chunk's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockRef {
    pub first_key: Vec<u8>,
    pub offset: u64,
    pub len: u32,
}

/// Appends `records` (in chunk order) as one chunk of framed blocks, and
/// returns its blocks (offsets into `dst`). An empty chunk is one empty
/// block. A record too large for a block (a partial merge's result past
/// the largest operand writes accept) is `InvalidArgument`.
pub(crate) fn encode_chunk(dst: &mut Vec<u8>, records: &[Record]) -> Result<Vec<BlockRef>> {
    debug_assert!(records
        .windows(2)
        .all(|w| order(&w[0], &w[1]) == Ordering::Less));
    let mut blocks = Vec::new();
    let mut rest = records;
    loop {
        let start = dst.len();
        put_fixed32(dst, 0);
        put_fixed32(dst, 0);
        let mut taken = 0;
        for r in rest {
            match r.kind {
                RecordKind::Delta => dst.push(KIND_DELTA),
                RecordKind::Anchor => dst.push(KIND_ANCHOR),
            }
            put_varint64(dst, r.seq);
            put_length_prefixed(dst, &r.key);
            if r.kind == RecordKind::Delta {
                put_length_prefixed(dst, &r.value);
            }
            taken += 1;
            if dst.len() - start >= BLOCK_BYTES {
                break;
            }
        }
        let payload_len = dst.len() - start - BLOCK_HEADER_LEN;
        if payload_len > MAX_BLOCK_PAYLOAD {
            dst.truncate(start);
            return Err(Error::InvalidArgument(format!(
                "a delta of {payload_len} bytes is too large for the delta store"
            )));
        }
        let crc = checksum::mask(checksum::crc32c(&dst[start + BLOCK_HEADER_LEN..]));
        dst[start..start + 4].copy_from_slice(&(payload_len as u32).to_le_bytes());
        dst[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        blocks.push(BlockRef {
            first_key: rest.first().map(|r| r.key.clone()).unwrap_or_default(),
            offset: start as u64,
            len: (dst.len() - start) as u32,
        });
        rest = &rest[taken..];
        if rest.is_empty() {
            return Ok(blocks);
        }
    }
}

/// The framed blocks of a whole chunk read from `path` at `offset`: each
/// block's offset in the file and bytes (frame included).
pub(crate) fn split_chunk<'a>(
    path: &Path,
    offset: u64,
    chunk: &'a [u8],
) -> Result<Vec<(u64, &'a [u8])>> {
    let mut blocks = Vec::new();
    let mut at = 0usize;
    while at < chunk.len() {
        let frame = chunk
            .get(at..at + BLOCK_HEADER_LEN)
            .ok_or_else(|| Error::corruption(path, offset + at as u64, "truncated delta block"))?;
        let len = decode_fixed32(frame) as usize;
        let end = (at + BLOCK_HEADER_LEN)
            .checked_add(len)
            .filter(|&end| end <= chunk.len())
            .ok_or_else(|| {
                Error::corruption(path, offset + at as u64, "delta block past its chunk")
            })?;
        blocks.push((offset + at as u64, &chunk[at..end]));
        at = end;
    }
    if blocks.is_empty() {
        return Err(Error::corruption(
            path,
            offset,
            "delta chunk without blocks",
        ));
    }
    Ok(blocks)
}

/// Decodes one whole framed block read from `path` at `offset`, checking
/// its checksum and its order.
pub(crate) fn decode_block(path: &Path, offset: u64, block: &[u8]) -> Result<Vec<Record>> {
    let bad = |reason: &str| Error::corruption(path, offset, reason.to_string());
    if block.len() < BLOCK_HEADER_LEN {
        return Err(bad("delta block shorter than its header"));
    }
    let len = decode_fixed32(&block[..4]) as usize;
    if len != block.len() - BLOCK_HEADER_LEN {
        return Err(bad("delta block length does not match its reference"));
    }
    let payload = &block[BLOCK_HEADER_LEN..];
    if !checksum::matches(checksum::crc32c(payload), decode_fixed32(&block[4..8])) {
        return Err(bad("delta block checksum mismatch"));
    }
    let mut d = Decoder::new(payload);
    let mut records: Vec<Record> = Vec::new();
    while !d.is_empty() {
        let r = decode_record(&mut d).map_err(|e| bad(e.0))?;
        if records
            .last()
            .is_some_and(|p| order(p, &r) != Ordering::Less)
        {
            return Err(bad("delta block records out of order"));
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
    if seq > MAX_SEQ {
        return Err(DecodeError("delta record sequence number out of range"));
    }
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

    fn decode_chunk(chunk: &[u8]) -> Result<Vec<Record>> {
        let mut records = Vec::new();
        for (offset, block) in split_chunk(Path::new("d.kd"), 16, chunk)? {
            records.extend(decode_block(Path::new("d.kd"), offset, block)?);
        }
        Ok(records)
    }

    #[test]
    fn a_chunk_round_trips_in_blocks_with_their_first_keys() {
        let mut buf = Vec::new();
        assert_eq!(encode_chunk(&mut buf, &sample()).unwrap().len(), 1);
        assert_eq!(decode_chunk(&buf).unwrap(), sample());
        let many: Vec<Record> = (0..500u32)
            .map(|i| Record::delta(format!("k{i:04}").as_bytes(), 1, &[7; 40]))
            .collect();
        let mut buf = Vec::new();
        let blocks = encode_chunk(&mut buf, &many).unwrap();
        assert!(blocks.len() > 4, "{}", blocks.len());
        assert_eq!(decode_chunk(&buf).unwrap(), many);
        for b in &blocks {
            let start = b.offset as usize;
            let records = decode_block(
                Path::new("f"),
                b.offset,
                &buf[start..start + b.len as usize],
            );
            assert_eq!(records.unwrap()[0].key, b.first_key);
        }
        let mut empty = Vec::new();
        assert_eq!(encode_chunk(&mut empty, &[]).unwrap().len(), 1);
        assert_eq!(decode_chunk(&empty).unwrap(), Vec::new());
    }

    #[test]
    fn a_damaged_chunk_is_corruption_naming_the_file() {
        let mut buf = Vec::new();
        encode_chunk(&mut buf, &sample()).unwrap();
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            let err = decode_chunk(&bad).unwrap_err();
            assert!(err.is_corruption(), "byte {i}: {err}");
            assert!(err.to_string().contains("d.kd"), "{err}");
        }
        let err = decode_chunk(&buf[..buf.len() - 1]).unwrap_err();
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
