//! All file I/O goes through [`Fs`], so that tests can run on an in-memory
//! file system that simulates crashes ([`MemFs`]) and on one that injects
//! faults ([`FaultFs`]).
//!
//! Independent reads (a scan's value prefetch, GC's live runs) go to
//! [`Fs::read_batch`] together: [`OsFs`] submits them at once through
//! io_uring and waits for them together, from the calling thread, where
//! the kernel allows it (module `uring`), and reads them one by one with
//! `pread` where it does not.

mod counting;
mod fault;
mod mem;
mod os;
mod uring;
mod usage;

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use crate::error::Result;

pub(crate) use counting::{add_thread_reads, thread_reads, CountingFs};
pub use fault::{FaultFs, FaultOp};
pub use mem::MemFs;
pub use os::OsFs;
pub(crate) use usage::UsageFs;

/// Reads in flight at once that a batch of foreground reads (a scan's
/// prefetch, `multi_get`) may use: the io_uring ring's depth.
pub const MAX_READS_IN_FLIGHT: usize = uring::RING_DEPTH as usize;

/// One read of a batch: exactly `len` bytes at `offset` of `file`, as
/// [`RandomAccessFile::read_at`] reads them.
#[derive(Clone, Copy)]
pub struct ReadRequest<'a> {
    pub file: &'a dyn RandomAccessFile,
    pub offset: u64,
    pub len: usize,
}

impl std::fmt::Debug for ReadRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadRequest")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// How an [`Fs`] serves [`Fs::read_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadBatchMode {
    /// Submitted together through io_uring and waited for together.
    IoUring,
    /// One read after another in the calling thread (`pread` on a real
    /// file system).
    Pread,
}

impl ReadBatchMode {
    /// The name `Db::property("cleave.batch-reads")` reports.
    pub fn name(self) -> &'static str {
        match self {
            ReadBatchMode::IoUring => "io_uring",
            ReadBatchMode::Pread => "pread",
        }
    }
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileOptions {
    /// Bypass the page cache (`O_DIRECT`), where the file system allows it.
    pub direct: bool,
}

/// A file system: the engine's only way to touch storage.
pub trait Fs: Send + Sync + std::fmt::Debug {
    /// Creates `path` (truncating any existing file) for appending.
    fn create(&self, path: &Path, opts: FileOptions) -> Result<Box<dyn WritableFile>>;
    /// Opens the existing file `path` for writing from offset `at` (at most
    /// its size) over the bytes it holds, without truncating it: appends
    /// that stay inside its size leave the size alone, so that a `sync`
    /// of them flushes data and no size metadata (a preallocated or
    /// recycled log, LavaFS's `fdatasync`). The writer's `len` is its
    /// position, `at` plus what it appended. With `direct`, writes go
    /// around the page cache in the device's own block size where the
    /// file system allows it, so that a sync writes the sectors appended
    /// to and not whole pages. Every byte of the file must be durable
    /// already: a file this process synced, or one recovery found.
    fn reopen_at(&self, path: &Path, at: u64, opts: FileOptions) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for positional reads.
    fn open(&self, path: &Path, opts: FileOptions) -> Result<Arc<dyn RandomAccessFile>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    fn remove(&self, path: &Path) -> Result<()>;
    /// Makes `to` (which must not exist) a second name of the file `from`,
    /// sharing its bytes; durable once `to`'s directory is synced. Fails
    /// where the file system cannot (another device, no hard links):
    /// callers copy instead.
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()>;
    /// Names (not paths) of the entries in `dir`.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    fn exists(&self, path: &Path) -> Result<bool>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Makes every byte of the existing file `path` durable: a file
    /// written and closed without a sync (a full value log), or one a
    /// crashed process left, which recovery keeps as it is.
    fn sync_file(&self, path: &Path) -> Result<()>;
    /// Takes an exclusive advisory lock on `path`, failing at once if any
    /// holder (in this process or another) has it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;

    /// Reads every request of `reads` (independent reads, of files this
    /// file system opened), each as [`RandomAccessFile::read_at`] would:
    /// one result per request, in order, and a failed read fails only its
    /// own request; at most `in_flight` of them at once (at least one), so
    /// that background work can leave the device to the foreground. The
    /// default reads them one after another.
    fn read_batch(&self, reads: &[ReadRequest<'_>], in_flight: usize) -> Vec<Result<Vec<u8>>> {
        let _ = in_flight;
        reads
            .iter()
            .map(|r| r.file.read_at(r.offset, r.len))
            .collect()
    }

    /// How [`Self::read_batch`] reads.
    fn read_batch_mode(&self) -> ReadBatchMode {
        ReadBatchMode::Pread
    }

    /// Cuts the file at `path` to `len` bytes (no more than it holds): a
    /// value log that a full disk cut in the middle of a record is sealed
    /// after its last whole one. Durable with the file's next sync. The
    /// default refuses (`Unsupported`).
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let _ = len;
        Err(crate::error::Error::io(
            path,
            "truncate",
            std::io::Error::from(std::io::ErrorKind::Unsupported),
        ))
    }

    /// Bytes an unprivileged writer may still write to the file system
    /// holding `dir` (`statvfs`'s available blocks), which a database on a
    /// full disk watches to resume; `u64::MAX` where the file system has no
    /// such limit (the default).
    fn free_space(&self, dir: &Path) -> Result<u64> {
        let _ = dir;
        Ok(u64::MAX)
    }
}

/// A file being written from start to end.
pub trait WritableFile: Send {
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system (survives a process
    /// crash, not a power loss).
    fn flush(&mut self) -> Result<()>;
    /// Makes every appended byte durable.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read at arbitrary offsets, shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; reading past the end is an error.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The file as `Any`, so that a file system's [`Fs::read_batch`] can
    /// find its own files' descriptors among the requests.
    fn as_any(&self) -> &dyn Any;
}

/// Holds a directory lock until dropped.
pub trait FileLock: Send + Sync {}

/// Reads a whole file.
pub(crate) fn read_all(fs: &dyn Fs, path: &Path) -> Result<Vec<u8>> {
    let f = fs.open(path, FileOptions::default())?;
    let len = usize::try_from(f.len())
        .map_err(|_| crate::Error::corruption(path, 0, "file larger than the address space"))?;
    f.read_at(0, len)
}

/// Writes `data` to `path` via a temporary file and a rename, syncing both
/// the file and the directory, so that `path` holds the old or the new
/// contents after a crash, never a mix.
pub(crate) fn write_atomically(
    fs: &dyn Fs,
    dir: &Path,
    tmp: &Path,
    path: &Path,
    data: &[u8],
) -> Result<()> {
    let mut f = fs.create(tmp, FileOptions::default())?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    fs.rename(tmp, path)?;
    fs.sync_dir(dir)
}
