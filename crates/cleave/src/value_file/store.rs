//! How reads resolve value handles: open value files (bounded, like the
//! table cache), values in the block cache keyed by `(logical_file,
//! ordinal)`, per-iterator readahead over adjacent records, and prefetch:
//! the records of the next entries of a scan, read in one batch
//! ([`Fs::read_batch`]: submitted together through io_uring).
//!
//! The cache key never changes when GC moves a logical file, so a cached
//! value stays valid; the caller names the physical file that hosts the
//! handle's logical file now (the Version knows it).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::base::{filename, FileNumber, SeqNo};
use crate::cache::{BlockCache, CacheKind, CachedBlock, Priority, ShardedCache};
use crate::error::Result;
use crate::vfs::{FileOptions, Fs, ReadRequest, MAX_READS_IN_FLIGHT};

use super::{ValueFile, ValueHandle};

/// Shards of the open-file cache: opens are rare next to reads.
const FILE_SHARD_BITS: u32 = 2;

/// Bookkeeping charged per cached value on top of its bytes.
const VALUE_CACHE_ENTRY_OVERHEAD: usize = 64;

/// The first read of a file by a scanning iterator takes this much, so the
/// few records of one file a short scan needs (a flush writes records in
/// key order) come in one read.
const SCAN_FIRST_READ_BYTES: usize = 32 << 10;

/// Readahead windows double up to this size.
const MAX_READAHEAD_BYTES: usize = 256 << 10;

/// Files whose read position an iterator remembers. A scan over data that
/// many flushes wrote touches one file per flush in turn, so this must
/// exceed the number of value files a key range spans, or every read
/// would look like a file's first.
const MAX_WINDOWS: usize = 128;

/// Bytes of readahead window buffers an iterator keeps (prefetch spans are
/// bounded apart); beyond it the buffers of the least recently used files
/// are dropped (their positions are kept).
const MAX_BUFFERED_BYTES: usize = 4 << 20;

/// Records of one file closer than this are read in one prefetch read, the
/// gap with them: a read costs more than the bytes between two records.
const PREFETCH_GAP_BYTES: u64 = 16 << 10;

/// Largest prefetch read.
const PREFETCH_MAX_SPAN_BYTES: u64 = 512 << 10;

/// Bytes of records one prefetch batch reads at most, so a scan of very
/// large values never holds many of them at once.
const PREFETCH_MAX_BATCH_BYTES: u64 = 4 << 20;

/// One value [`ValueStore::get_many`] is asked for.
pub(crate) struct ValueWanted<'a> {
    /// The physical file hosting the handle's logical file now.
    pub physical: FileNumber,
    pub handle: ValueHandle,
    pub key: &'a [u8],
    pub seq: SeqNo,
}

/// An open file and the `(start, end)` of records to read from it.
type FilePlaces = (Arc<ValueFile>, Vec<(u64, u64)>);

/// Value reads that reached a file, for statistics.
#[derive(Debug, Default)]
pub(crate) struct ValueReadCounters {
    /// `pread`s of value records (a readahead window counts once).
    pub reads: AtomicU64,
    pub bytes: AtomicU64,
}

pub(crate) struct ValueStore {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    direct_reads: bool,
    files: ShardedCache<FileNumber, Arc<ValueFile>>,
    /// Shared with the sstables: holds record index blocks and, with
    /// `cache_values`, values.
    block_cache: Arc<BlockCache>,
    cache_values: bool,
    counters: ValueReadCounters,
}

impl ValueStore {
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        max_open_files: usize,
        cache_values: bool,
        direct_reads: bool,
        block_cache: Arc<BlockCache>,
    ) -> ValueStore {
        ValueStore {
            fs,
            dir,
            direct_reads,
            files: ShardedCache::new(max_open_files, FILE_SHARD_BITS, 0.0),
            block_cache,
            cache_values,
            counters: ValueReadCounters::default(),
        }
    }

    /// The open physical value file `number`, opening it (footer,
    /// properties, top-level index) if needed. Failures are not cached.
    pub(crate) fn file(&self, number: FileNumber) -> Result<Arc<ValueFile>> {
        if let Some(f) = self.files.get(&number) {
            return Ok(f);
        }
        let path = self.path(number);
        let opts = FileOptions {
            direct: self.direct_reads,
        };
        let cache = Some(self.block_cache.clone());
        let file = Arc::new(ValueFile::open(
            self.fs.as_ref(),
            path,
            number,
            opts,
            cache,
        )?);
        self.files.insert(number, file.clone(), 1, Priority::Low);
        Ok(file)
    }

    /// Where physical file `number` lives.
    pub(crate) fn path(&self, number: FileNumber) -> PathBuf {
        filename::value_file(&self.dir, number)
    }

    /// Forgets physical file `number` (after it is deleted).
    pub(crate) fn evict_file(&self, number: FileNumber) {
        self.files.erase(&number);
    }

    /// The value `handle` names, whose logical file lives in physical file
    /// `physical`, for `key` at `seq`: from the cache, else one read.
    pub(crate) fn get(
        &self,
        physical: FileNumber,
        handle: &ValueHandle,
        key: &[u8],
        seq: SeqNo,
    ) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cached(handle) {
            return Ok(v);
        }
        let file = self.file(physical)?;
        let (offset, len) = file.place(handle)?;
        self.count_read(len as usize);
        let value = Arc::new(file.read_placed(offset, len, key, seq)?);
        self.insert(handle, &value);
        Ok(value)
    }

    /// The values of `wanted` (each a handle, the physical file hosting its
    /// logical file, and the key and sequence number its record must
    /// hold), one result each, in order: from the cache, else read, all
    /// the reads in one batch ([`Fs::read_batch`]). A value that cannot be
    /// placed or read fails alone.
    pub(crate) fn get_many(&self, wanted: &[ValueWanted<'_>]) -> Vec<Result<Arc<Vec<u8>>>> {
        let mut out: Vec<Option<Result<Arc<Vec<u8>>>>> = Vec::with_capacity(wanted.len());
        let mut to_read: Vec<(usize, Arc<ValueFile>, u64, u32)> = Vec::new();
        for (i, w) in wanted.iter().enumerate() {
            if let Some(v) = self.cached(&w.handle) {
                out.push(Some(Ok(v)));
                continue;
            }
            let placed = self.file(w.physical).and_then(|file| {
                let (offset, len) = file.place(&w.handle)?;
                Ok((file, offset, len))
            });
            match placed {
                Ok((file, offset, len)) => {
                    to_read.push((i, file, offset, len));
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        let mut requests = Vec::with_capacity(to_read.len());
        let mut asked = Vec::with_capacity(to_read.len());
        for (i, file, offset, len) in &to_read {
            match file.record_request(*offset, *len) {
                Ok(r) => {
                    requests.push(r);
                    asked.push((*i, file, *offset));
                }
                Err(e) => out[*i] = Some(Err(e)),
            }
        }
        let bufs = self.fs.read_batch(&requests, MAX_READS_IN_FLIGHT);
        assert_eq!(bufs.len(), requests.len(), "a batch answers every request");
        for ((i, file, offset), buf) in asked.into_iter().zip(bufs) {
            let w = &wanted[i];
            out[i] = Some(buf.and_then(|buf| {
                self.count_read(buf.len());
                let value = Arc::new(file.value_of(offset, &buf, w.key, w.seq)?);
                self.insert(&w.handle, &value);
                Ok(value)
            }));
        }
        // Every slot was filled above: from the cache, a placing error, or
        // the batch (which answers every request).
        out.into_iter()
            .map(|r| {
                r.unwrap_or_else(|| Err(crate::Error::InvalidArgument("value not read".into())))
            })
            .collect()
    }

    /// As [`Self::get`], for an iterator: reads go through `readahead`,
    /// which serves records its last prefetch read, and records adjacent
    /// to earlier ones from one larger read.
    /// `scanning` says the iterator is moving step by step, so the first
    /// read of a file may take more than one record.
    pub(crate) fn get_for_scan(
        &self,
        physical: FileNumber,
        handle: &ValueHandle,
        key: &[u8],
        seq: SeqNo,
        readahead: &mut Readahead,
        scanning: bool,
    ) -> Result<Arc<Vec<u8>>> {
        if let Some(v) = self.cached(handle) {
            return Ok(v);
        }
        let file = self.file(physical)?;
        let (offset, len) = file.place(handle)?;
        let len_usize = len as usize;
        if let Some(bytes) = readahead.prefetched(physical, offset, len_usize) {
            let value = Arc::new(file.value_of(offset, bytes, key, seq)?);
            readahead.batch_used += 1;
            self.insert(handle, &value);
            return Ok(value);
        }
        let compaction = readahead.compaction;
        let window = readahead.window(physical);
        if !window.holds(offset, len_usize) {
            let size = window.next_read_size(offset, len_usize, scanning);
            window.buf = file.read_records_span(offset, size)?;
            window.start = offset;
            if !compaction {
                self.count_read(window.buf.len());
            }
        }
        let at = usize::try_from(offset - window.start).unwrap_or(usize::MAX);
        let bytes = window
            .buf
            .get(at..at.saturating_add(len_usize))
            .unwrap_or_default();
        // A span cut short by the end of the records region leaves `bytes`
        // short; `value_of` then reports the handle as pointing outside.
        let value = Arc::new(file.value_of(offset, bytes, key, seq)?);
        window.last_end = offset + u64::from(len);
        readahead.trim();
        if !compaction {
            self.insert(handle, &value);
        }
        Ok(value)
    }

    /// Reads ahead the records of `handles` (each with the physical file
    /// hosting it) into `readahead`: per file, records within
    /// `PREFETCH_GAP_BYTES` of each other in one read, and the reads in one
    /// batch. A scan's next records lie in as many value files as flushes
    /// wrote its key range, so they are many small random reads: submitted
    /// together, a batch costs about one of their latencies (BlobDB 7.8
    /// reads them one by one). Best effort: a record that cannot be placed
    /// or read here is read (and its error reported) when its value is
    /// asked for.
    pub(crate) fn prefetch(
        &self,
        handles: &[(FileNumber, ValueHandle)],
        readahead: &mut Readahead,
    ) {
        let mut places: BTreeMap<FileNumber, FilePlaces> = BTreeMap::new();
        let mut batch_bytes = 0u64;
        let mut batch_records = 0usize;
        for (physical, handle) in handles {
            if batch_bytes >= PREFETCH_MAX_BATCH_BYTES {
                break;
            }
            if self.cache_values && self.block_cache.contains(&value_key(handle)) {
                continue;
            }
            let Ok(file) = self.file(*physical) else {
                continue;
            };
            let Ok((offset, len)) = file.place(handle) else {
                continue;
            };
            batch_bytes += u64::from(len);
            batch_records += 1;
            places
                .entry(*physical)
                .or_insert_with(|| (file, Vec::new()))
                .1
                .push((offset, offset.saturating_add(u64::from(len))));
        }
        let mut spans: Vec<(FileNumber, Arc<ValueFile>, u64, u64)> = Vec::new();
        for (physical, (file, mut records)) in places {
            records.sort_unstable();
            let mut current: Option<(u64, u64)> = None;
            for (start, end) in records {
                current = match current {
                    Some((s, e))
                        if start <= e.saturating_add(PREFETCH_GAP_BYTES)
                            && end.max(e) - s <= PREFETCH_MAX_SPAN_BYTES =>
                    {
                        Some((s, end.max(e)))
                    }
                    Some((s, e)) => {
                        spans.push((physical, file.clone(), s, e));
                        Some((start, end))
                    }
                    None => Some((start, end)),
                };
            }
            if let Some((s, e)) = current {
                spans.push((physical, file.clone(), s, e));
            }
        }
        let mut requests: Vec<ReadRequest<'_>> = Vec::with_capacity(spans.len());
        let mut starts: Vec<(FileNumber, u64)> = Vec::with_capacity(spans.len());
        for (physical, file, start, end) in &spans {
            let Ok(len) = usize::try_from(end - start) else {
                continue;
            };
            if let Ok(request) = file.records_span_request(*start, len) {
                requests.push(request);
                starts.push((*physical, *start));
            }
        }
        let results = self.fs.read_batch(&requests, MAX_READS_IN_FLIGHT);
        readahead.clear_spans();
        readahead.batch_records = batch_records;
        for ((physical, start), result) in starts.into_iter().zip(results) {
            if let Ok(buf) = result {
                self.count_read(buf.len());
                readahead.spans.push((physical, start, buf));
            }
        }
    }

    fn cached(&self, handle: &ValueHandle) -> Option<Arc<Vec<u8>>> {
        if !self.cache_values {
            return None;
        }
        match self.block_cache.get(&value_key(handle)) {
            Some(CachedBlock::Value(v)) => Some(v),
            _ => None,
        }
    }

    fn insert(&self, handle: &ValueHandle, value: &Arc<Vec<u8>>) {
        if !self.cache_values {
            return;
        }
        self.block_cache.insert(
            value_key(handle),
            CachedBlock::Value(value.clone()),
            value.len() + VALUE_CACHE_ENTRY_OVERHEAD,
            Priority::Low,
        );
    }

    fn count_read(&self, bytes: usize) {
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn counters(&self) -> &ValueReadCounters {
        &self.counters
    }
}

/// The block cache key of the value `handle` names: its logical file and
/// ordinal, which GC never changes.
fn value_key(handle: &ValueHandle) -> (CacheKind, FileNumber, u64) {
    (CacheKind::Value, handle.logical_file, handle.ordinal)
}

/// An iterator's readahead state: one window per recently read file, and
/// the spans the last prefetch read.
#[derive(Default)]
pub(crate) struct Readahead {
    /// Most recently used last.
    windows: Vec<Window>,
    /// (physical file, offset of `buf[0]`, buf); at most
    /// `PREFETCH_MAX_BATCH_BYTES` of records and their gaps.
    spans: Vec<(FileNumber, u64, Vec<u8>)>,
    /// Records the last prefetch was asked for, and how many of them were
    /// then served from its spans: a scan that reads few of its values
    /// stops prefetching.
    batch_records: usize,
    batch_used: usize,
    /// Reads for a compaction re-separating values: the old handles are
    /// not read again once the new ones are installed, so the values stay
    /// out of the value cache, and the reads out of the foreground read
    /// counters (as GC's are).
    compaction: bool,
}

struct Window {
    file: FileNumber,
    /// File offset of `buf[0]`.
    start: u64,
    buf: Vec<u8>,
    /// End of the last record served from this file.
    last_end: u64,
    /// Size of the next readahead.
    next: usize,
}

impl Readahead {
    /// For a compaction's reads; see `compaction`.
    pub(crate) fn for_compaction() -> Readahead {
        Readahead {
            compaction: true,
            ..Readahead::default()
        }
    }

    /// Forgets the last prefetch (after a seek: its records are likely not
    /// needed, and they hold memory).
    pub(crate) fn clear_spans(&mut self) {
        self.spans.clear();
        self.batch_records = 0;
        self.batch_used = 0;
    }

    /// Whether most records of the last prefetch went unused.
    pub(crate) fn last_batch_mostly_unused(&self) -> bool {
        self.batch_records > 0 && self.batch_used * 2 < self.batch_records
    }

    /// The bytes of the record at `offset` of `len` bytes in `file`, if the
    /// last prefetch read them.
    fn prefetched(&self, file: FileNumber, offset: u64, len: usize) -> Option<&[u8]> {
        self.spans.iter().find_map(|(f, start, buf)| {
            if *f != file || offset < *start {
                return None;
            }
            let at = usize::try_from(offset - start).ok()?;
            buf.get(at..at.checked_add(len)?)
        })
    }

    /// The window of `file`, created empty if it has none.
    fn window(&mut self, file: FileNumber) -> &mut Window {
        match self.windows.iter().position(|w| w.file == file) {
            Some(i) => {
                let w = self.windows.remove(i);
                self.windows.push(w);
            }
            None => {
                if self.windows.len() >= MAX_WINDOWS {
                    self.windows.remove(0);
                }
                self.windows.push(Window {
                    file,
                    start: 0,
                    buf: Vec::new(),
                    last_end: u64::MAX,
                    next: SCAN_FIRST_READ_BYTES,
                });
            }
        }
        let last = self.windows.len() - 1;
        &mut self.windows[last]
    }

    /// Drops the buffers of the least recently used files while the
    /// buffers exceed their budget; the most recent file keeps its own.
    fn trim(&mut self) {
        let mut total: usize = self.windows.iter().map(|w| w.buf.len()).sum();
        let keep = self.windows.len().saturating_sub(1);
        for w in self.windows.iter_mut().take(keep) {
            if total <= MAX_BUFFERED_BYTES {
                break;
            }
            total -= w.buf.len();
            w.buf = Vec::new();
        }
    }
}

impl Window {
    fn holds(&self, offset: u64, len: usize) -> bool {
        offset >= self.start
            && (offset - self.start)
                .checked_add(len as u64)
                .is_some_and(|end| end <= self.buf.len() as u64)
    }

    /// How much to read for a record of `len` bytes at `offset`: more than
    /// the record when the read continues forward from the last one in
    /// this file (a gap smaller than the window is read through: one read
    /// costs less than two), doubling each time; the first read of a file
    /// takes a window only while scanning.
    fn next_read_size(&mut self, offset: u64, len: usize, scanning: bool) -> usize {
        let forward = self.last_end != u64::MAX
            && offset >= self.last_end
            && offset - self.last_end <= self.next as u64;
        let first = self.last_end == u64::MAX;
        if forward || (first && scanning) {
            let size = self.next.max(len);
            self.next = (self.next * 2).min(MAX_READAHEAD_BYTES);
            size
        } else {
            // A jump: the next forward run starts small again.
            self.next = SCAN_FIRST_READ_BYTES;
            len
        }
    }
}
