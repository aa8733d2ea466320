//! The files a database keeps: compaction results, deferred deletion of
//! obsolete files, orphan removal, manifest rotation, write stalls.

use std::path::Path;
use std::sync::Arc;

use cleave::vfs::{Fs, MemFs};
use cleave::{Db, Options, ReadOptions, WriteOptions};

const DIR: &str = "/db";

fn options(fs: &MemFs) -> Options {
    Options {
        // No background job but those the writes cause: a range merge
        // starting once the test pauses would change what it measures.
        range_merge_sorted_runs: 0,
        create_if_missing: true,
        fs: Arc::new(fs.clone()),
        write_buffer_size: 16 << 10,
        target_file_size_base: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    }
}

fn files(fs: &MemFs, ext: &str) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(ext))
        .collect();
    v.sort();
    v
}

fn level_files(db: &Db, level: usize) -> usize {
    db.property(&format!("cleave.num-files-at-level{level}"))
        .unwrap()
        .parse()
        .unwrap()
}

fn fill(db: &Db, n: usize, tag: &str) {
    for i in 0..n {
        let v = format!("{tag}-{i}-").repeat(8);
        db.put(
            &WriteOptions::default(),
            format!("key{i:05}").as_bytes(),
            v.as_bytes(),
        )
        .unwrap();
    }
}

#[test]
fn compact_range_moves_everything_out_of_l0_and_drops_tombstones() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    fill(&db, 2000, "a");
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(level_files(&db, 0), 0);
    let levels_with_data = (0..7).filter(|&l| level_files(&db, l) > 0).count();
    assert_eq!(
        levels_with_data,
        1,
        "{}",
        db.property("cleave.stats").unwrap()
    );
    for i in 0..2000 {
        db.delete(&WriteOptions::default(), format!("key{i:05}").as_bytes())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    let stats = db.stats();
    assert_eq!(
        stats.sstable_bytes(),
        0,
        "tombstones at the bottom must go: {}",
        stats.to_text()
    );
    assert!(files(&fs, ".sst").is_empty(), "{:?}", files(&fs, ".sst"));
}

#[test]
fn obsolete_files_wait_for_readers_holding_their_version() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    fill(&db, 1000, "a");
    db.flush().unwrap();
    let before = files(&fs, ".sst");
    let mut it = db.iter(&ReadOptions::new());
    it.seek_to_first().unwrap();
    fill(&db, 1000, "b");
    db.compact_range(None, None).unwrap();
    // The iterator's Version still names the old files: they must exist,
    // and it must still read the old values.
    let now = files(&fs, ".sst");
    for f in &before {
        assert!(now.contains(f), "{f} deleted while a reader holds it");
    }
    let mut n = 0;
    while it.valid() {
        assert!(
            it.value().unwrap().starts_with(b"a-"),
            "iterator saw a later write"
        );
        it.next().unwrap();
        n += 1;
    }
    it.status().unwrap();
    assert_eq!(n, 1000);
    drop(it);
    // The next background job (or close) deletes them.
    fill(&db, 10, "c");
    db.flush().unwrap();
    db.close().unwrap();
    let after = files(&fs, ".sst");
    for f in &before {
        assert!(!after.contains(f), "{f} outlived every reader");
    }
}

#[test]
fn orphans_are_removed_on_open() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    fill(&db, 500, "a");
    db.flush().unwrap();
    db.close().unwrap();
    for name in ["999990.sst", "999991.tmp", "MANIFEST-999992", "000001.wal"] {
        let mut f = fs
            .create(&Path::new(DIR).join(name), Default::default())
            .unwrap();
        f.append(b"leftover").unwrap();
        f.sync().unwrap();
    }
    fs.create(&Path::new(DIR).join("user-notes.txt"), Default::default())
        .unwrap();
    let db = Db::open(DIR, options(&fs)).unwrap();
    let names = fs.list(Path::new(DIR)).unwrap();
    for name in ["999990.sst", "999991.tmp", "MANIFEST-999992", "000001.wal"] {
        assert!(
            !names.contains(&name.to_string()),
            "orphan {name} survived open"
        );
    }
    assert!(
        names.contains(&"user-notes.txt".to_string()),
        "a file not ours was removed"
    );
    assert!(db.get(&ReadOptions::new(), b"key00007").unwrap().is_some());
}

#[test]
fn manifest_rotates_and_reopens() {
    let fs = MemFs::new();
    let opts = || Options {
        max_manifest_file_size: 4 << 10,
        ..options(&fs)
    };
    let db = Db::open(DIR, opts()).unwrap();
    let mut manifests_seen = std::collections::BTreeSet::new();
    for round in 0..300 {
        fill(&db, 40, &format!("r{round}"));
        db.flush().unwrap();
        manifests_seen.extend(
            files(&fs, "")
                .into_iter()
                .filter(|n| n.starts_with("MANIFEST-")),
        );
    }
    assert!(
        manifests_seen.len() > 1,
        "the manifest never rotated: {manifests_seen:?}"
    );
    db.close().unwrap();
    let live: Vec<_> = files(&fs, "")
        .into_iter()
        .filter(|n| n.starts_with("MANIFEST-"))
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    let db = Db::open(DIR, opts()).unwrap();
    assert!(db
        .get(&ReadOptions::new(), b"key00039")
        .unwrap()
        .unwrap()
        .starts_with(b"r299-"));
}

#[test]
fn writes_stop_when_memtables_pile_up_and_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(
        tmp.path(),
        Options {
            create_if_missing: true,
            write_buffer_size: 4 << 10,
            max_write_buffer_number: 2,
            max_background_jobs: 1,
            level0_file_num_compaction_trigger: 2,
            level0_slowdown_writes_trigger: 3,
            level0_stop_writes_trigger: 4,
            ..Options::default()
        },
    )
    .unwrap();
    let value = vec![b'v'; 1000];
    for i in 0..3000 {
        db.put(
            &WriteOptions::default(),
            format!("key{i:05}").as_bytes(),
            &value,
        )
        .unwrap();
    }
    let s = db.stats();
    // Each flush fsyncs, so a writer filling 4 KiB memtables outruns it.
    assert!(
        s.stopped_writes > 0 && s.stall_micros > 0,
        "{}",
        s.to_text()
    );
    db.wait_for_compactions().unwrap();
    for i in (0..3000).step_by(97) {
        assert!(db
            .get(&ReadOptions::new(), format!("key{i:05}").as_bytes())
            .unwrap()
            .is_some());
    }
}

/// The child half of `lock_excludes_another_process`.
#[test]
#[ignore]
fn lock_child() {
    let Ok(dir) = std::env::var("CLEAVE_LOCK_DIR") else {
        return;
    };
    match Db::open(&dir, Options::default()) {
        Err(cleave::Error::Locked { .. }) => println!("child: locked"),
        Err(e) => println!("child: other error {e}"),
        Ok(_) => println!("child: opened"),
    }
}

#[test]
fn lock_excludes_another_process() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(
        tmp.path(),
        Options {
            create_if_missing: true,
            ..Options::default()
        },
    )
    .unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "lock_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CLEAVE_LOCK_DIR", tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("child: locked"), "{stdout}");
    db.close().unwrap();
}

/// Regression: compact_range returned at once when L0 alone held data.
#[test]
fn compact_range_compacts_l0_when_it_alone_holds_data() {
    let fs = MemFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    db.put(&WriteOptions::default(), b"a", b"1").unwrap();
    db.flush().unwrap();
    assert_eq!(level_files(&db, 0), 1);
    db.compact_range(None, None).unwrap();
    assert_eq!(
        level_files(&db, 0),
        0,
        "{}",
        db.property("cleave.stats").unwrap()
    );
    assert_eq!(
        db.get(&ReadOptions::new(), b"a").unwrap().as_deref(),
        Some(&b"1"[..])
    );
}

/// With `recycle_wal`, on the real file system: obsolete WALs are written
/// over rather than deleted, at most `recycle_wal` wait at once, and the
/// database reopens with and without recycling holding every write.
#[test]
fn recycled_wals_on_the_os_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = |recycle_wal| Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        range_merge_sorted_runs: 0,
        recycle_wal,
        ..Options::default()
    };
    let sync = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    let value = |i: u32, round: u32| format!("{round}-{i}-").repeat(40).into_bytes();
    let key = |i: u32| format!("key{i:06}").into_bytes();
    let wal_sizes = || -> Vec<u64> {
        std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".wal"))
            .map(|e| e.metadata().unwrap().len())
            .collect()
    };
    for (round, recycle) in [(0, 2), (1, 0), (2, 3)] {
        let db = Db::open(tmp.path(), opts(recycle)).unwrap();
        for i in 0..2000 {
            if round > 0 {
                assert_eq!(
                    db.get(&ReadOptions::new(), &key(i)).unwrap(),
                    Some(value(i, round - 1))
                );
            }
            db.put(&sync, &key(i), &value(i, round)).unwrap();
        }
        let recycled = db.stats().wals_recycled;
        assert_eq!(
            recycled > 5,
            recycle > 0,
            "round {round}: {recycled} recycled"
        );
        // The live WALs (one per memtable) and those waiting for reuse.
        let sizes = wal_sizes();
        assert!(sizes.len() <= recycle + 3, "round {round}: {sizes:?}");
        db.close().unwrap();
    }
    let db = Db::open(tmp.path(), opts(0)).unwrap();
    for i in 0..2000 {
        assert_eq!(
            db.get(&ReadOptions::new(), &key(i)).unwrap(),
            Some(value(i, 2))
        );
    }
}
