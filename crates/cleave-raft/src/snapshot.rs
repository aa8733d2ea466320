//! The snapshot format: what `build_snapshot` sends to followers and what
//! the state machine keeps as its current snapshot, byte for byte the same.
//!
//! ```text
//! magic        8 bytes  "cleavesn"
//! version      u32      FORMAT_VERSION
//! meta_len     u32      then meta_len bytes: SnapshotMeta as JSON
//! pairs        repeated: key_len u32, key, value_len u32, value
//!                       (user keys without the state machine's prefix,
//!                        in key order)
//! pair_count   u64
//! checksum     u32      CRC-32C of every byte before it
//! ```
//!
//! Integers are little-endian. The checksum covers the transfer to a
//! follower as well as the file at rest. The current snapshot is the file
//! [`FILE_NAME`], replaced through a temporary file and a rename, each
//! synced, so that a crash leaves the old file or the new one.

use std::fmt;
use std::path::Path;

use cleave::vfs::{FileOptions, Fs};

use crate::types::SnapshotMeta;

/// Name of the current snapshot in the state machine's directory.
pub(crate) const FILE_NAME: &str = "snapshot";
/// Where a new current snapshot is written before its rename.
const TEMP_NAME: &str = "snapshot.tmp";

/// Written to disk and sent to followers: do not change.
const MAGIC: &[u8; 8] = b"cleavesn";
const FORMAT_VERSION: u32 = 1;
/// Magic, version and meta length.
const HEADER_BYTES: usize = 8 + 4 + 4;
/// Pair count and checksum.
const TRAILER_BYTES: usize = 8 + 4;

/// Snapshot bytes that do not decode: damaged, truncated, or another
/// format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError(String);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad snapshot: {}", self.0)
    }
}

impl std::error::Error for FormatError {}

fn bad(why: impl Into<String>) -> FormatError {
    FormatError(why.into())
}

/// Builds snapshot bytes pair by pair, so that a state machine's pairs go
/// from its iterator to the output without a second copy.
pub(crate) struct Writer {
    out: Vec<u8>,
    pairs: u64,
}

impl Writer {
    pub(crate) fn new(meta: &SnapshotMeta) -> Result<Writer, FormatError> {
        let meta = serde_json::to_vec(meta).map_err(|e| bad(format!("meta: {e}")))?;
        let mut out = Vec::with_capacity(HEADER_BYTES + meta.len() + TRAILER_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        put_length(&mut out, meta.len())?;
        out.extend_from_slice(&meta);
        Ok(Writer { out, pairs: 0 })
    }

    /// Adds a pair (the state machine adds them in key order).
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) -> Result<(), FormatError> {
        put_length(&mut self.out, key.len())?;
        self.out.extend_from_slice(key);
        put_length(&mut self.out, value.len())?;
        self.out.extend_from_slice(value);
        self.pairs += 1;
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.out.extend_from_slice(&self.pairs.to_le_bytes());
        let crc = crc32c::crc32c(&self.out);
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.out
    }
}

fn put_length(out: &mut Vec<u8>, len: usize) -> Result<(), FormatError> {
    let len = u32::try_from(len).map_err(|_| bad(format!("a field of {len} bytes")))?;
    out.extend_from_slice(&len.to_le_bytes());
    Ok(())
}

/// Decoded snapshot bytes; the pairs borrow from them.
#[derive(Debug)]
pub(crate) struct Decoded<'a> {
    pub(crate) meta: SnapshotMeta,
    pub(crate) pairs: Vec<(&'a [u8], &'a [u8])>,
}

/// Checks and decodes snapshot bytes.
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded<'_>, FormatError> {
    if bytes.len() < HEADER_BYTES + TRAILER_BYTES {
        return Err(bad(format!("{} bytes, shorter than a header", bytes.len())));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return Err(bad("checksum mismatch"));
    }
    let mut d = Decoder { rest: body };
    if d.take(MAGIC.len())? != MAGIC {
        return Err(bad("not a cleave-raft snapshot"));
    }
    let version = d.u32()?;
    if version != FORMAT_VERSION {
        return Err(bad(format!(
            "format version {version}, this build reads {FORMAT_VERSION}"
        )));
    }
    let meta_len = d.u32()? as usize;
    let meta = serde_json::from_slice(d.take(meta_len)?).map_err(|e| bad(format!("meta: {e}")))?;
    let (pairs_bytes, count) = d.rest.split_at(d.rest.len().saturating_sub(8));
    let count = u64::from_le_bytes(count.try_into().map_err(|_| bad("no pair count"))?);
    let mut d = Decoder { rest: pairs_bytes };
    let mut pairs = Vec::new();
    while !d.rest.is_empty() {
        let key_len = d.u32()? as usize;
        let key = d.take(key_len)?;
        let value_len = d.u32()? as usize;
        let value = d.take(value_len)?;
        pairs.push((key, value));
    }
    if pairs.len() as u64 != count {
        return Err(bad(format!(
            "{} pairs where the trailer says {count}",
            pairs.len()
        )));
    }
    Ok(Decoded { meta, pairs })
}

struct Decoder<'a> {
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        if self.rest.len() < n {
            return Err(bad("truncated"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, FormatError> {
        let b = self.take(4)?;
        let mut word = [0u8; 4];
        word.copy_from_slice(b);
        Ok(u32::from_le_bytes(word))
    }
}

/// The bytes of the current snapshot in `dir`, if there is one.
pub(crate) fn read_file(fs: &dyn Fs, dir: &Path) -> cleave::Result<Option<Vec<u8>>> {
    let path = dir.join(FILE_NAME);
    if !fs.exists(&path)? {
        return Ok(None);
    }
    let file = fs.open(&path, FileOptions::default())?;
    let len = usize::try_from(file.len()).map_err(|_| {
        cleave::Error::InvalidArgument(format!("{} is too large to read", path.display()))
    })?;
    file.read_at(0, len).map(Some)
}

/// Makes `bytes` the current snapshot in `dir`, durably: written to a
/// temporary file and synced, renamed over the old one, the directory
/// synced.
pub(crate) fn write_file(fs: &dyn Fs, dir: &Path, bytes: &[u8]) -> cleave::Result<()> {
    let temp = dir.join(TEMP_NAME);
    let mut file = fs.create(&temp, FileOptions::default())?;
    file.append(bytes)?;
    file.sync()?;
    drop(file);
    fs.rename(&temp, &dir.join(FILE_NAME))?;
    fs.sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use openraft::{BasicNode, CommittedLeaderId, LogId, Membership, StoredMembership};

    use super::*;

    fn meta() -> SnapshotMeta {
        let nodes = [(1, BasicNode::new("a:1")), (2, BasicNode::new("b:2"))];
        SnapshotMeta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(3, 1), 42)),
            last_membership: StoredMembership::new(
                Some(LogId::new(CommittedLeaderId::new(2, 1), 40)),
                Membership::new(
                    vec![[1, 2].into()],
                    nodes
                        .into_iter()
                        .collect::<std::collections::BTreeMap<_, _>>(),
                ),
            ),
            snapshot_id: "3-42-7".to_string(),
        }
    }

    fn encoded(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut w = Writer::new(&meta()).unwrap();
        for (k, v) in pairs {
            w.add(k, v).unwrap();
        }
        w.finish()
    }

    #[test]
    fn round_trip() {
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"", b"empty key"), (b"a", b""), (b"b", b"two")];
        let bytes = encoded(&pairs);
        let d = decode(&bytes).unwrap();
        assert_eq!(d.meta, meta());
        assert_eq!(d.pairs, pairs);

        let empty = encoded(&[]);
        let d = decode(&empty).unwrap();
        assert!(d.pairs.is_empty());
        assert_eq!(d.meta, meta());
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let bytes = encoded(&[(b"key", b"value"), (b"other", b"x")]);
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x20;
            assert!(decode(&damaged).is_err(), "flip at byte {i} went unnoticed");
        }
    }

    #[test]
    fn every_truncation_is_refused() {
        let bytes = encoded(&[(b"key", b"value")]);
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "truncated to {len}");
        }
    }

    /// What a fuzz target would do, in the unit tests (the fuzz crate does
    /// not build openraft): mutated snapshots and random bytes, their
    /// checksums made to match so that decoding goes past it, never panic,
    /// and what decodes holds only pairs inside the input.
    #[test]
    fn mutated_inputs_with_valid_checksums_never_panic() {
        let seed = encoded(&[(b"key", b"value"), (b"other", b"x"), (b"", b"")]);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..50_000u32 {
            let mut bytes = if round % 4 == 0 {
                (0..next() % 200).map(|_| next() as u8).collect()
            } else {
                let mut b = seed.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % b.len() as u64) as usize;
                    b[at] = next() as u8;
                }
                b.truncate(b.len() - (next() % 3) as usize);
                b
            };
            if bytes.len() >= 4 {
                let body = bytes.len() - 4;
                let crc = crc32c::crc32c(&bytes[..body]).to_le_bytes();
                bytes[body..].copy_from_slice(&crc);
            }
            if let Ok(d) = decode(&bytes) {
                let total: usize = d.pairs.iter().map(|(k, v)| k.len() + v.len()).sum();
                assert!(total <= bytes.len(), "round {round}");
            }
        }
    }
}
