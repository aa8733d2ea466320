//! Set commands: a metadata key with the set's version and size, and one
//! subkey per member with an empty value (keyspace.rs). Members are read in
//! byte order; SPOP and SRANDMEMBER pick at random by seeking to random
//! points between the first and last member.

use std::collections::{BTreeSet, HashSet};

use cleave::{ReadOptions, Snapshot, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{int_arg, is, optional_count, Ctx};
use crate::commands::hashes::check_field;
use crate::error::CmdError;
use crate::glob;
use crate::keyspace::{self, collection_prefix, join, Meta, Type, SUB};
use crate::resp::Reply;
use crate::store::{put_collection, Store};

type Result = std::result::Result<Reply, CmdError>;

/// Sets of at most this many members are read whole (their subkeys only,
/// about a millisecond's work) to pick from them uniformly at random;
/// from larger ones SPOP and SRANDMEMBER pick by seeks to random points,
/// which favours members after gaps in the byte order (kvrocks reads the
/// whole set, whatever its size).
const SMALL_SET_MEMBERS: u64 = 16 << 10;

/// Most members one SRANDMEMBER or HRANDFIELD with a negative count
/// answers: each is held in memory before the reply is written, and the
/// command holds the lock every command shares (Redis streams them, and
/// refuses only the smallest i64).
pub const MAX_RANDOM_PICKS: u64 = 1 << 22;

/// Most members SSCAN examines for one call, whatever COUNT asks.
const SCAN_MAX_COUNT: i64 = 100_000;

/// Adds `members` to the set at `key`; the number that were new.
pub fn sadd(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    for m in &args[2..] {
        check_field(key, m)?;
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let r = ReadOptions::new();
    let existing = store.collection(&r, db, key, Type::Set)?;
    let (version, size, expire) = match existing {
        Some(vse) => vse,
        None => (store.new_version()?, 0, 0),
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let mut b = WriteBatch::new();
    // Members given twice count once (a set of them only if several).
    let several = args.len() > 3;
    let mut seen = HashSet::new();
    let mut added = 0;
    for m in &args[2..] {
        let sub = join(&prefix, m);
        let first = !several || seen.insert(m.as_slice());
        if first && (existing.is_none() || store.get(&r, &sub)?.is_none()) {
            b.put(&sub, b"");
            added += 1;
        }
    }
    if added > 0 {
        put_collection(&mut b, db, key, Type::Set, version, size + added, expire);
        store.write(b)?;
    }
    Ok(Reply::Int(added as i64))
}

pub fn srem(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let r = ReadOptions::new();
    let Some((version, size, expire)) = store.collection(&r, db, key, Type::Set)? else {
        return Ok(Reply::Int(0));
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let mut b = WriteBatch::new();
    let mut seen = HashSet::new();
    let mut removed = 0;
    for m in &args[2..] {
        let sub = join(&prefix, m);
        if seen.insert(m.as_slice()) && store.get(&r, &sub)?.is_some() {
            b.delete(&sub);
            removed += 1;
        }
    }
    if removed > 0 {
        let size = size - removed.min(size);
        put_collection(&mut b, db, key, Type::Set, version, size, expire);
        store.write(b)?;
        if size == 0 {
            ended(store, db, key, version);
        }
    }
    Ok(Reply::Int(removed as i64))
}

fn ended(store: &Store, db: u8, key: &[u8], version: u64) {
    let meta = Meta::Collection {
        kind: Type::Set,
        version,
        size: 0,
    };
    store.ended(db, key, &meta);
}

/// The members of the set at `key` as of `snapshot`, in byte order;
/// empty if there is none, `WRONGTYPE` if `key` holds another type.
fn members(
    store: &Store,
    snapshot: &Snapshot,
    db: u8,
    key: &[u8],
) -> std::result::Result<Vec<Vec<u8>>, CmdError> {
    let r = Store::read_at(snapshot);
    let Some((version, size, _)) = store.collection(&r, db, key, Type::Set)? else {
        return Ok(Vec::new());
    };
    let prefix = collection_prefix(SUB, db, key, version);
    read_members(store, snapshot, &prefix, &prefix, size)
}

/// Members of the set with subkey prefix `prefix` from the subkey `from`
/// on, up to `n` of them.
fn read_members(
    store: &Store,
    snapshot: &Snapshot,
    prefix: &[u8],
    from: &[u8],
    n: u64,
) -> std::result::Result<Vec<Vec<u8>>, CmdError> {
    Ok(read_entries(store, snapshot, prefix, from, n)?
        .into_iter()
        .map(|(m, _)| m)
        .collect())
}

/// Fields and values of the collection with subkey prefix `prefix` from
/// the subkey `from` on, up to `n` of them.
fn read_entries(
    store: &Store,
    snapshot: &Snapshot,
    prefix: &[u8],
    from: &[u8],
    n: u64,
) -> std::result::Result<Vec<Entry>, CmdError> {
    let mut it = store.iter(Some(snapshot), from.to_vec(), keyspace::prefix_end(prefix));
    it.seek_to_first()?;
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    while it.valid() && (out.len() as u64) < n {
        out.push((it.key()[prefix.len()..].to_vec(), it.value()?.to_vec()));
        it.next()?;
    }
    it.status()?;
    Ok(out)
}

/// A field (or member) and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

pub fn smembers(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let m = members(store, &snapshot, ctx.client.db, &args[1])?;
    Ok(Reply::Set(m.into_iter().map(Reply::Bulk).collect()))
}

/// Whether each of `candidates` is a member of the set at `key`.
fn contains(
    ctx: &Ctx<'_>,
    key: &[u8],
    candidates: &[Vec<u8>],
) -> std::result::Result<Vec<bool>, CmdError> {
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some((version, _, _)) = store.collection(&r, db, key, Type::Set)? else {
        return Ok(vec![false; candidates.len()]);
    };
    let prefix = collection_prefix(SUB, db, key, version);
    candidates
        .iter()
        .map(|m| Ok(store.get(&r, &join(&prefix, m))?.is_some()))
        .collect()
}

pub fn sismember(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let found = contains(ctx, &args[1], &args[2..3])?;
    Ok(Reply::Int(i64::from(found[0])))
}

pub fn smismember(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let found = contains(ctx, &args[1], &args[2..])?;
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|f| Reply::Int(i64::from(f)))
            .collect(),
    ))
}

pub fn scard(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let size = ctx
        .shared
        .store
        .collection(&ReadOptions::new(), ctx.client.db, &args[1], Type::Set)?
        .map_or(0, |(_, size, _)| size);
    Ok(Reply::Int(size as i64))
}

/// A subkey between the first and the last member (both included) of the
/// set with subkey prefix `prefix`, at random: the bytes after their common
/// part, read as numbers, picked between.
pub fn random_point(prefix: &[u8], first: &[u8], last: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let word = |m: &[u8]| {
        let mut w = [0u8; 8];
        for (d, s) in w.iter_mut().zip(m.iter().skip(common)) {
            *d = *s;
        }
        u64::from_be_bytes(w)
    };
    let (lo, hi) = (word(first), word(last));
    let x = if lo < hi { rng.gen_range(lo..=hi) } else { lo };
    let mut point = join(prefix, &first[..common]);
    point.extend_from_slice(&x.to_be_bytes());
    point
}

/// Fields (or members) of a collection, with their values, picked at
/// random: `n` distinct ones (all of them if `n` ≥ its size), or, with
/// `repeats`, `n` picked independently.
pub fn pick(
    store: &Store,
    snapshot: &Snapshot,
    prefix: &[u8],
    size: u64,
    n: u64,
    repeats: bool,
    rng: &mut StdRng,
) -> std::result::Result<Vec<Entry>, CmdError> {
    if !repeats && n >= size {
        return read_entries(store, snapshot, prefix, prefix, size);
    }
    if size <= SMALL_SET_MEMBERS {
        let all = read_entries(store, snapshot, prefix, prefix, size)?;
        if all.is_empty() {
            return Ok(all);
        }
        if repeats {
            return Ok((0..n)
                .map(|_| all[rng.gen_range(0..all.len())].clone())
                .collect());
        }
        let chosen = rand::seq::index::sample(rng, all.len(), n as usize);
        return Ok(chosen.into_iter().map(|i| all[i].clone()).collect());
    }
    let first = read_members(store, snapshot, prefix, prefix, 1)?;
    let mut it = store.iter(
        Some(snapshot),
        prefix.to_vec(),
        keyspace::prefix_end(prefix),
    );
    it.seek_to_last()?;
    let (Some(first), true) = (first.into_iter().next(), it.valid()) else {
        return Ok(Vec::new());
    };
    let last = it.key()[prefix.len()..].to_vec();
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    // The first member at or after `point`, or the first of all.
    fn at(point: &[u8], it: &mut crate::txn::StoreIter) -> std::result::Result<(), CmdError> {
        it.seek(point)?;
        if !it.valid() {
            it.seek_to_first()?;
        }
        Ok(())
    }
    if repeats {
        for _ in 0..n {
            at(&random_point(prefix, &first, &last, rng), &mut it)?;
            if it.valid() {
                out.push((it.key()[prefix.len()..].to_vec(), it.value()?.to_vec()));
            }
        }
    } else {
        // A run of `n` from a random member on, going round past the last.
        at(&random_point(prefix, &first, &last, rng), &mut it)?;
        while (out.len() as u64) < n && it.valid() {
            out.push((it.key()[prefix.len()..].to_vec(), it.value()?.to_vec()));
            it.next()?;
            if !it.valid() {
                it.seek_to_first()?;
            }
        }
    }
    it.status()?;
    Ok(out)
}

pub fn spop(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let count = optional_count(args, 2)?;
    let key = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some((version, size, expire)) = store.collection(&r, db, key, Type::Set)? else {
        return Ok(if count.is_some() {
            Reply::Set(Vec::new())
        } else {
            Reply::Nil
        });
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let mut rng = StdRng::seed_from_u64(store.random_seed());
    let n = count.unwrap_or(1);
    let popped: Vec<Vec<u8>> = pick(store, &snapshot, &prefix, size, n, false, &mut rng)?
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    if !popped.is_empty() {
        let mut b = WriteBatch::new();
        for m in &popped {
            b.delete(&join(&prefix, m));
        }
        let left = size - (popped.len() as u64).min(size);
        put_collection(&mut b, db, key, Type::Set, version, left, expire);
        store.write(b)?;
        if left == 0 {
            ended(store, db, key, version);
        }
    }
    Ok(match count {
        Some(_) => Reply::Set(popped.into_iter().map(Reply::Bulk).collect()),
        None => popped.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
    })
}

pub fn srandmember(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let count = match args.len() {
        2 => None,
        3 => Some(int_arg(&args[2])?),
        _ => return Err(CmdError::Syntax),
    };
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let key = &args[1];
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some((version, size, _)) = store.collection(&r, db, key, Type::Set)? else {
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
    let mut picked = picked.into_iter().map(|(m, _)| Reply::Bulk(m));
    Ok(match count {
        Some(_) => Reply::Array(picked.collect()),
        None => picked.next().unwrap_or(Reply::Nil),
    })
}

/// SRANDMEMBER's and HRANDFIELD's count: how many, and whether they may
/// repeat (a negative count).
pub fn random_count(count: Option<i64>) -> std::result::Result<(u64, bool), CmdError> {
    match count {
        None => Ok((1, false)),
        Some(c) if c < 0 && c.unsigned_abs() > MAX_RANDOM_PICKS => Err(CmdError::err(format!(
            "value is out of range: cleave-server answers at most {MAX_RANDOM_PICKS} repeated picks"
        ))),
        Some(c) => Ok((c.unsigned_abs(), c < 0)),
    }
}

pub fn smove(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    check_field(dst, member)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[src, dst])?;
    let r = ReadOptions::new();
    let source = store.collection(&r, db, src, Type::Set)?;
    let dest = store.collection(&r, db, dst, Type::Set)?;
    let Some((sv, ssize, sexpire)) = source else {
        return Ok(Reply::Int(0));
    };
    let ssub = join(&collection_prefix(SUB, db, src, sv), member);
    if store.get(&r, &ssub)?.is_none() {
        return Ok(Reply::Int(0));
    }
    if src == dst {
        return Ok(Reply::Int(1));
    }
    let mut b = WriteBatch::new();
    b.delete(&ssub);
    put_collection(&mut b, db, src, Type::Set, sv, ssize - 1, sexpire);
    let (dv, dsize, dexpire) = match dest {
        Some(d) => d,
        None => (store.new_version()?, 0, 0),
    };
    let dsub = join(&collection_prefix(SUB, db, dst, dv), member);
    if dest.is_none() || store.get(&r, &dsub)?.is_none() {
        b.put(&dsub, b"");
        put_collection(&mut b, db, dst, Type::Set, dv, dsize + 1, dexpire);
    }
    store.write(b)?;
    if ssize == 1 {
        ended(store, db, src, sv);
    }
    Ok(Reply::Int(1))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

/// The result of `op` over the sets at `keys`, as of `snapshot`, in byte
/// order. A missing key is an empty set; another type is `WRONGTYPE`.
fn combine(
    store: &Store,
    snapshot: &Snapshot,
    db: u8,
    keys: &[Vec<u8>],
    op: SetOp,
) -> std::result::Result<BTreeSet<Vec<u8>>, CmdError> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        sets.push(members(store, snapshot, db, k)?);
    }
    let mut sets = sets.into_iter();
    let mut out: BTreeSet<Vec<u8>> = sets.next().unwrap_or_default().into_iter().collect();
    for s in sets {
        match op {
            SetOp::Union => out.extend(s),
            SetOp::Diff => {
                for m in &s {
                    out.remove(m);
                }
            }
            SetOp::Inter => {
                let s: HashSet<Vec<u8>> = s.into_iter().collect();
                out.retain(|m| s.contains(m));
            }
        }
    }
    Ok(out)
}

fn set_op(ctx: &mut Ctx<'_>, args: &[Vec<u8>], op: SetOp) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let out = combine(store, &snapshot, ctx.client.db, &args[1..], op)?;
    Ok(Reply::Set(out.into_iter().map(Reply::Bulk).collect()))
}

pub fn sinter(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_op(ctx, args, SetOp::Inter)
}

pub fn sunion(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_op(ctx, args, SetOp::Union)
}

pub fn sdiff(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_op(ctx, args, SetOp::Diff)
}

/// The STORE forms: the result replaces whatever `args[1]` held.
fn set_op_store(ctx: &mut Ctx<'_>, args: &[Vec<u8>], op: SetOp) -> Result {
    let dest = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
    let _lock = store.lock(db, &keys)?;
    let snapshot = store.snapshot();
    let out = combine(store, &snapshot, db, &args[2..], op)?;
    for m in &out {
        check_field(dest, m)?;
    }
    let old = store.meta(&Store::read_at(&snapshot), db, dest)?;
    let mut b = WriteBatch::new();
    let n = out.len() as u64;
    if n == 0 {
        b.delete(&keyspace::meta_key(db, dest));
    } else {
        let version = store.new_version()?;
        let prefix = collection_prefix(SUB, db, dest, version);
        for m in &out {
            b.put(&join(&prefix, m), b"");
        }
        put_collection(&mut b, db, dest, Type::Set, version, n, 0);
    }
    if old.is_some() || n > 0 {
        store.write(b)?;
    }
    if let Some(old) = old {
        store.ended(db, dest, &old);
    }
    Ok(Reply::Int(n as i64))
}

pub fn sinterstore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_op_store(ctx, args, SetOp::Inter)
}

pub fn sunionstore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_op_store(ctx, args, SetOp::Union)
}

pub fn sdiffstore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    set_op_store(ctx, args, SetOp::Diff)
}

pub fn sintercard(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let numkeys = int_arg(&args[1])?;
    if numkeys <= 0 {
        return Err(CmdError::err("numkeys should be greater than 0"));
    }
    let numkeys = numkeys as usize;
    if numkeys > args.len() - 2 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let mut limit = 0u64;
    let rest = &args[2 + numkeys..];
    match rest {
        [] => {}
        [word, n] if is(word, "limit") => {
            limit =
                u64::try_from(int_arg(n)?).map_err(|_| CmdError::err("LIMIT can't be negative"))?;
        }
        _ => return Err(CmdError::Syntax),
    }
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let out = combine(
        store,
        &snapshot,
        ctx.client.db,
        &args[2..2 + numkeys],
        SetOp::Inter,
    )?;
    let n = out.len() as u64;
    Ok(Reply::Int(if limit > 0 { n.min(limit) } else { n } as i64))
}

/// SSCAN, HSCAN and ZSCAN's arguments after the cursor.
pub struct ScanArgs<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: i64,
}

pub fn scan_args(args: &[Vec<u8>]) -> std::result::Result<ScanArgs<'_>, CmdError> {
    let mut out = ScanArgs {
        pattern: None,
        count: 10,
    };
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(CmdError::Syntax)?;
        if is(&args[i], "match") {
            out.pattern = Some(value.as_slice());
        } else if is(&args[i], "count") {
            out.count = int_arg(value)?;
            if out.count < 1 {
                return Err(CmdError::Syntax);
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    out.count = out.count.min(SCAN_MAX_COUNT);
    Ok(out)
}

/// The subkey a scan of a collection resumes at: its first, or the one
/// after the field `cursor` stands for.
pub fn scan_start(
    ctx: &Ctx<'_>,
    prefix: &[u8],
    cursor: &[u8],
) -> std::result::Result<Vec<u8>, CmdError> {
    let cursor: u64 = std::str::from_utf8(cursor)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::err("invalid cursor"))?;
    if cursor == 0 {
        return Ok(prefix.to_vec());
    }
    let last = ctx
        .shared
        .cursors
        .lock()
        .get(cursor)
        .ok_or_else(|| CmdError::err("invalid cursor"))?;
    let mut start = join(prefix, &last);
    start.push(0);
    Ok(start)
}

pub fn sscan(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let o = scan_args(&args[3..])?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let key = &args[1];
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some((version, _, _)) = store.collection(&r, db, key, Type::Set)? else {
        scan_start(ctx, &[], &args[2])?;
        return Ok(scan_reply(0, Vec::new()));
    };
    let prefix = collection_prefix(SUB, db, key, version);
    let (next, found) = scan_collection(ctx, &snapshot, &prefix, &args[2], &o, |m, _| {
        Ok(vec![Reply::Bulk(m.to_vec())])
    })?;
    Ok(scan_reply(next, found))
}

/// One call of SSCAN, HSCAN or ZSCAN over the subkeys under `prefix`:
/// from `cursor` on, up to the scan's count of fields, those matching its
/// pattern turned into replies by `item` (from the field and its value).
/// Returns the next cursor (0 at the end) and the replies.
pub fn scan_collection(
    ctx: &Ctx<'_>,
    snapshot: &Snapshot,
    prefix: &[u8],
    cursor: &[u8],
    o: &ScanArgs<'_>,
    mut item: impl FnMut(&[u8], &[u8]) -> std::result::Result<Vec<Reply>, CmdError>,
) -> std::result::Result<(u64, Vec<Reply>), CmdError> {
    let start = scan_start(ctx, prefix, cursor)?;
    let store = &ctx.shared.store;
    let mut it = store.iter(Some(snapshot), start, keyspace::prefix_end(prefix));
    it.seek_to_first()?;
    let mut found = Vec::new();
    let mut last = None;
    for _ in 0..o.count {
        if !it.valid() {
            break;
        }
        let field = &it.key()[prefix.len()..];
        if o.pattern.is_none_or(|p| glob::matches(p, field)) {
            let field = field.to_vec();
            found.extend(item(&field, it.value()?)?);
        }
        last = Some(it.key()[prefix.len()..].to_vec());
        it.next()?;
    }
    it.status()?;
    let next = match (it.valid(), last) {
        (true, Some(last)) => ctx.shared.cursors.lock().save(last),
        _ => 0,
    };
    Ok((next, found))
}

/// A SCAN-family reply: the next cursor (0 at the end), then the items.
pub fn scan_reply(next: u64, items: Vec<Reply>) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(next.to_string().into_bytes()),
        Reply::Array(items),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_counts_are_bounded() {
        assert_eq!(random_count(None).unwrap(), (1, false));
        assert_eq!(random_count(Some(5)).unwrap(), (5, false));
        assert_eq!(random_count(Some(-5)).unwrap(), (5, true));
        assert!(random_count(Some(i64::MIN)).is_err());
        assert!(random_count(Some(-(MAX_RANDOM_PICKS as i64) - 1)).is_err());
        // A large positive count asks for distinct members: at most the set.
        assert_eq!(random_count(Some(i64::MAX)).unwrap().0, i64::MAX as u64);
    }

    #[test]
    fn random_points_fall_between_the_first_and_last_member() {
        let mut rng = StdRng::seed_from_u64(7);
        let prefix = b"P".to_vec();
        for (first, last) in [
            (&b"member:000"[..], &b"member:999"[..]),
            (b"a", b"b"),
            (b"", b"\xff\xff"),
            (b"same", b"same"),
            (b"ab", b"abc"),
        ] {
            for _ in 0..100 {
                let p = random_point(&prefix, first, last, &mut rng);
                assert!(p.as_slice() >= join(&prefix, first).as_slice());
                assert!(p.as_slice() <= join(&prefix, last).as_slice() || p[1..].starts_with(last));
            }
        }
    }
}
