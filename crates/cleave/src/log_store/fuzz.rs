//! The log store's fuzz entry points (`crate::fuzzing` wraps them): its
//! decoders alone, and opening a store on arbitrary files.

use std::path::Path;
use std::sync::Arc;

use super::frame::Kind;
use super::ops::{self, Role};
use super::{checkpoint, index, physical, LogOptions, LogStore};
use crate::base::coding::Decoder;
use crate::error::Result;
use crate::vfs::{self, FileOptions, Fs, MemFs};

const DIR: &str = "/fuzz-logs";
/// Bytes of a store input that say how long its metalog part is.
const SPLIT_BYTES: usize = 2;

fn options(fs: &MemFs) -> LogOptions {
    LogOptions {
        fs: Arc::new(fs.clone()),
        create_if_missing: true,
        data_file_bytes: 8 << 10,
        meta_file_bytes: 4 << 10,
        index_memory_bytes: 48 * 16,
        checkpoint_bytes: 512,
        preallocate: false,
        ..LogOptions::default()
    }
}

fn put(fs: &MemFs, path: &Path, data: &[u8]) -> Result<()> {
    fs.create_dir_all(Path::new(DIR))?;
    let mut f = fs.create(path, FileOptions::default())?;
    f.append(data)?;
    f.sync()?;
    fs.sync_dir(Path::new(DIR))
}

/// The bytes as a data file and as a metalog file (their generation taken
/// from the first frame), every batch's operations and the seal's reverse
/// index decoded; and as a group body and raw operations.
pub(crate) fn frames(data: &[u8]) -> usize {
    let mut decoded = 0;
    let generation = data
        .get(8..16)
        .map_or(1, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
    let fs = MemFs::new();
    for role in [Role::Data, Role::Meta] {
        let path = physical::path(Path::new(DIR), role, generation);
        if put(&fs, &path, data).is_err() {
            return decoded;
        }
        let _ = physical::scan(&fs, &path, role, generation, |kind, at, payload| {
            let mut d = Decoder::new(payload);
            match (role, kind) {
                (_, Kind::Seal) => {
                    decoded +=
                        physical::decode_reverse_index(&path, at, payload).map_or(0, |r| r.len());
                }
                (Role::Data, _) => {
                    while !d.is_empty() && ops::decode_data_op(&mut d).is_ok() {
                        decoded += 1;
                    }
                }
                (Role::Meta, _) => {
                    while let Ok(op) = ops::decode_meta_op(&mut d) {
                        if let ops::MetaOp::Index { body } = op {
                            decoded += index::decode_group(body).map_or(0, |(_, e)| e.len());
                        }
                        decoded += 1;
                        if d.is_empty() {
                            break;
                        }
                    }
                }
            }
            Ok(())
        });
    }
    decoded += index::decode_group(data).map_or(0, |(_, e)| e.len());
    let mut d = Decoder::new(data);
    while !d.is_empty() && ops::decode_data_op(&mut d).is_ok() {
        decoded += 1;
    }
    decoded
}

/// Reads every log of an opened store, then writes to it: what recovery
/// made of the files must be usable.
fn exercise(s: &LogStore) -> usize {
    let mut decoded = 0;
    for (_, log) in s.logs() {
        for r in s.scan(log, 0).into_iter().flatten() {
            match r {
                Ok(_) => decoded += 1,
                Err(_) => break,
            }
        }
        let _ = s.first_lsn(log);
        if let Ok(Some(last)) = s.last_lsn(log) {
            let _ = s.read(log, last);
            let _ = s.append(log, last.saturating_add(1), b"after");
            let _ = s.truncate(log, last);
            let _ = s.trim(log, last / 2);
        }
    }
    let _ = s.flush_index();
    let _ = s.collect_garbage();
    decoded
}

/// The bytes as a store's files: the first `SPLIT_BYTES` give the length
/// of the metalog file (`000001.mlog`), the rest is the data file
/// (`000002.dlog`); the store is opened, read and written.
pub(crate) fn store(data: &[u8]) -> usize {
    let Some(split) = data.get(..SPLIT_BYTES) else {
        return 0;
    };
    let meta_len = usize::from(u16::from_le_bytes([split[0], split[1]]));
    let rest = &data[SPLIT_BYTES..];
    let (meta, log) = rest.split_at(meta_len.min(rest.len()));
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    if put(&fs, &physical::meta_path(dir, 1), meta).is_err()
        || put(&fs, &physical::data_path(dir, 2), log).is_err()
    {
        return 0;
    }
    match LogStore::open(dir, options(&fs)) {
        Ok(s) => 1 + exercise(&s),
        Err(_) => 0,
    }
}

/// The bytes as a checkpoint: decoded, then a store opened on it alone.
pub(crate) fn checkpoint(data: &[u8]) -> usize {
    let dir = Path::new(DIR);
    let Ok((st, _)) = checkpoint::decode(&dir.join(checkpoint::NAME), data) else {
        return 0;
    };
    let mut decoded = 1 + st.logs.len() + st.files.len();
    let fs = MemFs::new();
    if put(&fs, &dir.join(checkpoint::NAME), data).is_err() {
        return decoded;
    }
    if let Ok(s) = LogStore::open(dir, options(&fs)) {
        decoded += exercise(&s);
    }
    decoded
}

/// Seeds: the files of a store that flushed, checkpointed, sealed and
/// collected, cut down to what their frames hold.
pub(crate) fn seeds() -> Result<crate::fuzzing::Seeds> {
    let fs = MemFs::new();
    let dir = Path::new(DIR);
    let s = LogStore::open(dir, options(&fs))?;
    let a = s.create_log("a")?;
    let b = s.create_log("b")?;
    for lsn in 1..=60u64 {
        s.append(a, lsn, format!("record {lsn} of a").as_bytes())?;
        if lsn % 3 == 0 {
            s.append_batch(b, &[(lsn, b"b1"), (lsn + 1, b"b2")])?;
        }
        if lsn % 20 == 0 {
            s.trim(a, lsn - 15)?;
            s.truncate(b, lsn - 2)?;
        }
    }
    s.append(a, 50, b"again")?;
    s.flush_index()?;
    s.collect_garbage()?;
    drop(s);
    let mut frames = Vec::new();
    let mut metas = Vec::new();
    let mut datas = Vec::new();
    let mut names = fs.list(dir)?;
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let mut bytes = vfs::read_all(&fs, &path)?;
        // Preallocated metalog files end in zeros.
        while bytes.last() == Some(&0) {
            bytes.pop();
        }
        match physical::parse_name(&name) {
            Some(physical::FileName::Log(Role::Meta, _)) => metas.push(bytes),
            Some(physical::FileName::Log(Role::Data, _)) => datas.push(bytes),
            _ => continue,
        }
    }
    for f in metas.iter().chain(&datas) {
        frames.push(f.get(..f.len().min(8 << 10)).unwrap_or_default().to_vec());
    }
    let mut stores = Vec::new();
    if let (Some(m), Some(d)) = (metas.first(), datas.last()) {
        let m = m.get(..m.len().min(3 << 10)).unwrap_or_default();
        let d = d.get(..d.len().min(5 << 10)).unwrap_or_default();
        let mut input = (m.len() as u16).to_le_bytes().to_vec();
        input.extend_from_slice(m);
        input.extend_from_slice(d);
        stores.push(input);
    }
    let checkpoints = match fs.exists(&dir.join(checkpoint::NAME))? {
        true => vec![vfs::read_all(&fs, &dir.join(checkpoint::NAME))?],
        false => Vec::new(),
    };
    Ok(vec![
        ("log_frames", frames),
        ("log_store", stores),
        ("log_checkpoint", checkpoints),
    ])
}
