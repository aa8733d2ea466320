//! `Db::open_read_only`: writes nothing to the directory (counted through
//! the fault-injecting `Fs`), replays the WALs into memory, refuses writes
//! with `Error::ReadOnly`, and works beside another process that has the
//! database open and writes, flushes, compacts and collects garbage: each
//! open shows one point in time, or fails with a typed error naming the
//! file that went away. On a read-only mount: `tests/full_disk.rs`.

#[path = "common/faults.rs"]
mod setup;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs};
use cleave::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions, WriteState};

use setup::*;

/// Every operation that changes a file system.
const WRITING_OPS: [FaultOp; 7] = [
    FaultOp::Create,
    FaultOp::Append,
    FaultOp::Sync,
    FaultOp::Rename,
    FaultOp::Remove,
    FaultOp::SyncDir,
    FaultOp::Link,
];

/// Every file of `fs`'s database directory with its bytes.
fn image(fs: &dyn Fs) -> BTreeMap<String, Vec<u8>> {
    let mut names = fs.list(Path::new(DIR)).unwrap();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let f = fs
                .open(&Path::new(DIR).join(&n), Default::default())
                .unwrap();
            let bytes = f.read_at(0, f.len() as usize).unwrap();
            (n, bytes)
        })
        .collect()
}

fn scan(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().unwrap().to_vec());
        it.next().unwrap();
    }
    it.status().unwrap();
    out
}

/// A database left by a process that died: sstables, value files, value
/// logs (WAL-time separation) and writes only its WALs hold. A read-only
/// open answers with all of it, writes not a byte, and refuses every
/// write.
#[test]
fn a_read_only_open_writes_nothing_and_reads_everything() {
    let mem = MemFs::new();
    let opts = |fs: Arc<dyn Fs>| Options {
        // Some values go to value logs as they are written.
        big_value_threshold: 400,
        ..options(fs)
    };
    let db = Db::open(DIR, opts(Arc::new(mem.clone()))).unwrap();
    let mut oracle = Oracle::default();
    oracle.put(&db, 0..300, 0, &SYNC);
    db.flush().unwrap();
    oracle.put(&db, 0..100, 1, &SYNC);
    db.compact_range(None, None).unwrap();
    // In the WAL (and value logs) only.
    oracle.put(&db, 100..150, 2, &SYNC);
    let died = mem.process_crash_clone();
    drop(db);
    let before = image(&died);

    let fs = FaultFs::new(Arc::new(died.clone()));
    let db = Db::open_read_only(DIR, opts(Arc::new(fs.clone()))).unwrap();
    check(&db, &oracle, "read-only");
    assert_eq!(db.write_state(), WriteState::OpenedReadOnly);
    let snapshot = db.snapshot();
    let mut r = ReadOptions::new();
    r.snapshot = Some(&snapshot);
    assert_eq!(db.get(&r, &k(120)).unwrap(), Some(v(120, 2)));
    drop(snapshot);
    assert!(db.stats().to_text().contains("opened read-only"));
    db.space_report().unwrap();
    let report = db.verify();
    assert!(report.is_ok(), "{:?}", report.problems);
    let refused: Vec<Error> = vec![
        db.put(&SYNC, b"k", b"v").unwrap_err(),
        db.delete(&ASYNC, &k(1)).unwrap_err(),
        db.write(&NO_WAL, WriteBatch::new()).unwrap_err(),
        db.flush().unwrap_err(),
        db.compact_range(None, None).unwrap_err(),
        db.gc_now().unwrap_err(),
        db.sync_wal().unwrap_err(),
        db.resume().unwrap_err(),
        db.checkpoint("/elsewhere").unwrap_err(),
    ];
    for e in &refused {
        assert!(
            matches!(e, Error::ReadOnly { dir, .. } if dir == Path::new(DIR)),
            "{e:?}"
        );
    }
    db.close().unwrap();
    for op in WRITING_OPS {
        assert_eq!(fs.count(op), 0, "{op:?} during a read-only open");
    }
    assert_eq!(image(&died), before, "the directory changed");
    // No lock taken: a writer opens beside it, and one read-only open
    // beside the writer.
    let reader = Db::open_read_only(DIR, opts(Arc::new(died.clone()))).unwrap();
    let writer = Db::open(DIR, opts(Arc::new(died.clone()))).unwrap();
    let second = Db::open_read_only(DIR, opts(Arc::new(died.clone()))).unwrap();
    check(&reader, &oracle, "beside a writer");
    check(&second, &oracle, "opened beside a writer");
    drop(writer);
}

/// A read-only open of a directory with no database fails, and creates
/// nothing, whatever `create_if_missing` says.
#[test]
fn a_read_only_open_creates_nothing() {
    let mem = MemFs::new();
    let err = Db::open_read_only(DIR, options(Arc::new(mem.clone()))).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(!mem.exists(Path::new(DIR)).unwrap());
    mem.create_dir_all(Path::new(DIR)).unwrap();
    let err = Db::open_read_only(DIR, options(Arc::new(mem.clone()))).unwrap_err();
    assert!(err.to_string().contains("no database"), "{err}");
    assert!(mem.list(Path::new(DIR)).unwrap().is_empty());
}

/// The writer: run as a child process of [`beside_a_writer_process`]
/// (it does nothing in a plain test run). Writes rounds of every key in
/// one batch each, so that any one point in time holds one round
/// throughout; flushes, compacts and collects garbage between them, until
/// the stop file appears or its time is up.
#[test]
#[ignore = "the writer process of beside_a_writer_process"]
fn writer_process() {
    let Ok(dir) = std::env::var("CLEAVE_READ_ONLY_WRITER_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let db = Db::open(&dir, writer_options()).unwrap();
    let stop = dir.with_extension("stop");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut round = 0;
    while !stop.exists() && Instant::now() < deadline {
        let mut batch = WriteBatch::new();
        for i in 0..WRITER_KEYS {
            batch.put(&k(i), &round_value(i, round));
        }
        db.write(&WriteOptions::default(), batch).unwrap();
        match round % 10 {
            3 => db.flush().unwrap(),
            6 => db.compact_range(None, None).unwrap(),
            9 => drop(db.gc_with_ratio(0.2).unwrap()),
            _ => {}
        }
        round += 1;
    }
    db.close().unwrap();
}

const WRITER_KEYS: usize = 200;

fn writer_options() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        target_file_size_base: 64 << 10,
        min_value_size: 256,
        value_file_size: 64 << 10,
        big_value_threshold: 2 << 10,
        enable_gc: true,
        ..Options::default()
    }
}

/// Key `i`'s value in round `round`: the round in its first 8 bytes;
/// inline, separated at flush, or in a value log by `i`.
fn round_value(i: usize, round: u64) -> Vec<u8> {
    let len = [40, 600, 3000][i % 3];
    let mut v = round.to_le_bytes().to_vec();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// Opens read-only again and again beside a writer process (a child:
/// [`writer_process`]) and scans: every open that succeeds shows one round
/// throughout, never an older round than an earlier open did, each value
/// whole; every open or scan that fails says which file went away.
#[test]
fn beside_a_writer_process() {
    let tmp = std::env::temp_dir().join(format!("cleave-read-only-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let dir = tmp.join("db");
    // The first round exists before the first read-only open.
    drop(Db::open(&dir, writer_options()).unwrap());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["writer_process", "--exact", "--ignored", "--nocapture"])
        .env("CLEAVE_READ_ONLY_WRITER_DIR", &dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let opts = Options {
        create_if_missing: false,
        ..writer_options()
    };
    let (mut views, mut failures, mut last_round) = (0, 0, 0u64);
    let mut kinds = BTreeMap::<String, usize>::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) || views < 5 {
        assert!(start.elapsed() < Duration::from_secs(120), "no view");
        let seen = Db::open_read_only(&dir, opts.clone()).and_then(|db| {
            let mut it = db.iter(&ReadOptions::new());
            it.seek_to_first()?;
            let mut seen = BTreeMap::new();
            while it.valid() {
                seen.insert(it.key().to_vec(), it.value()?.to_vec());
                it.next()?;
            }
            it.status()?;
            Ok(seen)
        });
        match seen {
            Ok(seen) if seen.is_empty() => {}
            Ok(seen) => {
                assert_eq!(seen.len(), WRITER_KEYS, "a view lost keys");
                let round = u64::from_le_bytes(seen[&k(0)][..8].try_into().unwrap());
                for (i, (key, value)) in seen.iter().enumerate() {
                    assert_eq!(key, &k(i));
                    assert_eq!(
                        value,
                        &round_value(i, round),
                        "key {i} not of round {round}"
                    );
                }
                assert!(round >= last_round, "round {round} after {last_round}");
                last_round = round;
                views += 1;
            }
            Err(e) => {
                let names_a_file = match &e {
                    Error::Io { path, .. } | Error::Corruption { file: path, .. } => {
                        path.starts_with(&dir)
                    }
                    _ => false,
                };
                assert!(names_a_file, "{e:?}");
                let kind = match &e {
                    Error::Io { op, source, .. } => format!("{op}: {:?}", source.kind()),
                    other => other
                        .to_string()
                        .split(':')
                        .next_back()
                        .unwrap_or("")
                        .to_string(),
                };
                *kinds.entry(kind).or_default() += 1;
                failures += 1;
            }
        }
    }
    std::fs::write(dir.with_extension("stop"), b"").unwrap();
    assert!(child.wait().unwrap().success(), "the writer failed");
    eprintln!("{views} views up to round {last_round}, {failures} typed failures: {kinds:?}");
    let db = Db::open_read_only(&dir, opts).unwrap();
    assert_eq!(scan(&db).len(), WRITER_KEYS);
    drop(db);
    std::fs::remove_dir_all(&tmp).unwrap();
}
