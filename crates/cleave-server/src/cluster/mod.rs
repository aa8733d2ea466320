//! Cluster mode: members replicate the server's database with openraft
//! (docs/cluster.md). Every write command goes through the Raft log, kept
//! in cleave's log store (crate `cleave-raft`), and each member applies it
//! to its own database; reads are served by the leader after a read-index
//! check, or from a member's own state where the client asks for that.

mod admin;
pub mod layout;
mod network;
mod proposer;
mod reads;
mod router;
pub mod snapshot;
mod state_machine;
pub mod types;

use std::sync::Arc;
use std::time::Duration;

use cleave::log_store::LogOptions;
use openraft::{ServerState, SnapshotPolicy};
use tokio::net::TcpListener;

pub use admin::{execute as admin, fields as info_fields, host_port, role};
pub use network::Hooks;
pub use router::execute;
pub use state_machine::Applied;
use types::{Member, NodeId, Raft};

use crate::state::Shared;

/// Size of the Raft log's data files, preallocated: the log between two
/// snapshots (32 MiB of commands by default, 45 MiB as entries) fills
/// three, and a trimmed file is released soon after.
const LOG_FILE_BYTES: u64 = 16 << 20;

/// Entries a snapshot covers that the log keeps, for followers a little
/// behind (one further behind gets the snapshot).
const KEPT_ENTRIES: u64 = 64;

/// Longest election timeouts without a majority's acknowledgement after
/// which a leader refuses writes.
const QUORUM_SILENCE_ELECTIONS: u32 = 5;

/// How reads are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadMode {
    /// On the leader, after it confirms with a majority that it still is
    /// (openraft's read index) and has applied what was committed then:
    /// every read sees every write acknowledged before it began.
    Linearizable,
    /// From the member's own state, which a follower may have applied
    /// less of than the leader: fast, and possibly stale.
    Local,
}

/// What cluster mode is started with (the `--cluster` flags).
#[derive(Debug, Clone)]
pub struct Settings {
    pub id: NodeId,
    pub me: Member,
    /// The other members `CLUSTER INIT` forms the group with.
    pub peers: Vec<(NodeId, Member)>,
    pub reads: ReadMode,
    /// `CLUSTER TEST-PARTITION` and `TEST-HEAL` are served.
    pub test_hooks: bool,
    pub heartbeat: Duration,
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// Bytes of commands applied between snapshots.
    pub snapshot_bytes: u64,
    /// Longest wait for a write to commit before the client is told to try
    /// again.
    pub write_timeout: Duration,
}

/// A running member.
pub struct Cluster {
    pub settings: Settings,
    pub raft: Raft,
    pub hooks: Arc<Hooks>,
    proposer: proposer::Proposer,
    read_index: reads::ReadIndex,
}

impl Cluster {
    pub fn id(&self) -> NodeId {
        self.settings.id
    }

    /// How to reach `id`, as the current membership has it.
    pub fn member(&self, id: NodeId) -> Option<Member> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.membership_config.membership().get_node(&id).cloned()
    }

    /// The leader as this member knows it, and how to reach it.
    pub fn leader(&self) -> Option<(NodeId, Member)> {
        let id = self.raft.metrics().borrow().current_leader?;
        Some((id, self.member(id)?))
    }

    /// Whether this member is the leader and heard from a majority lately
    /// (within [`QUORUM_SILENCE_ELECTIONS`] longest election timeouts): a
    /// leader cut off from the others learns of its successor only when
    /// the cut heals, and refuses writes meanwhile rather than hold them
    /// until they time out. The margin is wide because a loaded group's
    /// acknowledgements can lag by more than an election timeout without
    /// anyone being cut off.
    pub fn leads_a_majority(&self) -> Option<bool> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        if m.state != ServerState::Leader {
            return None;
        }
        let silence = self.settings.election_timeout_max * QUORUM_SILENCE_ELECTIONS;
        Some(
            m.millis_since_quorum_ack
                .is_some_and(|ms| u128::from(ms) <= silence.as_millis()),
        )
    }
}

/// Opens the Raft log in the layout's `log/`, starts the member and its
/// transport. `shared` holds the store whose database is `live`.
pub async fn start(
    shared: &Arc<Shared>,
    settings: Settings,
    layout: layout::Layout,
    live: std::path::PathBuf,
) -> Result<Arc<Cluster>, String> {
    let log_options = LogOptions {
        create_if_missing: true,
        data_file_bytes: LOG_FILE_BYTES,
        ..LogOptions::default()
    };
    let log: cleave_raft::LogStorage<types::ServerConfig> =
        cleave_raft::LogStorage::open(&layout.log, log_options)
            .map_err(|e| format!("opening the Raft log in {}: {e}", layout.log.display()))?;
    let incoming = layout.incoming.clone();
    let state_machine =
        state_machine::StateMachine::new(shared, layout, live, settings.snapshot_bytes)?;
    let config = openraft::Config {
        cluster_name: "cleave".into(),
        heartbeat_interval: settings.heartbeat.as_millis() as u64,
        election_timeout_min: settings.election_timeout_min.as_millis() as u64,
        election_timeout_max: settings.election_timeout_max.as_millis() as u64,
        // Snapshots are taken by bytes applied (the state machine asks for
        // them): an entry holds from one command to thousands.
        snapshot_policy: SnapshotPolicy::Never,
        // An entry holds about 1 MiB of commands at most (one larger
        // command alone): a replication message of this many is encoded,
        // sent and appended in tens of milliseconds, well within an
        // election timeout.
        max_payload_entries: 16,
        // Entries a snapshot covers, kept for followers a little behind.
        max_in_snapshot_log_to_keep: KEPT_ENTRIES,
        // A heartbeat waits for its reply at most this long, an append
        // for a batch of entries twice that.
        ..openraft::Config::default()
    }
    .validate()
    .map_err(|e| format!("Raft settings: {e}"))?;
    let hooks = Arc::new(Hooks::default());
    let network = network::Network {
        me: settings.id,
        hooks: hooks.clone(),
    };
    let listener = TcpListener::bind(&settings.me.raft)
        .await
        .map_err(|e| format!("listening for Raft on {}: {e}", settings.me.raft))?;
    let raft = Raft::new(settings.id, Arc::new(config), network, log, state_machine)
        .await
        .map_err(|e| format!("starting Raft: {e}"))?;
    tokio::spawn(network::serve(
        listener,
        raft.clone(),
        hooks.clone(),
        incoming,
    ));
    let proposer = proposer::Proposer::start(raft.clone());
    let read_index = reads::ReadIndex::start(raft.clone());
    Ok(Arc::new(Cluster {
        settings,
        raft,
        hooks,
        proposer,
        read_index,
    }))
}
