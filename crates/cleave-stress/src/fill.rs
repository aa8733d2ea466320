//! The full-disk loop: on a small ext4 file system of its own (a loop
//! device; root is needed), writers fill the disk beside a ballast file
//! until every write fails with `Error::NoSpace`; every acknowledged write
//! is checked while the database is read-only; the ballast goes and the
//! database must take writes again by itself; then half of the keys are
//! deleted and compacted and collected away to make room for the next
//! ballast, and the loop goes on. Every third cycle the database is closed
//! while the disk is full and opened again on it (replaying what it
//! cannot flush into memory). Besides the check, each cycle measures what
//! a full disk costs: the time from the ballast's removal to the first
//! write taken, the write rate before and after, and the read rate while
//! full against before it filled.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cleave::vfs::{Fs, OsFs};
use cleave::{Db, Error, NoSpaceCause, Options, ReadOptions, WriteOptions, WriteState};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub struct FillArgs {
    pub dir: PathBuf,
    pub duration: Duration,
    pub disk_mib: u64,
    pub threads: usize,
    pub seed: u64,
    /// `Options::no_space_poll_interval`.
    pub poll: Duration,
}

/// What the loop did and measured.
#[derive(Debug, Default)]
pub struct Summary {
    pub cycles: u64,
    pub reopened_full: u64,
    pub acked_writes: u64,
    pub keys_verified: u64,
    /// Per cycle: ballast removed to first write taken.
    pub resume_latency: Vec<Duration>,
    /// Per cycle: one thread's puts per second before the disk filled and
    /// after the database resumed, the same writes each time.
    pub writes_before: Vec<f64>,
    pub writes_after: Vec<f64>,
    /// Per cycle: gets per second while full, and after resuming, of the
    /// same keys.
    pub reads_full: Vec<f64>,
    pub reads_after: Vec<f64>,
    pub elapsed: Duration,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let latency: Vec<f64> = self
            .resume_latency
            .iter()
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        let max_latency = latency.iter().copied().fold(0.0, f64::max);
        write!(
            f,
            "{} fill cycles ({} reopened on the full disk) in {:.0} s; {} writes acknowledged; \
             {} keys verified; lost: 0; medians: first write {:.0} ms after space was freed \
             (max {max_latency:.0} ms); puts {:.0}/s before filling, {:.0}/s after resuming; \
             gets {:.0}/s while full, {:.0}/s after resuming",
            self.cycles,
            self.reopened_full,
            self.elapsed.as_secs_f64(),
            self.acked_writes,
            self.keys_verified,
            median(&latency),
            median(&self.writes_before),
            median(&self.writes_after),
            median(&self.reads_full),
            median(&self.reads_after),
        )
    }
}

/// A loop-mounted ext4 image, unmounted when dropped.
struct Disk {
    mount: PathBuf,
}

impl Disk {
    fn mount(dir: &Path, mib: u64) -> Result<Disk> {
        let image = dir.join("disk.img");
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount)?;
        std::fs::File::create(&image)?.set_len(mib << 20)?;
        for (cmd, args) in [
            (
                "mkfs.ext4",
                vec!["-q", "-F", image.to_str().unwrap_or_default()],
            ),
            (
                "mount",
                vec![
                    "-o",
                    "loop",
                    image.to_str().unwrap_or_default(),
                    mount.to_str().unwrap_or_default(),
                ],
            ),
        ] {
            let out = Command::new(cmd)
                .args(&args)
                .output()
                .with_context(|| format!("running {cmd}"))?;
            ensure!(
                out.status.success(),
                "{cmd} failed (the fill loop mounts a file system of its own: run it as root): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(Disk { mount })
    }

    fn ballast(&self) -> PathBuf {
        self.mount.join("ballast")
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).output();
    }
}

fn options(poll: Duration) -> Options {
    Options {
        create_if_missing: true,
        write_buffer_size: 1 << 20,
        target_file_size_base: 1 << 20,
        max_bytes_for_level_base: 4 << 20,
        value_file_size: 2 << 20,
        big_value_threshold: 16 << 10,
        enable_gc: true,
        gc_garbage_ratio: 0.3,
        no_space_poll_interval: poll,
        use_direct_reads: true,
        use_direct_io_for_flush_and_compaction: true,
        ..Options::default()
    }
}

fn key(t: usize, i: u64) -> Vec<u8> {
    format!("t{t}-{i:08}").into_bytes()
}

/// 100 bytes, 8 KiB (separated at flush) or 32 KiB (to a value log at
/// write time); the bytes name the write.
fn value(rng: &mut StdRng, t: usize, i: u64, n: u64) -> Vec<u8> {
    let len = [100, 8 << 10, 8 << 10, 32 << 10][rng.gen_range(0..4)];
    let mut v = format!("t{t}-i{i}-n{n}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// What a writer thread's keys may hold: the acknowledged value (`None`:
/// deleted), and a failed write's, which may or may not have landed.
#[derive(Default)]
struct Model {
    acked: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    maybe: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Model {
    fn check(&self, db: &Db, what: &str) -> Result<u64> {
        let r = ReadOptions::new();
        for (k, want) in &self.acked {
            let got = db.get(&r, k)?;
            let maybe = self.maybe.get(k);
            ensure!(
                &got == want || maybe == Some(&got),
                "{what}: {} holds {:?}, acknowledged {:?}",
                String::from_utf8_lossy(k),
                got.as_ref()
                    .map(|v| String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned()),
                want.as_ref()
                    .map(|v| String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned()),
            );
        }
        Ok(self.acked.len() as u64)
    }
}

fn is_device_full(e: &Error) -> bool {
    matches!(
        e,
        Error::NoSpace {
            cause: NoSpaceCause::Device(_),
            ..
        }
    )
}

/// Writes with every thread until each has had a write refused by the
/// full disk; the writes acknowledged.
fn fill(db: &Db, models: &mut [Model], next: &mut [u64], rng: &mut StdRng) -> Result<u64> {
    let seeds: Vec<u64> = models.iter().map(|_| rng.gen()).collect();
    let done: Vec<Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = models
            .iter_mut()
            .zip(next.iter_mut())
            .zip(seeds)
            .enumerate()
            .map(|(t, ((model, next), seed))| {
                s.spawn(move || -> Result<u64> {
                    let mut rng = StdRng::seed_from_u64(seed);
                    let mut writes = 0;
                    loop {
                        // New keys mostly; some overwrites and deletes,
                        // whose garbage GC and compaction reclaim.
                        let i = if *next > 0 && rng.gen_bool(0.3) {
                            rng.gen_range(0..*next)
                        } else {
                            *next += 1;
                            *next - 1
                        };
                        let v = (!rng.gen_bool(0.05)).then(|| value(&mut rng, t, i, writes));
                        let wo = WriteOptions {
                            sync: rng.gen_bool(0.3),
                            disable_wal: false,
                        };
                        let r = match &v {
                            Some(v) => db.put(&wo, &key(t, i), v),
                            None => db.delete(&wo, &key(t, i)),
                        };
                        match r {
                            Ok(()) => {
                                model.acked.insert(key(t, i), v);
                                model.maybe.remove(&key(t, i));
                                writes += 1;
                            }
                            Err(e) if is_device_full(&e) => {
                                model.maybe.insert(key(t, i), v);
                                return Ok(writes);
                            }
                            Err(e) => bail!("writer {t}: {e}"),
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| bail!("a writer panicked")))
            .collect()
    });
    let mut writes = 0;
    for d in done {
        writes += d?;
    }
    Ok(writes)
}

/// Gets of random acknowledged keys for `time`; the gets per second.
fn read_rate(db: &Db, models: &[Model], rng: &mut StdRng, time: Duration) -> Result<f64> {
    let keys: Vec<&Vec<u8>> = models.iter().flat_map(|m| m.acked.keys()).collect();
    ensure!(!keys.is_empty(), "no key to read");
    let start = Instant::now();
    let mut n = 0u64;
    let r = ReadOptions::new();
    while start.elapsed() < time {
        db.get(&r, keys[rng.gen_range(0..keys.len())])?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Puts for `time`, or of `bytes` in all, from one thread, as the fill
/// does; the writes per second (the keys written are deleted after).
fn write_rate(db: &Db, rng: &mut StdRng, time: Duration, bytes: usize) -> Result<f64> {
    let start = Instant::now();
    let (mut n, mut written) = (0u64, 0);
    while start.elapsed() < time && written < bytes {
        let v = value(rng, 99, n, n);
        db.put(&WriteOptions::default(), &key(99, n), &v)?;
        written += v.len();
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    for i in 0..n {
        db.delete(&WriteOptions::default(), &key(99, i))?;
    }
    Ok(rate)
}

pub fn run(args: &FillArgs) -> Result<Summary> {
    let start = Instant::now();
    let disk = Disk::mount(&args.dir, args.disk_mib)?;
    let db_dir = disk.mount.join("db");
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut models: Vec<Model> = (0..args.threads).map(|_| Model::default()).collect();
    let mut next = vec![0u64; args.threads];
    let mut db = Db::open(&db_dir, options(args.poll))?;
    let mut summary = Summary::default();
    let measure = Duration::from_millis(300);
    let os = OsFs::new();
    while summary.cycles == 0 || start.elapsed() < args.duration {
        // A ballast of a fifth to a third of what is free.
        let free = os.free_space(&disk.mount)?;
        let ballast = rng.gen_range(free / 5..free / 3) as usize;
        std::fs::write(disk.ballast(), vec![0u8; ballast])?;
        summary
            .writes_before
            .push(write_rate(&db, &mut rng, measure, ballast / 4)?);
        let writes = fill(&db, &mut models, &mut next, &mut rng)?;
        summary.acked_writes += writes;
        // Full: everything acknowledged reads back, more writes fail.
        for (t, m) in models.iter().enumerate() {
            summary.keys_verified +=
                m.check(&db, &format!("cycle {}, full, writer {t}", summary.cycles))?;
        }
        let reads_full = read_rate(&db, &models, &mut rng, measure)?;
        if summary.cycles % 3 == 2 {
            // Closed and opened again while full: the WAL's writes the
            // open cannot flush stay in memory.
            drop(db);
            db = Db::open(&db_dir, options(args.poll))?;
            for (t, m) in models.iter().enumerate() {
                m.check(
                    &db,
                    &format!("cycle {}, reopened full, writer {t}", summary.cycles),
                )?;
            }
            summary.reopened_full += 1;
        }
        let writable = matches!(db.write_state(), WriteState::ReadWrite);
        std::fs::remove_file(disk.ballast())?;
        let freed = Instant::now();
        loop {
            match db.put(&WriteOptions::default(), b"probe", b"after the ballast") {
                Ok(()) => break,
                Err(e) if is_device_full(&e) => {}
                Err(e) => bail!("after the ballast went: {e}"),
            }
            ensure!(
                freed.elapsed() < Duration::from_secs(120),
                "no write taken 120 s after space was freed ({})",
                db.write_state()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        if !writable {
            summary.resume_latency.push(freed.elapsed());
        }
        summary.reads_full.push(reads_full);
        summary
            .reads_after
            .push(read_rate(&db, &models, &mut rng, measure)?);
        summary
            .writes_after
            .push(write_rate(&db, &mut rng, measure, ballast / 4)?);
        // Room for the next cycle: half of the keys go.
        for (t, m) in models.iter_mut().enumerate() {
            let keys: Vec<Vec<u8>> = m.acked.keys().cloned().collect();
            for k in keys.into_iter().filter(|_| rng.gen_bool(0.5)) {
                db.delete(&WriteOptions::default(), &k)
                    .with_context(|| format!("deleting writer {t}'s keys"))?;
                m.acked.insert(k.clone(), None);
                m.maybe.remove(&k);
            }
        }
        // A job without room for its output is postponed, not an error.
        for r in [
            db.compact_range(None, None),
            db.gc_with_ratio(0.05).map(drop),
            db.wait_for_compactions(),
        ] {
            match r {
                Err(e) if !is_device_full(&e) => return Err(e.into()),
                _ => {}
            }
        }
        summary.cycles += 1;
    }
    for (t, m) in models.iter().enumerate() {
        summary.keys_verified += m.check(&db, &format!("the end, writer {t}"))?;
    }
    let report = db.verify();
    ensure!(report.is_ok(), "verify: {:?}", report.problems);
    db.close()?;
    let db = Db::open(&db_dir, options(args.poll))?;
    for (t, m) in models.iter().enumerate() {
        m.check(&db, &format!("reopened at the end, writer {t}"))?;
    }
    db.close()?;
    summary.elapsed = start.elapsed();
    Ok(summary)
}
