//! Batches: the commands a connection pipelined, and the commands of an
//! EXEC, run as one engine write. Each command's writes gather into an
//! overlay that the commands after it read; the key locks it takes stay
//! taken; at the batch's end (or when a command needs a lock another
//! batch holds) everything is written at once and the locks released.
//! Redis answers a pipeline from memory; cleave would otherwise pay a lock
//! and a write (WAL append, sequence, memtable) per command, and 50
//! clients pushing into one list would queue on its lock 16 times as
//! often.
//!
//! A batch is the running thread's: a connection runs its pipeline on one
//! thread without awaiting, so the store's reads and writes find it there
//! without every command carrying it.
//!
//! Deadlock: a batch only tries locks; if one is taken, the command stops
//! (`CmdError::Contended`), the batch is written and its locks released,
//! and the command runs again; if the lock is still taken, the connection
//! awaits its release holding nothing (pipeline.rs). EXEC's batch, under
//! the exclusive lock, never finds one taken.

use std::cell::RefCell;

use parking_lot::lock_api::{RawMutex as _, RawRwLock as _};

use rustc_hash::FxHashMap;

use super::Store;
use crate::error::CmdError;
use crate::keyspace;
use crate::txn::{Overlay, Pending};

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

/// What a batch has written and holds so far.
pub(super) struct Batch {
    /// The store it belongs to (its address).
    store: usize,
    pub(super) overlay: Overlay,
    /// Key-lock stripes held, each once.
    stripes: Vec<usize>,
    /// Whether it holds the commands lock shared.
    shared: bool,
    /// The stripe whose lock stopped the last command.
    contended: Option<usize>,
    /// Stripes held when the running command started: those after are
    /// its own (a multi-key command may take some before it finds one
    /// taken).
    held_before: usize,
    /// What the database answered to reads of keys whose locks the batch
    /// holds: nobody else can change them until it releases the locks.
    /// 16 pipelined SADDs of one member read its metadata and member
    /// once, not 16 times.
    reads: FxHashMap<Vec<u8>, Option<Vec<u8>>>,
}

/// Largest value the read cache keeps, in bytes: a big string is read by
/// the few commands that rewrite it whole.
const MAX_CACHED_VALUE_BYTES: usize = 4 << 10;

impl Batch {
    /// Hands over the locks the batch holds (its cached reads, which they
    /// protected, are dropped): the batch goes on holding none.
    fn take_locks<'a>(&mut self, store: &'a Store) -> Held<'a> {
        self.reads.clear();
        Held {
            store,
            stripes: std::mem::take(&mut self.stripes),
            shared: std::mem::replace(&mut self.shared, false),
        }
    }

    /// Whether the batch holds the lock of the Redis key `key` (an engine
    /// key) belongs to.
    fn holds_owner_of(&self, key: &[u8]) -> bool {
        keyspace::owner(key).is_some_and(|(db, k)| self.stripes.contains(&super::stripe(db, k)))
    }
}

/// What a batch knows of a key before the database is asked.
pub(super) enum Known {
    /// Its value (or absence), written or read by the batch.
    Value(Option<Vec<u8>>),
    /// Merge operands the batch wrote over the stored value.
    Appended(Vec<u8>),
    /// Nothing: the database must be read; `cache` says whether the batch
    /// may keep what it answers.
    Unknown { cache: bool },
}

/// A batch begun on this thread: ended by [`BatchGuard::end`], or, on
/// any other way out (a panic), dropped whole with its locks released.
#[must_use]
pub struct BatchGuard<'a> {
    store: &'a Store,
    ended: bool,
}

impl BatchGuard<'_> {
    /// Writes what the batch holds, as [`Store::commit_batch`], and ends it.
    pub fn end(mut self) -> Result<(), CmdError> {
        // A panic in the write drops the guard unended: the batch is
        // dropped whole and the thread left without one.
        let done = self.store.commit_batch();
        self.ended = true;
        BATCH.with(|b| b.borrow_mut().take());
        done
    }
}

impl Drop for BatchGuard<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.store.abort_batch();
            BATCH.with(|b| b.borrow_mut().take());
        }
    }
}

/// Locks a batch took, released on drop.
struct Held<'a> {
    store: &'a Store,
    stripes: Vec<usize>,
    shared: bool,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for &s in &self.stripes {
            // SAFETY: the batch locked each stripe it lists, once, and
            // handed the list over.
            unsafe { self.store.unlock_stripe(s) };
        }
        if self.shared {
            // SAFETY: the batch took the commands lock shared, once.
            unsafe { self.store.commands.unlock_shared() };
        }
    }
}

/// A batch set aside while a command that needs the database alone runs
/// (FLUSHDB, EXEC); put back on drop.
pub struct Suspended(Option<Batch>);

impl Drop for Suspended {
    fn drop(&mut self) {
        if let Some(batch) = self.0.take() {
            BATCH.with(|b| *b.borrow_mut() = Some(batch));
        }
    }
}

impl Store {
    /// Runs `f` on this thread's batch, if it has one for this store.
    pub(super) fn with_batch<R>(&self, f: impl FnOnce(&mut Batch) -> R) -> Option<R> {
        let id = self as *const Store as usize;
        BATCH.with(|b| b.borrow_mut().as_mut().filter(|b| b.store == id).map(f))
    }

    /// Begins a batch on this thread: until it ends, writes gather in it
    /// and reads see them, and the key locks commands take are kept. A
    /// command that finds a lock taken stops (`Contended`), and
    /// [`Store::contended_stripe`] says which: a connection awaits it
    /// rather than hold one of the few threads that serve all of them.
    pub fn begin_batch(&self) -> BatchGuard<'_> {
        BATCH.with(|b| {
            let mut b = b.borrow_mut();
            assert!(b.is_none(), "one batch per thread at a time");
            *b = Some(Batch {
                store: self as *const Store as usize,
                overlay: Overlay::default(),
                stripes: Vec::new(),
                shared: false,
                contended: None,
                held_before: 0,
                reads: FxHashMap::default(),
            });
        });
        BatchGuard {
            store: self,
            ended: false,
        }
    }

    /// A command of the batch starts: the locks it takes from now on are
    /// its own.
    pub fn batch_command_starts(&self) {
        self.with_batch(|b| b.held_before = b.stripes.len());
    }

    /// The stripe whose lock stopped the last command (`Contended`), and
    /// whether the batch held locks before that command: if not, writing
    /// the batch would not free what the command waits for, and the
    /// caller must wait for the stripe.
    pub fn contended_stripe(&self) -> Option<(usize, bool)> {
        self.with_batch(|b| b.contended.take().map(|s| (s, b.held_before > 0)))
            .flatten()
    }

    /// Whether this thread runs a batch of this store's.
    pub fn in_batch(&self) -> bool {
        self.with_batch(|_| ()).is_some()
    }

    /// Bytes the batch has gathered so far, 0 outside one.
    pub fn batch_bytes(&self) -> usize {
        self.with_batch(|b| b.overlay.bytes()).unwrap_or(0)
    }

    /// Writes the batch's writes in one engine write, then releases its
    /// locks; the batch goes on, empty. If the write fails, nothing of the
    /// batch is written, and the error says why. Outside a batch, nothing
    /// to do.
    pub fn commit_batch(&self) -> Result<(), CmdError> {
        // The locks are released on the way out, a panic in the write
        // included; only then may another command read-modify-write these
        // keys.
        let Some((overlay, _held)) =
            self.with_batch(|b| (std::mem::take(&mut b.overlay), b.take_locks(self)))
        else {
            return Ok(());
        };
        let (batch, ended) = overlay.into_parts();
        let written = if batch.is_empty() {
            Ok(())
        } else {
            self.write_now(batch)
        };
        if written.is_ok() {
            for (db, key, version) in ended {
                self.subkeys.ended(db, &key, version);
            }
        }
        written
    }

    /// Drops what the batch gathered and releases its locks.
    fn abort_batch(&self) {
        drop(self.with_batch(|b| {
            b.overlay = Overlay::default();
            b.take_locks(self)
        }));
    }

    /// What this thread's batch knows of `key` now: `None` outside a
    /// batch. Reads at a snapshot are not cached: one taken before a lock
    /// may be older than what the lock protects.
    pub(super) fn batch_knows(&self, key: &[u8], snapshot: bool) -> Option<Known> {
        self.with_batch(|b| match b.overlay.get(key) {
            Some(Pending::Appended(ops)) => Known::Appended(ops.clone()),
            Some(p) => Known::Value(p.resolve(None, super::now_ms())),
            None => match b.reads.get(key) {
                Some(v) => Known::Value(v.clone()),
                None => Known::Unknown {
                    cache: !snapshot && b.holds_owner_of(key),
                },
            },
        })
    }

    /// Keeps what the database answered for `key`, which the batch holds
    /// the lock of, until the batch releases it. Not a value with an
    /// expiry, which may pass meanwhile, nor a big one.
    pub(super) fn batch_read(&self, key: &[u8], value: &Option<Vec<u8>>) {
        let expires =
            |v: &[u8]| key.first() == Some(&keyspace::META) && keyspace::meta_expire(v) != Some(0);
        if value
            .as_deref()
            .is_some_and(|v| v.len() > MAX_CACHED_VALUE_BYTES || expires(v))
        {
            return;
        }
        self.with_batch(|b| b.reads.insert(key.to_vec(), value.clone()));
    }

    /// Sets this thread's batch aside: the caller is about to hold the
    /// database alone, and the batch must hold nothing (it was committed).
    pub fn suspend_batch(&self) -> Suspended {
        let batch = BATCH.with(|b| b.borrow_mut().take());
        if let Some(b) = &batch {
            assert!(
                b.stripes.is_empty() && !b.shared && b.overlay.is_empty() && b.reads.is_empty(),
                "a batch holding locks would deadlock the exclusive lock"
            );
        }
        Suspended(batch)
    }

    /// The commands lock, shared, for the batch until its commit: `false`
    /// outside a batch.
    pub(super) fn batch_shared(&self) -> bool {
        self.with_batch(|b| {
            if !b.shared {
                self.commands.lock_shared();
                b.shared = true;
            }
        })
        .is_some()
    }

    /// Takes `stripes` (sorted, each once) for the batch until its commit:
    /// `None` outside a batch. Only tries: on a taken one, `Contended`,
    /// keeping what it took.
    pub(super) fn batch_lock(&self, stripes: &[usize]) -> Option<Result<(), CmdError>> {
        self.with_batch(|b| {
            for &s in stripes {
                if b.stripes.contains(&s) {
                    continue;
                }
                if !self.locks[s].try_lock() {
                    b.contended = Some(s);
                    return Err(CmdError::Contended);
                }
                b.stripes.push(s);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use cleave::{Options, ReadOptions, WriteBatch};

    use super::*;
    use crate::store::FsyncMode;

    fn store() -> Store {
        let opts = Options {
            fs: Arc::new(cleave::vfs::MemFs::new()),
            ..Options::default()
        };
        Store::open(Path::new("/d"), opts, FsyncMode::No).unwrap()
    }

    fn put(store: &Store, key: &[u8]) {
        let mut b = WriteBatch::new();
        b.put(key, b"v");
        store.write(b).unwrap();
    }

    fn stored(store: &Store, key: &[u8]) -> bool {
        store.db().get(&ReadOptions::new(), key).unwrap().is_some()
    }

    #[test]
    fn a_batch_is_read_back_and_written_at_its_commit() {
        let store = store();
        let batch = store.begin_batch();
        put(&store, b"a");
        assert!(!stored(&store, b"a"));
        assert!(store.get(&ReadOptions::new(), b"a").unwrap().is_some());
        batch.end().unwrap();
        assert!(stored(&store, b"a"));
        assert!(!store.in_batch());
    }

    /// A batch dropped unended (a command panicked) is dropped whole: its
    /// locks are free and later writes reach the database.
    #[test]
    fn a_batch_dropped_unended_is_dropped_whole() {
        let store = store();
        {
            let _batch = store.begin_batch();
            let _l = store.lock(0, &[b"k"]).unwrap();
            put(&store, b"in-the-batch");
        }
        put(&store, b"after");
        assert!(stored(&store, b"after"));
        assert!(!stored(&store, b"in-the-batch"));
        // The stripe was released: another thread can take it.
        std::thread::scope(|s| {
            s.spawn(|| drop(store.lock(0, &[b"k"]).unwrap()));
        });
    }

    /// A batch keeps its locks to its commit; one that holds a lock and
    /// finds another taken is told so, rather than waiting (two batches
    /// each waiting on the other's lock would never end).
    #[test]
    fn a_batch_holding_locks_does_not_wait_for_more() {
        let store = store();
        let batch = store.begin_batch();
        drop(store.lock(0, &[b"mine"]).unwrap());
        std::thread::scope(|s| {
            s.spawn(|| {
                let other = store.begin_batch();
                drop(store.lock(0, &[b"theirs"]).unwrap());
                assert!(matches!(
                    store.lock(0, &[b"mine"]),
                    Err(CmdError::Contended)
                ));
                other.end().unwrap();
            })
            .join()
            .unwrap();
        });
        batch.end().unwrap();
        let _both = store.lock(0, &[b"mine", b"theirs"]).unwrap();
    }

    /// A command taking several keys that finds one taken, in a batch
    /// that held nothing before it, is told so: writing the batch would
    /// not free the lock (the connection must wait for it, not retry).
    #[test]
    fn a_command_is_told_whether_its_batch_held_locks_before_it() {
        let store = store();
        let theirs = store.lock(0, &[b"theirs"]).unwrap();
        // A key whose stripe comes first: the command takes it, then finds
        // the other taken.
        let stripe = super::super::stripe;
        let mine = (0..)
            .map(|i| format!("mine{i}").into_bytes())
            .find(|k| stripe(0, k) < stripe(0, b"theirs"))
            .unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                let batch = store.begin_batch();
                store.batch_command_starts();
                assert!(matches!(
                    store.lock(0, &[&mine, b"theirs"]),
                    Err(CmdError::Contended)
                ));
                assert_eq!(
                    store.contended_stripe(),
                    Some((stripe(0, b"theirs"), false))
                );
                store.batch_command_starts();
                drop(store.lock(0, &[&mine]).unwrap());
                store.batch_command_starts();
                assert!(store.lock(0, &[b"theirs"]).is_err());
                assert!(matches!(store.contended_stripe(), Some((_, true))));
                batch.end().unwrap();
            })
            .join()
            .unwrap();
        });
        drop(theirs);
    }
}
