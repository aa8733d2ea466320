//! What one benchmark thread does, operation by operation, and how it
//! counts: db_bench's loops, plus filluniquerandom and YCSB.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::ycsb::{Op, Workload};
use super::{nanos, new_latency_histogram, Benchmark, Shared, WorkloadParams};
use crate::distributions::{KeyChooser, KeyDistribution, Permutation};
use crate::keys::KeyFormat;
use crate::values::ValueGenerator;

/// Threads publish progress-bar steps this large, so the shared bar is not
/// a point of contention.
const PROGRESS_STEP: u64 = 1024;
/// filluniquerandom and ycsb_load visit the key space in this fixed random
/// order, so every engine and every run loads the same way (as db_bench's
/// filluniquerandomdeterministic).
const PERMUTATION_SEED: u64 = 0x636c_6561_7665;
/// What a logappend record's address costs, counted as its key: a log
/// number and an LSN (the key-value engines' key, `engines::log_key`).
const LOG_KEY_BYTES: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// One of the `--threads` threads whose operations are the result; the
    /// index splits key spaces among them.
    Reported(usize),
    /// readwhilewriting's writer: it writes until the readers are done, and
    /// only its bytes count (for write amplification).
    BackgroundWriter,
}

pub struct ThreadStats {
    pub ops: u64,
    pub bytes: u64,
    pub written_bytes: u64,
    pub found: u64,
    /// Gets and seeks attempted.
    pub attempted: u64,
    pub writes: u64,
    /// YCSB's updates, inserts, scans and read-modify-writes.
    pub updates: u64,
    pub inserts: u64,
    pub scans: u64,
    pub read_modify_writes: u64,
    /// Merges, and the longest value a read returned.
    pub merges: u64,
    pub max_value_len: u64,
    pub latencies: Histogram<u64>,
    /// A mixed benchmark's reads and updates apart (`RunOutcome`'s).
    pub read_latencies: Histogram<u64>,
    pub update_latencies: Histogram<u64>,
    pub start: Instant,
    pub finish: Instant,
}

/// db_bench's message suffix for a benchmark: the first thread's counts,
/// as db_bench prints them (YCSB's are summed over all threads).
pub fn message(
    benchmark: Benchmark,
    first: &ThreadStats,
    all: &[ThreadStats],
    background: &[ThreadStats],
) -> Option<String> {
    let sum = |field: fn(&ThreadStats) -> u64| all.iter().map(field).sum::<u64>();
    match benchmark {
        Benchmark::ReadRandom | Benchmark::MultiReadRandom | Benchmark::SeekRandom => {
            Some(format!("({} of {} found)\n", first.found, first.attempted))
        }
        Benchmark::ReadWhileWriting => {
            let puts: u64 = background.iter().map(|writer| writer.writes).sum();
            Some(format!(
                "({} of {} found; the writer did {puts} puts)\n",
                first.found, first.attempted
            ))
        }
        Benchmark::UpdateRandom => {
            Some(format!("( updates:{} found:{})", first.writes, first.found))
        }
        Benchmark::ReadRandomWriteRandom => Some(format!(
            "( reads:{} writes:{} total:{} found:{})",
            first.attempted, first.writes, first.ops, first.found
        )),
        Benchmark::MergeRandom => Some(format!("( updates:{})", first.merges)),
        Benchmark::ReadRandomMergeRandom => Some(format!(
            "(reads:{} merges:{} total:{} hits:{} maxlength:{})",
            first.attempted, first.merges, first.ops, first.found, first.max_value_len
        )),
        Benchmark::Ycsb(_) => Some(format!(
            "(reads {} found {}, updates {}, inserts {}, scans {}, read-modify-writes {}, merges {})",
            sum(|s| s.attempted),
            sum(|s| s.found),
            sum(|s| s.updates),
            sum(|s| s.inserts),
            sum(|s| s.scans),
            sum(|s| s.read_modify_writes),
            sum(|s| s.merges),
        )),
        _ => None,
    }
}

/// When a loop ends: after a count of operations, at a deadline
/// (`--duration`), or when told to stop (the background writer).
struct Budget<'a> {
    ops: Option<u64>,
    deadline: Option<Instant>,
    stop: Option<&'a AtomicBool>,
}

impl Budget<'_> {
    /// How many entries the next write batch holds: `batch_size`, or fewer
    /// when the count has fewer left (so a load writes every key), or
    /// `None` when the loop is over.
    fn next_batch(&self, done: u64, batch_size: u64) -> Option<u64> {
        let batch = match self.ops {
            Some(ops) => batch_size.min(ops.saturating_sub(done)),
            None => batch_size,
        };
        (batch > 0 && self.allows(done, batch)).then_some(batch)
    }

    /// Whether `more` further operations fit after `done`.
    fn allows(&self, done: u64, more: u64) -> bool {
        if self.ops.is_some_and(|ops| done + more > ops) {
            return false;
        }
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            return false;
        }
        !self.stop.is_some_and(|stop| stop.load(Ordering::Acquire))
    }
}

/// Per-thread loop state.
struct ThreadRun<'a> {
    context: &'a Shared<'a>,
    params: &'a WorkloadParams,
    benchmark: Benchmark,
    role: Role,
    keys: KeyFormat,
    key: Vec<u8>,
    rng: StdRng,
    values: ValueGenerator,
    stats: ThreadStats,
    last_op_finish: Instant,
    unreported_progress: u64,
    /// Set for readwhilewriting's writer once the readers are done.
    stop: Option<&'a AtomicBool>,
}

pub fn run(
    context: &Shared<'_>,
    benchmark: Benchmark,
    params: &WorkloadParams,
    role: Role,
    seed: u64,
    barrier: &Barrier,
    writer_stop: &AtomicBool,
) -> Result<ThreadStats> {
    let now = Instant::now();
    let largest_value = params.value_sizes.max().max(params.ycsb_record_bytes);
    let mut run = ThreadRun {
        context,
        params,
        benchmark,
        role,
        keys: params.keys,
        key: Vec::with_capacity(params.keys.max()),
        rng: StdRng::seed_from_u64(seed),
        values: ValueGenerator::new(largest_value, params.compression_ratio),
        stats: ThreadStats {
            ops: 0,
            bytes: 0,
            written_bytes: 0,
            found: 0,
            attempted: 0,
            writes: 0,
            updates: 0,
            inserts: 0,
            scans: 0,
            read_modify_writes: 0,
            merges: 0,
            max_value_len: 0,
            latencies: new_latency_histogram()?,
            read_latencies: new_latency_histogram()?,
            update_latencies: new_latency_histogram()?,
            start: now,
            finish: now,
        },
        last_op_finish: now,
        unreported_progress: 0,
        stop: (role == Role::BackgroundWriter).then_some(writer_stop),
    };
    let index = match role {
        Role::Reported(index) => index,
        Role::BackgroundWriter => 0,
    };
    // Set up before the barrier: a zipfian table takes O(keys) to build and
    // must not count as benchmark time.
    let plan = run.plan(benchmark);
    // Every thread reaches the barrier, even one whose setup failed, or the
    // others would wait for it forever.
    barrier.wait();
    let mut plan = plan?;
    let deadline = params.duration.map(|duration| Instant::now() + duration);
    let budget = match role {
        Role::BackgroundWriter => Budget {
            ops: None,
            deadline: None,
            stop: Some(writer_stop),
        },
        Role::Reported(_) => {
            // A count bounds the loop unless there is none: then --duration.
            let ops = benchmark.ops_for_thread(params, index);
            Budget {
                ops,
                deadline: if ops.is_none() { deadline } else { None },
                stop: None,
            }
        }
    };
    run.start_timing();
    match benchmark {
        _ if role == Role::BackgroundWriter => run.write(&budget, &mut plan)?,
        Benchmark::FillSeq
        | Benchmark::FillRandom
        | Benchmark::FillUniqueRandom
        | Benchmark::Overwrite
        | Benchmark::YcsbLoad => run.write(&budget, &mut plan)?,
        Benchmark::UpdateRandom => run.update_random(&budget, &mut plan)?,
        Benchmark::ReadRandom | Benchmark::ReadWhileWriting => {
            run.read_random(&budget, &mut plan)?
        }
        Benchmark::MultiReadRandom => run.multi_read_random(&budget, &mut plan)?,
        Benchmark::SeekRandom => run.seek_random(&budget, &mut plan)?,
        Benchmark::ReadRandomWriteRandom => run.read_random_write_random(&budget, &mut plan)?,
        Benchmark::MergeRandom | Benchmark::ReadRandomMergeRandom => {
            run.merge_random(&budget, &mut plan)?
        }
        Benchmark::Ycsb(workload) => run.ycsb(workload, &budget, &mut plan)?,
        Benchmark::LogAppend => run.log_append(&budget, index)?,
        other => bail!("{} is not a data benchmark", other.name()),
    }
    run.stats.finish = Instant::now();
    if let Some(bar) = context.bar {
        bar.inc(run.unreported_progress);
    }
    Ok(run.stats)
}

/// Which key each operation touches.
struct Plan {
    write_keys: WriteKeys,
    read_keys: Option<KeyChooser>,
}

enum WriteKeys {
    /// 0, 1, 2, ... (wrapping at the key space under --duration).
    Sequential {
        next: u64,
    },
    /// The thread's share of a fixed permutation of the key space: the
    /// `n`-th write takes position `first + n * stride`.
    Unique {
        permutation: Permutation,
        next: u64,
        stride: u64,
    },
    Chosen(KeyChooser),
    None,
}

impl ThreadRun<'_> {
    fn plan(&mut self, benchmark: Benchmark) -> Result<Plan> {
        let params = self.params;
        let chooser = |distribution: KeyDistribution| {
            KeyChooser::new(distribution, params.num, params.zipf_theta)
        };
        let write_keys = match benchmark {
            _ if self.role == Role::BackgroundWriter => {
                WriteKeys::Chosen(chooser(params.write_keys))
            }
            Benchmark::FillSeq => WriteKeys::Sequential { next: 0 },
            Benchmark::FillRandom => WriteKeys::Chosen(chooser(KeyDistribution::Uniform)),
            Benchmark::FillUniqueRandom | Benchmark::YcsbLoad => {
                let Role::Reported(index) = self.role else {
                    bail!("a load has no background writer");
                };
                WriteKeys::Unique {
                    permutation: Permutation::new(params.num, PERMUTATION_SEED),
                    next: index as u64,
                    stride: params.threads as u64,
                }
            }
            Benchmark::Overwrite | Benchmark::UpdateRandom | Benchmark::ReadRandomWriteRandom => {
                WriteKeys::Chosen(chooser(params.write_keys))
            }
            // Reads and merges alike among --merge_keys keys.
            Benchmark::MergeRandom | Benchmark::ReadRandomMergeRandom => WriteKeys::Chosen(
                KeyChooser::new(params.write_keys, params.merge_keys, params.zipf_theta),
            ),
            _ => WriteKeys::None,
        };
        let read_keys = match benchmark {
            _ if self.role == Role::BackgroundWriter => None,
            Benchmark::ReadRandom
            | Benchmark::MultiReadRandom
            | Benchmark::ReadWhileWriting
            | Benchmark::SeekRandom
            | Benchmark::ReadRandomWriteRandom => Some(chooser(params.read_keys)),
            Benchmark::Ycsb(workload) => {
                let records = self.context.records.readable();
                Some(KeyChooser::new(
                    workload.request_distribution(),
                    records,
                    params.zipf_theta,
                ))
            }
            _ => None,
        };
        Ok(Plan {
            write_keys,
            read_keys,
        })
    }

    fn start_timing(&mut self) {
        let now = Instant::now();
        self.stats.start = now;
        self.last_op_finish = now;
    }

    /// Records one finished operation (or batch of `ops` entries): its
    /// latency since the previous one finished, as db_bench's `FinishedOps`.
    fn finished(&mut self, ops: u64, bytes: u64) {
        self.finished_as(None, ops, bytes);
    }

    /// As [`Self::finished`], for a mixed benchmark's read (`Some(true)`)
    /// or update (`Some(false)`), whose latency is also kept apart.
    fn finished_as(&mut self, read: Option<bool>, ops: u64, bytes: u64) {
        let now = Instant::now();
        let latency = nanos(now.saturating_duration_since(self.last_op_finish)).max(1);
        self.stats.latencies.saturating_record(latency);
        match read {
            Some(true) => self.stats.read_latencies.saturating_record(latency),
            Some(false) => self.stats.update_latencies.saturating_record(latency),
            None => {}
        }
        self.last_op_finish = now;
        self.stats.ops += ops;
        self.context.progress.add(ops, bytes);
        self.unreported_progress += ops;
        if self.unreported_progress >= PROGRESS_STEP {
            if let Some(bar) = self.context.bar {
                bar.inc(self.unreported_progress);
            }
            self.unreported_progress = 0;
        }
    }

    /// Records a logappend trim's latency in the trims' own histogram (the
    /// update kind's): appends and trims are timed apart, as db_bench times
    /// each kind of a mixed benchmark, while the trims' time stays in the
    /// benchmark's wall time and so in its appends/s.
    fn finished_trim(&mut self) {
        let now = Instant::now();
        let latency = nanos(now.saturating_duration_since(self.last_op_finish)).max(1);
        self.stats.update_latencies.saturating_record(latency);
        self.last_op_finish = now;
    }

    /// Waits while the engine is over the space limit. The wait is the
    /// harness's, not the engine's, so it is left out of the next
    /// operation's latency (but not out of the benchmark's wall time).
    fn throttle(&mut self) {
        if self
            .context
            .limit
            .is_some_and(|limit| limit.wait_if_over(self.stop))
        {
            self.last_op_finish = Instant::now();
        }
    }

    /// Waits for `--benchmark_write_rate_limit` to let `bytes` through. The
    /// wait is not the engine's, so it stays out of the latencies, as the
    /// space limit's does (db_bench counts it in).
    fn pace(&mut self, bytes: u64) {
        if self.context.write_rate.is_some_and(|rate| rate.pace(bytes)) {
            self.last_op_finish = Instant::now();
        }
    }

    /// Puts a value of `len` bytes under key number `index`.
    fn put(&mut self, index: u64, len: usize) -> Result<u64> {
        self.keys.encode_into(index, &mut self.key);
        self.context
            .engine
            .put(&self.key, self.values.next_value(len))?;
        Ok(self.wrote(index, len))
    }

    /// Accounts for a write the engine acknowledged.
    fn wrote(&mut self, index: u64, len: usize) -> u64 {
        if let Some(live) = self.context.live {
            live.put(index, len);
        }
        let bytes = (self.keys.size(index) + len) as u64;
        self.stats.written_bytes += bytes;
        self.stats.writes += 1;
        bytes
    }

    /// Merges an operand the merge operator takes into key number `index`,
    /// or with `--merge_as_get_put` gets the value, applies the operator and
    /// puts the result; returns the bytes written.
    fn merge(&mut self, index: u64) -> Result<u64> {
        self.keys.encode_into(index, &mut self.key);
        let merge = self.params.merge;
        let source_len = merge.operand_source_len(self.value_len());
        let operand = merge.operand(&mut self.rng, self.values.next_value(source_len));
        let written = if merge.get_put {
            let op = merge
                .operator()
                .ok_or_else(|| anyhow!("--merge_as_get_put needs a --merge_operator"))?;
            let old = self.context.engine.get(&self.key)?;
            let new = op
                .full_merge(&self.key, old.as_deref(), &[&operand])
                .map_err(|reason| anyhow!("applying {}: {reason}", op.name()))?;
            self.context.engine.put(&self.key, &new)?;
            new.len()
        } else {
            self.context.engine.merge(&self.key, &operand)?;
            operand.len()
        };
        if let (Some(live), Some(len)) = (self.context.live, merge.merged_len(operand.len())) {
            live.put(index, len);
        }
        let bytes = (self.key.len() + written) as u64;
        self.stats.written_bytes += bytes;
        self.stats.merges += 1;
        Ok(bytes)
    }

    /// Gets key number `index`; returns the bytes read if it was found.
    fn get(&mut self, index: u64) -> Result<Option<u64>> {
        self.keys.encode_into(index, &mut self.key);
        self.stats.attempted += 1;
        let Some(value) = self.context.engine.get(&self.key)? else {
            return Ok(None);
        };
        self.stats.found += 1;
        self.stats.max_value_len = self.stats.max_value_len.max(value.len() as u64);
        Ok(Some((self.key.len() + value.len()) as u64))
    }

    fn next_write_index(&mut self, plan: &mut Plan) -> Result<u64> {
        Ok(match &mut plan.write_keys {
            WriteKeys::Sequential { next } => {
                // db_bench's sequential generator counts on past --num when
                // --writes exceeds it; under --duration it wraps, so the
                // live set stays bounded.
                let index = *next;
                *next += 1;
                match self.params.duration {
                    Some(_) => index % self.params.num.max(self.params.writes),
                    None => index,
                }
            }
            WriteKeys::Unique {
                permutation,
                next,
                stride,
            } => {
                let index = permutation.get(*next);
                *next += *stride;
                index
            }
            WriteKeys::Chosen(chooser) => chooser.next(&mut self.rng, self.params.num),
            WriteKeys::None => bail!("this benchmark does not write"),
        })
    }

    fn next_read_index(&mut self, plan: &mut Plan, items: u64) -> Result<u64> {
        match &mut plan.read_keys {
            Some(chooser) => Ok(chooser.next(&mut self.rng, items)),
            None => bail!("this benchmark does not read"),
        }
    }

    /// The next value's size: YCSB's fixed record, or a draw from
    /// `--value_size_distribution`.
    fn value_len(&mut self) -> usize {
        match self.benchmark {
            Benchmark::YcsbLoad | Benchmark::Ycsb(_) => self.params.ycsb_record_bytes,
            _ => self.params.value_sizes.sample(&mut self.rng),
        }
    }

    /// The fill, overwrite and YCSB load loop, and readwhilewriting's writer.
    fn write(&mut self, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        let mut entries: Vec<(u64, Vec<u8>, usize)> = Vec::new();
        while let Some(batch_size) = budget.next_batch(self.stats.ops, self.params.batch_size) {
            self.throttle();
            if batch_size == 1 {
                let index = self.next_write_index(plan)?;
                let len = self.value_len();
                self.pace((self.keys.size(index) + len) as u64);
                let bytes = self.put(index, len)?;
                self.stats.bytes += bytes;
                self.finished(1, bytes);
                continue;
            }
            entries.clear();
            for _ in 0..batch_size {
                let index = self.next_write_index(plan)?;
                let len = self.value_len();
                entries.push((index, self.keys.encode(index), len));
            }
            let batch_bytes = entries
                .iter()
                .map(|(_, key, len)| (key.len() + len) as u64)
                .sum();
            self.pace(batch_bytes);
            let values: Vec<Vec<u8>> = entries
                .iter()
                .map(|&(_, _, len)| self.values.next_value(len).to_vec())
                .collect();
            let batch: Vec<(&[u8], &[u8])> = entries
                .iter()
                .zip(&values)
                .map(|((_, key, _), value)| (key.as_slice(), value.as_slice()))
                .collect();
            self.context.engine.write_batch(&batch)?;
            let mut bytes = 0;
            for &(index, _, len) in &entries {
                bytes += self.wrote(index, len);
            }
            self.stats.bytes += bytes;
            self.finished(batch_size, bytes);
        }
        Ok(())
    }

    /// logappend: this thread's logs (those whose number is its index
    /// modulo the threads) in turn, each record at the log's next LSN, and
    /// every `log_trim_every`-th append to a log trims it to its last
    /// `log_window` records.
    fn log_append(&mut self, budget: &Budget<'_>, index: usize) -> Result<()> {
        let params = self.params;
        let logs: Vec<u32> = (index as u32..params.logs)
            .step_by(params.threads)
            .collect();
        if logs.is_empty() {
            bail!(
                "logappend: --logs ({}) must be at least --threads ({})",
                params.logs,
                params.threads
            );
        }
        // Per log: the next LSN and the trim point so far.
        let positions: Vec<(u64, u64)> =
            logs.iter().map(|&log| self.context.logs.get(log)).collect();
        let mut next: Vec<u64> = positions.iter().map(|p| p.0).collect();
        let mut trimmed: Vec<u64> = positions.iter().map(|p| p.1).collect();
        let mut turn = 0;
        while budget.allows(self.stats.ops, 1) {
            self.throttle();
            let slot = turn % logs.len();
            turn += 1;
            let lsn = next[slot];
            next[slot] += 1;
            let len = self.value_len();
            self.pace((LOG_KEY_BYTES + len) as u64);
            self.context
                .engine
                .log_append(logs[slot], lsn, self.values.next_value(len))?;
            let bytes = (LOG_KEY_BYTES + len) as u64;
            self.stats.written_bytes += bytes;
            self.stats.writes += 1;
            self.stats.bytes += bytes;
            self.finished(1, bytes);
            if lsn.is_multiple_of(params.log_trim_every) && lsn > params.log_window {
                let before = lsn + 1 - params.log_window;
                self.context
                    .engine
                    .log_trim(logs[slot], trimmed[slot], before)?;
                trimmed[slot] = before;
                self.finished_trim();
            }
        }
        for (slot, &log) in logs.iter().enumerate() {
            self.context.logs.set(log, next[slot], trimmed[slot]);
        }
        Ok(())
    }

    /// db_bench's updaterandom: get a key, then put a new value under it
    /// whether or not it was found.
    fn update_random(&mut self, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        while budget.allows(self.stats.ops, 1) {
            self.throttle();
            let index = self.next_write_index(plan)?;
            let mut bytes = self.get(index)?.unwrap_or(0);
            let len = self.value_len();
            bytes += self.put(index, len)?;
            self.stats.bytes += bytes;
            self.finished(1, bytes);
        }
        Ok(())
    }

    fn read_random(&mut self, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        while budget.allows(self.stats.ops, 1) {
            let index = self.next_read_index(plan, self.params.num)?;
            let bytes = self.get(index)?.unwrap_or(0);
            self.stats.bytes += bytes;
            self.finished(1, bytes);
        }
        Ok(())
    }

    /// db_bench's multireadrandom: `--batch_size` keys per `MultiGet`
    /// (`--multiread_batch_size` if set), the
    /// batch one latency sample of that many operations.
    fn multi_read_random(&mut self, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        let batch_size = self.params.multiread_batch_size;
        while let Some(batch) = budget.next_batch(self.stats.ops, batch_size) {
            let mut keys = Vec::with_capacity(batch as usize);
            for _ in 0..batch {
                let index = self.next_read_index(plan, self.params.num)?;
                self.keys.encode_into(index, &mut self.key);
                keys.push(self.key.clone());
            }
            let asked: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let values = self.context.engine.multi_get(&asked)?;
            let mut bytes = 0;
            for (key, value) in keys.iter().zip(&values) {
                if let Some(value) = value {
                    self.stats.found += 1;
                    bytes += (key.len() + value.len()) as u64;
                }
            }
            self.stats.attempted += batch;
            self.stats.bytes += bytes;
            self.finished(batch, bytes);
        }
        Ok(())
    }

    fn seek_random(&mut self, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        while budget.allows(self.stats.ops, 1) {
            let index = self.next_read_index(plan, self.params.num)?;
            self.keys.encode_into(index, &mut self.key);
            self.stats.attempted += 1;
            let outcome = self
                .context
                .engine
                .scan(&self.key, self.params.seek_nexts)?;
            if outcome.found_exact {
                self.stats.found += 1;
            }
            // As db_bench, only entries read by next() count as bytes.
            self.stats.bytes += outcome.bytes;
            self.finished(1, outcome.bytes);
        }
        Ok(())
    }

    fn read_random_write_random(&mut self, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        let read_percent = self.params.readwritepercent;
        while budget.allows(self.stats.ops, 1) {
            let read = self.rng.gen_range(0..100) < read_percent;
            let bytes = if read {
                let index = self.next_read_index(plan, self.params.num)?;
                self.get(index)?.unwrap_or(0)
            } else {
                self.throttle();
                let index = self.next_write_index(plan)?;
                let len = self.value_len();
                self.put(index, len)?
            };
            self.stats.bytes += bytes;
            self.finished_as(Some(read), 1, bytes);
        }
        Ok(())
    }

    /// mergerandom (merges only) and readrandommergerandom (a merge with
    /// probability `--mergereadpercent`, else a get), as db_bench's.
    fn merge_random(&mut self, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        let merge_percent = match self.benchmark {
            Benchmark::ReadRandomMergeRandom => self.params.mergereadpercent,
            _ => 100,
        };
        let WriteKeys::Chosen(keys) = &mut plan.write_keys else {
            bail!("{} chooses its keys", self.benchmark.name());
        };
        while budget.allows(self.stats.ops, 1) {
            let index = keys.next(&mut self.rng, self.params.merge_keys);
            let read = self.rng.gen_range(0..100) >= merge_percent;
            let bytes = if read {
                self.get(index)?.unwrap_or(0)
            } else {
                self.throttle();
                self.merge(index)?
            };
            // db_bench counts no bytes for readrandommergerandom (its
            // result line has no MB/s).
            if self.benchmark == Benchmark::MergeRandom {
                self.stats.bytes += bytes;
            }
            let kind = (self.benchmark == Benchmark::ReadRandomMergeRandom).then_some(read);
            self.finished_as(kind, 1, bytes);
        }
        Ok(())
    }

    /// A YCSB run phase: each operation drawn from the workload's mix.
    fn ycsb(&mut self, workload: Workload, budget: &Budget<'_>, plan: &mut Plan) -> Result<()> {
        let records = self.context.records;
        while budget.allows(self.stats.ops, 1) {
            let op = workload.choose_op(&mut self.rng);
            let bytes = match op {
                Op::Read => {
                    let index = self.next_read_index(plan, records.readable())?;
                    self.get(index)?.unwrap_or(0)
                }
                Op::Update => {
                    self.throttle();
                    let index = self.next_read_index(plan, records.readable())?;
                    self.stats.updates += 1;
                    let len = self.value_len();
                    self.put(index, len)?
                }
                Op::Insert => {
                    self.throttle();
                    let index = records.reserve();
                    self.stats.inserts += 1;
                    let len = self.value_len();
                    let bytes = self.put(index, len)?;
                    records.acknowledge();
                    bytes
                }
                Op::Scan => {
                    let index = self.next_read_index(plan, records.readable())?;
                    let length = self.rng.gen_range(1..=self.params.ycsb_max_scan_length);
                    self.keys.encode_into(index, &mut self.key);
                    self.stats.scans += 1;
                    self.context.engine.scan(&self.key, length)?.bytes
                }
                Op::ReadModifyWrite => {
                    self.throttle();
                    let index = self.next_read_index(plan, records.readable())?;
                    self.stats.read_modify_writes += 1;
                    let read = self.get(index)?.unwrap_or(0);
                    let len = self.value_len();
                    read + self.put(index, len)?
                }
                Op::Merge => {
                    self.throttle();
                    let index = self.next_read_index(plan, records.readable())?;
                    self.merge(index)?
                }
            };
            self.stats.bytes += bytes;
            let kind = match op {
                Op::Read => Some(true),
                Op::Update | Op::Insert | Op::ReadModifyWrite | Op::Merge => Some(false),
                Op::Scan => None,
            };
            self.finished_as(kind, 1, bytes);
        }
        Ok(())
    }
}
