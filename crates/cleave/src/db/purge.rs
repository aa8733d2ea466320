//! Deleting sstables and value files once no Version names them.
//!
//! A file leaves the current Version in a manifest edit, but readers (a
//! `get` in flight, an iterator, a compaction's input Version) may still
//! use it; the last one to drop a Version naming it queues it. Whoever
//! drops that last reference then deletes it: a background job after its
//! work, or a reader when its view goes away (as RocksDB purges obsolete
//! files in an iterator's destructor), so that space comes back as soon as
//! nothing can read the file.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::base::filename::{self, FileKind};
use crate::delta::DeltaStore;
use crate::manifest::ObsoleteFiles;
use crate::sstable::TableCache;
use crate::value_file::ValueStore;
use crate::vfs::Fs;

pub(crate) struct Purger {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    obsolete: Arc<ObsoleteFiles>,
    table_cache: Arc<TableCache>,
    values: Arc<ValueStore>,
    deltas: Arc<DeltaStore>,
    /// Held shared by each purge from `take` to its last removal (files
    /// taken are no longer pending, but still on disk until then), and
    /// exclusively by a purge that must see them gone.
    running: RwLock<()>,
}

impl Purger {
    pub(crate) fn new(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        obsolete: Arc<ObsoleteFiles>,
        table_cache: Arc<TableCache>,
        values: Arc<ValueStore>,
        deltas: Arc<DeltaStore>,
    ) -> Purger {
        Purger {
            fs,
            dir,
            obsolete,
            table_cache,
            values,
            deltas,
            running: RwLock::new(()),
        }
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.obsolete.is_pending()
    }

    /// Deletes every queued file. Best effort: a file that cannot be
    /// removed now is an orphan, removed by the next open.
    pub(crate) fn purge(&self) {
        if self.has_pending() {
            let _running = self.running.read();
            self.delete_taken();
        }
    }

    /// Deletes every queued file, and returns only once files another
    /// thread took to delete are gone too: for whoever then measures the
    /// directory, as a purge in flight elsewhere left a job's inputs on
    /// disk after `wait_for_compactions`.
    pub(crate) fn purge_settled(&self) {
        let _running = self.running.write();
        self.delete_taken();
    }

    /// Deletes the files queued now. REQUIRES: `running` held.
    fn delete_taken(&self) {
        let files = self.obsolete.take();
        for f in &files {
            // Closing the cached handle first, so the space is freed now
            // rather than when the cache would have evicted it.
            match f.kind {
                FileKind::ValueFile => self.values.evict_file(f.number),
                FileKind::DeltaFile => self.deltas.forget(f.number),
                _ => self.table_cache.evict(f.number),
            }
            if let Some(path) = filename::numbered(&self.dir, f.kind, f.number) {
                let _ = self.fs.remove(&path);
            }
        }
        self.obsolete.deleted(files.len());
    }

    /// Files out of the current Version that still take space
    /// (`ObsoleteFiles::retained`).
    pub(crate) fn retained(&self) -> usize {
        self.obsolete.retained()
    }
}

/// Purges when dropped: the last pin of a reader's view, dropped after the
/// Version it pins.
pub(crate) struct PurgeOnDrop(pub Arc<Purger>);

impl Drop for PurgeOnDrop {
    fn drop(&mut self) {
        self.0.purge();
    }
}
