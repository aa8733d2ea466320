//! Entry points of the fuzz targets in `fuzz/` (cargo-fuzz): one function
//! per decoder of on-disk bytes, driving the crate's own reader over
//! everything it decodes, and the seed inputs the crate's own writers
//! produce. Compiled only with the `fuzzing` feature; not part of the API.
//!
//! A target takes any bytes. Errors are expected; what must never happen is
//! a panic, a hang, an allocation sized by a damaged length, or an overflow
//! (fuzz builds have debug assertions on). Checksums are ignored while a
//! target runs: a fuzzer cannot forge them, and the decoding behind them
//! must also stand what a writer's bug could checksum. Each target returns
//! how many items it decoded (entries, records, batches), so that tests can
//! check that the seeds reach deep.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use roaring::RoaringBitmap;

use crate::base::checksum::IGNORE_CHECKSUMS;
use crate::base::coding::put_length_prefixed;
use crate::base::compression::{compress, decompress, COMPRESSION_NONE};
use crate::base::expiry;
use crate::base::key::{self, MAX_SEQ};
use crate::base::limits::{MAX_VALUE_SIZE, NUM_LEVELS};
use crate::base::Decoder;
use crate::base::{filename, FileNumber, InternalIterator, InternalKey, SeqNo, ValueKind};
use crate::compaction::picker::{Busy, PickerOptions};
use crate::delta;
use crate::gc::picker::GcPickerOptions;
use crate::iter::expiry::ExpiryView;
use crate::manifest::{
    FileMeta, HostedLogical, TableExpiry, TableValueRefs, ValueFileMeta, Version,
};
use crate::manifest::{VersionEdit, FORMAT_VERSION};
use crate::memtable::MemTable;
use crate::merge::{Append, FieldUpdate, Max, MergeOperator, Put, U64Add};
use crate::prefix::{FixedPrefix, PrefixExtractor};
use crate::sstable::value_refs::ValueRefs;
use crate::sstable::{
    new_block_cache, Block, BlockBuilder, BloomBuilder, BloomFilter, KeyOrder, Table, TableBuilder,
    TableOptions, TableProperties,
};
use crate::value_file::{
    decode_index_block, decode_record, decode_v1_index_block, find, record_from_raw, record_header,
    IndexBlockEncoder, IndexEntry, Origin, ValueFile, ValueFileBuilder, ValueFileOptions,
    ValueHandle, ValueRecord,
};
use crate::value_log::scan_bytes;
use crate::vfs::{self, FileOptions, Fs, MemFs};
use crate::wal::{self, Previous, WalWriter};
use crate::{compaction, gc, inspect, Compression, Options, Result, WriteBatch};

/// A fuzz target: bytes in, how many items they decoded to out.
pub type Target = fn(&[u8]) -> usize;

/// Inputs per target name.
pub type Seeds = Vec<(&'static str, Vec<Vec<u8>>)>;

/// Every target by name: `fuzz/fuzz_targets/<name>.rs` calls it and
/// `fuzz/corpus/<name>/` holds its seeds.
pub const TARGETS: [(&str, Target); 15] = [
    ("block", block),
    ("sstable", sstable),
    ("value_record", value_record),
    ("value_file", value_file),
    ("wal", wal),
    ("version_edit", version_edit),
    ("write_batch", write_batch),
    ("value_refs", value_refs),
    ("value_handle", value_handle),
    ("value_log", value_log),
    ("merge_operands", merge_operands),
    ("delta_file", delta_file),
    ("log_frames", log_frames),
    ("log_store", log_store),
    ("log_checkpoint", log_checkpoint),
];

/// Where the file-level targets put their input, on a fresh [`MemFs`].
const DIR: &str = "/fuzz";
const NUMBER: FileNumber = FileNumber(7);

/// Keys a walk keeps for seeks and lookups, and ordinals checked per
/// bitmap: bounds the work per input.
const MAX_PROBES: usize = 32;

const CACHE_BYTES: usize = 1 << 20;

/// A compaction's readahead window, small enough to hold a few blocks of
/// a seed.
const SCAN_READAHEAD_BYTES: usize = 1 << 10;

/// End of the records region given to a record index block decoded alone.
const INDEX_RECORDS_END: u64 = 1 << 32;

/// Makes every checksum match on this thread while it lives.
struct ChecksumsIgnored;

impl ChecksumsIgnored {
    fn new() -> Self {
        IGNORE_CHECKSUMS.with(|c| c.set(true));
        ChecksumsIgnored
    }
}

impl Drop for ChecksumsIgnored {
    fn drop(&mut self) {
        IGNORE_CHECKSUMS.with(|c| c.set(false));
    }
}

/// The bytes as a data, index, metaindex or properties block (both key
/// orders: forward, backward, seeks) and as a bloom filter.
pub fn block(data: &[u8]) -> usize {
    let mut decoded = 0;
    if let Ok(filter) = BloomFilter::new(data.to_vec()) {
        filter.may_contain(b"key");
        decoded += 1;
    }
    let Ok(block) = Block::new(data.to_vec()) else {
        return decoded;
    };
    let block = Arc::new(block);
    decoded += 1;
    if TableProperties::decode(&block).is_ok() {
        decoded += 1;
    }
    for order in [KeyOrder::Internal, KeyOrder::Bytewise] {
        let mut it = block.iter(order);
        let mut keys = Vec::new();
        let mut r = it.seek_to_first();
        while r.is_ok() && it.valid() {
            decoded += 1;
            if keys.len() < MAX_PROBES {
                keys.push(it.key().to_vec());
            }
            r = it.next();
        }
        let mut r = it.seek_to_last();
        while r.is_ok() && it.valid() {
            r = it.prev();
        }
        for k in &keys {
            let _ = it.seek(k);
            if order == KeyOrder::Internal {
                let _ = it.seek(InternalKey::for_seek(key::user_key(k), MAX_SEQ).encoded());
            }
        }
    }
    decoded
}

/// The bytes as a whole sstable: opened through the table reader (footer,
/// metaindex, properties), verified, its value-references block walked,
/// iterated both ways through the cache and once as a compaction reads it,
/// and looked up by the keys it holds.
pub fn sstable(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    let fs = MemFs::new();
    let path = filename::sstable(Path::new(DIR), NUMBER);
    let Ok(file) = put_file(&fs, &path, data).and_then(|()| fs.open(&path, FileOptions::default()))
    else {
        return 0;
    };
    let cache = Arc::new(new_block_cache(CACHE_BYTES));
    let Ok(table) = Table::open(file, path.clone(), NUMBER, cache) else {
        return 0;
    };
    let table = Arc::new(table);
    let mut decoded = 1;
    if table.verify().is_ok() {
        decoded += 1;
    }
    if let Ok(refs) = table.value_refs() {
        decoded += walk_value_refs(&refs);
    }
    let (entries, keys) = walk(&mut table.iter());
    decoded += entries;
    let mut it = table.iter();
    for k in &keys {
        let user_key = key::user_key(k);
        let _ = it.seek(k);
        let _ = it.seek_for_prev(k);
        let _ = table.get_versions(user_key, k, &mut |_, _| false);
        let every = InternalKey::for_seek(user_key, MAX_SEQ);
        let _ = table.get_versions(user_key, every.encoded(), &mut |_, _| true);
        // Prefix filters, as a confined iterator consults them.
        if let Some(prefix) = user_key.get(..FUZZ_PREFIX_LEN) {
            let _ = table.may_contain_prefix(fuzz_prefix().name(), prefix);
        }
    }
    decoded += walk(&mut table.scan_iter(SCAN_READAHEAD_BYTES)).0;
    // Expiring entries as reads see them, and as a compaction does.
    decoded += walk(&mut ExpiryView::new(table.iter(), EXPIRY_NOW)).0;
    let mut it = table.iter();
    if it.seek_to_first().is_ok() {
        if let Ok(mut view) = ExpiryView::for_compaction(&mut it, EXPIRY_NOW) {
            while view.valid() && view.next().is_ok() {}
            decoded += view.expired().entries as usize;
        }
    }
    decoded + inspect_sstable(&fs, &path)
}

/// The table as `cleave dump-sst` reads it.
fn inspect_sstable(fs: &MemFs, path: &Path) -> usize {
    let Ok(table) = inspect::SstableFile::open(fs, path) else {
        return 0;
    };
    let mut decoded = table.properties().len();
    decoded += table.data_blocks().map_or(0, |b| b.len());
    decoded += table.value_refs().map_or(0, |r| r.len());
    decoded + table.entries().take_while(Result::is_ok).count()
}

/// The time expiry is measured against in the fuzz targets: the seeds'
/// expiries lie on both sides of it.
const EXPIRY_NOW: u64 = 1_800_000_000_000;

/// The prefix extractor the seed tables' filters hold prefixes of.
const FUZZ_PREFIX_LEN: usize = 4;

fn fuzz_prefix() -> FixedPrefix {
    FixedPrefix::new(FUZZ_PREFIX_LEN)
}

/// Every entry forward, then backward; the first keys, for lookups.
fn walk(it: &mut dyn InternalIterator) -> (usize, Vec<Vec<u8>>) {
    let (mut entries, mut keys) = (0, Vec::new());
    let mut r = it.seek_to_first();
    while r.is_ok() && it.valid() {
        entries += 1;
        if keys.len() < MAX_PROBES {
            keys.push(it.key().to_vec());
        }
        r = it.next();
    }
    let mut r = it.seek_to_last();
    while r.is_ok() && it.valid() {
        r = it.prev();
    }
    (entries, keys)
}

/// As GC reads value references: the union of each file's ordinals, and
/// membership of some of them.
fn walk_value_refs(refs: &ValueRefs) -> usize {
    let mut union = RoaringBitmap::new();
    let mut files = 0;
    for (file, count, _bytes) in refs.per_file() {
        let Some(ordinals) = refs.ordinals(file) else {
            continue;
        };
        assert_eq!(ordinals.len(), count, "count differs from the bitmap");
        union |= ordinals;
        for ordinal in ordinals.iter().take(MAX_PROBES).chain(ordinals.max()) {
            assert!(refs.contains(file, u64::from(ordinal)));
        }
        files += 1;
    }
    files
}

/// The bytes as one value-file record (checked and decompressed as the
/// reader does) and as one record index block of either version: a
/// version-2 block that decodes must find each of its entries in place
/// (and nothing between them), and a version-1 block must convert to a
/// version-2 block of the same entries.
pub fn value_record(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    let mut decoded = 0;
    if let Ok(r) = decode_record(data) {
        if decompress(r.stored_value.to_vec(), r.codec, MAX_VALUE_SIZE).is_ok() {
            decoded += 1;
        }
    }
    if let Ok(entries) = decode_index_block(data, INDEX_RECORDS_END) {
        for e in entries.iter().take(MAX_PROBES) {
            assert_eq!(find(data, e.id()), Ok(Some(*e)), "entry not found in place");
            let next = (e.logical_file, e.ordinal.saturating_add(1));
            let held = entries.binary_search_by_key(&next, IndexEntry::id).ok();
            let expected = held.and_then(|i| entries.get(i)).copied();
            assert_eq!(
                find(data, next),
                Ok(expected),
                "search disagrees with decode"
            );
        }
        decoded += entries.len();
    }
    // Whatever the bytes, a search returns, and never a wrong id.
    if let Ok(Some(e)) = find(data, (3, 1)) {
        assert_eq!(e.id(), (3, 1));
    }
    // An empty version-1 block decodes, but no reader takes one: the
    // top-level index refuses a block without entries, and so does the
    // version-2 decoder.
    if let Some(entries) = decode_v1_index_block(data, INDEX_RECORDS_END)
        .ok()
        .filter(|e| !e.is_empty())
    {
        let mut index = IndexBlockEncoder::default();
        for e in &entries {
            index.add(e);
        }
        let converted = index.finish().0;
        assert_eq!(
            decode_index_block(&converted, INDEX_RECORDS_END),
            Ok(entries.clone())
        );
        decoded += entries.len();
    }
    decoded
}

/// The bytes as a whole value file: opened (footer, properties, top-level
/// index), verified, its live runs read as GC reads them, each record read
/// again as a handle reads it, and lookups through the record index.
pub fn value_file(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    let fs = MemFs::new();
    let path = filename::value_file(Path::new(DIR), NUMBER);
    if put_file(&fs, &path, data).is_err() {
        return 0;
    }
    let cache = Some(Arc::new(new_block_cache(CACHE_BYTES)));
    let Ok(vf) = ValueFile::open(&fs, path.clone(), NUMBER, FileOptions::default(), cache) else {
        return 0;
    };
    let mut decoded = 1;
    if vf.verify().is_ok() {
        decoded += 1;
    }
    if let Ok(runs) = vf.live_runs(&|_, ordinal| ordinal % 3 != 1, 64 << 10) {
        for run in runs {
            let Ok(records) = vf.read_run(&run) else {
                continue;
            };
            for (e, r) in run.iter().zip(&records) {
                decoded += 1;
                let handle = ValueHandle {
                    logical_file: FileNumber(e.logical_file),
                    ordinal: e.ordinal,
                    offset: e.offset,
                    len: e.len,
                };
                let _ = vf
                    .place(&handle)
                    .and_then(|(offset, len)| vf.read_placed(offset, len, &r.key, r.seq));
            }
        }
    }
    for h in &vf.properties().hosted {
        let last = h.num_records.saturating_sub(1);
        for ordinal in [0, last / 2, last, h.num_records] {
            let _ = vf.locate(h.logical_file, ordinal);
        }
    }
    let _ = vf.read_records_span(0, SCAN_READAHEAD_BYTES);
    // As `cleave dump-value-file` reads it, sealed or not.
    if let Ok(dump) = inspect::ValueFileDump::open(&fs, &path) {
        decoded += dump.properties(&|k| format!("{k:?}")).len();
        decoded += dump.record_index().map_or(0, |i| i.len());
        decoded += dump.records().take_while(Result::is_ok).count();
    }
    decoded
}

/// The bytes as WAL file 7, read to its end by the WAL reader and replayed
/// as `Db::open` does.
pub fn wal(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    if put_file(&fs, &filename::wal(dir, NUMBER), data).is_err() {
        return 0;
    }
    let Ok(contents) = wal::read(&fs, dir, NUMBER) else {
        return 0;
    };
    for (seq, batch) in &contents.batches {
        replay(*seq, batch);
    }
    // As `cleave dump-wal` reads it.
    let dumped = inspect::wal(&fs, &filename::wal(dir, NUMBER)).map_or(0, |d| d.batches.len());
    assert_eq!(
        dumped,
        contents.batches.len(),
        "dump-wal disagrees with recovery"
    );
    contents.batches.len()
}

/// The bytes as a log store's data file and metalog file (frames, their
/// operations, a seal's reverse index), as an index group body and as raw
/// datalog operations.
pub fn log_frames(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    crate::log_store::fuzz::frames(data)
}

/// The bytes as a log store's metalog and data file (a two-byte length
/// splits them), opened, read and written to.
pub fn log_store(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    crate::log_store::fuzz::store(data)
}

/// The bytes as a log store's checkpoint, decoded and opened.
pub fn log_checkpoint(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    crate::log_store::fuzz::checkpoint(data)
}

/// WAL replay: the entries of `batch` added to a memtable, which is then
/// read back in order.
fn replay(seq: SeqNo, batch: &WriteBatch) {
    let mem = Arc::new(MemTable::new());
    let mut splice = mem.splice();
    for (s, e) in (seq..).zip(batch.entries()) {
        let Ok(e) = e else { break };
        mem.add_with(s, e.kind, e.key, e.value, &mut splice);
    }
    let mut it = mem.iter();
    let mut r = it.seek_to_first();
    while r.is_ok() && it.valid() {
        std::hint::black_box((it.key(), it.value()));
        r = it.next();
    }
}

/// The bytes as one manifest record's VersionEdit: decoded, re-encoded
/// (which must give the same edit) and applied to an empty Version, of
/// which the engine then computes level sizes, garbage, and the compaction
/// and GC pickers' plans.
pub fn version_edit(data: &[u8]) -> usize {
    // As `cleave dump-manifest` reads a manifest of this one edit.
    let fs = MemFs::new();
    let path = filename::manifest(Path::new(DIR), NUMBER);
    let mut framed = Vec::new();
    crate::record::encode(&mut framed, data);
    if put_file(&fs, &path, &framed).is_ok() {
        let _ = inspect::manifest(&fs, &path, &|k| format!("{k:?}"));
    }
    let Ok(edit) = VersionEdit::decode(data) else {
        return 0;
    };
    let mut encoded = Vec::new();
    edit.encode(&mut encoded);
    assert_eq!(VersionEdit::decode(&encoded), Ok(edit.clone()));
    let Ok(v) = Version::default().apply(edit) else {
        return 1;
    };
    for level in 0..NUM_LEVELS {
        v.level_bytes(level);
        v.level_compensated_bytes(level);
        v.level_value_bytes(level);
    }
    for f in v.value_files() {
        v.garbage_bytes(f);
    }
    let opts = Options::default();
    let mut picker = PickerOptions::from(&opts);
    for dynamic in [true, false] {
        picker.dynamic = dynamic;
        compaction::picker::pick(&v, &picker, &Busy::default());
    }
    for max_live_bytes in [u64::MAX, opts.value_file_size] {
        for leave_expiring_until in [0, EXPIRY_NOW] {
            let gc = GcPickerOptions {
                garbage_ratio: opts.gc_garbage_ratio,
                value_file_size: opts.value_file_size,
                max_live_bytes,
                leave_expiring_until,
            };
            gc::picker::pick(&v, &gc, &HashSet::new());
        }
    }
    2
}

/// The bytes as a WAL payload: decoded, every entry read (a decoded batch
/// has no bad entry), checked against the limits and replayed.
pub fn write_batch(data: &[u8]) -> usize {
    let Ok((seq, batch)) = WriteBatch::decode(data) else {
        return 0;
    };
    let mut entries = 0;
    for e in batch.entries() {
        assert!(e.is_ok(), "a decoded batch holds a bad entry: {e:?}");
        entries += 1;
    }
    assert_eq!(entries, batch.len());
    let _ = batch.validate();
    replay(seq, &batch);
    entries
}

/// The built-in merge operator a `merge_operands` input names.
fn builtin_operator(which: u8) -> Box<dyn MergeOperator> {
    match which % 5 {
        0 => Box::new(U64Add),
        1 => Box::new(Append::new(b",")),
        2 => Box::new(FieldUpdate::new(4, 3)),
        3 => Box::new(Put),
        _ => Box::new(Max),
    }
}

/// Operands a `merge_operands` input holds at most.
const MAX_FUZZ_OPERANDS: usize = 64;

/// The bytes as `u8 operator | u8 has_base | length-prefixed pieces` (the
/// first piece the base value if `has_base` is odd, the rest merge
/// operands) run through a built-in merge operator: nothing panics on any
/// bytes, and where every operand is one the operator accepts, folding
/// them by partial merges first merges to the same result.
pub fn merge_operands(data: &[u8]) -> usize {
    let mut d = Decoder::new(data);
    let (Ok(which), Ok(has_base)) = (d.u8(), d.u8()) else {
        return 0;
    };
    let op = builtin_operator(which);
    let mut pieces = Vec::new();
    while let Ok(p) = d.length_prefixed() {
        pieces.push(p);
        if pieces.len() > MAX_FUZZ_OPERANDS {
            break;
        }
    }
    let (base, operands) = match pieces.split_first() {
        Some((base, rest)) if has_base % 2 == 1 => (Some(*base), rest),
        _ => (None, &pieces[..]),
    };
    if operands.is_empty() {
        return 0;
    }
    let whole = op.full_merge(b"k", base, operands);
    if operands.iter().all(|o| op.check_operand(o).is_ok()) {
        let mut folded: Vec<Vec<u8>> = Vec::new();
        for o in operands {
            if let Some(last) = folded.last_mut() {
                if let Some(combined) = op.partial_merge(b"k", last, o) {
                    *last = combined;
                    continue;
                }
            }
            folded.push(o.to_vec());
        }
        let refs: Vec<&[u8]> = folded.iter().map(Vec::as_slice).collect();
        assert_eq!(
            op.full_merge(b"k", base, &refs),
            whole,
            "{}: partial merges change the result",
            op.name()
        );
    }
    operands.len()
}

/// The bytes as an sstable's value-references block, walked as GC does.
pub fn value_refs(data: &[u8]) -> usize {
    ValueRefs::decode(data).map_or(0, |refs| 1 + walk_value_refs(&refs))
}

/// The bytes as the value of a `ValueRef` entry: decoded, re-encoded (the
/// same handle) and recorded as a table's value references record it.
pub fn value_handle(data: &[u8]) -> usize {
    let Ok(h) = ValueHandle::decode(data) else {
        return 0;
    };
    assert_eq!(ValueHandle::decode(&encode_handle(&h)), Ok(h));
    let _ = ValueRefs::default().add(&h);
    1
}

fn put_file(fs: &MemFs, path: &Path, data: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs.create_dir_all(dir)?;
    }
    fs.create(path, FileOptions::default())?.append(data)
}

/// The bytes as a value log that was never sealed: scanned as an open
/// scans one, up to its first bad record, and each record found decoded
/// (and decompressed) as the sealed copy recovery writes reads it.
pub fn value_log(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    let places = scan_bytes(data);
    let mut end = 0u64;
    for (ordinal, &(offset, len)) in places.iter().enumerate() {
        assert_eq!(offset, end, "a scan's records lie back to back");
        end = offset + u64::from(len);
        let Some(raw) = data.get(offset as usize..end as usize) else {
            panic!("a scan found a record past the input");
        };
        let raw = raw.to_vec();
        let _ = record_from_raw(Path::new(DIR), offset, NUMBER, ordinal as u64, raw);
    }
    // As `cleave dump-value-file` reads an unsealed log: the same records
    // (or an error, where one fails to decode).
    let fs = MemFs::new();
    let path = filename::value_file(Path::new(DIR), NUMBER);
    if put_file(&fs, &path, data).is_ok() {
        if let Ok(records) = inspect::unsealed_value_log(&fs, &path) {
            assert_eq!(
                records.len(),
                places.len(),
                "dump-value-file disagrees with a scan"
            );
        }
    }
    places.len()
}

/// The bytes as a delta file: the header checked, then block after block
/// decoded as a read decodes them, each key's records looked up as a
/// read sees them at each of their sequence numbers, and the records
/// garbage collected as a flush does (under a snapshot in their midst),
/// which must leave them in chunk order.
pub fn delta_file(data: &[u8]) -> usize {
    let _checksums = ChecksumsIgnored::new();
    let path = Path::new(DIR);
    if delta::format::check_header(path, data).is_err() {
        return 0;
    }
    let body = &data[delta::format::HEADER_LEN..];
    let Ok(blocks) = delta::format::split_chunk(path, delta::format::HEADER_LEN as u64, body)
    else {
        return 0;
    };
    let op: Arc<dyn MergeOperator> = Arc::new(U64Add);
    let mut decoded = 0;
    for (offset, block) in blocks {
        let Ok(records) = delta::format::decode_block(path, offset, block) else {
            break;
        };
        decoded += records.len();
        for r in records.iter().take(MAX_PROBES) {
            let of_key = delta::of_key(&records, &r.key);
            assert!(!of_key.is_empty());
            std::hint::black_box(delta::visible(of_key, r.seq).count());
        }
        let snapshot = records.get(records.len() / 2).map_or(0, |r| r.seq);
        let live = delta::gc::Collector::new(&[snapshot], Some(&op)).collect(records, &|_| false);
        assert!(live
            .windows(2)
            .all(|w| delta::format::order(&w[0], &w[1]).is_lt()));
    }
    decoded
}

// ------------------------------------------------------------------ seeds

/// Seed inputs per target, written by the crate's own builders: what
/// `fuzz/corpus/` holds (see `write_seed_corpus` in the tests below).
pub fn seeds() -> Result<Seeds> {
    let mut seeds = vec![
        ("block", block_seeds()),
        ("sstable", sstable_seeds()?),
        ("value_record", value_record_seeds()),
        ("value_file", value_file_seeds()?),
        ("wal", wal_seeds()?),
        ("version_edit", version_edit_seeds()),
        ("write_batch", write_batch_seeds()),
        ("value_refs", value_refs_seeds()),
        ("value_handle", value_handle_seeds()),
        ("value_log", value_log_seeds()?),
        ("merge_operands", merge_operands_seeds()),
        ("delta_file", delta_file_seeds()?),
    ];
    seeds.extend(crate::log_store::fuzz::seeds()?);
    Ok(seeds)
}

const CODECS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];

fn encode_handle(h: &ValueHandle) -> Vec<u8> {
    let mut out = Vec::new();
    h.encode(&mut out);
    out
}

fn handle(file: u64, ordinal: u64) -> ValueHandle {
    ValueHandle {
        logical_file: FileNumber(file),
        ordinal,
        offset: ordinal * 40,
        len: 40,
    }
}

/// Sorted internal keys with values: several versions of a user key,
/// deletions, empty values and, with `refs`, `ValueRef` entries.
fn entries(n: u64, refs: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = Vec::new();
    for i in 0..n {
        let user = format!("key{:04}", i / 2);
        let seq = 1000 - i;
        let (kind, value) = match i % 7 {
            0 => (ValueKind::Deletion, Vec::new()),
            1 if refs => (ValueKind::ValueRef, encode_handle(&handle(3, i))),
            // Expiring entries: the table is of version 2, with an expiry
            // summary among its properties.
            5 if refs => {
                let mut v = Vec::new();
                expiry::join(&mut v, 1_800_000_000_000 + i, &encode_handle(&handle(3, i)));
                (ValueKind::ExpiringValueRef, v)
            }
            6 => {
                let mut v = Vec::new();
                expiry::join(&mut v, 1_800_000_000_000 - i, format!("e{i}").as_bytes());
                (ValueKind::ExpiringValue, v)
            }
            _ => (
                ValueKind::Value,
                format!("v{i}").repeat((i % 4) as usize).into_bytes(),
            ),
        };
        v.push((
            InternalKey::new(user.as_bytes(), seq, kind)
                .encoded()
                .to_vec(),
            value,
        ));
    }
    v
}

fn block_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for interval in [1, 4, 16] {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries(24, interval == 4) {
            b.add(&k, &v);
        }
        seeds.push(b.finish());
    }
    seeds.push(BlockBuilder::new(16).finish());
    let props = TableProperties {
        num_entries: 24,
        num_data_blocks: 3,
        largest_seq: 1000,
        format_version: 1,
        ..TableProperties::default()
    };
    seeds.push(props.encode());
    seeds.push(
        TableProperties {
            prefix_extractor: Some(fuzz_prefix().name().as_bytes().to_vec()),
            ..props
        }
        .encode(),
    );
    let mut filter = BloomBuilder::new(10);
    for i in 0..20 {
        filter.add_key(format!("key{i:04}").as_bytes());
    }
    seeds.push(filter.finish());
    seeds
}

fn sstable_seeds() -> Result<Vec<Vec<u8>>> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DIR))?;
    let mut seeds = Vec::new();
    for (i, compression) in CODECS.into_iter().enumerate() {
        let path = PathBuf::from(format!("{DIR}/{i}.sst"));
        let opts = TableOptions {
            block_size: 256,
            restart_interval: 4,
            bloom_bits_per_key: if i == 1 { 0 } else { 10 },
            compression,
            prefix_extractor: (i == 0).then(|| Arc::new(fuzz_prefix()) as Arc<dyn PrefixExtractor>),
        };
        let mut b = TableBuilder::new(
            fs.create(&path, FileOptions::default())?,
            path.clone(),
            opts,
        );
        for (k, v) in entries(40, i != 2) {
            b.add(&k, &v)?;
        }
        b.finish()?;
        seeds.push(vfs::read_all(&fs, &path)?);
    }
    Ok(seeds)
}

/// A record as stored: header, key, value (compressed if that pays).
fn raw_record(key: &[u8], seq: SeqNo, value: &[u8], c: Compression) -> Vec<u8> {
    let (stored, codec) = match c {
        Compression::None => (value.to_vec(), COMPRESSION_NONE),
        c => compress(value, c),
    };
    let mut raw = record_header(key, &stored, seq, codec);
    raw.extend_from_slice(key);
    raw.extend_from_slice(&stored);
    raw
}

fn value(i: u64) -> Vec<u8> {
    format!("value {i} ")
        .repeat(8 + i as usize % 5)
        .into_bytes()
}

fn value_record_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = CODECS
        .into_iter()
        .map(|c| raw_record(b"key0001", 77, &value(1), c))
        .collect();
    seeds.push(raw_record(b"", 0, b"", Compression::None));
    let mut index = IndexBlockEncoder::default();
    let mut offset = 0;
    for (logical_file, ordinal, len) in [(3, 0, 40), (3, 1, 20), (3, 4, 100), (9, 0, 14)] {
        index.add(&IndexEntry {
            logical_file,
            ordinal,
            offset,
            len,
        });
        offset += u64::from(len) + 3;
    }
    seeds.push(index.finish().0);
    seeds
}

fn value_file_seeds() -> Result<Vec<Vec<u8>>> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DIR))?;
    let mut seeds = Vec::new();
    for (i, compression) in CODECS.into_iter().enumerate() {
        let path = PathBuf::from(format!("{DIR}/{i}.vf"));
        let opts = ValueFileOptions {
            compression,
            ..ValueFileOptions::default()
        };
        let mut b = ValueFileBuilder::create(&fs, path.clone(), NUMBER, opts)?;
        if i == 0 {
            // Several record index blocks.
            b.set_index_block_bytes(12);
        }
        for j in 0..12 {
            b.add(format!("key{j:04}").as_bytes(), 100 + j, &value(j))?;
        }
        b.finish()?;
        seeds.push(vfs::read_all(&fs, &path)?);
    }
    // A GC output: records of two other logical files, moved here.
    let path = PathBuf::from(format!("{DIR}/moved.vf"));
    let mut b = ValueFileBuilder::create(&fs, path.clone(), NUMBER, ValueFileOptions::default())?;
    for (logical_file, ordinal) in [(3, 0), (3, 2), (3, 5), (5, 1), (5, 2)] {
        let key = format!("key{ordinal:04}").into_bytes();
        let value = value(ordinal);
        b.add_moved(&ValueRecord {
            logical_file: FileNumber(logical_file),
            ordinal,
            raw: raw_record(&key, 50 + ordinal, &value, Compression::Lz4),
            key,
            seq: 50 + ordinal,
            value,
        })?;
    }
    b.finish()?;
    seeds.push(vfs::read_all(&fs, &path)?);
    Ok(seeds)
}

/// Value logs as a crash leaves them: unsealed (one per codec), cut in
/// the middle of a record, and sealed (the scan stops at the index).
fn value_log_seeds() -> Result<Vec<Vec<u8>>> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new(DIR))?;
    let mut seeds = Vec::new();
    for (i, compression) in CODECS.into_iter().enumerate() {
        let path = PathBuf::from(format!("{DIR}/log{i}.vf"));
        let opts = ValueFileOptions {
            compression,
            origin: Origin::ValueLog,
            ..ValueFileOptions::default()
        };
        let mut b = ValueFileBuilder::create(&fs, path.clone(), NUMBER, opts)?;
        for j in 0..10 {
            // Arrival order, not key order; sequence 0, as logs write.
            b.add(format!("key{:04}", (j * 7) % 10).as_bytes(), 0, &value(j))?;
        }
        b.flush()?;
        let unsealed = vfs::read_all(&fs, &path)?;
        if i == 0 {
            seeds.push(unsealed[..unsealed.len() - 17].to_vec());
        }
        seeds.push(unsealed);
        if i == 1 {
            b.finish()?;
            seeds.push(vfs::read_all(&fs, &path)?);
        }
    }
    Ok(seeds)
}

fn write_batch_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for n in [0, 1, 6] {
        let mut b = WriteBatch::new();
        for i in 0..n {
            match i % 5 {
                2 => b.delete(format!("key{i}").as_bytes()),
                3 => b.merge(format!("key{i}").as_bytes(), &value(i)),
                4 => b.put_with_expiry(format!("key{i}").as_bytes(), &value(i), 1_800_000_000_000),
                _ => b.put(format!("key{i}").as_bytes(), &value(i)),
            }
        }
        b.put(b"", b"");
        seeds.push(b.encode_with_seq(100 + n).to_vec());
    }
    seeds
}

fn delta_file_seeds() -> Result<Vec<Vec<u8>>> {
    use delta::Record;
    let add = |key: &[u8], seq: SeqNo, n: u64| Record::delta(key, seq, &n.to_le_bytes());
    let mut one = Vec::new();
    delta::format::encode_header(&mut one);
    delta::format::encode_chunk(
        &mut one,
        &[
            add(b"a", 9, 1),
            add(b"a", 8, 2),
            Record::anchor(b"a", 7),
            add(b"a", 3, 4),
            add(b"b", 5, 1),
            Record::anchor(b"c", 2),
        ],
    )?;
    let mut two = one.clone();
    delta::format::encode_chunk(&mut two, &[add(b"", 11, 7), add(b"zz", 10, 1)])?;
    Ok(vec![one, two])
}

fn merge_operands_seeds() -> Vec<Vec<u8>> {
    let input = |which: u8, base: Option<&[u8]>, operands: &[&[u8]]| {
        let mut out = vec![which, u8::from(base.is_some())];
        for piece in base.into_iter().chain(operands.iter().copied()) {
            put_length_prefixed(&mut out, piece);
        }
        out
    };
    let field = FieldUpdate::new(4, 3);
    vec![
        input(
            0,
            Some(&7u64.to_le_bytes()),
            &[&1u64.to_le_bytes(), &u64::MAX.to_le_bytes()],
        ),
        input(0, None, &[&[1, 2, 3]]),
        input(1, Some(b"a"), &[b"b", b"", b"c"]),
        input(
            2,
            Some(b"000111222333"),
            &[&field.operand(1, b"abc"), &field.operand(3, b"xyz")],
        ),
        input(2, None, &[&field.operand(0, b"abc"), b"\x09\x00zzz"]),
        input(3, None, &[b"x", b"y"]),
        input(4, Some(b"m"), &[b"a", b"z"]),
    ]
}

/// Writes `batches` batches to `w`.
fn fill_wal(w: &mut WalWriter, batches: u64) -> Result<()> {
    let mut seq = 1;
    for batch in 0..batches {
        let mut b = WriteBatch::new();
        for i in 0..batch % 4 + 1 {
            b.put(
                format!("key{i}").as_bytes(),
                format!("value{batch}").as_bytes(),
            );
        }
        b.delete(b"key0");
        b.merge(b"key1", format!("operand{batch}").as_bytes());
        w.append(&[b.encode_with_seq(seq)], true)?;
        seq += b.len() as u64;
    }
    w.sync()
}

/// WALs in both framings, whole and torn, and one written over an older
/// WAL's records (recycled).
fn wal_seeds() -> Result<Vec<Vec<u8>>> {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    fs.create_dir_all(dir)?;
    let path = filename::wal(dir, NUMBER);
    let mut seeds = Vec::new();
    for recyclable in [false, true] {
        fill_wal(&mut WalWriter::create(&fs, dir, NUMBER, recyclable)?, 4)?;
        let whole = vfs::read_all(&fs, &path)?;
        // A torn final record.
        let torn = whole.get(..whole.len() - 7).unwrap_or_default().to_vec();
        seeds.extend([whole, torn]);
    }
    let old = FileNumber(NUMBER.0 - 1);
    fill_wal(&mut WalWriter::create(&fs, dir, old, true)?, 9)?;
    let previous = Previous {
        number: old,
        len: 100,
    };
    fill_wal(
        &mut WalWriter::recycle(&fs, dir, old, NUMBER, Some(previous))?,
        2,
    )?;
    seeds.push(vfs::read_all(&fs, &path)?);
    Ok(seeds)
}

fn version_edit_seeds() -> Vec<Vec<u8>> {
    let table = |number: u64, lo: &str, hi: &str, refs: Vec<TableValueRefs>| FileMeta {
        number: FileNumber(number),
        size: 4096,
        smallest: InternalKey::new(lo.as_bytes(), 20, ValueKind::Value),
        largest: InternalKey::new(hi.as_bytes(), 10, ValueKind::Deletion),
        smallest_seq: 10,
        largest_seq: 20,
        num_entries: 40,
        num_deletions: 4,
        value_refs: refs,
        ..FileMeta::default()
    };
    let value_file = |number: u64, hosted: &[(u64, u64, u64)]| ValueFileMeta {
        number: FileNumber(number),
        size: 100_000,
        hosted: hosted
            .iter()
            .map(|&(logical_file, records, bytes)| HostedLogical {
                logical_file: FileNumber(logical_file),
                records,
                bytes,
            })
            .collect(),
        ..ValueFileMeta::default()
    };
    let refs = |logical_file: u64, count: u64, bytes: u64| TableValueRefs {
        logical_file: FileNumber(logical_file),
        count,
        bytes,
    };
    // The first edit of a manifest, which applies to an empty Version.
    let first = VersionEdit {
        format_version: Some(FORMAT_VERSION),
        log_number: Some(FileNumber(5)),
        next_file_number: Some(FileNumber(20)),
        last_seq: Some(1000),
        new_files: vec![
            (0, table(11, "a", "m", vec![refs(4, 10, 4000)])),
            (1, table(12, "a", "f", vec![])),
            (1, table(13, "g", "z", vec![refs(4, 2, 80), refs(6, 1, 50)])),
        ],
        new_value_files: vec![
            value_file(4, &[(4, 12, 5000)]),
            value_file(9, &[(6, 3, 150), (8, 1, 14)]),
        ],
        ..VersionEdit::default()
    };
    // A GC commit: a value file replaced, a compaction's tables.
    let later = VersionEdit {
        last_seq: Some(1200),
        deleted_files: vec![(0, FileNumber(11)), (1, FileNumber(12))],
        new_files: vec![(
            2,
            FileMeta {
                expiry: TableExpiry::summarize(vec![
                    (1_800_000_000_000, 4000),
                    (1_800_000_005_000, 12),
                ]),
                ..table(21, "a", "m", vec![refs(4, 10, 4000)])
            },
        )],
        deleted_value_files: vec![FileNumber(9)],
        new_value_files: vec![value_file(22, &[(6, 1, 50), (8, 1, 14)])],
        merge_operator: Some("uint64add".to_string()),
        ..VersionEdit::default()
    };
    [first, later]
        .iter()
        .map(|e| {
            let mut out = Vec::new();
            e.encode(&mut out);
            out
        })
        .collect()
}

fn value_refs_seeds() -> Vec<Vec<u8>> {
    let sets: [&[(u64, u64)]; 3] = [
        &[(3, 0), (3, 1), (3, 2), (3, 70_000), (9, 5)],
        &[(4, u64::from(u32::MAX)), (1 << 40, 0)],
        &[],
    ];
    let mut seeds: Vec<Vec<u8>> = sets
        .iter()
        .map(|set| {
            let mut refs = ValueRefs::default();
            for &(file, ordinal) in *set {
                let _ = refs.add(&handle(file, ordinal));
            }
            refs.encode()
        })
        .collect();
    // A dense run (a run container) and a sparse spread (an array).
    let mut refs = ValueRefs::default();
    for ordinal in (0..600).chain((0..200).map(|i| 1000 + i * 37)) {
        let _ = refs.add(&handle(12, ordinal));
    }
    seeds.push(refs.encode());
    seeds
}

fn value_handle_seeds() -> Vec<Vec<u8>> {
    [
        handle(3, 17),
        ValueHandle {
            logical_file: FileNumber(u64::MAX),
            ordinal: u64::MAX,
            offset: u64::MAX,
            len: u32::MAX,
        },
        ValueHandle {
            logical_file: FileNumber(0),
            ordinal: 0,
            offset: 0,
            len: 0,
        },
    ]
    .iter()
    .map(encode_handle)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
    }

    /// Every checked-in input (seeds and the inputs of fixed crashes) runs
    /// through its target: the fuzz targets' regression test, without
    /// nightly or cargo-fuzz.
    #[test]
    fn every_corpus_input_runs_through_its_target() {
        for (name, target) in TARGETS {
            let dir = corpus_dir().join(name);
            let mut inputs = 0;
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                target(&std::fs::read(&path).unwrap());
                inputs += 1;
            }
            assert!(inputs > 0, "{} holds no input", dir.display());
        }
    }

    /// The seeds reach deep: each decodes to something.
    #[test]
    fn every_seed_decodes() {
        let seeds = seeds().unwrap();
        assert_eq!(seeds.len(), TARGETS.len());
        for ((name, inputs), (target_name, target)) in seeds.iter().zip(TARGETS) {
            assert_eq!(*name, target_name);
            for (i, input) in inputs.iter().enumerate() {
                let decoded = target(input);
                // The empty block and the empty value-references block hold
                // nothing, but still decode.
                assert!(decoded > 0, "seed {i} of {name} decodes to nothing");
            }
        }
    }

    /// Rewrites `fuzz/corpus/<target>/seed-*` from [`seeds`]; other inputs
    /// (fixed crashes) stay. Run with `cargo test -p cleave --features
    /// fuzzing write_seed_corpus -- --ignored`.
    #[test]
    #[ignore = "writes into the source tree"]
    fn write_seed_corpus() {
        for (name, inputs) in seeds().unwrap() {
            let dir = corpus_dir().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("seed-")
                {
                    std::fs::remove_file(path).unwrap();
                }
            }
            for (i, input) in inputs.iter().enumerate() {
                assert!(input.len() <= 8 << 10, "seed {i} of {name} is large");
                std::fs::write(dir.join(format!("seed-{i}")), input).unwrap();
            }
        }
    }
}
