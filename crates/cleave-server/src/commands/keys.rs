//! Commands on keys of any type.

use std::collections::HashSet;

use cleave::{ReadOptions, WriteBatch};

use super::{is, Ctx};
use crate::error::CmdError;
use crate::glob;
use crate::keyspace::{self, meta_key, Meta, META, SCORE, SUB};
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
    let _lock = store.lock(db, &keys);
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

/// An estimate from the engine's counts (`Db::estimate_num_keys`), as
/// kvrocks's DBSIZE is: exact while the keys are in memtables, within a
/// file's worth once they are in sstables; overwritten keys not yet
/// compacted count more than once.
pub fn dbsize(ctx: &mut Ctx<'_>, _args: &[Vec<u8>]) -> Result {
    let (begin, end) = keyspace::range(META, ctx.client.db);
    Ok(Reply::Int(
        ctx.shared.store.db().estimate_num_keys(&begin, &end) as i64,
    ))
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
    match &args[1..] {
        [] => {}
        [mode] if is(mode, "async") || is(mode, "sync") => {}
        _ => return Err(CmdError::Syntax),
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    for tag in [META, SUB, SCORE] {
        let (begin, end) = keyspace::range(tag, db);
        let mut it = store.iter(None, begin, Some(end));
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
        // The deletions compacted away at once: the disk space comes back
        // as Redis's memory does, and DBSIZE's estimate, which counts
        // deletions in sstables against the keys, is exact again.
        let (begin, end) = keyspace::range(tag, db);
        store.db().compact_range(Some(&begin), Some(&end))?;
    }
    Ok(Reply::ok())
}
