//! A VersionEdit: one change to the set of live files, logged as one
//! manifest record. The encoding is a sequence of `varint tag ++ field`;
//! see `docs/format/manifest.md`. Tags are written to disk: never renumber.

use crate::base::coding::{put_length_prefixed, put_varint32, put_varint64, DecodeError};
use crate::base::key;
use crate::base::limits::NUM_LEVELS;
use crate::base::{Decoder, FileNumber, InternalKey, SeqNo};

use super::FileMeta;

/// The database format version this build writes and the newest it reads.
pub(crate) const FORMAT_VERSION: u32 = 1;

const TAG_FORMAT_VERSION: u64 = 1;
const TAG_LOG_NUMBER: u64 = 2;
const TAG_NEXT_FILE_NUMBER: u64 = 3;
const TAG_LAST_SEQ: u64 = 4;
const TAG_DELETED_FILE: u64 = 5;
const TAG_NEW_FILE: u64 = 6;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct VersionEdit {
    /// Present in the first edit of every manifest.
    pub format_version: Option<u32>,
    /// WALs numbered below this are fully flushed and obsolete.
    pub log_number: Option<FileNumber>,
    pub next_file_number: Option<FileNumber>,
    pub last_seq: Option<SeqNo>,
    pub deleted_files: Vec<(usize, FileNumber)>,
    pub new_files: Vec<(usize, FileMeta)>,
}

impl VersionEdit {
    pub(crate) fn delete_file(&mut self, level: usize, number: FileNumber) {
        self.deleted_files.push((level, number));
    }

    pub(crate) fn add_file(&mut self, level: usize, meta: FileMeta) {
        self.new_files.push((level, meta));
    }

    pub(crate) fn encode(&self, dst: &mut Vec<u8>) {
        if let Some(v) = self.format_version {
            put_varint64(dst, TAG_FORMAT_VERSION);
            put_varint32(dst, v);
        }
        for (tag, value) in [
            (TAG_LOG_NUMBER, self.log_number.map(|n| n.0)),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number.map(|n| n.0)),
            (TAG_LAST_SEQ, self.last_seq),
        ] {
            if let Some(v) = value {
                put_varint64(dst, tag);
                put_varint64(dst, v);
            }
        }
        for &(level, number) in &self.deleted_files {
            put_varint64(dst, TAG_DELETED_FILE);
            put_varint64(dst, level as u64);
            put_varint64(dst, number.0);
        }
        for (level, m) in &self.new_files {
            put_varint64(dst, TAG_NEW_FILE);
            put_varint64(dst, *level as u64);
            put_varint64(dst, m.number.0);
            put_varint64(dst, m.size);
            put_length_prefixed(dst, m.smallest.encoded());
            put_length_prefixed(dst, m.largest.encoded());
            put_varint64(dst, m.smallest_seq);
            put_varint64(dst, m.largest_seq);
            put_varint64(dst, m.num_entries);
            put_varint64(dst, m.num_deletions);
        }
    }

    pub(crate) fn decode(src: &[u8]) -> Result<VersionEdit, DecodeError> {
        let mut d = Decoder::new(src);
        let mut e = VersionEdit::default();
        while !d.is_empty() {
            match d.varint64()? {
                TAG_FORMAT_VERSION => set_once(&mut e.format_version, d.varint32()?)?,
                TAG_LOG_NUMBER => set_once(&mut e.log_number, FileNumber(d.varint64()?))?,
                TAG_NEXT_FILE_NUMBER => {
                    set_once(&mut e.next_file_number, FileNumber(d.varint64()?))?
                }
                TAG_LAST_SEQ => set_once(&mut e.last_seq, d.varint64()?)?,
                TAG_DELETED_FILE => {
                    let level = decode_level(&mut d)?;
                    e.deleted_files.push((level, FileNumber(d.varint64()?)));
                }
                TAG_NEW_FILE => {
                    let level = decode_level(&mut d)?;
                    e.new_files.push((level, decode_file_meta(&mut d)?));
                }
                // No forward compatibility yet: a field we do not know could
                // change the meaning of the ones we do.
                _ => return Err(DecodeError("unknown version edit tag")),
            }
        }
        Ok(e)
    }
}

fn set_once<T>(slot: &mut Option<T>, v: T) -> Result<(), DecodeError> {
    if slot.replace(v).is_some() {
        return Err(DecodeError("duplicate field in version edit"));
    }
    Ok(())
}

fn decode_level(d: &mut Decoder<'_>) -> Result<usize, DecodeError> {
    let level = d.varint_usize()?;
    if level >= NUM_LEVELS {
        return Err(DecodeError("level out of range"));
    }
    Ok(level)
}

fn decode_internal_key(d: &mut Decoder<'_>) -> Result<InternalKey, DecodeError> {
    let bytes = d.length_prefixed()?;
    if key::parse(bytes).is_none() {
        return Err(DecodeError("malformed internal key"));
    }
    Ok(InternalKey::from_encoded(bytes.to_vec()))
}

fn decode_file_meta(d: &mut Decoder<'_>) -> Result<FileMeta, DecodeError> {
    let number = FileNumber(d.varint64()?);
    let size = d.varint64()?;
    let smallest = decode_internal_key(d)?;
    let largest = decode_internal_key(d)?;
    let m = FileMeta {
        number,
        size,
        smallest,
        largest,
        smallest_seq: d.varint64()?,
        largest_seq: d.varint64()?,
        num_entries: d.varint64()?,
        num_deletions: d.varint64()?,
        ..FileMeta::default()
    };
    if key::compare(m.smallest.encoded(), m.largest.encoded()).is_gt() {
        return Err(DecodeError("file's smallest key is after its largest"));
    }
    if m.smallest_seq > m.largest_seq {
        return Err(DecodeError("file's smallest seq is after its largest"));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ValueKind;

    pub(crate) fn sample_meta(n: u64, lo: &[u8], hi: &[u8], seq: SeqNo) -> FileMeta {
        FileMeta {
            number: FileNumber(n),
            size: 1000 + n,
            smallest: InternalKey::new(lo, seq, ValueKind::Value),
            largest: InternalKey::new(hi, seq + 1, ValueKind::Deletion),
            smallest_seq: seq,
            largest_seq: seq + 1,
            num_entries: 5,
            num_deletions: 1,
            ..FileMeta::default()
        }
    }

    fn full_edit() -> VersionEdit {
        let mut e = VersionEdit {
            format_version: Some(FORMAT_VERSION),
            log_number: Some(FileNumber(3)),
            next_file_number: Some(FileNumber(99)),
            last_seq: Some(12345),
            ..VersionEdit::default()
        };
        e.delete_file(2, FileNumber(7));
        e.delete_file(0, FileNumber(8));
        e.add_file(1, sample_meta(10, b"a", b"m", 5));
        e.add_file(6, sample_meta(11, b"n", b"z", 7));
        e
    }

    #[test]
    fn round_trip() {
        for e in [VersionEdit::default(), full_edit()] {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            assert_eq!(VersionEdit::decode(&buf), Ok(e));
        }
    }

    #[test]
    fn every_truncation_fails_or_decodes_a_prefix_of_fields() {
        let e = full_edit();
        let mut buf = Vec::new();
        e.encode(&mut buf);
        for cut in 0..buf.len() {
            // A cut between fields decodes an edit with fewer fields: the
            // record checksum, not this decoder, guards against that.
            if let Ok(got) = VersionEdit::decode(&buf[..cut]) {
                assert_ne!(got, e, "cut at {cut}");
            }
        }
    }

    #[test]
    fn unknown_tag_duplicate_field_and_bad_level_are_errors() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, 77);
        assert_eq!(
            VersionEdit::decode(&buf),
            Err(DecodeError("unknown version edit tag"))
        );
        let mut buf = Vec::new();
        for _ in 0..2 {
            put_varint64(&mut buf, TAG_LAST_SEQ);
            put_varint64(&mut buf, 1);
        }
        assert!(VersionEdit::decode(&buf).is_err());
        let mut buf = Vec::new();
        put_varint64(&mut buf, TAG_DELETED_FILE);
        put_varint64(&mut buf, NUM_LEVELS as u64);
        put_varint64(&mut buf, 1);
        assert_eq!(
            VersionEdit::decode(&buf),
            Err(DecodeError("level out of range"))
        );
    }

    #[test]
    fn inverted_key_range_is_rejected() {
        let mut e = VersionEdit::default();
        e.add_file(1, sample_meta(1, b"z", b"a", 1));
        let mut buf = Vec::new();
        e.encode(&mut buf);
        assert!(VersionEdit::decode(&buf).is_err());
    }

    #[test]
    fn flipped_bytes_never_panic() {
        let mut buf = Vec::new();
        full_edit().encode(&mut buf);
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                let _ = VersionEdit::decode(&bad);
            }
        }
    }
}
