//! Checksummed record framing shared by the WAL and the manifest.
//!
//! A record is `fixed32 header_crc | fixed32 len | u8 type | fixed32
//! payload_crc | payload`, both CRCs masked CRC32C; the header has its own
//! checksum so that a damaged length is never mistaken for a torn tail.
//! See `docs/format/record.md`.

use crate::base::checksum;
use crate::base::coding::{decode_fixed32, put_fixed32};
use crate::error::Result;
use crate::vfs::WritableFile;

pub(crate) const HEADER_LEN: usize = 13;

/// Record types; written to disk, never renumber.
const TYPE_FULL: u8 = 1;

/// Largest payload a record may carry. Bounds what a corrupt length field
/// can make a reader allocate.
pub(crate) const MAX_PAYLOAD: usize = 1 << 31;

/// Appends `payload` framed as one record to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    let mut fields = [0u8; 9];
    fields[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    fields[4] = TYPE_FULL;
    fields[5..].copy_from_slice(&checksum::mask(checksum::crc32c(payload)).to_le_bytes());
    put_fixed32(out, checksum::mask(checksum::crc32c(&fields)));
    out.extend_from_slice(&fields);
    out.extend_from_slice(payload);
}

/// Writes records to a file.
pub(crate) struct RecordWriter {
    file: Box<dyn WritableFile>,
    scratch: Vec<u8>,
}

impl RecordWriter {
    pub(crate) fn new(file: Box<dyn WritableFile>) -> Self {
        RecordWriter {
            file,
            scratch: Vec::new(),
        }
    }

    pub(crate) fn add(&mut self, payload: &[u8]) -> Result<()> {
        self.scratch.clear();
        encode(&mut self.scratch, payload);
        self.file.append(&self.scratch)
    }

    /// Appends bytes already framed with [`encode`].
    pub(crate) fn add_raw(&mut self, framed: &[u8]) -> Result<()> {
        self.file.append(framed)
    }

    pub(crate) fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Bytes written so far, framing included.
    pub(crate) fn len(&self) -> u64 {
        self.file.len()
    }
}

/// What the reader found at its position.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next<'a> {
    Record {
        offset: u64,
        payload: &'a [u8],
    },
    /// Clean end of the data.
    End,
    /// A bad record that extends to the end of the data: what a crash in
    /// the middle of an append leaves behind.
    TornTail {
        offset: u64,
        reason: &'static str,
    },
    /// A bad record with more data after it: damage, not a torn append.
    Corrupt {
        offset: u64,
        reason: &'static str,
    },
}

/// Reads records from a file's contents, never panicking on bad bytes.
pub(crate) struct RecordReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> RecordReader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        RecordReader { data, pos: 0 }
    }

    pub(crate) fn next_record(&mut self) -> Next<'a> {
        let offset = self.pos as u64;
        let rest = &self.data[self.pos..];
        if rest.is_empty() {
            return Next::End;
        }
        if rest.len() < HEADER_LEN {
            return Next::TornTail {
                offset,
                reason: "truncated record header",
            };
        }
        if !checksum::matches(
            checksum::crc32c(&rest[4..HEADER_LEN]),
            decode_fixed32(&rest[..4]),
        ) {
            // Zeros past the last record are what a crash leaves in
            // preallocated or partly written space; anything else is damage.
            let reason = "record header checksum mismatch";
            return if rest.iter().all(|&b| b == 0) {
                Next::TornTail { offset, reason }
            } else {
                Next::Corrupt { offset, reason }
            };
        }
        let len = decode_fixed32(&rest[4..8]) as usize;
        let ty = rest[8];
        let Some(payload) = rest.get(HEADER_LEN..HEADER_LEN + len) else {
            return Next::TornTail {
                offset,
                reason: "truncated record payload",
            };
        };
        let at_end = HEADER_LEN + len == rest.len();
        let bad = |reason| {
            if at_end {
                Next::TornTail { offset, reason }
            } else {
                Next::Corrupt { offset, reason }
            }
        };
        if !checksum::matches(checksum::crc32c(payload), decode_fixed32(&rest[9..13])) {
            return bad("record checksum mismatch");
        }
        if ty != TYPE_FULL {
            return Next::Corrupt {
                offset,
                reason: "unknown record type",
            };
        }
        self.pos += HEADER_LEN + len;
        Next::Record { offset, payload }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            encode(&mut out, p);
        }
        out
    }

    fn read_all(data: &[u8]) -> (Vec<Vec<u8>>, Next<'_>) {
        let mut r = RecordReader::new(data);
        let mut got = Vec::new();
        loop {
            match r.next_record() {
                Next::Record { payload, .. } => got.push(payload.to_vec()),
                other => return (got, other),
            }
        }
    }

    #[test]
    fn round_trip() {
        let data = framed(&[b"one", b"", b"three"]);
        let (got, end) = read_all(&data);
        assert_eq!(got, vec![b"one".to_vec(), vec![], b"three".to_vec()]);
        assert_eq!(end, Next::End);
    }

    #[test]
    fn every_truncation_is_a_torn_tail() {
        let data = framed(&[b"first", b"second record"]);
        let first_len = HEADER_LEN + 5;
        for cut in first_len + 1..data.len() {
            let (got, end) = read_all(&data[..cut]);
            assert_eq!(got.len(), 1, "cut at {cut}");
            assert!(matches!(end, Next::TornTail { offset, .. } if offset == first_len as u64));
        }
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let data = framed(&[b"alpha", b"beta", b"gamma"]);
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 0x40;
            let (got, end) = read_all(&bad);
            assert!(got.len() < 3, "flip at {i} went unnoticed");
            assert!(
                matches!(end, Next::TornTail { .. } | Next::Corrupt { .. }),
                "flip at {i}: {end:?}"
            );
        }
    }

    #[test]
    fn damaged_length_is_corruption_not_a_torn_tail() {
        let data = framed(&[b"alpha", b"beta", b"gamma"]);
        for bit in 0..32 {
            let mut bad = data.clone();
            bad[4 + bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(read_all(&bad).1, Next::Corrupt { offset: 0, .. }),
                "length bit {bit}"
            );
        }
    }

    #[test]
    fn zeroed_tail_is_torn() {
        let mut data = framed(&[b"alpha"]);
        data.extend_from_slice(&[0u8; 40]);
        let (got, end) = read_all(&data);
        assert_eq!(got.len(), 1);
        assert!(matches!(end, Next::TornTail { .. }));
    }

    #[test]
    fn bad_record_followed_by_data_is_corrupt() {
        let mut data = framed(&[b"alpha", b"beta"]);
        data[HEADER_LEN] ^= 1;
        assert!(matches!(read_all(&data).1, Next::Corrupt { offset: 0, .. }));
    }
}
