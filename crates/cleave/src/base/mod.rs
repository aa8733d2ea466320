//! Types and encodings every other layer builds on.

pub(crate) mod checksum;
pub(crate) mod coding;
pub(crate) mod compression;
pub(crate) mod expiry;
pub(crate) mod filename;
mod iterator;
pub(crate) mod key;
pub(crate) mod limits;

pub(crate) use coding::Decoder;
pub(crate) use iterator::InternalIterator;
pub(crate) use key::{FileNumber, InternalKey, SeqNo, ValueKind};
