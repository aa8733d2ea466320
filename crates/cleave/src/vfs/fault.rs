//! A wrapper that injects I/O errors into chosen operations, to test that
//! every failure ends in a typed error and a recoverable state.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{
    FileLock, FileOptions, Fs, RandomAccessFile, ReadBatchMode, ReadRequest, WritableFile,
};
use crate::error::{Error, Result};

/// The operations a fault can be injected into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultOp {
    Create,
    Open,
    Append,
    Sync,
    Read,
    Rename,
    Remove,
    SyncDir,
    Link,
}

impl FaultOp {
    /// Every operation, for a fault that may strike anywhere.
    pub const ALL: [FaultOp; 9] = [
        FaultOp::Create,
        FaultOp::Open,
        FaultOp::Append,
        FaultOp::Sync,
        FaultOp::Read,
        FaultOp::Rename,
        FaultOp::Remove,
        FaultOp::SyncDir,
        FaultOp::Link,
    ];
}

#[derive(Debug)]
struct Rule {
    ops: Vec<FaultOp>,
    path_contains: Option<String>,
    /// Matching operations to let through before failing.
    skip: u64,
    kind: ErrorKind,
    /// Keep failing after the first injected error.
    sticky: bool,
    /// A failing append first writes the first half of its bytes.
    torn: bool,
    fired: bool,
}

/// An injected failure.
struct Strike {
    kind: ErrorKind,
    torn: bool,
}

/// A disk of a fixed size ([`FaultFs::set_capacity`]).
#[derive(Debug)]
struct Disk {
    bytes: u64,
    used: u64,
    /// [`FaultFs::fill`] holds it full: bytes freed leave no room either
    /// (another tenant takes them), until the disk is grown or reset.
    held_full: bool,
}

#[derive(Debug, Default)]
struct Control {
    counts: [AtomicU64; FaultOp::ALL.len()],
    injected: AtomicU64,
    rule: Mutex<Option<Rule>>,
    disk: Mutex<Option<Disk>>,
}

impl Control {
    /// Takes `bytes` of the disk for a write: all of them, or, on a full
    /// disk, the number that fit (the rest of the write fails).
    fn take_space(&self, bytes: u64) -> std::result::Result<(), u64> {
        let mut disk = self.disk.lock();
        let Some(d) = disk.as_mut() else {
            return Ok(());
        };
        let room = d.bytes.saturating_sub(d.used);
        if bytes <= room {
            d.used += bytes;
            return Ok(());
        }
        d.used = d.bytes;
        Err(room)
    }

    fn free_space(&self, bytes: u64) {
        if let Some(d) = self.disk.lock().as_mut() {
            d.used = d.used.saturating_sub(bytes);
            if d.held_full {
                d.bytes = d.used;
            }
        }
    }

    fn check(&self, op: FaultOp, path: &Path) -> Result<()> {
        match self.strike(op, path) {
            Some(strike) => Err(injected_error(op, path, strike.kind)),
            None => Ok(()),
        }
    }

    /// Counts `op` and decides whether it fails.
    fn strike(&self, op: FaultOp, path: &Path) -> Option<Strike> {
        let idx = FaultOp::ALL.iter().position(|&o| o == op).unwrap_or(0);
        self.counts[idx].fetch_add(1, Ordering::Relaxed);
        let mut guard = self.rule.lock();
        let rule = guard.as_mut()?;
        let matches = rule.ops.contains(&op)
            && rule
                .path_contains
                .as_deref()
                .is_none_or(|s| path.to_string_lossy().contains(s));
        if !matches || (rule.fired && !rule.sticky) {
            return None;
        }
        if rule.skip > 0 {
            rule.skip -= 1;
            return None;
        }
        rule.fired = true;
        self.injected.fetch_add(1, Ordering::Relaxed);
        Some(Strike {
            kind: rule.kind,
            torn: rule.torn,
        })
    }
}

fn injected_error(op: FaultOp, path: &Path, kind: ErrorKind) -> Error {
    Error::io(
        path,
        op_name(op),
        std::io::Error::new(kind, format!("injected fault in {op:?}")),
    )
}

fn op_name(op: FaultOp) -> &'static str {
    match op {
        FaultOp::Create => "create",
        FaultOp::Open => "open",
        FaultOp::Append => "write",
        FaultOp::Sync => "fdatasync",
        FaultOp::Read => "read",
        FaultOp::Rename => "rename",
        FaultOp::Remove => "remove",
        FaultOp::SyncDir => "fsync_dir",
        FaultOp::Link => "link",
    }
}

/// An [`Fs`] that forwards to another and fails operations on command.
#[derive(Debug, Clone)]
pub struct FaultFs {
    inner: Arc<dyn Fs>,
    control: Arc<Control>,
}

impl FaultFs {
    pub fn new(inner: Arc<dyn Fs>) -> Self {
        FaultFs {
            inner,
            control: Arc::default(),
        }
    }

    /// Fails the `(skip + 1)`-th operation among `ops` (on paths containing
    /// `path_contains`, if given) with an I/O error of `kind`; with `sticky`
    /// every matching operation after it fails too.
    pub fn fail(
        &self,
        ops: &[FaultOp],
        path_contains: Option<&str>,
        skip: u64,
        kind: ErrorKind,
        sticky: bool,
    ) {
        self.set_rule(ops, path_contains, skip, kind, sticky, false);
    }

    /// As [`fail`](Self::fail), but a failing append first writes the
    /// first half of its bytes: a short write, as a full disk or a crash
    /// in the middle of `write` leaves behind.
    pub fn fail_torn(
        &self,
        ops: &[FaultOp],
        path_contains: Option<&str>,
        skip: u64,
        kind: ErrorKind,
        sticky: bool,
    ) {
        self.set_rule(ops, path_contains, skip, kind, sticky, true);
    }

    fn set_rule(
        &self,
        ops: &[FaultOp],
        path_contains: Option<&str>,
        skip: u64,
        kind: ErrorKind,
        sticky: bool,
        torn: bool,
    ) {
        *self.control.rule.lock() = Some(Rule {
            ops: ops.to_vec(),
            path_contains: path_contains.map(str::to_string),
            skip,
            kind,
            sticky,
            torn,
            fired: false,
        });
    }

    /// Stops injecting faults.
    pub fn heal(&self) {
        *self.control.rule.lock() = None;
    }

    /// Makes the file system a disk of `bytes` bytes, of which the files in
    /// `dir` take what they hold now; `None` lifts the limit. Appends past
    /// it write what fits and fail with `StorageFull` (ENOSPC); removing,
    /// truncating or renaming over a file frees its bytes (a file with
    /// several hard links is counted, and freed, once per name);
    /// [`Fs::free_space`] says what is left.
    pub fn set_capacity(&self, dir: &Path, bytes: Option<u64>) -> Result<()> {
        let Some(bytes) = bytes else {
            *self.control.disk.lock() = None;
            return Ok(());
        };
        let mut used = 0u64;
        for name in self.inner.list(dir)? {
            used += self.len_of(&dir.join(name));
        }
        *self.control.disk.lock() = Some(Disk {
            bytes,
            used,
            held_full: false,
        });
        Ok(())
    }

    /// Leaves no room on the disk [`Self::set_capacity`] made, and keeps it
    /// so while files are deleted (a background job's obsolete inputs
    /// would otherwise free room and let the database resume under a test
    /// that checks it read-only), until [`Self::add_capacity`] or
    /// [`Self::set_capacity`].
    pub fn fill(&self) {
        if let Some(d) = self.control.disk.lock().as_mut() {
            d.bytes = d.used;
            d.held_full = true;
        }
    }

    /// Grows the disk [`Self::set_capacity`] made by `bytes`.
    pub fn add_capacity(&self, bytes: u64) {
        if let Some(d) = self.control.disk.lock().as_mut() {
            d.bytes = d.bytes.saturating_add(bytes);
            d.held_full = false;
        }
    }

    /// Bytes of the file at `path`; 0 for none.
    fn len_of(&self, path: &Path) -> u64 {
        self.inner
            .open(path, FileOptions::default())
            .map_or(0, |f| f.len())
    }

    fn has_disk(&self) -> bool {
        self.control.disk.lock().is_some()
    }

    /// How many operations of `op` have been attempted.
    pub fn count(&self, op: FaultOp) -> u64 {
        let idx = FaultOp::ALL.iter().position(|&o| o == op).unwrap_or(0);
        self.control.counts[idx].load(Ordering::Relaxed)
    }

    /// How many faults have been injected so far.
    pub fn injected(&self) -> u64 {
        self.control.injected.load(Ordering::Relaxed)
    }
}

impl Fs for FaultFs {
    fn create(&self, path: &Path, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        self.control.check(FaultOp::Create, path)?;
        let replaced = if self.has_disk() {
            self.len_of(path)
        } else {
            0
        };
        let inner = self.inner.create(path, opts)?;
        self.control.free_space(replaced);
        Ok(Box::new(FaultWritable {
            inner,
            path: path.to_path_buf(),
            control: self.control.clone(),
            allocated: 0,
        }))
    }

    fn reopen_at(&self, path: &Path, at: u64, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        self.control.check(FaultOp::Create, path)?;
        // Written over in place: only bytes past its end take space.
        let allocated = if self.has_disk() {
            self.len_of(path)
        } else {
            0
        };
        Ok(Box::new(FaultWritable {
            inner: self.inner.reopen_at(path, at, opts)?,
            path: path.to_path_buf(),
            control: self.control.clone(),
            allocated,
        }))
    }

    fn open(&self, path: &Path, opts: FileOptions) -> Result<Arc<dyn RandomAccessFile>> {
        self.control.check(FaultOp::Open, path)?;
        Ok(Arc::new(FaultRandomAccess {
            inner: self.inner.open(path, opts)?,
            path: path.to_path_buf(),
            control: self.control.clone(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.control.check(FaultOp::Rename, from)?;
        let replaced = if self.has_disk() { self.len_of(to) } else { 0 };
        self.inner.rename(from, to)?;
        self.control.free_space(replaced);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.control.check(FaultOp::Remove, path)?;
        let freed = if self.has_disk() {
            self.len_of(path)
        } else {
            0
        };
        self.inner.remove(path)?;
        self.control.free_space(freed);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.control.check(FaultOp::Link, to)?;
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

    fn sync_file(&self, path: &Path) -> Result<()> {
        self.control.check(FaultOp::Sync, path)?;
        self.inner.sync_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.control.check(FaultOp::SyncDir, dir)?;
        self.inner.sync_dir(dir)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }

    /// Counts a `Read` per request and fails exactly the requests the rule
    /// strikes; the rest go to the inner file system's batch, on its own
    /// files, so a batch over [`OsFs`](super::OsFs) still uses io_uring.
    /// A file this file system did not open goes through as it is.
    fn read_batch(&self, reads: &[ReadRequest<'_>], in_flight: usize) -> Vec<Result<Vec<u8>>> {
        let mut answers: Vec<std::result::Result<ReadRequest<'_>, Error>> =
            Vec::with_capacity(reads.len());
        let mut forwarded = Vec::new();
        for r in reads {
            let request = match r.file.as_any().downcast_ref::<FaultRandomAccess>() {
                None => *r,
                Some(file) => {
                    if let Some(strike) = self.control.strike(FaultOp::Read, &file.path) {
                        let e = injected_error(FaultOp::Read, &file.path, strike.kind);
                        answers.push(Err(e));
                        continue;
                    }
                    ReadRequest {
                        file: file.inner.as_ref(),
                        ..*r
                    }
                }
            };
            forwarded.push(request);
            answers.push(Ok(request));
        }
        let mut inner = self.inner.read_batch(&forwarded, in_flight).into_iter();
        answers
            .into_iter()
            .map(|answer| match answer {
                Err(injected) => Err(injected),
                // An inner file system that answers fewer reads than asked
                // breaks its contract; its missing reads are done alone.
                Ok(r) => inner
                    .next()
                    .unwrap_or_else(|| r.file.read_at(r.offset, r.len)),
            })
            .collect()
    }

    fn read_batch_mode(&self) -> ReadBatchMode {
        self.inner.read_batch_mode()
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let before = if self.has_disk() {
            self.len_of(path)
        } else {
            0
        };
        self.inner.truncate(path, len)?;
        self.control.free_space(before.saturating_sub(len));
        Ok(())
    }

    fn free_space(&self, dir: &Path) -> Result<u64> {
        match self.control.disk.lock().as_ref() {
            Some(d) => Ok(d.bytes.saturating_sub(d.used)),
            None => self.inner.free_space(dir),
        }
    }
}

struct FaultWritable {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    control: Arc<Control>,
    /// Bytes of the file that take disk space already.
    allocated: u64,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if let Some(strike) = self.control.strike(FaultOp::Append, &self.path) {
            if strike.torn {
                self.inner.append(&data[..data.len() / 2])?;
            }
            return Err(injected_error(FaultOp::Append, &self.path, strike.kind));
        }
        let end = self.inner.len() + data.len() as u64;
        let grows = end.saturating_sub(self.allocated);
        if let Err(room) = self.control.take_space(grows) {
            // A short write, as a full disk leaves: what fits lands.
            let fits = data.len() - (grows - room) as usize;
            self.inner.append(&data[..fits])?;
            self.allocated = self.allocated.max(self.inner.len());
            return Err(Error::io(
                &self.path,
                "write",
                std::io::Error::from(ErrorKind::StorageFull),
            ));
        }
        self.allocated = self.allocated.max(end);
        self.inner.append(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.control.check(FaultOp::Sync, &self.path)?;
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FaultRandomAccess {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    control: Arc<Control>,
}

impl RandomAccessFile for FaultRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.control.check(FaultOp::Read, &self.path)?;
        self.inner.read_at(offset, len)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{MemFs, MAX_READS_IN_FLIGHT};

    #[test]
    fn fails_the_chosen_operation_once() {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        fs.create_dir_all(Path::new("/d")).unwrap();
        let mut f = fs
            .create(Path::new("/d/x.wal"), FileOptions::default())
            .unwrap();
        fs.fail(&[FaultOp::Sync], Some(".wal"), 1, ErrorKind::Other, false);
        f.append(b"a").unwrap();
        f.sync().unwrap();
        let err = f.sync().unwrap_err();
        assert!(
            matches!(
                err,
                Error::Io {
                    op: "fdatasync",
                    ..
                }
            ),
            "{err}"
        );
        f.sync().unwrap();
        assert_eq!(fs.injected(), 1);
        assert_eq!(fs.count(FaultOp::Sync), 3);
    }

    #[test]
    fn a_torn_append_writes_half_then_fails() {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        let path = dir.join("MANIFEST-000001");
        let mut f = fs.create(&path, FileOptions::default()).unwrap();
        fs.fail_torn(
            &[FaultOp::Append],
            Some("MANIFEST"),
            1,
            ErrorKind::StorageFull,
            false,
        );
        f.append(b"whole").unwrap();
        let err = f.append(b"0123456789").unwrap_err();
        assert!(
            matches!(&err, Error::NoSpace { op: "write", .. }) && err.is_device_full(),
            "{err}"
        );
        assert_eq!(f.len(), 10, "half of the failed append landed");
        assert_eq!(
            crate::vfs::read_all(&mem, &path).unwrap(),
            b"whole01234".to_vec()
        );
        // Not sticky: the next append is whole again.
        f.append(b"ab").unwrap();
        assert_eq!(f.len(), 12);
        assert_eq!(fs.injected(), 1);
        // Other operations fail as with `fail`, writing nothing.
        fs.fail_torn(&[FaultOp::Sync], None, 0, ErrorKind::Other, false);
        assert!(f.sync().is_err());
        assert_eq!(f.len(), 12);
        assert_eq!(fs.injected(), 2);
    }

    /// A filled disk stays full while files are deleted, until it grows.
    #[test]
    fn a_filled_disk_stays_full_until_it_grows() {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        fs.set_capacity(dir, Some(1 << 20)).unwrap();
        for name in ["000001.sst", "000002.sst"] {
            let mut f = fs.create(&dir.join(name), FileOptions::default()).unwrap();
            f.append(&[7; 4096]).unwrap();
        }
        fs.fill();
        assert_eq!(fs.free_space(dir).unwrap(), 0);
        fs.remove(&dir.join("000001.sst")).unwrap();
        assert_eq!(fs.free_space(dir).unwrap(), 0);
        let mut f = fs
            .create(&dir.join("000003.sst"), FileOptions::default())
            .unwrap();
        assert!(f.append(b"x").unwrap_err().is_device_full());
        fs.add_capacity(10);
        assert_eq!(fs.free_space(dir).unwrap(), 10);
        // Grown, it frees what is deleted again.
        fs.remove(&dir.join("000002.sst")).unwrap();
        assert_eq!(fs.free_space(dir).unwrap(), 10 + 4096);
    }

    /// A `Read` rule counts and strikes each request of a batch: the one it
    /// fails fails alone, and the others are read.
    #[test]
    fn a_read_fault_fails_one_request_of_a_batch() {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        for name in ["000001.vf", "000002.sst"] {
            let mut f = fs.create(&dir.join(name), FileOptions::default()).unwrap();
            f.append(b"0123456789").unwrap();
        }
        let vf = fs
            .open(&dir.join("000001.vf"), FileOptions::default())
            .unwrap();
        let sst = fs
            .open(&dir.join("000002.sst"), FileOptions::default())
            .unwrap();
        fn request(file: &Arc<dyn RandomAccessFile>, offset: u64) -> ReadRequest<'_> {
            ReadRequest {
                file: file.as_ref(),
                offset,
                len: 2,
            }
        }
        // The second read of a value file fails.
        fs.fail(&[FaultOp::Read], Some(".vf"), 1, ErrorKind::Other, false);
        let reads_before = fs.count(FaultOp::Read);
        let results = fs.read_batch(
            &[
                request(&vf, 0),
                request(&sst, 2),
                request(&vf, 4),
                request(&vf, 6),
            ],
            MAX_READS_IN_FLIGHT,
        );
        assert_eq!(fs.count(FaultOp::Read) - reads_before, 4);
        assert_eq!(fs.injected(), 1);
        let results: Vec<_> = results.into_iter().collect();
        assert_eq!(results.len(), 4);
        assert_eq!(results[0].as_ref().unwrap(), b"01");
        assert_eq!(results[1].as_ref().unwrap(), b"23");
        assert!(
            matches!(&results[2], Err(Error::Io { path, op: "read", .. }) if path.ends_with("000001.vf")),
            "{:?}",
            results[2]
        );
        assert_eq!(results[3].as_ref().unwrap(), b"67");
    }

    /// Over the real file system, the requests the rule lets through still
    /// go to its batch, through io_uring where it is available.
    #[test]
    fn a_batch_over_os_fs_reaches_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let os = crate::vfs::OsFs::new();
        let fs = FaultFs::new(Arc::new(os));
        assert_eq!(fs.read_batch_mode(), os.read_batch_mode());
        let path = dir.path().join("000001.vf");
        let mut f = fs.create(&path, FileOptions::default()).unwrap();
        f.append(b"0123456789").unwrap();
        f.sync().unwrap();
        let file = fs.open(&path, FileOptions::default()).unwrap();
        let requests: Vec<_> = (0..5)
            .map(|i| ReadRequest {
                file: file.as_ref(),
                offset: 2 * i,
                len: 2,
            })
            .collect();
        fs.fail(&[FaultOp::Read], None, 3, ErrorKind::Other, false);
        let results = fs.read_batch(&requests, MAX_READS_IN_FLIGHT);
        let got: Vec<_> = results.iter().map(|r| r.as_ref().ok().cloned()).collect();
        let want = |s: &[u8]| Some(s.to_vec());
        assert_eq!(
            got,
            vec![want(b"01"), want(b"23"), want(b"45"), None, want(b"89")]
        );
        if os.read_batch_mode() == ReadBatchMode::IoUring {
            assert_eq!(crate::vfs::uring::thread_ring(), "open");
        }
    }
}
