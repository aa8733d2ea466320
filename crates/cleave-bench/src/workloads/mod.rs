//! The benchmarks, with db_bench's semantics: what each thread does, how
//! operations, bytes and "found" are counted, and how threads are merged.
//! The per-thread loops are in `thread.rs`, YCSB's mixes in `ycsb.rs`.

mod thread;
pub mod ycsb;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use indicatif::ProgressBar;

use crate::distributions::KeyDistribution;
use crate::engines::Engine;
use crate::flags::Flags;
use crate::keys::KeyFormat;
use crate::live::LiveSet;
use crate::merge::MergeShape;
use crate::monitor::Progress;
use crate::space_limit::SpaceLimit;
use crate::value_sizes::ValueSizes;
use crate::write_rate::WriteRate;
use thread::{Role, ThreadStats};
use ycsb::Workload;

/// Latencies are recorded in nanoseconds up to an hour, to 3 significant
/// digits: enough to print db_bench's two decimals of microseconds.
const LATENCY_MAX_NANOS: u64 = 3_600_000_000_000;
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    /// Every key of the key space exactly once, in random order.
    FillUniqueRandom,
    Overwrite,
    /// Read-modify-write: a get, then a put of a new value.
    UpdateRandom,
    ReadRandom,
    /// Gets of `--multiread_batch_size` (or `--batch_size`) random keys at
    /// a time, in one `MultiGet`.
    MultiReadRandom,
    /// `--threads` readers and one extra writer; the readers are reported.
    ReadWhileWriting,
    SeekRandom,
    /// Each operation a get (`--readwritepercent`) or else a put.
    ReadRandomWriteRandom,
    /// As overwrite, with merges (`--merge_operator`) of random keys among
    /// `--merge_keys`.
    MergeRandom,
    /// Each operation a merge (with probability `--mergereadpercent`, as
    /// db_bench) or else a get, of random keys among `--merge_keys`.
    ReadRandomMergeRandom,
    /// YCSB's load phase: `--num` records in hashed (random) order.
    YcsbLoad,
    /// Appends to `--logs` logical logs (Raft logs, redo logs), each
    /// trimmed to its last `--log_window` records every
    /// `--log_trim_every` appends; synced with `--sync`.
    LogAppend,
    Ycsb(Workload),
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
    Merge,
    Seek,
    Compact,
    /// logappend's trims, apart from its appends.
    Trim,
    /// Mixed or maintenance operations.
    Other,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Write => "write",
            OpKind::Read => "read",
            OpKind::Merge => "merge",
            OpKind::Seek => "seek",
            OpKind::Compact => "compact",
            OpKind::Trim => "trim",
            OpKind::Other => "op",
        }
    }
}

impl Benchmark {
    pub const ALL: [Benchmark; 27] = [
        Benchmark::FillSeq,
        Benchmark::FillRandom,
        Benchmark::FillUniqueRandom,
        Benchmark::Overwrite,
        Benchmark::UpdateRandom,
        Benchmark::ReadRandom,
        Benchmark::MultiReadRandom,
        Benchmark::ReadWhileWriting,
        Benchmark::SeekRandom,
        Benchmark::ReadRandomWriteRandom,
        Benchmark::MergeRandom,
        Benchmark::ReadRandomMergeRandom,
        Benchmark::YcsbLoad,
        Benchmark::LogAppend,
        Benchmark::Ycsb(Workload::A),
        Benchmark::Ycsb(Workload::B),
        Benchmark::Ycsb(Workload::C),
        Benchmark::Ycsb(Workload::D),
        Benchmark::Ycsb(Workload::E),
        Benchmark::Ycsb(Workload::F),
        Benchmark::Ycsb(Workload::AM),
        Benchmark::Ycsb(Workload::BM),
        Benchmark::Ycsb(Workload::FM),
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
            Benchmark::FillUniqueRandom => "filluniquerandom",
            Benchmark::Overwrite => "overwrite",
            Benchmark::UpdateRandom => "updaterandom",
            Benchmark::ReadRandom => "readrandom",
            Benchmark::MultiReadRandom => "multireadrandom",
            Benchmark::ReadWhileWriting => "readwhilewriting",
            Benchmark::SeekRandom => "seekrandom",
            Benchmark::ReadRandomWriteRandom => "readrandomwriterandom",
            Benchmark::MergeRandom => "mergerandom",
            Benchmark::ReadRandomMergeRandom => "readrandommergerandom",
            Benchmark::YcsbLoad => "ycsb_load",
            Benchmark::LogAppend => "logappend",
            Benchmark::Ycsb(workload) => workload.name(),
            Benchmark::Flush => "flush",
            Benchmark::Compact => "compact",
            Benchmark::WaitForCompaction => "waitforcompaction",
            Benchmark::Stats => "stats",
        }
    }

    /// db_bench destroys the database before these (its `fresh_db`), and
    /// skips them under --use_existing_db.
    pub fn wants_fresh_db(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq
                | Benchmark::FillRandom
                | Benchmark::FillUniqueRandom
                | Benchmark::YcsbLoad
        )
    }

    pub fn is_maintenance(self) -> bool {
        matches!(
            self,
            Benchmark::Flush | Benchmark::Compact | Benchmark::WaitForCompaction | Benchmark::Stats
        )
    }

    /// Whether the benchmark writes merge operands (and so needs
    /// `--merge_operator`).
    pub fn merges(self) -> bool {
        match self {
            Benchmark::MergeRandom | Benchmark::ReadRandomMergeRandom => true,
            Benchmark::Ycsb(workload) => workload.merges(),
            _ => false,
        }
    }

    /// The kind a mixed benchmark's updates are reported as, beside its
    /// reads (logappend: its trims, beside its appends); `None` for a
    /// benchmark of one kind.
    pub fn update_kind(self) -> Option<OpKind> {
        match self {
            Benchmark::LogAppend => Some(OpKind::Trim),
            Benchmark::Ycsb(workload) if workload.merges() => Some(OpKind::Merge),
            Benchmark::ReadRandomWriteRandom | Benchmark::Ycsb(_) => Some(OpKind::Write),
            Benchmark::ReadRandomMergeRandom => Some(OpKind::Merge),
            _ => None,
        }
    }

    pub fn op_kind(self) -> OpKind {
        match self {
            Benchmark::FillSeq
            | Benchmark::FillRandom
            | Benchmark::FillUniqueRandom
            | Benchmark::Overwrite
            | Benchmark::MergeRandom
            | Benchmark::YcsbLoad
            | Benchmark::LogAppend => OpKind::Write,
            Benchmark::ReadRandom | Benchmark::MultiReadRandom | Benchmark::ReadWhileWriting => {
                OpKind::Read
            }
            Benchmark::SeekRandom => OpKind::Seek,
            Benchmark::Compact => OpKind::Compact,
            Benchmark::UpdateRandom
            | Benchmark::ReadRandomWriteRandom
            | Benchmark::ReadRandomMergeRandom
            | Benchmark::Ycsb(_)
            | Benchmark::Flush
            | Benchmark::WaitForCompaction
            | Benchmark::Stats => OpKind::Other,
        }
    }

    /// Operations thread `index` will do, for the progress bar and the
    /// loops; `None` when `--duration` bounds the benchmark instead.
    pub fn ops_for_thread(self, params: &WorkloadParams, index: usize) -> Option<u64> {
        let split = |total: u64| {
            let threads = params.threads as u64;
            let index = index as u64;
            total / threads + u64::from(index < total % threads)
        };
        let timed = params.duration.is_some();
        match self {
            // A key space is split across threads so each key is written
            // once; the YCSB counts are totals, as YCSB's own.
            Benchmark::FillUniqueRandom | Benchmark::YcsbLoad => Some(split(params.num)),
            Benchmark::Ycsb(_) => Some(split(params.ycsb_operations)),
            _ if timed => None,
            Benchmark::FillSeq | Benchmark::FillRandom | Benchmark::Overwrite => {
                Some(params.writes / params.batch_size * params.batch_size)
            }
            Benchmark::LogAppend => Some(params.writes),
            Benchmark::SeekRandom => Some(params.seeks),
            Benchmark::MergeRandom
            | Benchmark::ReadRandomMergeRandom
            | Benchmark::UpdateRandom
            | Benchmark::ReadRandomWriteRandom => Some(params.readwrites),
            Benchmark::ReadRandom | Benchmark::MultiReadRandom | Benchmark::ReadWhileWriting => {
                Some(params.reads)
            }
            Benchmark::Flush
            | Benchmark::Compact
            | Benchmark::WaitForCompaction
            | Benchmark::Stats => Some(1),
        }
    }

    /// The largest key number this benchmark can write, plus one, given the
    /// YCSB records inserted so far: how large the live set must be.
    pub fn key_space_end(self, params: &WorkloadParams, records: u64) -> u64 {
        match self {
            Benchmark::FillSeq => params.num.max(params.writes),
            Benchmark::MergeRandom | Benchmark::ReadRandomMergeRandom => {
                params.num.max(params.merge_keys)
            }
            Benchmark::Ycsb(workload) if workload.inserts() => records + params.ycsb_operations,
            _ => params.num,
        }
    }
}

/// The per-thread shape of a workload, resolved from the flags.
#[derive(Clone, Debug)]
pub struct WorkloadParams {
    pub num: u64,
    pub reads: u64,
    pub seeks: u64,
    pub writes: u64,
    /// Operations of the benchmarks that both read and write.
    pub readwrites: u64,
    pub keys: KeyFormat,
    pub value_sizes: ValueSizes,
    pub batch_size: u64,
    /// Keys per `MultiGet` of multireadrandom.
    pub multiread_batch_size: u64,
    pub seek_nexts: u64,
    pub threads: usize,
    pub compression_ratio: f64,
    pub write_keys: KeyDistribution,
    pub read_keys: KeyDistribution,
    pub zipf_theta: f64,
    pub duration: Option<Duration>,
    pub readwritepercent: u32,
    /// readrandommergerandom's share of merges, the keys merges touch,
    /// and the merge operator's operands.
    pub mergereadpercent: u32,
    pub merge_keys: u64,
    pub merge: MergeShape,
    /// YCSB run-phase operations in all.
    pub ycsb_operations: u64,
    /// YCSB record size: field count times field length.
    pub ycsb_record_bytes: usize,
    pub ycsb_max_scan_length: u64,
    /// logappend's logs, records kept per log, and appends per trim.
    pub logs: u32,
    pub log_window: u64,
    pub log_trim_every: u64,
}

impl WorkloadParams {
    pub fn from_flags(flags: &Flags) -> Result<Self> {
        Ok(Self {
            num: flags.num,
            reads: flags.reads_per_thread(),
            seeks: flags.seeks_per_thread(),
            writes: flags.writes_per_thread(),
            readwrites: flags.readwrites_per_thread(),
            keys: KeyFormat::with_sizes(flags.key_size_distribution, flags.key_size),
            value_sizes: ValueSizes::new(
                flags.value_size_distribution,
                flags.value_size,
                flags.value_size_min,
                flags.value_size_max,
            )?,
            batch_size: flags.batch_size,
            multiread_batch_size: match flags.multiread_batch_size {
                0 => flags.batch_size,
                keys => keys,
            },
            seek_nexts: flags.seek_nexts,
            threads: flags.threads,
            compression_ratio: flags.compression_ratio,
            write_keys: flags.key_distribution,
            read_keys: flags
                .read_key_distribution
                .unwrap_or(flags.key_distribution),
            zipf_theta: flags.zipf_theta,
            duration: (flags.duration > 0).then(|| Duration::from_secs(flags.duration)),
            readwritepercent: flags.readwritepercent,
            mergereadpercent: flags.mergereadpercent,
            merge_keys: flags.merge_key_space(),
            merge: flags.merge_shape(),
            ycsb_operations: flags.ycsb_operations(),
            ycsb_record_bytes: flags.ycsb_field_count * flags.ycsb_field_length,
            ycsb_max_scan_length: flags.ycsb_max_scan_length,
            logs: flags.logs,
            log_window: flags.log_window,
            log_trim_every: flags.log_trim_every,
        })
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

/// What the benchmark threads share besides the engine.
pub struct Shared<'a> {
    pub engine: &'a dyn Engine,
    /// The keys the harness wrote and their sizes; `None` on an existing
    /// database whose contents the harness does not know.
    pub live: Option<&'a LiveSet>,
    pub limit: Option<&'a SpaceLimit>,
    /// `--benchmark_write_rate_limit`, shared by every writing thread.
    pub write_rate: Option<&'a WriteRate>,
    pub progress: &'a Progress,
    pub bar: Option<&'a ProgressBar>,
    /// YCSB's records: which keys exist and which key an insert takes.
    pub records: &'a Records,
    /// Where each logappend log stands.
    pub logs: &'a LogPositions,
}

/// Each logappend log's next LSN and trim point, kept across benchmarks,
/// so that a second logappend goes on where the first stopped (the first
/// a warm-up that fills an engine's files to their steady state).
pub struct LogPositions {
    logs: Vec<(AtomicU64, AtomicU64)>,
}

impl LogPositions {
    /// `logs` logs, empty: LSNs start at 1.
    pub fn new(logs: u32) -> Self {
        Self {
            logs: (0..logs)
                .map(|_| (AtomicU64::new(1), AtomicU64::new(1)))
                .collect(),
        }
    }

    /// Log `log`'s next LSN and trim point.
    pub fn get(&self, log: u32) -> (u64, u64) {
        self.logs
            .get(log as usize)
            .map_or((1, 1), |(next, trimmed)| {
                (
                    next.load(Ordering::Relaxed),
                    trimmed.load(Ordering::Relaxed),
                )
            })
    }

    pub fn set(&self, log: u32, next: u64, trimmed: u64) {
        if let Some((n, t)) = self.logs.get(log as usize) {
            n.store(next, Ordering::Relaxed);
            t.store(trimmed, Ordering::Relaxed);
        }
    }
}

/// YCSB's record count, as its `AcknowledgedCounterGenerator` keeps it: an
/// insert reserves the next key number before writing it, but reads pick
/// only among records whose insert has finished, so a slow engine is not
/// rewarded with cheap misses on keys still being written.
pub struct Records {
    reserved: AtomicU64,
    acknowledged: AtomicU64,
}

impl Records {
    /// Keys `0..loaded` exist.
    pub fn new(loaded: u64) -> Self {
        Self {
            reserved: AtomicU64::new(loaded),
            acknowledged: AtomicU64::new(loaded),
        }
    }

    /// The key number for the next insert.
    pub fn reserve(&self) -> u64 {
        self.reserved.fetch_add(1, Ordering::AcqRel)
    }

    /// Records that an insert finished.
    pub fn acknowledge(&self) {
        self.acknowledged.fetch_add(1, Ordering::AcqRel);
    }

    /// How many records reads may pick from: the finished inserts. With
    /// several threads an insert can finish before an earlier-reserved one,
    /// so at most `threads - 1` of these may still be in flight; YCSB closes
    /// that gap with a window of acknowledgements, which is not worth it
    /// here.
    pub fn readable(&self) -> u64 {
        self.acknowledged.load(Ordering::Acquire)
    }

    #[cfg(test)]
    pub fn inserted_beyond(&self, loaded: u64) -> u64 {
        self.reserved.load(Ordering::Acquire) - loaded
    }
}

/// The merged result of one benchmark, db_bench's `Stats` after `Merge`.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub benchmark: Benchmark,
    /// Operations done by the reported threads (a batch counts its entries).
    pub ops: u64,
    /// Key and value bytes moved: written, or read when found.
    pub bytes: u64,
    /// Key and value bytes written, by every thread (for write amp).
    pub written_bytes: u64,
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
    /// A mixed benchmark's reads, and its updates (puts, merges,
    /// read-modify-writes, inserts) apart: db_bench's histogram per
    /// operation type. Empty for the others.
    pub read_latencies: Histogram<u64>,
    pub update_latencies: Histogram<u64>,
}

pub fn new_latency_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NANOS, LATENCY_SIGNIFICANT_DIGITS)
        .map_err(|error| anyhow!("latency histogram: {error}"))
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs a data benchmark in `params.threads` threads (plus a writer for
/// readwhilewriting) and merges their results.
pub fn run_parallel(
    context: &Shared<'_>,
    benchmark: Benchmark,
    params: &WorkloadParams,
    seeds: &mut SeedSequence,
) -> Result<RunOutcome> {
    let mut roles: Vec<(Role, u64)> = (0..params.threads)
        .map(|index| (Role::Reported(index), seeds.next_seed()))
        .collect();
    if benchmark == Benchmark::ReadWhileWriting {
        roles.push((Role::BackgroundWriter, seeds.next_seed()));
    }
    // All threads start timing together, after their setup (value buffers,
    // zipfian tables).
    let barrier = Barrier::new(roles.len());
    let readers_left = AtomicUsize::new(params.threads);
    let writer_stop = AtomicBool::new(false);
    let results: Vec<(Role, Result<ThreadStats>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = roles
            .iter()
            .map(|&(role, seed)| {
                let barrier = &barrier;
                let readers_left = &readers_left;
                let writer_stop = &writer_stop;
                let handle = scope.spawn(move || {
                    // The background writer runs until the last reported
                    // thread is done, even if one failed or panicked.
                    let _done = matches!(role, Role::Reported(_)).then(|| ReaderDone {
                        readers_left,
                        writer_stop,
                    });
                    thread::run(context, benchmark, params, role, seed, barrier, writer_stop)
                });
                (role, handle)
            })
            .collect();
        handles
            .into_iter()
            .map(|(role, handle)| {
                let result = handle
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("a benchmark thread panicked")));
                (role, result)
            })
            .collect()
    });
    let mut reported = Vec::with_capacity(results.len());
    let mut background = Vec::new();
    for (role, result) in results {
        let stats = result.with_context(|| format!("benchmark {}", benchmark.name()))?;
        match role {
            Role::Reported(_) => reported.push(stats),
            Role::BackgroundWriter => background.push(stats),
        }
    }
    merge(benchmark, reported, &background)
}

/// Counts a reported thread out when it ends, however it ends, and stops
/// the background writer after the last one.
struct ReaderDone<'a> {
    readers_left: &'a AtomicUsize,
    writer_stop: &'a AtomicBool,
}

impl Drop for ReaderDone<'_> {
    fn drop(&mut self) {
        if self.readers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.writer_stop.store(true, Ordering::Release);
        }
    }
}

fn merge(
    benchmark: Benchmark,
    stats: Vec<ThreadStats>,
    background: &[ThreadStats],
) -> Result<RunOutcome> {
    let Some(first) = stats.first() else {
        bail!("no benchmark threads ran");
    };
    let message = thread::message(benchmark, first, &stats, background);
    let start = stats.iter().map(|s| s.start).min().unwrap_or(first.start);
    let finish = stats.iter().map(|s| s.finish).max().unwrap_or(first.finish);
    let mut outcome = RunOutcome {
        benchmark,
        ops: 0,
        bytes: 0,
        written_bytes: background.iter().map(|s| s.written_bytes).sum(),
        thread_seconds: 0.0,
        elapsed: finish.saturating_duration_since(start),
        message,
        found: 0,
        attempted: 0,
        latencies: new_latency_histogram()?,
        read_latencies: new_latency_histogram()?,
        update_latencies: new_latency_histogram()?,
    };
    for thread in &stats {
        outcome.ops += thread.ops;
        outcome.bytes += thread.bytes;
        outcome.written_bytes += thread.written_bytes;
        outcome.found += thread.found;
        outcome.attempted += thread.attempted;
        outcome.thread_seconds += thread
            .finish
            .saturating_duration_since(thread.start)
            .as_secs_f64();
        for (all, one) in [
            (&mut outcome.latencies, &thread.latencies),
            (&mut outcome.read_latencies, &thread.read_latencies),
            (&mut outcome.update_latencies, &thread.update_latencies),
        ] {
            all.add(one)
                .map_err(|error| anyhow!("merging latencies: {error}"))?;
        }
    }
    Ok(outcome)
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
        written_bytes: 0,
        thread_seconds: elapsed.as_secs_f64(),
        elapsed,
        message: None,
        found: 0,
        attempted: 0,
        latencies,
        read_latencies: new_latency_histogram()?,
        update_latencies: new_latency_histogram()?,
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::engines::memory::MemoryEngine;
    use crate::merge::MergeKind;
    use crate::value_sizes::ValueSizeDistribution;

    fn params(num: u64, threads: usize) -> WorkloadParams {
        WorkloadParams {
            num,
            reads: num,
            seeks: num,
            writes: num,
            readwrites: num,
            keys: KeyFormat::new(16),
            value_sizes: ValueSizes::new(ValueSizeDistribution::Fixed, 100, 0, 0)
                .expect("fixed sizes"),
            batch_size: 1,
            multiread_batch_size: 1,
            seek_nexts: 0,
            threads,
            compression_ratio: 0.5,
            write_keys: KeyDistribution::Uniform,
            read_keys: KeyDistribution::Uniform,
            zipf_theta: 0.99,
            duration: None,
            readwritepercent: 90,
            mergereadpercent: 70,
            merge_keys: num,
            merge: MergeShape {
                kind: MergeKind::Uint64add,
                fields: 10,
                field_len: 100,
                get_put: false,
            },
            ycsb_operations: num,
            ycsb_record_bytes: 1000,
            ycsb_max_scan_length: 10,
            logs: 8,
            log_window: 20,
            log_trim_every: 5,
        }
    }

    /// An engine with the harness state a driver would give it.
    struct Harness {
        engine: MemoryEngine,
        live: LiveSet,
        records: Records,
        logs: LogPositions,
        progress: Progress,
        limit: Option<SpaceLimit>,
        seeds: SeedSequence,
    }

    impl Harness {
        fn new(params: &WorkloadParams, capacity: u64) -> Self {
            Self {
                engine: MemoryEngine::default(),
                live: LiveSet::new(params.keys, capacity),
                records: Records::new(params.num),
                logs: LogPositions::new(params.logs),
                progress: Progress::default(),
                limit: None,
                // A new seed base per harness, as each db_bench run
                // derives fresh seeds per benchmark from one base.
                seeds: SeedSequence::new(1000),
            }
        }

        fn run(&mut self, benchmark: Benchmark, params: &WorkloadParams) -> RunOutcome {
            let shared = Shared {
                engine: &self.engine,
                live: Some(&self.live),
                limit: self.limit.as_ref(),
                write_rate: None,
                progress: &self.progress,
                bar: None,
                records: &self.records,
                logs: &self.logs,
            };
            run_parallel(&shared, benchmark, params, &mut self.seeds).expect("benchmark runs")
        }
    }

    #[test]
    fn fillseq_writes_every_key_once_and_readrandom_finds_all() {
        let params = params(500, 1);
        let mut harness = Harness::new(&params, 500);
        let fill = harness.run(Benchmark::FillSeq, &params);
        assert_eq!(fill.ops, 500);
        assert_eq!(fill.bytes, 500 * 116);
        assert_eq!(fill.written_bytes, 500 * 116);
        assert_eq!(harness.engine.len(), 500);
        assert_eq!(fill.latencies.len(), 500);
        assert_eq!(harness.live.bytes(), 500 * 116);
        let read = harness.run(Benchmark::ReadRandom, &params);
        assert_eq!((read.found, read.attempted), (500, 500));
        assert_eq!(read.message.as_deref(), Some("(500 of 500 found)\n"));
        assert_eq!(read.bytes, 500 * 116);
        assert_eq!(read.written_bytes, 0);
    }

    /// Each log keeps its last `log_window` records, its LSNs going on
    /// from one logappend to the next.
    #[test]
    fn logappend_appends_in_lsn_order_and_trims_to_the_window() {
        let mut params = params(100, 2);
        params.value_sizes =
            ValueSizes::new(ValueSizeDistribution::Fixed, 64, 0, 0).expect("fixed sizes");
        let mut harness = Harness::new(&params, 100);
        let first = harness.run(Benchmark::LogAppend, &params);
        assert_eq!(first.ops, 200);
        assert_eq!(first.written_bytes, 200 * (12 + 64));
        // One latency per append; the trims' apart (8 logs, one each).
        assert_eq!(first.latencies.len(), 200);
        assert_eq!(first.update_latencies.len(), 8);
        // 8 logs, 25 appends each: trimmed at LSN 25 to the last 20.
        assert_eq!(harness.engine.len(), 8 * 20);
        harness.run(Benchmark::LogAppend, &params);
        // 50 appends each: the last trim, at LSN 50, kept 31..=50.
        assert_eq!(harness.engine.len(), 8 * 20);
        for log in 0..8 {
            let last = crate::engines::log_key(log, 50);
            let first_kept = crate::engines::log_key(log, 31);
            let gone = crate::engines::log_key(log, 30);
            assert!(harness.engine.get(&last).expect("get").is_some());
            assert!(harness.engine.get(&first_kept).expect("get").is_some());
            assert!(harness.engine.get(&gone).expect("get").is_none());
        }
    }

    /// Merges land on `--merge_keys` keys with the operator's operands:
    /// field updates keep every record 4 x 50 bytes, and the reads of
    /// readrandommergerandom find the loaded keys.
    #[test]
    fn merge_benchmarks_touch_merge_keys_with_operator_operands() {
        let mut params = params(300, 2);
        params.merge = MergeShape {
            kind: MergeKind::Fieldupdate,
            fields: 4,
            field_len: 50,
            get_put: false,
        };
        params.value_sizes =
            ValueSizes::new(ValueSizeDistribution::Fixed, 200, 0, 0).expect("fixed sizes");
        params.merge_keys = 100;
        params.mergereadpercent = 50;
        let mut harness = Harness::new(&params, 300);
        harness.engine = MemoryEngine::with_merge_operator(params.merge.operator());
        harness.run(Benchmark::FillSeq, &params);
        let beyond = KeyFormat::new(16).encode(150);
        let loaded = harness.engine.get(&beyond).expect("get");
        let merged = harness.run(Benchmark::MergeRandom, &params);
        assert_eq!(merged.ops, 600);
        // Operands of 2 + 50 bytes under 16-byte keys.
        assert_eq!(merged.written_bytes, 600 * (16 + 52));
        assert_eq!(merged.message.as_deref(), Some("( updates:300)"));
        let mixed = harness.run(Benchmark::ReadRandomMergeRandom, &params);
        assert_eq!(mixed.ops, 600);
        assert!(mixed.found > 200 && mixed.found == mixed.attempted);
        // Reads and merges timed apart too.
        assert_eq!(mixed.read_latencies.len(), mixed.attempted);
        assert_eq!(mixed.update_latencies.len(), 600 - mixed.attempted);
        assert!(merged.read_latencies.is_empty() && merged.update_latencies.is_empty());
        let message = mixed.message.expect("a message");
        assert!(message.contains("maxlength:200)"), "{message}");
        assert_eq!(harness.engine.len(), 300);
        assert_eq!(harness.live.bytes(), 300 * (16 + 200));
        // No merge reached a key beyond --merge_keys.
        assert_eq!(harness.engine.get(&beyond).expect("get"), loaded);
        // As get+put, on an engine without merge: whole records written.
        params.merge.get_put = true;
        let mut get_put = Harness::new(&params, 300);
        get_put.run(Benchmark::FillSeq, &params);
        let rewritten = get_put.run(Benchmark::MergeRandom, &params);
        assert_eq!(rewritten.written_bytes, 600 * (16 + 200));
        assert_eq!(get_put.live.bytes(), 300 * (16 + 200));
    }

    #[test]
    fn multireadrandom_reads_batches_and_counts_each_key() {
        let mut params = params(500, 1);
        let mut harness = Harness::new(&params, 500);
        harness.run(Benchmark::FillSeq, &params);
        params.multiread_batch_size = 7;
        let read = harness.run(Benchmark::MultiReadRandom, &params);
        // 500 keys in batches of 7: the last batch holds the 3 left.
        assert_eq!((read.found, read.attempted, read.ops), (500, 500, 500));
        assert_eq!(read.latencies.len(), 500_u64.div_ceil(7));
        assert_eq!(read.bytes, 500 * 116);
        assert_eq!(read.message.as_deref(), Some("(500 of 500 found)\n"));
    }

    #[test]
    fn fillrandom_repeats_keys_and_the_live_set_counts_each_once() {
        let params = params(1000, 1);
        let mut harness = Harness::new(&params, 1000);
        let fill = harness.run(Benchmark::FillRandom, &params);
        assert_eq!(fill.ops, 1000);
        // Uniform draws with replacement leave about 1/e of keys unwritten.
        let distinct = harness.engine.len();
        assert!((550..=720).contains(&distinct), "{distinct} distinct keys");
        assert_eq!(harness.live.keys(), distinct as u64);
        assert_eq!(harness.live.bytes(), distinct as u64 * 116);
        let read = harness.run(Benchmark::ReadRandom, &params);
        assert!(read.found < read.attempted);
        // No key lies outside [0, num).
        let beyond = KeyFormat::new(16).encode(1000);
        assert_eq!(harness.engine.scan(&beyond, 1).expect("scan").entries, 0);
    }

    #[test]
    fn filluniquerandom_writes_each_key_exactly_once_across_threads() {
        let params = params(1001, 3);
        let mut harness = Harness::new(&params, 1001);
        let fill = harness.run(Benchmark::FillUniqueRandom, &params);
        assert_eq!(fill.ops, 1001);
        assert_eq!(harness.engine.len(), 1001);
        assert_eq!(harness.live.bytes(), 1001 * 116);
        // In random order: the first keys written are not 0, 1, 2.
        assert_eq!(
            harness
                .engine
                .counters()
                .expect("counters")
                .user_bytes_written,
            1001 * 116
        );
    }

    #[test]
    fn batched_loads_still_write_every_key() {
        let mut params = params(1000, 3);
        params.batch_size = 7;
        let mut harness = Harness::new(&params, 1000);
        let fill = harness.run(Benchmark::FillUniqueRandom, &params);
        // Each thread's last batch is short rather than dropped.
        assert_eq!(fill.ops, 1000);
        assert_eq!(harness.engine.len(), 1000);
        params.num = 10;
        params.threads = 4;
        params.batch_size = 8;
        let mut harness = Harness::new(&params, 10);
        harness.run(Benchmark::YcsbLoad, &params);
        assert_eq!(harness.engine.len(), 10);
    }

    #[test]
    fn the_background_writer_stops_waiting_for_space_when_the_readers_finish() {
        let mut params = params(200, 1);
        let mut harness = Harness::new(&params, 200);
        harness.run(Benchmark::FillSeq, &params);
        // Over the limit for good (no monitor runs here): only the readers'
        // end can release the writer.
        let limit = SpaceLimit::new(1.0, 0, Duration::from_secs(600));
        limit.update(1_000_000, 1);
        harness.limit = Some(limit);
        params.reads = 100;
        let outcome = harness.run(Benchmark::ReadWhileWriting, &params);
        assert_eq!(outcome.found, 100);
        assert!(!harness.limit.as_ref().expect("limit").gave_up());
    }

    #[test]
    fn every_thread_does_the_full_count_as_db_bench() {
        let mut params = params(300, 3);
        params.batch_size = 10;
        params.writes = 105; // db_bench drops the partial last batch
        let mut harness = Harness::new(&params, 300);
        let fill = harness.run(Benchmark::FillSeq, &params);
        assert_eq!(fill.ops, 3 * 100);
        assert_eq!(fill.latencies.len(), 3 * 10);
        assert_eq!(harness.engine.len(), 100);
        assert_eq!(harness.live.keys(), 100);
        assert!(fill.thread_seconds > 0.0);
        let read = harness.run(Benchmark::ReadRandom, &params);
        assert_eq!(read.ops, 900);
        // The message is the first thread's, as db_bench prints it.
        assert!(read
            .message
            .is_some_and(|m| m.ends_with(" of 300 found)\n")));
    }

    #[test]
    fn seekrandom_counts_exact_hits_and_next_bytes() {
        let mut params = params(200, 1);
        let mut harness = Harness::new(&params, 200);
        harness.run(Benchmark::FillSeq, &params);
        params.seek_nexts = 3;
        params.seeks = 50;
        let seek = harness.run(Benchmark::SeekRandom, &params);
        assert_eq!((seek.ops, seek.found), (50, 50));
        // Seeks near the end read fewer than 3 entries.
        assert!(seek.bytes <= 50 * 3 * 116);
        assert!(seek.bytes >= 50 * 116);
        params.seek_nexts = 0;
        let seek = harness.run(Benchmark::SeekRandom, &params);
        assert_eq!(seek.bytes, 0);
    }

    #[test]
    fn overwrite_with_zipfian_keys_concentrates_on_few_keys() {
        let mut params = params(10_000, 1);
        params.write_keys = KeyDistribution::Zipfian;
        let mut harness = Harness::new(&params, 10_000);
        harness.run(Benchmark::Overwrite, &params);
        // Uniform draws would touch ~63% of 10,000 keys; zipfian 0.99 far
        // fewer, since the hottest keys take most writes.
        let distinct = harness.engine.len();
        assert!(distinct < 4_000, "{distinct} distinct keys");
    }

    #[test]
    fn mixed_benchmarks_count_reads_and_writes() {
        let mut params = params(500, 2);
        let mut harness = Harness::new(&params, 500);
        harness.run(Benchmark::FillSeq, &params);
        params.readwrites = 400;
        let update = harness.run(Benchmark::UpdateRandom, &params);
        assert_eq!(update.ops, 800);
        assert_eq!(update.found, 800);
        assert_eq!(update.written_bytes, 800 * 116);
        assert!(update
            .message
            .is_some_and(|m| m == "( updates:400 found:400)"));

        params.readwritepercent = 70;
        let mixed = harness.run(Benchmark::ReadRandomWriteRandom, &params);
        assert_eq!(mixed.ops, 800);
        let writes = mixed.written_bytes / 116;
        // 30% of 800 writes: a binomial with sd ≈ 13.
        assert!((180..=300).contains(&writes), "{writes} writes");
        assert_eq!(mixed.found, 800 - writes);
    }

    #[test]
    fn readwhilewriting_reports_readers_and_counts_the_writers_bytes() {
        let mut params = params(500, 2);
        let mut harness = Harness::new(&params, 500);
        harness.run(Benchmark::FillSeq, &params);
        params.reads = 300;
        let outcome = harness.run(Benchmark::ReadWhileWriting, &params);
        assert_eq!(outcome.ops, 600);
        assert_eq!(outcome.found, 600);
        // The writer ran beside the readers until they were done.
        assert!(outcome
            .message
            .is_some_and(|m| m.starts_with("(300 of 300 found; the writer did ")));
        assert_eq!(outcome.written_bytes % 116, 0);
    }

    #[test]
    fn duration_bounds_a_benchmark_instead_of_its_count() {
        let mut params = params(100, 1);
        params.reads = 1;
        params.duration = Some(Duration::from_millis(200));
        let mut harness = Harness::new(&params, 100);
        harness.run(Benchmark::FillSeq, &params);
        let read = harness.run(Benchmark::ReadRandom, &params);
        // With --reads=1 a counted run would stop after one read.
        assert!(read.ops > 1, "ran {} reads", read.ops);
        // Under --duration fillseq wraps its keys inside the key space.
        assert!(harness.engine.len() <= 100);
    }

    #[test]
    fn ycsb_load_then_workloads_follow_their_mixes() {
        let mut params = params(2_000, 2);
        params.ycsb_operations = 4_000;
        let capacity = 2_000 + 2 * 4_000;
        let mut harness = Harness::new(&params, capacity);
        let load = harness.run(Benchmark::YcsbLoad, &params);
        assert_eq!(load.ops, 2_000);
        assert_eq!(harness.engine.len(), 2_000);
        assert_eq!(harness.live.bytes(), 2_000 * (16 + 1000));

        let a = harness.run(Benchmark::Ycsb(Workload::A), &params);
        assert_eq!(a.ops, 4_000);
        // Every read finds its record; about half the operations update.
        assert_eq!(a.found, a.attempted);
        let updates = a.written_bytes / 1016;
        assert!((1_800..=2_200).contains(&updates), "{updates} updates");
        assert_eq!(harness.engine.len(), 2_000);

        let d = harness.run(Benchmark::Ycsb(Workload::D), &params);
        let inserted = harness.records.inserted_beyond(2_000);
        assert_eq!(harness.records.readable(), 2_000 + inserted);
        assert!((120..=290).contains(&inserted), "{inserted} inserts");
        assert_eq!(harness.engine.len() as u64, 2_000 + inserted);
        assert_eq!(harness.live.keys(), 2_000 + inserted);
        assert!(d.found + 50 >= d.attempted);

        let e = harness.run(Benchmark::Ycsb(Workload::E), &params);
        assert!(e.bytes > 0);
        let message = e.message.unwrap_or_default();
        let scans: u64 = message
            .split("scans ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|count| count.parse().ok())
            .expect("scan count in the message");
        // 95% of 4,000: a binomial with sd ≈ 14.
        assert!((3_700..=3_900).contains(&scans), "{message}");
        let c = harness.run(Benchmark::Ycsb(Workload::C), &params);
        assert_eq!(c.written_bytes, 0);
        assert_eq!(c.found, 4_000);
    }

    #[test]
    fn writers_wait_while_the_space_limit_is_exceeded() {
        let params = params(200, 1);
        let mut harness = Harness::new(&params, 200);
        let limit = SpaceLimit::new(1.0, 0, Duration::from_millis(50));
        // The monitor is not running, so nothing lifts the limit: the writer
        // waits the maximum, then the benchmark finishes unthrottled.
        limit.update(1_000_000, 1);
        harness.limit = Some(limit);
        let fill = harness.run(Benchmark::FillSeq, &params);
        assert_eq!(fill.ops, 200);
        let limit = harness.limit.as_ref().expect("limit");
        assert!(limit.gave_up());
        assert!(limit.throttled() >= Duration::from_millis(50));
        // The harness's wait is not an engine latency.
        assert!(fill.latencies.max() < 50_000_000);
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
        assert!(Benchmark::parse("readwhilemerging").is_err());
    }

    #[test]
    fn maintenance_is_one_op() {
        let engine = MemoryEngine::default();
        let outcome = run_maintenance(&engine, Benchmark::Compact).expect("compact");
        assert_eq!(outcome.ops, 1);
        assert!(run_maintenance(&engine, Benchmark::ReadRandom).is_err());
    }
}
