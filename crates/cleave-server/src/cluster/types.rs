//! The openraft types of a cluster node: what a log entry carries (a write
//! command), what applying it answers (the reply), how a member is reached,
//! and what a snapshot is (a directory).

use std::fmt;
use std::path::PathBuf;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A node's id in the group (`--node-id`).
pub type NodeId = u64;

/// How a member is reached: its Raft transport and its Redis port (where
/// a redirect sends clients).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// `host:port` of the Raft transport.
    pub raft: String,
    /// `host:port` clients connect to.
    pub redis: String,
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft {} redis {}", self.raft, self.redis)
    }
}

/// A write command, as the client sent it, with what its reply depends on:
/// the database it selected and its protocol version. Every member applies
/// it to its own database in log order, so the command's effect must
/// depend on nothing else (collection versions come from the entry's
/// index, not the clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub db: u8,
    pub proto: u8,
    pub args: Vec<Vec<u8>>,
}

/// What one log entry carries: the write commands that reached the
/// leader while the entry before it was on its way, in arrival order.
/// openraft 0.9's leader waits for each entry's append to be durable
/// before it appends the next, so an entry per command would allow one
/// command per disk sync.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proposal {
    pub commands: Vec<Command>,
}

/// The replies to a proposal's commands, each encoded for its client's
/// protocol, in order; none for a blank or membership entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome(pub Vec<Vec<u8>>);

/// A snapshot: a directory holding a checkpoint of the state machine's
/// database (`db/`) and its meta ([`super::snapshot::META_FILE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDir {
    pub path: PathBuf,
}

openraft::declare_raft_types!(
    /// The openraft types of cleave-server's cluster mode.
    pub ServerConfig:
        D = Proposal,
        R = Outcome,
        NodeId = NodeId,
        Node = Member,
        Entry = openraft::Entry<ServerConfig>,
        SnapshotData = SnapshotDir,
        AsyncRuntime = openraft::TokioRuntime,
);

pub type Raft = openraft::Raft<ServerConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Member>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Member>;
pub type StorageError = openraft::StorageError<NodeId>;

/// How a proposal is written in the log and on the wire: its commands
/// framed (per command its database, its protocol, the number of
/// arguments as a little-endian u32, then each argument after its length
/// as a little-endian u32) and base64-encoded, so that a 1 KiB value costs
/// 1.4 KiB of JSON, not the 4 KiB of an array of numbers.
#[derive(Serialize, Deserialize)]
struct Wire {
    commands: String,
}

/// Bytes of the framing before each command's arguments.
const COMMAND_HEADER_BYTES: usize = 1 + 1 + 4;

fn frame_len(len: usize) -> Result<[u8; 4], String> {
    u32::try_from(len)
        .map(u32::to_le_bytes)
        .map_err(|_| format!("a command field of {len} bytes"))
}

impl Serialize for Proposal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let len: usize = self
            .commands
            .iter()
            .map(|c| COMMAND_HEADER_BYTES + c.args.iter().map(|a| 4 + a.len()).sum::<usize>())
            .sum();
        let mut framed = Vec::with_capacity(len);
        for c in &self.commands {
            framed.push(c.db);
            framed.push(c.proto);
            framed.extend_from_slice(&frame_len(c.args.len()).map_err(serde::ser::Error::custom)?);
            for a in &c.args {
                framed.extend_from_slice(&frame_len(a.len()).map_err(serde::ser::Error::custom)?);
                framed.extend_from_slice(a);
            }
        }
        Wire {
            commands: base64::engine::general_purpose::STANDARD.encode(framed),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Proposal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Proposal, D::Error> {
        let wire = Wire::deserialize(d)?;
        let framed = base64::engine::general_purpose::STANDARD
            .decode(wire.commands)
            .map_err(serde::de::Error::custom)?;
        unframe(&framed).map_err(serde::de::Error::custom)
    }
}

/// Takes `n` bytes from the front of `rest`.
fn take<'a>(rest: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], String> {
    let Some((head, tail)) = rest.split_at_checked(n) else {
        return Err(format!("{what} of {n} bytes, {} left", rest.len()));
    };
    *rest = tail;
    Ok(head)
}

fn take_u32(rest: &mut &[u8], what: &str) -> Result<usize, String> {
    let b = take(rest, 4, what)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// The proposal in `framed`; an error if a length runs past the end or a
/// command has no name.
fn unframe(mut rest: &[u8]) -> Result<Proposal, String> {
    let mut commands = Vec::new();
    while !rest.is_empty() {
        let head = take(&mut rest, 2, "a command's header")?;
        let (db, proto) = (head[0], head[1]);
        let argc = take_u32(&mut rest, "an argument count")?;
        if argc == 0 {
            return Err("a command without a name".into());
        }
        // Each argument takes at least its 4-byte length: a count beyond
        // that is damage, not a reason to allocate.
        if argc > rest.len() / 4 {
            return Err(format!("{argc} arguments in {} bytes", rest.len()));
        }
        let mut args = Vec::with_capacity(argc);
        for _ in 0..argc {
            let len = take_u32(&mut rest, "an argument's length")?;
            args.push(take(&mut rest, len, "an argument")?.to_vec());
        }
        commands.push(Command { db, proto, args });
    }
    Ok(Proposal { commands })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(commands: &[(u8, &[&[u8]])]) -> Proposal {
        Proposal {
            commands: commands
                .iter()
                .map(|(proto, args)| Command {
                    db: 0,
                    proto: *proto,
                    args: args.iter().map(|a| a.to_vec()).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn proposals_round_trip_through_json() {
        let p = proposal(&[(3, &[b"SET", &[0, 255, b'\n'], b""]), (2, &[b"DEL", b"k"])]);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Proposal>(&json).unwrap(), p);
        let empty = Proposal::default();
        let json = serde_json::to_string(&empty).unwrap();
        assert_eq!(serde_json::from_str::<Proposal>(&json).unwrap(), empty);
        let big = proposal(&[(2, &[b"SET", b"k", &[b'x'; 1024]])]);
        assert!(serde_json::to_string(&big).unwrap().len() < 1500);
    }

    #[test]
    fn damaged_proposals_are_refused() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        for bad in [
            "!!".to_string(),
            // No arguments.
            b64(&[0, 2, 0, 0, 0, 0]),
            // Two arguments announced, none there.
            b64(&[0, 2, 2, 0, 0, 0]),
            // A length of 9 with 1 byte after it.
            b64(&[0, 2, 1, 0, 0, 0, 9, 0, 0, 0, b'x']),
            // A header cut short.
            b64(&[0]),
            // A count of 2^32-1 arguments.
            b64(&[0, 2, 255, 255, 255, 255]),
        ] {
            let json = format!("{{\"commands\":\"{bad}\"}}");
            assert!(serde_json::from_str::<Proposal>(&json).is_err(), "{bad}");
        }
    }

    /// Random bytes as a proposal's framing never panic, and what decodes
    /// encodes back to the same bytes.
    #[test]
    fn random_framings_never_panic() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 40) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| (next() % 7) as u8).collect();
            if let Ok(p) = unframe(&bytes) {
                let json = serde_json::to_string(&p).unwrap();
                assert_eq!(serde_json::from_str::<Proposal>(&json).unwrap(), p);
            }
        }
    }
}
