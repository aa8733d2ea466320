//! The value-references block of an sstable: for each logical value file
//! the table's entries point into, how many records they reference, the
//! bytes of those records, and which ordinals, as a roaring bitmap.
//!
//! The manifest keeps the count and bytes per (sstable, logical file), so a
//! Version knows each logical file's referenced bytes without I/O; GC reads
//! the bitmaps to learn which records are live. The byte layout is
//! specified in `docs/format/sstable.md` ("Value references block").
//!
//! Ordinals are limited to `u32` ([`MAX_ORDINAL`]): ordinals are dense from
//! 0 within one logical file, whose size is bounded by `value_file_size`,
//! and a record takes at least 14 bytes, so 2^32 records would be a logical
//! file of at least 56 GiB. Within that limit the 32-bit `RoaringBitmap`
//! serializes in the portable RoaringFormatSpec and supports run
//! containers, which a flush's dense runs of ordinals compress into a few
//! bytes; a handle beyond the limit is refused with a typed error.
//!
//! References are a set: adding a handle whose `(logical_file, ordinal)` is
//! already present changes nothing, so `count` equals the bitmap's
//! cardinality and `bytes` counts each record once, and a logical file's
//! referenced bytes can never exceed its record bytes. Two entries of one
//! table never share a handle (every write, including an older version a
//! snapshot keeps, has its own record; compaction copies handles, never
//! duplicates them), so this only matters if a bug repeats a handle: `add`
//! reports it, and garbage stays exact rather than going negative.
//!
//! The block is stored uncompressed (the bitmaps are already compressed)
//! behind the usual block trailer, whose masked CRC32C the reader checks on
//! every read; the encoding therefore carries no checksum of its own.

use std::collections::BTreeMap;

use roaring::RoaringBitmap;

use crate::base::coding::{put_varint64, DecodeError, Decoder};
use crate::base::FileNumber;
use crate::value_file::ValueHandle;

/// Metaindex name of the block. Written to disk: never change.
pub(crate) const META_VALUE_REFS: &[u8] = b"value.refs";

/// The only layout version this build writes and reads.
pub(crate) const VALUE_REFS_VERSION: u8 = 1;

/// Largest ordinal a value-references block can hold.
pub(crate) const MAX_ORDINAL: u64 = u32::MAX as u64;

/// Why a reference could not be recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ValueRefsError {
    /// A handle's ordinal exceeds [`MAX_ORDINAL`]; the value-file builder
    /// must start a new logical file before reaching it.
    #[error("ordinal {ordinal} of logical value file {file} exceeds the limit of {MAX_ORDINAL}")]
    OrdinalTooLarge { file: FileNumber, ordinal: u64 },
}

/// What a table references in one logical value file.
#[derive(Debug, Clone, Default, PartialEq)]
struct FileRefs {
    /// Equal to `ordinals.len()`; kept to check it against the block.
    count: u64,
    /// Sum of the handles' `len`: the record bytes these references keep
    /// live.
    bytes: u64,
    ordinals: RoaringBitmap,
}

/// The value references of one sstable.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ValueRefs {
    /// Sorted by file number, so encoding is deterministic.
    files: BTreeMap<FileNumber, FileRefs>,
}

impl ValueRefs {
    /// Records that the table references `handle`'s record. Returns whether
    /// it was new: `false` means the record was already referenced and
    /// nothing changed.
    pub(crate) fn add(&mut self, handle: &ValueHandle) -> Result<bool, ValueRefsError> {
        let ordinal =
            u32::try_from(handle.ordinal).map_err(|_| ValueRefsError::OrdinalTooLarge {
                file: handle.logical_file,
                ordinal: handle.ordinal,
            })?;
        let refs = self.files.entry(handle.logical_file).or_default();
        if !refs.ordinals.insert(ordinal) {
            return Ok(false);
        }
        refs.count += 1;
        refs.bytes += u64::from(handle.len);
        Ok(true)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// `(logical file, count, bytes)` for each referenced logical file, in
    /// file order: what the manifest stores for the table.
    pub(crate) fn per_file(&self) -> impl Iterator<Item = (FileNumber, u64, u64)> + '_ {
        self.files.iter().map(|(&f, r)| (f, r.count, r.bytes))
    }

    /// Whether the table references record `ordinal` of `file`.
    pub(crate) fn contains(&self, file: FileNumber, ordinal: u64) -> bool {
        match (self.files.get(&file), u32::try_from(ordinal)) {
            (Some(refs), Ok(ordinal)) => refs.ordinals.contains(ordinal),
            _ => false,
        }
    }

    /// The referenced ordinals of `file`, if any: GC takes the union of
    /// these over every table referencing the files it collects.
    pub(crate) fn ordinals(&self, file: FileNumber) -> Option<&RoaringBitmap> {
        self.files.get(&file).map(|r| &r.ordinals)
    }

    /// `u8 version | varint num_files | file*`, each file `varint
    /// logical_file | varint count | varint bytes | varint bitmap_len |
    /// bitmap`, files in ascending order and each bitmap in its canonical
    /// form (see [`canonical_bitmap`]), so equal contents encode equally.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = vec![VALUE_REFS_VERSION];
        put_varint64(&mut out, self.files.len() as u64);
        let mut bitmap = Vec::new();
        for (file, refs) in &self.files {
            put_varint64(&mut out, file.0);
            put_varint64(&mut out, refs.count);
            put_varint64(&mut out, refs.bytes);
            bitmap.clear();
            canonical_bitmap(&refs.ordinals, &mut bitmap);
            put_varint64(&mut out, bitmap.len() as u64);
            out.extend_from_slice(&bitmap);
        }
        out
    }

    /// Decodes a block written by [`ValueRefs::encode`]. Refuses anything
    /// `encode` would not have written byte for byte, so every accepted
    /// block re-encodes identically.
    pub(crate) fn decode(src: &[u8]) -> Result<ValueRefs, DecodeError> {
        let mut d = Decoder::new(src);
        if d.u8()? != VALUE_REFS_VERSION {
            return Err(DecodeError("unsupported value-references block version"));
        }
        // Not used to preallocate: a damaged count must not allocate.
        let num_files = d.varint64()?;
        let mut refs = ValueRefs::default();
        let mut previous: Option<FileNumber> = None;
        for _ in 0..num_files {
            let file = FileNumber(d.varint64()?);
            if previous.is_some_and(|p| file <= p) {
                return Err(DecodeError("value-reference files not strictly ascending"));
            }
            previous = Some(file);
            let count = d.varint64()?;
            let bytes = d.varint64()?;
            let ordinals = RoaringBitmap::deserialize_from(d.length_prefixed()?)
                .map_err(|_| DecodeError("invalid roaring bitmap of value references"))?;
            if ordinals.is_empty() {
                return Err(DecodeError("logical value file with no references"));
            }
            if count != ordinals.len() {
                return Err(DecodeError("reference count differs from its bitmap"));
            }
            if bytes > count.saturating_mul(u64::from(u32::MAX)) {
                return Err(DecodeError("more referenced bytes than records can hold"));
            }
            refs.files.insert(
                file,
                FileRefs {
                    count,
                    bytes,
                    ordinals,
                },
            );
        }
        if !d.is_empty() {
            return Err(DecodeError("trailing bytes after value references"));
        }
        // Catches non-minimal varints and bitmaps that are valid but not in
        // canonical form (another container choice, a wrong cardinality in a
        // run container's description), which would not re-encode equally.
        if refs.encode() != src {
            return Err(DecodeError("value references not in canonical encoding"));
        }
        Ok(refs)
    }
}

/// Appends `ordinals` in the portable roaring format, in a form that
/// depends only on the set: rebuilt from its values (arrays up to 4096
/// values per container, bitmaps above), then each container turned into
/// runs where that is strictly smaller. `optimize` alone would depend on
/// history, as it keeps a run container that ties with an array.
fn canonical_bitmap(ordinals: &RoaringBitmap, out: &mut Vec<u8>) {
    let mut canonical: RoaringBitmap = ordinals.iter().collect();
    canonical.optimize();
    out.reserve(canonical.serialized_size());
    // Writing to a Vec cannot fail, and roaring only fails on writer errors.
    let _ = canonical.serialize_into(out);
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn handle(file: u64, ordinal: u64, len: u32) -> ValueHandle {
        ValueHandle {
            logical_file: FileNumber(file),
            ordinal,
            offset: ordinal * 100,
            len,
        }
    }

    /// Handles of several files: a dense run crossing container borders
    /// (runs), a sparse spread up to the ordinal limit (arrays), a dense
    /// random half of a container (bitmap), and a lone ordinal.
    fn sample_handles() -> Vec<ValueHandle> {
        let mut rng = StdRng::seed_from_u64(4);
        let mut v = Vec::new();
        for o in 60_000..140_000u64 {
            v.push(handle(7, o, 1000 + (o % 17) as u32));
        }
        for i in 0..500u64 {
            v.push(handle(12, i * 8_589_869 % (MAX_ORDINAL + 1), 600));
        }
        v.push(handle(12, MAX_ORDINAL, u32::MAX));
        for o in 0..65_536u64 {
            if rng.gen_bool(0.5) {
                v.push(handle(3, 1 << 20 | o, rng.gen_range(20..5000)));
            }
        }
        v.push(handle(u64::MAX, 0, 14));
        v.push(handle(1 << 40, 123_456, 14));
        v
    }

    fn build(handles: &[ValueHandle]) -> ValueRefs {
        let mut refs = ValueRefs::default();
        for h in handles {
            assert!(refs.add(h).unwrap(), "{h:?} added twice");
        }
        refs
    }

    #[test]
    fn round_trip_per_file_and_contains() {
        let handles = sample_handles();
        let refs = build(&handles);

        let mut expected: BTreeMap<FileNumber, (u64, u64)> = BTreeMap::new();
        for h in &handles {
            let e = expected.entry(h.logical_file).or_default();
            e.0 += 1;
            e.1 += u64::from(h.len);
        }
        let per_file: Vec<_> = refs.per_file().collect();
        let want: Vec<_> = expected.iter().map(|(&f, &(c, b))| (f, c, b)).collect();
        assert_eq!(per_file, want);
        assert_eq!(per_file.len(), 5);

        let enc = refs.encode();
        let back = ValueRefs::decode(&enc).unwrap();
        assert_eq!(back, refs);
        assert_eq!(back.per_file().collect::<Vec<_>>(), want);
        assert_eq!(back.encode(), enc);
        for h in &handles {
            assert!(back.contains(h.logical_file, h.ordinal), "{h:?} lost");
        }
        assert!(!back.contains(FileNumber(7), 59_999));
        assert!(!back.contains(FileNumber(7), 140_000));
        assert!(!back.contains(FileNumber(12), 1));
        assert!(!back.contains(FileNumber(8), 60_000));
        assert!(!back.contains(FileNumber(12), MAX_ORDINAL + 1));
        // The dense run of 80,000 ordinals is stored as runs, not as bits.
        assert!(enc.len() < 70_000, "encoding takes {} bytes", enc.len());
    }

    #[test]
    fn empty_round_trips() {
        let refs = ValueRefs::default();
        assert!(refs.is_empty());
        let enc = refs.encode();
        assert_eq!(enc, vec![VALUE_REFS_VERSION, 0]);
        assert_eq!(ValueRefs::decode(&enc).unwrap(), refs);
    }

    #[test]
    fn a_repeated_handle_is_counted_once() {
        let mut refs = ValueRefs::default();
        assert_eq!(refs.add(&handle(5, 9, 100)), Ok(true));
        assert_eq!(refs.add(&handle(5, 9, 100)), Ok(false));
        assert_eq!(refs.add(&handle(5, 10, 50)), Ok(true));
        assert_eq!(
            refs.per_file().collect::<Vec<_>>(),
            vec![(FileNumber(5), 2, 150)]
        );
    }

    #[test]
    fn ordinal_beyond_the_limit_is_a_typed_error() {
        let mut refs = ValueRefs::default();
        let err = refs.add(&handle(5, MAX_ORDINAL + 1, 100)).unwrap_err();
        assert_eq!(
            err,
            ValueRefsError::OrdinalTooLarge {
                file: FileNumber(5),
                ordinal: MAX_ORDINAL + 1
            }
        );
        assert!(refs.is_empty());
    }

    #[test]
    fn encoding_is_independent_of_order_and_history() {
        let handles = sample_handles();
        let enc = build(&handles).encode();
        let mut rng = StdRng::seed_from_u64(44);
        for _ in 0..3 {
            let mut shuffled = handles.clone();
            shuffled.shuffle(&mut rng);
            assert_eq!(build(&shuffled).encode(), enc);
        }
        // A decoded bitmap holds run containers; re-encoding it, or adding
        // to it what it already holds, changes nothing.
        let mut back = ValueRefs::decode(&enc).unwrap();
        assert!(!back.add(&handles[0]).unwrap());
        assert_eq!(back.encode(), enc);
    }

    #[test]
    fn ordinals_per_file() {
        let a = build(&[handle(1, 1, 10), handle(1, 2, 10), handle(3, 0, 1)]);
        assert_eq!(
            a.ordinals(FileNumber(1))
                .map(|b| b.iter().collect::<Vec<_>>()),
            Some(vec![1, 2])
        );
        assert!(a.ordinals(FileNumber(4)).is_none());
    }

    /// Decoding `bytes` returns an error or a value that re-encodes to
    /// exactly `bytes`; a panic fails the test.
    fn check_decode(bytes: &[u8]) -> bool {
        match ValueRefs::decode(bytes) {
            Ok(refs) => {
                assert_eq!(refs.encode(), bytes, "accepted a non-canonical block");
                true
            }
            Err(_) => false,
        }
    }

    fn small_sample() -> Vec<u8> {
        let mut handles: Vec<_> = (0..300).map(|o| handle(9, o, 700)).collect();
        handles.extend((0..40).map(|i| handle(11, i * 977, 900 + i as u32)));
        handles.extend((0..5000).map(|o| handle(13, o * 2, 520)));
        handles.push(handle(20, MAX_ORDINAL, 64));
        build(&handles).encode()
    }

    #[test]
    fn every_truncation_and_flipped_byte_is_an_error_or_re_encodes_identically() {
        for enc in [small_sample(), build(&sample_handles()).encode()] {
            for len in 0..enc.len() {
                assert!(!check_decode(&enc[..len]), "truncation to {len} accepted");
            }
            let mut extended = enc.clone();
            extended.push(0);
            assert!(!check_decode(&extended));
        }
        let enc = small_sample();
        for i in 0..enc.len() {
            for bit in 0..8 {
                let mut bad = enc.clone();
                bad[i] ^= 1 << bit;
                check_decode(&bad);
            }
        }
    }

    #[test]
    fn random_and_mutated_bytes_never_panic() {
        let mut rng = StdRng::seed_from_u64(0xbad);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..64);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if let Some(b) = bytes.first_mut() {
                *b = VALUE_REFS_VERSION;
            }
            check_decode(&bytes);
        }
        let enc = small_sample();
        for _ in 0..5_000 {
            let mut bad = enc.clone();
            for _ in 0..rng.gen_range(1..6) {
                let i = rng.gen_range(0..bad.len());
                bad[i] = rng.gen();
            }
            check_decode(&bad);
        }
    }

    #[test]
    fn decode_refuses_inconsistent_blocks() {
        let one = build(&[handle(4, 1, 100), handle(4, 2, 100)]).encode();
        assert!(ValueRefs::decode(&one).is_ok());
        // Another version.
        let mut v = one.clone();
        v[0] = 2;
        assert!(ValueRefs::decode(&v).is_err());
        // Count (at byte 3) disagreeing with the bitmap.
        let mut c = one.clone();
        assert_eq!(c[3], 2);
        c[3] = 3;
        assert!(ValueRefs::decode(&c).is_err());
        // Files out of order, and a file listed twice.
        let mut two = vec![VALUE_REFS_VERSION, 2];
        let a = build(&[handle(5, 1, 10)]).encode();
        let b = build(&[handle(4, 1, 10)]).encode();
        two.extend_from_slice(&a[2..]);
        two.extend_from_slice(&b[2..]);
        assert!(ValueRefs::decode(&two).is_err());
        let mut twice = vec![VALUE_REFS_VERSION, 2];
        twice.extend_from_slice(&a[2..]);
        twice.extend_from_slice(&a[2..]);
        assert!(ValueRefs::decode(&twice).is_err());
        // An empty bitmap with a count of 0.
        let mut empty = vec![VALUE_REFS_VERSION, 1, 4, 0, 0];
        let mut bitmap = Vec::new();
        canonical_bitmap(&RoaringBitmap::new(), &mut bitmap);
        put_varint64(&mut empty, bitmap.len() as u64);
        empty.extend_from_slice(&bitmap);
        assert!(ValueRefs::decode(&empty).is_err());
    }
}
