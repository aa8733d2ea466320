//! Opening a log store: the metalog replayed into the namespace, the data
//! files into the index, and the active files resumed where their valid
//! frames end, in a new epoch.

use std::collections::HashMap;
use std::path::Path;

use super::frame::Kind;
use super::ops::{self, DataOp, MetaOp, OpKind, Role};
use super::physical::{self, FileName, Source, Writer};
use super::store::{DataFile, DataSide, Inner, Log, State};
use super::LogOptions;
use crate::base::coding::Decoder;
use crate::error::{Error, Result};

/// The lock file of a log store directory.
const LOCK: &str = "LOCK";

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

    let mut st = State {
        free,
        ..State::default()
    };
    let mut max_epoch = 0;
    let mut seals: HashMap<u64, (u64, u64)> = HashMap::new();
    // Files whose header never became durable hold nothing of theirs.
    let mut unused = Vec::new();
    let mut meta_end = None;
    for &g in &meta_files {
        let path = physical::meta_path(dir, g);
        let scanned = physical::scan(fs, &path, Role::Meta, g, |kind, at, payload| {
            if kind != Kind::Batch {
                return Ok(());
            }
            let mut d = Decoder::new(payload);
            while !d.is_empty() {
                let op =
                    ops::decode_meta_op(&mut d).map_err(|e| Error::corruption(&path, at, e.0))?;
                apply_meta(&mut st, &mut max_epoch, &mut seals, &path, at, op)?;
            }
            Ok(())
        })?;
        if !scanned.has_header {
            unused.push((Role::Meta, g));
            continue;
        }
        max_epoch = max_epoch.max(scanned.last_epoch);
        meta_end = Some((g, scanned.end, scanned.sealed));
        st.meta_files += 1;
    }

    let mut data_end = None;
    for &g in &data_files {
        let path = physical::data_path(dir, g);
        st.files.insert(g, DataFile::default());
        if let Some(&(offset, len)) = seals.get(&g) {
            let file = fs.open(&path, crate::vfs::FileOptions::default())?;
            let payload = physical::read_seal(file.as_ref(), &path, g, offset, len)?;
            for r in physical::decode_reverse_index(&path, offset, &payload)? {
                st.apply(g, &r);
            }
            if let Some(f) = st.files.get_mut(&g) {
                f.sealed = true;
            }
            data_end = None;
            continue;
        }
        let mut reverse = Vec::new();
        let scanned = physical::scan(fs, &path, Role::Data, g, |kind, at, payload| {
            if kind != Kind::Batch {
                return Ok(());
            }
            let mut d = Decoder::new(payload);
            while !d.is_empty() {
                let start = at + d.position() as u64;
                let op = ops::decode_data_op(&mut d)
                    .map_err(|e| Error::corruption(&path, start, e.0))?;
                let len = at + d.position() as u64 - start;
                let (log, lsn, kind) = match op {
                    DataOp::Put { log, lsn, .. } => (log, lsn, OpKind::Put),
                    DataOp::Truncate { log, from } => (log, from, OpKind::Truncate),
                    DataOp::Trim { log, before } => (log, before, OpKind::Trim),
                };
                let r = ops::Reverse {
                    log,
                    lsn,
                    offset: start,
                    len: len as u32,
                    kind,
                };
                ops::encode_reverse(&mut reverse, &r);
                st.apply(g, &r);
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
            f.sealed = scanned.sealed;
        }
        data_end = (!scanned.sealed).then_some((g, scanned.end, reverse));
    }

    // The new session's epoch is above every frame's, and durable (in the
    // metalog, below) before any frame of it is written.
    let epoch = max_epoch + 1;
    let mut next_generation = max_generation + 1;
    let mut generation = || {
        let g = next_generation;
        next_generation += 1;
        g
    };
    for (role, g) in unused {
        let from = physical::path(dir, role, g);
        let to = physical::free_path(dir, g);
        fs.rename(&from, &to)?;
        st.free.push(g);
    }
    fs.sync_dir(dir)?;

    let source = |st: &mut State| match st.free.pop() {
        Some(g) => Source::Recycled(physical::free_path(dir, g)),
        None if opts.preallocate => Source::Preallocated,
        None => Source::Growing,
    };
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
            let src = source(&mut st);
            st.meta_files += 1;
            Writer::start(
                fs,
                dir,
                Role::Meta,
                generation(),
                epoch,
                opts.meta_shape(),
                src,
            )?
        }
    };
    let mut opened = Vec::new();
    ops::encode_meta_op(&mut opened, &MetaOp::Opened { epoch });
    meta.append(Kind::Batch, &opened)?;
    meta.sync()?;

    let data = match data_end {
        Some((g, end, reverse)) => DataSide {
            writer: Writer::resume(
                fs,
                &physical::data_path(dir, g),
                g,
                end,
                epoch,
                opts.data_shape(),
            )?,
            reverse,
        },
        None => {
            let src = source(&mut st);
            let g = generation();
            st.files.insert(g, DataFile::default());
            DataSide {
                writer: Writer::start(fs, dir, Role::Data, g, epoch, opts.data_shape(), src)?,
                reverse: Vec::new(),
            }
        }
    };
    let free_over = st.free.len().saturating_sub(opts.free_files);
    for g in st.free.drain(..free_over).collect::<Vec<_>>() {
        fs.remove(&physical::free_path(dir, g))?;
    }
    Ok(Inner::new(
        dir.to_path_buf(),
        opts,
        lock,
        st,
        data,
        meta,
        epoch,
        next_generation,
    ))
}

fn apply_meta(
    st: &mut State,
    max_epoch: &mut u64,
    seals: &mut HashMap<u64, (u64, u64)>,
    path: &Path,
    at: u64,
    op: MetaOp<'_>,
) -> Result<()> {
    match op {
        MetaOp::Opened { epoch } => *max_epoch = (*max_epoch).max(epoch),
        MetaOp::Create { log, name } => {
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| Error::corruption(path, at, "a log name is not UTF-8"))?;
            st.next_log = st.next_log.max(log + 1);
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
            seals.insert(generation, (offset, len));
        }
    }
    Ok(())
}
