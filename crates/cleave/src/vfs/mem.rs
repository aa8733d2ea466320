//! An in-memory file system that models what survives a crash: appended
//! bytes are durable only after `sync`, and directory entries (creations,
//! renames, removals) only after `sync_dir` of their directory.

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileOptions, Fs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct MemFile {
    /// Bytes written from the start of the file by its current writer.
    data: Vec<u8>,
    /// How much of `data` is durable.
    synced: usize,
    /// For a file reopened to be written over ([`Fs::reopen_at`]): what it
    /// held then, all durable, of which the part past `data` is still the
    /// file's content. Empty for a file written from its creation.
    stale: Vec<u8>,
}

impl MemFile {
    /// What a reader sees: the bytes written, then the old bytes past them.
    fn visible(&self) -> Vec<u8> {
        let mut v = self.data.clone();
        v.extend_from_slice(self.stale.get(self.data.len()..).unwrap_or_default());
        v
    }

    fn visible_len(&self) -> usize {
        self.data.len().max(self.stale.len())
    }

    /// What a power loss leaves when the first `len` bytes of `data`
    /// (at least the synced ones) reached the disk.
    fn image(&self, len: usize) -> Vec<u8> {
        let mut v = self.data[..len].to_vec();
        v.extend_from_slice(self.stale.get(len..).unwrap_or_default());
        v
    }
}

type FileRef = Arc<Mutex<MemFile>>;

#[derive(Debug, Default)]
struct State {
    /// What a running process sees.
    live: HashMap<PathBuf, FileRef>,
    /// Directory entries as of each directory's last `sync_dir`.
    durable: HashMap<PathBuf, FileRef>,
    dirs: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
}

/// In-memory [`Fs`] for tests, with crash simulation.
#[derive(Debug, Default, Clone)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

fn not_found(path: &Path, op: &'static str) -> Error {
    Error::io(
        path,
        op,
        std::io::Error::new(ErrorKind::NotFound, "no such file"),
    )
}

impl MemFs {
    pub fn new() -> Self {
        Self::default()
    }

    /// The state a disk could be in after a power loss now: only synced
    /// bytes of files whose directory entries were synced.
    pub fn crash_clone(&self) -> MemFs {
        self.crash_clone_keeping(|_| 0)
    }

    /// Like [`crash_clone`](Self::crash_clone), but each file keeps the first
    /// `keep(unsynced_len)` of its unsynced bytes, modelling a torn write.
    pub fn crash_clone_keeping(&self, mut keep: impl FnMut(usize) -> usize) -> MemFs {
        let st = self.state.lock();
        let mut durable = HashMap::new();
        for (path, f) in &st.durable {
            let f = f.lock();
            let unsynced = f.data.len() - f.synced;
            let len = f.synced + keep(unsynced).min(unsynced);
            let data = f.image(len);
            durable.insert(
                path.clone(),
                Arc::new(Mutex::new(MemFile {
                    synced: data.len(),
                    data,
                    stale: Vec::new(),
                })),
            );
        }
        MemFs {
            state: Arc::new(Mutex::new(State {
                live: durable.clone(),
                durable,
                dirs: st.dirs.clone(),
                locks: HashSet::new(),
            })),
        }
    }

    /// The state after the process dies now (SIGKILL) while the OS runs
    /// on: every byte written is there, and what was not synced is still
    /// not durable, so a power cut later can lose it. `MemFs` has no
    /// buffer on the process's side, so bytes appended but never flushed
    /// are kept too (an `OsFs` process would lose them); and files are
    /// copied one by one, so take it while no writer runs.
    pub fn process_crash_clone(&self) -> MemFs {
        let st = self.state.lock();
        // A file named in both views is one file: copied once.
        let mut copies: HashMap<*const Mutex<MemFile>, FileRef> = HashMap::new();
        let mut copy = |f: &FileRef| -> FileRef {
            copies
                .entry(Arc::as_ptr(f))
                .or_insert_with(|| {
                    let f = f.lock();
                    Arc::new(Mutex::new(MemFile {
                        synced: f.synced,
                        data: f.data.clone(),
                        stale: f.stale.clone(),
                    }))
                })
                .clone()
        };
        let live = st.live.iter().map(|(p, f)| (p.clone(), copy(f))).collect();
        let durable = st
            .durable
            .iter()
            .map(|(p, f)| (p.clone(), copy(f)))
            .collect();
        MemFs {
            state: Arc::new(Mutex::new(State {
                live,
                durable,
                dirs: st.dirs.clone(),
                locks: HashSet::new(),
            })),
        }
    }

    /// Test helper: overwrites one byte of a file (in both views).
    pub fn corrupt_byte(&self, path: &Path, offset: usize) -> bool {
        let st = self.state.lock();
        match st.live.get(path) {
            Some(f) => {
                let mut f = f.lock();
                let target = if offset < f.data.len() {
                    f.data.get_mut(offset)
                } else {
                    f.stale.get_mut(offset)
                };
                match target {
                    Some(b) => {
                        *b ^= 0x5a;
                        true
                    }
                    None => false,
                }
            }
            None => false,
        }
    }

    /// Test helper: the size of a file, if it exists.
    pub fn file_len(&self, path: &Path) -> Option<usize> {
        self.state
            .lock()
            .live
            .get(path)
            .map(|f| f.lock().visible_len())
    }

    /// Test helper: cuts a file to `len` bytes (in both views).
    pub fn truncate(&self, path: &Path, len: usize) {
        if let Some(f) = self.state.lock().live.get(path) {
            let mut f = f.lock();
            f.data.truncate(len);
            f.stale.truncate(len);
            f.synced = f.synced.min(len);
        }
    }
}

impl Fs for MemFs {
    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let f = self
            .state
            .lock()
            .live
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(path, "truncate"))?;
        let mut f = f.lock();
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        f.data.truncate(len);
        f.stale.truncate(len);
        f.synced = f.synced.min(len);
        Ok(())
    }

    fn create(&self, path: &Path, _opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        if let Some(parent) = path.parent() {
            if !st.dirs.contains(parent) {
                return Err(not_found(parent, "create"));
            }
        }
        let f: FileRef = Arc::default();
        st.live.insert(path.to_path_buf(), f.clone());
        Ok(Box::new(MemWritable { file: f }))
    }

    fn reopen_at(&self, path: &Path, at: u64, _opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        let st = self.state.lock();
        let file = st
            .live
            .get(path)
            .ok_or_else(|| not_found(path, "open_for_write"))?
            .clone();
        let mut f = file.lock();
        let misuse = |why: String| {
            Error::io(
                path,
                "open_for_write",
                std::io::Error::new(ErrorKind::InvalidInput, why),
            )
        };
        if f.synced < f.data.len() {
            // The model keeps one durable image of old bytes: the caller
            // must have made them durable (the trait's contract).
            return Err(misuse("reopened with bytes not yet synced".to_string()));
        }
        let old = f.visible();
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        if at > old.len() {
            return Err(misuse(format!(
                "write position {at} past the end of the file ({} bytes)",
                old.len()
            )));
        }
        f.data = old[..at].to_vec();
        f.synced = at;
        f.stale = old;
        drop(f);
        Ok(Box::new(MemWritable { file }))
    }

    fn open(&self, path: &Path, _opts: FileOptions) -> Result<Arc<dyn RandomAccessFile>> {
        let st = self.state.lock();
        let f = st.live.get(path).ok_or_else(|| not_found(path, "open"))?;
        Ok(Arc::new(MemRandomAccess {
            path: path.to_path_buf(),
            file: f.clone(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        let f = st
            .live
            .remove(from)
            .ok_or_else(|| not_found(from, "rename"))?;
        st.live.insert(to.to_path_buf(), f);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.live
            .remove(path)
            .ok_or_else(|| not_found(path, "remove"))?;
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        if let Some(parent) = to.parent() {
            if !st.dirs.contains(parent) {
                return Err(not_found(parent, "link"));
            }
        }
        if st.live.contains_key(to) {
            return Err(Error::io(
                to,
                "link",
                std::io::Error::new(ErrorKind::AlreadyExists, "file exists"),
            ));
        }
        let f = st
            .live
            .get(from)
            .ok_or_else(|| not_found(from, "link"))?
            .clone();
        st.live.insert(to.to_path_buf(), f);
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let st = self.state.lock();
        if !st.dirs.contains(dir) {
            return Err(not_found(dir, "list"));
        }
        Ok(st
            .live
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut st = self.state.lock();
        for d in dir.ancestors() {
            st.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let st = self.state.lock();
        Ok(st.live.contains_key(path) || st.dirs.contains(path))
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        let st = self.state.lock();
        let f = st.live.get(path).ok_or_else(|| not_found(path, "sync"))?;
        let mut f = f.lock();
        f.synced = f.data.len();
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.durable.retain(|p, _| p.parent() != Some(dir));
        let entries: Vec<_> = st
            .live
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, f)| (p.clone(), f.clone()))
            .collect();
        st.durable.extend(entries);
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        if !st.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
                lock: path.to_path_buf(),
            });
        }
        Ok(Box::new(MemLock {
            state: self.state.clone(),
            path: path.to_path_buf(),
        }))
    }
}

struct MemLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

struct MemWritable {
    file: FileRef,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file.lock().data.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let mut f = self.file.lock();
        f.synced = f.data.len();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.file.lock().data.len() as u64
    }
}

struct MemRandomAccess {
    path: PathBuf,
    file: FileRef,
}

impl RandomAccessFile for MemRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let f = self.file.lock();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.checked_add(len);
        let bytes = match end {
            Some(end) if end <= f.data.len() => f.data.get(start..end).map(<[u8]>::to_vec),
            Some(end) if end <= f.visible_len() => f.visible().get(start..end).map(<[u8]>::to_vec),
            _ => None,
        };
        match bytes {
            Some(s) => Ok(s),
            None => Err(Error::io(
                &self.path,
                "read",
                std::io::Error::new(ErrorKind::UnexpectedEof, "read past end of file"),
            )),
        }
    }

    fn len(&self) -> u64 {
        self.file.lock().visible_len() as u64
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{ReadBatchMode, ReadRequest, MAX_READS_IN_FLIGHT};

    #[test]
    fn crash_keeps_only_synced_bytes_of_synced_entries() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let mut a = fs.create(&d.join("a"), FileOptions::default()).unwrap();
        a.append(b"hello").unwrap();
        a.sync().unwrap();
        a.append(b" world").unwrap();
        let mut b = fs.create(&d.join("b"), FileOptions::default()).unwrap();
        b.append(b"x").unwrap();
        b.sync().unwrap();
        fs.sync_dir(d).unwrap();
        let mut c = fs.create(&d.join("c"), FileOptions::default()).unwrap();
        c.append(b"y").unwrap();
        c.sync().unwrap();

        let crashed = fs.crash_clone();
        assert_eq!(crashed.file_len(&d.join("a")), Some(5));
        assert_eq!(crashed.file_len(&d.join("b")), Some(1));
        assert_eq!(crashed.file_len(&d.join("c")), None, "entry never synced");

        let torn = fs.crash_clone_keeping(|n| n / 2);
        assert_eq!(torn.file_len(&d.join("a")), Some(8));
    }

    /// A file written over from its start keeps its size and, after a
    /// crash, its old bytes past what was synced of the new ones.
    #[test]
    fn a_reopened_file_is_written_over_in_place() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let p = d.join("log");
        let mut f = fs.create(&p, FileOptions::default()).unwrap();
        f.append(b"0123456789").unwrap();
        drop(f);
        assert!(
            fs.reopen_at(&p, 0, FileOptions::default()).is_err(),
            "old bytes not durable"
        );
        fs.sync_file(&p).unwrap();
        fs.sync_dir(d).unwrap();
        let mut w = fs.reopen_at(&p, 2, FileOptions::default()).unwrap();
        assert_eq!(w.len(), 2);
        w.append(b"ab").unwrap();
        w.sync().unwrap();
        w.append(b"cd").unwrap();
        let r = fs.open(&p, FileOptions::default()).unwrap();
        assert_eq!(r.read_at(0, 10).unwrap(), b"01abcd6789");
        assert_eq!(fs.crash_clone().file_len(&p), Some(10));
        let crashed = fs.crash_clone_keeping(|n| n / 2);
        let r = crashed.open(&p, FileOptions::default()).unwrap();
        assert_eq!(r.read_at(0, 10).unwrap(), b"01abc56789");
        assert!(
            fs.reopen_at(&p, 11, FileOptions::default()).is_err(),
            "past the end"
        );
    }

    #[test]
    fn rename_is_durable_only_after_sync_dir() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        let mut a = fs.create(&d.join("tmp"), FileOptions::default()).unwrap();
        a.append(b"v").unwrap();
        a.sync().unwrap();
        fs.sync_dir(d).unwrap();
        fs.rename(&d.join("tmp"), &d.join("CURRENT")).unwrap();
        assert!(!fs.crash_clone().exists(&d.join("CURRENT")).unwrap());
        fs.sync_dir(d).unwrap();
        assert!(fs.crash_clone().exists(&d.join("CURRENT")).unwrap());
    }

    /// Each request of a batch is read as `read_at` reads it; one past the
    /// end fails alone.
    #[test]
    fn batch_reads_each_request_alone() {
        let fs = MemFs::new();
        let d = Path::new("/db");
        fs.create_dir_all(d).unwrap();
        for (name, data) in [("a", &b"hello world"[..]), ("b", b"xyz")] {
            let mut f = fs.create(&d.join(name), FileOptions::default()).unwrap();
            f.append(data).unwrap();
        }
        let a = fs.open(&d.join("a"), FileOptions::default()).unwrap();
        let b = fs.open(&d.join("b"), FileOptions::default()).unwrap();
        fn request(file: &Arc<dyn RandomAccessFile>, offset: u64, len: usize) -> ReadRequest<'_> {
            ReadRequest {
                file: file.as_ref(),
                offset,
                len,
            }
        }
        let results = fs.read_batch(
            &[
                request(&a, 6, 5),
                request(&b, 2, 2),
                request(&b, 0, 3),
                request(&a, 11, 0),
            ],
            MAX_READS_IN_FLIGHT,
        );
        assert_eq!(results.len(), 4);
        let mut results = results.into_iter();
        assert_eq!(results.next().unwrap().unwrap(), b"world");
        let err = results.next().unwrap().unwrap_err();
        assert!(
            matches!(&err, Error::Io { path, op: "read", .. } if path == &d.join("b")),
            "{err}"
        );
        assert_eq!(results.next().unwrap().unwrap(), b"xyz");
        assert_eq!(results.next().unwrap().unwrap(), b"");
        assert!(fs.read_batch(&[], 1).is_empty());
        assert_eq!(fs.read_batch_mode(), ReadBatchMode::Pread);
    }

    #[test]
    fn lock_is_exclusive() {
        let fs = MemFs::new();
        let l = fs.lock(Path::new("/LOCK")).unwrap();
        assert!(fs.lock(Path::new("/LOCK")).is_err());
        drop(l);
        assert!(fs.lock(Path::new("/LOCK")).is_ok());
    }
}
