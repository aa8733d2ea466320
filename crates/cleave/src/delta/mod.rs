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
pub(crate) mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::base::{filename, FileNumber, SeqNo};
use crate::cache::{BlockCache, CacheKind, CachedBlock, Priority};
use crate::error::{Error, Result};
use crate::manifest::BucketMeta;
use crate::vfs::{FileOptions, Fs, RandomAccessFile, ReadRequest};

pub(crate) use format::{Record, RecordKind};
pub(crate) use write::{DeltaOutput, Routed};

/// Chunks a bucket may have before garbage collection rewrites it: a
/// read of a bucket not cached reads each.
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

/// A bucket's records, decoded from all its chunks, in chunk order (by
/// key, newest first).
#[derive(Debug)]
pub(crate) struct BucketRecords {
    pub records: Vec<Record>,
    bytes: usize,
}

impl BucketRecords {
    pub(crate) fn new(records: Vec<Record>) -> BucketRecords {
        let bytes = records
            .iter()
            .map(|r| r.key.len() + r.value.len() + 64)
            .sum();
        BucketRecords { records, bytes }
    }

    /// The records of `key`, newest first.
    pub(crate) fn of_key(&self, key: &[u8]) -> &[Record] {
        let start = self.records.partition_point(|r| r.key.as_slice() < key);
        let end = start + self.records[start..].partition_point(|r| r.key.as_slice() == key);
        &self.records[start..end]
    }

    pub(crate) fn charge(&self) -> usize {
        self.bytes
    }
}

/// The deltas of `records` (one key's, newest first) that a reader at
/// `view_seq` sees: those up to it and newer than its newest anchor,
/// newest first.
pub(crate) fn visible(records: &[Record], view_seq: SeqNo) -> impl Iterator<Item = &Record> {
    records
        .iter()
        .filter(move |r| r.seq <= view_seq)
        .take_while(|r| r.kind == RecordKind::Delta)
}

/// Reads buckets, through the block cache.
pub(crate) struct DeltaStore {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    direct_reads: bool,
    cache: Arc<BlockCache>,
    files: Mutex<HashMap<FileNumber, Arc<dyn RandomAccessFile>>>,
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

    /// Closes the handle of a deleted delta file.
    pub(crate) fn forget(&self, number: FileNumber) {
        self.files.lock().remove(&number);
    }

    /// Every record of `bucket`, from the cache or its chunks.
    pub(crate) fn records(&self, bucket: &BucketMeta) -> Result<Arc<BucketRecords>> {
        let key = (
            CacheKind::Deltas,
            FileNumber(bucket.id),
            bucket.chunks.len() as u64,
        );
        if let Some(CachedBlock::Deltas(r)) = self.cache.get(&key) {
            return Ok(r);
        }
        let records = Arc::new(BucketRecords::new(self.read_chunks(bucket)?));
        self.cache.insert(
            key,
            CachedBlock::Deltas(records.clone()),
            records.charge(),
            Priority::Low,
        );
        Ok(records)
    }

    /// Reads and decodes every chunk of `bucket`, together, merged into
    /// chunk order.
    fn read_chunks(&self, bucket: &BucketMeta) -> Result<Vec<Record>> {
        let files = bucket
            .chunks
            .iter()
            .map(|c| self.file(c.file))
            .collect::<Result<Vec<_>>>()?;
        let mut requests = Vec::with_capacity(files.len());
        for (c, f) in bucket.chunks.iter().zip(&files) {
            let len = usize::try_from(c.len).map_err(|_| {
                Error::corruption(
                    self.path(c.file),
                    c.offset,
                    "delta chunk length out of range",
                )
            })?;
            requests.push(ReadRequest {
                file: f.as_ref(),
                offset: c.offset,
                len,
            });
        }
        let mut records = Vec::new();
        for (c, data) in bucket
            .chunks
            .iter()
            .zip(self.fs.read_batch(&requests, MAX_CHUNKS))
        {
            records.extend(format::decode_chunk(&self.path(c.file), c.offset, &data?)?);
        }
        // Each chunk is in order; a stable sort keeps a key's newer chunk
        // first where two chunks hold one sequence number (never: they come
        // from distinct writes).
        records.sort_by(format::order);
        Ok(records)
    }

    pub(crate) fn path(&self, number: FileNumber) -> PathBuf {
        filename::delta_file(&self.dir, number)
    }

    /// Fills the key filters of `buckets`, which open finds empty. A
    /// bucket that cannot be read does not keep the database from opening:
    /// its filter takes every key, so reads of its range report the damage
    /// and flushes still anchor there.
    pub(crate) fn fill_filters<'a>(&self, buckets: impl Iterator<Item = &'a Arc<BucketMeta>>) {
        for b in buckets {
            match self.records(b) {
                Ok(records) => {
                    for r in &records.records {
                        b.filter.add(&r.key);
                    }
                }
                Err(e) => {
                    log::warn!("delta bucket {} unreadable: {e}", b.id);
                    b.filter.saturate();
                }
            }
        }
    }

    /// Checks every chunk of `buckets`: readable, checksums, order, and
    /// each record inside its bucket's range.
    pub(crate) fn verify(&self, buckets: &[Arc<BucketMeta>]) -> Result<u64> {
        let mut records = 0u64;
        for (i, b) in buckets.iter().enumerate() {
            let next = buckets.get(i + 1).map(|n| n.smallest.as_slice());
            for r in self.read_chunks(b)? {
                let inside = r.key >= b.smallest && next.is_none_or(|n| r.key.as_slice() < n);
                if !inside {
                    let c = b.chunks[0];
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
        Ok(records)
    }
}
