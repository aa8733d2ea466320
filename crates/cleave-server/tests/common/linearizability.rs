//! A linearizability checker for a register per key, after Wing and Gong's
//! search with Lowe's memoization: for each key, look for an order of its
//! operations that respects real time (an operation that returned before
//! another was invoked comes first) and in which every read returns the
//! last write before it. Writes whose outcome the client never learned
//! (an error, a lost connection) may take effect at any point after they
//! were invoked, or never. Keys are independent registers, so each is
//! checked alone, which keeps the search small.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashSet};

/// One operation on a key, as a client saw it: times are nanoseconds on
/// one clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub key: Vec<u8>,
    pub kind: Kind,
    pub invoked: u64,
    /// `None`: the outcome is unknown (only for writes; a read without an
    /// answer tells nothing and is left out).
    pub returned: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Write(Vec<u8>),
    /// What the read returned; `None` for a missing key.
    Read(Option<Vec<u8>>),
}

/// Checks `history`; on failure, names the key and its operations.
pub fn check(history: &[Op]) -> Result<(), String> {
    let mut by_key: BTreeMap<&[u8], Vec<&Op>> = BTreeMap::new();
    for op in history {
        by_key.entry(&op.key).or_default().push(op);
    }
    for (key, ops) in by_key {
        if !linearizable(&ops) {
            let mut lines = Vec::new();
            for op in &ops {
                lines.push(format!("  {op:?}"));
            }
            return Err(format!(
                "key {:?} is not linearizable:\n{}",
                String::from_utf8_lossy(key),
                lines.join("\n")
            ));
        }
    }
    Ok(())
}

/// Operations linearized so far, one bit each.
type Done = Vec<u64>;

fn has(done: &Done, i: usize) -> bool {
    done[i / 64] & 1 << (i % 64) != 0
}

fn with(done: &Done, i: usize) -> Done {
    let mut d = done.clone();
    d[i / 64] |= 1 << (i % 64);
    d
}

fn linearizable(ops: &[&Op]) -> bool {
    let n = ops.len();
    let words = n.div_ceil(64);
    let required: Vec<usize> = (0..n).filter(|&i| ops[i].returned.is_some()).collect();
    // Depth-first over (operations linearized, register value).
    let mut seen: HashSet<(Done, Option<Vec<u8>>)> = HashSet::new();
    let mut stack: Vec<(Done, Option<Vec<u8>>)> = vec![(vec![0; words], None)];
    while let Some((done, value)) = stack.pop() {
        if required.iter().all(|&i| has(&done, i)) {
            return true;
        }
        if !seen.insert((done.clone(), value.clone())) {
            continue;
        }
        // An operation may go next only if no pending one returned before
        // it was invoked.
        let horizon = (0..n)
            .filter(|&i| !has(&done, i))
            .filter_map(|i| ops[i].returned)
            .min()
            .unwrap_or(u64::MAX);
        for (i, op) in ops.iter().enumerate() {
            if has(&done, i) || op.invoked > horizon {
                continue;
            }
            match &op.kind {
                Kind::Write(v) => stack.push((with(&done, i), Some(v.clone()))),
                Kind::Read(r) if *r == value => stack.push((with(&done, i), value.clone())),
                Kind::Read(_) => {}
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(v: &str, invoked: u64, returned: Option<u64>) -> Op {
        Op {
            key: b"k".to_vec(),
            kind: Kind::Write(v.as_bytes().to_vec()),
            invoked,
            returned,
        }
    }

    fn r(v: Option<&str>, invoked: u64, returned: u64) -> Op {
        Op {
            key: b"k".to_vec(),
            kind: Kind::Read(v.map(|v| v.as_bytes().to_vec())),
            invoked,
            returned: Some(returned),
        }
    }

    #[test]
    fn linearizable_histories_pass() {
        // Sequential.
        check(&[
            w("a", 0, Some(1)),
            r(Some("a"), 2, 3),
            w("b", 4, Some(5)),
            r(Some("b"), 6, 7),
        ])
        .unwrap();
        // A read concurrent with a write may see either value.
        check(&[
            w("a", 0, Some(1)),
            w("b", 2, Some(10)),
            r(Some("a"), 3, 4),
            r(Some("b"), 5, 6),
        ])
        .unwrap();
        // A write with an unknown outcome may take effect late, or never.
        check(&[w("a", 0, None), r(None, 1, 2), r(Some("a"), 3, 4)]).unwrap();
        check(&[w("a", 0, Some(1)), w("b", 2, None), r(Some("a"), 3, 4)]).unwrap();
    }

    /// The checker must reject what it is there to catch.
    #[test]
    fn non_linearizable_histories_are_rejected() {
        // A stale read: "a" was overwritten before the read began.
        let stale = [w("a", 0, Some(1)), w("b", 2, Some(3)), r(Some("a"), 4, 5)];
        assert!(check(&stale).is_err());
        // A lost write: acknowledged, then read as missing.
        let lost = [w("a", 0, Some(1)), r(None, 2, 3)];
        assert!(check(&lost).unwrap_err().contains("not linearizable"));
        // A value nobody wrote.
        assert!(check(&[r(Some("x"), 0, 1)]).is_err());
        // Reads that go back: once "b" is seen, "a" may not be.
        let back = [
            w("a", 0, Some(1)),
            w("b", 2, Some(10)),
            r(Some("b"), 3, 4),
            r(Some("a"), 5, 6),
        ];
        assert!(check(&back).is_err());
    }
}
