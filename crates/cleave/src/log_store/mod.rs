//! The log store: many logical logs (Raft logs, redo logs, change streams)
//! appended by LSN, trimmed from the front, rarely read, each append
//! durable when it returns, stored once (LavaStore §3.3.1, LavaLog).
//!
//! All logical logs share two kinds of physical logs (module `physical`):
//! the *datalog* holds appends and truncations, the *metalog* creations,
//! deletions, trims and full data files' reverse-index locations. Appends
//! from every thread and log are group-committed into one frame of the
//! active data file and one `fdatasync`; the files are preallocated or
//! recycled, so the sync writes the data and no file-size metadata
//! (LavaStore §3.3.3). The index maps each log's LSNs to their records.
//! Opening replays the metalog and the data files (a full file through its
//! reverse index, the active one frame by frame). A data file is released
//! to the pool of files to recycle once the oldest files' records are all
//! trimmed or deleted. Format: `docs/format/log_store.md`.

mod checkpoint;
mod flush;
mod frame;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzz;
mod gc;
mod index;
mod ops;
mod physical;
mod recovery;
mod state;
mod store;

use std::path::Path;
use std::sync::Arc;

pub use store::LogScan;

use crate::error::Result;
use crate::vfs::{Fs, OsFs};

/// Largest record an append accepts (64 MiB).
pub const MAX_RECORD_BYTES: usize = 64 << 20;
/// Largest batch `append_batch` accepts, records and framing (256 MiB).
pub const MAX_BATCH_BYTES: usize = 256 << 20;
/// Longest logical log name (1 KiB).
pub const MAX_LOG_NAME_BYTES: usize = 1 << 10;

/// How a log store is opened.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// The file system (tests pass `MemFs` or `FaultFs`).
    pub fs: Arc<dyn Fs>,
    /// Creates the directory and an empty store when there is none.
    pub create_if_missing: bool,
    /// Capacity of a data file (physical log) in bytes; a file is sealed
    /// when the next batch would not fit. 256 MiB, as LavaLog's.
    pub data_file_bytes: u64,
    /// Capacity of a metalog file in bytes.
    pub meta_file_bytes: u64,
    /// Writes every block of a new file once before use, so that synced
    /// appends never change the file's size or allocation. Off, files
    /// grow with their appends (what a WAL on ext4 does).
    pub preallocate: bool,
    /// Appends bypass the page cache (`O_DIRECT`) in the device's block
    /// size (512 bytes on most disks): a synced 4 KiB record then writes
    /// its 9 sectors, where through the page cache it rewrites the page it
    /// shares with the record before it, twice the bytes. Preallocated and
    /// recycled files only; where the file system refuses `O_DIRECT`,
    /// appends are buffered.
    pub direct_io: bool,
    /// Every append, truncation, trim and deletion is durable when it
    /// returns (concurrent ones share one `fdatasync`). Off, they reach
    /// the operating system and become durable at [`LogStore::sync`].
    pub sync: bool,
    /// Released data files kept to be recycled, at most.
    pub free_files: usize,
    /// Memory the index's recent mappings (L0) may take before they are
    /// flushed to groups in the metalog, in bytes; older mappings cost
    /// memory per group, not per record.
    pub index_memory_bytes: u64,
    /// A checkpoint is written once index flushes have added this many
    /// bytes to the metalog since the last: what opening replays past it.
    pub checkpoint_bytes: u64,
    /// The oldest data file is garbage-collected (its live records moved
    /// to the active file) once this share of its bytes is garbage.
    pub gc_garbage_ratio: f64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            fs: Arc::new(OsFs::new()),
            create_if_missing: false,
            data_file_bytes: 256 << 20,
            meta_file_bytes: 16 << 20,
            preallocate: true,
            direct_io: true,
            sync: true,
            free_files: 2,
            index_memory_bytes: 2 << 20,
            checkpoint_bytes: 4 << 20,
            gc_garbage_ratio: 0.75,
        }
    }
}

impl LogOptions {
    fn data_shape(&self) -> physical::Shape {
        physical::Shape {
            capacity: self.data_file_bytes,
            direct: self.direct_io,
        }
    }

    fn meta_shape(&self) -> physical::Shape {
        physical::Shape {
            capacity: self.meta_file_bytes,
            direct: self.direct_io,
        }
    }
}

/// A logical log of a [`LogStore`], as [`LogStore::create_log`] or
/// [`LogStore::open_log`] named it. Ids are never reused: a deleted log's
/// id refers to nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogId(u32);

impl LogId {
    /// The id as stored.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// Counters and sizes of a log store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogStats {
    /// Logical logs.
    pub logs: usize,
    /// Mappings in memory (L0) and groups of older ones (L1), across logs.
    pub l0_entries: u64,
    pub groups: u64,
    /// Data files, the active one included.
    pub data_files: usize,
    /// Metalog files.
    pub meta_files: usize,
    /// Released files waiting to be recycled.
    pub free_files: usize,
    /// Group commits written, and how many of them were synced.
    pub commits: u64,
    pub syncs: u64,
    /// Index flushes and checkpoints written.
    pub flushes: u64,
    pub checkpoints: u64,
    /// Data files released since open.
    pub files_released: u64,
    /// Files recycled (taken from the pool rather than written anew).
    pub files_recycled: u64,
    /// Data files garbage-collected, and the records and bytes GC moved.
    pub gc_runs: u64,
    pub gc_records_moved: u64,
    pub gc_bytes_moved: u64,
    /// Background maintenance runs that failed (each also logged).
    pub maintenance_errors: u64,
}

/// An open log store. Cheap to share across threads behind an `Arc`;
/// every method takes `&self`.
pub struct LogStore {
    inner: Arc<store::Inner>,
    maintenance: Option<std::thread::JoinHandle<()>>,
}

impl LogStore {
    /// Opens (or, with `create_if_missing`, creates) the store in `dir`,
    /// recovering what the last session made durable.
    pub fn open(dir: impl AsRef<Path>, opts: LogOptions) -> Result<LogStore> {
        if !(0.0..=1.0).contains(&opts.gc_garbage_ratio) {
            return Err(crate::Error::InvalidArgument(format!(
                "log store: gc_garbage_ratio {} is not between 0 and 1",
                opts.gc_garbage_ratio
            )));
        }
        let dir = dir.as_ref();
        let inner = Arc::new(recovery::open(dir, opts)?);
        let maintenance = gc::spawn(inner.clone())
            .map_err(|e| crate::Error::io(dir, "start the maintenance thread of", e))?;
        // What the last session left to release or collect.
        inner.nudge();
        Ok(LogStore {
            inner,
            maintenance: Some(maintenance),
        })
    }

    /// Creates the logical log `name`; an error if it exists.
    pub fn create_log(&self, name: &str) -> Result<LogId> {
        self.inner.create_log(name)
    }

    /// The log named `name`, if it exists.
    pub fn open_log(&self, name: &str) -> Option<LogId> {
        self.inner.open_log(name)
    }

    /// Names and ids of every log, by name.
    pub fn logs(&self) -> Vec<(String, LogId)> {
        self.inner.logs()
    }

    /// Deletes a log and all its records.
    pub fn delete_log(&self, log: LogId) -> Result<()> {
        self.inner.delete_log(log)
    }

    /// Appends the record `lsn` to `log`, replacing one of the same LSN.
    /// LSNs may come in any order, but not below the log's trim point.
    pub fn append(&self, log: LogId, lsn: u64, data: &[u8]) -> Result<()> {
        self.inner.append(log, &[(lsn, data)])
    }

    /// Appends several records to `log`, all or none of them after a
    /// crash.
    pub fn append_batch(&self, log: LogId, records: &[(u64, &[u8])]) -> Result<()> {
        self.inner.append(log, records)
    }

    /// Drops the records of `log` from `from_lsn` on (a Raft log's
    /// conflicting suffix). Records appended afterwards stay.
    pub fn truncate(&self, log: LogId, from_lsn: u64) -> Result<()> {
        self.inner.truncate(log, from_lsn)
    }

    /// Drops the records of `log` below `before_lsn`, for good; appends
    /// below it are refused from then on. A trim below the current trim
    /// point does nothing.
    pub fn trim(&self, log: LogId, before_lsn: u64) -> Result<()> {
        self.inner.trim(log, before_lsn)
    }

    /// The record `lsn` of `log`: one read of the device at most.
    pub fn read(&self, log: LogId, lsn: u64) -> Result<Option<Vec<u8>>> {
        self.inner.read(log, lsn)
    }

    /// The records of `log` from `from_lsn` on, in LSN order, as they are
    /// when each is reached.
    pub fn scan(&self, log: LogId, from_lsn: u64) -> Result<LogScan> {
        LogScan::new(self.inner.clone(), log, from_lsn)
    }

    /// The highest LSN `log` holds.
    pub fn last_lsn(&self, log: LogId) -> Result<Option<u64>> {
        self.inner.bounds(log).map(|b| b.map(|(_, last)| last))
    }

    /// The lowest LSN `log` holds.
    pub fn first_lsn(&self, log: LogId) -> Result<Option<u64>> {
        self.inner.bounds(log).map(|b| b.map(|(first, _)| first))
    }

    /// The log's trim point: LSNs below it are gone.
    pub fn trim_point(&self, log: LogId) -> Result<u64> {
        self.inner.trim_point(log)
    }

    /// Makes everything appended so far durable.
    pub fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    /// Releases the data files that hold only garbage and collects the
    /// oldest one if enough of it is, now, in the calling thread (the
    /// store also does this in the background as files fill).
    pub fn collect_garbage(&self) -> Result<()> {
        gc::maintain(&self.inner)
    }

    /// Flushes the index's recent mappings to the metalog and moves the
    /// point recovery replays the datalog from to its end.
    pub fn flush_index(&self) -> Result<()> {
        self.inner.check_writable()?;
        let mut data = self.inner.data.lock();
        self.inner.flush_index(&mut data)
    }

    pub fn stats(&self) -> LogStats {
        self.inner.stats()
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        if let Some(handle) = self.maintenance.take() {
            gc::stop(&self.inner, handle);
        }
    }
}

impl std::fmt::Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
