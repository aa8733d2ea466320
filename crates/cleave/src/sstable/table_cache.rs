//! Open sstables, bounded by `max_open_files`, keyed by file number.

use std::path::PathBuf;
use std::sync::Arc;

use super::{BlockCache, Table};
use crate::base::{filename, FileNumber};
use crate::cache::{Priority, ShardedCache};
use crate::error::Result;
use crate::vfs::{FileOptions, Fs};

/// Shards of the table cache: opens are rare next to lookups, so a few.
const SHARD_BITS: u32 = 2;

pub(crate) struct TableCache {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    tables: ShardedCache<FileNumber, Arc<Table>>,
    block_cache: Arc<BlockCache>,
    direct_reads: bool,
}

impl TableCache {
    /// Keeps up to about `capacity` tables open (each shard holds its share).
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        capacity: usize,
        block_cache: Arc<BlockCache>,
        direct_reads: bool,
    ) -> Self {
        TableCache {
            fs,
            dir,
            tables: ShardedCache::new(capacity, SHARD_BITS, 0.0),
            block_cache,
            direct_reads,
        }
    }

    /// The open table `number`, opening it if needed. Two threads missing at
    /// once may both open it; one of the two copies is dropped. Failures
    /// are not cached, so a later call retries.
    pub(crate) fn get(&self, number: FileNumber) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.get(&number) {
            return Ok(t);
        }
        let path = filename::sstable(&self.dir, number);
        let file = self.fs.open(
            &path,
            FileOptions {
                direct: self.direct_reads,
            },
        )?;
        let table = Arc::new(Table::open(file, path, number, self.block_cache.clone())?);
        self.tables.insert(number, table.clone(), 1, Priority::Low);
        Ok(table)
    }

    /// Forgets `number` (after its file is deleted). Readers holding the
    /// `Arc<Table>` keep using it until they drop it.
    pub(crate) fn evict(&self, number: FileNumber) {
        self.tables.erase(&number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::{InternalKey, ValueKind};
    use crate::sstable::{TableBuilder, TableOptions};
    use crate::vfs::MemFs;

    #[test]
    fn opens_caches_and_evicts_tables() {
        let fs = MemFs::new();
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        for n in 1..=3u64 {
            let path = filename::sstable(&dir, FileNumber(n));
            let file = fs.create(&path, FileOptions::default()).unwrap();
            let mut b = TableBuilder::new(file, path, TableOptions::default());
            let k = InternalKey::new(format!("k{n}").as_bytes(), n, ValueKind::Value);
            b.add(k.encoded(), b"v").unwrap();
            b.finish().unwrap();
        }
        let block_cache = Arc::new(super::super::new_block_cache(1 << 20));
        let tc = TableCache::new(Arc::new(fs.clone()), dir.clone(), 1, block_cache, false);
        let t1 = tc.get(FileNumber(1)).unwrap();
        assert!(
            Arc::ptr_eq(&t1, &tc.get(FileNumber(1)).unwrap()),
            "second get must hit"
        );
        assert_eq!(t1.properties().num_entries, 1);
        let seek = InternalKey::for_seek(b"k1", 10);
        let (k, v) = t1.get(b"k1", seek.encoded()).unwrap().unwrap();
        assert_eq!((InternalKey::from_encoded(k).seq(), v), (1, b"v".to_vec()));

        tc.evict(FileNumber(1));
        assert!(
            !Arc::ptr_eq(&t1, &tc.get(FileNumber(1)).unwrap()),
            "evicted table reopened"
        );
        // Capacity 1 per shard: filling the cache keeps it bounded.
        for n in 1..=3 {
            tc.get(FileNumber(n)).unwrap();
        }
        assert!(tc.tables.usage() <= 4);
        let missing = tc.get(FileNumber(9)).unwrap_err();
        assert!(missing.to_string().contains("000009.sst"), "{missing}");
        // A damaged table is reported, not cached.
        let p2 = filename::sstable(&dir, FileNumber(2));
        tc.evict(FileNumber(2));
        fs.truncate(&p2, 10);
        assert!(tc.get(FileNumber(2)).unwrap_err().is_corruption());
    }
}
