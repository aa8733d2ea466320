//! WriteBatch: an atomic group of updates, and its encoding, which is also
//! the payload of a WAL record (see `docs/format/wal.md`). A batch the
//! user builds holds puts, deletes and merge operands; the one the WAL
//! receives may also hold value handles, for values already written to a
//! value log.

use crate::base::coding::{put_fixed32, put_fixed64, put_length_prefixed, put_varint64, Decoder};
use crate::base::expiry::{self, EXPIRY_LEN};
use crate::base::key::{ValueKind, MAX_SEQ};
use crate::base::limits::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::base::SeqNo;
use crate::error::{Error, Result};
use crate::value_file::ValueHandle;

/// `fixed64 seq | fixed32 count`.
pub(crate) const HEADER_LEN: usize = 12;

/// Updates applied atomically by [`crate::Db::write`].
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.count)
            .field("bytes", &self.rep.len())
            .finish()
    }
}

/// One update of a batch, as [`WriteBatch::ops`] gives them back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// [`WriteBatch::put`], or [`WriteBatch::put_with_expiry`] with its
    /// expiry (milliseconds since the epoch).
    Put {
        key: &'a [u8],
        value: &'a [u8],
        expires_at_ms: Option<u64>,
    },
    Delete {
        key: &'a [u8],
    },
    Merge {
        key: &'a [u8],
        operand: &'a [u8],
    },
}

/// One decoded update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchEntry<'a> {
    pub kind: ValueKind,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl WriteBatch {
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; HEADER_LEN],
            count: 0,
        }
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        self.count += 1;
    }

    /// Sets `key` to `value` until `expires_at_ms` (milliseconds since the
    /// Unix epoch, as [`crate::Options::clock`] reads them): from that
    /// millisecond on, reads find nothing for `key` (no older value shows
    /// through) and compaction drops the entry, its value unread.
    pub fn put_with_expiry(&mut self, key: &[u8], value: &[u8], expires_at_ms: u64) {
        self.rep.push(ValueKind::ExpiringValue as u8);
        put_length_prefixed(&mut self.rep, key);
        put_varint64(&mut self.rep, (EXPIRY_LEN + value.len()) as u64);
        expiry::join(&mut self.rep, expires_at_ms, value);
        self.count += 1;
    }

    /// Removes `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.rep.push(ValueKind::Deletion as u8);
        put_length_prefixed(&mut self.rep, key);
        self.count += 1;
    }

    /// Adds a merge operand for `key`, which the database's merge operator
    /// combines with the key's value (see [`crate::MergeOperator`]).
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) {
        self.rep.push(ValueKind::Merge as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, operand);
        self.count += 1;
    }

    /// Appends an entry of `kind` as decoded from another batch, or, with
    /// `ValueRef`, a value handle in place of a value a value log took.
    pub(crate) fn add_entry(&mut self, kind: ValueKind, key: &[u8], value: &[u8]) {
        self.rep.push(kind as u8);
        put_length_prefixed(&mut self.rep, key);
        if kind != ValueKind::Deletion {
            put_length_prefixed(&mut self.rep, value);
        }
        self.count += 1;
    }

    /// Appends every update of `other`, after this batch's own (RocksDB's
    /// `WriteBatchInternal::Append`): one batch, applied atomically, of
    /// several built apart.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[HEADER_LEN..]);
        self.count += other.count;
    }

    /// The updates, in the order they were added (RocksDB's
    /// `WriteBatch::Iterate`): for a caller that keeps its own view of
    /// what a batch will change before it is written.
    pub fn ops(&self) -> impl Iterator<Item = BatchOp<'_>> {
        // A batch built through this API always decodes; value handles
        // are only in the batches the WAL-time separation builds inside
        // the engine, never in one a caller holds.
        self.entries().filter_map(|e| {
            let e = e.ok()?;
            let split = expiry::split(e.kind, e.value).ok()?;
            Some(match split.kind {
                ValueKind::Value => BatchOp::Put {
                    key: e.key,
                    value: split.value,
                    expires_at_ms: split.expires_at,
                },
                ValueKind::Deletion => BatchOp::Delete { key: e.key },
                ValueKind::Merge => BatchOp::Merge {
                    key: e.key,
                    operand: split.value,
                },
                _ => return None,
            })
        })
    }

    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_LEN);
        self.count = 0;
    }

    /// Number of updates.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the encoded batch.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Checks the size limits, so that nothing of a bad batch is written;
    /// returns the bytes of its keys and values, and whether it holds a
    /// merge operand.
    pub(crate) fn validate(&self) -> Result<(u64, bool)> {
        let mut bytes = 0u64;
        let mut merges = false;
        for e in self.entries() {
            let e = e?;
            if e.key.len() > MAX_KEY_SIZE {
                return Err(Error::InvalidArgument(format!(
                    "key of {} bytes exceeds the limit of {MAX_KEY_SIZE}",
                    e.key.len()
                )));
            }
            let value_len = expiry::split(e.kind, e.value)
                .map_err(|d| Error::InvalidArgument(d.0.to_string()))?
                .value
                .len();
            if value_len > MAX_VALUE_SIZE {
                return Err(Error::InvalidArgument(format!(
                    "value of {value_len} bytes exceeds the limit of {MAX_VALUE_SIZE}"
                )));
            }
            bytes += (e.key.len() + e.value.len()) as u64;
            merges |= e.kind == ValueKind::Merge;
        }
        Ok((bytes, merges))
    }

    /// Stamps the first sequence number and returns the WAL payload.
    pub(crate) fn encode_with_seq(&mut self, seq: SeqNo) -> &[u8] {
        let mut header = Vec::with_capacity(HEADER_LEN);
        put_fixed64(&mut header, seq);
        put_fixed32(&mut header, self.count);
        self.rep[..HEADER_LEN].copy_from_slice(&header);
        &self.rep
    }

    pub(crate) fn entries(&self) -> Entries<'_> {
        Entries {
            d: Decoder::new(&self.rep[HEADER_LEN..]),
            left: self.count,
        }
    }

    /// Decodes a WAL payload into `(first seq, batch)`.
    pub(crate) fn decode(payload: &[u8]) -> std::result::Result<(SeqNo, WriteBatch), &'static str> {
        let mut d = Decoder::new(payload);
        let seq = d.fixed64().map_err(|e| e.0)?;
        let count = d.fixed32().map_err(|e| e.0)?;
        // Replay gives the entries `seq`, `seq + 1`, …: each must be a
        // sequence number an internal key can hold.
        if seq.saturating_add(u64::from(count)) > MAX_SEQ + 1 {
            return Err("batch sequence numbers beyond the largest");
        }
        // Validate the whole body now, so that replay never meets bad bytes.
        let mut d = Decoder::new(&payload[HEADER_LEN..]);
        for _ in 0..count {
            skip_entry(&mut d).ok_or("malformed batch entry")?;
        }
        if !d.is_empty() {
            return Err("trailing bytes after batch entries");
        }
        let batch = WriteBatch {
            rep: payload.to_vec(),
            count,
        };
        Ok((seq, batch))
    }
}

fn skip_entry(d: &mut Decoder<'_>) -> Option<()> {
    let kind = ValueKind::from_u8(d.u8().ok()?)?;
    d.length_prefixed().ok()?;
    match kind {
        ValueKind::Deletion => Some(()),
        ValueKind::Value | ValueKind::Merge => d.length_prefixed().ok().map(|_| ()),
        ValueKind::ExpiringValue => {
            let stored = d.length_prefixed().ok()?;
            expiry::split(kind, stored).ok().map(|_| ())
        }
        // Replay resolves the handle: it must decode.
        ValueKind::ValueRef | ValueKind::ExpiringValueRef => {
            let stored = d.length_prefixed().ok()?;
            let handle = expiry::split(kind, stored).ok()?.value;
            ValueHandle::decode(handle).ok().map(|_| ())
        }
    }
}

pub(crate) struct Entries<'a> {
    d: Decoder<'a>,
    left: u32,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<BatchEntry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let corrupt = |r: &str| Error::corruption("<write batch>", 0, r.to_string());
        let entry = (|| {
            let kind = self.d.u8().map_err(|e| corrupt(e.0))?;
            let kind =
                ValueKind::from_u8(kind).ok_or_else(|| corrupt("unknown kind in write batch"))?;
            let key = self.d.length_prefixed().map_err(|e| corrupt(e.0))?;
            let value = if kind == ValueKind::Deletion {
                &[][..]
            } else {
                self.d.length_prefixed().map_err(|e| corrupt(e.0))?
            };
            Ok(BatchEntry { kind, key, value })
        })();
        if entry.is_err() {
            self.left = 0;
        }
        Some(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_give_back_what_was_added_and_append_joins_batches() {
        let mut a = WriteBatch::new();
        a.put(b"k1", b"v1");
        a.delete(b"k2");
        let mut b = WriteBatch::new();
        b.put_with_expiry(b"k3", b"v3", 77);
        b.merge(b"k1", b"+");
        a.append(&b);
        assert_eq!(a.len(), 4);
        let ops: Vec<_> = a.ops().collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put {
                    key: b"k1",
                    value: b"v1",
                    expires_at_ms: None
                },
                BatchOp::Delete { key: b"k2" },
                BatchOp::Put {
                    key: b"k3",
                    value: b"v3",
                    expires_at_ms: Some(77)
                },
                BatchOp::Merge {
                    key: b"k1",
                    operand: b"+"
                },
            ]
        );
        assert!(a.validate().unwrap().1);
        let payload = a.encode_with_seq(9).to_vec();
        let (_, decoded) = WriteBatch::decode(&payload).unwrap();
        assert_eq!(decoded.ops().count(), 4);
    }

    #[test]
    fn round_trip_through_wal_payload() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"", b"");
        b.merge(b"k3", b"+1");
        let payload = b.encode_with_seq(42).to_vec();
        let (seq, d) = WriteBatch::decode(&payload).unwrap();
        assert_eq!(seq, 42);
        assert_eq!(d.len(), 4);
        assert!(d.validate().unwrap().1);
        let got: Vec<_> = d.entries().map(|e| e.unwrap()).collect();
        assert_eq!(
            got[0],
            BatchEntry {
                kind: ValueKind::Value,
                key: b"k1",
                value: b"v1"
            }
        );
        assert_eq!(
            got[1],
            BatchEntry {
                kind: ValueKind::Deletion,
                key: b"k2",
                value: b""
            }
        );
        assert_eq!(got[2].key, b"");
        assert_eq!(
            got[3],
            BatchEntry {
                kind: ValueKind::Merge,
                key: b"k3",
                value: b"+1"
            }
        );
    }

    #[test]
    fn every_truncation_and_flip_is_rejected_or_harmless() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.delete(b"gone");
        let payload = b.encode_with_seq(7).to_vec();
        for cut in 0..payload.len() {
            assert!(WriteBatch::decode(&payload[..cut]).is_err(), "cut {cut}");
        }
        // Record checksums catch flips in the WAL; here we only require that
        // decoding never panics.
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 0xff;
            let _ = WriteBatch::decode(&bad);
        }
    }

    #[test]
    fn value_handles_round_trip_and_a_damaged_one_is_refused() {
        let h = ValueHandle {
            logical_file: crate::base::FileNumber(12),
            ordinal: 3,
            offset: 4096,
            len: 70_000,
        };
        let mut b = WriteBatch::new();
        b.put(b"small", b"v");
        b.add_entry(ValueKind::ValueRef, b"big", &h.encoded());
        b.delete(b"gone");
        let payload = b.encode_with_seq(9).to_vec();
        let (_, d) = WriteBatch::decode(&payload).unwrap();
        let got: Vec<_> = d.entries().map(|e| e.unwrap()).collect();
        assert_eq!(got[1].kind, ValueKind::ValueRef);
        assert_eq!(ValueHandle::decode(got[1].value).unwrap(), h);
        assert_eq!(got[2].kind, ValueKind::Deletion);
        // A handle with a byte too many does not decode: the batch is
        // refused rather than replayed.
        let mut bad = WriteBatch::new();
        let mut long = h.encoded();
        long.push(0);
        bad.add_entry(ValueKind::ValueRef, b"big", &long);
        assert!(WriteBatch::decode(bad.encode_with_seq(1)).is_err());
    }

    /// Found by the write_batch and wal fuzz targets: a batch whose
    /// sequence numbers run past `MAX_SEQ` was accepted, and replaying it
    /// overflowed the internal key's tag (a debug assertion; wrong seqs in
    /// release).
    #[test]
    fn sequence_numbers_beyond_the_largest_are_refused() {
        let fuzzed = [100, 0, 0, 0, 0, 0, 0, 7, 1, 0, 0, 0, 1, 0, 0];
        assert!(WriteBatch::decode(&fuzzed).is_err());
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        assert!(WriteBatch::decode(b.encode_with_seq(MAX_SEQ)).is_ok());
        b.delete(b"k");
        assert!(WriteBatch::decode(b.encode_with_seq(MAX_SEQ - 1)).is_ok());
        assert!(WriteBatch::decode(b.encode_with_seq(MAX_SEQ)).is_err());
        assert!(WriteBatch::decode(b.encode_with_seq(u64::MAX)).is_err());
        // An empty batch takes no sequence number.
        assert!(WriteBatch::decode(WriteBatch::new().encode_with_seq(MAX_SEQ + 1)).is_ok());
    }

    #[test]
    fn oversized_key_and_value_are_invalid() {
        let mut b = WriteBatch::new();
        b.put(&vec![0; MAX_KEY_SIZE + 1], b"v");
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));
        let mut b = WriteBatch::new();
        b.put(&vec![0; MAX_KEY_SIZE], b"v");
        b.validate().unwrap();
    }
}
