//! What a batch of commands (a pipeline, an EXEC) needs of the store: the
//! writes of its commands gathered into one engine batch, written once at
//! its end, and, until then, read back by the commands after them (an
//! overlay on the database, as RocksDB's `WriteBatchWithIndex` gives its
//! transactions).

use std::collections::BTreeMap;

use cleave::{BatchOp, DbIterator, WriteBatch};

use crate::error::CmdError;

/// A key's state as a batch has left it, before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// Put, with its expiry if it has one (milliseconds since the epoch):
    /// read at or after it, the key is absent, as the engine would have it.
    Value(Vec<u8>, Option<u64>),
    Deleted,
    /// Merge operands on top of the stored value: the server's merge
    /// operator concatenates (APPEND), so they are kept concatenated.
    Appended(Vec<u8>),
}

impl Pending {
    /// The value at `now_ms`, given the stored one (`base`).
    pub fn resolve(&self, base: Option<&[u8]>, now_ms: u64) -> Option<Vec<u8>> {
        match self {
            Pending::Value(_, Some(expiry)) if now_ms >= *expiry => None,
            Pending::Value(v, _) => Some(v.clone()),
            Pending::Deleted => None,
            Pending::Appended(ops) => {
                let mut v = base.map_or_else(Vec::new, <[u8]>::to_vec);
                v.extend_from_slice(ops);
                Some(v)
            }
        }
    }
}

/// The writes of a batch so far: each key's final state, which is all
/// the engine needs of one atomic batch (a list's metadata rewritten by
/// each of 16 pipelined pushes is written once).
#[derive(Debug, Default)]
pub struct Overlay {
    pending: BTreeMap<Vec<u8>, Pending>,
    /// Bytes of keys and values added, superseded ones included.
    bytes: usize,
    /// Collection versions the batch's commands ended (database, key,
    /// version): recorded for the subkey filter only once the batch is
    /// written, since a failed write ends nothing.
    ended: Vec<(u8, Vec<u8>, u64)>,
}

impl Overlay {
    /// Takes a command's batch into the batch's.
    pub fn add(&mut self, batch: &WriteBatch) {
        for op in batch.ops() {
            let (key, next) = match op {
                BatchOp::Put {
                    key,
                    value,
                    expires_at_ms,
                } => (key, Pending::Value(value.to_vec(), expires_at_ms)),
                BatchOp::Delete { key } => (key, Pending::Deleted),
                BatchOp::Merge { key, operand } => {
                    let next = match self.pending.get_mut(key) {
                        None => Pending::Appended(operand.to_vec()),
                        // Appended to nothing, the operand is the value.
                        Some(Pending::Deleted) => Pending::Value(operand.to_vec(), None),
                        // Past its expiry the engine would merge the
                        // operands onto nothing, which a pending value
                        // cannot say; APPEND rewrites an expiring string
                        // rather than merge onto it (strings.rs).
                        Some(Pending::Value(v, expiry)) => {
                            debug_assert!(expiry.is_none(), "a merge onto an expiring value");
                            v.extend_from_slice(operand);
                            self.bytes += operand.len();
                            continue;
                        }
                        Some(Pending::Appended(ops)) => {
                            ops.extend_from_slice(operand);
                            self.bytes += operand.len();
                            continue;
                        }
                    };
                    (key, next)
                }
            };
            self.bytes += key.len()
                + match &next {
                    Pending::Value(v, _) | Pending::Appended(v) => v.len(),
                    Pending::Deleted => 0,
                };
            match self.pending.get_mut(key) {
                Some(p) => *p = next,
                None => {
                    self.pending.insert(key.to_vec(), next);
                }
            }
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<&Pending> {
        self.pending.get(key)
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.ended.is_empty()
    }

    /// Bytes of the keys and values written, superseded ones included.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The pending keys in `[begin, end)`, in order.
    pub fn range(&self, begin: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, Pending)> {
        self.pending
            .range(begin.to_vec()..)
            .take_while(|(k, _)| end.is_none_or(|e| k.as_slice() < e))
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect()
    }

    /// Records that a command ended `version` of the collection at `key`.
    pub fn ended(&mut self, db: u8, key: &[u8], version: u64) {
        self.ended.push((db, key.to_vec(), version));
    }

    /// One engine batch leaving each key as the writes did, and the
    /// versions they end.
    pub fn into_parts(self) -> (WriteBatch, Vec<(u8, Vec<u8>, u64)>) {
        let mut batch = WriteBatch::new();
        for (key, p) in self.pending {
            match p {
                Pending::Value(v, None) => batch.put(&key, &v),
                Pending::Value(v, Some(expiry)) => batch.put_with_expiry(&key, &v, expiry),
                Pending::Deleted => batch.delete(&key),
                // The server's merge operator concatenates: the operands
                // together are one operand.
                Pending::Appended(ops) => batch.merge(&key, &ops),
            }
        }
        (batch, self.ended)
    }
}

/// An iterator over the store: the database's, or, inside a transaction,
/// the database's merged with what the transaction wrote.
// The plain iterator, what every command but EXEC's uses, stays unboxed:
// an iterator is built once per command and not moved.
#[allow(clippy::large_enum_variant)]
pub enum StoreIter {
    Plain(DbIterator),
    Merged(Box<Merged>),
}

impl StoreIter {
    /// The database's iterator `db` with `pending` (an overlay's range,
    /// as [`Overlay::range`] gives it) over it.
    pub fn merged(db: DbIterator, pending: Vec<(Vec<u8>, Pending)>) -> Self {
        StoreIter::Merged(Box::new(Merged {
            db,
            pending,
            cur: None,
            forward: true,
            now_ms: crate::store::now_ms(),
        }))
    }

    pub fn valid(&self) -> bool {
        match self {
            StoreIter::Plain(it) => it.valid(),
            StoreIter::Merged(m) => m.cur.is_some(),
        }
    }

    pub fn key(&self) -> &[u8] {
        match self {
            StoreIter::Plain(it) => it.key(),
            StoreIter::Merged(m) => match &m.cur {
                Some(Cur::Db) => m.db.key(),
                Some(Cur::Pending(i, _)) => &m.pending[*i].0,
                None => &[],
            },
        }
    }

    pub fn value(&self) -> Result<&[u8], CmdError> {
        match self {
            StoreIter::Plain(it) => Ok(it.value()?),
            StoreIter::Merged(m) => match &m.cur {
                Some(Cur::Db) => Ok(m.db.value()?),
                Some(Cur::Pending(_, v)) => Ok(v),
                None => Ok(&[]),
            },
        }
    }

    pub fn status(&self) -> Result<(), CmdError> {
        match self {
            StoreIter::Plain(it) => Ok(it.status()?),
            StoreIter::Merged(m) => Ok(m.db.status()?),
        }
    }

    pub fn seek_to_first(&mut self) -> Result<(), CmdError> {
        match self {
            StoreIter::Plain(it) => Ok(it.seek_to_first()?),
            StoreIter::Merged(m) => {
                m.db.seek_to_first()?;
                m.settle_forward(0)
            }
        }
    }

    pub fn seek_to_last(&mut self) -> Result<(), CmdError> {
        match self {
            StoreIter::Plain(it) => Ok(it.seek_to_last()?),
            StoreIter::Merged(m) => {
                m.db.seek_to_last()?;
                m.settle_backward(m.pending.len())
            }
        }
    }

    pub fn seek(&mut self, key: &[u8]) -> Result<(), CmdError> {
        match self {
            StoreIter::Plain(it) => Ok(it.seek(key)?),
            StoreIter::Merged(m) => {
                m.db.seek(key)?;
                let p = m.pending.partition_point(|(k, _)| k.as_slice() < key);
                m.settle_forward(p)
            }
        }
    }

    // The engine's iterator's name, not `Iterator::next`: moving can fail.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<(), CmdError> {
        match self {
            StoreIter::Plain(it) => Ok(it.next()?),
            StoreIter::Merged(m) => m.step(true),
        }
    }

    pub fn prev(&mut self) -> Result<(), CmdError> {
        match self {
            StoreIter::Plain(it) => Ok(it.prev()?),
            StoreIter::Merged(m) => m.step(false),
        }
    }
}

/// Where a merged iterator stands: on the database's entry, or on a
/// pending one (its index, and its value resolved).
enum Cur {
    Db,
    Pending(usize, Vec<u8>),
}

/// The database's entries with a transaction's pending writes over them.
/// Moving forward, the database iterator stands at the first of its keys
/// at or after the current one; moving backward, at the last at or before
/// it.
pub struct Merged {
    db: DbIterator,
    pending: Vec<(Vec<u8>, Pending)>,
    cur: Option<Cur>,
    forward: bool,
    /// When the iterator was made: pending values expire as of then.
    now_ms: u64,
}

impl Merged {
    fn db_key(&self) -> Option<&[u8]> {
        self.db.valid().then(|| self.db.key())
    }

    /// Lands on the first entry at or after where the database iterator
    /// and pending index `p` stand.
    fn settle_forward(&mut self, mut p: usize) -> Result<(), CmdError> {
        self.forward = true;
        loop {
            let pk = self.pending.get(p).map(|(k, _)| k.as_slice());
            let dk = self.db_key();
            let Some(pk) = pk.filter(|pk| dk.is_none_or(|dk| *pk <= dk)) else {
                self.cur = dk.is_some().then_some(Cur::Db);
                return self.db.status().map_err(Into::into);
            };
            let shadows = dk == Some(pk);
            let base = if shadows {
                Some(self.db.value()?)
            } else {
                None
            };
            match self.pending[p].1.resolve(base, self.now_ms) {
                Some(v) => {
                    self.cur = Some(Cur::Pending(p, v));
                    return Ok(());
                }
                None => {
                    if shadows {
                        self.db.next()?;
                    }
                    p += 1;
                }
            }
        }
    }

    /// Lands on the last entry at or before where the database iterator
    /// stands and before pending index `p`.
    fn settle_backward(&mut self, mut p: usize) -> Result<(), CmdError> {
        self.forward = false;
        loop {
            let pk = p.checked_sub(1).map(|i| self.pending[i].0.as_slice());
            let dk = self.db_key();
            let Some(pk) = pk.filter(|pk| dk.is_none_or(|dk| *pk >= dk)) else {
                self.cur = dk.is_some().then_some(Cur::Db);
                return self.db.status().map_err(Into::into);
            };
            let shadows = dk == Some(pk);
            let base = if shadows {
                Some(self.db.value()?)
            } else {
                None
            };
            match self.pending[p - 1].1.resolve(base, self.now_ms) {
                Some(v) => {
                    self.cur = Some(Cur::Pending(p - 1, v));
                    return Ok(());
                }
                None => {
                    if shadows {
                        self.db.prev()?;
                    }
                    p -= 1;
                }
            }
        }
    }

    fn step(&mut self, forward: bool) -> Result<(), CmdError> {
        let key = match &self.cur {
            Some(Cur::Db) => self.db.key().to_vec(),
            Some(Cur::Pending(i, _)) => self.pending[*i].0.clone(),
            None => return Ok(()),
        };
        if forward {
            if !self.forward {
                self.db.seek(&key)?;
            }
            if self.db_key() == Some(&key) {
                self.db.next()?;
            }
            let p = self.pending.partition_point(|(k, _)| *k <= key);
            self.settle_forward(p)
        } else {
            if self.forward {
                self.db.seek_for_prev(&key)?;
            }
            if self.db_key() == Some(&key) {
                self.db.prev()?;
            }
            let p = self.pending.partition_point(|(k, _)| *k < key);
            self.settle_backward(p)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cleave::{Db, Options, ReadOptions, WriteOptions};
    use rand::{Rng, SeedableRng};

    use super::*;

    /// Random writes over a random database, read through the merged
    /// iterator in both directions and with seeks, against a map.
    #[test]
    fn the_merged_iterator_sees_the_database_as_the_transaction_left_it() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for round in 0..40 {
            let db = Db::open(
                "/d",
                Options {
                    fs: Arc::new(cleave::vfs::MemFs::new()),
                    create_if_missing: true,
                    merge_operator: Some(Arc::new(cleave::Append::new(b""))),
                    ..Options::default()
                },
            )
            .unwrap();
            let key = |r: &mut rand::rngs::StdRng| vec![b'a' + r.gen_range(0..12)];
            let mut model = BTreeMap::new();
            for _ in 0..rng.gen_range(0..10) {
                let (k, v) = (key(&mut rng), vec![rng.gen_range(b'0'..=b'9')]);
                db.put(&WriteOptions::default(), &k, &v).unwrap();
                model.insert(k, v);
            }
            let mut overlay = Overlay::default();
            for _ in 0..rng.gen_range(0..4) {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..4) {
                    let k = key(&mut rng);
                    match rng.gen_range(0..3) {
                        0 => {
                            b.put(&k, b"P");
                            model.insert(k, b"P".to_vec());
                        }
                        1 => {
                            b.delete(&k);
                            model.remove(&k);
                        }
                        _ => {
                            b.merge(&k, b"+");
                            model.entry(k).or_default().push(b'+');
                        }
                    }
                }
                overlay.add(&b);
            }
            let open = |begin: &[u8], end: Option<&[u8]>| {
                let r = ReadOptions {
                    lower_bound: Some(begin.to_vec()),
                    upper_bound: end.map(<[u8]>::to_vec),
                    ..ReadOptions::new()
                };
                StoreIter::merged(db.iter(&r), overlay.range(begin, end))
            };
            let (begin, end) = (b"c".as_slice(), Some(b"j".as_slice()));
            let want: Vec<(Vec<u8>, Vec<u8>)> = model
                .range(begin.to_vec()..end.unwrap().to_vec())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut it = open(begin, end);
            it.seek_to_first().unwrap();
            let mut got = Vec::new();
            while it.valid() {
                got.push((it.key().to_vec(), it.value().unwrap().to_vec()));
                it.next().unwrap();
            }
            assert_eq!(got, want, "round {round} forward");
            it.seek_to_last().unwrap();
            let mut back = Vec::new();
            while it.valid() {
                back.push((it.key().to_vec(), it.value().unwrap().to_vec()));
                it.prev().unwrap();
            }
            back.reverse();
            assert_eq!(back, want, "round {round} backward");
            // Turning round in the middle.
            if want.len() >= 2 {
                it.seek(&want[1].0).unwrap();
                assert_eq!(it.key(), want[1].0.as_slice());
                it.prev().unwrap();
                assert_eq!(it.key(), want[0].0.as_slice());
                it.next().unwrap();
                assert_eq!(it.key(), want[1].0.as_slice());
            }
            // Point reads resolve the same way.
            for (k, v) in &model {
                let stored = db.get(&ReadOptions::new(), k).unwrap();
                let got = match overlay.get(k) {
                    Some(p) => p.resolve(stored.as_deref(), 0),
                    None => stored,
                };
                assert_eq!(got.as_ref(), Some(v), "round {round}");
            }
        }
    }
}
