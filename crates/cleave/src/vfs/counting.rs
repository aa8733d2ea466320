//! A wrapper that counts the reads reaching the file system under it, in
//! total and per thread, so that the engine can say how many disk reads
//! one get or one `multi_get` cost, whatever `Fs` it was given.
//!
//! The count is of read calls: a `read_at`, or one request of a batch. A
//! read the file system serves from its page cache counts too; with
//! `use_direct_reads` every counted read reaches the device.

use std::any::Any;
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{
    FileLock, FileOptions, Fs, RandomAccessFile, ReadBatchMode, ReadRequest, WritableFile,
};
use crate::error::Result;

thread_local! {
    /// Reads this thread issued through any `CountingFs`.
    static THREAD_READS: Cell<u64> = const { Cell::new(0) };
}

/// Reads the calling thread has issued through any [`CountingFs`] so far:
/// the difference across an operation is what it read.
pub(crate) fn thread_reads() -> u64 {
    THREAD_READS.with(Cell::get)
}

/// Counts `reads` another thread made on the calling thread's behalf.
pub(crate) fn add_thread_reads(reads: u64) {
    THREAD_READS.with(|r| r.set(r.get() + reads));
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    bytes: AtomicU64,
}

impl Counters {
    fn count(&self, bytes: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        THREAD_READS.with(|r| r.set(r.get() + 1));
    }
}

/// Counts the reads of the files it opens; everything else passes through.
#[derive(Debug)]
pub(crate) struct CountingFs {
    inner: Arc<dyn Fs>,
    counters: Arc<Counters>,
}

impl CountingFs {
    pub(crate) fn new(inner: Arc<dyn Fs>) -> CountingFs {
        CountingFs {
            inner,
            counters: Arc::default(),
        }
    }

    /// Reads of files opened through this file system, and their bytes.
    pub(crate) fn reads(&self) -> (u64, u64) {
        (
            self.counters.reads.load(Ordering::Relaxed),
            self.counters.bytes.load(Ordering::Relaxed),
        )
    }
}

struct CountingFile {
    inner: Arc<dyn RandomAccessFile>,
    counters: Arc<Counters>,
}

impl RandomAccessFile for CountingFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.counters.count(len);
        self.inner.read_at(offset, len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Fs for CountingFs {
    fn create(&self, path: &Path, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        self.inner.create(path, opts)
    }

    fn reopen_at(&self, path: &Path, at: u64, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        self.inner.reopen_at(path, at, opts)
    }

    fn open(&self, path: &Path, opts: FileOptions) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(CountingFile {
            inner: self.inner.open(path, opts)?,
            counters: self.counters.clone(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.hard_link(from, to)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        self.inner.exists(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        self.inner.sync_file(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }

    /// Counts each request and hands the batch, with the files under the
    /// counting ones, to the inner file system's batched read.
    fn read_batch(&self, reads: &[ReadRequest<'_>], in_flight: usize) -> Vec<Result<Vec<u8>>> {
        let inner: Vec<ReadRequest<'_>> = reads
            .iter()
            .map(|r| {
                self.counters.count(r.len);
                match r.file.as_any().downcast_ref::<CountingFile>() {
                    Some(f) => ReadRequest {
                        file: f.inner.as_ref(),
                        ..*r
                    },
                    None => *r,
                }
            })
            .collect();
        self.inner.read_batch(&inner, in_flight)
    }

    fn read_batch_mode(&self) -> ReadBatchMode {
        self.inner.read_batch_mode()
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.inner.truncate(path, len)
    }

    fn free_space(&self, dir: &Path) -> Result<u64> {
        self.inner.free_space(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{MemFs, MAX_READS_IN_FLIGHT};

    #[test]
    fn reads_are_counted_in_total_and_per_thread() {
        let mem = MemFs::new();
        let fs = CountingFs::new(Arc::new(mem.clone()));
        fs.create_dir_all(Path::new("/d")).unwrap();
        let mut w = fs
            .create(Path::new("/d/f"), FileOptions::default())
            .unwrap();
        w.append(&[7u8; 100]).unwrap();
        w.sync().unwrap();
        drop(w);
        let f = fs.open(Path::new("/d/f"), FileOptions::default()).unwrap();
        let before = thread_reads();
        assert_eq!(f.read_at(10, 5).unwrap(), vec![7u8; 5]);
        let batch = [
            ReadRequest {
                file: f.as_ref(),
                offset: 0,
                len: 10,
            },
            ReadRequest {
                file: f.as_ref(),
                offset: 95,
                len: 10,
            },
        ];
        let got = fs.read_batch(&batch, MAX_READS_IN_FLIGHT);
        assert_eq!(got[0].as_deref().unwrap(), &[7u8; 10]);
        assert!(got[1].is_err(), "a read past the end fails alone");
        assert_eq!(thread_reads() - before, 3);
        assert_eq!(fs.reads(), (3, 25));
        // Another thread's reads are counted in total, not here.
        let before = thread_reads();
        std::thread::scope(|s| {
            s.spawn(|| f.read_at(0, 1).unwrap());
        });
        assert_eq!(thread_reads(), before);
        assert_eq!(fs.reads().0, 4);
    }
}
