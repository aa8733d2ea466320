//! The process: the listener, signals, the once-a-second sync, and the
//! close at the end.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::cluster::layout::Layout;
use crate::config::Args;
use crate::connection;
use crate::state::Shared;
use crate::store::{FsyncMode, Store};

/// How often `appendfsync everysec` syncs.
const SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// How long shutdown waits for running commands before it closes.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Serving threads by default on a machine of fewer cores.
const MIN_DEFAULT_THREADS: usize = 2;

/// Opens the data directory, serves until SHUTDOWN, SIGTERM or SIGINT,
/// then syncs and closes the database.
pub fn run(args: Args) -> Result<(), String> {
    if let Some(command) = &args.command {
        return crate::cluster_cli::run(command);
    }
    // Checked before anything is opened: a bad flag must not leave a
    // standalone database where a member's directory was meant to be.
    let settings = args.cluster_settings()?;
    // A cluster member keeps its database under `db-N/` and syncs its Raft
    // log, not the database (docs/cluster.md).
    let (store, layout) = match &settings {
        Some(s) => {
            let (layout, live) = Layout::prepare(&args.dir, s.id)?;
            let store = Store::open(&live, args.engine_options(), FsyncMode::No)?;
            (store, Some((layout, live)))
        }
        None => (
            Store::open(&args.dir, args.engine_options(), args.appendfsync)?,
            None,
        ),
    };
    let threads = match args.threads {
        // At least two: a write the engine stalls (L0 slowdown, full
        // memtables, the space budget's pacing) holds its thread, and on
        // one core it would hold every connection.
        0 => std::thread::available_parallelism()
            .map_or(MIN_DEFAULT_THREADS, |n| n.get().max(MIN_DEFAULT_THREADS)),
        n => n,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("cleave-server")
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    let listener = rt
        .block_on(TcpListener::bind((args.bind.as_str(), args.port)))
        .map_err(|e| format!("listening on {}:{}: {e}", args.bind, args.port))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("listening on {}:{}: {e}", args.bind, args.port))?
        .port();
    let shared = Arc::new(Shared::new(store, args.limits(), args.fixed(port)));
    if let (Some(mut settings), Some((layout, live))) = (settings, layout) {
        // With --port 0, the port bound is the one to redirect clients to.
        settings.me.redis = format!("{}:{port}", args.bind);
        let cluster = rt.block_on(crate::cluster::start(&shared, settings, layout, live))?;
        let _ = shared.cluster.set(cluster);
    }
    let syncer = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("cleave-server-sync".into())
            .spawn(move || sync_every_second(&shared))
            .map_err(|e| format!("starting the sync thread: {e}"))?
    };
    // Scripts wait for this line (and read the port from it).
    println!(
        "cleave-server ready on {}:{port}, data in {}",
        args.bind,
        args.dir.display()
    );
    rt.block_on(accept(Arc::clone(&shared), listener));
    if let Some(cluster) = shared.cluster.get() {
        if let Err(e) = rt.block_on(cluster.raft.shutdown()) {
            log::warn!("stopping Raft: {e}");
        }
    }
    rt.shutdown_timeout(SHUTDOWN_GRACE);
    let _ = syncer.join();
    close(shared)
}

async fn accept(shared: Arc<Shared>, listener: TcpListener) {
    let mut shutdown = shared.shutdown_signal();
    let signals = {
        let shared = Arc::clone(&shared);
        async move {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            shared.request_shutdown();
        }
    };
    tokio::spawn(signals);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => {
                    tokio::spawn(connection::serve(Arc::clone(&shared), stream, addr.to_string()));
                }
                // Out of file descriptors, say: refuse this one, go on.
                Err(e) => {
                    log::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = shutdown.wait_for(|down| *down) => return,
        }
    }
}

fn sync_every_second(shared: &Shared) {
    while !shared.is_shutting_down() {
        std::thread::sleep(SYNC_INTERVAL);
        if shared.store.fsync_mode() == FsyncMode::Everysec {
            if let Err(e) = shared.store.sync_if_written() {
                // The database is poisoned now: writes fail from here on.
                log::error!("background sync: {e}");
            }
        }
    }
}

/// Closes the database once no connection holds it; if one still does
/// after the grace period, syncs what it holds instead.
fn close(shared: Arc<Shared>) -> Result<(), String> {
    match Arc::try_unwrap(shared) {
        Ok(shared) => shared.store.close().map_err(|e| format!("closing: {e}")),
        Err(shared) => {
            let _alone = shared.store.exclusive();
            shared
                .store
                .db()
                .sync_wal()
                .map_err(|e| format!("syncing: {e}"))
        }
    }
}
