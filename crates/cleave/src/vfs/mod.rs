//! All file I/O goes through [`Fs`], so that tests can run on an in-memory
//! file system that simulates crashes ([`MemFs`]) and on one that injects
//! faults ([`FaultFs`]).

mod fault;
mod mem;
mod os;

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;

pub use fault::{FaultFs, FaultOp};
pub use mem::MemFs;
pub use os::OsFs;

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
    /// Opens an existing file for positional reads.
    fn open(&self, path: &Path, opts: FileOptions) -> Result<Arc<dyn RandomAccessFile>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    fn remove(&self, path: &Path) -> Result<()>;
    /// Names (not paths) of the entries in `dir`.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    fn exists(&self, path: &Path) -> Result<bool>;
    /// Makes creations, renames and removals in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Takes an exclusive advisory lock on `path`, failing at once if any
    /// holder (in this process or another) has it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
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
