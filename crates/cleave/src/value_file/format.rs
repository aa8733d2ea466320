//! Byte layouts of a value file: records, checksummed blocks, the record
//! index, properties and the footer. Specified in
//! `docs/format/value_file.md`.

use crate::base::checksum::{crc32c, crc32c_extend, mask, matches};
use crate::base::coding::{
    put_fixed32, put_fixed64, put_length_prefixed, put_varint64, DecodeError, Decoder,
};
use crate::base::compression::{COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_ZSTD};
use crate::base::key::MAX_SEQ;
use crate::base::limits::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::base::{FileNumber, SeqNo};

/// Identifies the footer of a cleave value file ("clvVAL01" as LE bytes).
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"clvVAL01");

/// The format version this build writes: 2 searches record index blocks
/// in place.
pub(crate) const FORMAT_VERSION: u32 = 2;

/// The oldest format version this build reads: 1, whose record index
/// blocks are converted when read.
pub(crate) const MIN_FORMAT_VERSION: u32 = 1;

/// Five fixed64 fields, version, checksum, magic.
pub(crate) const FOOTER_LEN: usize = 5 * 8 + 4 + 4 + 8;

/// `fixed32 masked crc32c` after every index, top-level index and
/// properties block.
pub(crate) const BLOCK_TRAILER_LEN: usize = 4;

/// Smallest record: crc, two one-byte varints, the tag; empty key and value.
pub(crate) const MIN_RECORD_LEN: usize = 4 + 1 + 1 + 8;
/// Largest record header: crc, two ten-byte varints, the tag.
pub(crate) const MAX_RECORD_HEADER_LEN: usize = 4 + 10 + 10 + 8;

/// Largest stored value: a compressed value is kept only when it is smaller
/// than the raw one, so this is the value limit itself.
const MAX_STORED_VALUE: usize = MAX_VALUE_SIZE;

/// Where a file was written from. Written to disk: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Origin {
    #[default]
    Flush = 0,
    Gc = 1,
    ValueLog = 2,
    Compaction = 3,
}

impl Origin {
    fn from_u64(v: u64) -> Option<Origin> {
        Some(match v {
            0 => Origin::Flush,
            1 => Origin::Gc,
            2 => Origin::ValueLog,
            3 => Origin::Compaction,
            _ => return None,
        })
    }
}

/// Expected garbage rate of a file's records (from the DropCache at birth,
/// later from observed garbage). Written to disk: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) enum ValueClass {
    #[default]
    Cold = 0,
    Hot = 1,
}

impl ValueClass {
    fn from_u64(v: u64) -> Option<ValueClass> {
        Some(match v {
            0 => ValueClass::Cold,
            1 => ValueClass::Hot,
            _ => return None,
        })
    }
}

fn known_codec(b: u8) -> bool {
    matches!(b, COMPRESSION_NONE | COMPRESSION_LZ4 | COMPRESSION_ZSTD)
}

// ---------------------------------------------------------------- records

/// The header of a record up to and including the tag; `key` and the stored
/// value follow it. The checksum covers everything after itself.
pub(crate) fn record_header(key: &[u8], stored_value: &[u8], seq: SeqNo, codec: u8) -> Vec<u8> {
    debug_assert!(seq <= MAX_SEQ);
    let mut h = Vec::with_capacity(MAX_RECORD_HEADER_LEN);
    put_fixed32(&mut h, 0);
    put_varint64(&mut h, key.len() as u64);
    put_varint64(&mut h, stored_value.len() as u64);
    put_fixed64(&mut h, (seq << 8) | u64::from(codec));
    let crc = crc32c_extend(crc32c_extend(crc32c(&h[4..]), key), stored_value);
    h[..4].copy_from_slice(&mask(crc).to_le_bytes());
    h
}

/// Bytes of the record starting at `buf[0]`, from its header: `None` if
/// the header is incomplete or states a key or value past the limits.
/// Nothing is checked but the lengths: a scan of a value log reads this
/// many bytes, then checks them with [`record_ok`].
pub(crate) fn record_len(buf: &[u8]) -> Option<usize> {
    let mut d = Decoder::new(buf.get(4..)?);
    let key_len = d.varint_usize().ok()?;
    let value_len = d.varint_usize().ok()?;
    d.fixed64().ok()?;
    if key_len > MAX_KEY_SIZE || value_len > MAX_STORED_VALUE {
        return None;
    }
    let header = buf.len() - d.rest().len();
    header.checked_add(key_len)?.checked_add(value_len)
}

/// Whether `buf` is exactly one intact record.
pub(crate) fn record_ok(buf: &[u8]) -> bool {
    decode_record(buf).is_ok()
}

/// One record as stored: the value may still be compressed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StoredRecord<'a> {
    pub key: &'a [u8],
    pub seq: SeqNo,
    pub codec: u8,
    pub stored_value: &'a [u8],
}

/// Decodes a buffer that must hold exactly one record: a handle or index
/// entry names the record's full length, so any slack is damage.
pub(crate) fn decode_record(buf: &[u8]) -> Result<StoredRecord<'_>, DecodeError> {
    let mut d = Decoder::new(buf);
    let stored_crc = d.fixed32()?;
    // The checksum is checked first: nothing else is trusted before it.
    if !matches(crc32c(d.rest()), stored_crc) {
        return Err(DecodeError("record checksum mismatch"));
    }
    let mut d = Decoder::new(buf.get(4..).unwrap_or_default());
    let key_len = d.varint_usize()?;
    let value_len = d.varint_usize()?;
    let tag = d.fixed64()?;
    if key_len > MAX_KEY_SIZE || value_len > MAX_STORED_VALUE {
        return Err(DecodeError("record key or value longer than the limits"));
    }
    let codec = tag as u8;
    if !known_codec(codec) {
        return Err(DecodeError("record has an unknown compression type"));
    }
    let key = d.bytes(key_len)?;
    let stored_value = d.bytes(value_len)?;
    if !d.is_empty() {
        return Err(DecodeError("record is shorter than its stated length"));
    }
    Ok(StoredRecord {
        key,
        seq: tag >> 8,
        codec,
        stored_value,
    })
}

// --------------------------------------------------------- checksummed blocks

/// Appends the block trailer to `contents`.
pub(crate) fn seal_block(mut contents: Vec<u8>) -> Vec<u8> {
    let crc = mask(crc32c(&contents));
    put_fixed32(&mut contents, crc);
    contents
}

/// Checks a block read with its trailer and returns its contents.
pub(crate) fn check_block(buf: &[u8]) -> Result<&[u8], DecodeError> {
    let body_len = buf
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or(DecodeError("block shorter than its trailer"))?;
    let (body, trailer) = buf.split_at(body_len);
    let stored = Decoder::new(trailer).fixed32()?;
    if !matches(crc32c(body), stored) {
        return Err(DecodeError("block checksum mismatch"));
    }
    Ok(body)
}

/// Where a block lives: `size` excludes the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// End of the block including its trailer, or `None` on overflow.
    pub(crate) fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

// -------------------------------------------------------------- properties

/// One logical file hosted by a physical file, with its records here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostedFile {
    pub logical_file: FileNumber,
    pub num_records: u64,
    /// Bytes of its records, checksums included (the sum of handle lens).
    pub record_bytes: u64,
}

/// Written once per file, read at open.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ValueFileProperties {
    pub format_version: u64,
    /// The codec of the options the file was written with; a record may
    /// still be stored uncompressed.
    pub compression: u8,
    pub origin: Origin,
    pub class: ValueClass,
    pub num_records: u64,
    /// Bytes of all records: the records region ends here.
    pub record_bytes: u64,
    /// Sum of value lengths before compression.
    pub raw_value_bytes: u64,
    /// Bytes of the record index blocks and top-level index, trailers
    /// included.
    pub index_size: u64,
    /// Bytewise smallest and largest key of any record (records of a GC or
    /// value-log file are not in key order).
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    /// Sorted by logical file number, each present once.
    pub hosted: Vec<HostedFile>,
}

/// Property names, in bytewise order. Written to disk: never change.
const NAMES: [&str; 13] = [
    "cleave.class",
    "cleave.compression",
    "cleave.format_version",
    "cleave.hosted_files",
    "cleave.index_size",
    "cleave.largest_key",
    "cleave.largest_seq",
    "cleave.num_records",
    "cleave.origin",
    "cleave.raw_value_bytes",
    "cleave.record_bytes",
    "cleave.smallest_key",
    "cleave.smallest_seq",
];

fn varint(v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    put_varint64(&mut out, v);
    out
}

fn decode_varint(value: &[u8]) -> Result<u64, DecodeError> {
    let mut d = Decoder::new(value);
    let v = d.varint64()?;
    if !d.is_empty() {
        return Err(DecodeError("trailing bytes in a property value"));
    }
    Ok(v)
}

impl ValueFileProperties {
    fn encode_hosted(&self) -> Vec<u8> {
        let mut out = varint(self.hosted.len() as u64);
        let mut prev = 0;
        for h in &self.hosted {
            put_varint64(&mut out, h.logical_file.0 - prev);
            put_varint64(&mut out, h.num_records);
            put_varint64(&mut out, h.record_bytes);
            prev = h.logical_file.0;
        }
        out
    }

    fn decode_hosted(value: &[u8]) -> Result<Vec<HostedFile>, DecodeError> {
        let mut d = Decoder::new(value);
        let count = d.varint_usize()?;
        if count > d.remaining() / 3 {
            return Err(DecodeError("hosted file count exceeds its bytes"));
        }
        let mut out: Vec<HostedFile> = Vec::with_capacity(count);
        for _ in 0..count {
            let delta = d.varint64()?;
            let prev = out.last().map_or(0, |h| h.logical_file.0);
            if !out.is_empty() && delta == 0 {
                return Err(DecodeError("hosted files repeat or are out of order"));
            }
            let logical = prev
                .checked_add(delta)
                .ok_or(DecodeError("hosted file number overflows"))?;
            out.push(HostedFile {
                logical_file: FileNumber(logical),
                num_records: d.varint64()?,
                record_bytes: d.varint64()?,
            });
        }
        if !d.is_empty() {
            return Err(DecodeError("trailing bytes in hosted files"));
        }
        Ok(out)
    }

    /// The properties block contents (without the trailer): `varint count |
    /// (length-prefixed name | length-prefixed value)*`, names sorted.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let values: [Vec<u8>; 13] = [
            varint(self.class as u64),
            varint(u64::from(self.compression)),
            varint(self.format_version),
            self.encode_hosted(),
            varint(self.index_size),
            self.largest_key.clone(),
            varint(self.largest_seq),
            varint(self.num_records),
            varint(self.origin as u64),
            varint(self.raw_value_bytes),
            varint(self.record_bytes),
            self.smallest_key.clone(),
            varint(self.smallest_seq),
        ];
        let mut out = varint(NAMES.len() as u64);
        for (name, value) in NAMES.iter().zip(&values) {
            put_length_prefixed(&mut out, name.as_bytes());
            put_length_prefixed(&mut out, value);
        }
        out
    }

    /// Decodes a properties block; every property this version writes must
    /// be present once, unknown names are skipped, and the values must agree
    /// with each other.
    pub(crate) fn decode(contents: &[u8]) -> Result<ValueFileProperties, DecodeError> {
        let mut p = ValueFileProperties::default();
        let mut d = Decoder::new(contents);
        let count = d.varint_usize()?;
        let mut seen = [false; NAMES.len()];
        let mut prev_name: Option<&[u8]> = None;
        for _ in 0..count {
            let name = d.length_prefixed()?;
            let value = d.length_prefixed()?;
            if prev_name.is_some_and(|p| p >= name) {
                return Err(DecodeError("property names out of order"));
            }
            prev_name = Some(name);
            let Some(i) = NAMES.iter().position(|n| n.as_bytes() == name) else {
                // Later versions may add properties this one ignores.
                continue;
            };
            if let Some(s) = seen.get_mut(i) {
                *s = true;
            }
            p.set(i, value)?;
        }
        if !d.is_empty() {
            return Err(DecodeError("trailing bytes in the properties block"));
        }
        if seen.iter().any(|s| !s) {
            return Err(DecodeError("properties block lacks a property"));
        }
        p.check()?;
        Ok(p)
    }

    fn set(&mut self, i: usize, value: &[u8]) -> Result<(), DecodeError> {
        let bad = DecodeError("property value out of range");
        match i {
            0 => self.class = ValueClass::from_u64(decode_varint(value)?).ok_or(bad)?,
            1 => {
                self.compression = u8::try_from(decode_varint(value)?)
                    .ok()
                    .filter(|&c| known_codec(c))
                    .ok_or(bad)?;
            }
            2 => self.format_version = decode_varint(value)?,
            3 => self.hosted = Self::decode_hosted(value)?,
            4 => self.index_size = decode_varint(value)?,
            5 => self.largest_key = value.to_vec(),
            6 => self.largest_seq = decode_varint(value)?,
            7 => self.num_records = decode_varint(value)?,
            8 => self.origin = Origin::from_u64(decode_varint(value)?).ok_or(bad)?,
            9 => self.raw_value_bytes = decode_varint(value)?,
            10 => self.record_bytes = decode_varint(value)?,
            11 => self.smallest_key = value.to_vec(),
            12 => self.smallest_seq = decode_varint(value)?,
            _ => {}
        }
        Ok(())
    }

    /// Relations every file written by this version satisfies.
    fn check(&self) -> Result<(), DecodeError> {
        let bad = |reason| Err(DecodeError(reason));
        if !(u64::from(MIN_FORMAT_VERSION)..=u64::from(FORMAT_VERSION))
            .contains(&self.format_version)
        {
            return bad("properties name an unknown format version");
        }
        if self.num_records == 0 || self.hosted.is_empty() {
            return bad("value file without records");
        }
        let (mut records, mut bytes) = (0u64, 0u64);
        for h in &self.hosted {
            records = records.saturating_add(h.num_records);
            bytes = bytes.saturating_add(h.record_bytes);
            if h.num_records == 0 {
                return bad("hosted file without records");
            }
        }
        if records != self.num_records || bytes != self.record_bytes {
            return bad("hosted file counts differ from the totals");
        }
        if self.smallest_key > self.largest_key
            || self.smallest_seq > self.largest_seq
            || self.largest_key.len() > MAX_KEY_SIZE
            || self.largest_seq > MAX_SEQ
        {
            return bad("key or sequence range is inverted or out of range");
        }
        Ok(())
    }
}

// ------------------------------------------------------------------- footer

/// The fixed-size tail of every value file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    /// End of the records, and start of the record index blocks.
    pub records_end: u64,
    pub top_index: BlockHandle,
    pub properties: BlockHandle,
    /// Decides how the record index blocks are laid out.
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
        put_fixed64(&mut out, self.records_end);
        for h in [self.top_index, self.properties] {
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

    /// Magic first (is this a value file at all?), then the version (a later
    /// version may lay out the rest differently), then the checksum, then
    /// the regions: records, then index blocks, then the top-level index and
    /// properties, all before `footer_offset`.
    pub(crate) fn decode(buf: &[u8], footer_offset: u64) -> Result<Footer, FooterError> {
        let corrupt = |e: DecodeError| FooterError::Corrupt(e.0);
        if buf.len() != FOOTER_LEN {
            return Err(FooterError::Corrupt("footer has the wrong length"));
        }
        let mut tail = Decoder::new(buf.get(FOOTER_LEN - 16..).unwrap_or_default());
        let version = tail.fixed32().map_err(corrupt)?;
        let stored_crc = tail.fixed32().map_err(corrupt)?;
        let magic = tail.fixed64().map_err(corrupt)?;
        if magic != MAGIC {
            return Err(FooterError::Corrupt(
                "bad magic number: not a cleave value file",
            ));
        }
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(FooterError::Version(version));
        }
        if !matches(
            crc32c(buf.get(..FOOTER_LEN - 12).unwrap_or_default()),
            stored_crc,
        ) {
            return Err(FooterError::Corrupt("footer checksum mismatch"));
        }
        let mut d = Decoder::new(buf);
        let records_end = d.fixed64().map_err(corrupt)?;
        let mut handle = || -> Result<BlockHandle, DecodeError> {
            Ok(BlockHandle {
                offset: d.fixed64()?,
                size: d.fixed64()?,
            })
        };
        let top_index = handle().map_err(corrupt)?;
        let properties = handle().map_err(corrupt)?;
        let f = Footer {
            records_end,
            top_index,
            properties,
            version,
        };
        let within = |h: BlockHandle| h.end_with_trailer().is_some_and(|e| e <= footer_offset);
        if records_end > top_index.offset || !within(top_index) || !within(properties) {
            return Err(FooterError::Corrupt("footer names blocks outside the file"));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props() -> ValueFileProperties {
        ValueFileProperties {
            format_version: u64::from(FORMAT_VERSION),
            compression: COMPRESSION_ZSTD,
            origin: Origin::ValueLog,
            class: ValueClass::Hot,
            num_records: 5,
            record_bytes: 500,
            raw_value_bytes: 900,
            index_size: 40,
            smallest_key: b"a".to_vec(),
            largest_key: b"z".to_vec(),
            smallest_seq: 3,
            largest_seq: 9,
            hosted: vec![
                HostedFile {
                    logical_file: FileNumber(4),
                    num_records: 2,
                    record_bytes: 100,
                },
                HostedFile {
                    logical_file: FileNumber(12),
                    num_records: 3,
                    record_bytes: 400,
                },
            ],
        }
    }

    /// A properties block from (name, value) pairs, in the given order.
    fn block(pairs: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = varint(pairs.len() as u64);
        for (n, v) in pairs {
            put_length_prefixed(&mut out, n.as_bytes());
            put_length_prefixed(&mut out, v);
        }
        out
    }

    fn pairs(p: &ValueFileProperties) -> Vec<(&'static str, Vec<u8>)> {
        let enc = p.encode();
        let mut d = Decoder::new(&enc);
        let n = d.varint_usize().unwrap();
        (0..n)
            .map(|i| {
                d.length_prefixed().unwrap();
                (NAMES[i], d.length_prefixed().unwrap().to_vec())
            })
            .collect()
    }

    #[test]
    fn properties_round_trip_skip_unknown_names_and_refuse_missing_ones() {
        let p = props();
        assert_eq!(ValueFileProperties::decode(&p.encode()), Ok(p.clone()));
        let mut with_unknown = pairs(&p);
        with_unknown.insert(4, ("cleave.i_am_new", vec![1, 2, 3]));
        assert_eq!(
            ValueFileProperties::decode(&block(&with_unknown)),
            Ok(p.clone())
        );
        for i in 0..NAMES.len() {
            let mut missing = pairs(&p);
            missing.remove(i);
            assert!(
                ValueFileProperties::decode(&block(&missing)).is_err(),
                "{i}"
            );
        }
        let mut unsorted = pairs(&p);
        unsorted.swap(0, 1);
        assert!(ValueFileProperties::decode(&block(&unsorted)).is_err());
        // Totals that disagree with the hosted files.
        let mut bad = p.clone();
        bad.num_records = 6;
        assert!(ValueFileProperties::decode(&bad.encode()).is_err());
    }

    #[test]
    fn footer_round_trips_and_rejects_every_flipped_byte() {
        let f = Footer {
            records_end: 1000,
            top_index: BlockHandle {
                offset: 1200,
                size: 30,
            },
            properties: BlockHandle {
                offset: 1234,
                size: 300,
            },
            version: FORMAT_VERSION,
        };
        let enc = f.encode();
        assert_eq!(Footer::decode(&enc, 1538), Ok(f));
        assert!(Footer::decode(&enc, 1537).is_err());
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 0x01;
            assert!(Footer::decode(&bad, 1538).is_err(), "flip at {i} accepted");
        }
    }
}
