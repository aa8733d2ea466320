//! A thread beside each benchmark that watches the database directory: it
//! feeds the space limit every [`POLL`] and records a once-a-second series of
//! throughput and disk size, for stability plots.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::live::LiveSet;
use crate::process;
use crate::space_limit::SpaceLimit;

/// How often the directory is measured. Short enough that a writer does not
/// overshoot the space limit by much between checks; the walk of a few
/// hundred files costs microseconds.
const POLL: Duration = Duration::from_millis(100);
const SERIES_INTERVAL: Duration = Duration::from_secs(1);

/// Operations and bytes done so far in the running benchmark, bumped by the
/// benchmark threads and read by the monitor.
#[derive(Default)]
pub struct Progress {
    ops: AtomicU64,
    bytes: AtomicU64,
}

impl Progress {
    pub fn add(&self, ops: u64, bytes: u64) {
        self.ops.fetch_add(ops, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn read(&self) -> (u64, u64) {
        (
            self.ops.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// One second of a benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SeriesPoint {
    /// Seconds since the benchmark started, at the end of the interval.
    pub t_s: f64,
    pub ops_per_sec: f64,
    pub mb_per_sec: f64,
    pub disk_bytes: u64,
    pub live_bytes: Option<u64>,
}

/// What the monitor watches.
pub struct Watch<'a> {
    pub dir: &'a Path,
    pub live: Option<&'a LiveSet>,
    pub limit: Option<&'a SpaceLimit>,
    pub progress: &'a Progress,
}

/// Runs `body` with the monitor beside it; returns what `body` returned and
/// the series.
pub fn run_watched<T>(watch: &Watch<'_>, body: impl FnOnce() -> T) -> (T, Vec<SeriesPoint>) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let monitor = scope.spawn(|| monitor_loop(watch, &stop));
        let result = body();
        stop.store(true, Ordering::Release);
        monitor.thread().unpark();
        // The monitor never panics on I/O (it skips failed measurements); a
        // panic there is a bug worth surfacing.
        let series = monitor
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (result, series)
    })
}

fn monitor_loop(watch: &Watch<'_>, stop: &AtomicBool) -> Vec<SeriesPoint> {
    let start = Instant::now();
    let mut series = Vec::new();
    let mut last_point = start;
    let mut last_counts = (0, 0);
    let mut disk_bytes = 0;
    loop {
        // A directory being compacted may lose files mid-walk; the walk
        // skips them, and a failed walk keeps the previous size.
        if let Ok(bytes) = process::dir_size_bytes(watch.dir) {
            disk_bytes = bytes;
        }
        let live_bytes = watch.live.map(LiveSet::bytes);
        if let Some(limit) = watch.limit {
            limit.update(disk_bytes, live_bytes.unwrap_or(0));
        }
        let now = Instant::now();
        if now.duration_since(last_point) >= SERIES_INTERVAL {
            let counts = watch.progress.read();
            series.push(point(
                now.duration_since(start),
                now.duration_since(last_point),
                (counts.0 - last_counts.0, counts.1 - last_counts.1),
                disk_bytes,
                live_bytes,
            ));
            last_point = now;
            last_counts = counts;
        }
        if stop.load(Ordering::Acquire) {
            return series;
        }
        std::thread::park_timeout(POLL);
        if stop.load(Ordering::Acquire) {
            return series;
        }
    }
}

fn point(
    since_start: Duration,
    interval: Duration,
    (ops, bytes): (u64, u64),
    disk_bytes: u64,
    live_bytes: Option<u64>,
) -> SeriesPoint {
    let seconds = interval.as_secs_f64().max(1e-6);
    SeriesPoint {
        t_s: since_start.as_secs_f64(),
        ops_per_sec: ops as f64 / seconds,
        mb_per_sec: bytes as f64 / 1_048_576.0 / seconds,
        disk_bytes,
        live_bytes,
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn point_rates_are_per_second_of_the_interval() {
        let p = point(
            Duration::from_secs(3),
            Duration::from_millis(500),
            (100, 1 << 20),
            7,
            Some(5),
        );
        assert_eq!(p.t_s, 3.0);
        assert_eq!(p.ops_per_sec, 200.0);
        assert_eq!(p.mb_per_sec, 2.0);
        assert_eq!((p.disk_bytes, p.live_bytes), (7, Some(5)));
    }

    #[test]
    fn the_monitor_samples_each_second_and_feeds_the_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("data"), vec![0u8; 5000]).expect("write");
        let live = LiveSet::new(crate::keys::KeyFormat::new(10), 4);
        live.put(0, 990);
        let limit = SpaceLimit::new(2.0, 0, Duration::from_secs(60));
        let progress = Progress::default();
        let watch = Watch {
            dir: dir.path(),
            live: Some(&live),
            limit: Some(&limit),
            progress: &progress,
        };
        let ((), series) = run_watched(&watch, || {
            progress.add(10, 1000);
            std::thread::sleep(Duration::from_millis(2300));
        });
        assert_eq!(series.len(), 2, "{series:?}");
        assert!(series.iter().all(|p| p.disk_bytes == 5000));
        assert_eq!(series[0].live_bytes, Some(1000));
        // All ten ops were done before the first sample.
        assert!(series[0].ops_per_sec > 0.0);
        assert_eq!(series[1].ops_per_sec, 0.0);
        // 5000 bytes on disk for 1000 live is over 2x: the monitor told
        // the writers to wait.
        assert!(limit.is_over());
    }
}
