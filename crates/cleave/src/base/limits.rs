//! Hard limits on what callers may store. Named here so that every layer
//! enforces the same numbers.

/// Largest user key accepted by a write (64 KiB).
pub(crate) const MAX_KEY_SIZE: usize = 64 << 10;

/// Largest value accepted by a write (1 GiB).
pub(crate) const MAX_VALUE_SIZE: usize = 1 << 30;

/// Number of LSM levels, L0 included.
pub(crate) const NUM_LEVELS: usize = 7;

const _: () = assert!(
    NUM_LEVELS >= 3,
    "leveled compaction needs L0, a base level and one below"
);
