//! Command-line flags: where to listen, where the data lives, the write
//! mode, the limits Redis has, and the engine options that matter most.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use cleave::{Compression, Options};

use crate::cluster::types::Member;
use crate::cluster::{ReadMode, Settings};
use crate::state::{Fixed, Limits};
use crate::store::FsyncMode;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "cleave-server",
    version,
    about = "cleave behind the Redis protocol: redis-cli, redis-benchmark and any Redis client work against it",
    after_help = "Example:\n  cleave-server --dir /var/lib/cleave --port 6380 --appendfsync everysec\n  redis-cli -p 6380 set greeting hello"
)]
pub struct Args {
    /// `cleave-server cluster ...`: administer a running group.
    #[command(subcommand)]
    pub command: Option<crate::cluster_cli::Command>,

    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// TCP port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 6380)]
    pub port: u16,
    /// Data directory, created if missing.
    #[arg(long, default_value = "./cleave-data")]
    pub dir: PathBuf,
    /// always: each write is synced before its reply; everysec: writes are
    /// synced once a second (a crash loses at most about a second); no:
    /// never synced by the server (the OS writes them back).
    #[arg(long, value_enum, default_value = "everysec")]
    pub appendfsync: FsyncMode,
    /// Most clients connected at once.
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// Longest bulk string in a request, in bytes (Redis's default, 512 MiB).
    #[arg(long, default_value_t = 512 << 20)]
    pub proto_max_bulk_len: u64,
    /// Most bytes of unprocessed requests one client may buffer (1 GiB).
    #[arg(long, default_value_t = 1 << 30)]
    pub client_query_buffer_limit: usize,
    /// Threads serving connections; 0 (the default) is one per core, and
    /// at least 2. They run most commands themselves, a few microseconds
    /// of memtable and cache work, so threads beyond the cores only add
    /// switches between them, and a thread descheduled while its batch
    /// holds a hot key's lock stalls every client of that key
    /// (redis-benchmark's pipelined LPUSH ran a fifth slower with 8 on 2
    /// cores). A thread also waits when a read must go to the disk, or
    /// when the engine stalls its write: where many do, more threads (as
    /// kvrocks's 8 workers) keep the other clients served meanwhile.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,

    /// Memtable size, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// Block cache size, in bytes. Larger than the engine's default (32
    /// MiB): a server's hashes and sorted sets are many small subkeys whose
    /// reads are block reads (kvrocks defaults to 4 GiB).
    #[arg(long, default_value_t = 128 << 20)]
    pub block_cache_size: usize,
    /// Share of each memtable given to a bloom filter of its keys and
    /// collection prefixes, so that reads of keys it lacks skip it (0:
    /// none; at most 0.25).
    #[arg(long, default_value_t = 0.1)]
    pub memtable_bloom_size_ratio: f64,
    /// Smallest value kept out of the LSM-tree in value files, in bytes
    /// (a Redis string's value plus 9 bytes of header).
    #[arg(long, default_value_t = 512)]
    pub min_value_size: usize,
    /// Keep every value in the LSM-tree.
    #[arg(long)]
    pub no_value_separation: bool,
    /// Disk space to stay under, in bytes (0: none): GC and compaction are
    /// scheduled to keep the database within it.
    #[arg(long, default_value_t = 0)]
    pub space_budget: u64,
    /// Garbage ratio at which GC rewrites a value file.
    #[arg(long, default_value_t = 0.2)]
    pub gc_garbage_ratio: f64,
    /// Background threads for flushes, compactions and GC.
    #[arg(long, default_value_t = 2)]
    pub max_background_jobs: usize,
    /// sstable block compression: none, lz4 or zstd.
    #[arg(long, default_value = "none", value_parser = ["none", "lz4", "zstd"])]
    pub compression: String,
    /// O_DIRECT for reads.
    #[arg(long)]
    pub use_direct_reads: bool,
    /// O_DIRECT for flushes, compactions and GC.
    #[arg(long)]
    pub use_direct_io_for_flush_and_compaction: bool,

    /// Run as a member of a replicated group (docs/cluster.md): writes go
    /// through a Raft log and are acknowledged once a majority holds them.
    #[arg(long, help_heading = "Cluster")]
    pub cluster: bool,
    /// This member's id in the group, unique and never reused.
    #[arg(long, help_heading = "Cluster", requires = "cluster")]
    pub node_id: Option<u64>,
    /// Port of the Raft transport between members (on --bind).
    #[arg(long, help_heading = "Cluster", requires = "cluster")]
    pub raft_port: Option<u16>,
    /// Another member of the group `cluster init` forms:
    /// ID=RAFT_HOST:RAFT_PORT,HOST:PORT (repeat for each).
    #[arg(long = "peer", help_heading = "Cluster", requires = "cluster", value_parser = parse_peer)]
    pub peers: Vec<(u64, Member)>,
    /// linearizable: reads go to the leader, which confirms it still leads
    /// before it answers; local: each member answers from its own state,
    /// which may be behind (a connection can also ask for this with
    /// READONLY).
    #[arg(
        long,
        help_heading = "Cluster",
        value_enum,
        default_value = "linearizable"
    )]
    pub cluster_reads: ReadMode,
    /// Interval between the leader's heartbeats, in milliseconds.
    #[arg(long, help_heading = "Cluster", default_value_t = 100)]
    pub raft_heartbeat_ms: u64,
    /// Shortest election timeout, in milliseconds (the longest is twice
    /// it). After a leader's last heartbeat, openraft waits out its lease
    /// (the longest timeout) and then a random timeout before a member
    /// stands: a dead leader is replaced 3 to 4 times this later.
    #[arg(long, help_heading = "Cluster", default_value_t = 500)]
    pub raft_election_timeout_ms: u64,
    /// Bytes of write commands applied between snapshots of the state
    /// machine; the Raft log is trimmed after each (64 entries kept).
    #[arg(long, help_heading = "Cluster", default_value_t = 32 << 20)]
    pub raft_snapshot_bytes: u64,
    /// Longest wait for a write to commit before the client is told to
    /// try again, in milliseconds.
    #[arg(long, help_heading = "Cluster", default_value_t = 10_000)]
    pub cluster_write_timeout_ms: u64,
    /// Serve CLUSTER TEST-PARTITION and TEST-HEAL, which cut this member
    /// off from others (for failure tests only).
    #[arg(long, help_heading = "Cluster", requires = "cluster")]
    pub cluster_test_hooks: bool,
}

/// `ID=RAFT_ADDR,REDIS_ADDR`.
fn parse_peer(s: &str) -> Result<(u64, Member), String> {
    let usage = || format!("{s:?}: expected ID=RAFT_HOST:RAFT_PORT,HOST:PORT");
    let (id, addrs) = s.split_once('=').ok_or_else(usage)?;
    let id = id.parse().map_err(|_| usage())?;
    let (raft, redis) = addrs.split_once(',').ok_or_else(usage)?;
    if !raft.contains(':') || !redis.contains(':') {
        return Err(usage());
    }
    Ok((
        id,
        Member {
            raft: raft.to_string(),
            redis: redis.to_string(),
        },
    ))
}

impl Args {
    /// The cluster settings, if `--cluster` is on.
    pub fn cluster_settings(&self) -> Result<Option<Settings>, String> {
        if !self.cluster {
            return Ok(None);
        }
        let id = self.node_id.ok_or("--cluster needs --node-id")?;
        let raft_port = self.raft_port.ok_or("--cluster needs --raft-port")?;
        if self.peers.iter().any(|(p, _)| *p == id) {
            return Err(format!("--peer names this member's own id, {id}"));
        }
        let election = Duration::from_millis(self.raft_election_timeout_ms);
        let heartbeat = Duration::from_millis(self.raft_heartbeat_ms);
        if heartbeat >= election {
            return Err("--raft-heartbeat-ms must be below --raft-election-timeout-ms".into());
        }
        Ok(Some(Settings {
            id,
            me: Member {
                raft: format!("{}:{raft_port}", self.bind),
                redis: format!("{}:{}", self.bind, self.port),
            },
            peers: self.peers.clone(),
            reads: self.cluster_reads,
            test_hooks: self.cluster_test_hooks,
            heartbeat,
            election_timeout_min: election,
            election_timeout_max: election * 2,
            snapshot_bytes: self.raft_snapshot_bytes.max(1),
            write_timeout: Duration::from_millis(self.cluster_write_timeout_ms),
        }))
    }

    pub fn engine_options(&self) -> Options {
        Options {
            write_buffer_size: self.write_buffer_size,
            block_cache_capacity: self.block_cache_size,
            memtable_bloom_size_ratio: self.memtable_bloom_size_ratio,
            min_value_size: self.min_value_size,
            enable_value_separation: !self.no_value_separation,
            space_budget_bytes: self.space_budget,
            gc_garbage_ratio: self.gc_garbage_ratio,
            max_background_jobs: self.max_background_jobs,
            compression: match self.compression.as_str() {
                "lz4" => Compression::Lz4,
                "zstd" => Compression::Zstd,
                _ => Compression::None,
            },
            use_direct_reads: self.use_direct_reads,
            use_direct_io_for_flush_and_compaction: self.use_direct_io_for_flush_and_compaction,
            ..Options::default()
        }
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_clients: self.maxclients,
            proto_max_bulk_len: self.proto_max_bulk_len,
            query_buffer_limit: self.client_query_buffer_limit,
        }
    }

    /// What CONFIG GET reports; `port` is the one bound.
    pub fn fixed(&self, port: u16) -> Fixed {
        Fixed {
            bind: self.bind.clone(),
            port,
            dir: self.dir.display().to_string(),
            engine: vec![
                (
                    "cleave-write-buffer-size",
                    self.write_buffer_size.to_string(),
                ),
                ("cleave-block-cache-size", self.block_cache_size.to_string()),
                (
                    "cleave-memtable-bloom-size-ratio",
                    self.memtable_bloom_size_ratio.to_string(),
                ),
                ("cleave-min-value-size", self.min_value_size.to_string()),
                (
                    "cleave-value-separation",
                    (!self.no_value_separation).to_string(),
                ),
                ("cleave-space-budget", self.space_budget.to_string()),
                ("cleave-gc-garbage-ratio", self.gc_garbage_ratio.to_string()),
                (
                    "cleave-max-background-jobs",
                    self.max_background_jobs.to_string(),
                ),
                ("cleave-compression", self.compression.clone()),
                ("cleave-use-direct-reads", self.use_direct_reads.to_string()),
                (
                    "cleave-use-direct-io-for-flush-and-compaction",
                    self.use_direct_io_for_flush_and_compaction.to_string(),
                ),
            ],
        }
    }
}
