//! Output: db_bench 7.8's result and histogram lines, character for
//! character, then our own cost lines, and the JSON records.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::engines::{EngineCounters, GcBreakdown, SpaceBreakdown};
use crate::monitor::SeriesPoint;
use crate::process::DeviceReads;
use crate::workloads::{OpKind, RunOutcome};

/// db_bench's "MB" is 2^20 bytes.
const MIB: f64 = 1_048_576.0;
const NANOS_PER_MICRO: f64 = 1_000.0;

/// db_bench's elapsed time has microsecond resolution; a run shorter than
/// that is treated as one microsecond instead of dividing by zero.
fn elapsed_seconds(outcome: &RunOutcome) -> f64 {
    outcome.elapsed.as_secs_f64().max(1e-6)
}

/// db_bench's `Stats::Report` line, e.g.
/// `fillrandom   :       3.514 micros/op 284575 ops/sec 3.514 seconds 1000000 operations;  283.2 MB/s`
/// and for reads the message suffix `(N of M found)` plus its newline.
pub fn result_line(outcome: &RunOutcome) -> String {
    // db_bench pretends one op was done so the division is defined.
    let done = outcome.ops.max(1);
    let elapsed = elapsed_seconds(outcome);
    let mut extra = String::new();
    if outcome.bytes > 0 {
        // Rate over wall time, not summed thread time, as db_bench.
        extra = format!("{:6.1} MB/s", outcome.bytes as f64 / MIB / elapsed);
    }
    if let Some(message) = &outcome.message {
        if !extra.is_empty() && !message.is_empty() {
            extra.push(' ');
        }
        extra.push_str(message);
    }
    let micros_per_op = outcome.thread_seconds * 1e6 / done as f64;
    // `(long)throughput` in db_bench: truncation toward zero.
    let ops_per_sec = (done as f64 / elapsed) as i64;
    format!(
        "{:<12} : {:11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}",
        outcome.benchmark.name(),
        micros_per_op,
        ops_per_sec,
        elapsed,
        done,
        if extra.is_empty() { "" } else { " " },
        extra
    )
}

/// Latency summary in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50_us: f64,
    pub p75_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
}

impl Percentiles {
    pub fn of(latencies: &Histogram<u64>) -> Option<Self> {
        if latencies.is_empty() {
            return None;
        }
        let at = |quantile: f64| latencies.value_at_quantile(quantile) as f64 / NANOS_PER_MICRO;
        Some(Self {
            p50_us: at(0.50),
            p75_us: at(0.75),
            p99_us: at(0.99),
            p999_us: at(0.999),
            p9999_us: at(0.9999),
            max_us: latencies.max() as f64 / NANOS_PER_MICRO,
        })
    }
}

/// The mean of `latencies` in µs; `None` when it holds none.
fn average_us(latencies: &Histogram<u64>) -> Option<f64> {
    (!latencies.is_empty()).then(|| latencies.mean() / NANOS_PER_MICRO)
}

/// db_bench's `--histogram` block: the title, `HistogramImpl::ToString`'s
/// summary lines (Count/Average/StdDev, Min/Median/Max, Percentiles) and
/// its dashed rule, then a blank line. db_bench's bucket table is left out.
pub fn histogram_block(kind: OpKind, latencies: &Histogram<u64>) -> String {
    let percentiles = Percentiles::of(latencies).unwrap_or_default();
    let micros = |nanos: f64| nanos / NANOS_PER_MICRO;
    let mut text = String::new();
    // Writing to a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(text, "Microseconds per {}:", kind.name());
    let _ = writeln!(
        text,
        "Count: {} Average: {:.4}  StdDev: {:.2}",
        latencies.len(),
        micros(latencies.mean()),
        micros(latencies.stdev())
    );
    // db_bench prints Min and Max as whole microseconds.
    let _ = writeln!(
        text,
        "Min: {}  Median: {:.4}  Max: {}",
        latencies.min() / 1000,
        percentiles.p50_us,
        latencies.max() / 1000
    );
    let _ = writeln!(text, "{}", percentiles_line(&percentiles));
    let _ = writeln!(
        text,
        "------------------------------------------------------"
    );
    text
}

/// `Percentiles: P50: 3.61 P75: 3.94 P99: 9.47 P99.9: 51.00 P99.99: 3945.00`
pub fn percentiles_line(p: &Percentiles) -> String {
    format!(
        "Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}",
        p.p50_us, p.p75_us, p.p99_us, p.p999_us, p.p9999_us
    )
}

/// One benchmark's results: one element of the `--json` array.
#[derive(Clone, Debug, Serialize)]
pub struct BenchmarkRecord {
    pub engine: String,
    pub benchmark: String,
    pub threads: usize,
    pub ops: u64,
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    pub micros_per_op: f64,
    pub mb_per_sec: f64,
    /// Gets or seeks that found their key, for benchmarks that read.
    pub found: Option<u64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
    /// A mixed benchmark's reads and updates apart (average and P99, µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_avg_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_p99_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_avg_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_p99_us: Option<f64>,
    /// Key plus value bytes the benchmark asked the engine to write.
    pub user_bytes: u64,
    /// Bytes this process sent to the device during the benchmark.
    pub device_write_bytes: Option<u64>,
    /// `device_write_bytes / user_bytes`.
    pub write_amp: Option<f64>,
    /// Bytes the database's block device wrote during the benchmark, the
    /// file system's journal included, and their ratio to `user_bytes`.
    pub block_write_bytes: Option<u64>,
    pub block_write_amp: Option<f64>,
    /// Read requests the database's device completed during the benchmark
    /// (every reader's: `process::DeviceReads`), and their bytes.
    pub device_reads: Option<u64>,
    pub device_read_bytes: Option<u64>,
    /// `device_reads` per operation done.
    pub device_reads_per_op: Option<f64>,
    /// Sum of file sizes in the database directory after the benchmark.
    pub disk_bytes: Option<u64>,
    /// Key plus value bytes of the keys that exist, as the harness wrote
    /// them (`None` on a database it did not create).
    pub live_bytes: Option<u64>,
    pub live_keys: Option<u64>,
    /// `disk_bytes / live_bytes`.
    pub space_amp: Option<f64>,
    /// Writer time spent waiting under `--space_limit_ratio`, summed over
    /// writers (`None` without a limit).
    pub throttled_s: Option<f64>,
    /// The engine stayed over the space limit for the maximum wait, and the
    /// rest of the benchmark ran unthrottled.
    pub space_limit_gave_up: Option<bool>,
    /// Peak RSS during the benchmark (of the whole run if it could not be
    /// reset between benchmarks).
    pub peak_rss_bytes: Option<u64>,
    pub cpu_s: Option<f64>,
    /// The engine's own counters for this benchmark, if it keeps them.
    pub engine_counters: Option<EngineCounters>,
    pub engine_write_amp: Option<f64>,
    /// The engine's own account of its space after the benchmark
    /// ([`SpaceBreakdown`]; cleave's `Db::space_report`). Left out of the
    /// JSON for engines that keep none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sstable_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_file_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposed_garbage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s_index: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden_garbage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_max_jobs: Option<u64>,
    /// GC's bandwidth limit at the end, bytes/s; 0 when unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_rate_limit: Option<u64>,
    /// The engine's value-file GC during the benchmark ([`GcBreakdown`];
    /// cleave's `Stats::gc`). Left out of the JSON for engines without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc: Option<GcBreakdown>,
    /// With `--ttl_seconds`: disk over unexpired live bytes in the steady
    /// state ([`SteadySpace`]). Left out of the JSON without a TTL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady_space_amp: Option<SteadySpace>,
    /// Once a second: throughput and disk size, for stability plots.
    pub series: Vec<SeriesPoint>,
}

/// Space amplification over time once a TTL workload is steady: the
/// once-a-second points from twice the TTL on. By then the first TTL's
/// values have been expired for a whole TTL, time enough for an engine
/// that reclaims expired values to have done so once.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SteadySpace {
    pub from_s: f64,
    pub points: usize,
    pub median: f64,
    pub max: f64,
}

impl SteadySpace {
    /// `None` when the series has no point that late (a benchmark shorter
    /// than twice the TTL) or no live bytes then.
    pub fn of(series: &[SeriesPoint], ttl: Duration) -> Option<Self> {
        let from_s = 2.0 * ttl.as_secs_f64();
        let mut ratios: Vec<f64> = series
            .iter()
            .filter(|point| point.t_s >= from_s)
            .filter_map(|point| {
                let live = point.live_bytes.filter(|&live| live > 0)?;
                Some(point.disk_bytes as f64 / live as f64)
            })
            .collect();
        if ratios.is_empty() {
            return None;
        }
        ratios.sort_by(f64::total_cmp);
        Some(Self {
            from_s,
            points: ratios.len(),
            median: ratios[ratios.len() / 2],
            max: ratios[ratios.len() - 1],
        })
    }
}

/// Everything measured around one benchmark, besides its outcome.
#[derive(Clone, Debug, Default)]
pub struct Costs {
    pub device_write_bytes: Option<u64>,
    pub block_write_bytes: Option<u64>,
    pub device_reads: Option<DeviceReads>,
    pub disk_bytes: Option<u64>,
    pub live_bytes: Option<u64>,
    pub live_keys: Option<u64>,
    pub throttled_s: Option<f64>,
    pub space_limit_gave_up: Option<bool>,
    pub peak_rss_bytes: Option<u64>,
    pub cpu_s: Option<f64>,
    pub engine_counters: Option<EngineCounters>,
    pub gc: Option<GcBreakdown>,
    pub space: Option<SpaceBreakdown>,
    /// The values' time to live (`--ttl_seconds`), for the steady state.
    pub ttl: Option<Duration>,
    pub series: Vec<SeriesPoint>,
}

impl BenchmarkRecord {
    pub fn new(
        engine: &str,
        threads: usize,
        outcome: &RunOutcome,
        user_bytes: u64,
        costs: Costs,
    ) -> Self {
        let done = outcome.ops.max(1) as f64;
        let elapsed = elapsed_seconds(outcome);
        let percentiles = Percentiles::of(&outcome.latencies);
        let write_amp = costs
            .device_write_bytes
            .filter(|_| user_bytes > 0)
            .map(|device| device as f64 / user_bytes as f64);
        // Any benchmark that reads reports its hits (YCSB and the mixed
        // ones too); pure writes have none.
        let found = (outcome.attempted > 0
            || matches!(outcome.benchmark.op_kind(), OpKind::Read | OpKind::Seek))
        .then_some(outcome.found);
        Self {
            engine: engine.to_owned(),
            benchmark: outcome.benchmark.name().to_owned(),
            threads,
            ops: outcome.ops,
            elapsed_s: outcome.elapsed.as_secs_f64(),
            ops_per_sec: outcome.ops as f64 / elapsed,
            micros_per_op: outcome.thread_seconds * 1e6 / done,
            mb_per_sec: outcome.bytes as f64 / MIB / elapsed,
            found,
            p50_us: percentiles.map(|p| p.p50_us),
            p99_us: percentiles.map(|p| p.p99_us),
            p999_us: percentiles.map(|p| p.p999_us),
            max_us: percentiles.map(|p| p.max_us),
            read_avg_us: average_us(&outcome.read_latencies),
            read_p99_us: Percentiles::of(&outcome.read_latencies).map(|p| p.p99_us),
            update_avg_us: average_us(&outcome.update_latencies),
            update_p99_us: Percentiles::of(&outcome.update_latencies).map(|p| p.p99_us),
            user_bytes,
            device_write_bytes: costs.device_write_bytes,
            write_amp,
            block_write_bytes: costs.block_write_bytes,
            block_write_amp: costs
                .block_write_bytes
                .filter(|_| user_bytes > 0)
                .map(|block| block as f64 / user_bytes as f64),
            device_reads: costs.device_reads.map(|r| r.requests),
            device_read_bytes: costs.device_reads.map(|r| r.bytes),
            // A maintenance step (waitforcompaction, compact) counts one
            // op for the whole job: reads per op would mean nothing.
            device_reads_per_op: costs
                .device_reads
                .filter(|_| outcome.ops > 0 && !outcome.benchmark.is_maintenance())
                .map(|r| r.requests as f64 / outcome.ops as f64),
            disk_bytes: costs.disk_bytes,
            live_bytes: costs.live_bytes,
            live_keys: costs.live_keys,
            space_amp: costs
                .disk_bytes
                .zip(costs.live_bytes.filter(|&live| live > 0))
                .map(|(disk, live)| disk as f64 / live as f64),
            throttled_s: costs.throttled_s,
            space_limit_gave_up: costs.space_limit_gave_up,
            peak_rss_bytes: costs.peak_rss_bytes,
            cpu_s: costs.cpu_s,
            engine_write_amp: costs
                .engine_counters
                .and_then(|counters| counters.write_amplification()),
            engine_counters: costs.engine_counters,
            sstable_bytes: costs.space.map(|space| space.sstable_bytes),
            value_file_bytes: costs.space.map(|space| space.value_file_bytes),
            exposed_garbage_bytes: costs.space.map(|space| space.exposed_garbage_bytes),
            s_index: costs.space.map(|space| space.s_index),
            hidden_garbage_bytes: costs.space.map(|space| space.hidden_garbage_bytes),
            gc_max_jobs: costs.space.map(|space| space.gc_max_jobs),
            gc_rate_limit: costs.space.map(|space| space.gc_rate_limit.unwrap_or(0)),
            gc: costs.gc,
            steady_space_amp: costs
                .ttl
                .and_then(|ttl| SteadySpace::of(&costs.series, ttl)),
            series: costs.series,
        }
    }

    /// Our lines beside db_bench's, indented so that a grep for db_bench's
    /// `^name ` lines does not match them.
    pub fn cost_lines(&self) -> String {
        let mut text = format!(
            "  cost of {}: user {} written, device {} written (write-amp {}), disk {}, \
             live {} in {} keys (space-amp {}), peak RSS {}, CPU {}\n",
            self.benchmark,
            mebibytes(Some(self.user_bytes)),
            mebibytes(self.device_write_bytes),
            ratio(self.write_amp),
            mebibytes(self.disk_bytes),
            mebibytes(self.live_bytes),
            self.live_keys
                .map_or_else(|| "n/a".to_owned(), |keys| keys.to_string()),
            ratio(self.space_amp),
            mebibytes(self.peak_rss_bytes),
            self.cpu_s
                .map_or_else(|| "n/a".to_owned(), |s| format!("{s:.2} s")),
        );
        if let (Some(block), Some(amp)) = (self.block_write_bytes, self.block_write_amp) {
            text.push_str(&format!(
                "  block device: {} written, journal and metadata included (write-amp {})\n",
                mebibytes(Some(block)),
                ratio(Some(amp))
            ));
        }
        if let (Some(reads), Some(bytes)) = (self.device_reads, self.device_read_bytes) {
            let per_op = self
                .device_reads_per_op
                .map_or_else(|| "n/a".to_owned(), |r| format!("{r:.3}"));
            let each = if reads > 0 {
                format!("{:.1} KiB", bytes as f64 / reads as f64 / 1024.0)
            } else {
                "n/a".to_owned()
            };
            text.push_str(&format!(
                "  device reads: {reads} ({per_op} per op, {each} each, {} in all)\n",
                mebibytes(Some(bytes))
            ));
        }
        if let Some(throttled) = self.throttled_s {
            text.push_str(&format!(
                "  space limit: writers throttled {throttled:.3} s{}\n",
                if self.space_limit_gave_up == Some(true) {
                    "; the engine stayed over the limit, so the rest ran unthrottled"
                } else {
                    ""
                }
            ));
        }
        if let Some(counters) = &self.engine_counters {
            // Only engines with a GC of their own move these; the others'
            // blob GC is inside their compaction bytes.
            let logs = if counters.value_log_bytes_written > 0 {
                format!(
                    ", value logs {}",
                    mebibytes(Some(counters.value_log_bytes_written))
                )
            } else {
                String::new()
            };
            let gc = if counters.gc_bytes_read + counters.gc_bytes_written > 0 {
                format!(
                    ", GC read {} written {}",
                    mebibytes(Some(counters.gc_bytes_read)),
                    mebibytes(Some(counters.gc_bytes_written))
                )
            } else {
                String::new()
            };
            let flush_stalls = counters
                .flush_stall_micros
                .map(|m| format!(" ({:.3} s waiting for a flush)", m as f64 / 1e6))
                .unwrap_or_default();
            text.push_str(&format!(
                "  engine counters: wal {}, flush {}, compaction read {} written {} \
                 (value files {} of those){logs}{gc}, stalls {:.3} s{flush_stalls}, write-amp {}\n",
                mebibytes(Some(counters.wal_bytes_written)),
                mebibytes(Some(counters.flush_bytes_written)),
                mebibytes(Some(counters.compaction_bytes_read)),
                mebibytes(Some(counters.compaction_bytes_written)),
                mebibytes(Some(counters.value_file_bytes_written)),
                counters.stall_micros as f64 / 1e6,
                ratio(self.engine_write_amp),
            ));
        }
        if let Some(counters) = self
            .engine_counters
            .filter(|c| c.compaction_value_bytes_read.is_some() || c.expired_value_bytes.is_some())
        {
            let expired = counters
                .expired_value_bytes
                .map(|bytes| format!(", {} expired without a read", mebibytes(Some(bytes))))
                .unwrap_or_default();
            text.push_str(&format!(
                "  value-file bytes read for compactions: {}{expired} \
                 (BlobDB's count holds its gets' blob reads too)\n",
                mebibytes(counters.compaction_value_bytes_read),
            ));
        }
        if let Some(steady) = self.steady_space_amp {
            text.push_str(&format!(
                "  space-amp over unexpired live data from {:.0} s on: median {:.2}, max {:.2} \
                 ({} points)\n",
                steady.from_s, steady.median, steady.max, steady.points
            ));
        }
        if let Some(gc) = self.gc.filter(|gc| gc.jobs > 0) {
            text.push_str(&format!(
                "  engine GC: {} jobs, {} files in, {} out; {} records kept, {} dropped; \
                 read {} index + {} values, wrote {}, reclaimed {}; \
                 ms: bitmaps {}, index {}, values {}, write {}, commit {}, throttled {}\n",
                gc.jobs,
                gc.files_in,
                gc.files_out,
                gc.records_kept,
                gc.records_dropped,
                mebibytes(Some(gc.index_bytes_read)),
                mebibytes(Some(gc.value_bytes_read)),
                mebibytes(Some(gc.bytes_written)),
                mebibytes(Some(gc.bytes_reclaimed)),
                gc.bitmap_time.as_millis(),
                gc.index_time.as_millis(),
                gc.value_read_time.as_millis(),
                gc.write_time.as_millis(),
                gc.commit_time.as_millis(),
                gc.throttle_time.as_millis(),
            ));
        }
        if let Some(s_index) = self.s_index {
            text.push_str(&format!(
                "  engine space: sstables {}, value files {} (exposed garbage {}, hidden {}), S_index {:.2}; GC up to {} jobs, rate limit {}\n",
                mebibytes(self.sstable_bytes),
                mebibytes(self.value_file_bytes),
                mebibytes(self.exposed_garbage_bytes),
                mebibytes(self.hidden_garbage_bytes),
                s_index,
                self.gc_max_jobs.unwrap_or(0),
                match self.gc_rate_limit {
                    Some(rate) if rate > 0 => format!("{}/s", mebibytes(Some(rate))),
                    _ => "none".to_owned(),
                },
            ));
        }
        text
    }
}

fn mebibytes(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "n/a".to_owned(), |b| format!("{:.1} MB", b as f64 / MIB))
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}"))
}

/// Writes all records so far as a JSON array (rewritten after every
/// benchmark, so a failed run keeps the results it had).
pub fn write_json(path: &Path, records: &[BenchmarkRecord]) -> Result<()> {
    let text = serde_json::to_string_pretty(records).context("encoding results as JSON")?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::workloads::{new_latency_histogram, Benchmark};

    fn outcome(benchmark: Benchmark, ops: u64, bytes: u64, seconds: f64) -> RunOutcome {
        RunOutcome {
            benchmark,
            ops,
            bytes,
            written_bytes: bytes,
            thread_seconds: seconds,
            elapsed: Duration::from_secs_f64(seconds),
            message: None,
            found: 0,
            attempted: 0,
            latencies: new_latency_histogram().expect("histogram"),
            read_latencies: new_latency_histogram().expect("histogram"),
            update_latencies: new_latency_histogram().expect("histogram"),
        }
    }

    #[test]
    fn write_line_matches_db_bench() {
        // From db_bench 7.8.3 on this machine:
        // "fillseq      :       8.425 micros/op 118378 ops/sec 0.017 seconds 2000 operations;   13.1 MB/s"
        let run = outcome(Benchmark::FillSeq, 2000, 2000 * 116, 0.01685);
        assert_eq!(
            result_line(&run),
            concat!(
                "fillseq      :       8.425 micros/op 118694 ops/sec 0.017 seconds ",
                "2000 operations;   13.1 MB/s"
            )
        );
    }

    #[test]
    fn read_line_has_found_suffix_and_newline() {
        // db_bench: "readrandom   :       1.197 micros/op 825423 ops/sec 0.002 seconds
        // 2000 operations;   91.3 MB/s (2000 of 2000 found)\n" and a blank line.
        let mut run = outcome(Benchmark::ReadRandom, 2000, 2000 * 116, 0.002);
        run.message = Some("(2000 of 2000 found)\n".to_owned());
        assert_eq!(
            result_line(&run),
            concat!(
                "readrandom   :       1.000 micros/op 1000000 ops/sec 0.002 seconds ",
                "2000 operations;  110.6 MB/s (2000 of 2000 found)\n"
            )
        );
        // With no bytes (seekrandom without nexts) the message follows ';'.
        let mut run = outcome(Benchmark::SeekRandom, 2000, 0, 0.002);
        run.message = Some("(872 of 1000 found)\n".to_owned());
        assert!(result_line(&run).ends_with("2000 operations; (872 of 1000 found)\n"));
    }

    #[test]
    fn maintenance_line_has_nothing_after_semicolon() {
        // db_bench: "compact      :    4169.000 micros/op 239 ops/sec 0.004 seconds 1 operations;"
        let run = outcome(Benchmark::Compact, 1, 0, 0.004169);
        assert_eq!(
            result_line(&run),
            "compact      :    4169.000 micros/op 239 ops/sec 0.004 seconds 1 operations;"
        );
    }

    #[test]
    fn histogram_block_in_microseconds() {
        let mut latencies = new_latency_histogram().expect("histogram");
        // 10 ns .. 1 µs: below 2048 ns the histogram is exact.
        for step in 1..=100u64 {
            latencies.record(step * 10).expect("record");
        }
        let run = RunOutcome {
            latencies,
            ..outcome(Benchmark::FillRandom, 100, 0, 1.0)
        };
        let block = histogram_block(OpKind::Write, &run.latencies);
        let lines: Vec<&str> = block.lines().collect();
        assert_eq!(lines[0], "Microseconds per write:");
        assert_eq!(lines[1], "Count: 100 Average: 0.5050  StdDev: 0.29");
        assert_eq!(lines[2], "Min: 0  Median: 0.5000  Max: 1");
        assert_eq!(
            lines[3],
            "Percentiles: P50: 0.50 P75: 0.75 P99: 0.99 P99.9: 1.00 P99.99: 1.00"
        );
        assert!(lines[4].starts_with("-----"));
    }

    #[test]
    fn steady_space_is_taken_from_twice_the_ttl_on() {
        let point = |t_s: f64, disk_bytes: u64, live: u64| SeriesPoint {
            t_s,
            ops_per_sec: 0.0,
            mb_per_sec: 0.0,
            disk_bytes,
            live_bytes: Some(live),
        };
        let series = [
            point(5.0, 900, 100),
            point(10.0, 300, 100),
            point(11.0, 130, 100),
            point(12.0, 120, 0),
            point(13.0, 110, 100),
        ];
        let steady = SteadySpace::of(&series, Duration::from_secs(5)).expect("steady");
        // The point at 5 s is before 2 x TTL, and one with no live bytes
        // has no ratio.
        assert_eq!(steady.points, 3);
        assert_eq!((steady.from_s, steady.median, steady.max), (10.0, 1.3, 3.0));
        assert_eq!(SteadySpace::of(&series, Duration::from_secs(7)), None);

        let record = BenchmarkRecord::new(
            "cleave",
            1,
            &outcome(Benchmark::FillRandom, 10, 1000, 1.0),
            1000,
            Costs {
                ttl: Some(Duration::from_secs(5)),
                series: series.to_vec(),
                ..Costs::default()
            },
        );
        assert_eq!(record.steady_space_amp, Some(steady));
        assert!(record
            .cost_lines()
            .contains("space-amp over unexpired live data from 10 s on: median 1.30, max 3.00"));
        let json = serde_json::to_value(&record).expect("json");
        assert_eq!(json["steady_space_amp"]["median"], 1.3);
    }

    #[test]
    fn record_computes_write_amp_and_serializes_the_required_fields() {
        let mut run = outcome(Benchmark::FillRandom, 1000, 116_000, 0.5);
        run.latencies.record(2_000).expect("record");
        let costs = Costs {
            device_write_bytes: Some(232_000),
            block_write_bytes: Some(348_000),
            device_reads: Some(DeviceReads {
                requests: 250,
                bytes: 250 * 8192,
            }),
            disk_bytes: Some(50_000),
            live_bytes: Some(40_000),
            live_keys: Some(100),
            throttled_s: Some(0.25),
            space_limit_gave_up: Some(false),
            peak_rss_bytes: Some(1 << 20),
            cpu_s: Some(0.4),
            engine_counters: None,
            gc: None,
            space: None,
            ttl: None,
            series: vec![SeriesPoint {
                t_s: 1.0,
                ops_per_sec: 10.0,
                mb_per_sec: 1.0,
                disk_bytes: 5,
                live_bytes: Some(4),
            }],
        };
        let record = BenchmarkRecord::new("memory", 1, &run, 116_000, costs);
        assert_eq!(record.write_amp, Some(2.0));
        assert_eq!(record.block_write_amp, Some(3.0));
        assert!(record.cost_lines().contains("block device: 0.3 MB written"));
        assert_eq!(record.space_amp, Some(1.25));
        assert_eq!(record.p50_us, Some(2.0));
        assert_eq!(record.found, None);
        let json = serde_json::to_value(&record).expect("json");
        for field in [
            "engine",
            "benchmark",
            "ops",
            "ops_per_sec",
            "micros_per_op",
            "mb_per_sec",
            "p50_us",
            "p99_us",
            "p999_us",
            "max_us",
            "user_bytes",
            "device_write_bytes",
            "write_amp",
            "block_write_bytes",
            "block_write_amp",
            "device_reads",
            "device_read_bytes",
            "device_reads_per_op",
            "disk_bytes",
            "live_bytes",
            "space_amp",
            "throttled_s",
            "peak_rss_bytes",
            "cpu_s",
            "series",
        ] {
            assert!(json.get(field).is_some(), "missing {field}");
        }
        assert_eq!(json["ops_per_sec"], 2000.0);
        assert!(record.cost_lines().contains("write-amp 2.00"));
        assert!(record.cost_lines().contains("space-amp 1.25"));
        assert!(record.cost_lines().contains("throttled 0.250 s"));
        assert_eq!(record.device_reads_per_op, Some(0.25));
        assert!(record
            .cost_lines()
            .contains("device reads: 250 (0.250 per op, 8.0 KiB each"));
        assert_eq!(json["series"][0]["ops_per_sec"], 10.0);
        // No user bytes (a read benchmark): no write amplification.
        let read = BenchmarkRecord::new("memory", 1, &run, 0, Costs::default());
        assert_eq!(read.write_amp, None);
        assert_eq!(read.space_amp, None);
        assert!(read.cost_lines().contains("device n/a written"));
        // A maintenance step is one op for a whole job: its reads are
        // reported, per op they are not.
        let wait = outcome(Benchmark::WaitForCompaction, 1, 0, 3.0);
        let costs = Costs {
            device_reads: Some(DeviceReads {
                requests: 900,
                bytes: 900 * 4096,
            }),
            ..Costs::default()
        };
        let wait = BenchmarkRecord::new("memory", 1, &wait, 0, costs);
        assert_eq!(wait.device_reads, Some(900));
        assert_eq!(wait.device_reads_per_op, None);
        assert!(wait.cost_lines().contains("device reads: 900 (n/a per op"));
    }

    #[test]
    fn space_breakdown_fields_only_for_engines_that_have_one() {
        let run = outcome(Benchmark::Overwrite, 1000, 116_000, 0.5);
        let space = SpaceBreakdown {
            sstable_bytes: 3 << 20,
            value_file_bytes: 40 << 20,
            exposed_garbage_bytes: 10 << 20,
            s_index: 1.25,
            hidden_garbage_bytes: 2 << 20,
            gc_max_jobs: 2,
            gc_rate_limit: Some(64 << 20),
        };
        let with = BenchmarkRecord::new(
            "cleave",
            1,
            &run,
            116_000,
            Costs {
                space: Some(space),
                ..Costs::default()
            },
        );
        let json = serde_json::to_value(&with).expect("json");
        assert_eq!(json["sstable_bytes"], 3 << 20);
        assert_eq!(json["value_file_bytes"], 40 << 20);
        assert_eq!(json["exposed_garbage_bytes"], 10 << 20);
        assert_eq!(json["s_index"], 1.25);
        assert_eq!(json["hidden_garbage_bytes"], 2 << 20);
        assert_eq!(json["gc_max_jobs"], 2);
        assert_eq!(json["gc_rate_limit"], 64 << 20);
        assert!(with.cost_lines().contains(
            "  engine space: sstables 3.0 MB, value files 40.0 MB \
             (exposed garbage 10.0 MB, hidden 2.0 MB), S_index 1.25; GC up to 2 jobs, \
             rate limit 64.0 MB/s\n"
        ));

        let without = BenchmarkRecord::new("rocksdb", 1, &run, 116_000, Costs::default());
        let json = serde_json::to_value(&without).expect("json");
        let object = json.as_object().expect("object");
        for field in [
            "sstable_bytes",
            "value_file_bytes",
            "exposed_garbage_bytes",
            "s_index",
            "hidden_garbage_bytes",
            "gc_max_jobs",
            "gc_rate_limit",
        ] {
            assert!(!object.contains_key(field), "{field} present");
        }
        // The harness's own measurements stay for every engine.
        assert!(object.contains_key("disk_bytes"));
        assert!(object.contains_key("space_amp"));
        assert!(!without.cost_lines().contains("engine space"));
    }

    #[test]
    fn gc_fields_only_for_engines_with_gc_and_in_the_write_amp() {
        let run = outcome(Benchmark::Overwrite, 1000, 1 << 20, 0.5);
        let counters = EngineCounters {
            user_bytes_written: 1 << 20,
            wal_bytes_written: 1 << 20,
            flush_bytes_written: 1 << 20,
            gc_bytes_read: 3 << 19,
            gc_bytes_written: 1 << 20,
            ..EngineCounters::default()
        };
        let gc = GcBreakdown {
            jobs: 2,
            files_in: 3,
            files_out: 1,
            tables_read: 4,
            records_kept: 100,
            records_dropped: 300,
            index_bytes_read: 1 << 19,
            value_bytes_read: 1 << 20,
            bytes_written: 1 << 20,
            bytes_reclaimed: 3 << 20,
            bitmap_time: Duration::from_micros(1250),
            index_time: Duration::from_millis(2),
            value_read_time: Duration::from_millis(30),
            write_time: Duration::from_millis(40),
            commit_time: Duration::from_nanos(5_000_001),
            throttle_time: Duration::from_millis(7),
        };
        let with = BenchmarkRecord::new(
            "cleave",
            1,
            &run,
            1 << 20,
            Costs {
                engine_counters: Some(counters),
                gc: Some(gc),
                ..Costs::default()
            },
        );
        // WAL, flush and GC each wrote the user bytes once.
        assert_eq!(with.engine_write_amp, Some(3.0));
        let json = serde_json::to_value(&with).expect("json");
        assert_eq!(json["engine_counters"]["gc_bytes_read"], 3 << 19);
        assert_eq!(json["engine_counters"]["gc_bytes_written"], 1 << 20);
        let expected = [
            ("jobs", 2.0),
            ("files_in", 3.0),
            ("files_out", 1.0),
            ("tables_read", 4.0),
            ("records_kept", 100.0),
            ("records_dropped", 300.0),
            ("index_bytes_read", (1 << 19) as f64),
            ("value_bytes_read", (1 << 20) as f64),
            ("bytes_written", (1 << 20) as f64),
            ("bytes_reclaimed", (3 << 20) as f64),
            ("bitmap_ms", 1.25),
            ("index_ms", 2.0),
            ("value_read_ms", 30.0),
            ("write_ms", 40.0),
            ("commit_ms", 5.000001),
            ("throttle_ms", 7.0),
        ];
        assert_eq!(json["gc"].as_object().map(|gc| gc.len()), Some(16));
        for (field, value) in expected {
            assert_eq!(json["gc"][field].as_f64(), Some(value), "{field}");
        }
        let lines = with.cost_lines();
        assert!(lines.contains(
            "(value files 0.0 MB of those), GC read 1.5 MB written 1.0 MB, stalls 0.000 s, \
             write-amp 3.00\n"
        ));
        assert!(lines.contains(
            "  engine GC: 2 jobs, 3 files in, 1 out; 100 records kept, 300 dropped; \
             read 0.5 MB index + 1.0 MB values, wrote 1.0 MB, reclaimed 3.0 MB; \
             ms: bitmaps 1, index 2, values 30, write 40, commit 5, throttled 7\n"
        ));

        // A benchmark during which GC did nothing: the fields, no line.
        let idle = BenchmarkRecord::new(
            "cleave",
            1,
            &run,
            0,
            Costs {
                gc: Some(GcBreakdown::default()),
                ..Costs::default()
            },
        );
        assert_eq!(serde_json::to_value(&idle).expect("json")["gc"]["jobs"], 0);
        assert!(!idle.cost_lines().contains("GC"));

        let without = BenchmarkRecord::new(
            "rocksdb",
            1,
            &run,
            1 << 20,
            Costs {
                engine_counters: Some(EngineCounters {
                    gc_bytes_read: 0,
                    gc_bytes_written: 0,
                    ..counters
                }),
                ..Costs::default()
            },
        );
        let json = serde_json::to_value(&without).expect("json");
        assert!(json.get("gc").is_none());
        assert_eq!(without.engine_write_amp, Some(2.0));
        assert!(!without.cost_lines().contains("GC"));
    }
}
