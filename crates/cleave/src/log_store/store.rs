//! The open store: the two active files, the group commit that writes
//! appends from every thread as one frame, and reads through the index.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use super::frame::Kind;
use super::index::{self, Loc, MetaLoc};
use super::ops::{self, MetaOp, OpKind, Reverse, Role};
use super::physical::{self, Source, Writer};
use super::state::{Log, Pos, State};
use super::{LogId, LogOptions, LogStats, MAX_BATCH_BYTES, MAX_LOG_NAME_BYTES, MAX_RECORD_BYTES};
use crate::base::coding::Decoder;
use crate::error::{Error, Result};
use crate::vfs::{FileLock, FileOptions, RandomAccessFile};

/// A group commit takes queued requests up to this many bytes.
const GROUP_BYTES: usize = 8 << 20;
/// A scan fetches index entries in runs of at most this many from L0.
const SCAN_RUN: usize = 256;

pub(crate) struct DataSide {
    pub(crate) writer: Writer,
    /// The active file's reverse index so far.
    pub(crate) reverse: Vec<u8>,
}

pub(crate) struct MetaSide {
    pub(crate) writer: Writer,
    /// Metalog bytes written since the last checkpoint.
    pub(crate) since_checkpoint: u64,
}

/// A GC relocation's condition: the record is still where GC found it,
/// and the log's groups have not changed since.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect {
    pub(crate) loc: Loc,
    pub(crate) changes: u64,
}

/// One caller's operations, encoded by the caller.
struct Request {
    ticket: u64,
    payload: Vec<u8>,
    /// Per operation, its place in `payload`.
    entries: Vec<Reverse>,
    /// For a GC relocation, per operation, what must still hold.
    expect: Option<Vec<Expect>>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Request>,
    leading: bool,
    next_ticket: u64,
    /// Per ticket, the outcome and how many of its operations were
    /// written (a relocation's may be dropped).
    done: HashMap<u64, Result<usize>>,
}

/// Found by a lookup under the state lock.
pub(crate) enum Found {
    Nothing,
    Record(Loc),
    /// In this group of L1, if anywhere.
    InGroup(MetaLoc),
}

pub(crate) struct Inner {
    pub(crate) dir: PathBuf,
    pub(crate) opts: LogOptions,
    pub(crate) _lock: Box<dyn FileLock>,
    pub(crate) state: RwLock<State>,
    pub(crate) data: Mutex<DataSide>,
    pub(crate) meta: Mutex<MetaSide>,
    pub(crate) epoch: u64,
    next_generation: Mutex<u64>,
    queue: Mutex<Queue>,
    committed: Condvar,
    data_readers: Mutex<HashMap<u64, Arc<dyn RandomAccessFile>>>,
    meta_readers: Mutex<HashMap<u64, Arc<dyn RandomAccessFile>>>,
    poison: Mutex<Option<String>>,
    pub(crate) counters: Mutex<LogStats>,
    /// Wakes the maintenance thread (module `gc`): work to look at, and
    /// a request to stop.
    pub(crate) wake: (Mutex<(bool, bool)>, Condvar),
    /// Held by whoever releases or collects files: the maintenance thread
    /// or a caller of `collect_garbage`.
    pub(crate) maintaining: Mutex<()>,
}

impl Inner {
    pub(crate) fn new(
        dir: PathBuf,
        opts: LogOptions,
        lock: Box<dyn FileLock>,
        state: State,
        sides: (DataSide, MetaSide),
        epoch: u64,
        next_generation: u64,
    ) -> Inner {
        Inner {
            dir,
            opts,
            _lock: lock,
            state: RwLock::new(state),
            data: Mutex::new(sides.0),
            meta: Mutex::new(sides.1),
            epoch,
            next_generation: Mutex::new(next_generation),
            queue: Mutex::new(Queue::default()),
            committed: Condvar::new(),
            data_readers: Mutex::new(HashMap::new()),
            meta_readers: Mutex::new(HashMap::new()),
            poison: Mutex::new(None),
            counters: Mutex::new(LogStats::default()),
            wake: (Mutex::new((false, false)), Condvar::new()),
            maintaining: Mutex::new(()),
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        match &*self.poison.lock() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// A write failed: the files' state is no longer known, so writes stop
    /// until the store is reopened (reads go on).
    pub(crate) fn poisoned(&self, e: Error) -> Error {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        e
    }

    pub(crate) fn unknown(log: LogId) -> Error {
        Error::InvalidArgument(format!("log store: no log with id {}", log.0))
    }

    /// Asks the maintenance thread to look for work.
    pub(crate) fn nudge(&self) {
        let (lock, cv) = &self.wake;
        lock.lock().0 = true;
        cv.notify_one();
    }

    pub(crate) fn create_log(&self, name: &str) -> Result<LogId> {
        if name.is_empty() || name.len() > MAX_LOG_NAME_BYTES {
            return Err(Error::InvalidArgument(format!(
                "log store: a log name must have 1 to {MAX_LOG_NAME_BYTES} bytes, not {}",
                name.len()
            )));
        }
        self.check_writable()?;
        let mut meta = self.meta.lock();
        let id = {
            let st = self.state.read();
            if st.names.contains_key(name) {
                return Err(Error::InvalidArgument(format!(
                    "log store: log {name:?} exists"
                )));
            }
            if st.next_log == u32::MAX {
                return Err(Error::InvalidArgument(
                    "log store: every log id has been used".to_string(),
                ));
            }
            st.next_log
        };
        let op = MetaOp::Create {
            log: id,
            name: name.as_bytes(),
        };
        self.write_meta(&mut meta, &encode_meta(&[op]), true)?;
        let mut st = self.state.write();
        st.next_log = id + 1;
        st.names.insert(name.to_string(), id);
        st.logs.insert(id, Log::new(name.to_string()));
        Ok(LogId(id))
    }

    pub(crate) fn open_log(&self, name: &str) -> Option<LogId> {
        self.state.read().names.get(name).map(|&id| LogId(id))
    }

    pub(crate) fn logs(&self) -> Vec<(String, LogId)> {
        let st = self.state.read();
        st.names
            .iter()
            .map(|(n, &id)| (n.clone(), LogId(id)))
            .collect()
    }

    pub(crate) fn delete_log(&self, log: LogId) -> Result<()> {
        self.check_writable()?;
        let mut meta = self.meta.lock();
        if !self.state.read().logs.contains_key(&log.0) {
            return Err(Self::unknown(log));
        }
        let op = MetaOp::Delete { log: log.0 };
        self.write_meta(&mut meta, &encode_meta(&[op]), true)?;
        self.state.write().delete(log.0);
        drop(meta);
        self.nudge();
        Ok(())
    }

    pub(crate) fn trim(&self, log: LogId, before: u64) -> Result<()> {
        {
            let st = self.state.read();
            let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
            if before <= l.trim_before {
                return Ok(());
            }
        }
        self.cut(OpKind::Trim, log, before)?;
        if !self.state.read().garbage_prefix().is_empty() {
            self.nudge();
        }
        Ok(())
    }

    /// Appends an encoded metalog payload, rotating the metalog when full;
    /// returns the payload's offset in its file.
    pub(crate) fn write_meta(
        &self,
        meta: &mut MetaSide,
        payload: &[u8],
        sync: bool,
    ) -> Result<Pos> {
        let r = (|| {
            let w = &mut meta.writer;
            if !w.fits(payload.len(), 0) && !w.is_fresh() {
                w.append(Kind::Seal, &[])?;
                w.sync()?;
                let generation = self.take_generation();
                *w = Writer::start(
                    self.opts.fs.as_ref(),
                    &self.dir,
                    Role::Meta,
                    generation,
                    self.epoch,
                    self.opts.meta_shape(),
                    Source::Preallocated,
                )?;
                self.state.write().meta_files.insert(generation, ());
            }
            let at = w.append(Kind::Batch, payload)?;
            if sync {
                w.sync()?;
            } else {
                w.flush()?;
            }
            Ok(Pos {
                generation: w.generation,
                offset: at,
            })
        })();
        meta.since_checkpoint += payload.len() as u64;
        r.map_err(|e| self.poisoned(e))
    }

    pub(crate) fn take_generation(&self) -> u64 {
        let mut g = self.next_generation.lock();
        let n = *g;
        *g += 1;
        n
    }

    /// Where the next data file's blocks come from.
    fn source(&self) -> Source {
        let free = self.state.write().free.pop();
        if free.is_some() {
            self.counters.lock().files_recycled += 1;
        }
        Source::next(&self.dir, free, self.opts.preallocate)
    }

    pub(crate) fn forget_data_reader(&self, generation: u64) {
        self.data_readers.lock().remove(&generation);
    }

    pub(crate) fn forget_meta_reader(&self, generation: u64) {
        self.meta_readers.lock().remove(&generation);
    }

    pub(crate) fn append(&self, log: LogId, records: &[(u64, &[u8])]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut payload = Vec::new();
        let mut entries = Vec::with_capacity(records.len());
        for &(lsn, data) in records {
            if data.len() > MAX_RECORD_BYTES {
                return Err(Error::InvalidArgument(format!(
                    "log store: a record of {} bytes is over the limit of {MAX_RECORD_BYTES}",
                    data.len()
                )));
            }
            let offset = payload.len() as u64;
            let len = ops::encode_put(&mut payload, log.0, lsn, data);
            entries.push(Reverse {
                log: log.0,
                lsn,
                offset,
                len: len as u32,
                kind: OpKind::Put,
            });
            if payload.len() > MAX_BATCH_BYTES {
                return Err(Error::InvalidArgument(format!(
                    "log store: a batch over {MAX_BATCH_BYTES} bytes"
                )));
            }
        }
        {
            let st = self.state.read();
            let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
            if let Some(&(lsn, _)) = records.iter().find(|(lsn, _)| *lsn < l.trim_before) {
                return Err(Error::InvalidArgument(format!(
                    "log store: LSN {lsn} of log {:?} is below its trim point {}",
                    l.name, l.trim_before
                )));
            }
        }
        self.commit(payload, entries, None).map(|_| ())
    }

    pub(crate) fn truncate(&self, log: LogId, from: u64) -> Result<()> {
        if !self.state.read().logs.contains_key(&log.0) {
            return Err(Self::unknown(log));
        }
        self.cut(OpKind::Truncate, log, from)
    }

    /// Commits a truncation or trim of `log` at `lsn`.
    fn cut(&self, kind: OpKind, log: LogId, lsn: u64) -> Result<()> {
        let mut payload = Vec::new();
        let len = ops::encode_cut(&mut payload, kind, log.0, lsn);
        let entry = Reverse {
            log: log.0,
            lsn,
            offset: 0,
            len: len as u32,
            kind,
        };
        self.commit(payload, vec![entry], None).map(|_| ())
    }

    /// Writes GC's copies of records (their put operations, as read), each
    /// only if its condition still holds when its frame is written; returns
    /// how many were.
    pub(crate) fn relocate(
        &self,
        payload: Vec<u8>,
        entries: Vec<Reverse>,
        expect: Vec<Expect>,
    ) -> Result<usize> {
        debug_assert_eq!(entries.len(), expect.len());
        self.commit(payload, entries, Some(expect))
    }

    pub(crate) fn sync(&self) -> Result<()> {
        self.check_writable()?;
        let r = self.data.lock().writer.sync();
        r.and_then(|()| self.meta.lock().writer.sync())
            .map_err(|e| self.poisoned(e))
    }

    /// Queues one caller's operations and returns once they are written
    /// (and synced, if the store syncs): the first waiting caller writes
    /// everything queued as one frame, for all of them.
    fn commit(
        &self,
        payload: Vec<u8>,
        entries: Vec<Reverse>,
        expect: Option<Vec<Expect>>,
    ) -> Result<usize> {
        self.check_writable()?;
        let mut q = self.queue.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.pending.push(Request {
            ticket,
            payload,
            entries,
            expect,
        });
        loop {
            if let Some(r) = q.done.remove(&ticket) {
                return r;
            }
            if q.leading {
                self.committed.wait(&mut q);
                continue;
            }
            q.leading = true;
            let mut take = 0;
            let mut bytes = 0;
            while take < q.pending.len() && (take == 0 || bytes < GROUP_BYTES) {
                bytes += q.pending[take].payload.len();
                take += 1;
            }
            let group: Vec<Request> = q.pending.drain(..take).collect();
            drop(q);
            let r = self.write_group(group);
            q = self.queue.lock();
            q.leading = false;
            match r {
                Ok(written) => {
                    for (t, n) in written {
                        q.done.insert(t, Ok(n));
                    }
                }
                Err((tickets, e)) => {
                    for t in tickets {
                        q.done.insert(t, Err(e.duplicate()));
                    }
                }
            }
            self.committed.notify_all();
        }
    }

    /// Writes a group of requests as one frame; per ticket, how many of its
    /// operations were written.
    #[allow(clippy::type_complexity)]
    fn write_group(
        &self,
        group: Vec<Request>,
    ) -> std::result::Result<Vec<(u64, usize)>, (Vec<u64>, Error)> {
        let tickets: Vec<u64> = group.iter().map(|r| r.ticket).collect();
        let fail = |e: Error| (tickets.clone(), e);
        self.check_writable().map_err(fail)?;
        let mut data = self.data.lock();
        let mut payload = Vec::new();
        let mut entries = Vec::new();
        let mut written = Vec::with_capacity(group.len());
        {
            // Relocations are checked here, where no other write can come
            // between the check and the frame.
            let st = self.state.read();
            // Logs an earlier request of this group writes to: a
            // relocation after it would be applied after it, over it.
            let mut touched = std::collections::HashSet::new();
            let relocating = group.iter().any(|r| r.expect.is_some());
            for r in group {
                let mut n = 0;
                for (i, e) in r.entries.iter().enumerate() {
                    match &r.expect {
                        Some(expect)
                            if touched.contains(&e.log) || !still_there(&st, e, &expect[i]) =>
                        {
                            continue;
                        }
                        None if relocating => {
                            touched.insert(e.log);
                        }
                        _ => {}
                    }
                    let mut e = *e;
                    let bytes = &r.payload[e.offset as usize..e.offset as usize + e.len as usize];
                    e.offset = payload.len() as u64;
                    payload.extend_from_slice(bytes);
                    entries.push(e);
                    n += 1;
                }
                written.push((r.ticket, n));
            }
        }
        if entries.is_empty() {
            return Ok(written);
        }
        // A reverse-index entry takes at most 4 varints.
        let reserve = data.reverse.len() + entries.len() * 4 * 10;
        let r = (|| {
            if !data.writer.fits(payload.len(), reserve) && !data.writer.is_fresh() {
                self.seal(&mut data)?;
            }
            let at = data.writer.append(Kind::Batch, &payload)?;
            if self.opts.sync {
                data.writer.sync()?;
            } else {
                data.writer.flush()?;
            }
            Ok(at)
        })();
        let at = r.map_err(|e| fail(self.poisoned(e)))?;
        let generation = data.writer.generation;
        let mut st = self.state.write();
        for e in &mut entries {
            e.offset += at;
            ops::encode_reverse(&mut data.reverse, e);
            let mut read = |m: &MetaLoc| self.read_group(m);
            st.apply(generation, e, &mut read)
                .map_err(|e| fail(self.poisoned(e)))?;
        }
        st.installed_to = Pos {
            generation,
            offset: at + payload.len() as u64,
        };
        let flush = st.l0_entries >= self.l0_limit();
        drop(st);
        {
            let mut c = self.counters.lock();
            c.commits += 1;
            c.syncs += u64::from(self.opts.sync);
        }
        if flush {
            self.flush_index(&mut data).map_err(fail)?;
        }
        Ok(written)
    }

    /// L0 mappings at most, across logs, before a flush.
    fn l0_limit(&self) -> usize {
        // A mapping in a B-tree of L0 costs about this many bytes.
        const L0_ENTRY_BYTES: u64 = 48;
        (self.opts.index_memory_bytes / L0_ENTRY_BYTES).max(1) as usize
    }

    /// Ends the full active data file with its reverse index and starts the
    /// next.
    fn seal(&self, data: &mut DataSide) -> Result<()> {
        let reverse = std::mem::take(&mut data.reverse);
        let at = data.writer.append(Kind::Seal, &reverse)?;
        data.writer.sync()?;
        let sealed = data.writer.generation;
        {
            let mut meta = self.meta.lock();
            let op = MetaOp::Sealed {
                generation: sealed,
                offset: at,
                len: reverse.len() as u64,
            };
            self.write_meta(&mut meta, &encode_meta(&[op]), false)?;
        }
        let generation = self.take_generation();
        let source = self.source();
        data.writer = Writer::start(
            self.opts.fs.as_ref(),
            &self.dir,
            Role::Data,
            generation,
            self.epoch,
            self.opts.data_shape(),
            source,
        )?;
        let mut st = self.state.write();
        st.files.entry(sealed).or_default().seal = Some((at, reverse.len() as u64));
        st.files.entry(generation).or_default();
        // Nothing of the sealed file is left to apply: a flush now moves
        // the replay point past it.
        st.installed_to = Pos {
            generation,
            offset: data.writer.offset(),
        };
        drop(st);
        self.nudge();
        Ok(())
    }

    pub(crate) fn data_reader(&self, generation: u64) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(f) = self.data_readers.lock().get(&generation) {
            return Ok(f.clone());
        }
        let path = physical::data_path(&self.dir, generation);
        let f = self.opts.fs.open(&path, FileOptions::default())?;
        self.data_readers.lock().insert(generation, f.clone());
        Ok(f)
    }

    /// The entries of the group whose body is at `at`.
    pub(crate) fn read_group(&self, at: &MetaLoc) -> Result<Vec<(u64, Loc)>> {
        let cached = self.meta_readers.lock().get(&at.generation).cloned();
        let path = physical::meta_path(&self.dir, at.generation);
        let f = match cached {
            Some(f) => f,
            None => {
                let f = self.opts.fs.open(&path, FileOptions::default())?;
                self.meta_readers.lock().insert(at.generation, f.clone());
                f
            }
        };
        let body = f.read_at(at.offset, at.len as usize)?;
        let (_, entries) =
            index::decode_group(&body).map_err(|e| Error::corruption(&path, at.offset, e.0))?;
        Ok(entries)
    }

    pub(crate) fn find(&self, log: LogId, lsn: u64) -> Result<Found> {
        let st = self.state.read();
        let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
        if lsn < l.trim_before {
            return Ok(Found::Nothing);
        }
        if let Some(loc) = l.l0.get(&lsn) {
            return Ok(Found::Record(*loc));
        }
        Ok(match l.group_of(lsn) {
            Some(g) => Found::InGroup(g.at),
            None => Found::Nothing,
        })
    }

    /// Where record `lsn` of `log` lies, reading its group if it is in L1.
    pub(crate) fn locate(&self, log: LogId, lsn: u64) -> Result<Option<Loc>> {
        match self.find(log, lsn)? {
            Found::Nothing => Ok(None),
            Found::Record(loc) => Ok(Some(loc)),
            Found::InGroup(at) => match self.read_group(&at) {
                Ok(entries) => Ok(index::find(&entries, lsn)),
                // The group was replaced (and its file released) meanwhile.
                Err(e) => match self.find(log, lsn)? {
                    Found::InGroup(now) if now == at => Err(e),
                    Found::Record(loc) => Ok(Some(loc)),
                    _ => Ok(None),
                },
            },
        }
    }

    pub(crate) fn read(&self, log: LogId, lsn: u64) -> Result<Option<Vec<u8>>> {
        let Some(loc) = self.locate(log, lsn)? else {
            return Ok(None);
        };
        self.fetch(log, lsn, loc)
    }

    /// Reads the put operation at `loc` (its bytes as written).
    pub(crate) fn fetch_raw(&self, loc: Loc) -> Result<Vec<u8>> {
        self.data_reader(loc.generation)
            .and_then(|f| f.read_at(loc.offset, loc.len as usize))
    }

    /// Reads the record at `loc`. If it does not check, the record may
    /// have been trimmed and its file released meanwhile: that is `None`,
    /// damage only if the index still points there.
    fn fetch(&self, log: LogId, lsn: u64, loc: Loc) -> Result<Option<Vec<u8>>> {
        let path = physical::data_path(&self.dir, loc.generation);
        let checked = self.fetch_raw(loc).and_then(|bytes| {
            let mut d = Decoder::new(&bytes);
            match ops::decode_data_op(&mut d) {
                Ok(ops::DataOp::Put {
                    log: l,
                    lsn: n,
                    data,
                }) if l == log.0 && n == lsn => Ok(data.to_vec()),
                Ok(_) => Err(Error::corruption(
                    &path,
                    loc.offset,
                    "the index points at another record",
                )),
                Err(e) => Err(Error::corruption(&path, loc.offset, e.0)),
            }
        });
        match checked {
            Ok(v) => Ok(Some(v)),
            Err(e) => match self.locate(log, lsn) {
                Ok(Some(now)) if now == loc => Err(e),
                Ok(Some(now)) => self.fetch(log, lsn, now),
                _ => Ok(None),
            },
        }
    }

    pub(crate) fn bounds(&self, log: LogId) -> Result<Option<(u64, u64)>> {
        let (trim, last) = {
            let st = self.state.read();
            let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
            // A group's last mapping is never below the trim point: trims
            // drop such groups.
            let last = [
                l.l0.keys().next_back(),
                l.groups.values().next_back().map(|g| &g.last),
            ]
            .into_iter()
            .flatten()
            .max()
            .copied();
            (l.trim_before, last)
        };
        let Some(last) = last else {
            return Ok(None);
        };
        // The first may lie inside a group that starts below the trim point.
        let first = self.run(log, trim)?.first().map(|e| e.0);
        Ok(first.map(|f| (f, last)))
    }

    pub(crate) fn trim_point(&self, log: LogId) -> Result<u64> {
        let st = self.state.read();
        let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
        Ok(l.trim_before)
    }

    /// The next mappings of `log` from `from` on, in LSN order: a group's
    /// worth with L0 laid over it, or L0's up to the next group.
    fn run(&self, log: LogId, from: u64) -> Result<Vec<(u64, Loc)>> {
        let (group, l0) = {
            let st = self.state.read();
            let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
            let from = from.max(l.trim_before);
            match l
                .group_of(from)
                .or_else(|| l.groups.range(from..).next().map(|(_, g)| g))
            {
                Some(g) if g.first <= from => {
                    let l0: Vec<(u64, Loc)> =
                        l.l0.range(from..=g.last).map(|(&k, &v)| (k, v)).collect();
                    (Some((*g, from)), l0)
                }
                next => {
                    let end = next.map_or(u64::MAX, |g| g.first);
                    let l0: Vec<(u64, Loc)> =
                        l.l0.range(from..end)
                            .take(SCAN_RUN)
                            .map(|(&k, &v)| (k, v))
                            .collect();
                    match next {
                        // Nothing before the next group: go on with it.
                        Some(g) if l0.is_empty() => {
                            let l0 =
                                l.l0.range(g.first..=g.last)
                                    .map(|(&k, &v)| (k, v))
                                    .collect();
                            (Some((*g, g.first)), l0)
                        }
                        _ => (None, l0),
                    }
                }
            }
        };
        let Some((g, from)) = group else {
            return Ok(l0);
        };
        let mut merged: std::collections::BTreeMap<u64, Loc> = self
            .read_group(&g.at)?
            .into_iter()
            .filter(|(lsn, _)| *lsn >= from)
            .collect();
        merged.extend(l0);
        Ok(merged.into_iter().collect())
    }

    pub(crate) fn stats(&self) -> LogStats {
        let mut s = self.counters.lock().clone();
        let st = self.state.read();
        s.logs = st.logs.len();
        s.l0_entries = st.l0_entries as u64;
        s.groups = st.logs.values().map(|l| l.groups.len() as u64).sum();
        s.data_files = st.files.len();
        s.meta_files = st.meta_files.len();
        s.free_files = st.free.len();
        s
    }
}

/// Whether a relocation's record is still the one its log maps to.
fn still_there(st: &State, e: &Reverse, expect: &Expect) -> bool {
    let Some(l) = st.logs.get(&e.log) else {
        return false;
    };
    if e.lsn < l.trim_before || l.changes != expect.changes {
        return false;
    }
    match l.l0.get(&e.lsn) {
        Some(loc) => *loc == expect.loc,
        // From a group, which has not changed since GC read it.
        None => true,
    }
}

/// Encodes metalog operations as one payload.
pub(crate) fn encode_meta(ops: &[MetaOp<'_>]) -> Vec<u8> {
    let mut payload = Vec::new();
    for op in ops {
        ops::encode_meta_op(&mut payload, op);
    }
    payload
}

impl Drop for Inner {
    /// A clean close leaves everything durable.
    fn drop(&mut self) {
        if self.poison.lock().is_none() {
            let _ = self.data.lock().writer.sync();
            let _ = self.meta.lock().writer.sync();
        }
    }
}

/// An iterator over a log's records from an LSN on (see
/// [`super::LogStore::scan`]).
pub struct LogScan {
    inner: Arc<Inner>,
    log: LogId,
    next: u64,
    run: std::vec::IntoIter<(u64, Loc)>,
    done: bool,
}

impl LogScan {
    pub(crate) fn new(inner: Arc<Inner>, log: LogId, from: u64) -> Result<LogScan> {
        inner.trim_point(log)?;
        Ok(LogScan {
            inner,
            log,
            next: from,
            run: Vec::new().into_iter(),
            done: false,
        })
    }
}

impl Iterator for LogScan {
    type Item = Result<(u64, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let Some((lsn, loc)) = self.run.next() else {
                match self.inner.run(self.log, self.next) {
                    Ok(run) if run.is_empty() => {
                        self.done = true;
                        return None;
                    }
                    Ok(run) => {
                        self.run = run.into_iter();
                        continue;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            };
            if lsn < self.next {
                continue;
            }
            self.next = match lsn.checked_add(1) {
                Some(n) => n,
                None => {
                    self.done = true;
                    lsn
                }
            };
            match self.inner.fetch(self.log, lsn, loc) {
                Ok(Some(v)) => return Some(Ok((lsn, v))),
                // Trimmed or truncated since the run was taken.
                Ok(None) => continue,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
