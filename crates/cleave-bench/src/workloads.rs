//! The benchmarks, with db_bench's semantics: what each thread does, how
//! operations, bytes and "found" are counted, and how threads are merged.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::engines::Engine;
use crate::flags::Flags;
use crate::keys::KeyFormat;
use crate::values::ValueGenerator;

/// Latencies are recorded in nanoseconds up to an hour, to 3 significant
/// digits: enough to print db_bench's two decimals of microseconds.
const LATENCY_MAX_NANOS: u64 = 3_600_000_000_000;
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;
/// Threads publish progress in steps this large, so the shared bar is not a
/// point of contention.
const PROGRESS_STEP: u64 = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    Overwrite,
    ReadRandom,
    SeekRandom,
    Flush,
    Compact,
    WaitForCompaction,
    Stats,
}

/// The operation a latency sample measures, named as in db_bench's
/// "Microseconds per <kind>:" histogram title.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Write,
    Read,
    Seek,
    Compact,
    Other,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Write => "write",
            OpKind::Read => "read",
            OpKind::Seek => "seek",
            OpKind::Compact => "compact",
            OpKind::Other => "op",
        }
    }
}

impl Benchmark {
    pub const ALL: [Benchmark; 9] = [
        Benchmark::FillSeq,
        Benchmark::FillRandom,
        Benchmark::Overwrite,
        Benchmark::ReadRandom,
        Benchmark::SeekRandom,
        Benchmark::Flush,
        Benchmark::Compact,
        Benchmark::WaitForCompaction,
        Benchmark::Stats,
    ];

    pub fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|benchmark| benchmark.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|b| b.name()).collect();
                anyhow!("unknown benchmark {name:?}; known: {}", known.join(", "))
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::FillSeq => "fillseq",
            Benchmark::FillRandom => "fillrandom",
            Benchmark::Overwrite => "overwrite",
            Benchmark::ReadRandom => "readrandom",
            Benchmark::SeekRandom => "seekrandom",
            Benchmark::Flush => "flush",
            Benchmark::Compact => "compact",
            Benchmark::WaitForCompaction => "waitforcompaction",
            Benchmark::Stats => "stats",
        }
    }

    /// db_bench destroys the database before these (its `fresh_db`), and
    /// skips them under --use_existing_db.
    pub fn wants_fresh_db(self) -> bool {
        matches!(self, Benchmark::FillSeq | Benchmark::FillRandom)
    }

    pub fn op_kind(self) -> OpKind {
        match self {
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::Overwrite => OpKind::Write,
            Benchmark::ReadRandom => OpKind::Read,
            Benchmark::SeekRandom => OpKind::Seek,
            Benchmark::Compact => OpKind::Compact,
            Benchmark::Flush | Benchmark::WaitForCompaction | Benchmark::Stats => OpKind::Other,
        }
    }

    /// Operations each thread will do, for the progress bar.
    pub fn ops_per_thread(self, params: &WorkloadParams) -> u64 {
        match self {
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::Overwrite => {
                params.writes / params.batch_size * params.batch_size
            }
            Benchmark::ReadRandom | Benchmark::SeekRandom => params.reads,
            _ => 1,
        }
    }
}

/// The per-thread shape of a workload, resolved from the flags.
#[derive(Clone, Debug)]
pub struct WorkloadParams {
    pub num: u64,
    pub reads: u64,
    pub writes: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub batch_size: u64,
    pub seek_nexts: u64,
    pub threads: usize,
    pub compression_ratio: f64,
}

impl WorkloadParams {
    pub fn from_flags(flags: &Flags) -> Self {
        Self {
            num: flags.num,
            reads: flags.reads_per_thread(),
            writes: flags.writes_per_thread(),
            key_size: flags.key_size,
            value_size: flags.value_size,
            batch_size: flags.batch_size,
            seek_nexts: flags.seek_nexts,
            threads: flags.threads,
            compression_ratio: flags.compression_ratio,
        }
    }
}

/// Hands each benchmark thread its own seed, as db_bench gives every
/// thread of every benchmark `seed_base + (a running thread count)`.
#[derive(Clone, Debug)]
pub struct SeedSequence {
    base: u64,
    issued: u64,
}

impl SeedSequence {
    pub fn new(base: u64) -> Self {
        Self { base, issued: 0 }
    }

    pub fn next_seed(&mut self) -> u64 {
        self.issued += 1;
        self.base.wrapping_add(self.issued)
    }
}

/// The merged result of one benchmark, db_bench's `Stats` after `Merge`.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub benchmark: Benchmark,
    /// Operations done by all threads (a batch counts its entries).
    pub ops: u64,
    /// Key and value bytes moved: written, or read when found.
    pub bytes: u64,
    /// The sum of each thread's running time, which db_bench divides by the
    /// op count for micros/op.
    pub thread_seconds: f64,
    /// Wall time from the first thread's start to the last one's finish.
    pub elapsed: Duration,
    /// db_bench's suffix, e.g. "(1253 of 2000 found)\n", from thread 0.
    pub message: Option<String>,
    pub found: u64,
    pub attempted: u64,
    /// Per-operation (per-batch for batched writes) latencies in ns.
    pub latencies: Histogram<u64>,
}

struct ThreadStats {
    ops: u64,
    bytes: u64,
    found: u64,
    attempted: u64,
    latencies: Histogram<u64>,
    start: Instant,
    finish: Instant,
}

pub fn new_latency_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NANOS, LATENCY_SIGNIFICANT_DIGITS)
        .map_err(|error| anyhow!("latency histogram: {error}"))
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs a data benchmark (fill, overwrite, read, seek) in `params.threads`
/// threads and merges their results.
pub fn run_parallel(
    engine: &dyn Engine,
    benchmark: Benchmark,
    params: &WorkloadParams,
    seeds: &mut SeedSequence,
    progress: Option<&ProgressBar>,
) -> Result<RunOutcome> {
    let thread_seeds: Vec<u64> = (0..params.threads).map(|_| seeds.next_seed()).collect();
    // All threads start timing together, after their setup (value buffers).
    let barrier = Barrier::new(params.threads);
    let results: Vec<Result<ThreadStats>> = std::thread::scope(|scope| {
        let handles: Vec<_> = thread_seeds
            .iter()
            .map(|&seed| {
                let barrier = &barrier;
                scope.spawn(move || run_thread(engine, benchmark, params, seed, barrier, progress))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("a benchmark thread panicked")))
            })
            .collect()
    });
    let mut stats = Vec::with_capacity(results.len());
    for result in results {
        stats.push(result.with_context(|| format!("benchmark {}", benchmark.name()))?);
    }
    merge(benchmark, stats, params)
}

fn merge(
    benchmark: Benchmark,
    stats: Vec<ThreadStats>,
    params: &WorkloadParams,
) -> Result<RunOutcome> {
    let Some(first) = stats.first() else {
        bail!("no benchmark threads ran");
    };
    let message = match benchmark {
        // db_bench keeps the first thread's message, newline included.
        Benchmark::ReadRandom | Benchmark::SeekRandom => {
            Some(format!("({} of {} found)\n", first.found, params.reads))
        }
        _ => None,
    };
    let start = stats.iter().map(|s| s.start).min().unwrap_or(first.start);
    let finish = stats.iter().map(|s| s.finish).max().unwrap_or(first.finish);
    let mut latencies = new_latency_histogram()?;
    let mut outcome = RunOutcome {
        benchmark,
        ops: 0,
        bytes: 0,
        thread_seconds: 0.0,
        elapsed: finish.saturating_duration_since(start),
        message,
        found: 0,
        attempted: 0,
        latencies: new_latency_histogram()?,
    };
    for thread in &stats {
        outcome.ops += thread.ops;
        outcome.bytes += thread.bytes;
        outcome.found += thread.found;
        outcome.attempted += thread.attempted;
        outcome.thread_seconds += thread
            .finish
            .saturating_duration_since(thread.start)
            .as_secs_f64();
        latencies
            .add(&thread.latencies)
            .map_err(|error| anyhow!("merging latencies: {error}"))?;
    }
    outcome.latencies = latencies;
    Ok(outcome)
}

/// Per-thread loop state shared by the benchmark bodies.
struct ThreadRun<'a> {
    engine: &'a dyn Engine,
    params: &'a WorkloadParams,
    keys: KeyFormat,
    rng: StdRng,
    stats: ThreadStats,
    last_op_finish: Instant,
    progress: Option<&'a ProgressBar>,
    unreported_progress: u64,
}

impl ThreadRun<'_> {
    /// Records one finished operation (or batch of `ops` entries): its
    /// latency since the previous one finished, as db_bench's `FinishedOps`.
    fn finished(&mut self, ops: u64) {
        let now = Instant::now();
        let latency = nanos(now.saturating_duration_since(self.last_op_finish));
        self.stats.latencies.saturating_record(latency.max(1));
        self.last_op_finish = now;
        self.stats.ops += ops;
        self.unreported_progress += ops;
        if self.unreported_progress >= PROGRESS_STEP {
            if let Some(bar) = self.progress {
                bar.inc(self.unreported_progress);
            }
            self.unreported_progress = 0;
        }
    }

    fn random_index(&mut self) -> u64 {
        self.rng.gen_range(0..self.params.num)
    }

    fn write(&mut self, sequential: bool) -> Result<()> {
        let params = self.params;
        let mut values = ValueGenerator::new(params.value_size, params.compression_ratio);
        let batches = params.writes / params.batch_size;
        let entry_bytes = (params.key_size + params.value_size) as u64;
        let mut next_sequential = 0u64;
        let mut key = Vec::with_capacity(params.key_size);
        let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.start_timing();
        for _ in 0..batches {
            if params.batch_size == 1 {
                let index = self.next_write_index(sequential, &mut next_sequential);
                self.keys.encode_into(index, &mut key);
                self.engine
                    .put(&key, values.next_value(params.value_size))?;
            } else {
                batch.clear();
                for _ in 0..params.batch_size {
                    let index = self.next_write_index(sequential, &mut next_sequential);
                    let value = values.next_value(params.value_size).to_vec();
                    batch.push((self.keys.encode(index), value));
                }
                let entries: Vec<(&[u8], &[u8])> = batch
                    .iter()
                    .map(|(key, value)| (key.as_slice(), value.as_slice()))
                    .collect();
                self.engine.write_batch(&entries)?;
            }
            self.stats.bytes += entry_bytes * params.batch_size;
            self.finished(params.batch_size);
        }
        Ok(())
    }

    fn next_write_index(&mut self, sequential: bool, next_sequential: &mut u64) -> u64 {
        if sequential {
            // db_bench's sequential generator counts on past --num when
            // --writes exceeds it; so does this.
            let index = *next_sequential;
            *next_sequential += 1;
            index
        } else {
            self.random_index()
        }
    }

    fn read_random(&mut self) -> Result<()> {
        let mut key = Vec::with_capacity(self.params.key_size);
        self.start_timing();
        for _ in 0..self.params.reads {
            let index = self.random_index();
            self.keys.encode_into(index, &mut key);
            self.stats.attempted += 1;
            if let Some(value) = self.engine.get(&key)? {
                self.stats.found += 1;
                self.stats.bytes += (key.len() + value.len()) as u64;
            }
            self.finished(1);
        }
        Ok(())
    }

    fn seek_random(&mut self) -> Result<()> {
        let mut key = Vec::with_capacity(self.params.key_size);
        self.start_timing();
        for _ in 0..self.params.reads {
            let index = self.random_index();
            self.keys.encode_into(index, &mut key);
            self.stats.attempted += 1;
            let outcome = self.engine.scan(&key, self.params.seek_nexts)?;
            if outcome.found_exact {
                self.stats.found += 1;
            }
            // As db_bench, only entries read by next() count as bytes.
            self.stats.bytes += outcome.bytes;
            self.finished(1);
        }
        Ok(())
    }

    fn start_timing(&mut self) {
        let now = Instant::now();
        self.stats.start = now;
        self.last_op_finish = now;
    }
}

fn run_thread(
    engine: &dyn Engine,
    benchmark: Benchmark,
    params: &WorkloadParams,
    seed: u64,
    barrier: &Barrier,
    progress: Option<&ProgressBar>,
) -> Result<ThreadStats> {
    let now = Instant::now();
    let mut run = ThreadRun {
        engine,
        params,
        keys: KeyFormat::new(params.key_size),
        rng: StdRng::seed_from_u64(seed),
        stats: ThreadStats {
            ops: 0,
            bytes: 0,
            found: 0,
            attempted: 0,
            latencies: new_latency_histogram()?,
            start: now,
            finish: now,
        },
        last_op_finish: now,
        progress,
        unreported_progress: 0,
    };
    barrier.wait();
    match benchmark {
        Benchmark::FillSeq => run.write(true)?,
        Benchmark::FillRandom | Benchmark::Overwrite => run.write(false)?,
        Benchmark::ReadRandom => run.read_random()?,
        Benchmark::SeekRandom => run.seek_random()?,
        other => bail!("{} is not a data benchmark", other.name()),
    }
    run.stats.finish = Instant::now();
    if let Some(bar) = progress {
        bar.inc(run.unreported_progress);
    }
    Ok(run.stats)
}

/// Runs a single-operation maintenance benchmark (flush, compact,
/// waitforcompaction) on the calling thread and times it as one op.
pub fn run_maintenance(engine: &dyn Engine, benchmark: Benchmark) -> Result<RunOutcome> {
    let start = Instant::now();
    match benchmark {
        Benchmark::Flush => engine.flush()?,
        Benchmark::Compact => engine.compact_all()?,
        Benchmark::WaitForCompaction => engine.wait_for_compactions()?,
        other => bail!("{} is not a maintenance benchmark", other.name()),
    }
    let elapsed = start.elapsed();
    let mut latencies = new_latency_histogram()?;
    latencies.saturating_record(nanos(elapsed).max(1));
    Ok(RunOutcome {
        benchmark,
        ops: 1,
        bytes: 0,
        thread_seconds: elapsed.as_secs_f64(),
        elapsed,
        message: None,
        found: 0,
        attempted: 0,
        latencies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::memory::MemoryEngine;

    fn params(num: u64, threads: usize) -> WorkloadParams {
        WorkloadParams {
            num,
            reads: num,
            writes: num,
            key_size: 16,
            value_size: 100,
            batch_size: 1,
            seek_nexts: 0,
            threads,
            compression_ratio: 0.5,
        }
    }

    fn run(engine: &MemoryEngine, benchmark: Benchmark, params: &WorkloadParams) -> RunOutcome {
        // A new seed base per call, as each db_bench benchmark gets fresh
        // seeds; reusing one would make readrandom replay fillrandom's keys.
        static NEXT_BASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = NEXT_BASE.fetch_add(1000, std::sync::atomic::Ordering::Relaxed);
        let mut seeds = SeedSequence::new(base);
        run_parallel(engine, benchmark, params, &mut seeds, None).expect("benchmark runs")
    }

    #[test]
    fn fillseq_writes_every_key_once_and_readrandom_finds_all() {
        let engine = MemoryEngine::default();
        let params = params(500, 1);
        let fill = run(&engine, Benchmark::FillSeq, &params);
        assert_eq!(fill.ops, 500);
        assert_eq!(fill.bytes, 500 * 116);
        assert_eq!(engine.len(), 500);
        assert_eq!(fill.latencies.len(), 500);
        let read = run(&engine, Benchmark::ReadRandom, &params);
        assert_eq!((read.found, read.attempted), (500, 500));
        assert_eq!(read.message.as_deref(), Some("(500 of 500 found)\n"));
        assert_eq!(read.bytes, 500 * 116);
    }

    #[test]
    fn fillrandom_draws_keys_from_the_key_space_with_repeats() {
        let engine = MemoryEngine::default();
        let params = params(1000, 1);
        let fill = run(&engine, Benchmark::FillRandom, &params);
        assert_eq!(fill.ops, 1000);
        // Uniform draws with replacement leave about 1/e of keys unwritten.
        let distinct = engine.len();
        assert!((550..=720).contains(&distinct), "{distinct} distinct keys");
        let read = run(&engine, Benchmark::ReadRandom, &params);
        assert!(read.found < read.attempted);
        // No key lies outside [0, num).
        let beyond = KeyFormat::new(16).encode(1000);
        assert_eq!(engine.scan(&beyond, 1).expect("scan").entries, 0);
    }

    #[test]
    fn every_thread_does_the_full_count_as_db_bench() {
        let engine = MemoryEngine::default();
        let mut params = params(300, 3);
        params.batch_size = 10;
        params.writes = 105; // db_bench drops the partial last batch
        let fill = run(&engine, Benchmark::FillSeq, &params);
        assert_eq!(fill.ops, 3 * 100);
        assert_eq!(fill.latencies.len(), 3 * 10);
        assert_eq!(engine.len(), 100);
        assert!(fill.thread_seconds > 0.0);
        let read = run(&engine, Benchmark::ReadRandom, &params);
        assert_eq!(read.ops, 900);
        // The message is the first thread's, as db_bench prints it.
        assert!(read
            .message
            .is_some_and(|m| m.ends_with(" of 300 found)\n")));
    }

    #[test]
    fn seekrandom_counts_exact_hits_and_next_bytes() {
        let engine = MemoryEngine::default();
        let mut params = params(200, 1);
        run(&engine, Benchmark::FillSeq, &params);
        params.seek_nexts = 3;
        params.reads = 50;
        let seek = run(&engine, Benchmark::SeekRandom, &params);
        assert_eq!(seek.found, 50);
        // Seeks near the end read fewer than 3 entries.
        assert!(seek.bytes <= 50 * 3 * 116);
        assert!(seek.bytes >= 50 * 116);
        params.seek_nexts = 0;
        let seek = run(&engine, Benchmark::SeekRandom, &params);
        assert_eq!(seek.bytes, 0);
    }

    #[test]
    fn seeds_differ_per_thread_and_benchmark() {
        let mut seeds = SeedSequence::new(7);
        let first = seeds.next_seed();
        assert_ne!(first, seeds.next_seed());
    }

    #[test]
    fn benchmark_names_round_trip() {
        for benchmark in Benchmark::ALL {
            assert_eq!(Benchmark::parse(benchmark.name()).ok(), Some(benchmark));
        }
        assert!(Benchmark::parse("readwhilewriting").is_err());
    }

    #[test]
    fn maintenance_is_one_op() {
        let engine = MemoryEngine::default();
        let outcome = run_maintenance(&engine, Benchmark::Compact).expect("compact");
        assert_eq!(outcome.ops, 1);
        assert!(run_maintenance(&engine, Benchmark::ReadRandom).is_err());
    }
}
