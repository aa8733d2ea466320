//! Checkpoints: a consistent copy of an open database in another directory,
//! which opens as a database of its own (RocksDB's `Checkpoint`).
//!
//! The memtables are flushed first, so the copy needs no WAL: the current
//! Version then holds every write acknowledged before the call, and a
//! Version is a cut between write groups. Sstables, value files and delta
//! files never change once a Version names them (a value log is sealed
//! before the flush that installs it), so each is hard-linked where the
//! file system allows it and copied where it does not; the Version held
//! for the whole copy keeps them from being deleted. The copy gets a
//! manifest of its own, one snapshot edit of that Version, and CURRENT
//! last: a directory without CURRENT is not a database, so a crash midway
//! leaves nothing that opens as one.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::base::filename;
use crate::error::{Error, Result};
use crate::manifest::version_set::write_manifest;
use crate::vfs::{FileOptions, Fs};

use super::DbInner;

/// Bytes a copied file is read and written in, at most.
const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// What [`Db::checkpoint`](crate::Db::checkpoint) made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Files the checkpoint shares with the database through hard links.
    pub files_linked: usize,
    /// Files copied, where a hard link was refused (another file system).
    pub files_copied: usize,
    /// Bytes of the copied files.
    pub bytes_copied: u64,
    /// Every write numbered up to this sequence number is in the copy:
    /// those acknowledged before the call, at least. Writes made during
    /// the call may be in it too (a prefix of them), so a replay into the
    /// copy from the next number may apply some twice, never skip one.
    pub last_sequence: u64,
}

impl DbInner {
    pub(super) fn checkpoint(&self, target: &Path) -> Result<CheckpointInfo> {
        let fs = &*self.opts.fs;
        if fs.exists(target)? && !fs.list(target)?.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} exists and is not empty",
                target.display()
            )));
        }
        // Every write acknowledged before the call is at or below this, and
        // the flush below puts them all in the copy.
        let acknowledged = self.visible_seq.load(Ordering::Acquire);
        self.flush()?;
        let (version, edit, manifest) = self.versions.lock().checkpoint_edit();
        let mut info = CheckpointInfo {
            last_sequence: acknowledged,
            ..CheckpointInfo::default()
        };
        let mut sources: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut add = |path: PathBuf| {
            if let Some(name) = path.file_name() {
                sources.push((path.clone(), target.join(name)));
            }
        };
        for (_, f) in version.all_files() {
            add(filename::sstable(&self.dir, f.number));
        }
        for f in version.value_files() {
            add(filename::value_file(&self.dir, f.number));
        }
        for f in version.delta_files() {
            add(filename::delta_file(&self.dir, f.number));
        }
        fs.create_dir_all(target)?;
        let mut made = Vec::new();
        let result = (|| {
            for (from, to) in &sources {
                made.push(to.clone());
                match fs.hard_link(from, to) {
                    Ok(()) => info.files_linked += 1,
                    Err(e) if link_refused(&e) => {
                        // Whatever name a refused link left is taken away
                        // first: creating the copy over a second name of
                        // the source's file would truncate the source.
                        if fs.exists(to)? {
                            fs.remove(to)?;
                        }
                        info.bytes_copied += copy_file(fs, from, to)?;
                        info.files_copied += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
            // The links and copies are durable before CURRENT can be.
            fs.sync_dir(target)?;
            made.push(filename::manifest(target, manifest));
            made.push(filename::temp(target, manifest));
            made.push(filename::current(target));
            write_manifest(fs, target, manifest, &edit)?;
            // The directory's own entry, for a target this call created.
            match target.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => fs.sync_dir(parent),
                _ => fs.sync_dir(Path::new(".")),
            }
        })();
        drop(version);
        // Files the database dropped during the copy were kept for it.
        self.purger.purge();
        if let Err(e) = result {
            // Best effort, leaving the directory empty for another try;
            // whatever stays is not a database (CURRENT comes last).
            for path in made {
                let _ = fs.remove(&path);
            }
            return Err(e);
        }
        Ok(info)
    }
}

/// Whether a failed link means "not here" (another device, a file system
/// without hard links, a link count at its limit, a refusal), which a
/// copy answers, rather than a failure to report.
fn link_refused(e: &Error) -> bool {
    let Error::Io { source, .. } = e else {
        return false;
    };
    matches!(
        source.kind(),
        std::io::ErrorKind::CrossesDevices | std::io::ErrorKind::Unsupported
    ) || matches!(
        source.raw_os_error(),
        Some(libc::EXDEV | libc::EPERM | libc::EMLINK | libc::EOPNOTSUPP)
    )
}

/// Copies `from` to the new file `to` and syncs it; returns its bytes.
fn copy_file(fs: &dyn Fs, from: &Path, to: &Path) -> Result<u64> {
    let src = fs.open(from, FileOptions::default())?;
    let len = src.len();
    let mut dst = fs.create(to, FileOptions::default())?;
    let mut at = 0;
    while at < len {
        let n = (len - at).min(COPY_CHUNK_BYTES);
        // `n` is at most COPY_CHUNK_BYTES, which fits in usize.
        dst.append(&src.read_at(at, n as usize)?)?;
        at += n;
    }
    dst.sync()?;
    Ok(len)
}
