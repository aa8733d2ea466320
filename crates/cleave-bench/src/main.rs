//! cleave-bench: a db_bench-compatible benchmark driver.
//!
//! The same command line runs here and with RocksDB's `db_bench`, and both
//! print db_bench's result lines, so runs compare line by line;
//! `scripts/compare_db_bench.sh` does that. Beside db_bench's lines this
//! driver prints what each benchmark cost (device writes, write
//! amplification, disk size, peak RSS, CPU) and can write it all as JSON.

#[allow(dead_code)] // wired into workloads in the next commit
mod distributions;
mod engines;
mod flags;
mod keys;
mod process;
mod report;
#[allow(dead_code)] // wired into workloads in the next commit
mod value_sizes;
mod values;
mod workloads;

use std::fs;
use std::io::{ErrorKind, IsTerminal, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use engines::{Engine, EngineConfig};
use flags::Flags;
use process::ProcessSnapshot;
use report::{BenchmarkRecord, Costs};
use workloads::{Benchmark, OpKind, RunOutcome, SeedSequence, WorkloadParams};

/// Marks a directory as created by this driver, so wiping it can never
/// delete a directory someone pointed --db at by mistake.
const DB_DIR_MARKER: &str = ".cleave-bench";

fn main() {
    if let Err(error) = run(Flags::from_env()) {
        eprintln!("cleave-bench: error: {error:#}");
        std::process::exit(1);
    }
}

/// Empties `path` for a fresh database, refusing to touch a non-empty
/// directory that this driver did not create.
fn reset_db_dir(path: &Path) -> Result<()> {
    match fs::read_dir(path) {
        Ok(mut entries) => {
            let empty = entries.next().is_none();
            if !empty && !path.join(DB_DIR_MARKER).exists() {
                bail!(
                    "refusing to wipe {}: it is not empty and has no {DB_DIR_MARKER} file, so \
                     cleave-bench did not create it; remove it yourself, choose another --db, \
                     or pass --use_existing_db",
                    path.display()
                );
            }
            fs::remove_dir_all(path).with_context(|| format!("wiping {}", path.display()))?;
        }
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => return Err(error).with_context(|| format!("listing {}", path.display())),
    }
    fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
    fs::write(path.join(DB_DIR_MARKER), b"").with_context(|| format!("marking {}", path.display()))
}

fn seed_from_clock() -> u64 {
    // Microseconds since the epoch, as db_bench derives its seed.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(1)
}

/// db_bench's run header, with our engine and options.
fn print_header(flags: &Flags, engine: &dyn Engine, config: &EngineConfig) {
    let rows = flags.num as f64;
    let raw_mb = (flags.key_size + flags.value_size) as f64 * rows / 1_048_576.0;
    let compressed_value = (flags.value_size as f64 * flags.compression_ratio + 0.5) as u64;
    let file_mb = (flags.key_size as f64 + flags.value_size as f64 * flags.compression_ratio)
        * rows
        / 1_048_576.0;
    println!("cleave-bench: engine {}", engine.name());
    println!(
        "Keys:       {} bytes each (+ 0 bytes user-defined timestamp)",
        flags.key_size
    );
    println!(
        "Values:     {} bytes each ({compressed_value} bytes after compression)",
        flags.value_size
    );
    println!("Entries:    {}", flags.num);
    println!("RawSize:    {raw_mb:.1} MB (estimated)");
    println!("FileSize:   {file_mb:.1} MB (estimated)");
    println!("Compression: {:?}", flags.compression_type);
    println!("Threads:    {}", flags.threads);
    println!("Options:    {}", config.describe());
    for note in engine.config_notes() {
        println!("Note:       {note}");
    }
    println!("------------------------------------------------");
}

fn progress_bar(benchmark: Benchmark, params: &WorkloadParams) -> Option<ProgressBar> {
    // Only for people watching: a redirected run stays clean for scripts.
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let total = benchmark.ops_per_thread(params) * params.threads as u64;
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:<12} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar.set_prefix(benchmark.name());
    Some(bar)
}

type OpenEngine = fn(&str, &EngineConfig) -> Result<Box<dyn Engine>>;

/// The benchmark driver's state across benchmarks.
struct Driver {
    flags: Flags,
    config: EngineConfig,
    params: WorkloadParams,
    seeds: SeedSequence,
    /// `engines::open`, or a test engine in tests.
    open_engine: OpenEngine,
    engine: Option<Box<dyn Engine>>,
    /// True while the database is freshly created and nothing has run, so a
    /// fill benchmark need not recreate it.
    pristine: bool,
    records: Vec<BenchmarkRecord>,
}

impl Driver {
    /// Closes the engine, wipes the directory and opens a new database, as
    /// db_bench does before each fill benchmark.
    fn recreate(&mut self) -> Result<()> {
        if let Some(engine) = self.engine.take() {
            engine.close().context("closing the engine")?;
        }
        reset_db_dir(&self.flags.db)?;
        self.engine = Some((self.open_engine)(&self.flags.engine, &self.config)?);
        self.pristine = true;
        Ok(())
    }

    fn run_benchmark(&mut self, benchmark: Benchmark) -> Result<()> {
        if benchmark.wants_fresh_db() {
            if self.flags.use_existing_db {
                println!(
                    "{:<12} : skipped (--use_existing_db is true)",
                    benchmark.name()
                );
                return Ok(());
            }
            if !self.pristine {
                self.recreate()?;
            }
        }
        self.pristine = false;
        // Borrows only the engine field, so the seeds stay mutable below.
        let Some(engine) = self.engine.as_deref() else {
            bail!("the engine is not open");
        };
        if benchmark == Benchmark::Stats {
            match engine.stats_text() {
                Some(text) => println!("{text}"),
                None => println!("(engine {} has no statistics text)", engine.name()),
            }
            return Ok(());
        }

        // Measure around the benchmark only, not around setup or printing.
        let peak_is_per_benchmark = process::reset_peak_rss();
        let counters_before = engine.counters();
        let before = ProcessSnapshot::take();
        let outcome = match benchmark {
            Benchmark::Flush | Benchmark::Compact | Benchmark::WaitForCompaction => {
                workloads::run_maintenance(engine, benchmark)?
            }
            _ => {
                println!("DB path: [{}]", self.flags.db.display());
                let bar = progress_bar(benchmark, &self.params);
                let outcome = workloads::run_parallel(
                    engine,
                    benchmark,
                    &self.params,
                    &mut self.seeds,
                    bar.as_ref(),
                );
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
                outcome?
            }
        };
        let after = ProcessSnapshot::take();
        let costs = Costs {
            device_write_bytes: after
                .device_write_bytes
                .zip(before.device_write_bytes)
                .map(|(end, start)| end.saturating_sub(start)),
            disk_bytes: process::dir_size_bytes(&self.flags.db).ok(),
            peak_rss_bytes: process::peak_rss_bytes(),
            cpu_s: after
                .cpu_seconds
                .zip(before.cpu_seconds)
                .map(|(end, start)| (end - start).max(0.0)),
            engine_counters: engine
                .counters()
                .zip(counters_before)
                .map(|(end, start)| end.since(&start)),
        };
        let user_bytes = if benchmark.op_kind() == OpKind::Write {
            outcome.bytes
        } else {
            0
        };
        let record = BenchmarkRecord::new(
            engine.name(),
            self.flags.threads,
            &outcome,
            user_bytes,
            costs,
        );
        self.print_outcome(benchmark, &outcome, &record, peak_is_per_benchmark);
        self.records.push(record);
        if let Some(path) = &self.flags.json {
            report::write_json(path, &self.records)?;
        }
        Ok(())
    }

    fn print_outcome(
        &self,
        benchmark: Benchmark,
        outcome: &RunOutcome,
        record: &BenchmarkRecord,
        peak_is_per_benchmark: bool,
    ) {
        match benchmark {
            // db_bench's own words for these two; it prints no result line.
            Benchmark::Flush => println!("flush memtable"),
            Benchmark::WaitForCompaction => {
                println!("waitforcompaction({}): finished", self.flags.db.display());
            }
            _ => {
                println!("{}", report::result_line(outcome));
                if self.flags.histogram {
                    println!(
                        "{}",
                        report::histogram_block(benchmark.op_kind(), &outcome.latencies)
                    );
                }
            }
        }
        print!("{}", record.cost_lines());
        if !peak_is_per_benchmark {
            println!("  (peak RSS is for the whole run: /proc/self/clear_refs is not writable)");
        }
        // Flushing keeps our lines in order with the engine's stderr output.
        let _ = std::io::stdout().flush();
    }
}

fn run(flags: Flags) -> Result<()> {
    let mut driver = Driver::start(flags, engines::open)?;
    driver.run_all()
}

impl Driver {
    /// Validates the flags, prepares the directory, opens the engine and
    /// prints the header.
    fn start(flags: Flags, open_engine: OpenEngine) -> Result<Self> {
        flags.validate()?;
        let seed = if flags.seed == 0 {
            let seed = seed_from_clock();
            println!("Set seed to {seed} because --seed was 0");
            seed
        } else {
            flags.seed
        };
        if flags.use_existing_db {
            fs::create_dir_all(&flags.db)
                .with_context(|| format!("creating {}", flags.db.display()))?;
        } else {
            reset_db_dir(&flags.db)?;
        }
        let config = EngineConfig::from_flags(&flags);
        let engine = open_engine(&flags.engine, &config)?;
        print_header(&flags, engine.as_ref(), &config);
        Ok(Self {
            params: WorkloadParams::from_flags(&flags),
            seeds: SeedSequence::new(seed),
            config,
            open_engine,
            engine: Some(engine),
            pristine: !flags.use_existing_db,
            records: Vec::new(),
            flags,
        })
    }

    /// Runs the --benchmarks in order, then closes the engine.
    fn run_all(&mut self) -> Result<()> {
        // Unknown names fail before anything runs.
        let benchmarks = self
            .flags
            .benchmark_names()
            .iter()
            .map(|name| Benchmark::parse(name))
            .collect::<Result<Vec<_>>>()?;
        for benchmark in benchmarks {
            self.run_benchmark(benchmark)?;
        }
        if let Some(engine) = self.engine.take() {
            engine.close().context("closing the engine")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::engines::memory::MemoryEngine;

    fn open_memory(_name: &str, _config: &EngineConfig) -> Result<Box<dyn Engine>> {
        Ok(Box::new(MemoryEngine::default()))
    }

    #[test]
    fn driver_runs_benchmarks_and_writes_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let json = dir.path().join("out.json");
        let flags = Flags::parse_from([
            "cleave-bench".to_owned(),
            "--benchmarks=fillseq,overwrite,readrandom,seekrandom,flush,compact,\
             waitforcompaction,stats,fillrandom"
                .to_owned(),
            "--num=300".to_owned(),
            "--seek_nexts=2".to_owned(),
            "--threads=2".to_owned(),
            "--seed=5".to_owned(),
            "--histogram".to_owned(),
            format!("--db={}", db.display()),
            format!("--json={}", json.display()),
        ]);
        let mut driver = Driver::start(flags, open_memory).expect("start");
        driver.run_all().expect("run");
        let text = fs::read_to_string(&json).expect("json written");
        let records: serde_json::Value = serde_json::from_str(&text).expect("valid json");
        let names: Vec<&str> = records
            .as_array()
            .expect("array")
            .iter()
            .filter_map(|record| record["benchmark"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "fillseq",
                "overwrite",
                "readrandom",
                "seekrandom",
                "flush",
                "compact",
                "waitforcompaction",
                "fillrandom"
            ]
        );
        assert_eq!(records[0]["ops"], 600);
        assert_eq!(records[0]["user_bytes"], 600 * 116);
        // After fillseq every key exists, so both readers find all of theirs.
        assert_eq!(records[2]["found"], 600);
        assert_eq!(records[3]["found"], 600);
        assert_eq!(records[2]["user_bytes"], 0);
        assert!(records[2]["write_amp"].is_null());
        assert!(db.join(DB_DIR_MARKER).exists());
    }

    #[test]
    fn use_existing_db_skips_fills_and_keeps_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        fs::create_dir(&db).expect("mkdir");
        fs::write(db.join("keep"), b"x").expect("write");
        let flags = Flags::parse_from([
            "cleave-bench".to_owned(),
            "--benchmarks=fillrandom,readrandom".to_owned(),
            "--num=10".to_owned(),
            "--use_existing_db".to_owned(),
            format!("--db={}", db.display()),
        ]);
        let mut driver = Driver::start(flags, open_memory).expect("start");
        driver.run_all().expect("run");
        assert_eq!(driver.records.len(), 1);
        assert_eq!(driver.records[0].found, Some(0));
        assert!(db.join("keep").exists());
    }

    #[test]
    fn unknown_benchmark_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let flags = Flags::parse_from([
            "cleave-bench".to_owned(),
            "--benchmarks=fillrandom,readwhilewriting".to_owned(),
            format!("--db={}", dir.path().join("db").display()),
        ]);
        let mut driver = Driver::start(flags, open_memory).expect("start");
        assert!(driver.run_all().is_err());
        assert!(driver.records.is_empty());
    }

    #[test]
    fn reset_refuses_foreign_directories_and_wipes_its_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let foreign = dir.path().join("foreign");
        fs::create_dir(&foreign).expect("mkdir");
        fs::write(foreign.join("precious"), b"data").expect("write");
        assert!(reset_db_dir(&foreign).is_err());
        assert!(foreign.join("precious").exists());

        let ours = dir.path().join("ours");
        reset_db_dir(&ours).expect("create");
        fs::write(ours.join("000001.sst"), b"old").expect("write");
        reset_db_dir(&ours).expect("wipe");
        assert!(!ours.join("000001.sst").exists());
        assert!(ours.join(DB_DIR_MARKER).exists());

        // An empty directory is fair game too.
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).expect("mkdir");
        reset_db_dir(&empty).expect("empty dir");
    }
}
