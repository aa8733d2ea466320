//! Which physical value files GC collects: a pure function of a Version.
//!
//! A file qualifies when its exact garbage ratio (record bytes no live
//! sstable references, over all its record bytes) reaches the threshold.
//! Among those, the order is LFS's cost-benefit (Rosenblum and Ousterhout):
//! `g / (2 - g) × age`, for garbage ratio `g`: the space freed over the
//! bytes read and written, weighted by the file's age (in file numbers:
//! how many files of any kind were created since). A young file gathers garbage fast
//! (its keys were just written, the hot ones among them are rewritten
//! soon), so waiting costs little and makes its collection cheaper; the
//! garbage of an old file grows slowly, so it is collected at a lower
//! ratio. On the fixed-8k zipfian overwrite it copied 1.7 bytes per byte
//! reclaimed where highest-ratio-first copied 2.0, and ended with less on
//! disk (docs/benchmarks.md, issue 5).
//! Files whose live bytes are small are packed together into one
//! output of at most `value_file_size` live bytes, so GC does not turn many
//! small files into as many smaller ones. No job copies more than
//! `max_live_bytes`, the room a space budget leaves it. Files with no live record at all
//! never reach the picker: the edit that drops their last reference also
//! drops them. Nor do files whose live records all expire before
//! `leave_expiring_until`: compactions will drop every reference to them
//! without reading a value, and the file goes whole, where GC would copy
//! records about to become garbage (on a TTL workload GC rewrote as many
//! bytes as were written, docs/benchmarks.md, issue 24).

use std::collections::HashSet;
use std::sync::Arc;

use crate::base::FileNumber;
use crate::manifest::{ValueFileMeta, Version};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct GcPickerOptions {
    /// Smallest garbage ratio (0..=1) that makes a file worth collecting.
    pub garbage_ratio: f64,
    /// Most live bytes one GC output holds when files are packed.
    pub value_file_size: u64,
    /// Most live bytes one job copies, a single file included: a file
    /// holding more is left for later.
    pub max_live_bytes: u64,
    /// Milliseconds since the Unix epoch: a file whose live records all
    /// expire by then is left to expire. 0 leaves none.
    pub leave_expiring_until: u64,
}

/// One GC job: the physical files to collect, and what they hold.
#[derive(Debug, Clone)]
pub(crate) struct GcPlan {
    /// Highest garbage ratio first.
    pub inputs: Vec<Arc<ValueFileMeta>>,
    /// Record bytes live sstables reference: what the job copies.
    pub live_bytes: u64,
    /// Record bytes it reclaims.
    pub garbage_bytes: u64,
}

/// The files GC should collect next, or `None` if no file reaches the
/// threshold. `busy` names files that must not be picked: those a running
/// job collects, or a failed job left (a value log that an unflushed
/// memtable still references would be one, when there are value logs).
pub(crate) fn pick(
    v: &Version,
    opts: &GcPickerOptions,
    busy: &HashSet<FileNumber>,
) -> Option<GcPlan> {
    let mut candidates: Vec<(f64, &Arc<ValueFileMeta>, u64, u64)> = v
        .value_files()
        .filter(|f| !busy.contains(&f.number))
        .filter_map(|f| {
            let records = f.record_bytes();
            let garbage = v.garbage_bytes(f);
            if records == 0 {
                return None;
            }
            let ratio = garbage as f64 / records as f64;
            let live = records - garbage;
            (ratio >= opts.garbage_ratio && live <= opts.max_live_bytes)
                .then_some((ratio, f, live, garbage))
        })
        .collect();
    // The walk of every table's references only when a file qualifies.
    if opts.leave_expiring_until > 0 && !candidates.is_empty() && v.has_expiring_entries() {
        let expiries = v.logical_expiries();
        candidates.retain(|(_, f, _, _)| {
            expiries.is_empty()
                || !f.hosted.iter().all(|h| {
                    v.referenced(h.logical_file).count == 0
                        || expiries
                            .get(&h.logical_file)
                            .is_some_and(|&at| at <= opts.leave_expiring_until)
                })
        });
    }
    let newest = v.value_files().map(|f| f.number.0).max().unwrap_or(0);
    let score =
        |g: f64, n: FileNumber| g / (2.0 - g) * newest.saturating_sub(n.0).saturating_add(1) as f64;
    // Among equal scores the oldest file, for a stable order.
    candidates.sort_by(|a, b| {
        score(b.0, b.1.number)
            .total_cmp(&score(a.0, a.1.number))
            .then(a.1.number.cmp(&b.1.number))
    });
    let mut plan: Option<GcPlan> = None;
    for (_, f, live, garbage) in candidates {
        match plan.as_mut() {
            None => {
                plan = Some(GcPlan {
                    inputs: vec![f.clone()],
                    live_bytes: live,
                    garbage_bytes: garbage,
                })
            }
            // Packing: another file joins while the output stays within
            // one value file.
            Some(p)
                if p.live_bytes.saturating_add(live)
                    <= opts.value_file_size.min(opts.max_live_bytes) =>
            {
                p.inputs.push(f.clone());
                // Saturating: sizes come from the manifest.
                p.live_bytes = p.live_bytes.saturating_add(live);
                p.garbage_bytes = p.garbage_bytes.saturating_add(garbage);
            }
            Some(_) => {}
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::file_meta::EXPIRY_POINTS;
    use crate::manifest::testutil::meta;
    use crate::manifest::{HostedLogical, TableExpiry, TableValueRefs, VersionEdit};

    /// A Version with one value file per `(number, record bytes, live
    /// bytes)`, each referenced by its own table.
    fn version(files: &[(u64, u64, u64)]) -> Version {
        version_expiring(files, |_| None)
    }

    /// As `version`, each table with the expiry and entry count
    /// `expiry(i)` gives (`None`: no expiring entry).
    fn version_expiring(
        files: &[(u64, u64, u64)],
        expiry: impl Fn(usize) -> Option<(TableExpiry, u64)>,
    ) -> Version {
        let mut e = VersionEdit::default();
        for (i, &(n, records, live)) in files.iter().enumerate() {
            e.add_value_file(ValueFileMeta {
                number: FileNumber(n),
                size: records + 100,
                hosted: vec![HostedLogical {
                    logical_file: FileNumber(n),
                    records: records / 10,
                    bytes: records,
                }],
                ..ValueFileMeta::default()
            });
            let key = format!("k{i:03}");
            let mut table = meta(1000 + n, &key, &key, 1, 10);
            table.value_refs = vec![TableValueRefs {
                logical_file: FileNumber(n),
                count: live / 10,
                bytes: live,
            }];
            if let Some((x, entries)) = expiry(i) {
                table.expiry = Some(x);
                table.num_entries = entries;
            }
            e.add_file(6, table);
        }
        Version::default().apply(e).unwrap()
    }

    fn opts(ratio: f64, size: u64) -> GcPickerOptions {
        GcPickerOptions {
            garbage_ratio: ratio,
            value_file_size: size,
            max_live_bytes: u64::MAX,
            leave_expiring_until: 0,
        }
    }

    #[test]
    fn files_whose_live_records_expire_soon_are_left_to_expire() {
        // Each table holds one value entry and one deletion (`meta`).
        let expiring = |latest| {
            let x = TableExpiry {
                entries: 1,
                value_bytes: 500,
                points: [latest; EXPIRY_POINTS],
            };
            Some((x, 2))
        };
        // File 1's references all expire at 5,000; file 2's at 50,000;
        // file 3's table has a value entry with no expiry as well.
        let v = version_expiring(
            &[(1, 1000, 500), (2, 1000, 500), (3, 1000, 500)],
            |i| match i {
                0 => expiring(5_000),
                1 => expiring(50_000),
                _ => expiring(1_000).map(|(x, _)| (x, 3)),
            },
        );
        let until = |at| GcPickerOptions {
            leave_expiring_until: at,
            ..opts(0.2, 10_000)
        };
        assert_eq!(
            numbers(&pick(&v, &until(0), &HashSet::new()).unwrap()),
            vec![1, 2, 3]
        );
        assert_eq!(
            numbers(&pick(&v, &until(10_000), &HashSet::new()).unwrap()),
            vec![2, 3]
        );
        // Expiring past the wait: collected as any other.
        assert_eq!(
            numbers(&pick(&v, &until(60_000), &HashSet::new()).unwrap()),
            vec![3]
        );
    }

    fn numbers(p: &GcPlan) -> Vec<u64> {
        p.inputs.iter().map(|f| f.number.0).collect()
    }

    #[test]
    fn picks_by_garbage_ratio_and_age_at_or_above_the_threshold() {
        // Ratios: 1 → 0.1, 2 → 0.5, 3 → 0.2, 4 → 0.9; ages 4, 3, 2, 1.
        // Scores g / (2 - g) × age: 2 → 1.0, 4 → 0.82, 3 → 0.22.
        let v = version(&[
            (1, 1000, 900),
            (2, 1000, 500),
            (3, 1000, 800),
            (4, 1000, 100),
        ]);
        let p = pick(&v, &opts(0.2, 150), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![2]);
        assert_eq!((p.live_bytes, p.garbage_bytes), (500, 500));
        assert!(pick(&v, &opts(0.95, 150), &HashSet::new()).is_none());
        // The threshold is inclusive: file 3's 0.2 qualifies; file 1's 0.1
        // never does, old as it is.
        let p = pick(&v, &opts(0.2, 10_000), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![2, 4, 3]);
        // Of files of about the same age, the one with more garbage.
        let v = version(&[(10, 1000, 700), (11, 1000, 400)]);
        let p = pick(&v, &opts(0.2, 10_000), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![11, 10]);
    }

    /// Four files of ratios 0.7, 0.6, 0.65, 0.8 and ages 4, 3, 2, 1:
    /// picked in the order 1, 2, 3, 4; live 300, 400, 350, 200.
    fn four_partly_live_files() -> Version {
        version(&[
            (1, 1000, 300),
            (2, 1000, 400),
            (3, 1000, 350),
            (4, 1000, 200),
        ])
    }

    #[test]
    fn small_files_are_packed_up_to_one_value_file() {
        let v = four_partly_live_files();
        let p = pick(&v, &opts(0.5, 600), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![1, 4]);
        assert_eq!(p.live_bytes, 500);
        let p = pick(&v, &opts(0.5, 900), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![1, 2, 4]);
        assert_eq!((p.live_bytes, p.garbage_bytes), (900, 2100));
        // A first file larger than the target is still collected alone.
        let p = pick(&v, &opts(0.5, 100), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![1]);
    }

    #[test]
    fn a_job_copies_no_more_than_the_room_it_is_given() {
        let v = four_partly_live_files();
        // Room for 250 live bytes: the best file that fits, alone.
        let room = |bytes| GcPickerOptions {
            max_live_bytes: bytes,
            ..opts(0.5, 10_000)
        };
        let p = pick(&v, &room(250), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![4]);
        // Packing stops at the room too.
        let p = pick(&v, &room(700), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![1, 2]);
        assert!(pick(&v, &room(199), &HashSet::new()).is_none());
    }

    /// Found by review and confirmed through the version_edit fuzz target:
    /// packed files whose garbage, as the manifest states their sizes, sums
    /// past `u64::MAX` made the plan's garbage overflow.
    #[test]
    fn packed_garbage_saturates() {
        let huge = u64::MAX - 100;
        let v = version(&[(1, huge, 10), (2, huge, 10)]);
        let p = pick(&v, &opts(0.2, u64::MAX), &HashSet::new()).unwrap();
        assert_eq!(numbers(&p), vec![1, 2]);
        assert_eq!((p.live_bytes, p.garbage_bytes), (20, u64::MAX));
    }

    #[test]
    fn busy_files_are_never_picked() {
        let v = version(&[(1, 1000, 100), (2, 1000, 500)]);
        let busy: HashSet<FileNumber> = [FileNumber(1)].into();
        let p = pick(&v, &opts(0.2, 10_000), &busy).unwrap();
        assert_eq!(numbers(&p), vec![2]);
        let busy: HashSet<FileNumber> = [FileNumber(1), FileNumber(2)].into();
        assert!(pick(&v, &opts(0.2, 10_000), &busy).is_none());
    }
}
