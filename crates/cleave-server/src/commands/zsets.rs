//! Sorted-set commands: a metadata key with the set's version and size,
//! a subkey per member holding its score, and a score-index key per
//! member ordered by score then member (keyspace.rs).

use std::collections::{HashMap, HashSet};

use cleave::{ReadOptions, Snapshot, WriteBatch};

use super::sets::{scan_args, scan_collection, scan_reply, scan_start};
use super::{int_arg, is, optional_count, parse_f64, span, Ctx};
use crate::commands::hashes::check_field;
use crate::error::CmdError;
use crate::keyspace::{
    self, collection_prefix, decode_score, encode_score, join, Type, SCORE, SUB,
};
use crate::resp::{format_double, Reply};
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
    let _lock = store.lock(db, &[key])?;
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
    // its first change (kept only when there are several).
    let several = pairs.len() > 1;
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
                if new == cur {
                    // Nothing to write (ZINCRBY by 0, ZADD of the score
                    // the member has).
                    incr_result = Some(new);
                    continue;
                }
                b.delete(&px.score(cur, member));
                updated += 1;
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
        if several {
            current.insert(member, new);
        }
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
    let _lock = store.lock(db, &[key])?;
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

/// One end of a lex range: `-`, `+`, `[member` or `(member`.
#[derive(Debug, Clone, PartialEq)]
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

/// Which members a range names.
#[derive(Debug, Clone)]
enum Spec {
    /// Places in score order, `start..=stop`, negative from the end.
    Rank(i64, i64),
    /// Scores between two bounds, each with whether it is excluded.
    Score((f64, bool), (f64, bool)),
    /// Members between two bounds, in byte order (meant for members of
    /// one score, as Redis's).
    Lex(LexBound, LexBound),
}

impl Spec {
    /// The range named by `min` and `max` (given `max` first with REV).
    fn parse(kind: &str, min: &[u8], max: &[u8]) -> std::result::Result<Spec, CmdError> {
        match kind {
            "score" => match (score_bound(min), score_bound(max)) {
                (Some(a), Some(b)) => Ok(Spec::Score(a, b)),
                _ => Err(CmdError::err("min or max is not a float")),
            },
            "lex" => match (lex_bound(min), lex_bound(max)) {
                (Some(a), Some(b)) => Ok(Spec::Lex(a, b)),
                _ => Err(CmdError::err("min or max not valid string range item")),
            },
            _ => Ok(Spec::Rank(int_arg(min)?, int_arg(max)?)),
        }
    }
}

/// Which of a range's members a reply holds: in reverse order or not,
/// then, as `[LIMIT offset count]`, skip `offset` and take at most `count`
/// (negative: all).
#[derive(Debug, Clone, Copy)]
struct Window {
    rev: bool,
    offset: i64,
    count: i64,
}

const ALL: Window = Window {
    rev: false,
    offset: 0,
    count: -1,
};

/// The subkey range `[begin, end)` `spec` covers in a sorted set, and
/// whether its entries are score-index keys (else member subkeys);
/// `None` for an empty one. Rank ranges cover the whole score index.
fn bounds(px: &Prefixes, spec: &Spec) -> Option<(Vec<u8>, Vec<u8>, bool)> {
    let scores_end = keyspace::prefix_end(&px.scores)?;
    let members_end = keyspace::prefix_end(&px.members)?;
    let (begin, end, scores) = match spec {
        Spec::Rank(..) => (px.scores.clone(), scores_end, true),
        Spec::Score((min, min_ex), (max, max_ex)) => {
            let at_min = join(&px.scores, &encode_score(*min));
            let at_max = join(&px.scores, &encode_score(*max));
            // An excluded bound is past (or before) every member of that
            // score.
            let begin = if *min_ex {
                keyspace::prefix_end(&at_min)?
            } else {
                at_min
            };
            let end = if *max_ex {
                at_max
            } else {
                keyspace::prefix_end(&at_max)?
            };
            (begin, end, true)
        }
        Spec::Lex(min, max) => {
            let begin = match min {
                LexBound::Min => px.members.clone(),
                LexBound::Max => return None,
                LexBound::Incl(m) => px.member(m),
                // The first key after the member's own.
                LexBound::Excl(m) => join(&px.member(m), &[0]),
            };
            let end = match max {
                LexBound::Max => members_end,
                LexBound::Min => return None,
                LexBound::Incl(m) => join(&px.member(m), &[0]),
                LexBound::Excl(m) => px.member(m),
            };
            (begin, end, false)
        }
    };
    (begin < end).then_some((begin, end, scores))
}

/// The members `spec` names in the sorted set `px` of `size` members, as
/// of `snapshot`, those `window` takes, in its order.
fn read_range(
    store: &Store,
    snapshot: &Snapshot,
    key: &[u8],
    (px, size): (&Prefixes, u64),
    spec: &Spec,
    window: Window,
) -> std::result::Result<Vec<(Vec<u8>, f64)>, CmdError> {
    let rev = window.rev;
    let mut out = Vec::new();
    let (mut skip, mut take) = (window.offset, window.count);
    if let Spec::Rank(start, stop) = spec {
        let (from, to) = span(*start, *stop, size);
        (skip, take) = (from as i64, (to - from) as i64);
    }
    if skip < 0 || take == 0 {
        return Ok(out);
    }
    let Some((begin, end, scores)) = bounds(px, spec) else {
        return Ok(out);
    };
    let mut it = store.iter(Some(snapshot), begin, Some(end));
    if rev {
        it.seek_to_last()?;
    } else {
        it.seek_to_first()?;
    }
    while it.valid() {
        if skip > 0 {
            skip -= 1;
        } else {
            let entry = if scores {
                score_entry(px, key, it.key())?
            } else {
                (
                    it.key()[px.members.len()..].to_vec(),
                    score_of(it.value()?, key)?,
                )
            };
            out.push(entry);
            if take > 0 && out.len() as i64 >= take {
                break;
            }
        }
        if rev {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    it.status()?;
    Ok(out)
}

/// The member and score of a score-index key.
fn score_entry(
    px: &Prefixes,
    key: &[u8],
    k: &[u8],
) -> std::result::Result<(Vec<u8>, f64), CmdError> {
    let plen = px.scores.len();
    let Some(bytes) = k.get(plen..plen + 8) else {
        return Err(CmdError::corrupt(key, "short score-index key"));
    };
    let score = decode_score(bytes.try_into().unwrap_or_default());
    Ok((k[plen + 8..].to_vec(), score))
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

/// The options after a range's bounds: LIMIT, WITHSCORES, and for ZRANGE
/// itself BYSCORE, BYLEX and REV.
struct RangeArgs {
    kind: &'static str,
    rev: bool,
    limit: Option<Window>,
    with_scores: bool,
}

fn range_args(
    args: &[Vec<u8>],
    kind: &'static str,
    zrange: bool,
) -> std::result::Result<RangeArgs, CmdError> {
    let mut o = RangeArgs {
        kind,
        rev: false,
        limit: None,
        with_scores: false,
    };
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if is(a, "withscores") && kind != "lex" {
            o.with_scores = true;
        } else if is(a, "limit") && i + 2 < args.len() {
            o.limit = Some(Window {
                rev: false,
                offset: int_arg(&args[i + 1])?,
                count: int_arg(&args[i + 2])?,
            });
            i += 2;
        } else if zrange && is(a, "byscore") {
            o.kind = "score";
        } else if zrange && is(a, "bylex") {
            o.kind = "lex";
        } else if zrange && is(a, "rev") {
            o.rev = true;
        } else if zrange && is(a, "withscores") {
            o.with_scores = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if o.limit.is_some() && o.kind == "rank" {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if o.with_scores && o.kind == "lex" {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    Ok(o)
}

/// Every ZRANGE form: `args` are the key, the two bounds (`max` first when
/// `rev`) and the options.
fn range(ctx: &mut Ctx<'_>, args: &[Vec<u8>], o: RangeArgs) -> Result {
    let (lo, hi) = if o.rev && o.kind != "rank" {
        (&args[2], &args[1])
    } else {
        (&args[1], &args[2])
    };
    let spec = Spec::parse(o.kind, lo, hi)?;
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[0]);
    let snapshot = store.snapshot();
    let Some((version, size, _)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::ZSet)?
    else {
        return Ok(Reply::Array(Vec::new()));
    };
    let px = Prefixes::new(db, key, version);
    let window = Window {
        rev: o.rev,
        ..o.limit.unwrap_or(ALL)
    };
    let members = read_range(store, &snapshot, key, (&px, size), &spec, window)?;
    Ok(range_reply(ctx, members, o.with_scores))
}

pub fn zrange(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let o = range_args(&args[4..], "rank", true)?;
    range(ctx, &args[1..], o)
}

pub fn zrevrange(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let mut o = range_args(&args[4..], "rank", false)?;
    o.rev = true;
    range(ctx, &args[1..], o)
}

pub fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let o = range_args(&args[4..], "score", false)?;
    range(ctx, &args[1..], o)
}

pub fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let mut o = range_args(&args[4..], "score", false)?;
    o.rev = true;
    range(ctx, &args[1..], o)
}

pub fn zrangebylex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let o = range_args(&args[4..], "lex", false)?;
    range(ctx, &args[1..], o)
}

pub fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let mut o = range_args(&args[4..], "lex", false)?;
    o.rev = true;
    range(ctx, &args[1..], o)
}

/// How many members a score or lex range holds.
fn count(ctx: &mut Ctx<'_>, args: &[Vec<u8>], kind: &str) -> Result {
    let spec = Spec::parse(kind, &args[2], &args[3])?;
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let snapshot = store.snapshot();
    let Some((version, _, _)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::ZSet)?
    else {
        return Ok(Reply::Int(0));
    };
    let px = Prefixes::new(db, key, version);
    let Some((begin, end, _)) = bounds(&px, &spec) else {
        return Ok(Reply::Int(0));
    };
    let mut it = store.iter(Some(&snapshot), begin, Some(end));
    it.seek_to_first()?;
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next()?;
    }
    it.status()?;
    Ok(Reply::Int(n))
}

pub fn zcount(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    count(ctx, args, "score")
}

pub fn zlexcount(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    count(ctx, args, "lex")
}

/// Removes the members a range names; how many.
fn remove_range(ctx: &mut Ctx<'_>, args: &[Vec<u8>], kind: &str) -> Result {
    let spec = Spec::parse(kind, &args[2], &args[3])?;
    let key = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let snapshot = store.snapshot();
    let Some((version, size, expire)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::ZSet)?
    else {
        return Ok(Reply::Int(0));
    };
    let px = Prefixes::new(db, key, version);
    let gone = read_range(store, &snapshot, key, (&px, size), &spec, ALL)?;
    remove_members(ctx, key, &px, version, size, expire, &gone)?;
    Ok(Reply::Int(gone.len() as i64))
}

/// Deletes `gone` (members with their scores) from the sorted set `px`,
/// and writes its new size.
fn remove_members(
    ctx: &Ctx<'_>,
    key: &[u8],
    px: &Prefixes,
    version: u64,
    size: u64,
    expire: u64,
    gone: &[(Vec<u8>, f64)],
) -> std::result::Result<(), CmdError> {
    if gone.is_empty() {
        return Ok(());
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let mut b = WriteBatch::new();
    for (m, s) in gone {
        b.delete(&px.member(m));
        b.delete(&px.score(*s, m));
    }
    let left = size - (gone.len() as u64).min(size);
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
    Ok(())
}

pub fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    remove_range(ctx, args, "score")
}

pub fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    remove_range(ctx, args, "lex")
}

pub fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    remove_range(ctx, args, "rank")
}

pub fn zincrby(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let zadd_args = [
        b"zadd".to_vec(),
        args[1].clone(),
        b"incr".to_vec(),
        args[2].clone(),
        args[3].clone(),
    ];
    zadd(ctx, &zadd_args)
}

pub fn zmscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let (db, key) = (ctx.client.db, &args[1]);
    let Some((version, _, _)) = store.collection(&r, db, key, Type::ZSet)? else {
        return Ok(Reply::Array(vec![Reply::Nil; args.len() - 2]));
    };
    let px = Prefixes::new(db, key, version);
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        out.push(match store.get(&r, &px.member(m))? {
            Some(v) => Reply::Double(score_of(&v, key)?),
            None => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// ZRANK and ZREVRANK: the member's place in score order, counted over the
/// score index up to it.
fn rank(ctx: &mut Ctx<'_>, args: &[Vec<u8>], rev: bool) -> Result {
    let with_score = match args.get(3) {
        None => false,
        Some(a) if args.len() == 4 && is(a, "withscore") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let (db, key, member) = (ctx.client.db, &args[1], &args[2]);
    let nil = if with_score {
        Reply::NilArray
    } else {
        Reply::Nil
    };
    let Some((version, size, _)) = store.collection(&r, db, key, Type::ZSet)? else {
        return Ok(nil);
    };
    let px = Prefixes::new(db, key, version);
    let Some(v) = store.get(&r, &px.member(member))? else {
        return Ok(nil);
    };
    let score = score_of(&v, key)?;
    let mut it = store.iter(
        Some(&snapshot),
        px.scores.clone(),
        Some(px.score(score, member)),
    );
    it.seek_to_first()?;
    let mut before = 0u64;
    while it.valid() {
        before += 1;
        it.next()?;
    }
    it.status()?;
    let place = if rev {
        size.saturating_sub(before + 1)
    } else {
        before
    };
    Ok(if with_score {
        Reply::Array(vec![Reply::Int(place as i64), Reply::Double(score)])
    } else {
        Reply::Int(place as i64)
    })
}

pub fn zrank(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    rank(ctx, args, false)
}

pub fn zrevrank(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    rank(ctx, args, true)
}

pub fn zscan(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let o = scan_args(&args[3..])?;
    let store = &ctx.shared.store;
    let (db, key) = (ctx.client.db, &args[1]);
    let snapshot = store.snapshot();
    let Some((version, _, _)) =
        store.collection(&Store::read_at(&snapshot), db, key, Type::ZSet)?
    else {
        scan_start(ctx, &[], &args[2])?;
        return Ok(scan_reply(0, Vec::new()));
    };
    let px = Prefixes::new(db, key, version);
    let (next, found) = scan_collection(ctx, &snapshot, &px.members, &args[2], &o, |m, v| {
        Ok(vec![
            Reply::Bulk(m.to_vec()),
            Reply::Bulk(format_double(score_of(v, key)?).into_bytes()),
        ])
    })?;
    Ok(scan_reply(next, found))
}

/// Pops up to `count` members with the lowest scores (or the highest).
fn zpop(ctx: &mut Ctx<'_>, args: &[Vec<u8>], highest: bool) -> Result {
    let count = optional_count(args, 2)?;
    let key = &args[1];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some((version, size, expire)) = store.collection(&r, db, key, Type::ZSet)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let px = Prefixes::new(db, key, version);
    let n = count.unwrap_or(1).min(size);
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
    while it.valid() && (popped.len() as u64) < n {
        popped.push(score_entry(&px, key, it.key())?);
        if highest {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    it.status()?;
    remove_members(ctx, key, &px, version, size, expire, &popped)?;
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
