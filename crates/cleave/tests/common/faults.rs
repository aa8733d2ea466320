//! Set-up shared by the fault-injection tests (faults, faults_read,
//! faults_write, faults_crash): small options so that flushes and
//! compactions run often, values on both sides of the separation
//! threshold, and the check every scenario ends with: each acknowledged
//! write is readable with its value, and no key holds a value never
//! written.
#![allow(dead_code, reason = "each test file uses a part of the helpers")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cleave::vfs::{FaultFs, Fs, MemFs};
use cleave::{Db, Error, NoSpaceCause, Options, ReadOptions, WriteOptions, WriteState};

pub const DIR: &str = "/db";

/// Values of at least this size go to value files.
pub const MIN_VALUE_SIZE: usize = 256;

pub fn options(fs: Arc<dyn Fs>) -> Options {
    Options {
        create_if_missing: true,
        fs,
        write_buffer_size: 16 << 10,
        target_file_size_base: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        level0_file_num_compaction_trigger: 2,
        min_value_size: MIN_VALUE_SIZE,
        value_file_size: 16 << 10,
        // GC is run by hand where a test wants it.
        enable_gc: false,
        ..Options::default()
    }
}

/// As [`options`], with no caches, so that every read reaches the files,
/// and no automatic compaction, so that no background job reads them.
pub fn uncached_options(fs: Arc<dyn Fs>) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        block_cache_capacity: 0,
        cache_values: false,
        level0_file_num_compaction_trigger: 100,
        level0_slowdown_writes_trigger: 100,
        level0_stop_writes_trigger: 100,
        ..options(fs)
    }
}

pub fn k(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Separated for even `i`, inline for odd `i`; the bytes name the round
/// that wrote them.
pub fn v(i: usize, round: usize) -> Vec<u8> {
    let len = if i.is_multiple_of(2) {
        MIN_VALUE_SIZE + 100 + i % 200
    } else {
        60
    };
    let mut out = format!("r{round}-i{i}-").into_bytes();
    out.resize(len, b'a' + (i % 26) as u8);
    out
}

pub const SYNC: WriteOptions = WriteOptions {
    sync: true,
    disable_wal: false,
};
pub const ASYNC: WriteOptions = WriteOptions {
    sync: false,
    disable_wal: false,
};
pub const NO_WAL: WriteOptions = WriteOptions {
    sync: false,
    disable_wal: true,
};

/// What the database may hold after a fault: the acknowledged value of
/// each key, and values of writes that failed or were not durable, which
/// may or may not be there.
#[derive(Debug, Default, Clone)]
pub struct Oracle {
    acked: BTreeMap<Vec<u8>, Vec<u8>>,
    maybe: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
}

impl Oracle {
    /// Writes keys `range` with `opts`, recording each as acknowledged.
    pub fn put(
        &mut self,
        db: &Db,
        range: std::ops::Range<usize>,
        round: usize,
        opts: &WriteOptions,
    ) {
        for i in range {
            db.put(opts, &k(i), &v(i, round)).unwrap();
            self.ack(i, round);
        }
    }

    /// Records key `i` as holding round `round`'s value for good.
    pub fn ack(&mut self, i: usize, round: usize) {
        self.acked.insert(k(i), v(i, round));
        self.maybe.remove(&k(i));
    }

    /// Records that key `i` may hold round `round`'s value (a write that
    /// failed, or one a crash may lose); the value before stays possible.
    pub fn maybe(&mut self, i: usize, round: usize) {
        self.maybe.entry(k(i)).or_default().insert(v(i, round));
    }

    /// Adds what `other` recorded, of keys this oracle has not seen.
    pub fn merge(&mut self, other: &Oracle) {
        self.acked.extend(other.acked.clone());
        for (key, values) in &other.maybe {
            self.maybe
                .entry(key.clone())
                .or_default()
                .extend(values.clone());
        }
    }

    /// Key `i` must be absent: its last write expired.
    #[allow(dead_code, reason = "not every test binary expires keys")]
    pub fn forget(&mut self, i: usize) {
        self.acked.remove(&k(i));
        self.maybe.remove(&k(i));
    }

    pub fn acked_len(&self) -> usize {
        self.acked.len()
    }
}

/// 200 keys (100 separated values) in one flush, the first 100 written
/// again in a second, and everything compacted: the first flush's value
/// files hold garbage.
pub fn with_garbage(db: &Db) -> Oracle {
    let mut oracle = Oracle::default();
    oracle.put(db, 0..200, 0, &SYNC);
    db.flush().unwrap();
    oracle.put(db, 0..100, 1, &SYNC);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // No background job may meet the fault before the GC job does.
    db.wait_for_compactions().unwrap();
    oracle
}

/// Checks the contract after a fault: a full scan and a point read of every
/// key agree; each acknowledged key holds its value (or a later write's
/// that may have landed); no key holds a value never written.
pub fn check(db: &Db, oracle: &Oracle, ctx: &str) {
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    let mut seen = BTreeMap::new();
    while it.valid() {
        seen.insert(it.key().to_vec(), it.value().unwrap().to_vec());
        it.next().unwrap();
    }
    it.status().unwrap();
    drop(it);
    for (key, value) in &seen {
        let ok = oracle.acked.get(key) == Some(value)
            || oracle.maybe.get(key).is_some_and(|m| m.contains(value));
        assert!(
            ok,
            "{ctx}: key {} holds a value never written: {}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(&value[..value.len().min(24)])
        );
        assert_eq!(
            db.get(&ReadOptions::new(), key).unwrap().as_ref(),
            Some(value),
            "{ctx}: get and scan disagree on {}",
            String::from_utf8_lossy(key)
        );
    }
    for (key, value) in &oracle.acked {
        let got = seen.get(key);
        let later = oracle
            .maybe
            .get(key)
            .is_some_and(|m| got.is_some_and(|g| m.contains(g)));
        assert!(
            got == Some(value) || later,
            "{ctx}: acknowledged key {} lost or wrong",
            String::from_utf8_lossy(key)
        );
    }
}

/// Asserts that `err` is an I/O error of `kind` whose message names a file
/// whose name contains `name`: a full disk's (`StorageFull`, on a write)
/// is `Error::NoSpace`.
pub fn assert_io(err: &Error, name: &str, kind: ErrorKind, ctx: &str) {
    match err {
        Error::Io { path, source, .. }
        | Error::NoSpace {
            path,
            cause: NoSpaceCause::Device(source),
            ..
        } => {
            assert_eq!(
                matches!(err, Error::NoSpace { .. }),
                kind == ErrorKind::StorageFull
                    && !matches!(err, Error::Io { op, .. } if op.contains("sync")),
                "{ctx}: {err:?}"
            );
            assert_eq!(source.kind(), kind, "{ctx}: {err}");
            assert!(
                path.to_string_lossy().contains(name),
                "{ctx}: {err} names another file"
            );
            assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
        }
        _ => panic!("{ctx}: expected an I/O error on a {name} file, got {err:?}"),
    }
}

/// Asserts that `err` refuses the operation because of an earlier failure
/// on a file whose name contains `name`, which the message names.
pub fn assert_poisoned(err: &Error, name: &str, ctx: &str) {
    assert!(matches!(err, Error::Poisoned(_)), "{ctx}: {err:?}");
    assert!(
        err.to_string().contains(name),
        "{ctx}: the poison must name the failed file: {err}"
    );
}

/// Asserts that a full disk made `db` read-only: writes and flushes fail
/// with `Error::NoSpace` naming a file whose name contains `name`, and
/// `write_state` and the background-errors property say so.
pub fn assert_read_only(db: &Db, name: &str, ctx: &str) {
    for err in [
        db.put(&SYNC, b"refused", b"x").unwrap_err(),
        db.flush().unwrap_err(),
    ] {
        assert_io(&err, name, ErrorKind::StorageFull, ctx);
    }
    assert!(
        matches!(db.write_state(), WriteState::NoSpace { .. }),
        "{ctx}: {}",
        db.write_state()
    );
    assert!(
        db.property("cleave.background-errors")
            .unwrap()
            .starts_with("1: "),
        "{ctx}"
    );
}

/// Asserts that `db` refuses writes, naming the failure.
pub fn assert_refuses_writes(db: &Db, name: &str, ctx: &str) {
    let err = db.put(&SYNC, b"refused", b"x").unwrap_err();
    assert_poisoned(&err, name, ctx);
    let err = db.flush().unwrap_err();
    assert_poisoned(&err, name, ctx);
    assert!(
        db.property("cleave.background-errors")
            .unwrap()
            .starts_with("1: "),
        "{ctx}"
    );
}

/// Asserts the directory holds no file the database does not use: no
/// leftovers of a failed job (CURRENT is the only other file). Waits for
/// background jobs first, whose outputs no Version names yet.
pub fn assert_no_orphans(db: &Db, ctx: &str) {
    db.wait_for_compactions().unwrap();
    let r = db.space_report().unwrap();
    assert!(r.other_bytes < 64, "{ctx}: leftovers {r:?}");
}

/// [`assert_no_orphans`], naming the directory's files (of `fs`, the
/// database's) if it fails: for a failure seen once in many runs.
pub fn assert_no_orphans_in(db: &Db, fs: &dyn Fs, ctx: &str) {
    db.wait_for_compactions().unwrap();
    let r = db.space_report().unwrap();
    if r.other_bytes >= 64 {
        let files: Vec<(String, u64)> = fs
            .list(Path::new(DIR))
            .unwrap()
            .into_iter()
            .map(|n| {
                let len = fs.open(&Path::new(DIR).join(&n), Default::default());
                (n, len.map_or(0, |f| f.len()))
            })
            .collect();
        panic!(
            "{ctx}: leftovers {r:?}; files {files:?}; stats {}",
            db.stats().to_text()
        );
    }
}

/// The database's files whose names end with `.{ext}`, sorted.
pub fn files(fs: &dyn Fs, ext: &str) -> Vec<PathBuf> {
    let mut names: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(&format!(".{ext}")) || n.starts_with(ext))
        .collect();
    names.sort();
    names.into_iter().map(|n| Path::new(DIR).join(n)).collect()
}

/// The newest file whose name ends with `.{ext}` (or starts with `ext`).
pub fn newest(fs: &dyn Fs, ext: &str) -> PathBuf {
    files(fs, ext).pop().expect("no such file")
}

/// The faults `fs` injected, at least one; printed so that a run with
/// `--nocapture` can add them up.
pub fn injected(fs: &FaultFs, test: &str) -> u64 {
    let n = fs.injected();
    assert!(n > 0, "{test}: no fault was injected");
    eprintln!("faults injected by {test}: {n}");
    n
}

/// A file system holding the state after a power loss now.
pub fn crashed(mem: &MemFs) -> Arc<dyn Fs> {
    Arc::new(mem.crash_clone())
}
