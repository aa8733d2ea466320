//! Compaction: the pure picker that chooses what to compact, and the pure
//! drop rules the compaction job applies to the merged input.

pub(crate) mod picker;
pub(crate) mod stream;
