//! `cleave-stress`: crash and stress testing of cleave, after RocksDB's
//! `db_stress` and crash test. `crash` is the driver (SIGKILL loop);
//! `run` is the writer it starts and kills.

mod config;
mod driver;
mod fill;
mod judge;
mod logs;
mod state;
mod values;
mod worker;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand};

use config::Mode;

#[derive(Parser)]
#[command(name = "cleave-stress", about = "Crash and stress testing of cleave")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts the writer, kills it with SIGKILL at a random moment, reopens
    /// and verifies every key and the whole database, and repeats.
    Crash {
        /// Working directory (database, expected state, the writer's
        /// stderr); a new temporary one by default, removed on success.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// How long to keep going, in seconds.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// WAL modes, taken in turn by the cycles.
        #[arg(long, value_delimiter = ',', default_value = "sync,async,nowal")]
        modes: Vec<Mode>,
        /// Writer threads.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Size of the key space.
        #[arg(long, default_value_t = 5000)]
        keys: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The writer is killed between these many milliseconds after it
        /// starts.
        #[arg(long, default_value_t = 300)]
        kill_min_ms: u64,
        #[arg(long, default_value_t = 3000)]
        kill_max_ms: u64,
    },
    /// The log store's crash loop: a writer appends, trims and truncates
    /// logical logs from several threads, is killed with SIGKILL at a random
    /// moment, and every log is checked against what it was acknowledged.
    LogsCrash {
        /// Working directory; a new temporary one by default, removed on
        /// success.
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Logical logs.
        #[arg(long, default_value_t = 32)]
        logs: u32,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 200)]
        kill_min_ms: u64,
        #[arg(long, default_value_t = 2000)]
        kill_max_ms: u64,
    },
    /// The full-disk loop: fills a small ext4 file system of its own (a loop
    /// device; needs root) beside a ballast file until every write fails,
    /// checks every acknowledged write while the database is read-only,
    /// frees the ballast and waits for writes to resume by themselves,
    /// makes room, and repeats; every third cycle reopens on the full
    /// disk. Prints what a full disk costs (the time to the first write
    /// after space is freed, write and read rates around it).
    Fill {
        /// Working directory (the image and its mount point); a new
        /// temporary one by default, removed on success.
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Size of the file system, MiB.
        #[arg(long, default_value_t = 96)]
        disk_mib: u64,
        #[arg(long, default_value_t = 4)]
        threads: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How often a read-only database looks at the free space, ms
        /// (`no_space_poll_interval`; the engine's default is 1000).
        #[arg(long, default_value_t = 50)]
        poll_ms: u64,
    },
    /// The log store's writer (started by `logs-crash`).
    LogsRun {
        #[arg(long)]
        store: PathBuf,
        #[arg(long)]
        state: PathBuf,
        #[arg(long, default_value_t = 4)]
        threads: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// The writer: random operations until killed (started by `crash`).
    Run {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        state: PathBuf,
        #[arg(long)]
        mode: Mode,
        #[arg(long, default_value_t = 4)]
        threads: usize,
        #[arg(long, default_value_t = 0)]
        variant: u64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

/// When a writer is killed: between these many milliseconds after it
/// starts.
fn kill_window(min_ms: u64, max_ms: u64) -> (Duration, Duration) {
    (
        Duration::from_millis(min_ms),
        Duration::from_millis(max_ms.max(min_ms)),
    )
}

/// Runs a crash loop in `dir`, or in a new temporary directory removed on
/// success and kept, with a message saying where, on failure.
fn in_work_dir<S: std::fmt::Display>(
    dir: Option<PathBuf>,
    run: impl FnOnce(PathBuf) -> Result<S>,
) -> Result<()> {
    let tmp = match &dir {
        Some(_) => None,
        None => Some(tempfile::tempdir()?),
    };
    let work = dir.unwrap_or_else(|| {
        tmp.as_ref()
            .map(|t| t.path().to_path_buf())
            .unwrap_or_default()
    });
    match run(work) {
        Ok(summary) => {
            println!("{summary}");
            Ok(())
        }
        Err(e) => {
            // Keep the evidence.
            if let Some(t) = tmp {
                eprintln!("keeping {}", t.keep().display());
            }
            Err(e)
        }
    }
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Crash {
            dir,
            seconds,
            modes,
            threads,
            keys,
            seed,
            kill_min_ms,
            kill_max_ms,
        } => in_work_dir(dir, |dir| {
            driver::run(&driver::DriverArgs {
                dir,
                duration: Duration::from_secs(seconds),
                modes,
                threads,
                keys,
                seed,
                kill_after: kill_window(kill_min_ms, kill_max_ms),
            })
        }),
        Command::LogsCrash {
            dir,
            seconds,
            threads,
            logs,
            seed,
            kill_min_ms,
            kill_max_ms,
        } => in_work_dir(dir, |dir| {
            logs::crash(&logs::CrashArgs {
                dir,
                duration: Duration::from_secs(seconds),
                threads,
                logs,
                seed,
                kill_after: kill_window(kill_min_ms, kill_max_ms),
            })
        }),
        Command::Fill {
            dir,
            seconds,
            disk_mib,
            threads,
            seed,
            poll_ms,
        } => in_work_dir(dir, |dir| {
            fill::run(&fill::FillArgs {
                dir,
                duration: Duration::from_secs(seconds),
                disk_mib,
                threads,
                seed,
                poll: Duration::from_millis(poll_ms),
            })
        }),
        Command::LogsRun {
            store,
            state,
            threads,
            seed,
        } => logs::run(&store, &state, threads, seed),
        Command::Run {
            db,
            state,
            mode,
            threads,
            variant,
            seed,
        } => worker::run(&worker::WorkerArgs {
            db,
            state,
            mode,
            threads,
            variant,
            seed,
        }),
    }
}
