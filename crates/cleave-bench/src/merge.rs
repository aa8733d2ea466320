//! db_bench's `--merge_operator`: the operator every engine merges with, and
//! the operands mergerandom and readrandommergerandom write. Every engine
//! runs cleave's built-in of that name (RocksDB and BlobDB through their
//! merge-operator callbacks), so all of them merge alike.

use std::sync::Arc;

use clap::ValueEnum;
use cleave::{Append, FieldUpdate, Max, MergeOperator, Put, U64Add};
use rand::Rng;

/// db_bench's operator names, and `fieldupdate`: KDSep's read-modify-write,
/// each operand replacing one of `--ycsb_field_count` fields of
/// `--ycsb_field_length` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MergeKind {
    None,
    Uint64add,
    Put,
    Stringappend,
    Max,
    Fieldupdate,
}

/// The operator and the shape of its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeShape {
    pub kind: MergeKind,
    pub fields: usize,
    pub field_len: usize,
    /// The benchmarks read, apply the operator and put, instead of
    /// merging (`--merge_as_get_put`).
    pub get_put: bool,
}

/// Bytes of a uint64add operand.
const U64_BYTES: usize = 8;

impl MergeShape {
    /// The operator, or `None` for `--merge_operator=none`.
    pub fn operator(&self) -> Option<Arc<dyn MergeOperator>> {
        Some(match self.kind {
            MergeKind::None => return None,
            MergeKind::Uint64add => Arc::new(U64Add),
            MergeKind::Put => Arc::new(Put),
            MergeKind::Stringappend => Arc::new(Append::default()),
            MergeKind::Max => Arc::new(Max),
            MergeKind::Fieldupdate => Arc::new(FieldUpdate::new(self.fields, self.field_len)),
        })
    }

    /// An operand: 8 bytes of `bytes` for uint64add (a counter's step),
    /// one field of `bytes` for fieldupdate, else `bytes` whole (db_bench
    /// merges a value of `--value_size`).
    pub fn operand(&self, rng: &mut impl Rng, bytes: &[u8]) -> Vec<u8> {
        match self.kind {
            MergeKind::Uint64add => {
                let mut step = [0u8; U64_BYTES];
                let n = bytes.len().min(U64_BYTES);
                step[..n].copy_from_slice(&bytes[..n]);
                step.to_vec()
            }
            MergeKind::Fieldupdate => {
                let field = rng.gen_range(0..self.fields);
                let mut content = bytes.to_vec();
                content.resize(self.field_len, b'0');
                FieldUpdate::new(self.fields, self.field_len).operand(field, &content)
            }
            MergeKind::None | MergeKind::Put | MergeKind::Stringappend | MergeKind::Max => {
                bytes.to_vec()
            }
        }
    }

    /// The bytes `operand` asks of the value generator.
    pub fn operand_source_len(&self, value_size: usize) -> usize {
        match self.kind {
            MergeKind::Uint64add => U64_BYTES,
            MergeKind::Fieldupdate => self.field_len,
            _ => value_size,
        }
    }

    /// The size of a key's value once merged, where it does not depend on
    /// its history (for the live set); `None` for appends.
    pub fn merged_len(&self, operand_len: usize) -> Option<usize> {
        match self.kind {
            MergeKind::Uint64add => Some(U64_BYTES),
            MergeKind::Fieldupdate => Some(self.fields * self.field_len),
            MergeKind::Put | MergeKind::Max | MergeKind::None => Some(operand_len),
            MergeKind::Stringappend => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn operands_are_what_each_operator_accepts() {
        let mut rng = StdRng::seed_from_u64(1);
        for kind in [
            MergeKind::Uint64add,
            MergeKind::Put,
            MergeKind::Stringappend,
            MergeKind::Max,
            MergeKind::Fieldupdate,
        ] {
            let shape = MergeShape {
                kind,
                fields: 10,
                field_len: 100,
                get_put: false,
            };
            let op = shape.operator().unwrap();
            let source = vec![b'x'; shape.operand_source_len(1000)];
            let operand = shape.operand(&mut rng, &source);
            op.check_operand(&operand).unwrap();
            let merged = op.full_merge(b"k", None, &[&operand]).unwrap();
            if let Some(len) = shape.merged_len(operand.len()) {
                assert_eq!(merged.len(), len, "{kind:?}");
            }
        }
        let none = MergeShape {
            kind: MergeKind::None,
            fields: 1,
            field_len: 1,
            get_put: false,
        };
        assert!(none.operator().is_none());
    }
}
