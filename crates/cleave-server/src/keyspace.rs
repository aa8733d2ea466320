//! How Redis keys of every type map onto cleave's keys
//! (docs/format/server.md), after kvrocks: one metadata key per Redis key
//! holding its type, expiry and, for a string, its value; for a hash or a
//! sorted set, a version, and one subkey per field or member under that
//! version. Deleting a hash drops its metadata key only: a new hash of the
//! same name gets a new version, so the old subkeys are never read again.
//!
//! Each kind of key has a leading tag byte, so that metadata keys form one
//! range (SCAN and DBSIZE walk it alone) and a key's subkeys another, as
//! kvrocks keeps them in separate column families. The second byte is the
//! database number.

/// Tag of metadata keys: `M db key`.
pub const META: u8 = b'M';
/// Tag of subkeys (hash fields, sorted-set members to their scores):
/// `S db len(key) key version field`.
pub const SUB: u8 = b'S';
/// Tag of the sorted sets' score index: `Z db len(key) key version
/// score member`, empty value.
pub const SCORE: u8 = b'Z';
/// Tag of the server's own keys (the format version, the version floor).
pub const INTERNAL: u8 = b'@';

/// The key-space format this build writes (`@format`); an open refuses a
/// data directory written by a later one. 2 added lists and sets.
pub const FORMAT_VERSION: u64 = 2;

/// Bytes of a metadata value before the type's own payload: type, expiry.
const META_HEADER_LEN: usize = 1 + 8;
/// A hash's, set's or sorted set's payload: version, number of fields.
const COLLECTION_LEN: usize = 8 + 8;
/// A list's payload: version, number of elements, index of the head.
const LIST_LEN: usize = 8 + 8 + 8;

/// The index a new list's first element gets: the middle of the range, so
/// that pushes at either end have 2^63 indexes to go (kvrocks does the
/// same).
pub const LIST_FIRST_INDEX: u64 = 1 << 63;

/// Most bytes of a Redis key or field: cleave's keys hold at most 64 KiB,
/// and a subkey holds the key and a field (or a score and a member) with
/// 22 bytes of framing. Redis's own limit is 512 MiB.
pub const MAX_KEY_AND_FIELD_BYTES: usize = (64 << 10) - 32;

/// A Redis type, with kvrocks's numbering, as the metadata's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    String = 1,
    Hash = 2,
    List = 3,
    Set = 4,
    ZSet = 5,
}

impl Type {
    fn from_u8(b: u8) -> Option<Type> {
        match b {
            1 => Some(Type::String),
            2 => Some(Type::Hash),
            3 => Some(Type::List),
            4 => Some(Type::Set),
            5 => Some(Type::ZSet),
            _ => None,
        }
    }

    /// The name `TYPE` answers.
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Hash => "hash",
            Type::List => "list",
            Type::Set => "set",
            Type::ZSet => "zset",
        }
    }
}

/// A decoded metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Meta {
    String(Vec<u8>),
    /// A hash, set or sorted set: the version its subkeys carry, and how
    /// many fields or members it holds (never 0: an emptied one is
    /// deleted).
    Collection {
        kind: Type,
        version: u64,
        size: u64,
    },
    /// A list: its elements are the subkeys of indexes `head` to
    /// `head + size - 1` under `version` (never empty).
    List {
        version: u64,
        head: u64,
        size: u64,
    },
}

impl Meta {
    pub fn kind(&self) -> Type {
        match self {
            Meta::String(_) => Type::String,
            Meta::Collection { kind, .. } => *kind,
            Meta::List { .. } => Type::List,
        }
    }

    /// The version a collection's subkeys carry; `None` for a string.
    pub fn version(&self) -> Option<u64> {
        match self {
            Meta::String(_) => None,
            Meta::Collection { version, .. } | Meta::List { version, .. } => Some(*version),
        }
    }

    /// The metadata value, with `expire` (milliseconds since the epoch, 0
    /// for none) in its header.
    pub fn encode(&self, expire: u64) -> Vec<u8> {
        match self {
            Meta::String(v) => string_meta(v, expire),
            Meta::Collection {
                kind,
                version,
                size,
            } => {
                let mut out = Vec::with_capacity(META_HEADER_LEN + COLLECTION_LEN);
                out.push(*kind as u8);
                out.extend_from_slice(&expire.to_be_bytes());
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&size.to_be_bytes());
                out
            }
            Meta::List {
                version,
                head,
                size,
            } => {
                let mut out = Vec::with_capacity(META_HEADER_LEN + LIST_LEN);
                out.push(Type::List as u8);
                out.extend_from_slice(&expire.to_be_bytes());
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(&size.to_be_bytes());
                out.extend_from_slice(&head.to_be_bytes());
                out
            }
        }
    }

    /// Decodes a metadata value, or says what is wrong with it. Takes the
    /// value whole: a string's bytes stay in its buffer.
    pub fn decode(value: Vec<u8>) -> Result<Meta, String> {
        Meta::decode_with_expire(value).map(|(m, _)| m)
    }

    /// Decodes a metadata value with its expiry (milliseconds since the
    /// epoch, 0 for none).
    pub fn decode_with_expire(mut value: Vec<u8>) -> Result<(Meta, u64), String> {
        if value.len() < META_HEADER_LEN {
            return Err(format!("metadata of {} bytes", value.len()));
        }
        let kind =
            Type::from_u8(value[0]).ok_or_else(|| format!("unknown type byte {}", value[0]))?;
        let expire = u64::from_be_bytes(value[1..META_HEADER_LEN].try_into().unwrap_or_default());
        let payload = &value[META_HEADER_LEN..];
        match kind {
            Type::String => {
                value.drain(..META_HEADER_LEN);
                Ok((Meta::String(value), expire))
            }
            Type::List => {
                if payload.len() != LIST_LEN {
                    return Err(format!("list metadata of {} bytes", value.len()));
                }
                let word =
                    |i: usize| u64::from_be_bytes(payload[i..i + 8].try_into().unwrap_or_default());
                let (version, size, head) = (word(0), word(8), word(16));
                if size == 0 {
                    return Err("empty list".into());
                }
                if head.checked_add(size).is_none() {
                    return Err(format!("list of {size} elements from index {head}"));
                }
                Ok((
                    Meta::List {
                        version,
                        head,
                        size,
                    },
                    expire,
                ))
            }
            Type::Hash | Type::Set | Type::ZSet => {
                if payload.len() != COLLECTION_LEN {
                    return Err(format!("{} metadata of {} bytes", kind.name(), value.len()));
                }
                let version = u64::from_be_bytes(payload[..8].try_into().unwrap_or_default());
                let size = u64::from_be_bytes(payload[8..].try_into().unwrap_or_default());
                if size == 0 {
                    return Err(format!("empty {}", kind.name()));
                }
                Ok((
                    Meta::Collection {
                        kind,
                        version,
                        size,
                    },
                    expire,
                ))
            }
        }
    }
}

/// A string's metadata value: header (with `expire`, 0 for none), then the
/// bytes. `APPEND` writes a merge operand that concatenates to it, so the
/// header never holds the length.
pub fn string_meta(value: &[u8], expire: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_HEADER_LEN + value.len());
    out.push(Type::String as u8);
    out.extend_from_slice(&expire.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// Bytes of a string's metadata value beyond the string itself.
pub const STRING_OVERHEAD: usize = META_HEADER_LEN;

pub fn meta_key(db: u8, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + key.len());
    out.extend_from_slice(&[META, db]);
    out.extend_from_slice(key);
    out
}

/// The Redis key of a metadata key, or `None` for another kind of key.
pub fn user_key_of_meta(db: u8, meta_key: &[u8]) -> Option<&[u8]> {
    meta_key.strip_prefix(&[META, db])
}

/// The database and Redis key an engine key belongs to: a metadata key's,
/// a subkey's, a score-index key's; `None` for the server's own keys (and
/// for bytes that are no key of the key space).
pub fn owner(key: &[u8]) -> Option<(u8, &[u8])> {
    let (&tag, rest) = key.split_first()?;
    let (&db, rest) = rest.split_first()?;
    match tag {
        META => Some((db, rest)),
        SUB | SCORE => {
            let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            Some((db, rest.get(4..4usize.checked_add(len)?)?))
        }
        _ => None,
    }
}

/// The expiry in a metadata value's header (milliseconds since the epoch,
/// 0 for none); `None` if the value is too short to have one.
pub fn meta_expire(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(
        value.get(1..META_HEADER_LEN)?.try_into().ok()?,
    ))
}

/// The first key of `tag`'s range for database `db`, and the first key past it.
pub fn range(tag: u8, db: u8) -> (Vec<u8>, Vec<u8>) {
    let end = match db.checked_add(1) {
        Some(next) => vec![tag, next],
        None => vec![tag + 1],
    };
    (vec![tag, db], end)
}

/// The prefix every subkey (`SUB`) or score-index key (`SCORE`) of one
/// version of a key starts with.
pub fn collection_prefix(tag: u8, db: u8, key: &[u8], version: u64) -> Vec<u8> {
    debug_assert!(tag == SUB || tag == SCORE);
    let mut out = Vec::with_capacity(2 + 4 + key.len() + 8 + 32);
    out.extend_from_slice(&[tag, db]);
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

/// The length of the collection prefix (as `collection_prefix` builds
/// it) a subkey or score-index key starts with; `None` for other keys.
/// Decided by the prefix's own bytes, as the engine's prefix filters
/// require: any key starting with it has the same.
pub fn collection_prefix_len(key: &[u8]) -> Option<usize> {
    let (&tag, rest) = key.split_first()?;
    if tag != SUB && tag != SCORE {
        return None;
    }
    let len = u32::from_be_bytes(rest.get(1..5)?.try_into().ok()?) as usize;
    let n = (2 + 4 + 8usize).checked_add(len)?;
    (key.len() >= n).then_some(n)
}

/// The subkey of a list's element at `index` (`prefix` is the list's
/// collection prefix): the index big-endian, so that elements sort in
/// list order.
pub fn list_element(prefix: &[u8], index: u64) -> Vec<u8> {
    join(prefix, &index.to_be_bytes())
}

/// `prefix` followed by `suffix`.
pub fn join(prefix: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + suffix.len());
    out.extend_from_slice(prefix);
    out.extend_from_slice(suffix);
    out
}

/// The first key after every key starting with `prefix`, or `None` if
/// there is none (all bytes 0xff).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A score as 8 bytes whose byte order is the numbers' order (-inf first,
/// -0.0 before 0.0): the sign bit flipped for positives, every bit for
/// negatives.
pub fn encode_score(score: f64) -> [u8; 8] {
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    ordered.to_be_bytes()
}

pub fn decode_score(bytes: [u8; 8]) -> f64 {
    let ordered = u64::from_be_bytes(bytes);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

/// The key holding the versions' persisted floor (see `store::Versions`).
pub fn version_floor_key() -> Vec<u8> {
    internal_key(b"version-floor")
}

/// The key holding a cluster node's applied state: the last Raft log entry
/// its database reflects, and the membership then.
pub fn raft_applied_key() -> Vec<u8> {
    internal_key(b"raft-applied")
}

/// The key holding the key-space format version.
pub fn format_key() -> Vec<u8> {
    internal_key(b"format")
}

fn internal_key(name: &[u8]) -> Vec<u8> {
    join(&[INTERNAL], name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_names_its_owner() {
        let key = b"user:1".as_slice();
        assert_eq!(owner(&meta_key(3, key)), Some((3, key)));
        for tag in [SUB, SCORE] {
            let prefix = collection_prefix(tag, 7, key, 42);
            assert_eq!(owner(&prefix), Some((7, key)));
            assert_eq!(owner(&join(&prefix, b"field")), Some((7, key)));
            // Cut inside the key: no owner.
            assert_eq!(owner(&prefix[..8]), None);
        }
        assert_eq!(owner(&format_key()), None);
        assert_eq!(owner(b""), None);
        let meta = Meta::String(b"v".to_vec()).encode(1234);
        assert_eq!(meta_expire(&meta), Some(1234));
        assert_eq!(meta_expire(&meta[..4]), None);
    }

    #[test]
    fn scores_sort_as_numbers() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(encode_score(w[0]) < encode_score(w[1]), "{} {}", w[0], w[1]);
        }
        for s in scores {
            assert_eq!(decode_score(encode_score(s)).to_bits(), s.to_bits());
        }
    }

    #[test]
    fn metadata_round_trips_and_rejects_garbage() {
        for m in [
            Meta::String(b"hello".to_vec()),
            Meta::String(vec![]),
            Meta::Collection {
                kind: Type::Hash,
                version: 7,
                size: 3,
            },
            Meta::Collection {
                kind: Type::ZSet,
                version: u64::MAX,
                size: 1,
            },
            Meta::Collection {
                kind: Type::Set,
                version: 3,
                size: 9,
            },
            Meta::List {
                version: 5,
                head: LIST_FIRST_INDEX - 2,
                size: 4,
            },
        ] {
            assert_eq!(Meta::decode(m.encode(0)).unwrap(), m);
            assert_eq!(Meta::decode_with_expire(m.encode(77)).unwrap(), (m, 77));
        }
        assert!(Meta::decode(vec![]).is_err());
        assert!(Meta::decode(vec![9; 20]).is_err());
        assert!(Meta::decode(vec![2; 12]).is_err());
        let empty = Meta::Collection {
            kind: Type::Hash,
            version: 1,
            size: 0,
        };
        assert!(Meta::decode(empty.encode(0)).is_err());
        let past_the_end = Meta::List {
            version: 1,
            head: u64::MAX,
            size: 2,
        };
        assert!(Meta::decode(past_the_end.encode(0)).is_err());
        let empty_list = Meta::List {
            version: 1,
            head: 1,
            size: 0,
        };
        assert!(Meta::decode(empty_list.encode(0)).is_err());
        // A string grows by concatenation: what APPEND's merge does.
        let mut appended = string_meta(b"ab", 0);
        appended.extend_from_slice(b"cd");
        assert_eq!(
            Meta::decode(appended).unwrap(),
            Meta::String(b"abcd".to_vec())
        );
    }

    #[test]
    fn one_keys_subkeys_never_share_a_prefix_with_anothers() {
        // "a" with field "bc..." against "ab" with field "c...": the length
        // in front keeps them apart.
        let a = collection_prefix(SUB, 0, b"a", 1);
        let ab = collection_prefix(SUB, 0, b"ab", 1);
        assert!(!join(&ab, b"c").starts_with(&a));
        assert!(!join(&a, b"bc").starts_with(&ab));
        assert_eq!(prefix_end(b"a\xff\xff").unwrap(), b"b");
        assert_eq!(prefix_end(b"\xff"), None);
        assert_eq!(range(META, 255), (vec![META, 255], vec![META + 1]));
        assert_eq!(user_key_of_meta(0, &meta_key(0, b"k")), Some(&b"k"[..]));
        assert_eq!(user_key_of_meta(1, &meta_key(0, b"k")), None);
    }

    #[test]
    fn a_collection_prefix_is_found_in_each_of_its_keys() {
        for tag in [SUB, SCORE] {
            let p = collection_prefix(tag, 3, b"key", 42);
            assert_eq!(collection_prefix_len(&p), Some(p.len()));
            assert_eq!(collection_prefix_len(&join(&p, b"field")), Some(p.len()));
            assert_eq!(collection_prefix_len(&p[..p.len() - 1]), None);
        }
        assert_eq!(collection_prefix_len(&meta_key(0, b"key")), None);
        assert_eq!(collection_prefix_len(&version_floor_key()), None);
        assert_eq!(
            collection_prefix_len(&[SUB, 0, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        assert_eq!(collection_prefix_len(&[]), None);
    }
}
