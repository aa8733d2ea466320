//! `--benchmark_write_rate_limit` (db_bench's): the writes of every thread
//! together go in at no more than this many bytes (key and value) per
//! second, so that readers are compared under the same write load on
//! every engine (readwhilewriting's writer, LavaStore's Table 1 C).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How far writes may fall behind the rate and then catch up at full
/// speed: a pause longer than this is not made up by a burst.
const MAX_BURST: Duration = Duration::from_millis(100);

pub struct WriteRate {
    nanos_per_byte: f64,
    /// When the writes reserved so far are all due.
    next: Mutex<Instant>,
}

impl WriteRate {
    pub fn new(bytes_per_second: u64) -> Self {
        assert!(bytes_per_second > 0, "a rate of 0 lets nothing through");
        Self {
            nanos_per_byte: 1e9 / bytes_per_second as f64,
            next: Mutex::new(Instant::now()),
        }
    }

    /// Reserves `bytes` and waits until they are due. Returns whether it
    /// waited.
    pub fn pace(&self, bytes: u64) -> bool {
        let now = Instant::now();
        let due = self.reserve(now, bytes);
        if due > now {
            std::thread::sleep(due - now);
            true
        } else {
            false
        }
    }

    /// When a write of `bytes` asked for at `now` may go in: after the
    /// writes reserved before it, but no earlier than `MAX_BURST` before
    /// `now` counts.
    fn reserve(&self, now: Instant, bytes: u64) -> Instant {
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let floor = now.checked_sub(MAX_BURST).unwrap_or(now);
        let due = (*next).max(floor);
        *next = due + Duration::from_nanos((bytes as f64 * self.nanos_per_byte) as u64);
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_spaced_by_their_bytes() {
        let rate = WriteRate::new(1000);
        let t0 = Instant::now() + Duration::from_secs(10);
        *rate.next.lock().unwrap() = t0;
        // 100 bytes at 1,000 B/s: one every 100 ms, whoever asks.
        let dues: Vec<Duration> = (0..5).map(|_| rate.reserve(t0, 100) - t0).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(dues, vec![ms(0), ms(100), ms(200), ms(300), ms(400)]);
    }

    #[test]
    fn a_pause_is_made_up_by_a_short_burst_only() {
        let rate = WriteRate::new(1000);
        let t0 = Instant::now();
        *rate.next.lock().unwrap() = t0;
        // A second later, the writes that were not made are not all owed:
        // only MAX_BURST of them go in at once.
        let later = t0 + Duration::from_secs(1);
        let first = rate.reserve(later, 50);
        assert_eq!(later - first, MAX_BURST);
        let second = rate.reserve(later, 50);
        assert_eq!(second - first, Duration::from_millis(50));
        let third = rate.reserve(later, 100);
        assert_eq!(third, later);
        assert_eq!(rate.reserve(later, 1) - later, Duration::from_millis(100));
    }
}
