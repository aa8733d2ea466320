//! The Raft log and the hard state (vote, committed, purged) in two logical
//! logs of a cleave [`LogStore`].
//!
//! Every engine call here blocks (an append waits for its group commit's
//! `fdatasync`), and is made directly inside the async functions: the calls
//! are short, openraft serializes log I/O anyway (its contract forbids
//! reordering writes), and `spawn_blocking` would need the store moved into
//! a `'static` closure per call for no gain in ordering or safety.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use cleave::log_store::{self, LogOptions, LogStore};
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, OptionalSend, RaftLogReader, RaftTypeConfig, StorageIOError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::types::{LogId, NodeId, StorageError, TypeConfig, Vote};

/// Name of the logical log that holds the entries, record LSN = Raft index.
pub const ENTRIES_LOG: &str = "raft/entries";
/// Name of the logical log that holds the hard state, one record per item
/// at a fixed LSN, replaced on each save.
pub const STATE_LOG: &str = "raft/state";

/// LSNs of the hard-state records in [`STATE_LOG`]. Written to disk: do not
/// change.
const VOTE_LSN: u64 = 1;
const COMMITTED_LSN: u64 = 2;
const PURGED_LSN: u64 = 3;

/// Framing the log store adds per record in a batch, at most (a tag, three
/// varints and a checksum); used to keep a batch under
/// [`log_store::MAX_BATCH_BYTES`].
const RECORD_FRAMING_BYTES: usize = 32;

/// Encoded bytes of the newest entries kept decoded in memory, at most.
const ENTRY_CACHE_BYTES: usize = 64 << 20;

/// The newest entries, decoded, contiguous up to the log's last: openraft
/// reads each entry back soon after appending it (to replicate it, and to
/// apply it once committed), and a read from here costs a clone, where a
/// read from the store costs a read and a JSON decode.
struct EntryCache<C: LogConfig> {
    /// Entries in index order, each with its encoded size.
    entries: VecDeque<(openraft::Entry<C>, usize)>,
    bytes: usize,
}

impl<C: LogConfig> EntryCache<C> {
    fn first(&self) -> Option<u64> {
        self.entries.front().map(|(e, _)| e.log_id.index)
    }

    /// Drops the entries from `index` on.
    fn truncate(&mut self, index: u64) {
        while self
            .entries
            .back()
            .is_some_and(|(e, _)| e.log_id.index >= index)
        {
            if let Some((_, n)) = self.entries.pop_back() {
                self.bytes -= n;
            }
        }
    }

    /// Drops the entries up to `index`, and the oldest beyond the limit.
    fn purge(&mut self, index: u64) {
        while self
            .entries
            .front()
            .is_some_and(|(e, _)| e.log_id.index <= index || self.bytes > ENTRY_CACHE_BYTES)
        {
            if let Some((_, n)) = self.entries.pop_front() {
                self.bytes -= n;
            }
        }
    }

    /// Adds consecutive entries just appended: they replace what the cache
    /// holds from their first index on (a leader's entries overwriting a
    /// deposed one's), or start it anew if they do not follow it.
    fn append(&mut self, run: Vec<(openraft::Entry<C>, usize)>) {
        let Some(start) = run.first().map(|(e, _)| e.log_id.index) else {
            return;
        };
        let follows = match (self.first(), self.entries.back()) {
            (Some(first), Some((last, _))) => {
                first <= start && start <= last.log_id.index.saturating_add(1)
            }
            _ => false,
        };
        if follows {
            self.truncate(start);
        } else {
            self.entries.clear();
            self.bytes = 0;
        }
        for (entry, n) in run {
            self.bytes += n;
            self.entries.push_back((entry, n));
        }
        self.purge(0);
    }

    /// The entries in `[start, end)`, if the cache holds every one of them
    /// the log does: `start` is at or above its first.
    fn get(&self, start: u64, end: Option<u64>) -> Option<Vec<openraft::Entry<C>>> {
        let first = self.first()?;
        if start < first {
            return None;
        }
        let skip = usize::try_from(start - first).unwrap_or(usize::MAX);
        Some(
            self.entries
                .iter()
                .skip(skip)
                .take_while(|(e, _)| end.is_none_or(|end| e.log_id.index < end))
                .map(|(e, _)| e.clone())
                .collect(),
        )
    }
}

/// What the storage and its readers share.
struct Shared {
    store: LogStore,
    entries: log_store::LogId,
    state: log_store::LogId,
    /// Whether the store syncs every call itself (`LogOptions::sync`);
    /// otherwise every write here ends with [`LogStore::sync`].
    store_syncs: bool,
}

/// openraft's [`RaftLogStorage`] on a cleave log store: entries in
/// [`ENTRIES_LOG`], the vote, the committed log id and the last purged log
/// id in [`STATE_LOG`]. Every write is durable when it returns (and an
/// append's callback runs only then).
pub struct LogStorage<C: LogConfig = TypeConfig> {
    shared: Arc<Shared>,
    cache: Arc<Mutex<EntryCache<C>>>,
    /// The durable last purged log id, as [`STATE_LOG`] holds it; only
    /// `purge` changes it, and it takes `&mut self`.
    last_purged: Option<LogId>,
}

/// Reads entries for openraft's replication tasks, alongside the
/// [`LogStorage`] it came from.
pub struct LogReader<C: LogConfig = TypeConfig> {
    shared: Arc<Shared>,
    cache: Arc<Mutex<EntryCache<C>>>,
}

impl<C: LogConfig> Clone for LogReader<C> {
    fn clone(&self) -> Self {
        LogReader {
            shared: self.shared.clone(),
            cache: self.cache.clone(),
        }
    }
}

fn lock<C: LogConfig>(cache: &Mutex<EntryCache<C>>) -> MutexGuard<'_, EntryCache<C>> {
    // Entries are moved in and out whole: a panic elsewhere leaves the
    // cache consistent.
    cache.lock().unwrap_or_else(|e| e.into_inner())
}

/// The type configurations whose logs [`LogStorage`] keeps: `u64` node ids
/// and openraft's own entry type, which the `serde` feature encodes (as
/// JSON here), with requests that clone (the newest entries are kept
/// decoded, and reads clone them). [`TypeConfig`] is one; an application
/// with its own requests declares another.
pub trait LogConfig:
    RaftTypeConfig<NodeId = NodeId, Entry = openraft::Entry<Self>, D: Clone>
{
}

impl<C> LogConfig for C where
    C: RaftTypeConfig<NodeId = NodeId, Entry = openraft::Entry<C>, D: Clone>
{
}

impl<C: LogConfig> LogStorage<C> {
    /// Opens (with `opts.create_if_missing`, creates) the log store in
    /// `dir` and its two logs, and finishes a purge a crash interrupted.
    /// `opts.sync` off is allowed: each write then syncs the store itself.
    pub fn open(dir: impl AsRef<Path>, opts: LogOptions) -> Result<LogStorage<C>, StorageError> {
        let store_syncs = opts.sync;
        let store = LogStore::open(dir, opts).map_err(|e| StorageIOError::read_logs(&e))?;
        let entries = open_or_create(&store, ENTRIES_LOG)?;
        let state = open_or_create(&store, STATE_LOG)?;
        let shared = Arc::new(Shared {
            store,
            entries,
            state,
            store_syncs,
        });
        let last_purged: Option<LogId> = shared
            .read_state(PURGED_LSN)
            .map_err(StorageIOError::read_logs)?;
        shared.finish_purge(last_purged.as_ref())?;
        Ok(LogStorage {
            shared,
            cache: Arc::new(Mutex::new(EntryCache {
                entries: VecDeque::new(),
                bytes: 0,
            })),
            last_purged,
        })
    }

    /// The underlying store, for its statistics.
    pub fn log_store(&self) -> &LogStore {
        &self.shared.store
    }

    /// Encodes and appends `entries`, in batches under the store's limit,
    /// and makes them durable.
    fn write_entries(&self, mut entries: Vec<openraft::Entry<C>>) -> Result<(), StorageError> {
        // The store refuses LSNs below its trim point for good, while
        // openraft (its test suite does) may append an entry a purge already
        // covers: such an entry is in a snapshot, and no read may return it,
        // so it is dropped rather than refused.
        if let Some(purged) = self.last_purged {
            entries.retain(|e| e.log_id.index > purged.index);
        }
        if let Some(pair) = entries
            .windows(2)
            .find(|w| w[0].log_id.index.checked_add(1) != Some(w[1].log_id.index))
        {
            // A hole here would be a hole in the log.
            return Err(StorageIOError::write_log_entry(
                pair[1].log_id,
                AnyError::error(format!(
                    "entries to append are not consecutive: {} follows {}",
                    pair[1].log_id, pair[0].log_id
                )),
            )
            .into());
        }
        let mut encoded = Vec::with_capacity(entries.len());
        for entry in &entries {
            let bytes = serde_json::to_vec(entry)
                .map_err(|e| StorageIOError::write_log_entry(entry.log_id, &e))?;
            encoded.push((entry.log_id.index, bytes));
        }
        // Batches in index order: a crash between two keeps a prefix of the
        // entries, never a hole.
        for batch in batches(&encoded, log_store::MAX_BATCH_BYTES) {
            self.shared
                .store
                .append_batch(self.shared.entries, &batch)
                .map_err(|e| StorageIOError::write_logs(&e))?;
        }
        self.shared.sync().map_err(StorageIOError::write_logs)?;
        let sizes = encoded.iter().map(|(_, b)| b.len());
        lock(&self.cache).append(entries.into_iter().zip(sizes).collect());
        Ok(())
    }
}

impl Shared {
    fn sync(&self) -> Result<(), AnyError> {
        if self.store_syncs {
            return Ok(());
        }
        self.store.sync().map_err(|e| AnyError::new(&e))
    }

    /// Replaces the hard-state record `lsn` with `value`, durably.
    fn save_state<T: Serialize>(&self, lsn: u64, value: &T) -> Result<(), AnyError> {
        let bytes = serde_json::to_vec(value).map_err(|e| AnyError::new(&e))?;
        self.store
            .append(self.state, lsn, &bytes)
            .map_err(|e| AnyError::new(&e))?;
        self.sync()
    }

    /// The hard-state record `lsn`; `T::default()` if it was never saved.
    fn read_state<T: DeserializeOwned + Default>(&self, lsn: u64) -> Result<T, AnyError> {
        match self
            .store
            .read(self.state, lsn)
            .map_err(|e| AnyError::new(&e))?
        {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|e| AnyError::new(&e)),
            None => Ok(T::default()),
        }
    }

    /// Trims the entries up to `last_purged` if the trim did not happen
    /// (`purge` saves the purged id first, then trims).
    fn finish_purge(&self, last_purged: Option<&LogId>) -> Result<(), StorageError> {
        let trim_point = self
            .store
            .trim_point(self.entries)
            .map_err(|e| StorageIOError::read_logs(&e))?;
        let wanted = match last_purged {
            Some(id) => next_index(id)?,
            None => 0,
        };
        if trim_point > wanted {
            return Err(StorageIOError::read_logs(AnyError::error(format!(
                "the entries are trimmed below {trim_point}, past the saved purge point {wanted}"
            )))
            .into());
        }
        if trim_point < wanted {
            self.store
                .trim(self.entries, wanted)
                .map_err(|e| StorageIOError::write_logs(&e))?;
            self.sync().map_err(StorageIOError::write_logs)?;
        }
        Ok(())
    }

    /// The entry at `index`, if the log holds it.
    fn read_entry<C: LogConfig>(
        &self,
        index: u64,
    ) -> Result<Option<openraft::Entry<C>>, StorageError> {
        let Some(bytes) = self
            .store
            .read(self.entries, index)
            .map_err(|e| StorageIOError::read_log_at_index(index, &e))?
        else {
            return Ok(None);
        };
        decode_entry(index, &bytes).map(Some)
    }

    fn entries_in<C: LogConfig>(
        &self,
        start: u64,
        end: Option<u64>,
    ) -> Result<Vec<openraft::Entry<C>>, StorageError> {
        let mut out = Vec::new();
        if end.is_some_and(|end| end <= start) {
            return Ok(out);
        }
        let scan = self
            .store
            .scan(self.entries, start)
            .map_err(|e| StorageIOError::read_logs(&e))?;
        for record in scan {
            let (index, bytes) = record.map_err(|e| StorageIOError::read_logs(&e))?;
            if end.is_some_and(|end| index >= end) {
                break;
            }
            out.push(decode_entry(index, &bytes)?);
        }
        Ok(out)
    }
}

/// Decodes the record at `index`, which must hold the entry of that index.
fn decode_entry<C: LogConfig>(
    index: u64,
    bytes: &[u8],
) -> Result<openraft::Entry<C>, StorageError> {
    let entry: openraft::Entry<C> =
        serde_json::from_slice(bytes).map_err(|e| StorageIOError::read_log_at_index(index, &e))?;
    if entry.log_id.index != index {
        return Err(StorageIOError::read_log_at_index(
            index,
            AnyError::error(format!("record {index} holds entry {}", entry.log_id)),
        )
        .into());
    }
    Ok(entry)
}

fn open_or_create(store: &LogStore, name: &str) -> Result<log_store::LogId, StorageError> {
    match store.open_log(name) {
        Some(id) => Ok(id),
        None => store
            .create_log(name)
            .map_err(|e| StorageIOError::write_logs(&e).into()),
    }
}

/// The index after `id`'s: where the log starts once `id` is purged.
fn next_index(id: &LogId) -> Result<u64, StorageError> {
    id.index.checked_add(1).ok_or_else(|| {
        StorageIOError::write_logs(AnyError::error("log index overflows u64")).into()
    })
}

/// Splits encoded entries into runs of at most `limit` bytes with their
/// framing (or of one entry), which the store accepts as one batch.
fn batches(encoded: &[(u64, Vec<u8>)], limit: usize) -> Vec<Vec<(u64, &[u8])>> {
    let mut out = Vec::new();
    let mut current: Vec<(u64, &[u8])> = Vec::new();
    let mut bytes = 0;
    for (index, data) in encoded {
        let size = data.len() + RECORD_FRAMING_BYTES;
        if !current.is_empty() && bytes + size > limit {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        current.push((*index, data.as_slice()));
        bytes += size;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `range` as `[start, end)`, `None` for no end.
fn bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => None,
    };
    match start {
        Some(start) => (start, end),
        // Past u64::MAX: nothing.
        None => (u64::MAX, Some(u64::MAX)),
    }
}

impl<C: LogConfig> RaftLogReader<C> for LogReader<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<openraft::Entry<C>>, StorageError> {
        let (start, end) = bounds(&range);
        if let Some(cached) = lock(&self.cache).get(start, end) {
            return Ok(cached);
        }
        self.shared.entries_in(start, end)
    }
}

impl<C: LogConfig> RaftLogReader<C> for LogStorage<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<openraft::Entry<C>>, StorageError> {
        // The same reads as a reader's: through the shared store.
        self.get_log_reader().await.try_get_log_entries(range).await
    }
}

impl<C: LogConfig> RaftLogStorage<C> for LogStorage<C> {
    type LogReader = LogReader<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError> {
        let last_lsn = self
            .shared
            .store
            .last_lsn(self.shared.entries)
            .map_err(|e| StorageIOError::read_logs(&e))?;
        let last_entry = match last_lsn {
            Some(index) => self.shared.read_entry::<C>(index)?.map(|e| e.log_id),
            None => None,
        };
        // Entries at or below the purge point are on their way out (a purge
        // saves its id before it trims): the purge point is the last id then.
        let last_log_id = match (last_entry, self.last_purged) {
            (Some(entry), Some(purged)) if entry.index <= purged.index => Some(purged),
            (Some(entry), _) => Some(entry),
            (None, purged) => purged,
        };
        Ok(LogState {
            last_purged_log_id: self.last_purged,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> LogReader<C> {
        LogReader {
            shared: self.shared.clone(),
            cache: self.cache.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.shared
            .save_state(VOTE_LSN, vote)
            .map_err(|e| StorageIOError::write_vote(e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.shared
            .read_state(VOTE_LSN)
            .map_err(|e| StorageIOError::read_vote(e).into())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not synced here: openraft saves it on every advance of the
        // commit index (every client write, on a leader alone), and it
        // only lets a restart apply sooner. It names entries already
        // durable, and becomes durable with the next sync; a crash that
        // loses it leaves an older one, which openraft commits past again.
        let bytes = serde_json::to_vec(&committed).map_err(|e| StorageIOError::write(&e))?;
        self.shared
            .store
            .append(self.shared.state, COMMITTED_LSN, &bytes)
            .map_err(|e| StorageIOError::write(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        self.shared
            .read_state(COMMITTED_LSN)
            .map_err(|e| StorageIOError::read(e).into())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<C>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = openraft::Entry<C>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let result = self.write_entries(entries.into_iter().collect());
        // The entries are durable once `write_entries` returns (the store
        // synced them), so the callback is told here, not earlier. (openraft
        // 0.9 waits for it before its next append anyway: a sync thread
        // reporting later would not let appends share a sync.)
        match &result {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(io::Error::other(e.to_string()))),
        }
        result
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        lock(&self.cache).truncate(log_id.index);
        self.shared
            .store
            .truncate(self.shared.entries, log_id.index)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.shared.sync().map_err(StorageIOError::write_logs)?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        if self
            .last_purged
            .is_some_and(|purged| purged.index >= log_id.index)
        {
            // The purge point never moves back.
            return Ok(());
        }
        // The id first: once it is durable, a crash before the trim leaves
        // entries that `open` trims, never a purge point nobody recorded.
        self.shared
            .save_state(PURGED_LSN, &Some(log_id))
            .map_err(StorageIOError::write_logs)?;
        self.last_purged = Some(log_id);
        lock(&self.cache).purge(log_id.index);
        self.shared.finish_purge(Some(&log_id))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(term: u64, index: u64) -> (openraft::Entry<TypeConfig>, usize) {
        let e = openraft::Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Blank,
        };
        (e, 100)
    }

    fn indexes(got: Option<Vec<openraft::Entry<TypeConfig>>>) -> Option<Vec<(u64, u64)>> {
        got.map(|v| {
            v.iter()
                .map(|e| (e.log_id.leader_id.term, e.log_id.index))
                .collect()
        })
    }

    #[test]
    fn the_entry_cache_holds_the_newest_entries_as_the_log_does() {
        let mut c = EntryCache::<TypeConfig> {
            entries: VecDeque::new(),
            bytes: 0,
        };
        assert_eq!(indexes(c.get(0, None)), None);
        c.append((5..=8).map(|i| entry(1, i)).collect());
        // Below its first entry it does not answer; from it, exactly.
        assert_eq!(indexes(c.get(4, None)), None);
        assert_eq!(indexes(c.get(6, Some(8))), Some(vec![(1, 6), (1, 7)]));
        assert_eq!(indexes(c.get(8, None)), Some(vec![(1, 8)]));
        assert_eq!(indexes(c.get(9, None)), Some(vec![]));
        // A new leader's entries overwrite from their first index.
        c.append((7..=9).map(|i| entry(2, i)).collect());
        assert_eq!(
            indexes(c.get(5, None)),
            Some(vec![(1, 5), (1, 6), (2, 7), (2, 8), (2, 9)])
        );
        // A run that does not follow starts the cache anew.
        c.append(vec![entry(2, 20)]);
        assert_eq!(indexes(c.get(9, None)), None);
        assert_eq!(indexes(c.get(20, None)), Some(vec![(2, 20)]));
        c.append((21..=25).map(|i| entry(2, i)).collect());
        c.truncate(23);
        assert_eq!(indexes(c.get(22, None)), Some(vec![(2, 22)]));
        c.purge(21);
        assert_eq!(indexes(c.get(21, None)), None);
        assert_eq!(indexes(c.get(22, None)), Some(vec![(2, 22)]));
        assert_eq!(c.bytes, 100);
    }

    #[test]
    fn batches_keep_order_and_stay_under_the_limit() {
        let encoded: Vec<(u64, Vec<u8>)> = (1..=7).map(|i| (i, vec![0; 40])).collect();
        // Two records and their framing fit in 150 bytes, three do not.
        let split = batches(&encoded, 150);
        let lsns: Vec<Vec<u64>> = split
            .iter()
            .map(|b| b.iter().map(|(lsn, _)| *lsn).collect())
            .collect();
        assert_eq!(lsns, vec![vec![1, 2], vec![3, 4], vec![5, 6], vec![7]]);
        // A record over the limit goes alone, for the store to refuse.
        let big = vec![(1, vec![0; 200]), (2, vec![0; 10])];
        assert_eq!(batches(&big, 150).len(), 2);
        assert!(batches(&[], 150).is_empty());
    }

    #[test]
    fn ranges_become_half_open_bounds() {
        assert_eq!(bounds(&(3..7)), (3, Some(7)));
        assert_eq!(bounds(&(3..=7)), (3, Some(8)));
        assert_eq!(bounds(&(3..)), (3, None));
        assert_eq!(bounds(&(..=u64::MAX)), (0, None));
        let excluded = (Bound::Excluded(u64::MAX), Bound::Unbounded);
        assert_eq!(bounds(&excluded), (u64::MAX, Some(u64::MAX)));
    }
}
