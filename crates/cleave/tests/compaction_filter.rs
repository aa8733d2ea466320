//! The user's compaction filter: what it removes reads as deleted (no older
//! version shows through), what it changes reads changed, it reads a
//! separated value only when it asks for its bytes, it leaves alone what a
//! snapshot still needs, and it sees each value's size and expiry.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cleave::vfs::MemFs;
use cleave::{
    CompactionDecision, CompactionFilter, Db, FilterContext, FilterFn, FilterValue, ManualClock,
    Options, ReadOptions, WriteOptions,
};

const DIR: &str = "/db";
const T0: u64 = 1_800_000_000_000;

fn open(filter: Arc<dyn CompactionFilter>) -> Db {
    open_with(filter, Arc::new(ManualClock::new(T0)))
}

fn open_with(filter: Arc<dyn CompactionFilter>, clock: Arc<ManualClock>) -> Db {
    Db::open(
        Path::new(DIR),
        Options {
            create_if_missing: true,
            fs: Arc::new(MemFs::new()),
            min_value_size: 512,
            compaction_filter: Some(filter),
            range_merge_sorted_runs: 0,
            enable_gc: false,
            clock,
            ..Options::default()
        },
    )
    .unwrap()
}

fn big(tag: &str) -> Vec<u8> {
    let mut v = tag.as_bytes().to_vec();
    v.resize(3000, b'.');
    v
}

/// Removes keys starting with `drop:` and upper-cases the values of keys
/// starting with `up:`; looks at nothing else.
#[derive(Debug, Default)]
struct ByKey {
    seen_levels: AtomicU64,
}

impl CompactionFilter for ByKey {
    fn name(&self) -> &str {
        "by-key"
    }

    fn filter(
        &self,
        ctx: &FilterContext<'_>,
        key: &[u8],
        value: &mut FilterValue<'_>,
    ) -> CompactionDecision {
        let level = ctx.level();
        self.seen_levels.fetch_or(1 << level, Ordering::Relaxed);
        if key.starts_with(b"drop:") {
            CompactionDecision::Remove
        } else if key.starts_with(b"up:") {
            match value.bytes() {
                Ok(v) => CompactionDecision::ChangeValue(v.to_ascii_uppercase()),
                Err(_) => CompactionDecision::Keep,
            }
        } else {
            CompactionDecision::Keep
        }
    }
}

#[test]
fn removed_keys_read_deleted_and_changed_ones_changed() {
    let filter = Arc::new(ByKey::default());
    let db = open(filter.clone());
    let wo = WriteOptions::default();
    // Older versions in the last level, newer ones above them.
    for (k, v) in [
        (&b"drop:a"[..], big("old-a")),
        (b"keep:b", big("old-b")),
        (b"up:c", b"small c".to_vec()),
    ] {
        db.put(&wo, k, &v).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.put(&wo, b"drop:a", &big("new-a")).unwrap();
    db.put(&wo, b"drop:z", b"small z").unwrap();
    db.put(&wo, b"up:d", &big("big d")).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let ro = ReadOptions::new();
    assert_eq!(
        db.get(&ro, b"drop:a").unwrap(),
        None,
        "no version shows through"
    );
    assert_eq!(db.get(&ro, b"drop:z").unwrap(), None);
    assert_eq!(db.get(&ro, b"keep:b").unwrap(), Some(big("old-b")));
    assert_eq!(db.get(&ro, b"up:c").unwrap(), Some(b"SMALL C".to_vec()));
    assert_eq!(
        db.get(&ro, b"up:d").unwrap(),
        Some(big("big d").to_ascii_uppercase())
    );
    let mut it = db.iter(&ro);
    it.seek_to_first().unwrap();
    let mut keys = Vec::new();
    while it.valid() {
        keys.push(it.key().to_vec());
        it.next().unwrap();
    }
    assert_eq!(
        keys,
        vec![b"keep:b".to_vec(), b"up:c".to_vec(), b"up:d".to_vec()]
    );
    let s = db.stats();
    assert!(
        s.compaction_filter_removed >= 2,
        "{}",
        s.compaction_filter_removed
    );
    assert!(s.compaction_filter_changed >= 2);
    // Only the separated value of up:d was read for the filter.
    assert!(s.compaction_filter_value_reads >= 1);
    assert!(filter.seen_levels.load(Ordering::Relaxed) != 0);
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_filter_that_asks_only_the_size_reads_no_value() {
    // Removes values larger than 2 KB, judging by size alone.
    let db = open(Arc::new(FilterFn::new(
        "by-size",
        |_, _, value: &mut FilterValue<'_>| {
            if value.size() > 2000 {
                CompactionDecision::Remove
            } else {
                CompactionDecision::Keep
            }
        },
    )));
    let wo = WriteOptions::default();
    for i in 0..50u32 {
        let v = if i % 2 == 0 {
            big("b")
        } else {
            b"small".to_vec()
        };
        db.put(&wo, &i.to_be_bytes(), &v).unwrap();
    }
    db.flush().unwrap();
    let reads = db.stats().value_reads;
    db.compact_range(None, None).unwrap();
    let s = db.stats();
    assert_eq!(s.compaction_filter_removed, 25);
    assert_eq!(s.compaction_filter_value_reads, 0);
    assert_eq!(s.value_reads, reads, "compaction read values");
    let report = db.space_report().unwrap();
    // The value file, all of it garbage now, went whole.
    assert_eq!(report.referenced_value_bytes, 0);
    assert_eq!(report.value_file_bytes, report.exposed_garbage_bytes);
    for i in 0..50u32 {
        let got = db.get(&ReadOptions::new(), &i.to_be_bytes()).unwrap();
        assert_eq!(got.is_some(), i % 2 == 1, "key {i}");
    }
}

/// Removes everything, and records the expiries it saw.
#[derive(Debug, Default)]
struct Everything {
    expiries: parking_lot::Mutex<Vec<Option<u64>>>,
}

impl CompactionFilter for Everything {
    fn name(&self) -> &str {
        "everything"
    }

    fn filter(
        &self,
        _: &FilterContext<'_>,
        _: &[u8],
        value: &mut FilterValue<'_>,
    ) -> CompactionDecision {
        self.expiries.lock().push(value.expires_at_ms());
        CompactionDecision::Remove
    }
}

#[test]
fn a_snapshot_keeps_what_it_sees_from_the_filter() {
    let filter = Arc::new(Everything::default());
    let db = open(filter.clone());
    let wo = WriteOptions::default();
    db.put(&wo, b"a", b"1").unwrap();
    db.put_with_ttl(&wo, b"b", b"2", Duration::from_secs(60))
        .unwrap();
    let snap = db.snapshot();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let mut ro = ReadOptions::new();
    ro.snapshot = Some(&snap);
    assert_eq!(db.get(&ro, b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(&ro, b"b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.stats().compaction_filter_calls, 0);
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&ReadOptions::new(), b"a").unwrap(), None);
    assert_eq!(db.get(&ReadOptions::new(), b"b").unwrap(), None);
    let mut seen = filter.expiries.lock().clone();
    seen.sort();
    assert_eq!(seen, vec![None, Some(T0 + 60_000)]);
}

/// A removed entry over an older version a snapshot keeps, in the same
/// compaction, in the last level: it becomes a deletion, or the older
/// version would show through to reads without the snapshot. (The model
/// test found it.)
#[test]
fn a_removal_over_a_version_a_snapshot_keeps_leaves_a_deletion() {
    let db = open(Arc::new(FilterFn::new(
        "gone",
        |_, _, value: &mut FilterValue<'_>| match value.bytes() {
            Ok(b"gone") => CompactionDecision::Remove,
            _ => CompactionDecision::Keep,
        },
    )));
    let wo = WriteOptions::default();
    db.put(&wo, b"k", b"old").unwrap();
    let snap = db.snapshot();
    db.put(&wo, b"k", b"gone").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.stats().compaction_filter_removed, 1);
    assert_eq!(db.get(&ReadOptions::new(), b"k").unwrap(), None);
    let mut ro = ReadOptions::new();
    ro.snapshot = Some(&snap);
    assert_eq!(db.get(&ro, b"k").unwrap(), Some(b"old".to_vec()));
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&ReadOptions::new(), b"k").unwrap(), None);
}
