//! `cleave`: inspect and edit a cleave database from the shell.
//!
//! Every error is one line on stderr, `cleave: error: ...`, with exit
//! status 2 (1 means "not found" for `get` and "problems found" for
//! `verify`); usage errors are clap's first line.

mod bytes;
mod dump;
mod report;
mod transfer;

use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use cleave::{Db, Options, ReadOptions, WriteOptions};

use bytes::Form;
use dump::Parts;

#[derive(Parser)]
#[command(
    name = "cleave",
    about = "Inspect and edit a cleave database",
    after_help = "Examples:\n  cleave --db ./data put user:1 alice\n  cleave --db ./data scan --prefix user: --limit 10\n  cleave dump-sst ./data/000012.sst --no-entries"
)]
struct Cli {
    /// The database directory (`verify` also takes it as its argument).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    /// Create the database if it does not exist (implied by `put` and
    /// `load`).
    #[arg(long, global = true)]
    create_if_missing: bool,
    /// The built-in merge operator a database holding merges needs, by the
    /// name its manifest records: uint64add, put, max, stringappend,
    /// append:SEP or fieldupdate:FIELDSxLEN.
    #[arg(long, global = true)]
    merge_operator: Option<String>,
    /// Keys and values given and printed as hex (`0x6B6579` or `6B6579`),
    /// instead of text with non-UTF-8 bytes escaped as `\xNN`.
    #[arg(long, global = true)]
    hex: bool,
    #[command(subcommand)]
    command: Command,
}

/// The keys `scan` and `dump` cover.
#[derive(Args)]
struct Bounds {
    /// First key (inclusive).
    #[arg(long)]
    from: Option<String>,
    /// Last key (exclusive).
    #[arg(long)]
    to: Option<String>,
    /// Only keys starting with PREFIX (sets both bounds).
    #[arg(long, conflicts_with_all = ["from", "to"])]
    prefix: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Prints the value of KEY, or exits with status 1 if it is absent.
    #[command(after_help = "Example:\n  cleave --db ./data get user:1")]
    Get { key: String },
    /// Sets KEY to VALUE (synced); creates the database if it is missing.
    #[command(
        after_help = "Examples:\n  cleave --db ./data put user:1 alice\n  cleave --db ./data --hex put 0x0001 0xFF00\n  cleave --db ./data put --ttl 10m session:9 token"
    )]
    Put {
        key: String,
        value: String,
        /// Time to live: KEY reads as absent once it has passed. A number
        /// with a unit: ms, s, m, h or d (seconds without one).
        #[arg(long, value_parser = parse_ttl)]
        ttl: Option<Duration>,
    },
    /// Removes KEY (synced).
    #[command(after_help = "Example:\n  cleave --db ./data delete user:1")]
    Delete { key: String },
    /// Prints keys and values (KEY<TAB>VALUE) in order, within optional
    /// bounds.
    #[command(
        after_help = "Examples:\n  cleave --db ./data scan --from a --to m --limit 20\n  cleave --db ./data scan --prefix user: --reverse\n  cleave --db ./data --hex scan --prefix 0x00"
    )]
    Scan {
        #[command(flatten)]
        bounds: Bounds,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Largest keys first.
        #[arg(long)]
        reverse: bool,
    },
    /// Prints the engine's statistics.
    #[command(after_help = "Example:\n  cleave --db ./data stats")]
    Stats,
    /// Prints where the disk space goes: sstables and separated values per
    /// level, value files and their exact garbage, S_index, on-disk bytes.
    #[command(after_help = "Example:\n  cleave --db ./data space")]
    Space,
    /// Compacts the whole key range.
    #[command(after_help = "Example:\n  cleave --db ./data compact")]
    Compact,
    /// Collects every value file whose exact garbage ratio reaches RATIO
    /// (default: the option's 0.2) and prints what GC did.
    #[command(after_help = "Example:\n  cleave --db ./data gc --ratio 0.1")]
    Gc {
        #[arg(long)]
        ratio: Option<f64>,
    },
    /// Checks the whole database: every checksum, the manifest against the
    /// open files, every value handle, and the garbage counters against a
    /// recount from the bitmaps. Prints a report; exits with status 1 if
    /// anything is wrong (or the database does not open).
    #[command(after_help = "Example:\n  cleave verify ./data")]
    Verify {
        /// The database directory, instead of `--db`.
        dir: Option<PathBuf>,
    },
    /// Makes a consistent copy of the database in DIR (which must not
    /// exist or be empty) that opens on its own: files are hard-linked
    /// where the file system allows it, copied where not.
    #[command(after_help = "Example:\n  cleave --db ./data checkpoint ./backup-2026-11-28")]
    Checkpoint { dir: PathBuf },
    /// Writes every key and value, in order, as lines of `0xKEY ==>
    /// 0xVALUE` (the form of `ldb dump --hex`, which `load` and `ldb load
    /// --hex` read).
    #[command(
        after_help = "Examples:\n  cleave --db ./data dump > data.dump\n  cleave --db ./data dump --prefix user: > users.dump"
    )]
    Dump {
        #[command(flatten)]
        bounds: Bounds,
    },
    /// Puts every `KEY ==> VALUE` line of FILE (or standard input), each
    /// side `0x`-hex or raw bytes, as `dump` and `ldb dump` write them
    /// (a raw side starting with `0x` is read as hex: dump such data with
    /// `--hex`); flushes at the end. Creates the database if it is missing.
    #[command(
        after_help = "Examples:\n  cleave --db ./copy load data.dump\n  ldb --db=./rocks dump --hex | cleave --db ./data load"
    )]
    Load {
        /// The dump to read; standard input when absent or `-`.
        file: Option<PathBuf>,
    },
    /// Prints an sstable without opening the database: its properties,
    /// value references, index and entries.
    #[command(
        name = "dump-sst",
        after_help = "Example:\n  cleave dump-sst ./data/000012.sst --no-entries"
    )]
    DumpSst {
        file: PathBuf,
        /// Leave out the entries.
        #[arg(long)]
        no_entries: bool,
        /// Also read every block and check its checksum.
        #[arg(long)]
        verify: bool,
    },
    /// Prints the manifest of the database in DIR (the one CURRENT names),
    /// or a manifest file: every edit, and the state they add up to.
    #[command(
        name = "dump-manifest",
        after_help = "Example:\n  cleave dump-manifest ./data"
    )]
    DumpManifest { path: PathBuf },
    /// Prints a WAL: each write batch with its sequence number and entries.
    #[command(
        name = "dump-wal",
        after_help = "Example:\n  cleave dump-wal ./data/000009.wal"
    )]
    DumpWal { file: PathBuf },
    /// Prints a value file or value log: its properties, record index and
    /// records (an unsealed value log: its records as recovery reads them).
    #[command(
        name = "dump-value-file",
        after_help = "Example:\n  cleave dump-value-file ./data/000013.vf --no-records"
    )]
    DumpValueFile {
        file: PathBuf,
        /// Leave out the records.
        #[arg(long)]
        no_records: bool,
        /// Also check every record's checksum.
        #[arg(long)]
        verify: bool,
    },
}

impl Bounds {
    fn read_options(self, form: Form) -> Result<ReadOptions<'static>> {
        let mut ro = ReadOptions::new();
        if let Some(p) = self.prefix {
            let p = form.parse(&p, "--prefix")?;
            ro.upper_bound = bytes::prefix_end(&p);
            ro.lower_bound = Some(p);
        } else {
            ro.lower_bound = self.from.map(|k| form.parse(&k, "--from")).transpose()?;
            ro.upper_bound = self.to.map(|k| form.parse(&k, "--to")).transpose()?;
        }
        Ok(ro)
    }
}

/// Commands that read one file and need no database.
fn run_file_command(command: &Command, form: Form, out: &mut dyn Write) -> Result<bool> {
    let all = |records: bool, verify: bool| Parts {
        properties: true,
        index: true,
        records,
        verify,
    };
    match command {
        Command::DumpSst {
            file,
            no_entries,
            verify,
        } => dump::sstable(file, all(!no_entries, *verify), form, out)?,
        Command::DumpValueFile {
            file,
            no_records,
            verify,
        } => dump::value_file(file, all(!no_records, *verify), form, out)?,
        Command::DumpWal { file } => dump::wal(file, form, out)?,
        Command::DumpManifest { path } => dump::manifest(path, form, out)?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn run(cli: Cli) -> Result<bool> {
    let form = if cli.hex { Form::Hex } else { Form::Text };
    let mut out = std::io::stdout().lock();
    if run_file_command(&cli.command, form, &mut out)? {
        return Ok(true);
    }
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
    let creates = matches!(cli.command, Command::Put { .. } | Command::Load { .. });
    let opts = Options {
        create_if_missing: cli.create_if_missing || creates,
        merge_operator,
        ..Options::default()
    };
    // Reading commands write nothing: they work beside a process that has
    // the database open, on a full disk and on a read-only mount.
    let reads_only = matches!(
        cli.command,
        Command::Get { .. }
            | Command::Scan { .. }
            | Command::Stats
            | Command::Space
            | Command::Verify { .. }
            | Command::Dump { .. }
    );
    let opened = if reads_only {
        Db::open_read_only(&dir, opts)
    } else {
        Db::open(&dir, opts)
    };
    let db = match opened {
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
    // False exits with status 1: `get` found no value, `verify` found problems.
    let mut success = true;
    match cli.command {
        Command::Get { key } => match db.get(&ReadOptions::new(), &form.parse(&key, "key")?)? {
            Some(v) => writeln!(out, "{}", form.show(&v))?,
            None => success = false,
        },
        Command::Put { key, value, ttl } => {
            let (key, value) = (form.parse(&key, "key")?, form.parse(&value, "value")?);
            match ttl {
                Some(ttl) => db.put_with_ttl(&synced, &key, &value, ttl)?,
                None => db.put(&synced, &key, &value)?,
            }
        }
        Command::Delete { key } => db.delete(&synced, &form.parse(&key, "key")?)?,
        Command::Scan {
            bounds,
            limit,
            reverse,
        } => {
            let ro = bounds.read_options(form)?;
            let mut it = db.iter(&ro);
            if reverse {
                it.seek_to_last()?;
            } else {
                it.seek_to_first()?;
            }
            let mut n = 0;
            while it.valid() && n < limit {
                writeln!(out, "{}\t{}", form.show(it.key()), form.show(it.value()?))?;
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
        Command::Space => report::space(&db, &mut out)?,
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
        Command::Checkpoint { dir: target } => {
            let info = db
                .checkpoint(&target)
                .with_context(|| format!("checkpoint into {}", target.display()))?;
            writeln!(
                out,
                "checkpoint in {}: {} files linked, {} copied ({} bytes), last sequence {}",
                target.display(),
                info.files_linked,
                info.files_copied,
                info.bytes_copied,
                info.last_sequence
            )?;
        }
        Command::Dump { bounds } => {
            let ro = bounds.read_options(form)?;
            let n = transfer::dump(&db, &ro, &mut out)?;
            eprintln!("cleave: dumped {n} keys");
        }
        Command::Load { file } => {
            let n = match file.filter(|f| f.as_os_str() != "-") {
                Some(path) => {
                    let f = std::fs::File::open(&path)
                        .with_context(|| format!("opening {}", path.display()))?;
                    transfer::load(&db, &mut BufReader::new(f), &path.display().to_string())?
                }
                None => transfer::load(&db, &mut std::io::stdin().lock(), "standard input")?,
            };
            writeln!(out, "loaded {n} keys")?;
        }
        Command::DumpSst { .. }
        | Command::DumpManifest { .. }
        | Command::DumpWal { .. }
        | Command::DumpValueFile { .. } => unreachable!("file commands ran above"),
    }
    out.flush()?;
    db.close()?;
    Ok(success)
}

/// The error and its causes on one line, each cause once: the engine's
/// messages already end with the OS error they carry as their source.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}

/// A time to live as `--ttl` takes it: a positive whole number with a unit,
/// ms, s, m, h or d (seconds without one).
fn parse_ttl(text: &str) -> std::result::Result<Duration, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit_ms: u64 = match &text[digits.len()..] {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => return Err(format!("unknown unit {other:?}: use ms, s, m, h or d")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number with a unit"))?;
    match n.checked_mul(unit_ms) {
        Some(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        Some(_) => Err("a time to live must be more than 0".to_string()),
        None => Err(format!("{text} is too long a time to live")),
    }
}

fn main() {
    // A bug in the tool or the engine is still one line, not a backtrace,
    // and the status of any other error.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string().replace('\n', " ");
        eprintln!("cleave: internal error: {msg}");
        std::process::exit(2);
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp
            | clap::error::ErrorKind::DisplayVersion
            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            _ => {
                let rendered = e.to_string();
                let first = rendered.lines().next().unwrap_or("invalid arguments");
                eprintln!("cleave: {first} (see cleave --help)");
                std::process::exit(2);
            }
        },
    };
    match run(cli) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            // A closed pipe (`cleave dump | head`) ends the output quietly.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                std::process::exit(0);
            }
            eprintln!("cleave: error: {}", one_line(&e));
            std::process::exit(2);
        }
    }
}
