//! The real file system: `pread`, buffered or `O_DIRECT` appends,
//! `fdatasync`, `flock`; batches of reads through io_uring (module
//! `uring`), or `pread` where the kernel does not allow it.

use std::alloc::{self, Layout};
use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::uring;
use super::{
    FileLock, FileOptions, Fs, RandomAccessFile, ReadBatchMode, ReadRequest, WritableFile,
};
use crate::error::{Error, Result};

/// Alignment required by `O_DIRECT` on the file systems we run on.
const DIRECT_ALIGN: usize = 4096;
/// The largest device block `O_DIRECT` I/O is aligned to: a divisor of
/// the write buffer.
const MAX_DIRECT_ALIGN: usize = 64 << 10;
/// Appends are gathered into a buffer of this size before a write call.
const WRITE_BUFFER: usize = 1 << 20;
/// Full buffers of an `O_DIRECT` file being written behind its appends, at
/// most: with one write at a time the device idles while the writer fills
/// the next buffer, and shares its bandwidth by what is queued. Beside
/// GC-like reads (56 KiB, 8 in flight), 1 MiB direct writes ran at 360
/// MB/s one at a time and 630 MB/s four at a time (fio on this machine,
/// issue 28). Three leave room for reads.
const WRITES_BEHIND: usize = 3;

/// The environment variable that, set to `0`, makes [`OsFs::new`] read
/// batches with `pread` even where io_uring is available: a way to rule
/// io_uring out, or to compare the two, without rebuilding.
const IO_URING_ENV: &str = "CLEAVE_IO_URING";

/// The alignment `O_DIRECT` needs for reads and writes of `file`: its device's
/// logical block size where the kernel says (`statx`'s `STATX_DIOALIGN`,
/// 512 on most disks, so that a synced append writes the sectors it
/// touches and not whole pages), else the page size.
fn direct_alignment(file: &File) -> usize {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: the descriptor is open, the empty path with AT_EMPTY_PATH
    // names it, and `stx` is writable memory of the right size.
    let r = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            stx.as_mut_ptr(),
        )
    };
    if r != 0 {
        return DIRECT_ALIGN;
    }
    // SAFETY: statx succeeded and filled the struct.
    let stx = unsafe { stx.assume_init() };
    let align = stx.stx_dio_offset_align as usize;
    let has = stx.stx_mask & libc::STATX_DIOALIGN != 0;
    // A device with blocks larger than a page gets its own alignment (a
    // read or write of a page would fail); buffers are whole pages, and
    // the write buffer holds whole blocks up to MAX_DIRECT_ALIGN.
    if has && align.is_power_of_two() && align <= MAX_DIRECT_ALIGN {
        align
    } else {
        DIRECT_ALIGN
    }
}

/// The operating system's file system.
#[derive(Debug, Clone, Copy)]
pub struct OsFs {
    batch: ReadBatchMode,
}

impl OsFs {
    /// Reads batches through io_uring where the kernel allows it (probed
    /// once per process), unless the environment sets `CLEAVE_IO_URING=0`;
    /// else with `pread`.
    pub fn new() -> OsFs {
        let off = std::env::var_os(IO_URING_ENV).is_some_and(|v| v == "0");
        if !off && uring::available() {
            OsFs {
                batch: ReadBatchMode::IoUring,
            }
        } else {
            OsFs::with_pread()
        }
    }

    /// Never uses io_uring: batches are read with `pread`, one after
    /// another.
    pub fn with_pread() -> OsFs {
        OsFs {
            batch: ReadBatchMode::Pread,
        }
    }

    /// Where a request of a batch stands before any I/O: answered already
    /// (an error, nothing to read, or a file that is not ours, read here)
    /// or waiting for its read.
    fn start<'a>(&self, r: &ReadRequest<'a>) -> Slot<'a> {
        let Some(file) = r.file.as_any().downcast_ref::<OsRandomAccess>() else {
            return Slot::Done(r.file.read_at(r.offset, r.len));
        };
        match file.plan(r.offset, r.len) {
            Err(e) => Slot::Done(Err(e)),
            Ok(plan) if plan.is_complete() => Slot::Done(Ok(plan.finish())),
            Ok(plan) => Slot::Pending(BatchRead {
                file,
                offset: r.offset,
                len: r.len,
                plan: Some(plan),
                result: None,
            }),
        }
    }
}

impl Default for OsFs {
    fn default() -> Self {
        OsFs::new()
    }
}

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

    fn reopen_at(&self, path: &Path, at: u64, opts: FileOptions) -> Result<Box<dyn WritableFile>> {
        let mut o = OpenOptions::new();
        o.write(true);
        if opts.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let mut file = match o.open(path) {
            Ok(f) => f,
            Err(e) if opts.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                return self.reopen_at(path, at, FileOptions { direct: false })
            }
            Err(e) => return Err(Error::io(path, "open_for_write", e)),
        };
        let size = file
            .metadata()
            .map_err(|e| Error::io(path, "stat", e))?
            .len();
        if at > size {
            return Err(Error::io(
                path,
                "open_for_write",
                std::io::Error::new(
                    ErrorKind::InvalidInput,
                    format!("write position {at} past the end of the file ({size} bytes)"),
                ),
            ));
        }
        let mut w = if opts.direct {
            let align = direct_alignment(&file);
            let base = at / align as u64 * align as u64;
            // The partial block before `at` is written again with the
            // first appends: it starts the buffer.
            let mut head = vec![0u8; (at - base) as usize];
            File::open(path)
                .and_then(|f| f.read_exact_at(&mut head, base))
                .map_err(|e| Error::io(path, "read", e))?;
            let mut w = OsWritable::new(path, file, true)?;
            w.align = align;
            if let Buffer::Direct { buf, base: b, .. } = &mut w.buffer {
                buf.push(&head);
                *b = base;
            }
            w
        } else {
            file.seek(SeekFrom::Start(at))
                .map_err(|e| Error::io(path, "seek", e))?;
            OsWritable::new(path, file, false)?
        };
        w.len = at;
        w.keep_len = size;
        Ok(Box::new(w))
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
                let align = if opts.direct {
                    direct_alignment(&file)
                } else {
                    1
                };
                Ok(Arc::new(OsRandomAccess {
                    path: path.to_path_buf(),
                    file,
                    len,
                    direct: opts.direct,
                    align,
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

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        fs::hard_link(from, to).map_err(|e| Error::io(to, "link", e))
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

    fn sync_file(&self, path: &Path) -> Result<()> {
        File::open(path)
            .map_err(|e| Error::io(path, "open", e))?
            .sync_data()
            .map_err(|e| Error::io(path, "fdatasync", e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let f = File::open(dir).map_err(|e| Error::io(dir, "open_dir", e))?;
        f.sync_all().map_err(|e| Error::io(dir, "fsync_dir", e))
    }

    /// Through this thread's io_uring ring when the mode is
    /// [`ReadBatchMode::IoUring`]; what it leaves undone (no ring in this
    /// thread, a ring that failed) and every read in the `pread` mode are
    /// read here one after another. Sequential `pread`s, not threads:
    /// starting threads per batch cost more CPU than the reads (8% of a
    /// scan's), and the fallback only matters on kernels without io_uring,
    /// which do not justify a pool of long-lived readers.
    fn read_batch(&self, reads: &[ReadRequest<'_>], in_flight: usize) -> Vec<Result<Vec<u8>>> {
        let mut slots: Vec<Slot<'_>> = reads.iter().map(|r| self.start(r)).collect();
        if self.batch == ReadBatchMode::IoUring {
            let mut pending: Vec<&mut BatchRead<'_>> = slots
                .iter_mut()
                .filter_map(|s| match s {
                    Slot::Pending(read) => Some(read),
                    Slot::Done(_) => None,
                })
                .collect();
            uring::read(&mut pending, in_flight);
        }
        slots
            .into_iter()
            .map(|s| match s {
                Slot::Done(result) => result,
                Slot::Pending(read) => read.finish(),
            })
            .collect()
    }

    fn read_batch_mode(&self) -> ReadBatchMode {
        self.batch
    }

    fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(len))
            .map_err(|e| Error::io(path, "truncate", e))
    }

    fn free_space(&self, dir: &Path) -> Result<u64> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| {
            Error::InvalidArgument(format!("path {} holds a NUL byte", dir.display()))
        })?;
        let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: `c` is a NUL-terminated path and `st` is a valid place
        // for the struct statvfs fills.
        let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
        if rc != 0 {
            return Err(Error::io(dir, "statvfs", std::io::Error::last_os_error()));
        }
        // SAFETY: statvfs succeeded, so it filled `st`.
        let st = unsafe { st.assume_init() };
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
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

    fn full(&self) -> &[u8] {
        // SAFETY: the allocation is `cap` bytes, zero-initialised at creation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    fn full_mut(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is `cap` bytes, zero-initialised at
        // creation, and `&mut self` excludes any other reference to it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
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
        /// Full buffers being written by threads of their own, oldest
        /// first; each hands its buffer back with the write's result.
        behind: VecDeque<JoinHandle<(AlignedBuf, std::io::Result<()>)>>,
        /// Buffers handed back, to fill again.
        spare: Vec<AlignedBuf>,
    },
}

struct OsWritable {
    path: PathBuf,
    file: Arc<File>,
    buffer: Buffer,
    len: u64,
    /// `O_DIRECT` writes start and end on multiples of this.
    align: usize,
    /// The size of a file written over from inside it: padding written
    /// past its end is cut back to this, never below.
    keep_len: u64,
    /// Every appended byte has been written (a flush before a sync need
    /// not write the padded tail block twice).
    clean: bool,
    /// A write behind failed, or could not start: the file has a hole
    /// where its bytes belong, and every later write, flush and sync
    /// fails.
    holed: bool,
}

impl OsWritable {
    fn new(path: &Path, file: File, direct: bool) -> Result<Self> {
        let buffer = if direct {
            Buffer::Direct {
                buf: AlignedBuf::new(WRITE_BUFFER),
                base: 0,
                behind: VecDeque::new(),
                spare: Vec::new(),
            }
        } else {
            Buffer::Plain(Vec::with_capacity(WRITE_BUFFER))
        };
        Ok(OsWritable {
            path: path.to_path_buf(),
            file: Arc::new(file),
            buffer,
            len: 0,
            align: DIRECT_ALIGN,
            keep_len: 0,
            clean: true,
            holed: false,
        })
    }

    /// Waits for writes behind until at most `keep` remain, failing with
    /// the first one that failed.
    fn wait_behind(&mut self, keep: usize) -> Result<()> {
        let Buffer::Direct { behind, spare, .. } = &mut self.buffer else {
            return Ok(());
        };
        let mut result = Ok(());
        while behind.len() > keep {
            let Some(handle) = behind.pop_front() else {
                break;
            };
            match handle.join() {
                Ok((mut buf, r)) => {
                    buf.len = 0;
                    spare.push(buf);
                    if let (Err(e), Ok(())) = (r, &result) {
                        result = Err(Error::io(&self.path, "write", e));
                    }
                }
                Err(_) => {
                    result = Err(Error::io(
                        &self.path,
                        "write",
                        std::io::Error::other("the thread writing behind panicked"),
                    ))
                }
            }
        }
        self.holed |= result.is_err();
        result
    }

    /// Hands the full direct buffer to a thread that writes it, and goes
    /// on with an empty one.
    fn write_behind(&mut self) -> Result<()> {
        self.wait_behind(WRITES_BEHIND - 1)?;
        let Buffer::Direct {
            buf,
            base,
            behind,
            spare,
        } = &mut self.buffer
        else {
            unreachable!("only direct files write behind");
        };
        debug_assert_eq!(buf.len, buf.cap);
        let next = spare.pop().unwrap_or_else(|| AlignedBuf::new(WRITE_BUFFER));
        let full = std::mem::replace(buf, next);
        let (file, at) = (self.file.clone(), *base);
        let handle = std::thread::Builder::new()
            .name("cleave-write".to_string())
            .spawn(move || {
                let r = file.write_all_at(&full.full()[..full.len], at);
                (full, r)
            })
            .map_err(|e| {
                // The buffer went with the thread that never ran.
                self.holed = true;
                Error::io(&self.path, "start a writer thread for", e)
            })?;
        behind.push_back(handle);
        *base += WRITE_BUFFER as u64;
        Ok(())
    }

    fn write_out(&mut self, padded_tail: bool) -> Result<()> {
        if padded_tail && self.clean && !self.holed {
            return Ok(());
        }
        if self.holed {
            return Err(Error::io(
                &self.path,
                "write",
                std::io::Error::other("an earlier write of this file failed"),
            ));
        }
        if matches!(&self.buffer, Buffer::Direct { buf, .. } if !padded_tail && buf.len == buf.cap)
        {
            return self.write_behind();
        }
        // A padded tail block is written again later: every write before
        // it must have landed first.
        self.wait_behind(0)?;
        match &mut self.buffer {
            Buffer::Plain(v) => {
                self.file
                    .as_ref()
                    .write_all(v)
                    .map_err(|e| Error::io(&self.path, "write", e))?;
                v.clear();
            }
            Buffer::Direct { buf, base, .. } => {
                let whole = buf.len / self.align * self.align;
                let end = if padded_tail && whole < buf.len {
                    whole + self.align
                } else {
                    whole
                };
                // Padding is zeros: the buffer's old bytes past its end
                // could be a whole earlier record, which a reader of a
                // file that validates records (a log) would take again.
                let len = buf.len;
                buf.full_mut()[len..end].fill(0);
                if end > 0 {
                    self.file
                        .write_all_at(&buf.full()[..end], *base)
                        .map_err(|e| Error::io(&self.path, "write", e))?;
                }
                if end > whole && *base + end as u64 > self.keep_len {
                    // Padding went past the file's end: cut it back.
                    self.file
                        .set_len(self.len.max(self.keep_len))
                        .map_err(|e| Error::io(&self.path, "truncate", e))?;
                }
                *base += whole as u64;
                buf.shift(whole);
            }
        }
        self.clean = padded_tail;
        Ok(())
    }
}

impl WritableFile for OsWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        self.clean &= data.is_empty();
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
    /// What `O_DIRECT` reads are aligned to: the device's logical block
    /// (512 bytes on most disks), so that a 1 KiB value is read as two or
    /// three sectors rather than a page or two.
    align: usize,
}

impl OsRandomAccess {
    fn eof(&self, offset: u64, len: usize) -> Error {
        self.eof_in(offset, len, self.len)
    }

    /// A read of `len` bytes at `offset` past the end of the file, which
    /// holds `file_len` bytes.
    fn eof_in(&self, offset: u64, len: usize, file_len: u64) -> Error {
        Error::io(
            &self.path,
            "read",
            std::io::Error::new(
                ErrorKind::UnexpectedEof,
                format!("read of {len} bytes at {offset} past end of file ({file_len} bytes)"),
            ),
        )
    }

    fn current_len(&self) -> Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| Error::io(&self.path, "stat", e))?
            .len())
    }

    /// The buffer a read of `len` bytes at `offset` fills, once the range
    /// is known to lie inside the file. With `O_DIRECT` the buffer, the
    /// file offset and the length must be aligned: the buffer spans the
    /// whole aligned blocks around the range.
    fn plan(&self, offset: u64, len: usize) -> Result<ReadPlan> {
        let end = offset
            .checked_add(len as u64)
            .ok_or_else(|| self.eof(offset, len))?;
        // A file still being written (a value log) grows after it was
        // opened: past the length seen then, ask again before failing.
        if end > self.len {
            let now = self.current_len()?;
            if end > now {
                return Err(self.eof_in(offset, len, now));
            }
        }
        if !self.direct {
            return Ok(ReadPlan {
                buf: PlanBuf::Plain(vec![0u8; len]),
                start: offset,
                done: 0,
                span: len,
                want: len,
                skip: 0,
                len,
            });
        }
        let align = self.align as u64;
        let start = offset / align * align;
        let stop = end.div_ceil(align) * align;
        let span = usize::try_from(stop - start).map_err(|_| self.eof(offset, len))?;
        let want = usize::try_from(end - start).map_err(|_| self.eof(offset, len))?;
        Ok(ReadPlan {
            // Whole pages of memory, of which the read fills `span`.
            buf: PlanBuf::Aligned(AlignedBuf::new(span.max(1).next_multiple_of(DIRECT_ALIGN))),
            start,
            done: 0,
            span,
            want,
            skip: (offset - start) as usize,
            len,
        })
    }

    /// Completes `plan` with `pread`s.
    fn pread(&self, mut plan: ReadPlan) -> Result<Vec<u8>> {
        while !plan.is_complete() {
            let at = plan.position();
            match self.file.read_at(plan.remaining(), at) {
                // The file ends before the range it had at open.
                Ok(0) => return Err(plan.eof(self)),
                Ok(n) => plan.advance(n),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path, "read", e)),
            }
        }
        Ok(plan.finish())
    }
}

impl RandomAccessFile for OsRandomAccess {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.pread(self.plan(offset, len)?)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

enum PlanBuf {
    Plain(Vec<u8>),
    Aligned(AlignedBuf),
}

/// One read's buffer and how far it got: shared by `read_at` and the
/// batches, so that both read `O_DIRECT` files alike, and both complete
/// short reads.
struct ReadPlan {
    buf: PlanBuf,
    /// File offset of the buffer's first byte.
    start: u64,
    /// Bytes read into the buffer so far.
    done: usize,
    /// Bytes the buffer takes (for `O_DIRECT`, whole aligned blocks).
    span: usize,
    /// Bytes that must be read: up to the end of the requested range (the
    /// file may end inside the last aligned block).
    want: usize,
    /// The answer: `len` bytes from `skip` of the buffer.
    skip: usize,
    len: usize,
}

impl ReadPlan {
    fn is_complete(&self) -> bool {
        self.done >= self.want
    }

    /// The file offset of the next byte to read.
    fn position(&self) -> u64 {
        self.start + self.done as u64
    }

    /// The part of the buffer still to fill.
    fn remaining(&mut self) -> &mut [u8] {
        let range = self.done..self.span;
        match &mut self.buf {
            PlanBuf::Plain(v) => &mut v[range],
            PlanBuf::Aligned(b) => &mut b.full_mut()[range],
        }
    }

    /// Records that `n` more bytes were read into [`Self::remaining`].
    fn advance(&mut self, n: usize) {
        self.done = (self.done + n).min(self.span);
    }

    fn eof(&self, file: &OsRandomAccess) -> Error {
        file.eof(self.start + self.skip as u64, self.len)
    }

    fn finish(self) -> Vec<u8> {
        debug_assert!(self.is_complete() && self.skip + self.len <= self.span);
        match self.buf {
            PlanBuf::Plain(v) => v,
            PlanBuf::Aligned(b) => b.full()[self.skip..self.skip + self.len].to_vec(),
        }
    }
}

/// A request of a batch before its read.
enum Slot<'a> {
    Done(Result<Vec<u8>>),
    Pending(BatchRead<'a>),
}

/// A read of a batch that `uring::read` carries out, or leaves for
/// [`BatchRead::finish`] to read with `pread`.
pub(super) struct BatchRead<'a> {
    file: &'a OsRandomAccess,
    offset: u64,
    len: usize,
    /// `None` once read, or once leaked.
    plan: Option<ReadPlan>,
    result: Option<Result<Vec<u8>>>,
}

impl BatchRead<'_> {
    pub(super) fn fd(&self) -> RawFd {
        self.file.file.as_raw_fd()
    }

    /// The next read to submit: where its bytes go, how many at most, and
    /// the file offset; `None` if nothing remains.
    pub(super) fn next_read(&mut self, max_len: usize) -> Option<(*mut u8, usize, u64)> {
        let plan = self.plan.as_mut().filter(|p| !p.is_complete())?;
        let at = plan.position();
        let rest = plan.remaining();
        Some((rest.as_mut_ptr(), rest.len().min(max_len), at))
    }

    /// The kernel's answer to the last read submitted: bytes read, or a
    /// negated `errno`. Returns whether bytes remain to read. A read the
    /// kernel asks to retry (`EINTR`, `EAGAIN`) is left to `pread`.
    pub(super) fn completed(&mut self, res: i32) -> bool {
        let Some(plan) = self.plan.as_mut() else {
            return false;
        };
        match usize::try_from(res) {
            Ok(0) => self.result = Some(Err(plan.eof(self.file))),
            Ok(n) => {
                plan.advance(n);
                if !plan.is_complete() {
                    return true;
                }
                self.result = self.plan.take().map(|p| Ok(p.finish()));
            }
            Err(_) => {
                let errno = res.saturating_neg();
                if errno != libc::EINTR && errno != libc::EAGAIN {
                    let e = std::io::Error::from_raw_os_error(errno);
                    self.result = Some(Err(Error::io(&self.file.path, "read", e)));
                }
            }
        }
        false
    }

    /// Gives up the buffer without freeing it: the kernel may still write
    /// into it. The read is then done again by [`Self::finish`].
    pub(super) fn leak(&mut self) {
        if let Some(plan) = self.plan.take() {
            std::mem::forget(plan);
        }
    }

    /// The read's result: the ring's, else read with `pread`, continuing
    /// what the ring read, or from the start if its buffer was leaked.
    fn finish(self) -> Result<Vec<u8>> {
        match (self.result, self.plan) {
            (Some(result), _) => result,
            (None, Some(plan)) => self.file.pread(plan),
            (None, None) => self.file.read_at(self.offset, self.len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(direct: bool) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let fs = OsFs::new();
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
        for (offset, len) in [
            (511, 2),
            (1000, 1500),
            (4000, 5000),
            (data.len() - 600, 600),
        ] {
            assert_eq!(
                r.read_at(offset as u64, len).unwrap(),
                &data[offset..offset + len],
                "{offset}+{len}"
            );
        }
        assert!(r.read_at(data.len() as u64 - 1, 2).is_err());
    }

    /// An `O_DIRECT` read spans the device's blocks the range touches, not
    /// the pages: a 600-byte value is two 512-byte sectors, not a page.
    #[test]
    fn direct_reads_span_the_blocks_they_touch() {
        let dir = disk_dir();
        let p = dir.path().join("f");
        let fs = OsFs::new();
        write_file(&fs, &p, &vec![7u8; 20_000]);
        let file = File::open(&p).unwrap();
        let r = OsRandomAccess {
            path: p,
            file,
            len: 20_000,
            direct: true,
            align: 512,
        };
        let plan = r.plan(5000, 600).unwrap();
        assert_eq!((plan.start, plan.span, plan.skip), (4608, 1024, 392));
        let plan = r.plan(8192, 4096).unwrap();
        assert_eq!((plan.start, plan.span), (8192, 4096));
        assert_eq!(r.pread(r.plan(5000, 600).unwrap()).unwrap(), vec![7u8; 600]);
    }

    #[test]
    fn buffered_round_trip() {
        round_trip(false);
    }

    #[test]
    fn direct_round_trip() {
        round_trip(true);
    }

    /// A directory on a disk: `O_DIRECT` needs one (tmpfs refuses it, and
    /// `OsFs` then reads buffered).
    fn disk_dir() -> tempfile::TempDir {
        tempfile::tempdir_in("/var/tmp").unwrap_or_else(|_| tempfile::tempdir().unwrap())
    }

    /// A value log is read through a handle opened when the log was
    /// created: it must see what was appended since, and still fail past
    /// the end.
    #[test]
    fn a_reader_opened_early_reads_what_was_appended_since() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let fs = OsFs::new();
        let mut w = fs.create(&p, FileOptions::default()).unwrap();
        let r = fs.open(&p, FileOptions::default()).unwrap();
        let data: Vec<u8> = (0..10_000).map(|i| (i % 253) as u8).collect();
        w.append(&data[..4000]).unwrap();
        w.flush().unwrap();
        assert_eq!(r.read_at(1000, 3000).unwrap(), &data[1000..4000]);
        w.append(&data[4000..]).unwrap();
        w.flush().unwrap();
        assert_eq!(r.read_at(3000, 7000).unwrap(), &data[3000..]);
        assert!(r.read_at(9999, 2).is_err());
    }

    fn write_file(fs: &OsFs, path: &Path, data: &[u8]) {
        let mut w = fs.create(path, FileOptions::default()).unwrap();
        w.append(data).unwrap();
        w.sync().unwrap();
    }

    /// A batch over two files, larger than a ring, of unaligned offsets
    /// and lengths, with empty reads, a whole file, a read past the end
    /// and one whose end overflows: each answered as `read_at` answers it,
    /// in order, the two bad ones failing alone.
    fn batch_reads_as_read_at(fs: OsFs, direct: bool) {
        let dir = disk_dir();
        let (pa, pb) = (dir.path().join("a"), dir.path().join("b"));
        let a: Vec<u8> = (0..300_001).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..10_007).map(|i| (i % 241) as u8 ^ 0x55).collect();
        write_file(&fs, &pa, &a);
        write_file(&fs, &pb, &b);
        let opts = FileOptions { direct };
        let (fa, fb) = (fs.open(&pa, opts).unwrap(), fs.open(&pb, opts).unwrap());
        let mut requests = Vec::new();
        let mut expected: Vec<Option<&[u8]>> = Vec::new();
        for i in 0..3 * uring_depth() {
            let (file, data) = if i % 3 == 0 { (&fb, &b) } else { (&fa, &a) };
            let len = i * 37 % 5000;
            let offset = i * 1487 % (data.len() - len);
            requests.push(request(file, offset as u64, len));
            expected.push(Some(&data[offset..offset + len]));
        }
        // (index in the batch, request, its bytes; none: an error)
        let edges: [(usize, ReadRequest<'_>, Option<&[u8]>); 5] = [
            (7, request(&fa, 0, a.len()), Some(&a)),
            (
                47,
                request(&fb, b.len() as u64 - 1, 1),
                Some(&b[b.len() - 1..]),
            ),
            (87, request(&fb, b.len() as u64, 0), Some(&[])),
            (127, request(&fb, b.len() as u64 - 3, 4), None),
            (167, request(&fb, u64::MAX, 2), None),
        ];
        for (at, r, want) in edges {
            requests.insert(at, r);
            expected.insert(at, want);
        }
        // The whole ring, a shallow queue (GC's), one at a time, and more
        // than the ring holds: the answers are the same.
        for in_flight in [uring_depth(), 8, 1, 10 * uring_depth()] {
            let results = fs.read_batch(&requests, in_flight);
            assert_eq!(results.len(), requests.len());
            for (i, (got, want)) in results.into_iter().zip(&expected).enumerate() {
                match want {
                    Some(want) => assert_eq!(&got.unwrap(), want, "request {i}, {in_flight}"),
                    None => {
                        let err = got.unwrap_err();
                        assert!(
                            matches!(&err, Error::Io { path, op: "read", .. } if path == &pb),
                            "{err}"
                        );
                    }
                }
            }
        }
        assert!(fs.read_batch(&[], 0).is_empty());
    }

    fn request(file: &Arc<dyn RandomAccessFile>, offset: u64, len: usize) -> ReadRequest<'_> {
        ReadRequest {
            file: file.as_ref(),
            offset,
            len,
        }
    }

    fn uring_depth() -> usize {
        super::uring::RING_DEPTH as usize
    }

    #[test]
    fn batch_through_io_uring_buffered() {
        batch_reads_as_read_at(OsFs::new(), false);
        if super::uring::available() {
            assert_eq!(OsFs::new().read_batch_mode(), ReadBatchMode::IoUring);
            assert_eq!(super::uring::thread_ring(), "open");
        }
    }

    #[test]
    fn batch_through_io_uring_direct() {
        batch_reads_as_read_at(OsFs::new(), true);
        if super::uring::available() {
            assert_eq!(super::uring::thread_ring(), "open");
        }
    }

    #[test]
    fn batch_with_pread_buffered() {
        let fs = OsFs::with_pread();
        assert_eq!(fs.read_batch_mode(), ReadBatchMode::Pread);
        batch_reads_as_read_at(fs, false);
        assert_eq!(super::uring::thread_ring(), "unopened");
    }

    #[test]
    fn batch_with_pread_direct() {
        batch_reads_as_read_at(OsFs::with_pread(), true);
        assert_eq!(super::uring::thread_ring(), "unopened");
    }

    /// A wait that fails with reads in flight leaks their buffers, breaks
    /// the thread's ring, and the batch is still answered, with `pread`,
    /// as is every later batch of the thread.
    #[test]
    fn a_failed_wait_falls_back_to_pread() {
        if !super::uring::available() {
            eprintln!("io_uring unavailable here: nothing to break");
            return;
        }
        super::uring::fail_next_wait();
        batch_reads_as_read_at(OsFs::new(), true);
        assert_eq!(super::uring::thread_ring(), "broken");
        batch_reads_as_read_at(OsFs::new(), false);
    }

    #[test]
    fn second_lock_fails_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("LOCK");
        let l = OsFs::new().lock(&p).unwrap();
        assert!(matches!(OsFs::new().lock(&p), Err(Error::Locked { .. })));
        drop(l);
        OsFs::new().lock(&p).unwrap();
    }

    /// Writing over a file from an offset keeps its size and the bytes
    /// past the writes, and a file never grows from writes inside it.
    #[test]
    fn reopen_writes_in_place_without_changing_the_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let fs = OsFs::new();
        let mut w = fs.create(&p, FileOptions::default()).unwrap();
        w.append(&[b'.'; 8192]).unwrap();
        w.sync().unwrap();
        drop(w);
        let mut w = fs.reopen_at(&p, 100, FileOptions::default()).unwrap();
        assert_eq!(w.len(), 100);
        w.append(b"new bytes").unwrap();
        w.sync().unwrap();
        assert_eq!(w.len(), 109);
        drop(w);
        let r = fs.open(&p, FileOptions::default()).unwrap();
        assert_eq!(r.len(), 8192);
        assert_eq!(r.read_at(98, 13).unwrap(), b"..new bytes..");
        let err = fs
            .reopen_at(&p, 8193, FileOptions::default())
            .err()
            .unwrap();
        assert!(
            matches!(
                err,
                Error::Io {
                    op: "open_for_write",
                    ..
                }
            ),
            "{err}"
        );
        let missing = fs
            .reopen_at(&dir.path().join("none"), 0, FileOptions::default())
            .err()
            .unwrap();
        assert!(matches!(
            missing,
            Error::Io {
                op: "open_for_write",
                ..
            }
        ));
    }

    /// The same with `O_DIRECT`: unaligned positions and syncs of partial
    /// blocks keep the bytes around them and the file's size.
    #[test]
    fn direct_reopen_writes_in_place_around_partial_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log");
        let fs = OsFs::new();
        let mut w = fs.create(&p, FileOptions::default()).unwrap();
        w.append(&[b'.'; 3 * DIRECT_ALIGN]).unwrap();
        w.sync().unwrap();
        drop(w);
        let mut w = fs.reopen_at(&p, 700, FileOptions { direct: true }).unwrap();
        w.append(b"first").unwrap();
        w.sync().unwrap();
        w.append(&[b'x'; 5000]).unwrap();
        w.sync().unwrap();
        assert_eq!(w.len(), 5705);
        drop(w);
        let r = fs.open(&p, FileOptions::default()).unwrap();
        assert_eq!(r.len(), 3 * DIRECT_ALIGN as u64, "the size is kept");
        let all = r.read_at(0, 3 * DIRECT_ALIGN).unwrap();
        assert!(all[..700].iter().all(|&b| b == b'.'));
        assert_eq!(&all[700..705], b"first");
        assert!(all[705..5705].iter().all(|&b| b == b'x'));
        // Past the writes: the old bytes, or the zeros of a padded block.
        assert!(
            all[5705..].iter().all(|&b| b == b'.' || b == 0),
            "{:?}",
            &all[5705..5800]
        );
        let mut w = fs
            .reopen_at(&p, 5705, FileOptions { direct: true })
            .unwrap();
        w.append(&[b'y'; 8000]).unwrap();
        w.sync().unwrap();
        drop(w);
        let r = fs.open(&p, FileOptions::default()).unwrap();
        assert_eq!(r.len(), 13705, "grown past its end by what was appended");
        assert_eq!(r.read_at(5700, 10).unwrap(), b"xxxxxyyyyy");
    }
}
