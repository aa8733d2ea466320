//! cleave: an embedded LSM-tree key-value store that keeps large values out
//! of the tree.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod base;
mod batch;
mod cache;
mod compaction;
mod compaction_filter;
mod db;
mod delta;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gc;
pub mod inspect;
mod iter;
pub mod log_store;
mod manifest;
mod memtable;
mod merge;
mod options;
mod prefix;
mod record;
mod sstable;
mod value_file;
mod value_log;
pub mod vfs;
mod wal;

pub use base::expiry::{Clock, ManualClock, SystemClock};
pub use batch::{BatchOp, WriteBatch};
pub use compaction_filter::{
    CompactionFilter, Decision as CompactionDecision, FilterContext, FilterFn, FilterValue,
};
pub use db::{
    CacheKindStats, CheckpointInfo, Db, LevelSpace, LevelStats, Snapshot, SpaceReport, Stats,
    VerifyReport, WriteState, GET_READS_BUCKETS,
};
pub use error::{Error, NoSpaceCause, Result};
pub use gc::GcStats;
pub use iter::DbIterator;
pub use merge::{
    builtin as builtin_merge_operator, Append, FieldUpdate, Max, MergeOperator, Put, U64Add,
};
pub use options::{Compression, Options, ReadOptions, WriteOptions};
pub use prefix::{FixedPrefix, PrefixExtractor};

/// The README's example, compiled and run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeExample;

/// The user's guide's Rust example, likewise.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide.md")]
struct GuideExample;
