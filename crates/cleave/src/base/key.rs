//! Internal keys: `user_key ++ fixed64((seq << 8) | kind)`, ordered by user
//! key ascending, then sequence number descending.

use std::cmp::Ordering;
use std::fmt;

use super::coding::decode_fixed64;

/// Orders writes. One per write, monotonic, never reused.
pub(crate) type SeqNo = u64;

/// Largest sequence number representable in an internal key's 56 bits.
pub(crate) const MAX_SEQ: SeqNo = (1 << 56) - 1;

/// Length of the trailer (sequence and kind) of an internal key.
pub(crate) const TAG_LEN: usize = 8;

/// The kind of an entry. These numbers are written to disk: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum ValueKind {
    Deletion = 0,
    Value = 1,
    /// A separated value: the entry's value is a value handle. Reserved for
    /// key-value separation.
    ValueRef = 2,
    /// A merge operand. Reserved for the merge operator.
    Merge = 3,
    /// A value with a time to live: the stored value is the expiry and the
    /// value (`base::expiry`).
    ExpiringValue = 4,
    /// A separated value with a time to live: the expiry and a value
    /// handle.
    ExpiringValueRef = 5,
}

/// Kind byte used in seek keys: larger than every real kind, so that a seek
/// for `(key, seq)` lands on the first entry with sequence ≤ seq.
pub(crate) const KIND_FOR_SEEK: u8 = 0xff;

impl ValueKind {
    pub(crate) fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::ValueRef),
            3 => Some(ValueKind::Merge),
            4 => Some(ValueKind::ExpiringValue),
            5 => Some(ValueKind::ExpiringValueRef),
            _ => None,
        }
    }

    /// Whether the stored value starts with an expiry.
    pub(crate) fn is_expiring(self) -> bool {
        matches!(self, ValueKind::ExpiringValue | ValueKind::ExpiringValueRef)
    }

    /// Whether the stored value is (after any expiry) a value handle.
    pub(crate) fn is_ref(self) -> bool {
        matches!(self, ValueKind::ValueRef | ValueKind::ExpiringValueRef)
    }

    /// The kind without its expiry: `Value` or `ValueRef` for the
    /// expiring kinds, the kind itself for the others.
    pub(crate) fn without_expiry(self) -> ValueKind {
        match self {
            ValueKind::ExpiringValue => ValueKind::Value,
            ValueKind::ExpiringValueRef => ValueKind::ValueRef,
            k => k,
        }
    }
}

/// Number naming one file in the database directory; shared by all file
/// kinds and never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct FileNumber(pub u64);

impl fmt::Display for FileNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:06}", self.0)
    }
}

pub(crate) fn pack_tag(seq: SeqNo, kind: u8) -> u64 {
    debug_assert!(seq <= MAX_SEQ);
    (seq << 8) | u64::from(kind)
}

/// An owned, encoded internal key.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct InternalKey(Vec<u8>);

impl InternalKey {
    pub(crate) fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Self {
        Self::with_tag(user_key, pack_tag(seq, kind as u8))
    }

    /// The key a seek for `user_key` as of `seq` should use.
    pub(crate) fn for_seek(user_key: &[u8], seq: SeqNo) -> Self {
        Self::with_tag(user_key, pack_tag(seq, KIND_FOR_SEEK))
    }

    fn with_tag(user_key: &[u8], tag: u64) -> Self {
        let mut v = Vec::with_capacity(user_key.len() + TAG_LEN);
        v.extend_from_slice(user_key);
        v.extend_from_slice(&tag.to_le_bytes());
        InternalKey(v)
    }

    /// Wraps bytes already known to be a well-formed internal key.
    pub(crate) fn from_encoded(v: Vec<u8>) -> Self {
        debug_assert!(v.len() >= TAG_LEN);
        InternalKey(v)
    }

    pub(crate) fn encoded(&self) -> &[u8] {
        &self.0
    }

    pub(crate) fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }

    pub(crate) fn seq(&self) -> SeqNo {
        seq(&self.0)
    }
}

impl fmt::Debug for InternalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}:{}",
            String::from_utf8_lossy(self.user_key()),
            self.seq(),
            tag(&self.0) as u8
        )
    }
}

/// The user key of an encoded internal key. Callers validate length when
/// the bytes come from disk (see `parse`).
pub(crate) fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len() - TAG_LEN]
}

pub(crate) fn tag(ikey: &[u8]) -> u64 {
    decode_fixed64(&ikey[ikey.len() - TAG_LEN..])
}

pub(crate) fn seq(ikey: &[u8]) -> SeqNo {
    tag(ikey) >> 8
}

/// Parsed view of an internal key read from untrusted bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

/// Parses an internal key, or returns `None` if it is malformed.
pub(crate) fn parse(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TAG_LEN {
        return None;
    }
    let t = tag(ikey);
    Some(ParsedKey {
        user_key: user_key(ikey),
        seq: t >> 8,
        kind: ValueKind::from_u8(t as u8)?,
    })
}

/// The total order of internal keys.
pub(crate) fn compare(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| tag(b).cmp(&tag(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_user_key_then_seq_descending() {
        let a1 = InternalKey::new(b"a", 1, ValueKind::Value);
        let a2 = InternalKey::new(b"a", 2, ValueKind::Value);
        let b1 = InternalKey::new(b"b", 1, ValueKind::Deletion);
        assert_eq!(compare(a2.encoded(), a1.encoded()), Ordering::Less);
        assert_eq!(compare(a1.encoded(), b1.encoded()), Ordering::Less);
        let seek = InternalKey::for_seek(b"a", 2);
        assert_eq!(compare(seek.encoded(), a2.encoded()), Ordering::Less);
        assert_eq!(compare(seek.encoded(), a1.encoded()), Ordering::Less);
    }

    #[test]
    fn parse_rejects_bad_input() {
        assert!(parse(b"short").is_none());
        let mut k = InternalKey::new(b"k", 7, ValueKind::Value)
            .encoded()
            .to_vec();
        let p = parse(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"k"[..], 7, ValueKind::Value)
        );
        let n = k.len();
        k[n - TAG_LEN] = 9;
        assert!(parse(&k).is_none());
    }
}
