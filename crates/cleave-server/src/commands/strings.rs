//! String commands. Each one that reads before it writes holds its keys'
//! locks across both, so it is atomic as in Redis. APPEND writes a merge
//! operand (the bytes appended) instead of the whole new value: appending
//! to a large value costs the appended bytes, not a rewrite (but for a key
//! with an expiry, which the operand would outlive). SET drops a key's
//! expiry unless KEEPTTL; the commands that change a value in place keep
//! it.

use cleave::{ReadOptions, WriteBatch};

use super::hashes::add_floats;
use super::{int_arg, is, parse_f64, parse_i64, Ctx};
use crate::error::CmdError;
use crate::keyspace::{self, meta_key, Meta};
use crate::resp::Reply;
use crate::store::{now_ms, put_string, Store};

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

/// What SET, GETEX and the EXPIRE family do to a key's expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpiryChange {
    /// SET without KEEPTTL: the new value has none.
    Clear,
    /// KEEPTTL, or GETEX without an option: as it was.
    Keep,
    /// PERSIST: none from now on.
    Persist,
    /// EX, PX, EXAT or PXAT: this time, in milliseconds since the epoch.
    At(u64),
}

/// The absolute time (ms since the epoch) option `option` (EX, PX, EXAT
/// or PXAT) with argument `arg` names, as command `cmd` says its errors.
fn expiry_option(cmd: &str, option: &[u8], arg: &[u8]) -> std::result::Result<u64, CmdError> {
    let n = int_arg(arg)?;
    let invalid = || CmdError::err(format!("invalid expire time in '{cmd}' command"));
    if n <= 0 {
        return Err(invalid());
    }
    let ms = if is(option, "ex") || is(option, "exat") {
        n.checked_mul(1000).ok_or_else(invalid)?
    } else {
        n
    };
    if is(option, "ex") || is(option, "px") {
        ms.checked_add(now_ms() as i64).ok_or_else(invalid)
    } else {
        Ok(ms)
    }
    .map(|ms| ms as u64)
}

fn is_expiry_option(a: &[u8]) -> bool {
    ["ex", "px", "exat", "pxat"].iter().any(|o| is(a, o))
}

pub fn set(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (key, value) = (&args[1], &args[2]);
    let (mut nx, mut xx, mut get) = (false, false, false);
    let mut expiry: Option<ExpiryChange> = None;
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            get = true;
        } else if is(a, "keepttl") && expiry.is_none() {
            expiry = Some(ExpiryChange::Keep);
        } else if is_expiry_option(a) && expiry.is_none() {
            let arg = args.get(i + 1).ok_or(CmdError::Syntax)?;
            expiry = Some(ExpiryChange::At(expiry_option("set", a, arg)?));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    check_key(key)?;
    let expiry = expiry.unwrap_or(ExpiryChange::Clear);
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let mut old = None;
    let mut exists = false;
    let mut old_expire = 0;
    if nx || xx || get || expiry == ExpiryChange::Keep {
        match store.meta_with_expire(&ReadOptions::new(), db, key)? {
            Some((Meta::String(v), e)) => {
                exists = true;
                old = Some(v);
                old_expire = e;
            }
            Some(_) if get => return Err(CmdError::WrongType),
            Some((_, e)) => {
                exists = true;
                old_expire = e;
            }
            None => {}
        }
    }
    let skip = (nx && exists) || (xx && !exists);
    if !skip {
        let expire = match expiry {
            ExpiryChange::Keep => old_expire,
            ExpiryChange::At(at) => at,
            ExpiryChange::Clear | ExpiryChange::Persist => 0,
        };
        let mut b = WriteBatch::new();
        write_string(&mut b, db, key, value, expire);
        store.write(b)?;
    }
    Ok(match (get, skip) {
        (true, _) => old.map_or(Reply::Nil, Reply::Bulk),
        (false, true) => Reply::Nil,
        (false, false) => Reply::ok(),
    })
}

/// Adds to `b` the string `value` at `key` expiring at `expire` (0:
/// never); one already past deletes the key, as Redis does with a time in
/// the past.
fn write_string(b: &mut WriteBatch, db: u8, key: &[u8], value: &[u8], expire: u64) {
    if expire != 0 && expire <= now_ms() {
        b.delete(&meta_key(db, key));
    } else {
        put_string(b, db, key, value, expire);
    }
}

/// SETEX and PSETEX: SET with EX or PX.
fn set_for(ctx: &mut Ctx<'_>, args: &[Vec<u8>], cmd: &str, unit: &str) -> Result {
    let (key, value) = (&args[1], &args[3]);
    let at = expiry_option(cmd, unit.as_bytes(), &args[2])?;
    check_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let mut b = WriteBatch::new();
    write_string(&mut b, db, key, value, at);
    store.write(b)?;
    Ok(Reply::ok())
}

pub fn setex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_for(ctx, args, "setex", "ex")
}

pub fn psetex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_for(ctx, args, "psetex", "px")
}

/// GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]: the value, and
/// its expiry changed as asked.
pub fn getex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    let change = match &args[2..] {
        [] => ExpiryChange::Keep,
        [p] if is(p, "persist") => ExpiryChange::Persist,
        [o, arg] if is_expiry_option(o) => ExpiryChange::At(expiry_option("getex", o, arg)?),
        _ => return Err(CmdError::Syntax),
    };
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let Some((v, expire)) = store.string_with_expire(&ReadOptions::new(), db, key)? else {
        ctx.shared.stats.lookup(false);
        return Ok(Reply::Nil);
    };
    ctx.shared.stats.lookup(true);
    let new = match change {
        ExpiryChange::At(at) => Some(at),
        ExpiryChange::Persist if expire != 0 => Some(0),
        _ => None,
    };
    if let Some(at) = new {
        let mut b = WriteBatch::new();
        write_string(&mut b, db, key, &v, at);
        store.write(b)?;
    }
    Ok(Reply::Bulk(v))
}

pub fn getdel(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let _lock = store.lock(db, &[key])?;
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
    let _lock = store.lock(db, &keys)?;
    let mut b = WriteBatch::new();
    for (k, v) in pairs {
        put_string(&mut b, db, k, v, 0);
    }
    store.write(b)?;
    Ok(Reply::ok())
}

pub fn msetnx(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let pairs = pairs("msetnx", args)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let keys: Vec<&[u8]> = pairs.iter().map(|p| p.0).collect();
    let _lock = store.lock(db, &keys)?;
    for k in &keys {
        if store.meta(&ReadOptions::new(), db, k)?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    let mut b = WriteBatch::new();
    for (k, v) in pairs {
        put_string(&mut b, db, k, v, 0);
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
    let _lock = store.lock(db, &[key])?;
    let old = store.string_with_expire(&ReadOptions::new(), db, key)?;
    let (old, expire) = (old.as_ref().map(|o| o.0.clone()), old.map_or(0, |o| o.1));
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
    put_string(&mut b, db, key, &v, expire);
    store.write(b)?;
    Ok(Reply::Int(v.len() as i64))
}

pub fn append(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (key, value) = (&args[1], &args[2]);
    check_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let mut b = WriteBatch::new();
    let len = match store.string_with_expire(&ReadOptions::new(), db, key)? {
        None => {
            put_string(&mut b, db, key, value, 0);
            value.len()
        }
        Some((old, expire)) => {
            let len = old.len() + value.len();
            if len as u64 > max_string(ctx) {
                return Err(too_big());
            }
            if expire == 0 {
                // The key holds a string under this lock, so the operand
                // lands on a string's metadata value (see keyspace.rs).
                b.merge(&meta_key(db, key), value);
            } else {
                // An operand would outlive the value's expiry and then
                // merge onto nothing: rewrite the value, expiry and all.
                let mut v = old;
                v.extend_from_slice(value);
                put_string(&mut b, db, key, &v, expire);
            }
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
    let _lock = store.lock(db, &[key])?;
    let (old, expire) = match store.string_with_expire(&ReadOptions::new(), db, key)? {
        None => (0, 0),
        Some((v, expire)) => (parse_i64(&v).ok_or(CmdError::NotInteger)?, expire),
    };
    let new = old.checked_add(by).ok_or(CmdError::Overflow)?;
    let mut b = WriteBatch::new();
    put_string(&mut b, db, key, new.to_string().as_bytes(), expire);
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

pub fn setnx(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let set_args = [
        b"set".to_vec(),
        args[1].clone(),
        args[2].clone(),
        b"nx".to_vec(),
    ];
    Ok(match set(ctx, &set_args)? {
        Reply::Nil => Reply::Int(0),
        _ => Reply::Int(1),
    })
}

pub fn getset(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let set_args = [
        b"set".to_vec(),
        args[1].clone(),
        args[2].clone(),
        b"get".to_vec(),
    ];
    set(ctx, &set_args)
}

pub fn incrbyfloat(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    let by = parse_f64(&args[2]).ok_or(CmdError::NotFloat)?;
    check_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let (old, expire) = match store.string_with_expire(&ReadOptions::new(), db, key)? {
        None => (0.0, 0),
        Some((v, expire)) => (parse_f64(&v).ok_or(CmdError::NotFloat)?, expire),
    };
    let new = add_floats(old, by)?;
    let mut b = WriteBatch::new();
    put_string(&mut b, db, key, &new, expire);
    store.write(b)?;
    Ok(Reply::Bulk(new))
}

/// LCS's options.
#[derive(Default)]
struct LcsArgs {
    len: bool,
    idx: bool,
    min_match_len: u64,
    with_match_len: bool,
}

pub fn lcs(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let mut o = LcsArgs::default();
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        if is(a, "len") {
            o.len = true;
        } else if is(a, "idx") {
            o.idx = true;
        } else if is(a, "withmatchlen") {
            o.with_match_len = true;
        } else if is(a, "minmatchlen") && i + 1 < args.len() {
            o.min_match_len = u64::try_from(int_arg(&args[i + 1])?).unwrap_or(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if o.len && o.idx {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let a = store.string(&r, db, &args[1])?.unwrap_or_default();
    let b = store.string(&r, db, &args[2])?.unwrap_or_default();
    // The table of common-subsequence lengths, (|a|+1)(|b|+1) u32s, kept
    // within the bulk-length limit as Redis keeps it.
    let cells = (a.len() as u64 + 1).saturating_mul(b.len() as u64 + 1);
    if cells.saturating_mul(4) > max_string(ctx) {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let table = lcs_table(&a, &b);
    let at = |i: usize, j: usize| table[i * (b.len() + 1) + j];
    let total = at(a.len(), b.len());
    if o.len {
        return Ok(Reply::Int(i64::from(total)));
    }
    // Walk back from the end, collecting the subsequence and, for IDX,
    // the ranges of contiguous matches, last first, as Redis does.
    let mut common = vec![0u8; total as usize];
    let mut matches = Vec::new();
    let mut open: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j, mut k) = (a.len(), b.len(), total as usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            common[k - 1] = a[i - 1];
            open = match open {
                None => Some((i - 1, i - 1, j - 1, j - 1)),
                Some((as_, ae, bs, be)) if as_ == i && bs == j => Some((as_ - 1, ae, bs - 1, be)),
                Some(r) => {
                    emit = true;
                    Some(r)
                }
            };
            if let Some((as_, _, bs, _)) = open {
                emit |= as_ == 0 || bs == 0;
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = open.is_some();
        }
        if emit {
            if let Some((as_, ae, bs, be)) = open.take() {
                let len = (ae - as_ + 1) as u64;
                if o.min_match_len == 0 || len >= o.min_match_len {
                    matches.push((as_, ae, bs, be, len));
                }
            }
        }
    }
    if !o.idx {
        return Ok(Reply::Bulk(common));
    }
    let pair = |s: usize, e: usize| Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)]);
    let matches = matches
        .into_iter()
        .map(|(as_, ae, bs, be, len)| {
            let mut m = vec![pair(as_, ae), pair(bs, be)];
            if o.with_match_len {
                m.push(Reply::Int(len as i64));
            }
            Reply::Array(m)
        })
        .collect();
    Ok(Reply::Map(vec![
        (Reply::bulk("matches"), Reply::Array(matches)),
        (Reply::bulk("len"), Reply::Int(i64::from(total))),
    ]))
}

/// Lengths of the longest common subsequences of every prefix of `a` and
/// of `b`, row by row: cell `i * (|b| + 1) + j` for `a[..i]` and `b[..j]`.
fn lcs_table(a: &[u8], b: &[u8]) -> Vec<u32> {
    let w = b.len() + 1;
    let mut t = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::substring;

    #[test]
    fn common_subsequence_lengths() {
        let t = super::lcs_table(b"ohmytext", b"mynewtext");
        assert_eq!(t[t.len() - 1], 6);
        assert_eq!(super::lcs_table(b"", b"abc"), vec![0; 4]);
    }

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
