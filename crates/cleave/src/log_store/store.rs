//! The open store: namespace, index, the two active files and the group
//! commit that writes appends from every thread as one frame.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use super::frame::Kind;
use super::ops::{self, MetaOp, OpKind, Reverse, Role};
use super::physical::{self, Source, Writer};
use super::{LogId, LogOptions, LogStats, MAX_BATCH_BYTES, MAX_LOG_NAME_BYTES, MAX_RECORD_BYTES};
use crate::base::coding::Decoder;
use crate::error::{Error, Result};
use crate::vfs::{FileLock, FileOptions, RandomAccessFile};

/// A group commit takes queued requests up to this many bytes.
const GROUP_BYTES: usize = 8 << 20;
/// A scan fetches index entries in runs of this many.
const SCAN_RUN: usize = 256;

/// Where a record lies: the put operation's bytes in a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) generation: u64,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

#[derive(Debug)]
pub(crate) struct Log {
    pub(crate) name: String,
    pub(crate) trim_before: u64,
    /// The trim point the metalog holds: trims live in the datalog, and
    /// reach the metalog before a data file they emptied is released.
    pub(crate) trim_recorded: u64,
    pub(crate) index: BTreeMap<u64, Loc>,
}

impl Log {
    pub(crate) fn new(name: String) -> Log {
        Log {
            name,
            trim_before: 0,
            trim_recorded: 0,
            index: BTreeMap::new(),
        }
    }
}

/// What the store knows of a data file, to tell when all of it is
/// garbage.
#[derive(Debug, Default)]
pub(crate) struct DataFile {
    /// The highest LSN each log has in the file (truncations included).
    pub(crate) logs: HashMap<u32, u64>,
    pub(crate) sealed: bool,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) logs: HashMap<u32, Log>,
    pub(crate) names: BTreeMap<String, u32>,
    pub(crate) next_log: u32,
    /// Data files by generation, oldest first; the last is active.
    pub(crate) files: BTreeMap<u64, DataFile>,
    pub(crate) meta_files: usize,
    pub(crate) free: Vec<u64>,
    pub(crate) record_bytes: u64,
    pub(crate) records: u64,
}

impl State {
    /// Applies a datalog operation of data file `generation`, as written
    /// or replayed.
    pub(crate) fn apply(&mut self, generation: u64, r: &Reverse) {
        match r.kind {
            OpKind::Put => {
                let loc = Loc {
                    generation,
                    offset: r.offset,
                    len: r.len,
                };
                self.put(r.log, r.lsn, loc);
            }
            OpKind::Truncate => self.truncate(generation, r.log, r.lsn),
            OpKind::Trim => {
                self.trim(r.log, r.lsn);
                self.note(generation, r.log, r.lsn);
            }
        }
    }

    /// Applies a put, as written or replayed: ignored for a deleted log or
    /// below its trim point.
    pub(crate) fn put(&mut self, log: u32, lsn: u64, loc: Loc) {
        let Some(l) = self.logs.get_mut(&log) else {
            return;
        };
        if lsn < l.trim_before {
            return;
        }
        let payload = u64::from(loc.len);
        match l.index.insert(lsn, loc) {
            Some(old) => self.record_bytes -= u64::from(old.len),
            None => self.records += 1,
        }
        self.record_bytes += payload;
        self.note(loc.generation, log, lsn);
    }

    pub(crate) fn truncate(&mut self, generation: u64, log: u32, from: u64) {
        let Some(l) = self.logs.get_mut(&log) else {
            return;
        };
        let gone = l.index.split_off(&from);
        self.records -= gone.len() as u64;
        self.record_bytes -= gone.values().map(|l| u64::from(l.len)).sum::<u64>();
        self.note(generation, log, from);
    }

    fn note(&mut self, generation: u64, log: u32, lsn: u64) {
        let f = self.files.entry(generation).or_default();
        let max = f.logs.entry(log).or_insert(lsn);
        *max = (*max).max(lsn);
    }

    pub(crate) fn trim(&mut self, log: u32, before: u64) {
        let Some(l) = self.logs.get_mut(&log) else {
            return;
        };
        if before <= l.trim_before {
            return;
        }
        l.trim_before = before;
        let keep = l.index.split_off(&before);
        let gone = std::mem::replace(&mut l.index, keep);
        self.records -= gone.len() as u64;
        self.record_bytes -= gone.values().map(|l| u64::from(l.len)).sum::<u64>();
    }

    pub(crate) fn delete(&mut self, log: u32) {
        if let Some(l) = self.logs.remove(&log) {
            self.names.remove(&l.name);
            self.records -= l.index.len() as u64;
            self.record_bytes -= l.index.values().map(|l| u64::from(l.len)).sum::<u64>();
        }
    }

    /// The oldest data files whose records are all trimmed or deleted, in
    /// order: released first to last, so that a truncation is never
    /// released before the records it dropped.
    fn garbage_prefix(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for (&generation, f) in &self.files {
            let dead = f.sealed
                && f.logs.iter().all(|(log, &max)| match self.logs.get(log) {
                    None => true,
                    Some(l) => max < l.trim_before,
                });
            if !dead {
                break;
            }
            out.push(generation);
        }
        out
    }
}

pub(crate) struct DataSide {
    pub(crate) writer: Writer,
    /// The active file's reverse index so far.
    pub(crate) reverse: Vec<u8>,
}

/// One caller's operations, encoded by the caller.
struct Request {
    ticket: u64,
    payload: Vec<u8>,
    /// Per operation: log, LSN, offset in `payload`, length (0 for a
    /// truncation).
    entries: Vec<Reverse>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Request>,
    leading: bool,
    next_ticket: u64,
    done: HashMap<u64, Result<()>>,
}

pub(crate) struct Inner {
    pub(crate) dir: PathBuf,
    pub(crate) opts: LogOptions,
    pub(crate) _lock: Box<dyn FileLock>,
    pub(crate) state: RwLock<State>,
    pub(crate) data: Mutex<DataSide>,
    pub(crate) meta: Mutex<Writer>,
    pub(crate) epoch: u64,
    pub(crate) next_generation: Mutex<u64>,
    queue: Mutex<Queue>,
    committed: Condvar,
    readers: Mutex<HashMap<u64, Arc<dyn RandomAccessFile>>>,
    poison: Mutex<Option<String>>,
    counters: Mutex<LogStats>,
}

impl Inner {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dir: PathBuf,
        opts: LogOptions,
        lock: Box<dyn FileLock>,
        state: State,
        data: DataSide,
        meta: Writer,
        epoch: u64,
        next_generation: u64,
    ) -> Inner {
        Inner {
            dir,
            opts,
            _lock: lock,
            state: RwLock::new(state),
            data: Mutex::new(data),
            meta: Mutex::new(meta),
            epoch,
            next_generation: Mutex::new(next_generation),
            queue: Mutex::new(Queue::default()),
            committed: Condvar::new(),
            readers: Mutex::new(HashMap::new()),
            poison: Mutex::new(None),
            counters: Mutex::new(LogStats::default()),
        }
    }

    fn check_writable(&self) -> Result<()> {
        match &*self.poison.lock() {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// A write failed: the files' state is no longer known, so writes stop
    /// until the store is reopened (reads go on).
    fn poisoned(&self, e: Error) -> Error {
        let mut p = self.poison.lock();
        if p.is_none() {
            *p = Some(e.to_string());
        }
        e
    }

    fn unknown(log: LogId) -> Error {
        Error::InvalidArgument(format!("log store: no log with id {}", log.0))
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
            st.next_log
        };
        self.write_meta(
            &mut meta,
            &[MetaOp::Create {
                log: id,
                name: name.as_bytes(),
            }],
            true,
        )?;
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
        self.write_meta(&mut meta, &[MetaOp::Delete { log: log.0 }], true)?;
        self.state.write().delete(log.0);
        self.release(&mut meta)
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
        let mut meta = self.meta.lock();
        self.release(&mut meta)
    }

    /// Appends `ops` to the metalog, rotating it when full.
    fn write_meta(&self, meta: &mut Writer, ops: &[MetaOp<'_>], sync: bool) -> Result<()> {
        let mut payload = Vec::new();
        for op in ops {
            ops::encode_meta_op(&mut payload, op);
        }
        let r = (|| {
            if !meta.fits(payload.len(), 0) && !meta.is_fresh() {
                meta.append(Kind::Seal, &[])?;
                meta.sync()?;
                let generation = self.take_generation();
                let source = self.source();
                *meta = Writer::start(
                    self.opts.fs.as_ref(),
                    &self.dir,
                    Role::Meta,
                    generation,
                    self.epoch,
                    self.opts.meta_shape(),
                    source,
                )?;
                self.state.write().meta_files += 1;
            }
            meta.append(Kind::Batch, &payload)?;
            if sync {
                meta.sync()?;
            } else {
                meta.flush()?;
            }
            Ok(())
        })();
        r.map_err(|e| self.poisoned(e))
    }

    pub(crate) fn take_generation(&self) -> u64 {
        let mut g = self.next_generation.lock();
        let n = *g;
        *g += 1;
        n
    }

    /// Where the next physical log's blocks come from.
    fn source(&self) -> Source {
        let free = self.state.write().free.pop();
        match free {
            Some(g) => {
                self.counters.lock().files_recycled += 1;
                Source::Recycled(physical::free_path(&self.dir, g))
            }
            None if self.opts.preallocate => Source::Preallocated,
            None => Source::Growing,
        }
    }

    /// Releases the oldest data files that hold nothing live. The trims
    /// and deletions that made them garbage are made durable in the
    /// metalog first: they must not be undone once their records are gone,
    /// and a trim in a released file is gone with it.
    fn release(&self, meta: &mut Writer) -> Result<()> {
        let (dead, trims) = {
            let st = self.state.read();
            let dead = st.garbage_prefix();
            let trims: Vec<(u32, u64)> = st
                .logs
                .iter()
                .filter(|(_, l)| l.trim_before > l.trim_recorded)
                .map(|(&id, l)| (id, l.trim_before))
                .collect();
            (dead, trims)
        };
        if dead.is_empty() {
            return Ok(());
        }
        let ops: Vec<MetaOp<'_>> = trims
            .iter()
            .map(|&(log, before)| MetaOp::Trim { log, before })
            .collect();
        if !ops.is_empty() {
            self.write_meta(meta, &ops, false)?;
        }
        let fs = self.opts.fs.as_ref();
        let r = (|| {
            meta.sync()?;
            {
                let mut st = self.state.write();
                for &(log, before) in &trims {
                    if let Some(l) = st.logs.get_mut(&log) {
                        l.trim_recorded = l.trim_recorded.max(before);
                    }
                }
            }
            for &generation in &dead {
                let path = physical::data_path(&self.dir, generation);
                self.readers.lock().remove(&generation);
                let keep = self.state.read().free.len() < self.opts.free_files;
                if keep {
                    // Named by the newest generation it held, so that a
                    // later generation never meets its old frames.
                    fs.rename(&path, &physical::free_path(&self.dir, generation))?;
                } else {
                    fs.remove(&path)?;
                }
                let mut st = self.state.write();
                st.files.remove(&generation);
                if keep {
                    st.free.push(generation);
                }
                drop(st);
                self.counters.lock().files_released += 1;
            }
            fs.sync_dir(&self.dir)
        })();
        r.map_err(|e| self.poisoned(e))
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
        self.commit(payload, entries)
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
        self.commit(payload, vec![entry])
    }

    pub(crate) fn sync(&self) -> Result<()> {
        self.check_writable()?;
        let r = self.data.lock().writer.sync();
        r.and_then(|()| self.meta.lock().sync())
            .map_err(|e| self.poisoned(e))
    }

    /// Queues one caller's operations and returns once they are written
    /// (and synced, if the store syncs): the first waiting caller writes
    /// everything queued as one frame, for all of them.
    fn commit(&self, payload: Vec<u8>, entries: Vec<Reverse>) -> Result<()> {
        self.check_writable()?;
        let mut q = self.queue.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.pending.push(Request {
            ticket,
            payload,
            entries,
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
            let tickets: Vec<u64> = group.iter().map(|r| r.ticket).collect();
            let r = self.write_group(group);
            q = self.queue.lock();
            q.leading = false;
            for t in tickets {
                let answer = match &r {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                };
                q.done.insert(t, answer);
            }
            self.committed.notify_all();
        }
    }

    fn write_group(&self, group: Vec<Request>) -> Result<()> {
        self.check_writable()?;
        let mut data = self.data.lock();
        let mut payload = Vec::new();
        let mut entries = Vec::new();
        for r in group {
            let base = payload.len() as u64;
            payload.extend_from_slice(&r.payload);
            entries.extend(r.entries.into_iter().map(|mut e| {
                e.offset += base;
                e
            }));
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
        let at = r.map_err(|e| self.poisoned(e))?;
        let generation = data.writer.generation;
        let mut st = self.state.write();
        for e in &mut entries {
            e.offset += at;
            ops::encode_reverse(&mut data.reverse, e);
            st.apply(generation, e);
        }
        drop(st);
        let mut c = self.counters.lock();
        c.commits += 1;
        c.syncs += u64::from(self.opts.sync);
        Ok(())
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
            self.write_meta(
                &mut meta,
                &[MetaOp::Sealed {
                    generation: sealed,
                    offset: at,
                    len: reverse.len() as u64,
                }],
                false,
            )?;
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
        st.files.entry(sealed).or_default().sealed = true;
        st.files.entry(generation).or_default();
        Ok(())
    }

    fn reader(&self, generation: u64) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(f) = self.readers.lock().get(&generation) {
            return Ok(f.clone());
        }
        let path = physical::data_path(&self.dir, generation);
        let f = self.opts.fs.open(&path, FileOptions::default())?;
        self.readers.lock().insert(generation, f.clone());
        Ok(f)
    }

    fn locate(&self, log: LogId, lsn: u64) -> Result<Option<Loc>> {
        let st = self.state.read();
        let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
        Ok(l.index.get(&lsn).copied())
    }

    pub(crate) fn read(&self, log: LogId, lsn: u64) -> Result<Option<Vec<u8>>> {
        let Some(loc) = self.locate(log, lsn)? else {
            return Ok(None);
        };
        self.fetch(log, lsn, loc)
    }

    /// Reads the record at `loc`. If it does not check, the record may
    /// have been trimmed and its file released meanwhile: that is `None`,
    /// damage only if the index still points there.
    fn fetch(&self, log: LogId, lsn: u64, loc: Loc) -> Result<Option<Vec<u8>>> {
        let path = physical::data_path(&self.dir, loc.generation);
        let damaged = |why: &str| Error::corruption(&path, loc.offset, why.to_string());
        let got = self
            .reader(loc.generation)
            .and_then(|f| f.read_at(loc.offset, loc.len as usize));
        let bytes = match got {
            Ok(b) => b,
            Err(e) => {
                return match self.locate(log, lsn) {
                    Ok(Some(now)) if now == loc => Err(e),
                    _ => Ok(None),
                }
            }
        };
        let mut d = Decoder::new(&bytes);
        let checked = match ops::decode_data_op(&mut d) {
            Ok(ops::DataOp::Put {
                log: l,
                lsn: n,
                data,
            }) if l == log.0 && n == lsn => Ok(data.to_vec()),
            Ok(_) => Err(damaged("the index points at another record")),
            Err(e) => Err(damaged(e.0)),
        };
        match checked {
            Ok(v) => Ok(Some(v)),
            Err(e) => match self.locate(log, lsn) {
                Ok(Some(now)) if now == loc => Err(e),
                _ => Ok(None),
            },
        }
    }

    pub(crate) fn bounds(&self, log: LogId) -> Result<Option<(u64, u64)>> {
        let st = self.state.read();
        let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
        Ok(l.index
            .first_key_value()
            .zip(l.index.last_key_value())
            .map(|((a, _), (b, _))| (*a, *b)))
    }

    pub(crate) fn trim_point(&self, log: LogId) -> Result<u64> {
        let st = self.state.read();
        let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
        Ok(l.trim_before)
    }

    /// Up to `SCAN_RUN` index entries of `log` from `from` on.
    fn run(&self, log: LogId, from: u64) -> Result<Vec<(u64, Loc)>> {
        let st = self.state.read();
        let l = st.logs.get(&log.0).ok_or_else(|| Self::unknown(log))?;
        Ok(l.index
            .range(from..)
            .take(SCAN_RUN)
            .map(|(&k, &v)| (k, v))
            .collect())
    }

    pub(crate) fn stats(&self) -> LogStats {
        let mut s = self.counters.lock().clone();
        let st = self.state.read();
        s.logs = st.logs.len();
        s.records = st.records;
        s.record_bytes = st.record_bytes;
        s.data_files = st.files.len();
        s.meta_files = st.meta_files;
        s.free_files = st.free.len();
        s
    }
}

impl Drop for Inner {
    /// A clean close leaves everything durable.
    fn drop(&mut self) {
        if self.poison.lock().is_none() {
            let _ = self.data.lock().writer.sync();
            let _ = self.meta.lock().sync();
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
