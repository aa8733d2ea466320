//! Index flushes (L0 to groups in the metalog), checkpoints, and releasing
//! files whose contents are all garbage.

use std::collections::BTreeMap;

use super::checkpoint::{self, Marks};
use super::index::{self, Group, Loc, MetaLoc};
use super::ops::MetaOp;
use super::physical;
use super::state::Pos;
use super::store::{encode_meta, DataSide, Inner, MetaSide};
use crate::error::Result;

/// Mappings per group at most: a lookup below L0 reads one group body of
/// about 8 bytes per mapping.
const GROUP_ENTRIES: usize = 1024;

/// L0 mappings that fall inside a group, which a flush merges into a new
/// copy of it: the plan's index, the group, the mappings, the log's trim
/// point.
type Merge = (usize, Group, Vec<(u64, Loc)>, u64);

/// One log's part of a flush.
struct LogFlush {
    log: u32,
    trim: Option<u64>,
    cut: Option<u64>,
    /// Runs of mappings, each a new group.
    runs: Vec<Vec<(u64, Loc)>>,
}

impl Inner {
    /// Flushes every log's L0 to groups in the metalog, with the trims and
    /// cuts since the last flush, and moves the replay point to the end of
    /// the datalog. The caller holds the data side: no operation is applied
    /// meanwhile.
    pub(crate) fn flush_index(&self, data: &mut DataSide) -> Result<()> {
        // The groups point at datalog records, which must be durable first.
        if !self.opts.sync {
            data.writer.sync().map_err(|e| self.poisoned(e))?;
        }
        let mut plans = Vec::new();
        let mut merges: Vec<Merge> = Vec::new();
        let to = {
            let st = self.state.read();
            for (&id, l) in &st.logs {
                let trim = (l.trim_before > l.trim_recorded).then_some(l.trim_before);
                if l.l0.is_empty() && trim.is_none() && l.pending_cut.is_none() {
                    continue;
                }
                let slot = plans.len();
                let mut fresh: Vec<Vec<(u64, Loc)>> = Vec::new();
                let mut inside: BTreeMap<u64, (Group, Vec<(u64, Loc)>)> = BTreeMap::new();
                let mut prev: Option<u64> = None;
                for (&lsn, &loc) in &l.l0 {
                    if let Some(g) = l.group_of(lsn) {
                        inside
                            .entry(g.first)
                            .or_insert_with(|| (*g, Vec::new()))
                            .1
                            .push((lsn, loc));
                        continue;
                    }
                    let split = match (fresh.last(), prev) {
                        (Some(run), Some(p)) => {
                            run.len() >= GROUP_ENTRIES
                                || l.groups.range(p + 1..lsn).next().is_some()
                        }
                        _ => true,
                    };
                    if split {
                        fresh.push(Vec::new());
                    }
                    if let Some(run) = fresh.last_mut() {
                        run.push((lsn, loc));
                    }
                    prev = Some(lsn);
                }
                for (g, entries) in inside.into_values() {
                    merges.push((slot, g, entries, l.trim_before));
                }
                plans.push(LogFlush {
                    log: id,
                    trim,
                    cut: l.pending_cut,
                    runs: fresh,
                });
            }
            st.installed_to
        };
        if plans.is_empty() && st_replay(self) == to {
            return Ok(());
        }
        // Merges read their groups without the state lock: nothing applies
        // operations while the data side is held.
        for (slot, g, l0, trim) in merges {
            let mut merged: BTreeMap<u64, Loc> = self
                .read_group(&g.at)?
                .into_iter()
                .filter(|(lsn, _)| *lsn >= trim)
                .collect();
            merged.extend(l0);
            let merged: Vec<(u64, Loc)> = merged.into_iter().collect();
            for chunk in merged.chunks(GROUP_ENTRIES) {
                plans[slot].runs.push(chunk.to_vec());
            }
        }
        let mut ops = Vec::new();
        let mut bodies: Vec<(usize, Vec<u8>, Group)> = Vec::new();
        for (i, p) in plans.iter().enumerate() {
            if let Some(before) = p.trim {
                ops.push(MetaOp::Trim { log: p.log, before });
            }
            if let Some(from) = p.cut {
                ops.push(MetaOp::Cut { log: p.log, from });
            }
            for run in &p.runs {
                let (Some(first), Some(last)) = (run.first(), run.last()) else {
                    continue;
                };
                let mut body = Vec::new();
                index::encode_group(&mut body, p.log, run);
                let g = Group {
                    first: first.0,
                    last: last.0,
                    count: run.len() as u32,
                    at: MetaLoc {
                        generation: 0,
                        offset: 0,
                        len: body.len() as u32,
                    },
                };
                bodies.push((i, body, g));
            }
        }
        let mut payload = encode_meta(&ops);
        let mut placed = Vec::with_capacity(bodies.len());
        for (i, body, g) in &bodies {
            let start = payload.len();
            super::ops::encode_meta_op(&mut payload, &MetaOp::Index { body });
            // The body is the op's last bytes.
            placed.push((*i, (payload.len() - body.len()) as u64, *g));
            debug_assert!(payload.len() - body.len() > start);
        }
        super::ops::encode_meta_op(
            &mut payload,
            &MetaOp::Flushed {
                generation: to.generation,
                offset: to.offset,
            },
        );
        let mut meta = self.meta.lock();
        let at = self.write_meta(&mut meta, &payload, true)?;
        {
            let mut st = self.state.write();
            for p in &plans {
                if let Some(l) = st.logs.get_mut(&p.log) {
                    let n = l.l0.len();
                    l.l0.clear();
                    l.trim_recorded = l.trim_recorded.max(l.trim_before);
                    l.pending_cut = None;
                    l.changes += 1;
                    st.l0_entries -= n;
                }
            }
            for (i, offset, mut g) in placed {
                g.at.generation = at.generation;
                g.at.offset = at.offset + offset;
                if let Some(l) = st.logs.get_mut(&plans[i].log) {
                    l.install_group(g);
                }
            }
            st.replay_from = to;
        }
        self.counters.lock().flushes += 1;
        if meta.since_checkpoint >= self.opts.checkpoint_bytes {
            self.checkpoint(&mut meta)?;
        }
        Ok(())
    }

    /// Writes a checkpoint of the state as of the last flush, first moving
    /// the groups out of old metalog files that are mostly garbage, then
    /// deletes the metalog files nothing refers to any more. The caller
    /// holds the data side and passes the metalog's.
    pub(crate) fn checkpoint(&self, meta: &mut MetaSide) -> Result<()> {
        let active = meta.writer.generation;
        // Live group bytes per old metalog file.
        let moving: Vec<(u32, Group)> = {
            let st = self.state.read();
            let mut live: BTreeMap<u64, u64> = BTreeMap::new();
            for l in st.logs.values() {
                for g in l.groups.values() {
                    *live.entry(g.at.generation).or_default() += u64::from(g.at.len);
                }
            }
            let sparse: Vec<u64> = live
                .iter()
                .filter(|(&g, &bytes)| g != active && bytes * 2 < self.opts.meta_file_bytes)
                .map(|(&g, _)| g)
                .collect();
            st.logs
                .iter()
                .flat_map(|(&id, l)| l.groups.values().map(move |g| (id, *g)))
                .filter(|(_, g)| sparse.contains(&g.at.generation))
                .collect()
        };
        if !moving.is_empty() {
            let mut payload = Vec::new();
            let mut placed = Vec::with_capacity(moving.len());
            for (log, g) in &moving {
                let path = physical::meta_path(&self.dir, g.at.generation);
                let body = self.read_body(&path, &g.at)?;
                super::ops::encode_meta_op(&mut payload, &MetaOp::Index { body: &body });
                placed.push((*log, *g, (payload.len() - body.len()) as u64));
            }
            let at = self.write_meta(meta, &payload, true)?;
            let mut st = self.state.write();
            for (log, mut g, offset) in placed {
                g.at.generation = at.generation;
                g.at.offset = at.offset + offset;
                if let Some(l) = st.logs.get_mut(&log) {
                    l.install_group(g);
                }
            }
        }
        let marks = Marks {
            epoch: self.epoch,
            meta_from: Pos {
                generation: meta.writer.generation,
                offset: meta.writer.offset(),
            },
        };
        let (bytes, unused) = {
            let st = self.state.read();
            let unused = st.unreferenced_meta_files(marks.meta_from.generation);
            (checkpoint::encode(&st, marks), unused)
        };
        let fs = self.opts.fs.as_ref();
        let r = checkpoint::write(fs, &self.dir, &bytes).and_then(|()| {
            for &g in &unused {
                self.forget_meta_reader(g);
                fs.remove(&physical::meta_path(&self.dir, g))?;
            }
            fs.sync_dir(&self.dir)
        });
        r.map_err(|e| self.poisoned(e))?;
        {
            let mut st = self.state.write();
            for g in &unused {
                st.meta_files.remove(g);
            }
        }
        meta.since_checkpoint = 0;
        self.counters.lock().checkpoints += 1;
        Ok(())
    }

    /// A group body's bytes, checked.
    fn read_body(&self, path: &std::path::Path, at: &MetaLoc) -> Result<Vec<u8>> {
        let f = self
            .opts
            .fs
            .open(path, crate::vfs::FileOptions::default())?;
        let body = f.read_at(at.offset, at.len as usize)?;
        index::decode_group(&body).map_err(|e| crate::Error::corruption(path, at.offset, e.0))?;
        Ok(body)
    }

    /// Releases data files `dead` (oldest first), making the trims that
    /// emptied them durable in the metalog first: they must not be undone
    /// once their records are gone. The index is flushed first if the
    /// replay point is not past them: a truncation or trim in a file
    /// recovery replays may be all that hides records of older files.
    pub(crate) fn release(&self, dead: &[u64]) -> Result<()> {
        let Some(&newest) = dead.iter().max() else {
            return Ok(());
        };
        if self.state.read().replay_from.generation <= newest {
            let mut data = self.data.lock();
            self.flush_index(&mut data)?;
        }
        debug_assert!(self.state.read().replay_from.generation > newest);
        let mut meta = self.meta.lock();
        let trims: Vec<(u32, u64)> = {
            let st = self.state.read();
            st.logs
                .iter()
                .filter(|(_, l)| l.trim_before > l.trim_recorded)
                .map(|(&id, l)| (id, l.trim_before))
                .collect()
        };
        let ops: Vec<MetaOp<'_>> = trims
            .iter()
            .map(|&(log, before)| MetaOp::Trim { log, before })
            .collect();
        // Recorded trims are durable already: with none new, nothing to write.
        if !ops.is_empty() {
            self.write_meta(&mut meta, &encode_meta(&ops), true)?;
        }
        {
            let mut st = self.state.write();
            for &(log, before) in &trims {
                if let Some(l) = st.logs.get_mut(&log) {
                    l.trim_recorded = l.trim_recorded.max(before);
                }
            }
        }
        let fs = self.opts.fs.as_ref();
        let r = (|| {
            for &generation in dead {
                let path = physical::data_path(&self.dir, generation);
                self.forget_data_reader(generation);
                let keep = self.state.read().free.len() < self.opts.free_files;
                if keep {
                    // Named by the newest generation it held, so that a
                    // later generation never meets its old frames.
                    fs.rename(&path, &physical::free_path(&self.dir, generation))?;
                } else {
                    fs.remove(&path)?;
                }
                let mut st = self.state.write();
                st.files.remove(&generation);
                if keep {
                    st.free.push(generation);
                }
                drop(st);
                self.counters.lock().files_released += 1;
            }
            fs.sync_dir(&self.dir)
        })();
        r.map_err(|e| self.poisoned(e))
    }
}

/// The replay point now.
fn st_replay(inner: &Inner) -> Pos {
    inner.state.read().replay_from
}
