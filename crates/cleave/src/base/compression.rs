//! Per-unit compression shared by sstable blocks and value-file records:
//! one codec byte names how a unit is stored, and a compressed unit carries
//! its decompressed length so that a reader can bound the allocation first.

use super::coding::{put_varint64, DecodeError, Decoder};
use crate::Compression;

/// Codec byte values. Written to disk by sstables and value files: never
/// renumber.
pub(crate) const COMPRESSION_NONE: u8 = 0;
pub(crate) const COMPRESSION_LZ4: u8 = 1;
pub(crate) const COMPRESSION_ZSTD: u8 = 2;

const ZSTD_LEVEL: i32 = 3;

pub(crate) fn compression_byte(c: Compression) -> u8 {
    match c {
        Compression::None => COMPRESSION_NONE,
        Compression::Lz4 => COMPRESSION_LZ4,
        Compression::Zstd => COMPRESSION_ZSTD,
    }
}

/// Compresses `raw` with `c` if that saves at least 12.5%; returns the bytes
/// to store and their codec byte. Compressed forms are `varint raw_len |
/// compressed bytes`.
pub(crate) fn compress(raw: &[u8], c: Compression) -> (Vec<u8>, u8) {
    let compressed = match c {
        Compression::None => None,
        Compression::Lz4 => Some(lz4_flex::block::compress(raw)),
        // A compressor error only means "store uncompressed".
        Compression::Zstd => zstd::bulk::compress(raw, ZSTD_LEVEL).ok(),
    };
    if let Some(body) = compressed {
        let mut out = Vec::with_capacity(body.len() + 10);
        put_varint64(&mut out, raw.len() as u64);
        out.extend_from_slice(&body);
        if out.len() <= raw.len() - raw.len() / 8 {
            return (out, compression_byte(c));
        }
    }
    (raw.to_vec(), COMPRESSION_NONE)
}

/// Reverses [`compress`]; refuses a declared length over `max_len` before
/// allocating, and a result whose length differs from the declared one.
pub(crate) fn decompress(
    stored: Vec<u8>,
    kind: u8,
    max_len: usize,
) -> Result<Vec<u8>, DecodeError> {
    if kind == COMPRESSION_NONE {
        return Ok(stored);
    }
    let mut d = Decoder::new(&stored);
    let len = d.varint_usize()?;
    if len > max_len {
        return Err(DecodeError("decompressed length too large"));
    }
    let body = d.rest();
    let out = match kind {
        COMPRESSION_LZ4 => lz4_flex::block::decompress(body, len)
            .map_err(|_| DecodeError("lz4 decompression failed"))?,
        COMPRESSION_ZSTD => zstd::bulk::decompress(body, len)
            .map_err(|_| DecodeError("zstd decompression failed"))?,
        _ => return Err(DecodeError("unknown compression type")),
    };
    if out.len() != len {
        return Err(DecodeError(
            "decompressed length differs from the stored length",
        ));
    }
    Ok(out)
}
