//! Power cuts: random writes (some synced), flushes and compactions with power
//! losses at random moments (while background work runs). After each crash
//! the database must hold exactly the state after some prefix of the
//! acknowledged batches, and that prefix must cover every synced batch and
//! everything a completed `flush()` covered.

mod common;

use std::path::Path;

use cleave::vfs::MemFs;
use cleave::{Db, ReadOptions, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{contents, env, merge_append, random_options, Model};

const LAST: &[u8] = b"~last";

/// One update of a batch.
enum Change {
    Put(Vec<u8>),
    Delete,
    Merge(Vec<u8>),
}

/// One acknowledged batch.
type Op = Vec<(Vec<u8>, Change)>;

fn replay(ops: &[Op]) -> Model {
    let mut m = Model::new();
    for (i, op) in ops.iter().enumerate() {
        for (k, change) in op {
            match change {
                Change::Put(v) => {
                    m.insert(k.clone(), v.clone());
                }
                Change::Delete => {
                    m.remove(k);
                }
                Change::Merge(operand) => merge_append(&mut m, k.clone(), operand),
            }
        }
        m.insert(LAST.to_vec(), i.to_string().into_bytes());
    }
    m
}

fn run(seed: u64, steps: usize, unlogged: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut fs = MemFs::new();
    let dir = Path::new("/crashmodel");
    let space = rng.gen_range(20..400u32);
    let mut db = Db::open(dir, random_options(&fs, &mut rng)).unwrap();
    let mut ops: Vec<Op> = Vec::new();
    // Number of leading batches that must survive a crash.
    let mut durable = 0usize;
    let mut crashes = 0;
    // Writes without the WAL since the last flush: a crash may lose them.
    let mut pending_unlogged = false;
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=84 => {
                let mut op: Op = Vec::new();
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..6) {
                    let k = format!("k{:05}", rng.gen_range(0..space)).into_bytes();
                    let choice = rng.gen_range(0..100);
                    if choice < 65 {
                        let len = rng.gen_range(0..1500);
                        let mut v = format!("{seed}:{step}:").into_bytes();
                        v.resize(len.max(v.len()), b'a' + (step % 26) as u8);
                        b.put(&k, &v);
                        op.push((k, Change::Put(v)));
                    } else if choice < 85 {
                        b.delete(&k);
                        op.push((k, Change::Delete));
                    } else {
                        let operand = format!("{step}.{}", op.len()).into_bytes();
                        b.merge(&k, &operand);
                        op.push((k, Change::Merge(operand)));
                    }
                }
                b.put(LAST, ops.len().to_string().as_bytes());
                let sync = rng.gen_bool(0.15);
                let disable_wal = unlogged && !sync && rng.gen_bool(0.3);
                pending_unlogged |= disable_wal;
                db.write(&WriteOptions { sync, disable_wal }, b).unwrap();
                ops.push(op);
                if sync {
                    durable = ops.len();
                }
            }
            85..=88 => {
                db.flush().unwrap();
                durable = ops.len();
                pending_unlogged = false;
            }
            89..=90 => {
                let a = format!("k{:05}", rng.gen_range(0..space)).into_bytes();
                let b = format!("k{:05}", rng.gen_range(0..space)).into_bytes();
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                db.compact_range(Some(&a), Some(&b)).unwrap();
                // compact_range flushes first.
                durable = ops.len();
                pending_unlogged = false;
            }
            91..=93 => {
                let k = format!("k{:05}", rng.gen_range(0..space)).into_bytes();
                let want = replay(&ops);
                assert_eq!(
                    db.get(&ReadOptions::new(), &k).unwrap().as_ref(),
                    want.get(&k),
                    "{ctx}: get"
                );
            }
            94..=95 => {
                // A clean close keeps everything, unlogged writes included.
                db.close().unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
                db = Db::open(dir, random_options(&fs, &mut rng)).unwrap();
                let want = replay(&ops);
                let got = contents(&db);
                assert!(got == want, "{ctx}: state after a clean close differs");
                durable = ops.len();
                pending_unlogged = false;
            }
            _ if pending_unlogged => {}
            _ => {
                // Power loss now, maybe tearing unsynced tails.
                let torn = rng.gen_bool(0.5);
                let mut r2 = StdRng::seed_from_u64(rng.gen());
                let crashed = if torn {
                    fs.crash_clone_keeping(|n| if n == 0 { 0 } else { r2.gen_range(0..=n) })
                } else {
                    fs.crash_clone()
                };
                drop(db);
                fs = crashed;
                crashes += 1;
                db = Db::open(dir, random_options(&fs, &mut rng))
                    .unwrap_or_else(|e| panic!("{ctx}: reopen after crash: {e}"));
                let got = contents(&db);
                let prefix = match got.get(LAST) {
                    Some(v) => std::str::from_utf8(v).unwrap().parse::<usize>().unwrap() + 1,
                    None => 0,
                };
                assert!(
                    prefix >= durable,
                    "{ctx}: crash lost durable batches: recovered {prefix}, durable {durable}"
                );
                assert!(prefix <= ops.len(), "{ctx}: recovered more than written");
                ops.truncate(prefix);
                let want = replay(&ops);
                if got != want {
                    let diff: Vec<_> = want
                        .iter()
                        .filter(|(k, v)| got.get(*k) != Some(*v))
                        .map(|(k, _)| String::from_utf8_lossy(k).to_string())
                        .chain(
                            got.keys()
                                .filter(|k| !want.contains_key(*k))
                                .map(|k| format!("extra {}", String::from_utf8_lossy(k))),
                        )
                        .take(10)
                        .collect();
                    panic!("{ctx}: recovered state is not the prefix {prefix}: {diff:?}");
                }
                durable = ops.len();
            }
        }
    }
    drop(db);
    assert!(crashes > 0);
}

#[test]
fn power_cut_recovers_a_prefix() {
    let seeds = env("CLEAVE_POWER_CUT_SEEDS", 6);
    let steps = env("CLEAVE_POWER_CUT_STEPS", 3000) as usize;
    let base = env("CLEAVE_POWER_CUT_SEED", 0x5eed);
    for s in 0..seeds {
        run(base + s, steps, false);
    }
}

#[test]
fn power_cut_recovers_a_prefix_with_unlogged_writes() {
    let seeds = env("CLEAVE_POWER_CUT_SEEDS", 6);
    let steps = env("CLEAVE_POWER_CUT_STEPS", 3000) as usize;
    let base = env("CLEAVE_POWER_CUT_SEED", 0x5eed);
    for s in 0..seeds {
        run(base + s, steps, true);
    }
}
