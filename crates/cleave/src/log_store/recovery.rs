//! Opening a log store: the checkpoint, then the metalog after it replayed
//! into the namespace and L1, then the datalog after the replay point into
//! L0; the active files are resumed where their valid frames end, in a new
//! epoch.

use std::collections::HashSet;
use std::path::Path;

use super::checkpoint::{self, Marks};
use super::frame::Kind;
use super::index::{self, Group, Loc, MetaLoc};
use super::ops::{self, DataOp, MetaOp, OpKind, Reverse, Role};
use super::physical::{self, FileName, Source, Writer};
use super::state::{DataFile, Log, Pos, ReadGroup, State};
use super::store::{DataSide, Inner, MetaSide};
use super::LogOptions;
use crate::base::coding::Decoder;
use crate::error::{Error, Result};
use crate::vfs::{FileOptions, Fs};

/// The lock file of a log store directory.
const LOCK: &str = "LOCK";

/// Reads group bodies during recovery.
fn group_reader<'a>(
    fs: &'a dyn Fs,
    dir: &Path,
) -> impl FnMut(&MetaLoc) -> Result<Vec<(u64, Loc)>> + 'a {
    let dir = dir.to_path_buf();
    move |at: &MetaLoc| {
        let path = physical::meta_path(&dir, at.generation);
        let body = fs
            .open(&path, FileOptions::default())?
            .read_at(at.offset, at.len as usize)?;
        let (_, entries) =
            index::decode_group(&body).map_err(|e| Error::corruption(&path, at.offset, e.0))?;
        Ok(entries)
    }
}

pub(crate) fn open(dir: &Path, opts: LogOptions) -> Result<Inner> {
    let fs = opts.fs.clone();
    let fs = fs.as_ref();
    if !fs.exists(dir)? {
        if !opts.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "log store {} does not exist (create_if_missing is off)",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)?;
    }
    let lock = fs.lock(&dir.join(LOCK))?;
    let mut data_files = Vec::new();
    let mut meta_files = Vec::new();
    let mut free = Vec::new();
    let mut max_generation = 0;
    for name in fs.list(dir)? {
        let Some(f) = physical::parse_name(&name) else {
            continue;
        };
        match f {
            FileName::Log(Role::Data, g) => data_files.push(g),
            FileName::Log(Role::Meta, g) => meta_files.push(g),
            FileName::Free(g) => free.push(g),
        }
        let (FileName::Log(_, g) | FileName::Free(g)) = f;
        max_generation = max_generation.max(g);
    }
    data_files.sort_unstable();
    meta_files.sort_unstable();
    free.sort_unstable();

    let (mut st, marks) = checkpoint::read(fs, dir)?.unwrap_or_else(|| {
        (
            State::default(),
            Marks {
                epoch: 0,
                meta_from: Pos::default(),
            },
        )
    });
    st.free = free;
    // Files before the checkpoint's replay point were complete when it was
    // taken; its table of the later ones is read again from the files.
    let complete_below = st.replay_from.generation;
    let mut read_group = group_reader(fs, dir);
    let mut max_epoch = marks.epoch;
    // Files whose header never became durable hold nothing of theirs.
    let mut unused = Vec::new();
    let mut meta_end = None;
    for &g in &meta_files {
        st.meta_files.insert(g, ());
        if g < marks.meta_from.generation {
            continue;
        }
        let path = physical::meta_path(dir, g);
        let skip_below = if g == marks.meta_from.generation {
            marks.meta_from.offset
        } else {
            0
        };
        let scanned = physical::scan(fs, &path, Role::Meta, g, |kind, at, payload| {
            if kind != Kind::Batch || at < skip_below {
                return Ok(());
            }
            let mut d = Decoder::new(payload);
            while !d.is_empty() {
                let op =
                    ops::decode_meta_op(&mut d).map_err(|e| Error::corruption(&path, at, e.0))?;
                let end = at + d.position() as u64;
                apply_meta(&mut st, &mut max_epoch, &path, g, end, op)?;
            }
            Ok(())
        })?;
        if !scanned.has_header {
            st.meta_files.remove(&g);
            unused.push((Role::Meta, g));
            continue;
        }
        max_epoch = max_epoch.max(scanned.last_epoch);
        meta_end = Some((g, scanned.end, scanned.sealed));
    }

    let replay_from = st.replay_from;
    let mut data_end = None;
    for &g in &data_files {
        if g < complete_below && st.files.contains_key(&g) {
            continue;
        }
        let apply_from = if g < replay_from.generation {
            u64::MAX
        } else if g == replay_from.generation {
            replay_from.offset
        } else {
            0
        };
        // What the file holds is read again from its start.
        let seal = st.files.get(&g).and_then(|f| f.seal);
        st.files.insert(
            g,
            DataFile {
                seal,
                ..DataFile::default()
            },
        );
        let path = physical::data_path(dir, g);
        if let Some((offset, len)) = seal {
            let file = fs.open(&path, FileOptions::default())?;
            let payload = physical::read_seal(file.as_ref(), &path, g, offset, len)?;
            for r in physical::decode_reverse_index(&path, offset, &payload)? {
                replay(&mut st, g, &r, apply_from, &mut read_group)?;
            }
            data_end = None;
            continue;
        }
        let mut reverse = Vec::new();
        let mut sealed_at = None;
        let scanned = physical::scan(fs, &path, Role::Data, g, |kind, at, payload| {
            if kind == Kind::Seal {
                sealed_at = Some((at, payload.len() as u64));
                return Ok(());
            }
            let mut d = Decoder::new(payload);
            while !d.is_empty() {
                let start = at + d.position() as u64;
                let op = ops::decode_data_op(&mut d)
                    .map_err(|e| Error::corruption(&path, start, e.0))?;
                let len = (at + d.position() as u64 - start) as u32;
                let (log, lsn, kind) = match op {
                    DataOp::Put { log, lsn, .. } => (log, lsn, OpKind::Put),
                    DataOp::Truncate { log, from } => (log, from, OpKind::Truncate),
                    DataOp::Trim { log, before } => (log, before, OpKind::Trim),
                };
                let r = Reverse {
                    log,
                    lsn,
                    offset: start,
                    len,
                    kind,
                };
                ops::encode_reverse(&mut reverse, &r);
                replay(&mut st, g, &r, apply_from, &mut read_group)?;
            }
            Ok(())
        })?;
        if !scanned.has_header {
            st.files.remove(&g);
            unused.push((Role::Data, g));
            continue;
        }
        max_epoch = max_epoch.max(scanned.last_epoch);
        if let Some(f) = st.files.get_mut(&g) {
            f.seal = sealed_at;
        }
        data_end = (!scanned.sealed).then_some((g, scanned.end, reverse));
    }
    // Files released after the checkpoint.
    let on_disk: HashSet<u64> = data_files.iter().copied().collect();
    st.files.retain(|g, _| on_disk.contains(g));

    // The new session's epoch is above every frame's, and durable (in the
    // metalog, below) before any frame of it is written.
    let exhausted =
        |what: &str| Error::corruption(dir, 0, format!("{what} at its limit: damaged metadata"));
    let epoch = max_epoch
        .checked_add(1)
        .ok_or_else(|| exhausted("the session epoch"))?;
    // Generations are file names: far from 2^64 unless a name is damage.
    let mut next_generation = max_generation
        .checked_add(1)
        .filter(|g| g.checked_add(1 << 32).is_some())
        .ok_or_else(|| exhausted("the file generation"))?;
    let mut generation = || {
        let g = next_generation;
        next_generation += 1;
        g
    };
    for (role, g) in unused {
        fs.rename(&physical::path(dir, role, g), &physical::free_path(dir, g))?;
        st.free.push(g);
    }
    // Metalog files before the checkpoint that no group refers to.
    let stale = st.unreferenced_meta_files(marks.meta_from.generation);
    for g in stale {
        fs.remove(&physical::meta_path(dir, g))?;
        st.meta_files.remove(&g);
    }
    fs.sync_dir(dir)?;

    // A process that died left what it wrote in the page cache, maybe not
    // durable: made durable before anything is written after it, or a
    // power loss later could take these bytes and keep newer ones past
    // them.
    if let Some((g, _, false)) = meta_end {
        fs.sync_file(&physical::meta_path(dir, g))?;
    }
    if let Some((g, _, _)) = &data_end {
        fs.sync_file(&physical::data_path(dir, *g))?;
    }
    let source = |st: &mut State| Source::next(dir, st.free.pop(), opts.preallocate);
    let mut meta = match meta_end {
        Some((g, end, false)) => Writer::resume(
            fs,
            &physical::meta_path(dir, g),
            g,
            end,
            epoch,
            opts.meta_shape(),
        )?,
        _ => {
            let g = generation();
            st.meta_files.insert(g, ());
            Writer::start(
                fs,
                dir,
                Role::Meta,
                g,
                epoch,
                opts.meta_shape(),
                Source::Preallocated,
            )?
        }
    };
    let mut opened = Vec::new();
    ops::encode_meta_op(&mut opened, &MetaOp::Opened { epoch });
    meta.append(Kind::Batch, &opened)?;
    meta.sync()?;

    let data = match data_end {
        Some((g, end, reverse)) => {
            st.installed_to = Pos {
                generation: g,
                offset: end,
            };
            DataSide {
                writer: Writer::resume(
                    fs,
                    &physical::data_path(dir, g),
                    g,
                    end,
                    epoch,
                    opts.data_shape(),
                )?,
                reverse,
            }
        }
        None => {
            let src = source(&mut st);
            let g = generation();
            st.files.insert(g, DataFile::default());
            let writer = Writer::start(fs, dir, Role::Data, g, epoch, opts.data_shape(), src)?;
            st.installed_to = Pos {
                generation: g,
                offset: writer.offset(),
            };
            DataSide {
                writer,
                reverse: Vec::new(),
            }
        }
    };
    let free_over = st.free.len().saturating_sub(opts.free_files);
    for g in st.free.drain(..free_over).collect::<Vec<_>>() {
        fs.remove(&physical::free_path(dir, g))?;
    }
    let meta = MetaSide {
        writer: meta,
        since_checkpoint: 0,
    };
    Ok(Inner::new(
        dir.to_path_buf(),
        opts,
        lock,
        st,
        (data, meta),
        epoch,
        next_generation,
    ))
}

/// Replays one datalog operation of file `g`: applied if it lies at or
/// after `apply_from`, else only counted in the file's table.
fn replay(st: &mut State, g: u64, r: &Reverse, apply_from: u64, read: ReadGroup<'_>) -> Result<()> {
    if r.offset >= apply_from {
        st.apply(g, r, read)
    } else {
        st.note(g, r.log, r.lsn);
        Ok(())
    }
}

/// Applies one metalog operation of file `g`, which ends at `end` in it.
fn apply_meta(
    st: &mut State,
    max_epoch: &mut u64,
    path: &Path,
    g: u64,
    end: u64,
    op: MetaOp<'_>,
) -> Result<()> {
    match op {
        MetaOp::Opened { epoch } => *max_epoch = (*max_epoch).max(epoch),
        MetaOp::Create { log, name } => {
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| Error::corruption(path, end, "a log name is not UTF-8"))?;
            let next = log
                .checked_add(1)
                .ok_or_else(|| Error::corruption(path, end, "a log id at its limit"))?;
            st.next_log = st.next_log.max(next);
            st.names.insert(name.clone(), log);
            st.logs.insert(log, Log::new(name));
        }
        MetaOp::Delete { log } => st.delete(log),
        MetaOp::Trim { log, before } => {
            st.trim(log, before);
            if let Some(l) = st.logs.get_mut(&log) {
                l.trim_recorded = l.trim_recorded.max(before);
            }
        }
        MetaOp::Sealed {
            generation,
            offset,
            len,
        } => {
            st.files.entry(generation).or_default().seal = Some((offset, len));
        }
        MetaOp::Index { body } => {
            let (log, entries) =
                index::decode_group(body).map_err(|e| Error::corruption(path, end, e.0))?;
            let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
                return Err(Error::corruption(path, end, "an empty index group"));
            };
            let group = Group {
                first: first.0,
                last: last.0,
                count: entries.len() as u32,
                at: MetaLoc {
                    generation: g,
                    // The body is the operation's last bytes.
                    offset: end - body.len() as u64,
                    len: body.len() as u32,
                },
            };
            if let Some(l) = st.logs.get_mut(&log) {
                if group.last >= l.trim_before {
                    l.install_group(group);
                }
            }
        }
        MetaOp::Cut { log, from } => {
            if let Some(l) = st.logs.get_mut(&log) {
                l.cut_groups(from);
            }
        }
        MetaOp::Flushed { generation, offset } => {
            st.replay_from = Pos { generation, offset };
        }
    }
    Ok(())
}
