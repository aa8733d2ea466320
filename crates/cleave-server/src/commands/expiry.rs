//! Expiry of keys of every type: EXPIRE and its kin set it, TTL and its
//! kin read it, PERSIST removes it. The expiry sits in the key's metadata
//! (docs/format/server.md) and is the engine's expiry of that metadata
//! entry: from the millisecond it names, no read finds the key, and
//! compaction drops the entry, its value unread. A time already past
//! deletes the key, as Redis does.

use cleave::{ReadOptions, WriteBatch};

use super::{int_arg, is, Ctx};
use crate::error::CmdError;
use crate::keyspace::meta_key;
use crate::resp::Reply;
use crate::store::{now_ms, put_meta};

type Result = std::result::Result<Reply, CmdError>;

/// How EXPIRE's argument is given.
#[derive(Clone, Copy)]
enum Unit {
    /// Seconds from now (EXPIRE).
    Seconds,
    /// Milliseconds from now (PEXPIRE).
    Millis,
    /// A Unix time in seconds (EXPIREAT).
    UnixSeconds,
    /// A Unix time in milliseconds (PEXPIREAT).
    UnixMillis,
}

/// The condition NX, XX, GT or LT puts on setting an expiry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    /// Only if the key has no expiry.
    Nx,
    /// Only if it has one.
    Xx,
    /// Only if the new one is later (no expiry counts as never).
    Gt,
    /// Only if the new one is sooner.
    Lt,
}

fn condition(args: &[Vec<u8>]) -> std::result::Result<Condition, CmdError> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in args {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Err(CmdError::err(format!(
                "Unsupported option {}",
                String::from_utf8_lossy(a)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    Ok(match (nx, xx, gt, lt) {
        (true, ..) => Condition::Nx,
        (_, _, true, _) => Condition::Gt,
        (_, _, _, true) => Condition::Lt,
        (_, true, ..) => Condition::Xx,
        _ => Condition::Always,
    })
}

/// Whether `condition` lets an expiry `new` replace `old` (0: none).
fn allowed(condition: Condition, old: u64, new: i64) -> bool {
    match condition {
        Condition::Always => true,
        Condition::Nx => old == 0,
        Condition::Xx => old != 0,
        Condition::Gt => old != 0 && new > old as i64,
        Condition::Lt => old == 0 || new < old as i64,
    }
}

/// EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: 1 if the expiry was set (or
/// the key deleted, for a time already past), 0 if the key is absent or the
/// condition refused it.
fn expire(ctx: &mut Ctx<'_>, args: &[Vec<u8>], cmd: &str, unit: Unit) -> Result {
    let key = &args[1];
    let n = int_arg(&args[2])?;
    let condition = condition(&args[3..])?;
    let invalid = || CmdError::err(format!("invalid expire time in '{cmd}' command"));
    let now = now_ms() as i64;
    let at = match unit {
        Unit::Seconds => n.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
        Unit::Millis => n.checked_add(now),
        Unit::UnixSeconds => n.checked_mul(1000),
        Unit::UnixMillis => Some(n),
    }
    .ok_or_else(invalid)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let Some((meta, old)) = store.meta_with_expire(&ReadOptions::new(), db, key)? else {
        return Ok(Reply::Int(0));
    };
    if !allowed(condition, old, at) {
        return Ok(Reply::Int(0));
    }
    let mut b = WriteBatch::new();
    if at <= now {
        b.delete(&meta_key(db, key));
        store.write(b)?;
        store.ended(db, key, &meta);
    } else {
        put_meta(&mut b, db, key, &meta, at as u64);
        store.write(b)?;
    }
    Ok(Reply::Int(1))
}

pub fn expire_(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    expire(ctx, args, "expire", Unit::Seconds)
}

pub fn pexpire(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    expire(ctx, args, "pexpire", Unit::Millis)
}

pub fn expireat(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    expire(ctx, args, "expireat", Unit::UnixSeconds)
}

pub fn pexpireat(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    expire(ctx, args, "pexpireat", Unit::UnixMillis)
}

/// The key's expiry: `None` if the key is absent, `Some(0)` if it has
/// none.
fn expiry_of(ctx: &mut Ctx<'_>, key: &[u8]) -> std::result::Result<Option<u64>, CmdError> {
    Ok(ctx
        .shared
        .store
        .meta_with_expire(&ReadOptions::new(), ctx.client.db, key)?
        .map(|(_, expire)| expire))
}

/// What TTL and its kin answer: -2 for no key, -1 for no expiry, else
/// `f(expire)`.
fn answer(ctx: &mut Ctx<'_>, key: &[u8], f: impl Fn(u64) -> i64) -> Result {
    Ok(Reply::Int(match expiry_of(ctx, key)? {
        None => -2,
        Some(0) => -1,
        Some(at) => f(at),
    }))
}

/// Milliseconds left until `at`, 0 if none.
fn left_ms(at: u64) -> i64 {
    at.saturating_sub(now_ms()) as i64
}

pub fn ttl(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    // Rounded to the nearest second, as Redis does.
    answer(ctx, &args[1], |at| (left_ms(at) + 500) / 1000)
}

pub fn pttl(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    answer(ctx, &args[1], left_ms)
}

pub fn expiretime(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    answer(ctx, &args[1], |at| (at / 1000) as i64)
}

pub fn pexpiretime(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    answer(ctx, &args[1], |at| at as i64)
}

/// PERSIST: 1 if the key's expiry was removed, 0 if it had none or is
/// absent.
pub fn persist(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    match store.meta_with_expire(&ReadOptions::new(), db, key)? {
        Some((meta, expire)) if expire != 0 => {
            let mut b = WriteBatch::new();
            put_meta(&mut b, db, key, &meta, 0);
            store.write(b)?;
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    }
}

/// `args` with every expiry relative to now (EX, PX, EXPIRE, SETEX, …)
/// made absolute, for a command replicated through the Raft log: each
/// member then applies the same time, whenever it applies the entry (as
/// Redis propagates PEXPIREAT to its replicas). An argument that does not
/// parse is left as it is, to fail alike on every member.
pub fn absolute(args: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let now = now_ms() as i64;
    let at = |n: &[u8], ms_per: i64| -> Option<Vec<u8>> {
        let n: i64 = std::str::from_utf8(n).ok()?.parse().ok()?;
        (n > 0)
            .then(|| n.checked_mul(ms_per)?.checked_add(now))
            .flatten()
            .map(|at| at.to_string().into_bytes())
    };
    let Some(name) = args.first() else {
        return args;
    };
    let lower = name.to_ascii_lowercase();
    match lower.as_slice() {
        b"set" | b"getex" => {
            let mut out = args.clone();
            let first_option = if lower == b"set" { 3 } else { 2 };
            let mut i = first_option;
            while i + 1 < out.len() {
                let ms_per = if is(&out[i], "ex") {
                    1000
                } else if is(&out[i], "px") {
                    1
                } else {
                    i += 1;
                    continue;
                };
                if let Some(t) = at(&out[i + 1], ms_per) {
                    out[i] = b"PXAT".to_vec();
                    out[i + 1] = t;
                }
                i += 2;
            }
            out
        }
        b"setex" | b"psetex" if args.len() == 4 => {
            let ms_per = if lower == b"setex" { 1000 } else { 1 };
            match at(&args[2], ms_per) {
                Some(t) => vec![
                    b"SET".to_vec(),
                    args[1].clone(),
                    args[3].clone(),
                    b"PXAT".to_vec(),
                    t,
                ],
                None => args,
            }
        }
        b"expire" | b"pexpire" if args.len() >= 3 => {
            let ms_per = if lower == b"expire" { 1000 } else { 1 };
            // Any integer: a negative one deletes the key, on every member.
            let t = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|n| n.parse::<i64>().ok())
                .and_then(|n| n.checked_mul(ms_per)?.checked_add(now));
            match t {
                Some(t) => {
                    let mut out = vec![
                        b"PEXPIREAT".to_vec(),
                        args[1].clone(),
                        t.to_string().into_bytes(),
                    ];
                    out.extend(args[3..].iter().cloned());
                    out
                }
                None => args,
            }
        }
        _ => args,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_expiries_become_absolute() {
        let args = |a: &[&str]| a.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        let text = |v: Vec<Vec<u8>>| {
            v.into_iter()
                .map(|a| String::from_utf8(a).unwrap())
                .collect::<Vec<_>>()
        };
        let out = text(absolute(args(&["SET", "k", "v", "NX", "EX", "10"])));
        assert_eq!(out[..5], ["SET", "k", "v", "NX", "PXAT"]);
        let at: u64 = out[5].parse().unwrap();
        assert!(at >= now_ms() + 9_000);
        let out = text(absolute(args(&["setex", "k", "5", "v"])));
        assert_eq!(out[..4], ["SET", "k", "v", "PXAT"]);
        let out = text(absolute(args(&["EXPIRE", "k", "-1", "GT"])));
        assert_eq!((out[0].as_str(), out[3].as_str()), ("PEXPIREAT", "GT"));
        // What does not parse stays, to fail alike everywhere.
        assert_eq!(
            text(absolute(args(&["SET", "k", "v", "EX", "x"]))),
            ["SET", "k", "v", "EX", "x"]
        );
        assert_eq!(text(absolute(args(&["GET", "k"]))), ["GET", "k"]);
    }

    #[test]
    fn conditions_follow_redis() {
        let args = |a: &[&str]| a.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert!(condition(&args(&["nx", "xx"])).is_err());
        assert!(condition(&args(&["gt", "lt"])).is_err());
        assert!(condition(&args(&["xx", "gt"])).is_ok());
        assert!(condition(&args(&["bogus"])).is_err());
        // No expiry counts as never: GT refuses, LT accepts.
        assert!(!allowed(Condition::Gt, 0, 100));
        assert!(allowed(Condition::Lt, 0, 100));
        assert!(allowed(Condition::Gt, 50, 100) && !allowed(Condition::Gt, 150, 100));
        assert!(allowed(Condition::Nx, 0, 1) && !allowed(Condition::Nx, 5, 1));
        assert!(allowed(Condition::Xx, 5, 1) && !allowed(Condition::Xx, 0, 1));
    }
}
