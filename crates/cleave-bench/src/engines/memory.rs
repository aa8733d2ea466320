//! A test-only engine: a `BTreeMap` behind a mutex, so the harness can be
//! tested without the storage engine. Never compiled into the binary.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use cleave::MergeOperator;

use super::{Engine, EngineCounters, ScanOutcome};

#[derive(Default)]
pub struct MemoryEngine {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    counters: Mutex<EngineCounters>,
    merge: Option<Arc<dyn MergeOperator>>,
}

impl MemoryEngine {
    /// An engine whose merges apply `merge` at once.
    pub fn with_merge_operator(merge: Option<Arc<dyn MergeOperator>>) -> Self {
        MemoryEngine {
            merge,
            ..MemoryEngine::default()
        }
    }

    fn lock_map(&self) -> Result<std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>>> {
        self.map
            .lock()
            .map_err(|_| anyhow!("memory engine poisoned"))
    }

    fn count_write(&self, bytes: usize) -> Result<()> {
        let mut counters = self
            .counters
            .lock()
            .map_err(|_| anyhow!("memory engine poisoned"))?;
        counters.user_bytes_written += bytes as u64;
        counters.wal_bytes_written += bytes as u64;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.lock_map().map(|map| map.len()).unwrap_or(0)
    }
}

impl Engine for MemoryEngine {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.lock_map()?.insert(key.to_vec(), value.to_vec());
        self.count_write(key.len() + value.len())
    }

    fn log_trim(&self, log: u32, from: u64, before: u64) -> Result<()> {
        let mut map = self.lock_map()?;
        for lsn in from..before {
            map.remove(super::log_key(log, lsn).as_slice());
        }
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.lock_map()?.get(key).cloned())
    }

    fn write_batch(&self, entries: &[(&[u8], &[u8])]) -> Result<()> {
        let mut map = self.lock_map()?;
        let mut bytes = 0;
        for (key, value) in entries {
            bytes += key.len() + value.len();
            map.insert(key.to_vec(), value.to_vec());
        }
        drop(map);
        self.count_write(bytes)
    }

    fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let op = self
            .merge
            .as_ref()
            .ok_or_else(|| anyhow!("the memory engine has no merge operator"))?;
        let mut map = self.lock_map()?;
        let merged = op
            .full_merge(key, map.get(key).map(Vec::as_slice), &[operand])
            .map_err(|reason| anyhow!("merge: {reason}"))?;
        map.insert(key.to_vec(), merged);
        drop(map);
        self.count_write(key.len() + operand.len())
    }

    fn scan(&self, start: &[u8], nexts: u64) -> Result<ScanOutcome> {
        let map = self.lock_map()?;
        let mut range = map.range::<[u8], _>((Bound::Included(start), Bound::Unbounded));
        let mut outcome = ScanOutcome::default();
        let mut current = range.next();
        outcome.found_exact = current.is_some_and(|(key, _)| key.as_slice() == start);
        for _ in 0..nexts {
            let Some((key, value)) = current else { break };
            outcome.entries += 1;
            outcome.bytes += (key.len() + value.len()) as u64;
            current = range.next();
        }
        Ok(outcome)
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn compact_all(&self) -> Result<()> {
        Ok(())
    }

    fn wait_for_compactions(&self) -> Result<()> {
        Ok(())
    }

    fn stats_text(&self) -> Option<String> {
        Some(format!("memory engine: {} keys", self.len()))
    }

    fn counters(&self) -> Option<EngineCounters> {
        self.counters.lock().ok().map(|counters| *counters)
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}
