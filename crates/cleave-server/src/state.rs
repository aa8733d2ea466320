//! What the connections share: the store, the settings CONFIG SET may
//! change, counters for INFO, the connected clients, SCAN's cursors.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use crate::store::Store;

/// Settings CONFIG SET changes while the server runs.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most clients connected at once (`maxclients`).
    pub max_clients: usize,
    /// Longest bulk string a request may hold (`proto-max-bulk-len`).
    pub proto_max_bulk_len: u64,
    /// Most bytes of requests buffered for one client before it is
    /// disconnected (`client-query-buffer-limit`).
    pub query_buffer_limit: usize,
}

/// Settings fixed at start, as CONFIG GET reports them.
#[derive(Debug, Clone)]
pub struct Fixed {
    pub bind: String,
    pub port: u16,
    pub dir: String,
    /// Engine options, name and value, as CONFIG GET lists them.
    pub engine: Vec<(&'static str, String)>,
}

#[derive(Default)]
pub struct Counters {
    pub connections: AtomicU64,
    pub rejected: AtomicU64,
    pub commands: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub input_bytes: AtomicU64,
    pub output_bytes: AtomicU64,
    pub protocol_errors: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a keyspace lookup, as Redis's `keyspace_hits`/`misses`.
    pub fn lookup(&self, found: bool) {
        Self::add(if found { &self.hits } else { &self.misses }, 1);
    }
}

/// A connection as CLIENT LIST shows it.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    pub addr: String,
    pub name: Vec<u8>,
    pub connected: Instant,
    pub db: u8,
}

pub struct Shared {
    pub store: Store,
    /// Set once, at start, in cluster mode.
    pub cluster: OnceLock<Arc<crate::cluster::Cluster>>,
    pub limits: RwLock<Limits>,
    pub fixed: Fixed,
    pub stats: Counters,
    pub clients: Mutex<BTreeMap<u64, ClientInfo>>,
    next_client_id: AtomicU64,
    pub cursors: Mutex<Cursors>,
    pub started: Instant,
    pub started_at: SystemTime,
    /// Set by SHUTDOWN or a signal; the listener and connections stop.
    shutting_down: AtomicBool,
    shutdown: watch::Sender<bool>,
    /// Bumped by every push into a list: wakes the clients a blocking pop
    /// (BLPOP, BRPOP, BLMOVE) holds, which then try again.
    pushes: watch::Sender<u64>,
    /// Pub/Sub's channels and subscribers.
    pub pubsub: crate::pubsub::PubSub,
    /// WATCHed keys and the clients whose EXEC a change to them aborts.
    watches: Mutex<Watches>,
    /// Keys watched, by all clients: 0 lets writes skip the registry.
    watched_keys: AtomicUsize,
}

/// The keys clients WATCH, and which clients saw one of theirs change.
#[derive(Default)]
struct Watches {
    keys: HashMap<(u8, Vec<u8>), HashSet<u64>>,
    touched: HashSet<u64>,
}

impl Shared {
    pub fn new(store: Store, limits: Limits, fixed: Fixed) -> Shared {
        Shared {
            store,
            cluster: OnceLock::new(),
            limits: RwLock::new(limits),
            fixed,
            stats: Counters::default(),
            clients: Mutex::new(BTreeMap::new()),
            next_client_id: AtomicU64::new(1),
            cursors: Mutex::new(Cursors::new()),
            started: Instant::now(),
            started_at: SystemTime::now(),
            shutting_down: AtomicBool::new(false),
            shutdown: watch::Sender::new(false),
            pushes: watch::Sender::new(0),
            pubsub: crate::pubsub::PubSub::default(),
            watches: Mutex::new(Watches::default()),
            watched_keys: AtomicUsize::new(0),
        }
    }

    /// Registers a connection from `addr`; `None` if `maxclients` are
    /// connected already.
    pub fn connect(&self, addr: String) -> Option<Client> {
        let max = self.limits.read().max_clients;
        let mut clients = self.clients.lock();
        if clients.len() >= max {
            Counters::add(&self.stats.rejected, 1);
            return None;
        }
        let id = self.next_client_id.fetch_add(1, Ordering::Relaxed);
        clients.insert(
            id,
            ClientInfo {
                addr: addr.clone(),
                name: Vec::new(),
                connected: Instant::now(),
                db: 0,
            },
        );
        Counters::add(&self.stats.connections, 1);
        Some(Client {
            id,
            addr,
            name: Vec::new(),
            proto: 2,
            db: 0,
            close: false,
            silent: false,
            readonly: false,
            wait: Wait::None,
            may_block: true,
            multi: None,
            multi_failed: false,
            subscription: None,
            wrote: false,
            lock_wait: None,
        })
    }

    pub fn disconnect(&self, id: u64) {
        self.clients.lock().remove(&id);
        self.pubsub.forget(id);
        if self.watched_keys.load(Ordering::Acquire) > 0 {
            self.forget_watches(id);
        }
    }

    /// WATCH: a change to `(db, key)` from now on aborts `client`'s EXEC.
    pub fn watch(&self, client: u64, db: u8, key: &[u8]) {
        let mut w = self.watches.lock();
        if w.keys.entry((db, key.to_vec())).or_default().insert(client) {
            self.watched_keys.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// UNWATCH (and EXEC, DISCARD): forgets `client`'s watches; returns
    /// whether one of its keys changed since it watched it.
    pub fn unwatch(&self, client: u64) -> bool {
        if self.watched_keys.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.forget_watches(client)
    }

    fn forget_watches(&self, client: u64) -> bool {
        let mut w = self.watches.lock();
        let mut forgotten = 0;
        w.keys.retain(|_, clients| {
            forgotten += usize::from(clients.remove(&client));
            !clients.is_empty()
        });
        self.watched_keys.fetch_sub(forgotten, Ordering::AcqRel);
        w.touched.remove(&client)
    }

    /// A write changed `keys` of database `db`: the clients watching one
    /// will find their EXEC aborted. Inside a batch (store/batch.rs) this
    /// comes before the write is: a client watching already is told early
    /// (at worst, its EXEC aborts for a write that then failed); one that
    /// WATCHes later waits for the key's lock, which the batch holds until
    /// written, and reads the new value.
    pub fn touched<'k>(&self, db: u8, keys: impl Iterator<Item = &'k [u8]>) {
        if self.watched_keys.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut w = self.watches.lock();
        let Watches {
            keys: watched,
            touched,
        } = &mut *w;
        for key in keys {
            if let Some(clients) = watched.get(&(db, key.to_vec())) {
                touched.extend(clients);
            }
        }
    }

    /// FLUSHDB (database `Some(db)`) or FLUSHALL (`None`) changed every
    /// key watched there.
    pub fn touched_all(&self, db: Option<u8>) {
        if self.watched_keys.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut w = self.watches.lock();
        let Watches {
            keys: watched,
            touched,
        } = &mut *w;
        for ((d, _), clients) in watched.iter() {
            if db.is_none_or(|db| db == *d) {
                touched.extend(clients);
            }
        }
    }

    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        self.shutdown.send_replace(true);
    }

    /// Changes to `true` when the server is to stop.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Wakes the clients blocked on lists: something was pushed. (Inside a
    /// batch, before it is written: a woken pop waits for the list's lock,
    /// which the batch holds until then.)
    pub fn pushed(&self) {
        if self.pushes.receiver_count() > 0 {
            self.pushes.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Changes whenever something is pushed into a list.
    pub fn pushes(&self) -> watch::Receiver<u64> {
        self.pushes.subscribe()
    }
}

/// Where a client stands with a blocking command (BLPOP and its kin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Not blocked.
    None,
    /// The command found nothing and waits until the deadline (`None`:
    /// forever) for a push; the connection runs it again on each.
    Blocked(Option<Instant>),
    /// Run again after a push, with the first attempt's deadline.
    Retry(Option<Instant>),
    /// The deadline passed: the command answers as at its timeout.
    TimedOut,
}

/// One connection's state.
#[derive(Debug)]
pub struct Client {
    pub id: u64,
    pub addr: String,
    pub name: Vec<u8>,
    /// RESP version, 2 or 3 (HELLO).
    pub proto: u8,
    pub db: u8,
    /// Close once the replies so far are sent (QUIT, a protocol error).
    pub close: bool,
    /// Close without sending the last command's reply (SHUTDOWN).
    pub silent: bool,
    /// READONLY: in cluster mode, reads on a follower are served from its
    /// own state, which may be behind the leader's.
    pub readonly: bool,
    /// A blocking command's state.
    pub wait: Wait,
    /// Whether a blocking command may wait: not for a command a cluster
    /// member applies from the log, or one EXEC runs, which answer at
    /// once, as Redis runs a blocking command inside MULTI.
    pub may_block: bool,
    /// After MULTI: the commands queued for EXEC.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub multi_failed: bool,
    /// After SUBSCRIBE or PSUBSCRIBE: the channels and patterns, and the
    /// queue of messages the connection writes out.
    pub subscription: Option<crate::pubsub::Subscription>,
    /// A write command succeeded since the connection last answered: its
    /// replies wait for the WAL to reach the OS.
    pub wrote: bool,
    /// The key-lock stripe a batch of this client's found taken: the
    /// connection awaits its release, then runs the requests held.
    pub lock_wait: Option<usize>,
}

impl Client {
    /// A RESP2 connection subscribed to something: Redis restricts its
    /// commands and answers its PING as a message.
    pub fn in_resp2_subscribed_mode(&self) -> bool {
        self.proto < 3 && self.subscription.as_ref().is_some_and(|s| s.count() > 0)
    }

    /// The client a cluster member runs a committed command as: the one
    /// that sent it, as far as the command can tell (its database and
    /// protocol).
    pub fn replaying(db: u8, proto: u8) -> Client {
        Client {
            id: 0,
            addr: "raft".into(),
            name: Vec::new(),
            proto,
            db,
            close: false,
            silent: false,
            readonly: false,
            wait: Wait::None,
            may_block: false,
            multi: None,
            multi_failed: false,
            subscription: None,
            wrote: false,
            lock_wait: None,
        }
    }
}

/// Cursors SCAN handed out, each standing for the last key it returned:
/// cleave's keys are byte strings, and clients expect an integer cursor.
/// The newest `CURSORS` are kept; an older one is refused.
pub struct Cursors {
    slots: Vec<(u64, Vec<u8>)>,
    next: u64,
}

/// Cursors remembered at once (kvrocks keeps as many).
const CURSORS: usize = 16 << 10;

impl Cursors {
    fn new() -> Cursors {
        Cursors {
            slots: vec![(0, Vec::new()); CURSORS],
            next: 1,
        }
    }

    /// A new cursor for a scan to resume after `key`.
    pub fn save(&mut self, key: Vec<u8>) -> u64 {
        let id = self.next;
        self.next += 1;
        self.slots[(id % CURSORS as u64) as usize] = (id, key);
        id
    }

    /// The key cursor `id` resumes after, if it is still remembered.
    pub fn get(&self, id: u64) -> Option<Vec<u8>> {
        let (saved, key) = &self.slots[(id % CURSORS as u64) as usize];
        (*saved == id && id != 0).then(|| key.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_cursors_are_forgotten_not_confused() {
        let mut c = Cursors::new();
        let first = c.save(b"a".to_vec());
        assert_eq!(c.get(first).as_deref(), Some(&b"a"[..]));
        for _ in 0..CURSORS {
            c.save(b"b".to_vec());
        }
        assert_eq!(c.get(first), None);
        assert_eq!(c.get(0), None);
        assert_eq!(c.get(u64::MAX), None);
    }
}
