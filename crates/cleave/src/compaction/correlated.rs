//! Correlated compaction: which logical value files a compaction
//! re-separates, a pure function of the plan's inputs, the Version and
//! options. The job reads the values it keeps whose handles name a chosen
//! file and writes them, in key order, into a new logical file of origin
//! `Compaction`, with new handles; the old file loses those references
//! (references only ever decrease), so its garbage grows and GC, or the
//! edit that drops its last reference, reclaims it.
//!
//! Re-separating costs what key-value separation exists to avoid: values
//! written again. So a file is chosen only where the rewrite is cheap or
//! pays for itself, for one of two reasons.
//!
//! **Fan-out.** (Not bounded while a space budget is short: compaction
//! then re-separates nothing, `db::compact`.) Every output sstable
//! references a subset of the logical files the compaction's inputs
//! reference, plus at most one new logical file: the job starts a new
//! value file only where it starts a new output sstable. So keeping the
//! inputs' union, minus the files chosen, within `max_value_file_refs − 1`
//! bounds every output by `max_value_file_refs`, without tracking outputs
//! (the bound is on the union, so a compaction whose outputs would each
//! stay within the limit may still rewrite some values; the union is what
//! GC's reverse lookup and the manifest pay for anyway). Files are chosen
//! fewest bytes in this compaction first, so the bound costs the fewest
//! rewritten bytes.
//! Why the default of 256 keeps that rare: under uniform overwrites of a
//! data set of `D` bytes flushed `W` bytes at a time, a logical file
//! written `a` data sets ago keeps `e^−a` of its records, so its share of
//! an output falls with its age, and ranking by bytes is ranking by age.
//! The files beyond rank `M` are more than `M·W/D` data sets old, and
//! together they hold about `e^(−M·W/D)` of the output's value bytes. In
//! the benchmark setting (D = 2 GiB, W = 64 MiB, so W/D = 1/32) a limit
//! of 16 would rewrite `e^−0.5` ≈ 60% of the values at every compaction,
//! 64 about 14%, 256 about `e^−8` ≈ 0.03%; and a 2 GiB run references
//! fewer than 256 files before that steady state (two per flush at most,
//! hot and cold). A file a re-separation wrote covers one compaction's key
//! range only, so it adds to the fan-out of that range alone. Measured at
//! a 64th of the benchmark's scale (a 32 MiB data set of 1 KB values,
//! 1 MiB memtables and files, then four data sets of uniform overwrites):
//! with the default, compactions re-separated 1.3% of the bytes users
//! wrote and write amplification was 1.98 against 2.02 off (GC copied
//! less); with a limit of 64, 20% and 2.30; with 16, 67% and 3.03.
//!
//! **Garbage.** A file whose garbage ratio (record bytes no sstable
//! references, over its record bytes where it lives now) reaches
//! `correlated_garbage_ratio`, and whose live references this compaction
//! holds at least half of ([`MIN_SHARE_NUMERATOR`] /
//! [`MIN_SHARE_DENOMINATOR`]). Rewriting the share `s` of its live bytes
//! `(1−g)·B` costs `s·(1−g)·B` now, exactly what GC would copy for them
//! when it collects the file, which it will, since the default threshold
//! (0.5) is above GC's (0.2): the bytes are the same, but they land in key
//! order beside their keys, and they are not copied again by GC. After
//! this compaction the file keeps at most `(1−s)(1−g)·B ≤ B/4` live, a
//! garbage ratio of at least 0.75: GC collects it for a quarter of its
//! size or less, and when this compaction holds all of its references the
//! file dies with the edit and GC copies nothing. Under uniform or
//! zipfian overwrites a flushed file's references spread over every
//! output range, so no compaction below the base level holds half of
//! them: the rule fires on files whose keys are local (range writes,
//! files a re-separation wrote), not on every compaction.

use std::collections::{BTreeMap, BTreeSet};

use crate::base::FileNumber;
use crate::manifest::{FileMeta, Version};
use crate::options::Options;

/// A compaction must hold at least this share of a file's live references
/// for the garbage rule to choose it: 1/2.
pub(crate) const MIN_SHARE_NUMERATOR: u64 = 1;
pub(crate) const MIN_SHARE_DENOMINATOR: u64 = 2;

#[derive(Debug, Clone, Copy)]
pub(crate) struct CorrelatedOptions {
    pub enabled: bool,
    /// At least 1 (see `Options::validate`).
    pub max_value_file_refs: usize,
    /// In (0, 1].
    pub garbage_ratio: f64,
}

impl From<&Options> for CorrelatedOptions {
    fn from(o: &Options) -> Self {
        CorrelatedOptions {
            enabled: o.correlated_compaction,
            max_value_file_refs: o.max_value_file_refs,
            garbage_ratio: o.correlated_garbage_ratio,
        }
    }
}

/// The logical value files whose values, referenced from `inputs` (every
/// input sstable of one compaction), the compaction re-separates; empty
/// when the switch is off or nothing qualifies.
pub(crate) fn select<'a>(
    inputs: impl IntoIterator<Item = &'a FileMeta>,
    v: &Version,
    opts: &CorrelatedOptions,
) -> BTreeSet<FileNumber> {
    let mut chosen = BTreeSet::new();
    if !opts.enabled {
        return chosen;
    }
    // Bytes of each logical file that the inputs reference: what leaves it
    // with this compaction, dropped as shadowed or kept and rewritten.
    let mut held: BTreeMap<FileNumber, u64> = BTreeMap::new();
    for f in inputs {
        for r in &f.value_refs {
            let bytes = held.entry(r.logical_file).or_default();
            *bytes = bytes.saturating_add(r.bytes);
        }
    }
    for (&logical, &bytes) in &held {
        if high_garbage_and_mostly_held(v, logical, bytes, opts.garbage_ratio) {
            chosen.insert(logical);
        }
    }
    let mut kept: Vec<(u64, FileNumber)> = held
        .iter()
        .filter(|(logical, _)| !chosen.contains(logical))
        .map(|(&logical, &bytes)| (bytes, logical))
        .collect();
    let new_file = usize::from(!chosen.is_empty());
    if kept.len() + new_file > opts.max_value_file_refs {
        // Choosing any file adds the one new file the rewritten values go
        // to; the limit is at least 1, so this never underflows.
        let keep = opts.max_value_file_refs.saturating_sub(1);
        kept.sort_unstable();
        let excess = kept.len().saturating_sub(keep);
        chosen.extend(kept.iter().take(excess).map(|&(_, logical)| logical));
    }
    chosen
}

/// Whether `logical`'s garbage ratio reaches `ratio` and `held` is at
/// least the minimum share of what live sstables reference in it.
fn high_garbage_and_mostly_held(v: &Version, logical: FileNumber, held: u64, ratio: f64) -> bool {
    let Some(hosted) = v
        .physical_file(logical)
        .and_then(|p| v.value_file(p))
        .and_then(|f| f.hosted.iter().find(|h| h.logical_file == logical))
    else {
        return false;
    };
    let referenced = v.referenced(logical).bytes;
    if hosted.bytes == 0 || referenced == 0 {
        return false;
    }
    let garbage = hosted.bytes.saturating_sub(referenced);
    let high = garbage as f64 >= ratio * hosted.bytes as f64;
    let mostly_held = u128::from(held) * u128::from(MIN_SHARE_DENOMINATOR)
        >= u128::from(referenced) * u128::from(MIN_SHARE_NUMERATOR);
    high && mostly_held
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::testutil::meta;
    use crate::manifest::{HostedLogical, TableValueRefs, ValueFileMeta, VersionEdit};

    /// Physical file `n` hosting its own logical file of `bytes` bytes.
    fn value_file(n: u64, bytes: u64) -> ValueFileMeta {
        ValueFileMeta {
            number: FileNumber(n),
            size: bytes + 100,
            hosted: vec![HostedLogical {
                logical_file: FileNumber(n),
                records: bytes,
                bytes,
            }],
            ..ValueFileMeta::default()
        }
    }

    /// Sstable `n` referencing `(logical, bytes)` (one record per byte).
    fn table(n: u64, lo: &str, hi: &str, refs: &[(u64, u64)]) -> FileMeta {
        FileMeta {
            value_refs: refs
                .iter()
                .map(|&(l, bytes)| TableValueRefs {
                    logical_file: FileNumber(l),
                    count: bytes,
                    bytes,
                })
                .collect(),
            ..meta(n, lo, hi, n * 10, 100)
        }
    }

    /// A Version with value files `(number, bytes)` and L1 tables.
    fn version(files: &[(u64, u64)], tables: &[FileMeta]) -> Version {
        let mut e = VersionEdit::default();
        for &(n, bytes) in files {
            e.add_value_file(value_file(n, bytes));
        }
        for t in tables {
            e.add_file(1, t.clone());
        }
        Version::default().apply(e).unwrap()
    }

    fn opts(max_value_file_refs: usize, garbage_ratio: f64) -> CorrelatedOptions {
        CorrelatedOptions {
            enabled: true,
            max_value_file_refs,
            garbage_ratio,
        }
    }

    fn numbers(s: &BTreeSet<FileNumber>) -> Vec<u64> {
        s.iter().map(|n| n.0).collect()
    }

    /// Five files referenced, limit 3: keep 2 (the third slot is the new
    /// file), rewrite the three the compaction holds fewest bytes of.
    #[test]
    fn fan_out_rewrites_the_smallest_contributors() {
        let t1 = table(1, "a", "f", &[(10, 50), (11, 5), (12, 40)]);
        let t2 = table(2, "g", "m", &[(11, 5), (13, 8), (14, 90)]);
        let v = version(
            &[(10, 100), (11, 100), (12, 100), (13, 100), (14, 100)],
            &[t1.clone(), t2.clone()],
        );
        let chosen = select([&t1, &t2], &v, &opts(3, 1.0));
        // Held: 10→50, 11→10, 12→40, 13→8, 14→90.
        assert_eq!(numbers(&chosen), vec![11, 12, 13]);
    }

    #[test]
    fn fan_out_within_the_limit_rewrites_nothing() {
        let t1 = table(1, "a", "f", &[(10, 50), (11, 5), (12, 40)]);
        let v = version(
            &[(10, 100), (11, 100), (12, 100)],
            std::slice::from_ref(&t1),
        );
        // Three files and no new one: nothing is chosen, so nothing is
        // written to a new file.
        assert!(select([&t1], &v, &opts(3, 1.0)).is_empty());
        // At 2, keeping one plus the new file.
        assert_eq!(numbers(&select([&t1], &v, &opts(2, 1.0))), vec![11, 12]);
        // At 1, everything goes to the new file.
        assert_eq!(numbers(&select([&t1], &v, &opts(1, 1.0))), vec![10, 11, 12]);
    }

    #[test]
    fn ties_in_bytes_break_by_file_number() {
        let t1 = table(1, "a", "f", &[(10, 5), (11, 5), (12, 5)]);
        let v = version(
            &[(10, 100), (11, 100), (12, 100)],
            std::slice::from_ref(&t1),
        );
        assert_eq!(numbers(&select([&t1], &v, &opts(2, 1.0))), vec![10, 11]);
    }

    /// File 10 is 60% garbage and the compaction holds all of its live
    /// references; file 11 is 70% garbage but the compaction holds a third
    /// of them; file 12 is held whole but only 30% garbage.
    #[test]
    fn garbage_rule_needs_high_garbage_and_half_the_references() {
        let t1 = table(1, "a", "f", &[(10, 40), (11, 10), (12, 70)]);
        let other = table(2, "x", "z", &[(11, 20)]);
        let v = version(&[(10, 100), (11, 100), (12, 100)], &[t1.clone(), other]);
        assert_eq!(numbers(&select([&t1], &v, &opts(100, 0.5))), vec![10]);
        // At a ratio of 0.25, file 12 qualifies too; file 11 still not.
        assert_eq!(numbers(&select([&t1], &v, &opts(100, 0.25))), vec![10, 12]);
    }

    #[test]
    fn exactly_half_the_references_is_enough() {
        let half = table(1, "a", "f", &[(10, 20)]);
        let rest = table(2, "x", "z", &[(10, 20)]);
        let v = version(&[(10, 100)], &[half.clone(), rest]);
        assert_eq!(numbers(&select([&half], &v, &opts(100, 0.5))), vec![10]);
        let less = table(1, "a", "f", &[(10, 19)]);
        let more = table(2, "x", "z", &[(10, 21)]);
        let v = version(&[(10, 100)], &[less.clone(), more]);
        assert!(select([&less], &v, &opts(100, 0.5)).is_empty());
    }

    /// The garbage rule's new file counts against the fan-out limit.
    #[test]
    fn garbage_choice_counts_the_new_file_against_the_limit() {
        let t1 = table(1, "a", "f", &[(10, 10), (11, 60), (12, 70)]);
        let v = version(
            &[(10, 100), (11, 100), (12, 100)],
            std::slice::from_ref(&t1),
        );
        // File 10 is 90% garbage: chosen. Then 11 and 12 plus the new file
        // make 3 > 2: 11, the smaller, goes too.
        assert_eq!(numbers(&select([&t1], &v, &opts(2, 0.5))), vec![10, 11]);
        assert_eq!(numbers(&select([&t1], &v, &opts(3, 0.5))), vec![10]);
    }

    #[test]
    fn switched_off_chooses_nothing() {
        let t1 = table(1, "a", "f", &[(10, 10), (11, 50), (12, 60)]);
        let v = version(
            &[(10, 100), (11, 100), (12, 100)],
            std::slice::from_ref(&t1),
        );
        let off = CorrelatedOptions {
            enabled: false,
            ..opts(1, 0.01)
        };
        assert!(select([&t1], &v, &off).is_empty());
    }

    /// A file GC moved: its garbage counts against its bytes where it
    /// lives now, not at birth.
    #[test]
    fn garbage_is_measured_where_the_file_lives_now() {
        let t1 = table(1, "a", "f", &[(10, 40)]);
        let mut e = VersionEdit::default();
        e.add_value_file(ValueFileMeta {
            number: FileNumber(20),
            size: 200,
            hosted: vec![HostedLogical {
                logical_file: FileNumber(10),
                records: 50,
                bytes: 50,
            }],
            ..ValueFileMeta::default()
        });
        e.add_file(1, t1.clone());
        let v = Version::default().apply(e).unwrap();
        // 10 of 50 bytes are garbage here: 20%, whatever it was at birth.
        assert!(select([&t1], &v, &opts(100, 0.5)).is_empty());
        assert_eq!(numbers(&select([&t1], &v, &opts(100, 0.19))), vec![10]);
    }
}
