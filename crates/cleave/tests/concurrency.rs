//! Many writers and readers at once while flushes and compactions run:
//! batches are atomic, snapshots are consistent, writers read their writes,
//! also while value-file GC runs; a snapshot reads the same thing however
//! long it is held, and no reader ever sees time go backwards; a flush
//! never waits for a thread that compaction or GC holds.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cleave::vfs::{FileLock, FileOptions, Fs, MemFs, RandomAccessFile, WritableFile};
use cleave::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

const WRITERS: usize = 4;
const ROUNDS: u64 = 3000;

fn pair_keys(t: usize) -> (Vec<u8>, Vec<u8>) {
    (format!("a{t}").into_bytes(), format!("b{t}").into_bytes())
}

#[test]
fn atomic_batches_consistent_snapshots_and_read_your_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open(
            tmp.path(),
            Options {
                create_if_missing: true,
                write_buffer_size: 32 << 10,
                target_file_size_base: 32 << 10,
                max_bytes_for_level_base: 128 << 10,
                level0_file_num_compaction_trigger: 2,
                max_background_jobs: 4,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for t in 0..WRITERS {
        let db = db.clone();
        writers.push(std::thread::spawn(move || {
            let (a, b) = pair_keys(t);
            let filler = vec![b'f'; 200];
            for i in 0..ROUNDS {
                let v = i.to_be_bytes();
                let mut batch = WriteBatch::new();
                batch.put(&a, &v);
                batch.put(format!("fill{t}-{i}").as_bytes(), &filler);
                batch.put(&b, &v);
                db.write(&WriteOptions::default(), batch).unwrap();
                // Read-your-writes: the acknowledged value is visible now.
                let got = db.get(&ReadOptions::new(), &a).unwrap();
                assert_eq!(got.as_deref(), Some(&v[..]), "writer {t} round {i}");
            }
        }));
    }
    let mut readers = Vec::new();
    for r in 0..2 {
        let db = db.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let snap = db.snapshot();
                let mut ro = ReadOptions::new();
                ro.snapshot = Some(&snap);
                for t in 0..WRITERS {
                    let (a, b) = pair_keys(t);
                    let va = db.get(&ro, &a).unwrap();
                    let vb = db.get(&ro, &b).unwrap();
                    assert_eq!(va, vb, "reader {r}: batch seen half-applied for writer {t}");
                }
                // The same through an iterator over the snapshot.
                let mut it = db.iter(&ro);
                it.seek_to_first().unwrap();
                let mut a_vals = Vec::new();
                let mut b_vals = Vec::new();
                while it.valid() {
                    match it.key().first() {
                        Some(b'a') => a_vals.push(it.value().unwrap().to_vec()),
                        Some(b'b') => b_vals.push(it.value().unwrap().to_vec()),
                        _ => {}
                    }
                    it.next().unwrap();
                }
                it.status().unwrap();
                assert_eq!(
                    a_vals, b_vals,
                    "reader {r}: iterator saw a half-applied batch"
                );
                checks += 1;
            }
            checks
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let checks: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(checks > 0);
    db.wait_for_compactions().unwrap();
    let stats = db.stats();
    assert!(
        stats.flushes > 0 && stats.compactions + stats.trivial_moves > 0,
        "{stats:?}"
    );
    for t in 0..WRITERS {
        let (a, _) = pair_keys(t);
        let got = db.get(&ReadOptions::new(), &a).unwrap();
        assert_eq!(got.as_deref(), Some(&(ROUNDS - 1).to_be_bytes()[..]));
    }
}

/// Small memtables, files and value files, and GC at a low threshold, so
/// that flushes, compactions and GC run all the time.
fn separated_options() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        target_file_size_base: 32 << 10,
        max_bytes_for_level_base: 128 << 10,
        level0_file_num_compaction_trigger: 2,
        max_background_jobs: 4,
        min_value_size: 512,
        value_file_size: 64 << 10,
        cache_values: true,
        gc_garbage_ratio: 0.1,
        ..Options::default()
    }
}

/// A separated value that names its writer and round, so a reader can tell
/// a whole value from a damaged or mismatched one.
fn large_value(t: usize, i: u64) -> Vec<u8> {
    let mut v = format!("{t}-{i}-").into_bytes();
    v.resize(600 + (i as usize * 7) % 900, b'a' + (i % 26) as u8);
    v
}

/// The same with large values while GC runs in the background and from a
/// thread of its own, next to flushes and compactions: GC must never let a
/// reader see a half-applied batch, a stale value or a missing one.
#[test]
fn snapshots_and_iterators_stay_consistent_while_gc_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(tmp.path(), separated_options()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for t in 0..WRITERS {
        let db = db.clone();
        writers.push(std::thread::spawn(move || {
            let (a, b) = pair_keys(t);
            for i in 0..ROUNDS / 2 {
                let v = large_value(t, i);
                let mut batch = WriteBatch::new();
                batch.put(&a, &v);
                // A small key space, overwritten again and again: garbage.
                batch.put(format!("fill{t}-{}", i % 50).as_bytes(), &v);
                batch.put(&b, &v);
                db.write(&WriteOptions::default(), batch).unwrap();
                let got = db.get(&ReadOptions::new(), &a).unwrap();
                assert_eq!(got.as_deref(), Some(&v[..]), "writer {t} round {i}");
            }
        }));
    }
    let collector = {
        let db = db.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut jobs = 0;
            while !stop.load(Ordering::Relaxed) {
                jobs += db.gc_with_ratio(0.05).unwrap().jobs;
            }
            jobs
        })
    };
    let mut readers = Vec::new();
    for r in 0..2 {
        let db = db.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let snap = db.snapshot();
                let mut ro = ReadOptions::new();
                ro.snapshot = Some(&snap);
                let mut it = db.iter(&ro);
                it.seek_to_first().unwrap();
                let mut pairs = BTreeMap::new();
                while it.valid() {
                    let key = it.key().to_vec();
                    let value = it.value().unwrap().to_vec();
                    if key[0] == b'a' || key[0] == b'b' {
                        pairs.insert(key, value);
                    }
                    it.next().unwrap();
                }
                it.status().unwrap();
                for t in 0..WRITERS {
                    let (a, b) = pair_keys(t);
                    let (va, vb) = (pairs.get(&a), pairs.get(&b));
                    assert_eq!(va, vb, "reader {r}: half-applied batch of writer {t}");
                    // The snapshot's point reads agree with its iterator.
                    assert_eq!(db.get(&ro, &a).unwrap().as_ref(), va);
                    if let Some(v) = va {
                        let text = String::from_utf8_lossy(v);
                        let i: u64 = text.split('-').nth(1).unwrap().parse().unwrap();
                        assert_eq!(v, &large_value(t, i), "reader {r}: damaged value");
                    }
                }
                checks += 1;
            }
            checks
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let checks: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let manual_jobs = collector.join().unwrap();
    assert!(checks > 0);
    db.wait_for_compactions().unwrap();
    let stats = db.stats();
    // Background jobs ran too, not only the collector's.
    assert!(stats.gc.jobs > manual_jobs, "{}", stats.to_text());
    for t in 0..WRITERS {
        let (a, b) = pair_keys(t);
        let want = large_value(t, ROUNDS / 2 - 1);
        assert_eq!(db.get(&ReadOptions::new(), &a).unwrap(), Some(want.clone()));
        assert_eq!(db.get(&ReadOptions::new(), &b).unwrap(), Some(want));
    }
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
}

/// Keys per writer in `snapshots_repeat_and_views_only_move_forward`.
const GROUP: u64 = 12;

fn group_key(t: u64, j: u64) -> Vec<u8> {
    format!("w{t}-k{j:02}").into_bytes()
}

/// Round `r` of writer `t` writes every key of its group in one batch,
/// except a few it deletes; half of the values are large (separated).
fn group_value(t: u64, j: u64, r: u64) -> Option<Vec<u8>> {
    if (r + j).is_multiple_of(7) {
        return None;
    }
    let mut v = format!("{t}:{j}:{r}:").into_bytes();
    v.resize(
        if (r + j).is_multiple_of(2) {
            40
        } else {
            700 + (r % 300) as usize
        },
        b'v',
    );
    Some(v)
}

/// The round a whole group shows, given each key's value: one round for
/// all keys (batches are atomic), every value exactly as written.
fn group_round(t: u64, values: &BTreeMap<u64, Vec<u8>>, ctx: &str) -> Option<u64> {
    let (&j, v) = values.iter().next()?;
    let text = String::from_utf8_lossy(v);
    let r: u64 = text.split(':').nth(2).unwrap().parse().unwrap();
    for j2 in 0..GROUP {
        assert_eq!(
            values.get(&j2),
            group_value(t, j2, r).as_ref(),
            "{ctx}: writer {t} key {j2} is not at round {r} (key {j} is)"
        );
    }
    Some(r)
}

/// Every key of every group, read through an iterator in either direction
/// (0, 1), point reads (2) or one `multi_get` (3), under `ro`.
fn read_groups(db: &Db, ro: &ReadOptions<'_>, how: u8) -> BTreeMap<(u64, u64), Vec<u8>> {
    let parse = |key: &[u8]| {
        let text = std::str::from_utf8(key).unwrap();
        let (t, j) = text[1..].split_once("-k").unwrap();
        (t.parse::<u64>().unwrap(), j.parse::<u64>().unwrap())
    };
    let mut out = BTreeMap::new();
    match how {
        0 | 1 => {
            let mut it = db.iter(ro);
            if how == 0 {
                it.seek_to_first().unwrap();
            } else {
                it.seek_to_last().unwrap();
            }
            while it.valid() {
                out.insert(parse(it.key()), it.value().unwrap().to_vec());
                if how == 0 {
                    it.next().unwrap();
                } else {
                    it.prev().unwrap();
                }
            }
            it.status().unwrap();
        }
        2 => {
            for t in 0..WRITERS as u64 {
                for j in 0..GROUP {
                    if let Some(v) = db.get(ro, &group_key(t, j)).unwrap() {
                        out.insert((t, j), v);
                    }
                }
            }
        }
        _ => {
            let ids: Vec<(u64, u64)> = (0..WRITERS as u64)
                .flat_map(|t| (0..GROUP).map(move |j| (t, j)))
                .collect();
            let keys: Vec<Vec<u8>> = ids.iter().map(|&(t, j)| group_key(t, j)).collect();
            for (id, r) in ids.into_iter().zip(db.multi_get(ro, &keys)) {
                if let Some(v) = r.unwrap() {
                    out.insert(id, v);
                }
            }
        }
    }
    out
}

/// The round of each group in `view`, checking each group's consistency.
fn rounds(view: &BTreeMap<(u64, u64), Vec<u8>>, ctx: &str) -> Vec<Option<u64>> {
    (0..WRITERS as u64)
        .map(|t| {
            let group: BTreeMap<u64, Vec<u8>> = view
                .range((t, 0)..(t + 1, 0))
                .map(|(&(_, j), v)| (j, v.clone()))
                .collect();
            group_round(t, &group, ctx)
        })
        .collect()
}

/// Writers rewrite their group of keys in atomic batches (puts and
/// deletes, small and separated values) while flushes, compactions and GC
/// run and a thread forces more of them. Six readers check:
/// - a snapshot held across all that reads exactly what it first read,
///   through iterators both ways and point reads (snapshot isolation);
/// - any read shows each group at one round (atomicity), and the rounds a
///   reader sees never go back, with or without snapshots;
/// - each writer reads its own acknowledged batch at once (read-your-writes).
#[test]
fn snapshots_repeat_and_views_only_move_forward() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(tmp.path(), separated_options()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for t in 0..WRITERS as u64 {
        let db = db.clone();
        writers.push(std::thread::spawn(move || {
            for r in 0..ROUNDS / 3 {
                let mut batch = WriteBatch::new();
                for j in 0..GROUP {
                    match group_value(t, j, r) {
                        Some(v) => batch.put(&group_key(t, j), &v),
                        None => batch.delete(&group_key(t, j)),
                    }
                }
                db.write(&WriteOptions::default(), batch).unwrap();
                let j = r % GROUP;
                assert_eq!(
                    db.get(&ReadOptions::new(), &group_key(t, j)).unwrap(),
                    group_value(t, j, r),
                    "writer {t} round {r}: its own write is not visible"
                );
            }
        }));
    }
    let chores = {
        let db = db.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match i % 3 {
                    0 => db.flush().unwrap(),
                    1 => db.compact_range(None, None).unwrap(),
                    _ => drop(db.gc_with_ratio(0.05).unwrap()),
                }
                i += 1;
            }
        })
    };
    let mut readers = Vec::new();
    for r in 0..6u8 {
        let db = db.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut last = vec![None; WRITERS];
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let ctx = format!("reader {r} check {checks}");
                let now = if r < 2 {
                    // Held while the writers and the chores go on.
                    let snap = db.snapshot();
                    let mut ro = ReadOptions::new();
                    ro.snapshot = Some(&snap);
                    let first = read_groups(&db, &ro, 0);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    for how in [1, 2, 3, 0] {
                        assert!(
                            read_groups(&db, &ro, how) == first,
                            "{ctx}: a snapshot read changed (read {how})"
                        );
                    }
                    rounds(&first, &ctx)
                } else if r % 3 == 2 {
                    // Point reads of several keys agree only under one
                    // snapshot; an iterator is one by itself.
                    let snap = db.snapshot();
                    let mut ro = ReadOptions::new();
                    ro.snapshot = Some(&snap);
                    rounds(&read_groups(&db, &ro, 2), &ctx)
                } else {
                    // An iterator, or one multi_get: each is one view by
                    // itself.
                    let how = if checks.is_multiple_of(2) { r % 3 } else { 3 };
                    rounds(&read_groups(&db, &ReadOptions::new(), how), &ctx)
                };
                for (t, (old, new)) in last.iter().zip(&now).enumerate() {
                    assert!(
                        old <= new,
                        "{ctx}: writer {t} went back from round {old:?} to {new:?}"
                    );
                }
                last = now;
                checks += 1;
            }
            checks
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let checks: Vec<u64> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    chores.join().unwrap();
    assert!(checks.iter().all(|&c| c > 0), "{checks:?}");
    let stats = db.stats();
    assert!(
        stats.flushes > 0 && stats.compactions > 0 && stats.gc.jobs > 0,
        "{}",
        stats.to_text()
    );
    let last = rounds(&read_groups(&db, &ReadOptions::new(), 0), "final");
    assert_eq!(last, vec![Some(ROUNDS / 3 - 1); WRITERS]);
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
}

/// Where a gate holds a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    Append,
    Sync,
}

/// Holds the threads whose names start with `threads` at their next
/// write (or sync) of a file whose name ends with `files`, while armed;
/// other threads and files pass. (Held in a write, not in `create`: the
/// engine's usage accounting creates files under a lock of its own.)
#[derive(Debug)]
struct Gate {
    threads: &'static str,
    files: &'static str,
    at: Point,
    /// (armed, threads held)
    state: Mutex<(bool, usize)>,
    cv: Condvar,
}

impl Gate {
    fn new(threads: &'static str, files: &'static str, at: Point) -> Gate {
        Gate {
            threads,
            files,
            at,
            state: Mutex::default(),
            cv: Condvar::new(),
        }
    }

    fn set_armed(&self, armed: bool) {
        self.state.lock().unwrap().0 = armed;
        self.cv.notify_all();
    }

    fn pass(&self, path: &Path, point: Point) {
        let held = point == self.at
            && std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with(self.threads))
            && path.to_str().is_some_and(|p| p.ends_with(self.files));
        let mut s = self.state.lock().unwrap();
        if held && s.0 {
            s.1 += 1;
            self.cv.notify_all();
            while s.0 {
                s = self.cv.wait(s).unwrap();
            }
            s.1 -= 1;
        }
    }

    /// Waits until a thread is held; a hang guard, not a timing.
    fn wait_held(&self) {
        let deadline = Instant::now() + HANG_GUARD;
        let mut s = self.state.lock().unwrap();
        while s.1 == 0 {
            assert!(Instant::now() < deadline, "no thread was held");
            s = self
                .cv
                .wait_timeout(s, Duration::from_millis(10))
                .unwrap()
                .0;
        }
    }
}

/// Disarms the gate when dropped: a failing test must not leave a
/// background thread held, or dropping the database would wait for it for ever.
struct Disarm(Arc<Gate>);

impl Drop for Disarm {
    fn drop(&mut self) {
        self.0.set_armed(false);
    }
}

#[derive(Debug)]
struct GateFs {
    inner: MemFs,
    gate: Arc<Gate>,
}

struct GatedFile {
    inner: Box<dyn WritableFile>,
    path: std::path::PathBuf,
    gate: Arc<Gate>,
}

impl WritableFile for GatedFile {
    fn append(&mut self, data: &[u8]) -> cleave::Result<()> {
        self.gate.pass(&self.path, Point::Append);
        self.inner.append(data)
    }
    fn flush(&mut self) -> cleave::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> cleave::Result<()> {
        self.gate.pass(&self.path, Point::Sync);
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Fs for GateFs {
    fn create(&self, path: &Path, opts: FileOptions) -> cleave::Result<Box<dyn WritableFile>> {
        Ok(Box::new(GatedFile {
            inner: self.inner.create(path, opts)?,
            path: path.to_path_buf(),
            gate: self.gate.clone(),
        }))
    }
    fn reopen_at(
        &self,
        path: &Path,
        at: u64,
        opts: FileOptions,
    ) -> cleave::Result<Box<dyn WritableFile>> {
        Ok(Box::new(GatedFile {
            inner: self.inner.reopen_at(path, at, opts)?,
            path: path.to_path_buf(),
            gate: self.gate.clone(),
        }))
    }
    fn open(&self, path: &Path, opts: FileOptions) -> cleave::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path, opts)
    }
    fn rename(&self, from: &Path, to: &Path) -> cleave::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> cleave::Result<()> {
        self.inner.remove(path)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> cleave::Result<()> {
        self.inner.hard_link(from, to)
    }
    fn list(&self, dir: &Path) -> cleave::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> cleave::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn exists(&self, path: &Path) -> cleave::Result<bool> {
        self.inner.exists(path)
    }
    fn sync_dir(&self, dir: &Path) -> cleave::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn sync_file(&self, path: &Path) -> cleave::Result<()> {
        self.inner.sync_file(path)
    }
    fn lock(&self, path: &Path) -> cleave::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

/// A new database at `/db` of `options` on a `GateFs` behind `gate`.
fn gated_db(gate: &Arc<Gate>, options: Options) -> Arc<Db> {
    let fs = Arc::new(GateFs {
        inner: MemFs::new(),
        gate: gate.clone(),
    });
    let options = Options {
        create_if_missing: true,
        fs,
        ..options
    };
    Arc::new(Db::open("/db", options).unwrap())
}

/// How long a flush may take before the test calls it hung.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Writes `round` of 200 keys and flushes, in another thread, so that a
/// flush that never comes fails the test instead of hanging it.
fn write_and_flush(db: &Arc<Db>, round: u8) {
    let db = db.clone();
    let (done, flushed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for i in 0..200u32 {
            let key = format!("k{i:04}");
            db.put(&WriteOptions::default(), key.as_bytes(), &[round; 1000])
                .unwrap();
        }
        let _ = done.send(db.flush());
    });
    flushed
        .recv_timeout(HANG_GUARD)
        .unwrap_or_else(|e| panic!("round {round}: the flush waited for a pool thread: {e}"))
        .unwrap();
}

/// A flush has a thread of its own: with every compaction and GC thread
/// held inside a job, memtables still reach L0, so writes never wait
/// behind a long GC job or compaction for the memtable to drain.
#[test]
fn a_flush_never_waits_for_a_compaction_or_gc_thread() {
    let gate = Arc::new(Gate::new("cleave-bg", "", Point::Append));
    let db = gated_db(
        &gate,
        Options {
            level0_file_num_compaction_trigger: 2,
            // One pool thread; before flushes had their own, this was the
            // only background thread.
            max_background_jobs: 1,
            ..Options::default()
        },
    );
    gate.set_armed(true);
    // Dropped before `db`.
    let disarm = Disarm(gate.clone());
    write_and_flush(&db, 1);
    write_and_flush(&db, 2);
    // Two L0 tables: the pool's thread starts their compaction and is held
    // creating its output.
    gate.wait_held();
    write_and_flush(&db, 3);
    write_and_flush(&db, 4);
    let l0: usize = db
        .property("cleave.num-files-at-level0")
        .unwrap()
        .parse()
        .unwrap();
    assert!(l0 >= 3, "{l0} L0 tables: the held compaction took two");
    drop(disarm);
    db.wait_for_compactions().unwrap();
    let got = db.get(&ReadOptions::new(), b"k0199").unwrap();
    assert_eq!(got.as_deref(), Some(&[4u8; 1000][..]));
}

/// The space budget counts a flush's output once: what it has written is
/// on disk, and only the rest is still to come. Counted as the whole
/// memtable until the flush ended, as well as on disk, the output made
/// usage jump by a memtable at every flush, and writers under a tight
/// budget stopped for space in most flushes.
#[test]
fn a_flush_counts_its_output_once_in_the_budget_usage() {
    // The flush thread is held syncing its sstable, with every record
    // written.
    let gate = Arc::new(Gate::new("cleave-flush", ".sst", Point::Sync));
    let db = gated_db(
        &gate,
        Options {
            min_value_size: 512,
            ..Options::default()
        },
    );
    const KEYS: u32 = 1000;
    const VALUE: usize = 1000;
    for i in 0..KEYS {
        let key = format!("k{i:05}");
        db.put(&WriteOptions::default(), key.as_bytes(), &[7; VALUE])
            .unwrap();
    }
    // Before the flush the memtable's output is all still to come.
    let ahead = db.stats().space_usage_bytes.saturating_sub(db.space());
    assert!(ahead >= u64::from(KEYS) * VALUE as u64, "{ahead}");
    gate.set_armed(true);
    let disarm = Disarm(gate.clone());
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    gate.wait_held();
    // The value file is on disk; what is still to come is at most the
    // entries since the last report and the memtable's own overhead.
    let ahead = db.stats().space_usage_bytes.saturating_sub(db.space());
    assert!(
        ahead < u64::from(KEYS) * VALUE as u64 / 4,
        "{ahead} bytes counted ahead with the value file written"
    );
    drop(disarm);
    flusher.join().unwrap().unwrap();
    let got = db.get(&ReadOptions::new(), b"k00999").unwrap();
    assert_eq!(got.as_deref(), Some(&[7u8; VALUE][..]));
}

/// Two writers near the stop level of a budget that fails writes, with
/// room for one more value-log record: the second is refused before it
/// appends, because the first's record counts from its check until it is
/// on disk. Counted only once on disk, both passed the check and both
/// appended (to logs of their own); the second committed, and the group
/// commit refused the first, leaving its record behind.
#[test]
fn writers_appending_at_once_at_the_stop_level_leave_no_record_behind() {
    const BIG: usize = 8 << 10;
    let gate = Arc::new(Gate::new("writer-a", ".vf", Point::Append));
    let fs = Arc::new(GateFs {
        inner: MemFs::new(),
        gate: gate.clone(),
    });
    let options = |budget: u64| Options {
        create_if_missing: true,
        fs: fs.clone(),
        write_buffer_size: 256 << 10,
        min_value_size: 256,
        big_value_threshold: 4 << 10,
        value_file_size: 256 << 10,
        enable_gc: false,
        range_merge_sorted_runs: 0,
        space_budget_bytes: budget,
        space_budget_fail_writes: true,
        ..Options::default()
    };
    let put = |db: &Db, i: u32| {
        let key = format!("k{i:04}");
        db.put(&WriteOptions::default(), key.as_bytes(), &[i as u8; BIG])
    };
    let db = Db::open("/db", options(1 << 40)).unwrap();
    for i in 0..20 {
        put(&db, i).unwrap();
    }
    // All in the last level: nothing for a tight budget to push down.
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let usage = db.stats().space_usage_bytes;
    db.close().unwrap();

    // The stop level (127/128 of the budget) a record and a half above.
    let budget = (usage + BIG as u64 * 3 / 2) * 128 / 127 + 1;
    let db = Arc::new(Db::open("/db", options(budget)).unwrap());
    db.wait_for_compactions().unwrap();
    let usage = db.stats().space_usage_bytes;
    let stop = (budget as f64 * (1.0 - 1.0 / 128.0)) as u64;
    assert!(
        stop > usage + BIG as u64 + 512 && stop < usage + 2 * BIG as u64,
        "usage {usage}, stop level {stop}: not one record's room"
    );
    let before = db.space();
    gate.set_armed(true);
    let disarm = Disarm(gate.clone());
    // The first writer is held appending its record to a value log.
    let first = {
        let db = db.clone();
        std::thread::Builder::new()
            .name("writer-a".into())
            .spawn(move || put(&db, 100))
            .unwrap()
    };
    gate.wait_held();
    let (done, result) = std::sync::mpsc::channel();
    {
        let db = db.clone();
        std::thread::spawn(move || {
            let _ = done.send(put(&db, 101));
        });
    }
    // Refused at once (a hang guard: a second writer that waits for the
    // first's log is let go with it).
    let early = result.recv_timeout(HANG_GUARD).ok();
    drop(disarm);
    let first = first.join().unwrap();
    assert!(first.is_ok(), "the first writer, with room: {first:?}");
    let second = early.unwrap_or_else(|| result.recv_timeout(HANG_GUARD).unwrap());
    assert!(
        matches!(
            second,
            Err(cleave::Error::NoSpace {
                cause: cleave::NoSpaceCause::Budget { .. },
                ..
            })
        ),
        "{second:?}"
    );
    let grown = db.space() - before;
    assert!(
        grown < BIG as u64 + BIG as u64 / 2,
        "{grown} bytes: the refused writer's record stayed on disk"
    );
}
