//! Table properties: counts and sizes written once per table, stored as a
//! block of `name → varint64` entries (bytewise-sorted names, restart
//! interval 1), and the prefix extractor's name as raw bytes. Readers
//! ignore names they do not know, so later versions can add properties
//! without a format-version bump.

use std::sync::Arc;

use crate::base::coding::{put_varint64, DecodeError, Decoder};
use crate::base::SeqNo;
use crate::manifest::TableExpiry;

use super::block::{Block, BlockBuilder, KeyOrder};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TableProperties {
    pub num_entries: u64,
    pub num_deletions: u64,
    pub num_data_blocks: u64,
    /// Sum of encoded internal-key lengths and of value lengths, before
    /// prefix and block compression.
    pub raw_key_size: u64,
    pub raw_value_size: u64,
    /// Bytes on disk (trailers included) of data blocks, the index block and
    /// the filter block (0 without a filter).
    pub data_size: u64,
    pub index_size: u64,
    pub filter_size: u64,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    pub format_version: u64,
    /// The compression byte the table was written with (a block may still
    /// be stored uncompressed).
    pub compression: u64,
    /// The name of the prefix extractor whose prefixes the filter holds
    /// beside the keys; `None` (no such property) if it holds keys only.
    pub prefix_extractor: Option<Vec<u8>>,
    /// Of the entries with an expiry, a summary; none in a table without
    /// one.
    pub expiry: Option<TableExpiry>,
}

/// The one property whose value is bytes, not a varint; optional.
const PREFIX_EXTRACTOR: &str = "cleave.prefix_extractor";

/// Bytes too, present in a table with expiring entries: its
/// `TableExpiry`.
const EXPIRY: &str = "cleave.expiry";

impl TableProperties {
    /// Name and field, in bytewise order of the names.
    fn fields(&self) -> [(&'static str, u64); 12] {
        [
            ("cleave.compression", self.compression),
            ("cleave.data_size", self.data_size),
            ("cleave.filter_size", self.filter_size),
            ("cleave.format_version", self.format_version),
            ("cleave.index_size", self.index_size),
            ("cleave.largest_seq", self.largest_seq),
            ("cleave.num_data_blocks", self.num_data_blocks),
            ("cleave.num_deletions", self.num_deletions),
            ("cleave.num_entries", self.num_entries),
            ("cleave.raw_key_size", self.raw_key_size),
            ("cleave.raw_value_size", self.raw_value_size),
            ("cleave.smallest_seq", self.smallest_seq),
        ]
    }

    /// Every property by its on-disk name, as text, for dumps.
    pub(crate) fn listing(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .fields()
            .iter()
            .map(|(name, v)| (name.to_string(), v.to_string()))
            .collect();
        if let Some(x) = &self.expiry {
            out.push((
                EXPIRY.to_string(),
                format!("{} bytes by {:?}", x.value_bytes, x.points),
            ));
        }
        if let Some(p) = &self.prefix_extractor {
            out.push((
                PREFIX_EXTRACTOR.to_string(),
                String::from_utf8_lossy(p).into_owned(),
            ));
        }
        out.sort();
        out
    }

    fn field_mut(&mut self, name: &[u8]) -> Option<&mut u64> {
        Some(match name {
            b"cleave.compression" => &mut self.compression,
            b"cleave.data_size" => &mut self.data_size,
            b"cleave.filter_size" => &mut self.filter_size,
            b"cleave.format_version" => &mut self.format_version,
            b"cleave.index_size" => &mut self.index_size,
            b"cleave.largest_seq" => &mut self.largest_seq,
            b"cleave.num_data_blocks" => &mut self.num_data_blocks,
            b"cleave.num_deletions" => &mut self.num_deletions,
            b"cleave.num_entries" => &mut self.num_entries,
            b"cleave.raw_key_size" => &mut self.raw_key_size,
            b"cleave.raw_value_size" => &mut self.raw_value_size,
            b"cleave.smallest_seq" => &mut self.smallest_seq,
            _ => return None,
        })
    }

    /// The uncompressed properties block.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut entries: Vec<(&str, Vec<u8>)> = self
            .fields()
            .iter()
            .map(|&(name, value)| {
                let mut v = Vec::new();
                put_varint64(&mut v, value);
                (name, v)
            })
            .collect();
        if let Some(p) = &self.prefix_extractor {
            entries.push((PREFIX_EXTRACTOR, p.clone()));
        }
        if let Some(x) = &self.expiry {
            let mut v = Vec::new();
            x.encode(&mut v);
            entries.push((EXPIRY, v));
        }
        entries.sort();
        let mut b = BlockBuilder::new(1);
        for (name, v) in entries {
            b.add(name.as_bytes(), &v);
        }
        b.finish()
    }

    /// Decodes a properties block; every property this version writes
    /// must be present.
    pub(crate) fn decode(block: &Arc<Block>) -> Result<TableProperties, DecodeError> {
        let mut p = TableProperties::default();
        let mut seen = 0usize;
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek_to_first()?;
        while it.valid() {
            if it.key() == PREFIX_EXTRACTOR.as_bytes() {
                if p.prefix_extractor.is_some() {
                    return Err(DecodeError("properties block repeats the prefix extractor"));
                }
                p.prefix_extractor = Some(it.value().to_vec());
            } else if it.key() == EXPIRY.as_bytes() {
                if p.expiry.is_some() {
                    return Err(DecodeError("properties block repeats the expiry"));
                }
                let mut d = Decoder::new(it.value());
                p.expiry = Some(TableExpiry::decode(&mut d)?);
                if !d.is_empty() {
                    return Err(DecodeError("trailing bytes in the expiry property"));
                }
            } else if let Some(field) = p.field_mut(it.key()) {
                let mut d = Decoder::new(it.value());
                *field = d.varint64()?;
                if !d.is_empty() {
                    return Err(DecodeError("trailing bytes in a property value"));
                }
                seen += 1;
            }
            it.next()?;
        }
        if seen != p.fields().len() {
            return Err(DecodeError(
                "properties block lacks a property or repeats one",
            ));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_so_the_block_is_seekable() {
        let p = TableProperties::default();
        let names: Vec<_> = p.fields().iter().map(|f| f.0).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
    }

    #[test]
    fn round_trip_and_missing_property() {
        let p = TableProperties {
            num_entries: 1,
            num_deletions: 2,
            num_data_blocks: 3,
            raw_key_size: 4,
            raw_value_size: 5,
            data_size: 6,
            index_size: 7,
            filter_size: 8,
            smallest_seq: 9,
            largest_seq: 10,
            format_version: 11,
            compression: 12,
            prefix_extractor: None,
            expiry: None,
        };
        let block = Arc::new(Block::new(p.encode()).unwrap());
        assert_eq!(TableProperties::decode(&block).unwrap(), p);
        // The prefix extractor's name sorts among the numbers: the block
        // stays seekable.
        let p = TableProperties {
            prefix_extractor: Some(b"cleave.fixed_prefix.4".to_vec()),
            ..p
        };
        let block = Arc::new(Block::new(p.encode()).unwrap());
        assert_eq!(TableProperties::decode(&block).unwrap(), p);
        // So do the expiry properties.
        let p = TableProperties {
            expiry: TableExpiry::summarize(vec![(1_000, 4096), (2_000, 4096)]),
            ..p
        };
        let block = Arc::new(Block::new(p.encode()).unwrap());
        assert_eq!(TableProperties::decode(&block).unwrap(), p);
        let mut it = block.iter(KeyOrder::Bytewise);
        it.seek(PREFIX_EXTRACTOR.as_bytes()).unwrap();
        assert_eq!(it.value(), b"cleave.fixed_prefix.4");

        let mut b = BlockBuilder::new(1);
        b.add(b"cleave.compression", &[0]);
        b.add(b"cleave.unknown", &[0]);
        let block = Arc::new(Block::new(b.finish()).unwrap());
        assert!(TableProperties::decode(&block).is_err());
    }
}
