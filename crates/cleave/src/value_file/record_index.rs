//! The record index of a value file: `(logical_file, ordinal) → (offset,
//! len)` for every record, cut into blocks with a top-level index over
//! them. Specified in `docs/format/value_file.md`.
//!
//! A block of format version 2 is searched where it lies, in the block
//! cache's bytes: entries are delta-encoded in groups of
//! `RESTART_INTERVAL`, each group starting with a full entry whose place
//! the restart array gives, so a lookup binary-searches the restarts and
//! decodes at most one group. (Version 1 blocks had to be decoded whole
//! for every lookup; they are converted to version 2 when read.)

use crate::base::coding::{put_fixed32, put_varint64, DecodeError, Decoder};

use super::format::{BlockHandle, MIN_RECORD_LEN};

/// A record index block is cut once its encoding reaches this size, so a
/// lookup that misses the cache reads about 4 KiB (about a thousand
/// entries).
pub(crate) const INDEX_BLOCK_TARGET_BYTES: usize = 4 << 10;

/// Entries per restart group: a lookup decodes at most this many after
/// its binary search. Each group costs a full first entry (about 10 bytes)
/// and a 4-byte restart, about 0.9 bytes per record at 16.
pub(crate) const RESTART_INTERVAL: usize = 16;

/// Longest entry of either version: three varint64 and one varint32.
const MAX_INDEX_ENTRY_LEN: usize = 35;

/// Largest index block a reader accepts: a block is cut once its encoding
/// reaches the target, so it holds at most the target plus one entry, its
/// restart (version 2) or the count (version 1), and the restart count.
/// Checked before reading, so a damaged size cannot make a reader
/// allocate more.
pub(crate) const MAX_INDEX_BLOCK_LEN: usize = INDEX_BLOCK_TARGET_BYTES + MAX_INDEX_ENTRY_LEN + 10;

/// Fewest bytes an entry takes: version 1 writes four varints; version 2
/// writes two for an entry that follows the previous record of its
/// logical file (four for the first of a group, plus its restart).
const MIN_ENTRY_LEN_V1: u64 = 4;
const MIN_ENTRY_LEN_V2: u64 = 2;

/// Bits of an entry's head varint below the number it carries.
const HEAD_JUMP: u64 = 1;
const HEAD_NEW_FILE: u64 = 2;
const HEAD_SHIFT: u32 = 2;

/// Logical file numbers and ordinals stay below this, so that any
/// difference of two fits a head varint beside its two flags. (File
/// numbers count up from 1 and ordinals are below 2^32, which the
/// value-references bitmaps hold.)
pub(crate) const MAX_ID: u64 = 1 << (64 - HEAD_SHIFT);

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

    fn end(&self) -> u64 {
        self.offset + u64::from(self.len)
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

// ---------------------------------------------------------------- version 2

/// Encodes entries sorted by `(logical_file, ordinal)` into one version-2
/// index block (contents without the trailer). Each block starts afresh,
/// so one block decodes without the others.
#[derive(Default)]
pub(crate) struct IndexBlockEncoder {
    entries: Vec<u8>,
    restarts: Vec<u32>,
    count: u64,
    first: Option<(u64, u64)>,
    prev: Option<IndexEntry>,
}

impl IndexBlockEncoder {
    /// REQUIRES: `e.id()` is greater than that of the previous entry, and
    /// both its parts are below `MAX_ID`.
    pub(crate) fn add(&mut self, e: &IndexEntry) {
        assert!(
            e.logical_file < MAX_ID && e.ordinal < MAX_ID,
            "index entry id out of range"
        );
        let out = &mut self.entries;
        match self.prev {
            Some(p) if !(self.count as usize).is_multiple_of(RESTART_INTERVAL) => {
                assert!(e.id() > p.id(), "index entries out of order");
                let jump = if e.offset == p.end() { 0 } else { HEAD_JUMP };
                if e.logical_file == p.logical_file {
                    let gap = e.ordinal - p.ordinal - 1;
                    put_varint64(out, (gap << HEAD_SHIFT) | jump);
                } else {
                    let delta = e.logical_file - p.logical_file;
                    put_varint64(out, (delta << HEAD_SHIFT) | HEAD_NEW_FILE | jump);
                    put_varint64(out, e.ordinal);
                }
                if jump != 0 {
                    put_varint64(out, zigzag(i128::from(e.offset) - i128::from(p.end())));
                }
            }
            prev => {
                assert!(
                    prev.is_none_or(|p| e.id() > p.id()),
                    "index entries out of order"
                );
                // A block is far below 4 GiB: its size is bounded on read.
                self.restarts.push(out.len() as u32);
                put_varint64(out, e.logical_file);
                put_varint64(out, e.ordinal);
                put_varint64(out, e.offset);
            }
        }
        put_varint64(out, u64::from(e.len));
        self.first.get_or_insert(e.id());
        self.prev = Some(*e);
        self.count += 1;
    }

    /// Bytes the block would take if finished now.
    pub(crate) fn len(&self) -> usize {
        self.entries.len() + 4 * self.restarts.len() + 4
    }

    /// The block contents, the id of its first entry and its entry count;
    /// leaves the encoder empty.
    pub(crate) fn finish(&mut self) -> (Vec<u8>, (u64, u64), u64) {
        let mut out = std::mem::take(&mut self.entries);
        out.reserve(4 * self.restarts.len() + 4);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        let first = self.first.unwrap_or_default();
        let count = self.count;
        *self = IndexBlockEncoder::default();
        (out, first, count)
    }
}

/// A version-2 block's parts: the entries region and the restart array.
struct Parts<'a> {
    entries: &'a [u8],
    restarts: &'a [u8],
}

impl<'a> Parts<'a> {
    fn of(contents: &'a [u8]) -> Result<Parts<'a>, DecodeError> {
        let bad = DecodeError("index block restarts exceed its bytes");
        let count_at = contents.len().checked_sub(4).ok_or(bad)?;
        let (rest, count) = contents.split_at(count_at);
        let count = Decoder::new(count).fixed32()? as usize;
        let restarts_at = count
            .checked_mul(4)
            .and_then(|n| rest.len().checked_sub(n))
            .ok_or(bad)?;
        if count == 0 {
            return Err(DecodeError("index block without entries"));
        }
        let (entries, restarts) = rest.split_at(restarts_at);
        Ok(Parts { entries, restarts })
    }

    fn num_restarts(&self) -> usize {
        self.restarts.len() / 4
    }

    /// Offset in `entries` of restart `i`'s entry.
    fn restart(&self, i: usize) -> Result<usize, DecodeError> {
        let at = self.restarts.get(i * 4..).unwrap_or_default();
        let offset = Decoder::new(at).fixed32()? as usize;
        if offset >= self.entries.len() {
            return Err(DecodeError("index block restart beyond its entries"));
        }
        Ok(offset)
    }

    /// The id of restart `i`'s entry (its first two varints).
    fn restart_id(&self, i: usize) -> Result<(u64, u64), DecodeError> {
        let mut d = Decoder::new(self.entries.get(self.restart(i)?..).unwrap_or_default());
        Ok((d.varint64()?, d.varint64()?))
    }

    /// The entries of restart group `i`, decoded in order.
    fn group(&self, i: usize) -> Result<Group<'a>, DecodeError> {
        let start = self.restart(i)?;
        let end = if i + 1 < self.num_restarts() {
            self.restart(i + 1)?
        } else {
            self.entries.len()
        };
        let bytes = self
            .entries
            .get(start..end)
            .ok_or(DecodeError("index block restarts out of order"))?;
        Ok(Group {
            d: Decoder::new(bytes),
            prev: None,
        })
    }
}

/// The entries of one restart group: a full entry, then deltas.
struct Group<'a> {
    d: Decoder<'a>,
    prev: Option<IndexEntry>,
}

impl Group<'_> {
    fn next_entry(&mut self) -> Result<Option<IndexEntry>, DecodeError> {
        if self.d.is_empty() {
            return Ok(None);
        }
        let overflow = DecodeError("index entry overflows");
        let d = &mut self.d;
        let e = match self.prev {
            None => {
                let logical_file = d.varint64()?;
                let ordinal = d.varint64()?;
                let offset = d.varint64()?;
                let len = d.varint32()?;
                IndexEntry {
                    logical_file,
                    ordinal,
                    offset,
                    len,
                }
            }
            Some(p) => {
                let head = d.varint64()?;
                let n = head >> HEAD_SHIFT;
                let (logical_file, ordinal) = if head & HEAD_NEW_FILE == 0 {
                    let ordinal = p.ordinal.checked_add(n).and_then(|o| o.checked_add(1));
                    (p.logical_file, ordinal.ok_or(overflow)?)
                } else if n == 0 {
                    return Err(DecodeError("index entry repeats its logical file"));
                } else {
                    (
                        p.logical_file.checked_add(n).ok_or(overflow)?,
                        d.varint64()?,
                    )
                };
                let offset = if head & HEAD_JUMP == 0 {
                    p.end()
                } else {
                    let at = i128::from(p.end()) + unzigzag(d.varint64()?);
                    u64::try_from(at).map_err(|_| overflow)?
                };
                IndexEntry {
                    logical_file,
                    ordinal,
                    offset,
                    len: d.varint32()?,
                }
            }
        };
        e.offset.checked_add(u64::from(e.len)).ok_or(overflow)?;
        self.prev = Some(e);
        Ok(Some(e))
    }
}

/// The entry for `id` in a version-2 block that [`decode_index_block`]
/// accepted, or `None` if the block does not hold it: a binary search of
/// the restarts, then at most `RESTART_INTERVAL` entries decoded. Never
/// allocates. Damage found on the way is an error, never a wrong entry.
pub(crate) fn find(contents: &[u8], id: (u64, u64)) -> Result<Option<IndexEntry>, DecodeError> {
    let parts = Parts::of(contents)?;
    let (mut lo, mut hi) = (0, parts.num_restarts());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if parts.restart_id(mid)? <= id {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let Some(group) = lo.checked_sub(1) else {
        return Ok(None);
    };
    let mut g = parts.group(group)?;
    while let Some(e) = g.next_entry()? {
        if e.id() >= id {
            return Ok((e.id() == id).then_some(e));
        }
    }
    Ok(None)
}

/// Decodes a whole version-2 block and checks it: the restarts point at
/// every `RESTART_INTERVAL`th entry and nothing else, ids strictly
/// increase, and every entry names a record inside `0..records_end` of at
/// least the smallest record's length. [`find`] relies on a block having
/// passed this.
pub(crate) fn decode_index_block(
    contents: &[u8],
    records_end: u64,
) -> Result<Vec<IndexEntry>, DecodeError> {
    let parts = Parts::of(contents)?;
    let groups = parts.num_restarts();
    // Each entry takes at least two bytes: bounds the allocation.
    let mut out: Vec<IndexEntry> = Vec::with_capacity(parts.entries.len() / 2);
    let mut expected_start = 0;
    for i in 0..groups {
        if parts.restart(i)? != expected_start {
            return Err(DecodeError("index block restarts do not start its groups"));
        }
        let mut g = parts.group(i)?;
        let mut in_group = 0;
        while let Some(e) = g.next_entry()? {
            if out.last().is_some_and(|p| p.id() >= e.id()) {
                return Err(DecodeError("index entries out of order"));
            }
            check_entry(&e, records_end)?;
            out.push(e);
            in_group += 1;
        }
        let last_group = i + 1 == groups;
        if in_group > RESTART_INTERVAL || (!last_group && in_group < RESTART_INTERVAL) {
            return Err(DecodeError("index block restart group of the wrong size"));
        }
        expected_start += g.d.position();
    }
    Ok(out)
}

fn check_entry(e: &IndexEntry, records_end: u64) -> Result<(), DecodeError> {
    if e.logical_file >= MAX_ID || e.ordinal >= MAX_ID {
        return Err(DecodeError("index entry id out of range"));
    }
    let inside = e
        .offset
        .checked_add(u64::from(e.len))
        .is_some_and(|end| end <= records_end);
    if !inside || (e.len as usize) < MIN_RECORD_LEN {
        return Err(DecodeError("index entry points outside the records"));
    }
    Ok(())
}

// ---------------------------------------------------------------- version 1

/// Decodes a version-1 block: `varint count | entry × count`, each entry
/// `varint logical_delta | varint ordinal_field | varint zigzag(offset −
/// prev_end) | varint len`, checked as [`decode_index_block`] checks a
/// version-2 block.
pub(crate) fn decode_v1_index_block(
    contents: &[u8],
    records_end: u64,
) -> Result<Vec<IndexEntry>, DecodeError> {
    let overflow = DecodeError("index entry overflows");
    let mut d = Decoder::new(contents);
    let count = d.varint_usize()?;
    if count as u64 > d.remaining() as u64 / MIN_ENTRY_LEN_V1 {
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
                (logical, ordinal, p.end())
            }
        };
        let offset = u64::try_from(i128::from(prev_end) + offset_delta).map_err(|_| overflow)?;
        let e = IndexEntry {
            logical_file,
            ordinal,
            offset,
            len,
        };
        check_entry(&e, records_end)?;
        out.push(e);
    }
    if !d.is_empty() {
        return Err(DecodeError("trailing bytes in an index block"));
    }
    Ok(out)
}

/// Encodes entries (sorted, as a version-1 block holds them) as the
/// version-2 block a reader caches and searches.
pub(crate) fn encode_entries(entries: &[IndexEntry]) -> Vec<u8> {
    let mut enc = IndexBlockEncoder::default();
    for e in entries {
        enc.add(e);
    }
    enc.finish().0
}

// ---------------------------------------------------------- top-level index

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

/// Reverses [`encode_top_index`] for a file of format `version`: the
/// blocks must tile `records_end .. index_end` exactly, first ids must
/// strictly increase and each block must fit the reader's bound and hold
/// at least one entry, and no more than its bytes can, so that the counts
/// of all blocks add up without overflow.
pub(crate) fn decode_top_index(
    contents: &[u8],
    records_end: u64,
    index_end: u64,
    version: u32,
) -> Result<Vec<IndexBlockMeta>, DecodeError> {
    let min_entry = if version == 1 {
        MIN_ENTRY_LEN_V1
    } else {
        MIN_ENTRY_LEN_V2
    };
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
        if size > MAX_INDEX_BLOCK_LEN as u64 || num_entries == 0 || num_entries > size / min_entry {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value_file::format::BLOCK_TRAILER_LEN;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn entry(logical_file: u64, ordinal: u64, offset: u64, len: u32) -> IndexEntry {
        IndexEntry {
            logical_file,
            ordinal,
            offset,
            len,
        }
    }

    /// Entries of a GC output: logical files in an order other than their
    /// numbers', each file's live records back to back, ordinals with
    /// gaps; sorted by id as a block holds them.
    fn gc_output(seed: u64, files: u64, per_file: u64) -> Vec<IndexEntry> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut order: Vec<u64> = (0..files).map(|f| 3 + f * rng.gen_range(1..1000)).collect();
        order.sort_unstable();
        order.dedup();
        order.reverse();
        let mut out = Vec::new();
        let mut offset = 0;
        for logical in order {
            let mut ordinal = rng.gen_range(0..5);
            for _ in 0..per_file {
                let len = rng.gen_range(14..20_000);
                out.push(entry(logical, ordinal, offset, len));
                offset += u64::from(len);
                ordinal += 1 + rng.gen_range(0..3) * rng.gen_range(0..2);
            }
        }
        out.sort_unstable_by_key(IndexEntry::id);
        out
    }

    fn encode(entries: &[IndexEntry]) -> Vec<u8> {
        encode_entries(entries)
    }

    #[test]
    fn every_entry_is_found_in_place_and_nothing_else() {
        for (seed, files, per_file) in [(1, 1, 1), (2, 1, 16), (3, 1, 17), (4, 5, 40), (5, 40, 7)] {
            let entries = gc_output(seed, files, per_file);
            let contents = encode(&entries);
            assert_eq!(decode_index_block(&contents, u64::MAX).unwrap(), entries);
            for e in &entries {
                assert_eq!(find(&contents, e.id()).unwrap(), Some(*e));
                // Ids just around every entry that the block does not hold.
                for id in [(e.logical_file, e.ordinal + 1), (e.logical_file + 1, 0)] {
                    let held = entries.binary_search_by_key(&id, IndexEntry::id).ok();
                    assert_eq!(find(&contents, id).unwrap(), held.map(|i| entries[i]));
                }
            }
            assert_eq!(find(&contents, (0, 0)).unwrap(), None);
            assert_eq!(find(&contents, (u64::MAX, u64::MAX)).unwrap(), None);
        }
    }

    #[test]
    fn records_that_follow_each_other_cost_few_bytes() {
        // A flush file's index: one logical file, 8 KiB records back to
        // back: head (1) + len (2) per entry, plus each group's full
        // entry and restart.
        let entries: Vec<IndexEntry> = (0..1024).map(|i| entry(77, i, i * 8_230, 8_230)).collect();
        let contents = encode(&entries);
        let per_record = contents.len() as f64 / entries.len() as f64;
        assert!(per_record < 3.8, "{per_record} bytes per record");
        assert_eq!(find(&contents, (77, 1000)).unwrap(), Some(entries[1000]));
    }

    #[test]
    fn version_1_blocks_convert_to_the_same_entries() {
        let entries = [
            entry(3, 0, 900, 20),
            entry(3, 1, 100, 14),
            entry(3, 7, 920, 30),
            entry(8, 2, 0, 100),
            entry(9, 0, 950, 50),
        ];
        // Version 1's encoding of these, written by the version-1 encoder.
        let mut v1 = vec![5];
        let mut prev: Option<IndexEntry> = None;
        for e in &entries {
            let (logical_delta, ordinal_field, prev_end) = match prev {
                None => (e.logical_file, e.ordinal, 0),
                Some(p) if p.logical_file == e.logical_file => {
                    (0, e.ordinal - p.ordinal - 1, p.end())
                }
                Some(p) => (e.logical_file - p.logical_file, e.ordinal, p.end()),
            };
            put_varint64(&mut v1, logical_delta);
            put_varint64(&mut v1, ordinal_field);
            put_varint64(&mut v1, zigzag(i128::from(e.offset) - i128::from(prev_end)));
            put_varint64(&mut v1, u64::from(e.len));
            prev = Some(*e);
        }
        let decoded = decode_v1_index_block(&v1, 1000).unwrap();
        assert_eq!(decoded, entries);
        // Found by the value_record fuzz target: a version-1 block naming a
        // logical file of 2^62 or more, whose difference from the one
        // before no head varint holds. Refused, as version 2 refuses it.
        let mut huge = vec![2];
        for (logical_delta, ordinal) in [(125, 0), (MAX_ID, 11)] {
            for v in [logical_delta, ordinal, 0, 20] {
                put_varint64(&mut huge, v);
            }
        }
        assert!(decode_v1_index_block(&huge, 1000).is_err());
        let mut full = vec![];
        for v in [MAX_ID, 0, 0, 20] {
            put_varint64(&mut full, v);
        }
        put_fixed32(&mut full, 0);
        put_fixed32(&mut full, 1);
        assert!(decode_index_block(&full, 1000).is_err());
        let v2 = encode_entries(&decoded);
        assert_eq!(decode_index_block(&v2, 1000).unwrap(), entries);
        assert!(decode_v1_index_block(&v1, 999).is_err());
        for cut in 0..v1.len() {
            assert!(decode_v1_index_block(&v1[..cut], 1000).is_err(), "{cut}");
        }
    }

    #[test]
    fn damaged_blocks_are_refused_and_never_panic() {
        let entries = gc_output(9, 4, 20);
        let end = entries.iter().map(IndexEntry::end).max().unwrap();
        let contents = encode(&entries);
        assert!(decode_index_block(&contents, end - 1).is_err());
        for cut in 0..contents.len() {
            assert!(decode_index_block(&contents[..cut], end).is_err(), "{cut}");
            let _ = find(&contents[..cut], entries[cut % entries.len()].id());
        }
        // Every flipped bit is refused, or decodes to entries that are
        // still sorted and inside the records (a length or gap changed in
        // a way no checksum-free decoder can see; the block checksum does).
        for i in 0..contents.len() {
            for bit in 0..8 {
                let mut bad = contents.clone();
                bad[i] ^= 1 << bit;
                if let Ok(got) = decode_index_block(&bad, end) {
                    assert!(got.windows(2).all(|w| w[0].id() < w[1].id()));
                    for e in &got {
                        assert_eq!(find(&bad, e.id()).unwrap(), Some(*e));
                    }
                }
                let _ = find(&bad, entries[i % entries.len()].id());
            }
        }
        // Restarts that skip a group, or groups longer than the interval.
        let mut short = IndexBlockEncoder::default();
        for e in &entries[..20] {
            short.add(e);
        }
        let (mut bytes, _, _) = short.finish();
        let n = bytes.len();
        bytes[n - 4..].copy_from_slice(&1u32.to_le_bytes());
        assert!(decode_index_block(&bytes, end).is_err());
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
        let decoded = decode_top_index(&encode_top_index(&blocks), 100, end, 1).unwrap();
        assert_eq!(decoded[1].handle.offset, 100 + 13 + 4);
        let huge = [meta((7, 0), 13, 1 << 63), meta((7, 3), 14, 1 << 63)];
        for version in [1, 2] {
            assert!(decode_top_index(&encode_top_index(&huge), 100, end, version).is_err());
        }
        // At most one entry per four bytes in version 1, per two in 2.
        let full = [meta((7, 0), 13, 3), meta((7, 3), 14, 4)];
        assert!(decode_top_index(&encode_top_index(&full), 100, end, 1).is_err());
        assert!(decode_top_index(&encode_top_index(&full), 100, end, 2).is_ok());
        let over = [meta((7, 0), 13, 3), meta((7, 3), 14, 8)];
        assert!(decode_top_index(&encode_top_index(&over), 100, end, 2).is_err());
    }
}
