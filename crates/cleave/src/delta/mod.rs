//! The delta store of key-delta separation (KDSep, `Options::
//! enable_delta_separation`): merge operands live outside the LSM-tree,
//! grouped by key range into buckets, so that a read finds every delta of
//! a key in one bucket instead of gathering them from memtables and every
//! level.
//!
//! A flush routes the memtable's operands here and leaves an anchor for
//! each put or delete of a key the bucket may hold deltas of; a delta
//! older than an anchor of its key no longer counts. Each flush appends
//! one chunk per bucket it touches, all in one new delta file, synced
//! once, and the manifest edit that installs the flush's sstable names
//! the chunks: the WAL is the commit log until then. A bucket that would
//! pass its capacity (or its chunk count) is garbage collected in the
//! same flush: deltas older than an anchor go, operands are partially
//! merged, and the rest is rewritten as one sorted chunk, in one bucket
//! or split in two.
//!
//! Buckets are chunk lists rather than KDSep's fixed regions of one file
//! rewritten in place: each flush then costs one sync whatever the number
//! of buckets it touches, and no write ever overwrites committed bytes.

pub(crate) mod filter;
pub(crate) mod format;
pub(crate) mod gc;
pub(crate) mod iter;
pub(crate) mod reader;
pub(crate) mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::base::{filename, FileNumber, SeqNo};
use crate::cache::{BlockCache, CacheKind, CachedBlock, Priority};
use crate::error::{Error, Result};
use crate::manifest::{BucketMeta, ChunkRef};
use crate::vfs::{FileOptions, Fs, RandomAccessFile, ReadRequest, MAX_READS_IN_FLIGHT};

pub(crate) use format::{Record, RecordKind};
pub(crate) use write::{DeltaOutput, Routed};

/// Chunks a bucket may have before garbage collection rewrites it: a
/// read of a key reads a block of each.
pub(crate) const MAX_CHUNKS: usize = 8;

/// Sizing of the delta store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeltaOptions {
    /// Bytes of chunks a bucket holds before garbage collection.
    pub bucket_capacity: u64,
    /// Garbage collection splits a bucket whose live deltas pass this.
    pub split_bytes: u64,
    pub max_buckets: usize,
}

/// The records of `key` in `records` (chunk order): a run, newest first.
pub(crate) fn of_key<'a>(records: &'a [Record], key: &[u8]) -> &'a [Record] {
    let start = records.partition_point(|r| r.key.as_slice() < key);
    let end = start + records[start..].partition_point(|r| r.key.as_slice() == key);
    &records[start..end]
}

/// Memory a decoded block takes, for the cache's charge.
fn charge(records: &[Record]) -> usize {
    records
        .iter()
        .map(|r| r.key.len() + r.value.len() + std::mem::size_of::<Record>())
        .sum()
}

/// A chunk's blocks, in order: what a read of one key looks up.
pub(crate) type ChunkIndex = Vec<format::BlockRef>;

/// A block's records, decoded, as the block cache holds them.
pub(crate) type Block = Arc<Vec<Record>>;

/// The deltas of `records` (one key's, newest first) that a reader at
/// `view_seq` sees: those up to it and newer than its newest anchor,
/// newest first.
pub(crate) fn visible(records: &[Record], view_seq: SeqNo) -> impl Iterator<Item = &Record> {
    records
        .iter()
        .filter(move |r| r.seq <= view_seq)
        .take_while(|r| r.kind == RecordKind::Delta)
}

/// A read of one key's deltas: the blocks it needs, by file, and those
/// found in the cache.
pub(crate) struct KeyRead {
    wanted: Vec<(FileNumber, format::BlockRef)>,
    blocks: Vec<Option<Block>>,
}

impl KeyRead {
    /// Whether every block came from the cache: nothing left to read.
    pub(crate) fn is_cached(&self) -> bool {
        self.blocks.iter().all(Option::is_some)
    }
}

/// Reads buckets, block by block through the block cache.
pub(crate) struct DeltaStore {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    direct_reads: bool,
    cache: Arc<BlockCache>,
    files: Mutex<HashMap<FileNumber, Arc<dyn RandomAccessFile>>>,
    /// Each chunk's block index by (file, offset): made when the chunk is
    /// written, or when open reads it for the bucket's filter.
    indexes: Mutex<HashMap<(FileNumber, u64), Arc<ChunkIndex>>>,
    pub(crate) opts: DeltaOptions,
}

impl DeltaStore {
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        dir: &Path,
        direct_reads: bool,
        cache: Arc<BlockCache>,
        opts: DeltaOptions,
    ) -> DeltaStore {
        DeltaStore {
            fs,
            dir: dir.to_path_buf(),
            direct_reads,
            cache,
            files: Mutex::new(HashMap::new()),
            indexes: Mutex::new(HashMap::new()),
            opts,
        }
    }

    fn file(&self, number: FileNumber) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(f) = self.files.lock().get(&number) {
            return Ok(f.clone());
        }
        let f = self.fs.open(
            &filename::delta_file(&self.dir, number),
            FileOptions {
                direct: self.direct_reads,
            },
        )?;
        self.files.lock().insert(number, f.clone());
        Ok(f)
    }

    /// Closes the handle of a deleted delta file and drops its indexes.
    pub(crate) fn forget(&self, number: FileNumber) {
        self.files.lock().remove(&number);
        self.indexes.lock().retain(|(file, _), _| *file != number);
    }

    pub(crate) fn path(&self, number: FileNumber) -> PathBuf {
        filename::delta_file(&self.dir, number)
    }

    /// Memory the delta store holds outside the block cache: the buckets'
    /// filters and the chunks' block indexes (KDSep's bucket table).
    pub(crate) fn memory(&self, buckets: usize) -> usize {
        let indexes: usize = self
            .indexes
            .lock()
            .values()
            .flat_map(|index| index.iter())
            .map(|b| b.first_key.len() + std::mem::size_of::<format::BlockRef>())
            .sum();
        buckets * filter::FILTER_BITS / 8 + indexes
    }

    /// Charges [`Self::memory`] to the block cache's budget (KDSep §III-G:
    /// one budget for the block cache, the KD cache and the bucket table),
    /// up to half of it: a cache left with no room would re-read every
    /// sstable index and filter block on every read.
    pub(crate) fn charge_memory(&self, buckets: usize) {
        let bytes = self.memory(buckets).min(self.cache.capacity() / 2);
        self.cache.reserve(bytes);
    }

    /// Keeps the index of a chunk just written.
    pub(crate) fn add_index(&self, file: FileNumber, offset: u64, index: ChunkIndex) {
        self.indexes.lock().insert((file, offset), Arc::new(index));
    }

    /// Reads a whole chunk: its index, and each block decoded (and cached).
    fn load_chunk(&self, c: &ChunkRef) -> Result<(Arc<ChunkIndex>, Vec<Block>)> {
        let path = self.path(c.file);
        let len = usize::try_from(c.len)
            .map_err(|_| Error::corruption(&path, c.offset, "delta chunk length out of range"))?;
        let data = self.file(c.file)?.read_at(c.offset, len)?;
        let mut index = ChunkIndex::new();
        let mut blocks = Vec::new();
        for (offset, bytes) in format::split_chunk(&path, c.offset, &data)? {
            let records = Arc::new(format::decode_block(&path, offset, bytes)?);
            if let (Some(first), Some(previous)) = (records.first(), blocks.last()) {
                let previous: &Block = previous;
                if previous
                    .last()
                    .is_some_and(|p| format::order(p, first).is_ge())
                {
                    return Err(Error::corruption(
                        &path,
                        offset,
                        "delta blocks out of order",
                    ));
                }
            }
            index.push(format::BlockRef {
                first_key: records.first().map(|r| r.key.clone()).unwrap_or_default(),
                offset,
                len: bytes.len() as u32,
            });
            self.cache.insert(
                (CacheKind::Deltas, c.file, offset),
                CachedBlock::Deltas(records.clone()),
                charge(&records),
                Priority::Low,
            );
            blocks.push(records);
        }
        let index = Arc::new(index);
        self.indexes
            .lock()
            .insert((c.file, c.offset), index.clone());
        Ok((index, blocks))
    }

    fn index(&self, c: &ChunkRef) -> Result<Arc<ChunkIndex>> {
        if let Some(index) = self.indexes.lock().get(&(c.file, c.offset)) {
            return Ok(index.clone());
        }
        Ok(self.load_chunk(c)?.0)
    }

    /// One block's records, from the cache or the file.
    fn block(&self, file: FileNumber, b: &format::BlockRef) -> Result<Block> {
        if let Some(records) = self.cached(file, b) {
            return Ok(records);
        }
        let bytes = self.file(file)?.read_at(b.offset, b.len as usize)?;
        self.decode_and_cache(file, b, &bytes)
    }

    fn cached(&self, file: FileNumber, b: &format::BlockRef) -> Option<Block> {
        match self.cache.get(&(CacheKind::Deltas, file, b.offset)) {
            Some(CachedBlock::Deltas(records)) => Some(records),
            _ => None,
        }
    }

    fn decode_and_cache(
        &self,
        file: FileNumber,
        b: &format::BlockRef,
        bytes: &[u8],
    ) -> Result<Block> {
        let records = Arc::new(format::decode_block(&self.path(file), b.offset, bytes)?);
        self.cache.insert(
            (CacheKind::Deltas, file, b.offset),
            CachedBlock::Deltas(records.clone()),
            charge(&records),
            Priority::Low,
        );
        Ok(records)
    }

    /// The records of `key` in `bucket`, newest first: of each chunk, the
    /// block (rarely blocks) whose range holds the key; those not cached
    /// are read together, in one batch.
    pub(crate) fn key_records(&self, bucket: &BucketMeta, key: &[u8]) -> Result<Vec<Record>> {
        let read = self.plan_read(bucket, key)?;
        self.finish_read(read, key)
    }

    /// The blocks a read of `key` in `bucket` needs, with those the cache
    /// holds.
    pub(crate) fn plan_read(&self, bucket: &BucketMeta, key: &[u8]) -> Result<KeyRead> {
        let mut wanted: Vec<(FileNumber, format::BlockRef)> = Vec::new();
        for c in &bucket.chunks {
            let index = self.index(c)?;
            let start = index
                .partition_point(|b| b.first_key.as_slice() < key)
                .saturating_sub(1);
            wanted.extend(
                index[start..]
                    .iter()
                    .take_while(|b| b.first_key.as_slice() <= key)
                    .map(|b| (c.file, b.clone())),
            );
        }
        let blocks = wanted
            .iter()
            .map(|(file, b)| self.cached(*file, b))
            .collect();
        Ok(KeyRead { wanted, blocks })
    }

    /// Reads the blocks `read` still lacks, in one batch, and gives the
    /// records of `key` in them, newest first.
    pub(crate) fn finish_read(&self, read: KeyRead, key: &[u8]) -> Result<Vec<Record>> {
        let KeyRead { wanted, mut blocks } = read;
        let missing: Vec<usize> = (0..wanted.len()).filter(|&i| blocks[i].is_none()).collect();
        if !missing.is_empty() {
            let files = missing
                .iter()
                .map(|&i| self.file(wanted[i].0))
                .collect::<Result<Vec<_>>>()?;
            let requests: Vec<ReadRequest<'_>> = missing
                .iter()
                .zip(&files)
                .map(|(&i, f)| ReadRequest {
                    file: f.as_ref(),
                    offset: wanted[i].1.offset,
                    len: wanted[i].1.len as usize,
                })
                .collect();
            let read = self.fs.read_batch(&requests, MAX_READS_IN_FLIGHT);
            for (&i, bytes) in missing.iter().zip(read) {
                let (file, b) = &wanted[i];
                blocks[i] = Some(self.decode_and_cache(*file, b, &bytes?)?);
            }
        }
        let mut out: Vec<Record> = Vec::new();
        for block in blocks.iter().flatten() {
            out.extend(of_key(block, key).iter().cloned());
        }
        out.sort_by(format::order);
        Ok(out)
    }

    /// Every record of `bucket`, in chunk order.
    pub(crate) fn records(&self, bucket: &BucketMeta) -> Result<Vec<Record>> {
        let mut out = Vec::new();
        for c in &bucket.chunks {
            let index = self.index(c)?;
            for b in index.iter() {
                out.extend(self.block(c.file, b)?.iter().cloned());
            }
        }
        out.sort_by(format::order);
        Ok(out)
    }

    /// Fills the key filters of `buckets`, which open finds empty, and the
    /// chunks' indexes. A bucket that cannot be read does not keep the
    /// database from opening: its filter takes every key, so reads of its
    /// range report the damage and flushes still anchor there.
    pub(crate) fn fill_filters<'a>(&self, buckets: impl Iterator<Item = &'a Arc<BucketMeta>>) {
        for b in buckets {
            let filled = b.chunks.iter().try_for_each(|c| {
                for block in self.load_chunk(c)?.1 {
                    for r in block.iter() {
                        b.filter.add(&r.key);
                    }
                }
                Ok::<(), Error>(())
            });
            if let Err(e) = filled {
                log::warn!("delta bucket {} unreadable: {e}", b.id);
                b.filter.saturate();
            }
        }
    }

    /// Checks every chunk of `buckets` from the files: readable,
    /// checksums, order, and each record inside its bucket's range.
    pub(crate) fn verify(&self, buckets: &[Arc<BucketMeta>]) -> Result<u64> {
        let mut records = 0u64;
        for (i, b) in buckets.iter().enumerate() {
            let next = buckets.get(i + 1).map(|n| n.smallest.as_slice());
            for c in &b.chunks {
                for block in self.load_chunk(c)?.1 {
                    for r in block.iter() {
                        let inside =
                            r.key >= b.smallest && next.is_none_or(|n| r.key.as_slice() < n);
                        if !inside {
                            return Err(Error::corruption(
                                self.path(c.file),
                                c.offset,
                                format!(
                                    "delta record of key {} outside its bucket",
                                    r.key.escape_ascii()
                                ),
                            ));
                        }
                        records += 1;
                    }
                }
            }
        }
        Ok(records)
    }
}
