//! List commands: a metadata key with the list's version, head index and
//! length, and one subkey per element at its index (keyspace.rs). Pushes
//! and pops at either end read and write O(1) subkeys, as kvrocks's lists
//! do; commands that change the middle (LREM, LINSERT) rewrite the
//! elements after the change, as Redis's take O(N).

use std::time::{Duration, Instant};

use cleave::{ReadOptions, Snapshot, WriteBatch};

use super::{int_arg, is, optional_count, span, Ctx};
use crate::commands::hashes::check_field;
use crate::error::CmdError;
use crate::keyspace::{self, collection_prefix, list_element, Meta, SUB};
use crate::resp::Reply;
use crate::state::Wait;
use crate::store::{put_list, ListMeta, Store};

type Result = std::result::Result<Reply, CmdError>;

/// Bytes of an element's index in its subkey.
const INDEX_BYTES: usize = 8;

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    fn parse(arg: &[u8]) -> std::result::Result<End, CmdError> {
        if is(arg, "left") {
            Ok(End::Left)
        } else if is(arg, "right") {
            Ok(End::Right)
        } else {
            Err(CmdError::Syntax)
        }
    }
}

/// One list as a command reads and changes it: its metadata, and the
/// writes so far.
struct List {
    key: Vec<u8>,
    meta: ListMeta,
    prefix: Vec<u8>,
}

impl List {
    fn new(db: u8, key: &[u8], meta: ListMeta) -> List {
        List {
            key: key.to_vec(),
            prefix: collection_prefix(SUB, db, key, meta.version),
            meta,
        }
    }

    fn element(&self, index: u64) -> Vec<u8> {
        list_element(&self.prefix, index)
    }

    /// The subkey of the element `i` places from the head.
    fn at(&self, i: u64) -> Vec<u8> {
        self.element(self.meta.head + i)
    }

    fn push(
        &mut self,
        b: &mut WriteBatch,
        end: End,
        value: &[u8],
    ) -> std::result::Result<(), CmdError> {
        let m = &mut self.meta;
        let index = match end {
            End::Left => {
                m.head = m.head.checked_sub(1).ok_or_else(full)?;
                m.head
            }
            End::Right => m
                .head
                .checked_add(m.size)
                .filter(|&i| i < u64::MAX)
                .ok_or_else(full)?,
        };
        m.size += 1;
        b.put(&self.element(index), value);
        Ok(())
    }

    /// Pops up to `n` elements from `end`, read as `r` says.
    fn pop(
        &mut self,
        store: &Store,
        r: &ReadOptions<'_>,
        b: &mut WriteBatch,
        end: End,
        n: u64,
    ) -> std::result::Result<Vec<Vec<u8>>, CmdError> {
        let n = n.min(self.meta.size);
        if n == 0 {
            return Ok(Vec::new());
        }
        let first = match end {
            End::Left => 0,
            End::Right => self.meta.size - n,
        };
        let mut values = self.read(store, r.snapshot, first, first + n)?;
        if values.len() as u64 != n {
            return Err(CmdError::corrupt(&self.key, "list elements missing"));
        }
        if end == End::Right {
            values.reverse();
        }
        for i in first..first + n {
            b.delete(&self.at(i));
        }
        if end == End::Left {
            self.meta.head += n;
        }
        self.meta.size -= n;
        Ok(values)
    }

    /// The elements at places `from..to` from the head.
    fn read(
        &self,
        store: &Store,
        snapshot: Option<&Snapshot>,
        from: u64,
        to: u64,
    ) -> std::result::Result<Vec<Vec<u8>>, CmdError> {
        if from >= to {
            return Ok(Vec::new());
        }
        if to - from == 1 {
            let r = ReadOptions {
                snapshot,
                ..ReadOptions::new()
            };
            return Ok(store.get(&r, &self.at(from))?.into_iter().collect());
        }
        let mut it = store.iter(snapshot, self.at(from), Some(self.at(to)));
        it.seek_to_first()?;
        let mut out = Vec::with_capacity((to - from).min(1 << 16) as usize);
        while it.valid() {
            out.push(it.value()?.to_vec());
            it.next()?;
        }
        it.status()?;
        Ok(out)
    }

    /// Writes `values` at places `from..` and deletes the places past
    /// them up to the old length: what LREM and LINSERT change.
    fn rewrite_from(&mut self, b: &mut WriteBatch, from: u64, values: &[Vec<u8>]) {
        let old_size = self.meta.size;
        let new_size = from + values.len() as u64;
        for (i, v) in values.iter().enumerate() {
            b.put(&self.at(from + i as u64), v);
        }
        for i in new_size..old_size {
            b.delete(&self.at(i));
        }
        self.meta.size = new_size;
    }

    fn write_meta(&self, b: &mut WriteBatch, db: u8) {
        put_list(b, db, &self.key, &self.meta);
    }
}

fn full() -> CmdError {
    CmdError::err("list index space exhausted")
}

/// The list at `key`, or `None`.
fn existing(
    store: &Store,
    r: &ReadOptions<'_>,
    db: u8,
    key: &[u8],
) -> std::result::Result<Option<List>, CmdError> {
    Ok(store.list(r, db, key)?.map(|m| List::new(db, key, m)))
}

/// The list at `key`, or a new empty one with a new version.
fn existing_or_new(
    store: &Store,
    r: &ReadOptions<'_>,
    db: u8,
    key: &[u8],
) -> std::result::Result<List, CmdError> {
    match existing(store, r, db, key)? {
        Some(l) => Ok(l),
        None => {
            let meta = ListMeta {
                version: store.new_version()?,
                head: keyspace::LIST_FIRST_INDEX,
                size: 0,
                expire: 0,
            };
            Ok(List::new(db, key, meta))
        }
    }
}

/// Writes `b` and the lists' metadata; records the versions of emptied
/// lists as ended.
fn commit(
    ctx: &Ctx<'_>,
    mut b: WriteBatch,
    lists: &[&List],
    pushed: bool,
) -> std::result::Result<(), CmdError> {
    let db = ctx.client.db;
    for l in lists {
        l.write_meta(&mut b, db);
    }
    ctx.shared.store.write(b)?;
    for l in lists {
        if l.meta.size == 0 {
            ctx.shared.store.ended(
                db,
                &l.key,
                &Meta::List {
                    version: l.meta.version,
                    head: l.meta.head,
                    size: 0,
                },
            );
        }
    }
    if pushed {
        ctx.shared.pushed();
    }
    Ok(())
}

fn check_element_key(key: &[u8]) -> std::result::Result<(), CmdError> {
    check_field(key, &[0; INDEX_BYTES])
}

fn push(ctx: &mut Ctx<'_>, args: &[Vec<u8>], end: End, only_if_exists: bool) -> Result {
    let key = &args[1];
    check_element_key(key)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let r = ReadOptions::new();
    let mut list = if only_if_exists {
        match existing(store, &r, db, key)? {
            Some(l) => l,
            None => return Ok(Reply::Int(0)),
        }
    } else {
        existing_or_new(store, &r, db, key)?
    };
    let mut b = WriteBatch::new();
    for v in &args[2..] {
        list.push(&mut b, end, v)?;
    }
    commit(ctx, b, &[&list], true)?;
    Ok(Reply::Int(list.meta.size as i64))
}

pub fn lpush(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    push(ctx, args, End::Left, false)
}

pub fn rpush(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    push(ctx, args, End::Right, false)
}

pub fn lpushx(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    push(ctx, args, End::Left, true)
}

pub fn rpushx(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    push(ctx, args, End::Right, true)
}

/// Pops up to `n` elements from `end` of the list at `key`; `None` if
/// there is no list.
fn pop_from(
    ctx: &Ctx<'_>,
    key: &[u8],
    end: End,
    n: u64,
) -> std::result::Result<Option<Vec<Vec<u8>>>, CmdError> {
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[key])?;
    let r = ReadOptions::new();
    let Some(mut list) = existing(store, &r, db, key)? else {
        return Ok(None);
    };
    let mut b = WriteBatch::new();
    let values = list.pop(store, &r, &mut b, end, n)?;
    if !values.is_empty() {
        commit(ctx, b, &[&list], false)?;
    }
    Ok(Some(values))
}

fn pop(ctx: &mut Ctx<'_>, args: &[Vec<u8>], end: End) -> Result {
    let count = optional_count(args, 2)?;
    let popped = pop_from(ctx, &args[1], end, count.unwrap_or(1))?;
    Ok(match (popped, count) {
        (None, Some(_)) => Reply::NilArray,
        (None, None) => Reply::Nil,
        (Some(values), Some(_)) => Reply::Array(values.into_iter().map(Reply::Bulk).collect()),
        (Some(mut values), None) => values.pop().map_or(Reply::Nil, Reply::Bulk),
    })
}

pub fn lpop(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    pop(ctx, args, End::Left)
}

pub fn rpop(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    pop(ctx, args, End::Right)
}

pub fn llen(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let size = ctx
        .shared
        .store
        .list(&ReadOptions::new(), ctx.client.db, &args[1])?
        .map_or(0, |m| m.size);
    Ok(Reply::Int(size as i64))
}

/// A place given from the head (0..) or from the tail (-1..), as an
/// offset from the head; `None` if outside the list.
fn place(index: i64, size: u64) -> Option<u64> {
    let i = if index < 0 {
        size as i128 + index as i128
    } else {
        index as i128
    };
    (0..size as i128).contains(&i).then_some(i as u64)
}

pub fn lindex(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let index = int_arg(&args[2])?;
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some(list) = existing(store, &r, ctx.client.db, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let Some(i) = place(index, list.meta.size) else {
        return Ok(Reply::Nil);
    };
    Ok(store.get(&r, &list.at(i))?.map_or(Reply::Nil, Reply::Bulk))
}

pub fn lrange(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let Some(list) = existing(store, &r, ctx.client.db, &args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let (from, to) = span(start, stop, list.meta.size);
    let values = list.read(store, Some(&snapshot), from, to)?;
    Ok(Reply::Array(values.into_iter().map(Reply::Bulk).collect()))
}

pub fn lset(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let index = int_arg(&args[2])?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let key = &args[1];
    let _lock = store.lock(db, &[key])?;
    let Some(list) = existing(store, &ReadOptions::new(), db, key)? else {
        return Err(CmdError::err("no such key"));
    };
    let i = place(index, list.meta.size).ok_or_else(|| CmdError::err("index out of range"))?;
    let mut b = WriteBatch::new();
    b.put(&list.at(i), &args[3]);
    commit(ctx, b, &[&list], false)?;
    Ok(Reply::ok())
}

pub fn ltrim(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let key = &args[1];
    let _lock = store.lock(db, &[key])?;
    let Some(mut list) = existing(store, &ReadOptions::new(), db, key)? else {
        return Ok(Reply::ok());
    };
    let (from, to) = span(start, stop, list.meta.size);
    let mut b = WriteBatch::new();
    if to > from {
        // Kept elements stay at their indexes; the trimmed ones go. An
        // emptied list goes whole, its metadata only.
        for i in (0..from).chain(to..list.meta.size) {
            b.delete(&list.at(i));
        }
    }
    list.meta.head += from;
    list.meta.size = to - from;
    commit(ctx, b, &[&list], false)?;
    Ok(Reply::ok())
}

pub fn lrem(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let count = int_arg(&args[2])?;
    let element = &args[3];
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let key = &args[1];
    let _lock = store.lock(db, &[key])?;
    let Some(mut list) = existing(store, &ReadOptions::new(), db, key)? else {
        return Ok(Reply::Int(0));
    };
    let values = list.read(store, None, 0, list.meta.size)?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs().min(usize::MAX as u64) as usize
    };
    // The places to remove, from the end `count`'s sign names.
    let matching = values.iter().enumerate().filter(|(_, v)| *v == element);
    let mut remove: Vec<usize> = if count < 0 {
        let mut from_tail: Vec<usize> = matching.rev().take(limit).map(|(i, _)| i).collect();
        from_tail.reverse();
        from_tail
    } else {
        matching.take(limit).map(|(i, _)| i).collect()
    };
    if remove.is_empty() {
        return Ok(Reply::Int(0));
    }
    let removed = remove.len();
    let first = remove[0];
    let mut kept = Vec::with_capacity(values.len() - first);
    remove.reverse();
    for (i, v) in values.into_iter().enumerate().skip(first) {
        if remove.last() == Some(&i) {
            remove.pop();
        } else {
            kept.push(v);
        }
    }
    let mut b = WriteBatch::new();
    list.rewrite_from(&mut b, first as u64, &kept);
    commit(ctx, b, &[&list], false)?;
    Ok(Reply::Int(removed as i64))
}

pub fn linsert(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let after = if is(&args[2], "after") {
        true
    } else if is(&args[2], "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let (pivot, element) = (&args[3], &args[4]);
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let key = &args[1];
    let _lock = store.lock(db, &[key])?;
    let Some(mut list) = existing(store, &ReadOptions::new(), db, key)? else {
        return Ok(Reply::Int(0));
    };
    let values = list.read(store, None, 0, list.meta.size)?;
    let Some(at) = values.iter().position(|v| v == pivot) else {
        return Ok(Reply::Int(-1));
    };
    let at = at + usize::from(after);
    let mut b = WriteBatch::new();
    if at == 0 {
        list.push(&mut b, End::Left, element)?;
    } else {
        let mut tail = Vec::with_capacity(values.len() - at + 1);
        tail.push(element.clone());
        tail.extend(values.into_iter().skip(at));
        if list.meta.head.checked_add(list.meta.size + 1).is_none() {
            return Err(full());
        }
        list.rewrite_from(&mut b, at as u64, &tail);
    }
    commit(ctx, b, &[&list], true)?;
    Ok(Reply::Int(list.meta.size as i64))
}

pub fn lpos(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let element = &args[2];
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0u64);
    let mut i = 3;
    while i < args.len() {
        let value = args.get(i + 1).ok_or(CmdError::Syntax)?;
        if is(&args[i], "rank") {
            rank = int_arg(value)?;
            if rank == 0 || rank == i64::MIN {
                return Err(CmdError::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&args[i], "count") {
            count = Some(
                u64::try_from(int_arg(value)?)
                    .map_err(|_| CmdError::err("COUNT can't be negative"))?,
            );
        } else if is(&args[i], "maxlen") {
            maxlen = u64::try_from(int_arg(value)?)
                .map_err(|_| CmdError::err("MAXLEN can't be negative"))?;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let store = &ctx.shared.store;
    let snapshot = store.snapshot();
    let r = Store::read_at(&snapshot);
    let none = || {
        if count.is_some() {
            Reply::Array(Vec::new())
        } else {
            Reply::Nil
        }
    };
    let Some(list) = existing(store, &r, ctx.client.db, &args[1])? else {
        return Ok(none());
    };
    let size = list.meta.size;
    let scan = if maxlen == 0 { size } else { maxlen.min(size) };
    let (from, to) = if rank > 0 {
        (0, scan)
    } else {
        (size - scan, size)
    };
    let mut it = store.iter(Some(&snapshot), list.at(from), Some(list.at(to)));
    let mut found = Vec::new();
    let want = match count {
        Some(0) => u64::MAX,
        Some(n) => n,
        None => 1,
    };
    let mut skip = rank.unsigned_abs() - 1;
    if rank > 0 {
        it.seek_to_first()?;
    } else {
        it.seek_to_last()?;
    }
    while it.valid() && (found.len() as u64) < want {
        if it.value()? == element.as_slice() {
            if skip > 0 {
                skip -= 1;
            } else {
                let index = index_of(&list, it.key())?;
                found.push(Reply::Int((index - list.meta.head) as i64));
            }
        }
        if rank > 0 {
            it.next()?;
        } else {
            it.prev()?;
        }
    }
    it.status()?;
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.pop().unwrap_or(Reply::Nil),
    })
}

/// The index an element's subkey holds.
fn index_of(list: &List, subkey: &[u8]) -> std::result::Result<u64, CmdError> {
    subkey
        .get(list.prefix.len()..)
        .and_then(|b| <[u8; INDEX_BYTES]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .filter(|i| (list.meta.head..list.meta.head + list.meta.size).contains(i))
        .ok_or_else(|| CmdError::corrupt(&list.key, "list element outside the list"))
}

/// Moves an element from `from`'s end of `src` to `to`'s end of `dst`;
/// `None` if `src` holds no list. `dst` must hold a list or nothing.
fn move_element(
    ctx: &Ctx<'_>,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
) -> std::result::Result<Option<Vec<u8>>, CmdError> {
    check_element_key(dst)?;
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    let _lock = store.lock(db, &[src, dst])?;
    let r = ReadOptions::new();
    let Some(mut source) = existing(store, &r, db, src)? else {
        return Ok(None);
    };
    // A destination of another type refuses before anything moves.
    let dest = if src == dst {
        None
    } else {
        Some(existing_or_new(store, &r, db, dst)?)
    };
    let mut b = WriteBatch::new();
    let Some(value) = source.pop(store, &r, &mut b, from, 1)?.pop() else {
        return Ok(None);
    };
    match dest {
        None => {
            source.push(&mut b, to, &value)?;
            commit(ctx, b, &[&source], true)?;
        }
        Some(mut dest) => {
            dest.push(&mut b, to, &value)?;
            commit(ctx, b, &[&source, &dest], true)?;
        }
    }
    Ok(Some(value))
}

pub fn lmove(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (from, to) = (End::parse(&args[3])?, End::parse(&args[4])?);
    Ok(move_element(ctx, &args[1], &args[2], from, to)?.map_or(Reply::Nil, Reply::Bulk))
}

pub fn rpoplpush(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    Ok(
        move_element(ctx, &args[1], &args[2], End::Right, End::Left)?
            .map_or(Reply::Nil, Reply::Bulk),
    )
}

/// A blocking command's timeout in seconds (a float; 0 waits forever).
fn timeout_arg(arg: &[u8]) -> std::result::Result<Option<Duration>, CmdError> {
    let secs = super::parse_f64(arg)
        .filter(|s| s.is_finite())
        .ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    if secs < 0.0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if secs == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|t| Instant::now().checked_add(*t).is_some())
        .map(Some)
        .ok_or_else(|| CmdError::err("timeout is out of range"))
}

/// A blocking command found nothing: it waits for a push (the connection
/// runs it again on each, until `timeout`), or, timed out or unable to
/// wait, answers `nil`.
fn block(ctx: &mut Ctx<'_>, timeout: Option<Duration>, nil: Reply) -> Reply {
    ctx.client.wait = match ctx.client.wait {
        Wait::TimedOut => Wait::TimedOut,
        // Again after a push, with the first attempt's deadline.
        Wait::Retry(deadline) => Wait::Blocked(deadline),
        Wait::None | Wait::Blocked(_) if ctx.client.may_block => {
            // Checked when the timeout was read; for ever if not.
            Wait::Blocked(timeout.and_then(|t| Instant::now().checked_add(t)))
        }
        other => other,
    };
    nil
}

fn blocking_pop(ctx: &mut Ctx<'_>, args: &[Vec<u8>], end: End) -> Result {
    let timeout = timeout_arg(&args[args.len() - 1])?;
    for key in &args[1..args.len() - 1] {
        if let Some(mut values) = pop_from(ctx, key, end, 1)? {
            if let Some(v) = values.pop() {
                return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(v)]));
            }
        }
    }
    Ok(block(ctx, timeout, Reply::NilArray))
}

pub fn blpop(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    blocking_pop(ctx, args, End::Left)
}

pub fn brpop(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    blocking_pop(ctx, args, End::Right)
}

pub fn blmove(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let (from, to) = (End::parse(&args[3])?, End::parse(&args[4])?);
    let timeout = timeout_arg(&args[5])?;
    match move_element(ctx, &args[1], &args[2], from, to)? {
        Some(v) => Ok(Reply::Bulk(v)),
        None => Ok(block(ctx, timeout, Reply::Nil)),
    }
}

pub fn brpoplpush(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Result {
    let timeout = timeout_arg(&args[3])?;
    match move_element(ctx, &args[1], &args[2], End::Right, End::Left)? {
        Some(v) => Ok(Reply::Bulk(v)),
        None => Ok(block(ctx, timeout, Reply::Nil)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_and_spans_follow_redis() {
        assert_eq!(place(0, 3), Some(0));
        assert_eq!(place(-1, 3), Some(2));
        assert_eq!(place(-3, 3), Some(0));
        assert_eq!(place(-4, 3), None);
        assert_eq!(place(3, 3), None);
        assert_eq!(place(i64::MIN, 3), None);
        assert_eq!(span(0, -1, 5), (0, 5));
        assert_eq!(span(1, 2, 5), (1, 3));
        assert_eq!(span(-2, 100, 5), (3, 5));
        assert_eq!(span(-100, 0, 5), (0, 1));
        assert_eq!(span(3, 1, 5), (0, 0));
        assert_eq!(span(5, 10, 5), (0, 0));
        assert_eq!(span(i64::MIN, i64::MAX, 5), (0, 5));
    }

    #[test]
    fn timeouts_are_read_as_redis_reads_them() {
        assert_eq!(timeout_arg(b"0").unwrap(), None);
        assert_eq!(
            timeout_arg(b"0.5").unwrap(),
            Some(Duration::from_millis(500))
        );
        assert!(timeout_arg(b"-1").is_err());
        assert!(timeout_arg(b"x").is_err());
        assert!(timeout_arg(b"inf").is_err());
        assert!(timeout_arg(b"1e19").is_err());
    }
}
