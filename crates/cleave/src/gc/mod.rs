//! Value-file garbage collection, independent of compaction: the picker
//! chooses physical files by exact garbage ratio, and a job copies their
//! live records into new files without touching the LSM.

pub(crate) mod drop_cache;
pub(crate) mod job;
pub(crate) mod picker;
pub(crate) mod pressure;
pub(crate) mod rate_limiter;
mod stats;

pub use stats::GcStats;
