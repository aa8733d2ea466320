//! The model test: random commands against the server's command layer and
//! against a plain in-memory model of Redis's semantics, every reply
//! compared; the database flushed, compacted and reopened (on an
//! in-memory file system) along the way. Then the same with injected I/O
//! faults: a failed command answers an error, and after a reopen every
//! acknowledged write is there.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use std::time::{Duration, Instant};

use cleave::vfs::{FaultFs, FaultOp, Fs, MemFs, OsFs};
use cleave::Options;
use cleave_server::cluster::layout::Layout;
use cleave_server::cluster::{Cluster, ReadMode, Settings};
use cleave_server::commands::{execute, Ctx};
use cleave_server::pipeline;
use cleave_server::resp::{format_double, Reply};
use cleave_server::state::{Client, Fixed, Limits, Shared};
use cleave_server::store::{FsyncMode, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[derive(Debug, Clone)]
enum Value {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    ZSet(BTreeMap<Vec<u8>, f64>),
    List(VecDeque<Vec<u8>>),
    Set(BTreeSet<Vec<u8>>),
}

/// Redis, as a map.
#[derive(Default, Clone)]
struct Model {
    keys: HashMap<Vec<u8>, Value>,
    /// Expiries (ms since the epoch) of keys that have one: all far in the
    /// future, so that none passes during a run (a time in the past
    /// deletes its key at once).
    expires: HashMap<Vec<u8>, u64>,
}

/// 2100-01-01, in seconds: the expiries the test sets are after it.
const FAR_FUTURE_SECS: u64 = 4_102_444_800;

fn bulk(b: &[u8]) -> Reply {
    Reply::Bulk(b.to_vec())
}

fn wrongtype() -> Reply {
    Reply::Error(WRONGTYPE.into())
}

impl Model {
    /// The reply Redis gives to `args`, applying its effect.
    fn apply(&mut self, args: &[Vec<u8>]) -> Reply {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        let key = args.get(1).cloned().unwrap_or_default();
        match name.as_str() {
            "GET" => match self.keys.get(&key) {
                None => Reply::Nil,
                Some(Value::Str(v)) => bulk(v),
                Some(_) => wrongtype(),
            },
            "SET" => {
                let opt = args
                    .get(3)
                    .map(|o| String::from_utf8_lossy(o).to_ascii_uppercase());
                let old = self.keys.get(&key).cloned();
                if opt.as_deref() == Some("GET")
                    && old.as_ref().is_some_and(|v| !matches!(v, Value::Str(_)))
                {
                    return wrongtype();
                }
                let skip = match opt.as_deref() {
                    Some("NX") => old.is_some(),
                    Some("XX") => old.is_none(),
                    _ => false,
                };
                if !skip {
                    if opt.as_deref() != Some("KEEPTTL") {
                        self.expires.remove(&key);
                    }
                    self.keys.insert(key, Value::Str(args[2].clone()));
                }
                match opt.as_deref() {
                    Some("GET") => match old {
                        Some(Value::Str(v)) => bulk(&v),
                        _ => Reply::Nil,
                    },
                    _ if skip => Reply::Nil,
                    _ => Reply::ok(),
                }
            }
            "APPEND" => match self.keys.get_mut(&key) {
                None => {
                    let n = args[2].len();
                    self.keys.insert(key, Value::Str(args[2].clone()));
                    Reply::Int(n as i64)
                }
                Some(Value::Str(v)) => {
                    v.extend_from_slice(&args[2]);
                    Reply::Int(v.len() as i64)
                }
                Some(_) => wrongtype(),
            },
            "INCRBY" => {
                let by: i64 = String::from_utf8_lossy(&args[2]).parse().unwrap();
                let old = match self.keys.get(&key) {
                    None => 0,
                    // Redis takes only an integer's canonical text.
                    Some(Value::Str(v)) => match std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok().filter(|n| n.to_string() == s))
                    {
                        Some(n) => n,
                        None => {
                            return Reply::Error(
                                "ERR value is not an integer or out of range".into(),
                            )
                        }
                    },
                    Some(_) => return wrongtype(),
                };
                match old.checked_add(by) {
                    Some(n) => {
                        self.keys
                            .insert(key, Value::Str(n.to_string().into_bytes()));
                        Reply::Int(n)
                    }
                    None => Reply::Error("ERR increment or decrement would overflow".into()),
                }
            }
            "DEL" => {
                let mut n = 0;
                for k in &args[1..] {
                    self.expires.remove(k);
                    if self.keys.remove(k).is_some() {
                        n += 1;
                    }
                }
                Reply::Int(n)
            }
            "EXPIREAT" | "PEXPIREAT" => {
                let n: u64 = String::from_utf8_lossy(&args[2]).parse().unwrap();
                let at = if name == "EXPIREAT" { n * 1000 } else { n };
                if !self.keys.contains_key(&key) {
                    return Reply::Int(0);
                }
                let old = self.expires.get(&key).copied();
                let allowed = match args
                    .get(3)
                    .map(|o| String::from_utf8_lossy(o).to_ascii_uppercase())
                    .as_deref()
                {
                    Some("NX") => old.is_none(),
                    Some("XX") => old.is_some(),
                    Some("GT") => old.is_some_and(|o| at > o),
                    Some("LT") => old.is_none_or(|o| at < o),
                    _ => true,
                };
                if !allowed {
                    return Reply::Int(0);
                }
                if at < FAR_FUTURE_SECS * 1000 {
                    // In the past: the key goes.
                    self.keys.remove(&key);
                    self.expires.remove(&key);
                } else {
                    self.expires.insert(key, at);
                }
                Reply::Int(1)
            }
            "PERSIST" => Reply::Int(i64::from(
                self.keys.contains_key(&key) && self.expires.remove(&key).is_some(),
            )),
            "PEXPIRETIME" => Reply::Int(match (self.keys.get(&key), self.expires.get(&key)) {
                (None, _) => -2,
                (Some(_), None) => -1,
                (Some(_), Some(&at)) => at as i64,
            }),
            "EXISTS" => Reply::Int(
                args[1..]
                    .iter()
                    .filter(|k| self.keys.contains_key(*k))
                    .count() as i64,
            ),
            "TYPE" => Reply::Status(match self.keys.get(&key) {
                None => "none",
                Some(Value::Str(_)) => "string",
                Some(Value::Hash(_)) => "hash",
                Some(Value::ZSet(_)) => "zset",
                Some(Value::List(_)) => "list",
                Some(Value::Set(_)) => "set",
            }),
            "MGET" => Reply::Array(
                args[1..]
                    .iter()
                    .map(|k| match self.keys.get(k) {
                        Some(Value::Str(v)) => bulk(v),
                        _ => Reply::Nil,
                    })
                    .collect(),
            ),
            "HSET" => {
                let h = match self
                    .keys
                    .entry(key)
                    .or_insert_with(|| Value::Hash(BTreeMap::new()))
                {
                    Value::Hash(h) => h,
                    _ => return wrongtype(),
                };
                let mut added = 0;
                for p in args[2..].chunks(2) {
                    if h.insert(p[0].clone(), p[1].clone()).is_none() {
                        added += 1;
                    }
                }
                Reply::Int(added)
            }
            "HDEL" => match self.keys.get_mut(&key) {
                None => Reply::Int(0),
                Some(Value::Hash(h)) => {
                    let n = args[2..].iter().filter(|f| h.remove(*f).is_some()).count();
                    if h.is_empty() {
                        self.keys.remove(&key);
                        self.expires.remove(&key);
                    }
                    Reply::Int(n as i64)
                }
                Some(_) => wrongtype(),
            },
            "HGET" => match self.keys.get(&key) {
                None => Reply::Nil,
                Some(Value::Hash(h)) => h.get(&args[2]).map_or(Reply::Nil, |v| bulk(v)),
                Some(_) => wrongtype(),
            },
            "HGETALL" => match self.keys.get(&key) {
                None => Reply::Map(vec![]),
                Some(Value::Hash(h)) => {
                    Reply::Map(h.iter().map(|(f, v)| (bulk(f), bulk(v))).collect())
                }
                Some(_) => wrongtype(),
            },
            "HLEN" => match self.keys.get(&key) {
                None => Reply::Int(0),
                Some(Value::Hash(h)) => Reply::Int(h.len() as i64),
                Some(_) => wrongtype(),
            },
            "ZADD" => {
                let opt = String::from_utf8_lossy(&args[2]).to_ascii_uppercase();
                let (opt, rest) = if ["NX", "XX", "GT", "LT", "CH"].contains(&opt.as_str()) {
                    (Some(opt), &args[3..])
                } else {
                    (None, &args[2..])
                };
                if opt.as_deref() == Some("XX") && !self.keys.contains_key(&key) {
                    return Reply::Int(0);
                }
                let z = match self
                    .keys
                    .entry(key)
                    .or_insert_with(|| Value::ZSet(BTreeMap::new()))
                {
                    Value::ZSet(z) => z,
                    _ => return wrongtype(),
                };
                let (mut added, mut changed) = (0, 0);
                for p in rest.chunks(2) {
                    let score = parse_score(&p[0]);
                    match z.get(&p[1]).copied() {
                        Some(cur) => {
                            let skip = match opt.as_deref() {
                                Some("NX") => true,
                                Some("GT") => score <= cur,
                                Some("LT") => score >= cur,
                                _ => false,
                            };
                            if !skip && score != cur {
                                z.insert(p[1].clone(), score);
                                changed += 1;
                            }
                        }
                        None if opt.as_deref() == Some("XX") => {}
                        None => {
                            z.insert(p[1].clone(), score);
                            added += 1;
                        }
                    }
                }
                Reply::Int(if opt.as_deref() == Some("CH") {
                    added + changed
                } else {
                    added
                })
            }
            "ZREM" => match self.keys.get_mut(&key) {
                None => Reply::Int(0),
                Some(Value::ZSet(z)) => {
                    let n = args[2..].iter().filter(|m| z.remove(*m).is_some()).count();
                    if z.is_empty() {
                        self.keys.remove(&key);
                        self.expires.remove(&key);
                    }
                    Reply::Int(n as i64)
                }
                Some(_) => wrongtype(),
            },
            "ZSCORE" => match self.keys.get(&key) {
                None => Reply::Nil,
                Some(Value::ZSet(z)) => z.get(&args[2]).map_or(Reply::Nil, |s| Reply::Double(*s)),
                Some(_) => wrongtype(),
            },
            "ZCARD" => match self.keys.get(&key) {
                None => Reply::Int(0),
                Some(Value::ZSet(z)) => Reply::Int(z.len() as i64),
                Some(_) => wrongtype(),
            },
            "ZRANGEBYSCORE" => match self.keys.get(&key) {
                None => Reply::Array(vec![]),
                Some(Value::ZSet(z)) => {
                    let mut by_score: Vec<(f64, &Vec<u8>)> =
                        z.iter().map(|(m, s)| (*s, m)).collect();
                    by_score.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
                    Reply::Array(
                        by_score
                            .into_iter()
                            .flat_map(|(s, m)| [bulk(m), Reply::Double(s)])
                            .collect(),
                    )
                }
                Some(_) => wrongtype(),
            },
            "ZRANGEBYLEX" => match self.keys.get(&key) {
                None => Reply::Array(vec![]),
                Some(Value::ZSet(z)) => Reply::Array(z.keys().map(|m| bulk(m)).collect()),
                Some(_) => wrongtype(),
            },
            "LPUSH" | "RPUSH" => {
                let l = match self
                    .keys
                    .entry(key)
                    .or_insert_with(|| Value::List(VecDeque::new()))
                {
                    Value::List(l) => l,
                    _ => return wrongtype(),
                };
                for v in &args[2..] {
                    if name == "LPUSH" {
                        l.push_front(v.clone());
                    } else {
                        l.push_back(v.clone());
                    }
                }
                Reply::Int(l.len() as i64)
            }
            "LPOP" | "RPOP" => {
                let count: Option<usize> = args.get(2).map(|c| parse(c));
                let Some(l) = self.list(&key) else {
                    return match self.keys.get(&key) {
                        Some(_) => wrongtype(),
                        None if count.is_some() => Reply::NilArray,
                        None => Reply::Nil,
                    };
                };
                let mut out = Vec::new();
                for _ in 0..count.unwrap_or(1) {
                    let v = if name == "LPOP" {
                        l.pop_front()
                    } else {
                        l.pop_back()
                    };
                    out.extend(v.map(|v| bulk(&v)));
                }
                self.drop_if_empty(&key);
                match count {
                    Some(_) => Reply::Array(out),
                    None => out.pop().unwrap_or(Reply::Nil),
                }
            }
            "LLEN" => match self.keys.get(&key) {
                None => Reply::Int(0),
                Some(Value::List(l)) => Reply::Int(l.len() as i64),
                Some(_) => wrongtype(),
            },
            "LRANGE" => match self.keys.get(&key) {
                None => Reply::Array(vec![]),
                Some(Value::List(l)) => Reply::Array(l.iter().map(|v| bulk(v)).collect()),
                Some(_) => wrongtype(),
            },
            "LINDEX" => match self.keys.get(&key) {
                None => Reply::Nil,
                Some(Value::List(l)) => {
                    let i: i64 = parse(&args[2]);
                    let i = if i < 0 { l.len() as i64 + i } else { i };
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| l.get(i))
                        .map_or(Reply::Nil, |v| bulk(v))
                }
                Some(_) => wrongtype(),
            },
            "LSET" => {
                let i: i64 = parse(&args[2]);
                match self.keys.get_mut(&key) {
                    None => Reply::Error("ERR no such key".into()),
                    Some(Value::List(l)) => {
                        let i = if i < 0 { l.len() as i64 + i } else { i };
                        match usize::try_from(i).ok().and_then(|i| l.get_mut(i)) {
                            Some(slot) => {
                                *slot = args[3].clone();
                                Reply::ok()
                            }
                            None => Reply::Error("ERR index out of range".into()),
                        }
                    }
                    Some(_) => wrongtype(),
                }
            }
            "LREM" => {
                let count: i64 = parse(&args[2]);
                let Some(l) = self.list(&key) else {
                    return self.missing_or_wrongtype(&key, Reply::Int(0));
                };
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut places: Vec<usize> = (0..l.len()).filter(|&i| l[i] == args[3]).collect();
                if count < 0 {
                    places.reverse();
                }
                places.truncate(limit);
                places.sort_unstable();
                for &i in places.iter().rev() {
                    l.remove(i);
                }
                self.drop_if_empty(&key);
                Reply::Int(places.len() as i64)
            }
            "LINSERT" => {
                let Some(l) = self.list(&key) else {
                    return self.missing_or_wrongtype(&key, Reply::Int(0));
                };
                match l.iter().position(|v| *v == args[3]) {
                    None => Reply::Int(-1),
                    Some(at) => {
                        let after = args[2].eq_ignore_ascii_case(b"after");
                        l.insert(at + usize::from(after), args[4].clone());
                        Reply::Int(l.len() as i64)
                    }
                }
            }
            "LTRIM" => {
                let (start, stop): (i64, i64) = (parse(&args[2]), parse(&args[3]));
                let Some(l) = self.list(&key) else {
                    return self.missing_or_wrongtype(&key, Reply::ok());
                };
                let n = l.len() as i64;
                let norm = |i: i64| if i < 0 { n + i } else { i };
                let (from, to) = (norm(start).max(0), (norm(stop) + 1).min(n));
                let kept: VecDeque<_> = if from < to {
                    l.range(from as usize..to as usize).cloned().collect()
                } else {
                    VecDeque::new()
                };
                *l = kept;
                self.drop_if_empty(&key);
                Reply::ok()
            }
            "LMOVE" => {
                let dst = args[2].clone();
                let Some(src) = self.list(&key) else {
                    return self.missing_or_wrongtype(&key, Reply::Nil);
                };
                if src.is_empty() {
                    return Reply::Nil;
                }
                if !matches!(self.keys.get(&dst), None | Some(Value::List(_))) {
                    return wrongtype();
                }
                let src = self.list(&key).unwrap();
                let v = if args[3].eq_ignore_ascii_case(b"left") {
                    src.pop_front()
                } else {
                    src.pop_back()
                }
                .unwrap();
                let Value::List(d) = self
                    .keys
                    .entry(dst)
                    .or_insert_with(|| Value::List(VecDeque::new()))
                else {
                    unreachable!()
                };
                if args[4].eq_ignore_ascii_case(b"left") {
                    d.push_front(v.clone());
                } else {
                    d.push_back(v.clone());
                }
                self.drop_if_empty(&key);
                bulk(&v)
            }
            "SADD" => {
                let set = match self
                    .keys
                    .entry(key)
                    .or_insert_with(|| Value::Set(BTreeSet::new()))
                {
                    Value::Set(s) => s,
                    _ => return wrongtype(),
                };
                Reply::Int(args[2..].iter().filter(|m| set.insert(m.to_vec())).count() as i64)
            }
            "SREM" => match self.keys.get_mut(&key) {
                None => Reply::Int(0),
                Some(Value::Set(set)) => {
                    let n = args[2..].iter().filter(|m| set.remove(*m)).count();
                    self.drop_if_empty(&key);
                    Reply::Int(n as i64)
                }
                Some(_) => wrongtype(),
            },
            "SMEMBERS" => match self.keys.get(&key) {
                None => Reply::Set(vec![]),
                Some(Value::Set(set)) => Reply::Set(set.iter().map(|m| bulk(m)).collect()),
                Some(_) => wrongtype(),
            },
            "SISMEMBER" => match self.keys.get(&key) {
                None => Reply::Int(0),
                Some(Value::Set(set)) => Reply::Int(i64::from(set.contains(&args[2]))),
                Some(_) => wrongtype(),
            },
            "SCARD" => match self.keys.get(&key) {
                None => Reply::Int(0),
                Some(Value::Set(set)) => Reply::Int(set.len() as i64),
                Some(_) => wrongtype(),
            },
            "SINTERSTORE" => {
                let mut out: Option<BTreeSet<Vec<u8>>> = None;
                for k in &args[2..] {
                    let set = match self.keys.get(k) {
                        None => BTreeSet::new(),
                        Some(Value::Set(s)) => s.clone(),
                        Some(_) => return wrongtype(),
                    };
                    out = Some(match out {
                        None => set,
                        Some(o) => o.intersection(&set).cloned().collect(),
                    });
                }
                let out = out.unwrap_or_default();
                let n = out.len();
                self.expires.remove(&key);
                if out.is_empty() {
                    self.keys.remove(&key);
                } else {
                    self.keys.insert(key, Value::Set(out));
                }
                Reply::Int(n as i64)
            }
            // Pops every member: what it picks at random is then known.
            "SPOP" => {
                let Some(Value::Set(set)) = self.keys.get(&key) else {
                    return self.missing_or_wrongtype(&key, Reply::Set(vec![]));
                };
                let out = Reply::Set(set.iter().map(|m| bulk(m)).collect());
                self.keys.remove(&key);
                self.expires.remove(&key);
                out
            }
            "ZPOPMIN" => {
                let Some(Value::ZSet(z)) = self.keys.get_mut(&key) else {
                    return self.missing_or_wrongtype(&key, Reply::Array(vec![]));
                };
                let Some((member, score)) = z
                    .iter()
                    .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(b.0)))
                    .map(|(m, s)| (m.clone(), *s))
                else {
                    return Reply::Array(vec![]);
                };
                z.remove(&member);
                self.drop_if_empty(&key);
                Reply::Array(vec![bulk(&member), Reply::Double(score)])
            }
            other => panic!("the model has no {other}"),
        }
    }

    /// The list at `key`, if it holds one.
    fn list(&mut self, key: &[u8]) -> Option<&mut VecDeque<Vec<u8>>> {
        match self.keys.get_mut(key) {
            Some(Value::List(l)) => Some(l),
            _ => None,
        }
    }

    /// `reply` if `key` holds nothing, else WRONGTYPE.
    fn missing_or_wrongtype(&self, key: &[u8], reply: Reply) -> Reply {
        if self.keys.contains_key(key) {
            wrongtype()
        } else {
            reply
        }
    }

    /// Redis deletes an emptied list, set or sorted set.
    fn drop_if_empty(&mut self, key: &[u8]) {
        let empty = match self.keys.get(key) {
            Some(Value::List(l)) => l.is_empty(),
            Some(Value::Set(s)) => s.is_empty(),
            Some(Value::ZSet(z)) => z.is_empty(),
            Some(Value::Hash(h)) => h.is_empty(),
            _ => false,
        };
        if empty {
            self.keys.remove(key);
            self.expires.remove(key);
        }
    }
}

fn parse<T: std::str::FromStr>(b: &[u8]) -> T
where
    T::Err: std::fmt::Debug,
{
    String::from_utf8_lossy(b).parse().unwrap()
}

fn parse_score(b: &[u8]) -> f64 {
    match b {
        b"-inf" => f64::NEG_INFINITY,
        b"+inf" => f64::INFINITY,
        _ => String::from_utf8_lossy(b).parse().unwrap(),
    }
}

/// A random command over a few keys, fields and values, so that types
/// collide and fields repeat.
fn random_command(rng: &mut StdRng) -> Vec<Vec<u8>> {
    let key = format!("k{}", rng.gen_range(0..8)).into_bytes();
    let mut rng2 = StdRng::seed_from_u64(rng.gen());
    let field = |r: &mut StdRng| format!("f{}", r.gen_range(0..6)).into_bytes();
    let value = |r: &mut StdRng| {
        let len = if r.gen_bool(0.05) {
            r.gen_range(600..3000)
        } else {
            r.gen_range(0..20)
        };
        let c = b'a' + r.gen_range(0..26);
        vec![c; len]
    };
    let score = |r: &mut StdRng| {
        let choices = ["-inf", "+inf", "0", "-1.5", "2", "3", "-10", "7.25"];
        choices[r.gen_range(0..choices.len())].as_bytes().to_vec()
    };
    let r = &mut rng2;
    let words = |v: &[&[u8]]| v.iter().map(|w| w.to_vec()).collect::<Vec<_>>();
    match r.gen_range(0..32) {
        0 => words(&[b"GET", &key]),
        1 => {
            let v = value(r);
            let opts: [&[u8]; 5] = [b"NX", b"XX", b"GET", b"KEEPTTL", b""];
            let o = opts[r.gen_range(0..5)];
            if o.is_empty() {
                words(&[b"SET", &key, &v])
            } else {
                words(&[b"SET", &key, &v, o])
            }
        }
        2 => words(&[b"APPEND", &key, &value(r)]),
        3 => {
            let by = [1i64, -1, 100, i64::MAX, i64::MIN][r.gen_range(0..5)].to_string();
            words(&[b"INCRBY", &key, by.as_bytes()])
        }
        4 => {
            let other = format!("k{}", r.gen_range(0..8)).into_bytes();
            words(&[b"DEL", &key, &other])
        }
        5 => {
            if r.gen_bool(0.5) {
                words(&[b"EXISTS", &key, &key])
            } else {
                words(&[b"PEXPIRETIME", &key])
            }
        }
        6 => match r.gen_range(0..5) {
            0 => words(&[b"TYPE", &key]),
            1 => words(&[b"PERSIST", &key]),
            2 => {
                // Now and then a time long past: the key goes.
                let ms = if r.gen_bool(0.2) {
                    1
                } else {
                    (FAR_FUTURE_SECS + r.gen_range(0..1000)) * 1000 + r.gen_range(0..1000)
                };
                words(&[b"PEXPIREAT", &key, ms.to_string().as_bytes()])
            }
            _ => {
                let at = (FAR_FUTURE_SECS + r.gen_range(0..1000)).to_string();
                let opts: [&[u8]; 5] = [b"NX", b"XX", b"GT", b"LT", b""];
                let o = opts[r.gen_range(0..5)];
                let mut cmd = words(&[b"EXPIREAT", &key, at.as_bytes()]);
                if !o.is_empty() {
                    cmd.push(o.to_vec());
                }
                cmd
            }
        },
        7 => {
            let other = format!("k{}", r.gen_range(0..8)).into_bytes();
            words(&[b"MGET", &key, &other])
        }
        8 | 9 => {
            let mut cmd = words(&[b"HSET", &key]);
            for _ in 0..r.gen_range(1..4) {
                cmd.push(field(r));
                cmd.push(value(r));
            }
            cmd
        }
        10 => words(&[b"HDEL", &key, &field(r), &field(r)]),
        11 => words(&[b"HGET", &key, &field(r)]),
        12 => words(&[b"HGETALL", &key]),
        13 => words(&[b"HLEN", &key]),
        14 | 15 => {
            let mut cmd = words(&[b"ZADD", &key]);
            let opts: [&[u8]; 6] = [b"NX", b"XX", b"GT", b"LT", b"CH", b""];
            let o = opts[r.gen_range(0..6)];
            if !o.is_empty() {
                cmd.push(o.to_vec());
            }
            for _ in 0..r.gen_range(1..3) {
                cmd.push(score(r));
                cmd.push(field(r));
            }
            cmd
        }
        16 => words(&[b"ZREM", &key, &field(r)]),
        17 => words(&[b"ZSCORE", &key, &field(r)]),
        18 => words(&[b"ZRANGEBYSCORE", &key, b"-inf", b"+inf", b"WITHSCORES"]),
        20 | 21 => {
            let push: &[u8] = if r.gen_bool(0.5) { b"LPUSH" } else { b"RPUSH" };
            let mut cmd = words(&[push, &key]);
            for _ in 0..r.gen_range(1..4) {
                cmd.push(field(r));
            }
            cmd
        }
        22 => {
            let pop: &[u8] = if r.gen_bool(0.5) { b"LPOP" } else { b"RPOP" };
            if r.gen_bool(0.5) {
                words(&[pop, &key])
            } else {
                words(&[pop, &key, r.gen_range(0..4).to_string().as_bytes()])
            }
        }
        23 => match r.gen_range(0..4) {
            0 => words(&[b"LRANGE", &key, b"0", b"-1"]),
            1 => words(&[b"LLEN", &key]),
            2 => words(&[b"LINDEX", &key, r.gen_range(-4..4).to_string().as_bytes()]),
            _ => {
                let i = r.gen_range(-4..4).to_string();
                words(&[b"LSET", &key, i.as_bytes(), &value(r)])
            }
        },
        24 => {
            let count = r.gen_range(-2..3).to_string();
            words(&[b"LREM", &key, count.as_bytes(), &field(r)])
        }
        25 => {
            let (start, stop) = (
                r.gen_range(-4..4).to_string(),
                r.gen_range(-4..4).to_string(),
            );
            if r.gen_bool(0.5) {
                words(&[b"LTRIM", &key, start.as_bytes(), stop.as_bytes()])
            } else {
                let side: &[u8] = if r.gen_bool(0.5) { b"BEFORE" } else { b"AFTER" };
                words(&[b"LINSERT", &key, side, &field(r), &field(r)])
            }
        }
        26 => {
            let other = format!("k{}", r.gen_range(0..8)).into_bytes();
            let ends: [&[u8]; 2] = [b"LEFT", b"RIGHT"];
            words(&[
                b"LMOVE",
                &key,
                &other,
                ends[r.gen_range(0..2)],
                ends[r.gen_range(0..2)],
            ])
        }
        27 | 28 => {
            let add: &[u8] = if r.gen_bool(0.7) { b"SADD" } else { b"SREM" };
            let mut cmd = words(&[add, &key]);
            for _ in 0..r.gen_range(1..4) {
                cmd.push(field(r));
            }
            cmd
        }
        29 => match r.gen_range(0..4) {
            0 => words(&[b"SMEMBERS", &key]),
            1 => words(&[b"SISMEMBER", &key, &field(r)]),
            2 => words(&[b"SCARD", &key]),
            _ => words(&[b"SPOP", &key, b"100"]),
        },
        30 => {
            let (a, b) = (
                format!("k{}", r.gen_range(0..8)).into_bytes(),
                format!("k{}", r.gen_range(0..8)).into_bytes(),
            );
            words(&[b"SINTERSTORE", &key, &a, &b])
        }
        31 => words(&[b"ZPOPMIN", &key]),
        _ => {
            if r.gen_bool(0.5) {
                words(&[b"ZCARD", &key])
            } else {
                words(&[b"ZRANGEBYLEX", &key, b"-", b"+"])
            }
        }
    }
}

fn open(fs: Arc<dyn Fs>) -> Result<Shared, String> {
    open_at(Path::new("/server"), fs, FsyncMode::Always)
}

fn open_at(dir: &Path, fs: Arc<dyn Fs>, fsync: FsyncMode) -> Result<Shared, String> {
    let opts = Options {
        fs,
        write_buffer_size: 32 << 10,
        min_value_size: 256,
        big_value_threshold: 2048,
        target_file_size_base: 32 << 10,
        ..Options::default()
    };
    let store = Store::open(dir, opts, fsync)?;
    Ok(Shared::new(
        store,
        Limits {
            max_clients: 10,
            proto_max_bulk_len: 512 << 20,
            query_buffer_limit: 1 << 30,
        },
        Fixed {
            bind: "127.0.0.1".into(),
            port: 0,
            dir: "/server".into(),
            engine: vec![],
        },
    ))
}

fn run(shared: &Shared, client: &mut Client, args: &[Vec<u8>]) -> Reply {
    execute(&mut Ctx { shared, client }, args)
}

/// Scores print as Redis prints them; compare them as text.
fn normalize(r: Reply) -> Reply {
    match r {
        Reply::Double(d) => Reply::Bulk(format_double(d).into_bytes()),
        Reply::Array(v) => Reply::Array(v.into_iter().map(normalize).collect()),
        Reply::Map(v) => Reply::Map(
            v.into_iter()
                .map(|(a, b)| (normalize(a), normalize(b)))
                .collect(),
        ),
        other => other,
    }
}

fn close(shared: Shared) {
    let Shared { store, .. } = shared;
    store.close().unwrap();
}

#[test]
fn random_commands_match_the_model_across_reopens() {
    let seeds: u64 = std::env::var("CLEAVE_SERVER_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let ops: usize = std::env::var("CLEAVE_SERVER_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs: Arc<dyn Fs> = Arc::new(MemFs::new());
        let mut shared = open(fs.clone()).unwrap();
        let mut client = shared.connect("model".into()).unwrap();
        let mut model = Model::default();
        for i in 0..ops {
            if rng.gen_ratio(1, 50) {
                // A transaction: the model applies its commands in a row,
                // EXEC answers their replies.
                assert_eq!(run(&shared, &mut client, &[b"MULTI".to_vec()]), Reply::ok());
                let mut want = Vec::new();
                for _ in 0..rng.gen_range(1..5) {
                    let args = random_command(&mut rng);
                    want.push(normalize(model.apply(&args)));
                    assert_eq!(run(&shared, &mut client, &args), Reply::Status("QUEUED"));
                }
                let got = normalize(run(&shared, &mut client, &[b"EXEC".to_vec()]));
                assert_eq!(got, Reply::Array(want), "seed {seed} op {i}: EXEC");
                continue;
            }
            if rng.gen_ratio(1, 15) {
                // A pipeline: its commands run as one batch, each reading
                // what those before it wrote, and are written together.
                let batch: Vec<Vec<Vec<u8>>> = (0..rng.gen_range(2..16))
                    .map(|_| random_command(&mut rng))
                    .collect();
                let want: Vec<u8> = batch
                    .iter()
                    .flat_map(|args| encoded(model.apply(args)))
                    .collect();
                let (c, got, held) = pipeline::execute(&shared, client, batch.clone());
                client = c;
                assert!(held.is_empty());
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                    "seed {seed} op {i}: pipeline {batch:?}"
                );
                continue;
            }
            let args = random_command(&mut rng);
            let want = normalize(model.apply(&args));
            let got = normalize(run(&shared, &mut client, &args));
            assert_eq!(
                got,
                want,
                "seed {seed} op {i}: {:?}",
                args.iter()
                    .map(|a| a.escape_ascii().to_string())
                    .collect::<Vec<_>>()
            );
            match rng.gen_range(0..400) {
                0 => shared.store.db().flush().unwrap(),
                1 => shared.store.db().compact_range(None, None).unwrap(),
                2 => {
                    close(shared);
                    shared = open(fs.clone()).unwrap();
                    client = shared.connect("model".into()).unwrap();
                }
                _ => {}
            }
        }
        close(shared);
    }
}

/// I/O errors at random points: a command that fails answers an error
/// (never a wrong reply), the database stops taking writes, and after a
/// reopen without faults the state is that of the acknowledged commands,
/// plus at most the one that failed.
#[test]
fn injected_faults_lose_no_acknowledged_command() {
    for seed in 0..6u64 {
        let mut rng = StdRng::seed_from_u64(100 + seed);
        let mem = Arc::new(MemFs::new());
        let faults = Arc::new(FaultFs::new(mem.clone()));
        let shared = open(faults.clone()).unwrap();
        let mut client = shared.connect("faults".into()).unwrap();
        let mut model = Model::default();
        let ops = [FaultOp::Append, FaultOp::Sync, FaultOp::Create][seed as usize % 3];
        // Files are created seldom (a WAL or sstable per 32 KiB written).
        let skip = match ops {
            FaultOp::Create => rng.gen_range(0..3),
            _ => rng.gen_range(5..200),
        };
        faults.fail(&[ops], None, skip, ErrorKind::Other, true);
        // The commands whose writes may or may not have landed.
        let mut failed: Vec<Vec<Vec<u8>>> = Vec::new();
        // Enough writes for a few files to be created.
        for _ in 0..3000 {
            if rng.gen_ratio(1, 10) {
                // A pipeline, written as one batch: all of it lands or
                // none, and if it fails every reply is an error (none
                // answers from writes that were never made).
                let batch: Vec<Vec<Vec<u8>>> = (0..rng.gen_range(2..16))
                    .map(|_| random_command(&mut rng))
                    .collect();
                let mut next = model.clone();
                let want: Vec<u8> = batch
                    .iter()
                    .flat_map(|args| encoded(normalize(next.apply(args))))
                    .collect();
                let (c, got, _) = pipeline::execute(&shared, client, batch.clone());
                client = c;
                if got == want {
                    model = next;
                    continue;
                }
                let got = String::from_utf8_lossy(&got);
                let lines: Vec<&str> = got.split_terminator("\r\n").collect();
                assert!(
                    lines.len() == batch.len() && lines.iter().all(|l| l.starts_with("-ERR ")),
                    "seed {seed}: {got:?} for {batch:?}"
                );
                failed = batch;
                break;
            }
            let args = random_command(&mut rng);
            let mut next = model.clone();
            let want = normalize(next.apply(&args));
            let got = normalize(run(&shared, &mut client, &args));
            if got == want {
                model = next;
                continue;
            }
            let Reply::Error(e) = &got else {
                panic!("seed {seed}: {got:?} instead of {want:?} for {args:?}");
            };
            assert!(e.starts_with("ERR "), "{e}");
            failed = vec![args];
            break;
        }
        assert!(faults.injected() > 0, "seed {seed}: no fault fired");
        faults.heal();
        drop(shared);
        // Power loss after the fault: only synced bytes survive.
        let crashed: Arc<dyn Fs> = Arc::new(mem.crash_clone());
        let shared = open(crashed).unwrap();
        let mut client = shared.connect("check".into()).unwrap();
        // The failed command, or batch, may or may not have landed.
        let mut with_failed = model.clone();
        for args in &failed {
            with_failed.apply(args);
        }
        let mut keys: Vec<_> = model
            .keys
            .keys()
            .chain(with_failed.keys.keys())
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let actual: Vec<Reply> = reads(&key)
                .iter()
                .map(|args| normalize(run(&shared, &mut client, args)))
                .collect();
            let a = expected_reads(&model, &key);
            let b = expected_reads(&with_failed, &key);
            assert!(
                actual == a || actual == b,
                "seed {seed} key {}: {actual:?} is neither {a:?} nor {b:?}",
                key.escape_ascii()
            );
        }
        close(shared);
    }
}

/// Commands that read every type of `key`.
fn reads(key: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let k = key.to_vec();
    vec![
        vec![b"GET".to_vec(), k.clone()],
        vec![b"HGETALL".to_vec(), k.clone()],
        vec![
            b"ZRANGEBYSCORE".to_vec(),
            k,
            b"-inf".to_vec(),
            b"+inf".to_vec(),
            b"WITHSCORES".to_vec(),
        ],
    ]
}

fn expected_reads(model: &Model, key: &[u8]) -> Vec<Reply> {
    reads(key)
        .iter()
        .map(|args| normalize(model.clone().apply(args)))
        .collect()
}

/// A one-member group in this process: the same command layer, reached
/// through cluster mode's router, proposer, Raft log (cleave-raft's
/// storage) and state machine; the database on `fs` under `dir`.
struct Member {
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
    cluster: Arc<Cluster>,
}

impl Member {
    fn start(dir: &Path, fs: Arc<dyn Fs>, first: bool) -> Member {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (layout, live) = Layout::prepare(dir, 1).unwrap();
        let shared = Arc::new(open_at(&live, fs, FsyncMode::No).unwrap());
        let settings = Settings {
            id: 1,
            me: cleave_server::cluster::types::Member {
                raft: "127.0.0.1:0".into(),
                redis: "127.0.0.1:0".into(),
            },
            peers: Vec::new(),
            reads: ReadMode::Linearizable,
            test_hooks: false,
            heartbeat: Duration::from_millis(50),
            election_timeout_min: Duration::from_millis(150),
            election_timeout_max: Duration::from_millis(300),
            // Snapshots every few dozen commands, so restarts find the log
            // purged behind one.
            snapshot_bytes: 4 << 10,
            write_timeout: Duration::from_secs(10),
        };
        let cluster = rt
            .block_on(cleave_server::cluster::start(
                &shared, settings, layout, live,
            ))
            .unwrap();
        assert!(shared.cluster.set(cluster.clone()).is_ok());
        if first {
            let init = [b"CLUSTER".to_vec(), b"INIT".to_vec()];
            let reply = rt.block_on(cleave_server::cluster::admin(&shared, &cluster, &init));
            assert_eq!(reply, Reply::ok());
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while cluster.leads_a_majority() != Some(true) {
            assert!(Instant::now() < deadline, "the member never led");
            std::thread::sleep(Duration::from_millis(10));
        }
        Member {
            rt,
            shared,
            cluster,
        }
    }

    /// Runs `requests` as one pipeline; returns the encoded replies.
    fn run(&self, client: Client, requests: Vec<Vec<Vec<u8>>>) -> (Client, Vec<u8>) {
        self.rt.block_on(cleave_server::cluster::execute(
            &self.shared,
            &self.cluster,
            client,
            requests,
        ))
    }

    fn stop(self) {
        let Member {
            rt,
            shared,
            cluster,
        } = self;
        let _ = rt.block_on(cluster.raft.shutdown());
        drop(cluster);
        if let Ok(shared) = Arc::try_unwrap(shared) {
            let Shared { store, .. } = shared;
            let _ = store.close();
        }
        rt.shutdown_timeout(Duration::from_secs(10));
    }
}

fn encoded(reply: Reply) -> Vec<u8> {
    let mut out = Vec::new();
    reply.write_to(2, &mut out);
    out
}

/// The model test through a Raft log: every reply the group gives is the
/// model's, with pipelines (several commands to one log entry), snapshots
/// (the log purged behind them) and restarts (the database reopened, the
/// log's tail applied again, commands of an entry half applied skipped).
#[test]
fn random_commands_match_the_model_through_a_raft_log() {
    for seed in 0..2u64 {
        let mut rng = StdRng::seed_from_u64(500 + seed);
        let tmp = tempfile::tempdir().unwrap();
        let fs: Arc<dyn Fs> = Arc::new(OsFs::new());
        let mut member = Member::start(tmp.path(), fs.clone(), true);
        let mut client = member.shared.connect("model".into()).unwrap();
        let mut model = Model::default();
        let mut i = 0;
        while i < 1500 {
            let n = if rng.gen_bool(0.2) {
                rng.gen_range(2..12)
            } else {
                1
            };
            let batch: Vec<Vec<Vec<u8>>> = (0..n).map(|_| random_command(&mut rng)).collect();
            let want: Vec<u8> = batch
                .iter()
                .flat_map(|args| encoded(model.apply(args)))
                .collect();
            let (c, got) = member.run(client, batch.clone());
            client = c;
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "seed {seed} ops {i}..: {batch:?}"
            );
            i += n;
            if rng.gen_range(0..150) == 0 {
                member.stop();
                member = Member::start(tmp.path(), fs.clone(), false);
                client = member.shared.connect("model".into()).unwrap();
            }
        }
        let snapshot = member.cluster.raft.metrics().borrow().snapshot;
        assert!(snapshot.is_some(), "seed {seed}: no snapshot was taken");
        member.stop();
    }
}

/// A random command that writes (those a cluster puts in its log).
fn random_write(rng: &mut StdRng) -> Vec<Vec<u8>> {
    loop {
        let args = random_command(rng);
        if cleave_server::commands::lookup(&args[0]).is_some_and(|c| c.is_write()) {
            return args;
        }
    }
}

/// A failed write under the state machine stops the member's Raft (a
/// storage error is fatal to openraft): the commands of the entry answer an
/// error, never a wrong reply. Pipelines put several commands in an entry,
/// so the failure lands in the middle of one, after some of its commands
/// wrote. After a restart without faults the log is applied again, those
/// commands skipped: the state is that of the acknowledged commands plus a
/// prefix of the failed ones (the entries that reached the log), each
/// applied once.
#[test]
fn a_failed_apply_stops_the_member_and_loses_no_acknowledged_command() {
    for seed in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(700 + seed);
        let tmp = tempfile::tempdir().unwrap();
        let faults = Arc::new(FaultFs::new(Arc::new(OsFs::new())));
        let member = Member::start(tmp.path(), faults.clone(), true);
        let mut client = member.shared.connect("faults".into()).unwrap();
        let mut model = Model::default();
        // The WAL's appends: one per command that writes.
        faults.fail(
            &[FaultOp::Append],
            Some(".wal"),
            rng.gen_range(20..200),
            ErrorKind::Other,
            true,
        );
        let mut failed = Vec::new();
        'run: for _ in 0..1000 {
            // Writes only, so that a pipeline is one entry (a read in the
            // middle would wait for the writes before it).
            let batch: Vec<Vec<Vec<u8>>> = (0..rng.gen_range(1..12))
                .map(|_| random_write(&mut rng))
                .collect();
            let (c, got) = member.run(client, batch.clone());
            client = c;
            let mut rest = &got[..];
            for (k, args) in batch.iter().enumerate() {
                let mut next = model.clone();
                let want = encoded(next.apply(args));
                if rest.starts_with(&want) {
                    rest = &rest[want.len()..];
                    model = next;
                    continue;
                }
                // An error, a redirect (the stopped member leads no more)
                // or a refusal: never a wrong reply.
                let refused = [&b"-TRYAGAIN"[..], b"-ERR", b"-MOVED", b"-CLUSTERDOWN"];
                assert!(
                    refused.iter().any(|p| rest.starts_with(p)),
                    "seed {seed}: {} instead of {} for {args:?}",
                    String::from_utf8_lossy(rest),
                    String::from_utf8_lossy(&want)
                );
                failed = batch[k..].to_vec();
                break 'run;
            }
        }
        assert!(faults.injected() > 0, "seed {seed}: no fault fired");
        assert!(!failed.is_empty(), "seed {seed}: every command succeeded");
        member.stop();
        faults.heal();
        let member = Member::start(tmp.path(), faults.clone(), false);
        let mut client = member.shared.connect("check".into()).unwrap();
        // What may be there: the acknowledged commands, then each prefix
        // of the failed ones.
        let mut candidates = vec![model.clone()];
        for args in &failed {
            let mut next = candidates[candidates.len() - 1].clone();
            next.apply(args);
            candidates.push(next);
        }
        let mut keys: Vec<_> = candidates
            .iter()
            .flat_map(|m| m.keys.keys().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        let mut actual = Vec::new();
        for key in &keys {
            let (c, got) = member.run(client, reads(key));
            client = c;
            actual.push(got);
        }
        let matches = candidates.iter().any(|m| {
            keys.iter().zip(&actual).all(|(key, got)| {
                let want: Vec<u8> = expected_reads(m, key)
                    .into_iter()
                    .flat_map(encoded)
                    .collect();
                *got == want
            })
        });
        assert!(
            matches,
            "seed {seed}: the state after the restart is not the acknowledged commands plus a \
             prefix of the {} failed ones",
            failed.len()
        );
        member.stop();
    }
}
