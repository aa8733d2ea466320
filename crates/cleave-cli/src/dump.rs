//! `dump-sst`, `dump-wal`, `dump-value-file` and `dump-manifest`: one file
//! at a time, without opening the database (so they work beside a running
//! process that holds it, and on a database that does not open).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use cleave::inspect::{self, Entry, EntryKind, ValueRecord};
use cleave::vfs::OsFs;

use crate::bytes::Form;

/// The largest sequence number (56 bits).
const MAX_SEQ: u64 = (1 << 56) - 1;

/// Which parts of a file to print.
#[derive(Debug, Clone, Copy)]
pub struct Parts {
    pub properties: bool,
    pub index: bool,
    pub records: bool,
    /// Also read every block and check every checksum.
    pub verify: bool,
}

fn entry_line(e: &Entry, form: Form) -> String {
    let mut head = format!("{} seq:{} {}", form.show(&e.key), e.seq, e.kind.name());
    if let Some(at) = e.expires_at {
        head.push_str(&format!(" expires_at_ms:{at}"));
    }
    match (e.kind, &e.handle) {
        (EntryKind::Deletion, _) => head,
        (_, Some(h)) => format!(
            "{head} => value file {} record {} ({} bytes at {})",
            h.logical_file, h.ordinal, h.len, h.offset
        ),
        _ => format!("{head} => {}", form.show(&e.value)),
    }
}

fn record_line(r: &ValueRecord, form: Form) -> String {
    format!(
        "{}:{} @{} {} seq:{} => {}",
        r.handle.logical_file,
        r.handle.ordinal,
        r.handle.offset,
        form.show(&r.key),
        r.seq,
        form.show(&r.value)
    )
}

fn properties(out: &mut dyn Write, props: &[(String, String)]) -> Result<()> {
    writeln!(out, "properties:")?;
    for (name, value) in props {
        writeln!(out, "  {name}: {value}")?;
    }
    Ok(())
}

pub fn sstable(path: &Path, parts: Parts, form: Form, out: &mut dyn Write) -> Result<()> {
    let table = inspect::SstableFile::open(&OsFs::new(), path)?;
    writeln!(out, "sstable {}", path.display())?;
    if parts.properties {
        properties(out, &table.properties())?;
        let refs = table.value_refs()?;
        writeln!(out, "value references: {} value files", refs.len())?;
        for r in refs {
            writeln!(
                out,
                "  value file {}: {} records, {} bytes",
                r.logical_file, r.records, r.bytes
            )?;
        }
    }
    if parts.index {
        let blocks = table.data_blocks()?;
        writeln!(out, "index: {} data blocks", blocks.len())?;
        for b in blocks {
            // A shortened separator carries the largest sequence number.
            let seq = if b.separator_seq == MAX_SEQ {
                "max".to_string()
            } else {
                b.separator_seq.to_string()
            };
            writeln!(
                out,
                "  {} seq:{seq} -> {} bytes at {}",
                form.show(&b.separator),
                b.size,
                b.offset
            )?;
        }
    }
    if parts.records {
        writeln!(out, "entries:")?;
        for e in table.entries() {
            writeln!(out, "  {}", entry_line(&e?, form))?;
        }
    }
    if parts.verify {
        table.verify()?;
        writeln!(
            out,
            "verified: every block's checksum, entry order and count"
        )?;
    }
    Ok(())
}

pub fn value_file(path: &Path, parts: Parts, form: Form, out: &mut dyn Write) -> Result<()> {
    let fs = OsFs::new();
    let file = match inspect::ValueFileDump::open(&fs, path) {
        Ok(f) => f,
        // A value log still being written, or one a crash left, has no
        // footer: its records are read as recovery reads them. A file that
        // yields none that way, or one asked to be verified, is reported
        // as the damaged value file it may be.
        Err(e @ cleave::Error::Corruption { .. }) => {
            let records = inspect::unsealed_value_log(&fs, path)?;
            if records.is_empty() {
                return Err(e.into());
            }
            writeln!(
                out,
                "value file {}: not a sealed value file ({e})",
                path.display()
            )?;
            writeln!(
                out,
                "read as an unsealed value log: {} records up to the first incomplete one",
                records.len()
            )?;
            if parts.records {
                for r in &records {
                    writeln!(out, "  {}", record_line(r, form))?;
                }
            }
            if parts.verify {
                return Err(anyhow::Error::new(e).context("--verify: not a sealed value file"));
            }
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    writeln!(out, "value file {}", path.display())?;
    if parts.properties {
        properties(out, &file.properties(&|b| form.show(b)))?;
    }
    if parts.index {
        let index = file.record_index()?;
        writeln!(out, "record index: {} records", index.len())?;
        for h in index {
            writeln!(
                out,
                "  {}:{} -> {} bytes at {}",
                h.logical_file, h.ordinal, h.len, h.offset
            )?;
        }
    }
    if parts.records {
        writeln!(out, "records:")?;
        for r in file.records() {
            writeln!(out, "  {}", record_line(&r?, form))?;
        }
    }
    if parts.verify {
        file.verify()?;
        writeln!(
            out,
            "verified: every record's checksum and the record index"
        )?;
    }
    Ok(())
}

pub fn wal(path: &Path, form: Form, out: &mut dyn Write) -> Result<()> {
    let dump = inspect::wal(&OsFs::new(), path)?;
    writeln!(out, "WAL {}", path.display())?;
    if let Some(p) = dump.previous {
        writeln!(out, "previous WAL: {p}")?;
    }
    let entries: usize = dump.batches.iter().map(|b| b.entries.len()).sum();
    writeln!(out, "{} batches, {entries} entries", dump.batches.len())?;
    for b in &dump.batches {
        writeln!(out, "batch seq:{} ({} entries)", b.seq, b.entries.len())?;
        for e in &b.entries {
            writeln!(out, "  {}", entry_line(e, form))?;
        }
    }
    if let Some((offset, why)) = dump.stopped {
        writeln!(out, "stopped at offset {offset}: {why}")?;
    }
    Ok(())
}

pub fn manifest(path: &Path, form: Form, out: &mut dyn Write) -> Result<()> {
    let dump = inspect::manifest(&OsFs::new(), path, &|b| form.show(b))
        .with_context(|| format!("reading the manifest of {}", path.display()))?;
    writeln!(
        out,
        "manifest {}: {} edits",
        dump.path.display(),
        dump.edits.len()
    )?;
    for (i, (offset, lines)) in dump.edits.iter().enumerate() {
        writeln!(out, "edit {i} at {offset}:")?;
        for l in lines {
            writeln!(out, "  {l}")?;
        }
    }
    if let Some(offset) = dump.torn_tail {
        writeln!(
            out,
            "torn final record at {offset} (ignored, as recovery does)"
        )?;
    }
    writeln!(out, "state:")?;
    for l in &dump.summary {
        writeln!(out, "  {l}")?;
    }
    Ok(())
}
