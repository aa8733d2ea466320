//! Frames: the unit a physical log is written in.
//!
//! `fixed32 crc | fixed32 payload_len | fixed64 generation | fixed64 epoch
//! | u8 kind | payload`, the CRC (masked CRC32C) over everything after it.
//! A frame is valid only if its checksum matches, its generation is the
//! file's (a recycled file's old frames carry the old one), and its epoch
//! is at least the previous frame's (a frame left past the end by a
//! session that crashed carries an older epoch than the frames written
//! over it since). The first invalid frame is the end of the file: its
//! size says nothing, since preallocated files are full of old or zero
//! bytes. See `docs/format/log_store.md`.

use crate::base::checksum;
use crate::base::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};

pub(crate) const HEADER_LEN: usize = 25;

/// Frame kinds; written to disk, never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The first frame of every use of a file: magic, format version, role.
    FileHeader = 1,
    /// A group commit's operations.
    Batch = 2,
    /// The last frame of a full file, with its reverse index.
    Seal = 3,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::FileHeader),
            2 => Some(Kind::Batch),
            3 => Some(Kind::Seal),
            _ => None,
        }
    }
}

/// Appends a frame of `payload` to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, generation: u64, epoch: u64, kind: Kind, payload: &[u8]) {
    assert!(
        payload.len() <= u32::MAX as usize,
        "frame payloads are bounded below 4 GiB"
    );
    let len = payload.len() as u32;
    let start = out.len();
    put_fixed32(out, 0);
    put_fixed32(out, len);
    put_fixed64(out, generation);
    put_fixed64(out, epoch);
    out.push(kind as u8);
    out.extend_from_slice(payload);
    let crc = checksum::mask(checksum::crc32c(&out[start + 4..]));
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The fields of a frame's header, not yet checked against its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    crc: u32,
    pub(crate) payload_len: usize,
    pub(crate) generation: u64,
    pub(crate) epoch: u64,
    kind: u8,
}

pub(crate) fn parse_header(h: &[u8; HEADER_LEN]) -> Header {
    Header {
        crc: decode_fixed32(&h[0..4]),
        payload_len: decode_fixed32(&h[4..8]) as usize,
        generation: decode_fixed64(&h[8..16]),
        epoch: decode_fixed64(&h[16..24]),
        kind: h[24],
    }
}

/// What a frame read at some offset turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Check {
    Valid(Kind),
    /// Not a frame of this file's current use: the end of its data.
    End,
    /// A valid frame of a kind this version does not know: written by a
    /// newer cleave.
    UnknownKind(u8),
}

/// Checks a frame whose header is `h` (the raw bytes `raw`) and whose
/// payload is `payload`, in a file of `generation` after a frame of
/// `min_epoch`.
pub(crate) fn check(
    raw: &[u8; HEADER_LEN],
    h: &Header,
    payload: &[u8],
    generation: u64,
    min_epoch: u64,
) -> Check {
    if h.generation != generation || h.epoch < min_epoch || payload.len() != h.payload_len {
        return Check::End;
    }
    let crc = checksum::crc32c_extend(checksum::crc32c(&raw[4..]), payload);
    if !checksum::matches(crc, h.crc) {
        return Check::End;
    }
    match Kind::from_byte(h.kind) {
        Some(k) => Check::Valid(k),
        None => Check::UnknownKind(h.kind),
    }
}

/// Decodes the frame at the start of `buf`: its kind, payload and length.
/// `None` where [`check`] finds the end (or `buf` is too short).
pub(crate) fn decode(buf: &[u8], generation: u64, min_epoch: u64) -> Option<(Check, &[u8], usize)> {
    let raw: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
    let h = parse_header(raw);
    let payload = buf.get(HEADER_LEN..HEADER_LEN.checked_add(h.payload_len)?)?;
    match check(raw, &h, payload, generation, min_epoch) {
        Check::End => None,
        c => Some((c, payload, HEADER_LEN + h.payload_len)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(generation: u64, epoch: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode(&mut v, generation, epoch, Kind::Batch, payload);
        v
    }

    #[test]
    fn a_frame_decodes_only_in_its_generation_and_epoch() {
        let f = frame(7, 3, b"payload");
        assert_eq!(f.len(), HEADER_LEN + 7);
        let (c, p, n) = decode(&f, 7, 3).unwrap();
        assert_eq!(
            (c, p, n),
            (Check::Valid(Kind::Batch), &b"payload"[..], f.len())
        );
        assert!(decode(&f, 7, 2).is_some(), "a newer epoch follows an older");
        assert!(decode(&f, 8, 3).is_none(), "a recycled file's old frame");
        assert!(
            decode(&f, 7, 4).is_none(),
            "left behind by an older session"
        );
    }

    #[test]
    fn damage_anywhere_ends_the_data() {
        let f = frame(1, 1, b"0123456789");
        for i in 0..f.len() {
            let mut g = f.clone();
            g[i] ^= 0x40;
            assert!(decode(&g, 1, 1).is_none(), "flip at byte {i}");
        }
        assert!(decode(&f[..f.len() - 1], 1, 1).is_none(), "torn");
        assert!(decode(&[0u8; 64], 0, 0).is_none(), "zeroed blocks");
    }

    #[test]
    fn an_unknown_kind_is_not_the_end() {
        let mut f = frame(1, 1, b"x");
        f[24] = 99;
        let crc = checksum::mask(checksum::crc32c(&f[4..]));
        f[..4].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&f, 1, 1).unwrap().0, Check::UnknownKind(99));
    }
}
