//! The crash loop: start the writer, kill it with SIGKILL at a random
//! moment, reopen the database, check every key against the expected
//! state and the whole database with `Db::verify`, settle the state to
//! what was found, and go on.

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cleave::{Db, DbIterator, ReadOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::config::{self, Mode};
use crate::judge::{judge, judge_counter};
use crate::state::{Counter, Durable, Expected, Slot, PENDING_DELETE};
use crate::values::{
    counter_key, counter_total, effective, key, parse_counter, parse_key, value_id, write_of, Write,
};

pub struct DriverArgs {
    /// Holds the database, the expected state and the writer's stderr.
    pub dir: PathBuf,
    pub duration: Duration,
    /// Cycles take the modes in turn.
    pub modes: Vec<Mode>,
    pub threads: usize,
    pub keys: u32,
    pub seed: u64,
    /// The writer is killed this long after it starts (uniform).
    pub kill_after: (Duration, Duration),
}

/// What the loop did, for the report and for `docs/reliability.md`.
#[derive(Debug, Default)]
pub struct Summary {
    pub cycles: u64,
    pub cycles_per_mode: [u64; 3],
    pub acked_writes: u64,
    pub keys_verified: u64,
    /// Counter totals checked after kills, and the largest one seen.
    pub counters_verified: u64,
    pub largest_total: u64,
    /// Writes in flight at a kill, and how many of them survived.
    pub in_flight: u64,
    pub in_flight_applied: u64,
    /// Keys whose acknowledged write, made without a WAL after the last
    /// completed flush, was lost at the kill (as that mode allows).
    pub unflushed_lost: u64,
    pub handles_resolved: u64,
    pub records_checked: u64,
    /// Checkpoints the writers took, opened and checked.
    pub checkpoints: u64,
    pub elapsed: Duration,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [s, a, n] = self.cycles_per_mode;
        write!(
            f,
            "{} kill cycles (sync {s}, async {a}, nowal {n}) in {:.0} s; {} writes acknowledged; \
             {} keys verified; {} counter totals verified (up to {}); {} writes in flight at a kill, {} of them applied; \
             {} keys lost unflushed writes without a WAL, as allowed; verify resolved {} value handles and checked {} value records; {} checkpoints checked; lost: 0",
            self.cycles,
            self.elapsed.as_secs_f64(),
            self.acked_writes,
            self.keys_verified,
            self.counters_verified,
            self.largest_total,
            self.in_flight,
            self.in_flight_applied,
            self.unflushed_lost,
            self.handles_resolved,
            self.records_checked,
            self.checkpoints
        )
    }
}

/// Starts `writer` (its stderr in `dir`), kills it with SIGKILL at a
/// random moment within `kill_after`, and fails if it stopped by itself.
pub fn kill_at_random(
    mut writer: Command,
    dir: &Path,
    kill_after: (Duration, Duration),
    rng: &mut StdRng,
    label: &str,
) -> Result<()> {
    let stderr_path = dir.join("writer.stderr");
    let mut child = writer
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&stderr_path)?)
        .spawn()
        .context("starting the writer")?;
    let (lo, hi) = kill_after;
    std::thread::sleep(rng.gen_range(lo..=hi));
    if let Some(status) = child.try_wait()? {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        bail!("{label}: the writer stopped by itself ({status}):\n{stderr}");
    }
    child.kill().context("killing the writer")?;
    child.wait()?;
    Ok(())
}

pub fn run(args: &DriverArgs) -> Result<Summary> {
    ensure!(!args.modes.is_empty(), "no mode to run");
    std::fs::create_dir_all(&args.dir)?;
    let db_dir = args.dir.join("db");
    let state = args.dir.join("expected-state");
    if !state.exists() {
        Expected::new(args.keys, args.seed).save(&state)?;
    }
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut summary = Summary::default();
    let start = Instant::now();
    let mut acked_before = Expected::load(&state)?.acked_writes;
    while start.elapsed() < args.duration {
        let cycle = summary.cycles;
        let mode = args.modes[cycle as usize % args.modes.len()];
        let variant = args.seed ^ cycle.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut writer = Command::new(std::env::current_exe()?);
        writer
            .arg("run")
            .arg("--db")
            .arg(&db_dir)
            .arg("--state")
            .arg(&state)
            .args(["--mode", &mode.to_string()])
            .args(["--threads", &args.threads.to_string()])
            .args(["--variant", &variant.to_string()])
            .args(["--seed", &rng.gen::<u64>().to_string()]);
        let label = format!("cycle {cycle} ({mode})");
        kill_at_random(writer, &args.dir, args.kill_after, &mut rng, &label)?;

        let mut expected = Expected::load(&state)?;
        let checked = check(&db_dir, mode, variant, &expected)
            .with_context(|| format!("cycle {cycle} ({mode}), database {}", db_dir.display()))?;
        summary.cycles += 1;
        summary.cycles_per_mode[Mode::ALL.iter().position(|&m| m == mode).unwrap_or(0)] += 1;
        summary.acked_writes += expected.acked_writes - acked_before;
        summary.keys_verified += u64::from(expected.keys());
        summary.counters_verified += checked.totals.len() as u64;
        summary.largest_total = checked
            .totals
            .iter()
            .copied()
            .fold(summary.largest_total, u64::max);
        summary.in_flight += checked.in_flight;
        summary.in_flight_applied += checked.in_flight_applied;
        summary.unflushed_lost += checked.unflushed_lost;
        summary.handles_resolved += checked.handles;
        summary.records_checked += checked.records;
        acked_before = expected.acked_writes;
        settle(&mut expected, &checked.found, &checked.totals);
        expected.save(&state)?;
        eprintln!(
            "cycle {cycle} ({mode}): {} writes acknowledged so far; {} in flight at the kill, {} \
             applied; {} unflushed lost; ok",
            expected.acked_writes,
            checked.in_flight,
            checked.in_flight_applied,
            checked.unflushed_lost
        );
    }
    summary.elapsed = start.elapsed();
    summary.checkpoints = std::fs::read_to_string(crate::worker::checkpoints_log(&state))
        .map_or(0, |log| log.lines().count() as u64);
    Ok(summary)
}

#[derive(Debug)]
struct Checked {
    /// The value id each key holds (0: absent).
    found: Vec<u32>,
    /// Each counter's total.
    totals: Vec<u64>,
    in_flight: u64,
    in_flight_applied: u64,
    unflushed_lost: u64,
    handles: u64,
    records: u64,
}

/// Reopens the database and checks it against `expected`.
fn check(db_dir: &Path, mode: Mode, variant: u64, expected: &Expected) -> Result<Checked> {
    let db = Db::open(db_dir, config::options(variant)).context("reopening")?;
    let ro = ReadOptions::new();
    let mut found = Vec::with_capacity(expected.slots.len());
    let mut problems = Vec::new();
    let (mut in_flight, mut in_flight_applied, mut unflushed_lost) = (0, 0, 0);
    for (k, (slot, durable)) in expected.slots.iter().zip(&expected.durable).enumerate() {
        let k = k as u32;
        let got = db.get(&ro, &key(k))?;
        let id = match &got {
            None => 0,
            Some(v) => value_id(expected.seed, k, v)
                .with_context(|| format!("key {k} holds {} bytes never written to it", v.len()))?,
        };
        if let Err(why) = judge(mode, slot, durable, expected.durable_epoch, id) {
            problems.push(format!("key {k}: {why}"));
        }
        if slot.pending != 0 {
            in_flight += 1;
            let applied = if slot.pending == PENDING_DELETE {
                id == 0 && slot.acked != 0
            } else {
                id == slot.pending
            };
            in_flight_applied += u64::from(applied);
        } else if effective(id) != effective(slot.acked) {
            unflushed_lost += 1;
        }
        // What scans must agree with: a tomb reads as absent.
        found.push(effective(id));
    }
    let mut totals = Vec::with_capacity(expected.counters.len());
    for (c, (counter, &durable)) in expected
        .counters
        .iter()
        .zip(&expected.durable_counters)
        .enumerate()
    {
        let c = c as u32;
        let total = match db.get(&ro, &counter_key(c))? {
            None => 0,
            Some(v) => counter_total(c, &v)?,
        };
        if let Err(why) = judge_counter(mode, counter, durable, total) {
            problems.push(format!("counter {c}: {why}"));
        }
        totals.push(total);
    }
    if !problems.is_empty() {
        let shown = problems.len().min(20);
        bail!(
            "{} keys are wrong after the crash:\n  {}",
            problems.len(),
            problems[..shown].join("\n  ")
        );
    }
    // An iterator sees what the gets saw, and nothing else.
    let mut it = db.iter(&ro);
    it.seek_to_first()?;
    let mut seen = 0usize;
    while it.valid() {
        if let Some(c) = parse_counter(it.key()) {
            let total = counter_total(c, it.value()?)?;
            ensure!(
                totals.get(c as usize) == Some(&total),
                "a scan returned total {total} for counter {c}, a get {:?}",
                totals.get(c as usize)
            );
            it.next()?;
            continue;
        }
        seen += usize::from(check_scanned(&it, expected, &found, "a scan")?);
        it.next()?;
    }
    it.status()?;
    drop(it);
    ensure!(
        seen == found.iter().filter(|&&f| f != 0).count(),
        "a scan returned {seen} keys, gets found {}",
        found.iter().filter(|&&f| f != 0).count()
    );
    check_prefix_scans(&db, expected, &found)?;
    let report = db.verify();
    ensure!(report.is_ok(), "cleave verify:\n{report}");
    db.close()?;
    Ok(Checked {
        found,
        totals,
        in_flight,
        in_flight_applied,
        unflushed_lost,
        handles: report.value_handles,
        records: report.value_records,
    })
}

/// The key a scan stands on was written, and holds what its get found;
/// false for a tomb, which reads as absent and which a compaction may
/// remove between the get and the scan.
fn check_scanned(it: &DbIterator, expected: &Expected, found: &[u32], scan: &str) -> Result<bool> {
    let k = parse_key(it.key())
        .with_context(|| format!("{scan} returned a key never written: {:?}", it.key()))?;
    let id = value_id(expected.seed, k, it.value()?);
    if let Some(id) = id.filter(|&id| effective(id) == 0) {
        ensure!(
            write_of(id) == Write::Tomb,
            "{scan} returned value {id} for key {k}, which was written expired"
        );
        return Ok(false);
    }
    ensure!(
        found
            .get(k as usize)
            .is_some_and(|&f| f != 0 && Some(f) == id),
        "{scan} returned value {id:?} for key {k}, a get {:?}",
        found.get(k as usize)
    );
    Ok(true)
}

/// Scans confined to one key prefix (`config::PREFIX_LEN` bytes, a
/// hundred keys), which read only the tables whose prefix filter may hold
/// it, see what the gets saw.
fn check_prefix_scans(db: &Db, expected: &Expected, found: &[u32]) -> Result<()> {
    for group in (0..found.len()).step_by(100) {
        let first = key(group as u32);
        let prefix = &first[..config::PREFIX_LEN];
        let mut end = prefix.to_vec();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let ro = ReadOptions {
            lower_bound: Some(prefix.to_vec()),
            upper_bound: Some(end),
            ..ReadOptions::new()
        };
        let mut it = db.iter(&ro);
        it.seek_to_first()?;
        let mut seen = 0usize;
        while it.valid() {
            seen += usize::from(check_scanned(&it, expected, found, "a prefix scan")?);
            it.next()?;
        }
        it.status()?;
        let want = found
            .iter()
            .skip(group)
            .take(100)
            .filter(|&&f| f != 0)
            .count();
        ensure!(
            seen == want,
            "a scan of prefix {:?} returned {seen} keys, gets found {want}",
            String::from_utf8_lossy(prefix)
        );
    }
    Ok(())
}

/// After a check, what each key and counter holds is what the next writer
/// starts from, and it is durable (the reopen recovered it from durable
/// files).
fn settle(expected: &mut Expected, found: &[u32], totals: &[u64]) {
    expected.durable_epoch = 0;
    for ((counter, durable), &total) in expected
        .counters
        .iter_mut()
        .zip(expected.durable_counters.iter_mut())
        .zip(totals)
    {
        *counter = Counter {
            acked: total,
            pending: 0,
        };
        *durable = total;
    }
    for ((slot, durable), &id) in expected
        .slots
        .iter_mut()
        .zip(expected.durable.iter_mut())
        .zip(found)
    {
        let max_id = slot.max_id.max(id);
        *slot = Slot {
            acked: id,
            pending: 0,
            max_id,
            delete_epoch: 0,
        };
        *durable = Durable { acked: id, max_id };
    }
}

#[cfg(test)]
mod tests {
    use cleave::WriteOptions;

    use super::*;
    use crate::values::value;

    /// Keys 0..4 written with values 1 and 2 (key 3 then deleted), and the
    /// expected state that says so.
    fn setup(dir: &Path) -> Expected {
        let db = Db::open(dir, config::options(0)).unwrap();
        let mut expected = Expected::new(5, 9);
        for k in 0..4 {
            for id in 1..=2 {
                db.put(&WriteOptions::default(), &key(k), &value(9, k, id))
                    .unwrap();
            }
            expected.slots[k as usize] = Slot {
                acked: 2,
                max_id: 2,
                ..Slot::default()
            };
        }
        db.delete(&WriteOptions::default(), &key(3)).unwrap();
        expected.slots[3].acked = 0;
        for n in [5u64, 7] {
            db.merge(&WriteOptions::default(), &counter_key(0), &n.to_le_bytes())
                .unwrap();
        }
        expected.counters[0].acked = 12;
        db.close().unwrap();
        expected
    }

    #[test]
    fn a_lost_increment_fails_the_check() {
        let tmp = tempfile::tempdir().unwrap();
        let mut expected = setup(tmp.path());
        let checked = check(tmp.path(), Mode::Sync, 0, &expected).unwrap();
        assert_eq!(checked.totals[0], 12);
        expected.counters[0] = Counter {
            acked: 12,
            pending: 3,
        };
        check(tmp.path(), Mode::Async, 0, &expected).unwrap();
        expected.counters[0] = Counter {
            acked: 15,
            pending: 0,
        };
        let err = check(tmp.path(), Mode::Sync, 0, &expected).unwrap_err();
        assert!(
            format!("{err:#}").contains("counter 0: total 12"),
            "{err:#}"
        );
    }

    #[test]
    fn a_database_matching_the_state_passes() {
        let tmp = tempfile::tempdir().unwrap();
        let expected = setup(tmp.path());
        let checked = check(tmp.path(), Mode::Sync, 0, &expected).unwrap();
        assert_eq!(checked.found, vec![2, 2, 2, 0, 0]);
    }

    #[test]
    fn a_lost_write_fails_the_check() {
        let tmp = tempfile::tempdir().unwrap();
        let mut expected = setup(tmp.path());
        // The state says key 1 was acknowledged at value 3, never written
        // to the database: a lost write.
        expected.slots[1] = Slot {
            acked: 3,
            max_id: 3,
            ..Slot::default()
        };
        let err = check(tmp.path(), Mode::Async, 0, &expected).unwrap_err();
        assert!(
            format!("{err:#}").contains("key 1: holds value 2"),
            "{err:#}"
        );
        // In flight, it may be missing.
        expected.slots[1].acked = 2;
        expected.slots[1].pending = 3;
        check(tmp.path(), Mode::Async, 0, &expected).unwrap();
    }

    #[test]
    fn a_resurrected_delete_fails_the_check() {
        let tmp = tempfile::tempdir().unwrap();
        let mut expected = setup(tmp.path());
        expected.slots[2].acked = 0;
        let err = check(tmp.path(), Mode::Sync, 0, &expected).unwrap_err();
        assert!(format!("{err:#}").contains("key 2"), "{err:#}");
    }

    #[test]
    fn bytes_never_written_fail_the_check() {
        let tmp = tempfile::tempdir().unwrap();
        let expected = setup(tmp.path());
        let db = Db::open(tmp.path(), config::options(0)).unwrap();
        db.put(&WriteOptions::default(), &key(4), b"00000004:00000001:junk")
            .unwrap();
        db.close().unwrap();
        let err = check(tmp.path(), Mode::Sync, 0, &expected).unwrap_err();
        assert!(format!("{err:#}").contains("never written"), "{err:#}");
    }

    #[test]
    fn settling_makes_what_was_found_the_durable_state() {
        let mut expected = Expected::new(2, 1);
        expected.slots[0] = Slot {
            acked: 4,
            pending: PENDING_DELETE,
            max_id: 5,
            delete_epoch: 3,
        };
        expected.durable_epoch = 7;
        expected.counters[1] = Counter {
            acked: 10,
            pending: 3,
        };
        let mut totals = vec![0; expected.counters.len()];
        totals[1] = 13;
        settle(&mut expected, &[0, 0], &totals);
        assert_eq!(
            expected.counters[1],
            Counter {
                acked: 13,
                pending: 0
            }
        );
        assert_eq!(expected.durable_counters[1], 13);
        assert_eq!(
            expected.slots[0],
            Slot {
                max_id: 5,
                ..Slot::default()
            }
        );
        assert_eq!(
            expected.durable[0],
            Durable {
                acked: 0,
                max_id: 5
            }
        );
        assert_eq!(expected.durable_epoch, 0);
    }
}
