//! Estimates that read no file: the number of keys in a range, and of
//! those with an expiry still to come.

use std::sync::Arc;

use crate::base::expiry;
use crate::base::key::{self, MAX_SEQ};
use crate::base::{InternalIterator, InternalKey, ValueKind};
use crate::manifest::FileMeta;
use crate::memtable::MemTable;

use super::DbInner;

impl DbInner {
    /// See `Db::estimate_num_keys`.
    pub(super) fn estimate_num_keys(&self, begin: &[u8], end: &[u8]) -> u64 {
        let now = self.opts.clock.now_ms();
        // Signed: deletions may outnumber what this range still holds.
        self.estimate(
            begin,
            end,
            |f| f.num_entries as i64 - 2 * f.num_deletions as i64,
            |mem| memtable_keys(mem, begin, end, now),
        )
        .max(0) as u64
    }

    /// See `Db::estimate_num_expiring`.
    pub(super) fn estimate_num_expiring(&self, begin: &[u8], end: &[u8]) -> u64 {
        let now = self.opts.clock.now_ms();
        self.estimate(
            begin,
            end,
            |f| f.expiry.map_or(0, |x| x.unexpired_entries(now) as i64),
            |mem| memtable_expiring(mem, begin, end, now) as i64,
        )
        .max(0) as u64
    }

    /// A count over `[begin, end)` that reads no file: `in_file` of each
    /// sstable inside the range, half of it for one straddling a bound,
    /// plus `in_memtable` of each memtable.
    fn estimate(
        &self,
        begin: &[u8],
        end: &[u8],
        in_file: impl Fn(&FileMeta) -> i64,
        in_memtable: impl Fn(&Arc<MemTable>) -> i64,
    ) -> i64 {
        if begin >= end {
            return 0;
        }
        let (version, mems) = {
            let st = self.state.lock();
            let mut mems = vec![st.mem.clone()];
            mems.extend(st.imm.iter().map(|i| i.mem.clone()));
            (st.current.clone(), mems)
        };
        let mut total = 0;
        for (_, f) in version.all_files() {
            let (smallest, largest) = (f.smallest_user(), f.largest_user());
            if largest < begin || smallest >= end {
                continue;
            }
            let n = in_file(f);
            total += if smallest >= begin && largest < end {
                n
            } else {
                n / 2
            };
        }
        total + mems.iter().map(in_memtable).sum::<i64>()
    }
}

/// Keys in `[begin, end)` whose newest entry in `mem` has an expiry after
/// `now`.
fn memtable_expiring(mem: &Arc<MemTable>, begin: &[u8], end: &[u8], now: u64) -> u64 {
    let mut it = mem.iter();
    if it
        .seek(InternalKey::for_seek(begin, MAX_SEQ).encoded())
        .is_err()
    {
        return 0;
    }
    let mut total = 0;
    let mut previous: Option<Vec<u8>> = None;
    while it.valid() {
        let Some(parsed) = key::parse(it.key()) else {
            break;
        };
        if parsed.user_key >= end {
            break;
        }
        if previous.as_deref() != Some(parsed.user_key) {
            let live = expiry::split(parsed.kind, it.value())
                .ok()
                .and_then(|s| s.expires_at)
                .is_some_and(|at| !expiry::expired(at, now));
            total += u64::from(live);
            previous = Some(parsed.user_key.to_vec());
        }
        if it.next().is_err() {
            break;
        }
    }
    total
}

/// A memtable's share of the keys in `[begin, end)`: +1 for each key whose
/// newest entry is a value or merge, -1 for each whose only entry is a
/// deletion (it hides a key in an older table), nothing for one whose
/// newest entry expired at `now`; older entries of a key, which a later
/// write in the same memtable overwrote, count nothing.
fn memtable_keys(mem: &Arc<MemTable>, begin: &[u8], end: &[u8], now: u64) -> i64 {
    let mut it = mem.iter();
    if it
        .seek(InternalKey::for_seek(begin, MAX_SEQ).encoded())
        .is_err()
    {
        return 0;
    }
    let mut total = 0;
    // The key just counted, and whether that was as a lone deletion.
    let mut previous: Option<(Vec<u8>, bool)> = None;
    while it.valid() {
        let Some(parsed) = key::parse(it.key()) else {
            break;
        };
        if parsed.user_key >= end {
            break;
        }
        match &mut previous {
            Some((user_key, lone_deletion)) if user_key.as_slice() == parsed.user_key => {
                // An older entry of the key: a deletion over it hid it.
                if *lone_deletion {
                    total += 1;
                    *lone_deletion = false;
                }
            }
            _ => {
                let seen = expiry::as_seen(parsed.kind, it.value(), now)
                    .map_or(parsed.kind, |(kind, _)| kind);
                let deletion = parsed.kind == ValueKind::Deletion;
                total += match seen {
                    // Expired: no key, and none known hidden.
                    ValueKind::Deletion if !deletion => 0,
                    ValueKind::Deletion => -1,
                    _ => 1,
                };
                previous = Some((parsed.user_key.to_vec(), deletion));
            }
        }
        if it.next().is_err() {
            break;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::options::{Options, WriteOptions};
    use crate::vfs::MemFs;
    use crate::Db;

    fn options(fs: Arc<MemFs>) -> Options {
        Options {
            create_if_missing: true,
            fs,
            write_buffer_size: 1 << 20,
            min_value_size: 64,
            big_value_threshold: 1 << 10,
            range_merge_sorted_runs: 0,
            ..Options::default()
        }
    }

    #[test]
    fn estimate_counts_a_range_in_memtables_and_sstables() {
        let fs = Arc::new(MemFs::new());
        let db = Db::open("/db", options(fs)).unwrap();
        let w = WriteOptions::default();
        for i in 0..3000u32 {
            db.put(&w, format!("a{i:05}").as_bytes(), b"v").unwrap();
            db.put(&w, format!("b{i:05}").as_bytes(), b"v").unwrap();
        }
        // Memtable only: exact, overwrites counted once, deletions
        // subtracted.
        db.put(&w, b"a00001", b"again").unwrap();
        db.delete(&w, b"a00000").unwrap();
        assert_eq!(db.estimate_num_keys(b"a", b"b"), 2999);
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let estimate = db.estimate_num_keys(b"a", b"b");
        // Straddling files count half: within a file's worth of the truth.
        assert!((2000..=3500).contains(&estimate), "{estimate}");
        assert_eq!(db.estimate_num_keys(b"b", b"a"), 0);
        assert_eq!(db.estimate_num_keys(b"c", b"d"), 0);
    }

    #[test]
    fn estimate_counts_keys_with_an_expiry_to_come() {
        let fs = Arc::new(MemFs::new());
        let clock = Arc::new(crate::ManualClock::new(1_000_000));
        let db = Db::open(
            "/db",
            Options {
                clock: clock.clone(),
                ..options(fs)
            },
        )
        .unwrap();
        let w = WriteOptions::default();
        for i in 0..800u32 {
            let k = format!("a{i:05}");
            match i % 4 {
                0 => db.put(&w, k.as_bytes(), b"v").unwrap(),
                // Half expire at +1 s, half at +2 s.
                n => db
                    .put_with_expiry(
                        &w,
                        k.as_bytes(),
                        b"v",
                        1_000_000 + 1000 * u64::from(n % 2 + 1),
                    )
                    .unwrap(),
            }
        }
        assert_eq!(db.estimate_num_expiring(b"a", b"b"), 600);
        db.flush().unwrap();
        assert_eq!(db.estimate_num_expiring(b"a", b"b"), 600);
        clock.advance(1000);
        let half = db.estimate_num_expiring(b"a", b"b");
        // 400 in truth; the summary counts to the eighth below.
        assert!((400..=475).contains(&half), "{half}");
        clock.advance(1000);
        assert_eq!(db.estimate_num_expiring(b"a", b"b"), 0);
        assert_eq!(db.estimate_num_expiring(b"b", b"c"), 0);
        // Expired in a memtable, a key counts nothing.
        db.put_with_expiry(&w, b"c1", b"v", 1).unwrap();
        db.put(&w, b"c2", b"v").unwrap();
        assert_eq!(db.estimate_num_keys(b"c", b"d"), 1);
    }
}
