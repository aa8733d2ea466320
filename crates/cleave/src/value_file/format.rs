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

/// The only format version this build writes and reads.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Five fixed64 fields, version, checksum, magic.
pub(crate) const FOOTER_LEN: usize = 5 * 8 + 4 + 4 + 8;

/// `fixed32 masked crc32c` after every index, top-level index and
/// properties block.
pub(crate) const BLOCK_TRAILER_LEN: usize = 4;

/// Smallest record: crc, two one-byte varints, the tag; empty key and value.
pub(crate) const MIN_RECORD_LEN: usize = 4 + 1 + 1 + 8;

/// Largest stored value: a compressed value is kept only when it is smaller
/// than the raw one, so this is the value limit itself.
const MAX_STORED_VALUE: usize = MAX_VALUE_SIZE;

/// A record index block is cut once its encoding reaches this size, so a
/// lookup reads and decodes about 4 KiB (a few hundred entries).
pub(crate) const INDEX_BLOCK_TARGET_BYTES: usize = 4 << 10;

/// Longest index entry: three varint64 and one varint32.
const MAX_INDEX_ENTRY_LEN: usize = 35;

/// Largest index block a reader accepts: a block is cut once its entries
/// reach the target, so it holds at most the target plus one entry and the
/// count. Checked before reading, so a damaged size
/// cannot make a reader allocate more.
pub(crate) const MAX_INDEX_BLOCK_LEN: usize = INDEX_BLOCK_TARGET_BYTES + MAX_INDEX_ENTRY_LEN + 10;

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
    let mut h = Vec::with_capacity(4 + 10 + 10 + 8);
    put_fixed32(&mut h, 0);
    put_varint64(&mut h, key.len() as u64);
    put_varint64(&mut h, stored_value.len() as u64);
    put_fixed64(&mut h, (seq << 8) | u64::from(codec));
    let crc = crc32c_extend(crc32c_extend(crc32c(&h[4..]), key), stored_value);
    h[..4].copy_from_slice(&mask(crc).to_le_bytes());
    h
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

// ------------------------------------------------------------- record index

/// One record index entry: where record `ordinal` of `logical_file` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub logical_file: u64,
    pub ordinal: u64,
    pub offset: u64,
    pub len: u32,
}

impl IndexEntry {
    pub(crate) fn id(&self) -> (u64, u64) {
        (self.logical_file, self.ordinal)
    }
}

fn zigzag(v: i128) -> u64 {
    // Offsets are below 2^63 in any file a reader accepts, so the difference
    // of two fits in 64 bits plus a sign.
    ((v << 1) ^ (v >> 127)) as u64
}

fn unzigzag(v: u64) -> i128 {
    i128::from(v >> 1) ^ -(i128::from(v & 1))
}

/// Encodes entries sorted by `(logical_file, ordinal)` into one index block
/// (contents without the trailer). Each block starts afresh, so one block
/// decodes without the others.
#[derive(Default)]
pub(crate) struct IndexBlockEncoder {
    entries: Vec<u8>,
    count: u64,
    first: Option<(u64, u64)>,
    prev: Option<IndexEntry>,
}

impl IndexBlockEncoder {
    /// REQUIRES: `e.id()` is greater than that of the previous entry.
    pub(crate) fn add(&mut self, e: &IndexEntry) {
        let out = &mut self.entries;
        let (prev_logical, prev_end) = self
            .prev
            .map_or((0, 0), |p| (p.logical_file, p.offset + u64::from(p.len)));
        let logical_delta = e.logical_file - prev_logical;
        put_varint64(out, logical_delta);
        match self.prev {
            Some(p) if logical_delta == 0 => put_varint64(out, e.ordinal - p.ordinal - 1),
            _ => put_varint64(out, e.ordinal),
        }
        put_varint64(out, zigzag(i128::from(e.offset) - i128::from(prev_end)));
        put_varint64(out, u64::from(e.len));
        self.first.get_or_insert(e.id());
        self.prev = Some(*e);
        self.count += 1;
    }

    /// Bytes of the entries so far.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The block contents, the id of its first entry and its entry count;
    /// leaves the encoder empty.
    pub(crate) fn finish(&mut self) -> (Vec<u8>, (u64, u64), u64) {
        let mut out = Vec::with_capacity(self.entries.len() + 10);
        put_varint64(&mut out, self.count);
        out.extend_from_slice(&self.entries);
        let first = self.first.unwrap_or_default();
        let count = self.count;
        *self = IndexBlockEncoder::default();
        (out, first, count)
    }
}

/// Reverses [`IndexBlockEncoder`]. Every entry must name a record inside
/// `0..records_end`; ids strictly increase by construction.
pub(crate) fn decode_index_block(
    contents: &[u8],
    records_end: u64,
) -> Result<Vec<IndexEntry>, DecodeError> {
    let overflow = DecodeError("index entry overflows");
    let mut d = Decoder::new(contents);
    let count = d.varint_usize()?;
    // Each entry takes at least four bytes: bounds the allocation.
    if count > d.remaining() / 4 {
        return Err(DecodeError("index block count exceeds its bytes"));
    }
    let mut out: Vec<IndexEntry> = Vec::with_capacity(count);
    for _ in 0..count {
        let logical_delta = d.varint64()?;
        let ordinal_field = d.varint64()?;
        let offset_delta = unzigzag(d.varint64()?);
        let len = d.varint32()?;
        let (logical_file, ordinal, prev_end) = match out.last() {
            None => (logical_delta, ordinal_field, 0),
            Some(p) => {
                let logical = p.logical_file.checked_add(logical_delta).ok_or(overflow)?;
                let ordinal = if logical_delta == 0 {
                    p.ordinal
                        .checked_add(ordinal_field)
                        .and_then(|o| o.checked_add(1))
                        .ok_or(overflow)?
                } else {
                    ordinal_field
                };
                (logical, ordinal, p.offset + u64::from(p.len))
            }
        };
        let offset = u64::try_from(i128::from(prev_end) + offset_delta).map_err(|_| overflow)?;
        let end = offset.checked_add(u64::from(len)).ok_or(overflow)?;
        if end > records_end || (len as usize) < MIN_RECORD_LEN {
            return Err(DecodeError("index entry points outside the records"));
        }
        out.push(IndexEntry {
            logical_file,
            ordinal,
            offset,
            len,
        });
    }
    if !d.is_empty() {
        return Err(DecodeError("trailing bytes in an index block"));
    }
    Ok(out)
}

/// What the top-level index says about one record index block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexBlockMeta {
    /// `(logical_file, ordinal)` of the block's first entry.
    pub first: (u64, u64),
    pub handle: BlockHandle,
    pub num_entries: u64,
}

/// Encodes the top-level index. Index blocks are contiguous from
/// `records_end`, so only their sizes are stored.
pub(crate) fn encode_top_index(blocks: &[IndexBlockMeta]) -> Vec<u8> {
    let mut out = Vec::with_capacity(blocks.len() * 12 + 5);
    put_varint64(&mut out, blocks.len() as u64);
    for b in blocks {
        put_varint64(&mut out, b.first.0);
        put_varint64(&mut out, b.first.1);
        put_varint64(&mut out, b.handle.size);
        put_varint64(&mut out, b.num_entries);
    }
    out
}

/// Reverses [`encode_top_index`]: the blocks must tile `records_end ..
/// index_end` exactly, first ids must strictly increase and each block
/// must fit the reader's bound and hold at least one entry, and no more
/// than its bytes can (an entry takes at least four), so that the counts
/// of all blocks add up without overflow.
pub(crate) fn decode_top_index(
    contents: &[u8],
    records_end: u64,
    index_end: u64,
) -> Result<Vec<IndexBlockMeta>, DecodeError> {
    let mut d = Decoder::new(contents);
    let count = d.varint_usize()?;
    if count > d.remaining() / 4 {
        return Err(DecodeError("top-level index count exceeds its bytes"));
    }
    let mut out: Vec<IndexBlockMeta> = Vec::with_capacity(count);
    let mut offset = records_end;
    for _ in 0..count {
        let first = (d.varint64()?, d.varint64()?);
        let size = d.varint64()?;
        let num_entries = d.varint64()?;
        let handle = BlockHandle { offset, size };
        if size > MAX_INDEX_BLOCK_LEN as u64 || num_entries == 0 || num_entries > size / 4 {
            return Err(DecodeError("bad record index block size or count"));
        }
        if out.last().is_some_and(|p| p.first >= first) {
            return Err(DecodeError("record index blocks out of order"));
        }
        offset = handle
            .end_with_trailer()
            .filter(|&e| e <= index_end)
            .ok_or(DecodeError("record index block beyond the index"))?;
        out.push(IndexBlockMeta {
            first,
            handle,
            num_entries,
        });
    }
    if offset != index_end || !d.is_empty() {
        return Err(DecodeError("record index blocks do not fill the index"));
    }
    Ok(out)
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
        if self.format_version != u64::from(FORMAT_VERSION) {
            return bad("properties name another format version");
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
        put_fixed32(&mut out, FORMAT_VERSION);
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
        if version != FORMAT_VERSION {
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

    /// Found by review and confirmed through the value_file fuzz target:
    /// two record index blocks claiming 2^63 entries each made
    /// `ValueFile::open` overflow adding up the counts.
    #[test]
    fn top_index_refuses_more_entries_than_a_block_holds() {
        let meta = |first, size, num_entries| IndexBlockMeta {
            first,
            handle: BlockHandle { offset: 0, size },
            num_entries,
        };
        let blocks = [meta((7, 0), 13, 3), meta((7, 3), 14, 3)];
        let end = 100 + 13 + 14 + 2 * BLOCK_TRAILER_LEN as u64;
        let decoded = decode_top_index(&encode_top_index(&blocks), 100, end).unwrap();
        assert_eq!(decoded[1].handle.offset, 100 + 13 + 4);
        let huge = [meta((7, 0), 13, 1 << 63), meta((7, 3), 14, 1 << 63)];
        assert!(decode_top_index(&encode_top_index(&huge), 100, end).is_err());
        // At most one entry per four bytes.
        let full = [meta((7, 0), 13, 3), meta((7, 3), 14, 4)];
        assert!(decode_top_index(&encode_top_index(&full), 100, end).is_err());
    }

    #[test]
    fn index_blocks_round_trip_out_of_order_offsets() {
        let entries = [
            (3, 0, 900, 20),
            (3, 1, 100, 14),
            (3, 7, 920, 30),
            (8, 2, 0, 100),
            (9, 0, 950, 50),
        ]
        .map(|(logical_file, ordinal, offset, len)| IndexEntry {
            logical_file,
            ordinal,
            offset,
            len,
        });
        let mut enc = IndexBlockEncoder::default();
        for e in &entries {
            enc.add(e);
        }
        let (contents, first, count) = enc.finish();
        assert_eq!((first, count), ((3, 0), 5));
        assert_eq!(decode_index_block(&contents, 1000).unwrap(), entries);
        // An entry beyond the records, or any truncation, is refused.
        assert!(decode_index_block(&contents, 999).is_err());
        for cut in 0..contents.len() {
            assert!(decode_index_block(&contents[..cut], 1000).is_err(), "{cut}");
        }
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
