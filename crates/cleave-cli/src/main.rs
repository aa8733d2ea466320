//! `cleave`: inspect and edit a cleave database from the shell.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use cleave::{Db, Options, ReadOptions, WriteOptions};

#[derive(Parser)]
#[command(name = "cleave", about = "Inspect and edit a cleave database")]
struct Cli {
    /// The database directory.
    #[arg(long)]
    db: PathBuf,
    /// Create the database if it does not exist.
    #[arg(long)]
    create_if_missing: bool,
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
    /// Compacts the whole key range.
    Compact,
    /// Checks every block checksum of every live sstable.
    Verify,
}

fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn run(cli: Cli) -> Result<bool> {
    let opts = Options {
        create_if_missing: cli.create_if_missing,
        ..Options::default()
    };
    let db = Db::open(&cli.db, opts).with_context(|| format!("opening {}", cli.db.display()))?;
    let synced = WriteOptions {
        sync: true,
        disable_wal: false,
    };
    let mut out = std::io::stdout().lock();
    let mut found = true;
    match cli.command {
        Command::Get { key } => match db.get(&ReadOptions::new(), key.as_bytes())? {
            Some(v) => writeln!(out, "{}", printable(&v))?,
            None => found = false,
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
        Command::Compact => db.compact_range(None, None)?,
        Command::Verify => {
            db.verify_checksums()?;
            writeln!(out, "ok: every sstable block checksum verified")?;
        }
    }
    db.close()?;
    Ok(found)
}

fn main() -> Result<()> {
    match run(Cli::parse()) {
        Ok(true) => Ok(()),
        Ok(false) => std::process::exit(1),
        Err(e) => bail!("{e:#}"),
    }
}
