//! Why a command failed, as the error reply Redis sends for it.

use crate::resp::Reply;

#[derive(Debug)]
pub enum CmdError {
    WrongType,
    NotInteger,
    NotFloat,
    Syntax,
    Overflow,
    /// An error reply's whole text, prefix included (`ERR ...`).
    Reply(String),
    /// The engine failed: a full disk, a damaged file, a poisoned database.
    Engine(cleave::Error),
    /// A batch holding key locks found one it needs taken
    /// (store/batch.rs): the command stopped before it read or wrote
    /// anything, and runs again once the batch is written. Never a reply.
    Contended,
}

impl CmdError {
    pub fn err(msg: impl std::fmt::Display) -> CmdError {
        CmdError::Reply(format!("ERR {msg}"))
    }

    /// Stored bytes the key space cannot decode.
    pub fn corrupt(key: &[u8], why: &str) -> CmdError {
        CmdError::Reply(format!(
            "ERR corrupt metadata of key '{}': {why}",
            key.escape_ascii()
        ))
    }

    pub fn reply(&self) -> Reply {
        Reply::Error(match self {
            CmdError::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".into()
            }
            CmdError::NotInteger => "ERR value is not an integer or out of range".into(),
            CmdError::NotFloat => "ERR value is not a valid float".into(),
            CmdError::Syntax => "ERR syntax error".into(),
            CmdError::Overflow => "ERR increment or decrement would overflow".into(),
            CmdError::Reply(s) => s.clone(),
            // Redis refuses writes it cannot persist (a full disk under
            // its AOF) with MISCONF, and goes on serving reads; so does
            // the engine, read-only until there is room.
            CmdError::Engine(e @ cleave::Error::NoSpace { .. }) if device_full(e) => {
                format!("MISCONF Errors writing to the database: {e}")
            }
            // kvrocks answers engine failures with ERR and the engine's text.
            CmdError::Engine(e) => format!("ERR {e}"),
            CmdError::Contended => {
                debug_assert!(false, "a contended command is run again, not answered");
                "ERR internal error: lock contention".into()
            }
        })
    }
}

/// A full file system, as opposed to the space budget's refusal.
fn device_full(e: &cleave::Error) -> bool {
    matches!(
        e,
        cleave::Error::NoSpace {
            cause: cleave::NoSpaceCause::Device(_),
            ..
        }
    )
}

impl From<cleave::Error> for CmdError {
    fn from(e: cleave::Error) -> CmdError {
        CmdError::Engine(e)
    }
}
