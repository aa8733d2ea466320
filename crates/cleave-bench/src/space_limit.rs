//! `--space_limit_ratio`: writers wait whenever the engine's directory holds
//! more than R times the live logical bytes, the papers' way of comparing
//! engines at equal disk (Scavenger+ §IV). The monitor thread decides; the
//! writers only look at a flag before each write.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often a throttled writer looks at the flag again.
const WAIT_STEP: Duration = Duration::from_millis(2);

/// The limit and the writers' shared view of it.
pub struct SpaceLimit {
    ratio: f64,
    /// Bytes an engine may always use beyond the live data: its unflushed
    /// memtables' WAL and one memtable's worth of L0, which no engine can
    /// reclaim. Without it a near-empty database (live ≈ 0) could never
    /// accept its first writes.
    slack_bytes: u64,
    max_wait: Duration,
    over: AtomicBool,
    /// Set once writers waited `max_wait` in one stretch: the engine cannot
    /// get under the limit, and the run goes on unthrottled.
    gave_up: AtomicBool,
    throttled_nanos: AtomicU64,
}

impl SpaceLimit {
    pub fn new(ratio: f64, slack_bytes: u64, max_wait: Duration) -> Self {
        assert!(
            ratio >= 1.0,
            "a space limit below the live data is unmeetable"
        );
        Self {
            ratio,
            slack_bytes,
            max_wait,
            over: AtomicBool::new(false),
            gave_up: AtomicBool::new(false),
            throttled_nanos: AtomicU64::new(0),
        }
    }

    /// The most disk the engine may use with `live_bytes` of live data.
    pub fn limit_bytes(&self, live_bytes: u64) -> u64 {
        let proportional = (live_bytes as f64 * self.ratio) as u64;
        proportional.max(live_bytes.saturating_add(self.slack_bytes))
    }

    /// Called by the monitor with a fresh measurement.
    pub fn update(&self, disk_bytes: u64, live_bytes: u64) {
        let over = disk_bytes > self.limit_bytes(live_bytes);
        self.over.store(over, Ordering::Release);
    }

    /// Called by a writer before each write: returns at once under the
    /// limit, else waits until the monitor sees the directory shrink or
    /// `stop` is set (a writer told to finish must not wait for space).
    /// Returns whether it waited.
    pub fn wait_if_over(&self, stop: Option<&AtomicBool>) -> bool {
        if !self.over.load(Ordering::Acquire) || self.gave_up.load(Ordering::Relaxed) {
            return false;
        }
        let stopped = || stop.is_some_and(|stop| stop.load(Ordering::Acquire));
        let start = Instant::now();
        while self.over.load(Ordering::Acquire)
            && !self.gave_up.load(Ordering::Relaxed)
            && !stopped()
        {
            if start.elapsed() >= self.max_wait {
                self.gave_up.store(true, Ordering::Relaxed);
                break;
            }
            std::thread::sleep(WAIT_STEP);
        }
        let waited = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.throttled_nanos.fetch_add(waited, Ordering::Relaxed);
        true
    }

    #[cfg(test)]
    pub fn is_over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// Writer time spent waiting, summed over writers.
    pub fn throttled(&self) -> Duration {
        Duration::from_nanos(self.throttled_nanos.load(Ordering::Relaxed))
    }

    pub fn gave_up(&self) -> bool {
        self.gave_up.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[test]
    fn limit_is_the_ratio_with_a_floor_of_live_plus_slack() {
        let limit = SpaceLimit::new(1.5, 100, Duration::from_secs(1));
        assert_eq!(limit.limit_bytes(1000), 1500);
        // A small database may still hold its memtables' worth of files.
        assert_eq!(limit.limit_bytes(10), 110);
        assert_eq!(limit.limit_bytes(0), 100);
    }

    #[test]
    fn writers_pass_under_the_limit_and_wait_over_it() {
        let limit = SpaceLimit::new(1.5, 0, Duration::from_secs(60));
        limit.update(1400, 1000);
        assert!(!limit.wait_if_over(None));
        assert_eq!(limit.throttled(), Duration::ZERO);

        limit.update(1600, 1000);
        let released = AtomicU64::new(0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(30));
                released.store(1, Ordering::SeqCst);
                // The engine reclaimed space: the monitor lifts the limit.
                limit.update(1200, 1000);
            });
            assert!(limit.wait_if_over(None));
            // The writer cannot have passed before the limit was lifted.
            assert_eq!(released.load(Ordering::SeqCst), 1);
        });
        assert!(limit.throttled() > Duration::ZERO);
        assert!(!limit.gave_up());
    }

    #[test]
    fn a_writer_told_to_stop_stops_waiting_without_giving_up() {
        let limit = SpaceLimit::new(1.0, 0, Duration::from_secs(60));
        limit.update(2000, 1000);
        let stop = AtomicBool::new(true);
        assert!(limit.wait_if_over(Some(&stop)));
        assert!(!limit.gave_up());
    }

    #[test]
    fn an_engine_that_never_shrinks_is_given_up_on() {
        let limit = SpaceLimit::new(1.0, 0, Duration::from_millis(20));
        limit.update(2000, 1000);
        assert!(limit.wait_if_over(None));
        assert!(limit.gave_up());
        // From then on writers pass even though the engine is still over.
        let before = limit.throttled();
        assert!(!limit.wait_if_over(None));
        assert_eq!(limit.throttled(), before);
    }
}
