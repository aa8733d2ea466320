//! Bitmap commands over strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP.
//! A bitmap is a string, bit 0 the most significant bit of byte 0, as in
//! Redis. SETBIT rewrites the whole string (a read-modify-write under the
//! key's lock), so it costs the string's size, not Redis's O(1); kvrocks
//! splits bitmaps into 1 KiB fragments for that, which is left for when
//! bitmaps of megabytes are asked for.

use cleave::{ReadOptions, WriteBatch};

use super::strings::check_key;
use super::{int_arg, is, Ctx};
use crate::error::CmdError;
use crate::keyspace::meta_key;
use crate::resp::Reply;
use crate::store::put_string;

type Result = std::result::Result<Reply, CmdError>;

/// Highest bit offset plus one: Redis's 512 MiB strings.
const MAX_BITS: u64 = 1 << 32;

fn bit_offset(arg: &[u8]) -> std::result::Result<u64, CmdError> {
    u64::try_from(int_arg(arg).unwrap_or(-1))
        .ok()
        .filter(|&o| o < MAX_BITS)
        .ok_or_else(|| CmdError::err("bit offset is not an integer or out of range"))
}

fn bit_of(v: &[u8], offset: u64) -> u8 {
    let byte = (offset / 8) as usize;
    v.get(byte).map_or(0, |b| (b >> (7 - offset % 8)) & 1)
}

pub fn setbit(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    let offset = bit_offset(&args[2])?;
    let on = match args[3].as_slice() {
        b"0" => false,
        b"1" => true,
        _ => return Err(CmdError::err("bit is not an integer or out of range")),
    };
    check_key(key)?;
    let byte = (offset / 8) as usize;
    if byte as u64 + 1 > ctx.shared.limits.read().proto_max_bulk_len {
        return Err(CmdError::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let (mut v, expire) = store
        .string_with_expire(&ReadOptions::new(), db, key)?
        .unwrap_or_default();
    let old = bit_of(&v, offset);
    if v.len() <= byte {
        v.resize(byte + 1, 0);
    }
    let mask = 1u8 << (7 - offset % 8);
    if on {
        v[byte] |= mask;
    } else {
        v[byte] &= !mask;
    }
    let mut b = WriteBatch::new();
    put_string(&mut b, db, key, &v, expire);
    store.write(b)?;
    Ok(Reply::Int(i64::from(old)))
}

pub fn getbit(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let offset = bit_offset(&args[2])?;
    let v = ctx
        .shared
        .store
        .string(&ReadOptions::new(), ctx.client.db, &args[1])?
        .unwrap_or_default();
    Ok(Reply::Int(i64::from(bit_of(&v, offset))))
}

/// A BITCOUNT or BITPOS range over a string of `len` bytes, as bit
/// indexes `first..=last`, or `None` when it is empty. `unit_bits` is 8
/// for BYTE ranges, 1 for BIT ones.
fn bit_range(start: i64, end: i64, len: u64, unit_bits: u64) -> Option<(u64, u64)> {
    let total = (len * 8 / unit_bits) as i128;
    let norm = |i: i64| {
        let i = if i < 0 { total + i as i128 } else { i as i128 };
        i.max(0)
    };
    let (s, e) = (norm(start), norm(end).min(total - 1));
    if total == 0 || s > e {
        return None;
    }
    let first = s as u64 * unit_bits;
    let last = (e as u64 + 1) * unit_bits - 1;
    Some((first, last))
}

/// The optional `start end [BYTE|BIT]` of BITCOUNT and BITPOS: the range
/// and the bits per unit.
fn range_unit(args: &[Vec<u8>]) -> std::result::Result<Option<(i64, Option<i64>, u64)>, CmdError> {
    let unit = |a: Option<&Vec<u8>>| match a {
        None => Ok(8),
        Some(a) if is(a, "byte") => Ok(8),
        Some(a) if is(a, "bit") => Ok(1),
        Some(_) => Err(CmdError::Syntax),
    };
    Ok(match args {
        [] => None,
        [s] => Some((int_arg(s)?, None, 8)),
        [s, e, rest @ ..] if rest.len() <= 1 => {
            Some((int_arg(s)?, Some(int_arg(e)?), unit(rest.first())?))
        }
        _ => return Err(CmdError::Syntax),
    })
}

pub fn bitcount(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let range = range_unit(&args[2..])?;
    if matches!(range, Some((_, None, _))) {
        return Err(CmdError::Syntax);
    }
    let v = ctx
        .shared
        .store
        .string(&ReadOptions::new(), ctx.client.db, &args[1])?
        .unwrap_or_default();
    let (start, end, unit) = match range {
        Some((s, Some(e), u)) => (s, e, u),
        _ => (0, -1, 8),
    };
    let Some((first, last)) = bit_range(start, end, v.len() as u64, unit) else {
        return Ok(Reply::Int(0));
    };
    let n: u64 = (first..=last).map(|i| u64::from(bit_of(&v, i))).sum();
    Ok(Reply::Int(n as i64))
}

pub fn bitpos(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let bit = match args[2].as_slice() {
        b"0" => 0u8,
        b"1" => 1u8,
        _ if super::parse_i64(&args[2]).is_some() => {
            return Err(CmdError::err("The bit argument must be 1 or 0."))
        }
        _ => return Err(CmdError::NotInteger),
    };
    let range = range_unit(&args[3..])?;
    let v = ctx
        .shared
        .store
        .string(&ReadOptions::new(), ctx.client.db, &args[1])?;
    let Some(v) = v else {
        return Ok(Reply::Int(if bit == 1 { -1 } else { 0 }));
    };
    let (start, end, unit) = match range {
        None => (0, None, 8),
        Some(r) => r,
    };
    let Some((first, last)) = bit_range(start, end.unwrap_or(-1), v.len() as u64, unit) else {
        return Ok(Reply::Int(-1));
    };
    if let Some(i) = (first..=last).find(|&i| bit_of(&v, i) == bit) {
        return Ok(Reply::Int(i as i64));
    }
    // Looking for a clear bit with no end given, Redis counts the string
    // as followed by zeros.
    Ok(Reply::Int(if bit == 0 && end.is_none() {
        (last + 1) as i64
    } else {
        -1
    }))
}

pub fn bitop(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let op = args[1].to_ascii_lowercase();
    let (dest, sources) = (&args[2], &args[3..]);
    if !matches!(op.as_slice(), b"and" | b"or" | b"xor" | b"not") {
        return Err(CmdError::Syntax);
    }
    if op == b"not" && sources.len() != 1 {
        return Err(CmdError::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    check_key(dest)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let keys: Vec<&[u8]> = args[2..].iter().map(Vec::as_slice).collect();
    let _lock = store.lock(db, &keys)?;
    let snapshot = store.snapshot();
    let r = crate::store::Store::read_at(&snapshot);
    let mut values = Vec::with_capacity(sources.len());
    for k in sources {
        values.push(store.string(&r, db, k)?.unwrap_or_default());
    }
    let len = values.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    let out: Vec<u8> = (0..len)
        .map(|i| {
            let mut bytes = values.iter().map(|v| byte(v, i));
            let first = bytes.next().unwrap_or(0);
            match op.as_slice() {
                b"and" => bytes.fold(first, |a, b| a & b),
                b"or" => bytes.fold(first, |a, b| a | b),
                b"xor" => bytes.fold(first, |a, b| a ^ b),
                _ => !first,
            }
        })
        .collect();
    let old = store.meta(&r, db, dest)?;
    let mut b = WriteBatch::new();
    if out.is_empty() {
        if old.is_none() {
            return Ok(Reply::Int(0));
        }
        b.delete(&meta_key(db, dest));
    } else {
        put_string(&mut b, db, dest, &out, 0);
    }
    store.write(b)?;
    if let Some(old) = old {
        store.ended(db, dest, &old);
    }
    Ok(Reply::Int(out.len() as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_ranges_follow_redis() {
        assert_eq!(bit_range(0, -1, 3, 8), Some((0, 23)));
        assert_eq!(bit_range(1, 1, 3, 8), Some((8, 15)));
        assert_eq!(bit_range(-1, -1, 3, 8), Some((16, 23)));
        assert_eq!(bit_range(5, 30, 3, 1), Some((5, 23)));
        assert_eq!(bit_range(2, 1, 3, 8), None);
        assert_eq!(bit_range(0, -1, 0, 8), None);
        assert_eq!(bit_range(-100, 100, 1, 8), Some((0, 7)));
    }

    #[test]
    fn bit_zero_is_the_high_bit_of_byte_zero() {
        assert_eq!(bit_of(&[0x80], 0), 1);
        assert_eq!(bit_of(&[0x80], 7), 0);
        assert_eq!(bit_of(&[0x01], 7), 1);
        assert_eq!(bit_of(&[0x01], 100), 0);
    }
}
