//! Reads of a key's deltas on threads of their own, so that a get waits
//! for the delta store and for the LSM-tree and its value at the same time
//! instead of one after the other (KDSep §III-B and §III-H: one thread
//! reads the value, another the deltas).
//!
//! Only reads that must go to the device are handed over: a key whose
//! blocks are all cached costs less than the handover. A reader is claimed
//! before a job is sent, so a get never queues behind another's read; with
//! none idle it reads the deltas itself, as it would without readers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::{DeltaStore, KeyRead, Record};
use crate::error::Result;
use crate::vfs::{add_thread_reads, thread_reads};

/// Reader threads: enough for two gets at once to overlap their delta
/// reads; more gets than that read their deltas themselves.
const READER_THREADS: usize = 2;

/// What a reader sends back: the records, and the device reads it made
/// for them, which count as the get's own.
type Reply = (Result<Vec<Record>>, u64);

struct Job {
    read: KeyRead,
    key: Vec<u8>,
    reply: SyncSender<Reply>,
}

struct Workers {
    jobs: Sender<Job>,
    threads: Vec<JoinHandle<()>>,
}

/// The delta store's reader threads, started at the first read that
/// needs them.
pub(crate) struct DeltaReader {
    store: Arc<DeltaStore>,
    /// Readers waiting for a job, not yet claimed.
    idle: Arc<AtomicUsize>,
    /// Started at the first read that needs them; `None` if no thread
    /// could be started, so that gets stop trying.
    workers: OnceLock<Option<Workers>>,
}

/// A read handed to a reader. It is always waited for, if need be when
/// dropped: a get that fails in the tree must not return while its read
/// goes on, since the view it drops may be what keeps the delta file, and
/// the reads made for it are the get's.
pub(crate) struct Pending {
    reply: Option<Receiver<Reply>>,
}

impl Pending {
    /// The records, the reads made for them counted as the calling
    /// thread's; `None` if the reader ended without answering (it
    /// panicked), so that the caller reads them itself.
    pub(crate) fn wait(mut self) -> Option<Result<Vec<Record>>> {
        let (records, reads) = self.reply.take()?.recv().ok()?;
        add_thread_reads(reads);
        Some(records)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(Ok((_, reads))) = self.reply.take().map(|r| r.recv()) {
            add_thread_reads(reads);
        }
    }
}

impl DeltaReader {
    pub(crate) fn new(store: Arc<DeltaStore>) -> DeltaReader {
        DeltaReader {
            store,
            idle: Arc::new(AtomicUsize::new(0)),
            workers: OnceLock::new(),
        }
    }

    /// Hands `read` of `key` to an idle reader, or gives it back when none
    /// is idle (or none could be started).
    pub(crate) fn start(&self, read: KeyRead, key: &[u8]) -> std::result::Result<Pending, KeyRead> {
        let Some(w) = self.workers.get_or_init(|| self.spawn()) else {
            return Err(read);
        };
        let claimed = self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if claimed.is_err() {
            return Err(read);
        }
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            read,
            key: key.to_vec(),
            reply,
        };
        match w.jobs.send(job) {
            Ok(()) => Ok(Pending {
                reply: Some(answer),
            }),
            Err(mpsc::SendError(job)) => {
                self.idle.fetch_add(1, Ordering::AcqRel);
                Err(job.read)
            }
        }
    }

    fn spawn(&self) -> Option<Workers> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut threads = Vec::with_capacity(READER_THREADS);
        for i in 0..READER_THREADS {
            let (store, queue, idle) = (self.store.clone(), queue.clone(), self.idle.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("cleave-delta-read-{i}"))
                .spawn(move || serve(&store, &queue, &idle));
            match spawned {
                Ok(handle) => {
                    threads.push(handle);
                    self.idle.fetch_add(1, Ordering::AcqRel);
                }
                Err(e) => log::warn!("no delta reader thread: {e}"),
            }
        }
        (!threads.is_empty()).then_some(Workers { jobs, threads })
    }
}

fn serve(store: &DeltaStore, queue: &Mutex<Receiver<Job>>, idle: &AtomicUsize) {
    loop {
        // The lock is held while waiting, so one reader waits on the queue
        // and the other on the lock.
        let Ok(job) = queue.lock().recv() else {
            return;
        };
        let before = thread_reads();
        let records = store.finish_read(job.read, &job.key);
        // A get that stopped waiting dropped its receiver: nothing to do.
        let _ = job.reply.send((records, thread_reads() - before));
        idle.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for DeltaReader {
    fn drop(&mut self) {
        if let Some(Some(w)) = self.workers.take() {
            // Closing the queue ends every reader once it is idle.
            drop(w.jobs);
            for t in w.threads {
                let _ = t.join();
            }
        }
    }
}
