//! The maintenance thread: releases data files whose records are all
//! trimmed or deleted, and garbage-collects the oldest data file once
//! most of it is garbage, moving its few live records to the active file
//! (LavaLog's FIFO GC). The file's reverse index says what it holds, so
//! GC reads the index and the live records, never the whole file.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::index::{self, Loc, MetaLoc};
use super::ops::{OpKind, Reverse};
use super::physical;
use super::store::{Expect, Found, Inner};
use super::LogId;
use crate::error::{Error, Result};

/// GC moves live records in batches of about this many bytes.
const MOVE_BATCH_BYTES: usize = 4 << 20;
/// Rounds of moving and flushing before GC gives a file up until the next
/// wake-up (each round is undone only by concurrent changes to the same
/// records).
const GC_ROUNDS: usize = 3;

pub(crate) fn spawn(inner: Arc<Inner>) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("cleave-logstore".to_string())
        .spawn(move || run(&inner))
}

/// Stops the thread `spawn` started.
pub(crate) fn stop(inner: &Inner, handle: JoinHandle<()>) {
    {
        let (lock, cv) = &inner.wake;
        lock.lock().1 = true;
        cv.notify_one();
    }
    let _ = handle.join();
}

fn run(inner: &Inner) {
    loop {
        {
            let (lock, cv) = &inner.wake;
            let mut w = lock.lock();
            while !w.0 && !w.1 {
                cv.wait(&mut w);
            }
            if w.1 {
                return;
            }
            w.0 = false;
        }
        if inner.check_writable().is_err() {
            continue;
        }
        if let Err(e) = maintain(inner) {
            inner.counters.lock().maintenance_errors += 1;
            log::warn!(
                "cleave log store {}: maintenance failed: {e}",
                inner.dir.display()
            );
        }
    }
}

/// Releases what is garbage, then collects the oldest file if it is worth
/// it.
pub(crate) fn maintain(inner: &Inner) -> Result<()> {
    let _one = inner.maintaining.lock();
    let dead = inner.state.read().garbage_prefix();
    inner.release(&dead)?;
    let oldest = {
        let st = inner.state.read();
        st.files
            .iter()
            .next()
            .and_then(|(&g, f)| f.seal.map(|s| (g, s)))
    };
    if let Some((generation, seal)) = oldest {
        collect(inner, generation, seal)?;
    }
    Ok(())
}

/// The live records of sealed data file `generation`: each put its log
/// still maps to this file, with what must hold for GC to move it; and
/// the bytes of all its puts.
fn live_records(
    inner: &Inner,
    generation: u64,
    seal: (u64, u64),
) -> Result<(Vec<(Reverse, Expect)>, u64)> {
    let path = physical::data_path(&inner.dir, generation);
    let file = inner.data_reader(generation)?;
    let payload = physical::read_seal(file.as_ref(), &path, generation, seal.0, seal.1)?;
    let puts: Vec<Reverse> = physical::decode_reverse_index(&path, seal.0, &payload)?
        .into_iter()
        .filter(|r| r.kind == OpKind::Put)
        .collect();
    let total: u64 = puts.iter().map(|r| u64::from(r.len)).sum();
    let mut groups: HashMap<MetaLoc, Vec<(u64, Loc)>> = HashMap::new();
    let mut live = Vec::new();
    for r in puts {
        let here = Loc {
            generation,
            offset: r.offset,
            len: r.len,
        };
        let (found, changes) = {
            let st = inner.state.read();
            let Some(l) = st.logs.get(&r.log) else {
                continue;
            };
            let found = if r.lsn < l.trim_before {
                Found::Nothing
            } else if let Some(loc) = l.l0.get(&r.lsn) {
                Found::Record(*loc)
            } else {
                l.group_of(r.lsn)
                    .map_or(Found::Nothing, |g| Found::InGroup(g.at))
            };
            (found, l.changes)
        };
        let now = match found {
            Found::Nothing => None,
            Found::Record(loc) => Some(loc),
            Found::InGroup(at) => {
                if let std::collections::hash_map::Entry::Vacant(slot) = groups.entry(at) {
                    match inner.read_group(&at) {
                        Ok(entries) => {
                            slot.insert(entries);
                        }
                        // Moved by a checkpoint meanwhile: looked up again.
                        Err(_) => {
                            let now = inner.locate(LogId(r.log), r.lsn).unwrap_or(None);
                            if now == Some(here) {
                                live.push((r, Expect { loc: here, changes }));
                            }
                            continue;
                        }
                    }
                }
                groups.get(&at).and_then(|e| index::find(e, r.lsn))
            }
        };
        if now == Some(here) {
            live.push((r, Expect { loc: here, changes }));
        }
    }
    Ok((live, total))
}

/// Collects `generation` if its garbage share reaches the threshold: moves
/// its live records forward, flushes the index so that nothing refers to
/// the file, and releases it.
fn collect(inner: &Inner, generation: u64, seal: (u64, u64)) -> Result<()> {
    for round in 0..GC_ROUNDS {
        let (live, total) = live_records(inner, generation, seal)?;
        if live.is_empty() {
            inner.release(&[generation])?;
            return Ok(());
        }
        let live_bytes: u64 = live.iter().map(|(r, _)| u64::from(r.len)).sum();
        let garbage = 1.0 - live_bytes as f64 / total.max(1) as f64;
        if round == 0 && garbage < inner.opts.gc_garbage_ratio {
            return Ok(());
        }
        let mut moved = 0u64;
        let mut moved_bytes = 0u64;
        for batch in batches(&live) {
            let mut payload = Vec::new();
            let mut entries = Vec::with_capacity(batch.len());
            let mut expect = Vec::with_capacity(batch.len());
            for (r, e) in batch {
                let raw = inner.fetch_raw(e.loc)?;
                check_record(inner, r, e, &raw)?;
                entries.push(Reverse {
                    offset: payload.len() as u64,
                    ..*r
                });
                payload.extend_from_slice(&raw);
                expect.push(*e);
            }
            let bytes = payload.len() as u64;
            let n = inner.relocate(payload, entries, expect)?;
            moved += n as u64;
            moved_bytes += if n == batch.len() { bytes } else { 0 };
        }
        {
            let mut data = inner.data.lock();
            inner.flush_index(&mut data)?;
        }
        let mut c = inner.counters.lock();
        c.gc_runs += u64::from(round == 0);
        c.gc_records_moved += moved;
        c.gc_bytes_moved += moved_bytes;
    }
    Ok(())
}

fn batches(live: &[(Reverse, Expect)]) -> Vec<&[(Reverse, Expect)]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, (r, _)) in live.iter().enumerate() {
        bytes += r.len as usize;
        if bytes >= MOVE_BATCH_BYTES {
            out.push(&live[start..=i]);
            start = i + 1;
            bytes = 0;
        }
    }
    if start < live.len() {
        out.push(&live[start..]);
    }
    out
}

/// A record GC is about to move must be the put its index entry says.
fn check_record(inner: &Inner, r: &Reverse, e: &Expect, raw: &[u8]) -> Result<()> {
    let mut d = crate::base::coding::Decoder::new(raw);
    match super::ops::decode_data_op(&mut d) {
        Ok(super::ops::DataOp::Put { log, lsn, .. }) if log == r.log && lsn == r.lsn => Ok(()),
        Ok(_) => Err(Error::corruption(
            physical::data_path(&inner.dir, e.loc.generation),
            e.loc.offset,
            "the reverse index points at another record",
        )),
        Err(err) => Err(Error::corruption(
            physical::data_path(&inner.dir, e.loc.generation),
            e.loc.offset,
            err.0,
        )),
    }
}
