//! Compaction: the pure picker that chooses what to compact, the pure
//! choice of value files a compaction re-separates (correlated
//! compaction), the pure drop rules the compaction job applies to the
//! merged input, and the merging of merge operands in that input.

pub(crate) mod correlated;
pub(crate) mod merge_runs;
pub(crate) mod picker;
pub(crate) mod stream;
