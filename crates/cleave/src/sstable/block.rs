//! Blocks of sorted entries with prefix-compressed keys and restart points:
//! the layout of data, index, metaindex and properties blocks.
//!
//! Entry: `varint shared | varint unshared | varint value_len | key delta |
//! value`; then `fixed32 restart offset` × n and `fixed32 n`. Keys at
//! restart points are stored whole (shared = 0) so that a seek can binary
//! search them.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::base::coding::{decode_fixed32, put_fixed32, put_varint64, DecodeError, Decoder};
use crate::base::key::{self, TAG_LEN};

/// Accumulates entries for one block.
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    num_entries: usize,
}

impl BlockBuilder {
    pub(crate) fn new(restart_interval: usize) -> Self {
        assert!(restart_interval >= 1);
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval,
            last_key: Vec::new(),
            num_entries: 0,
        }
    }

    /// REQUIRES: `key` sorts after every key added since the last `finish`.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.offset_u32());
            self.counter = 0;
            0
        };
        put_varint64(&mut self.buf, shared as u64);
        put_varint64(&mut self.buf, (key.len() - shared) as u64);
        put_varint64(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
        self.num_entries += 1;
    }

    fn offset_u32(&self) -> u32 {
        // A block is cut at block_size (≤ 64 MiB) plus one entry (≤ 1 GiB +
        // 64 KiB), so its offsets always fit.
        debug_assert!(self.buf.len() <= u32::MAX as usize);
        self.buf.len() as u32
    }

    /// Size of the block if finished now.
    pub(crate) fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    #[cfg(test)]
    pub(crate) fn num_entries(&self) -> usize {
        self.num_entries
    }

    /// Returns the encoded block and resets the builder for the next one.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.num_entries = 0;
        out
    }
}

/// How keys of a block are ordered and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// Internal keys (data and index blocks): at least `TAG_LEN` bytes,
    /// ordered by `base::key::compare`.
    Internal,
    /// Plain byte strings (metaindex and properties blocks).
    Bytewise,
}

impl KeyOrder {
    fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyOrder::Internal => key::compare(a, b),
            KeyOrder::Bytewise => a.cmp(b),
        }
    }
}

/// A decoded, checksum-verified block whose restart array has been checked.
#[derive(Debug)]
pub(crate) struct Block {
    data: Vec<u8>,
    /// Offset of the restart array: entries live in `data[..restart_offset]`.
    restart_offset: usize,
    num_restarts: usize,
}

impl Block {
    pub(crate) fn new(data: Vec<u8>) -> Result<Block, DecodeError> {
        let len = data.len();
        let count_at = len
            .checked_sub(4)
            .ok_or(DecodeError("block too short for its restart count"))?;
        let n = decode_fixed32(&data[count_at..]) as usize;
        if n == 0 {
            return Err(DecodeError("block has no restart points"));
        }
        if n > count_at / 4 {
            return Err(DecodeError("restart count exceeds block size"));
        }
        let restart_offset = count_at - 4 * n;
        let mut d = Decoder::new(&data[restart_offset..count_at]);
        let mut prev = None;
        for _ in 0..n {
            let r = d.fixed32()? as usize;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restart_offset,
            };
            if !ok {
                return Err(DecodeError("restart points out of order or out of range"));
            }
            prev = Some(r);
        }
        Ok(Block {
            data,
            restart_offset,
            num_restarts: n,
        })
    }

    /// Bytes of memory the block holds, for cache charging.
    pub(crate) fn charge(&self) -> usize {
        self.data.len()
    }

    fn restart_point(&self, i: usize) -> usize {
        // Validated in `new`; out-of-range reads become the end of block.
        let at = self.restart_offset + 4 * i;
        self.data
            .get(at..at + 4)
            .map_or(self.restart_offset, |b| decode_fixed32(b) as usize)
    }

    pub(crate) fn iter(self: &Arc<Self>, order: KeyOrder) -> BlockIter {
        BlockIter {
            current: self.restart_offset,
            next_offset: self.restart_offset,
            block: self.clone(),
            order,
            restart_index: 0,
            key: Vec::new(),
            value: (0, 0),
        }
    }
}

/// A cursor over one block. Errors are `DecodeError`s; the table layer adds
/// the file and block offset.
#[derive(Debug)]
pub(crate) struct BlockIter {
    block: Arc<Block>,
    order: KeyOrder,
    /// Offset of the current entry; `restart_offset` when not valid.
    current: usize,
    next_offset: usize,
    /// Index of the restart point at or before `current`.
    restart_index: usize,
    key: Vec<u8>,
    value: (usize, usize),
}

impl BlockIter {
    pub(crate) fn valid(&self) -> bool {
        self.current < self.block.restart_offset
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    pub(crate) fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value.0..self.value.1)
            .unwrap_or_default()
    }

    fn invalidate(&mut self) {
        self.current = self.block.restart_offset;
        self.next_offset = self.block.restart_offset;
        self.key.clear();
    }

    fn fail<T>(&mut self, e: DecodeError) -> Result<T, DecodeError> {
        self.invalidate();
        Err(e)
    }

    /// Decodes the entry at `next_offset` into the cursor, or invalidates
    /// the cursor at the end of the entries.
    fn parse_next(&mut self) -> Result<(), DecodeError> {
        let off = self.next_offset;
        if off >= self.block.restart_offset {
            self.invalidate();
            return Ok(());
        }
        let entries = &self.block.data[..self.block.restart_offset];
        let mut d = Decoder::new(entries.get(off..).unwrap_or_default());
        let parsed = (|| {
            let shared = d.varint_usize()?;
            let unshared = d.varint_usize()?;
            let value_len = d.varint_usize()?;
            if shared > self.key.len() {
                return Err(DecodeError(
                    "entry shares more bytes than the previous key has",
                ));
            }
            let delta = d.bytes(unshared)?;
            let value_start = off + d.position();
            d.bytes(value_len)?;
            Ok((shared, delta, value_start, value_len))
        })();
        let (shared, delta, value_start, value_len) = match parsed {
            Ok(p) => p,
            Err(e) => return self.fail(e),
        };
        self.key.truncate(shared);
        self.key.extend_from_slice(delta);
        if self.order == KeyOrder::Internal && self.key.len() < TAG_LEN {
            return self.fail(DecodeError("internal key shorter than its tag"));
        }
        self.current = off;
        self.next_offset = off + d.position();
        self.value = (value_start, value_start + value_len);
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) <= self.current
        {
            self.restart_index += 1;
        }
        Ok(())
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.next_offset = self.block.restart_point(index);
        self.current = self.block.restart_offset;
    }

    /// The whole key stored at restart point `index`.
    fn restart_key(&self, index: usize) -> Result<&[u8], DecodeError> {
        let off = self.block.restart_point(index);
        let entries = &self.block.data[..self.block.restart_offset];
        let mut d = Decoder::new(entries.get(off..).unwrap_or_default());
        if d.varint_usize()? != 0 {
            return Err(DecodeError("key at a restart point is prefix-compressed"));
        }
        let unshared = d.varint_usize()?;
        d.varint_usize()?;
        let k = d.bytes(unshared)?;
        if self.order == KeyOrder::Internal && k.len() < TAG_LEN {
            return Err(DecodeError("internal key shorter than its tag"));
        }
        Ok(k)
    }

    pub(crate) fn seek_to_first(&mut self) -> Result<(), DecodeError> {
        self.seek_to_restart(0);
        self.parse_next()
    }

    pub(crate) fn seek_to_last(&mut self) -> Result<(), DecodeError> {
        self.seek_to_restart(self.block.num_restarts - 1);
        self.parse_next()?;
        while self.valid() && self.next_offset < self.block.restart_offset {
            self.parse_next()?;
        }
        Ok(())
    }

    /// Positions at the first entry ≥ `target`.
    pub(crate) fn seek(&mut self, target: &[u8]) -> Result<(), DecodeError> {
        // Find the last restart point whose key is < target.
        let (mut left, mut right) = (0, self.block.num_restarts - 1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let ord = match self.restart_key(mid) {
                Ok(k) => self.order.compare(k, target),
                Err(e) => return self.fail(e),
            };
            if ord == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        loop {
            self.parse_next()?;
            if !self.valid() || self.order.compare(&self.key, target) != Ordering::Less {
                return Ok(());
            }
        }
    }

    /// Positions at the last entry ≤ `target`.
    #[cfg(test)]
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) -> Result<(), DecodeError> {
        self.seek(target)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        if self.order.compare(&self.key, target) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }

    pub(crate) fn next(&mut self) -> Result<(), DecodeError> {
        debug_assert!(self.valid());
        self.parse_next()
    }

    pub(crate) fn prev(&mut self) -> Result<(), DecodeError> {
        debug_assert!(self.valid());
        let original = self.current;
        let mut index = self.restart_index;
        while self.block.restart_point(index) >= original {
            if index == 0 {
                self.invalidate();
                return Ok(());
            }
            index -= 1;
        }
        self.seek_to_restart(index);
        loop {
            self.parse_next()?;
            if !self.valid() {
                // The entry we started from vanished: impossible for a
                // consistent block.
                return self.fail(DecodeError("entry offsets are inconsistent"));
            }
            if self.next_offset >= original {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::base::{InternalKey, ValueKind};

    fn ikey(user: &str, seq: u64) -> Vec<u8> {
        InternalKey::new(user.as_bytes(), seq, ValueKind::Value)
            .encoded()
            .to_vec()
    }

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        assert_eq!(b.num_entries(), entries.len());
        let size = b.size_estimate();
        let data = b.finish();
        assert_eq!(data.len(), size);
        assert!(b.is_empty());
        Arc::new(Block::new(data).unwrap())
    }

    fn sample() -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v = Vec::new();
        for i in 0..200u64 {
            let user = format!("key{:04}", i / 2);
            // Two versions of every user key, newest first.
            v.push((
                ikey(&user, 1000 - i),
                format!("v{i}").repeat((i % 5) as usize).into_bytes(),
            ));
        }
        v
    }

    #[test]
    fn forward_backward_and_seeks_match_the_entries() {
        let entries = sample();
        for interval in [1, 2, 16, 1000] {
            let block = build(&entries, interval);
            let mut it = block.iter(KeyOrder::Internal);
            it.seek_to_first().unwrap();
            for (k, v) in &entries {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.next().unwrap();
            }
            assert!(!it.valid());
            it.seek_to_last().unwrap();
            for (k, v) in entries.iter().rev() {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.prev().unwrap();
            }
            assert!(!it.valid());
            for (i, (k, _)) in entries.iter().enumerate() {
                it.seek(k).unwrap();
                assert_eq!(it.key(), &k[..]);
                it.seek_for_prev(k).unwrap();
                assert_eq!(it.key(), &k[..]);
                // Seek to a user key at a high sequence lands on its newest version.
                let user = key::user_key(k);
                it.seek(InternalKey::for_seek(user, u64::MAX >> 8).encoded())
                    .unwrap();
                assert_eq!(it.key(), &entries[i - i % 2].0[..]);
            }
            it.seek(&ikey("zzz", 1)).unwrap();
            assert!(!it.valid());
            it.seek(&ikey("a", 1)).unwrap();
            assert_eq!(it.key(), &entries[0].0[..]);
            it.seek_for_prev(&ikey("a", 1)).unwrap();
            assert!(!it.valid());
            it.seek_for_prev(&ikey("zzz", 1)).unwrap();
            assert_eq!(it.key(), &entries[entries.len() - 1].0[..]);
            // Between two user keys: seek_for_prev gives the older version of the first.
            it.seek_for_prev(&ikey("key0003a", 5)).unwrap();
            assert_eq!(it.key(), &entries[7].0[..]);
        }
    }

    #[test]
    fn empty_block_is_valid_and_empty() {
        let block = build(&[], 16);
        let mut it = block.iter(KeyOrder::Internal);
        it.seek_to_first().unwrap();
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        assert!(!it.valid());
        it.seek(&ikey("a", 1)).unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn bad_restart_arrays_are_rejected() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_err());
        assert!(Block::new(vec![0xff, 0xff, 0, 0]).is_err());
        // Restart 0 pointing at 5 rather than 0.
        assert!(Block::new(vec![9, 9, 9, 9, 9, 5, 0, 0, 0, 1, 0, 0, 0]).is_err());
    }

    /// Without the block checksum (the table layer adds it) a flipped byte
    /// may change data, but it must never panic.
    #[test]
    fn flipped_bytes_never_panic() {
        let entries = sample();
        let mut b = BlockBuilder::new(4);
        for (k, v) in entries.iter().take(40) {
            b.add(k, v);
        }
        let data = b.finish();
        for i in 0..data.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = data.clone();
                bad[i] ^= flip;
                let Ok(block) = Block::new(bad) else { continue };
                let block = Arc::new(block);
                let mut it = block.iter(KeyOrder::Internal);
                let mut steps = 0;
                if it.seek_to_first().is_ok() {
                    while it.valid() && it.next().is_ok() {
                        steps += 1;
                        assert!(steps <= data.len());
                    }
                }
                if it.seek_to_last().is_ok() {
                    while it.valid() && it.prev().is_ok() {
                        steps += 1;
                        assert!(steps <= 2 * data.len());
                    }
                }
                let _ = it.seek(&entries[17].0);
                let _ = it.seek_for_prev(&entries[17].0);
            }
        }
    }
}
