//! Block handles, the block trailer, per-block compression and the footer.
//! The byte layout is specified in `docs/format/sstable.md`.

use crate::base::checksum::{crc32c, crc32c_extend, mask, matches};
use crate::base::coding::{put_fixed32, put_fixed64, put_varint64, DecodeError, Decoder};
use crate::base::compression;
use crate::Compression;

/// Identifies the footer of a cleave sstable ("clvSST01" read as LE bytes).
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"clvSST01");

/// The newest format version this build writes and reads: version 2 adds
/// the expiring kinds (4 and 5), and is written only by a table holding
/// one, so that a table without stays readable by earlier builds.
pub(crate) const FORMAT_VERSION: u32 = 2;

/// The version of a table without expiring entries.
pub(crate) const PLAIN_FORMAT_VERSION: u32 = 1;

/// `u8 compression | fixed32 masked crc32c`, after every block.
pub(crate) const BLOCK_TRAILER_LEN: usize = 5;

/// Two fixed-width handles, version, checksum, magic.
pub(crate) const FOOTER_LEN: usize = 16 + 16 + 4 + 4 + 8;

/// Largest decompressed block a reader accepts: a block is cut once it
/// reaches `block_size` (at most 64 MiB), so it holds at most that plus one
/// entry (a 64 KiB key and a 1 GiB value) plus its restart array. Checked
/// before allocating, so a damaged length cannot exhaust memory.
pub(crate) const MAX_BLOCK_CONTENTS: usize = (1 << 30) + (128 << 20);

pub(crate) use crate::base::compression::compression_byte;

/// Where a block lives: `size` excludes the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// The compact form used as index and metaindex values.
    pub(crate) fn encode_varint(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    pub(crate) fn decode_varint(src: &[u8]) -> Result<BlockHandle, DecodeError> {
        let mut d = Decoder::new(src);
        let h = BlockHandle {
            offset: d.varint64()?,
            size: d.varint64()?,
        };
        if !d.is_empty() {
            return Err(DecodeError("trailing bytes after block handle"));
        }
        Ok(h)
    }

    /// End of the block including its trailer, or `None` on overflow.
    pub(crate) fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// Compresses a block (see [`compression::compress`]).
pub(crate) fn compress_block(raw: &[u8], c: Compression) -> (Vec<u8>, u8) {
    compression::compress(raw, c)
}

/// Reverses [`compress_block`], bounding the block by `MAX_BLOCK_CONTENTS`.
pub(crate) fn decompress_block(stored: Vec<u8>, kind: u8) -> Result<Vec<u8>, DecodeError> {
    compression::decompress(stored, kind, MAX_BLOCK_CONTENTS)
}

/// The trailer of a block stored as `stored` with compression `kind`.
pub(crate) fn block_trailer(stored: &[u8], kind: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = mask(crc32c_extend(crc32c(stored), &[kind]));
    let mut t = [0u8; BLOCK_TRAILER_LEN];
    t[0] = kind;
    t[1..].copy_from_slice(&crc.to_le_bytes());
    t
}

/// Splits `buf` (block bytes followed by the trailer), checks the checksum
/// and returns the stored bytes and compression byte.
pub(crate) fn check_block(mut buf: Vec<u8>) -> Result<(Vec<u8>, u8), DecodeError> {
    let body_len = buf
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or(DecodeError("block shorter than its trailer"))?;
    let mut d = Decoder::new(&buf[body_len..]);
    let kind = d.u8()?;
    let stored_crc = d.fixed32()?;
    buf.truncate(body_len);
    if !matches(crc32c_extend(crc32c(&buf), &[kind]), stored_crc) {
        return Err(DecodeError("block checksum mismatch"));
    }
    Ok((buf, kind))
}

/// The fixed-size tail of every sstable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub metaindex: BlockHandle,
    pub index: BlockHandle,
    pub version: u32,
}

/// Why a footer was refused; version errors are reported separately so the
/// caller can return `UnsupportedFormatVersion`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FooterError {
    Corrupt(&'static str),
    Version(u32),
}

impl Footer {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        for h in [self.metaindex, self.index] {
            put_fixed64(&mut out, h.offset);
            put_fixed64(&mut out, h.size);
        }
        put_fixed32(&mut out, self.version);
        let crc = mask(crc32c(&out));
        put_fixed32(&mut out, crc);
        put_fixed64(&mut out, MAGIC);
        debug_assert_eq!(out.len(), FOOTER_LEN);
        out
    }

    /// Magic first (is this an sstable at all?), then the version (a later
    /// version may lay out the rest differently), then the checksum.
    pub(crate) fn decode(buf: &[u8]) -> Result<Footer, FooterError> {
        let corrupt = |e: DecodeError| FooterError::Corrupt(e.0);
        if buf.len() != FOOTER_LEN {
            return Err(FooterError::Corrupt("footer has the wrong length"));
        }
        let mut tail = Decoder::new(&buf[FOOTER_LEN - 16..]);
        let version = tail.fixed32().map_err(corrupt)?;
        let stored_crc = tail.fixed32().map_err(corrupt)?;
        let magic = tail.fixed64().map_err(corrupt)?;
        if magic != MAGIC {
            return Err(FooterError::Corrupt(
                "bad magic number: not a cleave sstable",
            ));
        }
        if !(PLAIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(FooterError::Version(version));
        }
        if !matches(crc32c(&buf[..FOOTER_LEN - 12]), stored_crc) {
            return Err(FooterError::Corrupt("footer checksum mismatch"));
        }
        let mut d = Decoder::new(buf);
        let mut handle = || -> Result<BlockHandle, DecodeError> {
            Ok(BlockHandle {
                offset: d.fixed64()?,
                size: d.fixed64()?,
            })
        };
        let metaindex = handle().map_err(corrupt)?;
        let index = handle().map_err(corrupt)?;
        Ok(Footer {
            metaindex,
            index,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::compression::COMPRESSION_NONE;

    #[test]
    fn footer_round_trips_and_rejects_every_flipped_byte() {
        let f = Footer {
            metaindex: BlockHandle {
                offset: 1234,
                size: 56,
            },
            index: BlockHandle {
                offset: 1295,
                size: 789,
            },
            version: FORMAT_VERSION,
        };
        let enc = f.encode();
        assert_eq!(Footer::decode(&enc), Ok(f));
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x01;
            assert!(Footer::decode(&bad).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn footer_reports_unknown_version() {
        let mut enc = Footer {
            metaindex: BlockHandle::default(),
            index: BlockHandle::default(),
            version: PLAIN_FORMAT_VERSION,
        }
        .encode();
        for v in [0, FORMAT_VERSION + 1] {
            enc[32..36].copy_from_slice(&v.to_le_bytes());
            assert_eq!(Footer::decode(&enc), Err(FooterError::Version(v)));
        }
    }

    #[test]
    fn compression_round_trips_and_only_when_worth_it() {
        let compressible: Vec<u8> = (0..4096u32).map(|i| (i % 7) as u8).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                // xorshift64: incompressible enough for any compressor.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 56) as u8
            })
            .collect();
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let (stored, kind) = compress_block(&compressible, c);
            assert_eq!(kind, compression_byte(c));
            if c != Compression::None {
                assert!(stored.len() < compressible.len() / 2);
            }
            assert_eq!(decompress_block(stored, kind).unwrap(), compressible);
            let (stored, kind) = compress_block(&random, c);
            assert_eq!(kind, COMPRESSION_NONE, "{c:?} kept an incompressible block");
            assert_eq!(stored, random);
        }
        assert!(decompress_block(vec![1, 2, 3], 9).is_err());
        // A declared length that disagrees with the data is an error.
        let (mut stored, kind) = compress_block(&compressible, Compression::Lz4);
        stored[0] ^= 0x01;
        assert!(decompress_block(stored, kind).is_err());
    }

    #[test]
    fn trailer_detects_flips() {
        let body = b"some block bytes".to_vec();
        let mut buf = body.clone();
        buf.extend_from_slice(&block_trailer(&body, COMPRESSION_NONE));
        assert_eq!(check_block(buf.clone()).unwrap(), (body, COMPRESSION_NONE));
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x80;
            assert!(check_block(bad).is_err(), "flip at {i} accepted");
        }
        assert!(check_block(vec![1, 2]).is_err());
    }

    #[test]
    fn handle_varint_round_trip() {
        let h = BlockHandle {
            offset: 1 << 40,
            size: 4096,
        };
        let mut buf = Vec::new();
        h.encode_varint(&mut buf);
        assert_eq!(BlockHandle::decode_varint(&buf), Ok(h));
        buf.push(0);
        assert!(BlockHandle::decode_varint(&buf).is_err());
        assert!(BlockHandle::decode_varint(&[0x80]).is_err());
    }
}
