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
    /// The database has reached its space budget's stop level, or the
    /// value-log records of the write would take it there, and
    /// `space_budget_fail_writes` asked for an error rather than a wait;
    /// nothing of the write was applied.
    #[error("database in {} uses {usage_bytes} bytes: with this write it would reach the stop level of its space budget of {budget_bytes}", dir.display())]
    SpaceBudgetExceeded {
        dir: PathBuf,
        usage_bytes: u64,
        budget_bytes: u64,
    },
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

/// Result with cleave's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            op,
            source,
        }
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
            Error::SpaceBudgetExceeded {
                dir,
                usage_bytes,
                budget_bytes,
            } => Error::SpaceBudgetExceeded {
                dir: dir.clone(),
                usage_bytes: *usage_bytes,
                budget_bytes: *budget_bytes,
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
