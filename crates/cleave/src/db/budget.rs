//! The space budget (`Options::space_budget_bytes`): how full the
//! database is, and what that asks of GC and of writers.
//!
//! As LavaStore's adaptive GC, GC stays lazy while there is room (a higher
//! garbage threshold costs fewer bytes copied per byte freed) and grows
//! aggressive from 75% of the budget: its threshold falls linearly to a
//! quarter at 100% and it may take every background thread. Past 100%
//! each write is delayed, and past the stop level writes wait for space.

use std::time::Duration;

/// Fill from which GC grows aggressive.
pub(crate) const AGGRESSIVE_FROM: f64 = 0.75;
/// Fill past 1 at which writes stop: a little room past the budget, so
/// that delays get a chance to work before writers wait outright.
pub(crate) const STOP_AT: f64 = 1.0 + 1.0 / 32.0;
/// GC's threshold at a full budget, as a fraction of the configured one.
const MIN_RATIO_FRACTION: f64 = 0.25;
/// The delay of a write past the budget.
pub(crate) const DELAY: Duration = Duration::from_millis(1);

/// What a writer does at some fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteAction {
    Proceed,
    Delay,
    Stop,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Budget {
    /// 0: no budget.
    pub bytes: u64,
}

impl Budget {
    /// Usage over the budget; 0 without one.
    pub(crate) fn fill(&self, usage: u64) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            usage as f64 / self.bytes as f64
        }
    }

    /// GC's garbage threshold at `usage`, for the configured `ratio`.
    pub(crate) fn gc_ratio(&self, ratio: f64, usage: u64) -> f64 {
        let fill = self.fill(usage);
        if fill <= AGGRESSIVE_FROM {
            return ratio;
        }
        let progress = ((fill - AGGRESSIVE_FROM) / (1.0 - AGGRESSIVE_FROM)).min(1.0);
        ratio * (1.0 - progress * (1.0 - MIN_RATIO_FRACTION))
    }

    /// Whether space is short: GC may then take every background thread,
    /// and its rate is not limited.
    pub(crate) fn short(&self, usage: u64) -> bool {
        self.fill(usage) > AGGRESSIVE_FROM
    }

    /// At least how many of `threads` GC may use at `usage`: from none at
    /// 75% of the budget to all of them at 100%.
    pub(crate) fn gc_threads(&self, threads: usize, usage: u64) -> usize {
        let fill = self.fill(usage);
        if fill <= AGGRESSIVE_FROM {
            return 0;
        }
        let progress = ((fill - AGGRESSIVE_FROM) / (1.0 - AGGRESSIVE_FROM)).min(1.0);
        ((threads as f64 * progress).ceil() as usize).min(threads)
    }

    pub(crate) fn write_action(&self, usage: u64) -> WriteAction {
        let fill = self.fill(usage);
        if self.bytes == 0 || fill <= 1.0 {
            WriteAction::Proceed
        } else if fill < STOP_AT {
            WriteAction::Delay
        } else {
            WriteAction::Stop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_budget_asks_nothing() {
        let b = Budget { bytes: 0 };
        assert_eq!(b.gc_ratio(0.2, u64::MAX), 0.2);
        assert!(!b.short(u64::MAX));
        assert_eq!(b.gc_threads(4, u64::MAX), 0);
        assert_eq!(b.write_action(u64::MAX), WriteAction::Proceed);
    }

    #[test]
    fn gc_grows_aggressive_from_three_quarters_of_the_budget() {
        let b = Budget { bytes: 1000 };
        assert_eq!(b.gc_ratio(0.2, 500), 0.2);
        assert_eq!(b.gc_ratio(0.2, 750), 0.2);
        assert!((b.gc_ratio(0.2, 875) - 0.125).abs() < 1e-12);
        assert!((b.gc_ratio(0.2, 1000) - 0.05).abs() < 1e-12);
        assert!((b.gc_ratio(0.2, 5000) - 0.05).abs() < 1e-12);
        assert!(!b.short(750) && b.short(751));
        assert_eq!(b.gc_threads(4, 750), 0);
        assert_eq!(b.gc_threads(4, 800), 1);
        assert_eq!(b.gc_threads(4, 875), 2);
        assert_eq!(b.gc_threads(4, 1200), 4);
    }

    #[test]
    fn writes_are_delayed_past_the_budget_and_stopped_past_the_stop_level() {
        let b = Budget { bytes: 3200 };
        assert_eq!(b.write_action(3200), WriteAction::Proceed);
        assert_eq!(b.write_action(3201), WriteAction::Delay);
        assert_eq!(b.write_action(3299), WriteAction::Delay);
        assert_eq!(b.write_action(3300), WriteAction::Stop);
    }
}
