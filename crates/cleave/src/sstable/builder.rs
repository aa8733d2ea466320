//! Writes one sstable: data blocks as entries arrive, then the filter,
//! properties, metaindex and index blocks and the footer.

use std::path::PathBuf;
use std::sync::Arc;

use crate::base::expiry::{self, EXPIRY_LEN};
use crate::base::key::{self, TAG_LEN};
use crate::base::{FileNumber, InternalKey, ValueKind};
use crate::cache::{BlockCache, CacheKind, CachedBlock, Priority};
use crate::error::{Error, Result};
use crate::manifest::TableExpiry;
use crate::prefix;
use crate::vfs::WritableFile;
use crate::Compression;

use super::block::{Block, BlockBuilder};
use super::bloom::{BloomBuilder, BloomFilter};
use super::format::{
    block_trailer, compress_block, compression_byte, BlockHandle, Footer, BLOCK_TRAILER_LEN,
    FORMAT_VERSION, PLAIN_FORMAT_VERSION,
};
use super::properties::TableProperties;
use super::value_refs::{ValueRefs, META_VALUE_REFS};
use super::{TableOptions, TableSummary, META_FILTER, META_PROPERTIES};
use crate::value_file::ValueHandle;

/// The largest possible tag: an index key made of a shortened user key and
/// this tag sorts before every real entry with that user key.
const SEPARATOR_TAG: u64 = u64::MAX;

pub(crate) struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    opts: TableOptions,
    /// Bytes written so far.
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<BloomBuilder>,
    /// The last prefix added to the filter; `None` before the first.
    last_prefix: Option<Vec<u8>>,
    /// Last key added; empty before the first.
    last_key: Vec<u8>,
    smallest: Vec<u8>,
    /// The last flushed data block, whose index entry waits for the next key
    /// so that its separator can be short.
    pending_handle: Option<BlockHandle>,
    props: TableProperties,
    /// What the table's `ValueRef` entries point to.
    value_refs: ValueRefs,
    /// The bytes `value_refs` holds, summed as they come: compaction asks
    /// after every entry.
    value_bytes: u64,
    /// Whether an entry has an expiry: the table is then of the format
    /// version that has them.
    has_expiring: bool,
    /// `(expires_at, value bytes)` of each entry with an expiry, for the
    /// table's expiry summary.
    expiring: Vec<(u64, u64)>,
    /// Set once a write failed; the file is then unusable.
    failed: bool,
    warm: Option<Warm>,
}

/// Where a builder puts the blocks it writes, so that reads of a new table
/// find them cached.
struct Warm {
    cache: Arc<BlockCache>,
    number: FileNumber,
    /// Data blocks too, not only the index and filter.
    data: bool,
}

impl TableBuilder {
    pub(crate) fn new(file: Box<dyn WritableFile>, path: PathBuf, opts: TableOptions) -> Self {
        let filter =
            (opts.bloom_bits_per_key > 0).then(|| BloomBuilder::new(opts.bloom_bits_per_key));
        TableBuilder {
            file,
            path,
            data_block: BlockBuilder::new(opts.restart_interval.max(1)),
            index_block: BlockBuilder::new(1),
            filter,
            last_prefix: None,
            offset: 0,
            last_key: Vec::new(),
            smallest: Vec::new(),
            pending_handle: None,
            props: TableProperties {
                smallest_seq: u64::MAX,
                format_version: u64::from(PLAIN_FORMAT_VERSION),
                compression: u64::from(compression_byte(opts.compression)),
                prefix_extractor: opts
                    .prefix_extractor
                    .as_ref()
                    .filter(|_| opts.bloom_bits_per_key > 0)
                    .map(|p| p.name().as_bytes().to_vec()),
                ..TableProperties::default()
            },
            value_refs: ValueRefs::default(),
            value_bytes: 0,
            has_expiring: false,
            expiring: Vec::new(),
            failed: false,
            warm: None,
            opts,
        }
    }

    /// Puts the index and filter blocks this builder writes into `cache`
    /// (high priority) as table `number`'s, and with `data` its data
    /// blocks (low priority): a table that reads will use is cached before
    /// the first read, as RocksDB's `prepopulate_block_cache` does. Blocks
    /// of a table that never gets installed are never asked for and age
    /// out (file numbers are not reused).
    pub(crate) fn warm_cache(&mut self, cache: Arc<BlockCache>, number: FileNumber, data: bool) {
        self.warm = Some(Warm {
            cache,
            number,
            data,
        });
    }

    /// Caches a block just written at `h` whose contents are `raw`.
    fn warm_block(&self, kind: CacheKind, h: BlockHandle, raw: &[u8]) {
        let Some(w) = &self.warm else {
            return;
        };
        let key = (kind, w.number, h.offset);
        let (entry, charge, priority) = match kind {
            CacheKind::Filter => match BloomFilter::new(raw.to_vec()) {
                Ok(f) => {
                    let charge = f.charge();
                    (CachedBlock::Filter(Arc::new(f)), charge, Priority::High)
                }
                Err(_) => return,
            },
            CacheKind::Data if !w.data => return,
            _ => match Block::new(raw.to_vec()) {
                Ok(b) => {
                    let charge = b.charge();
                    let priority = if kind == CacheKind::Index {
                        Priority::High
                    } else {
                        Priority::Low
                    };
                    (CachedBlock::Block(Arc::new(b)), charge, priority)
                }
                Err(_) => return,
            },
        };
        w.cache.insert(key, entry, charge, priority);
    }

    /// REQUIRES: `ikey` is a well-formed internal key strictly greater
    /// (`base::key::compare`) than the previous key. The value of a
    /// `ValueRef` entry must be one value handle: it is recorded in the
    /// table's value-references block (a malformed one is refused as
    /// corrupt input, before anything is written).
    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.check_not_failed()?;
        assert!(ikey.len() >= TAG_LEN, "internal key shorter than its tag");
        let kind = ValueKind::from_u8(key::tag(ikey) as u8);
        if let Some(kind) = kind.filter(|k| k.is_expiring()) {
            let split = expiry::split(kind, value).map_err(|e| {
                Error::corruption(
                    "<table input>",
                    0,
                    format!(
                        "key {:?}: {}",
                        key::user_key(ikey).escape_ascii().to_string(),
                        e.0
                    ),
                )
            })?;
            self.has_expiring = true;
            if let Some(at) = split.expires_at {
                let bytes = if kind.is_ref() {
                    ValueHandle::decode(split.value).map_or(0, |h| u64::from(h.len))
                } else {
                    split.value.len() as u64
                };
                self.expiring.push((at, bytes));
            }
        }
        if kind.is_some_and(ValueKind::is_ref) {
            let value = &value[if kind == Some(ValueKind::ExpiringValueRef) {
                EXPIRY_LEN
            } else {
                0
            }..];
            let bad = |reason: String| {
                Error::corruption(
                    "<table input>",
                    0,
                    format!(
                        "value handle of key {:?}: {reason}",
                        key::user_key(ikey).escape_ascii().to_string()
                    ),
                )
            };
            let handle = ValueHandle::decode(value).map_err(|e| bad(e.0.to_string()))?;
            if self
                .value_refs
                .add(&handle)
                .map_err(|e| bad(e.to_string()))?
            {
                self.value_bytes += u64::from(handle.len);
            }
        }
        let first = self.props.num_entries == 0;
        debug_assert!(
            first || key::compare(&self.last_key, ikey).is_lt(),
            "keys added out of order"
        );
        if let Some(handle) = self.pending_handle.take() {
            let separator = shortest_separator(&self.last_key, ikey);
            self.add_index_entry(&separator, handle);
        }
        let user_key = key::user_key(ikey);
        if let Some(filter) = &mut self.filter {
            // Versions of one user key are adjacent; hash the key once.
            if first || key::user_key(&self.last_key) != user_key {
                filter.add_key(user_key);
                // Keys of one prefix are adjacent too.
                let prefix = self
                    .opts
                    .prefix_extractor
                    .as_deref()
                    .and_then(|p| prefix::prefix_of(p, user_key));
                if let Some(prefix) = prefix {
                    if self.last_prefix.as_deref() != Some(prefix) {
                        filter.add_key(prefix);
                        let last = self.last_prefix.get_or_insert_with(Vec::new);
                        last.clear();
                        last.extend_from_slice(prefix);
                    }
                }
            }
        }
        if first {
            self.smallest = ikey.to_vec();
        }
        let seq = key::seq(ikey);
        let p = &mut self.props;
        p.num_entries += 1;
        if key::tag(ikey) as u8 == ValueKind::Deletion as u8 {
            p.num_deletions += 1;
        }
        p.raw_key_size += ikey.len() as u64;
        p.raw_value_size += value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(seq);
        p.largest_seq = p.largest_seq.max(seq);
        self.data_block.add(ikey, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        if self.data_block.size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Bytes written plus the data block being built.
    pub(crate) fn estimated_size(&self) -> u64 {
        let pending = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.size_estimate()
        };
        self.offset + pending as u64
    }

    /// Record bytes of the value files the entries so far reference.
    pub(crate) fn value_bytes(&self) -> u64 {
        self.value_bytes
    }

    #[cfg(test)]
    pub(crate) fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes filter, properties, metaindex, index and footer, and syncs.
    /// REQUIRES: at least one entry.
    fn format_version(&self) -> u32 {
        if self.has_expiring {
            FORMAT_VERSION
        } else {
            PLAIN_FORMAT_VERSION
        }
    }

    pub(crate) fn finish(mut self) -> Result<TableSummary> {
        self.check_not_failed()?;
        if self.props.num_entries == 0 {
            return Err(Error::InvalidArgument(format!(
                "sstable {} would be empty",
                self.path.display()
            )));
        }
        self.flush_data_block()?;
        if let Some(handle) = self.pending_handle.take() {
            let successor = short_successor(&self.last_key);
            self.add_index_entry(&successor, handle);
        }
        // The index is encoded first so that its size is known to the
        // properties, which precede it.
        let index_raw = self.index_block.finish();
        let (index_stored, index_kind) = compress_block(&index_raw, self.opts.compression);
        self.props.index_size = (index_stored.len() + BLOCK_TRAILER_LEN) as u64;

        let filter_handle = match self.filter.take() {
            // Bloom bits look random; compressing them saves nothing.
            Some(f) => {
                let bits = f.finish();
                let h = self.write_raw_block(&bits, Compression::None)?;
                self.warm_block(CacheKind::Filter, h, &bits);
                Some(h)
            }
            None => None,
        };
        if let Some(h) = filter_handle {
            self.props.filter_size = h.size + BLOCK_TRAILER_LEN as u64;
        }
        self.props.format_version = u64::from(self.format_version());
        self.props.expiry = TableExpiry::summarize(std::mem::take(&mut self.expiring));
        let props_handle = self.write_raw_block(&self.props.encode(), Compression::None)?;
        // Bitmaps are compressed already.
        let refs_handle = if self.value_refs.is_empty() {
            None
        } else {
            Some(self.write_raw_block(&self.value_refs.encode(), Compression::None)?)
        };

        let mut meta = BlockBuilder::new(1);
        let mut v = Vec::new();
        if let Some(h) = filter_handle {
            h.encode_varint(&mut v);
            meta.add(META_FILTER, &v);
        }
        v.clear();
        props_handle.encode_varint(&mut v);
        meta.add(META_PROPERTIES, &v);
        if let Some(h) = refs_handle {
            v.clear();
            h.encode_varint(&mut v);
            meta.add(META_VALUE_REFS, &v);
        }
        let metaindex = self.write_raw_block(&meta.finish(), Compression::None)?;
        let index = self.write_stored_block(&index_stored, index_kind)?;
        self.warm_block(CacheKind::Index, index, &index_raw);

        let footer = Footer {
            metaindex,
            index,
            version: self.format_version(),
        }
        .encode();
        self.append(&footer)?;
        let r = self.file.flush().and_then(|()| self.file.sync());
        self.guard(r)?;

        Ok(TableSummary {
            expiry: self.props.expiry,
            file_size: self.offset,
            num_entries: self.props.num_entries,
            num_deletions: self.props.num_deletions,
            smallest: InternalKey::from_encoded(std::mem::take(&mut self.smallest)),
            largest: InternalKey::from_encoded(std::mem::take(&mut self.last_key)),
            smallest_seq: self.props.smallest_seq,
            largest_seq: self.props.largest_seq,
            value_refs: std::mem::take(&mut self.value_refs),
        })
    }

    fn check_not_failed(&self) -> Result<()> {
        if self.failed {
            return Err(Error::InvalidArgument(format!(
                "sstable builder for {} used after a failed write",
                self.path.display()
            )));
        }
        Ok(())
    }

    fn add_index_entry(&mut self, key: &[u8], handle: BlockHandle) {
        let mut v = Vec::with_capacity(20);
        handle.encode_varint(&mut v);
        self.index_block.add(key, &v);
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        debug_assert!(self.pending_handle.is_none());
        let raw = self.data_block.finish();
        let handle = self.write_raw_block(&raw, self.opts.compression)?;
        self.warm_block(CacheKind::Data, handle, &raw);
        self.props.num_data_blocks += 1;
        self.props.data_size += handle.size + BLOCK_TRAILER_LEN as u64;
        self.pending_handle = Some(handle);
        Ok(())
    }

    fn write_raw_block(&mut self, raw: &[u8], c: Compression) -> Result<BlockHandle> {
        let (stored, kind) = compress_block(raw, c);
        self.write_stored_block(&stored, kind)
    }

    fn write_stored_block(&mut self, stored: &[u8], kind: u8) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: stored.len() as u64,
        };
        self.append(stored)?;
        self.append(&block_trailer(stored, kind))?;
        Ok(handle)
    }

    fn append(&mut self, data: &[u8]) -> Result<()> {
        let r = self.file.append(data);
        self.guard(r)?;
        self.offset += data.len() as u64;
        Ok(())
    }

    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}

/// A short key `k` with `start ≤ k < limit` (both internal keys, start <
/// limit): the user key of `start` cut just after the first byte where it
/// differs from `limit`'s, that byte incremented, plus the largest tag.
/// Falls back to `start`.
pub(crate) fn shortest_separator(start: &[u8], limit: &[u8]) -> Vec<u8> {
    let (us, ul) = (key::user_key(start), key::user_key(limit));
    let n = us.iter().zip(ul).take_while(|(a, b)| a == b).count();
    if let (Some(&b), Some(&l)) = (us.get(n), ul.get(n)) {
        if b < 0xff && b + 1 < l {
            let mut k = us[..=n].to_vec();
            k[n] = b + 1;
            k.extend_from_slice(&SEPARATOR_TAG.to_le_bytes());
            return k;
        }
    }
    start.to_vec()
}

/// A short key ≥ `last`: its user key cut after the first byte that is not
/// 0xff, that byte incremented, plus the largest tag. Falls back to `last`.
pub(crate) fn short_successor(last: &[u8]) -> Vec<u8> {
    let u = key::user_key(last);
    match u.iter().position(|&b| b != 0xff) {
        Some(i) => {
            let mut k = u[..=i].to_vec();
            k[i] += 1;
            k.extend_from_slice(&SEPARATOR_TAG.to_le_bytes());
            k
        }
        None => last.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::key::{pack_tag, KIND_FOR_SEEK, MAX_SEQ};

    fn ik(u: &[u8], seq: u64) -> Vec<u8> {
        InternalKey::new(u, seq, ValueKind::Value)
            .encoded()
            .to_vec()
    }

    #[test]
    fn separators_lie_between_their_keys_and_are_short() {
        let cases: &[(&[u8], u64, &[u8], u64)] = &[
            (b"abcdef", 5, b"abzz", 9),
            (b"abc", 5, b"abc", 3),
            (b"abc", 5, b"abd", 3),
            (b"ab\xff", 5, b"ac", 3),
            (b"", 5, b"a", 3),
            (b"abc", 5, b"abcd", 3),
        ];
        for &(a, sa, b, sb) in cases {
            let (start, limit) = (ik(a, sa), ik(b, sb));
            let s = shortest_separator(&start, &limit);
            assert!(key::compare(&start, &s).is_le(), "{a:?} {b:?}");
            assert!(key::compare(&s, &limit).is_lt(), "{a:?} {b:?}");
        }
        assert_eq!(
            key::user_key(&shortest_separator(&ik(b"abcdef", 5), &ik(b"abzz", 9))),
            b"abd"
        );
        let s = short_successor(&ik(b"\xff\xffxyz", 7));
        assert_eq!(key::user_key(&s), b"\xff\xffy");
        assert!(key::compare(&ik(b"\xff\xffxyz", 7), &s).is_lt());
        let all = ik(b"\xff\xff", 7);
        assert_eq!(short_successor(&all), all);
        assert_eq!(SEPARATOR_TAG, pack_tag(MAX_SEQ, KIND_FOR_SEEK));
    }
}
