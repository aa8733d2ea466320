//! The read path: memtables, then L0 newest first, then one file per level.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::purge::PurgeOnDrop;
use super::DbInner;
use crate::base::key::{self, InternalKey, ValueKind};
use crate::base::SeqNo;
use crate::error::{Error, Result};
use crate::iter::db_iter::{DbIterator, InnerSource};
use crate::iter::level::{LevelIterator, TableOpener};
use crate::iter::merging::MergingIterator;
use crate::iter::{InternalIterator, ValueSource};
use crate::manifest::version::Version;
use crate::memtable::MemTable;
use crate::options::ReadOptions;

/// Bytes compaction reads from an input file at a time (RocksDB uses 2 MiB
/// with direct I/O too): one call per window instead of one per block.
const COMPACTION_READAHEAD_BYTES: usize = 2 << 20;

/// What a read sees: memtables newest first, and a Version.
pub(super) struct ReadView {
    pub seq: SeqNo,
    pub mems: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
}

impl DbInner {
    /// Takes the sequence number and the structures holding every write up
    /// to it under one lock, so that a flush or compaction between the two
    /// cannot hide entries the sequence number should see.
    pub(super) fn capture(&self, snapshot: Option<SeqNo>) -> ReadView {
        let st = self.state.lock();
        let seq = snapshot.unwrap_or_else(|| self.visible_seq.load(Ordering::Acquire));
        let mut mems = Vec::with_capacity(st.imm.len() + 1);
        mems.push(st.mem.clone());
        mems.extend(st.imm.iter().rev().map(|i| i.mem.clone()));
        ReadView {
            seq,
            mems,
            version: st.current.clone(),
        }
    }

    pub(super) fn get(&self, opts: &ReadOptions<'_>, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        let view = self.capture(opts.snapshot.map(|s| s.sequence_number()));
        let found = self.get_in(&view, user_key);
        // This view may have been the last to name a compacted file.
        drop(view);
        self.purger.purge();
        found
    }

    fn get_in(&self, view: &ReadView, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        for mem in &view.mems {
            if let Some((kind, value)) = mem.get(user_key, view.seq) {
                return resolve(kind, value);
            }
        }
        let seek = InternalKey::for_seek(user_key, view.seq);
        for file in view.version.files_for_get(user_key) {
            let table = self.table_cache.get(file.number)?;
            if let Some((ikey, value)) = table.get(user_key, seek.encoded())? {
                let parsed = key::parse(&ikey).ok_or_else(|| {
                    Error::corruption(
                        crate::base::filename::sstable(&self.dir, file.number),
                        0,
                        "malformed internal key",
                    )
                })?;
                if parsed.kind == ValueKind::ValueRef {
                    let source = self.value_source(view.version.clone());
                    let v = source.resolve(parsed.kind, &value, user_key, parsed.seq, None)?;
                    return Ok(Some(Arc::unwrap_or_clone(v)));
                }
                return resolve(parsed.kind, value);
            }
        }
        Ok(None)
    }

    /// Resolves separated values in the value files of `version`.
    pub(super) fn value_source(&self, version: Arc<Version>) -> ValueSource {
        ValueSource {
            store: self.values.clone(),
            version,
        }
    }

    pub(super) fn iter(&self, opts: &ReadOptions<'_>) -> DbIterator {
        let view = self.capture(opts.snapshot.map(|s| s.sequence_number()));
        let (mems, version, opener) =
            (view.mems.clone(), view.version.clone(), self.table_opener());
        // The iterator and its lookahead are built alike, over one view.
        let source: InnerSource = Arc::new(move || {
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            for mem in &mems {
                children.push(Box::new(mem.iter()));
            }
            for file in version.files(0) {
                children.push(Box::new(LevelIterator::new(
                    vec![file.clone()],
                    opener.clone(),
                )));
            }
            for level in 1..crate::base::limits::NUM_LEVELS {
                let files = version.files(level);
                if !files.is_empty() {
                    children.push(Box::new(LevelIterator::new(files.to_vec(), opener.clone())));
                }
            }
            Box::new(MergingIterator::new(children))
        });
        let values = self.value_source(view.version.clone());
        DbIterator::new(
            source(),
            view.seq,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
            values,
            Some(source),
            // Dropped in order: the Version, then the purge it may allow.
            Box::new((view.mems, view.version, PurgeOnDrop(self.purger.clone()))),
        )
    }

    /// Opens a table's iterator through the table cache.
    pub(super) fn table_opener(&self) -> TableOpener {
        let cache = self.table_cache.clone();
        Arc::new(move |file| {
            let table = cache.get(file.number)?;
            Ok(Box::new(table.iter()) as Box<dyn InternalIterator>)
        })
    }

    /// Opens a table for one sequential pass, as compaction reads it.
    pub(super) fn table_scan_opener(&self) -> TableOpener {
        let cache = self.table_cache.clone();
        Arc::new(move |file| {
            let table = cache.get(file.number)?;
            Ok(Box::new(table.scan_iter(COMPACTION_READAHEAD_BYTES)) as Box<dyn InternalIterator>)
        })
    }
}

/// The result of an entry holding its value inline (memtables never hold
/// handles; sstable handles are resolved by the caller).
fn resolve(kind: ValueKind, value: Vec<u8>) -> Result<Option<Vec<u8>>> {
    match kind {
        ValueKind::Value => Ok(Some(value)),
        ValueKind::Deletion => Ok(None),
        ValueKind::ValueRef | ValueKind::Merge => Err(Error::corruption(
            "<read>",
            0,
            format!("entry kind {kind:?} is not supported by this build"),
        )),
    }
}
