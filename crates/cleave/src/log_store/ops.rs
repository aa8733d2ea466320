//! What frames carry: the datalog's appends and truncations, the metalog's
//! namespace changes, file headers and a full file's reverse index.
//! Written to disk; every tag is fixed. See `docs/format/log_store.md`.

use crate::base::checksum;
use crate::base::coding::{put_fixed32, put_length_prefixed, put_varint64, DecodeError, Decoder};

/// Marks the first frame of a physical log.
const MAGIC: &[u8; 8] = b"cleavelg";
/// The log store's on-disk format version.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// What a physical log holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Data = 1,
    Meta = 2,
}

pub(crate) fn encode_file_header(out: &mut Vec<u8>, role: Role) {
    out.extend_from_slice(MAGIC);
    put_fixed32(out, FORMAT_VERSION);
    out.push(role as u8);
}

/// The role and format version a file header names.
pub(crate) fn decode_file_header(p: &[u8]) -> Result<(Option<Role>, u32), DecodeError> {
    let mut d = Decoder::new(p);
    if d.bytes(MAGIC.len())? != MAGIC {
        return Err(DecodeError("not a log store file"));
    }
    let version = d.fixed32()?;
    let role = match d.u8()? {
        1 => Some(Role::Data),
        2 => Some(Role::Meta),
        _ => None,
    };
    Ok((role, version))
}

const PUT: u8 = 1;
const TRUNCATE: u8 = 2;
const TRIM: u8 = 3;

/// One operation of a datalog batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DataOp<'a> {
    Put {
        log: u32,
        lsn: u64,
        data: &'a [u8],
    },
    /// Drops the log's records from `from` on that precede it.
    Truncate {
        log: u32,
        from: u64,
    },
    /// Drops the log's records below `before`, for good. Kept in the
    /// datalog, so that a trim shares its group's sync with the appends;
    /// the metalog records the trim point before a file it emptied is
    /// released.
    Trim {
        log: u32,
        before: u64,
    },
}

/// Appends a put; returns its length, which (with its offset) is what the
/// index keeps, so that a read fetches exactly this entry.
pub(crate) fn encode_put(out: &mut Vec<u8>, log: u32, lsn: u64, data: &[u8]) -> usize {
    let start = out.len();
    out.push(PUT);
    put_varint64(out, u64::from(log));
    put_varint64(out, lsn);
    put_varint64(out, data.len() as u64);
    put_fixed32(out, checksum::mask(checksum::crc32c(data)));
    out.extend_from_slice(data);
    out.len() - start
}

/// Appends a truncation (`OpKind::Truncate`) or trim (`OpKind::Trim`) of `log`
/// at `lsn`.
pub(crate) fn encode_cut(out: &mut Vec<u8>, kind: OpKind, log: u32, lsn: u64) -> usize {
    let start = out.len();
    out.push(match kind {
        OpKind::Trim => TRIM,
        _ => TRUNCATE,
    });
    put_varint64(out, u64::from(log));
    put_varint64(out, lsn);
    out.len() - start
}

/// Decodes the next operation of a datalog batch.
pub(crate) fn decode_data_op<'a>(d: &mut Decoder<'a>) -> Result<DataOp<'a>, DecodeError> {
    match d.u8()? {
        PUT => {
            let log = d.varint32()?;
            let lsn = d.varint64()?;
            let len = d.varint_usize()?;
            let crc = d.fixed32()?;
            let data = d.bytes(len)?;
            if !checksum::matches(checksum::crc32c(data), crc) {
                return Err(DecodeError("record checksum mismatch"));
            }
            Ok(DataOp::Put { log, lsn, data })
        }
        TRUNCATE => Ok(DataOp::Truncate {
            log: d.varint32()?,
            from: d.varint64()?,
        }),
        TRIM => Ok(DataOp::Trim {
            log: d.varint32()?,
            before: d.varint64()?,
        }),
        _ => Err(DecodeError("unknown datalog operation")),
    }
}

const OPENED: u8 = 1;
const CREATE: u8 = 2;
const DELETE: u8 = 3;
const META_TRIM: u8 = 4;
const SEALED: u8 = 5;
const INDEX: u8 = 6;
const CUT: u8 = 7;
const FLUSHED: u8 = 8;

/// One operation of a metalog batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MetaOp<'a> {
    /// A session began; every frame it writes carries this epoch.
    Opened {
        epoch: u64,
    },
    Create {
        log: u32,
        name: &'a [u8],
    },
    Delete {
        log: u32,
    },
    /// Records before `before` are gone.
    Trim {
        log: u32,
        before: u64,
    },
    /// Data file `generation` is full; its seal frame (the reverse index)
    /// is `len` bytes at `offset`.
    Sealed {
        generation: u64,
        offset: u64,
        len: u64,
    },
    /// A group of one log's index (module `index`): replaces the groups
    /// its range meets.
    Index {
        body: &'a [u8],
    },
    /// Drops a log's groups that hold LSNs from `from` on (a truncation
    /// since the last flush).
    Cut {
        log: u32,
        from: u64,
    },
    /// An index flush ended: every mapping of a datalog operation before
    /// this position is in a group.
    Flushed {
        generation: u64,
        offset: u64,
    },
}

pub(crate) fn encode_meta_op(out: &mut Vec<u8>, op: &MetaOp<'_>) {
    match *op {
        MetaOp::Opened { epoch } => {
            out.push(OPENED);
            put_varint64(out, epoch);
        }
        MetaOp::Create { log, name } => {
            out.push(CREATE);
            put_varint64(out, u64::from(log));
            put_length_prefixed(out, name);
        }
        MetaOp::Delete { log } => {
            out.push(DELETE);
            put_varint64(out, u64::from(log));
        }
        MetaOp::Trim { log, before } => {
            out.push(META_TRIM);
            put_varint64(out, u64::from(log));
            put_varint64(out, before);
        }
        MetaOp::Sealed {
            generation,
            offset,
            len,
        } => {
            out.push(SEALED);
            put_varint64(out, generation);
            put_varint64(out, offset);
            put_varint64(out, len);
        }
        MetaOp::Index { body } => {
            out.push(INDEX);
            put_length_prefixed(out, body);
        }
        MetaOp::Cut { log, from } => {
            out.push(CUT);
            put_varint64(out, u64::from(log));
            put_varint64(out, from);
        }
        MetaOp::Flushed { generation, offset } => {
            out.push(FLUSHED);
            put_varint64(out, generation);
            put_varint64(out, offset);
        }
    }
}

pub(crate) fn decode_meta_op<'a>(d: &mut Decoder<'a>) -> Result<MetaOp<'a>, DecodeError> {
    Ok(match d.u8()? {
        OPENED => MetaOp::Opened {
            epoch: d.varint64()?,
        },
        CREATE => MetaOp::Create {
            log: d.varint32()?,
            name: d.length_prefixed()?,
        },
        DELETE => MetaOp::Delete { log: d.varint32()? },
        META_TRIM => MetaOp::Trim {
            log: d.varint32()?,
            before: d.varint64()?,
        },
        SEALED => MetaOp::Sealed {
            generation: d.varint64()?,
            offset: d.varint64()?,
            len: d.varint64()?,
        },
        INDEX => MetaOp::Index {
            body: d.length_prefixed()?,
        },
        CUT => MetaOp::Cut {
            log: d.varint32()?,
            from: d.varint64()?,
        },
        FLUSHED => MetaOp::Flushed {
            generation: d.varint64()?,
            offset: d.varint64()?,
        },
        _ => return Err(DecodeError("unknown metalog operation")),
    })
}

/// What a datalog operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Put = 0,
    Truncate = 1,
    Trim = 2,
}

/// One entry of a full data file's reverse index: where each operation of
/// the file lies, so that its live records are found, and the file
/// replayed, without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reverse {
    pub(crate) log: u32,
    /// The put's LSN, or where the truncation or trim cuts.
    pub(crate) lsn: u64,
    pub(crate) offset: u64,
    /// The operation's length in the file.
    pub(crate) len: u32,
    pub(crate) kind: OpKind,
}

pub(crate) fn encode_reverse(out: &mut Vec<u8>, r: &Reverse) {
    put_varint64(out, u64::from(r.log));
    put_varint64(out, r.lsn);
    put_varint64(out, r.offset);
    put_varint64(out, u64::from(r.len) << 2 | r.kind as u64);
}

pub(crate) fn decode_reverse(d: &mut Decoder<'_>) -> Result<Reverse, DecodeError> {
    let log = d.varint32()?;
    let lsn = d.varint64()?;
    let offset = d.varint64()?;
    let packed = d.varint64()?;
    let kind = match packed & 3 {
        0 => OpKind::Put,
        1 => OpKind::Truncate,
        2 => OpKind::Trim,
        _ => return Err(DecodeError("unknown operation in a reverse index")),
    };
    let len = u32::try_from(packed >> 2).map_err(|_| DecodeError("operation length overflows"))?;
    Ok(Reverse {
        log,
        lsn,
        offset,
        len,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip() {
        let mut b = Vec::new();
        let n = encode_put(&mut b, 3, 1 << 40, b"hello");
        assert_eq!(n, b.len());
        encode_cut(&mut b, OpKind::Truncate, 3, 17);
        encode_cut(&mut b, OpKind::Trim, 3, 9);
        let mut d = Decoder::new(&b);
        assert_eq!(
            decode_data_op(&mut d).unwrap(),
            DataOp::Put {
                log: 3,
                lsn: 1 << 40,
                data: b"hello"
            }
        );
        assert_eq!(
            decode_data_op(&mut d).unwrap(),
            DataOp::Truncate { log: 3, from: 17 }
        );
        assert_eq!(
            decode_data_op(&mut d).unwrap(),
            DataOp::Trim { log: 3, before: 9 }
        );
        assert!(d.is_empty());

        let ops = [
            MetaOp::Opened { epoch: 9 },
            MetaOp::Create {
                log: 1,
                name: b"raft-1",
            },
            MetaOp::Trim { log: 1, before: 5 },
            MetaOp::Delete { log: 1 },
            MetaOp::Sealed {
                generation: 4,
                offset: 1000,
                len: 77,
            },
            MetaOp::Index { body: b"group" },
            MetaOp::Cut { log: 1, from: 12 },
            MetaOp::Flushed {
                generation: 4,
                offset: 2000,
            },
        ];
        let mut m = Vec::new();
        for op in &ops {
            encode_meta_op(&mut m, op);
        }
        let mut d = Decoder::new(&m);
        for op in &ops {
            assert_eq!(&decode_meta_op(&mut d).unwrap(), op);
        }
        assert!(d.is_empty());

        for kind in [OpKind::Put, OpKind::Truncate, OpKind::Trim] {
            let r = Reverse {
                log: 2,
                lsn: 99,
                offset: 4096,
                len: 30,
                kind,
            };
            let mut v = Vec::new();
            encode_reverse(&mut v, &r);
            assert_eq!(decode_reverse(&mut Decoder::new(&v)).unwrap(), r);
        }

        let mut h = Vec::new();
        encode_file_header(&mut h, Role::Meta);
        assert_eq!(
            decode_file_header(&h).unwrap(),
            (Some(Role::Meta), FORMAT_VERSION)
        );
    }

    #[test]
    fn a_damaged_record_fails_its_checksum() {
        let mut b = Vec::new();
        encode_put(&mut b, 1, 1, b"data");
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(decode_data_op(&mut Decoder::new(&b)).is_err());
    }
}
