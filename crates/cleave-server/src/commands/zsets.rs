//! Sorted-set commands: a metadata key with the set's version and size,
//! a subkey per member holding its score, and a score-index key per
//! member ordered by score then member (keyspace.rs).

use std::collections::{HashMap, HashSet};

use cleave::{ReadOptions, Snapshot, WriteBatch};

use super::{int_arg, is, parse_f64, Ctx};
use crate::commands::hashes::check_field;
use crate::error::CmdError;
use crate::keyspace::{
    self, collection_prefix, decode_score, encode_score, join, Type, SCORE, SUB,
};
use crate::resp::Reply;
use crate::store::{put_collection, Store};

type Result = std::result::Result<Reply, CmdError>;

/// A member's stored score.
fn score_of(value: &[u8], key: &[u8]) -> std::result::Result<f64, CmdError> {
    let bytes: [u8; 8] = value
        .try_into()
        .map_err(|_| CmdError::corrupt(key, &format!("score of {} bytes", value.len())))?;
    Ok(f64::from_be_bytes(bytes))
}

/// The subkey and score-index prefixes of one version of a sorted set.
struct Prefixes {
    members: Vec<u8>,
    scores: Vec<u8>,
}

impl Prefixes {
    fn new(db: u8, key: &[u8], version: u64) -> Prefixes {
        Prefixes {
            members: collection_prefix(SUB, db, key, version),
            scores: collection_prefix(SCORE, db, key, version),
        }
    }

    fn member(&self, member: &[u8]) -> Vec<u8> {
        join(&self.members, member)
    }

    fn score(&self, score: f64, member: &[u8]) -> Vec<u8> {
        let mut k = join(&self.scores, &encode_score(score));
        k.extend_from_slice(member);
        k
    }
}

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

pub fn zadd(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    let mut f = ZaddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        match () {
            _ if is(a, "nx") => f.nx = true,
            _ if is(a, "xx") => f.xx = true,
            _ if is(a, "gt") => f.gt = true,
            _ if is(a, "lt") => f.lt = true,
            _ if is(a, "ch") => f.ch = true,
            _ if is(a, "incr") => f.incr = true,
            _ => break,
        }
        i += 1;
    }
    let elements = &args[i..];
    if elements.is_empty() || !elements.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && elements.len() > 2 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(elements.len() / 2);
    for p in elements.chunks_exact(2) {
        let score = parse_f64(&p[0]).ok_or(CmdError::NotFloat)?;
        check_field(key, &p[1])?;
        pairs.push((score, p[1].as_slice()));
    }

    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key]);
    let r = ReadOptions::new();
    let existing = store.collection(&r, db, key, Type::ZSet)?;
    // A new sorted set has no expiry; a changed one keeps its own.
    let (version, size, expire) = match existing {
        Some(vse) => vse,
        None => {
            if f.xx {
                // Nothing to update, and XX creates nothing.
                return Ok(if f.incr { Reply::Nil } else { Reply::Int(0) });
            }
            (store.new_version()?, 0, 0)
        }
    };
    let px = Prefixes::new(db, key, version);
    // Scores as this command has left them, so a member given twice sees
    // its first change.
    let mut current: HashMap<&[u8], f64> = HashMap::new();
    let mut b = WriteBatch::new();
    let (mut added, mut updated) = (0u64, 0u64);
    let mut incr_result = None;
    for (score, member) in pairs {
        let cur = match current.get(member) {
            Some(s) => Some(*s),
            None if existing.is_none() => None,
            None => store
                .get(&r, &px.member(member))?
                .map(|v| score_of(&v, key))
                .transpose()?,
        };
        let new = match cur {
            Some(cur) => {
                if f.nx {
                    continue;
                }
                let new = if f.incr { cur + score } else { score };
                if new.is_nan() {
                    return Err(CmdError::err("resulting score is not a number (NaN)"));
                }
                if (f.lt && new >= cur) || (f.gt && new <= cur) {
                    continue;
                }
                if new != cur {
                    b.delete(&px.score(cur, member));
                    updated += 1;
                }
                new
            }
            None => {
                if f.xx {
                    continue;
                }
                added += 1;
                score
            }
        };
        b.put(&px.member(member), &new.to_be_bytes());
        b.put(&px.score(new, member), b"");
        current.insert(member, new);
        incr_result = Some(new);
    }
    if added > 0 || updated > 0 {
        put_collection(&mut b, db, key, Type::ZSet, version, size + added, expire);
        store.write(b)?;
    }
    Ok(if f.incr {
        incr_result.map_or(Reply::Nil, Reply::Double)
    } else if f.ch {
        Reply::Int((added + updated) as i64)
    } else {
        Reply::Int(added as i64)
    })
}

pub fn zrem(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let key = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key]);
    let r = ReadOptions::new();
    let Some((version, size, expire)) = store.collection(&r, db, key, Type::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    let px = Prefixes::new(db, key, version);
    let mut b = WriteBatch::new();
    let mut removed = HashSet::new();
    for member in &args[2..] {
        if removed.contains(member.as_slice()) {
            continue;
        }
        if let Some(v) = store.get(&r, &px.member(member))? {
            b.delete(&px.member(member));
            b.delete(&px.score(score_of(&v, key)?, member));
            removed.insert(member.as_slice());
        }
    }
    let n = removed.len() as u64;
    if n == 0 {
        return Ok(Reply::Int(0));
    }
    let size = size.saturating_sub(n);
    put_collection(&mut b, db, key, Type::ZSet, version, size, expire);
    store.write(b)?;
    Ok(Reply::Int(n as i64))
}

pub fn zscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let (db, key) = (ctx.client.db, &args[1]);
    let Some((version, _, _)) = store.collection(&r, db, key, Type::ZSet)? else {
        return Ok(Reply::Nil);
    };
    let px = Prefixes::new(db, key, version);
    match store.get(&r, &px.member(&args[2]))? {
        Some(v) => Ok(Reply::Double(score_of(&v, key)?)),
        None => Ok(Reply::Nil),
    }
}

pub fn zcard(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let size = ctx
        .shared
        .store
        .collection(&ReadOptions::new(), ctx.client.db, &args[1], Type::ZSet)?
        .map_or(0, |(_, size, _)| size);
    Ok(Reply::Int(size as i64))
}

/// One end of a score range: the score, and whether it is excluded.
fn score_bound(arg: &[u8]) -> Option<(f64, bool)> {
    match arg.strip_prefix(b"(") {
        Some(rest) => Some((parse_f64(rest)?, true)),
        None => Some((parse_f64(arg)?, false)),
    }
}

/// `[LIMIT offset count]` and, where allowed, `WITHSCORES`.
struct RangeOptions {
    offset: i64,
    count: i64,
    with_scores: bool,
}

fn range_options(
    args: &[Vec<u8>],
    scores_allowed: bool,
) -> std::result::Result<RangeOptions, CmdError> {
    let mut o = RangeOptions {
        offset: 0,
        count: -1,
        with_scores: false,
    };
    let mut i = 0;
    while i < args.len() {
        if scores_allowed && is(&args[i], "withscores") {
            o.with_scores = true;
            i += 1;
        } else if is(&args[i], "limit") && i + 2 < args.len() {
            o.offset = int_arg(&args[i + 1])?;
            o.count = int_arg(&args[i + 2])?;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(o)
}

/// Collects members and their scores from the entries of `[begin, end)`
/// while `entry` finds them in range (`None` ends the range), after `o`'s
/// offset and up to its count.
fn collect(
    store: &Store,
    snapshot: &Snapshot,
    begin: Vec<u8>,
    end: Option<Vec<u8>>,
    o: &RangeOptions,
    mut entry: impl FnMut(&[u8], &[u8]) -> std::result::Result<Option<(Vec<u8>, f64)>, CmdError>,
) -> std::result::Result<Vec<(Vec<u8>, f64)>, CmdError> {
    let mut out = Vec::new();
    if o.offset < 0 || o.count == 0 {
        return Ok(out);
    }
    let mut skip = o.offset;
    let mut it = store.iter(Some(snapshot), begin, end);
    it.seek_to_first()?;
    while it.valid() {
        match entry(it.key(), it.value()?)? {
            None => break,
            Some(_) if skip > 0 => skip -= 1,
            Some(m) => {
                out.push(m);
                if o.count > 0 && out.len() as i64 >= o.count {
                    break;
                }
            }
        }
        it.next()?;
    }
    it.status()?;
    Ok(out)
}

fn range_reply(ctx: &Ctx<'_>, members: Vec<(Vec<u8>, f64)>, with_scores: bool) -> Reply {
    if !with_scores {
        return Reply::Array(members.into_iter().map(|(m, _)| Reply::Bulk(m)).collect());
    }
    if ctx.client.proto >= 3 {
        // RESP3: a pair per member, as Redis 7 answers.
        return Reply::Array(
            members
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect(),
        );
    }
    Reply::Array(
        members
            .into_iter()
            .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
            .collect(),
    )
}

pub fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (Some((min, min_ex)), Some((max, max_ex))) = (score_bound(&args[2]), score_bound(&args[3]))
    else {
        return Err(CmdError::err("min or max is not a float"));
    };
    let o = range_options(&args[4..], true)?;
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let snapshot = store.snapshot();
    let Some((version, _, _)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::ZSet)?
    else {
        return Ok(Reply::Array(Vec::new()));
    };
    let px = Prefixes::new(db, key, version);
    let at_min = join(&px.scores, &encode_score(min));
    // An excluded minimum starts after every member of that score.
    let begin = if min_ex {
        match keyspace::prefix_end(&at_min) {
            Some(after) => after,
            None => return Ok(Reply::Array(Vec::new())),
        }
    } else {
        at_min
    };
    let end = keyspace::prefix_end(&px.scores);
    let plen = px.scores.len();
    let members = collect(store, &snapshot, begin, end, &o, |k, _| {
        let Some(bytes) = k.get(plen..plen + 8) else {
            return Err(CmdError::corrupt(key, "short score-index key"));
        };
        let score = decode_score(bytes.try_into().unwrap_or_default());
        if score > max || (max_ex && score == max) {
            return Ok(None);
        }
        Ok(Some((k[plen + 8..].to_vec(), score)))
    })?;
    Ok(range_reply(ctx, members, o.with_scores))
}

/// One end of a lex range: `-`, `+`, `[member` or `(member`.
#[derive(Debug, PartialEq)]
enum LexBound {
    Min,
    Max,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

fn lex_bound(arg: &[u8]) -> Option<LexBound> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(LexBound::Min),
        b'+' if arg.len() == 1 => Some(LexBound::Max),
        b'[' => Some(LexBound::Incl(arg[1..].to_vec())),
        b'(' => Some(LexBound::Excl(arg[1..].to_vec())),
        _ => None,
    }
}

pub fn zrangebylex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (Some(min), Some(max)) = (lex_bound(&args[2]), lex_bound(&args[3])) else {
        return Err(CmdError::err("min or max not valid string range item"));
    };
    let o = range_options(&args[4..], false)?;
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let snapshot = store.snapshot();
    let Some((version, _, _)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::ZSet)?
    else {
        return Ok(Reply::Array(Vec::new()));
    };
    if min == LexBound::Max || max == LexBound::Min {
        return Ok(Reply::Array(Vec::new()));
    }
    let px = Prefixes::new(db, key, version);
    let begin = match &min {
        LexBound::Incl(m) => px.member(m),
        // The first key after the member's own.
        LexBound::Excl(m) => join(&px.member(m), &[0]),
        _ => px.members.clone(),
    };
    let plen = px.members.len();
    let members = collect(
        store,
        &snapshot,
        begin,
        keyspace::prefix_end(&px.members),
        &o,
        |k, v| {
            let member = &k[plen..];
            let past = match &max {
                LexBound::Incl(m) => member > m.as_slice(),
                LexBound::Excl(m) => member >= m.as_slice(),
                _ => false,
            };
            if past {
                return Ok(None);
            }
            Ok(Some((member.to_vec(), score_of(v, key)?)))
        },
    )?;
    Ok(range_reply(ctx, members, false))
}

/// Pops up to `count` members with the lowest scores (or the highest).
fn zpop(ctx: &mut Ctx<'_>, args: &[Vec<u8>], highest: bool) -> Result {
    let count = match args.len() {
        2 => None,
        3 => Some(
            u64::try_from(int_arg(&args[2])?)
                .map_err(|_| CmdError::err("value is out of range, must be positive"))?,
        ),
        _ => return Err(CmdError::Syntax),
    };
    let key = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key]);
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some((version, size, expire)) = store.collection(&r, db, key, Type::ZSet)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let px = Prefixes::new(db, key, version);
    let n = count.unwrap_or(1).min(size);
    let plen = px.scores.len();
    let mut it = store.iter(
        Some(&snapshot),
        px.scores.clone(),
        keyspace::prefix_end(&px.scores),
    );
    if highest {
        it.seek_to_last()?;
    } else {
        it.seek_to_first()?;
    }
    let mut popped = Vec::with_capacity(n.min(1 << 16) as usize);
    let mut b = WriteBatch::new();
    while it.valid() && (popped.len() as u64) < n {
        let k = it.key();
        let Some(bytes) = k.get(plen..plen + 8) else {
            return Err(CmdError::corrupt(key, "short score-index key"));
        };
        let score = decode_score(bytes.try_into().unwrap_or_default());
        let member = k[plen + 8..].to_vec();
        b.delete(k);
        b.delete(&px.member(&member));
        popped.push((member, score));
        if highest {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    it.status()?;
    if !popped.is_empty() {
        let left = size - (popped.len() as u64).min(size);
        put_collection(&mut b, db, key, Type::ZSet, version, left, expire);
        store.write(b)?;
        if left == 0 {
            let meta = keyspace::Meta::Collection {
                kind: Type::ZSet,
                version,
                size: 0,
            };
            store.ended(db, key, &meta);
        }
    }
    // Without a count, one flat pair in either protocol, as Redis 7.
    if count.is_none() {
        return Ok(Reply::Array(
            popped
                .into_iter()
                .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
                .collect(),
        ));
    }
    Ok(range_reply(ctx, popped, true))
}

pub fn zpopmin(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    zpop(ctx, args, false)
}

pub fn zpopmax(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    zpop(ctx, args, true)
}
