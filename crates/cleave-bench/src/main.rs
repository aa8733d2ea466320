//! cleave-bench: a db_bench-compatible benchmark driver.
//!
//! The same command line runs here and with RocksDB's `db_bench`, and both
//! print db_bench's result lines, so runs compare line by line;
//! `scripts/compare_db_bench.sh` does that. Beside db_bench's lines this
//! driver prints what each benchmark cost (device writes, write
//! amplification, disk size, peak RSS, CPU) and can write it all as JSON.

mod distributions;
mod engines;
mod flags;
mod keys;
mod live;
mod merge;
mod monitor;
mod process;
mod report;
mod space_limit;
#[cfg(test)]
mod testing;
mod value_sizes;
mod values;
mod workloads;
mod write_rate;

use std::fs;
use std::io::{ErrorKind, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use engines::{Engine, EngineConfig};
use flags::Flags;
use keys::KeySizeDistribution;
use live::LiveSet;
use monitor::{run_watched, Progress, Watch};
use process::ProcessSnapshot;
use report::{BenchmarkRecord, Costs};
use space_limit::SpaceLimit;
use value_sizes::ValueSizeDistribution;
use workloads::{
    Benchmark, LogPositions, OpKind, Records, RunOutcome, SeedSequence, Shared, WorkloadParams,
};
use write_rate::WriteRate;

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
fn print_header(
    flags: &Flags,
    params: &WorkloadParams,
    engine: &dyn Engine,
    config: &EngineConfig,
) {
    let rows = flags.num as f64;
    let value_size = params.value_sizes.mean();
    let key_size = params.keys.mean();
    let raw_mb = (key_size + value_size) * rows / 1_048_576.0;
    let compressed_value = (value_size * flags.compression_ratio + 0.5) as u64;
    let file_mb = (key_size + value_size * flags.compression_ratio) * rows / 1_048_576.0;
    println!("cleave-bench: engine {}", engine.name());
    match flags.key_size_distribution {
        KeySizeDistribution::Fixed => println!(
            "Keys:       {} bytes each (+ 0 bytes user-defined timestamp)",
            flags.key_size
        ),
        other => println!(
            "Keys:       {other:?} sizes, mean {key_size:.1} bytes (+ 0 bytes user-defined \
             timestamp)"
        ),
    }
    match flags.value_size_distribution {
        ValueSizeDistribution::Fixed => println!(
            "Values:     {} bytes each ({compressed_value} bytes after compression)",
            flags.value_size
        ),
        other => println!(
            "Values:     {other:?} sizes, mean {value_size:.0} bytes ({compressed_value} bytes \
             after compression)"
        ),
    }
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
    let total: Option<u64> = (0..params.threads)
        .map(|index| benchmark.ops_for_thread(params, index))
        .sum();
    let template = match total {
        Some(_) => "{prefix:<12} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
        // A --duration run has no count to fill a bar with.
        None => "{prefix:<12} [{elapsed_precise}] {spinner} {pos} ops ({per_sec})",
    };
    let bar = ProgressBar::new(total.unwrap_or(0));
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.set_prefix(benchmark.name());
    Some(bar)
}

type OpenEngine = fn(&str, &EngineConfig) -> Result<Box<dyn Engine>>;

/// One engine's run of the benchmark list.
struct EngineRun {
    /// `None` only between closing and reopening for a fresh database.
    engine: Option<Box<dyn Engine>>,
    seeds: SeedSequence,
    /// What the harness has written; `None` on an existing database.
    live: Option<LiveSet>,
    /// YCSB's record count: keys `0..records` exist after ycsb_load.
    records: Records,
    /// Where logappend's logs stand.
    logs: LogPositions,
    /// True while the database is freshly created and nothing has run, so a
    /// fill benchmark need not recreate it.
    pristine: bool,
}

/// The benchmark driver's state across engines and benchmarks.
struct Driver {
    flags: Flags,
    config: EngineConfig,
    params: WorkloadParams,
    seed: u64,
    benchmarks: Vec<Benchmark>,
    /// `engines::open`, or a test engine in tests.
    open_engine: OpenEngine,
    records: Vec<BenchmarkRecord>,
}

impl Driver {
    /// Validates the flags and the benchmark list and prepares the run.
    fn start(flags: Flags, open_engine: OpenEngine) -> Result<Self> {
        flags.validate()?;
        // Unknown names fail before anything runs.
        let benchmarks = flags
            .benchmark_names()
            .iter()
            .map(|name| Benchmark::parse(name))
            .collect::<Result<Vec<_>>>()?;
        if let Some(merging) = benchmarks.iter().find(|b| b.merges()) {
            if flags.merge_operator == merge::MergeKind::None {
                bail!("{} merges: pass --merge_operator", merging.name());
            }
        }
        let seed = if flags.seed == 0 {
            let seed = seed_from_clock();
            println!("Set seed to {seed} because --seed was 0");
            seed
        } else {
            flags.seed
        };
        Ok(Self {
            params: WorkloadParams::from_flags(&flags)?,
            config: EngineConfig::from_flags(&flags),
            seed,
            benchmarks,
            open_engine,
            records: Vec::new(),
            flags,
        })
    }

    /// Runs the benchmark list on each engine in turn.
    fn run_all(&mut self) -> Result<()> {
        for name in self.flags.engine_names() {
            self.run_engine(&name)
                .with_context(|| format!("engine {name}"))?;
        }
        Ok(())
    }

    /// Key numbers the live set must cover: the key space, fillseq's
    /// writes beyond it, and every record YCSB may insert.
    fn live_capacity(&self) -> u64 {
        let mut records = self.params.num;
        let mut end = self.params.num;
        for benchmark in &self.benchmarks {
            let benchmark_end = benchmark.key_space_end(&self.params, records);
            if let Benchmark::Ycsb(_) = benchmark {
                records = records.max(benchmark_end);
            }
            end = end.max(benchmark_end);
        }
        end
    }

    fn fresh_state(&self) -> (Option<LiveSet>, Records) {
        let live = (!self.flags.use_existing_db).then(|| match self.config.ttl {
            Some(ttl) => LiveSet::with_ttl(self.params.keys, self.live_capacity(), ttl),
            None => LiveSet::new(self.params.keys, self.live_capacity()),
        });
        (live, Records::new(self.params.num))
    }

    fn run_engine(&mut self, name: &str) -> Result<()> {
        if self.flags.use_existing_db {
            fs::create_dir_all(&self.flags.db)
                .with_context(|| format!("creating {}", self.flags.db.display()))?;
        } else {
            reset_db_dir(&self.flags.db)?;
        }
        let engine = (self.open_engine)(name, &self.config)?;
        print_header(&self.flags, &self.params, engine.as_ref(), &self.config);
        let (live, records) = self.fresh_state();
        let mut run = EngineRun {
            engine: Some(engine),
            // The same seeds for every engine: the same operations.
            seeds: SeedSequence::new(self.seed),
            live,
            records,
            logs: LogPositions::new(self.flags.logs),
            pristine: !self.flags.use_existing_db,
        };
        for benchmark in self.benchmarks.clone() {
            self.run_benchmark(&mut run, name, benchmark)?;
        }
        match run.engine.take() {
            Some(engine) => engine.close().context("closing the engine"),
            None => Ok(()),
        }
    }

    /// Closes the engine, wipes the directory and opens a new database, as
    /// db_bench does before each fill benchmark.
    fn recreate(&self, run: &mut EngineRun, name: &str) -> Result<()> {
        if let Some(engine) = run.engine.take() {
            engine.close().context("closing the engine")?;
        }
        reset_db_dir(&self.flags.db)?;
        run.engine = Some((self.open_engine)(name, &self.config)?);
        (run.live, run.records) = self.fresh_state();
        run.logs = LogPositions::new(self.flags.logs);
        run.pristine = true;
        Ok(())
    }

    fn run_benchmark(
        &mut self,
        run: &mut EngineRun,
        name: &str,
        benchmark: Benchmark,
    ) -> Result<()> {
        if benchmark.wants_fresh_db() {
            if self.flags.use_existing_db {
                println!(
                    "{:<12} : skipped (--use_existing_db is true)",
                    benchmark.name()
                );
                return Ok(());
            }
            if !run.pristine {
                self.recreate(run, name)?;
            }
        }
        run.pristine = false;
        let Some(engine) = run.engine.as_deref() else {
            bail!("the engine is not open");
        };
        if benchmark == Benchmark::Stats {
            match engine.stats_text() {
                Some(text) => println!("{text}"),
                None => println!("(engine {} has no statistics text)", engine.name()),
            }
            return Ok(());
        }
        let limit = (self.flags.space_limit_ratio > 0.0).then(|| {
            // What no engine can reclaim: its memtables and their WALs.
            let slack =
                self.config.write_buffer_size * u64::from(self.config.max_write_buffer_number) * 2;
            SpaceLimit::new(
                self.flags.space_limit_ratio,
                slack,
                Duration::from_secs(self.flags.space_limit_max_wait),
            )
        });
        let write_rate = (self.flags.benchmark_write_rate_limit > 0)
            .then(|| WriteRate::new(self.flags.benchmark_write_rate_limit));
        let progress = Progress::default();
        let watch = Watch {
            dir: &self.flags.db,
            live: run.live.as_ref(),
            limit: limit.as_ref(),
            progress: &progress,
        };

        // Measure around the benchmark only, not around setup or printing.
        process::release_free_memory();
        let peak_is_per_benchmark = process::reset_peak_rss();
        let counters_before = engine.counters();
        let gc_before = engine.gc_breakdown();
        let before = ProcessSnapshot::take(&self.flags.db);
        let (outcome, series) = if benchmark.is_maintenance() {
            run_watched(&watch, || workloads::run_maintenance(engine, benchmark))
        } else {
            println!("DB path: [{}]", self.flags.db.display());
            let bar = progress_bar(benchmark, &self.params);
            let context = Shared {
                engine,
                live: run.live.as_ref(),
                limit: limit.as_ref(),
                write_rate: write_rate.as_ref(),
                progress: &progress,
                bar: bar.as_ref(),
                records: &run.records,
                logs: &run.logs,
            };
            let seeds = &mut run.seeds;
            let params = &self.params;
            let result = run_watched(&watch, || {
                workloads::run_parallel(&context, benchmark, params, seeds)
            });
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
            result
        };
        let outcome = outcome?;
        let after = ProcessSnapshot::take(&self.flags.db);
        // After the snapshot, so that its I/O is not the benchmark's. A
        // failed report loses the breakdown, not the run, as a failed
        // directory walk loses `disk_bytes`.
        let space = engine.space_breakdown().unwrap_or_else(|error| {
            eprintln!("cleave-bench: warning: no space breakdown: {error:#}");
            None
        });
        let costs = Costs {
            device_write_bytes: after
                .device_write_bytes
                .zip(before.device_write_bytes)
                .map(|(end, start)| end.saturating_sub(start)),
            block_write_bytes: after
                .block_write_bytes
                .zip(before.block_write_bytes)
                .map(|(end, start)| end.saturating_sub(start)),
            device_reads: after
                .device_reads
                .zip(before.device_reads)
                .map(|(end, start)| end.since(start)),
            disk_bytes: process::dir_size_bytes(&self.flags.db).ok(),
            live_bytes: run.live.as_ref().map(LiveSet::bytes),
            live_keys: run.live.as_ref().map(LiveSet::keys),
            throttled_s: limit.as_ref().map(|limit| limit.throttled().as_secs_f64()),
            space_limit_gave_up: limit.as_ref().map(SpaceLimit::gave_up),
            peak_rss_bytes: process::peak_rss_bytes(),
            cpu_s: after
                .cpu_seconds
                .zip(before.cpu_seconds)
                .map(|(end, start)| (end - start).max(0.0)),
            engine_counters: engine
                .counters()
                .zip(counters_before)
                .map(|(end, start)| end.since(&start)),
            gc: engine
                .gc_breakdown()
                .zip(gc_before)
                .map(|(end, start)| end.since(&start)),
            space,
            ttl: self.config.ttl,
            series,
        };
        let record = BenchmarkRecord::new(
            engine.name(),
            self.flags.threads,
            &outcome,
            outcome.written_bytes,
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
                    // A mixed benchmark's kinds apart, as db_bench's
                    // histogram per operation type.
                    if let Some(kind) = benchmark.update_kind() {
                        for (kind, latencies) in [
                            (OpKind::Read, &outcome.read_latencies),
                            (kind, &outcome.update_latencies),
                        ] {
                            if !latencies.is_empty() {
                                println!("{}", report::histogram_block(kind, latencies));
                            }
                        }
                    }
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
        // fillseq wrote 300 keys of 16 + 100 bytes, overwrite rewrote them.
        assert_eq!(records[2]["live_bytes"], 300 * 116);
        // The memory engine keeps nothing on disk.
        assert_eq!(records[2]["space_amp"], 0.0);
        assert!(records[2]["throttled_s"].is_null());
        // The memory engine keeps no space breakdown: its records leave the
        // engine's space fields out.
        assert!(records[2].get("s_index").is_none());
        assert!(records[2].get("value_file_bytes").is_none());
        assert!(records[2].get("gc").is_none());
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
    fn unknown_benchmark_is_an_error_before_anything_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let flags = Flags::parse_from([
            "cleave-bench".to_owned(),
            "--benchmarks=fillrandom,readwhilemerging".to_owned(),
            format!("--db={}", db.display()),
        ]);
        assert!(Driver::start(flags, open_memory).is_err());
        assert!(!db.exists());
    }

    #[test]
    fn a_merging_benchmark_without_an_operator_is_an_error_before_anything_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        for benchmark in ["mergerandom", "ycsb_fm"] {
            let flags = Flags::parse_from([
                "cleave-bench".to_owned(),
                format!("--benchmarks=fillrandom,{benchmark}"),
                format!("--db={}", db.display()),
            ]);
            let error = Driver::start(flags, open_memory).err().expect("refused");
            assert!(error.to_string().contains("--merge_operator"), "{error}");
            assert!(!db.exists());
        }
    }

    #[test]
    fn every_engine_gets_a_fresh_directory_and_the_same_operations() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let json = dir.path().join("out.json");
        let flags = Flags::parse_from([
            "cleave-bench".to_owned(),
            "--engine=memory,memory".to_owned(),
            "--benchmarks=fillrandom,overwrite,readrandom".to_owned(),
            "--num=400".to_owned(),
            "--key_distribution=zipfian".to_owned(),
            "--space_limit_ratio=2".to_owned(),
            "--seed=9".to_owned(),
            format!("--db={}", db.display()),
            format!("--json={}", json.display()),
        ]);
        let mut driver = Driver::start(flags, open_memory).expect("start");
        driver.run_all().expect("run");
        let records: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&json).expect("json")).expect("valid");
        let records = records.as_array().expect("array");
        assert_eq!(records.len(), 6);
        for (first, second) in records[..3].iter().zip(&records[3..]) {
            assert_eq!(first["benchmark"], second["benchmark"]);
            // The same seeds: the same keys found, the same live set.
            assert_eq!(first["found"], second["found"]);
            assert_eq!(first["live_bytes"], second["live_bytes"]);
            assert_eq!(first["user_bytes"], second["user_bytes"]);
            assert!(first["throttled_s"].is_number());
            assert!(first["series"].is_array());
        }
        assert!(records[2]["found"]
            .as_u64()
            .is_some_and(|found| found < 400));
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
