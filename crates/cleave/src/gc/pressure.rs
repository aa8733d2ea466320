//! Space pressure of the key tree and of the value files, and the share
//! of the background threads GC gets from it (Scavenger+ §III-D1).
//!
//! The key tree's pressure is how far its space amplification is above
//! what a settled leveled tree of the same depth holds (eq. 4):
//! `P_index = S_index − (1 + Σ_{i=1}^{L−1} 1/T^i)`, with `S_index` the
//! compensated bytes of all levels over those of the last. Compaction
//! lowers it; what it exposes becomes garbage in the value files.
//! The value files' pressure is how far their exposed garbage is above
//! what GC at threshold `R_G` leaves when it keeps up (eq. 5):
//! `P_value = G_E/D − R_G/(1 − R_G)`, with `D` the referenced record
//! bytes. GC lowers it. GC may run `N · P_value / (P_index + P_value)` of
//! the `N` threads (eq. 6), at least one while some file reaches the
//! threshold, so GC is never starved while compaction has work.

use crate::base::limits::NUM_LEVELS;
use crate::manifest::Version;

/// Both pressures and what they come from, for one Version.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Pressure {
    /// Space amplification of the key tree, in compensated bytes.
    pub s_index: f64,
    /// `s_index` less that of a settled tree with as many levels; ≥ 0.
    pub p_index: f64,
    /// Record bytes no live sstable references (G_E).
    pub exposed_garbage: u64,
    /// Record bytes live sstables reference (D).
    pub referenced: u64,
    /// `G_E/D` less what GC at the threshold leaves; ≥ 0.
    pub p_value: f64,
}

/// `S_index` of levels of `compensated` bytes each: all over the last
/// non-empty level; 1.0 for an empty tree.
pub(crate) fn s_index(compensated: &[u64]) -> f64 {
    let total = compensated.iter().fold(0u64, |s, &b| s.saturating_add(b));
    match compensated.iter().rev().find(|&&b| b > 0) {
        Some(&last) => total as f64 / last as f64,
        None => 1.0,
    }
}

/// The space amplification of a settled leveled tree of `levels` levels
/// with size ratio `multiplier`: `1 + Σ_{i=1}^{levels−1} multiplier^−i`.
pub(crate) fn ideal_s_index(levels: usize, multiplier: f64) -> f64 {
    (1..levels).fold(1.0, |sum, i| sum + multiplier.powi(-(i as i32)))
}

/// The pressures of `v` for GC threshold `garbage_ratio` (in (0, 1]).
pub(crate) fn measure(v: &Version, multiplier: f64, garbage_ratio: f64) -> Pressure {
    let compensated: Vec<u64> = (0..NUM_LEVELS)
        .map(|l| v.level_compensated_bytes(l))
        .collect();
    let s_index = s_index(&compensated);
    // The levels a settled tree of this data would use: from the first
    // non-empty level below L0 (the base level) to the last.
    let first = (1..NUM_LEVELS).find(|&l| v.num_files(l) > 0);
    let last = (1..NUM_LEVELS).rev().find(|&l| v.num_files(l) > 0);
    let levels = match (first, last) {
        (Some(f), Some(l)) => l - f + 1,
        _ => 1,
    };
    let p_index = (s_index - ideal_s_index(levels, multiplier)).max(0.0);
    let (garbage, records) = v.value_files().fold((0u64, 0u64), |(g, r), f| {
        (
            g.saturating_add(v.garbage_bytes(f)),
            r.saturating_add(f.record_bytes()),
        )
    });
    let referenced = records.saturating_sub(garbage);
    let steady = if garbage_ratio >= 1.0 {
        f64::INFINITY
    } else {
        garbage_ratio / (1.0 - garbage_ratio)
    };
    let p_value = if referenced == 0 {
        // All garbage (or nothing): GC is all that can free space.
        if garbage > 0 {
            f64::INFINITY
        } else {
            0.0
        }
    } else {
        (garbage as f64 / referenced as f64 - steady).max(0.0)
    };
    Pressure {
        s_index,
        p_index,
        exposed_garbage: garbage,
        referenced,
        p_value,
    }
}

/// Most GC jobs to run at once on `threads` threads (eq. 6), at least one
/// while `gc_has_work`, none while it has none.
pub(crate) fn max_gc_jobs(threads: usize, p: &Pressure, gc_has_work: bool) -> usize {
    if !gc_has_work {
        return 0;
    }
    let share = if p.p_value <= 0.0 {
        0.0
    } else if p.p_index <= 0.0 || p.p_value.is_infinite() {
        1.0
    } else {
        p.p_value / (p.p_index + p.p_value)
    };
    ((threads as f64 * share).round() as usize).clamp(1, threads.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::FileNumber;
    use crate::manifest::testutil::meta;
    use crate::manifest::{HostedLogical, TableValueRefs, ValueFileMeta, VersionEdit};

    #[test]
    fn s_index_and_its_ideal() {
        assert_eq!(s_index(&[0; 7]), 1.0);
        assert_eq!(s_index(&[0, 0, 0, 0, 0, 0, 100]), 1.0);
        assert_eq!(s_index(&[10, 0, 0, 0, 0, 100, 1000]), 1.11);
        // Empty levels below the data do not count as the last level.
        assert_eq!(s_index(&[50, 100, 0, 0, 0, 0, 0]), 1.5);
        assert_eq!(ideal_s_index(1, 10.0), 1.0);
        assert!((ideal_s_index(3, 10.0) - 1.11).abs() < 1e-12);
        assert!((ideal_s_index(2, 4.0) - 1.25).abs() < 1e-12);
    }

    /// One value file of `records` bytes of which a table in `level`
    /// references `live`, plus `upper` sstable bytes in L5 over `lower` in
    /// L6.
    fn version(records: u64, live: u64, upper: u64, lower: u64) -> Version {
        let mut e = VersionEdit::default();
        e.add_value_file(ValueFileMeta {
            number: FileNumber(1),
            size: records + 100,
            hosted: vec![HostedLogical {
                logical_file: FileNumber(1),
                records: 10,
                bytes: records,
            }],
            ..ValueFileMeta::default()
        });
        let mut low = meta(10, "a", "m", 1, lower);
        low.value_refs = vec![TableValueRefs {
            logical_file: FileNumber(1),
            count: 5,
            bytes: live,
        }];
        e.add_file(6, low);
        if upper > 0 {
            e.add_file(5, meta(11, "a", "m", 2, upper));
        }
        Version::default().apply(e).unwrap()
    }

    #[test]
    fn pressures_follow_equations_4_and_5() {
        // L5 holds 1/10 of L6's compensated bytes: a settled two-level
        // tree, no index pressure. Garbage 600 of 1000 over 400 live: 1.5,
        // minus 0.25 for R_G = 0.2.
        let v = version(1000, 400, 44, 40);
        let p = measure(&v, 10.0, 0.2);
        assert!((p.s_index - 1.1).abs() < 1e-12, "{p:?}");
        assert_eq!(p.p_index, 0.0);
        assert_eq!((p.exposed_garbage, p.referenced), (600, 400));
        assert!((p.p_value - 1.25).abs() < 1e-12, "{p:?}");
        // L5 as large as L6: S_index 2, ideal 1.1.
        let v = version(1000, 900, 940, 40);
        let p = measure(&v, 10.0, 0.2);
        assert!((p.s_index - 2.0).abs() < 1e-12, "{p:?}");
        assert!((p.p_index - 0.9).abs() < 1e-12, "{p:?}");
        // Garbage 100 over 900 is below what R_G = 0.2 leaves: no pressure.
        assert_eq!(p.p_value, 0.0);
    }

    #[test]
    fn gc_share_follows_equation_6() {
        let p = |p_index, p_value| Pressure {
            p_index,
            p_value,
            ..Pressure::default()
        };
        assert_eq!(max_gc_jobs(4, &p(1.0, 1.0), true), 2);
        assert_eq!(max_gc_jobs(4, &p(1.0, 3.0), true), 3);
        assert_eq!(max_gc_jobs(4, &p(0.0, 0.5), true), 4);
        // At least one while a file reaches the threshold ...
        assert_eq!(max_gc_jobs(4, &p(3.0, 0.0), true), 1);
        assert_eq!(max_gc_jobs(4, &p(100.0, 0.01), true), 1);
        // ... and none without work.
        assert_eq!(max_gc_jobs(4, &p(0.0, 5.0), false), 0);
        assert_eq!(max_gc_jobs(1, &p(0.0, f64::INFINITY), true), 1);
    }
}
