//! The real file system: `pread`, buffered or `O_DIRECT` appends,
//! `fdatasync`, `flock`.

use std::alloc::{self, Layout};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileLock, FileOptions, Fs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// Alignment required by `O_DIRECT` on the file systems we run on.
const DIRECT_ALIGN: usize = 4096;
/// Appends are gathered into a buffer of this size before a write call.
const WRITE_BUFFER: usize = 1 << 20;

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

impl Fs for OsFs {
    fn create(&self, path: &Path, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        let mut o = OpenOptions::new();
        o.write(true).create(true).truncate(true);
        if opts.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        match o.open(path) {
            Ok(file) => Ok(Box::new(OsWritable::new(path, file, opts.direct)?)),
            // Some file systems (tmpfs) refuse O_DIRECT: fall back to buffered.
            Err(e) if opts.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                self.create(path, FileOptions { direct: false })
            }
            Err(e) => Err(Error::io(path, "create", e)),
        }
    }

    fn open(&self, path: &Path, opts: FileOptions) -> Result<Arc<dyn RandomAccessFile>> {
        let mut o = OpenOptions::new();
        o.read(true);
        if opts.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        match o.open(path) {
            Ok(file) => {
                let len = file
                    .metadata()
                    .map_err(|e| Error::io(path, "stat", e))?
                    .len();
                Ok(Arc::new(OsRandomAccess {
                    path: path.to_path_buf(),
                    file,
                    len,
                    direct: opts.direct,
                }))
            }
            Err(e) if opts.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                self.open(path, FileOptions { direct: false })
            }
            Err(e) => Err(Error::io(path, "open", e)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(|e| Error::io(from, "rename", e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(|e| Error::io(path, "remove", e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, "list", e))? {
            let entry = entry.map_err(|e| Error::io(dir, "list", e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create_dir", e))
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists().map_err(|e| Error::io(path, "stat", e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let f = File::open(dir).map_err(|e| Error::io(dir, "open_dir", e))?;
        f.sync_all().map_err(|e| Error::io(dir, "fsync_dir", e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, "open_lock", e))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(OsLock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Err(Error::Locked {
                dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
                lock: path.to_path_buf(),
            }),
            Err(fs::TryLockError::Error(e)) => Err(Error::io(path, "lock", e)),
        }
    }
}

struct OsLock {
    // flock is released when the descriptor is closed.
    _file: File,
}

impl FileLock for OsLock {}

/// A buffer aligned for `O_DIRECT`.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    cap: usize,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn new(cap: usize) -> Self {
        assert!(cap > 0 && cap.is_multiple_of(DIRECT_ALIGN));
        let layout = Self::layout(cap);
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = std::ptr::NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, cap, len: 0 }
    }

    fn layout(cap: usize) -> Layout {
        match Layout::from_size_align(cap, DIRECT_ALIGN) {
            Ok(l) => l,
            Err(_) => unreachable!("capacity is a non-zero multiple of the alignment"),
        }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `len` bytes are initialised and owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn full(&self) -> &[u8] {
        // SAFETY: the allocation is `cap` bytes, zero-initialised at creation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    fn spare(&mut self) -> &mut [u8] {
        // SAFETY: bytes len..cap are inside the allocation and not aliased.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(self.len), self.cap - self.len)
        }
    }

    fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.cap - self.len);
        self.spare()[..n].copy_from_slice(&data[..n]);
        self.len += n;
        n
    }

    /// Keeps only the bytes from `from` on, moved to the front.
    fn shift(&mut self, from: usize) {
        let keep = self.len - from;
        // SAFETY: both ranges are inside the allocation; copy handles overlap.
        unsafe { std::ptr::copy(self.ptr.as_ptr().add(from), self.ptr.as_ptr(), keep) };
        self.len = keep;
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.cap)) };
    }
}

enum Buffer {
    Plain(Vec<u8>),
    /// `O_DIRECT`: bytes from `base` (aligned) on; only whole aligned blocks
    /// are written, the tail is written padded at sync and rewritten later.
    Direct {
        buf: AlignedBuf,
        base: u64,
    },
}

struct OsWritable {
    path: PathBuf,
    file: File,
    buffer: Buffer,
    len: u64,
}

impl OsWritable {
    fn new(path: &Path, file: File, direct: bool) -> Result<Self> {
        let buffer = if direct {
            Buffer::Direct {
                buf: AlignedBuf::new(WRITE_BUFFER),
                base: 0,
            }
        } else {
            Buffer::Plain(Vec::with_capacity(WRITE_BUFFER))
        };
        Ok(OsWritable {
            path: path.to_path_buf(),
            file,
            buffer,
            len: 0,
        })
    }

    fn write_out(&mut self, padded_tail: bool) -> Result<()> {
        match &mut self.buffer {
            Buffer::Plain(v) => {
                self.file
                    .write_all(v)
                    .map_err(|e| Error::io(&self.path, "write", e))?;
                v.clear();
            }
            Buffer::Direct { buf, base } => {
                let whole = buf.len / DIRECT_ALIGN * DIRECT_ALIGN;
                let end = if padded_tail && whole < buf.len {
                    whole + DIRECT_ALIGN
                } else {
                    whole
                };
                if end > 0 {
                    self.file
                        .write_all_at(&buf.full()[..end], *base)
                        .map_err(|e| Error::io(&self.path, "write", e))?;
                }
                if end > whole {
                    // Padding went to disk: cut the file back to its length.
                    self.file
                        .set_len(self.len)
                        .map_err(|e| Error::io(&self.path, "truncate", e))?;
                }
                *base += whole as u64;
                buf.shift(whole);
            }
        }
        Ok(())
    }
}

impl WritableFile for OsWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        loop {
            let full = match &mut self.buffer {
                Buffer::Plain(v) => {
                    if v.len() + data.len() > WRITE_BUFFER && !v.is_empty() {
                        true
                    } else {
                        v.extend_from_slice(data);
                        data = &[];
                        v.len() >= WRITE_BUFFER
                    }
                }
                Buffer::Direct { buf, .. } => {
                    let n = buf.push(data);
                    data = &data[n..];
                    buf.len == buf.cap
                }
            };
            if full {
                self.write_out(false)?;
            }
            if data.is_empty() {
                return Ok(());
            }
        }
    }

    fn flush(&mut self) -> Result<()> {
        self.write_out(true)
    }

    fn sync(&mut self) -> Result<()> {
        self.write_out(true)?;
        self.file
            .sync_data()
            .map_err(|e| Error::io(&self.path, "fdatasync", e))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for OsWritable {
    fn drop(&mut self) {
        // Best effort: callers that need the bytes call sync().
        let _ = self.write_out(true);
    }
}

struct OsRandomAccess {
    path: PathBuf,
    file: File,
    len: u64,
    direct: bool,
}

impl OsRandomAccess {
    fn eof(&self, offset: u64, len: usize) -> Error {
        Error::io(
            &self.path,
            "read",
            std::io::Error::new(
                ErrorKind::UnexpectedEof,
                format!(
                    "read of {len} bytes at {offset} past end of file ({} bytes)",
                    self.len
                ),
            ),
        )
    }
}

impl RandomAccessFile for OsRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let end = offset
            .checked_add(len as u64)
            .ok_or_else(|| self.eof(offset, len))?;
        if end > self.len {
            return Err(self.eof(offset, len));
        }
        if !self.direct {
            let mut out = vec![0u8; len];
            self.file
                .read_exact_at(&mut out, offset)
                .map_err(|e| Error::io(&self.path, "read", e))?;
            return Ok(out);
        }
        let align = DIRECT_ALIGN as u64;
        let start = offset / align * align;
        let stop = end.div_ceil(align) * align;
        let span = usize::try_from(stop - start).map_err(|_| self.eof(offset, len))?;
        let mut buf = AlignedBuf::new(span.max(DIRECT_ALIGN));
        let mut done = 0usize;
        let want = usize::try_from(end - start).map_err(|_| self.eof(offset, len))?;
        while done < want {
            let spare = &mut buf.spare()[..span - done];
            let n = self
                .file
                .read_at(spare, start + done as u64)
                .map_err(|e| Error::io(&self.path, "read", e))?;
            if n == 0 {
                return Err(self.eof(offset, len));
            }
            buf.len += n;
            done += n;
        }
        let skip = (offset - start) as usize;
        Ok(buf.as_slice()[skip..skip + len].to_vec())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(direct: bool) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let fs = OsFs;
        let mut w = fs.create(&p, FileOptions { direct }).unwrap();
        let data: Vec<u8> = (0..3 * WRITE_BUFFER + 777)
            .map(|i| (i % 251) as u8)
            .collect();
        w.append(&data[..100]).unwrap();
        w.sync().unwrap();
        for chunk in data[100..].chunks(5000) {
            w.append(chunk).unwrap();
        }
        w.sync().unwrap();
        assert_eq!(w.len(), data.len() as u64);
        drop(w);
        let r = fs.open(&p, FileOptions { direct }).unwrap();
        assert_eq!(r.len(), data.len() as u64);
        assert_eq!(r.read_at(0, data.len()).unwrap(), data);
        assert_eq!(r.read_at(4095, 3).unwrap(), &data[4095..4098]);
        assert!(r.read_at(data.len() as u64 - 1, 2).is_err());
    }

    #[test]
    fn buffered_round_trip() {
        round_trip(false);
    }

    #[test]
    fn direct_round_trip() {
        round_trip(true);
    }

    #[test]
    fn second_lock_fails_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("LOCK");
        let l = OsFs.lock(&p).unwrap();
        assert!(matches!(OsFs.lock(&p), Err(Error::Locked { .. })));
        drop(l);
        OsFs.lock(&p).unwrap();
    }
}
