//! `dump` and `load`: every key and value as lines of `0xKEY ==> 0xVALUE`,
//! the form `ldb dump --hex` writes and `ldb load --hex` reads, so that
//! data moves between cleave and RocksDB both ways.

use std::io::{BufRead, Write};

use anyhow::{bail, Context, Result};
use cleave::{Db, ReadOptions, WriteBatch, WriteOptions};

use crate::bytes::{hex, parse_dump_line};

/// A load writes a batch once it holds this many bytes of keys and values.
const LOAD_BATCH_BYTES: usize = 4 << 20;

/// The last line `ldb dump` prints, which `load` skips.
const LDB_TRAILER: &str = "Keys in range: ";

/// Writes every live key in `[from, to)` in order; returns how many.
pub fn dump(db: &Db, ro: &ReadOptions<'_>, out: &mut dyn Write) -> Result<u64> {
    let mut it = db.iter(ro);
    it.seek_to_first()?;
    let mut n = 0;
    while it.valid() {
        writeln!(out, "{} ==> {}", hex(it.key()), hex(it.value()?))?;
        n += 1;
        it.next()?;
    }
    it.status()?;
    Ok(n)
}

/// Puts every line's key and value, in batches (not atomic as a whole),
/// then flushes, so that the load is durable when it returns; returns how
/// many. Blank lines and `ldb`'s trailer are skipped; any other line that
/// is not `KEY ==> VALUE` stops the load with its number (the lines before
/// it are written).
pub fn load(db: &Db, input: &mut dyn BufRead, source: &str) -> Result<u64> {
    let wo = WriteOptions::default();
    let mut batch = WriteBatch::new();
    let mut n = 0;
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if input
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {source}"))?
            == 0
        {
            break;
        }
        number += 1;
        let mut l = line.as_slice();
        while let Some(rest) = l.strip_suffix(b"\n").or_else(|| l.strip_suffix(b"\r")) {
            l = rest;
        }
        if l.is_empty() || l.starts_with(LDB_TRAILER.as_bytes()) {
            continue;
        }
        let (k, v) = match parse_dump_line(l) {
            Ok(kv) => kv,
            Err(e) => {
                db.write(&wo, std::mem::take(&mut batch))?;
                bail!("{source} line {number}: {e}");
            }
        };
        batch.put(&k, &v);
        n += 1;
        if batch.approximate_size() >= LOAD_BATCH_BYTES {
            db.write(&wo, std::mem::take(&mut batch))?;
        }
    }
    db.write(&wo, batch)?;
    db.flush()?;
    Ok(n)
}
