//! Prefix filters: a prefix of each key goes into the table's bloom filter
//! beside the key, so that an iterator confined to one prefix leaves out
//! the tables that hold none of it (RocksDB's `prefix_extractor` with
//! `auto_prefix_mode`). A short range scan (a hash's fields, a user's
//! rows) then reads the few tables that hold the prefix instead of one
//! block of every sorted run.

use std::fmt;

/// Longest prefix extractor name, in bytes: it is written to every table.
pub(crate) const MAX_NAME_LEN: usize = 128;

/// Says which leading bytes of a key are its prefix.
///
/// Contract: a prefix is decided by its own bytes. If `prefix_len(k)` is
/// `Some(n)`, then every key that starts with `k[..n]` has the prefix
/// `k[..n]` too. (A fixed length, or a length-prefixed field, has this; a
/// prefix "up to the last '/'" does not.) Tables record the
/// [`name`](PrefixExtractor::name) they were written with and their
/// prefixes serve only an extractor of the same name, so two extractors of
/// one name must agree on every key.
pub trait PrefixExtractor: Send + Sync + fmt::Debug {
    /// Identifies the extractor and its parameters (1 to 128 bytes).
    fn name(&self) -> &str;

    /// The length of `key`'s prefix (at most `key.len()`), or `None` if
    /// the key has none: such keys go into the filter whole only.
    fn prefix_len(&self, key: &[u8]) -> Option<usize>;
}

/// The first `len` bytes of every key at least that long (RocksDB's
/// `NewFixedPrefixTransform`).
#[derive(Debug, Clone)]
pub struct FixedPrefix {
    len: usize,
    name: String,
}

impl FixedPrefix {
    pub fn new(len: usize) -> Self {
        FixedPrefix {
            len,
            name: format!("cleave.fixed_prefix.{len}"),
        }
    }
}

impl PrefixExtractor for FixedPrefix {
    fn name(&self) -> &str {
        &self.name
    }

    fn prefix_len(&self, key: &[u8]) -> Option<usize> {
        (key.len() >= self.len).then_some(self.len)
    }
}

/// The prefix of `key`, if it has one; a length past the key's end (a
/// broken extractor) counts as none.
pub(crate) fn prefix_of<'k>(extractor: &dyn PrefixExtractor, key: &'k [u8]) -> Option<&'k [u8]> {
    extractor.prefix_len(key).and_then(|n| key.get(..n))
}

/// The one prefix every key in `[lower, upper)` has, if the bounds show
/// there is one: `lower` has prefix P, and `upper` starts with P or is the
/// first key after every key starting with P.
pub(crate) fn bounded_prefix<'k>(
    extractor: &dyn PrefixExtractor,
    lower: &'k [u8],
    upper: &[u8],
) -> Option<&'k [u8]> {
    let p = prefix_of(extractor, lower)?;
    (upper.starts_with(p) || is_prefix_end(p, upper)).then_some(p)
}

/// Whether `end` is the smallest key greater than every key starting with
/// `prefix`: the prefix with its trailing 0xff bytes dropped and its last
/// byte incremented.
fn is_prefix_end(prefix: &[u8], end: &[u8]) -> bool {
    let trimmed = match prefix.iter().rposition(|&b| b != 0xff) {
        Some(i) => &prefix[..=i],
        None => return false,
    };
    let Some((&last, head)) = trimmed.split_last() else {
        return false;
    };
    end.len() == trimmed.len() && end.starts_with(head) && end.last() == Some(&(last + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_prefix_and_its_domain() {
        let f = FixedPrefix::new(3);
        assert_eq!(prefix_of(&f, b"abcdef"), Some(&b"abc"[..]));
        assert_eq!(prefix_of(&f, b"abc"), Some(&b"abc"[..]));
        assert_eq!(prefix_of(&f, b"ab"), None);
    }

    #[test]
    fn bounds_confine_a_prefix_only_when_upper_stays_within_it() {
        let f = FixedPrefix::new(3);
        // Upper inside the prefix, or its end.
        assert_eq!(bounded_prefix(&f, b"abc1", b"abc9"), Some(&b"abc"[..]));
        assert_eq!(bounded_prefix(&f, b"abc", b"abd"), Some(&b"abc"[..]));
        assert_eq!(bounded_prefix(&f, b"ab\xff", b"ac"), Some(&b"ab\xff"[..]));
        // Upper past the prefix's keys, or lower outside the domain.
        assert_eq!(bounded_prefix(&f, b"abc", b"abe"), None);
        assert_eq!(bounded_prefix(&f, b"abc", b"abd\x00"), None);
        assert_eq!(bounded_prefix(&f, b"abc", b"b"), None);
        assert_eq!(bounded_prefix(&f, b"ab", b"ab\x01"), None);
        assert_eq!(
            bounded_prefix(&f, b"\xff\xff\xff", b"\xff\xff\xff\x01"),
            Some(&b"\xff\xff\xff"[..])
        );
    }

    #[derive(Debug)]
    struct TooLong;

    impl PrefixExtractor for TooLong {
        fn name(&self) -> &str {
            "too-long"
        }
        fn prefix_len(&self, key: &[u8]) -> Option<usize> {
            Some(key.len() + 1)
        }
    }

    #[test]
    fn a_length_past_the_key_is_no_prefix() {
        assert_eq!(prefix_of(&TooLong, b"abc"), None);
    }
}
