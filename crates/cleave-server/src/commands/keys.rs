//! Commands on keys of any type.

use std::collections::HashSet;

use cleave::{ReadOptions, WriteBatch};

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::sets::random_point;
use super::{is, Ctx};
use crate::error::CmdError;
use crate::glob;
use crate::keyspace::{self, meta_key, Meta, Type, META, SCORE, SUB};
use crate::resp::Reply;
use crate::store::Store;

type Result = std::result::Result<Reply, CmdError>;

/// Deletes written per batch by FLUSHDB.
const FLUSH_BATCH_KEYS: usize = 1024;

/// Most keys SCAN examines for one call, whatever COUNT asks.
const SCAN_MAX_COUNT: i64 = 100_000;

pub fn del(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
    let _lock = store.lock(db, &keys)?;
    let r = ReadOptions::new();
    let mut b = WriteBatch::new();
    let mut seen = HashSet::new();
    let mut ended = Vec::new();
    for key in keys {
        if !seen.insert(key) {
            continue;
        }
        if let Some(meta) = store.meta(&r, db, key)? {
            // A hash's or sorted set's subkeys stay behind under a version
            // no metadata names: never read again, and dropped by
            // compactions (subkey_filter.rs).
            b.delete(&meta_key(db, key));
            ended.push((key, meta));
        }
    }
    if !ended.is_empty() {
        store.write(b)?;
    }
    for (key, meta) in &ended {
        store.ended(db, key, meta);
    }
    Ok(Reply::Int(ended.len() as i64))
}

pub fn exists(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let mut n = 0;
    // Counted once per argument: EXISTS k k is 2, as in Redis.
    for key in &args[1..] {
        if store.meta(&r, ctx.client.db, key)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

pub fn type_(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let m = ctx
        .shared
        .store
        .meta(&ReadOptions::new(), ctx.client.db, &args[1])?;
    Ok(Reply::Status(m.map_or("none", |m| m.kind().name())))
}

pub fn scan(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::err("invalid cursor"))?;
    let (mut pattern, mut count, mut kind) = (None, 10i64, None);
    let mut i = 2;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(CmdError::Syntax)?;
        if is(&args[i], "match") {
            pattern = Some(value.as_slice());
        } else if is(&args[i], "count") {
            count = super::int_arg(value)?;
            if count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if is(&args[i], "type") {
            kind = Some(value.to_ascii_lowercase());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let db = ctx.client.db;
    let (begin, end) = keyspace::range(META, db);
    let begin = if cursor == 0 {
        begin
    } else {
        let last = ctx
            .shared
            .cursors
            .lock()
            .get(cursor)
            .ok_or_else(|| CmdError::err("invalid cursor"))?;
        // The first key after the last one returned.
        keyspace::join(&meta_key(db, &last), &[0])
    };
    let store = &ctx.shared.store;
    let mut it = store.iter(None, begin, Some(end));
    it.seek_to_first()?;
    let mut keys = Vec::new();
    let mut last = None;
    for _ in 0..count.min(SCAN_MAX_COUNT) {
        if !it.valid() {
            break;
        }
        let key = keyspace::user_key_of_meta(db, it.key())
            .ok_or_else(|| CmdError::corrupt(it.key(), "not a metadata key"))?
            .to_vec();
        let wanted = pattern.is_none_or(|p| glob::matches(p, &key))
            && match &kind {
                None => true,
                // The value is read only when a type is asked for: a
                // string's may be a large separated value.
                Some(k) => {
                    let m = Meta::decode(it.value()?.to_vec())
                        .map_err(|why| CmdError::corrupt(&key, &why))?;
                    m.kind().name().as_bytes() == k.as_slice()
                }
            };
        if wanted {
            keys.push(Reply::Bulk(key.clone()));
        }
        last = Some(key);
        it.next()?;
    }
    it.status()?;
    let next = match (it.valid(), last) {
        (true, Some(last)) => ctx.shared.cursors.lock().save(last),
        _ => 0,
    };
    Ok(Reply::Array(vec![
        Reply::Bulk(next.to_string().into_bytes()),
        Reply::Array(keys),
    ]))
}

pub fn dbsize(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    Ok(Reply::Int(
        count_keys(&ctx.shared.store, ctx.client.db)? as i64
    ))
}

/// Databases of at most this many keys (by the engine's estimate) are
/// counted exactly, a walk of their metadata keys (a few milliseconds).
const EXACT_COUNT_KEYS: u64 = 10_000;

/// The keys of database `db`: counted when there are few (the estimate
/// is coarsest there, a file straddling the range's end counting half its
/// entries), else an estimate from the engine's counts
/// (`Db::estimate_num_keys`), as kvrocks's DBSIZE is: within a file's
/// worth; overwritten keys not yet compacted count more than once.
pub fn count_keys(store: &Store, db: u8) -> std::result::Result<u64, CmdError> {
    let (begin, end) = keyspace::range(META, db);
    let estimate = store.db().estimate_num_keys(&begin, &end);
    if estimate > EXACT_COUNT_KEYS {
        return Ok(estimate);
    }
    let mut it = store.iter(None, begin, Some(end));
    it.seek_to_first()?;
    let mut n = 0;
    while it.valid() && n <= 2 * EXACT_COUNT_KEYS {
        n += 1;
        it.next()?;
    }
    it.status()?;
    Ok(if it.valid() { estimate.max(n) } else { n })
}

/// COMPACT (kvrocks's): compacts the whole database down to its last
/// level, which drops expired keys and the subkeys of ended hashes and
/// sorted sets, and answers when done.
pub fn compact(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    ctx.shared.store.db().compact_range(None, None)?;
    Ok(Reply::ok())
}

/// Deletes every key of the database, subkeys included, while no other
/// command runs, and compacts the deletions away. ASYNC is taken and run
/// as SYNC.
pub fn flushdb(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    flush_mode(args)?;
    let db = ctx.client.db;
    for tag in [META, SUB, SCORE] {
        let (begin, end) = keyspace::range(tag, db);
        flush_range(ctx, begin, end)?;
    }
    Ok(Reply::ok())
}

/// FLUSHDB's and FLUSHALL's optional ASYNC or SYNC.
fn flush_mode(args: &[Vec<u8>]) -> std::result::Result<(), CmdError> {
    match &args[1..] {
        [] => Ok(()),
        [mode] if is(mode, "async") || is(mode, "sync") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

/// Deletes every key in `[begin, end)`, then compacts the range: the disk
/// space comes back at once, as Redis's memory does, and DBSIZE's
/// estimate, which counts deletions in sstables against the keys, is
/// exact again.
fn flush_range(ctx: &Ctx<'_>, begin: Vec<u8>, end: Vec<u8>) -> std::result::Result<(), CmdError> {
    let store = &ctx.shared.store;
    let mut it = store.iter(None, begin.clone(), Some(end.clone()));
    it.seek_to_first()?;
    let mut b = WriteBatch::new();
    while it.valid() {
        b.delete(it.key());
        if b.len() >= FLUSH_BATCH_KEYS {
            store.write(std::mem::take(&mut b))?;
        }
        it.next()?;
    }
    it.status()?;
    if !b.is_empty() {
        store.write(b)?;
    }
    store.db().compact_range(Some(&begin), Some(&end))?;
    Ok(())
}

/// Databases SELECT reaches, numbered from 0 (the key space's second
/// byte), as Redis's default `databases 16`.
pub const DATABASES: u8 = 16;

pub fn unlink(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    del(ctx, args)
}

pub fn touch(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    exists(ctx, args)
}

/// Writes into `b` a copy of the key holding `meta` (expiring at
/// `expire`) at `dst` in database `dst_db`: a string's value, or a
/// collection's subkeys under a new version.
fn copy_into(
    ctx: &Ctx<'_>,
    b: &mut WriteBatch,
    (src_db, src): (u8, &[u8]),
    (dst_db, dst): (u8, &[u8]),
    meta: &Meta,
    expire: u64,
) -> std::result::Result<(), CmdError> {
    let store = &ctx.shared.store;
    let Some(old_version) = meta.version() else {
        if let Meta::String(v) = meta {
            crate::store::put_string(b, dst_db, dst, v, expire);
        }
        return Ok(());
    };
    let version = store.new_version()?;
    for tag in [SUB, SCORE] {
        let from = keyspace::collection_prefix(tag, src_db, src, old_version);
        let to = keyspace::collection_prefix(tag, dst_db, dst, version);
        let mut it = store.iter(None, from.clone(), keyspace::prefix_end(&from));
        it.seek_to_first()?;
        while it.valid() {
            b.put(&keyspace::join(&to, &it.key()[from.len()..]), it.value()?);
            it.next()?;
        }
        it.status()?;
    }
    let copied = match *meta {
        Meta::List { head, size, .. } => Meta::List {
            version,
            head,
            size,
        },
        Meta::Collection { kind, size, .. } => Meta::Collection {
            kind,
            version,
            size,
        },
        Meta::String(_) => unreachable!("a string has no version"),
    };
    crate::store::put_meta(b, dst_db, dst, &copied, expire);
    Ok(())
}

/// RENAME and RENAMENX: `Some(true)` when renamed, `Some(false)` when NX
/// found the destination taken, `None` when there is no source.
fn rename_key(
    ctx: &mut Ctx<'_>,
    args: &[Vec<u8>],
    nx: bool,
) -> std::result::Result<Option<bool>, CmdError> {
    let (src, dst) = (&args[1], &args[2]);
    super::strings::check_key(dst)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[src, dst])?;
    let r = ReadOptions::new();
    let Some((meta, expire)) = store.meta_with_expire(&r, db, src)? else {
        return Ok(None);
    };
    let old = store.meta(&r, db, dst)?;
    if src == dst {
        return Ok(Some(!nx));
    }
    if nx && old.is_some() {
        return Ok(Some(false));
    }
    let mut b = WriteBatch::new();
    copy_into(ctx, &mut b, (db, src), (db, dst), &meta, expire)?;
    b.delete(&meta_key(db, src));
    store.write(b)?;
    store.ended(db, src, &meta);
    if let Some(old) = old {
        store.ended(db, dst, &old);
    }
    Ok(Some(true))
}

pub fn rename(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    match rename_key(ctx, args, false)? {
        None => Err(CmdError::err("no such key")),
        Some(_) => Ok(Reply::ok()),
    }
}

pub fn renamenx(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    match rename_key(ctx, args, true)? {
        None => Err(CmdError::err("no such key")),
        Some(done) => Ok(Reply::Int(i64::from(done))),
    }
}

pub fn copy(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (src, dst) = (&args[1], &args[2]);
    let db = ctx.client.db;
    let (mut dst_db, mut replace) = (db, false);
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            dst_db = db_index(&args[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src == dst && db == dst_db {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    super::strings::check_key(dst)?;
    let store = &ctx.shared.store;
    let _lock = store.lock_in(&[(db, src), (dst_db, dst)])?;
    let r = ReadOptions::new();
    let Some((meta, expire)) = store.meta_with_expire(&r, db, src)? else {
        return Ok(Reply::Int(0));
    };
    let old = store.meta(&r, dst_db, dst)?;
    if old.is_some() && !replace {
        return Ok(Reply::Int(0));
    }
    let mut b = WriteBatch::new();
    copy_into(ctx, &mut b, (db, src), (dst_db, dst), &meta, expire)?;
    store.write(b)?;
    if let Some(old) = old {
        store.ended(dst_db, dst, &old);
    }
    Ok(Reply::Int(1))
}

/// The database COPY's `DB` option names, if any.
pub fn copy_destination_db(args: &[Vec<u8>]) -> Option<u8> {
    let at = args.iter().skip(3).position(|a| is(a, "db"))? + 3;
    db_index(args.get(at + 1)?).ok()
}

/// A database number SELECT or COPY … DB accepts.
pub fn db_index(arg: &[u8]) -> std::result::Result<u8, CmdError> {
    let n = super::int_arg(arg)?;
    u8::try_from(n)
        .ok()
        .filter(|&n| n < DATABASES)
        .ok_or_else(|| CmdError::err("DB index is out of range"))
}

pub fn randomkey(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let (begin, end) = keyspace::range(META, db);
    let snapshot = store.snapshot();
    let mut it = store.iter(Some(&snapshot), begin.clone(), Some(end));
    it.seek_to_first()?;
    if !it.valid() {
        it.status()?;
        return Ok(Reply::Nil);
    }
    let first = it.key()[begin.len()..].to_vec();
    it.seek_to_last()?;
    let last = match it.valid() {
        true => it.key()[begin.len()..].to_vec(),
        false => first.clone(),
    };
    let mut rng = StdRng::seed_from_u64(store.random_seed());
    it.seek(&random_point(&begin, &first, &last, &mut rng))?;
    if !it.valid() {
        it.seek_to_first()?;
    }
    it.status()?;
    Ok(match it.valid() {
        true => Reply::Bulk(it.key()[begin.len()..].to_vec()),
        false => Reply::Nil,
    })
}

/// KEYS walks every key of the database (docs/server.md warns of it).
pub fn keys_(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let (begin, end) = keyspace::range(META, db);
    let mut it = store.iter(None, begin.clone(), Some(end));
    it.seek_to_first()?;
    let mut out = Vec::new();
    while it.valid() {
        let key = &it.key()[begin.len()..];
        if glob::matches(&args[1], key) {
            out.push(Reply::Bulk(key.to_vec()));
        }
        it.next()?;
    }
    it.status()?;
    Ok(Reply::Array(out))
}

pub fn object(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let sub = &args[1];
    if is(sub, "help") {
        return Ok(Reply::Array(
            [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "HELP",
                "    Print this help.",
            ]
            .iter()
            .map(|l| Reply::Status(l))
            .collect(),
        ));
    }
    if !is(sub, "encoding") {
        return Err(CmdError::err(format!(
            "unknown subcommand '{}'. Try OBJECT HELP.",
            sub.escape_ascii()
        )));
    }
    if args.len() != 3 {
        return Err(CmdError::err(
            "wrong number of arguments for 'object|encoding' command",
        ));
    }
    let meta = ctx
        .shared
        .store
        .meta(&ReadOptions::new(), ctx.client.db, &args[2])?;
    // One encoding per type: the key space stores each type one way.
    Ok(meta.map_or(Reply::Nil, |m| {
        Reply::bulk(match m.kind() {
            Type::String => "raw",
            Type::Hash | Type::Set => "hashtable",
            Type::List => "quicklist",
            Type::ZSet => "skiplist",
        })
    }))
}

/// Deletes every key of every database, as FLUSHDB does one.
pub fn flushall(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    flush_mode(args)?;
    for tag in [META, SUB, SCORE] {
        flush_range(ctx, vec![tag], vec![tag + 1])?;
    }
    Ok(Reply::ok())
}
