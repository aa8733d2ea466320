//! Leveled compaction picking: a pure function of a Version, options and
//! the set of running compactions, returning a plan the job executes.
//!
//! Level targets follow RocksDB. Without dynamic level bytes, level n ≥ 1
//! may hold `base × multiplier^(n−1)`. With dynamic level bytes (RocksDB's
//! `CalculateBaseBytes`, without its L0-backlog adjustment): let `max` be the
//! largest level size among L1+ and `first` the first non-empty level ≥ 1.
//! If L1+ is empty, L0 compacts straight into the last level. Otherwise
//! `cur = max / multiplier^(last − first)` is what `first` should hold if the
//! last level held `max`. If `cur ≤ base / multiplier`, the base level is
//! `first` with size `base / multiplier + 1`; else the base level moves up
//! from `first`, dividing `cur` by the multiplier each step, while `cur >
//! base` and the level is above L1. Level targets are then the base size
//! times the multiplier per level below the base, but never below `base`.
//! Levels above the base level are empty and never compacted; L0 compacts
//! into the base level.
//!
//! Every size here is *compensated*: a table's bytes plus the bytes of the
//! separated values it references, so that the key tree keeps the shape it
//! would have with inline values, and the values of shadowed entries
//! (hidden garbage) wait no longer for compaction than inline values would.

use std::collections::HashSet;
use std::sync::Arc;

use crate::base::limits::NUM_LEVELS;
use crate::base::FileNumber;
use crate::manifest::{FileMeta, Version, VersionEdit};
use crate::options::Options;

#[derive(Debug, Clone)]
pub(crate) struct PickerOptions {
    pub level0_file_num_compaction_trigger: usize,
    pub max_bytes_for_level_base: u64,
    pub max_bytes_for_level_multiplier: f64,
    pub dynamic: bool,
    pub target_file_size_base: u64,
    /// Count the value bytes a table references in its size.
    pub compensated: bool,
}

impl PickerOptions {
    /// The size of `f` the picker goes by.
    pub(crate) fn file_size(&self, f: &FileMeta) -> u64 {
        if self.compensated {
            f.compensated_size()
        } else {
            f.size
        }
    }

    fn level_size(&self, v: &Version, level: usize) -> u64 {
        if self.compensated {
            v.level_compensated_bytes(level)
        } else {
            v.level_bytes(level)
        }
    }
}

impl From<&Options> for PickerOptions {
    fn from(o: &Options) -> Self {
        PickerOptions {
            compensated: o.compensated_size,
            level0_file_num_compaction_trigger: o.level0_file_num_compaction_trigger,
            max_bytes_for_level_base: o.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: o.max_bytes_for_level_multiplier,
            dynamic: o.level_compaction_dynamic_level_bytes,
            target_file_size_base: o.target_file_size_base,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LevelTargets {
    /// The level L0 compacts into.
    pub base_level: usize,
    /// Target bytes per level; `u64::MAX` for L0 and levels above the base
    /// level (never compacted by size).
    pub bytes: [u64; NUM_LEVELS],
}

pub(crate) fn level_targets(v: &Version, opts: &PickerOptions) -> LevelTargets {
    let base = opts.max_bytes_for_level_base as f64;
    let mult = opts.max_bytes_for_level_multiplier;
    let last = NUM_LEVELS - 1;
    let mut bytes = [u64::MAX; NUM_LEVELS];
    if !opts.dynamic {
        let mut t = base;
        for b in bytes.iter_mut().skip(1) {
            *b = t as u64; // saturates
            t *= mult;
        }
        return LevelTargets {
            base_level: 1,
            bytes,
        };
    }
    let Some(first) = (1..NUM_LEVELS).find(|&l| v.num_files(l) > 0) else {
        return LevelTargets {
            base_level: last,
            bytes,
        };
    };
    let max_size = (1..NUM_LEVELS)
        .map(|l| opts.level_size(v, l))
        .max()
        .unwrap_or(0) as f64;
    let mut cur = max_size / mult.powi((last - first) as i32);
    let (base_level, base_size) = if cur <= base / mult {
        (first, base / mult + 1.0)
    } else {
        let mut level = first;
        while level > 1 && cur > base {
            level -= 1;
            cur /= mult;
        }
        (level, cur.min(base).max(1.0))
    };
    let mut size = base_size;
    for (level, b) in bytes.iter_mut().enumerate().skip(base_level) {
        if level > base_level {
            size *= mult;
        }
        *b = size.max(base) as u64;
    }
    LevelTargets { base_level, bytes }
}

/// Compaction score per level (≥ 1 means it needs compaction), counting
/// every file; the last level is never scored.
pub(crate) fn scores(v: &Version, opts: &PickerOptions) -> [f64; NUM_LEVELS] {
    scores_excluding(v, opts, &level_targets(v, opts), &Busy::default())
}

fn scores_excluding(
    v: &Version,
    opts: &PickerOptions,
    targets: &LevelTargets,
    busy: &Busy,
) -> [f64; NUM_LEVELS] {
    let mut s = [0.0; NUM_LEVELS];
    let idle = |level: usize| {
        v.files(level)
            .iter()
            .filter(|f| !busy.files.contains(&f.number))
    };
    s[0] = idle(0).count() as f64 / opts.level0_file_num_compaction_trigger.max(1) as f64;
    for (level, score) in s.iter_mut().enumerate().take(NUM_LEVELS - 1).skip(1) {
        let target = targets.bytes[level];
        if target != u64::MAX && level >= targets.base_level {
            // Saturating: sizes come from the manifest.
            let bytes = idle(level).fold(0u64, |sum, f| sum.saturating_add(opts.file_size(f)));
            *score = bytes as f64 / target.max(1) as f64;
        }
    }
    s
}

/// One compaction to run: `inputs` of `level` merged with the overlapping
/// `output_level_inputs` into new files of `output_level`.
#[derive(Debug, Clone)]
pub(crate) struct CompactionPlan {
    pub level: usize,
    pub output_level: usize,
    pub inputs: Vec<Arc<FileMeta>>,
    pub output_level_inputs: Vec<Arc<FileMeta>>,
    /// One input, nothing to merge with: move the file, rewrite nothing.
    pub trivial_move: bool,
    /// No level below `output_level` has data in the plan's key range, so
    /// tombstones that no snapshot needs can be dropped.
    pub bottommost: bool,
    pub max_output_file_size: u64,
    /// A range merge ([`pick_range_merge`]): every separated value the
    /// inputs reference is rewritten, in key order, into new value files.
    pub range_merge: bool,
}

impl CompactionPlan {
    pub(crate) fn input_numbers(&self) -> Vec<FileNumber> {
        self.all_inputs().map(|f| f.number).collect()
    }

    fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMeta>> {
        self.inputs.iter().chain(&self.output_level_inputs)
    }

    /// The inclusive user-key range the plan reads and writes.
    pub(crate) fn user_range(&self) -> (Vec<u8>, Vec<u8>) {
        let (lo, hi) = user_range(self.all_inputs()).unwrap_or_default();
        (lo.to_vec(), hi.to_vec())
    }

    pub(crate) fn edit_for_trivial_move(&self) -> VersionEdit {
        debug_assert!(self.trivial_move);
        let mut e = VersionEdit::default();
        for f in &self.inputs {
            e.delete_file(self.level, f.number);
            e.add_file(self.output_level, (**f).clone());
        }
        e
    }
}

/// Running compactions: their input files, and the key range each writes
/// into its output level. A new plan may not share a file with them nor
/// write an overlapping range into the same level; disjoint ranges run in
/// parallel.
#[derive(Debug, Default, Clone)]
pub(crate) struct Busy {
    files: HashSet<FileNumber>,
    outputs: Vec<(usize, Vec<u8>, Vec<u8>)>,
}

impl Busy {
    pub(crate) fn add(&mut self, plan: &CompactionPlan) {
        self.files.extend(plan.input_numbers());
        let (lo, hi) = plan.user_range();
        self.outputs.push((plan.output_level, lo, hi));
    }

    #[cfg(test)]
    pub(crate) fn remove(&mut self, plan: &CompactionPlan) {
        for n in plan.input_numbers() {
            self.files.remove(&n);
        }
        let (lo, hi) = plan.user_range();
        let entry = (plan.output_level, lo, hi);
        if let Some(i) = self.outputs.iter().position(|o| *o == entry) {
            self.outputs.swap_remove(i);
        }
    }

    /// Adds everything `other` holds busy.
    pub(crate) fn extend(&mut self, other: &Busy) {
        self.files.extend(&other.files);
        self.outputs.extend(other.outputs.iter().cloned());
    }

    pub(crate) fn contains_file(&self, n: FileNumber) -> bool {
        self.files.contains(&n)
    }

    fn conflicts(&self, plan: &CompactionPlan) -> bool {
        if plan.all_inputs().any(|f| self.files.contains(&f.number)) {
            return true;
        }
        let (lo, hi) = plan.user_range();
        self.outputs
            .iter()
            .any(|(level, l, h)| *level == plan.output_level && *l <= hi && lo <= *h)
    }
}

/// The most urgent compaction that does not conflict with `busy`.
pub(crate) fn pick(v: &Version, opts: &PickerOptions, busy: &Busy) -> Option<CompactionPlan> {
    let targets = level_targets(v, opts);
    let scores = scores_excluding(v, opts, &targets, busy);
    let mut candidates: Vec<(f64, usize)> = scores
        .iter()
        .enumerate()
        .filter(|(_, &s)| s >= 1.0)
        .map(|(l, &s)| (s, l))
        .collect();
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    candidates.into_iter().find_map(|(_, level)| {
        if level == 0 {
            pick_l0(v, opts, &targets, busy)
        } else {
            pick_level(v, opts, level, busy)
        }
    })
}

/// L0 into the base level: the transitive overlap closure of one L0 file
/// (oldest first), so no L0 file left behind overlaps what moves down.
fn pick_l0(
    v: &Version,
    opts: &PickerOptions,
    targets: &LevelTargets,
    busy: &Busy,
) -> Option<CompactionPlan> {
    let l0 = v.files(0);
    let mut tried = vec![false; l0.len()];
    for seed in (0..l0.len()).rev() {
        if tried[seed] {
            continue;
        }
        let mut member = vec![false; l0.len()];
        member[seed] = true;
        let inputs = l0_closure(l0, member);
        for f in &inputs {
            if let Some(i) = l0.iter().position(|g| g.number == f.number) {
                tried[i] = true;
            }
        }
        let plan = plan_into(v, opts, 0, targets.base_level, inputs);
        if let Some(p) = plan.filter(|p| !busy.conflicts(p)) {
            return Some(p);
        }
    }
    None
}

fn l0_closure(l0: &[Arc<FileMeta>], mut member: Vec<bool>) -> Vec<Arc<FileMeta>> {
    loop {
        let chosen = l0.iter().zip(&member).filter(|(_, &m)| m).map(|(f, _)| f);
        let Some((lo, hi)) = user_range(chosen) else {
            return Vec::new();
        };
        let (lo, hi) = (lo.to_vec(), hi.to_vec());
        let mut grew = false;
        for (f, m) in l0.iter().zip(member.iter_mut()) {
            if !*m && f.overlaps(Some(&lo), Some(&hi)) {
                *m = true;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    l0.iter()
        .zip(&member)
        .filter(|(_, &m)| m)
        .map(|(f, _)| f.clone())
        .collect()
}

/// Ln into Ln+1: the file whose overlap with Ln+1 is smallest relative to
/// its own size (RocksDB's kMinOverlappingRatio), the cheapest write per
/// byte moved down.
fn pick_level(
    v: &Version,
    opts: &PickerOptions,
    level: usize,
    busy: &Busy,
) -> Option<CompactionPlan> {
    let files = v.files(level);
    let mut order: Vec<(u128, FileNumber, usize)> = files
        .iter()
        .enumerate()
        .filter(|(_, f)| !busy.contains_file(f.number))
        .map(|(i, f)| {
            let overlap = v
                .overlapping_files(level + 1, Some(f.smallest_user()), Some(f.largest_user()))
                .iter()
                .fold(0u64, |sum, g| sum.saturating_add(opts.file_size(g)));
            let ratio = u128::from(overlap) * 1024 / u128::from(opts.file_size(f).max(1));
            (ratio, f.number, i)
        })
        .collect();
    order.sort();
    order.into_iter().find_map(|(_, _, i)| {
        let (lo, hi) = clean_cut(files, i, i + 1);
        let inputs = files.get(lo..hi)?.to_vec();
        plan_into(v, opts, level, level + 1, inputs).filter(|p| !busy.conflicts(p))
    })
}

/// A manual compaction of `level`'s files in `[begin, end]` (inclusive,
/// `None` unbounded). The last level compacts into itself. No size limit:
/// the caller splits large ranges.
pub(crate) fn pick_manual(
    v: &Version,
    opts: &PickerOptions,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    busy: &Busy,
) -> Option<CompactionPlan> {
    let files = v.files(level);
    let inputs = if level == 0 {
        let member = files.iter().map(|f| f.overlaps(begin, end)).collect();
        l0_closure(files, member)
    } else {
        let lo = files.partition_point(|f| begin.is_some_and(|b| f.largest_user() < b));
        let hi = files.partition_point(|f| end.is_none_or(|e| f.smallest_user() <= e));
        if lo >= hi {
            return None;
        }
        let (lo, hi) = clean_cut(files, lo, hi);
        files.get(lo..hi)?.to_vec()
    };
    let output_level = match level {
        0 => level_targets(v, opts).base_level,
        l if l == NUM_LEVELS - 1 => l,
        l => l + 1,
    };
    plan_into(v, opts, level, output_level, inputs).filter(|p| !busy.conflicts(p))
}

/// The deepest level below L0 holding files.
pub(crate) fn last_level(v: &Version) -> Option<usize> {
    (1..NUM_LEVELS).rev().find(|&l| v.num_files(l) > 0)
}

/// A range merge leaves a table alone while its largest run (the logical
/// value file it references the most bytes of) holds more than this share
/// of the value bytes it references: 1/2. So a merge rewrites at most
/// twice the bytes that arrived scattered since the table's last merge
/// (its other runs), and a trickle of writes, each flush a run of its own,
/// never makes merges rewrite much per byte written.
const MERGE_MAX_LARGEST_RUN_NUMERATOR: u64 = 1;
const MERGE_MAX_LARGEST_RUN_DENOMINATOR: u64 = 2;

/// Whether `f` is scattered enough for a range merge: more than
/// `max_sorted_runs` runs, the largest holding at most half its bytes.
fn scattered(f: &FileMeta, max_sorted_runs: usize) -> bool {
    if f.value_refs.len() <= max_sorted_runs {
        return false;
    }
    let total: u128 = f.value_refs.iter().map(|r| u128::from(r.bytes)).sum();
    let largest = f.value_refs.iter().map(|r| r.bytes).max().unwrap_or(0);
    u128::from(largest) * u128::from(MERGE_MAX_LARGEST_RUN_DENOMINATOR)
        <= total * u128::from(MERGE_MAX_LARGEST_RUN_NUMERATOR)
}

/// A range merge, the least urgent work there is: the last-level file
/// whose entries reference the most logical value files, if that is more
/// than `max_sorted_runs` (at least 1) and no one of them holds more than
/// half of its value bytes, compacted into its own level with its values
/// rewritten in key order. A merged file references one new logical file,
/// so the pick converges while no write arrives. A file whose entries all
/// expire by `leave_expiring_until` is left alone: its values are garbage
/// soon, and copying them would only delay that.
pub(crate) fn pick_range_merge(
    v: &Version,
    opts: &PickerOptions,
    max_sorted_runs: usize,
    leave_expiring_until: u64,
    busy: &Busy,
) -> Option<CompactionPlan> {
    debug_assert!(max_sorted_runs >= 1);
    let last = last_level(v)?;
    let files = v.files(last);
    let mut order: Vec<(usize, FileNumber, usize)> = files
        .iter()
        .enumerate()
        .filter(|(_, f)| {
            scattered(f, max_sorted_runs)
                && !busy.contains_file(f.number)
                && f.all_expired_by()
                    .is_none_or(|at| at > leave_expiring_until)
        })
        .map(|(i, f)| (f.value_refs.len(), f.number, i))
        .collect();
    // Most runs first; of equals, the oldest file.
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    order.into_iter().find_map(|(_, _, i)| {
        let (lo, hi) = clean_cut(files, i, i + 1);
        let inputs = files.get(lo..hi)?.to_vec();
        let mut plan = plan_into(v, opts, last, last, inputs)?;
        plan.range_merge = true;
        (!busy.conflicts(&plan)).then_some(plan)
    })
}

/// Whether a table holds enough expired values, at `now`, for a compaction
/// of it alone to be worth its cost (rewriting the table): expired bytes
/// at least the table's own, so that it frees more than it rewrites (a
/// table of separated values, whose entries are small beside the values
/// they name, qualifies at its first expired eighth); or half the bytes of
/// its values with an expiry and a quarter of the table's bytes. A table
/// with a few expiring entries among many that do not is left to the
/// compactions that size picks. Waiting for half, a TTL workload kept up
/// to half a TTL of expired values on disk (docs/benchmarks.md, issue 24).
pub(crate) fn expired_enough(f: &FileMeta, now: u64) -> bool {
    f.expiry.is_some_and(|x| {
        let expired = x.expired_bytes(now);
        expired > 0
            && (expired >= f.size
                || (expired.saturating_mul(2) >= x.value_bytes
                    && expired.saturating_mul(4) >= f.size))
    })
}

/// The compaction that drops the most expired values, from a table below
/// L0 that holds enough of them (`expired_enough`): into the next level, or
/// in the last level into itself (RocksDB's TTL compaction, driven by the
/// expiries the tables record instead of their age). Expired entries then
/// go, and their values turn to garbage without being read.
pub(crate) fn pick_expired(
    v: &Version,
    opts: &PickerOptions,
    now: u64,
    busy: &Busy,
) -> Option<CompactionPlan> {
    let last = last_level(v)?;
    let mut order: Vec<(u64, usize, usize)> = Vec::new();
    for level in 1..=last {
        for (i, f) in v.files(level).iter().enumerate() {
            if !busy.contains_file(f.number) && expired_enough(f, now) {
                let expired = f.expiry.map_or(0, |x| x.expired_bytes(now));
                order.push((expired, level, i));
            }
        }
    }
    // Most expired bytes first.
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    order.into_iter().find_map(|(_, level, i)| {
        let files = v.files(level);
        let (lo, hi) = clean_cut(files, i, i + 1);
        let output_level = if level == last { last } else { level + 1 };
        let mut plan = plan_into(v, opts, level, output_level, files.get(lo..hi)?.to_vec())?;
        // A move would carry the expired entries along.
        plan.trivial_move = false;
        (!busy.conflicts(&plan)).then_some(plan)
    })
}

/// When a table's expired values may next make `pick_expired` choose it:
/// the earliest expiry still to come, or, for a table whose expiries have
/// begun, `recheck` from `now`. None when no table has an expiry.
pub(crate) fn next_expiry_check(v: &Version, now: u64, recheck: u64) -> Option<u64> {
    (1..NUM_LEVELS)
        .flat_map(|l| v.files(l))
        .filter_map(|f| {
            let x = f.expiry?;
            let latest = x.latest();
            if now < x.earliest() {
                Some(x.earliest())
            } else {
                (!expired_enough(f, now) && now < latest).then(|| now.saturating_add(recheck))
            }
        })
        .min()
}

/// A last-level table in `[begin, end]` that `wanted` names, compacted
/// into its level: what a manual compaction adds after moving everything
/// down (for tables holding expired entries, or, with a compaction filter,
/// every one, as RocksDB's `kIfHaveCompactionFilter`), since it does not
/// rewrite the last level otherwise.
pub(crate) fn pick_last_level_rewrite(
    v: &Version,
    opts: &PickerOptions,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    wanted: &dyn Fn(&FileMeta) -> bool,
    busy: &Busy,
) -> Option<CompactionPlan> {
    let last = last_level(v)?;
    let files = v.files(last);
    let i = files
        .iter()
        .position(|f| f.overlaps(begin, end) && !busy.contains_file(f.number) && wanted(f))?;
    let (lo, hi) = clean_cut(files, i, i + 1);
    let plan = plan_into(v, opts, last, last, files.get(lo..hi)?.to_vec())?;
    (!busy.conflicts(&plan)).then_some(plan)
}

/// What a push-down is for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum PushDownFor {
    /// Gathering recent writes in the last level before range merges.
    RangeMerge,
    /// Exposing hidden garbage while space is short.
    Space,
}

impl PushDownFor {
    /// Value bytes the moved files must reference per sstable byte the
    /// push-down rewrites. For space, two: it reads and writes each byte
    /// it rewrites, and exposes at most the moved values as garbage. At
    /// one, the 2 GiB zipfian Mixed-8K overwrite under a 1.5x budget
    /// (small values inline, so a last level of 47 MB) pushed each L0
    /// table down alone, for 1.15 GB of compaction writes; at two, 0.83
    /// GB, and 42,201 ops/s against 38,995 (medians of three, interleaved;
    /// docs/benchmarks.md, issue 28). Uniform overwrites, whose tables
    /// hold little but handles, move as often as before.
    fn values_per_byte(self) -> u64 {
        match self {
            PushDownFor::RangeMerge => 1,
            PushDownFor::Space => 2,
        }
    }
}

/// Before range merges, while writes pause: a compaction moving the files
/// of a level above the last one level down (L0's, into the base level),
/// so that recent writes reach the last level, where merges gather their
/// values. Range merges leave upper levels alone, and a scan reads each
/// of their values from its own flush's file. Also while space is short,
/// to expose the garbage recent writes hide. Only where the value bytes
/// the moved files reference are at least some times the sstable bytes
/// the compaction rewrites (`PushDownFor::values_per_byte`): with values
/// separated the tree is small, and a trickle of writes does not rewrite
/// the last level's tables for a few values. Deepest level first, so a
/// key range empties downwards, and L0 straight into the last level once
/// the levels between hold none of its keys.
pub(crate) fn pick_push_down(
    v: &Version,
    opts: &PickerOptions,
    busy: &Busy,
    purpose: PushDownFor,
) -> Option<CompactionPlan> {
    let last = last_level(v).unwrap_or(0);
    let worth = |p: &CompactionPlan| {
        let values: u64 = p.inputs.iter().map(|f| f.value_bytes()).sum();
        let rewritten: u64 = p.all_inputs().map(|f| f.size).sum();
        values >= purpose.values_per_byte().saturating_mul(rewritten) && !busy.conflicts(p)
    };
    for level in (1..last).rev() {
        let files = v.files(level);
        let found = (0..files.len()).find_map(|i| {
            let (lo, hi) = clean_cut(files, i, i + 1);
            plan_into(v, opts, level, level + 1, files.get(lo..hi)?.to_vec()).filter(worth)
        });
        if found.is_some() {
            return found;
        }
    }
    let l0 = v.files(0);
    if l0.is_empty() {
        return None;
    }
    let all = l0_closure(l0, vec![true; l0.len()]);
    // Straight into the last level where no level between holds any of
    // L0's keys: one compaction, not one per level, and every entry it
    // moves meets the version it shadows.
    let (lo, hi) = user_range(all.iter())?;
    let base = level_targets(v, opts).base_level;
    let output = if last > base
        && (base..last).all(|l| v.overlapping_files(l, Some(lo), Some(hi)).is_empty())
    {
        last
    } else {
        base
    };
    plan_into(v, opts, 0, output, all).filter(worth)
}

/// Completes a plan: the output-level files overlapping the inputs (cut
/// cleanly), trivial-move and bottommost flags.
fn plan_into(
    v: &Version,
    opts: &PickerOptions,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<FileMeta>>,
) -> Option<CompactionPlan> {
    let (lo, hi) = user_range(inputs.iter())?;
    let output_level_inputs = if output_level == level {
        Vec::new()
    } else {
        let out = v.files(output_level);
        let start = out.partition_point(|f| f.largest_user() < lo);
        let end = out.partition_point(|f| f.smallest_user() <= hi);
        if start < end {
            let (s, e) = clean_cut(out, start, end);
            out.get(s..e)?.to_vec()
        } else {
            Vec::new()
        }
    };
    let trivial_move = inputs.len() == 1 && output_level_inputs.is_empty() && output_level != level;
    let mut plan = CompactionPlan {
        level,
        output_level,
        inputs,
        output_level_inputs,
        trivial_move,
        bottommost: false,
        max_output_file_size: opts.target_file_size_base,
        range_merge: false,
    };
    let (lo, hi) = plan.user_range();
    plan.bottommost = (output_level + 1..NUM_LEVELS)
        .all(|l| v.overlapping_files(l, Some(&lo), Some(&hi)).is_empty());
    Some(plan)
}

/// Widens `files[lo..hi]` (a sorted level ≥ 1) until no user key straddles
/// its boundary: entries of one user key split across adjacent files must
/// be compacted together, or the older ones could surface above the newer.
fn clean_cut(files: &[Arc<FileMeta>], mut lo: usize, mut hi: usize) -> (usize, usize) {
    while lo > 0 && files[lo - 1].largest_user() == files[lo].smallest_user() {
        lo -= 1;
    }
    while hi < files.len() && files[hi - 1].largest_user() == files[hi].smallest_user() {
        hi += 1;
    }
    (lo, hi)
}

fn user_range<'a>(files: impl Iterator<Item = &'a Arc<FileMeta>>) -> Option<(&'a [u8], &'a [u8])> {
    files.fold(None, |acc, f| match acc {
        None => Some((f.smallest_user(), f.largest_user())),
        Some((lo, hi)) => Some((lo.min(f.smallest_user()), hi.max(f.largest_user()))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::testutil::meta;

    #[test]
    fn a_table_is_worth_compacting_for_expiry_when_it_frees_what_it_rewrites() {
        use crate::manifest::TableExpiry;
        // Eight eighths of expiring values, the k-th expired at k x 1000.
        let table = |size, value_bytes| {
            let mut f = meta(7, "a", "z", 1, size);
            f.expiry = Some(TableExpiry {
                entries: 80,
                value_bytes,
                points: [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000],
            });
            f
        };
        // Separated 8 KiB values behind a 40 KiB table: an eighth expired
        // (80 KiB) frees more than the compaction rewrites.
        let separated = table(40 << 10, 640 << 10);
        assert!(!expired_enough(&separated, 999));
        assert!(expired_enough(&separated, 1000));
        // Inline values: the table is its values; an eighth expired is
        // not worth a rewrite, half is.
        let inline = table(700 << 10, 640 << 10);
        assert!(!expired_enough(&inline, 3999));
        assert!(expired_enough(&inline, 4000));
        // Half of a few expiring values in a large table: too little.
        let diluted = table(4 << 20, 640 << 10);
        assert!(!expired_enough(&diluted, 8000));
    }

    /// Builds a Version from lines `level number lo hi size` (seq = number,
    /// so higher numbers are newer in L0).
    fn version(spec: &str) -> Version {
        let files = spec
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let level: usize = f[0].trim_start_matches('L').parse().unwrap();
                let n: u64 = f[1].parse().unwrap();
                (level, meta(n, f[2], f[3], n * 10, f[4].parse().unwrap()))
            })
            .collect();
        Version::from_files(files).unwrap()
    }

    fn opts(dynamic: bool) -> PickerOptions {
        PickerOptions {
            level0_file_num_compaction_trigger: 4,
            max_bytes_for_level_base: 100,
            max_bytes_for_level_multiplier: 10.0,
            dynamic,
            target_file_size_base: 32,
            compensated: true,
        }
    }

    fn nums(files: &[Arc<FileMeta>]) -> Vec<u64> {
        files.iter().map(|f| f.number.0).collect()
    }

    /// Found through the version_edit fuzz target: L1 files whose sizes,
    /// as a manifest states them, sum past `u64::MAX` made the level's
    /// score overflow.
    #[test]
    fn level_scores_saturate() {
        let m = u64::MAX;
        let v = version(&format!("L1 1 a b {m}\nL1 2 c d {m}\nL2 3 a d 10"));
        for dynamic in [true, false] {
            let s = scores(&v, &opts(dynamic));
            assert!(s[1] >= 1.0, "{s:?}");
            assert!(pick(&v, &opts(dynamic), &Busy::default()).is_some());
        }
    }

    /// As `level_scores_saturate`, for the bytes a file overlaps in the
    /// next level (found by review, confirmed through the version_edit
    /// fuzz target).
    #[test]
    fn overlap_sizes_saturate() {
        let m = u64::MAX;
        let v = version(&format!("L1 1 a d 500\nL2 2 a b {m}\nL2 3 c d {m}"));
        // Busy L2 files leave L1 the only level to compact, into them.
        let mut busy = Busy::default();
        busy.files.extend([FileNumber(2), FileNumber(3)]);
        assert!(pick(&v, &opts(false), &busy).is_none());
        assert!(scores(&v, &opts(false))[1] >= 1.0);
    }

    #[test]
    fn static_level_targets() {
        let t = level_targets(&version("L1 1 a b 5"), &opts(false));
        assert_eq!(t.base_level, 1);
        assert_eq!(
            &t.bytes[1..],
            &[100, 1000, 10_000, 100_000, 1_000_000, 10_000_000]
        );
    }

    #[test]
    fn dynamic_level_targets_table() {
        let m = u64::MAX;
        // (version, base level, targets)
        let cases: &[(&str, usize, [u64; NUM_LEVELS])] = &[
            ("", 6, [m; NUM_LEVELS]),
            ("L0 1 a b 500", 6, [m; NUM_LEVELS]),
            // Last level small: base level is the first non-empty one.
            ("L6 1 a b 50", 6, [m, m, m, m, m, m, 100]),
            ("L6 1 a b 10000", 4, [m, m, m, m, 100, 1000, 10_000]),
            ("L6 1 a b 20000", 3, [m, m, m, 100, 200, 2000, 20_000]),
            (
                "L5 2 a b 30\nL6 1 a b 1000000",
                2,
                [m, m, 100, 1000, 10_000, 100_000, 1_000_000],
            ),
            (
                "L6 1 a b 1000000000",
                1,
                [m, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000],
            ),
        ];
        for (spec, base, bytes) in cases {
            let t = level_targets(&version(spec), &opts(true));
            assert_eq!((t.base_level, t.bytes), (*base, *bytes), "{spec:?}");
        }
    }

    /// Range merges pick the last-level file referencing the most value
    /// files above the limit, cut cleanly, into its own level; never an
    /// upper level's file, nor one that is busy.
    #[test]
    fn range_merge_picks_the_widest_last_level_file() {
        use crate::manifest::{HostedLogical, TableValueRefs, ValueFileMeta, VersionEdit};
        let with_runs = |n: u64, lo: &str, hi: &str, runs: u64| {
            let mut m = meta(n, lo, hi, n * 10, 10);
            m.value_refs = (0..runs)
                .map(|r| TableValueRefs {
                    logical_file: FileNumber(100 + r),
                    count: 1,
                    bytes: 5,
                })
                .collect();
            m
        };
        let mut e = VersionEdit::default();
        for r in 0..10 {
            e.add_value_file(ValueFileMeta {
                number: FileNumber(100 + r),
                size: 1 << 20,
                hosted: vec![HostedLogical {
                    logical_file: FileNumber(100 + r),
                    records: 10,
                    bytes: 1 << 19,
                }],
                ..Default::default()
            });
        }
        e.add_file(5, with_runs(1, "a", "z", 10));
        e.add_file(6, with_runs(2, "a", "c", 3));
        // Newer first within the user key "f" both hold.
        e.add_file(6, with_runs(4, "d", "f", 6));
        e.add_file(6, with_runs(3, "f", "h", 2));
        // File 5's one value entry expires at 9,000.
        let mut expiring = with_runs(5, "i", "k", 5);
        expiring.expiry = Some(crate::manifest::TableExpiry {
            entries: 1,
            value_bytes: 25,
            points: [9_000; crate::manifest::file_meta::EXPIRY_POINTS],
        });
        e.add_file(6, expiring);
        let v = Version::default().apply(e).unwrap();
        let o = opts(true);
        let p = pick_range_merge(&v, &o, 4, 0, &Busy::default()).unwrap();
        assert!(p.range_merge && !p.trivial_move && p.bottommost);
        assert_eq!((p.level, p.output_level), (6, 6));
        // File 4 shares user key "f" with file 3: both go.
        assert_eq!(nums(&p.inputs), vec![4, 3]);
        assert!(p.output_level_inputs.is_empty());
        // With those busy, the next widest; above every count, nothing.
        let mut busy = Busy::default();
        busy.add(&p);
        let next = pick_range_merge(&v, &o, 4, 0, &busy).unwrap();
        assert_eq!(nums(&next.inputs), vec![5]);
        // Unless its values are left to expire.
        assert!(pick_range_merge(&v, &o, 4, 8_999, &busy).is_some());
        assert!(pick_range_merge(&v, &o, 4, 9_000, &busy).is_none());
        assert!(pick_range_merge(&v, &o, 6, 0, &Busy::default()).is_none());
        // Normal picks never are range merges.
        assert!(pick(&v, &o, &Busy::default()).is_none_or(|p| !p.range_merge));

        // A table whose largest run holds more than half of its value
        // bytes is left alone, however many runs it has.
        let mut dominated = with_runs(9, "x", "z", 10);
        dominated.value_refs[0].bytes = 46;
        assert!(!scattered(&dominated, 4));
        dominated.value_refs[0].bytes = 45;
        assert!(scattered(&dominated, 4));
    }

    /// Push-downs move upper levels' files down, deepest level first, L0
    /// into the base level, only where the moved files' value bytes are
    /// at least the sstable bytes rewritten (twice them for space).
    #[test]
    fn push_down_moves_value_heavy_files_down() {
        use crate::manifest::{HostedLogical, TableValueRefs, ValueFileMeta, VersionEdit};
        let with_values = |n: u64, lo: &str, hi: &str, size: u64, values: u64| {
            let mut m = meta(n, lo, hi, n * 10, size);
            m.value_refs = vec![TableValueRefs {
                logical_file: FileNumber(100),
                count: 1,
                bytes: values,
            }];
            m
        };
        let mut e = VersionEdit::default();
        e.add_value_file(ValueFileMeta {
            number: FileNumber(100),
            size: 1 << 30,
            hosted: vec![HostedLogical {
                logical_file: FileNumber(100),
                records: 10,
                bytes: 1 << 29,
            }],
            ..Default::default()
        });
        e.add_file(6, with_values(1, "a", "m", 10, 9_000));
        e.add_file(6, with_values(2, "n", "z", 10, 9_000));
        // L5: one file with few values for the bytes it would rewrite, one
        // worth moving; L0: a file above them.
        e.add_file(5, with_values(3, "b", "c", 10, 15));
        e.add_file(5, with_values(4, "o", "p", 10, 500));
        e.add_file(0, with_values(5, "c", "q", 10, 500));
        let v = Version::default().apply(e).unwrap();
        let o = opts(true);
        let p = pick_push_down(&v, &o, &Busy::default(), PushDownFor::RangeMerge).unwrap();
        assert!(!p.range_merge);
        assert_eq!((p.level, p.output_level), (5, 6));
        assert_eq!(nums(&p.inputs), vec![4]);
        assert_eq!(nums(&p.output_level_inputs), vec![2]);
        // With L5's worthwhile file busy, L0 goes into the base level:
        // L5, below it, holds some of its keys.
        let mut busy = Busy::default();
        busy.add(&p);
        let p0 = pick_push_down(&v, &o, &busy, PushDownFor::RangeMerge).unwrap();
        assert_eq!(p0.level, 0);
        assert_eq!(p0.output_level, level_targets(&v, &o).base_level);
        assert!(p0.output_level < 6);
        // Once no level between holds any, straight into the last level.
        let mut e = VersionEdit::default();
        e.delete_file(5, FileNumber(3));
        e.delete_file(5, FileNumber(4));
        e.add_file(5, with_values(7, "r", "s", 10, 15));
        let v = v.apply(e).unwrap();
        let p0 = pick_push_down(&v, &o, &Busy::default(), PushDownFor::RangeMerge).unwrap();
        assert_eq!((p0.level, p0.output_level), (0, 6));
        assert_eq!(nums(&p0.inputs), vec![5]);
        assert_eq!(nums(&p0.output_level_inputs), vec![1, 2]);
        assert!(p0.bottommost);
        // Nothing above the last level: nothing to push.
        assert!(pick_push_down(
            &version("L6 1 a m 10"),
            &o,
            &Busy::default(),
            PushDownFor::RangeMerge
        )
        .is_none());
        // 30 value bytes for 20 rewritten (its own 10 and file 1's): before
        // a range merge, worth it; for space, not twice, so it stays.
        let mut e = VersionEdit::default();
        e.delete_file(5, FileNumber(7));
        e.delete_file(0, FileNumber(5));
        e.add_file(5, with_values(8, "b", "c", 10, 30));
        let v = v.apply(e).unwrap();
        let busy = Busy::default();
        let p = pick_push_down(&v, &o, &busy, PushDownFor::RangeMerge).unwrap();
        assert_eq!(nums(&p.inputs), vec![8]);
        assert!(pick_push_down(&v, &o, &busy, PushDownFor::Space).is_none());
        let mut e = VersionEdit::default();
        e.delete_file(5, FileNumber(8));
        e.add_file(5, with_values(9, "b", "c", 10, 40));
        let v = v.apply(e).unwrap();
        let p = pick_push_down(&v, &o, &busy, PushDownFor::Space).unwrap();
        assert_eq!(nums(&p.inputs), vec![9]);
    }

    /// A table that keeps its values in value files counts them: the level
    /// sizes, the base level and the scores are those of the same data
    /// stored inline.
    #[test]
    fn sizes_are_compensated_by_referenced_value_bytes() {
        use crate::manifest::{TableValueRefs, VersionEdit};
        let with_values = |n: u64, lo: &str, hi: &str, size: u64, values: u64| {
            let mut m = meta(n, lo, hi, n * 10, size);
            m.value_refs = vec![TableValueRefs {
                logical_file: FileNumber(100 + n),
                count: 1,
                bytes: values,
            }];
            m
        };
        let mut e = VersionEdit::default();
        for n in [1u64, 2, 3, 4] {
            e.add_value_file(crate::manifest::ValueFileMeta {
                number: FileNumber(100 + n),
                size: 1 << 30,
                hosted: vec![crate::manifest::HostedLogical {
                    logical_file: FileNumber(100 + n),
                    records: 1,
                    bytes: 1 << 29,
                }],
                ..Default::default()
            });
        }
        // L6 holds 10 sstable bytes but 9,990 bytes of values, L5 5 + 295:
        // the targets are those of 10,000 and 300 inline bytes.
        e.add_file(6, with_values(1, "a", "m", 10, 9_990));
        e.add_file(5, with_values(2, "a", "c", 5, 295));
        let v = Version::default().apply(e).unwrap();
        let t = level_targets(&v, &opts(true));
        assert_eq!((t.base_level, t.bytes[5]), (4, 1000));
        let with = version("L5 2 a c 300\nL6 1 a m 10000");
        assert_eq!(level_targets(&with, &opts(true)).bytes, t.bytes);
        assert_eq!(scores(&v, &opts(true))[5], 0.3);
        // Uncompensated, L5 would look tiny and L6 would set no base level.
        let bare = version("L5 2 a c 5\nL6 1 a m 10");
        assert!(scores(&bare, &opts(true))[5] < scores(&v, &opts(true))[5]);

        // File picking weighs overlap by compensated size: file 2 overlaps
        // one sstable byte that stands for 9,999 bytes of values.
        let mut e = VersionEdit::default();
        e.delete_file(6, FileNumber(1));
        e.add_file(6, with_values(1, "a", "m", 1, 9_999));
        e.add_file(5, meta(5, "n", "p", 50, 50));
        e.add_file(6, meta(6, "n", "z", 60, 40));
        let v = v.apply(e).unwrap();
        let p = pick_level(&v, &opts(true), 5, &Busy::default()).unwrap();
        assert_eq!(nums(&p.inputs), vec![5]);
        let bare = version("L5 2 a c 5\nL5 5 n p 50\nL6 1 a m 1\nL6 6 n z 40");
        let p = pick_level(&bare, &opts(true), 5, &Busy::default()).unwrap();
        assert_eq!(
            nums(&p.inputs),
            vec![2],
            "uncompensated, file 2 looks cheapest"
        );
        // The ablation switch makes the picker see the bare sizes.
        let uncompensated = PickerOptions {
            compensated: false,
            ..opts(true)
        };
        let bare = version("L5 2 a c 5\nL5 5 n p 50\nL6 1 a m 10\nL6 6 n z 40");
        assert_eq!(
            level_targets(&v, &uncompensated),
            level_targets(&bare, &opts(true))
        );
        assert_eq!(scores(&v, &uncompensated), scores(&bare, &opts(true)));
        assert_ne!(scores(&v, &uncompensated), scores(&v, &opts(true)));
    }

    #[test]
    fn l0_compacts_overlap_closure_into_base_level() {
        let v = version(
            "L0 10 a c 10
             L0 11 b d 10
             L0 12 x z 10
             L0 13 c e 10
             L6 1 a b 900
             L6 2 e f 900
             L6 3 g h 900",
        );
        // Trigger 1, so that the L0 file left idle still scores >= 1.
        let o = PickerOptions {
            level0_file_num_compaction_trigger: 1,
            ..opts(true)
        };
        let p = pick(&v, &o, &Busy::default()).unwrap();
        assert_eq!(
            (p.level, p.output_level),
            (0, 4),
            "L6 of 2700 puts the base at L4"
        );
        assert_eq!(nums(&p.inputs), vec![13, 11, 10]);
        assert!(p.output_level_inputs.is_empty());
        assert!(!p.bottommost, "L6 has a..b and e..f below");
        assert!(!p.trivial_move);
        // While that runs, the disjoint L0 file can go too.
        let mut busy = Busy::default();
        busy.add(&p);
        let q = pick(&v, &o, &busy).unwrap();
        assert_eq!(nums(&q.inputs), vec![12]);
        assert!(q.trivial_move && q.bottommost);
        busy.add(&q);
        assert!(pick(&v, &o, &busy).is_none());
        busy.remove(&q);
        busy.remove(&p);
        assert!(pick(&v, &o, &busy).is_some());
    }

    #[test]
    fn below_trigger_nothing_is_picked() {
        let v = version("L0 1 a b 10\nL0 2 a b 10\nL0 3 a b 10\nL6 4 a z 50");
        assert!(pick(&v, &opts(true), &Busy::default()).is_none());
        assert_eq!(scores(&v, &opts(true))[0], 0.75);
    }

    #[test]
    fn level_file_with_min_overlapping_ratio_is_chosen() {
        // Static targets: L1 holds 100; it has 150.
        let v = version(
            "L1 1 a c 50
             L1 2 d f 50
             L1 3 g i 50
             L2 4 a b 200
             L2 5 e e 20
             L2 6 h i 100",
        );
        let p = pick(&v, &opts(false), &Busy::default()).unwrap();
        assert_eq!((p.level, p.output_level), (1, 2));
        assert_eq!(nums(&p.inputs), vec![2]);
        assert_eq!(nums(&p.output_level_inputs), vec![5]);
        // With file 2 busy the next-best ratio (file 3) is taken.
        let mut busy = Busy::default();
        busy.add(&p);
        let q = pick(&v, &opts(false), &busy).unwrap();
        assert_eq!(nums(&q.inputs), vec![3]);
        assert_eq!(q.input_numbers(), vec![FileNumber(3), FileNumber(6)]);
    }

    #[test]
    fn shared_boundary_user_keys_are_kept_together() {
        use crate::base::{InternalKey, ValueKind};
        let mut a = meta(1, "a", "c", 10, 60);
        a.largest = InternalKey::new(b"c", 9, ValueKind::Value);
        let mut b = meta(2, "c", "e", 1, 60);
        b.smallest = InternalKey::new(b"c", 3, ValueKind::Value);
        let mut x = meta(3, "a", "b", 1, 10);
        x.largest = InternalKey::new(b"b", 8, ValueKind::Value);
        let mut y = meta(4, "b", "b", 1, 10);
        y.smallest = InternalKey::new(b"b", 4, ValueKind::Value);
        let v = Version::from_files(vec![(1, a), (1, b), (2, x), (2, y)]).unwrap();
        let p = pick(&v, &opts(false), &Busy::default()).unwrap();
        assert_eq!(nums(&p.inputs), vec![1, 2]);
        assert_eq!(nums(&p.output_level_inputs), vec![3, 4]);
    }

    #[test]
    fn trivial_move_and_its_edit() {
        let v = version("L1 1 a c 150\nL2 2 x z 5\nL3 3 b b 5");
        let p = pick(&v, &opts(false), &Busy::default()).unwrap();
        assert!(p.trivial_move);
        assert!(!p.bottommost, "L3 holds b");
        let moved = v.apply(p.edit_for_trivial_move()).unwrap();
        assert_eq!(nums(moved.files(2)), vec![1, 2]);
        assert_eq!(moved.num_files(1), 0);
    }

    #[test]
    fn output_range_conflict_blocks_overlapping_but_not_disjoint_plans() {
        // L1 is over target; files 1 and 2 both have nothing below, but a
        // running compaction writes b..e into L2.
        let v = version("L1 1 a c 80\nL1 2 m n 80\nL5 9 a z 1");
        let running = CompactionPlan {
            level: 1,
            output_level: 2,
            inputs: Vec::new(),
            output_level_inputs: vec![Arc::new(meta(50, "b", "e", 1, 1))],
            trivial_move: false,
            bottommost: false,
            max_output_file_size: 1,
            range_merge: false,
        };
        let mut busy = Busy::default();
        busy.add(&running);
        let p = pick(&v, &opts(false), &busy).unwrap();
        assert_eq!(nums(&p.inputs), vec![2]);
        busy.add(&p);
        assert!(pick(&v, &opts(false), &busy).is_none());
    }

    #[test]
    fn manual_compaction() {
        let v = version(
            "L0 10 a c 1
             L0 11 c f 1
             L0 12 x y 1
             L1 1 a b 5
             L1 2 d e 5
             L6 3 a z 5",
        );
        let o = opts(false);
        let p = pick_manual(&v, &o, 0, Some(b"a"), Some(b"a"), &Busy::default()).unwrap();
        assert_eq!(nums(&p.inputs), vec![11, 10]);
        assert_eq!(nums(&p.output_level_inputs), vec![1, 2]);
        assert_eq!(p.output_level, 1);
        let p = pick_manual(&v, &o, 6, None, None, &Busy::default()).unwrap();
        assert_eq!(
            (p.output_level, p.trivial_move, p.bottommost),
            (6, false, true)
        );
        assert!(pick_manual(&v, &o, 1, Some(b"f"), Some(b"g"), &Busy::default()).is_none());
        let mut busy = Busy::default();
        busy.add(&p);
        assert!(pick_manual(&v, &o, 6, None, None, &busy).is_none());
    }
}
