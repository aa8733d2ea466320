//! Physical logs: files of a fixed capacity that frames are appended to,
//! preallocated (their blocks written once and synced) or recycled, so that
//! a synced append lands inside blocks the file system has allocated and
//! inside the file's size, and `fdatasync` writes the data and nothing
//! else. Their true end is found by reading frames (module `frame`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::frame::{self, Check, Kind, HEADER_LEN};
use super::ops::{self, Role, FORMAT_VERSION};
use crate::base::coding::Decoder;
use crate::error::{Error, Result};
use crate::vfs::{FileOptions, Fs, RandomAccessFile, WritableFile};

/// Zeros are written in chunks of this size when a file is preallocated.
const PREALLOCATE_CHUNK: usize = 1 << 20;
/// Recovery reads a file in windows of this size.
const READ_WINDOW: usize = 1 << 20;

/// A data file's name.
pub(crate) fn data_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:06}.dlog"))
}

/// A metalog file's name.
pub(crate) fn meta_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:06}.mlog"))
}

/// A file waiting to be recycled, named by the newest generation it held.
pub(crate) fn free_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:06}.free"))
}

pub(crate) fn path(dir: &Path, role: Role, generation: u64) -> PathBuf {
    match role {
        Role::Data => data_path(dir, generation),
        Role::Meta => meta_path(dir, generation),
    }
}

/// What a log store file's name says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileName {
    Log(Role, u64),
    Free(u64),
}

pub(crate) fn parse_name(name: &str) -> Option<FileName> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() < 6 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = stem.parse().ok()?;
    match ext {
        "dlog" => Some(FileName::Log(Role::Data, n)),
        "mlog" => Some(FileName::Log(Role::Meta, n)),
        "free" => Some(FileName::Free(n)),
        _ => None,
    }
}

/// The file being appended to, for one role.
pub(crate) struct Writer {
    pub(crate) generation: u64,
    file: Box<dyn WritableFile>,
    epoch: u64,
    capacity: u64,
    scratch: Vec<u8>,
}

/// How the files of a role are written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Bytes a file takes before it is sealed.
    pub(crate) capacity: u64,
    /// Appends go around the page cache ([`super::LogOptions::direct_io`]).
    pub(crate) direct: bool,
}

/// Where a new physical log's blocks come from.
pub(crate) enum Source {
    /// A file of the pool, renamed to the new name.
    Recycled(PathBuf),
    /// A new file whose blocks are written now.
    Preallocated,
    /// A new empty file that grows with its appends (no preallocation).
    Growing,
}

impl Source {
    /// A new physical log's blocks: the released file `free` if there is
    /// one, else a new file, preallocated or not.
    pub(crate) fn next(dir: &Path, free: Option<u64>, preallocate: bool) -> Source {
        match free {
            Some(g) => Source::Recycled(free_path(dir, g)),
            None if preallocate => Source::Preallocated,
            None => Source::Growing,
        }
    }
}

impl Writer {
    /// Starts physical log `generation` of `role`, writing and syncing its
    /// header, so that it is known to recovery once this returns.
    pub(crate) fn start(
        fs: &dyn Fs,
        dir: &Path,
        role: Role,
        generation: u64,
        epoch: u64,
        shape: Shape,
        source: Source,
    ) -> Result<Writer> {
        let Shape { capacity, direct } = shape;
        let path = path(dir, role, generation);
        let file = match source {
            Source::Recycled(from) => {
                fs.rename(&from, &path)?;
                fs.sync_dir(dir)?;
                fs.reopen_at(&path, 0, FileOptions { direct })?
            }
            Source::Preallocated => {
                let mut f = fs.create(&path, FileOptions::default())?;
                let zeros = vec![0u8; PREALLOCATE_CHUNK];
                let mut left = capacity;
                while left > 0 {
                    let n = left.min(PREALLOCATE_CHUNK as u64) as usize;
                    f.append(&zeros[..n])?;
                    left -= n as u64;
                }
                f.sync()?;
                drop(f);
                fs.sync_dir(dir)?;
                fs.reopen_at(&path, 0, FileOptions { direct })?
            }
            Source::Growing => {
                let f = fs.create(&path, FileOptions::default())?;
                fs.sync_dir(dir)?;
                f
            }
        };
        let mut w = Writer {
            generation,
            file,
            epoch,
            capacity,
            scratch: Vec::new(),
        };
        let mut header = Vec::new();
        ops::encode_file_header(&mut header, role);
        w.append(Kind::FileHeader, &header)?;
        w.sync()?;
        Ok(w)
    }

    /// Goes on appending to a file recovery read up to `end`, in a new
    /// epoch: whatever a crashed session left past `end` is older.
    pub(crate) fn resume(
        fs: &dyn Fs,
        path: &Path,
        generation: u64,
        end: u64,
        epoch: u64,
        shape: Shape,
    ) -> Result<Writer> {
        let Shape { capacity, direct } = shape;
        Ok(Writer {
            generation,
            file: fs.reopen_at(path, end, FileOptions { direct })?,
            epoch,
            capacity,
            scratch: Vec::new(),
        })
    }

    /// Appends one frame; returns the offset of its payload.
    pub(crate) fn append(&mut self, kind: Kind, payload: &[u8]) -> Result<u64> {
        let at = self.file.len() + HEADER_LEN as u64;
        self.scratch.clear();
        frame::encode(
            &mut self.scratch,
            self.generation,
            self.epoch,
            kind,
            payload,
        );
        self.file.append(&self.scratch)?;
        Ok(at)
    }

    /// Where the next frame starts.
    pub(crate) fn offset(&self) -> u64 {
        self.file.len()
    }

    /// Whether a frame of `payload_len` bytes, with `reserve` more kept
    /// for the seal, fits before the file's capacity.
    pub(crate) fn fits(&self, payload_len: usize, reserve: usize) -> bool {
        let need = (HEADER_LEN + payload_len + HEADER_LEN + reserve) as u64;
        self.offset() + need <= self.capacity
    }

    /// Whether nothing but the header has been written.
    pub(crate) fn is_fresh(&self) -> bool {
        // The header frame: 25 bytes of framing, 13 of payload.
        self.offset() <= (2 * HEADER_LEN) as u64
    }

    pub(crate) fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }
}

/// What reading a physical log found.
#[derive(Debug, Default)]
pub(crate) struct Scanned {
    /// The file had a valid header of this use.
    pub(crate) has_header: bool,
    /// Where the valid frames end: the next frame goes here.
    pub(crate) end: u64,
    /// The epoch of the last valid frame.
    pub(crate) last_epoch: u64,
    /// The file ends with a seal frame.
    pub(crate) sealed: bool,
}

/// Reads the frames of physical log `generation` of `role` at `path` from
/// the start, handing each batch (its payload offset and bytes) and the
/// seal to `each`, up to the first frame that is not valid.
pub(crate) fn scan(
    fs: &dyn Fs,
    path: &Path,
    role: Role,
    generation: u64,
    mut each: impl FnMut(Kind, u64, &[u8]) -> Result<()>,
) -> Result<Scanned> {
    let file = fs.open(path, FileOptions::default())?;
    let mut window = Window::new(file);
    let mut out = Scanned::default();
    let mut min_epoch = 0;
    loop {
        let at = out.end;
        let Some((check, payload, len, epoch)) = window.frame(at, generation, min_epoch)? else {
            break;
        };
        let kind = match check {
            Check::Valid(k) => k,
            Check::End => break,
            Check::UnknownKind(k) => {
                return Err(Error::corruption(
                    path,
                    at,
                    format!("frame of unknown kind {k}: written by a newer version?"),
                ))
            }
        };
        if !out.has_header {
            if kind != Kind::FileHeader {
                break;
            }
            let (found, version) =
                ops::decode_file_header(&payload).map_err(|e| Error::corruption(path, at, e.0))?;
            if version != FORMAT_VERSION {
                return Err(Error::UnsupportedFormatVersion {
                    file: path.to_path_buf(),
                    found: version,
                    supported: FORMAT_VERSION,
                });
            }
            if found != Some(role) {
                return Err(Error::corruption(
                    path,
                    at,
                    "file header names another role",
                ));
            }
            out.has_header = true;
        } else if kind == Kind::FileHeader {
            return Err(Error::corruption(path, at, "a second file header"));
        } else {
            each(kind, at + HEADER_LEN as u64, &payload)?;
        }
        out.end = at + len as u64;
        out.last_epoch = epoch;
        min_epoch = epoch;
        if kind == Kind::Seal {
            out.sealed = true;
            break;
        }
    }
    Ok(out)
}

/// Reads one seal frame of `len` bytes at `offset` (its payload), checking
/// it as a frame.
pub(crate) fn read_seal(
    file: &dyn RandomAccessFile,
    path: &Path,
    generation: u64,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>> {
    let start = offset
        .checked_sub(HEADER_LEN as u64)
        .ok_or_else(|| Error::corruption(path, offset, "seal offset inside the file header"))?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| (l as u64) <= file.len())
        .ok_or_else(|| Error::corruption(path, offset, "seal length past the file"))?;
    let buf = file.read_at(start, HEADER_LEN + len)?;
    match frame::decode(&buf, generation, 0) {
        Some((Check::Valid(Kind::Seal), payload, _)) => Ok(payload.to_vec()),
        _ => Err(Error::corruption(
            path,
            start,
            "the seal frame does not check",
        )),
    }
}

/// Decodes a reverse index.
pub(crate) fn decode_reverse_index(
    path: &Path,
    offset: u64,
    payload: &[u8],
) -> Result<Vec<ops::Reverse>> {
    let mut d = Decoder::new(payload);
    let mut v = Vec::new();
    while !d.is_empty() {
        v.push(ops::decode_reverse(&mut d).map_err(|e| Error::corruption(path, offset, e.0))?);
    }
    Ok(v)
}

/// A sliding window over a file, so that reading many small frames costs
/// one read per window.
struct Window {
    file: Arc<dyn RandomAccessFile>,
    start: u64,
    buf: Vec<u8>,
}

impl Window {
    fn new(file: Arc<dyn RandomAccessFile>) -> Window {
        Window {
            file,
            start: 0,
            buf: Vec::new(),
        }
    }

    /// `len` bytes at `at`, or `None` past the file's end.
    fn bytes(&mut self, at: u64, len: usize) -> Result<Option<&[u8]>> {
        let size = self.file.len();
        let Some(end) = at.checked_add(len as u64).filter(|&e| e <= size) else {
            return Ok(None);
        };
        let have = self.start + self.buf.len() as u64;
        if at < self.start || end > have {
            let want = (size - at).min(READ_WINDOW.max(len) as u64) as usize;
            self.buf = self.file.read_at(at, want)?;
            self.start = at;
        }
        let from = (at - self.start) as usize;
        Ok(Some(&self.buf[from..from + len]))
    }

    /// The frame at `at`: its check, payload, length and epoch; `None`
    /// where no frame of this use can start.
    #[allow(clippy::type_complexity)]
    fn frame(
        &mut self,
        at: u64,
        generation: u64,
        min_epoch: u64,
    ) -> Result<Option<(Check, Vec<u8>, usize, u64)>> {
        let Some(raw) = self
            .bytes(at, HEADER_LEN)?
            .and_then(|h| <[u8; HEADER_LEN]>::try_from(h).ok())
        else {
            return Ok(None);
        };
        let header = frame::parse_header(&raw);
        if header.generation != generation || header.epoch < min_epoch {
            return Ok(None);
        }
        let Some(payload) = self.bytes(at + HEADER_LEN as u64, header.payload_len)? else {
            return Ok(None);
        };
        let check = frame::check(&raw, &header, payload, generation, min_epoch);
        Ok(Some((
            check,
            payload.to_vec(),
            HEADER_LEN + header.payload_len,
            header.epoch,
        )))
    }
}
