//! Hash commands: a metadata key with the hash's version and field count,
//! and one subkey per field (keyspace.rs).

use std::collections::HashSet;

use cleave::{ReadOptions, Snapshot, WriteBatch};

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::sets::{pick, random_count, scan_args, scan_collection, scan_reply, scan_start, Entry};
use super::{int_arg, is, parse_f64, parse_i64, Ctx};
use crate::error::CmdError;
use crate::keyspace::{self, collection_prefix, join, Type, SUB};
use crate::resp::Reply;
use crate::store::{put_collection, Store};

type Result = std::result::Result<Reply, CmdError>;

/// Refuses a field whose subkey would exceed cleave's key limit.
pub fn check_field(key: &[u8], field: &[u8]) -> std::result::Result<(), CmdError> {
    if key.len() + field.len() > keyspace::MAX_KEY_AND_FIELD_BYTES {
        return Err(CmdError::err(format!(
            "key and field of {} bytes: cleave-server keeps them to {} bytes together",
            key.len() + field.len(),
            keyspace::MAX_KEY_AND_FIELD_BYTES
        )));
    }
    Ok(())
}

/// Sets field/value pairs; the number of fields that are new.
fn set_fields(
    ctx: &mut Ctx<'_>,
    name: &str,
    args: &[Vec<u8>],
) -> std::result::Result<i64, CmdError> {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::err(format!(
            "wrong number of arguments for '{name}' command"
        )));
    }
    let key = &args[1];
    for pair in args[2..].chunks_exact(2) {
        check_field(key, &pair[0])?;
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let r = ReadOptions::new();
    let existing = store.collection(&r, db, key, Type::Hash)?;
    // A new hash has no expiry; a changed one keeps its own.
    let (version, size, expire) = match existing {
        Some(vse) => vse,
        None => (store.new_version()?, 0, 0),
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let mut b = WriteBatch::new();
    let mut seen = HashSet::new();
    let mut added = 0;
    for pair in args[2..].chunks_exact(2) {
        let sub = join(&prefix, &pair[0]);
        if seen.insert(pair[0].as_slice()) && (existing.is_none() || store.get(&r, &sub)?.is_none())
        {
            added += 1;
        }
        b.put(&sub, &pair[1]);
    }
    put_collection(&mut b, db, key, Type::Hash, version, size + added, expire);
    store.write(b)?;
    Ok(added as i64)
}

pub fn hset(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_fields(ctx, "hset", args).map(Reply::Int)
}

pub fn hmset(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_fields(ctx, "hmset", args).map(|_| Reply::ok())
}

/// The values of `fields` in the hash at `key`, as of `snapshot`; `None`
/// if there is no such hash.
fn fields(
    store: &Store,
    snapshot: &Snapshot,
    db: u8,
    key: &[u8],
    fields: &[Vec<u8>],
) -> std::result::Result<Option<Vec<Option<Vec<u8>>>>, CmdError> {
    let r = Store::read_at(snapshot);
    let Some((version, _, _)) = store.collection(&r, db, key, Type::Hash)? else {
        return Ok(None);
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let values = fields
        .iter()
        .map(|f| store.get(&r, &join(&prefix, f)))
        .collect::<std::result::Result<_, _>>()?;
    Ok(Some(values))
}

pub fn hget(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let v = fields(store, &snapshot, ctx.client.db, &args[1], &args[2..3])?
        .and_then(|mut v| v.pop().flatten());
    ctx.shared.stats.lookup(v.is_some());
    Ok(v.map_or(Reply::Nil, Reply::Bulk))
}

pub fn hmget(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let values = fields(store, &snapshot, ctx.client.db, &args[1], &args[2..])?
        .unwrap_or_else(|| vec![None; args.len() - 2]);
    Ok(Reply::Array(
        values
            .into_iter()
            .map(|v| v.map_or(Reply::Nil, Reply::Bulk))
            .collect(),
    ))
}

pub fn hexists(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let found = fields(store, &snapshot, ctx.client.db, &args[1], &args[2..3])?
        .is_some_and(|v| v[0].is_some());
    Ok(Reply::Int(i64::from(found)))
}

pub fn hlen(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let size = ctx
        .shared
        .store
        .collection(&ReadOptions::new(), ctx.client.db, &args[1], Type::Hash)?
        .map_or(0, |(_, size, _)| size);
    Ok(Reply::Int(size as i64))
}

pub fn hgetall(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let all = entries(store, &snapshot, ctx.client.db, &args[1])?;
    Ok(Reply::Map(
        all.into_iter()
            .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
            .collect(),
    ))
}

pub fn hdel(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let key = &args[1];
    let _lock = store.lock(db, &[key])?;
    let r = ReadOptions::new();
    let Some((version, size, expire)) = store.collection(&r, db, key, Type::Hash)? else {
        return Ok(Reply::Int(0));
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let mut b = WriteBatch::new();
    let mut seen = HashSet::new();
    let mut removed = 0u64;
    for field in &args[2..] {
        let sub = join(&prefix, field);
        if seen.insert(field.as_slice()) && store.get(&r, &sub)?.is_some() {
            b.delete(&sub);
            removed += 1;
        }
    }
    if removed == 0 {
        return Ok(Reply::Int(0));
    }
    put_collection(
        &mut b,
        db,
        key,
        Type::Hash,
        version,
        size.saturating_sub(removed),
        expire,
    );
    store.write(b)?;
    Ok(Reply::Int(removed as i64))
}

/// Changes one field under the hash's lock: `change` gets its value (if
/// any) and gives the new one and the reply, or `None` to leave it.
fn update_field(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    field: &[u8],
    change: impl FnOnce(Option<Vec<u8>>) -> std::result::Result<(Option<Vec<u8>>, Reply), CmdError>,
) -> Result {
    check_field(key, field)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let r = ReadOptions::new();
    let existing = store.collection(&r, db, key, Type::Hash)?;
    let (version, size, expire) = match existing {
        Some(vse) => vse,
        None => (store.new_version()?, 0, 0),
    };
    let sub = join(&collection_prefix(SUB, db, key, version), field);
    let old = match existing {
        Some(_) => store.get(&r, &sub)?,
        None => None,
    };
    let added = u64::from(old.is_none());
    let (new, reply) = change(old)?;
    if let Some(new) = new {
        let mut b = WriteBatch::new();
        b.put(&sub, &new);
        put_collection(&mut b, db, key, Type::Hash, version, size + added, expire);
        store.write(b)?;
    }
    Ok(reply)
}

pub fn hsetnx(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let value = args[3].clone();
    update_field(ctx, &args[1], &args[2], |old| {
        Ok(match old {
            Some(_) => (None, Reply::Int(0)),
            None => (Some(value), Reply::Int(1)),
        })
    })
}

pub fn hincrby(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let by = int_arg(&args[3])?;
    update_field(ctx, &args[1], &args[2], |old| {
        let old = match old {
            None => 0,
            Some(v) => {
                parse_i64(&v).ok_or_else(|| CmdError::err("hash value is not an integer"))?
            }
        };
        let new = old.checked_add(by).ok_or(CmdError::Overflow)?;
        Ok((Some(new.to_string().into_bytes()), Reply::Int(new)))
    })
}

pub fn hincrbyfloat(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let by = parse_f64(&args[3]).ok_or(CmdError::NotFloat)?;
    update_field(ctx, &args[1], &args[2], |old| {
        let old = match old {
            None => 0.0,
            Some(v) => parse_f64(&v).ok_or_else(|| CmdError::err("hash value is not a float"))?,
        };
        let new = add_floats(old, by)?;
        Ok((Some(new.clone()), Reply::Bulk(new)))
    })
}

/// INCRBYFLOAT's sum, as the text Redis stores: no exponent, no trailing
/// zeros.
pub fn add_floats(a: f64, b: f64) -> std::result::Result<Vec<u8>, CmdError> {
    let sum = a + b;
    if !sum.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    // Rust's shortest round-trip text, which never uses an exponent.
    Ok(format!("{sum}").into_bytes())
}

/// Every field and value of the hash at `key`, as of `snapshot`, in field
/// order.
fn entries(
    store: &Store,
    snapshot: &Snapshot,
    db: u8,
    key: &[u8],
) -> std::result::Result<Vec<Entry>, CmdError> {
    let Some((version, size, _)) =
        store.collection(&Store::read_at(snapshot), db, key, Type::Hash)?
    else {
        return Ok(Vec::new());
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let mut it = store.iter(
        Some(snapshot),
        prefix.clone(),
        keyspace::prefix_end(&prefix),
    );
    it.seek_to_first()?;
    let mut out = Vec::with_capacity(size.min(1 << 16) as usize);
    while it.valid() {
        out.push((it.key()[prefix.len()..].to_vec(), it.value()?.to_vec()));
        it.next()?;
    }
    it.status()?;
    Ok(out)
}

pub fn hkeys(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let all = entries(store, &snapshot, ctx.client.db, &args[1])?;
    Ok(Reply::Array(
        all.into_iter().map(|(f, _)| Reply::Bulk(f)).collect(),
    ))
}

pub fn hvals(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let all = entries(store, &snapshot, ctx.client.db, &args[1])?;
    Ok(Reply::Array(
        all.into_iter().map(|(_, v)| Reply::Bulk(v)).collect(),
    ))
}

pub fn hstrlen(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let v = fields(store, &snapshot, ctx.client.db, &args[1], &args[2..3])?
        .and_then(|mut v| v.pop().flatten());
    Ok(Reply::Int(v.map_or(0, |v| v.len() as i64)))
}

pub fn hrandfield(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (count, with_values) = match &args[2..] {
        [] => (None, false),
        [c] => (Some(int_arg(c)?), false),
        [c, w] if is(w, "withvalues") => (Some(int_arg(c)?), true),
        _ => return Err(CmdError::Syntax),
    };
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let snapshot = store.snapshot();
    let Some((version, size, _)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::Hash)?
    else {
        return Ok(if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let mut rng = StdRng::seed_from_u64(store.random_seed());
    let (n, repeats) = random_count(count)?;
    let picked = pick(store, &snapshot, &prefix, size, n, repeats, &mut rng)?;
    let Some(_) = count else {
        return Ok(picked
            .into_iter()
            .next()
            .map_or(Reply::Nil, |(f, _)| Reply::Bulk(f)));
    };
    Ok(Reply::Array(if !with_values {
        picked.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()
    } else if ctx.client.proto >= 3 {
        picked
            .into_iter()
            .map(|(f, v)| Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)]))
            .collect()
    } else {
        picked
            .into_iter()
            .flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)])
            .collect()
    }))
}

pub fn hscan(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let o = scan_args(&args[3..])?;
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let snapshot = store.snapshot();
    let Some((version, _, _)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::Hash)?
    else {
        scan_start(ctx, &[], &args[2])?;
        return Ok(scan_reply(0, Vec::new()));
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let (next, found) = scan_collection(ctx, &snapshot, &prefix, &args[2], &o, |f, v| {
        Ok(vec![Reply::Bulk(f.to_vec()), Reply::Bulk(v.to_vec())])
    })?;
    Ok(scan_reply(next, found))
}
