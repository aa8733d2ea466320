//! A VersionEdit: one change to the set of live files, logged as one
//! manifest record. The encoding is a sequence of `varint tag ++ field`;
//! see `docs/format/manifest.md`. Tags are written to disk: never renumber.

use crate::base::coding::{put_length_prefixed, put_varint32, put_varint64, DecodeError};
use crate::base::key;
use crate::base::limits::{MAX_KEY_SIZE, NUM_LEVELS};
use crate::base::{Decoder, FileNumber, InternalKey, SeqNo};
use crate::merge::MAX_NAME_LEN;

use super::delta_meta::{BucketMeta, ChunkRef, DeltaFileMeta};
use super::file_meta::{TableExpiry, TableValueRefs};
use super::value_file_meta::{HostedLogical, ValueFileMeta};
use super::FileMeta;

/// The database format version this build writes and the newest it reads.
/// Version 2 added value files (tags 7–9), version 3 the merge
/// operator's name (tag 10) and merge operands in WALs and sstables,
/// version 4 the delta store (tags 11–15), version 5 tables' expiry (tag
/// 16) and entries with an expiry in WALs and sstables; an older manifest
/// is a newer one without them.
pub(crate) const FORMAT_VERSION: u32 = 5;

const TAG_FORMAT_VERSION: u64 = 1;
const TAG_LOG_NUMBER: u64 = 2;
const TAG_NEXT_FILE_NUMBER: u64 = 3;
const TAG_LAST_SEQ: u64 = 4;
const TAG_DELETED_FILE: u64 = 5;
const TAG_NEW_FILE: u64 = 6;
const TAG_TABLE_VALUE_REFS: u64 = 7;
const TAG_NEW_VALUE_FILE: u64 = 8;
const TAG_DELETED_VALUE_FILE: u64 = 9;
const TAG_MERGE_OPERATOR: u64 = 10;
const TAG_NEW_DELTA_FILE: u64 = 11;
const TAG_DELETED_DELTA_FILE: u64 = 12;
const TAG_NEW_BUCKET: u64 = 13;
const TAG_DELETED_BUCKET: u64 = 14;
const TAG_APPENDED_CHUNK: u64 = 15;
const TAG_TABLE_EXPIRY: u64 = 16;

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
    /// Physical value files leaving the Version.
    pub deleted_value_files: Vec<FileNumber>,
    pub new_value_files: Vec<ValueFileMeta>,
    /// The name of the merge operator the database's merges need: logged
    /// with the first merge, and in every snapshot after.
    pub merge_operator: Option<String>,
    /// The delta store: files joining and leaving it, buckets leaving
    /// (applied first) and joining, and chunks appended to buckets.
    pub new_delta_files: Vec<DeltaFileMeta>,
    pub deleted_delta_files: Vec<FileNumber>,
    pub deleted_buckets: Vec<u64>,
    pub new_buckets: Vec<BucketMeta>,
    pub appended_chunks: Vec<(u64, ChunkRef)>,
}

impl VersionEdit {
    pub(crate) fn delete_file(&mut self, level: usize, number: FileNumber) {
        self.deleted_files.push((level, number));
    }

    pub(crate) fn add_file(&mut self, level: usize, meta: FileMeta) {
        self.new_files.push((level, meta));
    }

    pub(crate) fn add_value_file(&mut self, meta: ValueFileMeta) {
        self.new_value_files.push(meta);
    }

    pub(crate) fn delete_value_file(&mut self, number: FileNumber) {
        self.deleted_value_files.push(number);
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
            if !m.value_refs.is_empty() {
                put_varint64(dst, TAG_TABLE_VALUE_REFS);
                put_varint64(dst, m.number.0);
                put_varint64(dst, m.value_refs.len() as u64);
                for r in &m.value_refs {
                    put_varint64(dst, r.logical_file.0);
                    put_varint64(dst, r.count);
                    put_varint64(dst, r.bytes);
                }
            }
            if let Some(x) = &m.expiry {
                put_varint64(dst, TAG_TABLE_EXPIRY);
                put_varint64(dst, m.number.0);
                x.encode(dst);
            }
        }
        if let Some(name) = &self.merge_operator {
            put_varint64(dst, TAG_MERGE_OPERATOR);
            put_length_prefixed(dst, name.as_bytes());
        }
        for &number in &self.deleted_value_files {
            put_varint64(dst, TAG_DELETED_VALUE_FILE);
            put_varint64(dst, number.0);
        }
        for f in &self.new_delta_files {
            put_varint64(dst, TAG_NEW_DELTA_FILE);
            put_varint64(dst, f.number.0);
            put_varint64(dst, f.size);
        }
        for &number in &self.deleted_delta_files {
            put_varint64(dst, TAG_DELETED_DELTA_FILE);
            put_varint64(dst, number.0);
        }
        for &id in &self.deleted_buckets {
            put_varint64(dst, TAG_DELETED_BUCKET);
            put_varint64(dst, id);
        }
        for b in &self.new_buckets {
            put_varint64(dst, TAG_NEW_BUCKET);
            put_varint64(dst, b.id);
            put_length_prefixed(dst, &b.smallest);
            put_varint64(dst, b.chunks.len() as u64);
            for c in &b.chunks {
                encode_chunk_ref(dst, c);
            }
        }
        for (id, c) in &self.appended_chunks {
            put_varint64(dst, TAG_APPENDED_CHUNK);
            put_varint64(dst, *id);
            encode_chunk_ref(dst, c);
        }
        for v in &self.new_value_files {
            put_varint64(dst, TAG_NEW_VALUE_FILE);
            put_varint64(dst, v.number.0);
            put_varint64(dst, v.size);
            put_varint64(dst, v.hosted.len() as u64);
            for h in &v.hosted {
                put_varint64(dst, h.logical_file.0);
                put_varint64(dst, h.records);
                put_varint64(dst, h.bytes);
            }
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
                TAG_TABLE_VALUE_REFS => {
                    let number = FileNumber(d.varint64()?);
                    let refs = decode_value_refs(&mut d)?;
                    // The encoder writes the references right after their
                    // table, so only the last file can match: a snapshot
                    // of many tables decodes in linear time.
                    let (_, meta) = e
                        .new_files
                        .last_mut()
                        .filter(|(_, m)| m.number == number)
                        .ok_or(DecodeError(
                            "value references of a file the edit does not add",
                        ))?;
                    if !meta.value_refs.is_empty() {
                        return Err(DecodeError("value references given twice for one file"));
                    }
                    meta.value_refs = refs;
                }
                TAG_TABLE_EXPIRY => {
                    let number = FileNumber(d.varint64()?);
                    let expiry = TableExpiry::decode(&mut d)?;
                    // Right after its table, as the value references.
                    let (_, meta) = e
                        .new_files
                        .last_mut()
                        .filter(|(_, m)| m.number == number)
                        .ok_or(DecodeError("expiry of a file the edit does not add"))?;
                    if meta.expiry.replace(expiry).is_some() {
                        return Err(DecodeError("expiry given twice for one file"));
                    }
                }
                TAG_DELETED_VALUE_FILE => e.deleted_value_files.push(FileNumber(d.varint64()?)),
                TAG_NEW_VALUE_FILE => e.new_value_files.push(decode_value_file(&mut d)?),
                TAG_MERGE_OPERATOR => {
                    let name = d.length_prefixed()?;
                    if name.is_empty() || name.len() > MAX_NAME_LEN {
                        return Err(DecodeError("merge operator name of a bad length"));
                    }
                    let name = std::str::from_utf8(name)
                        .map_err(|_| DecodeError("merge operator name is not UTF-8"))?;
                    set_once(&mut e.merge_operator, name.to_string())?;
                }
                TAG_NEW_DELTA_FILE => e.new_delta_files.push(DeltaFileMeta {
                    number: FileNumber(d.varint64()?),
                    size: d.varint64()?,
                    ..DeltaFileMeta::default()
                }),
                TAG_DELETED_DELTA_FILE => e.deleted_delta_files.push(FileNumber(d.varint64()?)),
                TAG_DELETED_BUCKET => e.deleted_buckets.push(d.varint64()?),
                TAG_NEW_BUCKET => {
                    let id = d.varint64()?;
                    let smallest = d.length_prefixed()?.to_vec();
                    if smallest.len() > MAX_KEY_SIZE {
                        return Err(DecodeError("bucket's smallest key too long"));
                    }
                    let n = decode_count(&mut d, 3)?;
                    let chunks = (0..n)
                        .map(|_| decode_chunk_ref(&mut d))
                        .collect::<Result<Vec<_>, _>>()?;
                    e.new_buckets.push(BucketMeta::new(id, smallest, chunks));
                }
                TAG_APPENDED_CHUNK => {
                    let id = d.varint64()?;
                    e.appended_chunks.push((id, decode_chunk_ref(&mut d)?));
                }
                // No forward compatibility yet: a field we do not know could
                // change the meaning of the ones we do.
                _ => return Err(DecodeError("unknown version edit tag")),
            }
        }
        Ok(e)
    }
}

fn encode_chunk_ref(dst: &mut Vec<u8>, c: &ChunkRef) {
    put_varint64(dst, c.file.0);
    put_varint64(dst, c.offset);
    put_varint64(dst, c.len);
}

fn decode_chunk_ref(d: &mut Decoder<'_>) -> Result<ChunkRef, DecodeError> {
    let c = ChunkRef {
        file: FileNumber(d.varint64()?),
        offset: d.varint64()?,
        len: d.varint64()?,
    };
    if c.len == 0 || c.offset.checked_add(c.len).is_none() {
        return Err(DecodeError("delta chunk reference out of range"));
    }
    Ok(c)
}

fn set_once<T>(slot: &mut Option<T>, v: T) -> Result<(), DecodeError> {
    if slot.replace(v).is_some() {
        return Err(DecodeError("duplicate field in version edit"));
    }
    Ok(())
}

/// A count of list items, bounded by the bytes left (each item takes at
/// least `min_item_len`), so damaged input cannot make us allocate much.
fn decode_count(d: &mut Decoder<'_>, min_item_len: usize) -> Result<usize, DecodeError> {
    let n = d.varint_usize()?;
    if n == 0 || n > d.remaining() / min_item_len {
        return Err(DecodeError("list length out of range"));
    }
    Ok(n)
}

fn decode_value_refs(d: &mut Decoder<'_>) -> Result<Vec<TableValueRefs>, DecodeError> {
    let n = decode_count(d, 3)?;
    let mut refs = Vec::with_capacity(n);
    let mut total = 0u64;
    for _ in 0..n {
        let r = TableValueRefs {
            logical_file: FileNumber(d.varint64()?),
            count: d.varint64()?,
            bytes: d.varint64()?,
        };
        if r.count == 0 || r.bytes < r.count {
            return Err(DecodeError(
                "value references with impossible count or bytes",
            ));
        }
        if refs
            .last()
            .is_some_and(|p: &TableValueRefs| p.logical_file >= r.logical_file)
        {
            return Err(DecodeError("value references out of order"));
        }
        total = total
            .checked_add(r.bytes)
            .ok_or(DecodeError("referenced bytes overflow"))?;
        refs.push(r);
    }
    Ok(refs)
}

fn decode_value_file(d: &mut Decoder<'_>) -> Result<ValueFileMeta, DecodeError> {
    let number = FileNumber(d.varint64()?);
    let size = d.varint64()?;
    let n = decode_count(d, 3)?;
    let mut hosted: Vec<HostedLogical> = Vec::with_capacity(n);
    let mut record_bytes = 0u64;
    for _ in 0..n {
        let h = HostedLogical {
            logical_file: FileNumber(d.varint64()?),
            records: d.varint64()?,
            bytes: d.varint64()?,
        };
        if h.records == 0 || h.bytes < h.records {
            return Err(DecodeError(
                "hosted logical file with impossible count or bytes",
            ));
        }
        if hosted
            .last()
            .is_some_and(|p| p.logical_file >= h.logical_file)
        {
            return Err(DecodeError("hosted logical files out of order"));
        }
        record_bytes = record_bytes
            .checked_add(h.bytes)
            .ok_or(DecodeError("value file record bytes overflow"))?;
        hosted.push(h);
    }
    let meta = ValueFileMeta {
        number,
        size,
        hosted,
        ..ValueFileMeta::default()
    };
    if record_bytes > size {
        return Err(DecodeError("value file records exceed its size"));
    }
    Ok(meta)
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
            merge_operator: Some("uint64add".to_string()),
            ..VersionEdit::default()
        };
        e.delete_file(2, FileNumber(7));
        e.delete_file(0, FileNumber(8));
        e.add_file(1, sample_meta(10, b"a", b"m", 5));
        let mut with_refs = sample_meta(11, b"n", b"z", 7);
        with_refs.value_refs = vec![
            TableValueRefs {
                logical_file: FileNumber(4),
                count: 3,
                bytes: 3000,
            },
            TableValueRefs {
                logical_file: FileNumber(9),
                count: 1,
                bytes: 20,
            },
        ];
        e.add_file(6, with_refs);
        e.delete_value_file(FileNumber(2));
        e.add_value_file(ValueFileMeta {
            number: FileNumber(9),
            size: 5000,
            hosted: vec![
                HostedLogical {
                    logical_file: FileNumber(4),
                    records: 10,
                    bytes: 4000,
                },
                HostedLogical {
                    logical_file: FileNumber(9),
                    records: 2,
                    bytes: 40,
                },
            ],
            ..ValueFileMeta::default()
        });
        let chunk = |file, offset, len| ChunkRef {
            file: FileNumber(file),
            offset,
            len,
        };
        e.new_delta_files.push(DeltaFileMeta {
            number: FileNumber(12),
            size: 9000,
            ..DeltaFileMeta::default()
        });
        e.deleted_delta_files.push(FileNumber(3));
        e.deleted_buckets.push(5);
        e.new_buckets.push(BucketMeta::new(
            13,
            Vec::new(),
            vec![chunk(12, 16, 400), chunk(12, 416, 80)],
        ));
        e.new_buckets
            .push(BucketMeta::new(14, b"k".to_vec(), vec![chunk(12, 496, 9)]));
        e.appended_chunks.push((6, chunk(12, 505, 100)));
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
        for bad in [&b""[..], &[0xff, 0xfe], &[b'x'; MAX_NAME_LEN + 1]] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, TAG_MERGE_OPERATOR);
            put_length_prefixed(&mut buf, bad);
            assert!(VersionEdit::decode(&buf).is_err(), "name {bad:?}");
        }
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
    fn value_references_must_name_a_file_the_edit_adds() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, TAG_TABLE_VALUE_REFS);
        for v in [5, 1, 4, 1, 100] {
            put_varint64(&mut buf, v);
        }
        assert_eq!(
            VersionEdit::decode(&buf),
            Err(DecodeError(
                "value references of a file the edit does not add"
            ))
        );
    }

    #[test]
    fn value_file_lists_are_checked() {
        let encode = |hosted: &[(u64, u64, u64)], size: u64| {
            let mut buf = Vec::new();
            put_varint64(&mut buf, TAG_NEW_VALUE_FILE);
            put_varint64(&mut buf, 7);
            put_varint64(&mut buf, size);
            put_varint64(&mut buf, hosted.len() as u64);
            for &(l, r, b) in hosted {
                for v in [l, r, b] {
                    put_varint64(&mut buf, v);
                }
            }
            VersionEdit::decode(&buf)
        };
        assert!(encode(&[(7, 2, 100)], 200).is_ok());
        assert!(encode(&[], 200).is_err(), "hosts nothing");
        assert!(encode(&[(7, 2, 100), (3, 1, 10)], 200).is_err(), "order");
        assert!(encode(&[(7, 2, 100)], 50).is_err(), "records exceed size");
        assert!(encode(&[(7, 0, 100)], 200).is_err(), "no records");
        assert!(
            encode(&[(7, 1, 1 << 63), (8, 1, 1 << 63)], u64::MAX).is_err(),
            "record bytes overflow"
        );
        // A huge count with no bytes behind it is refused before allocating.
        let mut buf = Vec::new();
        put_varint64(&mut buf, TAG_NEW_VALUE_FILE);
        put_varint64(&mut buf, 7);
        put_varint64(&mut buf, 1);
        put_varint64(&mut buf, u64::MAX >> 1);
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
