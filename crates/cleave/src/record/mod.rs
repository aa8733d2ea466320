//! Checksummed record framing shared by the WAL and the manifest.
//!
//! A record is `fixed32 header_crc | fixed32 len | u8 type | fixed32
//! payload_crc | payload`, both CRCs masked CRC32C; the header has its own
//! checksum so that a damaged length is never mistaken for a torn tail.
//! A recyclable record (RocksDB's idea for recycled WALs) also carries the
//! number of the file it was written for, inside the header checksum, so
//! that a reader of a reused file tells its own records from the valid
//! records of the file's previous use. See `docs/format/record.md`.

use crate::base::checksum;
use crate::base::coding::{decode_fixed32, put_fixed32};
use crate::error::Result;
use crate::vfs::WritableFile;

pub(crate) const HEADER_LEN: usize = 13;
/// Header of a recyclable record: the file number sits between the type
/// and the payload checksum.
pub(crate) const RECYCLABLE_HEADER_LEN: usize = 21;

/// Record types; written to disk, never renumber.
const TYPE_FULL: u8 = 1;
pub(crate) const TYPE_RECYCLABLE: u8 = 2;

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

/// Appends `payload` framed as one recyclable record of file `number`.
pub(crate) fn encode_recyclable(out: &mut Vec<u8>, number: u64, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    let mut fields = [0u8; RECYCLABLE_HEADER_LEN - 4];
    fields[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    fields[4] = TYPE_RECYCLABLE;
    fields[5..13].copy_from_slice(&number.to_le_bytes());
    fields[13..].copy_from_slice(&checksum::mask(checksum::crc32c(payload)).to_le_bytes());
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
    /// Reading a recycled file: only recyclable records of this number are
    /// its own.
    recyclable: Option<u64>,
}

/// A recyclable record that checks out, whichever file it was written for.
struct Recyclable<'a> {
    number: u64,
    payload: &'a [u8],
}

/// The recyclable record at the start of `rest`, if its checksums hold.
fn recyclable_at(rest: &[u8]) -> Option<Recyclable<'_>> {
    let len = recyclable_header_at(rest)?;
    let header = &rest[..RECYCLABLE_HEADER_LEN];
    let payload = rest.get(RECYCLABLE_HEADER_LEN..RECYCLABLE_HEADER_LEN.checked_add(len)?)?;
    if !checksum::matches(checksum::crc32c(payload), decode_fixed32(&header[17..21])) {
        return None;
    }
    let mut number = [0u8; 8];
    number.copy_from_slice(&header[9..17]);
    Some(Recyclable {
        number: u64::from_le_bytes(number),
        payload,
    })
}

impl<'a> RecordReader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        RecordReader {
            data,
            pos: 0,
            recyclable: None,
        }
    }

    /// A reader of a file written with recyclable records for file
    /// `number`.
    pub(crate) fn recyclable(data: &'a [u8], number: u64) -> Self {
        RecordReader {
            data,
            pos: 0,
            recyclable: Some(number),
        }
    }

    /// Whether `data` was written with recyclable records: its first
    /// record's type byte says so, whether or not the record is whole (a
    /// crash may have torn it, and in a recycled file the bytes after a
    /// torn header are the previous use's, of the same type).
    pub(crate) fn starts_recyclable(data: &[u8]) -> bool {
        data.get(8) == Some(&TYPE_RECYCLABLE)
    }

    /// Where the next record starts: the end of the last one read.
    pub(crate) fn position(&self) -> u64 {
        self.pos as u64
    }

    pub(crate) fn next_record(&mut self) -> Next<'a> {
        match self.recyclable {
            Some(number) => self.next_recyclable(number),
            None => self.next_full(),
        }
    }

    /// In a recycled file the bytes after the last record written for it
    /// are what its previous use left: valid records of another number, or
    /// parts of them. Reading stops at the first record that is not a
    /// valid one of this file's, and it is a clean end unless a valid
    /// record of this file lies beyond it (then a record in between was
    /// damaged or lost).
    fn next_recyclable(&mut self, number: u64) -> Next<'a> {
        let offset = self.pos as u64;
        let rest = &self.data[self.pos..];
        if rest.is_empty() {
            return Next::End;
        }
        if let Some(r) = recyclable_at(rest) {
            if r.number == number {
                self.pos += RECYCLABLE_HEADER_LEN + r.payload.len();
                return Next::Record {
                    offset,
                    payload: r.payload,
                };
            }
        }
        if own_record_after(rest, number) {
            Next::Corrupt {
                offset,
                reason: "damaged record before a later record of the file",
            }
        } else {
            Next::End
        }
    }

    fn next_full(&mut self) -> Next<'a> {
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

/// Whether a valid recyclable record of file `number` starts anywhere in
/// `rest` past its first byte. Candidates are found by the number's bytes,
/// so a long stale tail costs a byte search, not a checksum per offset;
/// and the payload bytes checksummed are bounded by `rest`'s length, so
/// that headers crafted to each claim a long payload cannot make the
/// search quadratic (past the bound it answers no: a clean end).
fn own_record_after(rest: &[u8], number: u64) -> bool {
    let needle = number.to_le_bytes();
    let mut budget = rest.len();
    let mut from = 1;
    while let Some(found) = rest
        .get(from + 9..)
        .and_then(|tail| tail.windows(needle.len()).position(|w| w == needle))
    {
        let start = from + found;
        let candidate = &rest[start..];
        if let Some(len) = recyclable_header_at(candidate) {
            if len > budget {
                return false;
            }
            budget -= len;
            // The number matched where the search found it.
            if recyclable_at(candidate).is_some() {
                return true;
            }
        }
        from = start + 1;
    }
    false
}

/// The payload length a recyclable record header at the start of `rest`
/// claims, if the header's own checksum holds.
fn recyclable_header_at(rest: &[u8]) -> Option<usize> {
    let header = rest.get(..RECYCLABLE_HEADER_LEN)?;
    (header[8] == TYPE_RECYCLABLE
        && checksum::matches(checksum::crc32c(&header[4..]), decode_fixed32(header)))
    .then(|| decode_fixed32(&header[4..8]) as usize)
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
