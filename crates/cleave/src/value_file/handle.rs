//! The value handle: what an sstable entry of kind `ValueRef` stores in
//! place of its value.

use crate::base::coding::{put_varint32, put_varint64, DecodeError, Decoder};
use crate::base::FileNumber;

/// Names one record of a logical value file, and where it was written.
///
/// `(logical_file, ordinal)` identifies the record for ever; `offset` and
/// `len` are its place in the physical file the logical file was born in,
/// valid as long as the logical file lives there (GC moves it and the new
/// place is found through the record index, so handles never change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ValueHandle {
    pub logical_file: FileNumber,
    /// Position of the record among its logical file's records: 0, 1, 2, …
    pub ordinal: u64,
    /// Offset of the record's first byte in the birth physical file.
    pub offset: u64,
    /// Bytes of the whole record, checksum included.
    pub len: u32,
}

/// Longest encoding: three varint64 and one varint32.
#[cfg(test)]
pub(crate) const MAX_HANDLE_LEN: usize = 10 + 10 + 10 + 5;

impl ValueHandle {
    /// Appends `varint logical_file | varint ordinal | varint offset |
    /// varint len`.
    pub(crate) fn encode(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.logical_file.0);
        put_varint64(dst, self.ordinal);
        put_varint64(dst, self.offset);
        put_varint32(dst, self.len);
    }

    #[cfg(test)]
    pub(crate) fn encoded(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_HANDLE_LEN);
        self.encode(&mut v);
        v
    }

    /// Reads one handle from `d`, leaving the cursor after it.
    pub(crate) fn decode_from(d: &mut Decoder<'_>) -> Result<ValueHandle, DecodeError> {
        Ok(ValueHandle {
            logical_file: FileNumber(d.varint64()?),
            ordinal: d.varint64()?,
            offset: d.varint64()?,
            len: d.varint32()?,
        })
    }

    /// Decodes a value that must be exactly one handle: an sstable value of
    /// kind `ValueRef` holds nothing else.
    pub(crate) fn decode(src: &[u8]) -> Result<ValueHandle, DecodeError> {
        let mut d = Decoder::new(src);
        let h = ValueHandle::decode_from(&mut d)?;
        if !d.is_empty() {
            return Err(DecodeError("trailing bytes after value handle"));
        }
        Ok(h)
    }
}
