//! Little-endian fixed-width and LEB128 varint encodings, and a bounds-checked
//! decoder that never panics on hostile input.

pub(crate) fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

pub(crate) fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends `varint32(len) ++ bytes`.
pub(crate) fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Reads a fixed32 at `pos`; the caller guarantees the bytes exist.
pub(crate) fn decode_fixed32(src: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&src[..4]);
    u32::from_le_bytes(b)
}

/// Reads a fixed64; the caller guarantees the bytes exist.
pub(crate) fn decode_fixed64(src: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&src[..8]);
    u64::from_le_bytes(b)
}

/// Why a decode failed; callers attach the file and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeError(pub &'static str);

/// A cursor over untrusted bytes. Every read checks bounds and returns
/// `DecodeError` instead of panicking.
#[derive(Debug, Clone)]
pub(crate) struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or(DecodeError("truncated byte"))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn fixed32(&mut self) -> Result<u32, DecodeError> {
        let s = self
            .bytes(4)
            .map_err(|_| DecodeError("truncated fixed32"))?;
        Ok(decode_fixed32(s))
    }

    pub(crate) fn fixed64(&mut self) -> Result<u64, DecodeError> {
        let s = self
            .bytes(8)
            .map_err(|_| DecodeError("truncated fixed64"))?;
        Ok(decode_fixed64(s))
    }

    pub(crate) fn varint64(&mut self) -> Result<u64, DecodeError> {
        let mut result = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8().map_err(|_| DecodeError("truncated varint"))?;
            if shift == 63 && b > 1 {
                return Err(DecodeError("varint overflows 64 bits"));
            }
            result |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(result);
            }
        }
        Err(DecodeError("varint too long"))
    }

    pub(crate) fn varint32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.varint64()?).map_err(|_| DecodeError("varint overflows 32 bits"))
    }

    /// A varint used as a length or count: must fit in `usize`.
    pub(crate) fn varint_usize(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.varint64()?).map_err(|_| DecodeError("length overflows usize"))
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(DecodeError("truncated bytes"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn length_prefixed(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.varint_usize()?;
        self.bytes(n)
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let values = [
            0u64,
            1,
            127,
            128,
            300,
            1 << 31,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        let mut buf = Vec::new();
        for &v in &values {
            put_varint64(&mut buf, v);
        }
        let mut d = Decoder::new(&buf);
        for &v in &values {
            assert_eq!(d.varint64(), Ok(v));
        }
        assert!(d.is_empty());
    }

    #[test]
    fn fixed_round_trip() {
        let mut buf = Vec::new();
        put_fixed32(&mut buf, 0xdead_beef);
        put_fixed64(&mut buf, 0x0123_4567_89ab_cdef);
        put_length_prefixed(&mut buf, b"abc");
        let mut d = Decoder::new(&buf);
        assert_eq!(d.fixed32(), Ok(0xdead_beef));
        assert_eq!(d.fixed64(), Ok(0x0123_4567_89ab_cdef));
        assert_eq!(d.length_prefixed(), Ok(&b"abc"[..]));
    }

    #[test]
    fn truncated_and_overlong_input_is_an_error_not_a_panic() {
        assert!(Decoder::new(&[0x80]).varint64().is_err());
        assert!(Decoder::new(&[0xff; 11]).varint64().is_err());
        assert!(Decoder::new(&[0xff, 0xff, 0xff, 0xff, 0x1f])
            .varint32()
            .is_err());
        assert!(Decoder::new(&[1, 2, 3]).fixed32().is_err());
        assert!(Decoder::new(&[5, 1]).length_prefixed().is_err());
        let mut d = Decoder::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(d.varint64(), Ok(u64::MAX));
    }
}
