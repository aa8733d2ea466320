use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Warnings and errors to stderr, as Redis logs them, with the time.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            eprintln!("{now:.3} {} {}", r.level(), r.args());
        }
    }

    fn flush(&self) {}
}

fn main() {
    let _ = log::set_logger(&StderrLog).map(|()| log::set_max_level(log::LevelFilter::Warn));
    let args = cleave_server::config::Args::parse();
    if let Err(e) = cleave_server::run(args) {
        eprintln!("cleave-server: {e}");
        std::process::exit(1);
    }
}
