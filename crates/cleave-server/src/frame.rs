//! The frames of the cluster's Raft transport (docs/format/server.md):
//!
//! ```text
//! version  u8    FRAME_VERSION
//! kind     u8    what the body is (Kind)
//! len      u32   body bytes, at most MAX_FRAME_BODY_BYTES
//! crc      u32   CRC-32C of the kind byte and the body
//! body     len bytes: JSON, or a snapshot's raw file bytes
//! ```
//!
//! Integers are little-endian. A frame that fails any check ends the
//! connection with a [`FrameError`]; nothing in it is acted on. Decoding
//! needs no server, so the fuzz targets build it alone.

use std::fmt;

/// Written by every node and checked by its peers: a node refuses frames
/// of another version rather than guess at them.
pub const FRAME_VERSION: u8 = 1;
/// Bytes before a frame's body.
pub const HEADER_BYTES: usize = 1 + 1 + 4 + 4;
/// Most bytes of one frame's body: a batch of log entries holding Redis
/// values up to `proto-max-bulk-len` (512 MiB) each, base64-encoded.
pub const MAX_FRAME_BODY_BYTES: u32 = 1 << 30;

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `{"from": id, "rpc": AppendEntriesRequest}`.
    AppendEntries = 1,
    /// `{"from": id, "rpc": VoteRequest}`.
    Vote = 2,
    /// A snapshot's header: `{"from", "vote", "meta", "files"}`, then its
    /// files' bytes in [`Kind::SnapshotData`] frames, then
    /// [`Kind::SnapshotEnd`].
    SnapshotBegin = 3,
    /// The next bytes of the snapshot's files, in the header's order.
    SnapshotData = 4,
    /// The snapshot is complete; the receiver installs it and replies.
    SnapshotEnd = 5,
    /// The reply to a request: its result as JSON (`{"Ok": …}` or
    /// `{"Err": …}`).
    Reply = 0x81,
    /// The receiver would not serve the request (a malformed one, or one
    /// from a peer the test hook cuts off): a message, UTF-8.
    Refused = 0x82,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        [
            Kind::AppendEntries,
            Kind::Vote,
            Kind::SnapshotBegin,
            Kind::SnapshotData,
            Kind::SnapshotEnd,
            Kind::Reply,
            Kind::Refused,
        ]
        .into_iter()
        .find(|k| *k as u8 == b)
    }
}

/// A frame that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad Raft transport frame: {}", self.0)
    }
}

impl std::error::Error for FrameError {}

/// A frame's header, decoded and checked but for the body's checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub len: u32,
    crc: u32,
}

/// Decodes a frame's header.
pub fn decode_header(b: &[u8; HEADER_BYTES]) -> Result<Header, FrameError> {
    if b[0] != FRAME_VERSION {
        return Err(FrameError(format!(
            "version {}, this build speaks {FRAME_VERSION}",
            b[0]
        )));
    }
    let kind = Kind::from_u8(b[1]).ok_or_else(|| FrameError(format!("kind {}", b[1])))?;
    let len = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    if len > MAX_FRAME_BODY_BYTES {
        return Err(FrameError(format!(
            "a body of {len} bytes, over the limit of {MAX_FRAME_BODY_BYTES}"
        )));
    }
    let crc = u32::from_le_bytes([b[6], b[7], b[8], b[9]]);
    Ok(Header { kind, len, crc })
}

/// Checks `body` (of `header.len` bytes) against the header's checksum.
pub fn check_body(header: &Header, body: &[u8]) -> Result<(), FrameError> {
    if body.len() != header.len as usize {
        return Err(FrameError(format!(
            "{} body bytes where the header says {}",
            body.len(),
            header.len
        )));
    }
    if checksum(header.kind, body) != header.crc {
        return Err(FrameError(format!(
            "checksum mismatch in a {:?} frame of {} bytes",
            header.kind, header.len
        )));
    }
    Ok(())
}

/// Appends a frame holding `body` to `out`.
pub fn encode(kind: Kind, body: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_FRAME_BODY_BYTES)
        .ok_or_else(|| FrameError(format!("a body of {} bytes is too large", body.len())))?;
    out.reserve(HEADER_BYTES + body.len());
    out.push(FRAME_VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&checksum(kind, body).to_le_bytes());
    out.extend_from_slice(body);
    Ok(())
}

fn checksum(kind: Kind, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&[kind as u8]), body)
}

/// Decodes every frame in `bytes` one after another, as a connection
/// would read them; what the fuzz target runs. Returns the frames read
/// before the first error or the end.
pub fn decode_all(mut bytes: &[u8]) -> Vec<Result<(Kind, &[u8]), FrameError>> {
    let mut out = Vec::new();
    while let Some((head, rest)) = bytes.split_first_chunk::<HEADER_BYTES>() {
        let header = match decode_header(head) {
            Ok(h) => h,
            Err(e) => {
                out.push(Err(e));
                break;
            }
        };
        let Some((body, rest)) = rest.split_at_checked(header.len as usize) else {
            out.push(Err(FrameError("truncated body".into())));
            break;
        };
        match check_body(&header, body) {
            Ok(()) => out.push(Ok((header.kind, body))),
            Err(e) => {
                out.push(Err(e));
                break;
            }
        }
        bytes = rest;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: Kind, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(kind, body, &mut out).unwrap();
        out
    }

    #[test]
    fn frames_round_trip() {
        let mut bytes = frame(Kind::Vote, b"{}");
        bytes.extend(frame(Kind::SnapshotData, &[0, 1, 2]));
        bytes.extend(frame(Kind::SnapshotEnd, b""));
        let got: Vec<_> = decode_all(&bytes).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            vec![
                (Kind::Vote, &b"{}"[..]),
                (Kind::SnapshotData, &[0, 1, 2][..]),
                (Kind::SnapshotEnd, &b""[..])
            ]
        );
    }

    #[test]
    fn every_flipped_bit_and_truncation_is_refused() {
        let bytes = frame(Kind::AppendEntries, b"{\"from\":1}");
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            let got = decode_all(&b);
            assert!(
                got.iter().any(Result::is_err) || got.is_empty(),
                "bit {i} flipped went unnoticed"
            );
        }
        for len in 1..bytes.len() {
            let got = decode_all(&bytes[..len]);
            assert!(got.iter().all(Result::is_err), "truncated to {len}");
        }
    }

    #[test]
    fn oversized_and_unknown_frames_are_refused() {
        let mut h = [0u8; HEADER_BYTES];
        h[0] = FRAME_VERSION;
        h[1] = Kind::Reply as u8;
        h[2..6].copy_from_slice(&(MAX_FRAME_BODY_BYTES + 1).to_le_bytes());
        assert!(decode_header(&h).unwrap_err().0.contains("over the limit"));
        h[1] = 0x7f;
        assert!(decode_header(&h).is_err());
        h[1] = Kind::Reply as u8;
        h[0] = 2;
        assert!(decode_header(&h).unwrap_err().0.contains("version"));
    }
}
