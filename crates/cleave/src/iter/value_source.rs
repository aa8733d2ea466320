//! Resolving the value of an entry: inline, or through its value handle in
//! the value files of one Version, or in the value logs not yet in it.

use std::sync::Arc;

use crate::base::key::{SeqNo, ValueKind};
use crate::base::FileNumber;
use crate::error::{Error, Result};
use crate::manifest::version::Version;
use crate::value_file::{Readahead, ValueHandle, ValueStore, ValueWanted};
use crate::value_log::LogReads;

/// Where [`ValueSource::place`] found a value.
enum Place {
    Read(Result<Arc<Vec<u8>>>),
    In(FileNumber),
}

/// The value files a reader may resolve handles in: those of the Version
/// it holds (which keeps them from being deleted), and the value logs its
/// memtables point into that the Version does not hold yet.
#[derive(Clone)]
pub(crate) struct ValueSource {
    pub store: Arc<ValueStore>,
    pub version: Arc<Version>,
    pub logs: LogReads,
}

impl ValueSource {
    /// A source with no value files, for iterators over inline values.
    #[cfg(test)]
    pub(crate) fn for_tests() -> ValueSource {
        let fs = Arc::new(crate::vfs::MemFs::new());
        ValueSource {
            store: Arc::new(ValueStore::new(
                fs,
                "/none".into(),
                16,
                false,
                false,
                Arc::new(crate::cache::new_block_cache(0)),
            )),
            version: Arc::new(Version::default()),
            logs: LogReads::default(),
        }
    }

    /// The value of an entry of `kind` (`Value` or `ValueRef`) whose stored
    /// value is `raw`, for `user_key` at `seq`. A `ValueRef` costs at most
    /// one read (none on a value-cache hit); with `readahead`, adjacent
    /// records come from one larger read.
    pub(crate) fn resolve(
        &self,
        kind: ValueKind,
        raw: &[u8],
        user_key: &[u8],
        seq: SeqNo,
        readahead: Option<(&mut Readahead, bool)>,
    ) -> Result<Arc<Vec<u8>>> {
        if kind != ValueKind::ValueRef {
            return Ok(Arc::new(raw.to_vec()));
        }
        let handle = self.decode(raw, user_key, seq)?;
        let physical = match self.place(&handle, user_key, seq) {
            Place::Read(r) => return r,
            Place::In(physical) => physical,
        };
        match readahead {
            Some((ra, scanning)) => self
                .store
                .get_for_scan(physical, &handle, user_key, seq, ra, scanning),
            None => self.store.get(physical, &handle, user_key, seq),
        }
    }

    /// The values of separated entries, each `(raw handle, user key, seq)`,
    /// one result each, in order; the reads of those not cached go to the
    /// file system in one batch. A damaged handle fails alone.
    pub(crate) fn resolve_many(
        &self,
        entries: &[(&[u8], &[u8], SeqNo)],
    ) -> Vec<Result<Arc<Vec<u8>>>> {
        let mut out: Vec<Option<Result<Arc<Vec<u8>>>>> = Vec::with_capacity(entries.len());
        let mut wanted = Vec::new();
        let mut slots = Vec::new();
        for (i, &(raw, key, seq)) in entries.iter().enumerate() {
            let placed = self
                .decode(raw, key, seq)
                .map(|handle| (self.place(&handle, key, seq), handle));
            match placed {
                Ok((Place::In(physical), handle)) => {
                    wanted.push(ValueWanted {
                        physical,
                        handle,
                        key,
                        seq,
                    });
                    slots.push(i);
                    out.push(None);
                }
                // A value log's values (recent, or not in the Version yet)
                // are read alone: the cache mostly has them.
                Ok((Place::Read(r), _)) => out.push(Some(r)),
                Err(e) => out.push(Some(Err(e))),
            }
        }
        for (i, r) in slots.into_iter().zip(self.store.get_many(&wanted)) {
            out[i] = Some(r);
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::InvalidArgument("value not read".into()))))
            .collect()
    }

    fn decode(&self, raw: &[u8], user_key: &[u8], seq: SeqNo) -> Result<ValueHandle> {
        ValueHandle::decode(raw).map_err(|e| {
            Error::corruption(
                "<value handle>",
                0,
                format!(
                    "entry for key {:?} at seq {seq}: {}",
                    user_key.escape_ascii().to_string(),
                    e.0
                ),
            )
        })
    }

    /// Reads ahead, in one batch, the records the handles `raw` of a scan's
    /// next entries name. Best effort: what fails here is read (and its
    /// error reported) when the value is asked for.
    pub(crate) fn prefetch<'a>(
        &self,
        raw: impl Iterator<Item = &'a [u8]>,
        readahead: &mut Readahead,
    ) {
        let handles: Vec<_> = raw
            .filter_map(|r| ValueHandle::decode(r).ok())
            .filter_map(|h| Some((self.version.physical_file(h.logical_file)?, h)))
            .collect();
        self.store.prefetch(&handles, readahead);
    }

    /// Where the value of `handle` comes from: the recent-value cache or a
    /// value log the Version does not hold yet (read here), or a physical
    /// file of the Version.
    fn place(&self, handle: &ValueHandle, user_key: &[u8], seq: SeqNo) -> Place {
        if let Some(v) = self.logs.cached(handle) {
            return Place::Read(Ok(v));
        }
        match self.version.physical_file(handle.logical_file) {
            Some(physical) => Place::In(physical),
            None => Place::Read(
                self.logs
                    .read(handle, user_key, seq)
                    .unwrap_or_else(|| Err(self.missing(handle, user_key))),
            ),
        }
    }

    fn missing(&self, handle: &ValueHandle, user_key: &[u8]) -> Error {
        Error::corruption(
            self.store.path(handle.logical_file),
            0,
            format!(
                "handle of key {:?} names logical value file {}, which the version does not hold",
                user_key.escape_ascii().to_string(),
                handle.logical_file
            ),
        )
    }
}
