//! The log-store mode: a writer appends, trims and truncates many logical
//! logs of a `LogStore` from several threads, every operation synced, and
//! keeps what it was acknowledged in an expected-state file; the driver
//! kills it with SIGKILL, reopens the store and checks every log against
//! that file: every acknowledged append readable with its content, every
//! acknowledged trim and truncation in force, an operation in flight
//! applied whole or not at all.
//!
//! The store is set up small (64 KiB data files, a 16 KiB index budget) so
//! that sealing, index flushes, checkpoints, releases, recycling and GC all
//! run many times a second.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cleave::log_store::{LogOptions, LogStore};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MAGIC: &[u8; 8] = b"clvLOGST";
const HEADER: u64 = 16;
/// Truncations per log at most: the state keeps each one's position.
const MAX_CUTS: usize = 8;
/// A slot: last, trim, pending kind, two pending arguments, cut count,
/// then the cuts' positions.
const SLOT_WORDS: usize = 6 + MAX_CUTS;
const SLOT: u64 = (SLOT_WORDS * 8) as u64;

const NONE: u64 = 0;
const APPEND: u64 = 1;
const TRIM: u64 = 2;
const TRUNCATE: u64 = 3;

fn options() -> LogOptions {
    LogOptions {
        create_if_missing: true,
        data_file_bytes: 64 << 10,
        meta_file_bytes: 32 << 10,
        index_memory_bytes: 16 << 10,
        checkpoint_bytes: 16 << 10,
        gc_garbage_ratio: 0.5,
        ..LogOptions::default()
    }
}

/// What is known of one log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    /// The highest LSN acknowledged (0: none).
    last: u64,
    /// The trim point acknowledged.
    trim: u64,
    /// The operation in flight: `NONE`, `APPEND` (LSNs `a..=b`), `TRIM`
    /// (before `a`) or `TRUNCATE` (from `a`).
    pending: (u64, u64, u64),
    /// Truncations acknowledged, and where each cut.
    cuts: usize,
    cut_at: [u64; MAX_CUTS],
}

impl Slot {
    fn encode(&self) -> Vec<u8> {
        let mut words = vec![
            self.last,
            self.trim,
            self.pending.0,
            self.pending.1,
            self.pending.2,
            self.cuts as u64,
        ];
        words.extend_from_slice(&self.cut_at);
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn decode(b: &[u8]) -> Slot {
        let w = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i * 8..i * 8 + 8]);
            u64::from_le_bytes(x)
        };
        let mut cut_at = [0u64; MAX_CUTS];
        for (i, c) in cut_at.iter_mut().enumerate() {
            *c = w(6 + i);
        }
        Slot {
            last: w(0),
            trim: w(1),
            pending: (w(2), w(3), w(4)),
            cuts: (w(5) as usize).min(MAX_CUTS),
            cut_at,
        }
    }

    /// The truncations a record of `lsn` was written after: those that cut
    /// at or below it.
    fn version_of(&self, lsn: u64) -> usize {
        (0..self.cuts)
            .rev()
            .find(|&i| self.cut_at[i] <= lsn)
            .map_or(0, |i| i + 1)
    }
}

/// The record `lsn` of `log` written after `version` truncations.
fn record(log: u32, lsn: u64, version: usize) -> Vec<u8> {
    let unit = format!("{log}:{lsn}:{version};");
    unit.repeat(1 + (lsn % 97) as usize * 3).into_bytes()
}

struct StateFile {
    file: File,
}

impl StateFile {
    fn create(path: &Path, logs: u32) -> Result<()> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&logs.to_le_bytes());
        for _ in 0..logs {
            bytes.extend_from_slice(&Slot::default().encode());
        }
        std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
    }

    fn open(path: &Path) -> Result<(StateFile, Vec<Slot>)> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        ensure!(
            bytes.len() >= HEADER as usize && &bytes[..8] == MAGIC,
            "{} is not a log-store state",
            path.display()
        );
        let logs = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
        ensure!(
            bytes.len() as u64 == HEADER + logs as u64 * SLOT,
            "{} has the wrong size",
            path.display()
        );
        let slots = (0..logs)
            .map(|i| Slot::decode(&bytes[(HEADER + i as u64 * SLOT) as usize..]))
            .collect();
        let file = OpenOptions::new().write(true).open(path)?;
        Ok((StateFile { file }, slots))
    }

    /// One `pwrite` into the page cache: a SIGKILL does not undo it.
    fn put(&self, log: u32, slot: &Slot) -> Result<()> {
        self.file
            .write_all_at(&slot.encode(), HEADER + u64::from(log) * SLOT)
            .context("writing the expected state")
    }
}

fn log_name(log: u32) -> String {
    format!("log-{log}")
}

/// The writer: each thread owns the logs whose number is its index modulo
/// the threads, and works on them until killed.
pub fn run(store: &Path, state: &Path, threads: usize, seed: u64) -> Result<()> {
    let (file, slots) = StateFile::open(state)?;
    let logs =
        LogStore::open(store, options()).with_context(|| format!("opening {}", store.display()))?;
    let ids: Vec<_> = (0..slots.len() as u32)
        .map(|l| match logs.open_log(&log_name(l)) {
            Some(id) => Ok(id),
            None => logs.create_log(&log_name(l)),
        })
        .collect::<cleave::Result<_>>()?;
    let logs = Arc::new(logs);
    let file = Arc::new(file);
    let slots: Arc<Vec<Mutex<Slot>>> = Arc::new(slots.into_iter().map(Mutex::new).collect());
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (logs, file, slots, ids) = (logs.clone(), file.clone(), slots.clone(), ids.clone());
            std::thread::spawn(move || -> Result<()> {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(t as u64));
                let mine: Vec<u32> = (t as u32..ids.len() as u32).step_by(threads).collect();
                loop {
                    let log = mine[rng.gen_range(0..mine.len())];
                    let id = ids[log as usize];
                    let mut s = *slots[log as usize].lock();
                    let roll = rng.gen_range(0..100);
                    if roll < 85 || s.last <= s.trim {
                        let n = rng.gen_range(1..=3u64);
                        let (a, b) = (s.last + 1, s.last + n);
                        s.pending = (APPEND, a, b);
                        file.put(log, &s)?;
                        let v = s.cuts;
                        let recs: Vec<Vec<u8>> = (a..=b).map(|l| record(log, l, v)).collect();
                        let batch: Vec<(u64, &[u8])> =
                            (a..=b).zip(recs.iter().map(Vec::as_slice)).collect();
                        logs.append_batch(id, &batch)?;
                        s.last = b;
                    } else if roll < 95 || s.cuts == MAX_CUTS {
                        // Keep about 200 records a log.
                        let before = rng
                            .gen_range(s.trim..=s.last)
                            .max(s.last.saturating_sub(200));
                        s.pending = (TRIM, before, 0);
                        file.put(log, &s)?;
                        logs.trim(id, before)?;
                        s.trim = s.trim.max(before);
                    } else {
                        let from = rng.gen_range(s.trim.max(1)..=s.last);
                        s.pending = (TRUNCATE, from, 0);
                        file.put(log, &s)?;
                        logs.truncate(id, from)?;
                        s.cut_at[s.cuts] = from;
                        s.cuts += 1;
                        s.last = from - 1;
                    }
                    s.pending = (NONE, 0, 0);
                    file.put(log, &s)?;
                    *slots[log as usize].lock() = s;
                }
            })
        })
        .collect();
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => bail!("a writer thread panicked"),
        }
    }
    Ok(())
}

/// What the crash loop did.
#[derive(Debug, Default)]
pub struct Summary {
    pub cycles: u64,
    pub records_verified: u64,
    pub in_flight: u64,
    pub in_flight_applied: u64,
    pub elapsed: Duration,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "log store: {} kill cycles in {:.0} s; {} records verified; {} operations in flight at a kill, {} of them applied; lost: 0",
            self.cycles,
            self.elapsed.as_secs_f64(),
            self.records_verified,
            self.in_flight,
            self.in_flight_applied
        )
    }
}

pub struct CrashArgs {
    pub dir: PathBuf,
    pub duration: Duration,
    pub threads: usize,
    pub logs: u32,
    pub seed: u64,
    pub kill_after: (Duration, Duration),
}

/// The kill loop.
pub fn crash(args: &CrashArgs) -> Result<Summary> {
    std::fs::create_dir_all(&args.dir)?;
    let store = args.dir.join("logs");
    let state = args.dir.join("expected-state");
    if !state.exists() {
        StateFile::create(&state, args.logs)?;
    }
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut summary = Summary::default();
    let start = Instant::now();
    while start.elapsed() < args.duration {
        let cycle = summary.cycles;
        let mut writer = Command::new(std::env::current_exe()?);
        writer
            .arg("logs-run")
            .arg("--store")
            .arg(&store)
            .arg("--state")
            .arg(&state)
            .args(["--threads", &args.threads.to_string()])
            .args(["--seed", &rng.gen::<u64>().to_string()]);
        let label = format!("cycle {cycle}");
        crate::driver::kill_at_random(writer, &args.dir, args.kill_after, &mut rng, &label)?;
        verify(&store, &state, &mut summary).with_context(|| format!("cycle {cycle}"))?;
        summary.cycles += 1;
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}

/// Checks every log against the state, settles what was in flight to what
/// the store shows, and writes the state back.
fn verify(store: &Path, state: &Path, summary: &mut Summary) -> Result<()> {
    let (file, slots) = StateFile::open(state)?;
    let logs = LogStore::open(store, options())?;
    for (i, mut s) in slots.into_iter().enumerate() {
        let log = i as u32;
        let Some(id) = logs.open_log(&log_name(log)) else {
            ensure!(s.last == 0 && s.pending.0 == NONE, "log {log} is missing");
            continue;
        };
        let found_last = logs.last_lsn(id)?.unwrap_or(0);
        let found_trim = logs.trim_point(id)?;
        let (kind, a, _) = s.pending;
        if kind != NONE {
            summary.in_flight += 1;
        }
        // Resolve the operation in flight from what the store shows.
        match kind {
            APPEND if found_last > s.last => {
                let (_, _, b) = s.pending;
                ensure!(
                    found_last == b,
                    "log {log}: a batch of {a}..={b} applied in part (last {found_last})"
                );
                s.last = b;
                summary.in_flight_applied += 1;
            }
            TRIM if found_trim > s.trim => {
                s.trim = a;
                summary.in_flight_applied += 1;
            }
            TRUNCATE if found_last < s.last => {
                ensure!(
                    found_last < a,
                    "log {log}: truncation from {a} left {found_last}"
                );
                s.cut_at[s.cuts] = a;
                s.cuts += 1;
                s.last = a - 1;
                summary.in_flight_applied += 1;
            }
            _ => {}
        }
        s.pending = (NONE, 0, 0);
        ensure!(
            found_trim >= s.trim,
            "log {log}: trim point {found_trim} below the acknowledged {}",
            s.trim
        );
        ensure!(
            found_trim == s.trim,
            "log {log}: trim point {found_trim} past the acknowledged {}",
            s.trim
        );
        let mut expect = s.trim.max(1);
        for r in logs.scan(id, 0)? {
            let (lsn, data) = r?;
            ensure!(lsn == expect, "log {log}: LSN {lsn} where {expect} belongs");
            let want = record(log, lsn, s.version_of(lsn));
            ensure!(data == want, "log {log}: record {lsn} has other contents");
            expect += 1;
            summary.records_verified += 1;
        }
        ensure!(
            expect == s.last.max(s.trim.max(1) - 1) + 1,
            "log {log}: ends at {}, acknowledged up to {}",
            expect - 1,
            s.last
        );
        file.put(log, &s)?;
    }
    ensure!(
        logs.stats().maintenance_errors == 0,
        "maintenance failed: {:?}",
        logs.stats()
    );
    Ok(())
}
