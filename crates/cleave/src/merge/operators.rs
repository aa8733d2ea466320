//! The built-in merge operators: counters, appends, fixed-size field
//! updates (KDSep's read-modify-write), and db_bench's `put` and `max`.

use super::MergeOperator;
use crate::base::limits::MAX_VALUE_SIZE;

/// Adds unsigned 64-bit integers, stored as 8 bytes little-endian (as
/// RocksDB's `uint64add`), wrapping on overflow. A key with no value counts
/// from 0; a base value of another length is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct U64Add;

fn u64_of(bytes: &[u8], what: &str) -> Result<u64, String> {
    let b: [u8; 8] = bytes
        .try_into()
        .map_err(|_| format!("{what} of {} bytes is not an 8-byte integer", bytes.len()))?;
    Ok(u64::from_le_bytes(b))
}

impl MergeOperator for U64Add {
    fn name(&self) -> &str {
        "uint64add"
    }

    fn check_operand(&self, operand: &[u8]) -> Result<(), String> {
        u64_of(operand, "operand").map(|_| ())
    }

    fn full_merge(
        &self,
        _: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut sum = base.map_or(Ok(0), |b| u64_of(b, "base value"))?;
        for op in operands {
            sum = sum.wrapping_add(u64_of(op, "operand")?);
        }
        Ok(sum.to_le_bytes().to_vec())
    }

    fn partial_merge(&self, _: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let sum = u64_of(older, "")
            .ok()?
            .wrapping_add(u64_of(newer, "").ok()?);
        Some(sum.to_le_bytes().to_vec())
    }
}

/// Appends each operand to the value, with `separator` between pieces (as
/// RocksDB's `stringappend`, whose separator is `,`).
#[derive(Debug, Clone)]
pub struct Append {
    name: String,
    separator: Vec<u8>,
}

impl Append {
    pub fn new(separator: &[u8]) -> Self {
        Append {
            name: format!("append:{}", separator.escape_ascii()),
            separator: separator.to_vec(),
        }
    }
}

impl Default for Append {
    fn default() -> Self {
        Append::new(b",")
    }
}

impl MergeOperator for Append {
    fn name(&self) -> &str {
        &self.name
    }

    fn full_merge(
        &self,
        _: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let len = base.map_or(0, <[u8]>::len)
            + operands
                .iter()
                .map(|o| o.len() + self.separator.len())
                .sum::<usize>();
        let mut out = Vec::with_capacity(len);
        let mut pieces = base.into_iter().chain(operands.iter().copied());
        if let Some(first) = pieces.next() {
            out.extend_from_slice(first);
        }
        for p in pieces {
            out.extend_from_slice(&self.separator);
            out.extend_from_slice(p);
        }
        Ok(out)
    }

    fn partial_merge(&self, _: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(older.len() + self.separator.len() + newer.len());
        out.extend_from_slice(older);
        out.extend_from_slice(&self.separator);
        out.extend_from_slice(newer);
        Some(out)
    }
}

/// Bytes of a field number in a [`FieldUpdate`] operand.
const FIELD_INDEX_LEN: usize = 2;

/// Values of `fields` fixed-size fields of `field_len` bytes each; an
/// operand replaces fields: one or more `fixed16 index ++ field_len bytes`
/// (KDSep's read-modify-write: 10 fields of 100 bytes, an operand
/// replacing one). A key with no value starts as zeros; a base value of
/// another length is an error. Operands always combine, so a run of them
/// shrinks to one of at most `fields` updates.
#[derive(Debug, Clone)]
pub struct FieldUpdate {
    name: String,
    fields: usize,
    field_len: usize,
}

impl FieldUpdate {
    /// REQUIRES: `fields` in 1..=65536, `field_len` positive, and a value
    /// of at most 1 GiB.
    pub fn new(fields: usize, field_len: usize) -> Self {
        assert!(
            (1..=1 << 16).contains(&fields)
                && field_len > 0
                && fields
                    .checked_mul(field_len)
                    .is_some_and(|n| n <= MAX_VALUE_SIZE),
            "FieldUpdate needs 1 to 65536 fields of at least one byte, at most 1 GiB in all"
        );
        FieldUpdate {
            name: format!("fieldupdate:{fields}x{field_len}"),
            fields,
            field_len,
        }
    }

    /// An operand that sets field `index` to `value`.
    /// REQUIRES: `index < fields` and `value.len() == field_len`.
    pub fn operand(&self, index: usize, value: &[u8]) -> Vec<u8> {
        assert!(index < self.fields && value.len() == self.field_len);
        let mut out = Vec::with_capacity(FIELD_INDEX_LEN + value.len());
        out.extend_from_slice(&(index as u16).to_le_bytes());
        out.extend_from_slice(value);
        out
    }

    /// The bytes of a whole value.
    pub fn value_len(&self) -> usize {
        self.fields * self.field_len
    }

    /// Calls `f` with each update of an operand, in order: `(field, new
    /// bytes)`; an error if the operand is malformed (after the updates
    /// before the damage).
    fn for_each_update<'a>(
        &self,
        operand: &'a [u8],
        mut f: impl FnMut(usize, &'a [u8]),
    ) -> Result<(), String> {
        let unit = FIELD_INDEX_LEN + self.field_len;
        if operand.is_empty() || !operand.len().is_multiple_of(unit) {
            return Err(format!(
                "operand of {} bytes is not a sequence of {unit}-byte field updates",
                operand.len()
            ));
        }
        for u in operand.chunks_exact(unit) {
            let index = usize::from(u16::from_le_bytes([u[0], u[1]]));
            if index >= self.fields {
                return Err(format!("field {index} of {}", self.fields));
            }
            f(index, &u[FIELD_INDEX_LEN..]);
        }
        Ok(())
    }
}

impl MergeOperator for FieldUpdate {
    fn name(&self) -> &str {
        &self.name
    }

    fn check_operand(&self, operand: &[u8]) -> Result<(), String> {
        self.for_each_update(operand, |_, _| {})
    }

    fn full_merge(
        &self,
        _: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut value = match base {
            Some(b) if b.len() != self.value_len() => {
                return Err(format!(
                    "base value of {} bytes, not {} fields of {}",
                    b.len(),
                    self.fields,
                    self.field_len
                ))
            }
            Some(b) => b.to_vec(),
            None => vec![0; self.value_len()],
        };
        // Without allocating per operand: a hot key's read may apply
        // thousands of them.
        let field_len = self.field_len;
        for op in operands {
            self.for_each_update(op, |index, bytes| {
                let at = index * field_len;
                value[at..at + field_len].copy_from_slice(bytes);
            })?;
        }
        Ok(value)
    }

    fn partial_merge(&self, _: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        // One update per field, the newest, in field order.
        let mut latest: Vec<Option<&[u8]>> = vec![None; self.fields];
        for op in [older, newer] {
            self.for_each_update(op, |index, bytes| latest[index] = Some(bytes))
                .ok()?;
        }
        let mut out = Vec::new();
        for (index, bytes) in latest.iter().enumerate() {
            if let Some(bytes) = bytes {
                out.extend_from_slice(&(index as u16).to_le_bytes());
                out.extend_from_slice(bytes);
            }
        }
        Some(out)
    }
}

/// The newest operand replaces the value (db_bench's `put`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Put;

impl MergeOperator for Put {
    fn name(&self) -> &str {
        "put"
    }

    fn full_merge(
        &self,
        _: &[u8],
        _: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        operands
            .last()
            .map(|o| o.to_vec())
            .ok_or_else(|| "no operands".to_string())
    }

    fn partial_merge(&self, _: &[u8], _: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        Some(newer.to_vec())
    }
}

/// The bytewise largest of the value and the operands (db_bench's `max`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Max;

impl MergeOperator for Max {
    fn name(&self) -> &str {
        "max"
    }

    fn full_merge(
        &self,
        _: &[u8],
        base: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        Ok(base
            .into_iter()
            .chain(operands.iter().copied())
            .max()
            .unwrap_or_default()
            .to_vec())
    }

    fn partial_merge(&self, _: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        Some(older.max(newer).to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(op: &dyn MergeOperator, base: Option<&[u8]>, ops: &[&[u8]]) -> Vec<u8> {
        op.full_merge(b"k", base, ops).unwrap()
    }

    /// Every way of folding a run by partial merges before the full merge
    /// gives the full merge of the whole run.
    fn partial_merges_agree(op: &dyn MergeOperator, base: Option<&[u8]>, ops: &[Vec<u8>]) {
        let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        let whole = full(op, base, &refs);
        for split in 1..ops.len() {
            let folded = ops[split..].iter().fold(ops[split - 1].clone(), |acc, o| {
                op.partial_merge(b"k", &acc, o).unwrap()
            });
            let mut run: Vec<&[u8]> = refs[..split - 1].to_vec();
            run.push(&folded);
            assert_eq!(
                full(op, base, &run),
                whole,
                "{} split at {split}",
                op.name()
            );
        }
    }

    #[test]
    fn u64add_counts_from_zero_and_wraps() {
        let one = 1u64.to_le_bytes();
        let max = u64::MAX.to_le_bytes();
        assert_eq!(full(&U64Add, None, &[&one, &one]), 2u64.to_le_bytes());
        assert_eq!(full(&U64Add, Some(&max), &[&one]), 0u64.to_le_bytes());
        assert!(U64Add.check_operand(b"1234567").is_err());
        assert!(U64Add.full_merge(b"k", Some(b"abc"), &[&one]).is_err());
        let ops: Vec<Vec<u8>> = (1..6u64).map(|i| i.to_le_bytes().to_vec()).collect();
        partial_merges_agree(&U64Add, Some(&7u64.to_le_bytes()), &ops);
    }

    #[test]
    fn append_separates_pieces() {
        let a = Append::default();
        assert_eq!(full(&a, None, &[b"x"]), b"x");
        assert_eq!(full(&a, Some(b"a"), &[b"b", b"c"]), b"a,b,c");
        assert_eq!(full(&a, Some(b""), &[b"b"]), b",b");
        assert_eq!(Append::new(b"\n").name(), "append:\\n");
        let ops = vec![b"1".to_vec(), b"22".to_vec(), b"333".to_vec()];
        partial_merges_agree(&a, Some(b"0"), &ops);
        partial_merges_agree(&a, None, &ops);
    }

    #[test]
    fn field_update_replaces_fields_and_combines_operands() {
        let f = FieldUpdate::new(4, 3);
        let v = full(&f, None, &[&f.operand(1, b"abc"), &f.operand(3, b"xyz")]);
        assert_eq!(v, b"\0\0\0abc\0\0\0xyz");
        let v = full(
            &f,
            Some(b"000111222333"),
            &[&f.operand(1, b"abc"), &f.operand(1, b"def")],
        );
        assert_eq!(v, b"000def222333");
        assert!(f
            .full_merge(b"k", Some(b"short"), &[&f.operand(0, b"abc")])
            .is_err());
        assert!(f.check_operand(&f.operand(0, b"abc")[..4]).is_err());
        assert!(f.check_operand(b"").is_err());
        let mut bad = f.operand(0, b"abc");
        bad[0] = 4;
        assert!(f.check_operand(&bad).is_err(), "field 4 of 4");
        let ops: Vec<Vec<u8>> = [(2, b"aaa"), (0, b"bbb"), (2, b"ccc"), (3, b"ddd")]
            .iter()
            .map(|(i, b)| f.operand(*i, *b))
            .collect();
        partial_merges_agree(&f, Some(b"000111222333"), &ops);
        // A run collapses to one update per field.
        let both = f.partial_merge(b"k", &ops[0], &ops[2]).unwrap();
        assert_eq!(both, f.operand(2, b"ccc"));
    }

    #[test]
    fn put_and_max() {
        assert_eq!(full(&Put, Some(b"a"), &[b"b", b"c"]), b"c");
        assert_eq!(full(&Max, Some(b"b"), &[b"a", b"c", b"bb"]), b"c");
        assert_eq!(full(&Max, None, &[b""]), b"");
        let ops = vec![b"m".to_vec(), b"z".to_vec(), b"a".to_vec()];
        partial_merges_agree(&Put, None, &ops);
        partial_merges_agree(&Max, Some(b"q"), &ops);
    }
}
