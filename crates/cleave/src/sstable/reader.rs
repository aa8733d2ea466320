//! Reads an sstable: point lookups through the bloom filter and index, and
//! a two-level iterator (index block, then data blocks).

use std::path::PathBuf;
use std::sync::Arc;

use super::BlockCache;
use crate::base::coding::DecodeError;
use crate::base::key;
use crate::base::FileNumber;
use crate::base::InternalIterator;
use crate::cache::{CacheKind, Priority};
use crate::error::{Error, Result};
use crate::vfs::RandomAccessFile;

use super::block::{Block, BlockIter, KeyOrder};
use super::bloom::BloomFilter;
use super::format::{
    check_block, decompress_block, BlockHandle, Footer, FooterError, FOOTER_LEN, FORMAT_VERSION,
};
use super::properties::TableProperties;
use super::value_refs::{ValueRefs, META_VALUE_REFS};
use super::{CachedBlock, META_FILTER, META_PROPERTIES};
use crate::value_file::ValueHandle;

/// An open sstable. Holds only its footer, properties and block handles;
/// index, filter and data blocks come from the shared block cache.
pub(crate) struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    number: FileNumber,
    cache: Arc<BlockCache>,
    /// Where the footer starts: every block must end at or before it.
    blocks_end: u64,
    footer: Footer,
    filter_handle: Option<BlockHandle>,
    properties_handle: BlockHandle,
    properties: TableProperties,
    value_refs_handle: Option<BlockHandle>,
}

/// Meta blocks the metaindex names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct MetaHandles {
    filter: Option<BlockHandle>,
    properties: Option<BlockHandle>,
    value_refs: Option<BlockHandle>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("number", &self.number)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Reads and checks the footer, metaindex and properties.
    pub(crate) fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: FileNumber,
        cache: Arc<BlockCache>,
    ) -> Result<Table> {
        let len = file.len();
        let blocks_end = len.checked_sub(FOOTER_LEN as u64).ok_or_else(|| {
            Error::corruption(
                &path,
                0,
                format!("file of {len} bytes is too short for an sstable footer"),
            )
        })?;
        let buf = file.read_at(blocks_end, FOOTER_LEN)?;
        let footer = Footer::decode(&buf).map_err(|e| match e {
            FooterError::Corrupt(reason) => Error::corruption(&path, blocks_end, reason),
            FooterError::Version(found) => Error::UnsupportedFormatVersion {
                file: path.clone(),
                found,
                supported: FORMAT_VERSION,
            },
        })?;
        let mut table = Table {
            file,
            path,
            number,
            cache,
            blocks_end,
            footer,
            filter_handle: None,
            properties_handle: BlockHandle::default(),
            properties: TableProperties::default(),
            value_refs_handle: None,
        };
        let meta = table.read_metaindex()?;
        let props = meta.properties.ok_or_else(|| {
            table.corruption(
                footer.metaindex.offset,
                DecodeError("metaindex names no properties block"),
            )
        })?;
        let block = table.read_block(props)?;
        table.properties =
            TableProperties::decode(&block).map_err(|e| table.corruption(props.offset, e))?;
        table.filter_handle = meta.filter;
        table.properties_handle = props;
        table.value_refs_handle = meta.value_refs;
        Ok(table)
    }

    /// The table's value-references block (empty if it references no
    /// value file), through the block cache. Low priority: only GC and
    /// verification read it, and they read each table's once per job.
    pub(crate) fn value_refs(&self) -> Result<Arc<ValueRefs>> {
        let Some(h) = self.value_refs_handle else {
            return Ok(Arc::default());
        };
        let key = (CacheKind::ValueRefs, self.number, h.offset);
        if let Some(CachedBlock::ValueRefs(r)) = self.cache.get(&key) {
            return Ok(r);
        }
        let contents = self.read_contents(h)?;
        let refs = ValueRefs::decode(&contents).map_err(|e| self.corruption(h.offset, e))?;
        let refs = Arc::new(refs);
        // Charged by its encoded size, which the decoded bitmaps track.
        self.cache.insert(
            key,
            CachedBlock::ValueRefs(refs.clone()),
            contents.len(),
            Priority::Low,
        );
        Ok(refs)
    }

    pub(crate) fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// Point lookup: `None` if the filter excludes `user_key`; otherwise the
    /// first entry ≥ `seek_key` if its user key is `user_key`.
    #[cfg(test)]
    pub(crate) fn get(
        &self,
        user_key: &[u8],
        seek_key: &[u8],
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut found = None;
        self.get_versions(user_key, seek_key, &mut |ikey, value| {
            found = Some((ikey.to_vec(), value.to_vec()));
            false
        })?;
        Ok(found)
    }

    /// Calls `f` with the entries of `user_key` from the first ≥
    /// `seek_key` on, newest first, while it returns true (a merge walks
    /// its operands this way); none if the filter excludes `user_key`.
    pub(crate) fn get_versions(
        &self,
        user_key: &[u8],
        seek_key: &[u8],
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        if let Some(filter) = self.filter()? {
            if !filter.may_contain(user_key) {
                return Ok(());
            }
        }
        let index = self.cached_block(self.footer.index, CacheKind::Index)?;
        let index_err = |e| self.corruption(self.footer.index.offset, e);
        let mut ii = index.iter(KeyOrder::Internal);
        ii.seek(seek_key).map_err(index_err)?;
        // Separators make the first candidate block the only one that can
        // hold the key's first entry; a key's entries may run on into the
        // next blocks.
        while ii.valid() {
            let handle = self.decode_handle(ii.value())?;
            let block = self.cached_block(handle, CacheKind::Data)?;
            let mut di = block.iter(KeyOrder::Internal);
            let block_err = |e| self.corruption(handle.offset, e);
            di.seek(seek_key).map_err(block_err)?;
            while di.valid() {
                if key::user_key(di.key()) != user_key || !f(di.key(), di.value()) {
                    return Ok(());
                }
                di.next().map_err(block_err)?;
            }
            ii.next().map_err(index_err)?;
        }
        Ok(())
    }

    /// Whether the table may hold a key starting with `prefix`, which
    /// `extractor` gives: false only if the table's filter holds that
    /// extractor's prefixes and excludes this one.
    pub(crate) fn may_contain_prefix(&self, extractor: &str, prefix: &[u8]) -> Result<bool> {
        if self.properties.prefix_extractor.as_deref() != Some(extractor.as_bytes()) {
            return Ok(true);
        }
        Ok(match self.filter()? {
            Some(filter) => filter.may_contain(prefix),
            None => true,
        })
    }

    pub(crate) fn iter(self: &Arc<Self>) -> TableIter {
        TableIter {
            table: self.clone(),
            index: None,
            data: None,
            data_handle: BlockHandle::default(),
            readahead: Readahead::adaptive(),
        }
    }

    /// An iterator for one sequential pass (compaction): data blocks are
    /// read `readahead_bytes` at a time and bypass the block cache, so that
    /// a compaction neither pays a read per block nor evicts what readers
    /// use.
    pub(crate) fn scan_iter(self: &Arc<Self>, readahead_bytes: usize) -> TableIter {
        TableIter {
            readahead: Readahead {
                size: readahead_bytes.max(1),
                scan: true,
                next_offset: 0,
                start: 0,
                buf: Vec::new(),
            },
            ..self.iter()
        }
    }

    /// The index block's entries: each data block's separator (an internal
    /// key at or after its last entry) and its place, offset and bytes
    /// without the trailer. For dumps; bypasses the cache.
    pub(crate) fn data_blocks(&self) -> Result<Vec<(Vec<u8>, u64, u64)>> {
        let index = self.read_block(self.footer.index)?;
        let index_err = |e| self.corruption(self.footer.index.offset, e);
        let mut ii = index.iter(KeyOrder::Internal);
        ii.seek_to_first().map_err(index_err)?;
        let mut out = Vec::new();
        while ii.valid() {
            let h = self.decode_handle(ii.value())?;
            out.push((ii.key().to_vec(), h.offset, h.size));
            ii.next().map_err(index_err)?;
        }
        Ok(out)
    }

    /// Reads every block from the file (bypassing the cache), checks every
    /// checksum and the order and count of all entries.
    pub(crate) fn verify(&self) -> Result<()> {
        let meta = self.read_metaindex()?;
        if meta.properties != Some(self.properties_handle)
            || meta.filter != self.filter_handle
            || meta.value_refs != self.value_refs_handle
        {
            return Err(self.corruption(
                self.footer.metaindex.offset,
                DecodeError("metaindex changed"),
            ));
        }
        TableProperties::decode(&self.read_block(self.properties_handle)?)
            .map_err(|e| self.corruption(self.properties_handle.offset, e))?;
        if let Some(h) = self.filter_handle {
            BloomFilter::new(self.read_contents(h)?).map_err(|e| self.corruption(h.offset, e))?;
        }
        let refs = self.value_refs()?;
        let mut handles = 0u64;
        let index = self.read_block(self.footer.index)?;
        let index_err = |e| self.corruption(self.footer.index.offset, e);
        let mut ii = index.iter(KeyOrder::Internal);
        ii.seek_to_first().map_err(index_err)?;
        let mut prev: Option<Vec<u8>> = None;
        let (mut entries, mut blocks) = (0u64, 0u64);
        while ii.valid() {
            let handle = self.decode_handle(ii.value())?;
            let block = self.read_block(handle)?;
            let bad = |reason| self.corruption(handle.offset, DecodeError(reason));
            let mut di = block.iter(KeyOrder::Internal);
            di.seek_to_first()
                .map_err(|e| self.corruption(handle.offset, e))?;
            while di.valid() {
                if key::compare(di.key(), ii.key()).is_gt() {
                    return Err(bad("entry sorts after its index separator"));
                }
                if prev
                    .as_deref()
                    .is_some_and(|p| key::compare(p, di.key()).is_ge())
                {
                    return Err(bad("entries out of order"));
                }
                prev = Some(di.key().to_vec());
                entries += 1;
                let kind = crate::base::ValueKind::from_u8(key::tag(di.key()) as u8);
                if let Some(kind) = kind.filter(|k| k.is_ref()) {
                    let raw = crate::base::expiry::split(kind, di.value())
                        .map_err(|e| self.corruption(handle.offset, e))?
                        .value;
                    let h =
                        ValueHandle::decode(raw).map_err(|e| self.corruption(handle.offset, e))?;
                    if !refs.contains(h.logical_file, h.ordinal) {
                        return Err(bad("value handle missing from the value-references block"));
                    }
                    handles += 1;
                }
                di.next().map_err(|e| self.corruption(handle.offset, e))?;
            }
            blocks += 1;
            ii.next().map_err(index_err)?;
        }
        let referenced: u64 = refs.per_file().map(|(_, count, _)| count).sum();
        if handles != referenced {
            return Err(self.corruption(
                self.value_refs_handle.map_or(0, |h| h.offset),
                DecodeError("value-references block counts records no entry references"),
            ));
        }
        if entries != self.properties.num_entries || blocks != self.properties.num_data_blocks {
            return Err(self.corruption(
                self.properties_handle.offset,
                DecodeError("entry or block count differs from the properties"),
            ));
        }
        Ok(())
    }

    fn corruption(&self, offset: u64, e: DecodeError) -> Error {
        Error::corruption(&self.path, offset, e.0)
    }

    /// The meta block handles named by the metaindex.
    fn read_metaindex(&self) -> Result<MetaHandles> {
        let h = self.footer.metaindex;
        let block = self.read_block(h)?;
        let err = |e| self.corruption(h.offset, e);
        let mut meta = MetaHandles::default();
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first().map_err(err)?;
        while it.valid() {
            let slot = match it.key() {
                META_FILTER => Some(&mut meta.filter),
                META_PROPERTIES => Some(&mut meta.properties),
                META_VALUE_REFS => Some(&mut meta.value_refs),
                // Later versions may add meta blocks this one ignores.
                _ => None,
            };
            if let Some(slot) = slot {
                *slot = Some(BlockHandle::decode_varint(it.value()).map_err(err)?);
            }
            it.next().map_err(err)?;
        }
        Ok(meta)
    }

    fn decode_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode_varint(value).map_err(|e| self.corruption(self.footer.index.offset, e))
    }

    /// A data block for an iterator: from `ra`'s window or the cache, else
    /// read from the file (through a window when reading sequentially).
    fn data_block(&self, h: BlockHandle, ra: &mut Readahead) -> Result<Arc<Block>> {
        let len = self.block_len(h)?;
        let sequential = h.offset == ra.next_offset;
        ra.next_offset = h.offset + len as u64;
        let key = (CacheKind::Data, self.number, h.offset);
        if !ra.scan {
            if let Some(CachedBlock::Block(b)) = self.cache.get(&key) {
                return Ok(b);
            }
            ra.size = if sequential {
                (ra.size * 2).clamp(READAHEAD_MIN_BYTES, READAHEAD_MAX_BYTES)
            } else {
                0
            };
        }
        let bytes = if ra.holds(h.offset, len) || ra.size > len {
            if !ra.holds(h.offset, len) {
                let want = (self.blocks_end - h.offset).min(ra.size as u64);
                // `want` exceeds `len` here and is bounded by the window.
                ra.buf = self.file.read_at(h.offset, want as usize)?;
                ra.start = h.offset;
            }
            let at = (h.offset - ra.start) as usize;
            ra.buf
                .get(at..at + len)
                .map(<[u8]>::to_vec)
                .unwrap_or_default()
        } else {
            self.file.read_at(h.offset, len)?
        };
        let contents = self.check_contents(h, bytes)?;
        let block = Arc::new(Block::new(contents).map_err(|e| self.corruption(h.offset, e))?);
        if !ra.scan {
            self.cache.insert(
                key,
                CachedBlock::Block(block.clone()),
                block.charge(),
                Priority::Low,
            );
        }
        Ok(block)
    }

    /// Bytes of a block with its trailer, bounded by the file's blocks.
    fn block_len(&self, h: BlockHandle) -> Result<usize> {
        let err = |e| self.corruption(h.offset, e);
        let end = h
            .end_with_trailer()
            .ok_or_else(|| err(DecodeError("block handle overflows")))?;
        if end > self.blocks_end {
            return Err(err(DecodeError(
                "block handle points beyond the blocks of the file",
            )));
        }
        usize::try_from(end - h.offset)
            .map_err(|_| err(DecodeError("block larger than the address space")))
    }

    /// Checks a block's checksum and decompresses it.
    fn check_contents(&self, h: BlockHandle, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let err = |e| self.corruption(h.offset, e);
        let (stored, kind) = check_block(bytes).map_err(err)?;
        decompress_block(stored, kind).map_err(err)
    }

    /// Reads a block's bytes from the file, checks its checksum and
    /// decompresses it. The length is bounded by the file before reading.
    fn read_contents(&self, h: BlockHandle) -> Result<Vec<u8>> {
        let len = self.block_len(h)?;
        let bytes = self.file.read_at(h.offset, len)?;
        self.check_contents(h, bytes)
    }

    fn read_block(&self, h: BlockHandle) -> Result<Arc<Block>> {
        let block = Block::new(self.read_contents(h)?).map_err(|e| self.corruption(h.offset, e))?;
        Ok(Arc::new(block))
    }

    fn cached_block(&self, h: BlockHandle, kind: CacheKind) -> Result<Arc<Block>> {
        let key = (kind, self.number, h.offset);
        if let Some(CachedBlock::Block(b)) = self.cache.get(&key) {
            return Ok(b);
        }
        let block = self.read_block(h)?;
        self.cache.insert(
            key,
            CachedBlock::Block(block.clone()),
            block.charge(),
            if kind == CacheKind::Index {
                Priority::High
            } else {
                Priority::Low
            },
        );
        Ok(block)
    }

    fn filter(&self) -> Result<Option<Arc<BloomFilter>>> {
        let Some(h) = self.filter_handle else {
            return Ok(None);
        };
        let key = (CacheKind::Filter, self.number, h.offset);
        if let Some(CachedBlock::Filter(f)) = self.cache.get(&key) {
            return Ok(Some(f));
        }
        let filter =
            BloomFilter::new(self.read_contents(h)?).map_err(|e| self.corruption(h.offset, e))?;
        let filter = Arc::new(filter);
        self.cache.insert(
            key,
            CachedBlock::Filter(filter.clone()),
            filter.charge(),
            Priority::High,
        );
        Ok(Some(filter))
    }
}

/// Iterates a table: the index block picks data blocks, which are read
/// (through the cache) as the iterator reaches them.
pub(crate) struct TableIter {
    table: Arc<Table>,
    /// Loaded at the first positioning call, which can report its error.
    index: Option<BlockIter>,
    /// The data block under the cursor; `None` when not valid.
    data: Option<BlockIter>,
    data_handle: BlockHandle,
    readahead: Readahead,
}

/// Smallest and largest windows of an iterator's adaptive readahead (as
/// RocksDB's auto-readahead for iterators).
const READAHEAD_MIN_BYTES: usize = 8 << 10;
const READAHEAD_MAX_BYTES: usize = 256 << 10;

/// A window of file bytes read in one call, serving the blocks inside it.
///
/// A scan (compaction) reads fixed windows and bypasses the block cache. An
/// ordinary iterator reads through the cache; when it misses on the block
/// right after the previous one, it reads a window that doubles with each
/// such miss, so a long range scan costs a few large reads instead of one
/// per block, and a seek costs no more than before.
struct Readahead {
    size: usize,
    scan: bool,
    /// End of the last block loaded: a miss here is a sequential one.
    next_offset: u64,
    start: u64,
    buf: Vec<u8>,
}

impl Readahead {
    fn adaptive() -> Self {
        Readahead {
            size: 0,
            scan: false,
            next_offset: u64::MAX,
            start: 0,
            buf: Vec::new(),
        }
    }

    fn holds(&self, offset: u64, len: usize) -> bool {
        offset >= self.start && (offset - self.start) as usize + len <= self.buf.len()
    }
}

#[derive(Clone, Copy)]
enum Position<'a> {
    First,
    Last,
    At(&'a [u8]),
}

impl TableIter {
    fn index_error(&self, e: DecodeError) -> Error {
        self.table.corruption(self.table.footer.index.offset, e)
    }

    fn data_error(&self, e: DecodeError) -> Error {
        self.table.corruption(self.data_handle.offset, e)
    }

    fn index(&mut self) -> Result<&mut BlockIter> {
        let ii = match self.index.take() {
            Some(ii) => ii,
            None => self
                .table
                .cached_block(self.table.footer.index, CacheKind::Index)?
                .iter(KeyOrder::Internal),
        };
        Ok(self.index.insert(ii))
    }

    /// Opens the data block the index points at and positions it; an
    /// invalid index leaves the iterator invalid.
    fn enter_block(&mut self, pos: Position<'_>) -> Result<()> {
        let handle = match &self.index {
            Some(ii) if ii.valid() => self.table.decode_handle(ii.value())?,
            _ => {
                self.data = None;
                return Ok(());
            }
        };
        let reuse = self.data.is_some() && handle == self.data_handle;
        if !reuse {
            self.data = None;
            let block = self.table.data_block(handle, &mut self.readahead)?;
            self.data_handle = handle;
            self.data = Some(block.iter(KeyOrder::Internal));
        }
        let r = match (&mut self.data, pos) {
            (Some(d), Position::First) => d.seek_to_first(),
            (Some(d), Position::Last) => d.seek_to_last(),
            (Some(d), Position::At(t)) => d.seek(t),
            (None, _) => Ok(()),
        };
        r.map_err(|e| self.data_error(e))
    }

    /// Moves over exhausted (or empty) data blocks in one direction.
    fn skip_exhausted(&mut self, forward: bool) -> Result<()> {
        while self.data.as_ref().is_some_and(|d| !d.valid()) {
            let r = match &mut self.index {
                Some(ii) if ii.valid() => {
                    if forward {
                        ii.next()
                    } else {
                        ii.prev()
                    }
                }
                _ => {
                    self.data = None;
                    return Ok(());
                }
            };
            r.map_err(|e| self.index_error(e))?;
            self.enter_block(if forward {
                Position::First
            } else {
                Position::Last
            })?;
        }
        Ok(())
    }

    fn position(&mut self, pos: Position<'_>) -> Result<()> {
        let ii = self.index()?;
        let r = match pos {
            Position::First => ii.seek_to_first(),
            Position::Last => ii.seek_to_last(),
            Position::At(t) => ii.seek(t),
        };
        r.map_err(|e| self.index_error(e))?;
        self.enter_block(pos)?;
        self.skip_exhausted(!matches!(pos, Position::Last))
    }

    /// Leaves the iterator invalid after any error.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.data = None;
        }
        r
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(BlockIter::valid)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.position(Position::First);
        self.guard(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.position(Position::Last);
        self.guard(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.position(Position::At(target));
        self.guard(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        if key::compare(self.key(), target).is_gt() {
            self.prev()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let r = match &mut self.data {
            Some(d) => d
                .next()
                .map_err(|e| self.table.corruption(self.data_handle.offset, e)),
            None => Ok(()),
        };
        let r = r.and_then(|()| self.skip_exhausted(true));
        self.guard(r)
    }

    fn prev(&mut self) -> Result<()> {
        let r = match &mut self.data {
            Some(d) => d
                .prev()
                .map_err(|e| self.table.corruption(self.data_handle.offset, e)),
            None => Ok(()),
        };
        let r = r.and_then(|()| self.skip_exhausted(false));
        self.guard(r)
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], BlockIter::key)
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], BlockIter::value)
    }
}
