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
            // kvrocks answers engine failures with ERR and the engine's text.
            CmdError::Engine(e) => format!("ERR {e}"),
        })
    }
}

impl From<cleave::Error> for CmdError {
    fn from(e: cleave::Error) -> CmdError {
        CmdError::Engine(e)
    }
}
