//! Checkpoints: the namespace, L1 and the data files' table as of an index
//! flush, with the metalog position to replay from, so that opening reads
//! one small file and a short tail (LavaLog's fuzzy checkpoints). Written
//! to `CHECKPOINT` through a temporary file and a rename.
//!
//! `magic "cleavecp" | fixed32 version | body | fixed32 crc`, the CRC
//! (masked CRC32C) over everything before it; the body is in
//! `docs/format/log_store.md`.

use std::collections::HashMap;
use std::path::Path;

use super::index::{Group, MetaLoc};
use super::state::{DataFile, Log, Pos, State};
use crate::base::checksum;
use crate::base::coding::{put_fixed32, put_length_prefixed, put_varint64, DecodeError, Decoder};
use crate::error::{Error, Result};
use crate::vfs::{self, Fs};

const MAGIC: &[u8; 8] = b"cleavecp";
const VERSION: u32 = 1;
pub(crate) const NAME: &str = "CHECKPOINT";
const TEMP: &str = "CHECKPOINT.tmp";

/// What a checkpoint holds beside the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marks {
    /// The highest epoch of a session before the checkpoint.
    pub(crate) epoch: u64,
    /// Where the metalog is replayed from.
    pub(crate) meta_from: Pos,
}

fn put_pos(out: &mut Vec<u8>, p: Pos) {
    put_varint64(out, p.generation);
    put_varint64(out, p.offset);
}

fn pos(d: &mut Decoder<'_>) -> std::result::Result<Pos, DecodeError> {
    Ok(Pos {
        generation: d.varint64()?,
        offset: d.varint64()?,
    })
}

pub(crate) fn encode(st: &State, marks: Marks) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    put_fixed32(&mut out, VERSION);
    put_varint64(&mut out, marks.epoch);
    put_pos(&mut out, marks.meta_from);
    put_pos(&mut out, st.replay_from);
    put_varint64(&mut out, u64::from(st.next_log));
    let mut ids: Vec<&u32> = st.logs.keys().collect();
    ids.sort_unstable();
    put_varint64(&mut out, ids.len() as u64);
    for id in ids {
        let l = &st.logs[id];
        put_varint64(&mut out, u64::from(*id));
        put_length_prefixed(&mut out, l.name.as_bytes());
        put_varint64(&mut out, l.trim_recorded);
        put_varint64(&mut out, l.groups.len() as u64);
        for g in l.groups.values() {
            put_varint64(&mut out, g.first);
            put_varint64(&mut out, g.last);
            put_varint64(&mut out, u64::from(g.count));
            put_varint64(&mut out, g.at.generation);
            put_varint64(&mut out, g.at.offset);
            put_varint64(&mut out, u64::from(g.at.len));
        }
    }
    put_varint64(&mut out, st.files.len() as u64);
    for (&generation, f) in &st.files {
        put_varint64(&mut out, generation);
        match f.seal {
            Some((offset, len)) => {
                out.push(1);
                put_varint64(&mut out, offset);
                put_varint64(&mut out, len);
            }
            None => out.push(0),
        }
        let mut logs: Vec<(&u32, &u64)> = f.logs.iter().collect();
        logs.sort_unstable();
        put_varint64(&mut out, logs.len() as u64);
        for (log, max) in logs {
            put_varint64(&mut out, u64::from(*log));
            put_varint64(&mut out, *max);
        }
    }
    let crc = checksum::mask(checksum::crc32c(&out));
    put_fixed32(&mut out, crc);
    out
}

/// The state and marks a checkpoint holds. Trim points are those the
/// metalog held (`trim_recorded`); L0 is empty.
pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<(State, Marks)> {
    let corrupt = |e: DecodeError| Error::corruption(path, 0, e.0);
    let split = bytes
        .len()
        .checked_sub(4)
        .ok_or_else(|| corrupt(DecodeError("checkpoint too short")))?;
    let (content, crc) = bytes.split_at(split);
    if !checksum::matches(
        checksum::crc32c(content),
        Decoder::new(crc).fixed32().map_err(corrupt)?,
    ) {
        return Err(corrupt(DecodeError("checkpoint checksum mismatch")));
    }
    let mut d = Decoder::new(content);
    if d.bytes(MAGIC.len()).map_err(corrupt)? != MAGIC {
        return Err(corrupt(DecodeError("not a log store checkpoint")));
    }
    let version = d.fixed32().map_err(corrupt)?;
    if version != VERSION {
        return Err(Error::UnsupportedFormatVersion {
            file: path.to_path_buf(),
            found: version,
            supported: VERSION,
        });
    }
    body(&mut d).map_err(corrupt)
}

fn body(d: &mut Decoder<'_>) -> std::result::Result<(State, Marks), DecodeError> {
    let epoch = d.varint64()?;
    let meta_from = pos(d)?;
    let mut st = State {
        replay_from: pos(d)?,
        next_log: d.varint32()?,
        ..State::default()
    };
    let logs = d.varint_usize()?;
    for _ in 0..logs {
        let id = d.varint32()?;
        let name = String::from_utf8(d.length_prefixed()?.to_vec())
            .map_err(|_| DecodeError("a log name is not UTF-8"))?;
        let mut l = Log::new(name.clone());
        l.trim_before = d.varint64()?;
        l.trim_recorded = l.trim_before;
        let groups = d.varint_usize()?;
        for _ in 0..groups {
            let g = Group {
                first: d.varint64()?,
                last: d.varint64()?,
                count: d.varint32()?,
                at: MetaLoc {
                    generation: d.varint64()?,
                    offset: d.varint64()?,
                    len: d.varint32()?,
                },
            };
            if g.last < g.first {
                return Err(DecodeError("a group ends before it starts"));
            }
            l.groups.insert(g.first, g);
        }
        st.names.insert(name, id);
        st.logs.insert(id, l);
    }
    let files = d.varint_usize()?;
    for _ in 0..files {
        let generation = d.varint64()?;
        let seal = match d.u8()? {
            0 => None,
            1 => Some((d.varint64()?, d.varint64()?)),
            _ => return Err(DecodeError("bad seal flag")),
        };
        let n = d.varint_usize()?;
        let mut logs = HashMap::new();
        for _ in 0..n {
            logs.insert(d.varint32()?, d.varint64()?);
        }
        st.files.insert(generation, DataFile { logs, seal });
    }
    if !d.is_empty() {
        return Err(DecodeError("bytes after the checkpoint"));
    }
    Ok((st, Marks { epoch, meta_from }))
}

/// Writes `bytes` as the checkpoint of `dir`, durably.
pub(crate) fn write(fs: &dyn Fs, dir: &Path, bytes: &[u8]) -> Result<()> {
    vfs::write_atomically(fs, dir, &dir.join(TEMP), &dir.join(NAME), bytes)
}

/// The checkpoint of `dir`, if it has one.
pub(crate) fn read(fs: &dyn Fs, dir: &Path) -> Result<Option<(State, Marks)>> {
    let path = dir.join(NAME);
    if !fs.exists(&path)? {
        return Ok(None);
    }
    let bytes = vfs::read_all(fs, &path)?;
    decode(&path, &bytes).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_and_checks() {
        let mut st = State {
            next_log: 3,
            replay_from: Pos {
                generation: 5,
                offset: 4096,
            },
            ..State::default()
        };
        let mut l = Log::new("raft".to_string());
        l.trim_before = 10;
        l.trim_recorded = 10;
        let g = Group {
            first: 10,
            last: 99,
            count: 90,
            at: MetaLoc {
                generation: 2,
                offset: 100,
                len: 800,
            },
        };
        l.groups.insert(10, g);
        st.logs.insert(2, l);
        st.names.insert("raft".to_string(), 2);
        st.files.insert(
            5,
            DataFile {
                logs: [(2, 99)].into_iter().collect(),
                seal: Some((7, 8)),
            },
        );
        st.files.insert(6, DataFile::default());
        let marks = Marks {
            epoch: 4,
            meta_from: Pos {
                generation: 3,
                offset: 55,
            },
        };
        let bytes = encode(&st, marks);
        let path = Path::new("/l/CHECKPOINT");
        let (back, m) = decode(path, &bytes).unwrap();
        assert_eq!(m, marks);
        assert_eq!(back.replay_from, st.replay_from);
        assert_eq!(back.next_log, 3);
        assert_eq!(back.logs[&2].groups[&10], g);
        assert_eq!(back.logs[&2].trim_before, 10);
        assert_eq!(back.names["raft"], 2);
        assert_eq!(back.files[&5].seal, Some((7, 8)));
        assert_eq!(back.files[&5].logs[&2], 99);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x20;
            assert!(decode(path, &bad).is_err(), "flip at {i}");
        }
    }
}
