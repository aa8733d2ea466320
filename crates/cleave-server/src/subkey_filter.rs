//! Reclaims the subkeys of hashes, lists, sets and sorted sets that are gone: deleted,
//! overwritten, emptied or expired. Deleting a collection deletes only its
//! metadata key (docs/format/server.md); its fields stay under a version
//! no metadata names, and this compaction filter drops them.
//!
//! kvrocks's filter looks the metadata up for every subkey. This one
//! decides from the subkey alone where it can: the server records each
//! version it ends (DEL, emptying, overwriting a collection it read), and
//! versions are never reused, so a subkey of a recorded version is dead
//! without a lookup. Otherwise (an expired collection, or one ended before
//! a restart) one lookup answers for the run of a collection's subkeys a
//! compaction meets in a row.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cleave::{CompactionDecision, CompactionFilter, FilterContext, FilterValue};
use parking_lot::Mutex;

use crate::keyspace::{self, Meta};

/// Ended versions remembered, oldest forgotten first: 64 Ki, about 5 MiB
/// with their keys at 64 bytes.
const MAX_DEAD_VERSIONS: usize = 64 << 10;

/// How long one thread trusts a lookup's answer for the next subkeys of
/// the same collection: a collection ended meanwhile keeps its subkeys
/// until the next compaction, never loses live ones.
const LOOKUP_REUSE: Duration = Duration::from_secs(1);

/// What the filter did, for INFO.
#[derive(Debug, Default)]
pub struct SubkeyStats {
    /// Subkeys the filter was asked about.
    pub checked: AtomicU64,
    /// Subkeys dropped, and of those, decided from the subkey alone (a
    /// version the server saw end).
    pub removed: AtomicU64,
    pub decided_from_key: AtomicU64,
    /// Metadata lookups made.
    pub lookups: AtomicU64,
}

/// Ended versions, each with whether the server saw it end (else a
/// lookup found it).
#[derive(Debug, Default)]
struct DeadVersions {
    set: HashMap<Vec<u8>, bool>,
    order: VecDeque<Vec<u8>>,
}

#[derive(Debug, Default)]
pub struct StaleSubkeys {
    dead: Mutex<DeadVersions>,
    pub stats: SubkeyStats,
}

/// A lookup's answer: which filter asked, about which collection (its
/// subkey prefix), whether it was live, and when.
struct Answer {
    filter: usize,
    prefix: Vec<u8>,
    live: bool,
    at: Instant,
}

thread_local! {
    /// The last lookup this thread made.
    static LAST: RefCell<Option<Answer>> = const { RefCell::new(None) };
}

/// A collection's identity in a subkey: `db len(key) key version`, the
/// collection prefix without its tag (a field and its score entry share
/// it).
fn identity(prefix: &[u8]) -> &[u8] {
    &prefix[1..]
}

impl StaleSubkeys {
    /// Records that `version` of the collection at `key` ended: its
    /// subkeys are dead from now on.
    pub fn ended(&self, db: u8, key: &[u8], version: u64) {
        self.record(db, key, version, true);
    }

    fn record(&self, db: u8, key: &[u8], version: u64, by_server: bool) {
        let prefix = keyspace::collection_prefix(keyspace::SUB, db, key, version);
        let id = identity(&prefix).to_vec();
        let mut d = self.dead.lock();
        if d.set.insert(id.clone(), by_server).is_none() {
            d.order.push_back(id);
            if d.order.len() > MAX_DEAD_VERSIONS {
                if let Some(old) = d.order.pop_front() {
                    d.set.remove(&old);
                }
            }
        }
    }

    /// Whether the collection of subkey prefix `prefix` is live: its
    /// metadata names its version.
    fn live(&self, ctx: &FilterContext<'_>, prefix: &[u8]) -> bool {
        let me = self as *const Self as usize;
        let now = Instant::now();
        let cached = LAST.with(|l| match &*l.borrow() {
            Some(a) if a.filter == me && a.prefix == prefix && now - a.at < LOOKUP_REUSE => {
                Some(a.live)
            }
            _ => None,
        });
        if let Some(live) = cached {
            return live;
        }
        self.stats.lookups.fetch_add(1, Ordering::Relaxed);
        // `tag db len key version`, as `collection_prefix` built it.
        let db = prefix[1];
        let key = &prefix[6..prefix.len() - 8];
        let mut version = [0u8; 8];
        version.copy_from_slice(&prefix[prefix.len() - 8..]);
        let version = u64::from_be_bytes(version);
        let live = match ctx.get(&keyspace::meta_key(db, key)) {
            Ok(Some(v)) => match Meta::decode(v) {
                Ok(meta) => meta.version() == Some(version),
                // Damaged metadata: keep the subkeys for a reader to see.
                Err(_) => true,
            },
            Ok(None) => false,
            // A failed read decides nothing: keep.
            Err(_) => true,
        };
        if !live {
            self.record(db, key, version, false);
        }
        LAST.with(|l| {
            *l.borrow_mut() = Some(Answer {
                filter: me,
                prefix: prefix.to_vec(),
                live,
                at: now,
            })
        });
        live
    }
}

impl CompactionFilter for StaleSubkeys {
    fn name(&self) -> &str {
        "cleave-server.stale-subkeys"
    }

    fn filter(
        &self,
        ctx: &FilterContext<'_>,
        key: &[u8],
        _: &mut FilterValue<'_>,
    ) -> CompactionDecision {
        let Some(n) = keyspace::collection_prefix_len(key) else {
            return CompactionDecision::Keep;
        };
        let prefix = &key[..n];
        self.stats.checked.fetch_add(1, Ordering::Relaxed);
        let known = self.dead.lock().set.get(identity(prefix)).copied();
        if let Some(by_server) = known {
            self.stats.removed.fetch_add(1, Ordering::Relaxed);
            if by_server {
                self.stats.decided_from_key.fetch_add(1, Ordering::Relaxed);
            }
            return CompactionDecision::Remove;
        }
        if self.live(ctx, prefix) {
            CompactionDecision::Keep
        } else {
            self.stats.removed.fetch_add(1, Ordering::Relaxed);
            CompactionDecision::Remove
        }
    }
}
