//! String commands. Each one that reads before it writes holds its keys'
//! locks across both, so it is atomic as in Redis. APPEND writes a merge
//! operand (the bytes appended) instead of the whole new value: appending
//! to a large value costs the appended bytes, not a rewrite.

use cleave::{ReadOptions, WriteBatch};

use super::{int_arg, is, parse_i64, Ctx};
use crate::error::CmdError;
use crate::keyspace::{self, meta_key, string_meta, Meta};
use crate::resp::Reply;
use crate::store::Store;

type Result = std::result::Result<Reply, CmdError>;

/// Refuses a key cleave cannot store (see `MAX_KEY_AND_FIELD_BYTES`).
pub fn check_key(key: &[u8]) -> std::result::Result<(), CmdError> {
    if key.len() > keyspace::MAX_KEY_AND_FIELD_BYTES {
        return Err(CmdError::err(format!(
            "key of {} bytes: cleave-server keeps keys to {} bytes",
            key.len(),
            keyspace::MAX_KEY_AND_FIELD_BYTES
        )));
    }
    Ok(())
}

fn too_big() -> CmdError {
    CmdError::err("string exceeds maximum allowed size (proto-max-bulk-len)")
}

fn max_string(ctx: &Ctx<'_>) -> u64 {
    ctx.shared.limits.read().proto_max_bulk_len
}

pub fn get(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let v = ctx
        .shared
        .store
        .string(&ReadOptions::new(), ctx.client.db, &args[1])?;
    ctx.shared.stats.lookup(v.is_some());
    Ok(v.map_or(Reply::Nil, Reply::Bulk))
}

pub fn set(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (key, value) = (&args[1], &args[2]);
    let (mut nx, mut xx, mut get) = (false, false, false);
    for a in &args[3..] {
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            get = true;
        } else {
            // EX, PX, EXAT, PXAT and KEEPTTL come with expiry.
            return Err(CmdError::Syntax);
        }
    }
    check_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key]);
    let mut old = None;
    let mut exists = false;
    if nx || xx || get {
        match store.meta(&ReadOptions::new(), db, key)? {
            Some(Meta::String(v)) => {
                exists = true;
                old = Some(v);
            }
            Some(_) if get => return Err(CmdError::WrongType),
            Some(_) => exists = true,
            None => {}
        }
    }
    let skip = (nx && exists) || (xx && !exists);
    if !skip {
        let mut b = WriteBatch::new();
        b.put(&meta_key(db, key), &string_meta(value));
        store.write(b)?;
    }
    Ok(match (get, skip) {
        (true, _) => old.map_or(Reply::Nil, Reply::Bulk),
        (false, true) => Reply::Nil,
        (false, false) => Reply::ok(),
    })
}

pub fn getdel(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let _lock = store.lock(db, &[key]);
    let Some(v) = store.string(&ReadOptions::new(), db, key)? else {
        return Ok(Reply::Nil);
    };
    let mut b = WriteBatch::new();
    b.delete(&meta_key(db, key));
    store.write(b)?;
    Ok(Reply::Bulk(v))
}

pub fn mget(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let mut out = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        // MGET answers nil for a key of another type, never WRONGTYPE.
        out.push(match store.meta(&r, ctx.client.db, key)? {
            Some(Meta::String(v)) => Reply::Bulk(v),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// A key and its value.
type Pair<'a> = (&'a [u8], &'a [u8]);

fn pairs<'a>(name: &str, args: &'a [Vec<u8>]) -> std::result::Result<Vec<Pair<'a>>, CmdError> {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{name}' command"
        )));
    }
    let pairs: Vec<_> = args[1..]
        .chunks_exact(2)
        .map(|p| (p[0].as_slice(), p[1].as_slice()))
        .collect();
    for (k, _) in &pairs {
        check_key(k)?;
    }
    Ok(pairs)
}

pub fn mset(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let pairs = pairs("mset", args)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let keys: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
    let _lock = store.lock(db, &keys);
    let mut b = WriteBatch::new();
    for (k, v) in pairs {
        b.put(&meta_key(db, k), &string_meta(v));
    }
    store.write(b)?;
    Ok(Reply::ok())
}

pub fn msetnx(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let pairs = pairs("msetnx", args)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let keys: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
    let _lock = store.lock(db, &keys);
    for k in &keys {
        if store.meta(&ReadOptions::new(), db, k)?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    let mut b = WriteBatch::new();
    for (k, v) in pairs {
        b.put(&meta_key(db, k), &string_meta(v));
    }
    store.write(b)?;
    Ok(Reply::Int(1))
}

pub fn strlen(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let v = ctx
        .shared
        .store
        .string(&ReadOptions::new(), ctx.client.db, &args[1])?;
    Ok(Reply::Int(v.map_or(0, |v| v.len() as i64)))
}

pub fn getrange(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (Some(start), Some(end)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
        return Err(CmdError::NotInteger);
    };
    let v = ctx
        .shared
        .store
        .string(&ReadOptions::new(), ctx.client.db, &args[1])?
        .unwrap_or_default();
    Ok(Reply::Bulk(substring(&v, start, end).to_vec()))
}

/// `v[start..=end]` with Redis's negative indexes and clamping.
fn substring(v: &[u8], start: i64, end: i64) -> &[u8] {
    let len = v.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return &[];
    }
    let from_end = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (start, end) = (from_end(start), from_end(end).min(len - 1));
    if start > end {
        return &[];
    }
    &v[start as usize..=end as usize]
}

pub fn setrange(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (key, value) = (&args[1], &args[3]);
    let offset = int_arg(&args[2])?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    check_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key]);
    let old = store.string(&ReadOptions::new(), db, key)?;
    let old_len = old.as_ref().map_or(0, Vec::len);
    if value.is_empty() {
        // Redis creates nothing and changes nothing for an empty value.
        return Ok(Reply::Int(old_len as i64));
    }
    let end = (offset as u64).checked_add(value.len() as u64);
    if end.is_none_or(|e| e > max_string(ctx)) {
        return Err(too_big());
    }
    let offset = offset as usize;
    let mut v = old.unwrap_or_default();
    if v.len() < offset + value.len() {
        v.resize(offset + value.len(), 0);
    }
    v[offset..offset + value.len()].copy_from_slice(value);
    let mut b = WriteBatch::new();
    b.put(&meta_key(db, key), &string_meta(&v));
    store.write(b)?;
    Ok(Reply::Int(v.len() as i64))
}

pub fn append(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (key, value) = (&args[1], &args[2]);
    check_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key]);
    let mut b = WriteBatch::new();
    let len = match store.string(&ReadOptions::new(), db, key)? {
        None => {
            b.put(&meta_key(db, key), &string_meta(value));
            value.len()
        }
        Some(old) => {
            let len = old.len() + value.len();
            if len as u64 > max_string(ctx) {
                return Err(too_big());
            }
            // The key holds a string under this lock, so the operand lands
            // on a string's metadata value (see keyspace.rs).
            b.merge(&meta_key(db, key), value);
            len
        }
    };
    store.write(b)?;
    Ok(Reply::Int(len as i64))
}

fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> Result {
    check_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key]);
    let old = match store.string(&ReadOptions::new(), db, key)? {
        None => 0,
        Some(v) => parse_i64(&v).ok_or(CmdError::NotInteger)?,
    };
    let new = old.checked_add(by).ok_or(CmdError::Overflow)?;
    let mut b = WriteBatch::new();
    b.put(&meta_key(db, key), &string_meta(new.to_string().as_bytes()));
    store.write(b)?;
    Ok(Reply::Int(new))
}

pub fn incr(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    incr_by(ctx, &args[1], 1)
}

pub fn decr(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    incr_by(ctx, &args[1], -1)
}

pub fn incrby(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let by = int_arg(&args[2])?;
    incr_by(ctx, &args[1], by)
}

pub fn decrby(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let by = int_arg(&args[2])?;
    let by = by
        .checked_neg()
        .ok_or_else(|| CmdError::err("decrement would overflow"))?;
    incr_by(ctx, &args[1], by)
}

#[cfg(test)]
mod tests {
    use super::substring;

    #[test]
    fn ranges_follow_redis() {
        let v = b"This is a string";
        assert_eq!(substring(v, 0, 3), b"This");
        assert_eq!(substring(v, -3, -1), b"ing");
        assert_eq!(substring(v, 0, -1), v);
        assert_eq!(substring(v, 10, 100), b"string");
        assert_eq!(substring(v, 5, 3), b"");
        assert_eq!(substring(v, -1, -5), b"");
        assert_eq!(substring(v, -100, 2), b"Thi");
        assert_eq!(substring(b"", 0, -1), b"");
    }
}
