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

/// A command's reply, encoded for its client's protocol; empty for a blank
/// or membership entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome(pub Vec<u8>);

/// A snapshot: a directory holding a checkpoint of the state machine's
/// database (`db/`) and its meta ([`super::snapshot::META_FILE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDir {
    pub path: PathBuf,
}

openraft::declare_raft_types!(
    /// The openraft types of cleave-server's cluster mode.
    pub ServerConfig:
        D = Command,
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

/// How a command is written in the log and on the wire: its arguments
/// framed (a little-endian u32 length before each) and base64-encoded, so
/// that a 1 KiB value costs 1.4 KiB of JSON, not the 4 KiB of an array of
/// numbers.
#[derive(Serialize, Deserialize)]
struct Wire {
    db: u8,
    proto: u8,
    args: String,
}

impl Serialize for Command {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let len: usize = self.args.iter().map(|a| 4 + a.len()).sum();
        let mut framed = Vec::with_capacity(len);
        for a in &self.args {
            // Arguments are bounded by proto-max-bulk-len, far below 4 GiB;
            // a longer one would not have been parsed.
            let n = u32::try_from(a.len()).map_err(serde::ser::Error::custom)?;
            framed.extend_from_slice(&n.to_le_bytes());
            framed.extend_from_slice(a);
        }
        Wire {
            db: self.db,
            proto: self.proto,
            args: base64::engine::general_purpose::STANDARD.encode(framed),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Command, D::Error> {
        let wire = Wire::deserialize(d)?;
        let framed = base64::engine::general_purpose::STANDARD
            .decode(wire.args)
            .map_err(serde::de::Error::custom)?;
        let args = unframe(&framed).map_err(serde::de::Error::custom)?;
        Ok(Command {
            db: wire.db,
            proto: wire.proto,
            args,
        })
    }
}

/// The arguments in `framed`; an error if a length runs past the end.
fn unframe(mut framed: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut args = Vec::new();
    while !framed.is_empty() {
        let (len, rest) = framed
            .split_first_chunk::<4>()
            .ok_or("a command argument's length is cut short")?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(format!(
                "a command argument of {len} bytes, {} left",
                rest.len()
            ));
        }
        let (arg, rest) = rest.split_at(len);
        args.push(arg.to_vec());
        framed = rest;
    }
    if args.is_empty() {
        return Err("a command without a name".into());
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_through_json() {
        let c = Command {
            db: 0,
            proto: 3,
            args: vec![b"SET".to_vec(), vec![0, 255, b'\n'], Vec::new()],
        };
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), c);
        let big = Command {
            db: 0,
            proto: 2,
            args: vec![b"SET".to_vec(), b"k".to_vec(), vec![b'x'; 1024]],
        };
        assert!(serde_json::to_string(&big).unwrap().len() < 1500);
    }

    #[test]
    fn damaged_commands_are_refused() {
        for bad in [
            r#"{"db":0,"proto":2,"args":"!!"}"#,
            // A length of 9 with 1 byte after it.
            r#"{"db":0,"proto":2,"args":"CQAAAHg="}"#,
            r#"{"db":0,"proto":2,"args":""}"#,
            r#"{"db":0,"proto":2,"args":"AQA="}"#,
        ] {
            assert!(serde_json::from_str::<Command>(bad).is_err(), "{bad}");
        }
    }
}
