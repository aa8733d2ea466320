//! What the store knows in memory: the namespace, each log's index and
//! trim point, and the data files' contents as far as releasing them
//! needs. Changed only by applying operations, the same way when they are
//! written and when recovery replays them.

use std::collections::{BTreeMap, HashMap};

use super::index::{Group, Loc, MetaLoc};
use super::ops::{OpKind, Reverse};
use crate::error::Result;

/// Reads a group body's entries (from the metalog).
pub(crate) type ReadGroup<'a> = &'a mut dyn FnMut(&MetaLoc) -> Result<Vec<(u64, Loc)>>;

/// A position in the datalog or the metalog: a file and an offset in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    pub(crate) generation: u64,
    pub(crate) offset: u64,
}

#[derive(Debug)]
pub(crate) struct Log {
    pub(crate) name: String,
    pub(crate) trim_before: u64,
    /// The trim point the metalog holds: trims live in the datalog, and
    /// reach the metalog at the next index flush.
    pub(crate) trim_recorded: u64,
    /// L0: mappings not yet flushed.
    pub(crate) l0: BTreeMap<u64, Loc>,
    /// L1: flushed groups by first LSN, not overlapping.
    pub(crate) groups: BTreeMap<u64, Group>,
    /// The lowest truncation since the last flush, which the flush records.
    pub(crate) pending_cut: Option<u64>,
    /// Bumped whenever L1 changes, so that GC can tell whether a mapping
    /// it read from a group still holds.
    pub(crate) changes: u64,
}

impl Log {
    pub(crate) fn new(name: String) -> Log {
        Log {
            name,
            trim_before: 0,
            trim_recorded: 0,
            l0: BTreeMap::new(),
            groups: BTreeMap::new(),
            pending_cut: None,
            changes: 0,
        }
    }

    /// The group whose range holds `lsn`.
    pub(crate) fn group_of(&self, lsn: u64) -> Option<&Group> {
        self.groups
            .range(..=lsn)
            .next_back()
            .map(|(_, g)| g)
            .filter(|g| g.last >= lsn)
    }

    /// The groups whose range meets `first..=last`.
    pub(crate) fn groups_meeting(&self, first: u64, last: u64) -> Vec<Group> {
        let mut out: Vec<Group> = self.group_of(first).into_iter().copied().collect();
        let holding = out.first().map(|g| g.first);
        out.extend(
            self.groups
                .range(first..=last)
                .map(|(_, g)| *g)
                .filter(|g| Some(g.first) != holding),
        );
        out
    }

    /// Replaces the groups meeting `group`'s range with it (a flush's new
    /// or merged group, as written or replayed).
    pub(crate) fn install_group(&mut self, group: Group) {
        for g in self.groups_meeting(group.first, group.last) {
            self.groups.remove(&g.first);
        }
        self.groups.insert(group.first, group);
        self.changes += 1;
    }

    /// Drops the groups that hold LSNs from `from` on.
    pub(crate) fn cut_groups(&mut self, from: u64) -> Vec<Group> {
        let gone = self.groups_meeting(from, u64::MAX);
        for g in &gone {
            self.groups.remove(&g.first);
        }
        self.changes += 1;
        gone
    }
}

/// What the store knows of a data file.
#[derive(Debug, Default, Clone)]
pub(crate) struct DataFile {
    /// The highest LSN each log has in the file (cuts included).
    pub(crate) logs: HashMap<u32, u64>,
    /// A full file's seal frame (its reverse index): payload offset and
    /// length.
    pub(crate) seal: Option<(u64, u64)>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) logs: HashMap<u32, Log>,
    pub(crate) names: BTreeMap<String, u32>,
    pub(crate) next_log: u32,
    /// Data files by generation, oldest first; the last is active.
    pub(crate) files: BTreeMap<u64, DataFile>,
    /// Metalog files by generation; the last is active.
    pub(crate) meta_files: BTreeMap<u64, ()>,
    /// Released data files waiting to be recycled, by the generation they
    /// last held.
    pub(crate) free: Vec<u64>,
    /// Mappings in L0, across logs.
    pub(crate) l0_entries: usize,
    /// The end of the last datalog frame applied.
    pub(crate) installed_to: Pos,
    /// Where recovery replays the datalog from: every mapping of an
    /// operation before it is in L1.
    pub(crate) replay_from: Pos,
}

impl State {
    /// Applies a datalog operation of data file `generation`, as written
    /// or replayed. A truncation that cuts a group keeps the group's
    /// mappings below the cut in L0, reading the group with `read`.
    pub(crate) fn apply(
        &mut self,
        generation: u64,
        r: &Reverse,
        read: ReadGroup<'_>,
    ) -> Result<()> {
        let Some(l) = self.logs.get_mut(&r.log) else {
            return Ok(());
        };
        match r.kind {
            OpKind::Put => {
                if r.lsn < l.trim_before {
                    return Ok(());
                }
                let loc = Loc {
                    generation,
                    offset: r.offset,
                    len: r.len,
                };
                if l.l0.insert(r.lsn, loc).is_none() {
                    self.l0_entries += 1;
                }
            }
            OpKind::Truncate => {
                let from = r.lsn;
                let gone = l.l0.split_off(&from);
                self.l0_entries -= gone.len();
                for g in l.cut_groups(from) {
                    if g.first >= from {
                        continue;
                    }
                    for (lsn, loc) in read(&g.at)? {
                        if lsn < from && lsn >= l.trim_before && !l.l0.contains_key(&lsn) {
                            l.l0.insert(lsn, loc);
                            self.l0_entries += 1;
                        }
                    }
                }
                l.pending_cut = Some(l.pending_cut.map_or(from, |c| c.min(from)));
            }
            OpKind::Trim => self.trim(r.log, r.lsn),
        }
        self.note(generation, r.log, r.lsn);
        Ok(())
    }

    pub(crate) fn note(&mut self, generation: u64, log: u32, lsn: u64) {
        let f = self.files.entry(generation).or_default();
        let max = f.logs.entry(log).or_insert(lsn);
        *max = (*max).max(lsn);
    }

    pub(crate) fn trim(&mut self, log: u32, before: u64) {
        let Some(l) = self.logs.get_mut(&log) else {
            return;
        };
        if before <= l.trim_before {
            return;
        }
        l.trim_before = before;
        let keep = l.l0.split_off(&before);
        let gone = std::mem::replace(&mut l.l0, keep);
        self.l0_entries -= gone.len();
        let dead: Vec<u64> = l
            .groups
            .values()
            .take_while(|g| g.last < before)
            .map(|g| g.first)
            .collect();
        for first in dead {
            l.groups.remove(&first);
        }
    }

    pub(crate) fn delete(&mut self, log: u32) {
        if let Some(l) = self.logs.remove(&log) {
            self.names.remove(&l.name);
            self.l0_entries -= l.l0.len();
        }
    }

    /// Metalog files below `generation` that no group lies in: nothing
    /// needs them once a checkpoint replays the metalog from there.
    pub(crate) fn unreferenced_meta_files(&self, generation: u64) -> Vec<u64> {
        let used: std::collections::HashSet<u64> = self
            .logs
            .values()
            .flat_map(|l| l.groups.values().map(|g| g.at.generation))
            .collect();
        self.meta_files
            .keys()
            .copied()
            .filter(|&g| g < generation && !used.contains(&g))
            .collect()
    }

    /// The oldest sealed data files whose operations are all trimmed or of
    /// deleted logs, in order: released first to last, so that a
    /// truncation is never released before the records it dropped.
    pub(crate) fn garbage_prefix(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for (&generation, f) in &self.files {
            let dead = f.seal.is_some()
                && f.logs.iter().all(|(log, &max)| match self.logs.get(log) {
                    None => true,
                    Some(l) => max < l.trim_before,
                });
            if !dead {
                break;
            }
            out.push(generation);
        }
        out
    }
}
