//! `cleave`: inspect and edit a cleave database from the shell.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use cleave::{Db, Options, ReadOptions, WriteOptions};

#[derive(Parser)]
#[command(name = "cleave", about = "Inspect and edit a cleave database")]
struct Cli {
    /// The database directory (`verify` also takes it as its argument).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Create the database if it does not exist.
    #[arg(long)]
    create_if_missing: bool,
    /// The built-in merge operator a database holding merges needs, by the
    /// name its manifest records: uint64add, put, max, stringappend,
    /// append:SEP or fieldupdate:FIELDSxLEN.
    #[arg(long)]
    merge_operator: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prints the value of KEY, or exits with status 1 if it is absent.
    Get { key: String },
    /// Sets KEY to VALUE (synced).
    Put { key: String, value: String },
    /// Removes KEY (synced).
    Delete { key: String },
    /// Prints keys and values in order, within optional bounds.
    Scan {
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Newest keys first.
        #[arg(long)]
        reverse: bool,
    },
    /// Prints the engine's statistics.
    Stats,
    /// Prints where the disk space goes: sstables and separated values per
    /// level, value files and their exact garbage, S_index, on-disk bytes.
    Space,
    /// Compacts the whole key range.
    Compact,
    /// Collects every value file whose exact garbage ratio reaches RATIO
    /// (default: the option's 0.2) and prints what GC did.
    Gc {
        #[arg(long)]
        ratio: Option<f64>,
    },
    /// Checks the whole database: every checksum, the manifest against the
    /// open files, every value handle, and the garbage counters against a
    /// recount from the bitmaps. Prints a report; exits with status 1 if
    /// anything is wrong (or the database does not open).
    Verify {
        /// The database directory, instead of `--db`.
        dir: Option<PathBuf>,
    },
}

fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(cli: Cli) -> Result<bool> {
    let dir = match (&cli.command, cli.db) {
        (Command::Verify { dir: Some(d) }, _) => d.clone(),
        (_, Some(d)) => d,
        _ => bail!("no database directory: pass --db DIR"),
    };
    let merge_operator = match &cli.merge_operator {
        Some(name) => Some(cleave::builtin_merge_operator(name).with_context(|| {
            format!("--merge-operator: no built-in operator is named {name:?}")
        })?),
        None => None,
    };
    let opts = Options {
        create_if_missing: cli.create_if_missing,
        merge_operator,
        ..Options::default()
    };
    let db = match Db::open(&dir, opts) {
        Ok(db) => db,
        // For `verify`, a database that does not open is a problem found,
        // not a failure of the tool.
        Err(e) if matches!(cli.command, Command::Verify { .. }) => {
            println!("1 problem:\n  opening {}: {e}", dir.display());
            return Ok(false);
        }
        Err(e) => return Err(e).with_context(|| format!("opening {}", dir.display())),
    };
    let synced = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    let mut out = std::io::stdout().lock();
    // False exits with status 1: `get` found no value, `verify` found problems.
    let mut success = true;
    match cli.command {
        Command::Get { key } => match db.get(&ReadOptions::new(), key.as_bytes())? {
            Some(v) => writeln!(out, "{}", printable(&v))?,
            None => success = false,
        },
        Command::Put { key, value } => db.put(&synced, key.as_bytes(), value.as_bytes())?,
        Command::Delete { key } => db.delete(&synced, key.as_bytes())?,
        Command::Scan {
            from,
            to,
            limit,
            reverse,
        } => {
            let mut ro = ReadOptions::new();
            ro.lower_bound = from.map(String::into_bytes);
            ro.upper_bound = to.map(String::into_bytes);
            let mut it = db.iter(&ro);
            if reverse {
                it.seek_to_last()?;
            } else {
                it.seek_to_first()?;
            }
            let mut n = 0;
            while it.valid() && n < limit {
                writeln!(out, "{}\t{}", printable(it.key()), printable(it.value()?))?;
                n += 1;
                if reverse {
                    it.prev()?;
                } else {
                    it.next()?;
                }
            }
            it.status()?;
        }
        Command::Stats => write!(out, "{}", db.stats().to_text())?,
        Command::Space => {
            let r = db.space_report()?;
            let mb = |b: u64| b as f64 / (1 << 20) as f64;
            writeln!(out, "level  sstables(MB)  values(MB)")?;
            for (level, l) in r.levels.iter().enumerate() {
                writeln!(
                    out,
                    "L{level:<5} {:>12.1} {:>11.1}",
                    mb(l.sstable_bytes),
                    mb(l.value_bytes)
                )?;
            }
            let garbage = if r.value_file_bytes == 0 {
                0.0
            } else {
                100.0 * r.exposed_garbage_bytes as f64 / r.value_file_bytes as f64
            };
            writeln!(
                out,
                "value files: {} ({:.1} MB; referenced {:.1} MB, exposed garbage {:.1} MB = {garbage:.1}%)",
                r.value_files,
                mb(r.value_file_bytes),
                mb(r.referenced_value_bytes),
                mb(r.exposed_garbage_bytes)
            )?;
            if r.delta_files > 0 {
                writeln!(
                    out,
                    "delta store: {} buckets in {} files ({:.1} MB; buckets {:.1} MB, garbage {:.1} MB)",
                    r.delta_buckets,
                    r.delta_files,
                    mb(r.delta_file_bytes),
                    mb(r.delta_bucket_bytes),
                    mb(r.delta_garbage_bytes)
                )?;
            }
            writeln!(
                out,
                "S_index: {:.3}; exposed garbage / referenced (G_E/D): {:.3}; hidden garbage (estimate): {:.1} MB",
                r.s_index,
                r.exposed_garbage_ratio,
                mb(r.hidden_garbage_bytes)
            )?;
            let rate = r
                .gc_rate_limit
                .map_or_else(|| "none".to_string(), |b| format!("{:.1} MB/s", mb(b)));
            writeln!(
                out,
                "pressure: index {:.3}, values {:.3}; GC jobs allowed {} (compaction and GC threads {}), rate limit {rate}",
                r.index_pressure, r.value_pressure, r.gc_max_jobs, r.pool_threads
            )?;
            if r.budget_bytes > 0 {
                writeln!(
                    out,
                    "space budget: {:.1} of {:.1} MB ({:.0}%)",
                    mb(r.budget_usage_bytes),
                    mb(r.budget_bytes),
                    100.0 * r.budget_usage_bytes as f64 / r.budget_bytes as f64
                )?;
            }
            writeln!(
                out,
                "on disk: {:.1} MB (sstables {:.1}, value files {:.1}, delta files {:.1}, WAL {:.1}, manifest {:.1}, other {:.1})",
                mb(r.on_disk_bytes),
                mb(r.sstable_bytes),
                mb(r.value_file_bytes),
                mb(r.delta_file_bytes),
                mb(r.wal_bytes),
                mb(r.manifest_bytes),
                mb(r.other_bytes)
            )?;
        }
        Command::Compact => db.compact_range(None, None)?,
        Command::Gc { ratio } => {
            let done = match ratio {
                Some(r) => db.gc_with_ratio(r)?,
                None => db.gc_now()?,
            };
            writeln!(out, "{done}")?;
        }
        Command::Verify { .. } => {
            let report = db.verify();
            write!(out, "{report}")?;
            success = report.is_ok();
        }
    }
    db.close()?;
    Ok(success)
}

fn main() -> Result<()> {
    match run(Cli::parse()) {
        Ok(true) => Ok(()),
        Ok(false) => std::process::exit(1),
        Err(e) => bail!("{e:#}"),
    }
}
