//! The one error type of the public API.

use std::path::PathBuf;

/// Everything that can go wrong in cleave. Each variant names the file or the
/// argument at fault, so that an operator can act on the message alone.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed on `path`.
    #[error("I/O error during {op} on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Bytes read from `file` are not what was written there.
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    /// A caller passed a key, value or option that cleave refuses.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// `file` was written by a format version this build does not read.
    #[error("{} has format version {found}; this build reads versions up to {supported}", file.display())]
    UnsupportedFormatVersion {
        file: PathBuf,
        found: u32,
        supported: u32,
    },
    /// Another `Db` (in this or another process) holds the directory's lock.
    #[error("database at {} is already open (lock held on {})", dir.display(), lock.display())]
    Locked { dir: PathBuf, lock: PathBuf },
    /// A write or fsync failed earlier; the database refuses writes until it
    /// is reopened, because the state on disk is no longer known.
    #[error("database is poisoned by an earlier failure: {0}")]
    Poisoned(String),
    /// No room to write: the file system holding `path` is full (ENOSPC)
    /// or its quota is used up (EDQUOT) where `op` wrote, or (`op` is
    /// "write", `path` the database's directory) the write would take the
    /// database to its space budget's stop level and
    /// `space_budget_fail_writes` asked for an error rather than a wait.
    /// Nothing is damaged and nothing of the failed write was
    /// acknowledged: the database serves reads, refuses writes with this
    /// error, and takes writes again once there is room (`Db::resume`,
    /// docs/reliability.md).
    #[error("{}", no_space_message(path, op, cause))]
    NoSpace {
        path: PathBuf,
        op: &'static str,
        cause: NoSpaceCause,
    },
    /// The database was opened with `Db::open_read_only`: it takes no
    /// writes, flushes, compactions or GC.
    #[error("database at {} is open read-only (Db::open_read_only): {op} refused", dir.display())]
    ReadOnly { dir: PathBuf, op: &'static str },
    /// Merging the operands of `key` into a value failed: the merge
    /// operator refused them (`reason`), or the database has none.
    #[error("merging key \"{key}\" with merge operator {operator}: {reason}")]
    MergeFailed {
        key: String,
        operator: String,
        reason: String,
    },
    /// The database has been closed.
    #[error("database is closed")]
    Closed,
}

/// Why there was no room for a write ([`Error::NoSpace`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum NoSpaceCause {
    /// The file system refused the write (ENOSPC or EDQUOT).
    Device(std::io::Error),
    /// The space budget's stop level: the database used `usage_bytes` of
    /// `budget_bytes` (`Options::space_budget_bytes`).
    Budget { usage_bytes: u64, budget_bytes: u64 },
}

fn no_space_message(path: &std::path::Path, op: &str, cause: &NoSpaceCause) -> String {
    match cause {
        NoSpaceCause::Device(e) => format!("no space left for {op} on {}: {e}", path.display()),
        NoSpaceCause::Budget {
            usage_bytes,
            budget_bytes,
        } => format!(
            "database in {} uses {usage_bytes} bytes: with this write it would reach the stop \
             level of its space budget of {budget_bytes}",
            path.display()
        ),
    }
}

/// Result with cleave's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The failure of `op` on `path`. A write or a create that found the
    /// file system full is [`Error::NoSpace`]; a sync that did is not: the
    /// bytes it was to make durable may be lost, as after any failed sync,
    /// so it is an I/O error, and the database stops.
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Self {
        let full = matches!(
            source.kind(),
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
        );
        if full && !op.contains("sync") {
            return Error::NoSpace {
                path: path.into(),
                op,
                cause: NoSpaceCause::Device(source),
            };
        }
        Error::Io {
            path: path.into(),
            op,
            source,
        }
    }

    /// The space budget's refusal of a write to the database in `dir`.
    pub(crate) fn over_budget(dir: &std::path::Path, usage_bytes: u64, budget_bytes: u64) -> Self {
        Error::NoSpace {
            path: dir.to_path_buf(),
            op: "write",
            cause: NoSpaceCause::Budget {
                usage_bytes,
                budget_bytes,
            },
        }
    }

    /// True when there was no room for a write ([`Error::NoSpace`]): the
    /// database is whole, and takes writes again once there is room.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
    }

    /// True for a full file system (ENOSPC, EDQUOT), as opposed to the
    /// space budget's refusal.
    pub(crate) fn is_device_full(&self) -> bool {
        matches!(
            self,
            Error::NoSpace {
                cause: NoSpaceCause::Device(_),
                ..
            }
        )
    }

    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for errors caused by damaged data on disk.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corruption { .. } | Error::UnsupportedFormatVersion { .. }
        )
    }

    /// A copy suitable for handing the same failure to several waiters
    /// (group commit) or storing as the poison cause.
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { path, op, source } => Error::Io {
                path: path.clone(),
                op,
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::UnsupportedFormatVersion {
                file,
                found,
                supported,
            } => Error::UnsupportedFormatVersion {
                file: file.clone(),
                found: *found,
                supported: *supported,
            },
            Error::Locked { dir, lock } => Error::Locked {
                dir: dir.clone(),
                lock: lock.clone(),
            },
            Error::Poisoned(s) => Error::Poisoned(s.clone()),
            Error::NoSpace { path, op, cause } => Error::NoSpace {
                path: path.clone(),
                op,
                cause: match cause {
                    NoSpaceCause::Device(e) => {
                        NoSpaceCause::Device(std::io::Error::new(e.kind(), e.to_string()))
                    }
                    NoSpaceCause::Budget {
                        usage_bytes,
                        budget_bytes,
                    } => NoSpaceCause::Budget {
                        usage_bytes: *usage_bytes,
                        budget_bytes: *budget_bytes,
                    },
                },
            },
            Error::ReadOnly { dir, op } => Error::ReadOnly {
                dir: dir.clone(),
                op,
            },
            Error::MergeFailed {
                key,
                operator,
                reason,
            } => Error::MergeFailed {
                key: key.clone(),
                operator: operator.clone(),
                reason: reason.clone(),
            },
            Error::Closed => Error::Closed,
        }
    }
}
