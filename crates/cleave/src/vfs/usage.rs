//! A wrapper that keeps the size of every file in one directory as the
//! engine writes, renames and removes them, so that the space budget sees
//! what `du` sees (WALs as they grow, files waiting for deletion, outputs
//! half written, the manifest) at the cost of an atomic add per append,
//! without walking the directory.
//!
//! A file's size is the bytes appended to it so far, whether or not they
//! have left the writer's buffer: what the directory will hold once they
//! have. Files outside the directory pass through uncounted.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{
    FileLock, FileOptions, Fs, RandomAccessFile, ReadBatchMode, ReadRequest, WritableFile,
};
use crate::error::{Error, Result};

/// One counted file. `None` once it left the directory (removed, replaced
/// by a rename or by a new file of its name): a writer still holding it
/// then counts nothing more.
type Entry = Arc<Mutex<Option<u64>>>;

#[derive(Debug)]
pub(crate) struct UsageFs {
    inner: Arc<dyn Fs>,
    dir: PathBuf,
    files: Mutex<HashMap<PathBuf, Entry>>,
    total: Arc<AtomicU64>,
}

impl UsageFs {
    /// Counts the files `dir` (which must exist) holds now, and from then
    /// on what goes through this file system.
    pub(crate) fn new(inner: Arc<dyn Fs>, dir: &Path) -> Result<UsageFs> {
        let mut files = HashMap::new();
        let mut total = 0u64;
        for name in inner.list(dir)? {
            let path = dir.join(&name);
            let size = match inner.open(&path, FileOptions::default()) {
                Ok(f) => f.len(),
                // A directory, or a file another process removed.
                Err(Error::Io { source, .. })
                    if matches!(source.kind(), ErrorKind::NotFound | ErrorKind::IsADirectory) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            total = total.saturating_add(size);
            files.insert(path, Arc::new(Mutex::new(Some(size))));
        }
        Ok(UsageFs {
            inner,
            dir: dir.to_path_buf(),
            files: Mutex::new(files),
            total: Arc::new(AtomicU64::new(total)),
        })
    }

    /// Bytes of all files in the directory.
    pub(crate) fn bytes(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    fn counted(&self, path: &Path) -> bool {
        path.parent() == Some(self.dir.as_path())
    }

    /// Takes `path` out of the count.
    fn forget(&self, files: &mut HashMap<PathBuf, Entry>, path: &Path) {
        if let Some(entry) = files.remove(path) {
            if let Some(size) = entry.lock().take() {
                self.total.fetch_sub(size, Ordering::Relaxed);
            }
        }
    }
}

struct UsageFile {
    inner: Box<dyn WritableFile>,
    entry: Entry,
    total: Arc<AtomicU64>,
    /// The file's size as counted: a file written over from its start
    /// ([`Fs::reopen_at`]) grows only once the writer passes its old end.
    size: u64,
}

impl UsageFile {
    /// Counts what the inner file grew by, also when it failed part way.
    fn count(&mut self) {
        let end = self.inner.len();
        if end <= self.size {
            return;
        }
        let grown = end - self.size;
        self.size = end;
        if let Some(size) = self.entry.lock().as_mut() {
            *size += grown;
            self.total.fetch_add(grown, Ordering::Relaxed);
        }
    }
}

impl WritableFile for UsageFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let r = self.inner.append(data);
        self.count();
        r
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Fs for UsageFs {
    fn create(&self, path: &Path, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        if !self.counted(path) {
            return self.inner.create(path, opts);
        }
        let mut files = self.files.lock();
        let inner = self.inner.create(path, opts)?;
        // Truncated: what an older file of this name held is gone.
        self.forget(&mut files, path);
        let entry: Entry = Arc::new(Mutex::new(Some(0)));
        files.insert(path.to_path_buf(), entry.clone());
        Ok(Box::new(UsageFile {
            inner,
            entry,
            total: self.total.clone(),
            size: 0,
        }))
    }

    fn reopen_at(&self, path: &Path, at: u64, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        let inner = self.inner.reopen_at(path, at, opts)?;
        if !self.counted(path) {
            return Ok(inner);
        }
        let size = self.inner.open(path, FileOptions::default())?.len();
        let mut files = self.files.lock();
        let entry = match files.get(path) {
            Some(entry) => entry.clone(),
            // Written by someone else since the count began.
            None => {
                self.total.fetch_add(size, Ordering::Relaxed);
                let entry: Entry = Arc::new(Mutex::new(Some(size)));
                files.insert(path.to_path_buf(), entry.clone());
                entry
            }
        };
        Ok(Box::new(UsageFile {
            inner,
            entry,
            total: self.total.clone(),
            size,
        }))
    }

    fn open(&self, path: &Path, opts: FileOptions) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path, opts)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut files = self.files.lock();
        self.inner.rename(from, to)?;
        self.forget(&mut files, to);
        match files.remove(from) {
            Some(entry) if self.counted(to) => {
                files.insert(to.to_path_buf(), entry);
            }
            Some(entry) => {
                if let Some(size) = entry.lock().take() {
                    self.total.fetch_sub(size, Ordering::Relaxed);
                }
            }
            // Into the directory from outside it: counted at its size now.
            None if self.counted(to) => {
                let size = self.inner.open(to, FileOptions::default())?.len();
                self.total.fetch_add(size, Ordering::Relaxed);
                files.insert(to.to_path_buf(), Arc::new(Mutex::new(Some(size))));
            }
            None => {}
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut files = self.files.lock();
        self.inner.remove(path)?;
        self.forget(&mut files, path);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        if !self.counted(to) {
            return self.inner.hard_link(from, to);
        }
        // A new name in the directory counts as a file of its size, as
        // every name found at open does (`--apparent-size` counts each).
        let size = self.inner.open(from, FileOptions::default())?.len();
        let mut files = self.files.lock();
        self.inner.hard_link(from, to)?;
        self.total.fetch_add(size, Ordering::Relaxed);
        files.insert(to.to_path_buf(), Arc::new(Mutex::new(Some(size))));
        Ok(())
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
        let mut files = self.files.lock();
        let lock = self.inner.lock(path)?;
        // The lock file may have just been created, empty (or not at all,
        // where locks are not files).
        if self.counted(path) && !files.contains_key(path) {
            match self.inner.open(path, FileOptions::default()) {
                Ok(f) => {
                    self.total.fetch_add(f.len(), Ordering::Relaxed);
                    files.insert(path.to_path_buf(), Arc::new(Mutex::new(Some(f.len()))));
                }
                Err(Error::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(lock)
    }

    fn read_batch(&self, reads: &[ReadRequest<'_>], in_flight: usize) -> Vec<Result<Vec<u8>>> {
        self.inner.read_batch(reads, in_flight)
    }

    fn read_batch_mode(&self) -> ReadBatchMode {
        self.inner.read_batch_mode()
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let files = self.files.lock();
        self.inner.truncate(path, len)?;
        if let Some(entry) = files.get(path) {
            if let Some(size) = entry.lock().as_mut() {
                let cut = size.saturating_sub(len);
                *size -= cut;
                self.total.fetch_sub(cut, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn free_space(&self, dir: &Path) -> Result<u64> {
        self.inner.free_space(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemFs;

    /// The sizes of the files in `dir`, summed, as a directory walk sees them.
    fn walk(fs: &dyn Fs, dir: &Path) -> u64 {
        fs.list(dir)
            .unwrap()
            .iter()
            .map(|n| fs.open(&dir.join(n), FileOptions::default()).unwrap().len())
            .sum()
    }

    #[test]
    fn follows_appends_renames_truncations_and_removals() {
        let mem = MemFs::new();
        let dir = Path::new("/db");
        mem.create_dir_all(dir).unwrap();
        let mut old = mem
            .create(&dir.join("old"), FileOptions::default())
            .unwrap();
        old.append(&[1; 300]).unwrap();
        drop(old);
        let fs = UsageFs::new(Arc::new(mem.clone()), dir).unwrap();
        assert_eq!(fs.bytes(), 300);

        let mut a = fs.create(&dir.join("a"), FileOptions::default()).unwrap();
        a.append(&[2; 1000]).unwrap();
        assert_eq!(fs.bytes(), 1300);
        assert_eq!(fs.bytes(), walk(&mem, dir));
        // Outside the directory: not counted.
        mem.create_dir_all(Path::new("/other")).unwrap();
        let mut o = fs
            .create(Path::new("/other/x"), FileOptions::default())
            .unwrap();
        o.append(&[0; 50]).unwrap();
        assert_eq!(fs.bytes(), 1300);

        // A rename over an existing file replaces it.
        fs.rename(&dir.join("a"), &dir.join("old")).unwrap();
        assert_eq!(fs.bytes(), 1000);
        // The renamed writer still counts under its new name.
        a.append(&[3; 24]).unwrap();
        assert_eq!(fs.bytes(), 1024);
        assert_eq!(fs.bytes(), walk(&mem, dir));

        // Truncation by a new file of the same name.
        let mut again = fs.create(&dir.join("old"), FileOptions::default()).unwrap();
        again.append(&[4; 10]).unwrap();
        a.append(&[5; 100]).unwrap(); // the replaced writer counts nothing
        assert_eq!(fs.bytes(), 10);

        fs.remove(&dir.join("old")).unwrap();
        assert_eq!(fs.bytes(), 0);
        again.append(&[6; 10]).unwrap();
        assert_eq!(fs.bytes(), 0);
        assert_eq!(walk(&mem, dir), 0);
    }

    /// A file written over from an offset grows the count only past its
    /// old end.
    #[test]
    fn a_reopened_file_counts_only_its_growth() {
        let mem = MemFs::new();
        let dir = Path::new("/db");
        mem.create_dir_all(dir).unwrap();
        let fs = UsageFs::new(Arc::new(mem.clone()), dir).unwrap();
        let p = dir.join("wal");
        let mut w = fs.create(&p, FileOptions::default()).unwrap();
        w.append(&[1; 500]).unwrap();
        w.sync().unwrap();
        drop(w);
        let mut w = fs.reopen_at(&p, 100, FileOptions::default()).unwrap();
        w.append(&[2; 300]).unwrap();
        assert_eq!(fs.bytes(), 500);
        w.append(&[3; 200]).unwrap();
        assert_eq!(fs.bytes(), 600);
        assert_eq!(fs.bytes(), walk(&mem, dir));
    }
}
