//! Crash test: a child process writes with `sync = true` and reports each
//! acknowledged operation; the parent kills it with SIGKILL at random
//! moments, reopens, and checks that every acknowledged write is there and
//! nothing else is. `CLEAVE_CRASH_CYCLES` sets the number of kill cycles.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use cleave::{Db, Options, ReadOptions, WriteOptions};
use rand::{Rng, SeedableRng};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:010}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let len = 50 + (i * 37 % 3000) as usize;
    let stem = format!("value-{i}-");
    stem.bytes().cycle().take(len.max(stem.len())).collect()
}

fn options() -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 64 << 10,
        target_file_size_base: 64 << 10,
        max_bytes_for_level_base: 256 << 10,
        level0_file_num_compaction_trigger: 2,
        ..Options::default()
    }
}

/// The child: writes until killed. Run only by `crash_kill_loop`.
#[test]
#[ignore]
fn crash_child() {
    let Ok(dir) = std::env::var("CLEAVE_CRASH_DIR") else {
        return;
    };
    let start: u64 = std::env::var("CLEAVE_CRASH_START")
        .unwrap()
        .parse()
        .unwrap();
    let db = Db::open(&dir, options()).unwrap();
    let wo = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for i in start.. {
        if i % 7 == 3 && i >= start + 5 {
            db.delete(&wo, &key(i - 5)).unwrap();
            writeln!(out, "ack D {}", i - 5).unwrap();
        }
        db.put(&wo, &key(i), &value(i)).unwrap();
        writeln!(out, "ack P {i}").unwrap();
        out.flush().unwrap();
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Present,
    Absent,
    /// In flight at the kill: either is acceptable.
    Either,
}

#[test]
fn crash_kill_loop() {
    let cycles: u64 = std::env::var("CLEAVE_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut expect: BTreeMap<u64, Expect> = BTreeMap::new();
    let mut next = 0u64;
    let mut total_acked = 0u64;
    for cycle in 0..cycles {
        let mut child = Command::new(&exe)
            .args([
                "crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CLEAVE_CRASH_DIR", &dir)
            .env("CLEAVE_CRASH_START", next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..400)));
        child.kill().unwrap();
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        let mut last_put = None;
        // The test harness prints its own text too, on the same line as
        // the first acknowledgement: ours start at "ack ".
        for line in lines
            .iter()
            .filter_map(|l| l.find("ack ").map(|p| &l[p + 4..]))
        {
            let (op, i) = line.split_once(' ').unwrap();
            let i: u64 = i.parse().unwrap();
            match op {
                "P" => {
                    expect.insert(i, Expect::Present);
                    last_put = Some(i);
                }
                "D" => {
                    expect.insert(i, Expect::Absent);
                }
                other => panic!("unexpected line {other}"),
            }
            total_acked += 1;
        }
        // The operation after the last acknowledged one may or may not
        // have happened: the put of `n`, or the delete that precedes it.
        let n = last_put.map_or(next, |p| p + 1);
        expect.insert(n, Expect::Either);
        if n % 7 == 3 && n >= next + 5 {
            expect.insert(n - 5, Expect::Either);
        }
        verify(&dir, &mut expect, cycle);
        next = n + 1;
    }
    assert!(
        total_acked > cycles,
        "the child acknowledged too few writes to test anything"
    );
}

/// Reopens and checks every key; in-flight outcomes are then fixed.
fn verify(dir: &Path, expect: &mut BTreeMap<u64, Expect>, cycle: u64) {
    let db = Db::open(dir, options()).unwrap();
    let ro = ReadOptions::new();
    for (&i, e) in expect.iter_mut() {
        let got = db.get(&ro, &key(i)).unwrap();
        if let Some(v) = &got {
            assert_eq!(
                v,
                &value(i),
                "cycle {cycle}: key {i} holds a value never written"
            );
        }
        match *e {
            Expect::Present => assert!(got.is_some(), "cycle {cycle}: acknowledged put {i} lost"),
            Expect::Absent => assert!(got.is_none(), "cycle {cycle}: acknowledged delete {i} lost"),
            Expect::Either => {}
        }
        *e = if got.is_some() {
            Expect::Present
        } else {
            Expect::Absent
        };
    }
    // Nothing beyond what was written may appear.
    let mut it = db.iter(&ro);
    it.seek_to_first().unwrap();
    while it.valid() {
        let k = std::str::from_utf8(it.key()).unwrap();
        let i: u64 = k.trim_start_matches("key").parse().unwrap();
        assert_eq!(
            expect.get(&i),
            Some(&Expect::Present),
            "cycle {cycle}: unexpected key {k}"
        );
        it.next().unwrap();
    }
    it.status().unwrap();
    drop(it);
    // Every record of every live file checks out, and a value file a
    // killed flush left behind unnamed is gone: each on disk is live.
    let report = db.verify();
    assert!(report.is_ok(), "{report}");
    let on_disk = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "vf")
        })
        .count();
    assert_eq!(
        db.space_report().unwrap().value_files,
        on_disk,
        "cycle {cycle}: an orphan value file survived the reopen"
    );
    db.close().unwrap();
}
