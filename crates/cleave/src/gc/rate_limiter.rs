//! GC's bandwidth limit (Scavenger+ §III-D2): token buckets on GC's reads
//! and writes, and the feedback loop that sets their rate.
//!
//! GC competes with flushes for the disk. When the disk's writes are near
//! its bandwidth and foreground writes fall more than 20% below their
//! moving average, GC is taking bandwidth writers need: GC's rate steps
//! down by 20%. While either condition is absent it steps back up by the
//! same factor, and the limit is lifted once it exceeds the device's
//! bandwidth. Foreground bandwidth is measured where writes enter (user
//! bytes), not at flushes: a flush writes a whole memtable at once, so
//! per-second flush bytes swing between zero and a memtable however
//! steady the writers are. GC reads about what it writes (the live
//! records it copies, and the dead ones between them that a read takes
//! in, a third more at 75% live), so the read bucket gets the same rate;
//! it is charged the bytes actually read. While space is short the
//! limiter stands aside.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Fraction of the device's bandwidth at which the disk counts as busy.
const BUSY_FRACTION: f64 = 0.8;
/// A foreground drop below this fraction of the average is contention.
const DROP_FRACTION: f64 = 0.8;
/// Factor of each step down (its inverse steps up).
const STEP: f64 = 0.8;
/// Weight of a new measurement in the foreground moving average: about
/// ten intervals of memory.
const AVERAGE_WEIGHT: f64 = 0.1;
/// GC is never limited below this, so that it always progresses.
const MIN_RATE: f64 = (4 << 20) as f64;
/// How long the bucket may save up unused tokens, as time at its rate.
const BURST: Duration = Duration::from_millis(100);

/// A token bucket of bytes per second; unlimited until a rate is set.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    rate: Option<f64>,
    /// Negative while requests already granted are being paid off.
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    pub(crate) fn new() -> Self {
        TokenBucket {
            state: Mutex::new(Bucket {
                rate: None,
                tokens: 0.0,
                refilled: Instant::now(),
            }),
        }
    }

    /// Bytes per second, or `None` for no limit.
    pub(crate) fn rate(&self) -> Option<u64> {
        self.state.lock().rate.map(|r| r.round() as u64)
    }

    pub(crate) fn set_rate(&self, rate: Option<u64>) {
        let mut b = self.state.lock();
        b.refill(Instant::now());
        b.rate = rate.map(|r| (r as f64).max(1.0));
        if b.rate.is_none() {
            b.tokens = 0.0;
        }
    }

    /// Takes `bytes` tokens, and sleeps until the bucket is out of debt.
    /// Returns how long it slept.
    pub(crate) fn request(&self, bytes: u64) -> Duration {
        let wait = {
            let mut b = self.state.lock();
            let now = Instant::now();
            b.refill(now);
            let Some(rate) = b.rate else {
                return Duration::ZERO;
            };
            b.tokens -= bytes as f64;
            if b.tokens >= 0.0 {
                return Duration::ZERO;
            }
            Duration::from_secs_f64(-b.tokens / rate)
        };
        std::thread::sleep(wait);
        wait
    }
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        if let Some(rate) = self.rate {
            let burst = rate * BURST.as_secs_f64();
            self.tokens = (self.tokens + elapsed * rate).min(burst);
        }
    }
}

/// Bytes written since open, as the feedback loop samples them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// Passed to writes by users.
    pub foreground: u64,
    /// Written to the disk by anything: WAL, flushes, compactions, GC.
    pub disk: u64,
    /// Written by GC.
    pub gc: u64,
}

/// The feedback loop: fed samples, it returns GC's new rate when it
/// changes.
#[derive(Debug)]
pub(crate) struct Feedback {
    interval: Duration,
    /// The device's write bandwidth if configured; else learned as the
    /// highest disk write bandwidth seen.
    device: Option<f64>,
    peak: f64,
    last: Option<(Instant, Sample)>,
    foreground_average: Option<f64>,
    rate: Option<f64>,
}

impl Feedback {
    pub(crate) fn new(interval: Duration, device_bandwidth: u64) -> Self {
        Feedback {
            interval,
            device: (device_bandwidth > 0).then_some(device_bandwidth as f64),
            peak: 0.0,
            last: None,
            foreground_average: None,
            rate: None,
        }
    }

    /// The rate the loop set last.
    pub(crate) fn rate(&self) -> Option<u64> {
        self.rate.map(|r| r.round() as u64)
    }

    /// Takes a sample at `now`. Once per interval it compares bandwidths
    /// and returns `Some(new rate)` if GC's rate changed (`Some(None)`
    /// when the limit is lifted).
    pub(crate) fn observe(&mut self, now: Instant, s: Sample) -> Option<Option<u64>> {
        let Some((then, before)) = self.last else {
            self.last = Some((now, s));
            return None;
        };
        let dt = now.saturating_duration_since(then);
        if dt < self.interval {
            return None;
        }
        self.last = Some((now, s));
        // After a long quiet spell (no GC asked for tokens) the averages
        // say nothing about now: start measuring again.
        if dt > self.interval * 10 {
            return None;
        }
        let secs = dt.as_secs_f64();
        let per_sec = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
        let foreground = per_sec(s.foreground, before.foreground);
        let disk = per_sec(s.disk, before.disk);
        let gc = per_sec(s.gc, before.gc);
        self.peak = self.peak.max(disk);
        let device = self.device.unwrap_or(self.peak);
        let busy = device > 0.0 && disk >= BUSY_FRACTION * device;
        let dropped = self
            .foreground_average
            .is_some_and(|avg| foreground < DROP_FRACTION * avg);
        self.foreground_average = Some(match self.foreground_average {
            Some(avg) => avg + AVERAGE_WEIGHT * (foreground - avg),
            None => foreground,
        });
        let old = self.rate;
        self.rate = if busy && dropped && gc > 0.0 {
            // From what GC actually did, so that the first step bites.
            let from = self.rate.map_or(gc, |r| r.min(gc.max(MIN_RATE)));
            Some((from * STEP).max(MIN_RATE))
        } else {
            match self.rate {
                Some(r) if r / STEP < device => Some(r / STEP),
                _ => None,
            }
        };
        (self.rate != old).then(|| self.rate())
    }
}

/// Which way GC's bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

/// GC's limiter: both buckets and the loop that sets them.
#[derive(Debug)]
pub(crate) struct GcLimiter {
    enabled: bool,
    read: TokenBucket,
    write: TokenBucket,
    feedback: Mutex<Feedback>,
    /// Set while space is short (a space budget nearly used): reclaiming
    /// space comes before foreground speed, so GC is not held back.
    suspended: AtomicBool,
}

impl GcLimiter {
    /// A limiter, or with `enabled` false one that never limits.
    pub(crate) fn new(enabled: bool, device_write_bandwidth: u64) -> Self {
        GcLimiter {
            enabled,
            read: TokenBucket::new(),
            write: TokenBucket::new(),
            feedback: Mutex::new(Feedback::new(
                Duration::from_secs(1),
                device_write_bandwidth,
            )),
            suspended: AtomicBool::new(false),
        }
    }

    pub(crate) fn set_suspended(&self, suspended: bool) {
        self.suspended.store(suspended, Ordering::Relaxed);
    }

    /// GC's current limit in bytes per second, `None` when unlimited.
    pub(crate) fn rate(&self) -> Option<u64> {
        if !self.enabled || self.suspended.load(Ordering::Relaxed) {
            return None;
        }
        self.write.rate()
    }

    /// Called by GC before it moves `bytes`: feeds the loop `sample` (the
    /// database's counters now) and waits for tokens. Returns the wait.
    pub(crate) fn pace(&self, direction: Direction, bytes: u64, sample: Sample) -> Duration {
        if !self.enabled {
            return Duration::ZERO;
        }
        if let Some(rate) = self.feedback.lock().observe(Instant::now(), sample) {
            self.read.set_rate(rate);
            self.write.set_rate(rate);
        }
        if self.suspended.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        match direction {
            Direction::Read => self.read.request(bytes),
            Direction::Write => self.write.request(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn bucket_is_unlimited_until_a_rate_is_set_and_then_paces_requests() {
        let b = TokenBucket::new();
        assert_eq!(b.rate(), None);
        assert_eq!(b.request(u64::MAX), Duration::ZERO);
        b.set_rate(Some(100 * MIB));
        assert_eq!(b.rate(), Some(100 * MIB));
        // 5 MiB at 100 MiB/s: about 50 ms of debt, paid by sleeping.
        let waited = b.request(5 * MIB);
        assert!(waited >= Duration::from_millis(40), "{waited:?}");
        b.set_rate(None);
        assert_eq!(b.request(100 * MIB), Duration::ZERO);
    }

    /// Feeds one interval per step: foreground and disk bandwidth in MiB/s,
    /// GC's share of the disk writes in MiB/s.
    fn run(f: &mut Feedback, steps: &[(u64, u64, u64)]) -> Vec<Option<Option<u64>>> {
        let start = Instant::now();
        let mut s = Sample::default();
        f.observe(start, s);
        steps
            .iter()
            .enumerate()
            .map(|(i, &(fg, disk, gc))| {
                s.foreground += fg * MIB;
                s.disk += disk * MIB;
                s.gc += gc * MIB;
                f.observe(start + Duration::from_secs(i as u64 + 1), s)
            })
            .collect()
    }

    #[test]
    fn gc_steps_down_by_a_fifth_on_contention_and_back_up_after() {
        let mut f = Feedback::new(Duration::from_secs(1), 500 * MIB);
        let changes = run(
            &mut f,
            &[
                // Steady writers at 100 MiB/s, GC using 300 of 500.
                (100, 450, 300),
                (100, 450, 300),
                // Writers fall to 70 while the disk stays busy: contention.
                (70, 450, 300),
                (70, 450, 240),
                // Writers recover.
                (100, 400, 192),
                // Without contention the rate climbs until the limit is
                // lifted: 300, 375, 468.75, then past the device's 500.
                (100, 300, 100),
                (100, 300, 100),
                (100, 300, 100),
                (100, 300, 100),
            ],
        );
        assert_eq!(changes[0], None);
        assert_eq!(changes[1], None);
        assert_eq!(changes[2], Some(Some(240 * MIB)));
        assert_eq!(changes[3], Some(Some(192 * MIB)));
        assert_eq!(changes[4], Some(Some(240 * MIB)));
        assert_eq!(changes[5], Some(Some(300 * MIB)));
        assert_eq!(changes[8], Some(None));
        assert_eq!(f.rate(), None);
    }

    #[test]
    fn a_foreground_drop_on_an_idle_disk_is_not_contention() {
        let mut f = Feedback::new(Duration::from_secs(1), 500 * MIB);
        let changes = run(&mut f, &[(100, 200, 100), (10, 150, 100), (0, 100, 100)]);
        assert!(changes.iter().all(Option::is_none), "{changes:?}");
    }

    #[test]
    fn the_device_bandwidth_is_learned_from_the_peak_when_not_given() {
        let mut f = Feedback::new(Duration::from_secs(1), 0);
        // The peak of 400 makes 350 busy; the drop to 50 is contention.
        let changes = run(&mut f, &[(100, 400, 200), (50, 350, 200)]);
        assert_eq!(changes, vec![None, Some(Some(160 * MIB))]);
    }

    #[test]
    fn samples_closer_than_the_interval_or_after_a_long_gap_decide_nothing() {
        let mut f = Feedback::new(Duration::from_secs(1), 500 * MIB);
        let t = Instant::now();
        let s = |fg: u64, disk: u64| Sample {
            foreground: fg * MIB,
            disk: disk * MIB,
            gc: disk * MIB,
        };
        assert_eq!(f.observe(t, s(0, 0)), None);
        assert_eq!(f.observe(t + Duration::from_millis(10), s(1, 5)), None);
        assert_eq!(f.observe(t + Duration::from_secs(1), s(100, 450)), None);
        // A minute later: the averages start over.
        assert_eq!(f.observe(t + Duration::from_secs(61), s(101, 900)), None);
        assert_eq!(f.rate(), None);
    }

    #[test]
    fn gc_limiter_paces_both_ways_unless_disabled_or_suspended() {
        let disk_busy = |t: u64, fg: u64| Sample {
            foreground: fg * MIB,
            disk: t * 450 * MIB,
            gc: t * 300 * MIB,
        };
        let limiter = GcLimiter::new(true, 500 * MIB);
        assert_eq!(limiter.rate(), None);
        // Steady writers, then a drop while the disk is busy: the loop's
        // clock is stepped by hand, as `pace` would over two seconds.
        {
            let mut f = limiter.feedback.lock();
            let t = Instant::now();
            f.observe(t, disk_busy(0, 0));
            f.observe(t + Duration::from_secs(1), disk_busy(1, 100));
            let rate = f.observe(t + Duration::from_secs(2), disk_busy(2, 170));
            assert_eq!(rate, Some(Some(240 * MIB)));
            limiter.read.set_rate(Some(240 * MIB));
            limiter.write.set_rate(Some(240 * MIB));
        }
        assert_eq!(limiter.rate(), Some(240 * MIB));
        let waited = limiter.pace(Direction::Write, 24 * MIB, Sample::default());
        assert!(waited >= Duration::from_millis(80), "{waited:?}");
        // The read bucket saved up a burst (0.1 s at its rate) meanwhile.
        let waited = limiter.pace(Direction::Read, 48 * MIB, Sample::default());
        assert!(waited >= Duration::from_millis(80), "{waited:?}");
        // Space short: GC is not held back, and reports no limit.
        limiter.set_suspended(true);
        assert_eq!(limiter.rate(), None);
        assert_eq!(
            limiter.pace(Direction::Write, 1 << 40, Sample::default()),
            Duration::ZERO
        );
        let off = GcLimiter::new(false, 1);
        assert_eq!(
            off.pace(Direction::Read, 1 << 40, Sample::default()),
            Duration::ZERO
        );
        assert_eq!(off.rate(), None);
    }
}
